//! The report of one workflow: its ladder table (what each step changes and how its run
//! ended), the first failure's evidence and next steps, repeats, controls, preflight
//! findings, component hashes and attachments.

use super::build::{display, is_main, outcome_name};
use super::load::SessionData;
use super::model::{
    AttachedRun, Attachments, Candidate, Component, ControlRow, CrashCheckRow, Evidence, LadderRow,
    NextSteps, NodeRef, Numbers, Preflight, ProgressSeen, RepeatRow, Verdict, VerdictKind,
    VramInfo, WorkflowInfo, WorkflowReport,
};
use super::verdict::verdict;
use crate::comfy::ExecutionError;
use crate::diagnose;
use crate::session::journal::{
    CrashCheck, Outcome, RunEntry, RunFile, RunRole, RunStatus, Verdict as SessionVerdict,
    WorkflowJob, RUN_WORKFLOW_FILE,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Formats one ladder change (`{"node","class_type","action","input","from","to"}`), joining a
/// width and height change of the same node into one resolution change.
pub fn describe_changes(changes: &[Value]) -> Vec<String> {
    let get = |c: &Value, k: &str| c.get(k).cloned();
    let str_of = |c: &Value, k: &str| {
        c.get(k)
            .and_then(|v| {
                v.as_str()
                    .map(str::to_string)
                    .or_else(|| Some(v.to_string()))
            })
            .unwrap_or_default()
    };
    let mut used = vec![false; changes.len()];
    let mut out = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        if used[i] {
            continue;
        }
        let input = str_of(c, "input");
        let node = str_of(c, "node");
        let class = str_of(c, "class_type");
        let action = str_of(c, "action");
        if action == crate::ladder::SECOND_PASS {
            if let Ok(change) = serde_json::from_value::<crate::workflow::Change>(c.clone()) {
                used[i] = true;
                out.push(crate::ladder::second_pass_text(&change));
                continue;
            }
        }
        if action == "set" && input == "width" {
            if let Some(j) = changes.iter().enumerate().position(|(j, d)| {
                j != i
                    && !used[j]
                    && str_of(d, "node") == node
                    && str_of(d, "input") == "height"
                    && str_of(d, "action") == "set"
            }) {
                used[i] = true;
                used[j] = true;
                let h = &changes[j];
                out.push(format!(
                    "resolution {}×{} → {}×{} ({class} #{node})",
                    value_text(get(c, "from")),
                    value_text(get(h, "from")),
                    value_text(get(c, "to")),
                    value_text(get(h, "to")),
                ));
                continue;
            }
        }
        used[i] = true;
        let target = format!("{class} #{node}");
        if let (Some(Value::Object(from)), Some(Value::Object(to))) = (get(c, "from"), get(c, "to"))
        {
            let mut keys: Vec<&String> = from.keys().chain(to.keys()).collect();
            keys.dedup();
            let mut seen = std::collections::BTreeSet::new();
            for key in keys {
                if !seen.insert(key.clone()) || from.get(key) == to.get(key) {
                    continue;
                }
                out.push(format!(
                    "{input}.{key} {} → {} ({target})",
                    value_text(from.get(key).cloned()),
                    value_text(to.get(key).cloned())
                ));
            }
            continue;
        }
        out.push(match (action.as_str(), input.is_empty()) {
            ("set", false) => format!(
                "{input} {} → {} ({target})",
                value_text(get(c, "from")),
                value_text(get(c, "to"))
            ),
            (_, false) => format!(
                "{action} {input} of {target}: {} → {}",
                value_text(get(c, "from")),
                value_text(get(c, "to"))
            ),
            (_, true) => format!("{action} {target}"),
        });
    }
    out
}

fn value_text(v: Option<Value>) -> String {
    match v {
        None | Some(Value::Null) => "none".into(),
        Some(Value::String(s)) => s,
        Some(Value::Array(a)) if a.len() == 2 && a[0].is_string() && a[1].is_u64() => {
            format!("output {} of #{}", a[1], a[0].as_str().unwrap_or_default())
        }
        Some(other) => other.to_string(),
    }
}

/// What the diagnosis of a run says, read from the `diagnose --json` object (or computed from
/// the run record when the run has none).
#[derive(Debug, Clone, Default)]
struct Diag {
    kind: Option<String>,
    stage: Option<String>,
    stage_evidence: Option<String>,
    stage_confidence: Option<String>,
    numbers: Numbers,
    numbers_consistent: Option<bool>,
    inconsistencies: Vec<String>,
    next_check: Vec<String>,
    candidates: Vec<String>,
    fragmentation: Option<String>,
    async_unreliable: bool,
    last_progress: Option<ProgressSeen>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn diag_from_value(v: &Value) -> Diag {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let last_progress = v.get("last_progress").and_then(|p| {
        Some(ProgressSeen {
            node: NodeRef {
                id: p.get("node_id")?.as_str()?.to_string(),
                class_type: p
                    .get("class_type")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
            },
            value: p.get("value")?.as_u64()?,
            max: p.get("max")?.as_u64()?,
        })
    });
    Diag {
        kind: s("kind"),
        stage: s("stage"),
        stage_evidence: s("stage_evidence"),
        stage_confidence: s("stage_confidence"),
        numbers: v
            .get("numbers")
            .and_then(|n| serde_json::from_value(n.clone()).ok())
            .unwrap_or_default(),
        numbers_consistent: v.get("numbers_consistent").and_then(Value::as_bool),
        inconsistencies: strings(v.get("inconsistencies")),
        next_check: strings(v.get("next_check")),
        candidates: strings(v.get("candidates")),
        fragmentation: s("fragmentation"),
        async_unreliable: v
            .get("asynchronous_error_location_unreliable")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        last_progress,
    }
}

fn execution_error(file: Option<&RunFile>) -> Option<ExecutionError> {
    file?.record.execution_error().cloned()
}

/// The run's node timeline as JSON objects (`node_id`, `class_type`, `progress {value,max}`).
fn timeline(file: Option<&RunFile>) -> Vec<Value> {
    file.map(|f| {
        f.record
            .timeline
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect()
    })
    .unwrap_or_default()
}

/// The diagnosis of a failing run: the recorded one, else one computed from the record.
fn diagnosis(entry: &RunEntry, file: Option<&RunFile>) -> Option<Diag> {
    let recorded = entry
        .diagnosis
        .as_ref()
        .and_then(|d| serde_json::to_value(d).ok())
        .or_else(|| file.and_then(|f| f.record.diagnosis.clone()))
        .filter(|v| v.is_object());
    if let Some(v) = recorded {
        return Some(diag_from_value(&v));
    }
    let outcome = entry.outcome.as_ref()?;
    if !outcome.is_failure() {
        return None;
    }
    let mut evidence = diagnose::Evidence::default();
    match outcome {
        Outcome::Failed {
            node_id,
            node_type,
            exception_type,
            exception_message,
        } => {
            let full = execution_error(file);
            evidence.node_id = Some(node_id.clone());
            evidence.node_type = Some(node_type.clone());
            evidence.exception_type = Some(exception_type.clone());
            evidence.exception_message = Some(
                full.as_ref()
                    .map(|e| e.exception_message.clone())
                    .unwrap_or_else(|| exception_message.clone()),
            );
            evidence.traceback = full.map(|e| e.traceback).unwrap_or_default();
        }
        Outcome::Timeout { .. } => evidence.outcome = Some(diagnose::RunOutcomeHint::Timeout),
        Outcome::ServerLost { .. } => evidence.outcome = Some(diagnose::RunOutcomeHint::ServerLost),
        _ => return None,
    }
    evidence.progress = timeline(file)
        .iter()
        .filter_map(|t| {
            let p = t.get("progress")?;
            Some(diagnose::NodeProgress {
                node_id: t.get("node_id")?.as_str()?.to_string(),
                class_type: t
                    .get("class_type")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                value: p.get("value")?.as_f64()? as u64,
                max: p.get("max")?.as_f64()? as u64,
            })
        })
        .collect();
    let d = diagnose::diagnose(&evidence);
    serde_json::to_value(&d).ok().map(|v| diag_from_value(&v))
}

/// The last progress any node of the run reported, from the timeline.
fn last_progress_from_timeline(file: Option<&RunFile>) -> Option<ProgressSeen> {
    timeline(file).iter().rev().find_map(|t| {
        let p = t.get("progress")?;
        Some(ProgressSeen {
            node: NodeRef {
                id: t.get("node_id")?.as_str()?.to_string(),
                class_type: t
                    .get("class_type")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
            },
            value: p.get("value")?.as_f64()? as u64,
            max: p.get("max")?.as_f64()? as u64,
        })
    })
}

fn fallback_kind(entry: &RunEntry) -> Option<String> {
    match entry.outcome.as_ref()? {
        Outcome::Timeout { .. } => Some("timeout".into()),
        Outcome::ServerLost { .. } => Some("process_killed".into()),
        Outcome::Rejected { .. } => Some("rejected".into()),
        Outcome::MemoryFallback { .. } => Some("memory_fallback".into()),
        _ => None,
    }
}

fn failing_node(entry: &RunEntry) -> Option<NodeRef> {
    match entry.outcome.as_ref()? {
        Outcome::Failed {
            node_id, node_type, ..
        } => Some(NodeRef {
            id: node_id.clone(),
            class_type: node_type.clone(),
        }),
        _ => None,
    }
}

fn run_dir(data: &SessionData, entry: &RunEntry) -> PathBuf {
    data.session_dir.join(&entry.dir)
}

fn vram_samples(file: Option<&RunFile>) -> Option<usize> {
    file.map(|f| f.record.vram.samples.len())
}

fn row_for(
    data: &SessionData,
    step: usize,
    increment: &str,
    changes: Vec<String>,
    entry: Option<&RunEntry>,
) -> LadderRow {
    let Some(entry) = entry else {
        return LadderRow {
            step,
            increment: increment.to_string(),
            increment_kind: None,
            changes,
            run_id: None,
            outcome: "not_run".into(),
            failure_kind: None,
            stage: None,
            failing_node: None,
            peak_vram_mib: None,
            vram_samples: None,
            baseline_vram_mib: None,
            peak_ram_mib: None,
            peak_rss_mib: None,
            peak_swap_mib: None,
            duration_s: None,
            cold: None,
            run_dir: None,
            memory_fallbacks: Vec::new(),
            crash_check: None,
            models: Vec::new(),
            memory_events: Vec::new(),
        };
    };
    let file = data.runs.get(&entry.run_id);
    let diag = if entry.failed() {
        diagnosis(entry, file)
    } else {
        None
    };
    let summary = entry.summary.as_ref();
    LadderRow {
        step,
        increment: increment.to_string(),
        increment_kind: None,
        changes,
        run_id: Some(entry.run_id.clone()),
        outcome: outcome_name(entry),
        failure_kind: diag
            .as_ref()
            .and_then(|d| d.kind.clone())
            .or_else(|| fallback_kind(entry)),
        stage: diag
            .as_ref()
            .and_then(|d| d.stage.clone())
            .or_else(|| summary.and_then(|s| s.stage.clone())),
        failing_node: failing_node(entry),
        peak_vram_mib: summary.and_then(|s| s.vram_peak_mib),
        vram_samples: vram_samples(file),
        baseline_vram_mib: summary.and_then(|s| s.vram_baseline_mib),
        peak_ram_mib: summary.and_then(|s| s.ram_peak_mib),
        peak_rss_mib: summary.and_then(|s| s.rss_peak_mib),
        peak_swap_mib: summary.and_then(|s| s.swap_peak_mib),
        duration_s: summary.map(|s| s.duration_ms as f64 / 1000.0),
        cold: summary.map(|s| s.cold),
        run_dir: Some(display(&run_dir(data, entry))),
        memory_fallbacks: summary
            .map(|s| s.memory_fallbacks.clone())
            .unwrap_or_default(),
        crash_check: None,
        models: file
            .map(|f| super::memory::model_rows(&f.record.memory_events))
            .unwrap_or_default(),
        memory_events: file
            .map(|f| super::memory::event_notes(&f.record.memory_events))
            .unwrap_or_default(),
    }
}

/// The report of workflow `index` of the session.
pub(super) fn workflow_report(
    data: &SessionData,
    index: usize,
    job: &WorkflowJob,
) -> WorkflowReport {
    let steps_total = if job.steps.is_empty() {
        job.runs.iter().map(|r| r.step).max().unwrap_or(0)
    } else {
        job.steps.len() - 1
    };
    let main_run = |step: usize| {
        job.runs
            .iter()
            .find(|r| r.step == step && is_main(r.role) && r.status == RunStatus::Done)
            .or_else(|| job.runs.iter().find(|r| r.step == step && is_main(r.role)))
    };
    let increment_of = |step: usize| {
        job.steps
            .iter()
            .find(|s| s.index == step)
            .map(|s| s.increment.clone())
            .or_else(|| {
                job.runs
                    .iter()
                    .find(|r| r.step == step)
                    .map(|r| r.increment.clone())
            })
            .unwrap_or_else(|| format!("step {step}"))
    };
    let ladder: Vec<LadderRow> = if job.steps.is_empty() {
        let mut steps: Vec<usize> = job
            .runs
            .iter()
            .filter(|r| is_main(r.role))
            .map(|r| r.step)
            .collect();
        steps.sort_unstable();
        steps.dedup();
        steps
            .into_iter()
            .map(|k| row_for(data, k, &increment_of(k), Vec::new(), main_run(k)))
            .collect()
    } else {
        job.steps
            .iter()
            .map(|st| {
                row_for(
                    data,
                    st.index,
                    &st.increment,
                    describe_changes(&st.changes),
                    main_run(st.index),
                )
            })
            .collect()
    };
    let mut ladder = ladder;
    for row in &mut ladder {
        let entry = row
            .run_id
            .as_ref()
            .and_then(|id| job.runs.iter().find(|r| &r.run_id == id));
        if let Some(entry) = entry {
            row.crash_check = crash_check_row(job, entry, data.session.options.confirm_crashes);
        }
    }
    let verdict = verdict(data, job, steps_total, &ladder, &increment_of);
    let failing_run: Option<&RunEntry> = match &job.verdict {
        Some(SessionVerdict::FirstFailure { run_id, .. })
        | Some(SessionVerdict::MinimalFails { run_id, .. }) => {
            job.runs.iter().find(|r| &r.run_id == run_id)
        }
        Some(SessionVerdict::Flaky { counts }) => counts
            .iter()
            .map(|c| c.step)
            .max()
            .and_then(|k| job.runs.iter().find(|r| r.step == k && r.failed())),
        Some(SessionVerdict::Incomplete { .. }) | None => job
            .runs
            .iter()
            .filter(|r| is_main(r.role) && r.failed())
            .min_by_key(|r| r.step),
        _ => None,
    };
    let passing_run: Option<&RunEntry> = match &job.verdict {
        Some(SessionVerdict::FirstFailure {
            last_pass_run_id, ..
        }) => job.runs.iter().find(|r| &r.run_id == last_pass_run_id),
        _ => {
            let limit = failing_run.map(|r| r.step).unwrap_or(usize::MAX);
            job.runs
                .iter()
                .filter(|r| is_main(r.role) && r.passed() && r.step < limit)
                .max_by_key(|r| r.step)
        }
    };
    let first_failure = failing_run.map(|e| evidence(data, e));
    let next_steps = failing_run.and_then(|e| {
        let d = diagnosis(e, data.runs.get(&e.run_id))?;
        let mut candidates: Vec<Candidate> = d
            .candidates
            .iter()
            .map(|c| Candidate {
                text: c.clone(),
                status: "unproven".into(),
            })
            .collect();
        if let Some(f) = &d.fragmentation {
            candidates.push(Candidate {
                text: format!(
                    "allocator fragmentation: a large reserved-but-unallocated gap is visible (fragmentation: {f})"
                ),
                status: "unproven".into(),
            });
        }
        Some(NextSteps {
            stage: d.stage.unwrap_or_else(|| "unknown".into()),
            next_check: d.next_check,
            candidates,
            root_cause: "unknown".into(),
        })
    });
    let repeats = repeat_rows(job, &verdict);
    let controls = job
        .runs
        .iter()
        .filter(|r| r.role == RunRole::Control)
        .map(|r| {
            let d = if r.failed() {
                diagnosis(r, data.runs.get(&r.run_id))
            } else {
                None
            };
            ControlRow {
                step: r.step,
                increment: r.increment.clone(),
                run_id: Some(r.run_id.clone()),
                outcome: outcome_name(r),
                stage: d
                    .and_then(|d| d.stage)
                    .or_else(|| r.summary.as_ref().and_then(|s| s.stage.clone())),
                failing_node: failing_node(r),
                peak_vram_mib: r.summary.as_ref().and_then(|s| s.vram_peak_mib),
            }
        })
        .collect();
    let component_source = failing_run
        .and_then(|r| data.runs.get(&r.run_id))
        .or_else(|| {
            job.runs
                .iter()
                .rev()
                .filter_map(|r| data.runs.get(&r.run_id))
                .find(|f| !f.component_hashes.is_empty())
        });
    let components = component_source
        .map(|f| {
            f.component_hashes
                .iter()
                .map(|c| Component {
                    file: c.file.clone(),
                    folder: c.folder.clone(),
                    node: NodeRef {
                        id: c.node_id.clone(),
                        class_type: c.class_type.clone(),
                    },
                    input: c.input.clone(),
                    status: serde_json::to_value(c.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    size_bytes: c.size,
                    sha256: c.sha256.clone(),
                    autov2: c.autov2.clone(),
                    reason: c.reason.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let attach = |e: &RunEntry| attached(data, e);
    let attachments = Attachments {
        session_dir: display(&data.session_dir),
        minimal_passing: passing_run.map(attach),
        first_failing: failing_run.map(attach),
        runs: job.runs.iter().map(attach).collect(),
    };
    let sample_ms = job
        .runs
        .iter()
        .find_map(|r| r.summary.as_ref().and_then(|s| s.vram_sample_ms));
    let total_mib = job
        .runs
        .iter()
        .find_map(|r| r.summary.as_ref().and_then(|s| s.vram_total_mib));
    let note = match sample_ms {
        Some(ms) => format!(
            "Peak VRAM is the highest device memory in use (total − free, all processes) seen by sampling GET /system_stats every {ms} ms during the run; allocations that live shorter than that, such as the spike right before an OOM, can be missed, so the true peak may be higher."
        ),
        None => "Peak VRAM is sampled from GET /system_stats during each run (total − free, all processes); short spikes between samples can be missed.".to_string(),
    };
    let preflight = match &job.verdict {
        Some(SessionVerdict::PreflightFailed {
            unknown_nodes,
            missing_models,
            other,
        }) => Some(Preflight {
            unknown_nodes: unknown_nodes.clone(),
            missing_models: missing_models.iter().map(describe_missing_model).collect(),
            other: other.clone(),
        }),
        _ => None,
    };
    WorkflowReport {
        name: job.name.clone(),
        workflow: WorkflowInfo {
            path: Some(job.source.clone()),
            format: data.source_formats.get(index).cloned().flatten(),
            sha256: (!job.target_sha256.is_empty()).then(|| job.target_sha256.clone()),
        },
        verdict,
        ladder,
        vram: VramInfo {
            sample_interval_ms: sample_ms,
            total_mib,
            ram_note: ram_note(job),
            note,
        },
        first_failure,
        next_steps,
        repeats,
        controls,
        preflight,
        components,
        attachments,
    }
}

fn describe_missing_model(v: &Value) -> String {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let file = match s("folder").as_str() {
        "" => s("file"),
        folder => format!("{folder}/{}", s("file")),
    };
    let mut out = file;
    let node = s("node");
    if !node.is_empty() {
        let class = s("class_type");
        let input = s("input");
        out.push_str(&format!(" (node #{node}"));
        if !class.is_empty() {
            out.push_str(&format!(" {class}"));
        }
        if !input.is_empty() {
            out.push_str(&format!(", input {input}"));
        }
        out.push(')');
    }
    out
}

fn attached(data: &SessionData, e: &RunEntry) -> AttachedRun {
    let s = &data.session;
    let workflow = display(&run_dir(data, e).join(RUN_WORKFLOW_FILE));
    let mut reproduce = format!(
        "comfy-bisect submit {} --server {}",
        shell_word(&workflow),
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

/// Quotes a path for a POSIX shell when it needs it.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-:+=@%,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// What the ladder's "Peak RAM", "Server RSS" and "Swap" are (None when no run sampled RAM).
fn ram_note(job: &WorkflowJob) -> Option<String> {
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
        "Peak RAM is the system RAM in use{total} (ram_total − ram_free of GET /system_stats, all processes), sampled with VRAM."
    );
    if summaries.iter().any(|s| s.rss_peak_mib.is_some()) {
        note.push_str(" Server RSS is the server process's resident memory (VmRSS from /proc, or the kernel's high-water mark VmHWM when it rose during the run) and Swap its VmSwap: the server runs on this machine.");
    } else {
        note.push_str(" The server's own process was not sampled (it is not on this machine, or it was not found), so its RSS and swap are unknown.");
    }
    Some(note)
}

/// The host's side of a failing run: the kernel log's verdict and host-RAM peaks.
fn host_evidence(file: Option<&RunFile>) -> (Option<crate::host::KernelEvidence>, Option<String>) {
    let Some(f) = file else {
        return (None, None);
    };
    let h = &f.record.host;
    let gib = crate::host::human_bytes;
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

fn evidence(data: &SessionData, e: &RunEntry) -> Evidence {
    let file = data.runs.get(&e.run_id);
    let d = diagnosis(e, file).unwrap_or_default();
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
    let current_inputs: Map<String, Value> = full
        .as_ref()
        .map(|f| f.current_inputs.clone())
        .unwrap_or_default();
    let (kernel, host_ram) = host_evidence(file);
    Evidence {
        step: e.step,
        increment: e.increment.clone(),
        run_id: Some(e.run_id.clone()),
        outcome: outcome_name(e),
        node: failing_node(e),
        exception_type,
        exception_message,
        failure_kind: d.kind.clone().or_else(|| fallback_kind(e)),
        stage: d.stage.clone(),
        stage_evidence,
        stage_confidence: d.stage_confidence.clone(),
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

fn repeat_rows(job: &WorkflowJob, verdict: &Verdict) -> Vec<RepeatRow> {
    let mut steps: BTreeMap<usize, Vec<&RunEntry>> = BTreeMap::new();
    for r in job.runs.iter().filter(|r| r.role == RunRole::Repeat) {
        steps.entry(r.step).or_default();
    }
    if steps.is_empty() {
        return Vec::new();
    }
    for r in &job.runs {
        if (r.role == RunRole::Repeat || is_main(r.role)) && r.status == RunStatus::Done {
            if let Some(list) = steps.get_mut(&r.step) {
                list.push(r);
            }
        }
    }
    let top = steps.keys().max().copied();
    steps
        .into_iter()
        .map(|(step, runs)| {
            let failing_step = match verdict.kind {
                VerdictKind::FirstFailure | VerdictKind::MinimalFails => verdict.step,
                _ => top,
            };
            RepeatRow {
                step,
                increment: runs
                    .first()
                    .map(|r| r.increment.clone())
                    .unwrap_or_default(),
                role: if Some(step) == failing_step {
                    "first_failing".into()
                } else {
                    "last_passing".into()
                },
                passed: runs.iter().filter(|r| r.passed()).count(),
                failed: runs.iter().filter(|r| r.failed()).count(),
                other: runs.iter().filter(|r| !r.passed() && !r.failed()).count(),
                run_ids: runs.iter().map(|r| r.run_id.clone()).collect(),
            }
        })
        .collect()
}

/// The ladder table's note on a crashed run: what its re-runs said.
fn crash_check_row(job: &WorkflowJob, entry: &RunEntry, n: u32) -> Option<CrashCheckRow> {
    let (result, times, rerun_ids) = match job.crash_check(entry, n) {
        CrashCheck::NotACrash => return None,
        CrashCheck::Pending => {
            let ids: Vec<String> = job
                .runs
                .iter()
                .filter(|r| r.confirms.as_deref() == Some(&entry.run_id))
                .map(|r| r.run_id.clone())
                .collect();
            ("pending", 1, ids)
        }
        CrashCheck::NotReproduced { by } => ("not_reproduced", 1, vec![by]),
        CrashCheck::Confirmed { times, by } => ("confirmed", times, by),
    };
    Some(CrashCheckRow {
        result: result.into(),
        times,
        rerun_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_join_resolution_and_diff_objects() {
        let changes = vec![
            json!({"node": "5", "class_type": "EmptyLatentImage", "action": "set", "input": "width", "from": 256, "to": 1280}),
            json!({"node": "5", "class_type": "EmptyLatentImage", "action": "set", "input": "height", "from": 144, "to": 720}),
            json!({"node": "6", "class_type": "Power Lora Loader (rgthree)", "action": "set", "input": "lora_1",
                   "from": {"on": false, "lora": "a.safetensors"}, "to": {"on": true, "lora": "a.safetensors"}}),
            json!({"node": "3", "class_type": "KSampler", "action": "set", "input": "latent_image", "from": ["14", 0], "to": ["13", 0]}),
            json!({"node": "9", "class_type": "EasyCache", "action": "bypass"}),
        ];
        assert_eq!(
            describe_changes(&changes),
            vec![
                "resolution 256×144 → 1280×720 (EmptyLatentImage #5)",
                "lora_1.on false → true (Power Lora Loader (rgthree) #6)",
                "latent_image output 0 of #14 → output 0 of #13 (KSampler #3)",
                "bypass EasyCache #9",
            ]
        );
    }
}
