//! The console's vocabulary: the patterns and words a pasted line is matched against (frames,
//! exception lines, death signs, errors printed in words, a message's wording and shape,
//! start-up notices, model-management lines) and the line predicates built on them.

use crate::diagnose::kind::{is_aimdo_error_line, names_aimdo_error, names_native_oom};
use regex::Regex;
use std::sync::LazyLock;

pub(super) static FRAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)^\s*file\s+"(?P<path>[^"]+)"(?:,\s*line\s+\d+,?|,)?\s*in\s+(?P<func>\S+)(?:\s+(?P<code>.*))?$"#).expect("static regex")
});
pub(super) static ERR_OCC_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^error occurred when executing\s+(?P<node>.+?):\s*(?P<msg>.*)$")
        .expect("static regex")
});
/// The frontend's error report (`generateErrorReport`): its Markdown headers, or the same words
/// alone on a line when the report was pasted as rendered text.
pub(super) static MD_HEADER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:#+\s*(?:comfyui error report|error details|comfyui\s*错误报告|错误详情)|(?:comfyui error report|error details)\s*$)").expect("static regex")
});
/// A field of that report: `- **Node Type:** X` in Markdown, `Node Type: X` rendered.
pub(super) static MD_FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:[-*]\s*)?(?:\*\*)?(?P<k>node id|node type|exception type|exception message)\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*(?P<v>.*)$").expect("static regex")
});
/// A Markdown field in any words (`- **Tipo de nó:** X`, `- **节点类型：** X`; the list marker may
/// be lost to a logger's `INFO - ` before it).
static MD_ANY_FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[-*]\s*)?\*\*(?P<k>[^*:：]{1,40})(?:[:：]\s*\*\*|\*\*\s*[:：])\s*(?P<v>.*)$")
        .expect("static regex")
});
/// The report's title (`# ComfyUI Error Report`, or as a browser translated it: `# Relatório
/// de erro do ComfyUI`, `# ComfyUI 错误报告`): the product's name stays.
static MD_TITLE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^#\s.*comfyui").expect("static regex"));

/// The four fields of the error report's details, in the order `generateErrorReport` writes
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReportField {
    NodeId,
    NodeType,
    ExceptionType,
    ExceptionMessage,
}

/// The error report's field on line `i` and its value: by its name, or — when a browser
/// translated the report — by its place, the report writing its four details in one order
/// right under its title's first section header.
pub(super) fn report_field(lines: &[String], i: usize) -> Option<(ReportField, String)> {
    use ReportField::*;
    let t = lines[i].trim();
    if let Some(c) = MD_FIELD_RE.captures(t) {
        let field = match c["k"].to_lowercase().as_str() {
            "node id" => NodeId,
            "node type" => NodeType,
            "exception type" => ExceptionType,
            _ => ExceptionMessage,
        };
        return Some((field, c["v"].trim().to_string()));
    }
    let value = MD_ANY_FIELD_RE.captures(t)?["v"].trim().to_string();
    let above = lines[..i]
        .iter()
        .rev()
        .take_while(|l| MD_ANY_FIELD_RE.is_match(l.trim()))
        .count();
    let section = i.checked_sub(above + 1)?;
    let title = lines[..section]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())?;
    if !(lines[section].trim().starts_with("## ") && MD_TITLE_RE.is_match(title.trim())) {
        return None;
    }
    let field = [NodeId, NodeType, ExceptionType, ExceptionMessage].get(above)?;
    Some((*field, value))
}
/// The report's next section (`## Stack Trace`, or `Stack Trace` alone when rendered).
pub(super) static MD_SECTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:#|-\s*\*\*|(?:stack trace|system information|devices|logs|attached workflow|additional context)\s*$)")
        .expect("static regex")
});
pub(super) static TRACEBACK_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^traceback \(most recent call last\):?").expect("static regex")
});
pub(super) static THREAD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^exception in thread(?-u:\b)").expect("static regex"));
/// A traceback's exception line: a type named `…Error`, `…Exception`, `…Exit` or `…Interrupt`,
/// or one of the exceptions named otherwise that a run raises (torch.compile's
/// `torch._dynamo.exc.Unsupported` and `BackendCompilerFailed`, `StopIteration`, a model file
/// that is no zip archive's `zipfile.BadZipFile`, `subprocess.TimeoutExpired`, OpenCV's
/// `cv2.error`, ONNX Runtime's `onnxruntime.capi.onnxruntime_pybind11_state.Fail` and its
/// siblings).
pub(super) static FINAL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<type>(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt|_dynamo\.exc\.Unsupported|BackendCompilerFailed|StopIteration|BadZipFile|TimeoutExpired|cv2\.error|onnxruntime_pybind11_state\.[A-Z][A-Za-z]+))(?:[:：]\s*(?P<msg>.*))?$",
    )
    .expect("static regex")
});
pub(super) static LOAD_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:loading \d+ new models?|attempting to release mmap|loading text encoder model|loading (?:model|checkpoint|weights|diffusion model)(?-u:\b)|model_type\s+\w+|model weight dtype(?-u:\b)|lowvram: loaded module|(?:vae|clip/text encoder model) load device:)").expect("static regex")
});
pub(super) static MODEL_LOADED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^model loaded").expect("static regex"));
pub(super) static LORA_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^error (?:lora|loha|lokr|glora|oft|boft)(?-u:\b)").expect("static regex")
});
pub(super) static NODE_TITLE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*[A-Z][A-Za-z0-9_]*$").expect("static regex")
});
pub(super) static NODE_PREFIX_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<node>[A-Za-z][\w()\-. ]{0,40}?)\s+:\s+(?P<msg>\S.*)$").expect("static regex")
});
/// ComfyUI's start-up banner: the custom nodes' import times, the server starting.
pub(super) static STARTUP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:import times for custom nodes|starting server|to see the gui go to|prestartup times for custom nodes)").expect("static regex")
});
/// ComfyUI's earlier start-up lines (main.py's and its launcher's header, model_management's
/// device report, a custom node pack's import time under its header).
static EARLY_STARTUP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\*\* comfyui startup time|\*\* platform:|\*\* python version|total vram \d|pytorch version:|set vram state to|\[start\] security scan|checkpoint files will always be loaded safely|\d+\.\d+ seconds(?: \(import failed\))?: \S*custom_nodes)").expect("static regex")
});

/// Any line ComfyUI prints while it starts, before a prompt can run.
pub(super) fn is_comfy_startup(line: &str) -> bool {
    STARTUP_RE.is_match(line) || EARLY_STARTUP_RE.is_match(line)
}
/// A command line starting ComfyUI as a shell or a batch file echoes it (`K:\ComfyUI>.\python_embeded\python.exe
/// -s ComfyUI\main.py --windows-standalone-build`, `$ python main.py --listen`): a new start.
static LAUNCH_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:>|[$#])\s*\S*python[\d.]*(?:\.exe)?\s(?:.*\s)?\S*main\.py(?:\s|$)")
        .expect("static regex")
});
/// A line that starts ComfyUI: its start-up output, or the command that launches it.
pub(super) fn is_comfy_start(line: &str) -> bool {
    is_comfy_startup(line) || LAUNCH_RE.is_match(line)
}
/// A line a reporter quoted in their prose (`“If you see this and ComfyUI did not start …”`),
/// wholly inside typographic quotation marks, which no console prints around a line.
pub(super) fn is_quoted_prose(line: &str) -> bool {
    let t = line.trim();
    t.chars().count() > 2 && t.starts_with('“') && t.ends_with('”')
}
/// systemd's record of a unit's main process ending (`xdg-desktop-portal-gtk.service: Main
/// process exited, code=exited, status=1/FAILURE`, `… Failed with result 'exit-code'`), with the
/// unit's name: a death sign only for a unit that runs ComfyUI (its name says comfy or python).
static SYSTEMD_UNIT_EXIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?P<unit>[\w@.\-]+)\.(?:service|scope): (?:main process exited|failed with result)",
    )
    .expect("static regex")
});
/// A death sign's words that are not the server's death: a child process's exit that Python's
/// `subprocess` reports (`Command '[…]' returned non-zero exit status 1.`), a line quoted in
/// prose, another systemd unit's main process ending.
pub(super) fn is_not_the_servers_death(line: &str) -> bool {
    line.to_lowercase()
        .contains("returned non-zero exit status")
        || is_quoted_prose(line)
        || SYSTEMD_UNIT_EXIT_RE.captures(line).is_some_and(|c| {
            let unit = c["unit"].to_lowercase();
            !(unit.contains("comfy") || unit.contains("python"))
        })
}
/// Python reporting an exception it could not raise and went on after, with the traceback it
/// prints under the header: `sys.unraisablehook` (`Exception ignored in: <function
/// ModelPatcher.__del__ at 0x…>`, an object's finaliser failing) and asyncio's default handler
/// (`Exception in callback _ProactorBasePipeTransport._call_connection_lost(None)`, a client's
/// connection reset on Windows, then `handle: <Handle …>`; `Task exception was never
/// retrieved`, `Future exception was never retrieved` when a finished task's exception is
/// collected unread). (aiohttp's `Error handling request` is not one: the request it answered
/// with an error may be the prompt itself.)
pub(super) static SURVIVED_EXCEPTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Exception ignored in:? |Exception in callback |Task exception was never retrieved|Future exception was never retrieved)").expect("static regex")
});
/// Death signs of a process ended by a signal or a fatal fault (not an interpreter's exit).
pub(super) static FATAL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)fatal python error|segmentation fault|core dumped|(?-u:\b)aborted(?-u:\b)|terminated abnormally|earlyoom|systemd-oomd|windows fatal exception|0xc0000005|-1073741819|(?-u:\b)killed(?-u:\b)|oom-kill|sigkill|signal 9(?-u:\b)|aborthandler|^exception code: 0x").expect("static regex")
});
/// server.py failing to describe a node (`An error occurred while retrieving information for the
/// 'X' node.`) and its handler's frames (`in get_object_info`, a frame line ending `in
/// node_info`): the frontend asked for the node list, so ComfyUI had started.
pub(super) static OBJECT_INFO_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)error occurred while retrieving information for the|in get_object_info|in node_info$",
    )
    .expect("static regex")
});
/// ComfyUI's line after a CUDA out-of-memory error (execution.py, `OOM_EXCEPTION`).
pub(super) static GOT_OOM_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^got an oom, unloading all loaded models").expect("static regex")
});
pub(super) static GOT_PROMPT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^got prompt(?-u:\b)").expect("static regex"));
pub(super) static PROMPT_DONE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^prompt executed in(?-u:\b)").expect("static regex"));
/// c10's device guards warn with the pending CUDA/HIP error when they cannot report it
/// (`UserWarning: HIP warning: an illegal memory access was encountered (Triggered internally at
/// …HIPGuardImplMasqueradingAsCUDA.h…)`).
pub(super) static GUARD_WARNING_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:^|\s)(?:cuda|hip) warning: (?P<msg>.+?)(?:\s*\(triggered internally at .*)?$",
    )
    .expect("static regex")
});
/// An execution_error WebSocket message quoted whole on one line by an API client that
/// re-raises it (`RuntimeError: ["execution_error", {"prompt_id": …, "node_type":
/// "CLIPLoaderGGUF", …`), often cut before the JSON closes: its `node_type` is the failing node.
pub(super) static QUOTED_EXECUTION_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\[\s*"execution_error"\s*,\s*\{.*?"node_type"\s*:\s*"(?P<node>[A-Za-z_][\w.\-]*)""#,
    )
    .expect("static regex")
});
/// SeedVR2's pipeline phases as its log names them (`━━━ Phase 3: VAE decoding ━━━`,
/// `Error in Phase 3 (Decoding): …`): 1 VAE encoding, 2 DiT upscaling, 3 VAE decoding, 4
/// post-processing (color correction, assembly). The DiT phase names no stage by itself and is
/// not matched.
pub(super) static NODE_PHASE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)phase \d+\s*(?::|\()\s*(?:vae )?(?:decoding|encoding|post-processing)(?-u:\b)")
        .expect("static regex")
});
/// A CUDA kernel's device-side assertion (`…/ScatterGatherKernel.cu:204: block: […], thread:
/// […] Assertion `…` failed.`): the kernel stopped, and the CUDA context with it.
const DEVICE_ASSERT: &str = r"\S\.cu:\d+:.*\sassertion\s.*\sfailed\.?$";
pub(super) static DEVICE_ASSERT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("(?i){DEVICE_ASSERT}")).expect("static regex"));

/// An error a node or library prints in words rather than raising (issue #40's labelling rule
/// 1): `rocBLAS error: …`, SeedVR2's `❌ [ERROR] Error in Phase 1 (Encoding): …`, a line led by
/// `❌`, a node's sentence `An unexpected error occurred during X: …` or `Inference failed:`
/// (its message on the next line), the ROCm runtime's (rocclr) always-printed error record
/// `:0:<file>:<line> : <t> us: <message>` (`DevLogPrintfError`, e.g. `Memobj map does not have
/// ptr` before its abort), a sentence `Failed to <do something>: <why>` (`[Distributed] Worker -
/// Failed to send chunk to master: …`) and a device-side assertion ([`DEVICE_ASSERT_RE`]).
/// The error may name what it was doing (`Error loading model: …`, ffmpeg's `Error writing
/// trailer: …`) and stand after its source's tag (`[UniRigLoadSkinningModel] Error …`,
/// `[out#0/rawvideo @ 0x…] Error …`).
pub(super) static WORDED_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)^(?:❌\s*\S|(?:\[[^\]]{{1,60}}\]\s*)*(?:[a-z][\w.\-]*\s+)?error(?:\s+in\s+[^:]{{1,80}}|\s+[a-z]+ing(?:\s+[^:]{{1,60}})?)?:\s*\S|(?:an?\s+)?(?:unexpected\s+)?error\s+occurred\s+(?:during|while|in)\s+[^:]{{1,80}}:\s*\S|[a-z][\w .\-]{{0,60}}\sfailed:\s*$|:0:\S.*?:\s*\d+\s*us:\s*\S|(?:\[[^\]]{{1,60}}\]\s*)*(?:\w+\s+-\s+)?failed\s+to\s+[a-z][^:]{{0,80}}:\s*\S|{DEVICE_ASSERT})"))
        .expect("static regex")
});
/// A log line at level INFO, after its source's tags (`[worker:x] INFO: …`, `[02/28
/// 21:34:43][INFO] …`).
pub(super) static INFO_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\[[^\]]{1,60}\]\s*)*(?:\[INFO\]|INFO:)\s").expect("static regex")
});
/// comfy-aimdo's start-up error (`comfy_aimdo/control.py` `init()`: `comfy-aimdo failed to
/// load: <library>: <reason>` when its native library cannot be loaded).
pub(super) static AIMDO_LOAD_FAILED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^comfy-aimdo failed to load(?-u:\b)").expect("static regex"));
pub(super) static NODE_CLASS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z][\w.\-]{1,80}$").expect("static regex"));
/// A node saying it falls back to another way after an error it caught (`Falling back to …`,
/// `using fallback`).
pub(super) static FALLBACK_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bfall(?:ing|s)?[\s-]?back\b").expect("static regex"));
/// A line that names an error it caught and says how the work goes on (checked in ComfyUI
/// 0.28.2's sources): another way (`Error running sage attention: …, using pytorch attention
/// instead.`, `… falling back to pytorch attention.`, `ran out of memory while running softmax …,
/// trying slower in place softmax instead`, `… OOMed: switched to slice attention`, `retrying
/// with tiled VAE decoding`, `out of memory error, emptying cache and trying again`), without
/// the part that failed (`Select Model Device: cannot retarget model, passing through unchanged.
/// (…)`, `… preview failed, disabling (…)`, `error loading embedding, skipping loading: …`,
/// `Failed to import triton, …, the comfy-kitchen triton backend will not be available.`).
static RECOVERED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)(?:fall(?:ing|s)? back|fell back|using [\w .\-]{1,40} instead|trying (?:again|slower)|retrying with|switched to|,\s*(?:skipping|disabling)|passing (?:it )?through unchanged|will not be available|will be unavailable)(?-u:\b)").expect("static regex")
});
/// A live preview failing (checked in ComfyUI-KJNodes' preview override: `[KJ PreviewOverride]
/// LTX VAE decode failed: …`, `LTX preview decode failed: …`, `Preview override failed: …`,
/// `Initial noise preview failed (sigmas still sent): …`, `Active previewer raised, trying
/// Latent2RGB fallback: …`): previews are drawn beside the run, which goes on without them. (An
/// app's own `Preview failed: …`, its preview run refused, is not one.)
static PREVIEW_FAILED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\[[^\]]*preview[^\]]*\]|(?:[\w\-]+\s+){0,3}(?:preview (?:decode|encode|override)|previewer|noise preview)(?-u:\b)[^:]{0,40}?(?-u:\b)(?:fail(?:ed|s)?|raised)(?-u:\b))")
        .expect("static regex")
});
/// A line naming an error it caught and went on past ([`RECOVERED_RE`]) or a live preview
/// failing ([`PREVIEW_FAILED_RE`]).
pub(super) fn is_survived(line: &str) -> bool {
    RECOVERED_RE.is_match(line) || PREVIEW_FAILED_RE.is_match(line.trim())
}
/// What bash prints for a job a fatal signal ended (`strsignal`), as the `(?i)` alternation of
/// [`KILLED_RE`].
const BASH_SIGNALS: &str = "killed|terminated|aborted|segmentation fault|illegal instruction|bus error|floating point exception|trace/breakpoint trap";
/// What zsh prints for the same (its own signal names: `illegal hardware instruction`, `abort`).
const ZSH_SIGNALS: &str = "killed|terminated|abort|segmentation fault|illegal hardware instruction|bus error|floating point exception|trace trap";
/// A shell's report that a fatal signal ended the job: `Killed` ending a line; bash's word for
/// any fatal signal alone on a line (`Terminated`, `Aborted`, `Bus error (core dumped)`), from
/// a script (`entrypoint.sh: line 42:  8 Killed    python3 main.py`) or the job table (`[1]+
/// Killed    python main.py`); macOS's shells adding the signal's number (`Abort trap: 6`,
/// `Killed: 9`); zsh's `zsh: killed     python main.py` and its job table (`[1]    12345
/// killed     python main.py`); fish's `… terminated by signal SIGABRT`.
pub(super) static KILLED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:(?:^|[\]\s)])Killed\s*$|(?i:^(?:{BASH_SIGNALS})(?: \(core dumped\))?$|^(?:{BASH_SIGNALS}|abort trap): \d+$|(?:line \d+:\s*\d+|^\[\d+\][+-]?)\s+(?:{BASH_SIGNALS})(?: \(core dumped\))?\s+\S|^zsh: (?:{ZSH_SIGNALS})\s+\S|^\[\d+\]\s*[+-]?\s*\d+\s+(?:{ZSH_SIGNALS})\s+\S|terminated by signal sig[a-z]+))"
    ))
    .expect("static regex")
});
/// A launcher's `pause` (`Press any key to continue . . .`, localised), printed after the
/// process exited; also what the portable build's `run_nvidia_gpu.bat` shows between
/// `python.exe` returning and its pause: its hint `If you see this and ComfyUI did not start
/// …` and, with echo on, the batch prompt's `…>pause` line.
const PAUSE: &str = r"press any key to continue|请按任意键继续|if you see this and comfyui did not start|^[a-z]:\\[^>]*>\s*pause\s*$";
pub(super) static PAUSE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("(?i){PAUSE}")).expect("static regex"));

/// ComfyUI-Manager's restart (its `reboot` route prints `Restarting... [Legacy Mode]`, or
/// `Restarting...` under comfy-cli, then the command, and replaces the process with a new one):
/// the exit, the launcher's pause and the new start-up after it were asked for.
pub(super) static MANAGER_RESTART_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Restarting\.\.\.(?: \[Legacy Mode\])?$").expect("static regex"));

/// Windows stop codes a GPU workload or a failing memory can raise (a bugcheck's name, as a
/// blue screen and a debugger's analysis print it).
const BUGCHECK_NAMES: &str = "dpc_watchdog_violation|video_tdr_failure|video_tdr_timeout_detected|video_scheduler_internal_error|video_memory_management_internal|video_dxgkrnl_fatal_error|system_service_exception|system_thread_exception_not_handled|page_fault_in_nonpaged_area|irql_not_less_or_equal|driver_irql_not_less_or_equal|kmode_exception_not_handled|memory_management|whea_uncorrectable_error|critical_process_died|unexpected_kernel_mode_trap|kernel_security_check_failure|clock_watchdog_timeout|kernel_data_inpage_error|driver_power_state_failure|attempted_write_to_readonly_memory|bad_pool_header|bad_pool_caller";

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
/// report of a hang, and with it the header already counts. `Exception Code: 0x…` alone on a
/// line is LLVM's crash handler on Windows (in triton's and other LLVM-built libraries) printing
/// an unhandled exception before its stack, as the process ends. The kernel's panic (`Kernel
/// panic - not syncing: …`), its older oom-killer wording (`Out of memory: Kill process N
/// (python)`) and its `python[N]: segfault at … ip …` record; a container runtime's `OOMKilled`; Windows' crash dialogs (`…
/// has stopped working`, `The instruction at 0x… referenced memory at 0x…`), macOS's (`Python
/// quit unexpectedly`) and Event Viewer's Application Error record (`Faulting application name:
/// …`); a Windows bugcheck, which takes the machine down with the process: a blue screen's
/// `Stop code: …` or `Your PC ran into a problem and needs to restart`, the record written at
/// the next boot (`The computer has rebooted from a bugcheck`), a debugger's analysis
/// (`BugCheck 133, {…}`, or a stop code's name heading its lines, [`BUGCHECK_NAMES`]).
pub(super) static DEATH_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)(kernel panic - not syncing|out of memory: kill process \d+|(?-u:\b)segfault at [0-9a-f]+ ip |(?-u:\b)oomkilled(?-u:\b)|^[\w.\-]+\.exe has stopped working|^python[\d.]* quit unexpectedly|the instruction at 0x[0-9a-f]+ referenced memory|^faulting application name:|rebooted from a bugcheck|ran into a problem and needs to restart|^stop code:\s*\S|^bugcheck [0-9a-f]+, \{{|^(?:{BUGCHECK_NAMES})(?: \((?:0x)?[0-9a-f]{{1,8}}\))?$|oom-kill|invoked oom-killer|out of memory: killed process|killed process \d+|segmentation fault|core dumped|exit(?:ed with)? code:? -?\d+|exit status -?\d+|process exited|(?-u:\b)sigkill(?-u:\b)|signal 9(?-u:\b)|reconnecting\.\.\.|{PAUSE}|0xc0000005|-1073741819|windows fatal exception|fatal python error:|terminated abnormally with signal|earlyoom\S*:? sending sig(?:term|kill) to process|systemd-oomd\S*:? killed|^current thread 0x[0-9a-f]+ \(most recent call first\)|^faulting module(?: name)?:|^unhandled exception caught in c10/util/aborthandler\.h|^exception code: 0x[0-9a-f]{{8}}$)")).expect("static regex")
});

/// Words that mark an error message line even without any surrounding structure (with
/// comfy-aimdo's, [`is_specific_line`]).
const MESSAGE_WORDS: &[&str] = &[
    // glibc's heap checks that name no function (those that do are [`GLIBC_HEAP_CHECK_RE`]'s),
    // printed just before it aborts the process (malloc.c's `malloc_printerr`)
    "double free or corruption",
    "corrupted size vs. prev_size",
    "corrupted double-linked list",
    "invalid fastbin entry",
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
    // Python's subprocess reporting a child's failure (`CalledProcessError`'s text: `Command
    // '[…]' returned non-zero exit status 1.`), its type line cut away
    "returned non-zero exit status",
    // torch.compile's tracer refusing code (`torch._dynamo.exc.Unsupported`'s message, its type
    // line cut away)
    "dynamo does not know how to",
    // server.py failing to bind its port at start-up (it then exits: `raise SystemExit(1)`)
    "is already in use on address",
    // main.py and the frontend manager refusing to start (each then calls `sys.exit`): the
    // frontend package missing, the database locked by another ComfyUI, the database needed by
    // `--enable-assets` not initialised
    "comfyui-frontend-package is not installed",
    "another comfyui process is already using this database",
    "the --enable-assets flag requires a working database",
    // comfy-aimdo's (the dynamic-VRAM offloader's) errors, printed as console lines too, are
    // read by the failure kind's phrases (`is_specific_line`)
];

/// A line naming an error more specific than the Python exception that wraps it: one of
/// comfy-aimdo's own (its C logger prints `aimdo: …ERROR:VRAM Allocation failed (non OOM)` before
/// the `RuntimeError: VRAM Allocation failed` it raises; the phrases are the failure kind's,
/// [`crate::diagnose::kind::names_aimdo_error`]), or a native allocator's out-of-memory line
/// (ggml's `cudaMalloc failed: out of memory` before llama-cpp-python's `Failed to load model
/// from file`): when the final message names none, the line wins.
pub(super) fn is_specific_line(line: &str) -> bool {
    let l = line.to_lowercase();
    (names_aimdo_error(&l) && !l.contains("warning"))
        || is_aimdo_error_line(&l)
        || names_native_oom(&l)
}

/// glibc's allocator reporting a failed heap check by the function that made it
/// (`malloc_printerr` in malloc.c: `munmap_chunk(): invalid pointer`, `free(): invalid next size
/// (fast)`, `malloc(): unaligned tcache chunk detected`), just before it aborts the process; the
/// checks that name no function are among [`MESSAGE_WORDS`].
static GLIBC_HEAP_CHECK_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w])(?:malloc|free|realloc|calloc|munmap_chunk|mremap_chunk|malloc_consolidate|tcache_thread_shutdown|_int_malloc|_int_free|_int_realloc)\(\): [a-z]").expect("static regex")
});

pub(super) fn is_message_line(line: &str) -> bool {
    let l = line.to_lowercase();
    if is_aimdo_error_line(&l) {
        // comfy-aimdo's own ERROR line is a failure message even with no exception after it.
        return true;
    }
    if GLIBC_HEAP_CHECK_RE.is_match(&l) {
        return true;
    }
    (MESSAGE_WORDS.iter().any(|w| l.contains(w)) || names_aimdo_error(&l))
        && !l.contains("warning")
        // an error caught and gone on after (a cheaper way tried, a part left out, a preview)
        && !is_survived(&l)
}

pub(super) fn is_frame(line: &str) -> bool {
    line.contains("ile") && FRAME_RE.is_match(line)
}

pub(super) fn is_boundary(line: &str) -> bool {
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

/// Lines after `start` that continue a message (up to a blank line or a structural line). A
/// blank line before a field of cudaMallocAsync's out-of-memory report (a paste rendered with a
/// blank line between its lines) does not end it.
pub(super) fn continuation(lines: &[String], start: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = start;
    while let Some(l) = lines.get(i) {
        let field_next = || {
            lines
                .get(i + 1)
                .is_some_and(|n| ASYNC_OOM_FIELD_RE.is_match(n.trim()))
        };
        if l.trim().is_empty() && field_next() {
            i += 1;
            continue;
        }
        if is_boundary(l) {
            break;
        }
        out.push(l.trim().to_string());
        i += 1;
    }
    out
}

/// A line of the report PyTorch's cudaMallocAsync allocator writes under `Allocation on device N
/// would exceed allowed memory.` (`(out of memory)`, `Currently allocated :`, `Requested :`,
/// `Device limit :`, `Free (according to CUDA):`, `PyTorch limit (set by user-supplied memory
/// fraction)`).
static ASYNC_OOM_FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\(out of memory\)|currently allocated\s*:|requested\s*:|device limit\s*:|free \(according to cuda\)\s*:|pytorch limit \(set by)").expect("static regex")
});

/// pip's report of a failed install or build (`error: subprocess-exited-with-error`, `ERROR:
/// Failed building wheel for X`, `ERROR: Could not install packages …`), as a node pack's
/// installer prints it.
pub(super) static PIP_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:error: (?:subprocess-exited-with-error|metadata-generation-failed)|error: failed building wheel|error: could not (?:install|build|find a version))").expect("static regex")
});

/// pip's line that a build step it ran failed (`… did not run successfully.`): the `exit code:
/// N` after it is that subprocess's, not the server's.
pub(super) fn is_pip_step_failure(line: &str) -> bool {
    let l = line.to_lowercase();
    l.contains("did not run successfully") || PIP_ERROR_RE.is_match(l.trim())
}

/// The shape of an error message whose words the list below does not know: an exception's or a
/// node's name before a colon (`ValueError: …`, `SomeNodeName: …`, as the UI prints a node's
/// error), or a quoted name the message is about (`'VAE' object …`, `module 'x' …`), as Python
/// writes them. A word before a colon in prose (`Note: …`) is neither.
pub(super) static MESSAGE_SHAPE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception):\s+\S|[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*[A-Z][A-Za-z0-9_]*:\s+\S|.*'[\w.\-/]+'.*\b(?:object|module|key|for|in)\b)").expect("static regex")
});

/// Words an error message is written with (`Invalid argument`, `doesn't support`, `does not
/// have`, `failed`, `cannot`, `out of memory`…, Python's own wordings such as `has no
/// attribute`, `unexpected keyword`, PyTorch's `copying a param with shape …`, cmd.exe's `… was
/// unexpected at this time.`), which a reporter's prose rarely has all on a line ending without
/// a question mark.
pub(super) static ERROR_WORDING_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)(?:error|errno|exception|fail(?:s|ed|ure)?|cannot|can't|could not|couldn't|unable|invalid|unsupported|not supported|doesn't support|does not|not found|no such|missing|expected|exceed(?:s|ed)?|out of|(?:is|are) required|illegal|denied|refused|mismatch|abort(?:ed)?|assert(?:ion)?|allocation|allocate|has no attribute|is not defined|not (?:callable|subscriptable|iterable)|unexpected keyword|positional arguments?|unsupported operand|no module named|copying a param with shape|shapes? cannot be|was unexpected at this time|not compiled with|not enabled|not (?:loaded|available|installed|initiali[sz]ed)|must (?:be|have|match|not)|but got)(?-u:\b)").expect("static regex")
});

/// A line reporting work in progress or done, after its source's tags (`Importing X...`,
/// `:: Patching ONNX Runtime`, `[OmniVoice] Running: …`, `Success`, `Imported x: 3 nodes`), or
/// led by a check mark (`✅ X loaded with 20 nodes`).
static WORK_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:✅|(?:\[[^\]]{1,60}\]\s*|[:%#*>|=~]{1,6}\s*)*(?:[A-Z][a-z]{2,}ing|Success(?:fully)?|Done|Imported|Loaded|Installed|Using)(?-u:\b))")
        .expect("static regex")
});

/// Whether the lines after an error line show the work going on past it (labelling rule 1): a
/// line at level INFO, or one reporting work in progress or done (not background output).
pub(super) fn went_on_after(lines: &[String], at: usize) -> bool {
    lines[at + 1..].iter().any(|l| {
        let t = l.trim();
        INFO_LINE_RE.is_match(t)
            || (WORK_LINE_RE.is_match(t)
                && !is_error_line(t)
                && !crate::diagnose::stage::is_background_line(t))
    })
}

/// A line that states an error: printed in words, or a validation reason; not a traceback
/// frame, a notice ComfyUI goes on after, or the server failing to describe a node pack's node
/// (start-up noise, labelling rule 2).
pub(super) fn is_error_line(line: &str) -> bool {
    (WORDED_ERROR_RE.is_match(line)
        || is_worded_failure(line)
        || crate::diagnose::stage::is_validation_reason(line))
        && !is_frame(line)
        && !is_notice(line)
        && !OBJECT_INFO_ERROR_RE.is_match(line)
        && !SHELL_PROMPT_RE.is_match(line)
}

/// A command typed at a shell's prompt (`(env) C:\Users\user>python …`, PowerShell's `PS
/// C:\x> …`, `user@host:~/x$ …`, `$ …`): the user's words, not an error the program printed.
static SHELL_PROMPT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:\([\w.\-]+\)\s*)?(?:(?:PS )?[A-Za-z]:\\[^>]*>|[\w.\-]+@[\w.\-]+:[^$#\s]*[$#]\s|[$#]\s)",
    )
    .expect("static regex")
});

/// The last line of a log that stops, when it is an error printed in words (labelling rule 1:
/// the last error the text shows is the failure): `Error: …`, `[ERROR] …`, `X failed: …`,
/// `Failed to load …`, `Fatal error in …`, `… error occurred …`, cmd.exe's `X was unexpected at
/// this time.` (a batch launcher's syntax error); not a notice ComfyUI goes on
/// after, an adapter's `ERROR lora …` (the run gets past it), a report's title or a question.
pub(super) fn is_worded_failure(line: &str) -> bool {
    LAST_ERROR_RE.is_match(line)
        && !is_notice(line)
        && !LORA_ERROR_RE.is_match(line)
        && !NO_ERROR_RE.is_match(line)
        && !MD_HEADER_RE.is_match(line)
        && !line.ends_with('?')
}

/// An error word where an error line has it (`Error:`, `[ERROR]`, `failed to`, `… failed`).
static LAST_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|[\s\]\[|:>-])(?:error|failed|failure)(?:\s*:|\s*\]|\s+(?:to|with|while|in|during|occurred|code|loading|running)(?-u:\b)|\s*$)|\swas unexpected at this time\.?$").expect("static regex")
});
/// A line that says there was no error (`0 errors`, `without errors`).
static NO_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)(?:no|0|without|zero)\s+(?:errors?|failures?)(?-u:\b)")
        .expect("static regex")
});

/// Start-up and informational lines that are no failure: a node pack's import failing
/// ([`is_pack_import_notice`]: start-up noise, ComfyUI goes on without the pack), errors the
/// server logs and goes on after ([`COMFY_NOTICE_RE`]), an error caught and gone on after
/// ([`RECOVERED_RE`]: ComfyUI's `No working comfy-aimdo install detected … Falling back`),
/// warnings, deprecations.
pub(super) fn is_notice(line: &str) -> bool {
    let l = line.to_lowercase();
    [
        // a node pack's own import error
        "error loading module",
        "warning",
        "deprecat",
        // ComfyUI's start-up report of each comfy_kitchen backend, available or not
        // (`Found comfy_kitchen backend cuda: {'available': False, 'unavailable_reason': …}`)
        "found comfy_kitchen backend",
    ]
    .iter()
    .any(|w| l.contains(w))
        || is_survived(line)
        || is_pack_import_notice(line)
        || COMFY_NOTICE_RE.is_match(line.trim())
        || MANAGER_NOTICE_RE.is_match(line.trim())
        || GOT_PROMPT_RE.is_match(line)
        || PROMPT_DONE_RE.is_match(line)
        || STARTUP_RE.is_match(line)
}

/// Errors ComfyUI logs and goes on after (checked in ComfyUI 0.28.2's `server.py`, `main.py`,
/// `app/` and `comfy/`): a client's WebSocket message or send failing, an upload not
/// registered as an asset, a custom node's `on_prompt_handler` raising (the prompt is queued
/// anyway), a custom node's prestartup script failing, the database not initialised (without
/// `--enable-assets`) or not upgraded; the asset scanner and its database (`Asset scan failed`,
/// `Failed to hash …`, `Failed to enrich output entry with asset id`, `Failed to register
/// output: …`); the API's stub files not written; the user manager's file routes (`Error
/// listing directory …`, `Error saving file …`); a pack's example workflow that is not JSON
/// (`Error loading <path>.json`); a package's version not checked; a weight a LoRA could not
/// patch (`Calculate Weight Failed: …`, `[BypassManager] Failed …`). Some print their
/// traceback after the line.
pub(super) static COMFY_NOTICE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:send error: |error processing websocket message: |invalid json received from client |failed to register uploaded image as asset|(?:\[error\] )?an error occurred during the on_prompt_handler processing|failed to execute startup-script: |failed to initialize database\. please ensure|error upgrading database|asset scan failed|batch insert failed at offset |failed to (?:hash|enrich|register output:|clear 'missing' tag for asset|add missing tag for asset) |failed to enrich output entry with asset id|fast db scan failed for |marking missing assets failed|upload_asset failed for |error generating stub file for |failed to generate stub for |error listing directory |error saving file '|failed to decode path parameter: |could not stat file |error loading \S.*\.json$|failed to check \S+ version: |calculate weight failed: |\[bypassmanager\] failed )")
        .expect("static regex")
});

/// ComfyUI-Manager checking its node packs and its registry in the background (checked in
/// ComfyUI-Manager's sources): a pack's git state or update not read (`Fetch error: <path>`,
/// `Update error: <path>`, `[ComfyUI-Manager] Failed to check state of the git node pack: …`), a
/// file's encoding not recognised, the registry or a channel not reached (`Cannot connect to
/// comfyregistry.`, `… Due to a network error, switching to local mode.`), its own log file
/// not written. None of it takes part in a run. (Its install failures are start-up errors,
/// labelling rule 2, and stay errors.)
static MANAGER_NOTICE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\x1b\[2K)?\r?(?:(?:fetch|update) error: \S|cannot connect to comfyregistry|\[comfyui[- ]manager\] (?:failed to check state of the git node pack|failed to recognize encoding for|due to a network error|logging failed|cannot fast-forward))")
        .expect("static regex")
});

/// A node pack's import failing at start-up, as ComfyUI (`Cannot import X module for custom
/// nodes: …`, `(IMPORT FAILED)`, and for a pack of the V3 API `Error while calling
/// comfy_entrypoint in X: …`, nodes.py's `load_custom_node`) or the pack itself (`… import
/// failed:`, `Error loading X.py:`, `[X] Critical Import Error: …`) says it; also numpy's check
/// that fails the import of a module built against another numpy (`module compiled against ABI
/// version 0x… but this version of numpy is 0x…`).
pub(super) fn is_pack_import_notice(line: &str) -> bool {
    let l = line.to_lowercase();
    l.contains("module for custom nodes")
        // the same line cut after its path
        || CUT_PACK_IMPORT_RE.is_match(&l)
        // bitsandbytes logging, as it is imported, that its native library did not load (it
        // goes on without it)
        || l.contains("bitsandbytes library load error")
        || l.contains("import failed")
        || l.contains("error while calling comfy_entrypoint in")
        || is_numpy_build_mismatch(line)
        || PACK_FILE_IMPORT_RE.is_match(line)
}

/// ComfyUI's `Cannot import <path> module for custom nodes: …` cut after the pack's path (the
/// path right after the words; not Python's `cannot import name 'X' from …`).
static CUT_PACK_IMPORT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|\s)cannot import (?:[a-z]:)?[\\/][^\s']*custom_nodes").expect("static regex")
});

/// numpy's check, as a compiled module is imported, that it was built against this numpy
/// (`module compiled against ABI version 0x1000009 but this version of numpy is 0x2000000`).
pub(super) fn is_numpy_build_mismatch(line: &str) -> bool {
    let l = line.to_lowercase();
    l.contains("module compiled against abi version")
        || l.contains("module compiled against api version")
}

/// A node pack importing one of its own files at start-up and failing (`Error loading
/// AILab_RMBG.py: No module named 'cv2'`, also with the file's path): ComfyUI goes on without
/// those nodes.
/// So is its `[X] Import Error: …` / `Critical Import Error: …` line.
static PACK_FILE_IMPORT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)error loading (?:\S*[\\/])?[\w.\-]+\.py:|^\W*(?:\[[^\]]{1,60}\]\s*)?(?:critical\s+)?import\s+error:")
        .expect("static regex")
});

/// A node class name alone on a line (`SaveVideo`, `KSampler`, `VHS_VideoCombine`): one token,
/// with a capital, that is not an exception class.
pub(super) fn is_node_class(line: &str) -> bool {
    NODE_CLASS_RE.is_match(line)
        && line.chars().any(|c| c.is_ascii_uppercase())
        && !["Error", "Exception", "Warning"]
            .iter()
            .any(|w| line.ends_with(w))
}
