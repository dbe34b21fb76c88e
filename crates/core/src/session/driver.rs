//! The session driver: walks the workflows one after another, asks `decide` what to run,
//! journals every state change, and stops cleanly (deadline, Ctrl-C, server lost and not back).
//!
//! The driver talks to the server only through [`Backend`] and to time only through [`Clock`],
//! so the state machine and the journal are tested with fakes; `session::live` has the real ones.

use super::decide::reduced::StepCost;
use super::decide::{decide_steps_in, Decision};
use super::index::{self, CheckMark, IndexEntry};
use super::journal::{
    now_rfc3339, read_json, run_dir_name, Drift, InFlight, JournalError, OnDrift, Outcome,
    PackOfClass, Phase, ReducedSteps, RunEntry, RunFile, RunRole, RunStatus, SessionFile,
    SessionPaths, SessionState, StopReason, SyncBehind, Verdict, RUN_EVENTS_FILE, RUN_RECORD_FILE,
    RUN_WORKFLOW_FILE, SESSION_SCHEMA_VERSION,
};
use super::predict;
use crate::comfy::Fingerprint;
use crate::hashing::{ComponentHash, HashCache};
use crate::ladder::work::Work;
use crate::run::RunRecord;
use crate::units;
use crate::workflow::Workflow;
use jiff::tz::Offset;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    /// ([`Driver::run_limit`]).
    pub timeout: Option<Duration>,
    /// `--stall`, or the default derived from the session's runs ([`Driver::stall_limit`]): no
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
    /// (`session::predict`; None: no run finished yet to predict from).
    fn estimate(&mut self, _run: Option<Duration>, _session_left: Option<Duration>) {}
}

/// Hooks that do nothing.
#[derive(Debug, Default)]
pub struct NoHooks;
impl Hooks for NoHooks {}

/// Why the driver returned an error (the journal could not be written or read).
pub(crate) type DriveResult = Result<(), JournalError>;

/// The bisection driver over one session.
pub struct Driver<'h, B: Backend, C: Clock> {
    /// Where the session lives.
    pub paths: SessionPaths,
    /// The journal (the state of the machine).
    pub session: SessionFile,
    backend: B,
    clock: C,
    hooks: &'h mut dyn Hooks,
    stop: Arc<AtomicBool>,
    hash_cache: Option<HashCache>,
    /// Fsyncs of journal writes still running; waited for before every submission.
    durable: SyncBehind,
    /// Fingerprint id of the environment the next run happens in (the last one taken).
    env_now: Option<String>,
    /// What `check` adds to the index line of its run.
    index_mark: Option<CheckMark>,
    /// The per-run limit given to the last run (a change of the derived default is noted).
    last_limit: Option<Duration>,
    /// The work of every ladder step per workflow, at full and at the reduced step count
    /// (read once, for the predictor).
    works: Vec<Option<Vec<(Work, Work)>>>,
}

/// The work of a step whose variant could not be read (predicts nothing but setup).
const ZERO_WORK: Work = Work {
    steps: 0,
    pixels: 0,
    frames: 1,
    latent_frames: Some(1),
    batch: 1,
    models: None,
};

/// How often a wait for a lost server says it is still waiting.
const WAIT_NOTE_EVERY: Duration = Duration::from_secs(60);

/// How often the `--start-at` wait says how long is left.
const START_NOTE_EVERY: Duration = Duration::from_secs(600);

/// The per-run limit while no run of the session has finished, when `--timeout` is not given.
pub const DEFAULT_RUN_LIMIT: Duration = Duration::from_secs(3600);

/// Without `--timeout`, a run may take this many times the longest finished run of the
/// session (never less than [`DEFAULT_RUN_LIMIT`]).
pub const RUN_LIMIT_FACTOR: u32 = 8;

/// A finished run as [`Driver::judge_run`] judged it.
pub(super) struct JudgedRun {
    /// The record, with its diagnosis.
    pub(super) record: RunRecord,
    /// Its outcome.
    pub(super) outcome: Outcome,
    /// Its journal summary.
    pub(super) summary: super::journal::RunSummary,
    /// Its diagnosis (a run that did not pass).
    pub(super) diagnosis: Option<crate::diagnose::Diagnosis>,
    /// Memory pressure it passed under.
    pub(super) pressure: Option<super::pressure::MemoryPressure>,
}

impl JudgedRun {
    /// Marks `entry` done with this judgement; returns the record and the pressure for
    /// [`Driver::write_run_files`].
    pub(super) fn mark(
        self,
        entry: &mut RunEntry,
    ) -> (RunRecord, Option<super::pressure::MemoryPressure>) {
        entry.status = RunStatus::Done;
        entry.finished_at = Some(if self.record.finished_at.is_empty() {
            now_rfc3339()
        } else {
            self.record.finished_at.clone()
        });
        entry.outcome = Some(self.outcome);
        entry.summary = Some(self.summary);
        entry.diagnosis = self.diagnosis;
        (self.record, self.pressure)
    }
}

impl<'h, B: Backend, C: Clock> Driver<'h, B, C> {
    /// A driver over `session` (already saved under `paths`).
    pub fn new(
        paths: SessionPaths,
        session: SessionFile,
        backend: B,
        clock: C,
        hooks: &'h mut dyn Hooks,
    ) -> Self {
        let cache_path = paths.runs_dir.join(crate::hashing::DEFAULT_CACHE_FILE);
        let hash_cache = if session.options.models_dirs.is_empty() {
            None
        } else {
            Some(HashCache::open(cache_path))
        };
        Driver {
            paths,
            session,
            backend,
            clock,
            hooks,
            stop: Arc::new(AtomicBool::new(false)),
            hash_cache,
            durable: SyncBehind::default(),
            env_now: None,
            index_mark: None,
            last_limit: None,
            works: Vec::new(),
        }
    }

    /// The flag that stops the session between runs (set it from a Ctrl-C handler).
    pub(crate) fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// What the mitigation driver (`session::mitigate`) borrows: the backend, the hooks, the
    /// journal's write-behind and the clock.
    pub(super) fn parts(&mut self) -> (&mut B, &mut dyn Hooks, &mut SyncBehind, &C) {
        (
            &mut self.backend,
            &mut *self.hooks,
            &mut self.durable,
            &self.clock,
        )
    }

    /// True once Ctrl-C (or SIGTERM, SIGHUP) asked the session to stop.
    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn save(&mut self) -> DriveResult {
        self.session.save_behind(&self.paths, &mut self.durable)
    }

    pub(super) fn saved(&mut self) -> DriveResult {
        self.save()?;
        self.hooks.journal_updated(&self.paths, &self.session);
        Ok(())
    }

    /// Runs the session until every workflow has a verdict or it has to stop; every journal
    /// write is durable when it returns.
    pub fn drive(&mut self) -> DriveResult {
        let result = self.drive_until_stop();
        let durable = self.durable.wait();
        result.and(durable)
    }

    fn drive_until_stop(&mut self) -> DriveResult {
        if let Some(until) = self.start_at() {
            if !self.wait_until(until)? {
                return Ok(());
            }
        }
        // A resumed session: the run in flight when the tool died comes first.
        if self.session.in_flight.is_some() && !self.settle_in_flight()? {
            return Ok(());
        }
        for w in 0..self.session.workflows.len() {
            if self.session.workflows[w]
                .verdict
                .as_ref()
                .is_some_and(|v| !matches!(v, Verdict::Incomplete { .. }))
            {
                continue;
            }
            self.session.workflows[w].verdict = None;
            self.session.state = SessionState::Running { workflow: w };
            self.save()?;
            if !self.drive_workflow(w)? {
                return Ok(());
            }
        }
        self.session.state = SessionState::Done;
        self.saved()
    }

    fn start_at(&self) -> Option<(Timestamp, Offset)> {
        let text = self.session.options.start_at.as_deref()?;
        let (t, offset) = units::parse_rfc3339_offset(text)?;
        (t > self.clock.now()).then_some((t, offset))
    }

    pub(super) fn deadline(&self) -> Option<Timestamp> {
        let text = self.session.options.deadline.as_deref()?;
        units::parse_rfc3339(text)
    }

    /// When a run still going is interrupted: the deadline plus `--deadline-grace`.
    pub(super) fn run_stop_at(&self) -> Option<Timestamp> {
        let grace = self
            .session
            .options
            .deadline_grace_s
            .map(Duration::from_secs)
            .unwrap_or(super::journal::DEFAULT_DEADLINE_GRACE);
        self.deadline()?.checked_add(grace).ok()
    }

    /// The limit of the next run: `--timeout` when given; otherwise [`RUN_LIMIT_FACTOR`] times
    /// the longest run of the session that ended by itself (passed or failed: a timeout, an
    /// interruption or a lost server says nothing of how long the work takes), at least
    /// [`DEFAULT_RUN_LIMIT`]. The second part says where the limit comes from.
    pub fn run_limit(&self) -> (Duration, String) {
        if let Some(s) = self.session.options.timeout_s {
            return (Duration::from_secs(s), "--timeout".into());
        }
        let longest = self
            .session
            .workflows
            .iter()
            .flat_map(|w| &w.runs)
            .filter(|r| matches!(r.outcome, Some(Outcome::Passed | Outcome::Failed { .. })))
            .filter_map(|r| r.summary.as_ref().map(|s| s.duration_ms))
            .max()
            .map(Duration::from_millis);
        match longest {
            Some(l) if l * RUN_LIMIT_FACTOR > DEFAULT_RUN_LIMIT => (
                l * RUN_LIMIT_FACTOR,
                format!(
                    "{RUN_LIMIT_FACTOR} × the longest run so far ({}); --timeout sets it",
                    units::compact_duration(l)
                ),
            ),
            _ => (
                DEFAULT_RUN_LIMIT,
                "the default while no run took over 1/8 of it; --timeout sets it".into(),
            ),
        }
    }

    /// The hang limit of the next run ([`crate::run::hang::stall_limit`]): `--stall`, else
    /// derived from the longest quiet stretch of the session's runs that ended by themselves.
    pub fn stall_limit(&self) -> (Duration, String) {
        let quiet = self
            .session
            .workflows
            .iter()
            .flat_map(|w| &w.runs)
            .filter(|r| matches!(r.outcome, Some(Outcome::Passed | Outcome::Failed { .. })))
            .filter_map(|r| r.summary.as_ref().and_then(|s| s.longest_quiet_ms))
            .max()
            .map(Duration::from_millis);
        crate::run::hang::stall_limit(self.session.options.stall_s.map(Duration::from_secs), quiet)
    }

    /// Waits for `--start-at`; false when stopped meanwhile.
    fn wait_until(&mut self, (until, offset): (Timestamp, Offset)) -> Result<bool, JournalError> {
        let text = units::format_rfc3339(until, offset);
        self.session.state = SessionState::Waiting {
            until: text.clone(),
        };
        self.save()?;
        self.hooks.note(&format!(
            "waiting until {text} before the first run (--start-at)"
        ));
        let mut last_note: Option<Timestamp> = None;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                self.stop_session(
                    None,
                    StopReason::Interrupted,
                    "interrupted while waiting for --start-at".into(),
                )?;
                return Ok(false);
            }
            let now = self.clock.now();
            if now >= until {
                return Ok(true);
            }
            let left = (until - now).unsigned_abs();
            if last_note.is_none_or(|t| (now - t).unsigned_abs() >= START_NOTE_EVERY) {
                if last_note.is_some() {
                    self.hooks.note(&format!(
                        "waiting until {text} (--start-at): {} left",
                        units::compact_duration(left)
                    ));
                }
                last_note = Some(now);
            }
            self.clock.sleep(left.min(Duration::from_secs(1)));
        }
    }

    /// Marks the session stopped (and the current workflow incomplete).
    fn stop_session(
        &mut self,
        workflow: Option<usize>,
        reason: StopReason,
        detail: String,
    ) -> DriveResult {
        if let Some(w) = workflow {
            let job = &mut self.session.workflows[w];
            job.verdict = Some(Verdict::Incomplete {
                reason,
                detail: detail.clone(),
            });
        }
        self.hooks.note(&format!("stopping: {detail}"));
        self.session.state = SessionState::Stopped { reason, detail };
        self.saved()
    }

    /// The exact command that continues this session: its id, and `--runs-dir` unless the
    /// runs folder is the default `runs`.
    pub fn resume_command(&self) -> String {
        let mut command = format!("comfy-bisect resume {}", self.session.session_id);
        if self.paths.runs_dir != Path::new("runs") {
            command.push_str(&format!(
                " --runs-dir '{}'",
                self.paths
                    .runs_dir
                    .display()
                    .to_string()
                    .replace('\'', "'\\''")
            ));
        }
        command
    }

    /// Checks what stops the session between runs; true when it may go on.
    fn may_continue(&mut self, w: usize) -> Result<bool, JournalError> {
        if self.stop.load(Ordering::SeqCst) {
            self.stop_session(
                Some(w),
                StopReason::Interrupted,
                format!(
                    "interrupted (Ctrl-C, SIGTERM or SIGHUP); `{}` continues",
                    self.resume_command()
                ),
            )?;
            return Ok(false);
        }
        if let Some(deadline) = self.deadline() {
            if self.clock.now() >= deadline {
                let text = self.session.options.deadline.clone().unwrap_or_default();
                self.stop_session(
                    Some(w),
                    StopReason::Deadline,
                    format!(
                        "deadline {text} reached; `{}` continues",
                        self.resume_command()
                    ),
                )?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Works on one workflow until its verdict; false when the session had to stop.
    fn drive_workflow(&mut self, w: usize) -> Result<bool, JournalError> {
        loop {
            let costs = self.step_costs(w);
            let (phase, decision, cap) = decide_steps_in(
                &self.session.workflows[w],
                &self.session.options,
                self.env_now.as_deref(),
                costs.as_deref(),
            );
            self.session.workflows[w].phase = phase;
            match decision {
                Decision::Finish(verdict) => {
                    let job = &mut self.session.workflows[w];
                    job.phase = Phase::Done;
                    job.verdict = Some(verdict);
                    let line = job.headline().unwrap_or_default();
                    self.hooks.note(&format!("{}: {line}", job.name));
                    self.saved()?;
                    return Ok(true);
                }
                Decision::Run { .. } | Decision::Confirm { .. } => {
                    let (step, role, confirms) = match decision {
                        Decision::Run { step, role } => (step, role, None),
                        Decision::Confirm { step, crashed } => {
                            self.hooks.note(&format!(
                                "run {crashed} (step {step}) crashed; re-running it to confirm (--confirm-crashes)"
                            ));
                            (step, RunRole::Confirm, Some(crashed))
                        }
                        Decision::Finish(_) => unreachable!("handled above"),
                    };
                    if !self.may_continue(w)? {
                        return Ok(false);
                    }
                    if !self.predicted_in_time(w, step, role, cap)? {
                        return Ok(false);
                    }
                    if let Some(cmd) = self.session.options.restart_cmd.clone() {
                        if self.session.options.restart_each {
                            if let Err(e) = self.backend.restart(&cmd) {
                                self.hooks.note(&format!("--restart-cmd failed: {e}"));
                            }
                        }
                    }
                    if !self.ensure_server(w)? {
                        return Ok(false);
                    }
                    let fingerprint = match self.take_environment(w)? {
                        EnvCheck::Same(id) => id,
                        EnvCheck::Changed => continue,
                        EnvCheck::Stop => return Ok(false),
                    };
                    if !self.one_run(w, step, role, confirms, fingerprint, cap)? {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// With `--search-steps`: the predicted time of each ladder step's run of workflow `w`
    /// (full, reduced) from the session's finished runs, which decides where few steps pay;
    /// None before any run finished.
    fn step_costs(&mut self, w: usize) -> Option<Vec<StepCost>> {
        self.session.options.search_steps?;
        let seen = predict::observed(&self.session);
        if seen.is_empty() {
            return None;
        }
        let works = self.step_works(w);
        predict::step_costs(&seen, w, &works, self.session.options.cold)
    }

    /// The work of each ladder step of workflow `w` (full, reduced), read once.
    fn step_works(&mut self, w: usize) -> Vec<(Work, Work)> {
        if self.works.len() <= w {
            self.works.resize(w + 1, None);
        }
        if let Some(works) = &self.works[w] {
            return works.clone();
        }
        let cap = self.session.options.search_steps;
        let works: Vec<(Work, Work)> = (0..self.session.workflows[w].steps.len())
            .map(|k| self.run_work(w, k, RunRole::Search, cap))
            .map(|(full, cut)| (full.unwrap_or(ZERO_WORK), cut.unwrap_or(ZERO_WORK)))
            .collect();
        self.works[w] = Some(works.clone());
        works
    }

    /// The work of step `step`'s variant at full steps and at `cap` (None: unreadable).
    fn run_work(
        &self,
        w: usize,
        step: usize,
        role: RunRole,
        cap: Option<u32>,
    ) -> (Option<Work>, Option<Work>) {
        let Ok((workflow, _)) = self.variant(w, step, role) else {
            return (None, None);
        };
        let full = predict::work_of(&workflow);
        let cut = super::prepare::reduce_steps(workflow, cap, &self.paths.session_file())
            .ok()
            .map(|(reduced, _)| predict::work_of(&reduced));
        (Some(full), cut)
    }

    /// Predicts the next run and the session's time left (said to the hooks); with
    /// `--deadline`, a run predicted to end after the deadline and its grace is not started:
    /// the session stops, resumable. False when it stopped.
    fn predicted_in_time(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        cap: Option<u32>,
    ) -> Result<bool, JournalError> {
        let seen = predict::observed(&self.session);
        let cold = self.session.options.cold;
        let run = self
            .run_work(w, step, role, cap)
            .1
            .and_then(|work| predict::predict_run(&seen, w, step, &work, cold));
        let mut left = run.map(|r| r.total());
        for v in w..self.session.workflows.len() {
            let works = self.step_works(v);
            let mut runs = predict::runs_left(&self.session.workflows[v], &self.session.options);
            if v == w {
                // The next run is counted once, as predicted above.
                if let Some(i) = runs.iter().position(|r| r.0 == step && r.2 >= 1.0) {
                    runs.remove(i);
                }
            }
            left = match (left, predict::time_left(&seen, v, &runs, &works, cold)) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        self.hooks.estimate(run.map(|r| r.total()), left);
        let (Some(run), Some(stop_at), Some(deadline)) = (
            run,
            self.run_stop_at(),
            self.session.options.deadline.clone(),
        ) else {
            return Ok(true);
        };
        let now = self.clock.now();
        let Some(end) = now.checked_add(run.total()).ok().filter(|e| *e > stop_at) else {
            return Ok(true);
        };
        let offset = units::parse_rfc3339_offset(&deadline)
            .map(|(_, o)| o)
            .unwrap_or(Offset::UTC);
        let grace = (stop_at - self.deadline().unwrap_or(stop_at)).unsigned_abs();
        let job = &self.session.workflows[w];
        let increment = job
            .steps
            .get(step)
            .map(|s| s.increment.clone())
            .unwrap_or_default();
        self.stop_session(
            Some(w),
            StopReason::Deadline,
            format!(
                "not starting step {step} {increment}: predicted to take {} (from this session's \
                 runs), it would end at {}, after the deadline {deadline} + {} grace \
                 (--deadline-grace); `{}` continues with a later --deadline (or \
                 --no-deadline)",
                units::compact_duration(run.total()),
                units::format_rfc3339(end.round(jiff::Unit::Second).unwrap_or(end), offset),
                units::compact_duration(grace),
                self.resume_command()
            ),
        )?;
        Ok(false)
    }

    /// Waits for the server (restarting it first when `--restart-cmd` is given and `restart`);
    /// stops the session when it does not come back within `--wait-server`.
    fn ensure_server(&mut self, w: usize) -> Result<bool, JournalError> {
        if self.backend.alive() {
            return Ok(true);
        }
        if self.wait_for_server(true) {
            return Ok(true);
        }
        let detail = format!(
            "server {} lost and not back within {}s (--wait-server); `{}` continues",
            self.session.server,
            self.session.options.wait_server_s,
            self.resume_command()
        );
        self.stop_session(Some(w), StopReason::ServerLost, detail)?;
        Ok(false)
    }

    /// Polls the server for up to `--wait-server`; true when it answers.
    pub(super) fn wait_for_server(&mut self, restart: bool) -> bool {
        if restart {
            if let Some(cmd) = self.session.options.restart_cmd.clone() {
                self.hooks.note(&format!("restarting the server: {cmd}"));
                if let Err(e) = self.backend.restart(&cmd) {
                    self.hooks.note(&format!("--restart-cmd failed: {e}"));
                }
            }
        }
        let limit = Duration::from_secs(self.session.options.wait_server_s);
        self.hooks.note(&format!(
            "waiting up to {}s for the server {} (--wait-server)",
            limit.as_secs(),
            self.session.server
        ));
        let start = self.clock.now();
        let mut noted = Duration::ZERO;
        loop {
            if self.backend.alive() {
                return true;
            }
            let waited = (self.clock.now() - start).unsigned_abs();
            if self.stop.load(Ordering::SeqCst) || waited >= limit {
                return false;
            }
            // A line a minute, so a log without a terminal shows the wait going on.
            if waited >= noted + WAIT_NOTE_EVERY {
                noted = waited;
                self.hooks.note(&format!(
                    "still waiting for the server {} ({} of {})",
                    self.session.server,
                    units::compact_duration(waited),
                    units::compact_duration(limit)
                ));
            }
            self.clock.sleep(Duration::from_secs(1));
        }
    }

    /// When the step has a UI-format companion, the run folder gets it as `workflow.ui.json`.
    fn copy_ui_companion(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        run_dir: &std::path::Path,
    ) -> Result<(), JournalError> {
        if role == RunRole::Control {
            return Ok(());
        }
        let Some(s) = self.session.workflows[w].steps.get(step) else {
            return Ok(());
        };
        let companion = self.paths.dir.join(super::setup::ui_companion(&s.file));
        match std::fs::read(&companion) {
            Ok(bytes) => self
                .durable
                .write_atomic(&run_dir.join("workflow.ui.json"), &bytes),
            Err(_) => Ok(()),
        }
    }

    fn variant(
        &self,
        w: usize,
        step: usize,
        role: RunRole,
    ) -> Result<(Workflow, String), JournalError> {
        let job = &self.session.workflows[w];
        let (file, increment) = if role == RunRole::Control {
            let c = job
                .controls
                .iter()
                .find(|c| c.step == step)
                .ok_or_else(|| JournalError::Invalid {
                    path: self.paths.session_file(),
                    reason: format!("no control variant for step {step}"),
                })?;
            (c.file.clone(), c.increment.clone())
        } else {
            let s = &job.steps[step];
            (s.file.clone(), s.increment.clone())
        };
        let path = self.paths.dir.join(&file);
        let workflow =
            crate::workflow::load_api_file(&path).map_err(|e| JournalError::Invalid {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        Ok((workflow, increment))
    }

    /// Takes the environment fingerprint before a run and compares it with the one the
    /// session's previous run saw. A change is journaled as a drift; then the next decision is
    /// made again in the new environment (re-anchoring) or, with `--on-drift stop`, the
    /// session ends.
    fn take_environment(&mut self, w: usize) -> Result<EnvCheck, JournalError> {
        let Some(fp) = self.backend.environment() else {
            return Ok(EnvCheck::Same(None));
        };
        let id = fp.id.clone();
        let previous = self
            .env_now
            .clone()
            .or_else(|| self.session.last_run_fingerprint().map(str::to_string));
        let before = previous
            .as_ref()
            .and_then(|p| self.session.fingerprints.get(p))
            .cloned();
        self.session
            .fingerprints
            .entry(id.clone())
            .or_insert(fp.clone());
        self.env_now = Some(id.clone());
        let Some(from) = previous.filter(|p| *p != id) else {
            return Ok(EnvCheck::Same(Some(id)));
        };
        let mut changes = before
            .map(|b| crate::comfy::fingerprint::diff(&b, &fp))
            .unwrap_or_default();
        if changes.is_empty() {
            changes.push(format!("fingerprint {from} → {id}"));
        }
        let action = self.session.options.on_drift;
        self.hooks.note(&format!(
            "the server's environment changed ({}); {}",
            changes.join("; "),
            match action {
                OnDrift::Reanchor =>
                    "re-running the last passing step under it (--on-drift reanchor)",
                OnDrift::Stop => "stopping (--on-drift stop)",
            }
        ));
        self.session.drifts.push(Drift {
            detected_at: now_rfc3339(),
            workflow: w,
            from,
            to: id,
            changes: changes.clone(),
            action,
        });
        if action == OnDrift::Stop {
            self.stop_session(
                Some(w),
                StopReason::EnvironmentChanged,
                format!("environment changed: {}", changes.join("; ")),
            )?;
            return Ok(EnvCheck::Stop);
        }
        self.save()?;
        Ok(EnvCheck::Changed)
    }

    /// After a crash that will be re-run to confirm it: with `--restart-cmd` the server is
    /// restarted (even when it answers: a crash may leave it in a bad state), then waited for.
    fn back_after_crash(&mut self, w: usize) -> Result<bool, JournalError> {
        if self.session.options.restart_cmd.is_none() {
            return self.ensure_server(w);
        }
        if self.wait_for_server(true) {
            return Ok(true);
        }
        let detail = format!(
            "server {} not back within {}s after --restart-cmd (--wait-server); `{}` continues",
            self.session.server,
            self.session.options.wait_server_s,
            self.resume_command()
        );
        self.stop_session(Some(w), StopReason::ServerLost, detail)?;
        Ok(false)
    }

    /// Whether the crash of run `run_id` of workflow `w` is going to be re-run.
    fn will_confirm(&self, w: usize, run_id: &str) -> bool {
        let job = &self.session.workflows[w];
        job.runs
            .iter()
            .find(|r| r.run_id == run_id)
            .is_some_and(|r| {
                r.role != RunRole::Control
                    && job.crash_check(r, self.session.options.confirm_crashes)
                        == super::journal::CrashCheck::Pending
            })
    }

    /// Submits one run and journals it; false when the session had to stop.
    fn one_run(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        confirms: Option<String>,
        fingerprint: Option<String>,
        cap: Option<u32>,
    ) -> Result<bool, JournalError> {
        match self.submit(w, step, role, confirms, fingerprint, cap)? {
            Submitted::Not(_) => self.ensure_server(w),
            Submitted::Done { run_id, outcome } => match outcome {
                Outcome::Hang {
                    interrupt_confirmed: false,
                    ..
                } if self.session.options.restart_cmd.is_none() => {
                    // The hung prompt still holds the server's worker: every later run would
                    // wait behind it.
                    self.stop_session(
                        Some(w),
                        StopReason::ServerLost,
                        format!(
                            "run {run_id} hung and the server ignored the interrupt; restart \
                             ComfyUI (or give --restart-cmd so the session does it), then `{}` \
                             goes on",
                            self.resume_command()
                        ),
                    )?;
                    Ok(false)
                }
                Outcome::Hang {
                    interrupt_confirmed: false,
                    ..
                } => {
                    // Restart through --restart-cmd: the hung prompt holds the worker.
                    self.back_after_crash(w)
                }
                Outcome::ServerLost { .. } | Outcome::Timeout { .. } | Outcome::Hang { .. }
                    if self.will_confirm(w, &run_id) =>
                {
                    // A crash decides nothing alone: it is re-run once the server is back.
                    self.back_after_crash(w)
                }
                Outcome::ServerLost { .. } => {
                    // The variant killed the server: it counts as failing and is not
                    // resubmitted (beyond --repeat); the session needs the server back.
                    self.ensure_server(w)
                }
                Outcome::Interrupted
                    if !self.stop.load(Ordering::SeqCst)
                        && self.run_stop_at().is_some_and(|t| self.clock.now() >= t) =>
                {
                    let text = self.session.options.deadline.clone().unwrap_or_default();
                    self.stop_session(
                        Some(w),
                        StopReason::Deadline,
                        format!(
                            "deadline {text} reached while run {run_id} was still going; \
                             interrupted it after the grace period (--deadline-grace); `{}` \
                             runs it again",
                            self.resume_command()
                        ),
                    )?;
                    Ok(false)
                }
                Outcome::Interrupted => {
                    self.stop_session(
                        Some(w),
                        StopReason::Interrupted,
                        format!(
                            "the run was interrupted; `{}` runs it again",
                            self.resume_command()
                        ),
                    )?;
                    Ok(false)
                }
                _ => Ok(true),
            },
        }
    }

    /// Runs the last step of the first workflow once, as the target, and journals it (`check`:
    /// no ladder, no decision, no restart or wait afterwards; `mark` goes into its index line).
    /// The session ends `done`, or stopped when the run was interrupted.
    pub fn run_once(&mut self, mark: Option<CheckMark>) -> Result<RunResult, JournalError> {
        self.index_mark = mark;
        self.session.state = SessionState::Running { workflow: 0 };
        self.save()?;
        let fingerprint = match self.take_environment(0)? {
            EnvCheck::Same(id) => id,
            EnvCheck::Changed | EnvCheck::Stop => self.env_now.clone(),
        };
        let step = self.session.workflows[0].steps.len().saturating_sub(1);
        let submitted = self.submit(0, step, RunRole::Target, None, fingerprint, None)?;
        let result = match submitted {
            Submitted::Not(reason) => RunResult::NotSubmitted(reason),
            Submitted::Done { run_id, outcome } => {
                let entry = self.session.workflows[0]
                    .runs
                    .iter()
                    .find(|r| r.run_id == run_id)
                    .cloned();
                match entry {
                    Some(entry) => RunResult::Done(Box::new(entry)),
                    None => RunResult::NotSubmitted(format!(
                        "run {run_id} ({}) is not in the journal",
                        outcome.name()
                    )),
                }
            }
        };
        self.session.workflows[0].phase = Phase::Done;
        // The run decides the check (an interrupted one: cannot test).
        if let RunResult::Done(e) = &result {
            self.session.workflows[0].verdict = Some(Verdict::Checked {
                run_id: e.run_id.clone(),
            });
        }
        self.session.state = match &result {
            RunResult::Done(e) if matches!(e.outcome, Some(Outcome::Interrupted)) => {
                SessionState::Stopped {
                    reason: StopReason::Interrupted,
                    detail: "the run was interrupted".into(),
                }
            }
            RunResult::NotSubmitted(reason) => SessionState::Stopped {
                reason: StopReason::ServerLost,
                detail: format!("not submitted: {reason}"),
            },
            RunResult::Done(_) => SessionState::Done,
        };
        self.saved()?;
        self.durable.wait()?;
        Ok(result)
    }

    /// Submits one run and journals it (`run.json`, the index line, the session entry).
    fn submit(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        confirms: Option<String>,
        fingerprint: Option<String>,
        cap: Option<u32>,
    ) -> Result<Submitted, JournalError> {
        let (workflow, increment) = self.variant(w, step, role)?;
        let (workflow, reduced) =
            super::prepare::reduce_steps(workflow, cap, &self.paths.session_file())?;
        let run_id = uuid::Uuid::new_v4().to_string();
        let dir = run_dir_name(step, &increment, &run_id);
        let run_dir = self.paths.dir.join(&dir);
        std::fs::create_dir_all(&run_dir).map_err(|source| JournalError::Io {
            action: "cannot create run folder",
            path: run_dir.clone(),
            source,
        })?;
        self.durable.write_atomic(
            &run_dir.join(RUN_WORKFLOW_FILE),
            format!("{}\n", workflow.to_pretty_json()).as_bytes(),
        )?;
        self.copy_ui_companion(w, step, role, &run_dir)?;
        let entry = RunEntry {
            run_id: run_id.clone(),
            step,
            increment: increment.clone(),
            role,
            dir: dir.clone(),
            workflow_sha256: workflow.sha256(),
            status: RunStatus::InFlight,
            started_at: now_rfc3339(),
            finished_at: None,
            outcome: None,
            summary: None,
            diagnosis: None,
            confirms,
            fingerprint,
            reduced,
        };
        self.session.workflows[w].runs.push(entry.clone());
        self.session.in_flight = Some(InFlight {
            workflow: w,
            run_id: run_id.clone(),
        });
        self.save()?;
        self.hooks.run_started(&self.session, w, &entry);

        let events_file = run_dir.join(RUN_EVENTS_FILE);
        let label = format!(
            "{} · step {step} {increment}{}{}",
            self.session.workflows[w].name,
            if role == RunRole::Control {
                " (control)"
            } else {
                ""
            },
            entry
                .reduced
                .as_ref()
                .map(ReducedSteps::mark)
                .unwrap_or_default()
        );
        let (limit, why) = self.run_limit();
        // Said when the derived limit moves off the default (a given --timeout is known).
        if self.session.options.timeout_s.is_none()
            && self.last_limit.unwrap_or(DEFAULT_RUN_LIMIT) != limit
        {
            self.hooks.note(&format!(
                "per-run limit {} ({why})",
                units::compact_duration(limit)
            ));
            self.last_limit = Some(limit);
        }
        let stop_at = self.run_stop_at();
        let spec = RunSpec {
            run_id: &run_id,
            workflow: &workflow,
            cold: self.session.options.cold,
            timeout: Some(limit),
            stall: Some(self.stall_limit().0),
            stop_at,
            events_file: &events_file,
            label,
        };
        // Everything journaled so far (this run's files and in-flight entry, the last run's
        // record) is on disk before the GPU gets work.
        self.durable.wait()?;
        match self.backend.run(&spec) {
            Attempt::NotSubmitted(reason) => {
                self.hooks.note(&format!("not submitted: {reason}"));
                self.session.workflows[w]
                    .runs
                    .retain(|r| r.run_id != run_id);
                self.session.in_flight = None;
                let _ = std::fs::remove_dir_all(&run_dir);
                self.save()?;
                Ok(Submitted::Not(reason))
            }
            Attempt::Done(record) => {
                let outcome = self.finish_run(w, &run_id, *record, &workflow, false)?;
                Ok(Submitted::Done { run_id, outcome })
            }
        }
    }

    /// Journals a finished run: `run.json`, the index line, the session entry. Idempotent, so a
    /// kill between the steps is repaired on resume (`recovered`: the run was in flight when the
    /// tool died, so its index line may already be there).
    fn finish_run(
        &mut self,
        w: usize,
        run_id: &str,
        record: RunRecord,
        workflow: &Workflow,
        recovered: bool,
    ) -> Result<Outcome, JournalError> {
        let Some(i) = self.session.workflows[w]
            .runs
            .iter()
            .position(|r| r.run_id == run_id)
        else {
            return Err(JournalError::Invalid {
                path: self.paths.session_file(),
                reason: format!("run {run_id} is not in the journal"),
            });
        };
        let step = self.session.workflows[w].runs[i].step;
        let judged = self.judge_run(w, step, record, workflow, self.session.options.strict);
        let outcome = judged.outcome.clone();
        let entry = &mut self.session.workflows[w].runs[i];
        let (record, pressure) = judged.mark(entry);
        let entry = entry.clone();
        let components = self.write_run_files(w, &entry, workflow, record, pressure)?;
        tracing::debug!(run_id = %run_id, "run recorded (run.json written)");
        self.index(w, &entry, components, recovered)?;
        self.session.in_flight = None;
        self.saved()?;
        self.hooks.run_finished(&self.session, w, &entry);
        Ok(outcome)
    }

    /// Judges a finished run of ladder step `step`: its diagnosis, its outcome (`strict`: a pass
    /// through a memory fallback or under memory pressure is a failure), its summary and its
    /// memory pressure against the previous passing step.
    pub(super) fn judge_run(
        &self,
        w: usize,
        step: usize,
        mut record: RunRecord,
        workflow: &Workflow,
        strict: bool,
    ) -> JudgedRun {
        let diagnosis = super::evidence::diagnose_record(&record, workflow);
        if let Some(d) = &diagnosis {
            record.diagnosis = Some(d.clone());
        }
        let pressure = self.memory_pressure_at(w, step, &record, workflow);
        let mut outcome = super::evidence::outcome_with(&record, strict);
        let mut summary = super::evidence::summary_of(&record, diagnosis.as_ref(), Some(workflow));
        if step + 1 == self.session.workflows[w].steps.len() {
            // The target: the cues that its pass may hide memory pressure (`--walk-on-pass`).
            summary.walk_cues = super::walk::cues(&record, &summary, pressure.as_ref());
        }
        if let Some(p) = &pressure {
            summary.delivered.memory_pressure = p.words();
            if strict && outcome == Outcome::Passed {
                outcome = Outcome::MemoryPressure {
                    evidence: p.words(),
                };
                summary.stage = Some(p.stage());
            }
        }
        JudgedRun {
            record,
            outcome,
            summary,
            diagnosis,
            pressure,
        }
    }

    /// Writes a finished run's `server.log` and `run.json` (with its component and node hashes,
    /// environment and custom-pack classes); returns the component hashes for its index line.
    pub(super) fn write_run_files(
        &mut self,
        w: usize,
        entry: &RunEntry,
        workflow: &Workflow,
        record: RunRecord,
        memory_pressure: Option<super::pressure::MemoryPressure>,
    ) -> Result<Vec<ComponentHash>, JournalError> {
        let components = self.component_hashes(workflow, entry.fingerprint.as_deref());
        let node_hashes: std::collections::BTreeMap<String, String> = workflow
            .nodes
            .keys()
            .filter_map(|id| workflow.node_sha256(id).map(|h| (id.clone(), h)))
            .collect();
        let run_dir = self.paths.run_dir(entry);
        if !record.server_log.is_empty() {
            self.durable.write_atomic(
                &run_dir.join(crate::run::console::SERVER_LOG_FILE),
                record.server_log.as_bytes(),
            )?;
        }
        let file = RunFile {
            schema_version: SESSION_SCHEMA_VERSION,
            session_id: self.session.session_id.clone(),
            workflow: self.session.workflows[w].name.clone(),
            entry: entry.clone(),
            component_hashes: components.clone(),
            node_hashes,
            environment: entry
                .fingerprint
                .as_ref()
                .and_then(|id| self.session.fingerprints.get(id))
                .cloned(),
            custom_nodes: self.custom_nodes(workflow, entry.fingerprint.as_deref()),
            record,
            memory_pressure,
        };
        self.durable
            .write_json_atomic(&run_dir.join(RUN_RECORD_FILE), &file)?;
        Ok(components)
    }

    /// The memory pressure of a passed run of ladder step `step` (a ladder run, or a
    /// mitigation control on the target): its evidence against the previous passing step of the
    /// ladder that the journal has with a time per step.
    fn memory_pressure_at(
        &self,
        w: usize,
        step: usize,
        record: &RunRecord,
        workflow: &Workflow,
    ) -> Option<super::pressure::MemoryPressure> {
        let job = &self.session.workflows[w];
        let baseline = job
            .runs
            .iter()
            .filter(|r| r.step < step && r.passed() && r.role != RunRole::Control)
            .max_by_key(|r| r.step)
            .map(|r| {
                let work = self
                    .variant(w, r.step, RunRole::Search)
                    .ok()
                    .and_then(|(base, _)| super::pressure::work_of(&base));
                // Its console's loads, from its run.json (absent: none known).
                let events = read_json::<RunFile>(&self.paths.run_dir(r).join(RUN_RECORD_FILE))
                    .map(|f| f.record.memory_events)
                    .unwrap_or_default();
                super::pressure::Baseline::of(
                    r.step,
                    r.summary.as_ref().and_then(|s| s.s_per_step),
                    work,
                    &events,
                )
            });
        super::pressure::assess(
            record,
            super::pressure::work_of(workflow),
            baseline.as_ref(),
            self.session
                .options
                .max_slowdown
                .unwrap_or(super::pressure::DEFAULT_MAX_SLOWDOWN),
        )
    }

    /// The classes of `workflow` that come from a custom node pack, with the pack's version
    /// from the run's fingerprint (`fingerprint`) where it has one.
    pub(super) fn custom_nodes(
        &self,
        workflow: &Workflow,
        fingerprint: Option<&str>,
    ) -> Option<BTreeMap<String, PackOfClass>> {
        let classes: std::collections::BTreeSet<&str> = workflow
            .nodes
            .values()
            .map(|n| n.class_type.as_str())
            .collect();
        let classes: Vec<&str> = classes.into_iter().collect();
        let packs = self.backend.custom_classes(&classes)?;
        let fp = fingerprint.and_then(|id| self.session.fingerprints.get(id));
        Some(
            packs
                .into_iter()
                .map(|(class, pack)| {
                    let version = fp
                        .and_then(|f| f.pack(&pack))
                        .and_then(|p| p.version.clone());
                    (class, PackOfClass { pack, version })
                })
                .collect(),
        )
    }

    /// Appends the run's index line. Only a recovered run can already have one (a fresh run id
    /// cannot), so only then is the index read, which keeps a run's cost independent of how many
    /// runs `runs/` holds.
    fn index(
        &mut self,
        w: usize,
        entry: &RunEntry,
        components: Vec<ComponentHash>,
        recovered: bool,
    ) -> DriveResult {
        let runs_dir = self.paths.runs_dir.clone();
        if recovered
            && index::read_all(&runs_dir)?
                .iter()
                .any(|e| e.run_id == entry.run_id)
        {
            return Ok(());
        }
        let line = IndexEntry::of(
            &self.session.session_id,
            &self.session.workflows[w].name,
            entry,
            components,
            self.index_mark.clone(),
        );
        index::append_behind(&runs_dir, &line, &mut self.durable)
    }

    /// The run's model files hashed: under `--models-dir` when given, else in the server's own
    /// folders as the run's fingerprint describes them (`/internal/folder_paths` and the
    /// listings), when they are on this machine.
    pub(super) fn component_hashes(
        &mut self,
        workflow: &Workflow,
        fingerprint: Option<&str>,
    ) -> Vec<ComponentHash> {
        let prompt = workflow.to_value();
        let roots = self.session.options.models_dirs.clone();
        let hashes = if roots.is_empty() {
            let server = fingerprint
                .and_then(|id| self.session.fingerprints.get(id))
                .map(server_models)
                .unwrap_or_default();
            if self.hash_cache.is_none() && !server.folder_paths.is_empty() {
                self.hash_cache = Some(HashCache::open(
                    self.paths.runs_dir.join(crate::hashing::DEFAULT_CACHE_FILE),
                ));
            }
            crate::hashing::hash_server_components(&prompt, &server, self.hash_cache.as_mut())
        } else {
            crate::hashing::hash_components(&prompt, &roots, self.hash_cache.as_mut())
        };
        if let Some(cache) = self.hash_cache.as_mut() {
            let _ = cache.save();
        }
        hashes
    }

    /// Settles the run that was in flight when the tool died: `run.json` already written →
    /// journal it; else ask the server's history by prompt_id; else forget it (it is re-run).
    /// False when the session had to stop (server not back).
    fn settle_in_flight(&mut self) -> Result<bool, JournalError> {
        let Some(flight) = self.session.in_flight.clone() else {
            return Ok(true);
        };
        let w = flight.workflow;
        let Some(i) = self
            .session
            .workflows
            .get(w)
            .and_then(|job| job.runs.iter().position(|r| r.run_id == flight.run_id))
        else {
            self.session.in_flight = None;
            self.save()?;
            return Ok(true);
        };
        let entry = self.session.workflows[w].runs[i].clone();
        let run_dir = self.paths.run_dir(&entry);
        let (workflow, _) = self.variant(w, entry.step, entry.role)?;
        // Killed after run.json was written: finish the bookkeeping only.
        if let Ok(file) = read_json::<RunFile>(&run_dir.join(RUN_RECORD_FILE)) {
            self.finish_run(w, &entry.run_id, file.record, &workflow, true)?;
            return Ok(true);
        }
        loop {
            match self
                .backend
                .recover(&entry.run_id, &workflow, &run_dir.join(RUN_EVENTS_FILE))
            {
                Recovery::Finished(record) => {
                    self.hooks.note(&format!(
                        "run {} was finished by the server while comfy-bisect was down; recovered from its history",
                        entry.run_id
                    ));
                    let outcome = self.finish_run(w, &entry.run_id, *record, &workflow, true)?;
                    if matches!(outcome, Outcome::ServerLost { .. }) {
                        return self.ensure_server(w);
                    }
                    return Ok(true);
                }
                Recovery::Unknown => {
                    self.hooks.note(&format!(
                        "run {} is not in the server's history; it will be run again",
                        entry.run_id
                    ));
                    self.session.workflows[w].runs.remove(i);
                    self.session.in_flight = None;
                    let _ = std::fs::remove_dir_all(&run_dir);
                    self.save()?;
                    return Ok(true);
                }
                Recovery::Unreachable(reason) => {
                    self.hooks.note(&format!(
                        "cannot ask the server about the run in flight: {reason}"
                    ));
                    if !self.ensure_server(w)? {
                        return Ok(false);
                    }
                }
            }
        }
    }
}

/// What came of [`Driver::submit`].
enum Submitted {
    /// Nothing was submitted; why.
    Not(String),
    /// The run is journaled with this outcome.
    Done { run_id: String, outcome: Outcome },
}

/// What came of [`Driver::run_once`].
#[derive(Debug, Clone)]
pub enum RunResult {
    /// The run is journaled: its session entry.
    Done(Box<RunEntry>),
    /// Nothing was submitted (the server did not answer); why.
    NotSubmitted(String),
}

/// What the environment check before a run found.
enum EnvCheck {
    /// Same environment as the previous run (its fingerprint id, if the server gave one).
    Same(Option<String>),
    /// The environment changed: decide again in the new one.
    Changed,
    /// The environment changed and the session stopped (`--on-drift stop`).
    Stop,
}

/// A summary of a finished run for one-line output.
pub(crate) fn describe_run(entry: &RunEntry) -> String {
    let outcome = entry
        .outcome
        .as_ref()
        .map(|o| o.name())
        .unwrap_or("in flight");
    let stage = entry
        .summary
        .as_ref()
        .and_then(|s| s.stage)
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    format!(
        "step {} {}{} [{}] {}{}",
        entry.step,
        entry.increment,
        entry
            .reduced
            .as_ref()
            .map(ReducedSteps::mark)
            .unwrap_or_default(),
        serde_json::to_value(entry.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        outcome,
        stage
    )
}

/// What a fingerprint says about the server's model folders, for hashing without `--models-dir`.
fn server_models(fp: &Fingerprint) -> crate::hashing::ServerModels {
    crate::hashing::ServerModels {
        folder_paths: fp
            .model_paths
            .iter()
            .map(|(kind, dirs)| (kind.clone(), dirs.iter().map(PathBuf::from).collect()))
            .collect(),
        listed: fp
            .models
            .iter()
            .map(|f| {
                (
                    f.folder.clone(),
                    f.files.iter().map(|x| (x.name.clone(), x.size)).collect(),
                )
            })
            .collect(),
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
