//! Hang detection (`--stall`): a running prompt hangs when neither a `progress` frame nor a
//! node change (`executing`) arrives for the stall limit. The limit given with `--stall`, or
//! derived from the longest quiet stretch the session's earlier runs went through (a model
//! load, a decode without steps) with a floor ([`stall_limit`]). Pure: marks of progress and
//! the quiet stretches of a finished run's frames; the follow loop keeps the clock.

use super::frames::WsTextRecord;
use crate::comfy::events::EventTracker;
use std::time::Duration;

/// The stall limit while no run of the session has shown a longer quiet stretch: 10 minutes,
/// the length of the old stall timeout (a large model loading from a slow disk, or a video
/// decode without step frames, stays quiet for minutes on a healthy server).
pub(crate) const STALL_FLOOR: Duration = Duration::from_secs(600);

/// How many times the longest quiet stretch seen so far a run may stay quiet before it counts
/// as hung: a larger variant may load, stream or decode several times longer.
pub(crate) const STALL_FACTOR: u32 = 5;

/// The stall limit of the next run: `given` (`--stall`), else [`STALL_FACTOR`] × the longest
/// quiet stretch seen so far, at least [`STALL_FLOOR`]. The second part says where it came
/// from.
pub(crate) fn stall_limit(
    given: Option<Duration>,
    longest_quiet: Option<Duration>,
) -> (Duration, String) {
    if let Some(d) = given {
        return (d, "--stall".into());
    }
    match longest_quiet.map(|q| q * STALL_FACTOR) {
        Some(l) if l > STALL_FLOOR => (
            l,
            format!(
                "{STALL_FACTOR} × the longest stretch without progress so far ({}); --stall sets it",
                crate::units::compact_duration(l / STALL_FACTOR)
            ),
        ),
        _ => (
            STALL_FLOOR,
            "the floor while no run stayed quiet over 1/5 of it; --stall sets it".into(),
        ),
    }
}

/// What "progress" means for hang detection: the nodes started so far, the running node and
/// its last step. Any change of it is progress; other frames (status, previews, logs) are not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ProgressMark {
    nodes: usize,
    current: Option<String>,
    step: Option<u64>,
}

impl ProgressMark {
    /// The mark of the tracker's state now.
    pub(crate) fn of(tracker: &EventTracker) -> ProgressMark {
        let current = tracker.current_node();
        ProgressMark {
            nodes: tracker.timeline().len(),
            current: current.map(|n| n.node_id.clone()),
            step: current.and_then(|n| n.progress.as_ref().map(|p| p.value as u64)),
        }
    }
}

/// The longest stretch (ms) of a run without a `progress` frame or an `executing` change for
/// our prompt, between its first and last such frame; None with fewer than two of them.
pub(crate) fn longest_quiet_ms(frames: &[WsTextRecord], prompt_id: &str) -> Option<u64> {
    let mut last: Option<u64> = None;
    let mut longest: Option<u64> = None;
    for f in frames {
        let Some(json) = &f.json else { continue };
        if !matches!(
            json.get("type").and_then(|t| t.as_str()),
            Some("progress" | "executing")
        ) {
            continue;
        }
        if json["data"]
            .get("prompt_id")
            .and_then(|p| p.as_str())
            .is_some_and(|p| p != prompt_id)
        {
            continue;
        }
        if let Some(prev) = last {
            let gap = f.t_ms.saturating_sub(prev);
            longest = Some(longest.map_or(gap, |l: u64| l.max(gap)));
        }
        last = Some(f.t_ms);
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(t_ms: u64, v: serde_json::Value) -> WsTextRecord {
        WsTextRecord {
            t_ms,
            socket: 0,
            json: Some(v),
            raw: None,
        }
    }

    #[test]
    fn the_longest_quiet_stretch_counts_progress_and_node_changes_of_our_prompt_only() {
        let frames = vec![
            frame(
                0,
                json!({"type": "executing", "data": {"node": "4", "prompt_id": "p"}}),
            ),
            // A model load: 9 s without progress.
            frame(
                9_000,
                json!({"type": "executing", "data": {"node": "3", "prompt_id": "p"}}),
            ),
            frame(
                9_500,
                json!({"type": "progress", "data": {"value": 1, "max": 2, "prompt_id": "p", "node": "3"}}),
            ),
            // Another prompt's progress and a status frame do not break the quiet.
            frame(
                10_000,
                json!({"type": "progress", "data": {"value": 1, "max": 2, "prompt_id": "q", "node": "3"}}),
            ),
            frame(11_000, json!({"type": "status", "data": {}})),
            frame(
                21_000,
                json!({"type": "progress", "data": {"value": 2, "max": 2, "prompt_id": "p", "node": "3"}}),
            ),
        ];
        assert_eq!(longest_quiet_ms(&frames, "p"), Some(11_500));
        assert_eq!(longest_quiet_ms(&frames[..1], "p"), None);
    }

    #[test]
    fn the_stall_limit_is_given_or_five_times_the_longest_quiet_stretch_with_a_floor() {
        let (l, why) = stall_limit(
            Some(Duration::from_secs(30)),
            Some(Duration::from_secs(900)),
        );
        assert_eq!((l, why.as_str()), (Duration::from_secs(30), "--stall"));
        assert_eq!(stall_limit(None, None).0, STALL_FLOOR);
        assert_eq!(
            stall_limit(None, Some(Duration::from_secs(60))).0,
            STALL_FLOOR
        );
        let (l, why) = stall_limit(None, Some(Duration::from_secs(300)));
        assert_eq!(l, Duration::from_secs(1500));
        assert!(why.starts_with("5 × the longest stretch"), "{why}");
    }
}
