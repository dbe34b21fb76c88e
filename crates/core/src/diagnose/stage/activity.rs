//! A node's own log line that says in plain words what it is doing (issue #40's labelling rule
//! 7(d)): `loading the diffusion model`, `Encoding image with VAE`, `VAE decoding`, `Upscaling`,
//! `Running sampling`. The console parser marks such a line as activity when ComfyUI's own
//! readers (model management, bars) do not recognise it; the stage rules read the stage it
//! names when it is the last activity before the end or the error. Lines that only report
//! (`… complete`, `done`, timings, memory figures) name no work in progress and are not matched.

use crate::vocab::Stage;
use regex::Regex;
use std::sync::LazyLock;

/// What a node's log line says it is doing, when it says so in plain words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeActivity {
    /// The stage the work belongs to.
    pub stage: Stage,
    /// The work in words, for the evidence.
    pub what: &'static str,
}

/// What a run prints before the words: a timestamp, `[Node-Name]` / `[INFO]` tags, an elapsed
/// time, a log level, emoji and rule glyphs.
static PREFIX_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\s+|\[[^\]]{0,60}\]|\d{4}-\d\d-\d\d[t ]?[\d:.,]*z?|\d{1,2}:\d\d:\d\d(?:[.,]\d+)?|(?:info|debug|warning|warn|log)\s*[:|-]|[^\p{L}\p{N}\s\[]+)")
        .expect("static regex")
});

/// A line that reports finished work or figures, not work under way (`📊 After phase 1 (VAE
/// encoding):` reports a phase that is over).
static REPORT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:complete[ds]?|completion|done|finished|succeeded|successfully|took|elapsed|summary|skipp(?:ed|ing)|failed|error)\b|^after\b|\bafter (?:phase|stage|step)\b|✓|✔|✅")
        .expect("static regex")
});

/// A listing of models being read (SwarmUI's `Loading models list...`), not a model.
static LISTING_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:models?|checkpoints?|loras?)\s+(?:list|lists|index|metadata|info|cache|folders?|paths?|registry|database|catalog)\b")
        .expect("static regex")
});

/// Words that show an input file being read, not latents being decoded.
static INPUT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:input|file|audio)\b").expect("static regex"));

/// The activity patterns, tried in order (a VAE encode before a video encode).
static ACTIVITY: LazyLock<Vec<(Regex, Stage, &'static str)>> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(&format!("(?i){p}")).expect("static regex");
    vec![
        // llama.cpp's loader reporting as it reads a GGUF file (`llama_model_loader: loaded meta
        // data …`, `load_tensors: offloading 28 repeating layers to GPU`), under the GGUF
        // language-model nodes.
        (
            re(
                r"^(?:llama_model_loader|llm_load_tensors|load_tensors|llama_model_load\w*|llama_load_model_from_file):",
            ),
            Stage::Load,
            "llama.cpp loading a model",
        ),
        (
            re(
                r"\bloading\s+(?:[\w.-]+\s+){0,3}?(?:models?|weights|checkpoints?|transformer|pipeline|(?:feature\s+)?extractor|unet|dit|vae|text\s+encoder|lora|engine)\b|\bbuilding\s+(?:[\w.-]+\s+){0,2}?engine\b",
            ),
            Stage::Load,
            "loading a model",
        ),
        (
            re(r"\bencoding\b.*\bwith\s+(?:the\s+)?vae\b|\bvae[\s_-]?encod(?:e|ing)\b"),
            Stage::Condition,
            "encoding inputs with the VAE",
        ),
        (
            re(r"^encoding\s+(?:the\s+)?(?:prompts?|text|conditioning)\b"),
            Stage::Condition,
            "encoding the prompt",
        ),
        (
            re(r"\bvae[\s_-]?decod(?:e|ing)\b|\bdecoding\b.*\bwith\s+(?:the\s+)?vae\b|^decoding\b"),
            Stage::Decode,
            "decoding latents",
        ),
        (
            re(
                r"^(?:upscaling|interpolating)\b|\b(?:saving|encoding|writing)\s+(?:the\s+)?(?:output\s+)?video\b|\bframe interpolation\b",
            ),
            Stage::Postprocess,
            "working on finished frames",
        ),
        (
            re(r"^sampling\b|\b(?:running|starting|start|begin(?:ning)?)\b.{0,40}\bsampling\b"),
            Stage::SampleFirst,
            "sampling",
        ),
    ]
});

/// Lines other threads and libraries print while a run goes on, which are not the run's
/// activity: ComfyUI-Manager's registry fetch and notices, Crystools' banner, Python warnings
/// and the source line `warnings.warn` shows, ComfyUI's attention choice, blank lines.
static BACKGROUND_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:$|fetch comfyregistry data|fetch data from|\[comfyui-manager\]|\[crystools|\[done\]$|warnings\.warn\(|using [\w\s-]*attention(?: in vae)?\s*$|.*\b\w*warning: )")
        .expect("static regex")
});

/// True for a line that is background output, not the run's activity.
pub(crate) fn is_background_line(line: &str) -> bool {
    BACKGROUND_RE.is_match(line.trim())
}

/// The words of a log line without what the run prints before them.
fn words(line: &str) -> &str {
    let mut rest = line;
    while let Some(m) = PREFIX_RE.find(rest) {
        if m.end() == 0 {
            break;
        }
        rest = &rest[m.end()..];
    }
    rest.trim_end()
}

/// The work a node's log line names, when it says in plain words that it is doing it now.
pub(crate) fn node_activity(line: &str) -> Option<NodeActivity> {
    if is_background_line(line) {
        return None;
    }
    let w = words(line);
    if w.is_empty() || REPORT_RE.is_match(w) || w.chars().count() > 200 {
        return None;
    }
    let lower = w.to_lowercase();
    // Latents upscaled between two sampling passes are not post-processing; reading an input
    // file (`Decoding input video …`) is no stage.
    let latent = lower.contains("latent");
    let input = INPUT_RE.is_match(&lower);
    ACTIVITY
        .iter()
        .find(|(re, stage, _)| {
            re.is_match(w)
                && !(latent && *stage == Stage::Postprocess)
                && !(input && *stage == Stage::Decode)
                && !(*stage == Stage::Load && LISTING_RE.is_match(w))
        })
        .map(|(_, stage, what)| NodeActivity {
            stage: *stage,
            what,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(line: &str) -> Option<Stage> {
        node_activity(line).map(|a| a.stage)
    }

    #[test]
    fn background_lines_are_not_activity() {
        for line in [
            "",
            "FETCH ComfyRegistry Data: 25/115",
            "FETCH DATA from: https://api.comfy.org/nodes?page=1&limit=1000 [DONE]",
            "[ComfyUI-Manager] All startup tasks have been completed.",
            "[Crystools INFO] Crystools version: 1.22.1",
            "/c/torch/utils/_pytree.py:185: FutureWarning: `x` is deprecated.",
            "  warnings.warn(",
            "Using pytorch attention in VAE",
            "Using sage attention",
        ] {
            assert!(is_background_line(line), "{line:?}");
        }
        for line in [
            "Requested to load WanVAE",
            "0 models unloaded.",
            "Model Mini",
            "[I2V-Inference] Encoding image with VAE...",
        ] {
            assert!(!is_background_line(line), "{line:?}");
        }
    }

    /// Reading a list of models (SwarmUI's start-up) is no model being loaded; loading one is.
    #[test]
    fn a_models_list_is_not_a_model() {
        for line in [
            "2026-01-10 03:38:37.874 [Init] Loading models list...",
            "Loading model metadata",
            "[Manager] Loading models index",
        ] {
            assert_eq!(stage(line), None, "{line}");
        }
        assert_eq!(stage("[Init] Loading models..."), Some(Stage::Load));
    }

    #[test]
    fn prefixes_are_not_words() {
        assert_eq!(
            words("[22:32:48] [  0.57s] [I2V-Inference] Encoding image with VAE..."),
            "Encoding image with VAE..."
        );
        assert_eq!(
            words("2026-04-23T05:19:21.994Z 🔄 Upscaling frames"),
            "Upscaling frames"
        );
        assert_eq!(words("[INFO] ━━ Sampling 30 steps"), "Sampling 30 steps");
    }

    /// Lines shaped like real node logs (timestamps, tags, emoji) name their work.
    #[test]
    fn node_lines_name_their_stage() {
        for (line, want) in [
            ("[22:32:54] [  6.58s] [I2V-Inference] Aggressive VRAM cleanup before loading diffusion model...", Stage::Load),
            ("Loading models from: [", Stage::Load),
            ("[WanVideoWrapper] Loading transformer model weights", Stage::Load),
            ("[22:32:48] [  0.57s] [I2V-Inference] Encoding image with VAE...", Stage::Condition),
            ("🎨 VAE encoding 81 frames", Stage::Condition),
            ("Encoding prompt with T5", Stage::Condition),
            ("[MyNode] Phase 3: VAE decoding", Stage::Decode),
            ("Decoding latents (tiled)", Stage::Decode),
            ("2026-01-02 10:11:12,345 - INFO - Decoding 81 frames", Stage::Decode),
            ("[RIFE] Interpolating 81 frames x2", Stage::Postprocess),
            ("⬆️ Upscaling 4x with RealESRGAN", Stage::Postprocess),
            ("[VHS] Saving video to output/clip.mp4", Stage::Postprocess),
            ("Encoding video with libx264", Stage::Postprocess),
            ("[I2V-Inference] Running dual-expert rCM sampling...", Stage::SampleFirst),
            ("Sampling 30 steps with euler", Stage::SampleFirst),
            ("llama_model_loader: loaded meta data with 34 key-value pairs and 399 tensors from /models/LLM/x.gguf (version GGUF V3 (latest))", Stage::Load),
            ("load_tensors: offloading 28 repeating layers to GPU", Stage::Load),
            // TensorRT node packs load a built engine, or build one from an ONNX file first.
            ("[ComfyUI-Rife-Tensorrt|INFO] - Loading TensorRT engine: /m/tensorrt/rife/rife49.trt", Stage::Load),
            ("[ComfyUI-Rife-Tensorrt|INFO] - Building TensorRT engine for /m/onnx/rife49.onnx: /m/tensorrt/rife/rife49.trt", Stage::Load),
        ] {
            assert_eq!(stage(line), Some(want), "{line}");
        }
    }

    /// Reports of finished work, figures, a latent upscale and unrelated words are not activity.
    #[test]
    fn reports_and_other_lines_are_not_activity() {
        for line in [
            "[I2V-Inference] VAE encoding complete (VAE automatically offloaded to CPU)",
            "✓ VAE loaded in 0.56s: wan_2.1_vae.safetensors",
            "Loading models done in 3.2s",
            "Upscaling finished",
            "[I2V-Inference] VRAM before high noise model: 0.02GB allocated",
            "[MinimaxH3-3D] Latent 30x54 -> 60x108 | Pixels 960x1728 | scale=2.000",
            "Latent upscaling x2",
            "Decoding input video file clip.mp4",
            "Using sampling method euler",
            "FETCH ComfyRegistry Data: 25/115",
            "[ComfyUI-Manager] All startup tasks have been completed.",
            "[ComfyUI-Manager] Loading model list from cache",
            "Prompt executed in 12.3 seconds",
            "",
        ] {
            assert_eq!(stage(line), None, "{line}");
        }
    }

    #[test]
    fn a_report_after_a_phase_is_no_activity() {
        assert_eq!(
            stage("[10:03:40.100] 📊 After phase 1 (VAE encoding):"),
            None
        );
        assert_eq!(stage("After encoding: 12.3 GB allocated"), None);
        assert_eq!(
            stage("[10:03:35.435] 🎨 Encoding batch 1/8 with VAE"),
            Some(Stage::Condition)
        );
    }
}
