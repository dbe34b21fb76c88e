//! How the report names things it shows in many places: runs (short ids, outcome names,
//! whether a run belongs to the ladder itself), stop reasons and paths.

use crate::session::journal::{RunEntry, RunRole, RunStatus, StopReason};
use std::path::Path;

/// A path as text.
pub(super) fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The first 8 characters of a run id, as the report shows it.
pub(super) fn short(run_id: &str) -> String {
    run_id.chars().take(8).collect()
}

/// A run of the ladder itself (endpoints and search), not a repeat, control or re-run.
pub(super) fn is_main(role: RunRole) -> bool {
    matches!(role, RunRole::Minimal | RunRole::Target | RunRole::Search)
}

/// Why a session stopped, in words.
pub(super) fn stop_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::Deadline => "deadline reached",
        StopReason::Interrupted => "interrupted",
        StopReason::ServerLost => "server lost",
        StopReason::Preflight => "preflight failed",
        StopReason::Error => "error",
        StopReason::EnvironmentChanged => "environment changed",
    }
}

/// The outcome's name, `running` while in flight.
pub(super) fn outcome_name(entry: &RunEntry) -> String {
    match (&entry.status, &entry.outcome) {
        (RunStatus::InFlight, _) => "running".into(),
        (_, Some(o)) => o.name().into(),
        (_, None) => "unknown".into(),
    }
}
