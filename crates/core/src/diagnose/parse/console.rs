//! Console logs and pasted text: the `!!! Exception during processing !!!` block, tracebacks,
//! progress bars, model-loading lines, the UI error dialog and the "ComfyUI Error Report"
//! Markdown, read from the lines `lines` cleaned of what a paste carries.

use super::lines::normalise;
use crate::comfy::console::{self, BarState, ConsoleLine, LoadPhrase, VaeStage};
use crate::diagnose::stage::{is_background_line, node_activity};
use crate::diagnose::{ConsoleSignals, ConsoleTail, ModelActivity, ParseError, ParsedInput};
use crate::diagnose::{Evidence, NodeProgress, RunOutcomeHint};
use regex::Regex;
use std::sync::LazyLock;

static FRAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)^\s*file\s+"(?P<path>[^"]+)"(?:,\s*line\s+\d+,?|,)?\s*in\s+(?P<func>\S+)(?:\s+(?P<code>.*))?$"#).expect("static regex")
});
static ERR_OCC_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^error occurred when executing\s+(?P<node>.+?):\s*(?P<msg>.*)$")
        .expect("static regex")
});
/// The frontend's error report (`generateErrorReport`): its Markdown headers, or the same words
/// alone on a line when the report was pasted as rendered text.
static MD_HEADER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:#+\s*(?:comfyui error report|error details)|(?:comfyui error report|error details)\s*$)").expect("static regex")
});
/// A field of that report: `- **Node Type:** X` in Markdown, `Node Type: X` rendered.
static MD_FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:[-*]\s*)?(?:\*\*)?(?P<k>node id|node type|exception type|exception message)\s*(?:\*\*)?\s*:\s*(?:\*\*)?\s*(?P<v>.*)$").expect("static regex")
});
/// The report's next section (`## Stack Trace`, or `Stack Trace` alone when rendered).
static MD_SECTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:#|-\s*\*\*|(?:stack trace|system information|devices|logs|attached workflow|additional context)\s*$)")
        .expect("static regex")
});
static TRACEBACK_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^traceback \(most recent call last\):?").expect("static regex")
});
static THREAD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^exception in thread(?-u:\b)").expect("static regex"));
static FINAL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<type>(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt))(?::\s*(?P<msg>.*))?$",
    )
    .expect("static regex")
});
static LOAD_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:loading \d+ new models?|attempting to release mmap|loading text encoder model|loading (?:model|checkpoint|weights|diffusion model)(?-u:\b)|model_type\s+\w+|model weight dtype(?-u:\b)|lowvram: loaded module|(?:vae|clip/text encoder model) load device:)").expect("static regex")
});
static MODEL_LOADED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^model loaded").expect("static regex"));
static LORA_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^error (?:lora|loha|lokr|glora|oft|boft)(?-u:\b)").expect("static regex")
});
static NODE_TITLE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*[A-Z][A-Za-z0-9_]*$").expect("static regex")
});
static NODE_PREFIX_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<node>[A-Za-z][\w()\-. ]{0,40}?)\s+:\s+(?P<msg>\S.*)$").expect("static regex")
});
static STARTUP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:import times for custom nodes|starting server|to see the gui go to|prestartup times for custom nodes)").expect("static regex")
});
/// Death signs of a process ended by a signal or a fatal fault (not an interpreter's exit).
static FATAL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)fatal python error|segmentation fault|core dumped|(?-u:\b)aborted(?-u:\b)|terminated abnormally|earlyoom|systemd-oomd|windows fatal exception|0xc0000005|-1073741819|(?-u:\b)killed(?-u:\b)|oom-kill|sigkill|signal 9(?-u:\b)|aborthandler").expect("static regex")
});
static OBJECT_INFO_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)error occurred while retrieving information for the|in (?:get_object_info|node_info)$")
        .expect("static regex")
});
/// ComfyUI's line after a CUDA out-of-memory error (execution.py, `OOM_EXCEPTION`).
static GOT_OOM_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^got an oom, unloading all loaded models").expect("static regex")
});
static GOT_PROMPT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^got prompt(?-u:\b)").expect("static regex"));
static PROMPT_DONE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^prompt executed in(?-u:\b)").expect("static regex"));
/// c10's device guards warn with the pending CUDA/HIP error when they cannot report it
/// (`UserWarning: HIP warning: an illegal memory access was encountered (Triggered internally at
/// …HIPGuardImplMasqueradingAsCUDA.h…)`).
static GUARD_WARNING_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:^|\s)(?:cuda|hip) warning: (?P<msg>.+?)(?:\s*\(triggered internally at .*)?$",
    )
    .expect("static regex")
});
/// An execution_error WebSocket message quoted whole on one line by an API client that
/// re-raises it (`RuntimeError: ["execution_error", {"prompt_id": …, "node_type":
/// "CLIPLoaderGGUF", …`), often cut before the JSON closes: its `node_type` is the failing node.
static QUOTED_EXECUTION_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\[\s*"execution_error"\s*,\s*\{.*?"node_type"\s*:\s*"(?P<node>[A-Za-z_][\w.\-]*)""#,
    )
    .expect("static regex")
});
/// SeedVR2's pipeline phases as its log names them (`━━━ Phase 3: VAE decoding ━━━`,
/// `Error in Phase 3 (Decoding): …`): 1 VAE encoding, 2 DiT upscaling, 3 VAE decoding, 4
/// post-processing (color correction, assembly). The DiT phase names no stage by itself and is
/// not matched.
static NODE_PHASE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)phase \d+\s*(?::|\()\s*(?:vae )?(?:decoding|encoding|post-processing)(?-u:\b)")
        .expect("static regex")
});
/// An error a node or library prints in words rather than raising (issue #40's labelling rule
/// 1): `rocBLAS error: …`, SeedVR2's `❌ [ERROR] Error in Phase 1 (Encoding): …`, a line led by
/// `❌`, a node's sentence `An unexpected error occurred during X: …` or `Inference failed:`
/// (its message on the next line), and the ROCm runtime's
/// (rocclr) always-printed error record `:0:<file>:<line> : <t> us:
/// <message>` (`DevLogPrintfError`, e.g. `Memobj map does not have ptr` before its abort).
static WORDED_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:❌\s*\S|(?:\[(?:error|critical)\]\s*)?(?:[a-z][\w.\-]*\s+)?error(?:\s+in\s+[^:]{1,80})?:\s*\S|(?:an?\s+)?(?:unexpected\s+)?error\s+occurred\s+(?:during|while|in)\s+[^:]{1,80}:\s*\S|[a-z][\w .\-]{0,60}\sfailed:\s*$|:0:\S.*?:\s*\d+\s*us:\s*\S)")
        .expect("static regex")
});
/// comfy-aimdo's start-up error (`comfy_aimdo/control.py` `init()`: `comfy-aimdo failed to
/// load: <library>: <reason>` when its native library cannot be loaded).
static AIMDO_LOAD_FAILED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^comfy-aimdo failed to load(?-u:\b)").expect("static regex"));
static NODE_CLASS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z][\w.\-]{1,80}$").expect("static regex"));
/// `Killed` ending a line, or bash's report of a killed job with its command after it: from a
/// script (`entrypoint.sh: line 42:  8 Killed    python3 main.py`) or the job table (`[1]+
/// Killed    python main.py`).
static KILLED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:(?:^|[\]\s)])Killed\s*$|(?:line \d+:\s*\d+|^\[\d+\][+-]?)\s+Killed\s+\S)")
        .expect("static regex")
});
/// Signs that the process died. `Unhandled exception caught in c10/util/AbortHandler.h` is
/// PyTorch's terminate handler, which prints it and its backtrace, then calls `std::abort()`;
/// `Fatal Python error: …` is faulthandler's (or the interpreter's) last word; `… terminated
/// abnormally with signal N/…` is systemd-coredump's record of a process that died; earlyoom's
/// `sending SIGTERM to process N … cmdline "… main.py …"` and systemd-oomd's `Killed …` are
/// user-space out-of-memory killers ending it.
/// `Current thread 0x… (most recent call first):` is faulthandler's fatal-error dump: CPython
/// marks a current thread only when a thread dumps itself, which its watchdog for hangs
/// (`dump_traceback_later`) never does. `Stack (most recent call first):` and `Thread 0x…` are
/// not signs by themselves: without their header (cut by the paste) they may be that watchdog's
/// report of a hang, and with it the header already counts.
static DEATH_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(oom-kill|invoked oom-killer|out of memory: killed process|killed process \d+|segmentation fault|core dumped|exit(?:ed with)? code:? -?\d+|exit status -?\d+|process exited|(?-u:\b)sigkill(?-u:\b)|signal 9(?-u:\b)|reconnecting\.\.\.|press any key to continue|请按任意键继续|0xc0000005|-1073741819|windows fatal exception|fatal python error:|terminated abnormally with signal|earlyoom\S*:? sending sig(?:term|kill) to process|systemd-oomd\S*:? killed|^current thread 0x[0-9a-f]+ \(most recent call first\)|^faulting module(?: name)?:|^unhandled exception caught in c10/util/aborthandler\.h)").expect("static regex")
});

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
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

/// The model named by `Requested to load X` when it is a text or vision encoder.
fn encoder_name(line: &str) -> Option<String> {
    let name = line
        .strip_prefix("Requested to load ")
        .or_else(|| line.strip_prefix("requested to load "))?
        .trim();
    let l = name.to_lowercase();
    [
        "clip",
        "temodel",
        "t5",
        "textencoder",
        "text_encoder",
        "llama",
        "gemma",
    ]
    .iter()
    .any(|w| l.contains(w))
    .then(|| name.to_string())
}

/// What a progress bar means for the diagnosis: sampling steps, or a loader's bar.
fn bar_event(bar: &BarState) -> Option<Event> {
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
fn line_event(line: &str) -> Option<Event> {
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

/// Words that mark an error message line even without any surrounding structure.
const MESSAGE_WORDS: &[&str] = &[
    "out of memory",
    "allocation on device",
    "defaultcpuallocator",
    "could not allocate tensor",
    "for an array with shape",
    "unable to mmap",
    "cannot allocate memory",
    "can't allocate memory",
    "not enough gpu video memory",
    "cublas_status_",
    "cudnn_status_",
    "illegal memory access",
    "internal assert failed",
    "unable to find an engine",
    "cuda error:",
    "hip error:",
    "failed validation",
    "failed to validate prompt",
    // execution.py's validate_prompt refusing a prompt (`invalid_prompt`), also when a client
    // quotes the server's reply
    "cannot execute because",
    // the frontend's missing-nodes dialog: the workflow cannot be queued
    "uses custom nodes you haven't installed",
    "the following node types were not found",
    // a client relaying ComfyUI's execution_error (SwarmUI: `ComfyUI execution error: …`)
    "comfyui execution error:",
    // the HSA runtime's GPU page fault report (ROCm), printed before it aborts
    "memory access fault by gpu",
    // Python's Windows launcher (`pip.exe`, `offload-arch.exe`) failing to start its script
    "fatal error in launcher",
    // comfy-aimdo (the dynamic-VRAM offloader) errors, printed as console lines too
    "vram allocation failed (non oom)",
    "fault failed",
    "hostbuffer.read_file_slice failed",
    "vbar allocation failed",
    "vram reservation failed",
    "hostbuf_file_reader_read failed",
];

/// Errors more specific than the Python exception that wraps them (comfy-aimdo's C logger
/// prints `aimdo: …ERROR:VRAM Allocation failed (non OOM)` before the `RuntimeError: VRAM
/// Allocation failed` it raises): when the final message names none of them, the line wins.
const SPECIFIC_WORDS: &[&str] = &[
    "vram allocation failed (non oom)",
    "fault failed",
    "hostbuffer.read_file_slice failed",
    "vbar allocation failed",
    "vram reservation failed",
    "hostbuf_file_reader_read failed",
];

fn is_specific_line(line: &str) -> bool {
    let l = line.to_lowercase();
    (SPECIFIC_WORDS.iter().any(|w| l.contains(w)) && !l.contains("warning")) || is_aimdo_error(&l)
}

/// comfy-aimdo's C logger at ERROR level (`aimdo: src/vrambuf.c:42:ERROR:vrambuf_create: …`).
fn is_aimdo_error(lower: &str) -> bool {
    lower
        .split_once("aimdo:")
        .is_some_and(|(_, rest)| rest.contains(":error:"))
}

fn is_message_line(line: &str) -> bool {
    let l = line.to_lowercase();
    if is_aimdo_error(&l) {
        // comfy-aimdo's own ERROR line is a failure message even with no exception after it.
        return true;
    }
    MESSAGE_WORDS.iter().any(|w| l.contains(w))
        && !l.contains("warning")
        && !l.contains("retrying with tiled")
        // recovered attempts ComfyUI prints before trying a cheaper way
        && !l.contains("trying again")
        && !l.contains("switched to")
}

fn is_frame(line: &str) -> bool {
    line.contains("ile") && FRAME_RE.is_match(line)
}

fn is_boundary(line: &str) -> bool {
    let t = line.trim();
    t.is_empty()
        || is_frame(t)
        || TRACEBACK_RE.is_match(t)
        || crate::comfy::console::EXCEPTION_RE.is_match(t)
        || ERR_OCC_RE.is_match(t)
        || MD_HEADER_RE.is_match(t)
        || t.starts_with("- **")
        || t.starts_with("## ")
        || GOT_PROMPT_RE.is_match(t)
        || PROMPT_DONE_RE.is_match(t)
        || t.to_lowercase().starts_with("got an oom")
        || t.to_lowercase()
            .starts_with("this error means you ran out of memory")
        || t.to_lowercase().starts_with("tips:")
}

/// Lines after `start` that continue a message (up to a blank line or a structural line).
fn continuation(lines: &[String], start: usize) -> Vec<String> {
    lines[start..]
        .iter()
        .take_while(|l| !is_boundary(l))
        .map(|l| l.trim().to_string())
        .collect()
}

/// The failure found in one segment of the log.
#[derive(Debug, Default, Clone)]
struct SegmentFailure {
    start: Option<usize>,
    node_id: Option<String>,
    node_type: Option<String>,
    exception_type: Option<String>,
    message: Option<String>,
    traceback: Vec<String>,
    death: Option<String>,
    /// The death sign comes after the error message, with no work and no `Prompt executed`
    /// between: the error was the process's last word, not a failure it got past.
    death_last: bool,
    md_node_id: Option<String>,
    md_node_type: Option<String>,
    md_exception_type: Option<String>,
    /// The server's startup output follows the failure: a custom-node import error, not a run.
    startup: bool,
    prompt_done: bool,
    got_prompt: bool,
    events: Vec<(usize, Event)>,
    /// The first line naming a specific error (see [`SPECIFIC_WORDS`]).
    specific: Option<String>,
}

impl SegmentFailure {
    fn has_failure(&self) -> bool {
        self.message.is_some() || !self.traceback.is_empty() || self.death.is_some()
    }
}

fn join_message(first: &str, rest: Vec<String>) -> String {
    let mut parts = vec![first.trim().to_string()];
    parts.extend(rest);
    parts.retain(|p| !p.is_empty());
    parts.join("\n")
}

fn scan_segment(lines: &[String]) -> SegmentFailure {
    let mut f = SegmentFailure::default();
    let mut md_message: Option<String> = None;
    let mut final_line: Option<(String, Option<String>)> = None;
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
    let mark = |f: &mut SegmentFailure, i: usize| {
        if f.start.is_none() {
            f.start = Some(i);
        }
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].as_str();
        let t = line.trim();
        if let Some(e) = line_event(t) {
            f.events.push((i, e));
        }
        if f.specific.is_none() && !is_frame(t) && is_specific_line(t) {
            f.specific = Some(t.to_string());
        }
        if f.got_prompt && f.death.is_none() && f.start.is_none() && STARTUP_RE.is_match(t) {
            // The server started again after the prompt: the process had died.
            f.death = Some(format!("a new startup banner after `got prompt`: {t}"));
            deaths.push((i, f.death.clone().unwrap_or_default()));
            mark(&mut f, i);
        }
        if GOT_PROMPT_RE.is_match(t) {
            f.got_prompt = true;
        }
        if f.start.is_some() && STARTUP_RE.is_match(t) {
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
        if (f.got_prompt || !f.events.is_empty())
            && !t.to_lowercase().contains("warning")
            && WORDED_ERROR_RE.is_match(t)
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
        let death_text = if KILLED_RE.is_match(t) || DEATH_RE.is_match(t) {
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
        if let Some(c) = MD_FIELD_RE.captures(t) {
            // generateErrorReport writes `N/A` for a field the error did not have.
            let v = c["v"].trim().to_string();
            let given = |v: String| Some(v).filter(|s| !s.is_empty() && s != "N/A");
            match c["k"].to_lowercase().as_str() {
                "node id" => f.md_node_id = given(v),
                "node type" => f.md_node_type = given(v),
                "exception type" => f.md_exception_type = given(v),
                _ => {
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
                let start = lines[i + 1..]
                    .iter()
                    .position(|l| !l.trim().is_empty())
                    .map(|p| i + 1 + p);
                start.map(|s| join_message(&lines[s], continuation(lines, s + 1)))
            } else {
                Some(join_message(&msg, continuation(lines, i + 1)))
            };
            message_at.push(i);
            mark(&mut f, i);
        } else if TRACEBACK_RE.is_match(t) || THREAD_RE.is_match(t) {
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
            let ty = c["type"].to_string();
            let msg = c.name("msg").map(|m| m.as_str().to_string());
            let rest = continuation(lines, i + 1);
            let msg = msg.map(|m| join_message(&m, rest));
            final_line = Some((ty, msg));
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
                    .filter(|l| {
                        NODE_TITLE_RE.is_match(l)
                            && !l.ends_with("Error")
                            && !l.ends_with("Exception")
                            && !l.ends_with("Warning")
                            && *l != "ComfyUI"
                    })
                    .map(str::to_string);
            }
            mark(&mut f, i);
        }
        i += 1;
    }
    // Windows' faulthandler reports every access violation it sees, also those the process
    // handles and survives (its vectored handler runs before any other): one followed by more
    // of the run's console work was survived, and is no death sign.
    deaths.retain(|(at, line)| {
        !(line.to_lowercase().contains("windows fatal exception")
            && f.events.iter().any(|(i, _)| i > at))
    });
    f.death = deaths.first().map(|(_, line)| line.clone());
    let death_at = deaths.first().map(|(at, _)| *at);
    // An error printed in words is the failure when nothing else is and the run did not go on
    // past it: no console work after it, no `Prompt executed`, no sign of death.
    let worded = worded.filter(|(at, _)| {
        !f.prompt_done && f.death.is_none() && f.events.iter().all(|(i, _)| i <= at)
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
    let final_msg = final_line.and_then(|(_, m)| m);
    f.message = md_message
        .or(final_msg)
        .or(exc_proc)
        .or(err_occ)
        .or(bare)
        // A traceback whose exception line was not pasted: the device guard's warning names
        // the pending error.
        .or(guard_warning.filter(|_| !f.traceback.is_empty()))
        .or(worded
            .filter(|_| f.traceback.is_empty())
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

/// The model a `Requested to load X` line names.
fn requested_model(line: &str) -> Option<String> {
    match console::classify(line) {
        Some(ConsoleLine::RequestedLoad { class }) => Some(class),
        _ => None,
    }
}

/// The last model line when no sampling or loading bar follows it, with its model: a `loaded
/// …` line takes the model of the `Requested to load` line before it.
fn last_model(events: &[(usize, Event)]) -> Option<ModelActivity> {
    let at = events.iter().rposition(|(_, e)| {
        matches!(
            e,
            Event::Load(_)
                | Event::Staged(..)
                | Event::LoadDone
                | Event::SamplingBar(..)
                | Event::LoadingBar(_)
        )
    })?;
    // A `loaded …` or `N models unloaded.` line after a sampling bar belongs to a load begun
    // after that bar, never to a model requested before it.
    let requested_before = |end: usize| {
        events[..end]
            .iter()
            .rev()
            .take_while(|(_, e)| !matches!(e, Event::SamplingBar(..)))
            .find_map(|(_, e)| match e {
                Event::Load(l) => requested_model(l).map(|m| (l.clone(), m)),
                _ => None,
            })
    };
    match &events[at].1 {
        Event::Staged(line, model) => Some(ModelActivity {
            line: line.clone(),
            model: model.clone(),
            ready: true,
        }),
        Event::Load(line) => {
            if let Some(model) = requested_model(line) {
                return Some(ModelActivity {
                    line: line.clone(),
                    model,
                    ready: false,
                });
            }
            // `loaded …`, `N models unloaded.` and `Attempting to release mmap` belong to the
            // model requested before them; other loading lines (`model_type …`, `model weight
            // dtype …`, `VAE load device: …`) start reading a model not yet named.
            let of_requested = console::load_phrase(line).is_some()
                || matches!(
                    console::classify(line),
                    Some(ConsoleLine::Loaded(_) | ConsoleLine::Unloaded { .. })
                )
                || line
                    .to_lowercase()
                    .starts_with("attempting to release mmap");
            if !of_requested {
                return None;
            }
            let partial = console::load_phrase(line) == Some(LoadPhrase::LoadedPartially);
            let (_, model) = requested_before(at)?;
            Some(ModelActivity {
                line: line.clone(),
                model,
                ready: partial,
            })
        }
        Event::LoadDone => {
            let (line, model) = requested_before(at)?;
            Some(ModelActivity {
                line: format!("{line} … loaded completely"),
                model,
                ready: true,
            })
        }
        _ => None,
    }
}

/// The events of a log that just ends, reading its last line when the paste cut it short
/// inside a model-management line: the line ComfyUI prints right after `Requested to load X`
/// with dynamic VRAM (`Model X prepared for dynamic VRAM loading. NMB Staged.`: a cut `Model
/// Mini` after `Requested to load MiniMaxVAE` counts as staged), or load_models_gpu's `N models
/// unloaded.` (a cut `0 models` is that line).
fn with_cut_last_line(events: &[(usize, Event)], last: Option<&String>) -> Vec<(usize, Event)> {
    let mut out = events.to_vec();
    let Some(line) = last.map(|l| l.trim()) else {
        return out;
    };
    if line_event(line).is_none() {
        if let Some(n) = line.split(' ').next().filter(|n| n.parse::<u32>().is_ok()) {
            let full = format!("{n} models unloaded.");
            if line.len() > n.len() + 6 && full.starts_with(line) {
                let at = events.last().map_or(0, |(i, _)| i + 1);
                out.push((at, Event::Load(line.to_string())));
                return out;
            }
        }
    }
    let Some(cut) = line.strip_prefix("Model ").filter(|c| c.len() >= 3) else {
        return out;
    };
    let requested = events.last().and_then(|(i, e)| match e {
        Event::Load(l) => requested_model(l).map(|m| (*i, m)),
        _ => None,
    });
    if let Some((i, model)) = requested {
        let full = format!("{model} prepared for dynamic VRAM loading.");
        if full.starts_with(cut) && cut.len() < full.len() {
            out.push((i + 1, Event::Staged(line.to_string(), model)));
        }
    }
    out
}

fn signals_from(events: &[(usize, Event)]) -> (Option<(u64, u64)>, Option<ConsoleTail>) {
    // A node's own line is the last activity only when no model was staged after it.
    let staged_after = |at: usize| {
        events
            .iter()
            .any(|(i, e)| *i > at && matches!(e, Event::Staged(..)))
    };
    // Staged lines (dynamic VRAM) are read by `last_model` only.
    let events: Vec<(usize, Event)> = events
        .iter()
        .filter(|(_, e)| !matches!(e, Event::Staged(..)))
        .cloned()
        .collect();
    let events = events.as_slice();
    let sampling_bar = events.iter().rev().find_map(|(_, e)| match e {
        Event::SamplingBar(v, m) => Some((*v, *m)),
        _ => None,
    });
    let lora_errors = events
        .iter()
        .filter(|(_, e)| *e == Event::LoraError)
        .count();
    let tail = match events.iter().rev().find(|(_, e)| *e != Event::LoraError) {
        Some((_, Event::Load(line))) | Some((_, Event::LoadingBar(line))) => {
            Some(ConsoleTail::ModelLoading(line.clone()))
        }
        Some((_, Event::TiledRetry(true))) => Some(ConsoleTail::TiledDecodeRetry),
        Some((_, Event::LoadDone)) => events.iter().rev().find_map(|(_, e)| match e {
            Event::Load(line) => encoder_name(line).map(ConsoleTail::EncoderLoaded),
            _ => None,
        }),
        Some((_, Event::TiledRetry(false))) => Some(ConsoleTail::TiledEncodeRetry),
        Some((i, Event::NodePhase(line))) if !staged_after(*i) => {
            Some(ConsoleTail::NodePhase(line.clone()))
        }
        _ if lora_errors > 0 => Some(ConsoleTail::LoraPatchErrors(lora_errors)),
        _ => None,
    };
    // A sampling bar only counts when nothing but loading finished after it.
    let bar_after_load = match events.iter().rev().find(|(_, e)| {
        matches!(
            e,
            Event::SamplingBar(..) | Event::Load(_) | Event::LoadingBar(_)
        )
    }) {
        Some((_, Event::SamplingBar(..))) => sampling_bar,
        _ => sampling_bar.filter(|(v, m)| v >= m),
    };
    (bar_after_load, tail)
}

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
            && !s.got_prompt
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
    let chosen = chosen.filter(|(_, s)| {
        // A log that starts with startup errors and later stops after `got prompt` died mid-run.
        let stopped = segments
            .last()
            .is_some_and(|(_, l)| l.got_prompt && !l.prompt_done && !l.has_failure());
        !(s.startup && stopped)
    });
    let Some((_, seg)) = chosen else {
        // No failure: a log that stops mid-run means the server went away.
        if let Some((_, last)) = segments.last() {
            let mid_run = last.got_prompt || !last.events.is_empty();
            if mid_run && !last.prompt_done {
                // No sign that the server died (those are failures of their own): the log just
                // ends, which a paste cut short looks like too, so no outcome is presumed.
                // The last line the run printed: background lines after it (a registry
                // fetch, a warning) do not end the run's own output.
                let last_line = lines.iter().rev().find(|l| !is_background_line(l));
                let events = with_cut_last_line(&last.events, last_line);
                let (sampling_bar, tail) = signals_from(&events);
                let mut evidence = Evidence::default();
                if let Some((v, m)) = sampling_bar {
                    evidence.progress.push(NodeProgress {
                        node_id: String::new(),
                        class_type: None,
                        value: v,
                        max: m,
                    });
                }
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
        if let Some(input) = short_message(&lines) {
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
        progress: Vec::new(),
        outcome: None,
        cached_nodes: Vec::new(),
    };
    if seg.message.is_none() && seg.death.is_some() {
        evidence.outcome = Some(RunOutcomeHint::ServerLost);
    }
    if let Some((v, m)) = sampling_bar {
        evidence.progress.push(NodeProgress {
            node_id: String::new(),
            class_type: None,
            value: v,
            max: m,
        });
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
    // The error report's title alone (its body cut away) names no error.
    if shown.is_empty()
        || shown.len() > 2
        || shown
            .iter()
            .any(|l| is_notice(l) || MD_HEADER_RE.is_match(l))
    {
        return None;
    }
    let message = shown.last().map_or("", String::as_str);
    if !ERROR_WORDING_RE.is_match(message) || message.ends_with('?') {
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

/// Words an error message is written with (`Invalid argument`, `doesn't support`, `does not
/// have`, `failed`, `cannot`, `out of memory`…), which a reporter's prose rarely has all on a line
/// ending without a question mark.
static ERROR_WORDING_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)(?:error|errno|exception|fail(?:s|ed|ure)?|cannot|can't|could not|couldn't|unable|invalid|unsupported|not supported|doesn't support|does not|not found|no such|missing|expected|exceed(?:s|ed)?|out of|(?:is|are) required|illegal|denied|refused|mismatch|abort(?:ed)?|assert(?:ion)?|allocation|allocate)(?-u:\b)").expect("static regex")
});

/// Start-up and informational lines that are no failure: a custom node's `IMPORT FAILED`,
/// warnings, deprecations, ComfyUI's `No working comfy-aimdo install detected … Falling back`.
fn is_notice(line: &str) -> bool {
    let l = line.to_lowercase();
    [
        "import failed",
        // a node pack's own import error and ComfyUI's `Cannot import X module for custom
        // nodes: …` (nodes.py): start-up noise, ComfyUI goes on without the pack
        "error loading module",
        "module for custom nodes",
        "warning",
        "deprecat",
        "falling back",
        "fall back",
    ]
    .iter()
    .any(|w| l.contains(w))
        || GOT_PROMPT_RE.is_match(line)
        || PROMPT_DONE_RE.is_match(line)
        || STARTUP_RE.is_match(line)
}

/// A node class name alone on a line (`SaveVideo`, `KSampler`, `VHS_VideoCombine`): one token,
/// with a capital, that is not an exception class.
fn is_node_class(line: &str) -> bool {
    NODE_CLASS_RE.is_match(line)
        && line.chars().any(|c| c.is_ascii_uppercase())
        && !["Error", "Exception", "Warning"]
            .iter()
            .any(|w| line.ends_with(w))
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
mod tests {
    use super::super::parse_input;
    use crate::diagnose::RunOutcomeHint;
    use crate::diagnose::{ConsoleTail, Diagnosis, ParseError};
    use crate::vocab::FailureKind;

    /// `log` diagnosed as a pasted text, asserted to be of `kind`.
    fn kind_of(log: &str, kind: FailureKind) -> Diagnosis {
        let d = crate::diagnose::diagnose_text(log).unwrap();
        assert_eq!(d.kind, kind, "{}", d.kind_evidence);
        d
    }
    /// `kind_of`, and the kind's evidence names each of `words`.
    fn kind_saying(log: &str, kind: FailureKind, words: &[&str]) {
        let d = kind_of(log, kind);
        for w in words {
            assert!(d.kind_evidence.contains(w), "{w}: {}", d.kind_evidence);
        }
    }
    #[test]
    fn console_block_with_progress_and_final_line() {
        let log = "got prompt\nRequested to load BaseModel\nloaded completely 9000 2000 True\n 40%|████      | 8/20 [00:05<00:07,  1.6it/s]\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 512.00 MiB is free.\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\n  File \"/c/comfy/k_diffusion/sampling.py\", line 2, in sample_euler\n    y()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 512.00 MiB is free.\n\nGot an OOM, unloading all loaded models.\nPrompt executed in 9.00 seconds\n";
        let p = parse_input(log).unwrap();
        assert_eq!(p.signals.sampling_bar, Some((8, 20)));
        assert_eq!(p.signals.tail, None);
        assert_eq!(
            p.evidence.exception_type.as_deref(),
            Some("torch.OutOfMemoryError")
        );
        assert_eq!(p.evidence.traceback.len(), 4);
        assert!(p
            .evidence
            .exception_message
            .unwrap()
            .starts_with("CUDA out of memory"));
    }

    /// PyTorch's terminate handler (c10/util/AbortHandler.h) prints this, then aborts.
    #[test]
    fn pytorch_abort_handler_is_a_death() {
        let log = "Checkpoint files will always be loaded safely.\nUnhandled exception caught in c10/util/AbortHandler.h\n00007FFA79B2A9BC00007FFA79B19EB0 torch_python.dll!initModule [<unknown file> @ <unknown line number>]\n";
        kind_of(log, FailureKind::ProcessKilled);
    }

    /// bash's report of a killed child, with the command after `Killed`.
    #[test]
    fn a_shell_job_line_is_a_death() {
        kind_of("app | /home/x/entrypoint.sh: line 42:     8 Killed                  python3 ./ComfyUI/main.py --listen\n", FailureKind::ProcessKilled);
        kind_of(
            "[1]+  Killed                  python main.py\n",
            FailureKind::ProcessKilled,
        );
    }

    /// comfy_aimdo.control.init() logs its load error; ComfyUI then falls back. With no run
    /// failure in the text, that is the failure; the fall-back notice alone is none.
    #[test]
    fn aimdo_start_up_load_error_is_aimdo_and_the_fallback_notice_is_nothing() {
        let log = "Total VRAM 8192 MB\ncomfy-aimdo failed to load: libcuda.so.1: cannot open shared object file: No such file or directory\nNOTE: comfy-aimdo is currently only support for Nvidia GPUs\nNo working comfy-aimdo install detected. DynamicVRAM support disabled. Falling back to legacy ModelPatcher.\nStarting server\n";
        kind_of(log, FailureKind::Aimdo);
        assert!(parse_input("No working comfy-aimdo install detected. DynamicVRAM support disabled. Falling back to legacy ModelPatcher.\n").is_err());
        assert!(parse_input("IMPORT FAILED: nodes_glsl.py\n").is_err());
    }

    /// A paste of only the message is read by its wording; the frontend's dialog puts the node
    /// type over it.
    #[test]
    fn a_message_alone_is_read_by_its_wording() {
        kind_of("> Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64.\n", FailureKind::Other);
        let d = kind_of(
            "SaveVideo\n[Errno 22] Invalid argument: 'avcodec_send_frame()'\n",
            FailureKind::Other,
        );
        assert_eq!(d.node_type.as_deref(), Some("SaveVideo"));
        kind_of("VAEDecode\nAllocation on device\n", FailureKind::CudaOom);
        // hard-wrapped: still one message
        kind_of("SaveVideo\n[Errno 22] Invalid argument: 'avcodec_send_frame()'; last error log: [aac] Input c\nontains (near) NaN/+-Inf\n", FailureKind::Other);
        // prose is no message
        assert!(parse_input("my workflow is slow, any idea?\nthanks\n").is_err());
    }

    /// The error report pasted as rendered text: no bullets, no bold.
    #[test]
    fn a_rendered_error_report_is_read_like_the_markdown() {
        let log = "ComfyUI Error Report\nError Details\nNode ID: 125\nNode Type: SamplerCustomAdvanced\nException Type: RuntimeError\nException Message: RuntimeError: a helper is missing\nStack Trace\n  File \"/c/execution.py\", line 545, in execute\n    x()\n";
        let p = parse_input(log).unwrap();
        assert_eq!(
            p.evidence.node_type.as_deref(),
            Some("SamplerCustomAdvanced")
        );
        assert_eq!(
            p.evidence.exception_message.as_deref(),
            Some("RuntimeError: a helper is missing")
        );
        kind_of(log, FailureKind::Other);
        // generateErrorReport writes N/A for a field the error lacks
        let na = "# ComfyUI Error Report\n## Error Details\n- **Node ID:** N/A\n- **Node Type:** N/A\n- **Exception Type:** torch.OutOfMemoryError\n- **Exception Message:** Allocation on device\n## Stack Trace\n";
        let p = parse_input(na).unwrap();
        assert_eq!(p.evidence.node_type, None);
        assert_eq!(p.evidence.node_id, None);
        kind_of(na, FailureKind::CudaOom);
    }

    /// An error printed in words with no exception after it is the failure; one the run got
    /// past (more work after it, `Prompt executed`) or one a death follows is not.
    #[test]
    fn an_error_printed_in_words_is_the_failure_unless_the_run_went_on() {
        let log = "got prompt\nRequested to load SDXL\nrocBLAS error: Could not initialize Tensile host\n";
        let d = kind_of(log, FailureKind::Other);
        assert!(d.message.unwrap().starts_with("rocBLAS error"));
        kind_of("got prompt\n 10%|#   | 1/10 [00:01<00:09]\n❌ [ERROR] Error in Phase 1 (Encoding): CUDA out of memory\n", FailureKind::CudaOom);
        let past = "got prompt\nrocBLAS error: retrying\n 50%|#####     | 10/20 [00:10<00:10]\n";
        assert_eq!(
            crate::diagnose::diagnose_text(past).unwrap().kind,
            FailureKind::Unknown
        );
        assert!(
            parse_input("got prompt\nrocBLAS error: x\nPrompt executed in 3.00 seconds\n").is_err()
        );
        kind_of(
            "got prompt\nrocBLAS error: x\nFatal Python error: Aborted\n",
            FailureKind::ProcessKilled,
        );
    }

    /// A custom node's import error that ComfyUI starts up after is no failure (rule 2); an
    /// aimdo error at start-up is.
    #[test]
    fn an_error_comfyui_starts_up_after_is_no_failure() {
        let log = "Traceback (most recent call last):\n  File \"/c/nodes.py\", line 1, in load_custom_node\n    import x\nModuleNotFoundError: No module named 'x'\nCannot import /c/custom_nodes/x module for custom nodes: No module named 'x'\nImport times for custom nodes:\nStarting server\nTo see the GUI go to: http://127.0.0.1:8188\n";
        assert!(parse_input(log).is_err());
        let aimdo = "aimdo: src/model-vbar.c:236:ERROR: Could not reserve Virtual Address space\nImport times for custom nodes:\nStarting server\n";
        kind_of(aimdo, FailureKind::Aimdo);
    }

    #[test]
    fn aimdo_error_line_alone_is_its_own_kind() {
        // Format of ComfyUI issue #12943 (comfy-aimdo's C logger, no Python exception).
        let log = "got prompt\nModel WAN21 prepared for dynamic VRAM loading. 13650MB Staged. 0 patches attached.\n 10%|#         | 2/20 [00:20<03:00, 10.00s/it]\naimdo: src/model-vbar.c:307:ERROR:VRAM Allocation failed (non OOM)\n";
        let d = crate::diagnose::diagnose_text(log).unwrap();
        assert_eq!(d.kind, crate::vocab::FailureKind::Aimdo, "{d:?}");
    }

    #[test]
    fn fatal_python_error_aborted_is_a_death() {
        let log = "got prompt\nRequested to load WAN21\n 50%|#####     | 10/20 [01:40<01:40, 10.00s/it]\nFatal Python error: Aborted\n";
        let p = parse_input(log).unwrap();
        assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::ServerLost));
        assert_eq!(
            p.signals.death.as_deref(),
            Some("Fatal Python error: Aborted")
        );
        let d = crate::diagnose::diagnose_input(&p);
        assert_eq!(d.kind, crate::vocab::FailureKind::ProcessKilled);
        assert_eq!(d.stage, crate::vocab::Stage::SampleMiddle, "{d:?}");
    }

    #[test]
    fn killed_after_shard_loading() {
        let log = "Loading text encoder model (vlm) from: /x\nLoading checkpoint shards:  75%|█████▎  | 3/4 [01:34<00:31, 31.54s/it]Killed";
        let p = parse_input(log).unwrap();
        assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::ServerLost));
        assert!(p.signals.death.is_some());
        assert!(matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(_))));
    }

    #[test]
    fn frontend_one_line_form_names_the_node() {
        let p = parse_input("KSampler : XPU out of memory. Tried to allocate 128.00 GiB. GPU 0 has a total capacity of 15.56 GiB.").unwrap();
        assert_eq!(p.evidence.node_type.as_deref(), Some("KSampler"));
        assert!(p
            .evidence
            .exception_message
            .unwrap()
            .starts_with("XPU out of memory"));
    }

    #[test]
    fn recovered_attempts_are_not_the_failure() {
        let log = "got prompt\nout of memory error, increasing steps and trying again 4\n 50%|█████     | 10/20 [00:10<00:10]\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB.\n";
        let p = parse_input(log).unwrap();
        assert_eq!(p.signals.sampling_bar, Some((10, 20)));
        assert!(p
            .evidence
            .exception_message
            .unwrap()
            .starts_with("CUDA out of memory"));
    }

    #[test]
    fn startup_import_errors_are_not_the_run() {
        let log = "Traceback (most recent call last):\n  File \"/c/nodes.py\", line 1, in load_custom_node\n    import x\nModuleNotFoundError: No module named 'x'\nCannot import /c/custom_nodes/x module for custom nodes: No module named 'x'\nImport times for custom nodes:\nStarting server\nTo see the GUI go to: http://127.0.0.1:8188\ngot prompt\nRequested to load Flux\n";
        let p = parse_input(log).unwrap();
        assert_eq!(p.evidence.outcome, None);
        assert!(p.signals.log_stopped);
        assert!(p.evidence.exception_message.is_none());
        assert!(matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(_))));
    }

    /// Issue #40: a 2026 log whose last line stages a text encoder just ends; it is not a
    /// dead server, and the stage comes from the encoder's role.
    #[test]
    fn a_log_ending_on_a_staged_text_encoder_is_not_a_dead_server() {
        use crate::vocab::{FailureKind, Stage};
        let log = "got prompt\nModel ZImageTEModel_ prepared for dynamic VRAM loading. 7671MB Staged. 0 patches attached.\n";
        let d = crate::diagnose::diagnose_text(log).unwrap();
        assert_eq!(d.kind, FailureKind::Unknown, "{}", d.kind_evidence);
        assert!(!d.kind_evidence.contains("presumed gone"));
        assert_eq!(d.stage, Stage::Condition, "{}", d.stage_evidence);
        assert_eq!(d.stage_candidates, [Stage::Condition, Stage::Load]);
        assert!(
            d.stage_evidence.contains("7671MB Staged"),
            "{}",
            d.stage_evidence
        );
    }

    /// A fault handler's stack with its `Windows fatal exception` / `Fatal Python error` line cut
    /// away: `Current thread 0x…` is only printed by a thread dumping itself (a fatal error),
    /// `Thread 0x…` and `Stack …` also by the hang watchdog (labelling rule 3: no death sign).
    /// Either way the stack (most recent call first) places the stage.
    #[test]
    fn a_fault_handler_stack_header_is_a_death_only_when_it_names_the_current_thread() {
        use crate::vocab::{FailureKind, Stage};
        for (header, kind) in [
            (
                "Current thread 0x00001a2b (most recent call first):",
                FailureKind::ProcessKilled,
            ),
            (
                "Thread 0x00007f3e (most recent call first):",
                FailureKind::Unknown,
            ),
            ("Stack (most recent call first):", FailureKind::Unknown),
        ] {
            let log = format!("got prompt\n{header}\n  File \"/c/comfy/utils.py\", line 136 in load_torch_file\n  File \"/c/comfy/sd.py\", line 9 in load_clip\n  File \"/c/execution.py\", line 3 in execute\n");
            let d = crate::diagnose::diagnose_text(&log).unwrap();
            assert_eq!(d.kind, kind, "{header}: {}", d.kind_evidence);
            assert_eq!(d.stage, Stage::Load, "{header}: {}", d.stage_evidence);
        }
    }

    /// A client quoting the server's validation refusal is read as the failure (kind `other`,
    /// no stage: nothing ran).
    #[test]
    fn a_quoted_validation_refusal_is_the_failure() {
        use crate::vocab::{FailureKind, Stage};
        let text = "Server error: {'type': 'invalid_prompt', 'message': 'Cannot execute because node FancySampler does not exist.', 'details': \"Node ID '#4'\", 'extra_info': {}}";
        let d = crate::diagnose::diagnose_text(text).unwrap();
        assert_eq!(d.kind, FailureKind::Other, "{}", d.kind_evidence);
        assert_eq!(d.stage, Stage::Unknown, "{}", d.stage_evidence);
    }

    /// A paste cut inside the staging line that follows `Requested to load X` reads as that
    /// line: the model was staged, so its role comes first.
    #[test]
    fn a_cut_staging_line_counts_as_staged() {
        use crate::vocab::Stage;
        let cut = "got prompt\nRequested to load HunyuanVideoVAE\nModel Hunyu";
        let d = crate::diagnose::diagnose_text(cut).unwrap();
        assert_eq!(d.stage, Stage::Condition, "{}", d.stage_evidence);
        assert_eq!(
            d.stage_candidates,
            [Stage::Condition, Stage::Load, Stage::Decode]
        );
        // A last line that is not the start of that line (another model, or too short to
        // tell) leaves the bare request: still loading.
        for last in ["Model Flux", "Model H"] {
            let text = format!("got prompt\nRequested to load HunyuanVideoVAE\n{last}");
            let d = crate::diagnose::diagnose_text(&text).unwrap();
            assert_eq!(d.stage, Stage::Load, "{last}: {}", d.stage_evidence);
        }
    }

    /// A paste cut inside `0 models unloaded.` after a finished bar: a held model was being
    /// brought back; a `loaded …` line after the bar is never a model requested before it.
    #[test]
    fn a_cut_unload_line_after_a_finished_bar_leaves_two_stages_open() {
        use crate::vocab::Stage;
        let text = "got prompt\nRequested to load Cosmos\nModel Cosmos prepared for dynamic VRAM loading. 9000MB Staged. 0 patches attached.\n100%|██████████| 6/6 [00:30<00:00,  5.00s/it]\n0 models";
        let d = crate::diagnose::diagnose_text(text).unwrap();
        assert_eq!(d.stage, Stage::Unknown, "{}", d.stage_evidence);
        assert_eq!(
            d.stage_candidates,
            [Stage::Unknown, Stage::SampleFirst, Stage::Decode]
        );
        let p = parse_input(&text.replace("0 models", "0 models unloaded.")).unwrap();
        assert_eq!(p.signals.last_model, None);
    }

    /// A traceback cut before its exception line, after a device guard's warning: the warning
    /// names the error; without frames the warning alone is no failure.
    #[test]
    fn a_guard_warning_names_the_error_of_a_cut_traceback() {
        use crate::vocab::FailureKind;
        let warning = "/c/comfy/k_diffusion/sampling.py:70: UserWarning: CUDA warning: an illegal memory access was encountered (Triggered internally at /pytorch/c10/cuda/impl/CUDAGuardImpl.h:119.)";
        let text = format!("got prompt\n{warning}\nException in thread Thread-3 (prompt_worker):\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 496, in execute\n");
        let d = crate::diagnose::diagnose_text(&text).unwrap();
        assert_eq!(d.kind, FailureKind::Other, "{}", d.kind_evidence);
        assert_eq!(
            d.message.as_deref(),
            Some("an illegal memory access was encountered")
        );
        let p = parse_input(&format!("got prompt\n{warning}\n")).unwrap();
        assert!(p.evidence.exception_message.is_none());
    }

    /// Issue #40: only aimdo warnings between sampler steps, then nothing.
    #[test]
    fn aimdo_warnings_between_steps_then_nothing_is_mid_sampling_not_killed() {
        use crate::vocab::{FailureKind, Stage};
        let log = "got prompt\nModel Flux2 prepared for dynamic VRAM loading. 17316MB Staged. 0 patches attached.\n  0%|          | 0/20 [00:00<?, ?it/s,   Model Initializing ...  ]aimdo: src/model-vbar.c:74:WARNING:VBAR 0000024A04168030: Page 519 pin_count=4\n  5%|#         | 1/20 [00:11<03:31, 11.13s/it,  Model Initialization complete!  ]aimdo: src/model-vbar.c:74:WARNING:VBAR 0000024A04168030: Page 519 pin_count=4\n";
        let d = crate::diagnose::diagnose_text(log).unwrap();
        assert_ne!(d.kind, FailureKind::ProcessKilled, "{}", d.kind_evidence);
        assert_eq!(d.stage, Stage::SampleMiddle, "{}", d.stage_evidence);
        let first = log.split("  5%").next().unwrap();
        let d = crate::diagnose::diagnose_text(first).unwrap();
        assert_eq!(d.stage, Stage::SampleFirst, "{}", d.stage_evidence);
    }

    /// Issue #40: the signs that the process died still make it `process_killed`.
    #[test]
    fn death_signs_other_than_killed() {
        use crate::vocab::FailureKind;
        for end in [
            "Process exited with code 1",
            "exit code: -9",
            "请按任意键继续. . .",
            "Starting server\n\nTo see the GUI go to: http://127.0.0.1:8188",
        ] {
            let log = format!("got prompt\nRequested to load WAN21\n{end}\n");
            let d = crate::diagnose::diagnose_text(&log).unwrap();
            assert_eq!(
                d.kind,
                FailureKind::ProcessKilled,
                "{end}: {}",
                d.kind_evidence
            );
        }
    }

    /// Windows' Application Error record (event 1000) is a crash; the faulting module names
    /// whose code it was in (comfy-aimdo#48: `aimdo.dll`, a stack overflow).
    #[test]
    fn a_windows_crash_record_is_a_death_and_names_its_module() {
        use crate::vocab::FailureKind;
        let record = |module: &str| {
            format!("Faulting application: python.exe (3.13.11150.1013)\nFaulting module:      {module} (0.0.0.0, timestamp 0x69ea3089)\nException code:       0xc00000fd\n")
        };
        let d = crate::diagnose::diagnose_text(&record("aimdo.dll")).unwrap();
        assert_eq!(d.kind, FailureKind::Aimdo, "{}", d.kind_evidence);
        let d = crate::diagnose::diagnose_text(&record("ucrtbase.dll")).unwrap();
        assert_eq!(d.kind, FailureKind::ProcessKilled, "{}", d.kind_evidence);
    }

    /// comfy-aimdo#74: its hook-setup ERROR, broken after the location, with no exception.
    #[test]
    fn an_aimdo_error_broken_over_two_lines_is_aimdo() {
        let log = "aimdo: /project/src-posix/cuda-funchooks.c:37:\nERROR:aimdo_setup_hooks:\nfunchook_prepare(cuMemAlloc_v2) failed: 8\n\n[WARNING] No working comfy-aimdo install detected.\nDynamicVRAM support disabled.\n";
        kind_of(log, FailureKind::Aimdo);
    }

    /// The patcher prints `Attempting to release mmap` once its partial load is done, then
    /// moves the listed modules to the device and back: a non-memory error after it is in the
    /// model's use (a text encoder: encoding), loading second.
    #[test]
    fn an_error_after_the_mmap_release_is_in_the_models_use() {
        let log = "got prompt\nRequested to load LTXAVTEModel_\nloaded partially; 8525.88 MB usable, 0.00 MB loaded, 12431.60 MB offloaded, 8563.80 MB buffer reserved, lowvram patches: 0\nAttempting to release mmap (290)\n!!! Exception during processing !!! mat1 and mat2 shapes cannot be multiplied (56x188160 and 3840x188160)\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 524, in execute\n    x()\nRuntimeError: mat1 and mat2 shapes cannot be multiplied (56x188160 and 3840x188160)\n";
        let d = crate::diagnose::diagnose_text(log).unwrap();
        assert_eq!(
            d.stage,
            crate::vocab::Stage::Condition,
            "{}",
            d.stage_evidence
        );
        assert_eq!(
            d.stage_candidates,
            [crate::vocab::Stage::Condition, crate::vocab::Stage::Load]
        );
    }

    /// Issue #40: any aimdo ERROR line wins over the message it precedes.
    #[test]
    fn an_aimdo_error_line_wins_over_a_plain_message() {
        let log = "got prompt\nModel AutoencoderKL prepared for dynamic VRAM loading. 159MB Staged. 0 patches attached.\naimdo: src/vrambuf.c:42:ERROR:vrambuf_create: 0 16777216k\n!!! Exception during processing !!! VRAM reservation failed\n";
        let d = kind_of(log, FailureKind::Aimdo);
        assert_eq!(
            d.stage,
            crate::vocab::Stage::Condition,
            "{}",
            d.stage_evidence
        );
        // Warnings are not errors.
        assert!(!super::is_aimdo_error(
            "aimdo: src/model-vbar.c:74:warning:vbar 0: page 519"
        ));
    }

    /// Issue #40: aimdo's own error line wins over the generic RuntimeError wrapping it.
    #[test]
    fn the_specific_aimdo_line_wins_over_its_wrapper() {
        let log = "got prompt\naimdo: src/model-vbar.c:307:ERROR:VRAM Allocation failed (non OOM)\n!!! Exception during processing !!! VRAM Allocation failed\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\nRuntimeError: VRAM Allocation failed\n";
        kind_of(log, FailureKind::Aimdo);
    }

    /// comfy-aimdo's ERROR line alone (comfy-aimdo#61, a file read for weight streaming) is
    /// the failure, with no Python exception after it.
    #[test]
    fn an_aimdo_error_line_alone_is_the_failure() {
        let log = "[ERROR] aimdo: src-win/xfer-file-plat.c:43:ERROR:xfer_file_read_at: GetOverlappedResult failed error=1450 handle=0000000000001774 offset=11673711531 size=2097152\n";
        let d = kind_of(log, FailureKind::Aimdo);
        assert!(d.message.unwrap().contains("xfer_file_read_at"));
    }

    /// The launcher's pause after a run ended is the process exiting, not the run's failure:
    /// the run's own exception is the answer.
    #[test]
    fn an_exit_after_a_finished_run_does_not_hide_its_error() {
        let log = "got prompt\n!!! Exception during processing !!! CUDA error: an illegal memory access was encountered\ntorch.AcceleratorError: CUDA error: an illegal memory access was encountered\n\nPrompt executed in 48.03 seconds\n\nC:\\ComfyUI_windows_portable>pause\nPress any key to continue . . .\n";
        let parsed = parse_input(log).unwrap();
        assert_eq!(
            parsed.evidence.exception_type.as_deref(),
            Some("torch.AcceleratorError")
        );
        assert!(parsed.signals.death.is_none(), "{:?}", parsed.signals.death);
        // With no error before it, the pause after a run is still read as the process ending.
        let quiet =
            "got prompt\nPrompt executed in 3.00 seconds\nPress any key to continue . . .\n";
        assert!(parse_input(quiet).unwrap().signals.death.is_some());
    }

    /// What follows `Prompt executed in …` is the next run, even without its `got prompt`
    /// (a benchmark log of city96/ComfyUI-GGUF#427 that stops inside the next run).
    #[test]
    fn a_run_after_prompt_executed_is_its_own_segment() {
        let log = "Model LTXAV prepared for dynamic VRAM loading. 16918MB Staged. 0 patches attached.\n100%|##########| 3/3 [00:35<00:00, 11.72s/it]\nModel VideoVAE prepared for dynamic VRAM loading. 1384MB Staged. 0 patches attached.\nPrompt executed in 164.28 seconds\nModel LTXAV prepared for dynamic VRAM loading. 16918MB Staged. 0 patches attached.\n100%|##########| 5/5 [00:24<00:00,  4.81s/it]\n0 models";
        let p = parse_input(log).unwrap();
        assert!(p.signals.log_stopped);
        assert_eq!(p.signals.sampling_bar, Some((5, 5)));
        let d = crate::diagnose::diagnose_input(&p);
        assert_eq!(
            d.kind,
            crate::vocab::FailureKind::Unknown,
            "{}",
            d.kind_evidence
        );
        // …and a log that ends with `Prompt executed` is still no failure.
        let done = log
            .split("\nModel LTXAV")
            .take(2)
            .collect::<Vec<_>>()
            .join("\nModel LTXAV");
        let done = done.split("Prompt executed").next().unwrap().to_string()
            + "Prompt executed in 164.28 seconds\n";
        assert!(matches!(
            parse_input(&done),
            Err(ParseError::NoFailureInLog(_))
        ));
    }

    /// `model weight dtype …` starts reading a new model (ComfyUI's diffusion-model loader); a
    /// log stopping there is loading, and the model requested earlier is not the one named.
    #[test]
    fn a_log_stopping_at_model_weight_dtype_is_loading() {
        let log = "gguf qtypes: F16 (694), Q4_K (356), Q5_K (44), F32 (1)\nmodel weight dtype torch.float16, manual cast: None\nmodel_type FLOW\nRequested to load WAN21\nModel WAN21 prepared for dynamic VRAM loading. 8339MB Staged. 400 patches attached.\n100%|##########| 2/2 [00:10<00:00,  5.09s/it]\ngguf qtypes: F16 (694), Q4_K (356), Q5_K (44), F32 (1)\nmodel weight dtype t";
        let p = parse_input(log).unwrap();
        assert!(
            matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(ref l)) if l.starts_with("model weight dtype"))
        );
        assert!(p.signals.last_model.is_none(), "{:?}", p.signals.last_model);
        let d = crate::diagnose::diagnose_input(&p);
        assert_eq!(d.stage, crate::vocab::Stage::Load, "{}", d.stage_evidence);
    }

    /// A crash with no Python error after the video VAE was staged, both sampling passes done
    /// (ComfyUI#12998): the decode, read from the last model line before the crash.
    #[test]
    fn a_crash_after_a_staged_vae_is_the_decode() {
        let log = "100%|##########| 8/8 [00:44<00:00,  5.62s/it]\nRequested to load VideoVAE\nModel VideoVAE prepared for dynamic VRAM loading. 1384MB Staged. 0 patches attached.\nRequested to load LTXAV\nModel LTXAV prepared for dynamic VRAM loading. 23838MB Staged. 1660 patches attached.\n100%|##########| 3/3 [01:38<00:00, 32.90s/it]\nRequested to load AudioVAE\nloaded completely; 28630.57 MB usable, 693.46 MB loaded, full load: True\nRequested to load VideoVAE\n0 models unloaded.\nModel VideoVAE prepared for dynamic VRAM loading. 1384MB Staged. 0 patches attached.\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"I:\\Ai\\ComfyUI\\comfy\\ldm\\lightricks\\vae\\causal_video_autoencoder.py\", line 564 in forward_orig\n  File \"I:\\Ai\\ComfyUI\\comfy\\ldm\\lightricks\\vae\\causal_video_autoencoder.py\", line 572 in forward\n";
        let d = kind_of(log, FailureKind::ProcessKilled);
        assert_eq!(d.stage, crate::vocab::Stage::Decode, "{}", d.stage_evidence);
        assert!(
            d.stage_evidence.contains("before the crash"),
            "{}",
            d.stage_evidence
        );
    }

    /// SeedVR2's phase lines and its plain-words lines (`Decoding batch 1/1`): the last one
    /// before the error is the console's tail.
    #[test]
    fn a_node_phase_line_is_the_tail() {
        let log = "got prompt\n[19:45:40.615]  ━━━━━━━━ Phase 3: VAE decoding ━━━━━━━━\n[19:45:40.763] 🎨 Decoding batch 1/1\n!!! Exception during processing !!! MPS backend out of memory (MPS allocated: 18.69 GB, other allocations: 113.43 GB, max allowed: 132.19 GB). Tried to allocate 128.00 MB on private pool.\n";
        let p = parse_input(log).unwrap();
        assert!(
            matches!(&p.signals.tail, Some(ConsoleTail::NodePhase(l)) if l.contains("Decoding batch 1/1")),
            "{:?}",
            p.signals.tail
        );
        let dit = "got prompt\n[19:44:30.528]  ━━━━━━━━ Phase 2: DiT upscaling ━━━━━━━━\n!!! Exception during processing !!! MPS backend out of memory (MPS allocated: 1 GB, other allocations: 1 GB, max allowed: 2 GB). Tried to allocate 128.00 MB on private pool.\n";
        assert_eq!(parse_input(dit).unwrap().signals.tail, None);
    }

    #[test]
    fn a_quoted_execution_error_names_its_node() {
        let log = "RuntimeError: [\"execution_error\", {\"prompt_id\": \"e1\", \"node_id\": \"9050\", \"node_type\": \"CLIPLoaderGGUF\", \"executed\": [\"9056\"], \"exception_message\": \"Unexpected text model architecture type in GGUF file: 'gemma4'\\n\", \"exception_type\": \"ValueError\", \"traceback\": [\"  File \\\"execution.py\\\", line 545";
        let p = parse_input(log).expect("parses");
        assert_eq!(p.evidence.node_type.as_deref(), Some("CLIPLoaderGGUF"));
    }

    #[test]
    fn finished_log_is_not_a_failure() {
        let err =
            parse_input("got prompt\n100%|██| 20/20 [00:01<00:00]\nPrompt executed in 3.1 seconds")
                .unwrap_err();
        assert!(matches!(err, ParseError::NoFailureInLog(_)));
    }

    // Round six (issue #40): rules read from what the programs print.

    #[test]
    fn a_windows_fault_the_process_survived_is_no_death() {
        // faulthandler's vectored handler reports the access violation, the process handles it
        // and goes on loading: no death sign, and the frames without an exception name no kind.
        let log = "got prompt\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"C:\\ComfyUI\\comfy\\ops.py\", line 549 in _load_from_state_dict\n  File \"C:\\ComfyUI\\execution.py\", line 344 in get_output_data\n[INFO] Using split attention in VAE\n[INFO] Requested to load SD1ClipModel\n[INFO] loaded completely;  235.84 MB loaded, full load: True\n";
        let d = kind_of(log, FailureKind::Unknown);
        assert!(!d.kind_evidence.contains("died"), "{}", d.kind_evidence);
        // The same fault as the last thing the process printed is a death.
        let last = "got prompt\n[INFO] Requested to load SD1ClipModel\n[INFO] loaded completely;  235.84 MB loaded, full load: True\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"C:\\ComfyUI\\comfy\\ops.py\", line 549 in forward\n";
        kind_of(last, FailureKind::ProcessKilled);
    }

    #[test]
    fn a_fault_handler_stack_without_its_header_is_no_death_sign() {
        let stack = "  File \"C:\\ComfyUI\\comfy\\ldm\\flux\\layers.py\", line 235 in forward\n  File \"C:\\ComfyUI\\execution.py\", line 306 in process_inputs\n";
        // `Stack (most recent call first):` is also the hang watchdog's header.
        kind_of(
            &format!("Stack (most recent call first):\n{stack}"),
            FailureKind::Unknown,
        );
        // `Current thread 0x…` is printed only by a thread dumping itself: a fatal error.
        kind_of(
            &format!("Current thread 0x00006d3c (most recent call first):\n{stack}"),
            FailureKind::ProcessKilled,
        );
    }

    #[test]
    fn a_fatal_abort_after_the_error_is_the_failure() {
        // libstdc++'s terminate handler prints the uncaught C++ exception, then aborts.
        let log = "got prompt\n 12%|█         | 1/8 [01:03<07:26, 63.75s/it]\nterminate called after throwing an instance of 'c10::AcceleratorError'\n  what():  CUDA error: an illegal memory access was encountered\n\nFatal Python error: Aborted\n\nStack (most recent call first):\n  File \"/c/comfy/ldm/model.py\", line 1 in forward\n";
        kind_saying(
            log,
            FailureKind::ProcessKilled,
            &["Fatal Python error: Aborted", "illegal memory access"],
        );
        // A Python exception that ends the interpreter (exit code 1) keeps its own kind.
        let exit = "Traceback (most recent call last):\n  File \"/c/run.py\", line 53, in wait\n    raise RuntimeError(\"ComfyUI did not become ready\")\nRuntimeError: ComfyUI did not become ready at http://127.0.0.1:8188 within 180s\nProcess finished with exit code 1.\n";
        kind_of(exit, FailureKind::Other);
    }

    #[test]
    fn a_death_sign_hard_wrapped_across_lines_is_read() {
        let log = "got prompt\n  0%|          | 0/2 [00:00<?, ?it/s,   Model Initializing ...  ]Fatal Python\n error: Aborted\n";
        kind_of(log, FailureKind::ProcessKilled);
    }

    #[test]
    fn systemd_coredump_records_a_death() {
        let log = "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000. Reason: Page not present or supervisor privilege.\nJan 09 18:55:45 host systemd-coredump[134090]: Process 91762 (python) of user 60105 terminated abnormally with signal 6/ABRT, processing...\n";
        kind_of(log, FailureKind::ProcessKilled);
        // Without it, the HSA runtime's page fault report is the failure, not a memory one.
        kind_of(
            "Memory access fault by GPU node-1 (Agent handle: 0x563f6f3b7420) on address 0x7f88b5c01000. Reason: Page not present or supervisor privilege.\nGPU core dump created: gpucore.7155\n",
            FailureKind::Other,
        );
    }

    #[test]
    fn comfyuis_got_an_oom_line_names_a_cuda_oom_whose_line_was_cut() {
        let log = "got prompt\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\n\nGot an OOM, unloading all loaded models.\nPrompt executed in 9.00 seconds\n";
        kind_saying(log, FailureKind::CudaOom, &["Got an OOM"]);
    }

    #[test]
    fn errors_nodes_clients_and_launchers_print_in_words() {
        for log in [
            "got prompt\nLoading Turbo TTS model on cuda...\nAn unexpected error occurred during Turbo TTS: S3Token2Wav.__init__() got an unexpected keyword argument 'meanflow'\n",
            "[INFO] got prompt\n[DEBUG] process_images : 0.030s\n[ERROR] Inference failed:\nFailed to load model from file: D:\\models\\llm.gguf\n",
            "Missing Node Packs (1)\nThis workflow uses custom nodes you haven't installed yet.\n\nUnknown pack (1)\n\nMiniMaxH3ImageToVideo\n",
            "\"Error - ComfyUI execution error: Falscher Parameter.\"\n20:53:52.958 [Info] Us\n",
            "K:\\ComfyUI>python.exe main.py\nFatal error in launcher: Unable to create process using '\"python.exe\" \"offload-arch.exe\"'\n\n[WARNING] offload-arch failed with return code 1\n",
        ] {
            kind_of(log, FailureKind::Other);
        }
    }

    #[test]
    fn an_error_reports_title_alone_is_no_failure() {
        let cut = "节点在执行过程中发生错误。\n\n# ComfyUI Error Report\n";
        assert!(crate::diagnose::diagnose_text(cut).is_err());
    }

    #[test]
    fn a_user_space_oom_killer_ending_comfyui_is_a_death() {
        let log = "Aug 04 10:39:10 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%\nAug 04 10:39:10 debian earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3.13\": oom_score 1282, VmRSS 29931 MiB, cmdline \"/home/user/env/bin/python3.13 main.py --listen 0.0.0.0\"\nAug 04 10:39:12 debian earlyoom[845]: process 322603 exited after 2.805 seconds\n";
        kind_saying(log, FailureKind::ProcessKilled, &["out-of-memory killer"]);
    }

    #[test]
    fn a_custom_node_import_error_alone_is_start_up_noise() {
        for log in [
            "`Error loading module AILab_QwenVL: cannot import name 'AutoModelForVision2Seq' from 'transformers'`",
            "Cannot import /home/user/ComfyUI/custom_nodes/pack module for custom nodes: No module named 'x'",
        ] {
            assert!(crate::diagnose::diagnose_text(log).is_err(), "{log}");
        }
    }

    #[test]
    fn the_error_dialog_with_a_required_input_message_is_read() {
        let d = kind_of(
            "LTXVAudioVAELoader\nMetadata is required for audio VAE\n",
            FailureKind::Other,
        );
        assert_eq!(d.node_type.as_deref(), Some("LTXVAudioVAELoader"));
    }
}
