//! Console logs and pasted text: the `!!! Exception during processing !!!` block, tracebacks,
//! progress bars, model-loading lines, the UI error dialog and the "ComfyUI Error Report"
//! Markdown, read from the lines `lines` cleaned of what a paste carries.

mod segment;
mod signals;
mod words;

use super::lines::normalise;
use crate::diagnose::frames::native_frame;
use crate::diagnose::stage::{is_background_line, validation_refusal};
use crate::diagnose::{ConsoleSignals, ParseError, ParsedInput};
use crate::diagnose::{Evidence, NodeProgress, RunOutcomeHint};
use segment::*;
use signals::*;
use words::*;

pub(super) fn parse_log(text: &str) -> Result<ParsedInput, ParseError> {
    let lines = normalise(text);
    // Split into prompt segments at `got prompt`; each holds at most one failure.
    // A run also ends at `Prompt executed in …`: what follows is the next run, even when the
    // paste left out its `got prompt`.
    let mut bounds = vec![0];
    for (i, l) in lines.iter().enumerate() {
        let after_done = i > 0 && PROMPT_DONE_RE.is_match(lines[i - 1].trim());
        if i > 0 && (GOT_PROMPT_RE.is_match(l.trim()) || after_done) && bounds.last() != Some(&i) {
            bounds.push(i);
        }
    }
    bounds.push(lines.len());
    let segments: Vec<(usize, SegmentFailure)> = bounds
        .windows(2)
        .map(|w| (w[0], scan_segment(&lines[w[0]..w[1]])))
        .collect();
    // A process that exits after a run ended (`Prompt executed`, then the portable launcher's
    // `pause`: "Press any key to continue") with nothing run in between ran no prompt there:
    // the exit is not a failure of its own when a run before it failed.
    let idle_exit = |i: usize, s: &SegmentFailure| {
        i > 0
            && segments[i - 1].1.prompt_done
            && s.death.is_some()
            && !s.got_prompt()
            && s.events.is_empty()
            && s.message.is_none()
            && s.traceback.is_empty()
    };
    let earlier_failure = |i: usize| segments[..i].iter().any(|(_, s)| s.has_failure());
    // Startup errors (custom-node imports) are not the run's failure when anything else is.
    let run_failures = segments.iter().any(|(_, s)| s.has_failure() && !s.startup);
    // An error ComfyUI started up after (its banner follows) is start-up noise, no failure at
    // all (labelling rule 2), unless it is comfy-aimdo's own error.
    let startup_noise = |s: &SegmentFailure| {
        s.startup
            && s.death.is_none()
            && (run_failures
                || !s
                    .message
                    .as_deref()
                    .is_some_and(|m| m.lines().any(is_specific_line)))
    };
    let chosen = segments
        .iter()
        .enumerate()
        .filter(|(i, (_, s))| !(idle_exit(*i, s) && earlier_failure(*i)))
        .filter(|(_, (_, s))| s.has_failure() && !startup_noise(s))
        .max_by_key(|(i, (_, s))| {
            (
                !s.traceback.is_empty() || s.death.is_some(),
                s.message.is_some() || s.death.is_some(),
                *i,
            )
        })
        .map(|(_, s)| s);
    let chosen = chosen.filter(|(at, s)| {
        // A log that starts with startup errors and later stops after `got prompt` died mid-run.
        let stopped = segments
            .last()
            .is_some_and(|(_, l)| l.got_prompt() && !l.prompt_done && !l.has_failure());
        // A prompt refused by validation, then a later prompt that was taken, printed its own
        // work and stops: the paste is about the later one (the user got past the refusal).
        let ran_later = stopped
            && segments.last().is_some_and(|(start, _)| {
                start > at
                    && lines[*start..]
                        .iter()
                        .filter(|l| !is_background_line(l) && !GOT_PROMPT_RE.is_match(l.trim()))
                        .count()
                        >= 2
            });
        let refused_then_ran = is_validation_failure(s) && ran_later;
        !((s.startup && stopped) || refused_then_ran)
    });
    let Some((_, seg)) = chosen else {
        // No failure: a log that stops mid-run means the server went away.
        if let Some((_, last)) = segments.last() {
            let mid_run = last.got_prompt() || !last.events.is_empty();
            if mid_run && !last.prompt_done {
                // No sign that the server died (those are failures of their own): the log just
                // ends, which a paste cut short looks like too, so no outcome is presumed.
                // The last line the run printed: background lines after it (a registry
                // fetch, a warning) do not end the run's own output.
                let last_line = last_own_line(&lines);
                let events = with_cut_last_line(&last.events, last_line);
                let (sampling_bar, tail) = signals_from(&events);
                let evidence = Evidence {
                    progress: bar_progress(sampling_bar),
                    exception_message: last_line
                        .map(|l| l.trim())
                        .filter(|l| is_worded_failure(l))
                        .map(str::to_string),
                    ..Evidence::default()
                };
                return Ok(ParsedInput {
                    evidence,
                    signals: ConsoleSignals {
                        sampling_bar,
                        tail,
                        death: None,
                        log_stopped: true,
                        last_model: last_model(&events),
                    },
                });
            }
            if segments.iter().any(|(_, s)| s.prompt_done) {
                return Err(ParseError::NoFailureInLog(
                    "it ends with `Prompt executed in …`".into(),
                ));
            }
        }
        if let Some(line) = lines
            .iter()
            .find(|l| AIMDO_LOAD_FAILED_RE.is_match(l.trim()))
        {
            // No run failed and none stopped: comfy-aimdo's own start-up error is the failure.
            return Ok(message_only(None, line.trim().to_string()));
        }
        if let Some(line) = lines.iter().rfind(|l| DEVICE_ASSERT_RE.is_match(l.trim())) {
            // No run failed and none stopped: a CUDA kernel's device-side assertion is a
            // failure wherever it stands (a kernel ran, so a run did), start-up lines or not.
            return Ok(message_only(None, line.trim().to_string()));
        }
        if let Some(at) = lines.iter().position(|l| PIP_ERROR_RE.is_match(l.trim())) {
            // No run failed: pip failing to install or build what a node pack needs is.
            let message = join_message(&lines[at], continuation(&lines, at + 1));
            return Ok(message_only(None, message));
        }
        if let Some(frame) = native_frame_in_aimdo(&lines) {
            // No run failed: a native crash stack deepest in comfy-aimdo's code is its failure
            // (labelling rule 3).
            return Ok(message_only(None, frame));
        }
        if let Some(input) = short_message(&lines) {
            return Ok(input);
        }
        // A text with no run in it that ends on an error printed in words: that error.
        if let Some(line) = last_own_line(&lines).filter(|l| is_worded_failure(l.trim())) {
            return Ok(message_only(None, line.trim().to_string()));
        }
        if let Some(input) = last_error_without_a_run(&lines) {
            return Ok(input);
        }
        return Err(ParseError::Unrecognised);
    };
    let (sampling_bar, tail) = signals_from(&seg.events);
    // The process died of the error it printed last: the death is the failure, and the error
    // is named in its evidence.
    let mut seg = seg.clone();
    if seg.death_last {
        let error = seg.message.take().unwrap_or_default();
        let first = error.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if let Some(death) = seg.death.as_mut() {
            *death = format!("{death}\", after the error \"{}", first.trim());
        }
        seg.exception_type = None;
    }
    // An error report's header names the node even when its Logs section is another segment.
    let md = |get: fn(&SegmentFailure) -> Option<String>| segments.iter().find_map(|(_, s)| get(s));
    let mut evidence = Evidence {
        node_id: seg.node_id.clone().or_else(|| md(|s| s.md_node_id.clone())),
        node_type: seg
            .node_type
            .clone()
            .or_else(|| md(|s| s.md_node_type.clone())),
        exception_type: seg
            .exception_type
            .clone()
            .or_else(|| md(|s| s.md_exception_type.clone())),
        exception_message: seg.message.clone(),
        traceback: seg.traceback.clone(),
        progress: bar_progress(sampling_bar),
        outcome: None,
        cached_nodes: Vec::new(),
    };
    if seg.message.is_none() && seg.death.is_some() {
        evidence.outcome = Some(RunOutcomeHint::ServerLost);
    }
    if cut_in_its_first_word(&lines, &evidence) {
        // Labelling rule 4: the paste stops inside the exception line's first word
        // (`torch.AcceleratorError: C`), before any wording that says what the error was.
        evidence.exception_type = None;
        evidence.exception_message = None;
    }
    Ok(ParsedInput {
        evidence,
        signals: ConsoleSignals {
            sampling_bar,
            tail,
            death: if seg.message.is_none() {
                seg.death.clone()
            } else {
                None
            },
            log_stopped: false,
            last_model: last_model(&seg.events),
        },
    })
}

/// The deepest frame of a debugger's native backtrace that names a function or a library, when
/// it is comfy-aimdo's (its library under `comfy_aimdo/`): a crash in comfy-aimdo's own code.
fn native_frame_in_aimdo(lines: &[String]) -> Option<String> {
    let (line, frame) = lines
        .iter()
        .find_map(|l| native_frame(l).filter(|f| f.named).map(|f| (l, f)))?;
    frame.in_aimdo.then(|| line.trim().to_string())
}

/// A text with no run and no start-up in it (a node's or a tool's output, the reasons a prompt
/// was refused): its last error line and what follows it, unless a later line shows the work
/// went on. Not when a node pack's import notice comes next, nor when the server failed to
/// describe a node pack's node (start-up noise, rule 2;
/// looked for across the joined lines, as a hard wrap may cut its words), nor when the line ends
/// on the colon that introduces its message with nothing after it (rule 4: the message is cut).
fn last_error_without_a_run(lines: &[String]) -> Option<ParsedInput> {
    if OBJECT_INFO_ERROR_RE.is_match(&lines.concat())
        || lines.iter().any(|l| is_comfy_startup(l.trim()))
    {
        return None;
    }
    let at = lines
        .iter()
        .rposition(|l| is_error_line(l.trim()))
        .filter(|&at| {
            !went_on_after(lines, at)
                && !ends_traceback(lines, at)
                // ComfyUI's `Cannot import … module for custom nodes: …` right after it: a
                // pack's import failing (start-up noise), the error its exception line
                && !lines[at + 1..]
                    .iter()
                    .find(|l| !l.trim().is_empty())
                    .is_some_and(|l| is_pack_import_notice(l))
        })?;
    let rest = continuation(lines, at + 1);
    let cut = rest.is_empty()
        && lines[at]
            .trim()
            .rsplit_once(':')
            .is_some_and(|(_, after)| after.trim().chars().count() < 3);
    (!cut).then(|| message_only(None, join_message(&lines[at], rest)))
}

/// Whether line `at` is the exception line ending a traceback (a frame, or a frame and its
/// source line, right above it): the scan of the text already read that traceback, and when it
/// found no failure there (a node pack's import at start-up) its line is none either.
fn ends_traceback(lines: &[String], at: usize) -> bool {
    let Some(above) = line_above(lines, at) else {
        return false;
    };
    let frame_at = |i: usize| is_frame(lines[i].trim());
    FINAL_RE.is_match(lines[at].trim())
        && (frame_at(above) || line_above(lines, above).is_some_and(frame_at))
}

/// Whether the text ends on the failure's exception line cut one or two letters into its
/// message, with a type that does not name an out-of-memory error by itself.
fn cut_in_its_first_word(lines: &[String], evidence: &Evidence) -> bool {
    let Some(last) = lines.iter().map(|l| l.trim()).rfind(|l| !l.is_empty()) else {
        return false;
    };
    let Some(caps) = FINAL_RE.captures(last) else {
        return false;
    };
    let message = caps.name("msg").map_or("", |m| m.as_str().trim());
    let memory_type = caps["type"].to_lowercase().contains("memory");
    (1..=2).contains(&message.len())
        && message.chars().all(|c| c.is_ascii_alphabetic())
        && !memory_type
        && evidence.exception_message.as_deref().map(str::trim) == Some(message)
}

/// Whether a segment's failure is execution.py's validation of the prompt (`Failed to validate
/// prompt for output N:` … `Output will be ignored`, `Prompt outputs failed validation`): the
/// prompt was refused before anything ran.
fn is_validation_failure(s: &SegmentFailure) -> bool {
    s.traceback.is_empty()
        && s.death.is_none()
        && s.message.as_deref().and_then(validation_refusal).is_some()
}

/// The text's last line that is not background output (a registry fetch, a warning) nor blank.
fn last_own_line(lines: &[String]) -> Option<&String> {
    lines.iter().rev().find(|l| !is_background_line(l))
}

/// The console's last sampling bar as the evidence's progress (no node: a console bar names
/// none).
fn bar_progress(sampling_bar: Option<(u64, u64)>) -> Vec<NodeProgress> {
    sampling_bar
        .map(|(value, max)| NodeProgress {
            node_id: String::new(),
            class_type: None,
            value,
            max,
        })
        .into_iter()
        .collect()
}

/// Evidence that is only an error message (with the node the frontend names above it).
fn message_only(node_type: Option<String>, message: String) -> ParsedInput {
    ParsedInput {
        evidence: Evidence {
            node_type,
            exception_message: Some(message),
            ..Evidence::default()
        },
        signals: ConsoleSignals::default(),
    }
}

/// A paste that is only the message: one or two lines with no console around them, read by
/// their wording like an exception message (issue #40's labelling rule 5). Two lines whose first
/// is a node class alone are the frontend's error dialog, whose title is the failing node's type
/// over the exception message (ComfyUI_frontend `ErrorDialogContent.vue`: `nodeType ??
/// exceptionType`). Start-up notices that ComfyUI goes on after are not a message; background
/// lines around the message do not count.
fn short_message(lines: &[String]) -> Option<ParsedInput> {
    // A hard-wrapped message (a line of 72 characters or more, then its rest) is one line.
    let mut shown: Vec<String> = Vec::new();
    let mut wrapped = false;
    // Background output around it (ComfyUI-Manager's fetch, a library's warning) is not part
    // of the paste's text.
    for l in lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !is_background_line(l))
    {
        match shown.last_mut() {
            Some(prev) if wrapped => {
                prev.push(' ');
                prev.push_str(l);
            }
            _ => shown.push(l.to_string()),
        }
        wrapped = l.chars().count() >= 72;
    }
    // The error report's title alone (its body cut away) names no error. Under the dialog's
    // title (the failing node's class alone on the line above) the message is the exception's,
    // whatever its words (`FP8 _scaled_mm failed, falling back to dequantization: …`).
    let dialog_message = matches!(shown.as_slice(), [title, _] if is_node_class(title));
    if shown.is_empty()
        || shown
            .iter()
            .any(|l| (is_notice(l) && !dialog_message) || MD_HEADER_RE.is_match(l))
    {
        return None;
    }
    if shown.len() > 2 {
        return dialog(&shown);
    }
    let message = shown.last().map_or("", String::as_str);
    let worded = ERROR_WORDING_RE.is_match(message) || MESSAGE_SHAPE_RE.is_match(message);
    if !worded || message.ends_with('?') {
        // A question or a note, not an error message.
        return None;
    }
    match shown.as_slice() {
        [title, message] if is_node_class(title) => {
            Some(message_only(Some(title.to_string()), message.to_string()))
        }
        _ => Some(message_only(None, shown.join("\n"))),
    }
}

/// The frontend's error dialog with a message of several lines: the failing node's class alone
/// on the first line, then (after the node's title in the user's language, if shown) the
/// message, whose first line is worded as an error (`Error(s) in loading state_dict for X:` and
/// its `size mismatch …` lines; `RuntimeError：…` as a translated page prints it).
fn dialog(shown: &[String]) -> Option<ParsedInput> {
    let [title, rest @ ..] = shown else {
        return None;
    };
    if !is_node_class(title) {
        return None;
    }
    let at = rest
        .iter()
        .take(2)
        .position(|l| ERROR_WORDING_RE.is_match(l) || FINAL_RE.is_match(l))?;
    Some(message_only(Some(title.to_string()), rest[at..].join("\n")))
}

/// The console signals of one run's own console lines (a run's `server.log`: one line per
/// console line, from `got prompt` to `Prompt executed`), read with the same rules as a pasted
/// log.
pub fn console_signals(text: &str) -> ConsoleSignals {
    let lines = normalise(text);
    let seg = scan_segment(&lines);
    let (sampling_bar, tail) = signals_from(&seg.events);
    ConsoleSignals {
        sampling_bar,
        tail,
        death: seg.death.clone().filter(|_| seg.message.is_none()),
        log_stopped: false,
        last_model: last_model(&seg.events),
    }
}

#[cfg(test)]
mod tests;
