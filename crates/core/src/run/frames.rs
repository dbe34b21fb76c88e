//! What is kept of a run's WebSocket traffic (issue #29): a server — or a custom node pack —
//! that sends endless small frames must not fill the memory, `run.json` or `events.ndjson`.
//! `FrameKeeper` decides, frame by frame, what the run record and the event stream keep, and
//! counts what they do not ([`DroppedFrames`]).
//!
//! The limits, by class (the evidence goes last):
//! - **our prompt's events** (`execution_start`, `execution_cached`, `executing`, `executed`,
//!   `execution_error`, `execution_interrupted`, `execution_success` … with our prompt_id):
//!   all kept, up to `KEY_MAX_FRAMES` frames or `KEY_MAX_BYTES` (a real prompt sends a few
//!   per node);
//! - **our prompt's progress** (`progress`, `progress_state`): the first `PROGRESS_KEEP` and
//!   the last `PROGRESS_KEEP` frames, each part at most [`PART_MAX_BYTES`];
//! - **everything else** (other prompts' frames, `status`, unknown types, text that is not JSON,
//!   the console's `logs` frames and binary previews in `events.ndjson`): the first and the
//!   last [`OTHER_KEEP`] frames, each part at most [`PART_MAX_BYTES`]; a `status` frame equal
//!   to the one before it is dropped at once.
//!
//! The first frames are kept (and streamed to `events.ndjson`) as they arrive; the last ones
//! are held in a ring and added when the run ends. Binary frames are never stored in
//! `run.json` (only counted, in `raw.frames`), nor the `logs` frames (their lines go to
//! `server.log`), so their `events.ndjson` lines keep only the first part.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;

/// One received WebSocket text frame, kept verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WsTextRecord {
    /// ms since the run started.
    pub t_ms: u64,
    /// Which socket (0, then 1 after the first reconnect …).
    pub socket: u32,
    /// The frame parsed as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    /// The frame text when it was not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// Our prompt's key events kept at most (frames).
pub(crate) const KEY_MAX_FRAMES: u64 = 20_000;
/// Our prompt's key events kept at most (bytes of frame text).
pub(crate) const KEY_MAX_BYTES: u64 = 32 << 20;
/// Our prompt's progress frames kept from the start, and again from the end.
pub(crate) const PROGRESS_KEEP: usize = 1_000;
/// Other frames kept from the start, and again from the end.
pub const OTHER_KEEP: usize = 500;
/// The most frame text one kept part (first or last frames of a class) holds.
pub const PART_MAX_BYTES: u64 = 1 << 20;

/// What was not kept of a run's WebSocket traffic (`raw.dropped_frames` in `run.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedFrames {
    /// Frames not kept (in neither `run.json` nor `events.ndjson`, or only counted).
    pub count: u64,
    /// Their size in bytes.
    pub bytes: u64,
    /// Of them, our own prompt's frames (progress beyond the kept first and last ones, or key
    /// events beyond their cap).
    #[serde(default)]
    pub ours: u64,
    /// ms since the run started of the first and the last frame dropped.
    pub first_t_ms: u64,
    /// See `first_t_ms`.
    pub last_t_ms: u64,
}

/// The class of a frame, which decides how much of it is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameClass {
    /// Our prompt's events that say what ran and how it ended.
    Key,
    /// Our prompt's progress.
    Progress,
    /// Everything else.
    Other,
    /// A `status` frame (dropped when equal to the one before).
    Status,
}

impl FrameClass {
    /// The class of a text frame (`json` when it parsed) for the prompt `prompt_id`.
    pub(crate) fn of(json: Option<&Value>, prompt_id: &str) -> FrameClass {
        let Some(json) = json else {
            return FrameClass::Other;
        };
        let kind = json.get("type").and_then(Value::as_str).unwrap_or_default();
        let data = json.get("data");
        let pid = data
            .and_then(|d| d.get("prompt_id"))
            .and_then(Value::as_str);
        match (kind, pid) {
            ("status", _) => FrameClass::Status,
            ("progress" | "progress_state", Some(p)) if p == prompt_id => FrameClass::Progress,
            (_, Some(p)) if p == prompt_id => FrameClass::Key,
            // The greeting after a reconnect repeats the running node without a prompt_id.
            ("executing", None) => FrameClass::Key,
            _ => FrameClass::Other,
        }
    }
}

/// What to do with a frame now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Keep it and stream it now.
    Now,
    /// Held among the last frames: kept (and streamed) when the run ends, unless later frames
    /// push it out.
    Later,
    /// Not kept (counted).
    Dropped,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Part {
    frames: usize,
    bytes: u64,
}

/// The first part and the ring of the last frames of one class.
#[derive(Debug, Clone, Default, PartialEq)]
struct ClassKeeper {
    first: Part,
    /// Whether the first part is full (from then on frames go to the ring).
    full: bool,
    ring: VecDeque<(u64, WsTextRecord)>,
    ring_bytes: u64,
}

/// Decides what is kept of a run's frames; see the module comment for the limits.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FrameKeeper {
    key: Part,
    progress: ClassKeeper,
    other: ClassKeeper,
    last_status: Option<String>,
    dropped: DroppedFrames,
}

impl FrameKeeper {
    fn drop_frame(&mut self, t_ms: u64, bytes: u64, ours: bool) -> Admit {
        let d = &mut self.dropped;
        if d.count == 0 {
            d.first_t_ms = t_ms;
        }
        d.count += 1;
        d.bytes += bytes;
        d.last_t_ms = t_ms;
        if ours {
            d.ours += 1;
        }
        Admit::Dropped
    }

    /// Admits a text frame of `bytes` bytes at `t_ms` of class `class`; a frame admitted
    /// [`Admit::Later`] is held (the caller keeps nothing).
    pub(crate) fn admit_text(
        &mut self,
        class: FrameClass,
        record: &WsTextRecord,
        bytes: u64,
    ) -> Admit {
        let t_ms = record.t_ms;
        match class {
            FrameClass::Key => {
                if self.key.frames as u64 >= KEY_MAX_FRAMES
                    || self.key.bytes + bytes > KEY_MAX_BYTES
                {
                    return self.drop_frame(t_ms, bytes, true);
                }
                self.key.frames += 1;
                self.key.bytes += bytes;
                Admit::Now
            }
            FrameClass::Status => {
                let text = record.json.as_ref().map(Value::to_string);
                if text.is_some() && text == self.last_status {
                    return self.drop_frame(t_ms, bytes, false);
                }
                self.last_status = text;
                self.admit_in(false, t_ms, bytes, Some(record))
            }
            FrameClass::Progress => self.admit_in(true, t_ms, bytes, Some(record)),
            FrameClass::Other => self.admit_in(false, t_ms, bytes, Some(record)),
        }
    }

    /// Admits an `events.ndjson` line of a frame that `run.json` does not store (a binary
    /// frame, a console `logs` frame): the first part only.
    pub(crate) fn admit_line(&mut self, t_ms: u64, bytes: u64) -> Admit {
        self.admit_in(false, t_ms, bytes, None)
    }

    fn admit_in(
        &mut self,
        progress: bool,
        t_ms: u64,
        bytes: u64,
        record: Option<&WsTextRecord>,
    ) -> Admit {
        let keep = if progress { PROGRESS_KEEP } else { OTHER_KEEP };
        let class = if progress {
            &mut self.progress
        } else {
            &mut self.other
        };
        if !class.full {
            if class.first.frames < keep && class.first.bytes + bytes <= PART_MAX_BYTES {
                class.first.frames += 1;
                class.first.bytes += bytes;
                return Admit::Now;
            }
            class.full = true;
        }
        let Some(record) = record.filter(|_| bytes <= PART_MAX_BYTES) else {
            return self.drop_frame(t_ms, bytes, progress);
        };
        class.ring.push_back((bytes, record.clone()));
        class.ring_bytes += bytes;
        let mut pushed_out = Vec::new();
        while class.ring.len() > keep || class.ring_bytes > PART_MAX_BYTES {
            let Some((b, old)) = class.ring.pop_front() else {
                break;
            };
            class.ring_bytes -= b;
            pushed_out.push((old.t_ms, b));
        }
        for (t, b) in pushed_out {
            self.drop_frame(t, b, progress);
        }
        Admit::Later
    }

    /// Ends the run: the held last frames in arrival order, and what was dropped (None when
    /// nothing was).
    pub(crate) fn finish(mut self) -> (Vec<WsTextRecord>, Option<DroppedFrames>) {
        let mut held: Vec<WsTextRecord> = Vec::new();
        for class in [&mut self.progress, &mut self.other] {
            held.extend(class.ring.drain(..).map(|(_, r)| r));
            class.ring_bytes = 0;
        }
        // Each ring is in arrival order; a stable sort by time interleaves the two.
        held.sort_by_key(|r| r.t_ms);
        let dropped = (self.dropped.count > 0).then(|| self.dropped.clone());
        (held, dropped)
    }
}

/// The note a run record carries when frames were dropped.
pub(crate) fn dropped_note(d: &DroppedFrames) -> String {
    let ours = if d.ours > 0 {
        format!(
            "; {} of them were this prompt's own progress frames beyond the first and last {PROGRESS_KEEP}",
            d.ours
        )
    } else {
        String::new()
    };
    format!(
        "WebSocket traffic capped: {} frames ({}) between {} ms and {} ms were not kept in \
         run.json and events.ndjson (other prompts' frames, repeated status frames, previews, \
         console frames beyond the first and last {OTHER_KEEP}){ours}; this prompt's execution \
         events and its error were kept",
        d.count,
        crate::units::human_bytes(d.bytes),
        d.first_t_ms,
        d.last_t_ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(t_ms: u64, v: Value) -> WsTextRecord {
        WsTextRecord {
            t_ms,
            socket: 0,
            json: Some(v),
            raw: None,
        }
    }

    #[test]
    fn frames_are_classed_by_type_and_prompt() {
        let ours = "p1";
        let class = |v: Value| FrameClass::of(Some(&v), ours);
        assert_eq!(
            class(json!({"type": "executing", "data": {"node": "3", "prompt_id": "p1"}})),
            FrameClass::Key
        );
        assert_eq!(
            class(json!({"type": "execution_error", "data": {"prompt_id": "p1"}})),
            FrameClass::Key
        );
        assert_eq!(
            class(json!({"type": "progress", "data": {"value": 1, "max": 2, "prompt_id": "p1"}})),
            FrameClass::Progress
        );
        assert_eq!(
            class(json!({"type": "progress", "data": {"value": 1, "max": 2, "prompt_id": "p2"}})),
            FrameClass::Other
        );
        assert_eq!(
            class(json!({"type": "status", "data": {"status": {}}})),
            FrameClass::Status
        );
        assert_eq!(FrameClass::of(None, ours), FrameClass::Other);
    }

    #[test]
    fn the_first_and_last_frames_are_kept_and_the_middle_counted() {
        let mut keeper = FrameKeeper::default();
        let n = 3 * OTHER_KEEP as u64;
        let mut now = 0;
        for t in 0..n {
            let r = frame(t, json!({"type": "crystools.monitor", "data": {"t": t}}));
            if keeper.admit_text(FrameClass::Other, &r, 40) == Admit::Now {
                now += 1;
            }
        }
        // Our prompt's events are kept whatever came before.
        let error = frame(
            n,
            json!({"type": "execution_error", "data": {"prompt_id": "p"}}),
        );
        assert_eq!(keeper.admit_text(FrameClass::Key, &error, 40), Admit::Now);
        let (held, dropped) = keeper.finish();
        assert_eq!(now, OTHER_KEEP);
        assert_eq!(held.len(), OTHER_KEEP);
        assert_eq!(held[0].t_ms, n - OTHER_KEEP as u64, "the last ones");
        let dropped = dropped.unwrap();
        assert_eq!(dropped.count, n - 2 * OTHER_KEEP as u64);
        assert_eq!(dropped.bytes, dropped.count * 40);
        assert_eq!(dropped.first_t_ms, OTHER_KEEP as u64);
        assert_eq!(dropped.ours, 0);
    }

    #[test]
    fn a_repeated_status_frame_is_dropped_at_once() {
        let mut keeper = FrameKeeper::default();
        let status = |q: u64| frame(q, json!({"type": "status", "data": {"q": q}}));
        assert_eq!(
            keeper.admit_text(FrameClass::Status, &status(1), 10),
            Admit::Now
        );
        assert_eq!(
            keeper.admit_text(FrameClass::Status, &status(1), 10),
            Admit::Dropped
        );
        assert_eq!(
            keeper.admit_text(FrameClass::Status, &status(2), 10),
            Admit::Now
        );
        assert_eq!(keeper.finish().1.unwrap().count, 1);
    }

    #[test]
    fn nothing_dropped_means_no_note() {
        let mut keeper = FrameKeeper::default();
        let r = frame(1, json!({"type": "executed", "data": {"prompt_id": "p"}}));
        assert_eq!(keeper.admit_text(FrameClass::Key, &r, 10), Admit::Now);
        assert_eq!(keeper.finish(), (Vec::new(), None));
    }
}
