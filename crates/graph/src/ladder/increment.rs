//! What the ladder re-adds step by step ([`Increment`], with its command-line names) and a
//! reduction that could not be done safely ([`NotSeparable`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// One rung of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Increment {
    /// Step 0: every reduction applied.
    Minimal,
    /// Width/height back to the target's.
    Resolution,
    /// Frame counts back to the target's.
    Frames,
    /// Batch sizes back to the target's.
    Batch,
    /// The second diffusion model (expert, refiner) back.
    Models,
    /// LoRAs back.
    Lora,
    /// Widget-level quantization (weight_dtype fp8…) back.
    Quantization,
    /// Step caches and torch.compile back.
    Cache,
    /// Post-processing (upscale, interpolation, detailers, second pass) back.
    Postprocess,
    /// Steps back (only with `--min-steps`).
    Steps,
}

impl Increment {
    /// The default ladder order.
    pub const LADDER: [Increment; 9] = [
        Increment::Resolution,
        Increment::Frames,
        Increment::Batch,
        Increment::Models,
        Increment::Lora,
        Increment::Quantization,
        Increment::Cache,
        Increment::Postprocess,
        Increment::Steps,
    ];

    /// The snake_case name used on the command line, in file names and in plan.json.
    pub fn name(self) -> &'static str {
        match self {
            Increment::Minimal => "minimal",
            Increment::Resolution => "resolution",
            Increment::Frames => "frames",
            Increment::Batch => "batch",
            Increment::Models => "models",
            Increment::Lora => "lora",
            Increment::Quantization => "quantization",
            Increment::Cache => "cache",
            Increment::Postprocess => "postprocess",
            Increment::Steps => "steps",
        }
    }
}

impl fmt::Display for Increment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Increment {
    type Err = String;

    fn from_str(s: &str) -> Result<Increment, String> {
        let s = s.trim().to_ascii_lowercase();
        Increment::LADDER
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown increment '{s}'; use one of: {}",
                    Increment::LADDER.map(Increment::name).join(", ")
                )
            })
    }
}

/// A reduction that could not be done safely.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotSeparable {
    /// The increment concerned.
    pub increment: Increment,
    /// Why.
    pub reason: String,
    /// The nodes concerned.
    pub nodes: Vec<String>,
}
