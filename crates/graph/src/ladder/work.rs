//! The work a variant asks of the sampler, as its graph says it: sampler steps, and size ×
//! latent frames × batch (the run-time predictor scales measured seconds per step by it, the
//! memory-pressure bound squares its ratio). Read from the catalog's roles (samplers,
//! schedulers, size and frame sources), its frame sources' temporal compression
//! ([`crate::catalog::temporal`]) and literal inputs (or a primitive node's `value`); what the
//! graph does not say counts as 1. Pure.

use crate::catalog::{Catalog, Role};
use crate::nodedefs::NodeDefs;
use crate::workflow::{Input, Workflow};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What one run of a variant has to do.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Sampler steps of the whole run: every sampler's `steps` (a `start_at_step` /
    /// `end_at_step` window counted as its length), or its scheduler's when the sampler has none.
    pub steps: u32,
    /// Pixels of the largest latent source (width × height).
    pub pixels: u64,
    /// Frames of the largest frame source as the graph asks for them (1 for an image): what
    /// the VAE decodes and the run writes.
    pub frames: u64,
    /// Latent frames the model samples for them, the largest over the frame sources: a video
    /// latent compresses frames in time (81 Wan frames are 21 latent frames), a frame source
    /// whose compression the catalog does not know counts its frames as asked. None in
    /// journals written before it was kept (their work counts the frames as asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latent_frames: Option<u64>,
    /// Batch size of the largest latent source.
    pub batch: u64,
    /// Which models the run loads: a digest of the diffusion-model, text-encoder and VAE
    /// loaders' literal text inputs (file names, dtypes), LoRAs left out (small files). Two
    /// variants with the same digest load the same models, so their setup takes the same time.
    /// None in journals written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<u64>,
}

impl Work {
    /// Pixels × latent frames × batch: the tokens one sampler step works on, what its time
    /// scales with (frames as asked where the latent frames are not known).
    pub fn units(&self) -> f64 {
        let frames = self.latent_frames.unwrap_or(self.frames);
        self.pixels.max(1) as f64 * frames.max(1) as f64 * self.batch.max(1) as f64
    }

    /// Pixels × frames as asked × batch: what the VAE decodes and the run writes after the
    /// last step.
    pub fn decoded_units(&self) -> f64 {
        self.pixels.max(1) as f64 * self.frames.max(1) as f64 * self.batch.max(1) as f64
    }
}

/// The work of `w` (see [`Work`]).
pub fn work_of(w: &Workflow, catalog: &Catalog, defs: &NodeDefs) -> Work {
    let mut out = Work {
        steps: 0,
        pixels: 0,
        frames: 1,
        latent_frames: Some(1),
        batch: 1,
        models: None,
    };
    let mut loaders: Vec<String> = Vec::new();
    let mut scheduler_steps = 0u32;
    let mut sampler_without_steps = false;
    for (id, node) in &w.nodes {
        let has = |role| catalog.has(&node.class_type, role, defs);
        if has(Role::DiffusionLoader) || has(Role::TextEncoderLoader) || has(Role::VaeLoader) {
            let mut text: Vec<String> = node
                .inputs
                .iter()
                .filter_map(|(name, input)| match input.as_literal() {
                    Some(Value::String(v)) => Some(format!("{name}={v}")),
                    _ => None,
                })
                .collect();
            text.sort();
            loaders.push(format!("{}({})", node.class_type, text.join(",")));
        }
        if has(Role::SizeSource) {
            let (width, height) = (int(w, id, "width"), int(w, id, "height"));
            if let (Some(width), Some(height)) = (width, height) {
                out.pixels = out.pixels.max(width * height);
            }
            if let Some(batch) = int(w, id, "batch_size") {
                out.batch = out.batch.max(batch);
            }
        }
        if has(Role::FrameSource) {
            let frames = ["length", "num_frames", "video_frames", "frames"]
                .iter()
                .find_map(|name| int(w, id, name));
            if let Some(frames) = frames {
                out.frames = out.frames.max(frames);
                let latent = crate::catalog::temporal(&node.class_type)
                    .map_or(frames, |t| t.latent_frames(frames));
                out.latent_frames = out.latent_frames.max(Some(latent));
            }
        }
        if has(Role::Sampler) {
            match int(w, id, "steps") {
                Some(steps) => {
                    let start = int(w, id, "start_at_step").unwrap_or(0).min(steps);
                    let end = int(w, id, "end_at_step").unwrap_or(steps).min(steps);
                    out.steps = out.steps.saturating_add(clip(end.saturating_sub(start)));
                }
                None => sampler_without_steps = true,
            }
        } else if has(Role::Scheduler) {
            scheduler_steps =
                scheduler_steps.saturating_add(clip(int(w, id, "steps").unwrap_or(0)));
        }
    }
    if sampler_without_steps {
        out.steps = out.steps.saturating_add(scheduler_steps);
    }
    if !loaders.is_empty() {
        loaders.sort();
        let digest = Sha256::digest(loaders.join("\n").as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        out.models = Some(u64::from_be_bytes(first));
    }
    out
}

fn clip(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A non-negative integer input: a literal, or a link to a primitive node's `value`.
fn int(w: &Workflow, node: &str, name: &str) -> Option<u64> {
    let input = w.node(node)?.inputs.get(name)?;
    let literal = match input {
        Input::Literal(v) => v.clone(),
        Input::Link(l) => w.node(&l.node)?.inputs.get("value")?.as_literal()?.clone(),
    };
    let n = match literal {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (n >= 0.0 && n.is_finite()).then_some(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn work(prompt: Value) -> Work {
        let w = crate::workflow::parse_api(&prompt, "t.json").unwrap();
        work_of(&w, &Catalog::builtin(), &NodeDefs::default())
    }

    #[test]
    fn two_experts_split_the_steps_of_a_video_latent() {
        let w = work(json!({
            "13": {"class_type": "EmptyHunyuanLatentVideo",
                   "inputs": {"width": 1280, "height": 720, "length": 81, "batch_size": 1}},
            "14": {"class_type": "KSamplerAdvanced",
                   "inputs": {"steps": 20, "start_at_step": 0, "end_at_step": 10}},
            "15": {"class_type": "KSamplerAdvanced",
                   "inputs": {"steps": 20, "start_at_step": 10, "end_at_step": 10000}},
        }));
        assert_eq!(
            w,
            Work {
                steps: 20,
                pixels: 1280 * 720,
                frames: 81,
                latent_frames: Some(21),
                batch: 1,
                models: None
            }
        );
        assert_eq!(w.units(), (1280 * 720 * 21) as f64);
        assert_eq!(w.decoded_units(), (1280 * 720 * 81) as f64);
    }

    #[test]
    fn video_latents_count_their_latent_frames() {
        let latent = |class: &str, length: u64| {
            let w = work(json!({
                "1": {"class_type": class,
                      "inputs": {"width": 832, "height": 480, "length": length, "batch_size": 1}},
            }));
            (w.frames, w.latent_frames, w.units())
        };
        // Wan: ((81 - 1) // 4) + 1 = 21; 5 frames are 2 latent frames, so 81 against 5 is
        // 10.5× the tokens, not 16.2×.
        assert_eq!(
            latent("WanImageToVideo", 81),
            (81, Some(21), (832 * 480 * 21) as f64)
        );
        assert_eq!(latent("WanImageToVideo", 5).1, Some(2));
        // LTXV: ((97 - 1) // 8) + 1 = 13.
        assert_eq!(latent("EmptyLTXVLatentVideo", 97).1, Some(13));
        // A frame source the catalog knows only by its signature: frames as asked.
        let defs = NodeDefs::from_value(&json!({
            "MyVideoLatent": {"input": {"required": {"width": ["INT", {}], "height": ["INT", {}],
                "length": ["INT", {}]}}, "output": ["LATENT"]}
        }))
        .unwrap();
        let prompt = json!({"1": {"class_type": "MyVideoLatent",
            "inputs": {"width": 64, "height": 64, "length": 81}}});
        let w = crate::workflow::parse_api(&prompt, "t.json").unwrap();
        let w = work_of(&w, &Catalog::builtin(), &defs);
        assert_eq!((w.frames, w.latent_frames), (81, Some(81)));
    }

    #[test]
    fn a_journal_without_latent_frames_counts_the_frames_as_asked() {
        let old: Work =
            serde_json::from_value(json!({"steps": 20, "pixels": 100, "frames": 81, "batch": 1}))
                .unwrap();
        assert_eq!(old.latent_frames, None);
        assert_eq!(old.units(), 8100.0);
        let new = serde_json::to_value(Work {
            latent_frames: Some(21),
            ..old
        })
        .unwrap();
        assert_eq!(new["frames"], 81);
        assert_eq!(new["latent_frames"], 21);
    }

    #[test]
    fn an_image_batch_and_a_scheduler_counted_for_a_custom_sampler() {
        let w = work(json!({
            "1": {"class_type": "PrimitiveNode", "inputs": {"value": 768}},
            "5": {"class_type": "EmptyLatentImage",
                  "inputs": {"width": ["1", 0], "height": "512", "batch_size": 4}},
            "3": {"class_type": "KSampler", "inputs": {"steps": 25}},
            "8": {"class_type": "SamplerCustomAdvanced", "inputs": {"sigmas": ["9", 0]}},
            "9": {"class_type": "BasicScheduler", "inputs": {"steps": 6}},
        }));
        assert_eq!(
            (w.steps, w.pixels, w.frames, w.latent_frames, w.batch),
            (31, 768 * 512, 1, Some(1), 4)
        );
        // A graph that says nothing: no steps, one unit of work, no models.
        let empty = work(json!({"1": {"class_type": "SaveImage", "inputs": {}}}));
        assert_eq!((empty.steps, empty.units(), empty.models), (0, 1.0, None));
    }

    #[test]
    fn the_models_digest_follows_the_loaders_files_not_the_loras_or_the_latent() {
        let graph = |unet: &str, lora: bool, width: u64| {
            let mut g = json!({
                "1": {"class_type": "UNETLoader",
                      "inputs": {"unet_name": unet, "weight_dtype": "fp8_e4m3fn"}},
                "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "umt5.safetensors"}},
                "5": {"class_type": "EmptyLatentImage",
                      "inputs": {"width": width, "height": 512, "batch_size": 1}},
            });
            if lora {
                g["4"] = json!({"class_type": "LoraLoaderModelOnly",
                    "inputs": {"model": ["1", 0], "lora_name": "x.safetensors",
                               "strength_model": 1.0}});
            }
            work(g).models
        };
        let base = graph("high.safetensors", false, 512);
        assert!(base.is_some());
        assert_eq!(graph("high.safetensors", true, 1024), base);
        assert_ne!(graph("low.safetensors", false, 512), base);
    }
}
