//! The report's "Mitigations tried": one row per control of a workflow from the session's
//! `mitigations.json` — the single change, the stage it targets and its place in the matrix,
//! what it predicted, its run and how it was judged (stage now, moved or not), peak memory, time
//! and product. Passing controls first, then failing ones, then those not run and those that do
//! not apply. Rendered by `report/render/mitigations.rs`.

use super::load::SessionData;
use crate::session::journal::{Mitigation, MitigationState};
use crate::vocab::Stage;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// One control of the "Mitigations tried" section.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MitigationRow {
    /// The catalogue id (`tiled-decode`).
    pub control: String,
    /// `graph` or `server`.
    pub kind: crate::mitigate::Kind,
    /// The single change, in words.
    pub change: String,
    /// What the edit changed, node by node (graph controls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<String>,
    /// The failing stage the control was chosen for.
    pub stage_targeted: Stage,
    /// Its place in the matrix for that stage (`first`, `not first`, `indirect`, `depends on
    /// the official implementation`); none when it targets other stages.
    pub place: Option<String>,
    /// The observation it predicted, stated before it ran.
    pub predicted: String,
    /// `passed`, `failed`, `not_run`, `not_applicable`, `pending` or `in_flight`.
    pub status: String,
    /// The outcome in words, or why it did not run.
    pub outcome: String,
    /// The run id.
    pub run_id: Option<String>,
    /// The run folder, relative to the session folder.
    pub run_dir: Option<String>,
    /// The stage a failing control fails at now.
    pub stage_now: Option<Stage>,
    /// The node it fails at now.
    pub failing_node: Option<String>,
    /// Whether the boundary moved (another stage or node than the failure it targets).
    pub moved: Option<bool>,
    /// Peak VRAM of its run, MiB.
    pub vram_peak_mib: Option<f64>,
    /// Its run's wall time, milliseconds.
    pub duration_ms: Option<u64>,
    /// What its output nodes wrote.
    pub product: Option<String>,
    /// Degenerate images of its product (flat colour, NaN-black).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degenerate: Vec<String>,
    /// The edited target (API format), relative to the session folder.
    pub workflow_file: Option<String>,
    /// Its UI-format form, when the input was a UI workflow.
    pub ui_file: Option<String>,
}

impl MitigationRow {
    /// True for a control that passed.
    pub(crate) fn passed(&self) -> bool {
        self.status == "passed"
    }
}

/// The rows of workflow `name`, passing ones first (empty when it has no mitigations).
pub(crate) fn rows(data: &SessionData, name: &str) -> Vec<MitigationRow> {
    let Some(w) = data.mitigations.of(name) else {
        return Vec::new();
    };
    let mut rows: Vec<MitigationRow> = w.controls.iter().map(|m| row(m, w.stage)).collect();
    let rank = |r: &MitigationRow| match r.status.as_str() {
        "passed" => 0,
        "failed" => 1,
        "in_flight" | "pending" => 2,
        "not_run" => 3,
        _ => 4,
    };
    rows.sort_by_key(rank);
    rows
}

fn row(m: &Mitigation, stage: Stage) -> MitigationRow {
    let summary = m.run.as_ref().and_then(|r| r.summary.as_ref());
    let (status, outcome) = match (&m.state, &m.judged) {
        (MitigationState::Done, Some(j)) if j.passed => ("passed", j.outcome.clone()),
        (MitigationState::Done, Some(j)) => ("failed", j.outcome.clone()),
        (MitigationState::Done, None) => ("failed", "not judged".into()),
        (MitigationState::NotRun { reason }, _) => ("not_run", format!("not run: {reason}")),
        (MitigationState::NotApplicable { reason }, _) => {
            ("not_applicable", format!("not for this failure: {reason}"))
        }
        (MitigationState::Pending, _) => ("pending", "not run yet".into()),
        (MitigationState::InFlight, _) => ("in_flight", "in flight".into()),
    };
    let judged = m.judged.as_ref();
    MitigationRow {
        control: m.control.clone(),
        kind: m.kind,
        change: m.change.clone(),
        edits: crate::ladder::describe_changes(&m.changes, false),
        stage_targeted: stage,
        place: m.place.map(|p| p.as_str().to_string()),
        predicted: m.predicts.clone(),
        status: status.into(),
        outcome,
        run_id: m.run.as_ref().map(|r| r.run_id.clone()),
        run_dir: m.run.as_ref().map(|r| r.dir.clone()),
        stage_now: judged.and_then(|j| j.stage_now),
        failing_node: judged.and_then(|j| j.failing_node.clone()),
        moved: judged.and_then(|j| j.moved),
        vram_peak_mib: summary.and_then(|s| s.vram_peak_mib),
        duration_ms: summary.map(|s| s.duration_ms),
        product: summary.and_then(|s| s.delivered.product.clone()),
        degenerate: judged.map(|j| j.degenerate.clone()).unwrap_or_default(),
        workflow_file: m.file.clone(),
        ui_file: m.ui_file.clone(),
    }
}
