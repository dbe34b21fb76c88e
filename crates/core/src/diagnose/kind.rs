//! Failure kind by wording: the order in which the evidence is read (the message's phrases,
//! its exception type, comfy-aimdo's frames and lines, a death) and the verdict. The vendor does
//! not matter (ZLUDA and some ROCm builds print CUDA wording); look-alikes such as cuBLAS
//! statuses or illegal memory access are `other`. The phrases themselves are `wording`'s.

mod wording;

pub(crate) use wording::{is_aimdo_error_line, names_aimdo_error, names_native_oom};
use wording::{ASYNC_MARKERS, BACKEND_WORDS, LOOKALIKES, WORDING};

use super::frames::{native_frame, parse_frames};
use super::{ConsoleSignals, Evidence, RunOutcomeHint};
use crate::vocab::FailureKind;
use regex::Regex;
use std::sync::LazyLock;

/// The kind, why, and whether the error announces itself as asynchronously reported.
pub(crate) struct KindVerdict {
    pub kind: FailureKind,
    pub evidence: String,
    pub asynchronous: bool,
}

/// A fault handler's header or the shell's report of a fatal signal, opening a message.
/// (Not `Windows fatal exception:`: Windows' handler reports access violations the process
/// survives too, which only the console after it tells apart.)
static FATAL_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:fatal python error:|segmentation fault)").expect("static regex")
});
static MEMORY_ERROR_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)memoryerror(?-u:\b)").expect("static regex"));
static TORCH_OOM_TYPE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)(torch\.)?(cuda\.)?outofmemoryerror(?-u:\b)").expect("static regex")
});

/// Whether `word` occurs in `text` between ASCII word boundaries (what `(?-u:\b)word(?-u:\b)`
/// matches for a word that starts and ends with a word character), without compiling a regex.
fn has_word(text: &str, word: &str) -> bool {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = text.as_bytes();
    text.match_indices(word).any(|(i, _)| {
        let end = i + word.len();
        (i == 0 || !is_word(bytes[i - 1])) && bytes.get(end).is_none_or(|&b| !is_word(b))
    })
}

/// The deepest frame of the traceback (a Python traceback's last, a fault-handler stack's
/// first) when it is comfy-aimdo's own code (`site-packages/comfy_aimdo/…`), as `file in func`.
fn raised_in_aimdo(evidence: &Evidence) -> Option<String> {
    let frames = parse_frames(&evidence.traceback);
    let deepest = frames.last()?;
    let file = deepest.path.split_once("comfy_aimdo/")?.1;
    Some(format!("comfy_aimdo/{file} in {}", deepest.func))
}

/// Decides the kind from the error wording, or from the outcome when there is no error text.
pub(crate) fn classify(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    error_text: &str,
) -> KindVerdict {
    // A hard-wrapped paste may cut a wording in two: at a space (`CUDA out of` / `memory`, read
    // with whitespace runs as one space) or inside a word, as a terminal copy does (`Allocation
    // on d` / `evice`, read with the line breaks removed). Both readings are searched.
    let collapsed = error_text.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = if error_text.contains('\n') {
        format!("{collapsed}\n{}", error_text.replace(['\r', '\n'], "")).to_lowercase()
    } else {
        collapsed.to_lowercase()
    };
    let asynchronous = ASYNC_MARKERS.iter().any(|m| lower.contains(m));
    let verdict = |kind: FailureKind, evidence: String| KindVerdict {
        kind,
        evidence,
        asynchronous,
    };
    match evidence.outcome {
        Some(RunOutcomeHint::Rejected) => {
            return verdict(
                FailureKind::Rejected,
                "The server rejected the prompt before running it (validation failed).".into(),
            )
        }
        Some(RunOutcomeHint::IncompleteOutput) => {
            let node = match (&evidence.node_type, &evidence.node_id) {
                (Some(class), Some(id)) => format!("{class} #{id}"),
                (None, Some(id)) => format!("node #{id}"),
                _ => "an output node".into(),
            };
            return verdict(
                FailureKind::IncompleteOutput,
                format!("ComfyUI reported success, but {node} produced nothing in /history: the product is incomplete."),
            );
        }
        Some(RunOutcomeHint::Interrupted) => {
            return verdict(
                FailureKind::Other,
                "The run was interrupted (execution_interrupted); an interrupt is not a failure of the workflow.".into(),
            )
        }
        _ => {}
    }
    if lower.trim().is_empty() {
        return classify_without_text(evidence, signals, asynchronous);
    }
    for (needle, why) in LOOKALIKES {
        if lower.contains(needle) {
            return verdict(FailureKind::Other, format!("The message reports {why}."));
        }
    }
    if lower.contains("cublas_status_") && !lower.contains("alloc_failed") {
        return verdict(
            FailureKind::Other,
            "The message is a cuBLAS status other than ALLOC_FAILED; nothing in it says memory ran out.".into(),
        );
    }
    if lower.contains("cudnn_status_") && !lower.contains("alloc_failed") {
        return verdict(
            FailureKind::Other,
            "The message is a cuDNN status other than ALLOC_FAILED; nothing in it says memory ran out.".into(),
        );
    }
    if is_aimdo_error_line(&lower) {
        return verdict(
            FailureKind::Aimdo,
            "The message holds an ERROR line of comfy-aimdo (the dynamic-VRAM offloader).".into(),
        );
    }
    // The console parser gives a native crash stack deepest in comfy-aimdo as that frame.
    if native_frame(error_text).is_some_and(|f| f.in_aimdo) {
        return verdict(
            FailureKind::Aimdo,
            format!("The native crash stack (a debugger's backtrace) is deepest in comfy-aimdo, the dynamic-VRAM offloader (`{}`): a crash in its own code.", error_text.trim()),
        );
    }
    if let Some(frame) = raised_in_aimdo(evidence) {
        return verdict(
            FailureKind::Aimdo,
            format!("The exception was raised inside comfy-aimdo, the dynamic-VRAM offloader ({frame}): its own error, whatever wraps it."),
        );
    }
    // A fault handler's last words given as the message (a report's field filled from the
    // console): the process died, no Python exception was raised.
    if evidence.exception_type.is_none() && FATAL_LINE_RE.is_match(lower.trim_start()) {
        let line = error_text.lines().next().unwrap_or("").trim();
        return verdict(
            FailureKind::ProcessKilled,
            format!("The process died without a Python error (\"{line}\"). The text does not prove that memory was the reason."),
        );
    }
    for (needle, kind, label) in WORDING {
        if lower.contains(needle) {
            return verdict(*kind, format!("The message says \"{label}\"."));
        }
    }
    if lower.contains("out of memory") {
        for (word, kind) in BACKEND_WORDS {
            let named = has_word(&lower, word);
            if named {
                return verdict(
                    *kind,
                    format!(
                        "The message says \"out of memory\" and names {}.",
                        word.to_uppercase()
                    ),
                );
            }
        }
    }
    if MEMORY_ERROR_RE.is_match(&lower) {
        return verdict(
            FailureKind::HostRam,
            "Python raised MemoryError: the process could not get system RAM.".into(),
        );
    }
    if lower.contains("got an oom, unloading all loaded models") {
        // execution.py prints it only when a node raised `OOM_EXCEPTION`
        // (`torch.cuda.OutOfMemoryError`), after logging the error itself.
        return verdict(
            FailureKind::CudaOom,
            "ComfyUI's `Got an OOM, unloading all loaded models.`, which it logs only after torch's CUDA out-of-memory error; the error's own line is not in the text.".into(),
        );
    }
    if TORCH_OOM_TYPE_RE.is_match(&lower) {
        return verdict(
            FailureKind::CudaOom,
            "The exception type is torch's OutOfMemoryError and no other backend is named.".into(),
        );
    }
    let why = if asynchronous {
        "The message has the asynchronous-CUDA boilerplate but no out-of-memory wording."
    } else {
        "The message has no out-of-memory wording."
    };
    verdict(FailureKind::Other, why.into())
}

fn classify_without_text(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    asynchronous: bool,
) -> KindVerdict {
    let verdict = |kind: FailureKind, evidence: String| KindVerdict {
        kind,
        evidence,
        asynchronous,
    };
    if let Some(line) = signals.death.as_deref() {
        // Windows' Application Error event (ID 1000) names the module the crash was in.
        let lower = line.to_lowercase();
        if lower.starts_with("faulting module") && lower.contains("aimdo") {
            return verdict(
                FailureKind::Aimdo,
                format!("Windows' crash record names comfy-aimdo's library as the faulting module (\"{line}\"): the process crashed inside the dynamic-VRAM offloader."),
            );
        }
        if let Some(frame) = raised_in_aimdo(evidence) {
            return verdict(
                FailureKind::Aimdo,
                format!("A crash (\"{line}\") whose fault-handler stack is deepest inside comfy-aimdo, the dynamic-VRAM offloader ({frame}): the most specific sign is aimdo's; whether the process went on is not shown."),
            );
        }
        let memory =
            line.to_lowercase().contains("oom") || line.to_lowercase().contains("out of memory");
        let tail = if memory {
            "An out-of-memory killer is named (the kernel's or a user-space one)."
        } else {
            "The text does not prove that memory was the reason."
        };
        return verdict(
            FailureKind::ProcessKilled,
            format!("The process died without a Python error (\"{line}\"). {tail}"),
        );
    }
    match evidence.outcome {
        // A run the tool watched: it saw the server go away.
        Some(RunOutcomeHint::ServerLost) => verdict(
            FailureKind::ProcessKilled,
            "The server went away during the run without reporting an error; the cause is not proven to be memory.".into(),
        ),
        Some(RunOutcomeHint::Timeout) => verdict(
            FailureKind::Timeout,
            "The run did not finish within its time limit and no error was reported.".into(),
        ),
        // Pasted text that just ends: a paste cut short looks the same, so nothing says the
        // server died.
        None if signals.log_stopped => verdict(
            FailureKind::Unknown,
            "The log ends mid-run without an error and without a sign that the server died (no `Killed`, exit code, new startup banner, oom-killer line or `Press any key to continue`): it may simply be where the paste stops, so the process is not presumed dead and no failure kind is shown.".into(),
        ),
        // Nothing at all: no message, frames, node, progress or outcome. That is no failure
        // shown, not a failure of another kind.
        None if evidence.exception_type.is_none()
            && evidence.traceback.is_empty()
            && evidence.node_type.is_none()
            && evidence.node_id.is_none()
            && evidence.progress.is_empty() =>
        {
            verdict(
                FailureKind::Unknown,
                "The input shows no failure: no error message, traceback, failing node, progress or sign that the server died.".into(),
            )
        }
        // Frames with no exception line after them (a paste that stops inside the traceback):
        // an exception was raised, but the line that says which is not in the text.
        None if evidence.exception_type.is_none() && !evidence.traceback.is_empty() => verdict(
            FailureKind::Unknown,
            "The text holds traceback frames but not the exception line that ends a Python traceback (or that line cut before its message): an error was raised, but what it was is not shown, so no failure kind is given.".into(),
        ),
        // A failing node or the run's progress, but neither an exception nor its message: the
        // error is not shown (a report cut after its node fields), so no kind is given.
        None if evidence.exception_type.is_none() => verdict(
            FailureKind::Unknown,
            "The text names where the run failed (its node or progress) but not the error: no exception type or message is shown, so no failure kind is given.".into(),
        ),
        _ => verdict(
            FailureKind::Other,
            "No error message and no sign of a dead server: nothing identifies a memory failure."
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(exception_type: Option<&str>, message: &str) -> (FailureKind, bool) {
        let evidence = Evidence {
            exception_type: exception_type.map(str::to_string),
            exception_message: Some(message.to_string()),
            ..Evidence::default()
        };
        let text = format!("{}: {message}", exception_type.unwrap_or(""));
        let v = classify(&evidence, &ConsoleSignals::default(), &text);
        (v.kind, v.asynchronous)
    }

    /// A hard wrap cuts a wording at a space or inside a word; both still read.
    #[test]
    fn a_wording_cut_by_a_hard_wrap_still_reads() {
        assert_eq!(
            kind_of(
                Some("torch.OutOfMemoryError"),
                "CUDA out of\nmemory. Tried to allocate 2.00 GiB"
            )
            .0,
            FailureKind::CudaOom
        );
        assert_eq!(
            kind_of(None, "Allocation on d\nevice").0,
            FailureKind::CudaOom
        );
        assert_eq!(
            kind_of(None, "There is not enough GPU video mem\nory available!").0,
            FailureKind::DirectmlOom
        );
    }

    #[test]
    fn wording_decides_not_vendor() {
        let cases: &[(Option<&str>, &str, FailureKind)] = &[
            (Some("torch.OutOfMemoryError"), "CUDA out of memory. Tried to allocate 2.00 GiB.", FailureKind::CudaOom),
            (None, "CUDA error: out of memory\nCompile with `TORCH_USE_CUDA_DSA`", FailureKind::CudaOom),
            (Some("torch.OutOfMemoryError"), "Allocation on device ", FailureKind::CudaOom),
            (Some("torch.OutOfMemoryError"), "HIP out of memory. Tried to allocate 26.00 MiB.", FailureKind::HipOom),
            // A ROCm build of PyTorch: CUDA wording, HIP's status only in the hint line.
            (Some("torch.AcceleratorError"), "CUDA error: out of memory\nSearch for `hipErrorOutOfMemory' in https://rocm.docs.amd.com/projects/HIP/en/latest/index.html for more information.", FailureKind::CudaOom),
            (Some("RuntimeError"), "HIP error: hipErrorOutOfMemory", FailureKind::HipOom),
            (Some("RuntimeError"), "hipMalloc failed: hipErrorOutOfMemory", FailureKind::HipOom),
            (Some("RuntimeError"), "MPS backend out of memory (MPS allocated: 1 GB, other allocations: 1 MB, max allowed: 2 GB).", FailureKind::MpsOom),
            (Some("RuntimeError"), "XPU out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.56 GiB total capacity)", FailureKind::XpuOom),
            (None, "Could not allocate tensor with 58982400 bytes. There is not enough GPU video memory available!", FailureKind::DirectmlOom),
            (Some("RuntimeError"), "[enforce fail at alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough memory: you tried to allocate 5242880 bytes.", FailureKind::HostRam),
            (Some("numpy.core._exceptions._ArrayMemoryError"), "Unable to allocate 10.0 GiB for an array with shape (2433, 720, 512, 3) and data type float32", FailureKind::HostRam),
            (Some("MemoryError"), "", FailureKind::HostRam),
            (Some("RuntimeError"), "unable to mmap 4294967296 bytes from file <x>: Cannot allocate memory (12)", FailureKind::HostRam),
            (Some("RuntimeError"), "CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasSgemm(...)`", FailureKind::Other),
            (Some("RuntimeError"), "HIP error: an illegal memory access was encountered", FailureKind::Other),
            (Some("RuntimeError"), "cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", FailureKind::Other),
            (Some("RuntimeError"), "GET was unable to find an engine to execute this computation", FailureKind::Other),
            (Some("RuntimeError"), "!handle.expired() INTERNAL ASSERT FAILED at \"CUDACachingAllocator.cpp\":1234, please report a bug to PyTorch. out of memory", FailureKind::Other),
            (Some("RuntimeError"), "expected scalar type Half but found Float", FailureKind::Other),
            (Some("RuntimeError"), "CUDA driver error: out of memory", FailureKind::CudaOom),
            (Some("OSError"), "[WinError 1455] The paging file is too small for this operation to complete", FailureKind::HostRam),
            // The same Windows errors in a localised Windows: the code stays, the text does not.
            (Some("OSError"), "[WinError 1455] 页面文件太小，无法完成操作。", FailureKind::HostRam),
            (Some("OSError"), "[WinError 8] Not enough memory resources are available to process this command", FailureKind::HostRam),
            (Some("OSError"), "[WinError 14] 存储空间不足，无法完成此操作。", FailureKind::HostRam),
            (Some("safetensors_rust.SafetensorError"), "Error while deserializing header: (os error 1455)", FailureKind::HostRam),
            // Other Windows codes and Linux's errno 8 (an exec-format error) name no memory.
            (Some("OSError"), "[WinError 87] The parameter is incorrect", FailureKind::Other),
            (Some("OSError"), "[WinError 126] 找不到指定的模块。", FailureKind::Other),
            (Some("OSError"), "[Errno 8] Exec format error (os error 8)", FailureKind::Other),
            (Some("RuntimeError"), "Allocation is out of device memory on current platform.", FailureKind::XpuOom),
            (None, "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 7668.54 MiB on device 0: cudaMalloc failed: out of memory\nFailed to load model from file: /m/x.gguf", FailureKind::CudaOom),
            (Some("torch.AcceleratorError"), "CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.", FailureKind::CudaOom),
            (Some("torch.OutOfMemoryError"), "Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 22.43 GiB\nRequested               : 4.07 GiB\nDevice limit            : 16.00 GiB\nFree (according to CUDA): 0 bytes", FailureKind::CudaOom),
            (Some("RuntimeError"), "Fault failed: 2", FailureKind::Aimdo),
            (Some("RuntimeError"), "HostBuffer.read_file_slice failed", FailureKind::Aimdo),
            (None, "aimdo: src/model-vbar.c:307:ERROR:VRAM Allocation failed (non OOM)", FailureKind::Aimdo),
            (None, "aimdo: src/vrambuf.c:42:ERROR:vrambuf_create: 0 16777216k\nVRAM reservation failed", FailureKind::Aimdo),
            // comfy_aimdo.control.get_devctx's and _record_call's own errors.
            (Some("RuntimeError"), "comfy-aimdo device 2 is not initialized", FailureKind::Aimdo),
            (None, "comfy-aimdo is not initialized", FailureKind::Aimdo),
        ];
        for (ty, msg, want) in cases {
            assert_eq!(kind_of(*ty, msg).0, *want, "{msg}");
        }
    }

    /// comfy-aimdo's own messages and frames win over the Python exception carrying them
    /// (issue #40 item 3), from real reports: comfy-aimdo#49 (VRAM reservation failed raised in
    /// comfy_aimdo/vram_buffer.py), ComfyUI#15286 (hostbuf_file_reader_read failed).
    #[test]
    fn aimdo_messages_and_frames_are_aimdo() {
        assert_eq!(
            kind_of(Some("RuntimeError"), "hostbuf_file_reader_read failed").0,
            FailureKind::Aimdo
        );
        assert_eq!(
            kind_of(Some("RuntimeError"), "VRAM reservation failed").0,
            FailureKind::Aimdo
        );
        // Any message raised by aimdo's own code is its error.
        let raised = Evidence {
            exception_type: Some("RuntimeError".into()),
            exception_message: Some("some new aimdo failure".into()),
            traceback: vec![
                r#"  File "C:\ComfyUI\comfy\ops.py", line 122, in get_cast_buffer"#.into(),
                r#"  File "C:\ComfyUI\comfy\model_management.py", line 1221, in get_aimdo_cast_buffer"#.into(),
                r#"  File "F:\Python314\install\Lib\site-packages\comfy_aimdo\vram_buffer.py", line 33, in __init__"#.into(),
            ],
            ..Evidence::default()
        };
        let v = classify(
            &raised,
            &ConsoleSignals::default(),
            "RuntimeError: some new aimdo failure",
        );
        assert_eq!(v.kind, FailureKind::Aimdo);
        assert!(
            v.evidence
                .contains("comfy_aimdo/vram_buffer.py in __init__"),
            "{}",
            v.evidence
        );
        // A frame of aimdo above the raising one does not count.
        let above = Evidence {
            traceback: vec![
                r#"  File "/s/comfy_aimdo/host_buffer.py", line 1, in read_file_slice"#.into(),
                r#"  File "/c/comfy/ops.py", line 2, in forward"#.into(),
            ],
            ..raised.clone()
        };
        let v = classify(
            &above,
            &ConsoleSignals::default(),
            "RuntimeError: shapes differ",
        );
        assert_eq!(v.kind, FailureKind::Other);
    }

    /// A crash whose fault-handler stack is deepest in comfy-aimdo (comfy-aimdo#85, printed at
    /// startup) is aimdo's; a crash elsewhere stays a dead process.
    #[test]
    fn a_crash_inside_aimdo_is_aimdo() {
        let stack = |deepest: &str| {
            Evidence {
            traceback: vec![
                format!(r#"  File "{deepest}", line 144 in init_devices"#),
                r#"  File "D:\StabilityMatrix\Data\Packages\ComfyUI\main.py", line 256 in <module>"#.into(),
            ],
            ..Evidence::default()
        }
        };
        let crash = ConsoleSignals {
            death: Some("Windows fatal exception: access violation".into()),
            ..ConsoleSignals::default()
        };
        let aimdo = r"D:\StabilityMatrix\Data\Packages\ComfyUI\venv\Lib\site-packages\comfy_aimdo\control.py";
        let v = classify(&stack(aimdo), &crash, "");
        assert_eq!(v.kind, FailureKind::Aimdo, "{}", v.evidence);
        assert!(v.evidence.contains("access violation"), "{}", v.evidence);
        let v = classify(
            &stack(r"D:\x\comfy\ldm\lightricks\vae\causal_video_autoencoder.py"),
            &crash,
            "",
        );
        assert_eq!(v.kind, FailureKind::ProcessKilled, "{}", v.evidence);
    }

    #[test]
    fn asynchronous_boilerplate_is_flagged_but_not_a_kind() {
        let async_msg = "CUDA error: operation not supported\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.";
        assert_eq!(
            kind_of(Some("RuntimeError"), async_msg),
            (FailureKind::Other, true)
        );
        let async_oom = async_msg.replace("operation not supported", "out of memory");
        assert_eq!(kind_of(None, &async_oom), (FailureKind::CudaOom, true));
    }

    /// A pasted log that just ends is not a dead server (issue #40); a watched run's
    /// ServerLost and a pasted death sign still are.
    #[test]
    fn a_log_that_just_ends_is_not_a_dead_server() {
        let stopped = ConsoleSignals {
            log_stopped: true,
            ..ConsoleSignals::default()
        };
        let v = classify(&Evidence::default(), &stopped, "");
        assert_eq!(v.kind, FailureKind::Unknown);
        assert!(v.evidence.contains("not presumed dead"), "{}", v.evidence);
        let watched = Evidence {
            outcome: Some(RunOutcomeHint::ServerLost),
            ..Evidence::default()
        };
        let v = classify(&watched, &ConsoleSignals::default(), "");
        assert_eq!(v.kind, FailureKind::ProcessKilled);
        let killed = ConsoleSignals {
            death: Some("Killed".into()),
            log_stopped: true,
            ..ConsoleSignals::default()
        };
        let v = classify(&Evidence::default(), &killed, "");
        assert_eq!(v.kind, FailureKind::ProcessKilled);
    }

    #[test]
    fn outcomes_without_text() {
        let signals = ConsoleSignals::default();
        for (outcome, want) in [
            (RunOutcomeHint::ServerLost, FailureKind::ProcessKilled),
            (RunOutcomeHint::Timeout, FailureKind::Timeout),
            (RunOutcomeHint::Rejected, FailureKind::Rejected),
            (RunOutcomeHint::Interrupted, FailureKind::Other),
            (
                RunOutcomeHint::IncompleteOutput,
                FailureKind::IncompleteOutput,
            ),
        ] {
            let e = Evidence {
                outcome: Some(outcome),
                ..Evidence::default()
            };
            assert_eq!(classify(&e, &signals, "").kind, want);
        }
    }

    /// A text with nothing failing, or with frames but not the exception line that ends them,
    /// shows no failure kind: `unknown`, not `other` (which claims a non-memory error).
    #[test]
    fn no_exception_line_is_no_kind() {
        let signals = ConsoleSignals::default();
        let v = classify(&Evidence::default(), &signals, "");
        assert_eq!(v.kind, FailureKind::Unknown, "{}", v.evidence);
        let frames_only = Evidence {
            traceback: vec![
                r#"  File "/w/comfy/k_diffusion/sampling.py", line 88, in sample_heun"#.into(),
                r#"  File "/w/comfy/samplers.py", line 402, in __call__"#.into(),
            ],
            ..Evidence::default()
        };
        let v = classify(&frames_only, &signals, "");
        assert_eq!(v.kind, FailureKind::Unknown);
        assert!(v.evidence.contains("exception line"), "{}", v.evidence);
        // A node named with no exception (a report cut after its node fields) names no kind
        // either; an exception type alone does, and the same frames with their exception
        // line are read by the message.
        let node_only = Evidence {
            node_type: Some("KSampler".into()),
            ..Evidence::default()
        };
        assert_eq!(
            classify(&node_only, &signals, "").kind,
            FailureKind::Unknown
        );
        let type_only = Evidence {
            exception_type: Some("RuntimeError".into()),
            ..node_only.clone()
        };
        assert_eq!(classify(&type_only, &signals, "").kind, FailureKind::Other);
        let with_message = Evidence {
            exception_type: Some("RuntimeError".into()),
            exception_message: Some("shape mismatch".into()),
            ..frames_only
        };
        assert_eq!(
            classify(&with_message, &signals, "RuntimeError: shape mismatch").kind,
            FailureKind::Other
        );
    }
}
