//! What to check next, by stage and kind, and the unproven candidate explanations. Numbers are
//! used only when they are consistent; nothing here names a root cause.

use super::{Numbers, Stage};
use crate::vocab::FailureKind;

pub(crate) struct AdviceInput<'a> {
    pub kind: FailureKind,
    pub stage: Stage,
    pub stage_candidates: &'a [Stage],
    pub numbers: &'a Numbers,
    pub numbers_consistent: bool,
    pub fragmentation: bool,
    pub asynchronous: bool,
    pub interrupted: bool,
}

pub(crate) struct Advice {
    pub next_check: Vec<String>,
    pub candidates: Vec<String>,
}

/// The check for one stage (issue contract: load → weight copies and other processes; condition
/// → encoder batch and residency; sample_first → latent shape and attention workspace;
/// sample_middle → cache, preview and branch records; decode → decoder batch, tiles and
/// residency; postprocess → upscale, interpolation and frame buffers).
fn stage_check(stage: Stage) -> &'static str {
    match stage {
        Stage::Load => "Weight copies and other processes: compare the size of the model files being loaded (plus one float32 copy per weight patched by a LoRA) with the free memory, check which models stayed loaded from earlier nodes or runs, and what other processes hold on the device (nvidia-smi / rocm-smi).",
        Stage::Condition => "Encoder batch and residency: check how many prompts, images or frames the encoder takes at once and whether the text/vision encoder (or the VAE for encoding inputs) sits on the device next to the diffusion model.",
        Stage::SampleFirst => "Latent shape and attention workspace: check width × height × frames × batch of the latent and which attention implementation runs (launch flags for xformers / PyTorch SDPA / split or sub-quadratic attention); the first step needs the full attention workspace at once.",
        Stage::SampleMiddle => "Cache, preview and branch records: check what grows between steps — model or block caches, live previews (preview method, TAESD), and per-step branches (CFG, ControlNet, IP-Adapter, regional or multiple conditionings).",
        Stage::Decode => "Decoder batch, tiles and residency: check frames × batch of the latents being decoded, whether tiled decoding is used and its tile size, and whether the diffusion model and encoders are still resident during the decode.",
        Stage::Postprocess => "Upscale, interpolation and frame buffers: check the upscale factor and tile size, the interpolation multiplier × frame count, and how many full-resolution frames the video nodes hold at once (often in system RAM).",
        Stage::Unknown => "Where it failed: paste the console from `got prompt` to the error (progress bars, `Requested to load` lines and the full traceback), or run the workflow through comfy-bisect, which records the node timeline.",
    }
}

fn stage_candidates(stage: Stage) -> &'static [&'static str] {
    match stage {
        Stage::Load => &[
            "the model weights need more memory than is free when they are loaded",
            "LoRA or other weight patches need an extra temporary copy of each patched weight",
            "models from earlier nodes or runs are still resident",
            "another process holds memory on the device",
        ],
        Stage::Condition => &[
            "a large text or vision encoder is resident together with the diffusion model",
            "too many prompts, images or frames are encoded in one batch",
            "the input image or video is encoded at full resolution without tiling",
        ],
        Stage::SampleFirst => &[
            "the latent (resolution × frames × batch) needs a larger attention workspace than is free",
            "the attention implementation in use has no memory-efficient kernel for this shape",
            "the resident weights leave too little room for the activations of one step",
        ],
        Stage::SampleMiddle => &[
            "a cache that grows across steps",
            "live preview decoding during sampling",
            "extra per-step branches (CFG with several conditionings, ControlNet, IP-Adapter)",
            "weights being swapped in and out during steps (low-VRAM offloading)",
        ],
        Stage::Decode => &[
            "the latents are decoded at full size (many frames or a large batch) without tiling",
            "the tile size is too large for the free memory",
            "the diffusion model or encoders are still resident during the decode",
        ],
        Stage::Postprocess => &[
            "the upscale model runs on the whole image instead of tiles",
            "the interpolation multiplier × frame count needs more memory than is free",
            "all output frames are buffered in memory for video encoding",
            "an image is resized to a very large size",
        ],
        Stage::Unknown => &[],
    }
}

use crate::units::mib;

/// Advice for one diagnosis.
pub(crate) fn advise(input: &AdviceInput) -> Advice {
    let mut next_check: Vec<String> = Vec::new();
    let mut candidates: Vec<String> = Vec::new();
    match input.kind {
        FailureKind::Other if input.interrupted => {
            next_check.push("The run was interrupted, not failed: rerun it without interrupting to see whether it fails.".into());
            return Advice {
                next_check,
                candidates,
            };
        }
        FailureKind::Other => {
            next_check.push("This is not an out-of-memory failure: look up the exception message itself; lowering memory use is not expected to help.".into());
            if input.asynchronous {
                next_check.push("Rerun with CUDA_LAUNCH_BLOCKING=1 (slower) so the error is raised where it happens.".into());
            }
            return Advice {
                next_check,
                candidates,
            };
        }
        FailureKind::Unknown => {
            next_check.push("No failure was found in the input: paste the console from `got prompt` to the error, or the execution_error / /history JSON.".into());
            return Advice {
                next_check,
                candidates,
            };
        }
        FailureKind::IncompleteOutput => {
            next_check.push("Read the run's server.log around the output node: a save node that writes nothing (a disabled or misconfigured custom save node, a full or read-only output folder) is not a memory failure.".into());
            return Advice {
                next_check,
                candidates,
            };
        }
        FailureKind::Rejected => {
            next_check.push("Fix what the server's validation reported (node_errors: missing models, values outside their range or list, broken links), then submit again.".into());
            return Advice {
                next_check,
                candidates,
            };
        }
        FailureKind::Timeout => {
            next_check.push("Check whether the server was still making progress or was stuck: if it was only slow, raise --timeout; a run that slows to a crawl is often swapping (system RAM full).".into());
            candidates.push("the run was still progressing but slower than the limit".into());
            candidates.push("the server was swapping because system RAM was full".into());
        }
        FailureKind::ProcessKilled => {
            next_check.push("Check the kernel log (`dmesg -T | grep -i -E 'killed process|out of memory'` or `journalctl -k`) or the Windows Event Viewer to see whether the operating system ended the server, and compare the server's RAM use with system RAM and swap.".into());
            candidates.push("system RAM (not VRAM) ran out, e.g. while weights were staged in RAM or many frames were held".into());
            candidates.push("a crash in native code unrelated to memory".into());
        }
        FailureKind::HostRam => {
            next_check.push("Check system RAM and swap/pagefile during the run (free -h, Task Manager): what else holds RAM, and whether the server's RAM grows from run to run.".into());
            candidates
                .push("system RAM and swap are too small for what this step holds in RAM".into());
            candidates
                .push("memory kept from earlier runs (cached outputs, models held in RAM)".into());
            if let Some(req) = input.numbers.requested_mib.filter(|r| *r > 1024.0 * 1024.0) {
                next_check.push(format!("The single request is {} (over 1 TiB, more than a machine's RAM): check the tensor shape that produced it (dimensions, frame count, batch).", mib(req)));
            }
        }
        FailureKind::Aimdo => {
            next_check.push("This is an error of ComfyUI's dynamic-VRAM offloader (comfy-aimdo), not a plain out-of-memory: note the comfy-aimdo version (startup log or /system_stats), then rerun once with --disable-pinned-memory and once with --disable-dynamic-vram; a failure that goes away with one of them is in the offloader's path. A failure only on the second run of the same workflow points at state kept between runs.".into());
            candidates.push("the offloader could not map or fault in weights (its own error, reported as not an OOM)".into());
            candidates.push(
                "reading staged weights from host memory or disk failed (pinned host memory)"
                    .into(),
            );
        }
        FailureKind::MpsOom => {
            next_check.push("On Apple silicon the GPU shares system memory: check what else uses RAM; the 'max allowed' figure is a watermark, and raising it trades system stability.".into());
        }
        _ => {}
    }

    next_check.push(stage_check(input.stage).to_string());
    for &other in input.stage_candidates {
        if other != input.stage && other != Stage::Unknown {
            next_check.push(format!(
                "If it was {}: {}",
                other.as_str(),
                stage_check(other)
            ));
        }
    }
    let mut stages = vec![input.stage];
    stages.extend(
        input
            .stage_candidates
            .iter()
            .copied()
            .filter(|s| *s != input.stage),
    );
    for s in stages {
        for c in stage_candidates(s) {
            if !candidates.iter().any(|x| x == c) {
                candidates.push((*c).to_string());
            }
        }
    }

    if input.asynchronous {
        next_check.push("Rerun with CUDA_LAUNCH_BLOCKING=1 (slower) so the error is raised where it happens; until then the failing location is not reliable.".into());
    }
    if !input.kind.is_gpu_oom() {
        return Advice {
            next_check,
            candidates,
        };
    }
    let n = input.numbers;
    if !input.numbers_consistent {
        next_check.push("Some printed numbers contradict each other (see the inconsistencies); they are kept as printed and not used to reason.".into());
        return Advice {
            next_check,
            candidates,
        };
    }
    if let Some(other) = n.other_processes_mib.filter(|o| *o > 0.0) {
        next_check.push(format!(
            "Other processes hold {} on this device: check them with nvidia-smi / rocm-smi.",
            mib(other)
        ));
    }
    let capacity = n.total_mib.or(n.device_limit_mib).or(n.mps_max_allowed_mib);
    if let (Some(req), Some(cap)) = (n.requested_mib, capacity) {
        if req > cap {
            next_check.push(format!("The single request ({}) is larger than the whole device ({}): look at the size of that one tensor (resolution, frames, batch, attention), not at what else is resident.", mib(req), mib(cap)));
        }
    }
    if input.fragmentation {
        if let Some(gap) = n.reserved_gap_mib() {
            candidates.push(format!(
                "fragmentation: not proven ({} reserved by PyTorch but unallocated)",
                mib(gap)
            ));
            next_check.push("A large reserved-but-unallocated gap is visible: setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_HIP_ALLOC_CONF on ROCm) is a test of the fragmentation idea, not a fix.".into());
        }
    }
    if let (Some(total), Some(free), Some(alloc)) = (n.total_mib, n.free_mib, n.allocated_mib) {
        let reserved = n
            .reserved_total_mib
            .unwrap_or(0.0)
            .max(alloc + n.reserved_unallocated_mib.unwrap_or(0.0));
        let unaccounted = total - free - reserved;
        if unaccounted > total * 0.1 {
            candidates.push(format!("{} of the device is in use but not by this process's PyTorch allocator (other processes, the CUDA context, other libraries)", mib(unaccounted)));
        }
    }
    if let (Some(limit), Some(alloc), Some(req), Some(free)) = (
        n.device_limit_mib,
        n.allocated_mib,
        n.requested_mib,
        n.free_mib,
    ) {
        if alloc + req < limit && free <= 0.0 {
            candidates.push(format!("the device reports nothing free although allocated + request ({}) is below the device limit ({}): memory is held outside this allocator", mib(alloc + req), mib(limit)));
        }
    }
    Advice {
        next_check,
        candidates,
    }
}
