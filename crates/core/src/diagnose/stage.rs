//! Stage of the run: read from the traceback (deepest recognisable frame), the console lines
//! before the failure, the progress seen, and — as a clue, not the answer — the failing node.

use super::frames::{classify_frame, matching_rule, Frame, FrameCat};
use super::parse::ConsoleTail;
use super::{ConsoleSignals, Evidence, Kind, NodeProgress, RunOutcomeHint, Stage, StageConfidence};

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

fn describe_node(f: &Failing) -> Option<String> {
    match (f.node_id.as_deref(), f.node_type.as_deref()) {
        (Some(id), Some(t)) if !id.is_empty() => Some(format!("node {id} ({t})")),
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

/// Decides the stage, for every kind of failure. Traceback frames first (unless the error is
/// asynchronous), then an exception that names a model file, then the console lines before the
/// failure, then progress, then the node class. Nothing locating it gives `unknown`.
pub(crate) fn resolve(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    kind: Kind,
    asynchronous: bool,
    failing: &Failing,
) -> StageVerdict {
    let node = describe_node(failing);
    let in_node = node
        .as_deref()
        .map(|n| format!(" in {n}"))
        .unwrap_or_default();
    let progress_text = failing
        .progress
        .as_ref()
        .filter(|p| p.max > 0)
        .map(|p| format!(" at progress {}/{}", p.value, p.max))
        .unwrap_or_default();
    if kind == Kind::Rejected {
        return single(
            Stage::Unknown,
            "The prompt never ran, so no stage applies.".into(),
        );
    }
    if kind == Kind::IncompleteOutput {
        return single(
            Stage::Unknown,
            "The prompt ran to its end: no stage failed, an output is missing.".into(),
        );
    }
    if evidence.outcome == Some(RunOutcomeHint::Interrupted) {
        return single(Stage::Unknown, format!(
            "The run was interrupted{in_node}{progress_text}; an interrupt is not a failure, so no failure stage applies."
        ));
    }

    let mut notes: Vec<String> = Vec::new();
    if failing.from_timeline {
        if let Some(n) = &node {
            notes.push(format!("The last node running was {n}."));
        }
    }
    if asynchronous {
        notes.push("The error says it may be reported asynchronously, so the traceback location is unreliable and is not used.".into());
    }
    let frames = parse_frames(&evidence.traceback);
    if let Some(func) = resurfaced_in_cleanup(&frames) {
        notes.push(format!("The traceback ends in ComfyUI's own cleanup ({func}), where an earlier GPU error resurfaced: it points to the wrong place, and nothing else shows where the failure happened{in_node}."));
        return StageVerdict {
            stage: Stage::Unknown,
            candidates: vec![Stage::Unknown],
            confidence: StageConfidence::Unknown,
            evidence: notes.join(" "),
        };
    }
    let tb = if asynchronous {
        None
    } else {
        classify_traceback(&frames)
    };
    let node_cat = failing
        .node_type
        .as_deref()
        .map(node_category)
        .unwrap_or(NodeCat::Other);
    let latent_node = failing
        .node_type
        .as_deref()
        .is_some_and(|t| t.to_lowercase().contains("latent"));

    // Progress: a console bar first (the last one before the failure; it proves the sampling
    // loop had started), else the timeline.
    // A node in the run's timeline that never reported progress had started and finished no
    // step (the same as a 0/1 `progress_state`).
    let prog = match signals.sampling_bar {
        Some((v, m)) => Some((prog_from(v, m, true), true)),
        None => failing.progress.as_ref().map(|p| {
            if p.max > 0 {
                (prog_from(p.value, p.max, false), false)
            } else {
                (Prog::NotStarted, false)
            }
        }),
    };

    use StageConfidence::{Certain, Likely};
    let finish = |stage: Stage,
                  candidates: Vec<Stage>,
                  confidence: StageConfidence,
                  mut notes: Vec<String>,
                  why: String| {
        notes.push(why);
        let confidence = if stage == Stage::Unknown {
            StageConfidence::Unknown
        } else {
            confidence
        };
        // `stage` is always among the candidates; an unknown stage lists the stages left open
        // after it.
        let mut candidates = candidates;
        if !candidates.contains(&stage) {
            candidates.insert(0, stage);
        }
        StageVerdict {
            stage,
            candidates,
            confidence,
            evidence: notes.join(" "),
        }
    };

    // 1. The traceback: the deepest frame the frame table recognises.
    if let Some((cat, frame)) = &tb {
        let verdict = match cat {
            FrameCat::Load => Some((Stage::Load, format!("The traceback goes through {frame}: weights were being read, patched or moved to a device{in_node}."))),
            FrameCat::Preview => Some((Stage::SampleMiddle, format!("The traceback ends in the live preview ({frame}){in_node}: a preview is drawn only after a step has finished, and it is not the final VAE decode."))),
            FrameCat::Decode => Some((Stage::Decode, format!("The traceback goes through the VAE decode ({frame}){in_node}."))),
            FrameCat::Condition => Some((Stage::Condition, format!("The traceback goes through an encoder ({frame}){in_node}."))),
            FrameCat::Postprocess if !latent_node => Some((Stage::Postprocess, format!("The traceback goes through post-processing of finished images ({frame}){in_node}."))),
            FrameCat::InputMedia => Some((Stage::Unknown, format!("The traceback ends while reading an input file ({frame}){in_node}; loading an input image or video is not a model load, and no stage fits."))),
            _ => None,
        };
        if let Some((stage, why)) = verdict {
            return finish(stage, vec![stage], Certain, notes, why);
        }
        if *cat == FrameCat::Step {
            let base = format!("The traceback ends inside a denoising step ({frame}){in_node}");
            return match prog {
                Some((Prog::Middle(k, n), _)) => finish(Stage::SampleMiddle, vec![Stage::SampleMiddle], Certain, notes, format!("{base}, and progress shows {k}/{n} steps done.")),
                Some((Prog::Started0(n), _)) => finish(Stage::SampleFirst, vec![Stage::SampleFirst], Certain, notes, format!("{base}, and progress shows 0/{n}: no step had finished.")),
                Some((Prog::NotStarted, _)) => finish(Stage::SampleFirst, vec![Stage::SampleFirst], Certain, notes, format!("{base}, and no step progress had been reported for the node: no step had finished.")),
                _ => finish(Stage::Unknown, vec![Stage::SampleFirst, Stage::SampleMiddle], Certain, notes, format!("{base}; no progress is shown, so the first step cannot be told apart from a later one.")),
            };
        }
    }

    // 2. The exception itself names a model file being mapped or read.
    if let Some(why) = model_file_reason(evidence) {
        return finish(
            Stage::Load,
            vec![Stage::Load],
            Certain,
            notes,
            format!("{why}{in_node}: reading or mapping a model file is loading."),
        );
    }

    // 3. What the console showed right before the failure (order only: likely).
    match &signals.tail {
        Some(ConsoleTail::ModelLoading(line))
            if node_cat != NodeCat::Postprocess && node_cat != NodeCat::Decode =>
        {
            return finish(
                Stage::Load,
                if asynchronous { vec![Stage::Load, Stage::SampleFirst] } else { vec![Stage::Load] },
                Likely,
                notes,
                format!("The last console lines before the failure are model loading (\"{line}\") and no sampling progress follows."),
            );
        }
        Some(ConsoleTail::TiledDecodeRetry) => {
            return finish(
                Stage::Decode,
                vec![Stage::Decode],
                Likely,
                notes,
                format!("The console says regular VAE decoding ran out of memory and was retried tiled{in_node}; the failure is in the decode."),
            );
        }
        Some(ConsoleTail::TiledEncodeRetry) => {
            return finish(
                Stage::Condition,
                vec![Stage::Condition],
                Likely,
                notes,
                format!("The console says regular VAE encoding ran out of memory and was retried tiled{in_node}; the failure is in encoding the inputs."),
            );
        }
        Some(ConsoleTail::EncoderLoaded(model))
            if signals.sampling_bar.is_none() && node_cat != NodeCat::Sampler =>
        {
            return finish(
                Stage::Condition,
                vec![Stage::Condition, Stage::Load],
                Likely,
                notes,
                format!("The encoder {model} had just finished loading and no sampling progress follows: the failure is while encoding."),
            );
        }
        Some(ConsoleTail::LoraPatchErrors(count)) => {
            return finish(
                Stage::Load,
                vec![Stage::Load],
                Likely,
                notes,
                format!("{count} 'ERROR lora …' line(s) show LoRA patches failing while the model was being loaded."),
            );
        }
        _ => {}
    }

    // 4. Progress of the sampler (likely: progress says how far it got, not what failed).
    let sampler_like = node_cat == NodeCat::Sampler
        || matches!(&tb, Some((FrameCat::SamplerEntry, _)))
        || (node_cat == NodeCat::Other && failing.node_type.is_none());
    if let Some((p, console)) = prog {
        let source = if console {
            "the console progress bar shows"
        } else {
            "the last progress reported shows"
        };
        if sampler_like {
            match p {
                Prog::Middle(k, n) => {
                    return finish(Stage::SampleMiddle, vec![Stage::SampleMiddle], Likely, notes, format!("Sampling had started{in_node} and {source} {k}/{n} steps done before the failure."));
                }
                Prog::Started0(n) => {
                    return finish(Stage::SampleFirst, vec![Stage::SampleFirst], Likely, notes, format!("{} 0/{n} right before the failure{in_node}: the sampling loop had started and no step finished.", capitalise(source)));
                }
                Prog::Done(n) => {
                    if node_cat == NodeCat::Sampler {
                        return finish(Stage::Decode, vec![Stage::Decode], Likely, notes, format!("{} {n}/{n}: sampling had finished, so the failure is in the sampler node's built-in decode{in_node}.", capitalise(source)));
                    }
                    if failing.node_type.is_none() {
                        return finish(Stage::Decode, vec![Stage::Decode, Stage::Postprocess], Likely, notes, format!("{} {n}/{n}: sampling had finished before the failure; the failing node is not named, so decode is the likely next step but post-processing is also possible.", capitalise(source)));
                    }
                }
                Prog::NotStarted => {}
            }
        }
    }

    // 5. The node class.
    let from_node = |stage: Stage, what: &str| {
        let n = node.clone().unwrap_or_default();
        (stage, format!("The failing node is {n}, {what}."))
    };
    let verdict = match node_cat {
        NodeCat::Loader => Some(from_node(Stage::Load, "a model loader")),
        NodeCat::Condition => Some(from_node(Stage::Condition, "an encoder (text, vision or VAE encode of inputs)")),
        NodeCat::Decode => Some(from_node(Stage::Decode, "a VAE decode")),
        NodeCat::Postprocess => Some(from_node(Stage::Postprocess, "which works on finished images or video (upscale, interpolation, restoration, resize or video combine)")),
        NodeCat::InputMedia => Some(from_node(Stage::Unknown, "which reads an input image or video file; that is not a model load, and none of the stages fits")),
        _ => None,
    };
    if let Some((stage, mut why)) = verdict {
        if let Some((FrameCat::SamplerEntry | FrameCat::Vae, frame)) = &tb {
            why.push_str(&format!(" The traceback stops at {frame}."));
        }
        let candidates = if node_cat == NodeCat::Condition {
            // An encoder node first loads its model; without a frame the two cannot be told apart.
            vec![Stage::Condition, Stage::Load]
        } else {
            vec![stage]
        };
        return finish(stage, candidates, Certain, notes, why);
    }
    if node_cat == NodeCat::Sampler || matches!(&tb, Some((FrameCat::SamplerEntry, _))) {
        let stop = match &tb {
            Some((FrameCat::SamplerEntry, frame)) => {
                format!("the traceback stops at the sampler's entry ({frame})")
            }
            _ => "no traceback tail is shown".to_string(),
        };
        let no_step = matches!(prog, Some((Prog::NotStarted, _)));
        let candidates = if no_step || asynchronous {
            vec![Stage::Load, Stage::SampleFirst]
        } else {
            vec![Stage::Load, Stage::SampleFirst, Stage::SampleMiddle]
        };
        let who = node.clone().unwrap_or_else(|| "a sampler".into());
        return finish(
            Stage::Unknown,
            candidates,
            StageConfidence::Unknown,
            notes,
            format!("The failure is in {who}, but {stop} and no step progress is visible, so loading weights inside the sampler cannot be told apart from a denoising step."),
        );
    }
    if let Some((FrameCat::Vae, _)) = &tb {
        notes.push(
            "The traceback is inside a VAE but does not show whether it was encoding or decoding."
                .into(),
        );
    }
    let why = match &node {
        Some(n) => format!("The failing node is {n}; neither its class, a traceback tail nor progress places it in a stage."),
        None if evidence.traceback.is_empty() && evidence.exception_message.is_some() => {
            "Only the message is available: no node, no traceback tail and no progress.".to_string()
        }
        None if evidence.traceback.is_empty() => {
            "Nothing shows what the run was doing: no node, no traceback and no progress.".to_string()
        }
        None => "The traceback shows no recognisable stage and no node or progress is given.".to_string(),
    };
    let candidates = match &tb {
        Some((FrameCat::Vae, _)) => vec![Stage::Condition, Stage::Decode],
        _ => vec![Stage::Unknown],
    };
    finish(
        Stage::Unknown,
        candidates,
        StageConfidence::Unknown,
        notes,
        why,
    )
}

fn single(stage: Stage, why: String) -> StageVerdict {
    StageVerdict {
        stage,
        candidates: vec![stage],
        confidence: StageConfidence::Unknown,
        evidence: why,
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(lines: &[&str]) -> Vec<Frame> {
        parse_frames(&lines.iter().map(|s| s.to_string()).collect::<Vec<_>>())
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

    fn verdict(evidence: &Evidence, kind: Kind, signals: &ConsoleSignals) -> StageVerdict {
        resolve(evidence, signals, kind, false, &failing_node(evidence))
    }

    #[test]
    fn a_non_memory_error_keeps_the_stage_of_its_place() {
        let e = Evidence {
            node_type: Some("VAEEncodeTiled".into()),
            exception_message: Some("INTERNAL ASSERT FAILED".into()),
            ..Evidence::default()
        };
        let v = verdict(&e, Kind::Other, &ConsoleSignals::default());
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
            verdict(&e, Kind::Other, &signals).stage,
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
            let v = verdict(&e, Kind::HostRam, &ConsoleSignals::default());
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
            verdict(&e, Kind::HostRam, &ConsoleSignals::default()).stage,
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
        let v = verdict(&e, Kind::CudaOom, &ConsoleSignals::default());
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
        let v = verdict(&e, Kind::CudaOom, &signals);
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
        let v = verdict(&e, Kind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::SampleFirst, "{}", v.evidence);
        // Without the timeline entry, first and later step stay open.
        let e = Evidence {
            progress: vec![],
            ..e
        };
        let v = verdict(&e, Kind::CudaOom, &ConsoleSignals::default());
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
