//! One segment of a log (a run, from `got prompt` to its end): the events it shows and the
//! failure it ends in (`scan_segment`: the message, traceback, death sign, error report fields).

use super::words::*;
use crate::comfy::console::{self, BarState, ConsoleLine, LoadPhrase, VaeStage};
use crate::diagnose::stage::{model_role, node_activity, ModelRole};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    TiledRetry(bool),
    /// A node's own phase line naming an encode, decode or post-processing phase.
    NodePhase(String),
    SamplingBar(u64, u64),
    LoadingBar(String),
    Load(String),
    /// `Model X prepared for dynamic VRAM loading. NMB Staged.` (line, model class).
    Staged(String, String),
    LoadDone,
    LoraError,
}

/// The model a `Requested to load X` line names.
pub(super) fn requested_model(line: &str) -> Option<String> {
    match console::classify(line) {
        Some(ConsoleLine::RequestedLoad { class }) => Some(class),
        _ => None,
    }
}

/// The model named by `Requested to load X` when it is a text or vision encoder (by the role
/// the stage rules read from its class name).
pub(super) fn encoder_name(line: &str) -> Option<String> {
    requested_model(line).filter(|name| model_role(name) == Some(ModelRole::Encoder))
}

/// What a progress bar means for the diagnosis: sampling steps, or a loader's bar.
pub(super) fn bar_event(bar: &BarState) -> Option<Event> {
    let (v, m) = (bar.value, bar.max);
    let desc = bar.desc.to_lowercase();
    if !desc.chars().any(char::is_alphabetic)
        || ["sampl", "denois", "step"].iter().any(|w| desc.contains(w))
    {
        return Some(Event::SamplingBar(v, m));
    }
    if ["load", "shard", "fetch", "download", "checkpoint"]
        .iter()
        .any(|w| desc.contains(w))
    {
        let shown = format!("{} {v}/{m}", bar.desc);
        return Some(Event::LoadingBar(shown));
    }
    None
}

/// One line's event. Memory lines (bars, loads, unloads, tiled fallbacks) are read by the
/// console parser the run record uses ([`crate::comfy::console::classify`], and
/// [`crate::comfy::console::load_phrase`] for a load line whose figures it cannot read); the
/// rest are loading lines only a pasted log tends to show.
pub(super) fn line_event(line: &str) -> Option<Event> {
    let t = line.trim();
    if NODE_PHASE_RE.is_match(t) {
        return Some(Event::NodePhase(t.chars().take(160).collect()));
    }
    let load_line = || Some(Event::Load(t.chars().take(160).collect()));
    match console::classify(t) {
        Some(ConsoleLine::Bar(bar)) => {
            if let Some(e) = bar_event(&bar) {
                return Some(e);
            }
        }
        Some(ConsoleLine::TiledFallback(stage)) => {
            return Some(Event::TiledRetry(stage == VaeStage::Decode))
        }
        Some(ConsoleLine::Loaded(f)) if f.full => return Some(Event::LoadDone),
        Some(ConsoleLine::Staged { class, .. }) => {
            return Some(Event::Staged(t.chars().take(160).collect(), class))
        }
        Some(ConsoleLine::Loaded(_))
        | Some(ConsoleLine::RequestedLoad { .. })
        | Some(ConsoleLine::Unloaded { .. }) => return load_line(),
        _ => {}
    }
    if LORA_ERROR_RE.is_match(t) {
        return Some(Event::LoraError);
    }
    // The model-management lines whose figures `classify` could not read.
    match console::load_phrase(t) {
        Some(LoadPhrase::LoadedCompletely) => return Some(Event::LoadDone),
        Some(_) => return load_line(),
        None => {}
    }
    if MODEL_LOADED_RE.is_match(t) {
        return Some(Event::LoadDone);
    }
    if LOAD_LINE_RE.is_match(t) {
        return load_line();
    }
    // A node's own line naming its work in plain words (read by the stage rules).
    if node_activity(t).is_some() {
        return Some(Event::NodePhase(t.chars().take(160).collect()));
    }
    None
}

/// The failure found in one segment of the log.
#[derive(Debug, Default, Clone)]
pub(super) struct SegmentFailure {
    pub(super) start: Option<usize>,
    pub(super) node_id: Option<String>,
    pub(super) node_type: Option<String>,
    pub(super) exception_type: Option<String>,
    pub(super) message: Option<String>,
    pub(super) traceback: Vec<String>,
    pub(super) death: Option<String>,
    /// The death sign comes after the error message, with no work and no `Prompt executed`
    /// between: the error was the process's last word, not a failure it got past.
    pub(super) death_last: bool,
    pub(super) md_node_id: Option<String>,
    pub(super) md_node_type: Option<String>,
    pub(super) md_exception_type: Option<String>,
    /// The server's startup output follows the failure: a custom-node import error, not a run.
    pub(super) startup: bool,
    pub(super) prompt_done: bool,
    /// Where `got prompt` was first seen.
    pub(super) got_prompt_at: Option<usize>,
    pub(super) events: Vec<(usize, Event)>,
    /// The first line naming a specific error (see [`is_specific_line`]).
    pub(super) specific: Option<String>,
}

impl SegmentFailure {
    pub(super) fn has_failure(&self) -> bool {
        self.message.is_some() || !self.traceback.is_empty() || self.death.is_some()
    }

    /// Whether the segment shows `got prompt`.
    pub(super) fn got_prompt(&self) -> bool {
        self.got_prompt_at.is_some()
    }

    /// Whether `got prompt` was seen before line `at`.
    fn got_prompt_before(&self, at: usize) -> bool {
        self.got_prompt_at.is_some_and(|g| g < at)
    }
}

pub(super) fn join_message(first: &str, rest: Vec<String>) -> String {
    let mut parts = vec![first.trim().to_string()];
    parts.extend(rest);
    parts.retain(|p| !p.is_empty());
    parts.join("\n")
}

pub(super) fn scan_segment(lines: &[String]) -> SegmentFailure {
    let mut f = SegmentFailure::default();
    let mut md_message: Option<String> = None;
    let mut final_line: Option<(String, Option<String>)> = None;
    let mut final_at: Option<usize> = None;
    let mut exc_proc: Option<String> = None;
    let mut err_occ: Option<String> = None;
    let mut bare: Option<String> = None;
    let mut guard_warning: Option<String> = None;
    let mut exc_proc_at: Option<usize> = None;
    // The last error printed in words during a run, and where.
    let mut worded: Option<(usize, String)> = None;
    // Every death sign and where (a Windows fault the process survived is dropped below), where
    // each message source was seen, where runs ended, and ComfyUI's `Got an OOM` line.
    let mut deaths: Vec<(usize, String)> = Vec::new();
    let mut message_at: Vec<usize> = Vec::new();
    let mut done_at: Vec<usize> = Vec::new();
    let mut got_oom: Option<String> = None;
    // Where each `Traceback (most recent call last):` header stands, and each of
    // ComfyUI-Manager's restarts.
    let mut traceback_at: Vec<usize> = Vec::new();
    let mut restarts: Vec<usize> = Vec::new();
    // The exception line, where it stands and how many frames were read, when the last
    // `Traceback (most recent call last):` header began.
    type Before = (Option<(String, Option<String>)>, Option<usize>, usize);
    let mut before_last_traceback: Option<Before> = None;
    let mark = |f: &mut SegmentFailure, i: usize| {
        if f.start.is_none() {
            f.start = Some(i);
        }
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].as_str();
        let t = line.trim();
        if t == "--- Logging error ---" {
            // Python's logging failing to write a record (`Handler.handleError`): the marker,
            // then its own traceback, the call stack and the record, up to `Arguments: …`. The
            // process goes on; none of it is the run's failure. A marker with no traceback
            // after it (the rest of the block interleaved elsewhere) is skipped alone.
            i = past_notice(lines, i, |l| l.starts_with("Arguments:"));
            continue;
        }
        if SURVIVED_EXCEPTION_RE.is_match(t) {
            // An exception Python reported and went on after, with its traceback (which may
            // stand a line below its header, under asyncio's `handle: …`), to its exception line.
            let below =
                (i + 1..lines.len().min(i + 4)).find(|&n| TRACEBACK_RE.is_match(lines[n].trim()));
            i = match below {
                Some(n) => past_notice(lines, n - 1, |l| FINAL_RE.is_match(l)),
                None => i + 1,
            };
            continue;
        }
        if COMFY_NOTICE_RE.is_match(t) {
            // An error the server or the start-up logs and goes on after, with the traceback it
            // may print under it (to its exception line): none of it is the run's failure.
            i = past_notice(lines, i, |l| FINAL_RE.is_match(l));
            continue;
        }
        if let Some(e) = line_event(t) {
            f.events.push((i, e));
        }
        if f.specific.is_none() && !is_frame(t) && is_specific_line(t) {
            f.specific = Some(t.to_string());
        }
        if (f.got_prompt() || ran_models(&f.events))
            && f.death.is_none()
            && f.start.is_none()
            && STARTUP_RE.is_match(t)
        {
            // The server started again after the prompt (or after the run's model loading, when
            // the paste holds no `got prompt`): the process had died.
            let after = if f.got_prompt() {
                "`got prompt`"
            } else {
                "the run's model loading"
            };
            f.death = Some(format!("a new startup banner after {after}: {t}"));
            deaths.push((i, f.death.clone().unwrap_or_default()));
            mark(&mut f, i);
        }
        if GOT_PROMPT_RE.is_match(t) {
            f.got_prompt_at.get_or_insert(i);
        }
        if MANAGER_RESTART_RE.is_match(t) {
            restarts.push(i);
        }
        // ComfyUI started after the failure: a start-up error it went on after, unless the
        // failure is a run's (the error report the frontend writes for a failed node,
        // execution.py's `!!! Exception during processing !!!`, or a traceback through
        // execution.py executing a node), which a restart does not undo.
        let run_failure = f.md_node_id.is_some()
            || f.md_node_type.is_some()
            || f.md_exception_type.is_some()
            || exc_proc.is_some()
            || f.traceback.iter().any(|frame| is_execution_frame(frame));
        if f.start.is_some() && !run_failure && STARTUP_RE.is_match(t) {
            f.startup = true;
        }
        // server.py logs a node whose INPUT_TYPES fails when the frontend asks /object_info
        // (`An error occurred while retrieving information for the 'X' node.`): the node list
        // is served without it and no prompt ran, like a start-up error.
        if OBJECT_INFO_ERROR_RE.is_match(t) {
            f.startup = true;
        }
        if PROMPT_DONE_RE.is_match(t) {
            f.prompt_done = true;
            done_at.push(i);
        }
        if got_oom.is_none() && GOT_OOM_RE.is_match(t) {
            got_oom = Some(t.to_string());
        }
        if (f.got_prompt() || !f.events.is_empty()) && !is_notice(t) && WORDED_ERROR_RE.is_match(t)
        {
            worded = Some((i, t.to_string()));
        }
        // A death sign hard-wrapped at the terminal's width (`…]Fatal Python` / `error:
        // Aborted`) is read across the break.
        let wrapped_death = || {
            let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            if next.is_empty() || DEATH_RE.is_match(next) || KILLED_RE.is_match(next) {
                return None;
            }
            // Only a sign that spans the break: it starts on this line and ends on the next.
            [format!("{t}{next}"), format!("{t} {next}")]
                .into_iter()
                .find(|j| {
                    DEATH_RE
                        .find(j)
                        .is_some_and(|m| m.start() < t.len() && m.end() > t.len())
                })
        };
        // pip's `exit code: N` under the build step that failed is its subprocess's.
        let pip_exit = t.to_lowercase().starts_with("exit code")
            && lines[i.saturating_sub(3)..i]
                .iter()
                .any(|l| is_pip_step_failure(l));
        // A line Python printed as an exception is that exception whatever its words
        // (`subprocess.CalledProcessError: … returned non-zero exit status 1.` is a child
        // process's exit, not the server's).
        let exception_line = FINAL_RE.is_match(t);
        let death_text = if pip_exit || exception_line || is_not_the_servers_death(t) {
            None
        } else if KILLED_RE.is_match(t) || DEATH_RE.is_match(t) {
            Some(t.to_string())
        } else {
            wrapped_death()
        };
        if let Some(d) = death_text {
            // The sign itself, not what precedes it on a wrapped line.
            let from = DEATH_RE.find(&d).map_or(0, |m| m.start());
            let from = if from > 80 { from } else { 0 };
            deaths.push((i, d[from..].chars().take(160).collect()));
            mark(&mut f, i);
            i += 1;
            continue;
        }
        if let Some((field, v)) = report_field(lines, i) {
            // generateErrorReport writes `N/A` for a field the error did not have.
            let given = |v: String| Some(v).filter(|s| !s.is_empty() && s != "N/A");
            match field {
                ReportField::NodeId => f.md_node_id = given(v),
                ReportField::NodeType => f.md_node_type = given(v),
                ReportField::ExceptionType => f.md_exception_type = given(v),
                ReportField::ExceptionMessage => {
                    let rest: Vec<String> = lines[i + 1..]
                        .iter()
                        .take_while(|l| {
                            let l = l.trim();
                            !(MD_SECTION_RE.is_match(l) || MD_FIELD_RE.is_match(l) || is_frame(l))
                        })
                        .map(|l| l.trim().to_string())
                        .collect();
                    md_message = Some(join_message(&v, rest)).filter(|m| m != "N/A");
                }
            }
            mark(&mut f, i);
        } else if MD_HEADER_RE.is_match(t) {
            mark(&mut f, i);
        } else if let Some(c) = crate::comfy::console::EXCEPTION_RE.captures(t) {
            exc_proc = Some(join_message(&c["msg"], continuation(lines, i + 1)));
            exc_proc_at = Some(i);
            message_at.push(i);
            mark(&mut f, i);
        } else if let Some(c) = ERR_OCC_RE.captures(t) {
            f.node_type = Some(c["node"].trim().to_string());
            let msg = c["msg"].trim().to_string();
            err_occ = if msg.is_empty() {
                line_below(lines, i).map(|s| join_message(&lines[s], continuation(lines, s + 1)))
            } else {
                Some(join_message(&msg, continuation(lines, i + 1)))
            };
            message_at.push(i);
            mark(&mut f, i);
        } else if TRACEBACK_RE.is_match(t) {
            before_last_traceback = Some((final_line.clone(), final_at, f.traceback.len()));
            traceback_at.push(i);
            mark(&mut f, i);
        } else if THREAD_RE.is_match(t) {
            mark(&mut f, i);
        } else if is_frame(t) {
            f.traceback.push(t.to_string());
            if let Some(next) = lines.get(i + 1) {
                let n = next.trim();
                if !n.is_empty() && !is_boundary(next) && FINAL_RE.captures(n).is_none() {
                    f.traceback.push(format!("    {n}"));
                    i += 1;
                }
            }
            mark(&mut f, i);
        } else if let Some(c) = FINAL_RE.captures(t) {
            if f.node_type.is_none() && f.start.is_none() && f.traceback.is_empty() {
                // The error dialog: the failing node's class above the exception line (with its
                // title in the user's language between them, if shown).
                f.node_type = dialog_title(&lines[..i]);
            }
            let ty = c["type"].to_string();
            let msg = c.name("msg").map(|m| m.as_str().to_string());
            let rest = continuation(lines, i + 1);
            let msg = msg.map(|m| join_message(&m, rest));
            final_line = Some((ty, msg));
            final_at = Some(i);
            message_at.push(i);
            mark(&mut f, i);
        } else if let Some(c) = GUARD_WARNING_RE
            .captures(t)
            .filter(|_| guard_warning.is_none())
        {
            guard_warning = Some(c["msg"].trim().to_string());
        } else if is_message_line(t) && bare.is_none() {
            // The frontend's one-line form: `NodeType : message`.
            let (node, msg) = match NODE_PREFIX_RE.captures(t) {
                Some(c) if !c["node"].ends_with("Error") => {
                    (Some(c["node"].trim().to_string()), c["msg"].to_string())
                }
                _ => (None, t.to_string()),
            };
            if f.node_type.is_none() {
                f.node_type = node;
            }
            bare = Some(join_message(&msg, continuation(lines, i + 1)));
            message_at.push(i);
            if f.node_type.is_none() && f.start.is_none() {
                // The UI error toast: the node class alone on the line above the message.
                f.node_type = lines[..i]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(|l| l.trim())
                    .filter(|l| is_node_title(l))
                    .map(str::to_string);
            }
            mark(&mut f, i);
        }
        i += 1;
    }
    // A traceback that starts where a custom node pack is imported (its own module's top level,
    // or nodes.py's load_custom_node) is a start-up error ComfyUI goes on after.
    // (A script a pack runs in a process of its own, `<module>` calling `main()`, is not one.)
    let runs_main = f
        .traceback
        .get(1)
        .is_some_and(|code| !is_frame(code) && code.trim().starts_with("main("));
    if f.traceback
        .first()
        .is_some_and(|frame| is_pack_import_frame(frame))
        && !runs_main
    {
        f.startup = true;
    }
    // The line after the exception line, if any.
    let after_exception = final_at
        .and_then(|at| line_below(lines, at))
        .map(|n| lines[n].as_str());
    // So is an exception followed by a node pack's import notice: ComfyUI's `Cannot import X
    // module for custom nodes: …` (nodes.py prints it after the traceback), or a pack's
    // `… import failed:` opening the next of its own import tracebacks.
    // A run's failure above that import traceback (a traceback through execution.py, with its
    // exception line, pasted above the start-up log) stays the failure.
    if after_exception.is_some_and(is_pack_import_notice) {
        match before_last_traceback.take() {
            Some((Some(line), at, frames))
                if f.traceback[..frames]
                    .iter()
                    .any(|fr| is_execution_frame(fr)) =>
            {
                final_line = Some(line);
                final_at = at;
                f.traceback.truncate(frames);
            }
            _ => f.startup = true,
        }
    }
    // So is numpy's import check as the exception itself (`RuntimeError: module compiled
    // against ABI version 0x… but this version of numpy is 0x…`): a module failed to import.
    if final_at.is_some_and(|at| is_numpy_build_mismatch(&lines[at])) {
        f.startup = true;
    }
    // An exception a node caught and printed, then its saying it falls back to another way
    // (`[CacheDiT] Falling back to direct forward hook implementation`, comfy's `sd1_clip`
    // printing an embedding's traceback, then `error loading embedding, skipping loading: X`):
    // the run went on past
    // it, so it is no failure of its own when nothing else in the segment is one (the
    // exception line is the only message source seen, no error report, no death sign).
    if after_exception.is_some_and(|l| FALLBACK_RE.is_match(l) || is_survived(l))
        && message_at.len() == 1
        && md_message.is_none()
        && f.md_node_type.is_none()
        && deaths.is_empty()
    {
        final_line = None;
        f.traceback.clear();
        traceback_at.clear();
        message_at.clear();
        f.start = None;
    }
    // Windows' faulthandler reports every access violation it sees, also those the process
    // handles and survives (its vectored handler runs before any other): one followed by more
    // of the run's console work was survived, and is no death sign.
    // So is one after which Python printed a traceback of its own (the process was alive to
    // print it).
    deaths.retain(|(at, line)| {
        !(line.to_lowercase().contains("windows fatal exception")
            && (f.events.iter().any(|(i, _)| i > at) || traceback_at.iter().any(|tb| tb > at)))
    });
    // The launcher's pause (printed after the process exited) opening the text, with ComfyUI
    // starting up after it and nothing of a run before it: the process that died is not in the
    // text, which is about the start that follows.
    let started_at = lines.iter().position(|l| is_comfy_start(l.trim()));
    deaths.retain(|(at, line)| {
        !(PAUSE_RE.is_match(line)
            && started_at.is_some_and(|s| s > *at)
            && !f.got_prompt_before(*at)
            && f.events.iter().all(|(i, _)| i > at)
            && message_at.iter().all(|m| m > at))
    });
    // A death sign after ComfyUI-Manager's restart, with no run work in between, is the restart
    // it asked for.
    deaths.retain(|(at, _)| {
        !restarts.iter().any(|r| {
            r < at
                && !f.events.iter().any(|(i, _)| (r..at).contains(&i))
                && !f.got_prompt_at.is_some_and(|g| (*r..*at).contains(&g))
        })
    });
    f.death = deaths.first().map(|(_, line)| line.clone());
    let death_at = deaths.first().map(|(at, _)| *at);
    // An error printed in words is the failure when nothing else is and the run did not go on
    // past it: no console work after it, no `Prompt executed`, no sign of death.
    let worded = worded.filter(|(at, _)| {
        !f.prompt_done
            && f.death.is_none()
            && f.events.iter().all(|(i, _)| i <= at)
            && !went_on_after(lines, *at)
    });
    if let Some((at, _)) = &worded {
        if f.start.is_none() && final_line.is_none() && exc_proc.is_none() && err_occ.is_none() {
            f.start = Some(*at);
        }
    }
    // Console lines count as "before the failure" up to the console's own failure marker (an
    // error report's Logs section comes after its header fields).
    if let Some(cutoff) = exc_proc_at.or(f.start) {
        f.events.retain(|(i, _)| *i < cutoff);
    }
    if f.md_node_id.is_some() {
        f.node_id = f.md_node_id.clone();
    }
    if f.md_node_type.is_some() {
        f.node_type = f.md_node_type.clone();
    }
    if f.node_type.is_none() {
        f.node_type = lines
            .iter()
            .find_map(|l| QUOTED_EXECUTION_ERROR_RE.captures(l))
            .map(|c| c["node"].to_string());
    }
    if f.md_exception_type.is_some() {
        f.exception_type = f.md_exception_type.clone();
    }
    if let Some((ty, msg)) = &final_line {
        if f.exception_type.is_none() {
            f.exception_type = Some(ty.clone());
        }
        if msg.is_none() && ty.ends_with("MemoryError") {
            final_line = Some((ty.clone(), Some(ty.clone())));
        }
    }
    // The message pasted above a traceback cut before its exception line (the error dialog
    // shows the message, then the traceback): a line worded as an error right above the
    // traceback's header names its error.
    let above_traceback = traceback_at.first().and_then(|&tb| {
        let t = lines[line_above(lines, tb)?].trim();
        // (not a header introducing the traceback: `Exception in thread X:`)
        (final_line.is_none()
            && !t.ends_with(':')
            && ERROR_WORDING_RE.is_match(t)
            && !is_frame(t)
            && !is_notice(t)
            && !is_boundary(t))
        .then(|| t.to_string())
    });
    let final_msg = final_line.and_then(|(_, m)| m);
    f.message = md_message
        .or(final_msg)
        .or(exc_proc)
        .or(err_occ)
        .or(bare)
        // A traceback whose exception line was not pasted: the device guard's warning names
        // the pending error.
        .or(guard_warning.filter(|_| !f.traceback.is_empty()))
        // An error printed in words right above a traceback (a node logging its error, then
        // `traceback.print_exc()`) names the error of that traceback when its own exception
        // line is not in the text.
        .or(above_traceback)
        .or(worded
            .filter(|(at, _)| {
                f.traceback.is_empty()
                    || traceback_at
                        .iter()
                        .any(|&tb| line_above(lines, tb) == Some(*at))
            })
            .map(|(at, line)| join_message(&line, continuation(lines, at + 1))))
        .filter(|m| !m.trim().is_empty());
    if let (Some(specific), Some(message)) = (&f.specific, &f.message) {
        if !is_specific_line(message) {
            f.message = Some(format!("{specific}\n{message}"));
        }
    }
    // ComfyUI logs `Got an OOM, unloading all loaded models.` only for torch's CUDA
    // out-of-memory error (execution.py); with the error's own line cut away, it names it.
    if f.message.is_none() {
        if let Some(line) = got_oom {
            f.message = Some(line);
        }
    }
    // A death sign after the error, with no run work and no `Prompt executed` in between: the
    // process died of it (an uncaught C++ exception's `terminate called`, then `Fatal Python
    // error: Aborted`), so the death is the last thing the text shows.
    // Only a fatal signal counts: an exit code or a launcher's pause after a Python traceback
    // is how the interpreter ends on an uncaught exception, whose kind is the exception's.
    let fatal = f.death.as_deref().is_some_and(|d| FATAL_RE.is_match(d));
    if let (Some(death), Some(&last), true) = (death_at, message_at.iter().max(), fatal) {
        f.death_last = f.message.is_some()
            && death > last
            && !done_at.iter().any(|d| (last..death).contains(d))
            && !f.events.iter().any(|(i, _)| (last..death).contains(i));
    }
    f
}

/// The last non-blank line before line `at`.
pub(super) fn line_above(lines: &[String], at: usize) -> Option<usize> {
    lines[..at].iter().rposition(|l| !l.trim().is_empty())
}

/// The first non-blank line after line `at`.
fn line_below(lines: &[String], at: usize) -> Option<usize> {
    lines[at + 1..]
        .iter()
        .position(|l| !l.trim().is_empty())
        .map(|n| at + 1 + n)
}

/// A traceback frame's file (with `/` separators) and function.
fn frame_place(frame: &str) -> Option<(String, String)> {
    FRAME_RE
        .captures(frame.trim())
        .map(|c| (c["path"].replace('\\', "/"), c["func"].to_string()))
}

/// A traceback frame of a custom node pack being imported: `<module>` in a file under
/// `custom_nodes`, or ComfyUI's `load_custom_node`.
fn is_pack_import_frame(frame: &str) -> bool {
    frame_place(frame).is_some_and(|(path, func)| {
        (path.contains("/custom_nodes/") && func == "<module>") || func == "load_custom_node"
    })
}

/// A traceback frame of ComfyUI's prompt executor running a node (`execution.py` in
/// `execute`, `get_output_data`, `_async_map_node_over_list`, `map_node_over_list`,
/// `process_inputs`): only a run passes through them.
fn is_execution_frame(frame: &str) -> bool {
    const RUNNING_A_NODE: [&str; 5] = [
        "execute",
        "get_output_data",
        "_async_map_node_over_list",
        "map_node_over_list",
        "process_inputs",
    ];
    frame_place(frame).is_some_and(|(path, func)| {
        (path == "execution.py" || path.ends_with("/execution.py"))
            && RUNNING_A_NODE.contains(&func.as_str())
    })
}

/// Where scanning goes on after a notice the process went on past (at `at`): past the traceback
/// printed under it, through the line `ends` accepts, or just past the notice when no
/// `Traceback (most recent call last):` header follows it.
fn past_notice(lines: &[String], at: usize, ends: impl Fn(&str) -> bool) -> usize {
    match line_below(lines, at).filter(|&n| TRACEBACK_RE.is_match(lines[n].trim())) {
        Some(n) => lines[n..]
            .iter()
            .position(|l| ends(l.trim()))
            .map_or(lines.len(), |e| n + e + 1),
        None => at + 1,
    }
}

/// Whether the events show a run's model work: a model requested, loaded or staged, or a
/// sampling bar (start-up prints none of them).
fn ran_models(events: &[(usize, Event)]) -> bool {
    events.iter().any(|(_, e)| match e {
        Event::LoadDone | Event::Staged(..) | Event::SamplingBar(..) => true,
        Event::Load(l) => requested_model(l).is_some(),
        _ => false,
    })
}

/// A node class as the UI shows it alone on a line (`CLIPTextEncode`), not an exception class.
fn is_node_title(line: &str) -> bool {
    NODE_TITLE_RE.is_match(line)
        && !line.ends_with("Error")
        && !line.ends_with("Exception")
        && !line.ends_with("Warning")
        && line != "ComfyUI"
}

/// The node class among the two non-empty lines above an exception line with nothing else
/// before them: the error dialog's title, over the node's title in the user's language.
fn dialog_title(above: &[String]) -> Option<String> {
    let shown: Vec<&str> = above
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    match shown.as_slice() {
        [title] | [title, _] if is_node_title(title) => Some(title.to_string()),
        _ => None,
    }
}
