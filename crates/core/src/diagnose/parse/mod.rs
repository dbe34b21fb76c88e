//! Parsers for what a user pastes: a ComfyUI console log (the `!!! Exception during processing
//! !!!` block, tracebacks, progress bars, `Requested to load` / `loaded partially` lines), a bare
//! traceback or message, the UI error dialog and the "ComfyUI Error Report" Markdown, an
//! execution_error (WebSocket message or its data), a /history response, a /prompt rejection,
//! or a stream of WebSocket messages (one JSON object per line).
//!
//! This file holds what both halves share (the error, the console signals, the parsed input) and
//! tells the forms apart; `parse/json.rs` reads the JSON forms, `parse/console.rs` the console
//! logs and pasted text.

mod console;
mod json;

use super::Evidence;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use console::console_signals;

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
}

/// Parsed input: the evidence plus the console signals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedInput {
    /// The evidence, as the run module would have built it.
    pub evidence: Evidence,
    /// What only a console log shows.
    pub signals: ConsoleSignals,
}

/// Parses pasted text of any supported form.
pub fn parse_input(text: &str) -> Result<ParsedInput, ParseError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(ParseError::Empty);
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
            return json::parse_json(&value);
        }
        let values: Vec<Value> = trimmed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map_while(|l| serde_json::from_str::<Value>(l).ok())
            .collect();
        if values.len() > 1 {
            return json::parse_ws_stream(&values);
        }
    }
    console::parse_log(trimmed)
}
