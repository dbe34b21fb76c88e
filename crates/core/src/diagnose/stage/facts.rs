//! What the stage rules read from the evidence, below both `stage.rs` and `stage/rules.rs`:
//! the failing node and its progress ([`Failing`]), the traceback's frames and their verdict,
//! what a node's class says it does, what a model class is for ([`model_role`]), an exception
//! that names a model file, and the server's words when it refuses a prompt at validation.

pub(super) use super::super::frames::parse_frames;
use super::super::frames::{classify_frame, matching_rule, Frame, FrameCat};
use super::super::{Evidence, NodeProgress};
use regex::Regex;
use std::sync::LazyLock;

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
pub(super) fn resurfaced_in_cleanup(frames: &[Frame]) -> Option<String> {
    let deepest = frames.iter().rev().find(|f| {
        !(f.path.contains("/torch/") && f.path.contains("site-packages")
            || f.path.contains("/torch/cuda/"))
    })?;
    CLEANUP_FUNCS
        .contains(&deepest.func.as_str())
        .then(|| deepest.func.clone())
}

/// The traceback's verdict: the deepest strong frame, refined by weaker frames below it.
pub(super) fn classify_traceback(frames: &[Frame]) -> Option<(FrameCat, String)> {
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

/// True when the traceback's only recognised frames are generic forwards (`forward`,
/// `__call__`, attention, matched by the function's name alone, such as comfy/ops.py's layer
/// `forward`): they show a model running, but not which model.
pub(super) fn generic_forward_only(frames: &[Frame]) -> bool {
    let mut rules = frames
        .iter()
        .filter_map(matching_rule)
        .filter(|r| r.cat.is_some());
    let mut any = false;
    let generic = rules.all(|r| {
        any = true;
        r.cat == Some(FrameCat::WeakStep) && r.path.is_empty()
    });
    any && generic
}

/// What the failing node's class says it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeCat {
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
    // Model families whose names hold a media word (Z-Image, Qwen-Image, HunyuanImage): a
    // loader named after one loads that model, not an input image.
    "zimage",
    "qwenimage",
    "hunyuanimage",
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

pub(super) fn node_category(class_type: &str) -> NodeCat {
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
    // ComfyUI's image-to-video conditioning nodes (WanImageToVideo, LTXVImgToVideo,
    // HunyuanImageToVideo, …) encode the start image with the VAE into the video latent.
    if compact.contains("imagetovideo") || compact.contains("imgtovideo") {
        return NodeCat::Condition;
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
pub(super) enum Prog {
    /// No step progress seen (the node had started, nothing more).
    NotStarted,
    /// The sampling loop had started (a 0/N bar) and no step finished.
    Started0(u64),
    /// k of N steps finished.
    Middle(u64, u64),
    /// All N steps finished.
    Done(u64),
}

pub(super) fn prog_from(value: u64, max: u64, console: bool) -> Prog {
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
pub(super) fn describe_node(f: &Failing) -> Option<String> {
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
    // gguf-py's GGUFReader (ComfyUI-GGUF reads model files with it) on a file whose first bytes
    // are not a GGUF header.
    (
        "gguf magic invalid",
        "a GGUF model file's header could not be read",
    ),
];

/// Mapping or loading a named file: `unable to mmap N bytes from file <…>` (PyTorch's
/// safetensors mapping), llama-cpp-python's `Failed to load model from file: …` (the GGUF
/// language-model nodes).
static MMAP_FILE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:unable to mmap \d+ bytes from file <(?P<file>[^>]+)>|failed to load model from file:\s*(?P<path>\S(?:.*\S)?))").expect("static regex")
});

/// Why the exception itself shows a model file being mapped or read, when it does.
pub(super) fn model_file_reason(evidence: &Evidence) -> Option<String> {
    let text = format!(
        "{} {}",
        evidence.exception_type.as_deref().unwrap_or(""),
        evidence.exception_message.as_deref().unwrap_or("")
    );
    if let Some(c) = MMAP_FILE_RE.captures(&text) {
        let file = c
            .name("file")
            .or(c.name("path"))
            .map_or(String::new(), |m| m.as_str().to_string());
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

/// Messages comfy-aimdo raises while a model's VBAR (its reserved range of GPU addresses) is
/// created: ComfyUI creates it when it stages a model for dynamic VRAM (`ModelPatcherDynamic`'s
/// load, before `prepared for dynamic VRAM loading` is printed), and no weight is copied then.
const STAGING_MESSAGES: &[(&str, &str)] = &[
    (
        "vbar allocation failed",
        "comfy-aimdo could not reserve the model's VBAR (VBAR allocation failed)",
    ),
    (
        "is not initialized",
        "comfy-aimdo has no context for the model's device (device … is not initialized)",
    ),
];

/// Why the exception shows a model being staged for dynamic VRAM, when it does.
pub(super) fn staging_reason(evidence: &Evidence) -> Option<String> {
    let lower = evidence
        .exception_message
        .as_deref()
        .unwrap_or("")
        .to_lowercase();
    STAGING_MESSAGES
        .iter()
        .find(|(needle, _)| {
            lower.contains(needle)
                && (*needle != "is not initialized" || lower.contains("comfy-aimdo device"))
        })
        .map(|(_, what)| format!("The error says {what}"))
}

/// What a model is for, read from its class name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelRole {
    Encoder,
    Diffusion,
    Vae,
    Postprocess,
}

/// The role of the model class `model` names (`SDXLClipModel` → an encoder, `WanVAE` → a VAE),
/// when its name tells.
pub(crate) fn model_role(model: &str) -> Option<ModelRole> {
    let m = model.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| m.contains(w));
    // ComfyUI's VAE classes: `AutoencoderKL`, its base `AutoencodingEngine`
    // (comfy/ldm/models/autoencoder.py, the Flux / SD3 / Z-Image VAE), `WanVAE`, ….
    if has(&["vae", "autoencoder", "autoencoding"]) {
        Some(ModelRole::Vae)
    } else if has(&["upscale", "esrgan", "rife", "film", "interpolat", "swinir"]) {
        Some(ModelRole::Postprocess)
    } else if has(&[
        "clip",
        "temodel",
        "t5",
        "textencoder",
        "text_encoder",
        "llama",
        "gemma",
        "umt5",
        "qwen25",
    ]) {
        Some(ModelRole::Encoder)
    } else if has(&[
        "unet",
        "wan",
        "flux",
        "zimage",
        "ltx",
        "hunyuan",
        "qwenimage",
        "sd3",
        "sdxl",
        "basemodel",
        "cosmos",
        "chroma",
        "hidream",
        "lumina",
        "mochi",
        "auraflow",
        "pixart",
        "stablecascade",
    ]) {
        Some(ModelRole::Diffusion)
    } else {
        None
    }
}

/// What execution.py's `validate_prompt` answers when it refuses a prompt before any node runs
/// (an `invalid_prompt` or `prompt_outputs_failed_validation` error).
const VALIDATION_REFUSALS: &str =
    "cannot execute because|prompt outputs failed validation|failed to validate prompt";
/// The reasons its `validate_inputs` gives per input (each error's `message`; the value and the
/// bound vary).
const VALIDATION_REASONS: &str = r"required input is missing|value not in list|value \S+ (?:smaller|bigger) than (?:min|max) of|failed to convert an input value to an? \w+ value|return type mismatch between linked nodes|bad linked input|exception when validating (?:inner )?node|custom validation failed for node";
static VALIDATION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("(?i){VALIDATION_REFUSALS}|{VALIDATION_REASONS}")).expect("static regex")
});
static VALIDATION_REASON_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#"(?i)^(?:[-*]\s*)?"?(?:{VALIDATION_REASONS})"#)).expect("static regex")
});

/// The words in `message` that say the server refused the prompt at validation (a refusal or
/// one of its reasons), lower-cased.
pub(crate) fn validation_refusal(message: &str) -> Option<String> {
    VALIDATION_RE
        .find(message)
        .map(|m| m.as_str().to_lowercase())
}

/// A line listing a reason the prompt was refused (`  - Value not in list: ckpt_name: 'x' not
/// in [...]`, as the console or the frontend's dialog prints it).
pub(crate) fn is_validation_reason(line: &str) -> bool {
    VALIDATION_REASON_LINE_RE.is_match(line)
}
