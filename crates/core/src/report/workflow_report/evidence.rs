//! What the failing run shows, for its workflow's report: its error and diagnosis
//! ([`evidence`]), the host's evidence (kernel log, RAM), the custom packs its nodes come from,
//! and what is attached of it.

use super::super::load::SessionData;
use super::super::model::{AttachedRun, CustomPackNode, CustomPackNodes, Evidence, NodeRef};
use super::super::naming::{display, outcome_name};
use super::run_facts::*;
use crate::session::journal::{
    Outcome, RunEntry, RunFile, RunRole, WorkflowJob, RUN_WORKFLOW_FILE,
};
use serde_json::{Map, Value};

/// The nodes of run `e`'s submitted workflow whose class its record says comes from a custom
/// node pack, by node id (`3` before `10`, `92:5` after `92`); none when the record does not
/// say or the workflow cannot be read.
pub(super) fn custom_pack_nodes(data: &SessionData, e: &RunEntry) -> Option<CustomPackNodes> {
    let packs = data.runs.get(&e.run_id)?.custom_nodes.as_ref()?;
    let workflow = data.failed_workflows.get(&e.run_id)?;
    let mut nodes: Vec<CustomPackNode> = workflow
        .nodes
        .iter()
        .filter_map(|(id, n)| {
            let p = packs.get(&n.class_type)?;
            Some(CustomPackNode {
                node: NodeRef {
                    id: id.clone(),
                    class_type: n.class_type.clone(),
                    subgraph: None,
                },
                title: n.title().map(str::to_string),
                pack: p.pack.clone(),
                version: p.version.clone(),
            })
        })
        .collect();
    let key = |id: &str| -> Vec<(u64, String)> {
        id.split(':')
            .map(|part| (part.parse().unwrap_or(u64::MAX), part.to_string()))
            .collect()
    };
    nodes.sort_by_cached_key(|n| key(&n.node.id));
    Some(CustomPackNodes {
        step: e.step,
        run_id: e.run_id.clone(),
        nodes,
    })
}

pub(super) fn attached(data: &SessionData, e: &RunEntry) -> AttachedRun {
    let s = &data.session;
    let workflow = display(&run_dir(data, e).join(RUN_WORKFLOW_FILE));
    let mut reproduce = format!(
        "comfy-bisect submit {} --server {}",
        crate::shell::quote(&workflow),
        s.server
    );
    let cold = e.summary.as_ref().map(|x| x.cold).unwrap_or(s.options.cold);
    if !cold {
        reproduce.push_str(" --warm");
    }
    if let Some(t) = s.options.timeout_s {
        reproduce.push_str(&format!(" --timeout {t}s"));
    }
    AttachedRun {
        step: e.step,
        increment: e.increment.clone(),
        purpose: match e.role {
            RunRole::Minimal | RunRole::Target | RunRole::Search => "ladder",
            RunRole::Repeat => "repeat",
            RunRole::Control => "control",
            RunRole::Confirm => "confirm",
            RunRole::Anchor => "anchor",
            RunRole::Mitigation => "mitigation",
        }
        .into(),
        run_id: e.run_id.clone(),
        outcome: outcome_name(e),
        run_dir: display(&run_dir(data, e)),
        workflow,
        ui_workflow: data.ui_workflows.get(&e.run_id).map(|p| display(p)),
        shareable_workflow: None,
        reproduce,
    }
}

/// What the ladder's "Peak RAM", "Server RSS" and "Swap" are (None when no run sampled RAM).
pub(super) fn ram_note(job: &WorkflowJob) -> Option<String> {
    let summaries: Vec<&crate::session::journal::RunSummary> = job
        .runs
        .iter()
        .filter_map(|r| r.summary.as_ref())
        .filter(|s| s.ram_peak_mib.is_some() || s.rss_peak_mib.is_some())
        .collect();
    if summaries.is_empty() {
        return None;
    }
    let total = summaries
        .iter()
        .find_map(|s| s.ram_total_mib)
        .map(|t| format!(" (of {:.1} GiB)", t / 1024.0))
        .unwrap_or_default();
    let mut note = format!(
        "Peak RAM is the system RAM in use{total} (ram_total − ram_free, all processes), sampled with VRAM."
    );
    if summaries.iter().any(|s| s.rss_peak_mib.is_some()) {
        note.push_str(" Server RSS is the server process's resident memory (VmRSS from /proc, or the kernel's high-water mark VmHWM when it rose during the run) and Swap its VmSwap: the server runs on this machine.");
    } else {
        note.push_str(" The server's own process was not sampled (it is not on this machine, or it was not found), so its RSS and swap are unknown.");
    }
    Some(note)
}

/// The host's side of a failing run: the kernel log's verdict and host-RAM peaks.
pub(super) fn host_evidence(
    file: Option<&RunFile>,
) -> (Option<crate::host::KernelEvidence>, Option<String>) {
    let Some(f) = file else {
        return (None, None);
    };
    let h = &f.record.host;
    let gib = crate::units::gib_or_mib;
    let mut parts = Vec::new();
    if let Some(peak) = h.peak_ram_used_bytes {
        parts.push(match h.ram_total_bytes {
            Some(t) => format!("system RAM in use peaked at {} of {}", gib(peak), gib(t)),
            None => format!("system RAM in use peaked at {}", gib(peak)),
        });
    }
    if let (Some(p), Some(rss)) = (&h.process, h.peak_rss_bytes) {
        parts.push(format!(
            "the server process (pid {}) at {} resident",
            p.pid,
            gib(rss)
        ));
    }
    if let Some(swap) = h.peak_swap_bytes.filter(|s| *s > 0) {
        parts.push(format!("{} in swap", gib(swap)));
    }
    let text = (!parts.is_empty()).then(|| {
        let mut t = parts.join(", ");
        if let Some(first) = t.get(..1) {
            t = first.to_uppercase() + &t[1..];
        }
        if h.pressure().is_some() {
            t.push_str(": host-RAM pressure");
        }
        t + "."
    });
    (f.record.kernel.clone(), text)
}

pub(super) fn evidence(data: &SessionData, e: &RunEntry) -> Evidence {
    let file = data.runs.get(&e.run_id);
    let d = diagnosis(data, e).unwrap_or_default();
    let full = execution_error(file);
    let (exception_type, exception_message, detail) = match &e.outcome {
        Some(Outcome::Failed {
            exception_type,
            exception_message,
            ..
        }) => (
            Some(exception_type.clone()),
            Some(
                full.as_ref()
                    .map(|f| f.exception_message.clone())
                    .unwrap_or_else(|| exception_message.clone()),
            ),
            None,
        ),
        Some(Outcome::Timeout { detail }) => (None, None, Some(format!("timed out: {detail}"))),
        Some(Outcome::ServerLost { detail }) => (
            None,
            None,
            Some(format!("the server went away during the run: {detail}")),
        ),
        Some(Outcome::Rejected { message }) => (
            None,
            None,
            Some(format!("rejected by the server: {message}")),
        ),
        _ => (None, None, None),
    };
    let mut stage_evidence = d.stage_evidence.clone();
    if d.async_unreliable {
        let note = "the error says it may be reported asynchronously, so the failing location is unreliable";
        stage_evidence = Some(match stage_evidence {
            Some(s) => format!("{s}; {note}"),
            None => note.to_string(),
        });
    }
    let mut current_inputs: Map<String, Value> = full
        .as_ref()
        .map(|f| f.current_inputs.clone())
        .unwrap_or_default();
    // A run at reduced steps (`--search-steps`): the failing node's inputs as the workflow has
    // them, the lowered ones given back their value (the ladder row says the run's own).
    let mut inputs_restored = Vec::new();
    if let (Some(reduced), Some(node)) = (&e.reduced, failing_node(e)) {
        for c in reduced.changes.iter().filter(|c| c.node == node.id) {
            let (Some(input), Some(from)) = (&c.input, &c.from) else {
                continue;
            };
            if let Some(v) = current_inputs.get_mut(input) {
                let ran = std::mem::replace(
                    v,
                    if v.is_array() {
                        Value::Array(vec![from.clone()])
                    } else {
                        from.clone()
                    },
                );
                let ran = match ran {
                    Value::Array(a) if a.len() == 1 => a[0].clone(),
                    other => other,
                };
                inputs_restored.push(format!("{input} {from} (the search ran it at {ran})"));
            }
        }
    }
    let (kernel, host_ram) = host_evidence(file);
    Evidence {
        step: e.step,
        increment: e.increment.clone(),
        run_id: Some(e.run_id.clone()),
        outcome: outcome_name(e),
        node: failing_node(e),
        exception_type,
        exception_message,
        failure_kind: d.kind.or_else(|| fallback_kind(e)),
        stage: d.stage,
        stage_evidence,
        stage_confidence: d.stage_confidence,
        numbers_consistent: (!d.numbers.is_empty())
            .then_some(d.numbers_consistent)
            .flatten(),
        numbers: d.numbers,
        numbers_notes: d.inconsistencies,
        last_progress: d
            .last_progress
            .or_else(|| last_progress_from_timeline(file)),
        traceback: full.map(|f| f.traceback).unwrap_or_default(),
        current_inputs,
        inputs_restored,
        detail,
        oom_kill: kernel.as_ref().and_then(|k| k.oom_kill.clone()),
        kernel_log: kernel.as_ref().map(|k| k.note.clone()),
        kernel_lines: kernel.map(|k| k.lines).unwrap_or_default(),
        host_ram,
        console: data.server_logs.get(&e.run_id).cloned().unwrap_or_default(),
        console_file: data
            .server_logs
            .contains_key(&e.run_id)
            .then(|| display(&run_dir(data, e).join(crate::run::console::SERVER_LOG_FILE))),
        run_dir: Some(display(&run_dir(data, e))),
    }
}
