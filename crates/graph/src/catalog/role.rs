//! The words of the catalog: the roles a node class can play ([`Role`]) and a video latent
//! source's temporal compression ([`Temporal`]). The built-in table and the catalog both read
//! them; this file reads neither.

use serde::{Deserialize, Serialize};

/// One role a node class can play. A class may have several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Loads a diffusion model (checkpoint, UNet, GGUF, wrapper model loader).
    DiffusionLoader,
    /// Loads a text encoder (CLIP, T5, GGUF CLIP…).
    TextEncoderLoader,
    /// Loads a VAE.
    VaeLoader,
    /// Applies a LoRA and passes its MODEL/CLIP through (bypass removes it).
    Lora,
    /// Builds a LoRA list consumed through a socket (`easy loraStack`, `WanVideoLoraSelect`):
    /// neutralised by disconnecting the consumer's socket.
    LoraStack,
    /// Creates a latent (or embeds) with width/height.
    SizeSource,
    /// Defines a frame count (length / num_frames / video_frames).
    FrameSource,
    /// An audio length that must follow the video frame count (LTX-2 audio latent).
    AudioLength,
    /// Samples (KSampler, KSamplerAdvanced, SamplerCustom…, wrapper samplers).
    Sampler,
    /// Computes sigmas / steps for custom sampling.
    Scheduler,
    /// Splits sigmas into a high and a low part (split-sigma experts).
    SigmaSplit,
    /// Decodes latents (tiled or not).
    Decoder,
    /// Encodes images into latents.
    Encoder,
    /// Step-skipping cache (TeaCache, MagCache, EasyCache, FBCache, wrapper cache args).
    StepCache,
    /// Reference / KV cache (QwenImage21Cache, FluxKVCache…): part of the cache increment.
    KvCache,
    /// torch.compile patch or wrapper compile args.
    Compile,
    /// Memory saver (block swap, offload, tiled VAE): kept in every variant.
    MemorySaver,
    /// Attention backend patch (SageAttention…): kept in every variant.
    Attention,
    /// Post-processing after sampling (model upscale, interpolation, detailers…).
    PostProcess,
    /// Frame interpolation (its fps multiplier must be undone downstream).
    FrameInterpolation,
    /// Latent upscale that feeds a second sampling pass (hires fix, LTX-2 stage 2).
    LatentUpscale,
    /// Output node.
    Output,
    /// A constant number source (PrimitiveInt, INTConstant…) whose `value` can be edited.
    Constant,
    /// A MODEL→MODEL patch that defines sampling behaviour and stays (ModelSamplingSD3…).
    ModelPatch,
}

impl Role {
    /// Every role, for listing.
    pub(crate) const ALL: [Role; 24] = [
        Role::DiffusionLoader,
        Role::TextEncoderLoader,
        Role::VaeLoader,
        Role::Lora,
        Role::LoraStack,
        Role::SizeSource,
        Role::FrameSource,
        Role::AudioLength,
        Role::Sampler,
        Role::Scheduler,
        Role::SigmaSplit,
        Role::Decoder,
        Role::Encoder,
        Role::StepCache,
        Role::KvCache,
        Role::Compile,
        Role::MemorySaver,
        Role::Attention,
        Role::PostProcess,
        Role::FrameInterpolation,
        Role::LatentUpscale,
        Role::Output,
        Role::Constant,
        Role::ModelPatch,
    ];

    /// The snake_case name used in TOML files.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// How many latent frames a video latent source makes of the frames the graph asks for: its
/// VAE's temporal compression, as the node's upstream source computes it (`builtin.rs` cites
/// each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporal {
    /// `(frames − 1) / n + 1` latent frames (integer division): the first frame alone, then one
    /// per `n` (`Stride(1)`: one per frame).
    Stride(u64),
    /// MiniMax H3: the frames snapped up to the `17k + 5` grid (at least 5), then 2 latent
    /// frames for the first 5 and 5 for every 17 after them.
    MiniMaxH3,
}

impl Temporal {
    /// The latent frames for `frames` asked frames.
    pub fn latent_frames(self, frames: u64) -> u64 {
        match self {
            Temporal::Stride(n) => frames.saturating_sub(1) / n.max(1) + u64::from(frames > 0),
            Temporal::MiniMaxH3 => {
                let n = frames.max(5);
                let aligned = n + (22 - n % 17) % 17;
                (aligned - 5) / 17 * 5 + 2
            }
        }
    }
}
