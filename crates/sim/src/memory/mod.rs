//! The simulator's deterministic GPU memory model.
//!
//! Pure functions and plain data: model file sizes from name patterns, activation sizes from
//! latent tokens × frames × batch per model family (`memory/sizes.rs`), and a [`Gpu`] that loads
//! models lazily (at the consuming node, as ComfyUI's `load_models_gpu` does), unloads
//! least-recently-used models to make room (`memory/gpu.rs`), and decides whether — and at
//! which step — a node runs out of memory (`memory/plan.rs`). The formulas are documented in
//! `docs/simulator.md`; every number here is an assumption chosen to reproduce realistic
//! failure points, not a measurement.

mod gpu;
mod plan;
mod sizes;
#[cfg(test)]
mod tests;

pub use gpu::{Gpu, Knobs};
pub use plan::{Oom, Plan, Stage, Tiling, Work};
pub use sizes::{
    checkpoint_clip_bytes, lora_file_bytes, model_file_bytes, quant_factor, text_encoder_bytes,
    upscale_model, Family, ImageVal, LatentVal, ModelVal, VaeKind,
};

/// One gibibyte.
pub const GIB: u64 = 1 << 30;
/// One mebibyte.
pub const MIB: u64 = 1 << 20;

/// Memory the CUDA context and non-PyTorch allocations take before any tensor exists.
pub(crate) const NON_TORCH_OVERHEAD: u64 = 420 * MIB;
/// Headroom ComfyUI keeps free for inference when it partially loads a model.
pub(crate) const INFERENCE_RESERVE: u64 = GIB;
