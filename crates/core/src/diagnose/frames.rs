//! The frame table: which well-known functions and files of ComfyUI and the big custom-node packs
//! show what the process was doing when it failed. The rules are data ([`FRAME_TABLE`]), read in
//! order, first match wins; the deepest frame that any rule recognises decides (see `stage`).
//! It also reads a traceback's frames into call order ([`parse_frames`]) and a debugger's native
//! backtrace frame ([`native_frame`]).

use regex::Regex;
use std::sync::LazyLock;

/// What a traceback frame shows the process was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameCat {
    /// Weights being read from a file, patched, or moved to a device.
    Load,
    /// The live preview drawn after a finished step.
    Preview,
    /// The VAE decode of latents.
    Decode,
    /// Text/vision encoders or the VAE encode of inputs.
    Condition,
    /// Work on finished images or video (upscale, interpolation, restoration, combine).
    Postprocess,
    /// Reading an input image/video file (not a model load; no stage fits).
    InputMedia,
    /// Inside a denoising step.
    Step,
    /// A sampler's entry: the sampler loads the model and then steps, so not decisive.
    SamplerEntry,
    /// Inside a VAE, direction (encode/decode) not visible.
    Vae,
    /// Inside a model forward (diffusion model, attention), weak evidence of a step.
    WeakStep,
}

impl FrameCat {
    /// True for frames that decide the stage on their own.
    pub(crate) fn strong(self) -> bool {
        !matches!(self, FrameCat::Vae | FrameCat::WeakStep)
    }
}

static FRAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)^\s*file\s+"(?P<path>[^"]+)"(?:,\s*line\s+(?P<line>\d+)(?P<comma>,)?|,)?\s*in\s+(?P<func>[^\s]+)(?:\s+(?P<code>.*))?$"#).expect("static regex")
});

/// A frame of a debugger's native backtrace (gdb: `#1  0x00007f… in aimdo_cuda_malloc () from
/// /…/comfy_aimdo/aimdo_rocm.so`, `#0  0x0000000000000000 in ?? ()`).
static NATIVE_FRAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^#\d+\s+(?:0x[0-9a-fA-F]+\s+in\s+)?(?P<func>\S+)\s*\(.*\)(?:\s+(?:from|at)\s+(?P<place>\S+))?")
        .expect("static regex")
});

/// One frame of a debugger's native backtrace, read from its line.
pub(crate) struct NativeFrame {
    /// The frame names a function or the library it is in (not gdb's bare `?? ()`).
    pub named: bool,
    /// The library or source it is in lies under comfy-aimdo's package (`comfy_aimdo/`).
    pub in_aimdo: bool,
}

/// The native backtrace frame a line is, if it is one.
pub(crate) fn native_frame(line: &str) -> Option<NativeFrame> {
    let caps = NATIVE_FRAME_RE.captures(line.trim())?;
    let place = caps.name("place").map(|m| m.as_str());
    Some(NativeFrame {
        named: &caps["func"] != "??" || place.is_some(),
        in_aimdo: place
            .is_some_and(|p| p.to_lowercase().replace('\\', "/").contains("comfy_aimdo/")),
    })
}

/// Frames in call order (outermost first, deepest last). Python tracebacks print them that way;
/// faulthandler crash stacks (`File "…", line N in func`, no comma) print the most recent call
/// first, so those are reversed. A frame a reporter shortened to `File "…", in func` (no line
/// number) says neither, and counts for whichever order the other frames show.
pub(crate) fn parse_frames(traceback: &[String]) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut faulthandler = 0usize;
    let mut lineless = 0usize;
    for line in traceback.iter().flat_map(|l| l.lines()) {
        if let Some(c) = FRAME_RE.captures(line) {
            if c.name("line").is_none() {
                lineless += 1;
            } else if c.name("comma").is_none() {
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
    if faulthandler > 0 && faulthandler + lineless == frames.len() {
        frames.reverse();
    }
    frames
}

/// One traceback frame, lower-cased, path with forward slashes.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub path: String,
    pub func: String,
    pub code: String,
}

/// One row of the table. Every non-empty field must match: `path` is a substring of the
/// frame's path; `func` is the function name, exact, or with `*` at its start and/or end for
/// "ends with" / "starts with" / "contains"; `code` is a substring of the frame's source line.
/// `cat: None` marks frames that are explicitly not recognisable (library internals).
pub(crate) struct FrameRule {
    pub path: &'static str,
    pub func: &'static str,
    pub code: &'static str,
    pub cat: Option<FrameCat>,
    /// What the rule stands for (shown in docs and tests).
    pub what: &'static str,
}

const fn rule(
    path: &'static str,
    func: &'static str,
    code: &'static str,
    cat: Option<FrameCat>,
    what: &'static str,
) -> FrameRule {
    FrameRule {
        path,
        func,
        code,
        cat,
        what,
    }
}

use FrameCat::*;

/// The table, most specific rows first.
#[rustfmt::skip]
pub(crate) const FRAME_TABLE: &[FrameRule] = &[
    // PyTorch internals: only moving a module's weights says something.
    rule("torch/nn/modules/module.py", "to", "", Some(Load), "Module.to: weights moved to a device"),
    rule("torch/nn/modules/module.py", "_apply", "", Some(Load), "Module._apply under .to/.cuda"),
    rule("torch/nn/modules/module.py", "convert", "", Some(Load), "Module.to's per-tensor convert"),
    rule("torch/nn/modules/module.py", "cuda", "", Some(Load), "Module.cuda"),
    rule("torch/nn/modules/module.py", "to_empty", "", Some(Load), "Module.to_empty"),
    rule("torch/nn/modules/module.py", "*load_state_dict", "", Some(Load), "Module.load_state_dict"),
    rule("/torch/", "", "", None, "other PyTorch internals"),
    // A module's top level runs when it is imported (`main.py` importing `latent_preview` at
    // start-up): no work of a run.
    rule("", "<module>", "", None, "a module being imported"),
    // Python's text codecs (`encodings/cp1252.py` in `encode`, under a UnicodeEncodeError when a
    // node prints to a Windows console): no model's encode.
    rule("/encodings/", "", "", None, "Python's text codecs"),
    // Live preview inside a sampler (drawn after a finished step).
    rule("latent_preview", "", "", Some(Preview), "ComfyUI latent_preview"),
    rule("taesd", "", "", Some(Preview), "TAESD preview decoder"),
    rule("", "*preview*", "", Some(Preview), "a preview callback"),
    // Reading / mapping model files and moving weights (ComfyUI model_management, model_patcher,
    // comfy/utils.py, safetensors, transformers, GGUF).
    rule("safetensors/", "", "", Some(Load), "safetensors reading a file"),
    rule("", "load_torch_file", "", Some(Load), "comfy.utils.load_torch_file"),
    rule("", "load_safetensors", "", Some(Load), "comfy.utils.load_safetensors"),
    rule("", "load_checkpoint_guess_config", "", Some(Load), "comfy.sd.load_checkpoint_guess_config"),
    rule("", "load_diffusion_model*", "", Some(Load), "comfy.sd.load_diffusion_model"),
    rule("", "load_models_gpu", "", Some(Load), "model_management.load_models_gpu"),
    rule("", "load_model_gpu", "", Some(Load), "model_management.load_model_gpu"),
    rule("", "model_load", "", Some(Load), "LoadedModel.model_load"),
    rule("", "partially_load", "", Some(Load), "ModelPatcher.partially_load"),
    rule("", "patch_model", "", Some(Load), "ModelPatcher.patch_model"),
    rule("", "patch_weight_to_device", "", Some(Load), "LoRA/weight patching"),
    rule("", "model_use_more_vram", "", Some(Load), "model_management.model_use_more_vram"),
    rule("", "prepare_sampling", "", Some(Load), "sampler_helpers.prepare_sampling, which loads the models"),
    rule("", "lowvram_load", "", Some(Load), "low-VRAM loading"),
    rule("", "load_state_dict", "", Some(Load), "load_state_dict"),
    rule("", "_load_from_state_dict", "", Some(Load), "_load_from_state_dict"),
    rule("", "from_pretrained", "", Some(Load), "transformers/diffusers from_pretrained"),
    rule("", "safe_open", "", Some(Load), "safetensors.safe_open"),
    rule("", "load_file", "", Some(Load), "safetensors load_file"),
    rule("gguf", "*load*", "", Some(Load), "ComfyUI-GGUF loader"),
    rule("model_patcher.py", "load*", "", Some(Load), "ModelPatcher.load"),
    // Building a model from its weights: a checkpoint or diffusion-model load calls the model
    // config's `get_model`, which constructs `model_base.X` (only ever built while loading; a
    // network's own `__init__` is not enough: modules are built inside forwards too).
    rule("supported_models", "get_model", "", Some(Load), "supported_models get_model: the model built while loading"),
    rule("model_base.py", "__init__", "", Some(Load), "model_base constructing the model while loading"),
    // Loading an input file is not a model load.
    rule("load_video_nodes", "", "", Some(InputMedia), "VideoHelperSuite LoadVideo"),
    rule("", "load*image*", "", Some(InputMedia), "an image loader"),
    rule("", "load*video*", "", Some(InputMedia), "a video loader"),
    rule("", "load*audio*", "", Some(InputMedia), "an audio loader"),
    rule("", "load*mask*", "", Some(InputMedia), "a mask loader"),
    rule("", "load*frame*", "", Some(InputMedia), "a frame loader"),
    // Importing custom nodes at startup (ComfyUI nodes.py: init_extra_nodes →
    // init_external_custom_nodes → load_custom_node) runs before any prompt: no run stage.
    rule("nodes.py", "load_custom_node", "", None, "nodes.py importing a custom node at startup"),
    rule("nodes.py", "init_external_custom_nodes", "", None, "nodes.py importing the node packs at startup"),
    rule("", "load*", "", Some(Load), "a loader function"),
    rule("", "init_pipeline*", "", Some(Load), "a pack building its pipeline from weight files"),
    rule("", "", "model.to(", Some(Load), "a source line moving a model"),
    rule("", "", "model.cuda(", Some(Load), "a source line moving a model"),
    // Post-processing packs: upscalers, interpolators, restoration, video combine.
    rule("upscale_model", "", "", Some(Postprocess), "ComfyUI upscale-model nodes"),
    rule("spandrel", "", "", Some(Postprocess), "spandrel upscalers"),
    rule("ultimate", "", "", Some(Postprocess), "Ultimate SD Upscale"),
    rule("frame-interpolation", "", "", Some(Postprocess), "ComfyUI-Frame-Interpolation"),
    rule("vfi", "", "", Some(Postprocess), "video frame interpolation"),
    rule("rife", "", "", Some(Postprocess), "RIFE"),
    rule("/film", "", "", Some(Postprocess), "FILM"),
    rule("interpolat", "", "", Some(Postprocess), "an interpolator"),
    rule("gfpgan", "", "", Some(Postprocess), "GFPGAN"),
    rule("codeformer", "", "", Some(Postprocess), "CodeFormer"),
    rule("facerestore", "", "", Some(Postprocess), "face restoration"),
    rule("face_restore", "", "", Some(Postprocess), "face restoration"),
    rule("esrgan", "", "", Some(Postprocess), "ESRGAN"),
    rule("supir", "", "", Some(Postprocess), "ComfyUI-SUPIR, a restoration upscale"),
    // VideoHelperSuite's ffmpeg call that reads an input file's audio (`utils.py get_audio`,
    // for its video and audio loaders).
    rule("videohelpersuite", "*get_audio", "", Some(InputMedia), "VideoHelperSuite reading an input's audio"),
    rule("videohelpersuite", "", "", Some(Postprocess), "VideoHelperSuite, video combine"),
    rule("", "restore_face*", "", Some(Postprocess), "ReActor face restoration"),
    rule("", "enhance_face", "", Some(Postprocess), "Impact Pack FaceDetailer"),
    rule("", "do_detail", "", Some(Postprocess), "Impact Pack detailer"),
    rule("", "common_upscale", "", Some(Postprocess), "comfy.utils.common_upscale"),
    rule("", "upscale", "", Some(Postprocess), "an upscale node"),
    rule("", "upscale_with_model", "", Some(Postprocess), "upscale with model"),
    rule("", "combine_video", "", Some(Postprocess), "video combine"),
    rule("", "tiled_scale*", "", None, "tiling helper, used by decode and upscale alike"),
    // VAE decode / encode and encoders (ComfyUI nodes.py, comfy/sd.py, wrappers).
    // An attention kernel's decode phase (a language model generating token by token:
    // comfy_kitchen's `flash_attention_decode`) is no VAE decode.
    rule("attention", "*decode*", "", Some(WeakStep), "an attention kernel's decode phase"),
    rule("", "*decode*", "", Some(Decode), "a decode function: nodes.py or comfy.sd VAE.decode"),
    rule("", "*encode*", "", Some(Condition), "an encode function: text encoders or VAE.encode"),
    rule("", "zeroed_hidden_states", "", Some(Condition), "IPAdapter vision-encoder call"),
    rule("sd1_clip", "", "", Some(Condition), "comfy sd1_clip"),
    rule("text_encoders/", "", "", Some(Condition), "comfy text encoders"),
    rule("clip_model", "", "", Some(Condition), "CLIP model"),
    rule("clip_vision", "", "", Some(Condition), "comfy clip_vision"),
    rule("/clip/", "", "", Some(Condition), "CLIP"),
    rule("modeling_clip", "", "", Some(Condition), "transformers CLIP"),
    rule("modeling_qwen", "", "", Some(Condition), "transformers Qwen text encoder"),
    rule("modeling_siglip", "", "", Some(Condition), "transformers SigLIP, a vision encoder"),
    rule("modeling_gemma", "", "", Some(Condition), "transformers Gemma, a text encoder (LTX-2's)"),
    rule("/t5", "", "", Some(Condition), "T5 text encoder"),
    rule("llama", "", "", Some(Condition), "Llama text encoder"),
    // Samplers: comfy/samplers.py, comfy/sample.py, k_diffusion, pack samplers.
    rule("samplers.py", "sampling_function", "", Some(Step), "samplers.sampling_function"),
    rule("samplers.py", "*calc_cond*", "", Some(Step), "samplers.calc_cond_batch"),
    rule("samplers.py", "cfg_function", "", Some(Step), "samplers.cfg_function"),
    rule("samplers.py", "*predict_noise", "", Some(Step), "CFGGuider.predict_noise"),
    rule("samplers.py", "__call__", "", Some(Step), "a sampler's model call"),
    rule("samplers.py", "", "", Some(SamplerEntry), "comfy.samplers, the entry"),
    rule("/sample.py", "", "", Some(SamplerEntry), "comfy.sample, the entry"),
    rule("k_diffusion/", "", "", Some(Step), "k_diffusion sampling loop"),
    rule("model_base.py", "", "", Some(Step), "model_base.apply_model"),
    rule("", "apply_model", "", Some(Step), "apply_model"),
    rule("", "_apply_model", "", Some(Step), "apply_model"),
    rule("", "sample", "", Some(SamplerEntry), "a sampler node's entry, nodes.py sample"),
    rule("", "common_ksampler", "", Some(SamplerEntry), "nodes.common_ksampler"),
    rule("", "inner_sample", "", Some(SamplerEntry), "CFGGuider.inner_sample"),
    rule("", "outer_sample", "", Some(SamplerEntry), "CFGGuider.outer_sample"),
    rule("", "sample_custom", "", Some(SamplerEntry), "SamplerCustom"),
    rule("", "unsampler", "", Some(SamplerEntry), "Unsampler"),
    rule("", "informative_sample", "", Some(SamplerEntry), "Impact Pack's sample wrapper"),
    rule("", "animatediff_sample", "", Some(SamplerEntry), "AnimateDiff's sample wrapper"),
    // Inside a VAE (direction unknown) and inside a model forward.
    rule("vae", "", "", Some(Vae), "a VAE module"),
    rule("autoencoder", "", "", Some(Vae), "an autoencoder module"),
    rule("diffusionmodules/model.py", "", "", Some(Vae), "the SD VAE modules"),
    rule("/ldm/", "", "", Some(WeakStep), "a comfy.ldm model"),
    rule("openaimodel", "", "", Some(WeakStep), "the SD UNet"),
    rule("attention", "", "", Some(WeakStep), "attention"),
    rule("diffusion", "", "", Some(WeakStep), "a diffusion model"),
    rule("unet", "", "", Some(WeakStep), "a UNet"),
    rule("/flux/", "", "", Some(WeakStep), "Flux"),
    rule("transformer", "", "", Some(WeakStep), "a transformer"),
    rule("/dit", "", "", Some(WeakStep), "a DiT"),
    rule("/wan/", "", "", Some(WeakStep), "Wan"),
    rule("hunyuan", "", "", Some(WeakStep), "HunyuanVideo"),
    rule("mmdit", "", "", Some(WeakStep), "MMDiT"),
    rule("controlnet", "", "", Some(WeakStep), "ControlNet"),
    rule("", "forward", "", Some(WeakStep), "a forward"),
    rule("", "forward_orig", "", Some(WeakStep), "a forward"),
    rule("", "_forward", "", Some(WeakStep), "a forward"),
    rule("", "__call__", "", Some(WeakStep), "a call"),
    rule("", "attention", "", Some(WeakStep), "attention"),
];

/// Files whose frames say nothing about the stage (the executor, event loop, helpers).
fn is_generic(path: &str) -> bool {
    path.ends_with("execution.py")
        || path.ends_with("/server.py")
        || path.ends_with("/main.py")
        || path.ends_with("_contextlib.py")
        || path.contains("<__array_function__")
        || path.contains("/asyncio/")
        || path.contains("/threading.py")
        || path.contains("/numpy/")
}

fn func_matches(pattern: &str, func: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        _ if pattern.is_empty() => true,
        (Some(rest), _) if rest.ends_with('*') => func.contains(&rest[..rest.len() - 1]),
        (Some(rest), _) => func.ends_with(rest),
        (None, Some(rest)) => match rest.split_once('*') {
            Some((a, b)) => func.starts_with(a) && func[a.len()..].contains(b),
            None => func.starts_with(rest),
        },
        (None, None) => func == pattern,
    }
}

/// An encoder's constructor (`__init__` in a file an encoder row of the table names: ComfyUI's
/// load_clip building `sd1_clip`, transformers' from_pretrained, llama-cpp-python's model and
/// context): the encoder is being built, which is loading it; encoding is its forward.
static ENCODER_BUILT: FrameRule = rule(
    "",
    "__init__",
    "",
    Some(Load),
    "an encoder's constructor: the encoder built while loading",
);

/// The first table row that matches the frame; for an encoder's constructor,
/// [`ENCODER_BUILT`].
pub(crate) fn matching_rule(f: &Frame) -> Option<&'static FrameRule> {
    if is_generic(&f.path) {
        return None;
    }
    let found = FRAME_TABLE.iter().find(|r| {
        (r.path.is_empty() || f.path.contains(r.path))
            && func_matches(r.func, &f.func)
            && (r.code.is_empty() || f.code.contains(r.code))
    })?;
    // An encoder row names its file alone; the function tells building from encoding.
    if found.cat == Some(Condition) && found.func.is_empty() && f.func == "__init__" {
        return Some(&ENCODER_BUILT);
    }
    Some(found)
}

/// What one frame shows, when the table recognises it.
pub(crate) fn classify_frame(f: &Frame) -> Option<FrameCat> {
    matching_rule(f).and_then(|r| r.cat)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(path: &str, func: &str) -> Frame {
        Frame {
            path: path.to_lowercase(),
            func: func.to_lowercase(),
            code: String::new(),
        }
    }

    #[test]
    fn function_patterns() {
        assert!(func_matches("", "anything"));
        assert!(func_matches("to", "to"));
        assert!(!func_matches("to", "top"));
        assert!(func_matches("load*", "load_checkpoint"));
        assert!(func_matches("*decode*", "decode_tiled_"));
        assert!(func_matches("*load_state_dict", "_load_state_dict"));
        assert!(func_matches("load*image*", "load_image_batch"));
        assert!(!func_matches("load*image*", "load_checkpoint"));
    }

    #[test]
    fn well_known_frames() {
        let cases = [
            ("/c/comfy/utils.py", "load_torch_file", Some(Load)),
            (
                "/c/site-packages/comfy_kitchen/backends/cuda/flash_attention.py",
                "flash_attention_decode",
                Some(WeakStep),
            ),
            ("/c/comfy/sd.py", "load_checkpoint_guess_config", Some(Load)),
            (
                "/c/comfy/model_management.py",
                "load_models_gpu",
                Some(Load),
            ),
            (
                "/v/site-packages/torch/nn/modules/module.py",
                "to",
                Some(Load),
            ),
            (
                "/v/site-packages/torch/nn/modules/module.py",
                "_call_impl",
                None,
            ),
            ("/v/site-packages/torch/storage.py", "__getitem__", None),
            ("/c/comfy/sd.py", "decode", Some(Decode)),
            ("/c/comfy/sd.py", "encode", Some(Condition)),
            (
                "/c/comfy/clip_vision.py",
                "clip_preprocess",
                Some(Condition),
            ),
            (
                "/c/comfy/k_diffusion/sampling.py",
                "sample_euler",
                Some(Step),
            ),
            ("/c/comfy/samplers.py", "sample", Some(SamplerEntry)),
            ("/c/nodes.py", "common_ksampler", Some(SamplerEntry)),
            // Importing a custom node at startup is no model load.
            ("/c/nodes.py", "load_custom_node", None),
            ("/c/nodes.py", "init_external_custom_nodes", None),
            ("/c/latent_preview.py", "callback", Some(Preview)),
            // A module imported at start-up, and an input's audio read by ffmpeg.
            ("/c/latent_preview.py", "<module>", None),
            (
                "/c/custom_nodes/comfyui-videohelpersuite/videohelpersuite/utils.py",
                "get_audio",
                Some(InputMedia),
            ),
            (
                "/c/custom_nodes/comfyui-videohelpersuite/videohelpersuite/nodes.py",
                "combine_video",
                Some(Postprocess),
            ),
            (
                "/c/custom_nodes/comfyui-videohelpersuite/videohelpersuite/load_video_nodes.py",
                "load_video",
                Some(InputMedia),
            ),
            (
                "/c/custom_nodes/comfyui-frame-interpolation/vfi_models/rife/__init__.py",
                "vfi",
                Some(Postprocess),
            ),
            (
                "/c/custom_nodes/comfyui-reactor/nodes.py",
                "restore_face",
                Some(Postprocess),
            ),
            (
                "/c/custom_nodes/comfyui-impact-pack/impact_pack.py",
                "enhance_face",
                Some(Postprocess),
            ),
            (
                "/c/custom_nodes/comfyui_ipadapter_plus/ipadapterplus.py",
                "zeroed_hidden_states",
                Some(Condition),
            ),
            (
                "/c/custom_nodes/comfyui-animatediff-evolved/animatediff/sampling.py",
                "animatediff_sample",
                Some(SamplerEntry),
            ),
            ("/c/comfy/ldm/flux/model.py", "forward", Some(WeakStep)),
            ("/c/comfy/ldm/models/autoencoder.py", "forward", Some(Vae)),
            ("/c/execution.py", "execute", None),
            // A Windows console's codec under a UnicodeEncodeError is no text encoder.
            ("c:/python312/lib/encodings/cp1252.py", "encode", None),
            // A text encoder built is a load; its forward is conditioning.
            (
                "/v/site-packages/llama_cpp/_internals.py",
                "__init__",
                Some(Load),
            ),
            (
                "/v/site-packages/transformers/models/qwen2/modeling_qwen2.py",
                "__init__",
                Some(Load),
            ),
            (
                "/v/site-packages/transformers/models/qwen2/modeling_qwen2.py",
                "forward",
                Some(Condition),
            ),
            ("/c/comfy/sd1_clip.py", "encode", Some(Condition)),
            ("/v/site-packages/transformers/models/siglip/modeling_siglip.py", "forward", Some(Condition)),
            ("/c/comfy/clip_vision.py", "__init__", Some(Load)),
            ("/c/custom_nodes/comfyui_flashvsr/flashvsr/examples/wanvsr/infer_flashvsr_v11_full.py", "init_pipeline_v11", Some(Load)),
        ];
        for (path, func, want) in cases {
            assert_eq!(classify_frame(&frame(path, func)), want, "{path} {func}");
        }
    }

    #[test]
    fn every_rule_is_reachable() {
        // A row shadowed by an earlier, more general row would never decide anything.
        for (i, r) in FRAME_TABLE.iter().enumerate() {
            let probe = Frame {
                path: format!("/x/{}/y.py", r.path.trim_matches('/')),
                func: r.func.replace('*', "_x_"),
                code: r.code.to_string(),
            };
            let path = if r.path.is_empty() {
                "/x/y.py".to_string()
            } else {
                probe.path.clone()
            };
            let func = if r.func.is_empty() {
                "zzz".to_string()
            } else {
                probe.func.clone()
            };
            let probe = Frame {
                path,
                func,
                code: probe.code,
            };
            if is_generic(&probe.path) {
                continue;
            }
            let first = FRAME_TABLE
                .iter()
                .position(|q| {
                    (q.path.is_empty() || probe.path.contains(q.path))
                        && func_matches(q.func, &probe.func)
                        && (q.code.is_empty() || probe.code.contains(q.code))
                })
                .expect("the row matches its own probe");
            assert!(
                first <= i && FRAME_TABLE[first].cat == r.cat || first == i,
                "row {i} ({}) is shadowed by row {first} ({}) with another category",
                r.what,
                FRAME_TABLE[first].what
            );
        }
    }
}
