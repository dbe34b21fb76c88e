//! Stage of the run: read from the traceback (deepest recognisable frame), the console lines
//! before the failure, the progress seen, and — as a clue, not the answer — the failing node.

use super::frames::{classify_frame, matching_rule, Frame, FrameCat};
use super::{ConsoleSignals, Evidence, NodeProgress, Stage, StageConfidence};
use crate::vocab::FailureKind;

mod rules;

/// The failing node as far as the evidence names it, with its last progress.
#[derive(Debug, Clone, Default)]
pub(crate) struct Failing {
    pub node_id: Option<String>,
    pub node_type: Option<String>,
    pub progress: Option<NodeProgress>,
    /// True when the node was taken from the timeline (the node running when the server was
    /// lost or the run timed out), not from an execution_error.
    pub from_timeline: bool,
}

/// The stage, every stage left open, and the evidence in words.
pub(crate) struct StageVerdict {
    pub stage: Stage,
    pub candidates: Vec<Stage>,
    /// How sure: a frame, the exception or the node decided (`certain`), only progress or
    /// console order did (`likely`), or nothing located it (`unknown`).
    pub confidence: StageConfidence,
    pub evidence: String,
}

/// Finds the failing node and its progress.
pub(crate) fn failing_node(evidence: &Evidence) -> Failing {
    let mut failing = Failing {
        node_id: evidence.node_id.clone(),
        node_type: evidence.node_type.clone(),
        ..Failing::default()
    };
    if let Some(id) = failing.node_id.as_deref() {
        failing.progress = evidence
            .progress
            .iter()
            .rev()
            .find(|p| p.node_id == id || p.node_id.is_empty())
            .cloned();
    } else if let Some(console) = evidence
        .progress
        .iter()
        .rev()
        .find(|p| p.node_id.is_empty())
    {
        failing.progress = Some(console.clone());
    } else if failing.node_type.is_none() {
        if let Some(last) = evidence.progress.last() {
            failing.node_id = Some(last.node_id.clone());
            failing.node_type = last.class_type.clone();
            failing.progress = Some(last.clone());
            failing.from_timeline = true;
        }
    }
    if failing.node_type.is_none() {
        if let Some(p) = &failing.progress {
            failing.node_type = p.class_type.clone();
        }
    }
    failing
}

regex!(
    frame_re,
    r#"(?i)^\s*file\s+"(?P<path>[^"]+)",\s*line\s+\d+(?P<comma>,)?\s*in\s+(?P<func>[^\s]+)(?:\s+(?P<code>.*))?$"#
);

/// Frames in call order (outermost first, deepest last). Python tracebacks print them that way;
/// faulthandler crash stacks (`File "…", line N in func`, no comma) print the most recent call
/// first, so those are reversed.
fn parse_frames(traceback: &[String]) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut faulthandler = 0usize;
    for line in traceback.iter().flat_map(|l| l.lines()) {
        if let Some(c) = frame_re().captures(line) {
            if c.name("comma").is_none() {
                faulthandler += 1;
            }
            frames.push(Frame {
                path: c["path"].replace('\\', "/").to_lowercase(),
                func: c["func"].to_lowercase(),
                code: c
                    .name("code")
                    .map(|m| m.as_str().to_lowercase())
                    .unwrap_or_default(),
            });
        } else if let Some(last) = frames.last_mut() {
            let t = line.trim();
            if last.code.is_empty() && !t.is_empty() && !t.chars().all(|c| "^~ ".contains(c)) {
                last.code = t.to_lowercase();
            }
        }
    }
    if faulthandler > 0 && faulthandler == frames.len() {
        frames.reverse();
    }
    frames
}

const MEDIA_WORDS: &[&str] = &["image", "video", "audio", "mask", "frame"];

/// ComfyUI's own cleanup, where an earlier (asynchronous) GPU error resurfaces.
const CLEANUP_FUNCS: &[&str] = &[
    "soft_empty_cache",
    "unload_all_models",
    "cleanup_models",
    "cleanup_models_gc",
    "empty_cache",
    "synchronize",
];

/// The cleanup frame when the deepest ComfyUI frame is ComfyUI's error-handling cleanup: the
/// traceback then points to the wrong place.
fn resurfaced_in_cleanup(frames: &[Frame]) -> Option<String> {
    let deepest = frames.iter().rev().find(|f| {
        !(f.path.contains("/torch/") && f.path.contains("site-packages")
            || f.path.contains("/torch/cuda/"))
    })?;
    CLEANUP_FUNCS
        .contains(&deepest.func.as_str())
        .then(|| deepest.func.clone())
}

/// The traceback's verdict: the deepest strong frame, refined by weaker frames below it.
fn classify_traceback(frames: &[Frame]) -> Option<(FrameCat, String)> {
    let classified: Vec<(usize, FrameCat)> = frames
        .iter()
        .enumerate()
        .filter_map(|(i, f)| classify_frame(f).map(|c| (i, c)))
        .collect();
    let describe = |i: usize| {
        let f = &frames[i];
        let file = f.path.rsplit('/').next().unwrap_or(&f.path);
        match matching_rule(f) {
            Some(rule) => format!("{} ({file}: {})", f.func, rule.what),
            None => format!("{} ({file})", f.func),
        }
    };
    let deepest_strong = classified.iter().rev().find(|(_, c)| c.strong()).copied();
    let deepest_weak_step = classified
        .iter()
        .rev()
        .find(|(_, c)| *c == FrameCat::WeakStep)
        .copied();
    match deepest_strong {
        Some((i, FrameCat::SamplerEntry)) => match deepest_weak_step {
            Some((j, _)) if j > i => Some((FrameCat::Step, describe(j))),
            _ => Some((FrameCat::SamplerEntry, describe(i))),
        },
        Some((i, FrameCat::Step)) => match deepest_weak_step {
            Some((j, _)) if j > i => Some((
                FrameCat::Step,
                format!("{} … down to {}", describe(i), describe(j)),
            )),
            _ => Some((FrameCat::Step, describe(i))),
        },
        Some((i, cat)) => Some((cat, describe(i))),
        None => deepest_weak_step.map(|(j, _)| (FrameCat::Step, describe(j))),
    }
}

/// What the failing node's class says it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeCat {
    Loader,
    InputMedia,
    Condition,
    Sampler,
    Decode,
    Postprocess,
    Other,
}

const MODEL_WORDS: &[&str] = &[
    "checkpoint",
    "ckpt",
    "model",
    "lora",
    "unet",
    "clip",
    "vae",
    "controlnet",
    "gguf",
    "diffusion",
    "encoder",
    "t5",
    "llm",
    "ipadapter",
    "dit",
    "weights",
    "style",
];

const POSTPROCESS_WORDS: &[&str] = &[
    "upscale",
    "vfi",
    "rife",
    "film",
    "interpolat",
    "facerestore",
    "face_restore",
    "restore",
    "gfpgan",
    "codeformer",
    "reactor",
    "videocombine",
    "video_combine",
    "savevideo",
    "createvideo",
    "saveanimated",
    "imagescale",
    "image_scale",
    "imageresize",
    "image_resize",
    "resizeimage",
    "sharpen",
    "colormatch",
    "supir",
    "esrgan",
    "saveimage",
    "previewimage",
    "detailer",
];

fn node_category(class_type: &str) -> NodeCat {
    let n = class_type.to_lowercase();
    // Display names have spaces ("VAE Decode", "Image Resize"); match without separators too.
    let compact: String = n
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .collect();
    let has = |words: &[&str]| words.iter().any(|w| n.contains(w) || compact.contains(w));
    if n.contains("load") {
        if has(MODEL_WORDS) {
            return NodeCat::Loader;
        }
        if has(MEDIA_WORDS) || n.contains("path") {
            return NodeCat::InputMedia;
        }
        return NodeCat::Loader;
    }
    if has(POSTPROCESS_WORDS) && !n.contains("latent") {
        return NodeCat::Postprocess;
    }
    if n.contains("decode") {
        return NodeCat::Decode;
    }
    if n.contains("encode")
        || n.contains("conditioning")
        || compact.contains("clipvision")
        || n.contains("ipadapter")
    {
        return NodeCat::Condition;
    }
    if n.contains("sampler") || n.contains("sample") {
        return NodeCat::Sampler;
    }
    NodeCat::Other
}

/// Sampling progress as seen before the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prog {
    /// No step progress seen (the node had started, nothing more).
    NotStarted,
    /// The sampling loop had started (a 0/N bar) and no step finished.
    Started0(u64),
    /// k of N steps finished.
    Middle(u64, u64),
    /// All N steps finished.
    Done(u64),
}

fn prog_from(value: u64, max: u64, console: bool) -> Prog {
    if value == 0 {
        if console || max > 1 {
            Prog::Started0(max)
        } else {
            Prog::NotStarted
        }
    } else if value < max {
        Prog::Middle(value, max)
    } else {
        Prog::Done(max)
    }
}

/// The failing node in words: `node 3 (KSampler)`; a node inside a subgraph by its own id and
/// where it sits (`node 125 (KSampler) in subgraph #140` for `140:125`).
fn describe_node(f: &Failing) -> Option<String> {
    use crate::workflow::label::{split_hierarchical, subgraph_location};
    let no_names = indexmap::IndexMap::new();
    match (f.node_id.as_deref(), f.node_type.as_deref()) {
        (Some(id), Some(t)) if !id.is_empty() => Some(match subgraph_location(id, &no_names) {
            Some(location) => format!("node {} ({t}) in {location}", split_hierarchical(id).1),
            None => format!("node {id} ({t})"),
        }),
        (_, Some(t)) => Some(t.to_string()),
        (Some(id), None) if !id.is_empty() => Some(format!("node {id}")),
        _ => None,
    }
}

/// Model-file extensions: an error that names one of these while mapping or reading it is a load.
const MODEL_FILE_EXTENSIONS: &[&str] = &[
    ".safetensors",
    ".sft",
    ".ckpt",
    ".pt",
    ".pth",
    ".bin",
    ".gguf",
];

/// Messages that say a model file itself could not be read (its header or format).
const MODEL_FILE_MESSAGES: &[(&str, &str)] = &[
    ("safetensorerror", "safetensors could not read a model file"),
    (
        "error while deserializing header",
        "a .safetensors header could not be read",
    ),
    ("headertoolarge", "a .safetensors header could not be read"),
];

regex!(
    mmap_file_re,
    r"(?i)unable to mmap \d+ bytes from file <(?P<file>[^>]+)>"
);

/// Why the exception itself shows a model file being mapped or read, when it does.
fn model_file_reason(evidence: &Evidence) -> Option<String> {
    let text = format!(
        "{} {}",
        evidence.exception_type.as_deref().unwrap_or(""),
        evidence.exception_message.as_deref().unwrap_or("")
    );
    if let Some(c) = mmap_file_re().captures(&text) {
        let file = c["file"].to_string();
        let lower = file.to_lowercase();
        if MODEL_FILE_EXTENSIONS.iter().any(|e| lower.ends_with(e)) {
            let name = file.rsplit(['/', '\\']).next().unwrap_or(&file).to_string();
            return Some(format!(
                "The error is about mapping the model file {name} into memory"
            ));
        }
    }
    let lower = text.to_lowercase();
    MODEL_FILE_MESSAGES
        .iter()
        .find(|(needle, _)| lower.contains(needle))
        .map(|(_, what)| format!("The error says {what}"))
}

/// Decides the stage, for every kind of failure: the first rule of [`rules::RULES`] that
/// answers, tried in order — the kind and outcome that leave no stage, traceback frames (unless
/// the error is asynchronous), an exception that names a model file, the console lines before
/// the failure, progress, then the node class. Nothing locating it gives `unknown`.
pub(crate) fn resolve(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    kind: FailureKind,
    asynchronous: bool,
    failing: &Failing,
) -> StageVerdict {
    let ctx = rules::Ctx::new(evidence, signals, kind, asynchronous, failing);
    let answer = rules::RULES
        .iter()
        .find_map(|(_, rule)| rule(&ctx))
        .unwrap_or_else(|| rules::unlocated(&ctx));
    verdict_of(answer, ctx.notes)
}

/// The verdict for a rule's answer: the notes, then its reason; an unknown stage is never more
/// than `unknown` sure, and the stage is always among the candidates (an unknown stage lists
/// the stages left open after it).
fn verdict_of(answer: rules::Answer, mut notes: Vec<String>) -> StageVerdict {
    match answer {
        rules::Answer::Alone(stage, why) => single(stage, why),
        rules::Answer::Found {
            stage,
            mut candidates,
            confidence,
            why,
        } => {
            notes.push(why);
            let confidence = if stage == Stage::Unknown {
                StageConfidence::Unknown
            } else {
                confidence
            };
            if !candidates.contains(&stage) {
                candidates.insert(0, stage);
            }
            StageVerdict {
                stage,
                candidates,
                confidence,
                evidence: notes.join(" "),
            }
        }
    }
}

fn single(stage: Stage, why: String) -> StageVerdict {
    StageVerdict {
        stage,
        candidates: vec![stage],
        confidence: StageConfidence::Unknown,
        evidence: why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(lines: &[&str]) -> Vec<Frame> {
        parse_frames(&lines.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_node_inside_a_subgraph_is_described_by_its_own_id_and_its_instance() {
        let failing = |id: &str| Failing {
            node_id: Some(id.into()),
            node_type: Some("KSampler".into()),
            progress: None,
            from_timeline: false,
        };
        assert_eq!(
            describe_node(&failing("140:125")).as_deref(),
            Some("node 125 (KSampler) in subgraph #140")
        );
        assert_eq!(
            describe_node(&failing("3")).as_deref(),
            Some("node 3 (KSampler)")
        );
    }

    #[test]
    fn load_inside_sampler_is_load() {
        let f = frames(&[
            r#"  File "/c/nodes.py", line 1, in sample"#,
            r#"  File "/c/comfy/model_management.py", line 444, in model_load"#,
            r#"  File "/c/comfy/model_patcher.py", line 555, in patch_weight_to_device"#,
            r#"  File "/c/comfy/model_management.py", line 999, in cast_to_device"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Load);
    }

    #[test]
    fn preview_inside_sampler_is_preview() {
        let f = frames(&[
            r#"  File "/c/comfy/k_diffusion/sampling.py", line 1, in sample_euler"#,
            r#"  File "/c/latent_preview.py", line 2, in callback"#,
            r#"  File "/c/comfy/taesd/taesd.py", line 3, in decode"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Preview);
    }

    #[test]
    fn vae_attention_stays_decode() {
        let f = frames(&[
            r#"  File "/c/nodes.py", line 1, in decode"#,
            r#"  File "/c/comfy/ldm/models/autoencoder.py", line 211, in decode"#,
            r#"  File "/c/comfy/ldm/modules/diffusionmodules/model.py", line 255, in normal_attention"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Decode);
    }

    #[test]
    fn model_forward_below_sampler_entry_is_a_step() {
        let f = frames(&[
            r#"  File "/c/nodes.py", line 1467, in sample"#,
            r#"  File "/v/site-packages/torch/nn/modules/module.py", line 1747, in _call_impl"#,
            r#"  File "/c/comfy/ldm/flux/model.py", line 184, in forward"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Step);
    }

    #[test]
    fn error_resurfacing_in_cleanup_is_not_located() {
        let f = frames(&[
            r#"  File "/c/execution.py", line 1, in execute"#,
            r#"  File "/c/comfy/model_management.py", line 2, in soft_empty_cache"#,
            r#"  File "/v/site-packages/torch/cuda/memory.py", line 3, in empty_cache"#,
        ]);
        assert_eq!(
            resurfaced_in_cleanup(&f).as_deref(),
            Some("soft_empty_cache")
        );
        let f = frames(&[r#"  File "/c/comfy/model_patcher.py", line 1, in partially_load"#]);
        assert_eq!(resurfaced_in_cleanup(&f), None);
    }

    fn verdict(evidence: &Evidence, kind: FailureKind, signals: &ConsoleSignals) -> StageVerdict {
        resolve(evidence, signals, kind, false, &failing_node(evidence))
    }

    #[test]
    fn a_non_memory_error_keeps_the_stage_of_its_place() {
        let e = Evidence {
            node_type: Some("VAEEncodeTiled".into()),
            exception_message: Some("INTERNAL ASSERT FAILED".into()),
            ..Evidence::default()
        };
        let v = verdict(&e, FailureKind::Other, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::Condition);
        assert_eq!(v.confidence, StageConfidence::Certain);
        let e = Evidence {
            exception_message: Some("mat1 and mat2 shapes cannot be multiplied".into()),
            traceback: vec![
                r#"  File "/c/comfy/samplers.py", line 1, in sample"#.into(),
                r#"  File "/c/comfy/k_diffusion/sampling.py", line 2, in sample_euler"#.into(),
            ],
            ..Evidence::default()
        };
        let signals = ConsoleSignals {
            sampling_bar: Some((7, 20)),
            ..ConsoleSignals::default()
        };
        assert_eq!(
            verdict(&e, FailureKind::Other, &signals).stage,
            Stage::SampleMiddle
        );
    }

    #[test]
    fn mapping_or_reading_a_model_file_is_load() {
        for msg in [
            "unable to mmap 23802932552 bytes from file <ComfyUI/models/unet/flux1-dev.safetensors>: Cannot allocate memory (12)",
            "Error while deserializing header: HeaderTooLarge",
        ] {
            let e = Evidence {
                exception_message: Some(msg.into()),
                ..Evidence::default()
            };
            let v = verdict(&e, FailureKind::HostRam, &ConsoleSignals::default());
            assert_eq!(v.stage, Stage::Load, "{msg}");
            assert_eq!(v.confidence, StageConfidence::Certain, "{msg}");
        }
        // An input image is not a model file.
        let e = Evidence {
            exception_message: Some(
                "unable to mmap 100 bytes from file <input/cat.png>: Cannot allocate memory (12)"
                    .into(),
            ),
            ..Evidence::default()
        };
        assert_eq!(
            verdict(&e, FailureKind::HostRam, &ConsoleSignals::default()).stage,
            Stage::Unknown
        );
    }

    #[test]
    fn nothing_locating_it_is_unknown_not_a_default() {
        let e = Evidence {
            node_type: Some("KSampler".into()),
            exception_message: Some("CUDA out of memory.".into()),
            ..Evidence::default()
        };
        let v = verdict(&e, FailureKind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::Unknown);
        assert_eq!(v.confidence, StageConfidence::Unknown);
        assert_eq!(
            v.candidates,
            vec![
                Stage::Unknown,
                Stage::Load,
                Stage::SampleFirst,
                Stage::SampleMiddle
            ]
        );
        assert!(
            v.evidence.contains("cannot be told apart"),
            "{}",
            v.evidence
        );
    }

    #[test]
    fn progress_alone_is_likely() {
        let e = Evidence {
            node_type: Some("KSampler".into()),
            exception_message: Some("CUDA out of memory.".into()),
            ..Evidence::default()
        };
        let signals = ConsoleSignals {
            sampling_bar: Some((0, 30)),
            ..ConsoleSignals::default()
        };
        let v = verdict(&e, FailureKind::CudaOom, &signals);
        assert_eq!(v.stage, Stage::SampleFirst);
        assert_eq!(v.confidence, StageConfidence::Likely);
    }

    #[test]
    fn a_timeline_node_without_progress_had_finished_no_step() {
        let e = Evidence {
            node_id: Some("3".into()),
            node_type: Some("KSampler".into()),
            exception_message: Some("CUDA out of memory.".into()),
            traceback: vec![
                r#"  File "/c/nodes.py", line 1, in sample"#.into(),
                r#"  File "/c/comfy/k_diffusion/sampling.py", line 2, in sample_euler"#.into(),
            ],
            progress: vec![NodeProgress {
                node_id: "3".into(),
                class_type: Some("KSampler".into()),
                value: 0,
                max: 0,
            }],
            ..Evidence::default()
        };
        let v = verdict(&e, FailureKind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::SampleFirst, "{}", v.evidence);
        // Without the timeline entry, first and later step stay open.
        let e = Evidence {
            progress: vec![],
            ..e
        };
        let v = verdict(&e, FailureKind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::Unknown);
        assert_eq!(
            v.candidates,
            vec![Stage::Unknown, Stage::SampleFirst, Stage::SampleMiddle]
        );
    }

    #[test]
    fn faulthandler_stacks_are_read_deepest_first() {
        // faulthandler prints the most recent call first and no comma before `in`.
        let f = frames(&[
            r#"File "E:/a/site-packages/torch/storage.py", line 314 in __getitem__"#,
            r#"File "E:/a/site-packages/safetensors/torch.py", line 310 in load_file"#,
            r#"File "E:/a/custom_nodes/ComfyUI-SUPIR/sgm/modules/encoders/modules.py", line 465 in __init__"#,
        ]);
        assert_eq!(f.first().unwrap().func, "__init__");
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Load);
    }

    #[test]
    fn node_classes() {
        assert_eq!(node_category("VHS_LoadVideoPath"), NodeCat::InputMedia);
        assert_eq!(node_category("NunchakuQwenImageDiTLoader"), NodeCat::Loader);
        assert_eq!(node_category("UpscaleModelLoader"), NodeCat::Loader);
        assert_eq!(node_category("RIFE VFI"), NodeCat::Postprocess);
        assert_eq!(node_category("vhs_videocombine"), NodeCat::Postprocess);
        assert_eq!(node_category("VAEDecodeTiled"), NodeCat::Decode);
        assert_eq!(node_category("CLIPTextEncode"), NodeCat::Condition);
        assert_eq!(node_category("BNK_Unsampler"), NodeCat::Sampler);
        assert_eq!(node_category("SamplerCustomAdvanced"), NodeCat::Sampler);
        assert_eq!(node_category("LatentUpscaleBy"), NodeCat::Other);
    }
}
