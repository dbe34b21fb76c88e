//! Reads a session folder into [`SessionData`]: `session.json` (the session module's journal
//! types), each run's `run.json`, the UI companions of the variant files, and the console and
//! submitted workflow of each run that did not pass. The only part of
//! the report that touches the file system; `super::build` is pure, so tests build reports
//! from journals made in memory.

use crate::session::journal::{Outcome, RunFile, SessionFile, SessionPaths, RUN_RECORD_FILE};
use anyhow::Context;
use indexmap::IndexMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A session folder as read from disk.
#[derive(Debug, Clone)]
pub struct SessionData {
    /// `session.json`.
    pub session: SessionFile,
    /// `run.json` of every run that has one, by run id.
    pub runs: HashMap<String, RunFile>,
    /// The session folder as given (paths in the report are shown relative to it as given).
    pub session_dir: PathBuf,
    /// UI-format companions found on disk (`workflow.ui.json` in a run folder, or the step's
    /// `NN-<increment>.ui.json`), by run id.
    pub ui_workflows: HashMap<String, PathBuf>,
    /// Input format of each workflow's source file (`api` or `ui`), when it could be read.
    pub source_formats: Vec<Option<String>>,
    /// The subgraph instances of each workflow's source file (a UI file) by execution id, with
    /// their names (`crate::workflow::ui::subgraph_names`); empty for an API file.
    pub subgraph_names: Vec<IndexMap<String, String>>,
    /// Problems met while reading (unreadable run records), for the report's warnings.
    pub load_warnings: Vec<String>,
    /// The console lines (`server.log`) of every run that did not pass, by run id.
    pub server_logs: HashMap<String, Vec<String>>,
    /// The submitted workflow (`workflow.json`) of every run that did not pass, by run id.
    pub failed_workflows: HashMap<String, crate::workflow::Workflow>,
    /// `mitigations.json` (empty when the session has none).
    pub mitigations: crate::session::journal::MitigationsFile,
}

/// Reads `session.json` and every `run.json` of the session folder.
pub fn load(session_dir: &Path) -> anyhow::Result<SessionData> {
    let runs_dir = session_dir.parent().unwrap_or_else(|| Path::new("."));
    let session_id = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let paths = SessionPaths::new(runs_dir, &session_id);
    let session = SessionFile::load(&paths).with_context(|| {
        format!(
            "cannot read the session journal {}: is {} a session folder (runs/<session-id>)?",
            paths.session_file().display(),
            session_dir.display()
        )
    })?;
    let mut runs = HashMap::new();
    let mut ui_workflows = HashMap::new();
    let mut load_warnings = Vec::new();
    let mut source_formats = Vec::new();
    let mut subgraph_names = Vec::new();
    let mut server_logs = HashMap::new();
    let mut failed_workflows = HashMap::new();
    for job in &session.workflows {
        let (format, names) = detect_format(Path::new(&job.source));
        source_formats.push(format);
        subgraph_names.push(names);
        for entry in &job.runs {
            let dir = session_dir.join(&entry.dir);
            if entry
                .outcome
                .as_ref()
                .is_some_and(|o| o != &Outcome::Passed)
            {
                let log = dir.join(crate::run::console::SERVER_LOG_FILE);
                if let Ok(text) = std::fs::read_to_string(&log) {
                    server_logs.insert(
                        entry.run_id.clone(),
                        text.lines().map(str::to_string).collect(),
                    );
                }
                let submitted = dir.join(crate::session::journal::RUN_WORKFLOW_FILE);
                if let Ok(workflow) = crate::workflow::load_api_file(&submitted) {
                    failed_workflows.insert(entry.run_id.clone(), workflow);
                }
            }
            let record = dir.join(RUN_RECORD_FILE);
            if record.exists() {
                match crate::session::journal::read_json::<RunFile>(&record) {
                    Ok(mut file) => {
                        // The run's console, which the diagnosis of a run without one reads.
                        let log = dir.join(crate::run::console::SERVER_LOG_FILE);
                        if let Ok(text) = std::fs::read_to_string(log) {
                            file.record.server_log = text;
                        }
                        runs.insert(entry.run_id.clone(), file);
                    }
                    Err(e) => load_warnings.push(unreadable_record(&job.name, entry, &e)),
                }
            }
            let mut candidates = vec![dir.join("workflow.ui.json")];
            if let Some(step) = job.steps.iter().find(|s| s.index == entry.step) {
                let file = session_dir.join(&step.file);
                if let Some(stem) = file.to_str().and_then(|f| f.strip_suffix(".json")) {
                    candidates.push(PathBuf::from(format!("{stem}.ui.json")));
                }
            }
            if let Some(ui) = candidates.into_iter().find(|p| p.is_file()) {
                ui_workflows.insert(entry.run_id.clone(), ui);
            }
        }
    }
    let mitigations = match crate::controls::load(session_dir) {
        Ok(m) => m,
        Err(e) => {
            load_warnings.push(format!(
                "the mitigations record cannot be read ({e}); the report leaves them out"
            ));
            Default::default()
        }
    };
    Ok(SessionData {
        session,
        runs,
        session_dir: session_dir.to_path_buf(),
        ui_workflows,
        source_formats,
        subgraph_names,
        load_warnings,
        server_logs,
        failed_workflows,
        mitigations,
    })
}

/// The report's warning about a run whose `run.json` cannot be read: which run, which file,
/// what is missing and how to get it back.
fn unreadable_record(
    workflow: &str,
    entry: &crate::session::journal::RunEntry,
    error: &crate::session::journal::JournalError,
) -> String {
    let (path, reason) = match error {
        crate::session::journal::JournalError::Invalid { path, reason } => {
            (path.display().to_string(), reason.clone())
        }
        other => (String::new(), other.to_string()),
    };
    let file = if path.is_empty() {
        RUN_RECORD_FILE.to_string()
    } else {
        path
    };
    format!(
        "corrupt run record: {file} of run {} ({workflow}, step {} `{}`) cannot be read \
         ({reason}); the run's evidence (error, timeline, memory) is left out of this report, \
         its outcome comes from session.json. Restore the file from a backup to see it",
        entry.run_id, entry.step, entry.increment
    )
}

/// `ui` for a UI-format workflow file (version 0.4 or 1), `api` for a prompt, with the names
/// of a UI file's subgraph instances (of the workflow inside, for a file ComfyUI saved).
fn detect_format(path: &Path) -> (Option<String>, IndexMap<String, String>) {
    let Ok(crate::workflow::Document { value, .. }) = crate::workflow::read_document(path) else {
        return (None, IndexMap::new());
    };
    if crate::workflow::is_ui_document(&value) {
        let names = crate::workflow::ui::subgraph_names(&value);
        (Some("ui".into()), names)
    } else {
        (Some("api".into()), IndexMap::new())
    }
}
