//! What the driver runs through: the [`Backend`] (one server: submit, recover, restart, its
//! environment), the [`Clock`], and the front end's [`Hooks`]. `session::live` has the real
//! backend; the tests have fakes.

use crate::comfy::Fingerprint;
use crate::run::RunRecord;
use crate::session::journal::{RunEntry, SessionFile, SessionPaths};
use crate::workflow::Workflow;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One run to submit.
#[derive(Debug, Clone)]
pub struct RunSpec<'a> {
    /// Run id = prompt_id.
    pub run_id: &'a str,
    /// The workflow to submit.
    pub workflow: &'a Workflow,
    /// Free models and memory first.
    pub cold: bool,
    /// Per-run limit: `--timeout`, or the default derived from the session's runs
    /// (`Driver::run_limit`).
    pub timeout: Option<Duration>,
    /// `--stall`, or the default derived from the session's runs (`Driver::stall_limit`): no
    /// progress and no node change for this long is a hang.
    pub stall: Option<Duration>,
    /// `--deadline` + `--deadline-grace`: a run still going then is interrupted (the driver
    /// records it as interrupted and stops the session; `resume` runs it again).
    pub stop_at: Option<Timestamp>,
    /// Raw events go here, appended as they arrive.
    pub events_file: &'a Path,
    /// `workflow name · step k increment` for the progress display.
    pub label: String,
}

/// What came of submitting one run.
#[derive(Debug)]
pub enum Attempt {
    /// The run happened (its outcome may still be a failure of any kind).
    Done(Box<RunRecord>),
    /// Nothing was submitted (the server was not reachable); the reason in words.
    NotSubmitted(String),
}

/// What the server knows about a run the tool lost track of (killed mid-run).
#[derive(Debug)]
pub enum Recovery {
    /// The server finished it: the record rebuilt from its history.
    Finished(Box<RunRecord>),
    /// The server does not know it (restarted, or never received it): run it again.
    Unknown,
    /// The server could not be asked.
    Unreachable(String),
}

/// The server side of a session.
pub trait Backend {
    /// Submits one run and follows it to the end.
    fn run(&mut self, spec: &RunSpec<'_>) -> Attempt;
    /// Looks up a run by its prompt_id (waiting for it if it is still queued or running).
    fn recover(&mut self, run_id: &str, workflow: &Workflow, events_file: &Path) -> Recovery;
    /// True when the server answers.
    fn alive(&mut self) -> bool;
    /// Runs `--restart-cmd`; the error in words.
    fn restart(&mut self, command: &str) -> Result<(), String>;
    /// The environment fingerprint, taken before each run (`None`: the server did not say).
    fn environment(&mut self) -> Option<Fingerprint> {
        None
    }
    /// Which of `classes` come from a custom node pack (class → pack), from the last node
    /// definitions read (`None`: none were read).
    fn custom_classes(&self, _classes: &[&str]) -> Option<BTreeMap<String, String>> {
        None
    }
    /// The bytes of an output file (at most `cap`), for the mitigations' degenerate-image check;
    /// the error in words.
    fn output_file(
        &mut self,
        _file: &crate::run::product::OutputFile,
        _cap: usize,
    ) -> Result<Vec<u8>, String> {
        Err("this backend does not read output files".into())
    }
}

/// Wall-clock time and sleeping (a fake in tests).
pub trait Clock {
    /// Now, UTC.
    fn now(&self) -> Timestamp;
    /// Sleeps for `d`.
    fn sleep(&self, d: Duration);
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// Observers of the session (progress display, report writer). All methods default to nothing.
pub trait Hooks {
    /// A run is about to be submitted.
    fn run_started(&mut self, _session: &SessionFile, _workflow: usize, _entry: &RunEntry) {}
    /// A run's outcome was journaled.
    fn run_finished(&mut self, _session: &SessionFile, _workflow: usize, _entry: &RunEntry) {}
    /// `session.json` was rewritten after a run or a verdict (the report is written here).
    fn journal_updated(&mut self, _paths: &SessionPaths, _session: &SessionFile) {}
    /// Something the user should read (waiting for the server, restarts …).
    fn note(&mut self, _text: &str) {}
    /// The prediction before a run: its duration and the session's time left counting it
    /// (`analytics::predict`; None: no run finished yet to predict from).
    fn estimate(&mut self, _run: Option<Duration>, _session_left: Option<Duration>) {}
}

/// Hooks that do nothing.
#[derive(Debug, Default)]
pub struct NoHooks;
impl Hooks for NoHooks {}
