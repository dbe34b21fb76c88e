//! `check WORKFLOW`: one run of a workflow as given (no ladder) on a freshly (re)started server,
//! answered the way `git bisect run` reads an exit status — good, bad, or cannot test (skip).
//! It takes the server's lock like a bisect, runs `--restart-cmd`, waits for the server
//! (`--wait-server`), preflights the workflow, journals the run as a one-run session (run
//! folder, `run.json`, the index line with the server's version and the checkout's commit) and
//! writes `check.json` beside `session.json`. A crash (server lost, timeout, hang) is run once
//! more before it answers: bad only when confirmed, else cannot test.

use crate::comfy::Client;
use crate::nodedefs::NodeDefs;
use crate::server::lock::SessionLock;
use crate::server::restart::{run_restart, wait_for_server, RESTART_LOG};
use crate::session::driver::{Driver, RunResult, SystemClock};
use crate::session::index::CheckMark;
use crate::session::journal::{
    now_rfc3339, write_json_atomic, JournalError, Outcome, Phase, SessionOptions, SessionPaths,
    SessionState, StopReason,
};
use crate::session::live::LiveBackend;
use crate::session::prepare::Problems;
use crate::session::progress::Progress;
use crate::session::setup::{create_session, unique_name, PreparedStep, PreparedWorkflow};
use crate::workflow::{load_api_file, LoadError, Workflow};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::watch;

/// File name of a check's record inside its session folder.
pub const CHECK_FILE: &str = "check.json";

/// Increment name of a check's one step (the workflow as given).
pub(crate) const CHECK_STEP: &str = "target";

/// What `check` needs besides the server.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Where the run is journaled.
    pub runs_dir: PathBuf,
    /// The workflow file (API, POST /prompt body, or UI: converted with the server's nodes).
    pub workflow: PathBuf,
    /// Shell command run first to (re)start the server.
    pub restart_cmd: Option<String>,
    /// Longest run of `restart_cmd`.
    pub restart_timeout: Duration,
    /// How long to wait for the server to answer.
    pub wait_server: Duration,
    /// The git checkout whose commit is recorded (`None`: the current folder, when it is one).
    pub checkout: Option<PathBuf>,
    /// A pass only through a memory fallback counts as bad.
    pub strict: bool,
    /// Longest run (`None`: the runner's default).
    pub timeout: Option<Duration>,
    /// Free models and memory first.
    pub cold: bool,
    /// `--models-dir` roots for component hashes.
    pub models_dirs: Vec<PathBuf>,
    /// Where progress is shown (the front end's display; `Progress::silent` for none).
    pub progress: Progress,
}

/// The answer of a check, as `git bisect run` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// A complete product: exit 0.
    Good,
    /// Failed (OOM, memory fallback under `--strict`, incomplete product, a crash or timeout
    /// confirmed by a second run): 1.
    Bad,
    /// Cannot test (server not up, node class or model missing, prompt rejected, a crash a
    /// second run did not confirm): 125.
    Skip,
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP: 130 (`git bisect run` aborts).
    Interrupted,
}

impl CheckStatus {
    /// The exit status `git bisect run` expects.
    pub fn exit_code(self) -> u8 {
        match self {
            CheckStatus::Good => 0,
            CheckStatus::Bad => 1,
            CheckStatus::Skip => 125,
            CheckStatus::Interrupted => 130,
        }
    }

    /// `good`, `bad`, `skip`, `interrupted`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Good => "good",
            CheckStatus::Bad => "bad",
            CheckStatus::Skip => "skip",
            CheckStatus::Interrupted => "interrupted",
        }
    }

    /// The status of a journaled run's outcome (`by_us`: we interrupted it).
    pub(crate) fn of(outcome: &Outcome, by_us: bool) -> CheckStatus {
        match outcome {
            Outcome::Passed => CheckStatus::Good,
            Outcome::Interrupted if by_us => CheckStatus::Interrupted,
            Outcome::Interrupted | Outcome::Rejected { .. } => CheckStatus::Skip,
            o if o.is_failure() => CheckStatus::Bad,
            _ => CheckStatus::Skip,
        }
    }
}

/// One check (`check.json`, and what `check --json` prints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// good, bad, skip or interrupted.
    pub status: CheckStatus,
    /// The exit status given to `git bisect run`.
    pub exit_code: u8,
    /// Why, in words.
    pub reason: String,
    /// `comfyui_version` of the server's `/system_stats` (once it answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comfyui_version: Option<String>,
    /// `git rev-parse HEAD` of the checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The checkout the commit was read in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<String>,
    /// The run's outcome name (when it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The run id (= prompt_id), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The session id (folder under the runs folder), once one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The workflow as given.
    pub workflow: String,
    /// The server URL.
    pub server: String,
    /// RFC 3339 end of the check.
    pub checked_at: String,
}

impl CheckRecord {
    /// One line: status, exit code, version, commit, outcome or reason, run id.
    pub fn line(&self) -> String {
        let mut line = format!(
            "check: {} (exit {}) · ComfyUI {} · commit {}",
            self.status.as_str(),
            self.exit_code,
            self.comfyui_version.as_deref().unwrap_or("?"),
            self.commit
                .as_deref()
                .map(|c| &c[..c.len().min(12)])
                .unwrap_or("?"),
        );
        line.push_str(&format!(" · {}", self.reason));
        if let Some(id) = &self.run_id {
            line.push_str(&format!(" · run {id}"));
        }
        line
    }

    /// Reads the `check.json` of a session folder, when it has one.
    pub fn load(session_dir: &Path) -> Option<CheckRecord> {
        let text = std::fs::read_to_string(session_dir.join(CHECK_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// Whether a session folder holds a check (one run for `git bisect`, not a bisect to resume).
pub(crate) fn is_check(session_dir: &Path) -> bool {
    session_dir.join(CHECK_FILE).is_file()
}

/// Why a check could not even be answered (bad input, or the journal cannot be written).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    /// The workflow file or `--checkout` is wrong.
    #[error("{0}")]
    Input(String),
    /// The journal could not be written.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// What a check knows as it goes (turned into the [`CheckRecord`]).
struct Facts {
    comfyui_version: Option<String>,
    commit: Option<String>,
    checkout: Option<String>,
    workflow: String,
    server: String,
}

impl Facts {
    fn record(&self, status: CheckStatus, reason: String) -> CheckRecord {
        CheckRecord {
            status,
            exit_code: status.exit_code(),
            reason,
            comfyui_version: self.comfyui_version.clone(),
            commit: self.commit.clone(),
            checkout: self.checkout.clone(),
            outcome: None,
            run_id: None,
            session_id: None,
            workflow: self.workflow.clone(),
            server: self.server.clone(),
            checked_at: now_rfc3339(),
        }
    }
}

/// The commit checked out in `dir` (`git rev-parse HEAD`); the error in words.
pub(crate) fn git_head(dir: &Path) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--verify", "HEAD"])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs one check (see the module comment). `cancel` turns true on Ctrl-C; the run is then
/// interrupted and the check answers `interrupted`.
pub(crate) fn check(
    handle: &Handle,
    client: Client,
    options: CheckOptions,
    cancel: watch::Receiver<bool>,
) -> Result<CheckRecord, CheckError> {
    let server = client.server_url();
    // Bad input is said before anything is restarted.
    let api = match load_api_file(&options.workflow) {
        Ok(w) => Some(w),
        Err(LoadError::UiFormat { .. }) => None,
        Err(e) => return Err(CheckError::Input(e.to_string())),
    };
    let (commit, checkout) = match &options.checkout {
        Some(dir) => match git_head(dir) {
            Ok(c) => (Some(c), Some(dir.display().to_string())),
            Err(e) => {
                return Err(CheckError::Input(format!(
                    "--checkout {}: not a git checkout with a commit ({e}); give the folder `git bisect` runs in",
                    dir.display()
                )))
            }
        },
        None => match git_head(Path::new(".")) {
            Ok(c) => (
                Some(c),
                std::env::current_dir()
                    .ok()
                    .map(|d| d.display().to_string()),
            ),
            Err(_) => (None, None),
        },
    };
    let mut facts = Facts {
        comfyui_version: None,
        commit: commit.clone(),
        checkout,
        workflow: options.workflow.display().to_string(),
        server: server.clone(),
    };
    // One user of a GPU at a time, as for a bisect: taken before the server is restarted.
    let mut lock = match SessionLock::acquire(&server, "(check)") {
        Ok(l) => l,
        Err(e) => return Ok(facts.record(CheckStatus::Skip, format!("cannot test: {e}"))),
    };
    let progress = options.progress.clone();
    if let Some(cmd) = &options.restart_cmd {
        progress.println(&format!("restarting the server: {cmd}"));
        // The restart log lives in the runs folder, which a first check has to make.
        if let Err(e) = std::fs::create_dir_all(&options.runs_dir) {
            return Ok(facts.record(
                CheckStatus::Skip,
                format!(
                    "cannot test: cannot create the runs folder {}: {e}",
                    options.runs_dir.display()
                ),
            ));
        }
        let log = options.runs_dir.join(RESTART_LOG);
        if let Err(e) = run_restart(cmd, options.restart_timeout, Some(&log)) {
            return Ok(facts.record(
                CheckStatus::Skip,
                format!("cannot test: --restart-cmd failed: {e}"),
            ));
        }
    }
    progress.println(&format!(
        "waiting up to {}s for the server {server} (--wait-server)",
        options.wait_server.as_secs()
    ));
    let mut stop = cancel.clone();
    let waited = handle.block_on(async {
        tokio::select! {
            r = wait_for_server(&client, options.wait_server) => Some(r),
            _ = stop.wait_for(|stop| *stop) => None,
        }
    });
    let stats = match waited {
        None => {
            return Ok(facts.record(
                CheckStatus::Interrupted,
                "interrupted while waiting for the server".into(),
            ))
        }
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            return Ok(facts.record(
                CheckStatus::Skip,
                format!(
                "cannot test: the server {server} did not come up within {}s (--wait-server): {e}",
                options.wait_server.as_secs()
            ),
            ))
        }
    };
    facts.comfyui_version =
        Some(stats.system.comfyui_version.clone()).filter(|v| !v.trim().is_empty());
    let defs = match handle.block_on(client.object_info(None)) {
        Ok(v) => NodeDefs::from_value(&v),
        Err(e) => {
            return Ok(facts.record(
                CheckStatus::Skip,
                format!("cannot test: no node definitions from {server}/object_info: {e}"),
            ))
        }
    };
    let Some(defs) = defs else {
        return Ok(facts.record(
            CheckStatus::Skip,
            format!("cannot test: {server}/object_info did not answer an object of node classes"),
        ));
    };
    let target: Workflow = match api {
        Some(w) => w,
        None => match crate::workflow::ui::load_workflow_file(&options.workflow, &defs) {
            Ok(loaded) => loaded.workflow,
            // A UI file this server's nodes cannot convert cannot be tested on it.
            Err(e) => return Ok(facts.record(CheckStatus::Skip, format!("cannot test: {e}"))),
        },
    };
    let mut problems = Problems::default();
    problems.check("the workflow", &target, &defs);
    let stem = options
        .workflow
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let session_options = SessionOptions {
        strict: options.strict,
        timeout_s: options.timeout.map(|d| d.as_secs().max(1)),
        cold: options.cold,
        wait_server_s: options.wait_server.as_secs(),
        restart_cmd: options.restart_cmd.clone(),
        restart_timeout_s: options.restart_timeout.as_secs().max(1),
        models_dirs: options.models_dirs.clone(),
        plan_args: vec!["check".into()],
        confirm_crashes: 0,
        ..SessionOptions::default()
    };
    let prepared = PreparedWorkflow {
        name: unique_name(&stem, &[]),
        source: options.workflow.display().to_string(),
        source_file: None,
        target: target.clone(),
        steps: vec![PreparedStep {
            increment: CHECK_STEP.into(),
            workflow: target,
            changes: Vec::new(),
            ui: None,
        }],
        controls: Vec::new(),
        not_separable: Vec::new(),
        kept: Vec::new(),
        plan_json: None,
        ui_source: None,
    };
    let (paths, mut session) =
        create_session(&options.runs_dir, &server, session_options, vec![prepared])?;
    if let Err(e) = lock.set_session(&session.session_id) {
        tracing::warn!("could not write the session id into the lock file: {e}");
    }
    session.environment = Some(stats);
    if let Some(verdict) = problems.verdict() {
        session.workflows[0].phase = Phase::Done;
        session.workflows[0].verdict = Some(verdict);
        session.state = SessionState::Stopped {
            reason: StopReason::Preflight,
            detail: "check: the server cannot run the workflow as given".into(),
        };
        session.save(&paths)?;
        let mut record = facts.record(
            CheckStatus::Skip,
            format!("cannot test: {}", problems_line(&problems)),
        );
        record.session_id = Some(session.session_id.clone());
        return finish(&paths, record);
    }
    session.save(&paths)?;
    // Marks the folder as a check's at once (`resume` leaves it alone), even if killed.
    let mut pending = facts.record(
        CheckStatus::Skip,
        "cannot test: the check was killed before its run ended".into(),
    );
    pending.session_id = Some(session.session_id.clone());
    finish(&paths, pending)?;
    let backend = LiveBackend::new(handle.clone(), client, cancel.clone())
        .with_progress(progress.clone())
        .with_restart(
            options.restart_timeout,
            paths.dir.join(crate::server::restart::RESTART_LOG),
        );
    let mut hooks = progress.clone();
    let mut driver = Driver::new(paths.clone(), session, backend, SystemClock, &mut hooks);
    let mark = CheckMark {
        comfyui_version: facts.comfyui_version.clone(),
        commit,
    };
    let result = driver.run_once(Some(mark.clone()), None)?;
    // A crash or an end that cannot be known (server lost, timeout, hang, a /history that never
    // answers) decides nothing alone (issue #39): a second run, after --restart-cmd when given.
    let crashed = match &result {
        RunResult::Done(entry)
            if !*cancel.borrow() && entry.outcome.as_ref().is_some_and(Outcome::is_crash) =>
        {
            Some(entry.clone())
        }
        _ => None,
    };
    let mut record = match crashed {
        None => record_of(&facts, result, *cancel.borrow()),
        Some(first) => {
            progress.println(&format!(
                "the run ended without a verdict ({}): a crash decides nothing alone, running it \
                 again to confirm",
                first.outcome.as_ref().map_or("?", Outcome::name)
            ));
            let second = driver.run_once(Some(mark), Some(first.run_id.clone()))?;
            confirmed(&facts, &first, second, *cancel.borrow())
        }
    };
    progress.finish();
    record.session_id = Some(driver.session.session_id.clone());
    finish(&paths, record)
}

/// The record of one run's result (`by_us`: we interrupted it).
fn record_of(facts: &Facts, result: RunResult, by_us: bool) -> CheckRecord {
    match result {
        RunResult::NotSubmitted(reason) => facts.record(
            CheckStatus::Skip,
            format!("cannot test: not submitted: {reason}"),
        ),
        RunResult::Done(entry) => {
            let outcome = entry.outcome.clone().unwrap_or(Outcome::Interrupted);
            let status = CheckStatus::of(&outcome, by_us);
            let mut record = facts.record(status, outcome_reason(&outcome));
            record.outcome = Some(outcome.name().to_string());
            record.run_id = Some(entry.run_id.clone());
            record
        }
    }
}

/// The answer after a crash (`first`) and the run that confirms it (`second`): bad when the
/// second crashed too or failed; cannot test (125) when it passed (the crash was not
/// reproduced: the commit's answer is unknown) or could not run.
fn confirmed(
    facts: &Facts,
    first: &crate::session::journal::RunEntry,
    second: RunResult,
    by_us: bool,
) -> CheckRecord {
    let first_said = outcome_reason(first.outcome.as_ref().unwrap_or(&Outcome::Interrupted));
    let mut record = record_of(facts, second, by_us);
    let (status, reason) = match (record.status, record.outcome.as_deref()) {
        (CheckStatus::Bad, _) => (
            CheckStatus::Bad,
            format!(
                "{} — confirmed by a second run (the first: {first_said}, run {})",
                record.reason, first.run_id
            ),
        ),
        (CheckStatus::Good, _) => (
            CheckStatus::Skip,
            format!(
                "cannot test: the first run ended without a verdict ({first_said}, run {}) and a \
                 second run passed: the crash was not confirmed",
                first.run_id
            ),
        ),
        (CheckStatus::Interrupted, _) => (CheckStatus::Interrupted, record.reason.clone()),
        (CheckStatus::Skip, _) => (
            CheckStatus::Skip,
            format!(
                "cannot test: the first run ended without a verdict ({first_said}, run {}) and \
                 the second could not confirm it ({})",
                first.run_id,
                record.reason.trim_start_matches("cannot test: ")
            ),
        ),
    };
    record.status = status;
    record.exit_code = status.exit_code();
    record.reason = reason;
    record
}

/// Writes `check.json` and returns the record.
fn finish(paths: &SessionPaths, record: CheckRecord) -> Result<CheckRecord, CheckError> {
    write_json_atomic(&paths.dir.join(CHECK_FILE), &record)?;
    Ok(record)
}

/// What preflight found, in one line.
fn problems_line(problems: &Problems) -> String {
    let mut parts = Vec::new();
    if !problems.unknown_nodes.is_empty() {
        parts.push(format!(
            "node class(es) the server does not know: {}",
            problems
                .unknown_nodes
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !problems.missing_models.is_empty() {
        parts.push(format!(
            "model file(s) the server does not have: {}",
            problems
                .missing_models
                .iter()
                .map(|m| m.file.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    parts.extend(problems.other.iter().cloned());
    parts.join("; ")
}

/// The outcome in a few words.
fn outcome_reason(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Passed => "passed: complete product".into(),
        Outcome::Failed {
            node_type,
            node_id,
            exception_type,
            ..
        } => format!("failed: {node_type} (node {node_id}) raised {exception_type}"),
        Outcome::Rejected { message } => {
            format!("cannot test: the server rejected the prompt: {message}")
        }
        Outcome::Interrupted => "interrupted".into(),
        Outcome::Timeout { detail } => format!("timeout: {detail}"),
        Outcome::Hang { detail, .. } => format!("hang: {detail}"),
        Outcome::ServerLost { detail } => format!("server lost (crash): {detail}"),
        Outcome::MemoryFallback { fallbacks } => {
            format!("memory fallback (--strict): {}", fallbacks.join(", "))
        }
        Outcome::MemoryPressure { evidence } => {
            format!("memory pressure (--strict): {}", evidence.join(", "))
        }
        Outcome::IncompleteOutput { message, .. } => format!("incomplete product: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_map_to_the_exit_codes_git_bisect_reads() {
        let failed = Outcome::Failed {
            node_id: "3".into(),
            node_type: "KSampler".into(),
            exception_type: "torch.OutOfMemoryError".into(),
            exception_message: "CUDA out of memory".into(),
        };
        let cases = [
            (Outcome::Passed, false, 0),
            (failed, false, 1),
            (
                Outcome::Timeout {
                    detail: "run".into(),
                },
                false,
                1,
            ),
            (
                Outcome::ServerLost {
                    detail: "gone".into(),
                },
                false,
                1,
            ),
            (
                Outcome::MemoryFallback {
                    fallbacks: vec!["tiled VAE decode fallback".into()],
                },
                false,
                1,
            ),
            (
                Outcome::IncompleteOutput {
                    node_id: "9".into(),
                    node_type: "SaveImage".into(),
                    message: "no images".into(),
                },
                false,
                1,
            ),
            (
                Outcome::Rejected {
                    message: "invalid".into(),
                },
                false,
                125,
            ),
            (Outcome::Interrupted, false, 125),
            (Outcome::Interrupted, true, 130),
        ];
        for (outcome, by_us, code) in cases {
            assert_eq!(
                CheckStatus::of(&outcome, by_us).exit_code(),
                code,
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn a_folder_that_is_no_checkout_has_no_commit() {
        let dir = tempfile::tempdir().unwrap();
        let err = git_head(dir.path()).unwrap_err();
        assert!(!err.is_empty());
    }
}
