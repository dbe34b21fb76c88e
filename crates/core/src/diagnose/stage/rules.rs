//! The stage rules: what [`super::resolve`] reads from the evidence, and the ordered table of
//! small named rules it evaluates. The first rule that answers decides; the order is the
//! semantics (traceback before the exception, before the console, before progress, before the
//! node class).

use super::super::frames::{Frame, FrameCat};
use super::super::{ConsoleSignals, ConsoleTail, Evidence, RunOutcomeHint, Stage, StageConfidence};
use super::activity::node_activity;
use super::facts::{
    classify_traceback, describe_node, generic_forward_only, model_file_reason, model_role,
    node_category, parse_frames, prog_from, resurfaced_in_cleanup, staging_reason,
    validation_refusal, Failing, ModelRole, NodeCat, Prog,
};
use crate::text::capitalize;
use crate::vocab::FailureKind;
use regex::Regex;
use std::sync::LazyLock;
use StageConfidence::{Certain, Likely};

/// Everything the rules read, derived once from the evidence.
pub(super) struct Ctx<'a> {
    pub evidence: &'a Evidence,
    pub signals: &'a ConsoleSignals,
    pub kind: FailureKind,
    pub asynchronous: bool,
    pub failing: &'a Failing,
    /// The failing node in words (`node 3 (KSampler)`).
    pub node: Option<String>,
    /// ` in node 3 (KSampler)`, or empty.
    pub in_node: String,
    /// ` at progress 3/20`, or empty.
    pub progress_text: String,
    pub frames: Vec<Frame>,
    /// The traceback's verdict (none when the error is asynchronous).
    pub tb: Option<(FrameCat, String)>,
    pub node_cat: NodeCat,
    pub latent_node: bool,
    /// Sampling progress, and whether it came from a console bar.
    pub prog: Option<(Prog, bool)>,
    /// Notes that precede the answer of a located or unlocated verdict.
    pub notes: Vec<String>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(
        evidence: &'a Evidence,
        signals: &'a ConsoleSignals,
        kind: FailureKind,
        asynchronous: bool,
        failing: &'a Failing,
    ) -> Self {
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
        // Progress: a console bar first (the last one before the failure; it proves the
        // sampling loop had started), else the timeline. A node in the run's timeline that
        // never reported progress had started and finished no step (the same as a 0/1
        // `progress_state`).
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
        Ctx {
            evidence,
            signals,
            kind,
            asynchronous,
            failing,
            node,
            in_node,
            progress_text,
            frames,
            tb,
            node_cat,
            latent_node,
            prog,
            notes,
        }
    }
}

/// A rule's answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answer {
    /// No failure stage applies; the reason alone is the evidence (the notes are not used).
    Alone(Stage, String),
    /// A stage (or `unknown`) with the stages left open, how sure, and why (after the notes).
    Found {
        stage: Stage,
        candidates: Vec<Stage>,
        confidence: StageConfidence,
        why: String,
    },
}

fn found(stage: Stage, candidates: Vec<Stage>, confidence: StageConfidence, why: String) -> Answer {
    Answer::Found {
        stage,
        candidates,
        confidence,
        why,
    }
}

/// A rule: answers, or passes to the next one.
pub(super) type Rule = fn(&Ctx) -> Option<Answer>;

/// The rules in the order they are tried; when none answers, [`unlocated`] does.
pub(super) const RULES: &[(&str, Rule)] = &[
    ("rejected", rejected),
    ("refused_at_validation", refused_at_validation),
    ("incomplete_output", incomplete_output),
    ("interrupted", interrupted),
    ("resurfaced_in_cleanup", cleanup),
    ("traceback_place", traceback_place),
    ("traceback_step", traceback_step),
    ("model_file", model_file),
    ("model_staging", model_staging),
    ("video_encoder", video_encoder),
    ("log_end_model", log_end_model),
    ("log_end_held_model", log_end_held_model),
    ("console_model_loading", console_model_loading),
    ("console_tiled_decode", console_tiled_decode),
    ("console_tiled_encode", console_tiled_encode),
    ("console_node_phase", console_node_phase),
    ("console_encoder_loaded", console_encoder_loaded),
    ("console_lora_errors", console_lora_errors),
    ("sampler_progress", sampler_progress),
    ("node_class", node_class),
    ("sampler_unresolved", sampler_unresolved),
];

/// A rejected prompt never ran.
fn rejected(c: &Ctx) -> Option<Answer> {
    (c.kind == FailureKind::Rejected).then(|| {
        Answer::Alone(
            Stage::Unknown,
            "The prompt never ran, so no stage applies.".into(),
        )
    })
}

/// The message is the server's refusal at validation (quoted by a client, or the fields of a
/// rejection read as an error): nothing ran, whatever node it names.
fn refused_at_validation(c: &Ctx) -> Option<Answer> {
    let phrase = validation_refusal(c.evidence.exception_message.as_deref()?)?;
    Some(Answer::Alone(
        Stage::Unknown,
        format!("The server refused the prompt at validation (\"{phrase} …\"), before any node ran, so no stage applies."),
    ))
}

/// An output missing after a finished run: no stage failed.
fn incomplete_output(c: &Ctx) -> Option<Answer> {
    (c.kind == FailureKind::IncompleteOutput).then(|| {
        Answer::Alone(
            Stage::Unknown,
            "The prompt ran to its end: no stage failed, an output is missing.".into(),
        )
    })
}

/// An interrupt is not a failure.
fn interrupted(c: &Ctx) -> Option<Answer> {
    (c.evidence.outcome == Some(RunOutcomeHint::Interrupted)).then(|| {
        Answer::Alone(
            Stage::Unknown,
            format!(
                "The run was interrupted{}{}; an interrupt is not a failure, so no failure stage applies.",
                c.in_node, c.progress_text
            ),
        )
    })
}

/// The traceback ends in ComfyUI's own cleanup: it points to the wrong place.
fn cleanup(c: &Ctx) -> Option<Answer> {
    let func = resurfaced_in_cleanup(&c.frames)?;
    Some(found(Stage::Unknown, vec![Stage::Unknown], StageConfidence::Unknown, format!("The traceback ends in ComfyUI's own cleanup ({func}), where an earlier GPU error resurfaced: it points to the wrong place, and nothing else shows where the failure happened{}.", c.in_node)))
}

/// 1. The traceback's deepest recognised frame names a place (load, preview, decode, …).
fn traceback_place(c: &Ctx) -> Option<Answer> {
    let (cat, frame) = c.tb.as_ref()?;
    let in_node = &c.in_node;
    let (stage, why) = match cat {
        FrameCat::Load => (Stage::Load, format!("The traceback goes through {frame}: weights were being read, patched or moved to a device{in_node}.")),
        FrameCat::Preview => (Stage::SampleMiddle, format!("The traceback ends in the live preview ({frame}){in_node}: a preview is drawn only after a step has finished, and it is not the final VAE decode.")),
        FrameCat::Decode => (Stage::Decode, format!("The traceback goes through the VAE decode ({frame}){in_node}.")),
        FrameCat::Condition => (Stage::Condition, format!("The traceback goes through an encoder ({frame}){in_node}.")),
        FrameCat::Postprocess if !c.latent_node => (Stage::Postprocess, format!("The traceback goes through post-processing of finished images ({frame}){in_node}.")),
        FrameCat::InputMedia => (Stage::Unknown, format!("The traceback ends while reading an input file ({frame}){in_node}; loading an input image or video is not a model load, and no stage fits.")),
        _ => return None,
    };
    Some(found(stage, vec![stage], Certain, why))
}

/// 1. The traceback ends inside a denoising step; progress says which.
fn traceback_step(c: &Ctx) -> Option<Answer> {
    let (FrameCat::Step, frame) = c.tb.as_ref()? else {
        return None;
    };
    if c.prog.is_none() && generic_forward_only(&c.frames) {
        // A generic layer forward with no bar, after a text encoder finished loading: the
        // forward is the encoder's (its use), as for any error after a finished load.
        if let Some(line) = encoder_ready(c) {
            return Some(found(Stage::Condition, vec![Stage::Condition, Stage::Load], Likely, format!("The traceback ends in a generic layer forward ({frame}){} with no sampling bar, and the last model ready before it is a text encoder (\"{line}\"): the forward is the encoder's, so the run was encoding the prompt (condition), possibly still loading (load).", c.in_node)));
        }
    }
    let base = format!(
        "The traceback ends inside a denoising step ({frame}){}",
        c.in_node
    );
    Some(match c.prog {
        Some((Prog::Middle(k, n), _)) => found(Stage::SampleMiddle, vec![Stage::SampleMiddle], Certain, format!("{base}, and progress shows {k}/{n} steps done.")),
        Some((Prog::Started0(n), _)) => found(Stage::SampleFirst, vec![Stage::SampleFirst], Certain, format!("{base}, and progress shows 0/{n}: no step had finished.")),
        Some((Prog::NotStarted, _)) => found(Stage::SampleFirst, vec![Stage::SampleFirst], Certain, format!("{base}, and no step progress had been reported for the node: no step had finished.")),
        _ => found(Stage::Unknown, vec![Stage::SampleFirst, Stage::SampleMiddle], Certain, format!("{base}; no progress is shown, so the first step cannot be told apart from a later one.")),
    })
}

/// 2. The exception itself names a model file being mapped or read.
fn model_file(c: &Ctx) -> Option<Answer> {
    let why = model_file_reason(c.evidence)?;
    Some(found(
        Stage::Load,
        vec![Stage::Load],
        Certain,
        format!(
            "{why}{}: reading or mapping a model file is loading.",
            c.in_node
        ),
    ))
}

/// 2. The exception is comfy-aimdo's while a model is staged for dynamic VRAM.
///
/// The model's VBAR is created then, whatever node asked for the model (a VAE encode or a
/// sampler loads first).
fn model_staging(c: &Ctx) -> Option<Answer> {
    let why = staging_reason(c.evidence)?;
    Some(found(
        Stage::Load,
        vec![Stage::Load],
        Certain,
        format!(
            "{why}{}: ComfyUI creates a model's VBAR when it stages the model for dynamic VRAM, before the model runs, so this is loading.",
            c.in_node
        ),
    ))
}

/// 2. The exception says ffmpeg failed, or names libavcodec's encoder call.
///
/// ComfyUI's and the video packs' save and combine nodes hand finished frames to ffmpeg to
/// encode a video file. A node that reads an input video (which can run ffmpeg too) is left
/// to the node rule. PyAV's `avcodec_send_frame()` (ComfyUI's `SaveVideo` writes through PyAV)
/// is libavcodec's encode entry: it hands a raw frame to an encoder, whereas decoding sends
/// packets (`avcodec_send_packet`), so it places the error whatever node is named.
fn video_encoder(c: &Ctx) -> Option<Answer> {
    let message = c.evidence.exception_message.as_deref()?.to_lowercase();
    let what = if message.contains("avcodec_send_frame") {
        "the encoder call avcodec_send_frame() failed"
    } else if message.contains("ffmpeg")
        && !matches!(c.node_cat, NodeCat::InputMedia | NodeCat::Loader)
    {
        "ffmpeg failed"
    } else {
        return None;
    };
    Some(found(
        Stage::Postprocess,
        vec![Stage::Postprocess],
        Likely,
        format!(
            "The error says {what}{}: encoding finished frames into a video file is post-processing.",
            c.in_node
        ),
    ))
}

/// 3. The last model line, when a log ends, a process dies or an error follows a ready model.
///
/// A ready model was staged, or its load finished (`loaded completely` / `loaded partially`).
/// A log that ends has no error and no sign of death. The stage is what that model is for.
/// Staged or loaded, the model was next to run; only requested, it was still loading. Both
/// stages stay open, the more likely first.
fn log_end_model(c: &Ctx) -> Option<Answer> {
    let activity = c.signals.last_model.as_ref()?;
    if matches!(c.signals.tail, Some(ConsoleTail::NodePhase(_))) {
        // A node's own line after the last model line is the later activity.
        return None;
    }
    let ended = c.signals.log_stopped && c.signals.death.is_none();
    // A process that died without a Python error: its last model line is its last activity.
    let died = c.signals.death.is_some() && c.evidence.exception_message.is_none();
    // An error after the model was staged or its load finished (`loaded completely` /
    // `loaded partially` end ModelPatcher's load): the error is in what came next, the model's
    // use; only a bare `Requested to load` (still loading) is left to the console rule.
    // `Attempting to release mmap (N)` is printed after a partial load finished (the
    // patcher's load(): ModelPatcher's, ComfyUI-GGUF's), just before the listed modules are
    // moved to the device and back to drop their file mapping. That move can run out of
    // memory (a load: the console rule), but it cannot raise a non-memory error such as a
    // shape mismatch: that one is in the model's use.
    let released = activity
        .line
        .to_lowercase()
        .starts_with("attempting to release mmap");
    let ready = activity.ready
        || (released && c.evidence.exception_message.is_some() && c.kind == FailureKind::Other);
    let ready_before_error = c.evidence.exception_message.is_some() && ready;
    // An error located in a sampler (its entry frame, or a sampler node) with no bar: the
    // sampler loads its model and then steps, so a model ready before it does not say which
    // (rule 7(b): load, first and later step stay open).
    let in_sampler =
        matches!(&c.tb, Some((FrameCat::SamplerEntry, _))) || c.node_cat == NodeCat::Sampler;
    if ready_before_error && !(ended || died) && in_sampler && c.prog.is_none() {
        return None;
    }
    if !(ended || died || ready_before_error) {
        return None;
    }
    let role = model_role(&activity.model)?;
    let sampled = c.signals.sampling_bar.is_some_and(|(v, m)| m > 0 && v >= m);
    let (stage, doing) = match role {
        ModelRole::Encoder => (Stage::Condition, "encoding the prompt"),
        ModelRole::Diffusion => (Stage::SampleFirst, "starting to sample"),
        ModelRole::Vae if sampled => (Stage::Decode, "decoding the sampled latents"),
        ModelRole::Vae => (Stage::Condition, "encoding the input images"),
        ModelRole::Postprocess => (Stage::Postprocess, "post-processing the finished images"),
    };
    let line = &activity.line;
    let model = &activity.model;
    let end = if died {
        "crash"
    } else if ended {
        "end of the log"
    } else {
        "error"
    };
    let after = if ended {
        "; nothing after that line shows the server dying"
    } else {
        ""
    };
    let (mut candidates, why) = if ready || (role == ModelRole::Vae && sampled) {
        (vec![stage, Stage::Load], format!("The last model line before the {end} is \"{line}\": {model} was ready, so the run was most likely {doing} ({}), possibly still loading weights (load). Both stay open, {} first{after}.", stage.as_str(), stage.as_str()))
    } else {
        (vec![Stage::Load, stage], format!("The last model line before the {end} is \"{line}\": {model} was still being loaded (load), for {doing} next ({}). Both stay open, load first{after}.", stage.as_str()))
    };
    if role == ModelRole::Vae && !sampled {
        // A VAE with no bar names two stages (rule 9): encoding inputs, the likelier by rule
        // 7(c), or a decode to come, which stays open.
        candidates.push(Stage::Decode);
    }
    Some(found(candidates[0], candidates, Likely, why))
}

/// `N models unloaded.` (also cut short after `models`): load_models_gpu freeing memory for
/// the models it is about to load.
static UNLOADED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\d+ models(?: unl|$)").expect("static regex"));

/// 3. A log or process that ends after sampling, as ComfyUI brings back a model it holds.
///
/// load_models_gpu prints `Requested to load X` only for a model not loaded yet, then `N
/// models unloaded.` as it frees memory. That line after a finished bar with no request after
/// the bar is a held model being brought back: the same diffusion model for another pass (a
/// second sampler, as two-pass video workflows do), or a VAE already in memory for the decode.
/// The text does not say which, so the stage stays open between the two.
fn log_end_held_model(c: &Ctx) -> Option<Answer> {
    let ended = c.signals.log_stopped && c.signals.death.is_none();
    let died = c.signals.death.is_some() && c.evidence.exception_message.is_none();
    if !(ended || died) || c.signals.last_model.is_some() {
        return None;
    }
    let Some(ConsoleTail::ModelLoading(line)) = &c.signals.tail else {
        return None;
    };
    let (_, n) = c.signals.sampling_bar.filter(|(v, m)| *m > 0 && v >= m)?;
    if !UNLOADED_RE.is_match(line.trim()) {
        return None;
    }
    let end = if died { "crash" } else { "end of the log" };
    Some(found(Stage::Unknown, vec![Stage::SampleFirst, Stage::Decode], StageConfidence::Unknown, format!("Sampling had finished ({n}/{n}) and the last line before the {end} is \"{line}\" with no `Requested to load` after the bar: ComfyUI was bringing back a model it already held, the diffusion model for another pass (sample_first) or a VAE for the decode; the text does not say which.")))
}

/// ComfyUI's line once a text encoder model is built (comfy/sd.py `CLIP`, in its loader:
/// `CLIP/text encoder model load device: …, current: …`); older versions print it after the
/// encoder's `loaded completely`, newer ones before the encode's `Requested to load`.
const ENCODER_BUILT: &str = "clip/text encoder model load device";

/// The line showing a text encoder ready as the last model activity, with no sampling bar:
/// ComfyUI's `CLIP/text encoder model load device` line, `loaded completely` after `Requested
/// to load` of an encoder, or an encoder staged or loaded as the last model line.
fn encoder_ready(c: &Ctx) -> Option<String> {
    if c.signals.sampling_bar.is_some() {
        return None;
    }
    match &c.signals.tail {
        Some(ConsoleTail::ModelLoading(line)) if line.to_lowercase().starts_with(ENCODER_BUILT) => {
            return Some(line.clone())
        }
        Some(ConsoleTail::EncoderLoaded(model)) => {
            return Some(format!("Requested to load {model} … loaded completely"))
        }
        _ => {}
    }
    let last = c.signals.last_model.as_ref()?;
    (last.ready && model_role(&last.model) == Some(ModelRole::Encoder)).then(|| last.line.clone())
}

/// 3. The console's last lines are model loading (not for a decode or post-processing node).
fn console_model_loading(c: &Ctx) -> Option<Answer> {
    let Some(ConsoleTail::ModelLoading(line)) = &c.signals.tail else {
        return None;
    };
    if c.node_cat == NodeCat::Postprocess || c.node_cat == NodeCat::Decode {
        return None;
    }
    // Sampling had finished and the VAE was being loaded: that load is the decode's (a
    // process that died without a Python error is placed by this last console evidence).
    if let Some((Prog::Done(n), _)) = c.prog {
        if is_vae_load(line) {
            return Some(found(Stage::Decode, vec![Stage::Decode], Likely, format!("Sampling had finished ({n}/{n}) and the last console line before the failure loads the VAE (\"{line}\"): the failure is in the decode.")));
        }
    }
    if line.to_lowercase().starts_with(ENCODER_BUILT) {
        return Some(found(Stage::Condition, vec![Stage::Condition, Stage::Load], Likely, format!("The last console line before the failure is \"{line}\", which ComfyUI prints once a text encoder model is built: its use comes next, so the failure is most likely in encoding the prompt (condition), possibly in moving its weights to the device (load).")));
    }
    let candidates = if c.asynchronous {
        vec![Stage::Load, Stage::SampleFirst]
    } else {
        vec![Stage::Load]
    };
    Some(found(Stage::Load, candidates, Likely, format!("The last console lines before the failure are model loading (\"{line}\") and no sampling progress follows.")))
}

/// A `Requested to load …` line of a VAE (`AutoencoderKL`, `AutoencodingEngine`, `WanVAE`,
/// `VideoVAE`, …).
fn is_vae_load(line: &str) -> bool {
    let name = line.rsplit(' ').next().unwrap_or_default().to_lowercase();
    name.contains("vae") || name.starts_with("autoencoder") || name.starts_with("autoencoding")
}

/// 3. The console says a VAE decode was retried tiled.
fn console_tiled_decode(c: &Ctx) -> Option<Answer> {
    matches!(c.signals.tail, Some(ConsoleTail::TiledDecodeRetry)).then(|| found(Stage::Decode, vec![Stage::Decode], Likely, format!("The console says regular VAE decoding ran out of memory and was retried tiled{}; the failure is in the decode.", c.in_node)))
}

/// 3. The console says a VAE encode was retried tiled.
fn console_tiled_encode(c: &Ctx) -> Option<Answer> {
    matches!(c.signals.tail, Some(ConsoleTail::TiledEncodeRetry)).then(|| found(Stage::Condition, vec![Stage::Condition], Likely, format!("The console says regular VAE encoding ran out of memory and was retried tiled{}; the failure is in encoding the inputs.", c.in_node)))
}

/// 3. A node's own line is the last activity: the work it names places the failure.
///
/// A phase line: SeedVR2 runs VAE encoding, DiT upscaling, VAE decoding and post-processing
/// inside one upscaler node and names each phase; the node as a whole works on finished frames,
/// so `postprocess` stays open second. Any other node line that says in plain words what it is
/// doing ([`super::activity::node_activity`]: `loading the diffusion model`, `Encoding image
/// with VAE`, `Upscaling`, `Running sampling`) places it by that work (issue #40's rule 7(d)),
/// unless the failing node's class already names a plain role (rule 7(b) comes first).
fn console_node_phase(c: &Ctx) -> Option<Answer> {
    let Some(ConsoleTail::NodePhase(line)) = &c.signals.tail else {
        return None;
    };
    let lower = line.to_lowercase();
    let phase = lower.contains("phase")
        && ["decoding", "encoding", "post-processing"]
            .iter()
            .any(|w| lower.contains(w));
    let (stage, what, candidates) = if phase {
        let (stage, what) = if lower.contains("decoding") {
            (Stage::Decode, "decoding latents to frames")
        } else if lower.contains("encoding") {
            (Stage::Condition, "encoding the input frames")
        } else {
            (Stage::Postprocess, "post-processing the finished frames")
        };
        let candidates = if stage == Stage::Postprocess {
            vec![stage]
        } else {
            vec![stage, Stage::Postprocess]
        };
        (stage, what, candidates)
    } else {
        let activity = node_activity(line)?;
        // A post-processing node (an upscaler) may encode and decode inside itself, as its
        // phase lines show; any other plain node class decides before its lines.
        let inner = c.node_cat == NodeCat::Postprocess
            && matches!(activity.stage, Stage::Condition | Stage::Decode);
        if !(matches!(c.node_cat, NodeCat::Other | NodeCat::Sampler) || inner) {
            return None;
        }
        let second = match activity.stage {
            _ if inner => vec![Stage::Postprocess],
            Stage::Condition | Stage::SampleFirst => vec![Stage::Load],
            Stage::Decode => vec![Stage::Postprocess],
            _ => vec![],
        };
        let mut candidates = vec![activity.stage];
        candidates.extend(second);
        (activity.stage, activity.what, candidates)
    };
    let end = if c.signals.log_stopped {
        "end of the log"
    } else if c.evidence.exception_message.is_none() && c.signals.death.is_some() {
        "crash"
    } else {
        "failure"
    };
    Some(found(stage, candidates, Likely, format!("The last activity before the {end} is the node's own line \"{line}\"{}: it was {what} ({}), and no model line or bar follows it.", c.in_node, stage.as_str())))
}

/// 3. An encoder had just loaded, no sampling followed and the node is not a sampler.
fn console_encoder_loaded(c: &Ctx) -> Option<Answer> {
    let Some(ConsoleTail::EncoderLoaded(model)) = &c.signals.tail else {
        return None;
    };
    if c.signals.sampling_bar.is_some() || c.node_cat == NodeCat::Sampler {
        return None;
    }
    Some(found(Stage::Condition, vec![Stage::Condition, Stage::Load], Likely, format!("The encoder {model} had just finished loading and no sampling progress follows: the failure is while encoding.")))
}

/// 3. `ERROR lora …` lines: LoRA patches failing during the load.
fn console_lora_errors(c: &Ctx) -> Option<Answer> {
    let Some(ConsoleTail::LoraPatchErrors(count)) = &c.signals.tail else {
        return None;
    };
    Some(found(Stage::Load, vec![Stage::Load], Likely, format!("{count} 'ERROR lora …' line(s) show LoRA patches failing while the model was being loaded.")))
}

/// 4. Progress of a sampler (likely: progress says how far it got, not what failed).
fn sampler_progress(c: &Ctx) -> Option<Answer> {
    let sampler_like = c.node_cat == NodeCat::Sampler
        || matches!(&c.tb, Some((FrameCat::SamplerEntry, _)))
        || (c.node_cat == NodeCat::Other && c.failing.node_type.is_none());
    let (p, console) = c.prog?;
    if !sampler_like {
        return None;
    }
    let source = if console {
        "the console progress bar shows"
    } else {
        "the last progress reported shows"
    };
    let in_node = &c.in_node;
    match p {
        Prog::Middle(k, n) => Some(found(Stage::SampleMiddle, vec![Stage::SampleMiddle], Likely, format!("Sampling had started{in_node} and {source} {k}/{n} steps done before the failure."))),
        Prog::Started0(n) => Some(found(Stage::SampleFirst, vec![Stage::SampleFirst], Likely, format!("{} 0/{n} right before the failure{in_node}: the sampling loop had started and no step finished.", capitalize(source)))),
        Prog::Done(n) if c.node_cat == NodeCat::Sampler => Some(found(Stage::Decode, vec![Stage::Decode], Likely, format!("{} {n}/{n}: sampling had finished, so the failure is in the sampler node's built-in decode{in_node}.", capitalize(source)))),
        Prog::Done(n) if c.failing.node_type.is_none() => Some(found(Stage::Decode, vec![Stage::Decode, Stage::Postprocess], Likely, format!("{} {n}/{n}: sampling had finished before the failure; the failing node is not named, so decode is the likely next step but post-processing is also possible.", capitalize(source)))),
        Prog::Done(_) | Prog::NotStarted => None,
    }
}

/// 5. The failing node's class (loader, encoder, decode, post-processing, input media).
fn node_class(c: &Ctx) -> Option<Answer> {
    let what = match c.node_cat {
        NodeCat::Loader => (Stage::Load, "a model loader"),
        NodeCat::Condition => (Stage::Condition, "an encoder (text, vision or VAE encode of inputs)"),
        NodeCat::Decode => (Stage::Decode, "a VAE decode"),
        NodeCat::Postprocess => (Stage::Postprocess, "which works on finished images or video (upscale, interpolation, restoration, resize or video combine)"),
        NodeCat::InputMedia => (Stage::Unknown, "which reads an input image or video file; that is not a model load, and none of the stages fits"),
        _ => return None,
    };
    let (stage, what) = what;
    let n = c.node.clone().unwrap_or_default();
    let mut why = format!("The failing node is {n}, {what}.");
    if let Some((FrameCat::SamplerEntry | FrameCat::Vae, frame)) = &c.tb {
        why.push_str(&format!(" The traceback stops at {frame}."));
    }
    let candidates = if c.node_cat == NodeCat::Condition {
        // An encoder node first loads its model; without a frame the two cannot be told apart.
        vec![Stage::Condition, Stage::Load]
    } else {
        vec![stage]
    };
    Some(found(stage, candidates, Certain, why))
}

/// A sampler (by class or by its entry frame) with nothing showing load from step.
fn sampler_unresolved(c: &Ctx) -> Option<Answer> {
    if !(c.node_cat == NodeCat::Sampler || matches!(&c.tb, Some((FrameCat::SamplerEntry, _)))) {
        return None;
    }
    let stop = match &c.tb {
        Some((FrameCat::SamplerEntry, frame)) => {
            format!("the traceback stops at the sampler's entry ({frame})")
        }
        _ => "no traceback tail is shown".to_string(),
    };
    let no_step = matches!(c.prog, Some((Prog::NotStarted, _)));
    let candidates = if no_step || c.asynchronous {
        vec![Stage::Load, Stage::SampleFirst]
    } else {
        vec![Stage::Load, Stage::SampleFirst, Stage::SampleMiddle]
    };
    let who = c.node.clone().unwrap_or_else(|| "a sampler".into());
    Some(found(Stage::Unknown, candidates, StageConfidence::Unknown, format!("The failure is in {who}, but {stop} and no step progress is visible, so loading weights inside the sampler cannot be told apart from a denoising step.")))
}

/// When no rule answers: nothing locates the failure.
pub(super) fn unlocated(c: &Ctx) -> Answer {
    let why = match &c.node {
        Some(n) => format!("The failing node is {n}; neither its class, a traceback tail nor progress places it in a stage."),
        None if c.evidence.traceback.is_empty() && c.evidence.exception_message.is_some() => {
            "Only the message is available: no node, no traceback tail and no progress.".to_string()
        }
        None if c.evidence.traceback.is_empty() => {
            "Nothing shows what the run was doing: no node, no traceback and no progress.".to_string()
        }
        None => "The traceback shows no recognisable stage and no node or progress is given.".to_string(),
    };
    let (why, candidates) = match &c.tb {
        Some((FrameCat::Vae, _)) => (
            format!("The traceback is inside a VAE but does not show whether it was encoding or decoding. {why}"),
            vec![Stage::Condition, Stage::Decode],
        ),
        _ => (why, vec![Stage::Unknown]),
    };
    found(Stage::Unknown, candidates, StageConfidence::Unknown, why)
}

#[cfg(test)]
mod tests;
