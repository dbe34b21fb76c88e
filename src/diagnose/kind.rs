//! Failure kind by wording. The vendor does not matter (ZLUDA and some ROCm builds print CUDA
//! wording); look-alikes such as cuBLAS statuses or illegal memory access are `other`.

use super::{ConsoleSignals, Evidence, Kind, RunOutcomeHint};
use regex::Regex;
use std::sync::OnceLock;

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
    ("mps backend out of memory", Kind::MpsOom, "MPS backend out of memory"),
    ("xpu out of memory", Kind::XpuOom, "XPU out of memory"),
    ("xpu error: out of memory", Kind::XpuOom, "XPU error: out of memory"),
    (
        "out_of_device_memory",
        Kind::XpuOom,
        "UR/PI out-of-device-memory status (Intel runtime)",
    ),
    ("hip out of memory", Kind::HipOom, "HIP out of memory"),
    ("hip error: out of memory", Kind::HipOom, "HIP error: out of memory"),
    ("hiperroroutofmemory", Kind::HipOom, "hipErrorOutOfMemory"),
    (
        "not enough gpu video memory",
        Kind::DirectmlOom,
        "not enough GPU video memory (torch-directml)",
    ),
    ("cuda out of memory", Kind::CudaOom, "CUDA out of memory"),
    ("cuda error: out of memory", Kind::CudaOom, "CUDA error: out of memory"),
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
    ("unable to mmap", Kind::HostRam, "unable to mmap (system RAM / address space)"),
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
    ("std::bad_alloc", Kind::HostRam, "std::bad_alloc (system RAM)"),
];

fn memory_error_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\bmemoryerror\b").expect("static regex"))
}

fn torch_oom_type_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\b(torch\.)?(cuda\.)?outofmemoryerror\b").expect("static regex"))
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
        let memory = line.to_lowercase().contains("oom")
            || line.to_lowercase().contains("out of memory");
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
