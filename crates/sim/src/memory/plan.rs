//! Planning one node: what it asks of the GPU ([`Work`]), and what it does to memory —
//! loads, activations per step, VAE decode with its tiled fallback, upscaling, interpolation —
//! and whether and where it runs out of memory ([`Plan`], [`Oom`], [`Stage`]).

use super::gpu::Gpu;
use super::sizes::{Family, ImageVal, LatentVal, ModelVal, VaeKind};
use super::{GIB, INFERENCE_RESERVE, MIB};

/// Where in a run a failure happens (the diagnosis vocabulary of the OOM fixtures).
/// In the order a run meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// Device memory a live sampler preview takes (the TAESD decoder and one preview image).
const PREVIEW_BYTES: u64 = 96 * MIB;
/// Simulated seconds a live sampler preview adds to each step.
const PREVIEW_SECONDS: f64 = 0.03;

/// An explicit tiled VAE decode or encode (`VAEDecodeTiled`'s widgets, in pixels and frames).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tiling {
    /// Tile edge in pixels.
    pub tile: u64,
    /// Pixels shared by neighbouring tiles (at most a quarter of the tile, as the node clamps it).
    pub overlap: u64,
    /// Frames decoded at a time (video VAEs whose memory grows with frames only).
    pub temporal: u64,
    /// Frames shared by neighbouring chunks.
    pub temporal_overlap: u64,
}

impl Tiling {
    /// Spatial tiles only, with the node's default overlaps.
    pub fn spatial(tile: u64) -> Tiling {
        Tiling {
            tile,
            overlap: 64,
            temporal: 64,
            temporal_overlap: 8,
        }
    }
}

/// What a node asks of the GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// CPU-only work taking some simulated seconds.
    Cpu { seconds: f64 },
    /// Text encoding: loads the text encoder (`full` = moved whole, no partial load; `cpu` =
    /// the loader's `device` is `cpu`: nothing on the GPU, slower).
    Encode {
        key: String,
        bytes: u64,
        full: bool,
        cpu: bool,
    },
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
        /// Explicit tiling.
        tiled: Option<Tiling>,
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

impl Gpu {
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

    /// `plan` with a failure planted at `stage` (the `plant` fault): the OOM this model raises
    /// there, asking for more than is free — a sampler on its first step or after half its
    /// steps (`sample_middle`, at least one), a decode or a post-processing node before any
    /// progress. A failure of the node's own that comes first (an earlier stage, or the same
    /// stage no later) is kept.
    pub fn planted(&mut self, mut plan: Plan, stage: Stage) -> Plan {
        let after_steps = match stage {
            Stage::SampleMiddle => (plan.steps / 2).max(1),
            _ => 0,
        };
        if plan
            .oom
            .as_ref()
            .is_some_and(|o| (o.stage, o.after_steps) <= (stage, after_steps))
        {
            return plan;
        }
        let requested = self.free() + 512 * MIB;
        let mut oom = self.oom(stage, after_steps, requested);
        oom.tiled_fallback = stage == Stage::Decode
            && plan
                .console
                .iter()
                .any(|l| l.starts_with("Warning: Ran out of memory"));
        plan.oom = Some(oom);
        plan
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
            Work::Encode {
                key,
                bytes,
                full,
                cpu,
            } => self.plan_encode(key, *bytes, *full, *cpu),
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

    fn plan_encode(&mut self, key: &str, bytes: u64, full: bool, cpu: bool) -> Plan {
        if cpu {
            // The encoder runs on the CPU: no device memory, several times slower.
            return Plan::cpu(0.2 + bytes as f64 / (1.5 * GIB as f64));
        }
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
            self.unload(key);
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
        let activations = ((tokens * latent.batch.max(1) * passes * f.activation_per_token())
            as f64
            * self.knobs.attention_memory) as u64;
        let weights = ((model.bytes as f64) * (1.0 - model.offload.clamp(0.0, 1.0))) as u64;
        let lora = model.lora_total();
        let want = weights + lora;
        // ComfyUI's estimate of inference memory is a little low; that gap is where
        // first-step OOMs come from after a partial load.
        // Dynamic VRAM evicts weights under pressure, so the whole estimate stays free (and
        // `--lowvram` does nothing).
        let reserve = if self.knobs.dynamic {
            activations + INFERENCE_RESERVE
        } else if self.lowvram {
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
                * self.knobs.attention_time
                * (1.0 + 3.0 * offloaded.clamp(0.0, 1.0));
        // A live preview per step: the small preview decoder and one preview image.
        let (preview_bytes, preview_seconds) = if self.previews {
            (PREVIEW_BYTES, PREVIEW_SECONDS)
        } else {
            (0, 0.0)
        };
        let mut plan = Plan {
            steps,
            setup_seconds: 0.1 + want as f64 / (12.0 * GIB as f64),
            step_seconds: step_seconds + preview_seconds,
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
            self.unload(&model.name);
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
        // First step: the activations (and the preview decoder's working memory).
        if let Err(requested) = self.try_alloc(activations + preview_bytes, 4) {
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
        // The `step-growth` fault: a cache that grows by a fixed size every step.
        if self.step_growth > 0 {
            for k in 2..=steps {
                if let Err(requested) = self.try_alloc(self.step_growth, 1) {
                    let mut oom = self.oom(Stage::SampleMiddle, k - 1, requested);
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
        tiled: Option<Tiling>,
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
        let tiled_need = |t: Tiling| {
            let tw = t.tile.min(width);
            let th = t.tile.min(height);
            let tf = if vae.frames_count() {
                vae.latent_frames(t.temporal.min(frames.max(1)))
            } else {
                1
            };
            per_px * tw * th * tf
        };
        // Work done by a tiled decode: each pixel once per tiling, more where tiles overlap.
        // Image VAEs decode three offset tilings and average them (`decode_tiled_`); video VAEs
        // one (`decode_tiled_3d`).
        let tiled_work = |t: Tiling| {
            let overlap = t.overlap.min(t.tile / 4);
            let spatial = (t.tile as f64 / (t.tile - overlap).max(1) as f64).powi(2);
            let temporal = if vae.frames_count() && t.temporal < frames {
                let o = t.temporal_overlap.min(t.temporal / 2);
                t.temporal as f64 / (t.temporal - o).max(1) as f64
            } else {
                1.0
            };
            let passes = if vae == VaeKind::Image { 3.0 } else { 1.0 };
            (full_need as f64 * spatial * temporal * passes) as u64
        };
        let weights = vae.weights();
        let (first_need, first_work) = match tiled {
            Some(t) => (tiled_need(t), tiled_work(t)),
            None => (full_need, full_need),
        };
        let class = match vae {
            VaeKind::Image => "AutoencoderKL",
            _ => "AutoencodingEngine",
        };
        let (_, _) = self.load(Some(class), key, weights, first_need, false);
        let seconds = |need: u64| 0.05 + need as f64 / (4.0 * GIB as f64);
        let mut plan = Plan::cpu(seconds(first_work));
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
            Tiling {
                tile: 256,
                overlap: 64,
                temporal: 64,
                temporal_overlap: 8,
            }
        } else {
            Tiling::spatial(512)
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
