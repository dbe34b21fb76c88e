//! Failure kind by wording. The vendor does not matter (ZLUDA and some ROCm builds print CUDA
//! wording); look-alikes such as cuBLAS statuses or illegal memory access are `other`.

use super::{ConsoleSignals, Evidence, Kind, RunOutcomeHint};

/// The kind, why, and whether the error announces itself as asynchronously reported.
pub(crate) struct KindVerdict {
    pub kind: Kind,
    pub evidence: String,
    pub asynchronous: bool,
}

/// Phrases that mark an asynchronous (deferred) GPU error report.
const ASYNC_MARKERS: &[&str] = &[
    "asynchronously reported",
    "cuda_launch_blocking",
    "hip_launch_blocking",
];

/// Look-alikes: memory-adjacent wording that is not an out-of-memory message.
const LOOKALIKES: &[(&str, &str)] = &[
    (
        "internal assert failed",
        "an INTERNAL ASSERT failure (an allocator or library bug report), not an out-of-memory message",
    ),
    (
        "illegal memory access",
        "an illegal memory access (a memory-access fault), not an out-of-memory message",
    ),
    (
        "unable to find an engine",
        "cuDNN found no engine for the computation; the text does not say memory ran out",
    ),
    (
        "misaligned address",
        "a misaligned-address fault, not an out-of-memory message",
    ),
];

/// Ordered wording rules: the first phrase found decides the kind.
const WORDING: &[(&str, Kind, &str)] = &[
    (
        "mps backend out of memory",
        Kind::MpsOom,
        "MPS backend out of memory",
    ),
    ("xpu out of memory", Kind::XpuOom, "XPU out of memory"),
    (
        "xpu error: out of memory",
        Kind::XpuOom,
        "XPU error: out of memory",
    ),
    (
        "out_of_device_memory",
        Kind::XpuOom,
        "UR/PI out-of-device-memory status (Intel runtime)",
    ),
    ("hip out of memory", Kind::HipOom, "HIP out of memory"),
    (
        "hip error: out of memory",
        Kind::HipOom,
        "HIP error: out of memory",
    ),
    ("hiperroroutofmemory", Kind::HipOom, "hipErrorOutOfMemory"),
    (
        "not enough gpu video memory",
        Kind::DirectmlOom,
        "not enough GPU video memory (torch-directml)",
    ),
    ("cuda out of memory", Kind::CudaOom, "CUDA out of memory"),
    (
        "cuda error: out of memory",
        Kind::CudaOom,
        "CUDA error: out of memory",
    ),
    (
        "cudaerrormemoryallocation",
        Kind::CudaOom,
        "cudaErrorMemoryAllocation",
    ),
    (
        "allocation on device",
        Kind::CudaOom,
        "Allocation on device (cudaMallocAsync allocator)",
    ),
    (
        "cublas_status_alloc_failed",
        Kind::CudaOom,
        "CUBLAS_STATUS_ALLOC_FAILED (cuBLAS could not allocate)",
    ),
    (
        "cudnn_status_alloc_failed",
        Kind::CudaOom,
        "CUDNN_STATUS_ALLOC_FAILED (cuDNN could not allocate)",
    ),
    (
        "defaultcpuallocator",
        Kind::HostRam,
        "DefaultCPUAllocator could not allocate (system RAM)",
    ),
    (
        "for an array with shape",
        Kind::HostRam,
        "numpy could not allocate an array (system RAM)",
    ),
    (
        "arraymemoryerror",
        Kind::HostRam,
        "numpy _ArrayMemoryError (system RAM)",
    ),
    (
        "unable to mmap",
        Kind::HostRam,
        "unable to mmap (system RAM / address space)",
    ),
    (
        "cannot allocate memory",
        Kind::HostRam,
        "Cannot allocate memory (ENOMEM from the operating system)",
    ),
    (
        "can't allocate memory",
        Kind::HostRam,
        "can't allocate memory (system RAM)",
    ),
    (
        "std::bad_alloc",
        Kind::HostRam,
        "std::bad_alloc (system RAM)",
    ),
    (
        "paging file is too small",
        Kind::HostRam,
        "the Windows paging file is too small (system commit memory)",
    ),
];

/// Fallback: "out of memory" with a backend named elsewhere in the message.
const BACKEND_WORDS: &[(&str, Kind)] = &[
    ("mps", Kind::MpsOom),
    ("xpu", Kind::XpuOom),
    ("hip", Kind::HipOom),
    ("cuda", Kind::CudaOom),
];

regex!(memory_error_re, r"(?-u:\b)memoryerror(?-u:\b)");
regex!(
    torch_oom_type_re,
    r"(?-u:\b)(torch\.)?(cuda\.)?outofmemoryerror(?-u:\b)"
);

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

/// Decides the kind from the error wording, or from the outcome when there is no error text.
pub(crate) fn classify(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    error_text: &str,
) -> KindVerdict {
    let lower = error_text.to_lowercase();
    let asynchronous = ASYNC_MARKERS.iter().any(|m| lower.contains(m));
    let verdict = |kind: Kind, evidence: String| KindVerdict {
        kind,
        evidence,
        asynchronous,
    };
    match evidence.outcome {
        Some(RunOutcomeHint::Rejected) => {
            return verdict(
                Kind::Rejected,
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
                Kind::IncompleteOutput,
                format!("ComfyUI reported success, but {node} produced nothing in /history: the product is incomplete."),
            );
        }
        Some(RunOutcomeHint::Interrupted) => {
            return verdict(
                Kind::Other,
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
            return verdict(Kind::Other, format!("The message reports {why}."));
        }
    }
    if lower.contains("cublas_status_") && !lower.contains("alloc_failed") {
        return verdict(
            Kind::Other,
            "The message is a cuBLAS status other than ALLOC_FAILED; nothing in it says memory ran out.".into(),
        );
    }
    if lower.contains("cudnn_status_") && !lower.contains("alloc_failed") {
        return verdict(
            Kind::Other,
            "The message is a cuDNN status other than ALLOC_FAILED; nothing in it says memory ran out.".into(),
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
    if memory_error_re().is_match(&lower) {
        return verdict(
            Kind::HostRam,
            "Python raised MemoryError: the process could not get system RAM.".into(),
        );
    }
    if torch_oom_type_re().is_match(&lower) {
        return verdict(
            Kind::CudaOom,
            "The exception type is torch's OutOfMemoryError and no other backend is named.".into(),
        );
    }
    let why = if asynchronous {
        "The message has the asynchronous-CUDA boilerplate but no out-of-memory wording."
    } else {
        "The message has no out-of-memory wording."
    };
    verdict(Kind::Other, why.into())
}

fn classify_without_text(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    asynchronous: bool,
) -> KindVerdict {
    let verdict = |kind: Kind, evidence: String| KindVerdict {
        kind,
        evidence,
        asynchronous,
    };
    if let Some(line) = signals.death.as_deref() {
        let memory =
            line.to_lowercase().contains("oom") || line.to_lowercase().contains("out of memory");
        let tail = if memory {
            "The kernel's out-of-memory killer is named."
        } else {
            "The text does not prove that memory was the reason."
        };
        return verdict(
            Kind::ProcessKilled,
            format!("The process died without a Python error (\"{line}\"). {tail}"),
        );
    }
    match evidence.outcome {
        Some(RunOutcomeHint::ServerLost) => verdict(
            Kind::ProcessKilled,
            if signals.log_stopped {
                "The log stops mid-run without a Python error or a 'Prompt executed' line; the server process is presumed gone. The cause is not proven to be memory.".into()
            } else {
                "The server went away during the run without reporting an error; the cause is not proven to be memory.".into()
            },
        ),
        Some(RunOutcomeHint::Timeout) => verdict(
            Kind::Timeout,
            "The run did not finish within its time limit and no error was reported.".into(),
        ),
        _ => verdict(
            Kind::Other,
            "No error message and no sign of a dead server: nothing identifies a memory failure."
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(exception_type: Option<&str>, message: &str) -> (Kind, bool) {
        let evidence = Evidence {
            exception_type: exception_type.map(str::to_string),
            exception_message: Some(message.to_string()),
            ..Evidence::default()
        };
        let text = format!("{}: {message}", exception_type.unwrap_or(""));
        let v = classify(&evidence, &ConsoleSignals::default(), &text);
        (v.kind, v.asynchronous)
    }

    #[test]
    fn wording_decides_not_vendor() {
        let cases: &[(Option<&str>, &str, Kind)] = &[
            (Some("torch.OutOfMemoryError"), "CUDA out of memory. Tried to allocate 2.00 GiB.", Kind::CudaOom),
            (None, "CUDA error: out of memory\nCompile with `TORCH_USE_CUDA_DSA`", Kind::CudaOom),
            (Some("torch.OutOfMemoryError"), "Allocation on device ", Kind::CudaOom),
            (Some("torch.OutOfMemoryError"), "HIP out of memory. Tried to allocate 26.00 MiB.", Kind::HipOom),
            (Some("RuntimeError"), "MPS backend out of memory (MPS allocated: 1 GB, other allocations: 1 MB, max allowed: 2 GB).", Kind::MpsOom),
            (Some("RuntimeError"), "XPU out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.56 GiB total capacity)", Kind::XpuOom),
            (None, "Could not allocate tensor with 58982400 bytes. There is not enough GPU video memory available!", Kind::DirectmlOom),
            (Some("RuntimeError"), "[enforce fail at alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough memory: you tried to allocate 5242880 bytes.", Kind::HostRam),
            (Some("numpy.core._exceptions._ArrayMemoryError"), "Unable to allocate 10.0 GiB for an array with shape (2433, 720, 512, 3) and data type float32", Kind::HostRam),
            (Some("MemoryError"), "", Kind::HostRam),
            (Some("RuntimeError"), "unable to mmap 4294967296 bytes from file <x>: Cannot allocate memory (12)", Kind::HostRam),
            (Some("RuntimeError"), "CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasSgemm(...)`", Kind::Other),
            (Some("RuntimeError"), "HIP error: an illegal memory access was encountered", Kind::Other),
            (Some("RuntimeError"), "cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", Kind::Other),
            (Some("RuntimeError"), "GET was unable to find an engine to execute this computation", Kind::Other),
            (Some("RuntimeError"), "!handle.expired() INTERNAL ASSERT FAILED at \"CUDACachingAllocator.cpp\":1234, please report a bug to PyTorch. out of memory", Kind::Other),
            (Some("RuntimeError"), "expected scalar type Half but found Float", Kind::Other),
            (Some("RuntimeError"), "CUDA driver error: out of memory", Kind::CudaOom),
            (Some("OSError"), "[WinError 1455] The paging file is too small for this operation to complete", Kind::HostRam),
        ];
        for (ty, msg, want) in cases {
            assert_eq!(kind_of(*ty, msg).0, *want, "{msg}");
        }
    }

    #[test]
    fn asynchronous_boilerplate_is_flagged_but_not_a_kind() {
        let async_msg = "CUDA error: operation not supported\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.";
        assert_eq!(
            kind_of(Some("RuntimeError"), async_msg),
            (Kind::Other, true)
        );
        let async_oom = async_msg.replace("operation not supported", "out of memory");
        assert_eq!(kind_of(None, &async_oom), (Kind::CudaOom, true));
    }

    #[test]
    fn outcomes_without_text() {
        let signals = ConsoleSignals::default();
        for (outcome, want) in [
            (RunOutcomeHint::ServerLost, Kind::ProcessKilled),
            (RunOutcomeHint::Timeout, Kind::Timeout),
            (RunOutcomeHint::Rejected, Kind::Rejected),
            (RunOutcomeHint::Interrupted, Kind::Other),
            (RunOutcomeHint::IncompleteOutput, Kind::IncompleteOutput),
        ] {
            let e = Evidence {
                outcome: Some(outcome),
                ..Evidence::default()
            };
            assert_eq!(classify(&e, &signals, "").kind, want);
        }
    }
}
