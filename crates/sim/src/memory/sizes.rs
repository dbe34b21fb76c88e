//! Sizes from names: model families and their activation and speed figures, VAE kinds,
//! quantisation, LoRA, text-encoder and upscale-model files, and the values (model, latent,
//! images) that flow through a simulated graph.

use super::MIB;

/// Model family: decides token counts, activation sizes, VAE costs and traceback frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Sd15,
    Sdxl,
    Sd3,
    Flux,
    Qwen,
    Wan14,
    Wan5,
    Wan1_3,
    Hunyuan,
    Ltx2,
    Ltx13,
    Other,
}

impl Family {
    /// True for the video families (frames matter, cfg runs sequentially).
    pub(crate) fn is_video(self) -> bool {
        matches!(
            self,
            Family::Wan14
                | Family::Wan5
                | Family::Wan1_3
                | Family::Hunyuan
                | Family::Ltx2
                | Family::Ltx13
        )
    }

    /// Guesses the family from a model file name.
    pub(crate) fn from_name(name: &str) -> Family {
        let n = name.to_ascii_lowercase();
        if n.contains("wan") {
            if n.contains("5b") || n.contains("ti2v") {
                Family::Wan5
            } else if n.contains("1.3b") || n.contains("1_3b") {
                Family::Wan1_3
            } else {
                Family::Wan14
            }
        } else if n.contains("hunyuan") || n.contains("hyvideo") {
            Family::Hunyuan
        } else if n.contains("ltx") {
            if n.contains("13b") {
                Family::Ltx13
            } else {
                Family::Ltx2
            }
        } else if n.contains("flux") {
            Family::Flux
        } else if n.contains("qwen") {
            Family::Qwen
        } else if n.contains("sd3") {
            Family::Sd3
        } else if n.contains("xl") {
            Family::Sdxl
        } else if n.contains("sd15")
            || n.contains("v1-5")
            || n.contains("sd1")
            || n.ends_with(".ckpt")
            || n.ends_with(".safetensors")
        {
            Family::Sd15
        } else {
            Family::Other
        }
    }

    /// Diffusion-model weights at fp16/bf16.
    pub(crate) fn fp16_weights(self) -> u64 {
        match self {
            Family::Sd15 => 1_720 * MIB,
            Family::Sdxl => 4_900 * MIB,
            Family::Sd3 => 4_100 * MIB,
            Family::Flux => 22_700 * MIB,
            Family::Qwen => 38_900 * MIB,
            Family::Wan14 => 27_300 * MIB,
            Family::Wan5 => 9_500 * MIB,
            Family::Wan1_3 => 2_700 * MIB,
            Family::Hunyuan => 24_400 * MIB,
            Family::Ltx2 => 3_700 * MIB,
            Family::Ltx13 => 24_800 * MIB,
            Family::Other => 2_000 * MIB,
        }
    }

    /// Activation bytes per latent token for one sampling pass.
    pub(crate) fn activation_per_token(self) -> u64 {
        1024 * match self {
            Family::Sd15 => 80,
            Family::Sdxl => 160,
            Family::Sd3 => 400,
            Family::Flux => 512,
            Family::Qwen => 768,
            Family::Wan14 => 256,
            Family::Wan5 => 160,
            Family::Wan1_3 => 96,
            Family::Hunyuan => 256,
            Family::Ltx2 => 192,
            Family::Ltx13 => 512,
            Family::Other => 256,
        }
    }

    /// Hidden size (bytes per token of one cached residual = hidden × 2).
    pub fn hidden(self) -> u64 {
        match self {
            Family::Sd15 => 1280,
            Family::Sdxl => 2048,
            Family::Sd3 => 1536,
            Family::Flux | Family::Qwen | Family::Wan5 | Family::Hunyuan => 3072,
            Family::Wan14 => 5120,
            Family::Wan1_3 => 1536,
            Family::Ltx2 => 2048,
            Family::Ltx13 => 4096,
            Family::Other => 2048,
        }
    }

    /// Simulated seconds of compute per latent token and pass.
    pub(crate) fn seconds_per_token(self) -> f64 {
        match self {
            Family::Sd15 => 1.0e-5,
            Family::Sdxl => 4.0e-5,
            Family::Sd3 => 1.2e-4,
            Family::Flux => 2.5e-4,
            Family::Qwen => 3.5e-4,
            Family::Wan14 => 2.0e-4,
            Family::Wan5 => 8.0e-5,
            Family::Wan1_3 => 3.0e-5,
            Family::Hunyuan => 2.2e-4,
            Family::Ltx2 => 4.0e-5,
            Family::Ltx13 => 1.6e-4,
            Family::Other => 1.0e-4,
        }
    }

    /// Latent tokens the diffusion model sees for one sample.
    pub(crate) fn tokens(self, width: u64, height: u64, frames: u64) -> u64 {
        let frames = frames.max(1);
        let t4 = (frames - 1) / 4 + 1;
        let t8 = (frames - 1) / 8 + 1;
        let t = match self {
            Family::Sd15 | Family::Sdxl | Family::Other => (width / 8) * (height / 8),
            Family::Sd3 | Family::Flux | Family::Qwen => (width / 16) * (height / 16),
            Family::Wan14 | Family::Wan1_3 | Family::Hunyuan => (width / 16) * (height / 16) * t4,
            Family::Wan5 => (width / 32) * (height / 32) * t4,
            Family::Ltx2 | Family::Ltx13 => (width / 32) * (height / 32) * t8,
        };
        t.max(1)
    }

    /// Default LoRA file size when the name gives no hint.
    pub(crate) fn lora_bytes(self) -> u64 {
        match self {
            Family::Sd15 => 144 * MIB,
            Family::Sdxl => 436 * MIB,
            Family::Flux => 330 * MIB,
            Family::Wan14 | Family::Hunyuan | Family::Qwen | Family::Ltx13 => 600 * MIB,
            _ => 300 * MIB,
        }
    }
}

/// The VAE kind: decides decode cost per pixel and whether frames count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VaeKind {
    /// SD1.x/SDXL/SD3/Flux/Qwen-style image VAE.
    Image,
    /// Wan 2.1 causal video VAE (decodes frame by frame: frames do not add memory).
    Wan21,
    /// Wan 2.2 (5B) high-compression VAE.
    Wan22,
    /// HunyuanVideo VAE (memory grows with latent frames).
    Hunyuan,
    /// LTX-Video VAE.
    Ltx,
    /// `pixel_space`: no VAE at all.
    None,
}

impl VaeKind {
    pub(crate) fn from_name(name: &str) -> VaeKind {
        let n = name.to_ascii_lowercase();
        if n == "pixel_space" {
            VaeKind::None
        } else if n.contains("wan2.2") || n.contains("wan2_2") || n.contains("wan22") {
            VaeKind::Wan22
        } else if n.contains("wan") {
            VaeKind::Wan21
        } else if n.contains("hunyuan") || n.contains("hyvideo") {
            VaeKind::Hunyuan
        } else if n.contains("ltx") {
            VaeKind::Ltx
        } else {
            VaeKind::Image
        }
    }

    pub(crate) fn for_family(f: Family) -> VaeKind {
        match f {
            Family::Wan14 | Family::Wan1_3 => VaeKind::Wan21,
            Family::Wan5 => VaeKind::Wan22,
            Family::Hunyuan => VaeKind::Hunyuan,
            Family::Ltx2 | Family::Ltx13 => VaeKind::Ltx,
            _ => VaeKind::Image,
        }
    }

    pub fn weights(self) -> u64 {
        match self {
            VaeKind::Image => 320 * MIB,
            VaeKind::Wan21 => 243 * MIB,
            VaeKind::Wan22 => 1_340 * MIB,
            VaeKind::Hunyuan => 470 * MIB,
            VaeKind::Ltx => 800 * MIB,
            VaeKind::None => 0,
        }
    }

    /// Bytes of decode working memory per output pixel (and per latent frame when
    /// [`VaeKind::frames_count`]).
    pub(crate) fn decode_per_pixel(self) -> u64 {
        match self {
            VaeKind::Image => 4_356,
            VaeKind::Wan21 => 12_000,
            VaeKind::Wan22 => 16_000,
            VaeKind::Hunyuan => 5_600,
            VaeKind::Ltx => 1_600,
            VaeKind::None => 0,
        }
    }

    /// Whether latent frames multiply the decode memory.
    pub(crate) fn frames_count(self) -> bool {
        matches!(self, VaeKind::Hunyuan | VaeKind::Ltx)
    }

    /// Latent frames for `frames` output frames.
    pub(crate) fn latent_frames(self, frames: u64) -> u64 {
        let f = frames.max(1);
        match self {
            VaeKind::Ltx => (f - 1) / 8 + 1,
            _ => (f - 1) / 4 + 1,
        }
    }
}

/// Quantisation factor relative to fp16 from a file name.
pub fn quant_factor(name: &str) -> f64 {
    let n = name.to_ascii_lowercase();
    if n.ends_with(".gguf") {
        for (tag, f) in [
            ("q2", 0.20),
            ("q3", 0.25),
            ("q4", 0.30),
            ("q5", 0.36),
            ("q6", 0.42),
            ("q8", 0.55),
        ] {
            if n.contains(tag) {
                return f;
            }
        }
        return 0.55;
    }
    if n.contains("fp4") || n.contains("nf4") {
        0.28
    } else if n.contains("fp8") || n.contains("e4m3") || n.contains("e5m2") || n.contains("int8") {
        0.5
    } else if n.contains("fp32") {
        2.0
    } else {
        1.0
    }
}

/// A diffusion model as it flows through the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelVal {
    /// File name (the key models are loaded under).
    pub name: String,
    pub family: Family,
    /// Weight bytes as stored.
    pub bytes: u64,
    /// LoRAs applied to it: (file, bytes).
    pub loras: Vec<(String, u64)>,
    /// Step cache patched in (TeaCache, MagCache, EasyCache, FBCache…).
    pub step_cache: Option<String>,
    /// Fraction of the weights kept off the GPU by block swap or similar (0–1).
    pub offload: f64,
    /// Core ModelPatcher models can be partially loaded; wrapper models move whole.
    pub partial_ok: bool,
}

impl ModelVal {
    pub(crate) fn from_file(name: &str, partial_ok: bool) -> ModelVal {
        let family = Family::from_name(name);
        let bytes = (family.fp16_weights() as f64 * quant_factor(name)) as u64;
        ModelVal {
            name: name.to_string(),
            family,
            bytes,
            loras: Vec::new(),
            step_cache: None,
            offload: 0.0,
            partial_ok,
        }
    }

    pub(crate) fn lora_total(&self) -> u64 {
        self.loras.iter().map(|l| l.1).sum()
    }
}

/// LoRA file size from its name (rank hints) or the family default.
pub fn lora_file_bytes(name: &str, family: Family) -> u64 {
    let n = name.to_ascii_lowercase();
    for (tag, mib) in [
        ("rank128", 1_200),
        ("rank64", 600),
        ("rank32", 300),
        ("rank16", 150),
        ("rank8", 80),
    ] {
        if n.contains(tag) {
            return mib * MIB;
        }
    }
    if n.contains("lightning") || n.contains("lightx2v") {
        return 600 * MIB;
    }
    family.lora_bytes()
}

/// Text-encoder weights from a file name.
pub fn text_encoder_bytes(name: &str) -> u64 {
    let n = name.to_ascii_lowercase();
    let base = if n.contains("umt5") {
        11_400 * MIB
    } else if n.contains("t5") {
        9_500 * MIB
    } else if n.contains("llava") || n.contains("llama") {
        16_000 * MIB
    } else if n.contains("qwen") {
        16_600 * MIB
    } else if n.contains("clip_g") {
        1_390 * MIB
    } else if n.contains("clip_l") {
        246 * MIB
    } else if n.contains("gemma") {
        5_000 * MIB
    } else {
        1_000 * MIB
    };
    (base as f64 * quant_factor(&n)) as u64
}

/// Text encoders bundled in a checkpoint of this family.
pub fn checkpoint_clip_bytes(f: Family) -> u64 {
    match f {
        Family::Sd15 => 246 * MIB,
        Family::Sdxl => 1_640 * MIB,
        Family::Ltx2 | Family::Ltx13 => 9_500 * MIB,
        _ => 246 * MIB,
    }
}

/// Upscale-model file: (bytes, scale).
pub fn upscale_model(name: &str) -> (u64, u64) {
    let n = name.to_ascii_lowercase();
    let scale = if n.contains("8x") || n.contains("x8") {
        8
    } else if n.contains("4x") || n.contains("x4") {
        4
    } else if n.contains("3x") || n.contains("x3") {
        3
    } else if n.contains("1x") || n.contains("x1") {
        1
    } else {
        2
    };
    let bytes = if n.contains("compact") {
        3 * MIB
    } else if n.contains("rcan") || n.contains("hat") || n.contains("swin") {
        160 * MIB
    } else {
        64 * MIB
    };
    (bytes, scale)
}

/// A latent (sizes in pixels, as the size node asked for).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatentVal {
    pub width: u64,
    pub height: u64,
    /// Pixel frames (1 for images).
    pub frames: u64,
    pub batch: u64,
}

/// A batch of images/frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageVal {
    pub width: u64,
    pub height: u64,
    /// Images in the batch (frames × batch for video).
    pub count: u64,
}

impl ImageVal {
    pub fn bytes(&self) -> u64 {
        self.width * self.height * 3 * 4 * self.count
    }
}

/// The size of a model file in folder kind `folder` (`checkpoints`, `loras`, …) as the memory
/// model sees it — what `GET /experiment/models/{folder}` lists for a file the simulator only
/// imagines. A checkpoint holds its diffusion model, text encoders and VAE.
pub fn model_file_bytes(folder: &str, name: &str) -> u64 {
    let family = Family::from_name(name);
    match folder {
        "checkpoints" => {
            ModelVal::from_file(name, true).bytes
                + checkpoint_clip_bytes(family)
                + VaeKind::for_family(family).weights()
        }
        "diffusion_models" | "unet_gguf" => ModelVal::from_file(name, true).bytes,
        "loras" => lora_file_bytes(name, family),
        "vae" => VaeKind::from_name(name).weights(),
        "text_encoders" | "clip_gguf" => text_encoder_bytes(name),
        "upscale_models" => upscale_model(name).0,
        _ => 100 * MIB,
    }
}
