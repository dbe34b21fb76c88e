//! The simulator's deterministic GPU memory model.
//!
//! Pure functions and plain data: model file sizes from name patterns, activation sizes from
//! latent tokens × frames × batch per model family, and a [`Gpu`] that loads models lazily (at
//! the consuming node, as ComfyUI's `load_models_gpu` does), unloads least-recently-used models
//! to make room, and decides whether — and at which step — a node runs out of memory. The
//! formulas are documented in `docs/simulator.md`; every number here is an assumption chosen to
//! reproduce realistic failure points, not a measurement.

/// One gibibyte.
pub const GIB: u64 = 1 << 30;
/// One mebibyte.
pub const MIB: u64 = 1 << 20;

/// Memory the CUDA context and non-PyTorch allocations take before any tensor exists.
pub const NON_TORCH_OVERHEAD: u64 = 420 * MIB;
/// Headroom ComfyUI keeps free for inference when it partially loads a model.
pub const INFERENCE_RESERVE: u64 = GIB;

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
    pub fn is_video(self) -> bool {
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
    pub fn from_name(name: &str) -> Family {
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
    pub fn fp16_weights(self) -> u64 {
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
    pub fn activation_per_token(self) -> u64 {
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
    pub fn seconds_per_token(self) -> f64 {
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
    pub fn tokens(self, width: u64, height: u64, frames: u64) -> u64 {
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
    pub fn lora_bytes(self) -> u64 {
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
    pub fn from_name(name: &str) -> VaeKind {
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

    pub fn for_family(f: Family) -> VaeKind {
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
    pub fn decode_per_pixel(self) -> u64 {
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
    pub fn frames_count(self) -> bool {
        matches!(self, VaeKind::Hunyuan | VaeKind::Ltx)
    }

    /// Latent frames for `frames` output frames.
    pub fn latent_frames(self, frames: u64) -> u64 {
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
    pub fn from_file(name: &str, partial_ok: bool) -> ModelVal {
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

    pub fn lora_total(&self) -> u64 {
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

/// Where in a run a failure happens (the diagnosis vocabulary of the OOM fixtures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Load,
    Condition,
    SampleFirst,
    SampleMiddle,
    Decode,
    Postprocess,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Load => "load",
            Stage::Condition => "condition",
            Stage::SampleFirst => "sample_first",
            Stage::SampleMiddle => "sample_middle",
            Stage::Decode => "decode",
            Stage::Postprocess => "postprocess",
        }
    }
}

/// What a node asks of the GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// CPU-only work taking some simulated seconds.
    Cpu { seconds: f64 },
    /// Text encoding: loads the text encoder (`full` = moved whole, no partial load).
    Encode { key: String, bytes: u64, full: bool },
    /// A sampler: loads the model, then `steps` steps (`passes` model calls per step).
    Sample {
        model: ModelVal,
        latent: LatentVal,
        steps: u32,
        passes: u32,
        /// Tiles per step (tiled upscalers), 1 otherwise.
        tiles: u32,
        /// Tile size in pixels when tiled.
        tile: Option<(u64, u64)>,
    },
    /// VAE decode (or encode with `encode`).
    Decode {
        key: String,
        vae: VaeKind,
        width: u64,
        height: u64,
        frames: u64,
        batch: u64,
        /// Explicit tiling: (tile pixels, temporal frames).
        tiled: Option<(u64, u64)>,
        /// Core VAEDecode: retries tiled after an OOM.
        fallback: bool,
        encode: bool,
    },
    /// Model upscale (`per_batch` = KJ batched variant without tile fallback).
    Upscale {
        key: String,
        bytes: u64,
        scale: u64,
        image: ImageVal,
        per_batch: Option<u64>,
    },
    /// Frame interpolation (RIFE/FILM).
    Interpolate {
        key: String,
        film: bool,
        image: ImageVal,
        multiplier: u64,
        clear_after: u64,
    },
}

/// A failure decided by the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Oom {
    pub stage: Stage,
    /// Progress frames sent before the failure.
    pub after_steps: u32,
    /// The allocation that failed.
    pub requested: u64,
    /// Bytes allocated by PyTorch at the failure.
    pub allocated: u64,
    /// Reserved by PyTorch but unallocated.
    pub reserved_free: u64,
    /// Free device memory at the failure.
    pub free: u64,
    pub total: u64,
    /// True when a core VAE decode fell back to tiling before failing.
    pub tiled_fallback: bool,
    /// True when the load was a partial (lowvram) load.
    pub partial: bool,
    /// True when LoRA patching was in progress at a load failure.
    pub lora_patch: bool,
}

/// The outcome of planning one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Progress frames the node sends (0 = none).
    pub steps: u32,
    /// Simulated seconds before the first step / for the whole node without steps.
    pub setup_seconds: f64,
    pub step_seconds: f64,
    /// Highest allocation while the node runs.
    pub peak_allocated: u64,
    pub oom: Option<Oom>,
    /// Human-readable notes (partial load, tiled fallback) for logs.
    pub notes: Vec<String>,
    /// What ComfyUI prints on its console for this node's memory work, in order (model loads
    /// as in the `ws_logs_*` captures, the tiled-VAE warning).
    pub console: Vec<String>,
}

impl Plan {
    fn cpu(seconds: f64) -> Plan {
        Plan {
            steps: 0,
            setup_seconds: seconds,
            step_seconds: 0.0,
            peak_allocated: 0,
            oom: None,
            notes: Vec::new(),
            console: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
struct Loaded {
    key: String,
    bytes: u64,
    last_used: u64,
}

/// The simulated device: loaded models and the allocator's view.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub total: u64,
    loaded: Vec<Loaded>,
    clock: u64,
    /// Working memory of the node currently running (for `/system_stats`).
    pub active: u64,
    /// Reserved-but-unallocated bytes the caching allocator keeps.
    pub cached: u64,
    /// `--lowvram`: partial loads leave room for the full activation estimate (and then some).
    pub lowvram: bool,
    /// Device memory held outside PyTorch's allocator and never given back (the `leak` fault).
    pub leaked: u64,
    /// Console lines of the loads made while planning the current node (ComfyUI's
    /// `Requested to load X` / `loaded completely|partially …`), moved into [`Plan::console`].
    console: Vec<String>,
}

impl Gpu {
    pub fn new(total: u64) -> Gpu {
        Gpu {
            total,
            loaded: Vec::new(),
            clock: 0,
            active: 0,
            cached: 0,
            lowvram: false,
            leaked: 0,
            console: Vec::new(),
        }
    }

    /// Bytes PyTorch may use at all.
    pub fn budget(&self) -> u64 {
        self.total
            .saturating_sub(NON_TORCH_OVERHEAD)
            .saturating_sub(self.leaked)
    }

    /// Bytes held by loaded models.
    pub fn resident(&self) -> u64 {
        self.loaded.iter().map(|l| l.bytes).sum()
    }

    /// Allocated by PyTorch right now.
    pub fn allocated(&self) -> u64 {
        self.resident() + self.active
    }

    /// Reserved by PyTorch's caching allocator.
    pub fn reserved(&self) -> u64 {
        self.allocated() + self.cached
    }

    /// Free device memory as CUDA reports it.
    pub fn free(&self) -> u64 {
        self.total
            .saturating_sub(NON_TORCH_OVERHEAD)
            .saturating_sub(self.leaked)
            .saturating_sub(self.reserved())
    }

    /// Names of loaded models, most recently used last.
    pub fn loaded_models(&self) -> Vec<(String, u64)> {
        let mut v = self.loaded.clone();
        v.sort_by_key(|l| l.last_used);
        v.into_iter().map(|l| (l.key, l.bytes)).collect()
    }

    /// Unloads everything (`/free`, or after an OOM).
    pub fn unload_all(&mut self) {
        self.loaded.clear();
        self.active = 0;
        self.cached = 0;
    }

    /// End of a node: activations are freed, the allocator keeps a little cached.
    pub fn finish_node(&mut self) {
        self.cached = (self.active / 8).min(512 * MIB);
        self.active = 0;
    }

    /// End of a prompt: `soft_empty_cache` returns cached blocks.
    pub fn empty_cache(&mut self) {
        self.cached = 0;
        self.active = 0;
    }

    fn touch(&mut self, key: &str) -> Option<u64> {
        self.clock += 1;
        let clock = self.clock;
        self.loaded.iter_mut().find(|l| l.key == key).map(|l| {
            l.last_used = clock;
            l.bytes
        })
    }

    /// Frees least-recently-used models other than `keep` until `need` bytes are free.
    fn make_room(&mut self, need: u64, keep: &str) {
        self.cached = 0;
        while self.budget().saturating_sub(self.allocated()) < need {
            let victim = self
                .loaded
                .iter()
                .enumerate()
                .filter(|(_, l)| l.key != keep)
                .min_by_key(|(_, l)| l.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    self.loaded.remove(i);
                }
                None => break,
            }
        }
    }

    fn set_loaded(&mut self, key: &str, bytes: u64) {
        self.clock += 1;
        let clock = self.clock;
        if let Some(l) = self.loaded.iter_mut().find(|l| l.key == key) {
            l.bytes = bytes;
            l.last_used = clock;
        } else {
            self.loaded.push(Loaded {
                key: key.to_string(),
                bytes,
                last_used: clock,
            });
        }
    }

    fn oom(&self, stage: Stage, after_steps: u32, requested: u64) -> Oom {
        let allocated = self.allocated();
        Oom {
            stage,
            after_steps,
            requested,
            allocated,
            reserved_free: self.cached,
            free: self.free(),
            total: self.total,
            tiled_fallback: false,
            partial: false,
            lora_patch: false,
        }
    }

    /// Allocates `need` bytes of working memory in `chunks` equal pieces; on failure returns
    /// the failing chunk size (the "Tried to allocate" of the message) and leaves the
    /// successful chunks allocated, as a real failure would.
    fn try_alloc(&mut self, need: u64, chunks: u64) -> Result<(), u64> {
        let chunk = need.div_ceil(chunks.max(1)).max(1);
        let mut left = need;
        while left > 0 {
            let this = chunk.min(left);
            if self.allocated() + self.cached + this > self.budget() {
                return Err(this);
            }
            self.active += this;
            left -= this;
        }
        Ok(())
    }

    /// Loads a model for use: returns (resident bytes, partial).
    fn load(
        &mut self,
        class: Option<&str>,
        key: &str,
        want: u64,
        reserve: u64,
        partial_ok: bool,
    ) -> (u64, bool) {
        if let Some(have) = self.touch(key) {
            if have >= want {
                return (have, false);
            }
        }
        self.make_room(want + reserve, key);
        let others = self.resident() - self.touch(key).unwrap_or(0);
        let room = self.budget().saturating_sub(others + reserve);
        let mb = |b: u64| b as f64 / MIB as f64;
        let (resident, partial) = if want <= room || !partial_ok {
            (want, false)
        } else {
            (room, true)
        };
        self.set_loaded(key, resident);
        if let Some(class) = class {
            self.console.push(format!("Requested to load {class}"));
            self.console.push(if partial {
                format!(
                    "loaded partially; {:.2} MB usable, {:.2} MB loaded, {:.2} MB offloaded, lowvram patches: 0",
                    mb(room),
                    mb(resident),
                    mb(want - resident)
                )
            } else {
                format!("loaded completely {} {} True", mb(room), mb(want))
            });
        }
        (resident, partial)
    }

    /// Decides what a node does to memory and whether it fails. Mutates the loaded-model
    /// state the way the real node would (models stay loaded after a success).
    pub fn plan(&mut self, work: &Work) -> Plan {
        self.active = 0;
        self.console.clear();
        let mut plan = self.plan_work(work);
        plan.console = std::mem::take(&mut self.console);
        plan.console.extend(
            plan.notes
                .iter()
                .filter(|n| n.starts_with("Warning: Ran out of memory"))
                .cloned(),
        );
        plan
    }

    fn plan_work(&mut self, work: &Work) -> Plan {
        match work {
            Work::Cpu { seconds } => Plan::cpu(*seconds),
            Work::Encode { key, bytes, full } => self.plan_encode(key, *bytes, *full),
            Work::Sample {
                model,
                latent,
                steps,
                passes,
                tiles,
                tile,
            } => self.plan_sample(model, latent, *steps, *passes, *tiles, *tile),
            Work::Decode {
                key,
                vae,
                width,
                height,
                frames,
                batch,
                tiled,
                fallback,
                encode,
            } => self.plan_decode(
                key, *vae, *width, *height, *frames, *batch, *tiled, *fallback, *encode,
            ),
            Work::Upscale {
                key,
                bytes,
                scale,
                image,
                per_batch,
            } => self.plan_upscale(key, *bytes, *scale, image, *per_batch),
            Work::Interpolate {
                key,
                film,
                image,
                multiplier,
                clear_after,
            } => self.plan_interpolate(key, *film, image, *multiplier, *clear_after),
        }
    }

    fn plan_encode(&mut self, key: &str, bytes: u64, full: bool) -> Plan {
        let work = 256 * MIB;
        let class = if bytes <= 512 * MIB {
            "SD1ClipModel"
        } else {
            "TEModel"
        };
        let (resident, partial) = self.load(Some(class), key, bytes, work, !full);
        let mut plan = Plan::cpu(0.2 + bytes as f64 / (12.0 * GIB as f64));
        if partial {
            plan.notes.push(format!(
                "loaded partially {:.1} MB of {:.1} MB",
                resident as f64 / MIB as f64,
                bytes as f64 / MIB as f64
            ));
        }
        if self.allocated() > self.budget() {
            let over = self.allocated() - self.budget();
            let requested = (bytes / 40).max(over + 1);
            self.loaded.retain(|l| l.key != key);
            plan.oom = Some(self.oom(Stage::Load, 0, requested));
            return plan;
        }
        match self.try_alloc(work, 2) {
            Ok(()) => plan.peak_allocated = self.allocated(),
            Err(requested) => plan.oom = Some(self.oom(Stage::Condition, 0, requested)),
        }
        plan
    }

    fn plan_sample(
        &mut self,
        model: &ModelVal,
        latent: &LatentVal,
        steps: u32,
        passes: u32,
        tiles: u32,
        tile: Option<(u64, u64)>,
    ) -> Plan {
        let f = model.family;
        let (w, h) = tile.unwrap_or((latent.width, latent.height));
        let tokens = f.tokens(w, h, latent.frames);
        let passes = passes.max(1) as u64;
        let activations = tokens * latent.batch.max(1) * passes * f.activation_per_token();
        let weights = ((model.bytes as f64) * (1.0 - model.offload.clamp(0.0, 1.0))) as u64;
        let lora = model.lora_total();
        let want = weights + lora;
        // ComfyUI's estimate of inference memory is a little low; that gap is where
        // first-step OOMs come from after a partial load.
        let reserve = if self.lowvram {
            activations * 5 / 4 + INFERENCE_RESERVE
        } else {
            activations * 4 / 5 + INFERENCE_RESERVE
        };
        let class = match f {
            Family::Sd15 | Family::Other => "BaseModel",
            Family::Sdxl => "SDXL",
            Family::Sd3 => "SD3",
            Family::Flux => "Flux",
            Family::Qwen => "QwenImage",
            Family::Wan14 | Family::Wan5 | Family::Wan1_3 => "WAN21",
            Family::Hunyuan => "HunyuanVideo",
            Family::Ltx2 | Family::Ltx13 => "LTXV",
        };
        let (resident, partial) =
            self.load(Some(class), &model.name, want, reserve, model.partial_ok);
        let offloaded = 1.0 - resident as f64 / want.max(1) as f64 + model.offload;
        let step_seconds = 0.05
            + tokens as f64
                * latent.batch.max(1) as f64
                * passes as f64
                * tiles.max(1) as f64
                * f.seconds_per_token()
                * (1.0 + 3.0 * offloaded.clamp(0.0, 1.0));
        let mut plan = Plan {
            steps,
            setup_seconds: 0.1 + want as f64 / (12.0 * GIB as f64),
            step_seconds,
            peak_allocated: 0,
            oom: None,
            notes: Vec::new(),
            console: Vec::new(),
        };
        if partial {
            plan.notes.push(format!(
                "loaded partially {:.1} MB of {:.1} MB",
                resident as f64 / MIB as f64,
                want as f64 / MIB as f64
            ));
        }
        // Load: weights that must move whole, then LoRA patching needs the LoRA weights and
        // a float32 copy of the layer being patched on the device.
        if self.resident() > self.budget() {
            let requested = (want / 40).clamp(16 * MIB, 2 * GIB);
            self.loaded.retain(|l| l.key != model.name);
            let mut oom = self.oom(Stage::Load, 0, requested);
            oom.lora_patch = lora > 0;
            oom.partial = partial;
            plan.oom = Some(oom);
            return plan;
        }
        if lora > 0 {
            let patch_tmp = lora + (weights / 50).min(GIB);
            if let Err(requested) = self.try_alloc(patch_tmp, 8) {
                let mut oom = self.oom(Stage::Load, 0, requested);
                oom.lora_patch = true;
                oom.partial = partial;
                self.active = 0;
                plan.oom = Some(oom);
                return plan;
            }
            self.active = 0;
        }
        // First step: the activations.
        if let Err(requested) = self.try_alloc(activations, 4) {
            let mut oom = self.oom(Stage::SampleFirst, 0, requested);
            oom.partial = partial;
            plan.oom = Some(oom);
            return plan;
        }
        // Step caches keep the input and output residual of each step for a window of up
        // to six steps (bf16, hidden size per token).
        if model.step_cache.is_some() {
            let per_step = tokens * latent.batch.max(1) * passes * f.hidden() * 2 * 2;
            for k in 1..=steps.min(6) {
                if let Err(requested) = self.try_alloc(per_step, 1) {
                    let stage = if k == 1 {
                        Stage::SampleFirst
                    } else {
                        Stage::SampleMiddle
                    };
                    let mut oom = self.oom(stage, k - 1, requested);
                    oom.partial = partial;
                    plan.oom = Some(oom);
                    return plan;
                }
            }
        }
        plan.peak_allocated = self.allocated();
        plan
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_decode(
        &mut self,
        key: &str,
        vae: VaeKind,
        width: u64,
        height: u64,
        frames: u64,
        batch: u64,
        tiled: Option<(u64, u64)>,
        fallback: bool,
        encode: bool,
    ) -> Plan {
        let lat_frames = if vae.frames_count() {
            vae.latent_frames(frames)
        } else {
            1
        };
        let per_px = vae.decode_per_pixel() / if encode { 2 } else { 1 };
        let full_need = per_px * width * height * lat_frames * batch.max(1);
        let tiled_need = |(tile, temporal): (u64, u64)| {
            let tw = tile.min(width);
            let th = tile.min(height);
            let tf = if vae.frames_count() {
                vae.latent_frames(temporal.min(frames.max(1)))
            } else {
                1
            };
            per_px * tw * th * tf
        };
        let weights = vae.weights();
        let first_need = match tiled {
            Some(t) => tiled_need(t),
            None => full_need,
        };
        let class = match vae {
            VaeKind::Image => "AutoencoderKL",
            _ => "AutoencodingEngine",
        };
        let (_, _) = self.load(Some(class), key, weights, first_need, false);
        let seconds = |need: u64| 0.05 + need as f64 / (4.0 * GIB as f64);
        let mut plan = Plan::cpu(seconds(first_need));
        match self.try_alloc(first_need, 4) {
            Ok(()) => {
                plan.peak_allocated = self.allocated();
                return plan;
            }
            Err(requested) => {
                if tiled.is_some() || !fallback {
                    plan.oom = Some(self.oom(Stage::Decode, 0, requested));
                    return plan;
                }
            }
        }
        // Core VAEDecode: "Warning: Ran out of memory when regular VAE decoding, retrying
        // with tiled VAE decoding." Images tile at 512 px, video at 256 px × 64 frames.
        self.active = 0;
        let t = if frames > 1 || vae.frames_count() {
            (256, 64)
        } else {
            (512, 1)
        };
        let need = tiled_need(t);
        plan.notes
            .push("Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.".into());
        plan.setup_seconds = seconds(full_need) * 0.1 + seconds(need) * 3.0;
        match self.try_alloc(need, 4) {
            Ok(()) => plan.peak_allocated = self.allocated(),
            Err(requested) => {
                let mut oom = self.oom(Stage::Decode, 0, requested);
                oom.tiled_fallback = true;
                plan.oom = Some(oom);
            }
        }
        plan
    }

    fn plan_upscale(
        &mut self,
        key: &str,
        bytes: u64,
        scale: u64,
        image: &ImageVal,
        per_batch: Option<u64>,
    ) -> Plan {
        let input = image.bytes();
        self.load(None, key, bytes, input, false);
        let mut plan = Plan::cpu(0.0);
        let out_px = image.width * image.height * scale * scale;
        if let Some(per_batch) = per_batch {
            let need = input + per_batch.max(1).min(image.count.max(1)) * out_px * 96;
            let batches = image.count.max(1).div_ceil(per_batch.max(1));
            plan.steps = batches.min(u32::MAX as u64) as u32;
            plan.step_seconds = 0.02 + (per_batch * out_px) as f64 * 2.0e-8;
            if let Err(requested) = self.try_alloc(need, 2) {
                plan.oom = Some(self.oom(Stage::Postprocess, 0, requested));
                return plan;
            }
            plan.peak_allocated = self.allocated();
            return plan;
        }
        // Core ImageUpscaleWithModel: tile 512, halved after each OOM down to 128.
        let mut tile = 512u64;
        loop {
            let work = input + tile * tile * scale * 2304;
            match self.try_alloc(work, 2) {
                Ok(()) => {
                    let tiles = image.width.div_ceil(tile)
                        * image.height.div_ceil(tile)
                        * image.count.max(1);
                    plan.steps = tiles.min(u32::MAX as u64) as u32;
                    plan.step_seconds = 0.01 + (tile * tile * scale * scale) as f64 * 1.0e-8;
                    plan.peak_allocated = self.allocated();
                    return plan;
                }
                Err(requested) => {
                    self.active = 0;
                    if tile <= 128 {
                        plan.oom = Some(self.oom(Stage::Postprocess, 0, requested));
                        return plan;
                    }
                    tile /= 2;
                }
            }
        }
    }

    fn plan_interpolate(
        &mut self,
        key: &str,
        film: bool,
        image: &ImageVal,
        multiplier: u64,
        clear_after: u64,
    ) -> Plan {
        let bytes = if film { 130 * MIB } else { 45 * MIB };
        self.load(None, key, bytes, 0, false);
        let in_px = image.width * image.height;
        let per_pair = in_px * if film { 2_400 } else { 600 };
        let per_frame = in_px * 3 * 4 * multiplier.max(1);
        let pairs = image.count.saturating_sub(1).max(1);
        let mut plan = Plan {
            steps: pairs.min(u32::MAX as u64) as u32,
            setup_seconds: 0.05,
            step_seconds: 0.01 + per_pair as f64 * 1.0e-10,
            peak_allocated: 0,
            oom: None,
            notes: Vec::new(),
            console: Vec::new(),
        };
        if let Err(requested) = self.try_alloc(per_pair, 1) {
            plan.oom = Some(self.oom(Stage::Postprocess, 0, requested));
            return plan;
        }
        // Interpolated frames pile up on the device until the node clears its cache.
        let window = clear_after.max(1).min(pairs);
        for k in 1..=window {
            if let Err(requested) = self.try_alloc(per_frame, 1) {
                plan.oom = Some(self.oom(Stage::Postprocess, (k - 1) as u32, requested));
                return plan;
            }
        }
        plan.peak_allocated = self.allocated();
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latent(w: u64, h: u64, frames: u64, batch: u64) -> LatentVal {
        LatentVal {
            width: w,
            height: h,
            frames,
            batch,
        }
    }

    fn sample(model: ModelVal, l: LatentVal, steps: u32, passes: u32) -> Work {
        Work::Sample {
            model,
            latent: l,
            steps,
            passes,
            tiles: 1,
            tile: None,
        }
    }

    #[test]
    fn families_and_sizes_from_names() {
        assert_eq!(
            Family::from_name("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors"),
            Family::Wan14
        );
        assert_eq!(Family::from_name("flux1-dev-Q4_K_S.gguf"), Family::Flux);
        assert_eq!(
            Family::from_name("sd_xl_base_1.0.safetensors"),
            Family::Sdxl
        );
        assert_eq!(
            Family::from_name("v1-5-pruned-emaonly-fp16.safetensors"),
            Family::Sd15
        );
        let fp16 = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp16.safetensors", true);
        let fp8 = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
        let q4 = ModelVal::from_file("Wan2.2-I2V-A14B-LowNoise-Q4_K_M.gguf", true);
        assert!(fp16.bytes > 26 * GIB && fp16.bytes < 29 * GIB);
        assert!(fp8.bytes > 13 * GIB && fp8.bytes < 14 * GIB);
        assert!(q4.bytes > 7 * GIB && q4.bytes < 9 * GIB);
        assert_eq!(upscale_model("4x-UltraSharp.pth").1, 4);
        assert_eq!(upscale_model("RealESRGAN_x2plus.pth").1, 2);
        assert_eq!(
            lora_file_bytes(
                "Wan21_T2V_14B_lightx2v_cfg_step_distill_lora_rank32.safetensors",
                Family::Wan14
            ),
            300 * MIB
        );
    }

    #[test]
    fn token_counts_follow_the_latent_geometry() {
        assert_eq!(Family::Sd15.tokens(512, 512, 1), 4096);
        assert_eq!(Family::Flux.tokens(1024, 1024, 1), 4096);
        // Wan 832x480x81: 21 latent frames of 52x30 patches.
        assert_eq!(Family::Wan14.tokens(832, 480, 81), 21 * 52 * 30);
        assert_eq!(Family::Ltx2.tokens(768, 512, 97), 13 * 24 * 16);
    }

    #[test]
    fn sd15_fits_at_512_and_fails_first_step_at_2048_on_8gib() {
        let mut gpu = Gpu::new(8 * GIB);
        let m = ModelVal::from_file("v1-5-pruned-emaonly-fp16.safetensors", true);
        let ok = gpu.plan(&sample(m.clone(), latent(512, 512, 1, 1), 20, 2));
        assert!(ok.oom.is_none(), "{ok:?}");
        gpu.finish_node();
        let bad = gpu.plan(&sample(m, latent(2048, 2048, 1, 1), 20, 2));
        let oom = bad
            .oom
            .expect("2048px SD1.5 with cfg must not fit in 8 GiB");
        assert_eq!(oom.stage, Stage::SampleFirst);
        assert_eq!(oom.after_steps, 0);
        assert!(oom.requested > oom.free);
    }

    #[test]
    fn wan_720p_fails_first_step_but_480p_fits_on_24gib() {
        let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
        let mut gpu = Gpu::new(24 * GIB);
        assert!(gpu
            .plan(&sample(m.clone(), latent(832, 480, 81, 1), 20, 1))
            .oom
            .is_none());
        gpu.unload_all();
        let oom = gpu
            .plan(&sample(m, latent(1280, 720, 81, 1), 20, 1))
            .oom
            .unwrap();
        assert_eq!(oom.stage, Stage::SampleFirst);
        assert!(
            oom.partial,
            "a 14 GB model plus 720p activations is loaded partially"
        );
    }

    #[test]
    fn lowvram_trades_speed_for_a_pass() {
        let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
        let work = sample(m, latent(1280, 720, 81, 1), 20, 1);
        let normal = Gpu::new(24 * GIB).plan(&work);
        assert_eq!(normal.oom.unwrap().stage, Stage::SampleFirst);
        let mut low = Gpu::new(24 * GIB);
        low.lowvram = true;
        let plan = low.plan(&work);
        assert!(plan.oom.is_none(), "{plan:?}");
        assert!(plan.step_seconds > normal.step_seconds);
    }

    #[test]
    fn block_swap_lets_a_wrapper_model_load() {
        let mut m = ModelVal::from_file("wan2.1_t2v_14B_bf16.safetensors", false);
        let mut gpu = Gpu::new(24 * GIB);
        let oom = gpu
            .plan(&sample(m.clone(), latent(832, 480, 33, 1), 10, 1))
            .oom
            .unwrap();
        assert_eq!(oom.stage, Stage::Load);
        gpu.unload_all();
        m.offload = 0.6;
        assert!(gpu
            .plan(&sample(m, latent(832, 480, 33, 1), 10, 1))
            .oom
            .is_none());
    }

    #[test]
    fn step_cache_fails_mid_sampling() {
        let mut m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
        let l = latent(832, 480, 81, 1);
        let mut gpu = Gpu::new(24 * GIB);
        assert!(gpu.plan(&sample(m.clone(), l, 20, 1)).oom.is_none());
        gpu.unload_all();
        m.step_cache = Some("TeaCache".into());
        let oom = gpu.plan(&sample(m, l, 20, 1)).oom.unwrap();
        assert_eq!(oom.stage, Stage::SampleMiddle);
        assert!(oom.after_steps >= 1 && oom.after_steps < 4, "{oom:?}");
    }

    #[test]
    fn lora_patching_can_fail_at_load() {
        let mut m = ModelVal::from_file("flux1-dev.safetensors", true);
        for i in 0..8 {
            m.loras.push((format!("l{i}.safetensors"), 600 * MIB));
        }
        let mut gpu = Gpu::new(24 * GIB);
        let oom = gpu
            .plan(&sample(m, latent(1024, 1024, 1, 1), 20, 1))
            .oom
            .unwrap();
        assert_eq!(oom.stage, Stage::Load);
        assert!(oom.lora_patch);
    }

    #[test]
    fn core_vae_decode_falls_back_to_tiles() {
        let mut gpu = Gpu::new(8 * GIB);
        let work = Work::Decode {
            key: "vae".into(),
            vae: VaeKind::Image,
            width: 2048,
            height: 2048,
            frames: 1,
            batch: 1,
            tiled: None,
            fallback: true,
            encode: false,
        };
        let plan = gpu.plan(&work);
        assert!(plan.oom.is_none());
        assert!(plan.notes[0].contains("tiled"));
        // Without the fallback (a wrapper decode) the same decode fails.
        gpu.unload_all();
        let Work::Decode { .. } = work else {
            unreachable!()
        };
        let strict = Work::Decode {
            key: "vae".into(),
            vae: VaeKind::Image,
            width: 2048,
            height: 2048,
            frames: 1,
            batch: 1,
            tiled: None,
            fallback: false,
            encode: false,
        };
        assert_eq!(gpu.plan(&strict).oom.unwrap().stage, Stage::Decode);
    }

    #[test]
    fn models_are_unloaded_lru_to_make_room() {
        let mut gpu = Gpu::new(24 * GIB);
        let enc = Work::Encode {
            key: "umt5".into(),
            bytes: 11 * GIB,
            full: false,
        };
        assert!(gpu.plan(&enc).oom.is_none());
        gpu.finish_node();
        assert_eq!(gpu.loaded_models().len(), 1);
        let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
        assert!(gpu
            .plan(&sample(m, latent(832, 480, 81, 1), 4, 1))
            .oom
            .is_none());
        let names: Vec<String> = gpu.loaded_models().into_iter().map(|m| m.0).collect();
        assert_eq!(
            names,
            vec!["wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors"]
        );
    }

    #[test]
    fn planning_is_deterministic() {
        let m = ModelVal::from_file("flux1-dev-Q8_0.gguf", true);
        let w = sample(m, latent(1536, 1536, 1, 2), 20, 1);
        let a = Gpu::new(12 * GIB).plan(&w);
        let b = Gpu::new(12 * GIB).plan(&w);
        assert_eq!(a, b);
    }

    #[test]
    fn interpolation_grows_until_it_fails() {
        let mut gpu = Gpu::new(4 * GIB);
        let plan = gpu.plan(&Work::Interpolate {
            key: "rife".into(),
            film: false,
            image: ImageVal {
                width: 1920,
                height: 1080,
                count: 161,
            },
            multiplier: 4,
            clear_after: 100,
        });
        let oom = plan.oom.unwrap();
        assert_eq!(oom.stage, Stage::Postprocess);
        assert!(oom.after_steps > 0);
    }
}
