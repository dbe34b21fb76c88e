//! What diagnosis reads and writes: the evidence a failed run left behind ([`Evidence`], from
//! the run module's frames or a paste), what only a console log shows ([`ConsoleSignals`]), a
//! parsed paste ([`ParsedInput`]) or why it could not be read ([`ParseError`]), and the result,
//! [`Diagnosis`]. The rules (`kind`, `stage`, `advice`) and the parsers (`parse`) all read
//! these types; this file uses none of them.

use crate::vocab::{FailureKind, Numbers, RunOutcomeHint, Stage, StageConfidence};
use serde::{Deserialize, Serialize};

/// What a run left behind when it failed: the execution_error fields, the node timeline and the
/// outcome. Built by the run module from WebSocket frames, or by [`super::parse_input`] from pasted text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// `node_id` of the execution_error (the node ComfyUI was executing).
    pub node_id: Option<String>,
    /// `node_type` (class) of the failing node.
    pub node_type: Option<String>,
    /// Exception type as printed, e.g. `torch.OutOfMemoryError`.
    pub exception_type: Option<String>,
    /// Exception message as printed (multi-line messages keep their newlines).
    pub exception_message: Option<String>,
    /// Traceback lines (`File "..."` lines and the source line after each).
    pub traceback: Vec<String>,
    /// The nodes that ran, in order, each with the last progress seen.
    pub progress: Vec<NodeProgress>,
    /// How the run ended when it did not end with an execution_error.
    pub outcome: Option<RunOutcomeHint>,
    /// Nodes the server served from its cache: they did not run in this run (their outputs
    /// were held from an earlier one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cached_nodes: Vec<String>,
}

/// The last progress seen for one node of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeProgress {
    /// Node id in the API prompt (empty when a pasted log does not say which node printed it).
    pub node_id: String,
    /// Node class, when known.
    pub class_type: Option<String>,
    /// Last progress value (e.g. steps done).
    pub value: u64,
    /// Progress maximum (e.g. total steps).
    pub max: u64,
}

/// The root cause, which a diagnosis never claims: it serializes as `"unknown"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootCause {
    /// Always: the evidence shows where and how, not why.
    #[default]
    Unknown,
}

/// The result of [`super::diagnose`]. The fields up to `root_cause` are the stable JSON contract of
/// `comfy-bisect diagnose --json`; the fields after it are additions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// Failure kind.
    pub kind: FailureKind,
    /// Best-supported stage.
    pub stage: Stage,
    /// Why that stage, in words.
    pub stage_evidence: String,
    /// Failing node class, when known.
    pub node_type: Option<String>,
    /// Failing node id, when known.
    pub node_id: Option<String>,
    /// Allocator numbers in MiB, as printed.
    pub numbers: Numbers,
    /// False when a printed number is invalid or the numbers contradict each other.
    pub numbers_consistent: bool,
    /// What to check next, most relevant first.
    pub next_check: Vec<String>,
    /// Unproven explanations that fit the stage (never a conclusion).
    pub candidates: Vec<String>,
    /// Always `"unknown"`.
    pub root_cause: RootCause,
    /// Why this kind, in words.
    pub kind_evidence: String,
    /// Every stage the evidence leaves open (`stage` is one of them, unless it is `unknown`).
    pub stage_candidates: Vec<Stage>,
    /// How sure the stage is (`certain`, `likely`, `unknown`).
    #[serde(default)]
    pub stage_confidence: StageConfidence,
    /// True when the error says it may be reported asynchronously (the traceback location
    /// cannot be trusted).
    pub asynchronous_error_location_unreliable: bool,
    /// What is wrong with the numbers, when `numbers_consistent` is false.
    pub inconsistencies: Vec<String>,
    /// `"not proven"` when a large reserved-but-unallocated gap is visible; never a cause.
    pub fragmentation: Option<String>,
    /// The exception type, when known.
    pub exception_type: Option<String>,
    /// First line of the exception message, when known.
    pub message: Option<String>,
    /// The last progress seen before the failure, when any.
    pub last_progress: Option<NodeProgress>,
    /// How the run ended, when it was not an execution_error.
    pub outcome: Option<RunOutcomeHint>,
    /// Nodes the server served from its cache in this run (they did not run, so the failure
    /// is not in them; their outputs were held in memory from an earlier run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cached_nodes: Vec<String>,
}

/// Reads a stored diagnosis (in `run.json` or `session.json`) leniently: one this version
/// cannot read (a shape older tools wrote) is `None`, so the reader diagnoses the run afresh
/// from its record instead of refusing the whole file.
pub fn lenient_diagnosis<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Diagnosis>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

/// Why pasted text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing but whitespace.
    #[error("the input is empty: expected a ComfyUI console log, a traceback or error message, an execution_error JSON, or a /history JSON")]
    Empty,
    /// JSON that holds no failure.
    #[error("the JSON holds no failure: {0}. Expected an execution_error (the WebSocket message or its data), a /history response whose status.messages contain execution_error or execution_interrupted, or a /prompt rejection")]
    NoFailureInJson(String),
    /// A log that shows the prompt finishing.
    #[error("the log shows no failure: {0}. Paste the part of the console from `got prompt` to the error")]
    NoFailureInLog(String),
    /// Text that looks like none of the supported inputs.
    #[error("expected a ComfyUI console log with `!!! Exception during processing !!!`, a Python traceback, an out-of-memory message (e.g. `CUDA out of memory. Tried to allocate …`), an execution_error JSON or a /history JSON")]
    Unrecognised,
}

/// What the console showed last before the failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleTail {
    /// Model-management lines (`Requested to load`, `loaded partially`, shard loading…) and no
    /// sampling progress after them; holds the last such line.
    ModelLoading(String),
    /// `ERROR lora <weight> …` lines: LoRA patches failing during the load.
    LoraPatchErrors(usize),
    /// ComfyUI's "Ran out of memory when regular VAE decoding, retrying with tiled VAE
    /// decoding" warning: the failure is in the decode.
    TiledDecodeRetry,
    /// The same warning for VAE encoding: the failure is in conditioning.
    TiledEncodeRetry,
    /// A text or vision encoder finished loading right before the failure (holds its name).
    EncoderLoaded(String),
    /// A node's own line naming its work as the last activity before the failure: a phase line
    /// (SeedVR2's `━━━ Phase 3: VAE decoding ━━━` banner or its `Error in Phase 3 (Decoding)`)
    /// or a line saying in plain words what it is doing (`Encoding image with VAE...`,
    /// `loading diffusion model`); holds the line.
    NodePhase(String),
}

/// Console-only signals that an execution_error does not carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleSignals {
    /// The last sampling progress bar (value, max) printed before the failure.
    pub sampling_bar: Option<(u64, u64)>,
    /// What the console showed right before the failure, when it says something about the stage.
    pub tail: Option<ConsoleTail>,
    /// The line showing that the process died (`Killed`, oom-killer, segfault…).
    pub death: Option<String>,
    /// The log stops mid-run without an error or a `Prompt executed` line.
    pub log_stopped: bool,
    /// The last model line (`Requested to load X`, `Model X prepared for dynamic VRAM
    /// loading…`, `loaded completely/partially`) when nothing but warnings follows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_model: Option<ModelActivity>,
}

/// The last model-management line of a log, and the model it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelActivity {
    /// The line as printed (quoted as the reason).
    pub line: String,
    /// The model class named by it or by the `Requested to load` line before it.
    pub model: String,
    /// True once the model is staged or loaded (not only requested).
    pub ready: bool,
}

/// Parsed input: the evidence plus the console signals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedInput {
    /// The evidence, as the run module would have built it.
    pub evidence: Evidence,
    /// What only a console log shows.
    pub signals: ConsoleSignals,
}
