//! What the report reads of one run from its files and journal entry: its diagnosis (recorded,
//! or from `run.json`), the progress its nodes reported, its failing node, its folder.

use super::super::load::SessionData;
use super::super::model::{NodeRef, ProgressSeen};
use crate::comfy::ExecutionError;
use crate::diagnose::Diagnosis;
use crate::session::evidence::record_of_entry;
use crate::session::journal::{Outcome, RunEntry, RunFile};
use crate::vocab::{ContractNumbers, FailureKind, Stage, StageConfidence};
use std::path::PathBuf;

/// What the report shows of a run's diagnosis, taken from the typed [`Diagnosis`].
#[derive(Debug, Clone, Default)]
pub(super) struct Diag {
    pub(super) kind: Option<FailureKind>,
    pub(super) stage: Option<Stage>,
    pub(super) stage_evidence: Option<String>,
    pub(super) stage_confidence: Option<StageConfidence>,
    pub(super) numbers: ContractNumbers,
    pub(super) numbers_consistent: Option<bool>,
    pub(super) inconsistencies: Vec<String>,
    pub(super) next_check: Vec<String>,
    pub(super) candidates: Vec<String>,
    pub(super) fragmentation: Option<String>,
    pub(super) async_unreliable: bool,
    pub(super) last_progress: Option<ProgressSeen>,
}

impl From<&Diagnosis> for Diag {
    fn from(d: &Diagnosis) -> Diag {
        Diag {
            kind: Some(d.kind),
            stage: Some(d.stage),
            stage_evidence: Some(d.stage_evidence.clone()),
            stage_confidence: Some(d.stage_confidence),
            numbers: d.numbers.contract(),
            numbers_consistent: Some(d.numbers_consistent),
            inconsistencies: d.inconsistencies.clone(),
            next_check: d.next_check.clone(),
            candidates: d.candidates.clone(),
            fragmentation: d.fragmentation.clone(),
            async_unreliable: d.asynchronous_error_location_unreliable,
            last_progress: d.last_progress.as_ref().map(|p| ProgressSeen {
                node: NodeRef {
                    id: p.node_id.clone(),
                    class_type: p.class_type.clone().unwrap_or_else(|| "?".into()),
                    subgraph: None,
                },
                value: p.value,
                max: p.max,
            }),
        }
    }
}

pub(super) fn execution_error(file: Option<&RunFile>) -> Option<ExecutionError> {
    file?.record.execution_error().cloned()
}

/// The nodes of the run's timeline that reported progress: (id, class, value, max).
pub(super) fn progress_seen(file: Option<&RunFile>) -> Vec<(String, Option<String>, u64, u64)> {
    file.map(|f| {
        f.record
            .timeline
            .iter()
            .filter_map(|t| {
                let p = t.progress.as_ref()?;
                Some((
                    t.node_id.clone(),
                    t.class_type.clone(),
                    p.value as u64,
                    p.max as u64,
                ))
            })
            .collect()
    })
    .unwrap_or_default()
}

/// The diagnosis of a failing run: the recorded one, else the one builder's
/// ([`crate::run::RunRecord::diagnose`]) from its `run.json`, or from what the journal says of
/// the run when it has none.
pub(super) fn run_diagnosis(data: &SessionData, entry: &RunEntry) -> Option<Diagnosis> {
    let file = data.runs.get(&entry.run_id);
    if let Some(d) = entry
        .diagnosis
        .as_ref()
        .or_else(|| file.and_then(|f| f.record.diagnosis.as_ref()))
    {
        return Some(d.clone());
    }
    if !entry.failed() {
        return None;
    }
    match file {
        Some(f) => f.record.diagnose(None),
        None => record_of_entry(entry, &data.session.server)?.diagnose(None),
    }
}

/// [`run_diagnosis`] as the report shows it.
pub(super) fn diagnosis(data: &SessionData, entry: &RunEntry) -> Option<Diag> {
    run_diagnosis(data, entry).map(|d| Diag::from(&d))
}

/// The last progress any node of the run reported, from the timeline.
pub(super) fn last_progress_from_timeline(file: Option<&RunFile>) -> Option<ProgressSeen> {
    progress_seen(file)
        .pop()
        .map(|(id, class_type, value, max)| ProgressSeen {
            node: NodeRef {
                id,
                class_type: class_type.unwrap_or_else(|| "?".into()),
                subgraph: None,
            },
            value,
            max,
        })
}

pub(super) fn fallback_kind(entry: &RunEntry) -> Option<FailureKind> {
    match entry.outcome.as_ref()? {
        Outcome::Timeout { .. } => Some(FailureKind::Timeout),
        Outcome::ServerLost { .. } => Some(FailureKind::ProcessKilled),
        Outcome::Rejected { .. } => Some(FailureKind::Rejected),
        Outcome::MemoryFallback { .. } => Some(FailureKind::MemoryFallback),
        Outcome::MemoryPressure { .. } => Some(FailureKind::MemoryPressure),
        Outcome::IncompleteOutput { .. } => Some(FailureKind::IncompleteOutput),
        _ => None,
    }
}

pub(super) fn failing_node(entry: &RunEntry) -> Option<NodeRef> {
    match entry.outcome.as_ref()? {
        Outcome::Failed {
            node_id, node_type, ..
        }
        | Outcome::IncompleteOutput {
            node_id, node_type, ..
        } => Some(NodeRef {
            id: node_id.clone(),
            class_type: node_type.clone(),
            subgraph: None,
        }),
        _ => None,
    }
}

pub(super) fn run_dir(data: &SessionData, entry: &RunEntry) -> PathBuf {
    data.session_dir.join(&entry.dir)
}

pub(super) fn vram_samples(file: Option<&RunFile>) -> Option<usize> {
    file.map(|f| f.record.vram.samples.len())
}
