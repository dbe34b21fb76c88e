//! The command line's spelling of the library's journal choices (`--strategy`, `--on-drift`,
//! `--walk-on-pass`): argument-parser mirrors of the core enums, mapped onto them.

use comfy_bisect_core::session::journal::{OnDrift, Strategy, WalkOnPass};

/// How the ladder is searched (core: [`Strategy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    /// One increment per run, in ladder order, until the first failure.
    Linear,
    /// Bisection over the ladder (assumes failures are monotone).
    Binary,
}

impl From<StrategyArg> for Strategy {
    fn from(value: StrategyArg) -> Strategy {
        match value {
            StrategyArg::Linear => Strategy::Linear,
            StrategyArg::Binary => Strategy::Binary,
        }
    }
}

/// What a session does when the environment changes (core: [`OnDrift`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDriftArg {
    /// Re-run the last passing step under the new environment, then go on.
    Reanchor,
    /// End the session: "incomplete: environment changed".
    Stop,
}

impl From<OnDriftArg> for OnDrift {
    fn from(value: OnDriftArg) -> OnDrift {
        match value {
            OnDriftArg::Reanchor => OnDrift::Reanchor,
            OnDriftArg::Stop => OnDrift::Stop,
        }
    }
}

/// Whether a passing target is walked for the first step under memory pressure (core:
/// [`WalkOnPass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WalkOnPassArg {
    /// Walk when a cue on the passing target fires (pressure, a partial load, a model staged at
    /// or above the card, the VRAM peak at the card's total).
    Auto,
    /// Walk whenever the target passes.
    Always,
    /// Never: a passing target ends the workflow ("could not reproduce").
    Never,
}

impl From<WalkOnPassArg> for WalkOnPass {
    fn from(value: WalkOnPassArg) -> WalkOnPass {
        match value {
            WalkOnPassArg::Auto => WalkOnPass::Auto,
            WalkOnPassArg::Always => WalkOnPass::Always,
            WalkOnPassArg::Never => WalkOnPass::Never,
        }
    }
}
