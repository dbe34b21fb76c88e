//! The one diagnosis of a run. The runner (`submit`), the session (the journal) and the report
//! (a run whose record has none) all diagnose a run here, from the same evidence: the
//! execution_error, the nodes that ran with their last progress, the nodes served from the
//! cache, the node running when the server was lost or the run timed out, the run's own console
//! lines, and the host's evidence (`RunRecord::annotate_diagnosis`).

use super::record::{RunError, RunRecord};
use crate::diagnose::{self, Diagnosis, Evidence, NodeProgress, ParsedInput, RunOutcomeHint};
use crate::vocab::OutcomeKind;
use crate::workflow::Workflow;

impl RunRecord {
    /// What the diagnosis reads from this record. `workflow`, the submitted one when at hand,
    /// names the class of a node the record knows only by id.
    pub(crate) fn evidence_with(&self, workflow: Option<&Workflow>) -> Evidence {
        let class_of = |id: &str| {
            self.timeline
                .iter()
                .find(|t| t.node_id == id)
                .and_then(|t| t.class_type.clone())
                .or_else(|| {
                    workflow
                        .and_then(|w| w.node(id))
                        .map(|n| n.class_type.clone())
                })
        };
        let mut cached_nodes = self.cached_nodes.clone();
        for t in self.timeline.iter().filter(|t| t.cached) {
            if !cached_nodes.contains(&t.node_id) {
                cached_nodes.push(t.node_id.clone());
            }
        }
        let mut evidence = Evidence {
            progress: self
                .timeline
                .iter()
                .filter(|t| !t.cached)
                .map(|t| NodeProgress {
                    node_id: t.node_id.clone(),
                    class_type: t.class_type.clone().or_else(|| class_of(&t.node_id)),
                    value: t.progress.map(|p| p.value.max(0.0) as u64).unwrap_or(0),
                    max: t.progress.map(|p| p.max.max(0.0) as u64).unwrap_or(0),
                })
                .collect(),
            cached_nodes,
            outcome: match self.outcome {
                OutcomeKind::Passed | OutcomeKind::Failed => None,
                OutcomeKind::Rejected => Some(RunOutcomeHint::Rejected),
                OutcomeKind::Interrupted => Some(RunOutcomeHint::Interrupted),
                OutcomeKind::Timeout | OutcomeKind::Hang => Some(RunOutcomeHint::Timeout),
                OutcomeKind::ServerLost => Some(RunOutcomeHint::ServerLost),
            },
            ..Evidence::default()
        };
        let last_node = match &self.error {
            Some(RunError::ExecutionError(e)) => {
                evidence.node_id = Some(e.node_id.clone());
                evidence.node_type = Some(e.node_type.clone());
                evidence.exception_type = Some(e.exception_type.clone());
                evidence.exception_message = Some(e.exception_message.clone());
                evidence.traceback = e.traceback.clone();
                None
            }
            Some(RunError::IncompleteOutput(i)) => {
                evidence.outcome = Some(RunOutcomeHint::IncompleteOutput);
                i.nodes.first().map(|n| n.node_id.clone())
            }
            Some(RunError::Timeout(t)) => t.last_node.clone(),
            Some(RunError::Hang(h)) => h.last_node.clone(),
            Some(RunError::ServerLost(s)) => s.last_node.clone(),
            _ => None,
        };
        if let Some(id) = last_node {
            evidence.node_type = class_of(&id);
            evidence.node_id = Some(id);
        }
        evidence
    }

    /// The diagnosis of this run (None for a pass): its evidence and its own console lines,
    /// read like a pasted log, then the host's evidence. `workflow` as in
    /// `RunRecord::evidence_with`.
    pub fn diagnose(&self, workflow: Option<&Workflow>) -> Option<Diagnosis> {
        if self.outcome == OutcomeKind::Passed {
            return None;
        }
        let mut diagnosis = diagnose::diagnose_input(&ParsedInput {
            evidence: self.evidence_with(workflow),
            signals: diagnose::console_signals(&self.server_log),
        });
        self.annotate_diagnosis(&mut diagnosis);
        Some(diagnosis)
    }
}
