//! Builders for the journal's records, so the tests that make them by hand spell every field in
//! one place: a field added to [`RunRecord`], [`RunEntry`] or [`WorkflowJob`] is added here once,
//! and a test sets only what it is about, e.g.
//! `RunRecord { outcome: OutcomeKind::Failed, ..run_record("id") }`.

use comfy_bisect_core::run::record::RunRecord;
use comfy_bisect_core::session::journal::{Phase, RunEntry, RunRole, RunStatus, WorkflowJob};
use comfy_bisect_core::vocab::OutcomeKind;

/// A passed run `run_id` (also its prompt id), cold, with nothing measured or recorded.
pub fn run_record(run_id: &str) -> RunRecord {
    RunRecord::new(run_id, String::new(), "", true, OutcomeKind::Passed, None)
}

/// A search run `run_id` of ladder step `step` (`increment`) just submitted: in flight, no
/// folder, hash, times or results yet.
pub fn run_entry(run_id: &str, step: usize, increment: &str) -> RunEntry {
    RunEntry {
        run_id: run_id.into(),
        step,
        increment: increment.into(),
        role: RunRole::Search,
        dir: String::new(),
        workflow_sha256: String::new(),
        status: RunStatus::InFlight,
        started_at: String::new(),
        finished_at: None,
        outcome: None,
        summary: None,
        diagnosis: None,
        confirms: None,
        fingerprint: None,
        reduced: None,
    }
}

/// The workflow `name` of a session before anything ran: no ladder, controls or runs, in the
/// search phase, no verdict.
pub fn workflow_job(name: &str) -> WorkflowJob {
    WorkflowJob {
        name: name.into(),
        source: String::new(),
        source_file: None,
        target_sha256: String::new(),
        steps: Vec::new(),
        controls: Vec::new(),
        not_separable: Vec::new(),
        kept: Vec::new(),
        phase: Phase::Search,
        runs: Vec::new(),
        verdict: None,
    }
}
