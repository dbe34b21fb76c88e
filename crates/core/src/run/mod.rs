//! One submission and its evidence: cold start, socket, submit, follow, reconcile with history,
//! VRAM sampling, and the [`RunRecord`] (`run.json`) that holds the outcome and the raw events.

pub mod benchmark;
pub mod console;
pub(crate) mod degenerate;
pub(crate) mod diagnosis;
pub mod execute;
mod follow;
pub mod frames;
pub(crate) mod hang;
pub(crate) mod observer;
pub mod product;
pub mod record;
pub(crate) mod rewrite;
pub(crate) mod sampler;
mod state;
pub(crate) mod timing;

pub use execute::{execute, execute_with, RunRequest};
pub use observer::{Both, NdjsonWriter, RawEvent, RunEvent, RunObserver};
pub use record::{
    HangInfo, IncompleteOutput, InterruptedBy, Interruption, Outcome, Rejection, RunError,
    RunRecord, ServerLostInfo, TimeoutInfo, TimeoutReason, VramReport, VramSample,
};
