//! Mitigations after the verdict (`bisect --mitigate`, `mitigate SESSION`): for each workflow
//! whose failure was located, the catalogue's controls for the failing stage (the matrix's
//! "first" ones first, [`crate::mitigate::plan`]) each run once on the target, cold, as a normal
//! run (run id, `run.json`, console, product, memory, the index line). What was considered, run
//! and judged is journaled in `mitigations.json` before and after every run, so a kill loses at
//! most the run in flight, which the next `mitigate` settles from the server's history.
//!
//! A run passes when its product is complete, it went through no memory fallback and the first
//! image of each image output is neither one flat colour nor NaN-black
//! (`crate::run::degenerate`). A failing control records the stage and node it fails at now
//! and whether that moved. Server controls relaunch the server through `--launch-cmd`
//! (`crate::server::relaunch`); without one they are listed as not run.

use crate::catalog::Catalog;
use crate::mitigate::{plan, Fit, Kind, ServerFacts};
use crate::nodedefs::NodeDefs;
use crate::run::RunRecord;
use crate::server::relaunch::{Launch, Relaunch};
use crate::session::driver::{Attempt, Backend, Clock, Driver, DriverParts, Recovery, RunSpec};
use crate::session::index::{self, IndexEntry};
use crate::session::journal::{
    now_rfc3339, read_json, run_dir_name, JournalError, Judged, Mitigation, MitigationState,
    MitigationsFile, Outcome, RunEntry, RunFile, RunRole, RunStatus, Verdict, WorkflowMitigations,
    MITIGATIONS_DIR, MITIGATIONS_FILE, RUN_EVENTS_FILE, RUN_RECORD_FILE, RUN_WORKFLOW_FILE,
};
use crate::vocab::Stage;
use crate::workflow::Workflow;
use std::path::PathBuf;

/// What a mitigation pass needs besides the session.
#[derive(Debug, Clone)]
pub(crate) struct MitigateOptions {
    /// `--max-mitigations N`: at most N controls run per workflow (None: all that apply).
    pub max: Option<usize>,
    /// `--launch-cmd 'TEMPLATE {args}'`: how the server is relaunched for server controls.
    pub launch_cmd: Option<String>,
    /// The server's node definitions (which classes and options it offers).
    pub defs: NodeDefs,
    /// The node catalog (roles of the classes).
    pub catalog: Catalog,
}

/// How a mitigation pass ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MitigateEnd {
    /// Every control was run or has its reason for not running.
    Done,
    /// Stopped early (Ctrl-C, deadline, server lost); in words, with how to continue.
    Stopped(String),
}

/// The `mitigations.json` of the session.
fn file_path<B: Backend, C: Clock>(driver: &Driver<'_, B, C>) -> PathBuf {
    driver.paths.dir.join(MITIGATIONS_FILE)
}

/// Reads a session's `mitigations.json` (an empty record when there is none).
pub(crate) fn load(session_dir: &std::path::Path) -> Result<MitigationsFile, JournalError> {
    let path = session_dir.join(MITIGATIONS_FILE);
    if !path.is_file() {
        return Ok(MitigationsFile::default());
    }
    read_json(&path)
}

/// The failing stage, node and run of a workflow's verdict (None: nothing failed to mitigate).
fn failure(job: &crate::session::journal::WorkflowJob) -> Option<(Stage, Option<String>, String)> {
    let (stage, run_id) = match job.verdict.as_ref()? {
        Verdict::FirstFailure { stage, run_id, .. } | Verdict::MinimalFails { stage, run_id } => {
            (*stage, run_id.clone())
        }
        _ => return None,
    };
    let run = job.runs.iter().find(|r| r.run_id == run_id);
    let stage = stage
        .filter(|s| *s != Stage::Unknown)
        .or_else(|| run.and_then(|r| r.summary.as_ref()?.stage))
        .filter(|s| *s != Stage::Unknown)
        .or_else(|| run.and_then(|r| fallback_stage(r.outcome.as_ref()?)))
        .unwrap_or(Stage::Unknown);
    let node = run.and_then(|r| failing_node(r.outcome.as_ref()?));
    Some((stage, node, run_id))
}

/// The stage a memory fallback happened in (`--strict`): ComfyUI's tiled VAE decode retry is
/// the decode's (`comfy/sd.py`).
fn fallback_stage(outcome: &Outcome) -> Option<Stage> {
    match outcome {
        Outcome::MemoryFallback { fallbacks } if fallbacks.iter().any(|f| f.contains("decode")) => {
            Some(Stage::Decode)
        }
        _ => None,
    }
}

/// `VAEDecode #8` for a run that failed in a node.
fn failing_node(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Failed {
            node_type, node_id, ..
        }
        | Outcome::IncompleteOutput {
            node_type, node_id, ..
        } => Some(format!("{node_type} #{node_id}")),
        _ => None,
    }
}

/// What the server says about itself, from the session's last fingerprint (or preflight).
fn server_facts<B: Backend, C: Clock>(driver: &Driver<'_, B, C>) -> ServerFacts {
    let session = &driver.session;
    let fp = session
        .last_run_fingerprint()
        .and_then(|id| session.fingerprints.get(id));
    let argv = fp
        .map(|f| f.argv.clone())
        .or_else(|| session.environment.as_ref().map(|e| e.system.argv.clone()))
        .unwrap_or_default();
    let dynamic_vram = fp
        .and_then(|f| f.memory_mode.as_ref())
        .cloned()
        .or_else(|| {
            session
                .environment
                .as_ref()
                .map(crate::comfy::fingerprint::memory_mode)
        })
        .is_some_and(|m| m.dynamic_vram.starts_with("on"));
    ServerFacts { dynamic_vram, argv }
}

/// Plans the controls of workflow `w` and writes each graph control's edited target (and its
/// UI form when the input was a UI workflow and the edits have one).
fn plan_workflow<B: Backend, C: Clock>(
    driver: &Driver<'_, B, C>,
    w: usize,
    options: &MitigateOptions,
) -> Result<Option<WorkflowMitigations>, JournalError> {
    let job = &driver.session.workflows[w];
    let Some((stage, failing_node, baseline_run)) = failure(job) else {
        return Ok(None);
    };
    let Some(target_step) = job.steps.last() else {
        return Ok(None);
    };
    let target_path = driver.paths.dir.join(&target_step.file);
    let target =
        crate::workflow::load_api_file(&target_path).map_err(|e| JournalError::Invalid {
            path: target_path.clone(),
            reason: e.to_string(),
        })?;
    let ui_path = driver
        .paths
        .dir
        .join(crate::session::setup::ui_companion(&target_step.file));
    let ui: Option<serde_json::Value> = std::fs::read(&ui_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let facts = server_facts(driver);
    let planned = plan(
        &crate::mitigate::catalogue(),
        &target,
        &options.defs,
        &options.catalog,
        stage.as_str(),
        &facts,
    );
    let folder = target_step
        .file
        .rsplit_once('/')
        .map(|(f, _)| f.to_string())
        .unwrap_or_default();
    let mut controls = Vec::new();
    for p in planned {
        let c = &p.control;
        let mut m = Mitigation {
            control: c.id.clone(),
            kind: c.kind,
            change: c.change.clone(),
            predicts: c.predicts.clone(),
            place: p.place,
            stages: c.place.keys().map(|k| Stage::from_name(k)).collect(),
            changes: Vec::new(),
            args: c.args.clone(),
            env: c.env.clone(),
            file: None,
            ui_file: None,
            sha256: None,
            state: MitigationState::Pending,
            run: None,
            judged: None,
        };
        match p.fit {
            Fit::NotApplicable(reason) => m.state = MitigationState::NotApplicable { reason },
            Fit::Server => {}
            Fit::Graph {
                edits,
                changes,
                workflow,
            } => {
                let file = format!("{folder}/mitigation-{}.json", c.id);
                crate::session::journal::write_atomic(
                    &driver.paths.dir.join(&file),
                    format!("{}\n", workflow.to_pretty_json()).as_bytes(),
                )?;
                if let Some(ui) = &ui {
                    let written = crate::workflow::ui::convert(ui, &options.defs)
                        .ok()
                        .and_then(|conv| {
                            crate::workflow::ui::write_variant(ui, &conv, &edits, &options.defs)
                                .ok()
                        });
                    if let Some(v) = written {
                        let ui_file = crate::session::setup::ui_companion(&file);
                        crate::session::journal::write_json_atomic(
                            &driver.paths.dir.join(&ui_file),
                            &v,
                        )?;
                        m.ui_file = Some(ui_file);
                    }
                }
                m.changes = changes;
                m.sha256 = Some(workflow.sha256());
                m.file = Some(file);
            }
        }
        controls.push(m);
    }
    Ok(Some(WorkflowMitigations {
        workflow: job.name.clone(),
        stage,
        failing_node,
        baseline_run: Some(baseline_run),
        controls,
    }))
}

/// Runs the mitigations of every workflow of the driver's session whose failure was located
/// (see the module comment). The record is saved after every change.
pub(crate) fn mitigate<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    options: &MitigateOptions,
) -> Result<MitigateEnd, JournalError> {
    let mut file = load(&driver.paths.dir)?;
    let resume = format!("comfy-bisect mitigate {}", driver.session.session_id);
    // A pass killed while the server ran with a control's change: put it back first.
    if !put_back(driver, &mut file)? {
        save(driver, &file)?;
        return Ok(MitigateEnd::Stopped(format!(
            "the server could not be put back as it was (see above); put it back, then `{resume}`"
        )));
    }
    let env_keys: Vec<String> = crate::mitigate::catalogue()
        .into_iter()
        .flat_map(|c| c.env.into_keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut launch = options.launch_cmd.as_ref().map(|t| {
        Relaunch::new(
            t.clone(),
            driver.paths.dir.join(MITIGATIONS_DIR),
            env_keys.clone(),
        )
    });
    let end = run_all(driver, options, &mut file, &resume, launch.as_mut());
    // A server relaunched for a control goes back as it was, however the pass ended.
    if let Some(l) = launch.as_mut() {
        if let Some(note) = l.restore(driver) {
            driver.parts().hooks.note(&note);
            file.server.push(note);
        }
    }
    save(driver, &file)?;
    end
}

/// Puts back a server an earlier pass left running with a control's change (its launch
/// record says `changed`), before anything else; the note goes to the user and to
/// `mitigations.json`. False when it could not be put back.
fn put_back<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    file: &mut MitigationsFile,
) -> Result<bool, JournalError> {
    let Some(record) = crate::server::relaunch::left_changed(&driver.paths.dir) else {
        return Ok(true);
    };
    driver.parts().hooks.note(
        "an earlier mitigation pass stopped while the server ran with a control's change: putting it back first",
    );
    let mut relaunch = Relaunch::from_record(record, driver.paths.dir.join(MITIGATIONS_DIR));
    let note = relaunch.restore(driver).unwrap_or_default();
    let back = crate::server::relaunch::left_changed(&driver.paths.dir).is_none();
    let note = format!("left changed by an earlier pass that was stopped: {note}");
    driver.parts().hooks.note(&note);
    file.server.push(note);
    save(driver, file)?;
    Ok(back)
}

/// The end of a pass whose server could not be put back (no control is judged on it).
fn not_back<B: Backend, C: Clock>(driver: &Driver<'_, B, C>, resume: &str) -> Option<MitigateEnd> {
    crate::server::relaunch::left_changed(&driver.paths.dir).map(|_| {
        MitigateEnd::Stopped(format!(
            "the server could not be put back as it was (mitigations.json says how to do it by hand); once it runs as before, `{resume}` goes on"
        ))
    })
}

/// `resume` (and any command that drives a session): puts back a server a killed mitigation
/// pass left changed, and records it in `mitigations.json`. False when it could not be.
pub(crate) fn put_back_left_changed<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
) -> Result<bool, JournalError> {
    if crate::server::relaunch::left_changed(&driver.paths.dir).is_none() {
        return Ok(true);
    }
    let mut file = load(&driver.paths.dir)?;
    put_back(driver, &mut file)
}

fn run_all<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    options: &MitigateOptions,
    file: &mut MitigationsFile,
    resume: &str,
    mut launch: Option<&mut Relaunch>,
) -> Result<MitigateEnd, JournalError> {
    for w in 0..driver.session.workflows.len() {
        let name = driver.session.workflows[w].name.clone();
        let k = match file.workflows.iter().position(|m| m.workflow == name) {
            Some(k) => k,
            None => match plan_workflow(driver, w, options)? {
                Some(m) => {
                    file.workflows.push(m);
                    save(driver, file)?;
                    file.workflows.len() - 1
                }
                None => continue,
            },
        };
        for i in 0..file.workflows[k].controls.len() {
            if driver.stopping() {
                return Ok(MitigateEnd::Stopped(format!(
                    "interrupted; `{resume}` runs the rest"
                )));
            }
            if driver
                .deadline()
                .is_some_and(|d| driver.parts().clock.now() >= d)
            {
                return Ok(MitigateEnd::Stopped(format!(
                    "deadline reached; `{resume}` (with a later --deadline on resume) runs the rest"
                )));
            }
            let m = &file.workflows[k].controls[i];
            let runnable = match &m.state {
                MitigationState::Pending | MitigationState::NotRun { .. } => true,
                MitigationState::InFlight => {
                    if !settle(driver, file, w, k, i)? {
                        return Ok(MitigateEnd::Stopped(format!(
                            "the server could not be asked about the run in flight; `{resume}` tries again"
                        )));
                    }
                    // A run the server does not know (it was restarted since) runs again now.
                    file.workflows[k].controls[i].state == MitigationState::Pending
                }
                _ => false,
            };
            if !runnable {
                continue;
            }
            let ran = file.workflows[k]
                .controls
                .iter()
                .filter(|c| c.state == MitigationState::Done)
                .count();
            if options.max.is_some_and(|n| ran >= n) {
                file.workflows[k].controls[i].state = MitigationState::NotRun {
                    reason: format!(
                        "--max-mitigations {} reached",
                        options.max.unwrap_or_default()
                    ),
                };
                save(driver, file)?;
                continue;
            }
            let kind = file.workflows[k].controls[i].kind;
            let launched = if kind == Kind::Server {
                let Some(l) = launch.as_deref_mut() else {
                    file.workflows[k].controls[i].state = MitigationState::NotRun {
                        reason: "needs --launch-cmd (a server launch change)".into(),
                    };
                    save(driver, file)?;
                    continue;
                };
                let m = &file.workflows[k].controls[i];
                match l.launch(driver, &Launch::of(m)) {
                    Ok(()) => true,
                    Err(reason) => {
                        let reason = if reason.starts_with("could not relaunch") {
                            reason
                        } else {
                            format!("could not relaunch: {reason}")
                        };
                        file.workflows[k].controls[i].state = MitigationState::NotRun { reason };
                        save(driver, file)?;
                        if let Some(note) = l.restore(driver) {
                            driver.parts().hooks.note(&note);
                            file.server.push(note);
                        }
                        if let Some(end) = not_back(driver, resume) {
                            save(driver, file)?;
                            return Ok(end);
                        }
                        continue;
                    }
                }
            } else {
                false
            };
            let went_on = run_one(driver, file, w, k, i)?;
            if launched {
                if let Some(note) = launch.as_deref_mut().and_then(|l| l.restore(driver)) {
                    driver.parts().hooks.note(&note);
                    file.server.push(note);
                }
                if let Some(end) = not_back(driver, resume) {
                    save(driver, file)?;
                    return Ok(end);
                }
            }
            if !went_on && driver.stopping() {
                return Ok(MitigateEnd::Stopped(format!(
                    "interrupted during mitigation {}; `{resume}` runs it again",
                    file.workflows[k].controls[i].control
                )));
            }
            if !went_on {
                return Ok(MitigateEnd::Stopped(format!(
                    "stopped during mitigation {}; `{resume}` runs it again",
                    file.workflows[k].controls[i].control
                )));
            }
        }
    }
    Ok(MitigateEnd::Done)
}

/// Saves `mitigations.json` (durably) and `session.json` (fingerprints), which rewrites the
/// report through the hooks.
fn save<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    file: &MitigationsFile,
) -> Result<(), JournalError> {
    let path = file_path(driver);
    {
        let durable = driver.parts().journal;
        durable.write_json_atomic(&path, file)?;
    }
    driver.saved()
}

/// The edited target of a graph control, or the target itself for a server control.
fn workflow_of<B: Backend, C: Clock>(
    driver: &Driver<'_, B, C>,
    w: usize,
    m: &Mitigation,
) -> Result<Workflow, JournalError> {
    let job = &driver.session.workflows[w];
    let file = match &m.file {
        Some(f) => f.clone(),
        None => job.steps.last().map(|s| s.file.clone()).unwrap_or_default(),
    };
    let path = driver.paths.dir.join(file);
    crate::workflow::load_api_file(&path).map_err(|e| JournalError::Invalid {
        path: path.clone(),
        reason: e.to_string(),
    })
}

/// Submits control `i` of workflow `w` and journals it; false when the pass has to stop.
fn run_one<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    file: &mut MitigationsFile,
    w: usize,
    k: usize,
    i: usize,
) -> Result<bool, JournalError> {
    let m = file.workflows[k].controls[i].clone();
    let workflow = workflow_of(driver, w, &m)?;
    let job = &driver.session.workflows[w];
    let step = job.steps.len().saturating_sub(1);
    let name = job.name.clone();
    let run_id = uuid::Uuid::new_v4().to_string();
    let dir = format!(
        "{MITIGATIONS_DIR}/{}",
        run_dir_name(step, &format!("{name}-{}", m.control), &run_id)
    );
    let run_dir = driver.paths.dir.join(&dir);
    std::fs::create_dir_all(&run_dir).map_err(|source| JournalError::Io {
        action: "cannot create run folder",
        path: run_dir.clone(),
        source,
    })?;
    let fingerprint = {
        let backend = driver.parts().backend;
        backend.environment()
    }
    .map(|fp| {
        let id = fp.id.clone();
        driver.session.fingerprints.entry(id.clone()).or_insert(fp);
        id
    });
    {
        let durable = driver.parts().journal;
        durable.write_atomic(
            &run_dir.join(RUN_WORKFLOW_FILE),
            format!("{}\n", workflow.to_pretty_json()).as_bytes(),
        )?;
    }
    if let Some(ui) = &m.ui_file {
        if let Ok(bytes) = std::fs::read(driver.paths.dir.join(ui)) {
            let durable = driver.parts().journal;
            durable.write_atomic(&run_dir.join("workflow.ui.json"), &bytes)?;
        }
    }
    let entry = RunEntry {
        run_id: run_id.clone(),
        step,
        increment: m.control.clone(),
        role: RunRole::Mitigation,
        dir,
        workflow_sha256: workflow.sha256(),
        status: RunStatus::InFlight,
        started_at: now_rfc3339(),
        finished_at: None,
        outcome: None,
        summary: None,
        diagnosis: None,
        confirms: None,
        fingerprint,
        reduced: None,
    };
    {
        let c = &mut file.workflows[k].controls[i];
        c.run = Some(entry.clone());
        c.state = MitigationState::InFlight;
        c.judged = None;
    }
    save(driver, file)?;
    let (limit, _) = driver.run_limit();
    let stop_at = driver.run_stop_at();
    let events_file = run_dir.join(RUN_EVENTS_FILE);
    let spec = RunSpec {
        run_id: &run_id,
        workflow: &workflow,
        // A control is compared with the failing run, which ran cold too.
        cold: true,
        timeout: Some(limit),
        stall: Some(driver.stall_limit().0),
        stop_at,
        events_file: &events_file,
        label: format!("{name} · mitigation {}", m.control),
    };
    let attempt = {
        let session = driver.session.clone();
        let DriverParts {
            backend,
            hooks,
            journal: durable,
            ..
        } = driver.parts();
        durable.wait()?;
        hooks.run_started(&session, w, &entry);
        backend.run(&spec)
    };
    match attempt {
        Attempt::NotSubmitted(reason) => {
            driver
                .parts()
                .hooks
                .note(&format!("not submitted: {reason}"));
            let c = &mut file.workflows[k].controls[i];
            c.run = None;
            c.state = MitigationState::Pending;
            let _ = std::fs::remove_dir_all(&run_dir);
            save(driver, file)?;
            Ok(driver.wait_for_server(true))
        }
        Attempt::Done(record) => {
            let outcome = finish(driver, file, w, k, i, *record, &workflow)?;
            Ok(!matches!(outcome, Outcome::Interrupted) && !driver.stopping())
        }
    }
}

/// Settles control `i`'s run that was in flight when the tool died: its `run.json` when it was
/// written, else the server's history; a run the server does not know goes back to pending.
/// False when the server could not be asked.
fn settle<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    file: &mut MitigationsFile,
    w: usize,
    k: usize,
    i: usize,
) -> Result<bool, JournalError> {
    let m = file.workflows[k].controls[i].clone();
    let Some(entry) = m.run.clone() else {
        file.workflows[k].controls[i].state = MitigationState::Pending;
        save(driver, file)?;
        return Ok(true);
    };
    let run_dir = driver.paths.dir.join(&entry.dir);
    if let Ok(done) = read_json::<RunFile>(&run_dir.join(RUN_RECORD_FILE)) {
        if done.entry.status == RunStatus::Done {
            // Killed after run.json and before the judgement was saved: judge it now.
            let (degenerate, unchecked) = if done.entry.outcome == Some(Outcome::Passed) {
                check_product(driver.parts().backend, &done.record)
            } else {
                (Vec::new(), Vec::new())
            };
            let judged = judge(&done.entry, &file.workflows[k], degenerate, unchecked);
            let c = &mut file.workflows[k].controls[i];
            c.run = Some(done.entry);
            c.judged = Some(judged);
            c.state = MitigationState::Done;
            save(driver, file)?;
            return Ok(true);
        }
    }
    let workflow = workflow_of(driver, w, &m)?;
    let recovered = {
        let backend = driver.parts().backend;
        backend.recover(&entry.run_id, &workflow, &run_dir.join(RUN_EVENTS_FILE))
    };
    match recovered {
        // A pass recovered from history lost its console (a fallback or memory pressure shows
        // there, issue #39): the control is run again, cold, never judged a clean pass.
        Recovery::Finished(record) if !crate::session::evidence::pass_without_evidence(&record) => {
            finish(driver, file, w, k, i, *record, &workflow)?;
            Ok(true)
        }
        Recovery::Finished(_) | Recovery::Unknown => {
            let c = &mut file.workflows[k].controls[i];
            c.run = None;
            c.state = MitigationState::Pending;
            save(driver, file)?;
            Ok(true)
        }
        Recovery::Unreachable(_) => Ok(false),
    }
}

/// Journals a finished control run (`run.json`, `server.log`, the index line) and judges it.
fn finish<B: Backend, C: Clock>(
    driver: &mut Driver<'_, B, C>,
    file: &mut MitigationsFile,
    w: usize,
    k: usize,
    i: usize,
    record: RunRecord,
    workflow: &Workflow,
) -> Result<Outcome, JournalError> {
    let Some(mut entry) = file.workflows[k].controls[i].run.clone() else {
        return Err(JournalError::Invalid {
            path: file_path(driver),
            reason: format!(
                "mitigation {} has no run to finish",
                file.workflows[k].controls[i].control
            ),
        });
    };
    // Judged as under --strict: a pass through a memory fallback or under memory pressure
    // (against the last passing ladder step below the target) is not a way around.
    let judged_run = driver.judge_run(w, entry.step, record, workflow, true);
    let outcome = judged_run.outcome.clone();
    let (record, pressure) = judged_run.mark(&mut entry);
    let (degenerate, unchecked) = if outcome == Outcome::Passed {
        let backend = driver.parts().backend;
        check_product(backend, &record)
    } else {
        (Vec::new(), Vec::new())
    };
    let judged = judge(&entry, &file.workflows[k], degenerate, unchecked);
    let components = driver.write_run_files(w, &entry, workflow, record, pressure)?;
    let line = IndexEntry::of(
        &driver.session.session_id,
        &driver.session.workflows[w].name,
        &entry,
        components,
        None,
    );
    let runs_dir = driver.paths.runs_dir.clone();
    index::append_behind(&runs_dir, &line, driver.parts().journal)?;
    {
        let c = &mut file.workflows[k].controls[i];
        c.run = Some(entry.clone());
        if outcome == Outcome::Interrupted {
            // Says nothing about the control: run again by the next `mitigate`.
            c.state = MitigationState::Pending;
            c.judged = None;
        } else {
            c.state = MitigationState::Done;
            c.judged = Some(judged.clone());
        }
    }
    save(driver, file)?;
    let session = driver.session.clone();
    let hooks = driver.parts().hooks;
    hooks.run_finished(&session, w, &entry);
    let control = &file.workflows[k].controls[i].control;
    hooks.note(&format!(
        "mitigation {control}: {}{}",
        judged.outcome,
        match (judged.passed, &judged.stage_now, judged.moved) {
            (true, _, _) => String::new(),
            (false, Some(s), Some(true)) => format!(" (boundary moved: now at {s})"),
            (false, Some(s), _) => format!(" (still at {s})"),
            _ => String::new(),
        }
    ));
    Ok(outcome)
}

/// How a finished control run is judged against the failure it targets.
pub(crate) fn judge(
    entry: &RunEntry,
    before: &WorkflowMitigations,
    degenerate: Vec<String>,
    unchecked: Vec<String>,
) -> Judged {
    let outcome = entry.outcome.clone().unwrap_or(Outcome::Interrupted);
    let passed = outcome == Outcome::Passed && degenerate.is_empty();
    let words = match &outcome {
        Outcome::Passed if passed => "passed: complete product".to_string(),
        Outcome::Passed => format!("failed: degenerate product ({})", degenerate.join("; ")),
        Outcome::Failed {
            node_type,
            node_id,
            exception_type,
            ..
        } => format!("failed: {node_type} (node {node_id}) raised {exception_type}"),
        Outcome::MemoryFallback { fallbacks } => {
            format!("failed: passed only through {}", fallbacks.join(", "))
        }
        Outcome::Hang {
            node_type, step, ..
        } => format!(
            "failed: hung{}{}",
            node_type
                .as_deref()
                .map(|t| format!(" in {t}"))
                .unwrap_or_default(),
            step.map(|k| format!(" at step {k}")).unwrap_or_default()
        ),
        Outcome::MemoryPressure { evidence } => {
            format!(
                "failed: passed only under memory pressure ({})",
                evidence.join("; ")
            )
        }
        Outcome::IncompleteOutput { message, .. } => {
            format!("failed: incomplete product: {message}")
        }
        Outcome::Rejected { message } => format!("not run: the server rejected it: {message}"),
        Outcome::Interrupted => "interrupted".into(),
        Outcome::Timeout { detail } => format!("failed: timeout ({detail})"),
        Outcome::ServerLost { detail } => format!("failed: server lost ({detail})"),
    };
    let stage_now = (!passed)
        .then(|| {
            entry
                .summary
                .as_ref()
                .and_then(|s| s.stage)
                .filter(|s| *s != Stage::Unknown)
                .or_else(|| fallback_stage(&outcome))
        })
        .flatten();
    let failing_node_now = failing_node(&outcome);
    let moved = match (&outcome, &stage_now) {
        (_, _) if passed => None,
        (Outcome::Passed | Outcome::Rejected { .. } | Outcome::Interrupted, _) => None,
        // Still through the fallback of the stage it targets: the boundary held.
        (Outcome::MemoryFallback { .. }, Some(now)) => Some(*now != before.stage),
        (_, Some(now)) => Some(
            *now != before.stage
                || node_id(failing_node_now.as_deref()) != node_id(before.failing_node.as_deref()),
        ),
        (_, None) => None,
    };
    Judged {
        passed,
        outcome: words,
        stage_now,
        failing_node: failing_node_now,
        moved,
        degenerate,
        unchecked,
    }
}

/// `8` of `VAEDecode #8` (a control may give the node another class, not another id).
fn node_id(node: Option<&str>) -> Option<&str> {
    node.and_then(|n| n.rsplit_once(" #").map(|(_, id)| id))
}

/// The first image of each image output of a passing run, fetched and judged: the degenerate
/// ones (flat, NaN-black) and the ones that could not be checked, each in words.
fn check_product<B: Backend>(backend: &mut B, record: &RunRecord) -> (Vec<String>, Vec<String>) {
    let mut degenerate = Vec::new();
    let mut unchecked = Vec::new();
    let Some(product) = &record.product else {
        return (degenerate, unchecked);
    };
    let mut seen = std::collections::BTreeSet::new();
    for f in &product.files {
        if f.key != "images" || !seen.insert(f.node_id.clone()) {
            continue;
        }
        let name = format!("{} #{} {}", f.class_type, f.node_id, f.filename);
        match backend.output_file(f, crate::run::degenerate::READ_CAP) {
            Err(e) => unchecked.push(format!("{name}: {e}")),
            Ok(bytes) => match crate::run::degenerate::judge_png(&bytes) {
                Ok(None) => {}
                Ok(Some(why)) => degenerate.push(format!("{name}: {why}")),
                Err(e) => unchecked.push(format!("{name}: {e}")),
            },
        }
    }
    (degenerate, unchecked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::RunSummary;

    fn before() -> WorkflowMitigations {
        WorkflowMitigations {
            workflow: "t".into(),
            stage: "decode".into(),
            failing_node: Some("VAEDecode #8".into()),
            baseline_run: None,
            controls: Vec::new(),
        }
    }

    fn entry(outcome: Outcome, stage: Option<&str>) -> RunEntry {
        RunEntry {
            run_id: "r".into(),
            step: 3,
            increment: "tiled-decode".into(),
            role: RunRole::Mitigation,
            dir: "mitigations/x".into(),
            workflow_sha256: String::new(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(outcome),
            summary: Some(RunSummary {
                stage: stage.map(Stage::from),
                ..RunSummary::default()
            }),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: None,
        }
    }

    fn oom(node_type: &str, node_id: &str) -> Outcome {
        Outcome::Failed {
            node_id: node_id.into(),
            node_type: node_type.into(),
            exception_type: "torch.OutOfMemoryError".into(),
            exception_message: "CUDA out of memory".into(),
        }
    }

    fn judged(e: &RunEntry, degenerate: Vec<String>) -> Judged {
        judge(e, &before(), degenerate, Vec::new())
    }

    #[test]
    fn a_pass_with_a_degenerate_image_is_a_failure_and_a_clean_one_passes() {
        let pass = judged(&entry(Outcome::Passed, None), Vec::new());
        assert!(pass.passed);
        assert_eq!(pass.outcome, "passed: complete product");
        assert_eq!(pass.moved, None);
        let flat = judged(
            &entry(Outcome::Passed, None),
            vec!["SaveImage #9 x.png: one flat colour #808080 (8×8)".into()],
        );
        assert!(!flat.passed);
        assert!(flat.outcome.starts_with("failed: degenerate product"));
    }

    #[test]
    fn a_failure_says_whether_the_boundary_moved() {
        // Same node id under another class (VAEDecode → VAEDecodeTiled), same stage: not moved.
        let same = judged(
            &entry(oom("VAEDecodeTiled", "8"), Some("decode")),
            Vec::new(),
        );
        assert_eq!(same.moved, Some(false));
        assert_eq!(same.failing_node.as_deref(), Some("VAEDecodeTiled #8"));
        // The decode gave way; the upscaler after it runs out now.
        let later = judged(
            &entry(oom("ImageUpscaleWithModel", "12"), Some("postprocess")),
            Vec::new(),
        );
        assert_eq!(later.moved, Some(true));
        assert_eq!(later.stage_now, Some(Stage::Postprocess));
        // A fallback is pressure, not a pass.
        let fallback = judged(
            &entry(
                Outcome::MemoryFallback {
                    fallbacks: vec!["tiled VAE decode fallback".into()],
                },
                None,
            ),
            Vec::new(),
        );
        assert!(!fallback.passed);
        assert_eq!(fallback.stage_now, Some(Stage::Decode));
        assert_eq!(fallback.moved, Some(false));
    }

    #[test]
    fn a_decode_fallback_under_strict_is_a_decode_failure() {
        let fallback = Outcome::MemoryFallback {
            fallbacks: vec!["tiled VAE decode fallback".into()],
        };
        assert_eq!(fallback_stage(&fallback), Some(Stage::Decode));
        assert_eq!(fallback_stage(&oom("KSampler", "3")), None);
        assert_eq!(node_id(Some("VAEDecode #8")), Some("8"));
        assert_eq!(node_id(None), None);
    }
}
