//! The application façade: what a front end (the command line) calls to start a bisect session,
//! resume one, drive it to its end and say how it ended, plus the plan files and the look-ups of
//! sessions and runs in runs folders. It owns the wiring of a session — the per-server lock, the
//! preflight, the live backend, the stop signals (Ctrl-C, SIGTERM, SIGHUP), the hooks (progress
//! line and report rewrites), the reports at the end — and takes plain options (no
//! argument-parser types). It returns typed results; printing them is the caller's job, and
//! the caller supplies the progress display (a [`Progress`] handle on its own sink).

use crate::comfy::{Client, SystemStats};
use crate::ladder::Plan;
use crate::nodedefs::NodeDefs;
use crate::session::driver::{Driver, Hooks, SystemClock};
use crate::session::index::{self, IndexEntry};
use crate::session::journal::{
    read_json, RunEntry, SessionFile, SessionOptions, SessionPaths, SessionState, StopReason,
    SESSION_FILE,
};
use crate::session::live::LiveBackend;
use crate::session::lock::SessionLock;
use crate::session::prepare::{prepare, LadderConfig, Prepared, Problems};
use crate::session::progress::Progress;
use crate::session::setup::{create_session, PreparedWorkflow};
use crate::session::{folders, Phase, Verdict};
use crate::workflow::ui::{write_variant, Converted};
use crate::workflow::Workflow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What kind of failure stopped a façade call (the caller picks its exit code from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input: a session that cannot be found or read.
    Input,
    /// The work could not be done (lock held, journal not writable, driver error).
    Failed,
    /// The server could not be reached.
    Unreachable,
}

/// A failure of a façade call: its kind and the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl AppError {
    fn new(kind: ErrorKind, message: impl std::fmt::Display) -> AppError {
        AppError {
            kind,
            message: message.to_string(),
        }
    }
}

/// `Result` of the façade.
pub type AppResult<T> = Result<T, AppError>;

trait Kind<T> {
    fn kind(self, kind: ErrorKind) -> AppResult<T>;
}

impl<T, E: std::fmt::Display> Kind<T> for Result<T, E> {
    fn kind(self, kind: ErrorKind) -> AppResult<T> {
        self.map_err(|e| AppError::new(kind, e))
    }
}

/// One workflow to bisect.
pub struct Target {
    /// Short unique name (the folder under `workflows/`).
    pub name: String,
    /// The path as given.
    pub source: String,
    /// The target, API format.
    pub workflow: Workflow,
    /// The UI document and its conversion, when the input was a UI workflow: every variant is
    /// then also written back as a UI workflow.
    pub ui: Option<(serde_json::Value, Converted)>,
}

/// What starting a session needs besides the server and the workflows.
pub struct StartOptions {
    /// Where sessions are written.
    pub runs_dir: PathBuf,
    /// The session's options (as recorded in its journal).
    pub session: SessionOptions,
    /// How each workflow's ladder is planned.
    pub ladder: LadderConfig,
}

/// A started session: ready to drive, or stopped by preflight problems.
pub enum Started {
    /// Saved, the lock held: [`Ready::drive`] runs it.
    Ready(Box<Ready>),
    /// Preflight found problems in some workflows; the session is saved as stopped
    /// (`resume` runs the others once the problems are fixed) and its reports are written.
    Problems(Box<PreflightStopped>),
}

/// A saved session about to run, holding the server's lock.
pub struct Ready {
    client: Client,
    /// None when `--allow-shared-server` runs beside another session's lock.
    lock: Option<SessionLock>,
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal as saved.
    pub session: SessionFile,
}

/// A session stopped by preflight problems.
pub struct PreflightStopped {
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal (state `Stopped { Preflight }`).
    pub session: SessionFile,
    /// Each failing workflow's name and problems.
    pub problems: Vec<(String, Problems)>,
    /// Why the journal could not be saved, when it could not (the rest still holds).
    pub save_error: Option<String>,
}

/// A session that was driven to its end or its stop.
pub struct Finished {
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal at the end.
    pub session: SessionFile,
}

impl Finished {
    /// Each workflow's verdict and where the journal and report are, one line each.
    pub fn summary(&self) -> String {
        summary(&self.paths, &self.session)
    }
}

/// Checks the server answers and fetches its node definitions (preflight, before GPU time).
pub fn server_preflight(
    rt: &tokio::runtime::Runtime,
    client: &Client,
) -> Result<(NodeDefs, SystemStats), String> {
    let url = client.server_url();
    let (stats, info) = rt.block_on(async {
        let stats = client.system_stats().await;
        let info = client.object_info(None).await;
        (stats, info)
    });
    let stats = stats.map_err(|e| format!("cannot use ComfyUI at {url}: {e}. {}", e.advice()))?;
    let info =
        info.map_err(|e| format!("cannot get node definitions from {url}/object_info: {e}"))?;
    let defs = NodeDefs::from_value(&info)
        .ok_or_else(|| format!("{url}/object_info did not answer an object of node classes"))?;
    Ok((defs, stats))
}

/// Plans and validates `targets`; those with problems are kept (their verdict says so) and
/// also returned with their problems.
fn prepare_all(
    targets: Vec<Target>,
    defs: &NodeDefs,
    config: &LadderConfig,
) -> (Vec<PreparedWorkflow>, Vec<(String, Problems)>) {
    let mut ready = Vec::new();
    let mut failed = Vec::new();
    for Target {
        name,
        source,
        workflow,
        ui,
    } in targets
    {
        match prepare(&name, &source, workflow, ui.as_ref(), defs, config) {
            Prepared::Ready(w) => ready.push(*w),
            Prepared::Problems { workflow, problems } => {
                failed.push((workflow.name.clone(), problems));
                ready.push(*workflow);
            }
        }
    }
    (ready, failed)
}

/// Starts a session on `client`'s server: takes the server's lock (before anything is
/// written), preflights the server, plans and validates every target, creates and saves the
/// session. Errors: the lock is held or the journal cannot be written (`Failed`), the server
/// does not answer (`Unreachable`).
pub fn start(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: StartOptions,
    targets: Vec<Target>,
) -> AppResult<Started> {
    let StartOptions {
        runs_dir,
        session: session_options,
        ladder,
    } = options;
    // One bisection per GPU: taken before anything is written.
    let mut lock = SessionLock::acquire_or_share(
        &client.server_url(),
        "(starting)",
        session_options.allow_shared_server,
    )
    .kind(ErrorKind::Failed)?;
    let (defs, environment) = server_preflight(rt, &client).kind(ErrorKind::Unreachable)?;
    let (prepared, failed) = prepare_all(targets, &defs, &ladder);
    let verdicts: Vec<Option<Verdict>> = prepared
        .iter()
        .map(|w| {
            failed
                .iter()
                .find(|(n, _)| *n == w.name)
                .and_then(|(_, p)| p.verdict())
        })
        .collect();
    let (paths, mut session) =
        create_session(&runs_dir, &client.server_url(), session_options, prepared)
            .kind(ErrorKind::Failed)?;
    // Whoever is refused from now on is told which session holds the server.
    if let Err(e) = lock
        .as_mut()
        .map_or(Ok(()), |l| l.set_session(&session.session_id))
    {
        tracing::warn!("could not write the session id into the lock file: {e}");
    }
    session.environment = Some(environment);
    for (job, verdict) in session.workflows.iter_mut().zip(verdicts) {
        if verdict.is_some() {
            job.phase = Phase::Done;
            job.verdict = verdict;
        }
    }
    if !failed.is_empty() {
        session.state = SessionState::Stopped {
            reason: StopReason::Preflight,
            detail: format!(
                "preflight found problems in {} workflow(s); install what is listed, then `{}` runs the others",
                failed.len(),
                crate::shell::resume_command(&session.session_id, Some(&paths.runs_dir))
            ),
        };
        // The problems and the summary still matter more than the journal.
        let save_error = session.save(&paths).err().map(|e| e.to_string());
        write_reports(&paths.dir, &Progress::silent());
        return Ok(Started::Problems(Box::new(PreflightStopped {
            paths,
            session,
            problems: failed,
            save_error,
        })));
    }
    session.save(&paths).kind(ErrorKind::Failed)?;
    Ok(Started::Ready(Box::new(Ready {
        client,
        lock,
        paths,
        session,
    })))
}

impl Ready {
    /// Drives the session to its end (or its stop) on the live server, showing its progress
    /// and per-run lines on `progress`.
    pub fn drive(self, rt: &tokio::runtime::Runtime, progress: Progress) -> AppResult<Finished> {
        drive(
            rt,
            self.client,
            self.paths,
            self.session,
            progress,
            self.lock,
        )
    }
}

/// How `resume` changes the session's deadline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DeadlineChange {
    /// Keep the recorded deadline.
    #[default]
    Keep,
    /// Drop it.
    Drop,
    /// A new deadline, RFC 3339.
    Set(String),
}

/// What resuming a session changes and where to find it.
#[derive(Debug, Clone)]
pub struct ResumeOptions {
    /// The runs folder to look in.
    pub runs_dir: PathBuf,
    /// Session id, a unique prefix of it, or the session folder; `None` takes the unfinished
    /// session of `runs_dir` written last ([`latest_unfinished`]).
    pub session: Option<String>,
    /// The deadline from now on.
    pub deadline: DeadlineChange,
    /// A new wait for a server that went away.
    pub wait_server: Option<Duration>,
    /// A new grace after the deadline for a run still going.
    pub deadline_grace: Option<Duration>,
    /// `--allow-shared-server` given to `resume` (recorded; never turned off by its absence).
    pub allow_shared_server: bool,
}

/// A session found for resuming.
pub enum Resumed {
    /// Nothing left to run: the session has ended and no run is in flight.
    Finished(Finished),
    /// Runs are left; the changed options are saved. [`Pending::drive`] continues it.
    Pending(Pending),
}

/// A session with runs left, its changed options saved.
pub struct Pending {
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal as saved.
    pub session: SessionFile,
    /// What was found and done on the way (orphan run folders removed or kept), one line each.
    pub notes: Vec<String>,
}

/// Finds and loads a session, applies the new deadline and server wait (a start time that has
/// passed no longer applies) and saves it unless it has already ended. Errors: the session is
/// not found or unreadable (`Input`), the journal cannot be written (`Failed`).
pub fn resume(options: ResumeOptions) -> AppResult<Resumed> {
    let paths = match &options.session {
        Some(query) => find_session(&options.runs_dir, query),
        None => latest_unfinished(&options.runs_dir),
    }
    .kind(ErrorKind::Input)?;
    if crate::session::check::is_check(&paths.dir) {
        return Err(AppError::new(
            ErrorKind::Input,
            format!(
                "{} is a `check` (one run for git bisect), not a bisect session: nothing to resume; run the check again",
                paths.dir.display()
            ),
        ));
    }
    let mut session = SessionFile::load(&paths).kind(ErrorKind::Input)?;
    match options.deadline {
        DeadlineChange::Keep => {}
        DeadlineChange::Drop => session.options.deadline = None,
        DeadlineChange::Set(t) => session.options.deadline = Some(t),
    }
    if let Some(w) = options.wait_server {
        session.options.wait_server_s = w.as_secs();
    }
    if let Some(g) = options.deadline_grace {
        session.options.deadline_grace_s = Some(g.as_secs());
    }
    session.options.start_at = None;
    session.options.allow_shared_server |= options.allow_shared_server;
    // A kill between creating a run folder and journaling its run leaves a folder the journal
    // does not know: removed when it holds only its workflow (never submitted), else reported.
    let notes = crate::session::journal::settle_orphan_runs(&paths, &session);
    if session.is_finished() && session.in_flight.is_none() {
        for note in &notes {
            tracing::warn!("{note}");
        }
        return Ok(Resumed::Finished(Finished { paths, session }));
    }
    session.save(&paths).kind(ErrorKind::Failed)?;
    Ok(Resumed::Pending(Pending {
        paths,
        session,
        notes,
    }))
}

impl Pending {
    /// Continues the session on `client` (which should reach `session.server`): takes the
    /// server's lock (unless the session allows a shared server and another holds it), then
    /// drives as [`Ready::drive`]. Completed runs are never re-run.
    pub fn drive(
        self,
        rt: &tokio::runtime::Runtime,
        client: Client,
        progress: Progress,
    ) -> AppResult<Finished> {
        let lock = SessionLock::acquire_or_share(
            &self.session.server,
            &self.session.session_id,
            self.session.options.allow_shared_server,
        )
        .kind(ErrorKind::Failed)?;
        drive(rt, client, self.paths, self.session, progress, lock)
    }
}

/// The hooks of a live session: the progress line and the report after every change.
pub(crate) struct SessionHooks {
    /// The progress display.
    pub progress: Progress,
    /// Keeps the report's rewrites to a small share of the session's time.
    pub report: ReportThrottle,
}

/// When the report may be rewritten. Rebuilding it reads every run record of the session, so
/// its cost grows with the session; a rewrite is skipped while less than twenty times the last
/// rewrite's duration has passed since it was written (the report costs at most about 5 % of
/// the session's time). With real GPU runs (seconds to hours) that is after every run; with
/// runs of milliseconds (a simulator) every few runs. The session always writes it at the end.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReportThrottle {
    last: Option<(Instant, Duration)>,
}

impl ReportThrottle {
    /// Whether a rewrite is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        match self.last {
            None => true,
            Some((at, took)) => now.saturating_duration_since(at) >= took * 20,
        }
    }

    /// Records a rewrite that ended at `at` and took `took`.
    pub fn wrote(&mut self, at: Instant, took: Duration) {
        self.last = Some((at, took));
    }
}

impl Hooks for SessionHooks {
    fn run_started(&mut self, session: &SessionFile, workflow: usize, entry: &RunEntry) {
        self.progress.run_started(session, workflow, entry);
    }
    fn run_finished(&mut self, session: &SessionFile, workflow: usize, entry: &RunEntry) {
        self.progress.run_finished(session, workflow, entry);
    }
    fn journal_updated(&mut self, paths: &SessionPaths, _session: &SessionFile) {
        if !self.report.due(Instant::now()) {
            return;
        }
        let start = Instant::now();
        write_reports(&paths.dir, &self.progress);
        let end = Instant::now();
        self.report.wrote(end, end - start);
    }
    fn note(&mut self, text: &str) {
        self.progress.note(text);
    }
    fn estimate(&mut self, run: Option<Duration>, session_left: Option<Duration>) {
        self.progress.estimate(run, session_left);
    }
}

/// The report call site: `report.md` and `report.json` in the session folder (redacted).
fn write_reports(session_dir: &Path, progress: &Progress) {
    if let Err(e) = crate::report::write_session_reports(session_dir, true) {
        progress.println(&format!("warning: could not write the report: {e:#}"));
    }
}

/// Drives a session to its end (or its stop) on the live server, holding `lock` (None: a shared
/// server, `--allow-shared-server`): the live backend, Ctrl-C (stops between runs and interrupts the run in flight), the
/// hooks, and the reports at the end.
fn drive(
    rt: &tokio::runtime::Runtime,
    client: Client,
    paths: SessionPaths,
    session: SessionFile,
    progress: Progress,
    lock: Option<SessionLock>,
) -> AppResult<Finished> {
    let _lock = lock;
    let (result, session) = with_live_driver(rt, client, &paths, session, progress, |d| d.drive());
    result.kind(ErrorKind::Failed)?;
    Ok(Finished { paths, session })
}

/// Runs `work` with a driver on the live server: the live backend with progress and restarts,
/// Ctrl-C/SIGTERM (stops between runs and interrupts the run in flight), the hooks; writes the
/// reports after. Returns what `work` returned and the journal as it ended.
fn with_live_driver<R>(
    rt: &tokio::runtime::Runtime,
    client: Client,
    paths: &SessionPaths,
    session: SessionFile,
    progress: Progress,
    work: impl FnOnce(&mut Driver<'_, LiveBackend, SystemClock>) -> R,
) -> (R, SessionFile) {
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let backend = LiveBackend::new(rt.handle().clone(), client, cancel_rx)
        .with_progress(progress.clone())
        .with_restart(
            Duration::from_secs(session.options.restart_timeout_s),
            paths.dir.join(crate::session::restart::RESTART_LOG),
        );
    let mut hooks = SessionHooks {
        progress: progress.clone(),
        report: ReportThrottle::default(),
    };
    let mut driver = Driver::new(paths.clone(), session, backend, SystemClock, &mut hooks);
    let stop = driver.stop_flag();
    let ctrl_c = rt.spawn(async move {
        if stop_signal().await.is_some() {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = cancel_tx.send(true);
        }
    });
    let result = work(&mut driver);
    ctrl_c.abort();
    progress.finish();
    write_reports(&paths.dir, &progress);
    let session = driver.session.clone();
    (result, session)
}

/// What `mitigate SESSION` (and `bisect --mitigate`) needs besides the server.
#[derive(Debug, Clone)]
pub struct MitigateRequest {
    /// The runs folder to look in.
    pub runs_dir: PathBuf,
    /// Session id, a unique prefix of it, or the session folder.
    pub session: String,
    /// `--max-mitigations N`.
    pub max: Option<usize>,
    /// `--launch-cmd 'TEMPLATE {args}'`.
    pub launch_cmd: Option<String>,
    /// The node catalog (`--catalog FILE` added to the built-in one).
    pub catalog: crate::catalog::Catalog,
    /// Run beside another session's lock.
    pub allow_shared_server: bool,
}

/// A session after a mitigation pass.
pub struct Mitigated {
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal.
    pub session: SessionFile,
    /// What was considered, run and judged.
    pub mitigations: crate::session::journal::MitigationsFile,
    /// How the pass ended.
    pub end: crate::session::mitigate::MitigateEnd,
}

impl Mitigated {
    /// True when some control passed.
    pub fn any_passed(&self) -> bool {
        self.mitigations
            .workflows
            .iter()
            .flat_map(|w| &w.controls)
            .any(|c| c.judged.as_ref().is_some_and(|j| j.passed))
    }

    /// One line per control of each workflow: its outcome or why it did not run.
    pub fn summary(&self) -> String {
        use crate::session::journal::MitigationState;
        let mut out = String::new();
        for w in &self.mitigations.workflows {
            out.push_str(&format!(
                "{}: mitigations for the failure at {}{}\n",
                w.workflow,
                w.stage,
                w.failing_node
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ));
            for c in &w.controls {
                let what = match (&c.state, &c.judged) {
                    (MitigationState::Done, Some(j)) => j.outcome.clone(),
                    (MitigationState::NotRun { reason }, _) => format!("not run: {reason}"),
                    (MitigationState::NotApplicable { .. }, _) => continue,
                    (MitigationState::InFlight, _) => "in flight".into(),
                    _ => "pending".into(),
                };
                out.push_str(&format!("  {}: {what}\n", c.control));
            }
        }
        for line in &self.mitigations.server {
            out.push_str(&format!("server: {line}\n"));
        }
        if self.mitigations.workflows.is_empty() {
            out.push_str("no workflow of the session has a located failure: nothing to mitigate\n");
        }
        if let crate::session::mitigate::MitigateEnd::Stopped(why) = &self.end {
            out.push_str(&format!("stopped: {why}\n"));
        }
        out.push_str(&format!(
            "mitigations: {}\nreport: {}\n",
            self.paths
                .dir
                .join(crate::session::journal::MITIGATIONS_FILE)
                .display(),
            self.paths.dir.join("report.md").display()
        ));
        out
    }
}

/// Runs the mitigations of a session's located failures on `client`'s server (see
/// `session::mitigate`): takes the server's lock, fetches the node definitions, drives, and
/// rewrites the reports. Errors: session not found or a `check` (`Input`), server unreachable
/// (`Unreachable`), lock held or journal not writable (`Failed`).
pub fn mitigate(
    rt: &tokio::runtime::Runtime,
    client: Client,
    request: MitigateRequest,
    progress: Progress,
) -> AppResult<Mitigated> {
    let paths = find_session(&request.runs_dir, &request.session).kind(ErrorKind::Input)?;
    if crate::session::check::is_check(&paths.dir) {
        return Err(AppError::new(
            ErrorKind::Input,
            format!(
                "{} is a `check` (one run for git bisect), not a bisect session: there is no located failure to mitigate",
                paths.dir.display()
            ),
        ));
    }
    let session = SessionFile::load(&paths).kind(ErrorKind::Input)?;
    let _lock = SessionLock::acquire_or_share(
        &session.server,
        &session.session_id,
        request.allow_shared_server || session.options.allow_shared_server,
    )
    .kind(ErrorKind::Failed)?;
    let (defs, _) = server_preflight(rt, &client).kind(ErrorKind::Unreachable)?;
    let options = crate::session::mitigate::MitigateOptions {
        max: request.max,
        launch_cmd: request.launch_cmd.clone(),
        defs,
        catalog: request.catalog.clone(),
    };
    let (end, session) = with_live_driver(rt, client, &paths, session, progress, |d| {
        crate::session::mitigate::mitigate(d, &options)
    });
    let end = end.kind(ErrorKind::Failed)?;
    let mitigations = crate::session::mitigate::load(&paths.dir).kind(ErrorKind::Failed)?;
    Ok(Mitigated {
        paths,
        session,
        mitigations,
        end,
    })
}

/// Before a bisect's first request: a server that does not answer is started with
/// `--restart-cmd` (its output in `runs_dir/restart.log`) and waited for up to `--wait-server`,
/// as the session does for a server lost later. Without `--restart-cmd` it is waited for only
/// when `--wait-server` was given (`wait_given`): a mistyped address fails at once. Error:
/// still no answer (`Unreachable`).
pub fn bring_up(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    options: &SessionOptions,
    runs_dir: &Path,
    progress: &Progress,
    wait_given: bool,
) -> AppResult<()> {
    if options.restart_cmd.is_none() && !wait_given {
        return Ok(());
    }
    let log = runs_dir.join(crate::session::restart::RESTART_LOG);
    let restart = options.restart_cmd.as_deref().map(|cmd| {
        let _ = std::fs::create_dir_all(runs_dir);
        (
            cmd,
            Duration::from_secs(options.restart_timeout_s),
            log.as_path(),
        )
    });
    let wait = Duration::from_secs(options.wait_server_s);
    crate::session::restart::bring_up(rt.handle(), client, restart, wait, &mut |t| {
        progress.println(t)
    })
    .kind(ErrorKind::Unreachable)
}

/// Runs `check`: one run of a workflow as given on a freshly (re)started server, answered as
/// `git bisect run` reads exit statuses (see [`crate::session::check`]); Ctrl-C, SIGTERM and
/// SIGHUP interrupt it. Errors: bad input (`Input`), the journal cannot be written (`Failed`).
pub fn check(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: crate::session::check::CheckOptions,
) -> AppResult<crate::session::check::CheckRecord> {
    use crate::session::check::CheckError;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let signals = rt.spawn(async move {
        if stop_signal().await.is_some() {
            let _ = cancel_tx.send(true);
        }
    });
    let result = crate::session::check::check(rt.handle(), client, options, cancel_rx);
    signals.abort();
    result.map_err(|e| match e {
        CheckError::Input(m) => AppError::new(ErrorKind::Input, m),
        CheckError::Journal(e) => AppError::new(ErrorKind::Failed, e),
    })
}

/// Waits for a signal that asks the tool to stop: Ctrl-C (SIGINT), and on Unix SIGTERM (what
/// systemd, Docker, Kubernetes and Slurm send) and SIGHUP (the terminal went away). All three
/// are handled alike: our prompt is interrupted on the server, the run and the session are
/// recorded as interrupted, and the process exits with status 130. Returns the signal's name;
/// `None` when no handler could be installed.
pub async fn stop_signal() -> Option<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return tokio::signal::ctrl_c().await.ok().map(|()| "SIGINT");
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.ok().map(|()| "SIGINT"),
            _ = term.recv() => Some("SIGTERM"),
            _ = hup.recv() => Some("SIGHUP"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.ok().map(|()| "SIGINT")
    }
}

/// How `submit` runs one workflow.
#[derive(Debug, Clone)]
pub struct SubmitOptions {
    /// Free models and memory first (`--warm` turns it off).
    pub cold: bool,
    /// Longest run, from submission.
    pub timeout: Duration,
    /// Longest time without an event for our running prompt.
    pub stall_timeout: Duration,
    /// `/system_stats` sampling interval.
    pub sample_interval: Duration,
}

/// Runs `workflow` once on the server (`submit`): checks that the server answers, interrupts
/// only our prompt on Ctrl-C, SIGTERM or SIGHUP (`on_signal` is told the signal's name; a
/// second one exits at once with 130), samples the local server's process when there is one,
/// and returns the run's record. Error: the server does not answer (`Unreachable`).
pub async fn submit(
    client: &Client,
    workflow: Workflow,
    options: &SubmitOptions,
    observer: &mut dyn crate::run::RunObserver,
    on_signal: fn(&str),
) -> AppResult<crate::run::RunRecord> {
    if let Err(e) = client.system_stats().await {
        return Err(AppError {
            kind: ErrorKind::Unreachable,
            message: format!("{e}\n{}.", e.advice()),
        });
    }
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(async move {
        if let Some(signal) = stop_signal().await {
            on_signal(signal);
            let _ = cancel_tx.send(true);
            if stop_signal().await.is_some() {
                std::process::exit(130);
            }
        }
    });
    let mut request = crate::run::RunRequest::new(workflow);
    request.cold = options.cold;
    request.timeout = options.timeout;
    request.stall_timeout = options.stall_timeout;
    request.sample_interval = options.sample_interval;
    request.cancel = Some(cancel_rx);
    request.server_process = crate::host::process::locate(&client.server_url()).into_request();
    let record = crate::run::execute_with(client, request, observer).await;
    watcher.abort();
    Ok(record)
}

/// The command that continues a session that stopped before its end (`None` once done).
pub fn resume_command(paths: &SessionPaths, session: &SessionFile) -> Option<String> {
    if !matches!(session.state, SessionState::Stopped { .. }) {
        return None;
    }
    Some(crate::shell::resume_command(
        &session.session_id,
        Some(&paths.runs_dir),
    ))
}

/// Each workflow's verdict and where the session and report are, one line each.
pub fn summary(paths: &SessionPaths, session: &SessionFile) -> String {
    let mut out = format!("session {}\n", session.session_id);
    for job in &session.workflows {
        let verdict = job.headline().unwrap_or_else(|| "not started".into());
        out.push_str(&format!("  {}: {verdict}\n", job.name));
    }
    if let SessionState::Stopped { detail, .. } = &session.state {
        out.push_str(&format!("  stopped: {detail}\n"));
    }
    out.push_str(&format!("  journal: {}\n", paths.session_file().display()));
    let report = paths.dir.join("report.md");
    if report.exists() {
        out.push_str(&format!("  report:  {}\n", report.display()));
    }
    out
}

/// The session of `runs_dir` to resume when none is named: among those with runs left or a run
/// in flight, the one whose journal was written last (`updated_at`, then the id).
pub fn latest_unfinished(runs_dir: &Path) -> Result<SessionPaths, String> {
    let entries = std::fs::read_dir(runs_dir).map_err(|e| {
        format!(
            "cannot read the runs folder {}: {e} (pass --runs-dir DIR, or the session id)",
            runs_dir.display()
        )
    })?;
    let mut best: Option<(String, String)> = None;
    for entry in entries.filter_map(Result::ok) {
        let id = entry.file_name().to_string_lossy().into_owned();
        let paths = SessionPaths::new(runs_dir, &id);
        if !paths.session_file().is_file() || crate::session::check::is_check(&paths.dir) {
            continue;
        }
        // An unreadable journal is not a candidate; `resume ID` says what is wrong with it.
        let Ok(session) = SessionFile::load(&paths) else {
            continue;
        };
        if session.is_finished() && session.in_flight.is_none() {
            continue;
        }
        let key = (session.updated_at.clone(), id);
        if best.as_ref().is_none_or(|b| key > *b) {
            best = Some(key);
        }
    }
    match best {
        Some((_, id)) => Ok(SessionPaths::new(runs_dir, &id)),
        None => Err(format!(
            "no unfinished session in {} to resume (`comfy-bisect runs` lists the sessions; pass an id or --runs-dir DIR)",
            runs_dir.display()
        )),
    }
}

/// Finds a session folder from an id, a unique id prefix or a path.
pub fn find_session(runs_dir: &Path, query: &str) -> Result<SessionPaths, String> {
    let as_path = Path::new(query);
    if as_path.join(SESSION_FILE).is_file() {
        let dir = as_path.to_path_buf();
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let runs = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        return Ok(SessionPaths::new(&runs, &id));
    }
    let entries = std::fs::read_dir(runs_dir).map_err(|e| {
        format!(
            "cannot read the runs folder {}: {e} (pass --runs-dir DIR)",
            runs_dir.display()
        )
    })?;
    let mut matches: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(SESSION_FILE).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(query))
        .collect();
    matches.sort();
    if let Some(exact) = matches.iter().find(|m| *m == query) {
        return Ok(SessionPaths::new(runs_dir, exact));
    }
    match matches.len() {
        0 => Err(format!(
            "no session '{query}' in {} (`comfy-bisect runs` lists them)",
            runs_dir.display()
        )),
        1 => Ok(SessionPaths::new(runs_dir, &matches[0])),
        _ => Err(format!(
            "'{query}' matches several sessions: {}; give more of the id",
            matches.join(", ")
        )),
    }
}

/// Finds the session folder: `session` as a folder holding session.json, else a session id or
/// unique id prefix under the runs folders. An id in more than one runs folder is an error
/// naming them (never one picked silently).
pub fn resolve_session(session: &str, runs_dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let as_path = Path::new(session);
    if as_path.join(SESSION_FILE).is_file() {
        return Ok(as_path.to_path_buf());
    }
    let where_ = runs_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let exact: Vec<PathBuf> = runs_dirs
        .iter()
        .map(|d| d.join(session))
        .filter(|p| p.join(SESSION_FILE).is_file())
        .collect();
    match exact.len() {
        1 => return Ok(exact[0].clone()),
        0 => {}
        _ => {
            return Err(folders::Duplicate {
                what: "session",
                id: session.to_string(),
                places: exact
                    .iter()
                    .filter_map(|p| p.parent().map(Path::to_path_buf))
                    .collect(),
            }
            .to_string())
        }
    }
    let mut matches: Vec<PathBuf> = Vec::new();
    let mut unreadable = Vec::new();
    for runs_dir in runs_dirs {
        match std::fs::read_dir(runs_dir) {
            Ok(entries) => matches.extend(entries.filter_map(Result::ok).map(|e| e.path()).filter(
                |p| {
                    p.join(SESSION_FILE).is_file()
                        && p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(session))
                },
            )),
            Err(e) => unreadable.push(format!(
                "cannot read the runs folder {} ({e})",
                runs_dir.display()
            )),
        }
    }
    if matches.is_empty() && !unreadable.is_empty() {
        return Err(format!(
            "no session {session:?}: {}; pass --runs-dir DIR or the session folder",
            unreadable.join("; ")
        ));
    }
    matches.sort();
    let names: Vec<String> = matches
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(format!(
            "no session {session:?} under {where_}: `comfy-bisect runs --runs-dir {}` lists the sessions",
            runs_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" --runs-dir ")
        )),
        _ if names.iter().all(|n| *n == names[0]) => Err(folders::Duplicate {
            what: "session",
            id: names[0].clone(),
            places: matches
                .iter()
                .filter_map(|p| p.parent().map(Path::to_path_buf))
                .collect(),
        }
        .to_string()),
        _ => Err(format!(
            "{session:?} matches {} sessions under {where_} ({}); give more of the id",
            matches.len(),
            names.join(", ")
        )),
    }
}

/// The runs of a runs folder: its index entries, plus the runs of sessions whose index lines
/// are missing (a copied runs folder).
pub fn run_entries(runs_dir: &Path) -> Vec<IndexEntry> {
    let mut entries = index::read_all(runs_dir).unwrap_or_default();
    let Ok(dirs) = std::fs::read_dir(runs_dir) else {
        return entries;
    };
    for dir in dirs.filter_map(Result::ok) {
        let Ok(session) = read_json::<SessionFile>(&dir.path().join(SESSION_FILE)) else {
            continue;
        };
        for job in &session.workflows {
            for run in &job.runs {
                if entries.iter().any(|e| e.run_id == run.run_id) {
                    continue;
                }
                entries.push(IndexEntry {
                    run_id: run.run_id.clone(),
                    session_id: session.session_id.clone(),
                    workflow: job.name.clone(),
                    step: run.step,
                    increment: run.increment.clone(),
                    role: run.role,
                    workflow_sha256: run.workflow_sha256.clone(),
                    component_hashes: vec![],
                    outcome: run
                        .outcome
                        .as_ref()
                        .map(|o| o.name().to_string())
                        .unwrap_or_else(|| "in_flight".into()),
                    memory_fallbacks: run
                        .summary
                        .as_ref()
                        .map(|s| s.delivered.memory_fallbacks.clone())
                        .unwrap_or_default(),
                    memory_pressure: run
                        .summary
                        .as_ref()
                        .map(|s| s.delivered.memory_pressure.clone())
                        .unwrap_or_default(),
                    dir: format!("{}/{}", session.session_id, run.dir),
                    finished_at: run.finished_at.clone().unwrap_or_default(),
                    fingerprint: run.fingerprint.clone(),
                    check: None,
                });
            }
        }
    }
    entries
}

/// The UI workflow a plan was made from, for writing each step back as a UI file.
pub struct UiSource<'a> {
    /// The original UI document.
    pub document: &'a serde_json::Value,
    /// Its conversion (provenance for the write-back).
    pub converted: &'a Converted,
    /// The node definitions it was converted with.
    pub defs: &'a NodeDefs,
}

/// Writes `dir/plan.json` and every step's workflow file; with a UI source also
/// `NN-<increment>.ui.json`, the original UI file with the same edits made the UI way. Returns
/// a warning for each step that has no faithful UI form (only its API file is written).
pub fn write_plan(planned: &Plan, dir: &Path, ui: Option<UiSource>) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output folder '{}': {e}", dir.display()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write '{}': {e}", path.display()))
    };
    let mut warnings = Vec::new();
    for step in &planned.steps {
        write(&step.file, step.workflow.to_pretty_json() + "\n")?;
        if let Some(ui) = &ui {
            match write_variant(ui.document, ui.converted, &step.edits, ui.defs) {
                Ok(doc) => write(
                    &ui_file_name(&step.file),
                    serde_json::to_string_pretty(&doc).expect("JSON values serialize") + "\n",
                )?,
                Err(e) => warnings.push(format!(
                    "step {} ({}) has no faithful UI form, only the API file is written: {e}",
                    step.index,
                    step.increment.name()
                )),
            }
        }
    }
    write(
        "plan.json",
        serde_json::to_string_pretty(&planned.to_json()).expect("JSON values serialize") + "\n",
    )?;
    Ok(warnings)
}

/// `03-lora.json` → `03-lora.ui.json`.
fn ui_file_name(api_file: &str) -> String {
    match api_file.strip_suffix(".json") {
        Some(stem) => format!("{stem}.ui.json"),
        None => format!("{api_file}.ui.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_rewrite_waits_twenty_times_its_own_duration() {
        let t0 = Instant::now();
        let mut throttle = ReportThrottle::default();
        assert!(throttle.due(t0), "the first report is always written");
        throttle.wrote(t0, Duration::from_millis(20));
        assert!(!throttle.due(t0 + Duration::from_millis(5)));
        assert!(!throttle.due(t0 + Duration::from_millis(399)));
        assert!(throttle.due(t0 + Duration::from_millis(400)));
        // A GPU run of seconds is longer than twenty report rewrites.
        assert!(throttle.due(t0 + Duration::from_secs(3)));
    }

    #[test]
    fn ui_files_are_named_after_their_api_files() {
        assert_eq!(ui_file_name("03-lora.json"), "03-lora.ui.json");
        assert_eq!(ui_file_name("plan"), "plan.ui.json");
    }

    fn write_session(runs: &Path, id: &str) {
        let dir = runs.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SESSION_FILE), "{}").unwrap();
    }

    #[test]
    fn sessions_are_found_by_id_prefix_or_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path();
        write_session(runs, "20260101-aaaa");
        write_session(runs, "20260101-aaab");
        write_session(runs, "20260102-bbbb");
        let found = find_session(runs, "20260102").unwrap();
        assert_eq!(found.dir, runs.join("20260102-bbbb"));
        let by_folder = find_session(
            Path::new("elsewhere"),
            &runs.join("20260101-aaaa").display().to_string(),
        )
        .unwrap();
        assert_eq!(by_folder.dir, runs.join("20260101-aaaa"));
        let ambiguous = find_session(runs, "20260101-aaa").unwrap_err();
        assert!(ambiguous.contains("several sessions"), "{ambiguous}");
        assert!(find_session(runs, "2027")
            .unwrap_err()
            .contains("no session"));
        assert_eq!(
            resolve_session("20260102", &[runs.to_path_buf()]).unwrap(),
            runs.join("20260102-bbbb")
        );
    }

    #[test]
    fn resume_of_a_missing_session_is_an_input_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = match resume(ResumeOptions {
            runs_dir: tmp.path().to_path_buf(),
            session: Some("nope".into()),
            deadline: DeadlineChange::Drop,
            wait_server: None,
            deadline_grace: None,
            allow_shared_server: false,
        }) {
            Err(e) => e,
            Ok(_) => panic!("a missing session resumed"),
        };
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(err.message.contains("no session 'nope'"), "{}", err.message);
    }
}
