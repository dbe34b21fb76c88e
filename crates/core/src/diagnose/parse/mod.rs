//! Parsers for what a user pastes: a ComfyUI console log (the `!!! Exception during processing
//! !!!` block, tracebacks, progress bars, `Requested to load` / `loaded partially` lines), a bare
//! traceback or message, the UI error dialog and the "ComfyUI Error Report" Markdown, an
//! execution_error (WebSocket message or its data), a /history response, a /prompt rejection,
//! or a stream of WebSocket messages (one JSON object per line).
//!
//! This file tells the forms apart (what both halves return — the error, the console signals,
//! the parsed input — is in `diagnose/evidence.rs`); `parse/json.rs` reads the JSON forms,
//! `parse/console/` the console logs and pasted text (`words.rs` its vocabulary, `segment.rs` one
//! run's events and failure, `signals.rs` what the log was doing at its end, `mod.rs` which
//! segment is the failure and short pastes), from the lines `parse/lines.rs` cleans of a paste's
//! prefixes.

mod console;
mod json;
mod lines;

use super::{ParseError, ParsedInput};
use serde_json::Value;

pub use console::console_signals;

/// Parses pasted text of any supported form.
pub fn parse_input(text: &str) -> Result<ParsedInput, ParseError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(ParseError::Empty);
    }
    // A stored copy of JSON may show its quotes as HTML entities.
    let unescaped = lines::unescape(trimmed);
    let json = unescaped.trim();
    if json.starts_with('{') || json.starts_with('[') {
        let trimmed = json;
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
    // A `/history` response or WebSocket message the paste cut: its execution_error's fields.
    console::parse_log(trimmed).or_else(|e| json::cut_execution_error(&unescaped).ok_or(e))
}
