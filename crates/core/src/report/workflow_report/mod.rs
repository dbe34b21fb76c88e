//! The report of one workflow: its ladder table (what each step changes and how its run
//! ended), the first failure's evidence and next steps, repeats, controls, preflight
//! findings, component hashes and attachments. What the failing run itself shows (its error
//! and diagnosis, the host's evidence, its custom packs, what is attached of it) is gathered
//! in `evidence.rs`.

mod evidence;
mod run_facts;
use evidence::*;
use run_facts::*;

use super::load::SessionData;
use super::model::{
    Attachments, Candidate, Component, ControlRow, CrashCheckRow, LadderRow, MemoryChart,
    NextSteps, NodeRef, NodeTimeRow, NodeTimes, NodeTimesRun, Preflight, RepeatRow, Verdict,
    VerdictKind, VramInfo, WorkflowInfo, WorkflowReport,
};
use super::naming::{display, is_main, outcome_name};
use super::verdict::verdict;
use crate::session::journal::{
    CrashCheck, Outcome, RunEntry, RunRole, RunStatus, Verdict as SessionVerdict, WorkflowJob,
};
use crate::vocab::Stage;
use indexmap::IndexMap;
use std::collections::BTreeMap;

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
            changes,
            outcome: "not_run".into(),
            ..LadderRow::default()
        };
    };
    let file = data.runs.get(&entry.run_id);
    let diag = if entry.failed() {
        diagnosis(data, entry)
    } else {
        None
    };
    let summary = entry.summary.as_ref();
    let proven = entry
        .diagnosis
        .as_ref()
        .filter(|_| entry.failed())
        .and_then(|d| d.numbers.proven_demand_mib());
    LadderRow {
        step,
        increment: increment.to_string(),
        increment_kind: None,
        changes,
        run_id: Some(entry.run_id.clone()),
        outcome: outcome_name(entry),
        failure_kind: diag
            .as_ref()
            .and_then(|d| d.kind)
            .or_else(|| fallback_kind(entry)),
        stage: diag
            .as_ref()
            .and_then(|d| d.stage)
            .or_else(|| summary.and_then(|s| s.stage))
            .or_else(|| match (&entry.outcome, file) {
                (Some(Outcome::MemoryFallback { .. }), Some(f)) => {
                    super::memory::fallback_stage(&f.record.memory_events)
                }
                _ => None,
            }),
        failing_node: failing_node(entry),
        peak_vram_mib: summary.and_then(|s| s.vram_peak_mib),
        oom_needed_mib: proven.map(|(v, _)| v),
        oom_needed_from: proven.map(|(_, from)| from.to_string()),
        vram_samples: vram_samples(file),
        baseline_vram_mib: summary.and_then(|s| s.vram_baseline_mib),
        peak_ram_mib: summary.and_then(|s| s.ram_peak_mib),
        peak_rss_mib: summary.and_then(|s| s.rss_peak_mib),
        peak_swap_mib: summary.and_then(|s| s.swap_peak_mib),
        duration_s: summary.map(|s| s.duration_ms as f64 / 1000.0),
        s_per_step: summary.and_then(|s| s.s_per_step),
        cold: summary.map(|s| s.cold),
        run_dir: Some(display(&run_dir(data, entry))),
        delivered: summary.map(|s| s.delivered.clone()).unwrap_or_default(),
        models: file
            .map(|f| super::memory::model_rows(&f.record.memory_events))
            .unwrap_or_default(),
        memory_events: file
            .map(|f| super::memory::event_notes(&f.record.memory_events))
            .unwrap_or_default(),
        reduced: entry
            .reduced
            .as_ref()
            .map(super::search_steps::reduced_steps),
        ..LadderRow::default()
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
    let main_run = |step: usize| crate::session::decide::step_run(job, step, &data.session.options);
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
                    crate::ladder::describe_changes(&st.changes, st.index > 0),
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
        Some(SessionVerdict::Checked { run_id }) => {
            job.runs.iter().find(|r| &r.run_id == run_id && r.failed())
        }
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
    let custom_pack_nodes = failing_run.and_then(|e| custom_pack_nodes(data, e));
    let next_steps = failing_run.and_then(|e| {
        let d = diagnosis(data, e)?;
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
            stage: d.stage.unwrap_or(Stage::Unknown),
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
            let d = if r.failed() { diagnosis(data, r) } else { None };
            ControlRow {
                step: r.step,
                increment: r.increment.clone(),
                run_id: Some(r.run_id.clone()),
                outcome: outcome_name(r),
                stage: d
                    .and_then(|d| d.stage)
                    .or_else(|| r.summary.as_ref().and_then(|s| s.stage)),
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
                        subgraph: None,
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
                    link_target: c.link_target.clone(),
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
    let from_server = job.runs.iter().any(|r| {
        r.summary
            .as_ref()
            .is_some_and(|s| s.vram_peak_source.is_some())
    });
    let note = match sample_ms {
        _ if from_server => "Peak VRAM comes from the server's own benchmark capture (ComfyUI samples the device's memory in use inside its process) where a run has it (run.json `server_benchmark`), else from sampling GET /system_stats during the run (total − free, all processes); short spikes between samples can be missed.".to_string(),
        Some(ms) => format!(
            "Peak VRAM is the device memory in use (total − free, all processes), sampled from GET /system_stats every {ms} ms: a shorter spike, such as the one right before an OOM, can be missed, so the true peak may be higher."
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
            missing_models: missing_models.iter().map(|m| m.describe()).collect(),
            other: other.clone(),
        }),
        _ => None,
    };
    let mut report = WorkflowReport {
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
        custom_pack_nodes,
        bug_form: None,
        mitigations: super::mitigations::rows(data, &job.name),
        search_steps: super::search_steps::search_steps(job, &increment_of),
        node_times: None,
        memory_chart: None,
    };
    report.node_times = node_times(data, &report);
    report.memory_chart = super::chart::ladder_chart(&report)
        .map(|(mermaid, caption)| MemoryChart { mermaid, caption });
    let names = data.subgraph_names.get(index).cloned().unwrap_or_default();
    label_subgraph_nodes(&mut report, &names);
    report
}

/// Each node's execution time in the boundary runs: the last pass and the first failure of
/// the verdict, and the first memory pressure when there is one.
fn node_times(data: &SessionData, report: &WorkflowReport) -> Option<NodeTimes> {
    let v = &report.verdict;
    let ran = |r: &&LadderRow| r.run_id.is_some() && r.outcome != "not_run";
    // The verdict's step is a failure only when its run did not pass ("could not reproduce"
    // names the passing target).
    let failure = v.step.and_then(|k| {
        report
            .ladder
            .iter()
            .filter(ran)
            .find(|r| r.step == k && r.outcome != "passed")
    });
    let pressure = v
        .first_pressure_step
        .and_then(|k| report.ladder.iter().filter(ran).find(|r| r.step == k));
    // The last pass below the failure, or below the memory pressure when nothing failed (the
    // target passed: its own run is the pressure, compared with the pass before it).
    let limit = failure.or(pressure).map_or(usize::MAX, |r| r.step);
    let last_pass = report
        .ladder
        .iter()
        .filter(ran)
        .filter(|r| r.step < limit && r.outcome == "passed")
        .max_by_key(|r| r.step);
    let mut picked: Vec<(&str, &LadderRow)> = Vec::new();
    if let Some(r) = last_pass {
        picked.push(("last pass", r));
    }
    if let Some(r) = pressure.filter(|p| {
        last_pass.is_none_or(|l| l.step != p.step) && failure.is_none_or(|f| f.step != p.step)
    }) {
        picked.push(("first memory pressure", r));
    }
    if let Some(r) = failure {
        picked.push(("first failure", r));
    }
    picked.sort_by_key(|(_, r)| r.step);
    let mut out = NodeTimes::default();
    let mut timelines = Vec::new();
    for (role, r) in picked {
        let Some(file) = r.run_id.as_ref().and_then(|id| data.runs.get(id)) else {
            continue;
        };
        if file.record.timeline.is_empty() {
            continue;
        }
        out.runs.push(NodeTimesRun {
            role: role.to_string(),
            step: r.step,
            increment: r.increment.clone(),
            s_per_step: r.s_per_step,
        });
        timelines.push(&file.record.timeline);
    }
    for (i, timeline) in timelines.iter().enumerate() {
        let mut nodes: Vec<_> = timeline.iter().collect();
        nodes.sort_by_key(|n| n.started_ms.unwrap_or(u64::MAX));
        for n in nodes {
            let id = n.display_node.clone().unwrap_or_else(|| n.node_id.clone());
            let secs = match (n.cached, n.started_ms, n.finished_ms) {
                (false, Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1000.0),
                _ => None,
            };
            let row = match out.rows.iter().position(|r| r.node == id) {
                Some(p) => &mut out.rows[p],
                None => {
                    out.rows.push(NodeTimeRow {
                        node: id,
                        class_type: n.class_type.clone(),
                        seconds: vec![None; timelines.len()],
                    });
                    out.rows.last_mut().expect("just pushed")
                }
            };
            if row.seconds[i].is_none() {
                row.seconds[i] = secs;
            }
        }
    }
    out.rows.retain(|r| r.seconds.iter().any(Option::is_some));
    (!out.runs.is_empty() && !out.rows.is_empty()).then_some(out)
}

/// Says where every node of the report that sits inside a subgraph is, as the canvas shows it
/// (`subgraph 'Sampler' #140`; by id alone when the source was not a UI file).
fn label_subgraph_nodes(report: &mut WorkflowReport, names: &IndexMap<String, String>) {
    let mut nodes: Vec<&mut NodeRef> = Vec::new();
    nodes.extend(
        report
            .ladder
            .iter_mut()
            .filter_map(|r| r.failing_node.as_mut()),
    );
    nodes.extend(
        report
            .controls
            .iter_mut()
            .filter_map(|r| r.failing_node.as_mut()),
    );
    nodes.extend(report.components.iter_mut().map(|c| &mut c.node));
    if let Some(c) = report.custom_pack_nodes.as_mut() {
        nodes.extend(c.nodes.iter_mut().map(|n| &mut n.node));
    }
    if let Some(e) = report.first_failure.as_mut() {
        nodes.extend(e.node.as_mut());
        nodes.extend(e.last_progress.as_mut().map(|p| &mut p.node));
    }
    for node in nodes {
        node.subgraph = crate::workflow::label::subgraph_location(&node.id, names);
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
    use crate::comfy::events::{NodeTiming, Progress};
    use crate::comfy::MemoryEvent;
    use crate::run::{RunError, RunRecord, ServerLostInfo};
    use crate::session::evidence::{bare_record, diagnose_record, server_lost_record, summary_of};
    use crate::session::journal::{
        Outcome, Phase, RunFile, RunRole, SessionFile, SessionOptions, SessionState, WorkflowJob,
        SESSION_SCHEMA_VERSION,
    };
    use crate::workflow::Workflow;
    use std::collections::HashMap;
    use std::path::PathBuf;

    const PROMPT: &str = r#"{
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "a.safetensors"}},
        "3": {"class_type": "KSampler", "inputs": {"steps": 20, "model": ["4", 0]}}
    }"#;

    fn timing(node: &str, class: &str, cached: bool, progress: Option<(f64, f64)>) -> NodeTiming {
        NodeTiming {
            node_id: node.into(),
            display_node: None,
            class_type: Some(class.into()),
            cached,
            started_ms: (!cached).then_some(100),
            finished_ms: None,
            progress: progress.map(|(value, max)| Progress { value, max }),
            state: if cached { "cached" } else { "running" }.into(),
            output: None,
        }
    }

    /// The server went away while KSampler #3 sampled; the checkpoint loader #4 came from the
    /// cache of an earlier run.
    fn lost_run(workflow: &Workflow) -> RunRecord {
        let mut r = server_lost_record("run-1", workflow, "http://127.0.0.1:8188", false, "gone");
        r.error = Some(RunError::ServerLost(ServerLostInfo {
            reason: "socket closed and 3 connection attempts refused".into(),
            submitted: true,
            last_node: Some("3".into()),
        }));
        r.cached_nodes = vec!["4".into()];
        r.timeline = vec![
            timing("4", "CheckpointLoaderSimple", true, None),
            timing("3", "KSampler", false, Some((7.0, 20.0))),
        ];
        r
    }

    /// The session of one finished run: its journal entry and its run file around `record`.
    fn session_of_run(entry: &RunEntry, record: RunRecord) -> SessionData {
        let file = RunFile {
            schema_version: SESSION_SCHEMA_VERSION,
            session_id: "s".into(),
            workflow: "wf".into(),
            entry: entry.clone(),
            component_hashes: vec![],
            node_hashes: Default::default(),
            environment: None,
            custom_nodes: None,
            record,
            memory_pressure: None,
        };
        session_with(entry.clone(), Some(file))
    }

    fn session_with(entry: RunEntry, file: Option<RunFile>) -> SessionData {
        let session = SessionFile {
            schema_version: SESSION_SCHEMA_VERSION,
            session_id: "s".into(),
            tool_version: "0".into(),
            created_at: String::new(),
            updated_at: String::new(),
            server: "http://127.0.0.1:8188".into(),
            options: SessionOptions::default(),
            state: SessionState::Done,
            workflows: vec![WorkflowJob {
                name: "wf".into(),
                source: "wf.json".into(),
                source_file: None,
                target_sha256: String::new(),
                steps: vec![],
                controls: vec![],
                not_separable: vec![],
                kept: vec![],
                phase: Phase::Done,
                runs: vec![entry],
                verdict: None,
            }],
            in_flight: None,
            environment: None,
            fingerprints: Default::default(),
            drifts: vec![],
            server_moves: vec![],
            preflight_rechecks: vec![],
        };
        SessionData {
            session,
            runs: file
                .map(|f| HashMap::from([(f.entry.run_id.clone(), f)]))
                .unwrap_or_default(),
            session_dir: PathBuf::from("runs/s"),
            ui_workflows: HashMap::new(),
            source_formats: vec![],
            subgraph_names: vec![],
            load_warnings: vec![],
            server_logs: HashMap::new(),
            failed_workflows: HashMap::new(),
            mitigations: Default::default(),
        }
    }

    #[test]
    fn runner_session_and_report_build_the_same_diagnosis_with_cached_nodes_and_the_lost_node() {
        let workflow = Workflow::from_json_str(PROMPT, "wf.json").unwrap();
        let record = lost_run(&workflow);
        // The runner (`submit`).
        let mut by_runner = record.clone();
        by_runner.attach_diagnosis();
        let by_runner = by_runner
            .diagnosis
            .expect("the runner diagnoses a lost server");
        // The session (the journal).
        let by_session = diagnose_record(&record, &workflow).expect("the session diagnoses it");
        // The report, for a run journaled without a diagnosis (an older journal).
        let entry = RunEntry {
            run_id: "run-1".into(),
            step: 1,
            increment: "lora".into(),
            role: RunRole::Search,
            dir: "01-lora-run-1".into(),
            workflow_sha256: workflow.sha256(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(Outcome::ServerLost {
                detail: "gone".into(),
            }),
            summary: Some(summary_of(&record, None, None)),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: None,
        };
        let data = session_of_run(&entry, record.clone());
        let by_report = run_diagnosis(&data, &entry).expect("the report diagnoses it");
        for d in [&by_runner, &by_session, &by_report] {
            assert_eq!(d.cached_nodes, ["4"], "{d:?}");
            assert_eq!(
                (d.node_id.as_deref(), d.node_type.as_deref()),
                (Some("3"), Some("KSampler")),
                "{d:?}"
            );
            assert_eq!(d.kind.as_str(), "process_killed", "{d:?}");
            let progress = d.last_progress.as_ref().expect("the node's progress");
            assert_eq!((progress.value, progress.max), (7, 20));
        }
        assert_eq!(by_runner, by_session);
        assert_eq!(by_session, by_report);
        // Without its run.json the report still names the lost node, from the journal.
        let bare = session_with(entry.clone(), None);
        let d = run_diagnosis(&bare, &entry).expect("diagnosed from the journal");
        assert_eq!(d.node_id.as_deref(), Some("3"), "{d:?}");
        assert_eq!(d.kind.as_str(), "process_killed", "{d:?}");
    }

    #[test]
    fn a_memory_fallback_under_strict_is_reported_with_the_stage_of_its_vae_pass() {
        let workflow = Workflow::from_json_str(PROMPT, "wf.json").unwrap();
        let mut record = bare_record(
            "run-1",
            &workflow,
            "http://127.0.0.1:8188",
            false,
            crate::run::Outcome::Passed,
        );
        record.memory_events = vec![MemoryEvent::TiledFallback {
            t: None,
            stage: crate::comfy::VaeStage::Decode,
        }];
        record.memory_fallbacks = vec!["tiled VAE decode fallback".into()];
        let outcome = crate::session::evidence::outcome_with(&record, true);
        assert!(
            matches!(outcome, Outcome::MemoryFallback { .. }),
            "{outcome:?}"
        );
        let entry = RunEntry {
            run_id: "run-1".into(),
            step: 0,
            increment: "minimal".into(),
            role: RunRole::Minimal,
            dir: "00-minimal-run-1".into(),
            workflow_sha256: workflow.sha256(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(outcome),
            summary: Some(summary_of(&record, None, None)),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: None,
        };
        let data = session_of_run(&entry, record);
        let row = row_for(&data, 0, "minimal", vec![], Some(&entry));
        assert_eq!(row.outcome, "memory_fallback");
        assert_eq!(row.stage.map(|s| s.as_str()), Some("decode"), "{row:?}");
    }
}
