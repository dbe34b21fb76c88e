//! The phrases a failure is read by, in the order they decide: comfy-aimdo's own errors first
//! (its Python raises and its C logger's lines, which the console parser also needs to tell
//! its error from the wrapper around it), then each backend's out-of-memory wordings, host RAM,
//! and the look-alikes that only sound like memory. Data for [`super::classify`].

use crate::vocab::FailureKind;

/// Phrases that mark an asynchronous (deferred) GPU error report.
pub(super) const ASYNC_MARKERS: &[&str] = &[
    "asynchronously reported",
    "cuda_launch_blocking",
    "hip_launch_blocking",
];

/// Look-alikes: memory-adjacent wording that is not an out-of-memory message.
pub(super) const LOOKALIKES: &[(&str, &str)] = &[
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
pub(super) const WORDING: &[(&str, FailureKind, &str)] = &[
    // The dynamic-VRAM offloader (comfy-aimdo, ComfyUI ≥ 0.15) first: its errors are neither a
    // CUDA OOM nor a host-RAM failure (ComfyUI issues #12943, #15269, #15255, #12763).
    (
        "vram allocation failed (non oom)",
        FailureKind::Aimdo,
        "VRAM Allocation failed (non OOM) (comfy-aimdo)",
    ),
    (
        "fault failed",
        FailureKind::Aimdo,
        "Fault failed (comfy-aimdo)",
    ),
    (
        "hostbuffer.read_file_slice failed",
        FailureKind::Aimdo,
        "HostBuffer.read_file_slice failed (comfy-aimdo)",
    ),
    // Its other host-buffer errors (`HostBuffer allocation failed`, `HostBuffer.extend|register|
    // truncate|unregister failed`, checked in comfy-aimdo's sources): HostBuffer is its class.
    (
        "hostbuffer",
        FailureKind::Aimdo,
        "HostBuffer failed (comfy-aimdo's pinned host buffer)",
    ),
    (
        "vbar allocation failed",
        FailureKind::Aimdo,
        "VBAR allocation failed (comfy-aimdo)",
    ),
    // comfy_aimdo's other allocators (checked in comfy-aimdo's sources: `VRAM grow failed: N
    // bytes`, `ModelMMAP allocation failed for <file>`, `VRAM destroy failed: device context
    // unavailable`).
    (
        "vram grow failed",
        FailureKind::Aimdo,
        "VRAM grow failed (comfy-aimdo)",
    ),
    (
        "modelmmap allocation failed",
        FailureKind::Aimdo,
        "ModelMMAP allocation failed (comfy-aimdo's model file mapping)",
    ),
    (
        "vram destroy failed",
        FailureKind::Aimdo,
        "VRAM destroy failed (comfy-aimdo)",
    ),
    // comfy_aimdo/model_vbar.py's `alloc` when the model's VBAR (its reserved GPU address range)
    // is full: `MemoryError("VBAR OOM")`, aimdo's own limit, not system RAM.
    (
        "vbar oom",
        FailureKind::Aimdo,
        "VBAR OOM (comfy-aimdo's VBAR address range full)",
    ),
    // comfy_aimdo/malloc_graph.py raises it when its recorded allocation graph cannot be
    // compiled (ComfyUI ≥ 0.37's model compiler on dynamic VRAM).
    (
        "aimdo memory compile error",
        FailureKind::Aimdo,
        "aimdo memory compile error (comfy-aimdo's malloc graph)",
    ),
    // comfy_aimdo.vram_buffer's reservation of its cast buffer (comfy-aimdo issues #45, #49).
    (
        "vram reservation failed",
        FailureKind::Aimdo,
        "VRAM reservation failed (comfy-aimdo)",
    ),
    // comfy-aimdo's host-buffer file reader (ComfyUI issues #14239, #15286).
    (
        "hostbuf_file_reader_read failed",
        FailureKind::Aimdo,
        "hostbuf_file_reader_read failed (comfy-aimdo)",
    ),
    // comfy_aimdo.control raises these when a device context is missing: `get_devctx` (called
    // when a model's VBAR is created, ComfyUI-MultiGPU#202) and its record calls.
    (
        "comfy-aimdo device",
        FailureKind::Aimdo,
        "comfy-aimdo device … is not initialized (comfy-aimdo)",
    ),
    (
        "comfy-aimdo is not initialized",
        FailureKind::Aimdo,
        "comfy-aimdo is not initialized (comfy-aimdo)",
    ),
    // comfy_aimdo.control's start-up error: its native library could not be loaded.
    (
        "comfy-aimdo failed to load",
        FailureKind::Aimdo,
        "comfy-aimdo failed to load (its start-up error)",
    ),
    // OpenCV's allocator (`cv::OutOfMemoryError`, raised as `cv2.error: … error: (-4:Insufficient
    // memory) Failed to allocate N bytes in function 'OutOfMemoryError'`) allocates system RAM.
    (
        "(-4:insufficient memory)",
        FailureKind::HostRam,
        "OpenCV's Insufficient memory (it could not allocate system RAM)",
    ),
    (
        "mps backend out of memory",
        FailureKind::MpsOom,
        "MPS backend out of memory",
    ),
    (
        "xpu out of memory",
        FailureKind::XpuOom,
        "XPU out of memory",
    ),
    (
        "xpu error: out of memory",
        FailureKind::XpuOom,
        "XPU error: out of memory",
    ),
    (
        "out_of_device_memory",
        FailureKind::XpuOom,
        "UR/PI out-of-device-memory status (Intel runtime)",
    ),
    // intel-extension-for-pytorch turns the SYCL runtime's OUT_OF_RESOURCES status into this
    // RuntimeError on its XPU device (its `DPCPP_EXT_SUBMIT` macro; axolotl-on-Arc guides quote
    // it as the XPU's out-of-memory error).
    (
        "allocation is out of device memory",
        FailureKind::XpuOom,
        "Allocation is out of device memory (intel-extension-for-pytorch on an XPU)",
    ),
    (
        "hip out of memory",
        FailureKind::HipOom,
        "HIP out of memory",
    ),
    (
        "hip error: out of memory",
        FailureKind::HipOom,
        "HIP error: out of memory",
    ),
    (
        "not enough gpu video memory",
        FailureKind::DirectmlOom,
        "not enough GPU video memory (torch-directml)",
    ),
    (
        "cuda out of memory",
        FailureKind::CudaOom,
        "CUDA out of memory",
    ),
    (
        "cuda error: out of memory",
        FailureKind::CudaOom,
        "CUDA error: out of memory",
    ),
    // A native library's own CUDA allocation failing (ggml, under llama.cpp and the GGUF
    // language-model nodes: `ggml_backend_cuda_buffer_type_alloc_buffer: allocating N MiB on
    // device 0: cudaMalloc failed: out of memory`, before the Python wrapper's `Failed to load
    // model from file`).
    (
        NATIVE_CUDA_OOM,
        FailureKind::CudaOom,
        "cudaMalloc failed: out of memory (a native library's CUDA allocation)",
    ),
    (
        "cudaerrormemoryallocation",
        FailureKind::CudaOom,
        "cudaErrorMemoryAllocation",
    ),
    // After the CUDA wordings: PyTorch's ROCm build prints its CUDA wording (`CUDA error: out
    // of memory`) and then a hint naming HIP's status (``Search for `hipErrorOutOfMemory' in
    // https://rocm.docs.amd.com/…``, the hipified form of the CUDA build's
    // ``Search for `cudaErrorMemoryAllocation'``): the kind follows the message's wording, the
    // hint decides only a message that has no other.
    (
        "hiperroroutofmemory",
        FailureKind::HipOom,
        "hipErrorOutOfMemory",
    ),
    (
        "allocation on device",
        FailureKind::CudaOom,
        "Allocation on device (cudaMallocAsync allocator)",
    ),
    (
        "cublas_status_alloc_failed",
        FailureKind::CudaOom,
        "CUBLAS_STATUS_ALLOC_FAILED (cuBLAS could not allocate)",
    ),
    (
        "cudnn_status_alloc_failed",
        FailureKind::CudaOom,
        "CUDNN_STATUS_ALLOC_FAILED (cuDNN could not allocate)",
    ),
    (
        "defaultcpuallocator",
        FailureKind::HostRam,
        "DefaultCPUAllocator could not allocate (system RAM)",
    ),
    (
        "for an array with shape",
        FailureKind::HostRam,
        "numpy could not allocate an array (system RAM)",
    ),
    (
        "arraymemoryerror",
        FailureKind::HostRam,
        "numpy _ArrayMemoryError (system RAM)",
    ),
    (
        "unable to mmap",
        FailureKind::HostRam,
        "unable to mmap (system RAM / address space)",
    ),
    (
        "cannot allocate memory",
        FailureKind::HostRam,
        "Cannot allocate memory (ENOMEM from the operating system)",
    ),
    (
        "can't allocate memory",
        FailureKind::HostRam,
        "can't allocate memory (system RAM)",
    ),
    (
        "std::bad_alloc",
        FailureKind::HostRam,
        "std::bad_alloc (system RAM)",
    ),
    (
        "paging file is too small",
        FailureKind::HostRam,
        "the Windows paging file is too small (system commit memory)",
    ),
    // The same Windows errors by their codes, which a localised Windows keeps while it
    // translates the text (`[WinError 1455] 页面文件太小，无法完成操作。`): 1455 is
    // ERROR_COMMITMENT_LIMIT (the paging file), 8 and 14 are ERROR_NOT_ENOUGH_MEMORY and
    // ERROR_OUTOFMEMORY. Rust code (safetensors) prints the first as `(os error 1455)`; its
    // `os error 8` is left out, since on Linux errno 8 is an exec-format error.
    (
        "[winerror 1455]",
        FailureKind::HostRam,
        "[WinError 1455]: the Windows paging file is too small (system commit memory)",
    ),
    (
        "os error 1455",
        FailureKind::HostRam,
        "os error 1455: the Windows paging file is too small (system commit memory)",
    ),
    (
        "[winerror 8]",
        FailureKind::HostRam,
        "[WinError 8]: not enough memory resources (Windows, system RAM)",
    ),
    (
        "[winerror 14]",
        FailureKind::HostRam,
        "[WinError 14]: not enough memory resources (Windows, system RAM)",
    ),
];

/// Fallback: "out of memory" with a backend named elsewhere in the message.
pub(super) const BACKEND_WORDS: &[(&str, FailureKind)] = &[
    ("mps", FailureKind::MpsOom),
    ("xpu", FailureKind::XpuOom),
    ("hip", FailureKind::HipOom),
    ("cuda", FailureKind::CudaOom),
];

/// A native library's CUDA allocation failing, as ggml logs it (see [`WORDING`]).
const NATIVE_CUDA_OOM: &str = "cudamalloc failed: out of memory";

/// Whether a lower-cased line is a native allocator's out-of-memory report (ggml's
/// `cudaMalloc failed: out of memory`): more specific than the Python exception its wrapper
/// raises after it (llama-cpp-python's `Failed to load model from file`).
pub(crate) fn names_native_oom(lower: &str) -> bool {
    lower.contains(NATIVE_CUDA_OOM)
}

/// Whether a lower-cased text names one of comfy-aimdo's errors in its work (a `WORDING` phrase
/// of kind `aimdo`; not `comfy_aimdo.control`'s own set-up, whose phrases name `comfy-aimdo`):
/// more specific than the Python exception that wraps it.
pub(crate) fn names_aimdo_error(lower: &str) -> bool {
    WORDING.iter().any(|(phrase, kind, _)| {
        *kind == FailureKind::Aimdo && !phrase.starts_with("comfy-aimdo") && lower.contains(phrase)
    })
}

/// comfy-aimdo's C logger at ERROR or CRITICAL level (`aimdo: <file>:<line>:<LEVEL>:…`, its
/// `plat.h` `do_log`: `aimdo: src/vrambuf.c:42:ERROR:vrambuf_create: …`, `…:CRITICAL:Host OOM`),
/// or its hook installer's error as a paste shows it without the prefix (`aimdo:
/// install_hook_entries: Hook cuMemAlloc_v2 failed 0x…`, logged at ERROR when a CUDA entry point
/// cannot be detoured).
pub(crate) fn is_aimdo_error_line(lower: &str) -> bool {
    lower.split_once("aimdo:").is_some_and(|(_, rest)| {
        rest.contains(":error:")
            || rest.contains(":critical:")
            || (rest.contains("install_hook_entries: hook") && rest.contains(" failed"))
    })
}
