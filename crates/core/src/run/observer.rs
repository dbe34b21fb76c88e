//! Hooks for callers that watch a run as it happens: progress (for a progress bar) and the raw
//! event stream (the session layer appends it to `events.ndjson`).

use crate::comfy::events::TrackerEvent;
use crate::comfy::HttpExchange;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;

/// A step of the run worth showing.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// A phase began (`cold start`, `waiting for idle`, `submitted`, `reconciling` …).
    Phase(String),
    /// Our prompt waits behind `ahead` others.
    Queued {
        /// Prompts ahead of ours.
        ahead: usize,
    },
    /// Something the event tracker noticed (node started, step progress …).
    Tracker(TrackerEvent),
    /// A warning that also goes into the record.
    Warning(String),
}

/// One line of the raw event stream, in the spirit of the capture format of
/// `tests/fixtures/comfyui/*.ndjson` (`channel` = `ws`, `http` or `note`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "channel", rename_all = "snake_case")]
pub enum RawEvent<'a> {
    /// A WebSocket event.
    Ws {
        /// ms since the run started.
        t_ms: u64,
        /// Socket number (0, 1 after a reconnect …).
        socket: u32,
        /// `open`, `in` or `closed`.
        dir: &'static str,
        /// `text` or `binary` for `in`.
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<&'static str>,
        /// Parsed text frame.
        #[serde(skip_serializing_if = "Option::is_none")]
        json: Option<&'a Value>,
        /// Text frame that is not JSON.
        #[serde(skip_serializing_if = "Option::is_none")]
        raw: Option<&'a str>,
        /// Binary frame size.
        #[serde(skip_serializing_if = "Option::is_none")]
        size: Option<usize>,
        /// Binary frame event type.
        #[serde(skip_serializing_if = "Option::is_none")]
        event_type: Option<u32>,
        /// Session id (on `open`).
        #[serde(skip_serializing_if = "Option::is_none")]
        client_id: Option<&'a str>,
        /// Why it closed.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    },
    /// An HTTP exchange (never with headers).
    Http {
        /// ms since the run started.
        t_ms: u64,
        /// The exchange.
        exchange: &'a HttpExchange,
    },
    /// A note from the runner (reconnects, interrupts sent, warnings).
    Note {
        /// ms since the run started.
        t_ms: u64,
        /// The note.
        text: &'a str,
    },
}

impl<'a> RawEvent<'a> {
    /// The line of a received text frame.
    pub(crate) fn text_in(record: &'a super::record::WsTextRecord) -> RawEvent<'a> {
        RawEvent::Ws {
            t_ms: record.t_ms,
            socket: record.socket,
            dir: "in",
            kind: Some("text"),
            json: record.json.as_ref(),
            raw: record.raw.as_deref(),
            size: None,
            event_type: None,
            client_id: None,
            reason: None,
        }
    }
}

/// Watches a run. Both methods default to doing nothing.
pub trait RunObserver: Send {
    /// Called for every step worth showing.
    fn on_event(&mut self, _event: &RunEvent) {}
    /// Called for every raw event as it arrives.
    fn on_raw(&mut self, _event: &RawEvent<'_>) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoObserver;

impl RunObserver for NoObserver {}

/// Writes every raw event as one JSON line (for `events.ndjson`), flushing each line.
pub struct NdjsonWriter<W: Write + Send> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: Write + Send> NdjsonWriter<W> {
    /// A writer appending to `out`.
    pub fn new(out: W) -> NdjsonWriter<W> {
        NdjsonWriter { out, error: None }
    }

    /// The first write error, if any (writing stops after it).
    pub(crate) fn error(&self) -> Option<&std::io::Error> {
        self.error.as_ref()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write + Send> RunObserver for NdjsonWriter<W> {
    fn on_raw(&mut self, event: &RawEvent<'_>) {
        if self.error.is_some() {
            return;
        }
        let line = match serde_json::to_string(event) {
            Ok(l) => l,
            Err(e) => {
                self.error = Some(std::io::Error::other(e));
                return;
            }
        };
        if let Err(e) = writeln!(self.out, "{line}").and_then(|_| self.out.flush()) {
            self.error = Some(e);
        }
    }
}

/// Forwards to two observers (e.g. a progress bar and an `events.ndjson` writer).
pub struct Both<'a, A: RunObserver + ?Sized, B: RunObserver + ?Sized>(pub &'a mut A, pub &'a mut B);

impl<A: RunObserver + ?Sized, B: RunObserver + ?Sized> RunObserver for Both<'_, A, B> {
    fn on_event(&mut self, event: &RunEvent) {
        self.0.on_event(event);
        self.1.on_event(event);
    }
    fn on_raw(&mut self, event: &RawEvent<'_>) {
        self.0.on_raw(event);
        self.1.on_raw(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndjson_writer_writes_one_line_per_event() {
        let mut w = NdjsonWriter::new(Vec::new());
        let frame = serde_json::json!({"type": "status", "data": {}});
        w.on_raw(&RawEvent::Ws {
            t_ms: 5,
            socket: 0,
            dir: "in",
            kind: Some("text"),
            json: Some(&frame),
            raw: None,
            size: None,
            event_type: None,
            client_id: None,
            reason: None,
        });
        w.on_raw(&RawEvent::Note {
            t_ms: 6,
            text: "hello",
        });
        let text = String::from_utf8(w.into_inner()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["channel"], "ws");
        assert_eq!(lines[0]["json"]["type"], "status");
        assert_eq!(lines[1]["text"], "hello");
    }
}
