//! From a run record to what the session keeps about it: the outcome, the ladder-table numbers
//! and the diagnosis (built from the execution_error, the node timeline and the outcome).

use super::journal::{Outcome, RunEntry, RunSummary};
use crate::comfy::protocol::{ExecutionError, HistoryEntry, Terminal};
use crate::diagnose::Diagnosis;
use crate::run::record::{
    InterruptedBy, Interruption, ServerLostInfo, TimeoutInfo, TimeoutReason, VramReport,
};
use crate::run::{Outcome as RunOutcome, RunRecord};
use crate::units::to_mib;
use crate::vocab::OutcomeKind;
use crate::vocab::ProductSummary;
use crate::workflow::Workflow;

/// The session's view of a record's outcome; with `strict`, a pass that went through a memory
/// fallback is [`Outcome::MemoryFallback`].
pub fn outcome_with(record: &RunRecord, strict: bool) -> Outcome {
    match outcome_of(record) {
        Outcome::Passed if strict && !record.memory_fallbacks.is_empty() => {
            Outcome::MemoryFallback {
                fallbacks: record.memory_fallbacks.clone(),
            }
        }
        other => other,
    }
}

/// The session's view of a record's outcome.
pub(crate) fn outcome_of(record: &RunRecord) -> Outcome {
    match record.outcome() {
        RunOutcome::Passed => Outcome::Passed,
        RunOutcome::Failed(e) => Outcome::Failed {
            node_id: e.node_id.clone(),
            node_type: e.node_type.clone(),
            exception_type: e.exception_type.clone(),
            exception_message: e
                .exception_message
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        },
        RunOutcome::Rejected(r) => Outcome::Rejected {
            message: if r.error.message.is_empty() {
                format!("HTTP {}", r.http_status)
            } else {
                r.error.message.clone()
            },
        },
        RunOutcome::Interrupted(_) => Outcome::Interrupted,
        RunOutcome::Timeout(t) => Outcome::Timeout {
            detail: format!(
                "{} after {} s",
                match t.reason {
                    TimeoutReason::Run => "run timeout",
                    TimeoutReason::Stall => "no event (stall timeout)",
                    TimeoutReason::Queue => "queue wait",
                },
                t.limit_ms / 1000
            ),
        },
        RunOutcome::ServerLost(s) => Outcome::ServerLost {
            detail: s.reason.clone(),
        },
        RunOutcome::Hang(h) => Outcome::Hang {
            node_id: h.last_node.clone(),
            node_type: h.node_type.clone(),
            step: h.step,
            max_steps: h.max_steps,
            detail: hang_detail(&h),
            interrupt_confirmed: h.interrupt_confirmed,
        },
        RunOutcome::IncompleteOutput(i) => {
            let first = i.nodes.first();
            Outcome::IncompleteOutput {
                node_id: first.map(|n| n.node_id.clone()).unwrap_or_default(),
                node_type: first.map(|n| n.class_type.clone()).unwrap_or_default(),
                message: i.message.clone(),
            }
        }
    }
}

/// A hang in words: where, at which step, after how long, and whether the interrupt held.
fn hang_detail(h: &crate::run::HangInfo) -> String {
    let node = match (&h.last_node, &h.node_type) {
        (Some(id), Some(class)) => format!("{class} (node {id})"),
        (Some(id), None) => format!("node {id}"),
        _ => "an unknown node".into(),
    };
    let step = match (h.step, h.max_steps) {
        (Some(s), Some(m)) => format!(" at step {s}/{m}"),
        _ => String::new(),
    };
    format!(
        "no progress at {node}{step} for {} s (--stall); {}",
        h.limit_ms / 1000,
        if h.interrupt_confirmed {
            "interrupted"
        } else {
            "the server ignored the interrupt"
        }
    )
}

/// The diagnosis the journal keeps of a run: the one builder's ([`RunRecord::diagnose`]), none
/// for a pass or a rejection (which says nothing about the variant).
pub(crate) fn diagnose_record(record: &RunRecord, workflow: &Workflow) -> Option<Diagnosis> {
    match record.outcome {
        OutcomeKind::Passed | OutcomeKind::Rejected => None,
        _ => record.diagnose(Some(workflow)),
    }
}

/// The ladder-table numbers of a run.
pub fn summary_of(
    record: &RunRecord,
    diagnosis: Option<&Diagnosis>,
    workflow: Option<&Workflow>,
) -> RunSummary {
    let last_node = match record.outcome() {
        RunOutcome::Failed(e) => Some(e.node_id.clone()),
        _ => record
            .timeline
            .iter()
            .filter(|t| t.started_ms.is_some())
            .max_by_key(|t| t.started_ms)
            .map(|t| t.node_id.clone()),
    };
    // The server's own measurement is preferred (its sampler runs inside the process, every
    // 500 ms by default, through NVML); the source is said.
    let server_peak = record
        .server_benchmark
        .as_ref()
        .and_then(|b| b.vram_peak_mb.map(|mb| (mb, b.sample_interval_ms)));
    RunSummary {
        duration_ms: record.duration_ms,
        vram_peak_mib: match server_peak {
            Some((mb, _)) => Some(mb),
            None => record.vram.peak_used_bytes.map(to_mib),
        },
        vram_sample_ms: match server_peak {
            Some((_, ms)) => ms,
            None => (record.vram.interval_ms > 0).then_some(record.vram.interval_ms),
        },
        vram_peak_source: server_peak.map(|_| SERVER_CAPTURE.to_string()),
        vram_total_mib: record.vram.total_bytes.map(to_mib),
        vram_baseline_mib: record.vram_baseline_bytes.map(to_mib),
        ram_peak_mib: record.host.peak_ram_used_bytes.map(to_mib),
        rss_peak_mib: record.host.peak_rss_bytes.map(to_mib),
        swap_peak_mib: record.host.peak_swap_bytes.map(to_mib),
        ram_total_mib: record.host.ram_total_bytes.map(to_mib),
        cold: record.cold,
        last_node,
        stage: diagnosis.map(|d| d.stage),
        recovered_from_history: record
            .warnings
            .iter()
            .any(|w| w.starts_with(RECOVERED_WARNING)),
        delivered: ProductSummary {
            memory_fallbacks: record.memory_fallbacks.clone(),
            product: record.product.as_ref().and_then(|p| p.summary()),
            product_warnings: record
                .product
                .as_ref()
                .map(|p| p.mismatches.clone())
                .unwrap_or_default(),
            // Judged against the journal's earlier runs by the driver (`analytics::pressure`).
            memory_pressure: Vec::new(),
            slowdown_only: Vec::new(),
        },
        s_per_step: crate::run::timing::run_s_per_step(&record.step_timing),
        phases: workflow.and_then(|w| {
            let catalog = crate::catalog::Catalog::builtin();
            let defs = crate::nodedefs::NodeDefs::default();
            crate::run::timing::run_phases(&record.step_timing, record.duration_ms, |node| {
                w.node(node).is_some_and(|n| {
                    catalog.has(&n.class_type, crate::catalog::Role::Sampler, &defs)
                })
            })
        }),
        work: workflow.map(crate::analytics::cost::work_of),
        longest_quiet_ms: crate::run::hang::longest_quiet_ms(
            &record.raw.ws_text,
            &record.prompt_id,
        ),
        // Judged by the driver on a passing target (`analytics::walk`).
        walk_cues: Vec::new(),
    }
}

/// The source named for figures from ComfyUI's benchmark capture.
pub(crate) const SERVER_CAPTURE: &str = "server benchmark capture";

/// Start of the warning a record rebuilt from history carries.
pub(crate) const RECOVERED_WARNING: &str = "recovered from the server's history";

/// What else was using the machine during `record`, in words, for beside a slowdown from time
/// alone (issue #39): this machine's load average at the run's ends (or why it was not
/// recorded), and the card's memory in use outside PyTorch's pool when the run began (other
/// processes and CUDA's own context: `/system_stats` has no per-process figure).
pub(crate) fn busy_context(record: &RunRecord) -> Vec<String> {
    let mut out = Vec::new();
    out.push(match &record.host.load {
        Some(load) => load.describe(),
        None => "load average not recorded".to_string(),
    });
    let device = record
        .system_stats_before
        .as_ref()
        .and_then(crate::comfy::SystemStats::primary)
        .filter(|d| d.kind != "cpu" && d.vram_total > 0);
    if let Some(d) = device {
        let outside = d.used().saturating_sub(d.torch_vram_total);
        out.push(format!(
            "{:.0} MiB of the card in use outside PyTorch's pool when the run began (other \
             processes and the CUDA context)",
            to_mib(outside)
        ));
    }
    out
}

/// A record with only the essentials (no timeline, no VRAM series, no raw frames).
pub(crate) fn bare_record(
    run_id: &str,
    workflow: &Workflow,
    server: &str,
    cold: bool,
    outcome: RunOutcome,
) -> RunRecord {
    bare(run_id, workflow.sha256(), server, cold, outcome)
}

/// A bare record of a journaled run whose `run.json` is missing or unreadable, rebuilt from
/// what the journal says of it (the outcome, the last node), so that it is diagnosed like any
/// other run; None when the run did not fail.
pub(crate) fn record_of_entry(entry: &RunEntry, server: &str) -> Option<RunRecord> {
    let last_node = entry.summary.as_ref().and_then(|s| s.last_node.clone());
    let outcome = match entry.outcome.as_ref()? {
        Outcome::Failed {
            node_id,
            node_type,
            exception_type,
            exception_message,
        } => RunOutcome::Failed(ExecutionError {
            prompt_id: entry.run_id.clone(),
            node_id: node_id.clone(),
            node_type: node_type.clone(),
            exception_type: exception_type.clone(),
            exception_message: exception_message.clone(),
            ..ExecutionError::default()
        }),
        Outcome::Timeout { detail } => RunOutcome::Timeout(TimeoutInfo {
            reason: if detail.starts_with("no event") {
                TimeoutReason::Stall
            } else {
                TimeoutReason::Run
            },
            limit_ms: 0,
            last_node,
            interrupt_sent: false,
            interrupt_confirmed: false,
        }),
        Outcome::ServerLost { detail } => RunOutcome::ServerLost(ServerLostInfo {
            reason: detail.clone(),
            submitted: true,
            last_node,
        }),
        _ => return None,
    };
    let cold = entry.summary.as_ref().is_none_or(|s| s.cold);
    Some(bare(
        &entry.run_id,
        entry.workflow_sha256.clone(),
        server,
        cold,
        outcome,
    ))
}

fn bare(
    run_id: &str,
    workflow_sha256: String,
    server: &str,
    cold: bool,
    outcome: RunOutcome,
) -> RunRecord {
    let now = super::journal::now_rfc3339();
    let (kind, error) = outcome.into_parts();
    RunRecord {
        started_at: now.clone(),
        finished_at: now,
        vram: VramReport::from_samples(vec![], 0, None, 0),
        ..RunRecord::new(run_id, workflow_sha256, server, cold, kind, error)
    }
}

/// Rebuilds a record from the server's history entry of a run the tool lost track of
/// (None when the entry has no terminal event yet).
pub(crate) fn record_from_history(
    run_id: &str,
    workflow: &Workflow,
    server: &str,
    cold: bool,
    entry: &HistoryEntry,
) -> Option<RunRecord> {
    // The product from the entry alone (no header reads: the sizes of a recovered run are not
    // read; its socket frames are gone, so only the known socket-only classes are exempt).
    let product = crate::run::product::check(
        workflow,
        Some(entry),
        &[],
        &Default::default(),
        &entry.cached_nodes(),
    );
    let outcome = match entry.terminal()? {
        Terminal::Success { .. } => product
            .incomplete()
            .map_or(RunOutcome::Passed, RunOutcome::IncompleteOutput),
        Terminal::Error(e) => RunOutcome::Failed(crate::run::record::trim_current_inputs(*e)),
        Terminal::Interrupted(i) => RunOutcome::Interrupted(Interruption {
            by: InterruptedBy::Other,
            node_id: Some(i.node_id.clone()),
            node_type: Some(i.node_type.clone()),
            executed: i.executed.clone(),
            removed_from_queue: false,
        }),
    };
    let mut record = bare_record(run_id, workflow, server, cold, outcome);
    record.history = Some(entry.clone());
    record.cached_nodes = entry.cached_nodes();
    if matches!(entry.terminal(), Some(Terminal::Success { .. })) {
        record.product = Some(product);
    }
    record.warnings.push(format!(
        "{RECOVERED_WARNING}: comfy-bisect was not running when this prompt finished, so there is no node timeline, VRAM series or event log"
    ));
    Some(record)
}

/// Whether `record`, rebuilt from the server's history, is a pass whose evidence was lost
/// (issue #39): the console that shows a memory fallback or memory pressure was not seen after
/// the tool went down (nor can the server's log ring tie lines to a prompt), so the pass cannot
/// be told from a clean one. Such a run is run again (cold), never counted.
pub(crate) fn pass_without_evidence(record: &RunRecord) -> bool {
    record.outcome == OutcomeKind::Passed
        && record
            .warnings
            .iter()
            .any(|w| w.starts_with(RECOVERED_WARNING))
}

/// A server-lost record for a run whose server vanished with it.
#[cfg(test)]
pub(crate) fn server_lost_record(
    run_id: &str,
    workflow: &Workflow,
    server: &str,
    cold: bool,
    reason: &str,
) -> RunRecord {
    bare_record(
        run_id,
        workflow,
        server,
        cold,
        RunOutcome::ServerLost(ServerLostInfo {
            reason: reason.to_string(),
            submitted: true,
            last_node: None,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(name: &str) -> (Workflow, HistoryEntry) {
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{}/comfyui/{name}", crate::FIXTURES)).unwrap(),
        )
        .unwrap();
        let (_, e) = v.as_object().unwrap().iter().next().unwrap();
        let entry: HistoryEntry = serde_json::from_value(e.clone()).unwrap();
        let w = Workflow::from_json_str(&entry.prompt[2].to_string(), "p.json").unwrap();
        (w, entry)
    }

    #[test]
    fn the_servers_own_vram_peak_is_preferred_and_its_source_said() {
        let (w, entry) = captured("history_sd15_lora_upscale.json");
        let mut r = record_from_history("r", &w, "s", true, &entry).unwrap();
        r.vram.peak_used_bytes = Some(3 << 30);
        r.vram.interval_ms = 500;
        let s = summary_of(&r, None, None);
        assert_eq!((s.vram_peak_mib, s.vram_peak_source), (Some(3072.0), None));
        let capture: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/benchmark-capture/benchmark-event.json",
                crate::FIXTURES
            ))
            .unwrap(),
        )
        .unwrap();
        r.server_benchmark =
            crate::run::benchmark::read(&capture, crate::run::benchmark::CaptureSource::Websocket);
        let s = summary_of(&r, None, None);
        assert_eq!(s.vram_peak_mib, Some(22140.0));
        assert_eq!(s.vram_sample_ms, Some(500));
        assert_eq!(s.vram_peak_source.as_deref(), Some(SERVER_CAPTURE));
    }

    #[test]
    fn a_recovered_success_without_an_output_is_incomplete() {
        let (w, entry) = captured("history_sd15_lora_upscale.json");
        let r = record_from_history("r", &w, "s", true, &entry).unwrap();
        assert_eq!(outcome_of(&r), Outcome::Passed);
        assert_eq!(r.product.as_ref().unwrap().files.len(), 2);
        let mut entry = entry;
        entry.outputs.remove("9");
        let r = record_from_history("r", &w, "s", true, &entry).unwrap();
        match outcome_of(&r) {
            Outcome::IncompleteOutput {
                node_id, node_type, ..
            } => assert_eq!((node_id.as_str(), node_type.as_str()), ("9", "SaveImage")),
            other => panic!("{other:?}"),
        }
        // A failed prompt keeps its execution error and records no product.
        let (w, entry) = captured("history_sd15_execution_error_oom_1024px.json");
        let r = record_from_history("r", &w, "s", true, &entry).unwrap();
        assert!(matches!(outcome_of(&r), Outcome::Failed { .. }));
        assert!(r.product.is_none());
    }
}
