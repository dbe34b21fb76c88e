//! Starting, resuming and driving a bisect session on the live server: the lock, the
//! preflight, the live backend with its progress and report hooks, the stop signals, the
//! reports at the end.

use super::lookup::{latest_unfinished, summary};
use super::{AppError, AppResult, ErrorKind, Kind};
use crate::comfy::{Client, SystemStats};
use crate::nodedefs::NodeDefs;
use crate::server::lock::SessionLock;
use crate::session::driver::{Driver, Hooks, SystemClock};
use crate::session::journal::{
    RunEntry, SessionFile, SessionOptions, SessionPaths, SessionState, StopReason,
};
use crate::session::live::LiveBackend;
use crate::session::prepare::{prepare, LadderConfig, Prepared, Problems};
use crate::session::progress::Progress;
use crate::session::setup::{create_session, PreparedWorkflow};
use crate::session::{Phase, Verdict};
use crate::workflow::ui::Converted;
use crate::workflow::Workflow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One workflow to bisect.
pub struct Target {
    /// Short unique name (the folder under `workflows/`).
    pub name: String,
    /// The path as given.
    pub source: String,
    /// The image, audio or video file ComfyUI saved that the target was read from, when it was
    /// one (recorded in the journal).
    pub source_file: Option<crate::workflow::embedded::SourceFile>,
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
    /// Preflight found problems in every workflow; the session is saved as stopped and its
    /// reports are written.
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
    /// The workflows preflight skipped (verdict `preflight_failed`) and what it found: the
    /// queue goes on with the others.
    pub skipped: Vec<(String, Problems)>,
}

/// A session stopped by preflight problems (every workflow had some).
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
        source_file,
        workflow,
        ui,
    } in targets
    {
        match prepare(&name, &source, workflow, ui.as_ref(), defs, config) {
            Prepared::Ready(mut w) => {
                w.source_file = source_file;
                ready.push(*w)
            }
            Prepared::Problems {
                mut workflow,
                problems,
            } => {
                workflow.source_file = source_file;
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
    // A workflow with problems is skipped (its verdict says what is missing); the queue goes
    // on with the others. Only when every workflow has problems does the session stop.
    if !failed.is_empty() && failed.len() == session.workflows.len() {
        let detail = if failed.len() == 1 {
            "preflight found problems in the workflow; nothing was run".to_string()
        } else {
            format!(
                "preflight found problems in each of the {} workflows; nothing was run",
                failed.len()
            )
        };
        session.state = SessionState::Stopped {
            reason: StopReason::Preflight,
            detail,
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
        skipped: failed,
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
    /// session of `runs_dir` written last (`latest_unfinished`).
    pub session: Option<String>,
    /// The deadline from now on.
    pub deadline: DeadlineChange,
    /// A new wait for a server that went away.
    pub wait_server: Option<Duration>,
    /// A new grace after the deadline for a run still going.
    pub deadline_grace: Option<Duration>,
    /// `--allow-shared-server` given to `resume` (recorded; never turned off by its absence).
    pub allow_shared_server: bool,
    /// `--server URL`: continue on this server (a port that changed after a reboot); the move
    /// is recorded in the journal and named in the report.
    pub server: Option<String>,
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
        Some(query) => super::lookup::find_session_text(&options.runs_dir, query),
        None => latest_unfinished(&options.runs_dir),
    }
    .kind(ErrorKind::Input)?;
    if crate::check::is_check(&paths.dir) {
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
    let moved = move_session(&mut session, options.server.as_deref());
    // A kill between creating a run folder and journaling its run leaves a folder the journal
    // does not know: removed when it holds only its workflow (never submitted), else reported.
    let mut notes = crate::session::journal::settle_orphan_runs(&paths, &session);
    let did_move = moved.is_some();
    notes.extend(moved);
    // A workflow preflight skipped is checked again on the server (`Pending::take_server`).
    if !session.has_runs_left() && session.skipped_by_preflight().is_empty() {
        if did_move {
            session.save(&paths).kind(ErrorKind::Failed)?;
        }
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

/// Moves `session` to `server` (`--server` given to `resume` or `mitigate`: a port that
/// changed after a reboot), recorded in its `server_moves` (the report's session line names
/// it); the move in words, `None` when no server was given or it is the session's already.
/// The caller saves the journal.
pub(crate) fn move_session(session: &mut SessionFile, server: Option<&str>) -> Option<String> {
    let to = server?.trim_end_matches('/');
    if !session.move_to_server(to) {
        return None;
    }
    let from = session
        .server_moves
        .last()
        .map(|m| m.from.as_str())
        .unwrap_or_default();
    Some(format!("the session moves to {to} (it ran on {from})"))
}

impl Pending {
    /// Continues the session on `client` (which should reach `session.server`):
    /// [`Pending::take_server`], then [`Continuing::drive`]. Completed runs are never re-run.
    pub fn drive(
        self,
        rt: &tokio::runtime::Runtime,
        client: Client,
        progress: Progress,
    ) -> AppResult<Finished> {
        self.take_server(rt, client)?.drive(rt, progress)
    }

    /// Takes the server's lock (unless the session allows a shared server and another holds
    /// it), then runs preflight again for every workflow preflight skipped: one that passes
    /// now gets its ladder and is bisected with the others, one that still fails keeps its
    /// verdict with the refreshed list (both journaled, `preflight_rechecks`). Errors: the lock
    /// is held or the journal cannot be written (`Failed`), the server does not answer
    /// (`Unreachable`, only when a workflow was skipped).
    pub fn take_server(
        self,
        rt: &tokio::runtime::Runtime,
        client: Client,
    ) -> AppResult<Continuing> {
        let Pending {
            paths, mut session, ..
        } = self;
        let lock = SessionLock::acquire_or_share(
            &session.server,
            &session.session_id,
            session.options.allow_shared_server,
        )
        .kind(ErrorKind::Failed)?;
        let mut rechecked = Vec::new();
        if !session.skipped_by_preflight().is_empty() {
            let (defs, _) = server_preflight(rt, &client).kind(ErrorKind::Unreachable)?;
            rechecked = crate::session::recheck::recheck_skipped(&paths, &mut session, &defs)
                .kind(ErrorKind::Failed)?;
        }
        Ok(Continuing {
            client,
            lock,
            paths,
            session,
            rechecked,
        })
    }
}

/// A resumed session holding the server's lock, its skipped workflows checked again.
pub struct Continuing {
    client: Client,
    lock: Option<SessionLock>,
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal as saved.
    pub session: SessionFile,
    /// What preflight said of each workflow it had skipped, checked again (empty when none
    /// was skipped).
    pub rechecked: Vec<crate::session::recheck::Rechecked>,
}

impl Continuing {
    /// True when runs are left (a workflow without its verdict, or a run in flight).
    pub fn has_runs_left(&self) -> bool {
        self.session.has_runs_left()
    }

    /// Drives the session as [`Ready::drive`]; when nothing is left to run (every skipped
    /// workflow still fails preflight) only the reports are rewritten.
    pub fn drive(self, rt: &tokio::runtime::Runtime, progress: Progress) -> AppResult<Finished> {
        let Continuing {
            client,
            lock,
            paths,
            session,
            ..
        } = self;
        if !session.has_runs_left() && crate::server::relaunch::left_changed(&paths.dir).is_none() {
            write_reports(&paths.dir, &progress);
            return Ok(Finished { paths, session });
        }
        drive(rt, client, paths, session, progress, lock)
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
    pub(crate) fn due(&self, now: Instant) -> bool {
        match self.last {
            None => true,
            Some((at, took)) => now.saturating_duration_since(at) >= took * 20,
        }
    }

    /// Records a rewrite that ended at `at` and took `took`.
    pub(crate) fn wrote(&mut self, at: Instant, took: Duration) {
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
    let (result, session) = with_live_driver(rt, client, &paths, session, progress, |d| {
        // A server a killed mitigation pass left changed is put back before any run.
        if !crate::controls::put_back_left_changed(d)? {
            return Err(crate::session::journal::JournalError::Invalid {
                path: d.paths.dir.join(crate::session::journal::MITIGATIONS_FILE),
                reason: "the server could not be put back as it was (the file's `server` lines say how to do it by hand)".into(),
            });
        }
        d.drive()
    });
    result.kind(ErrorKind::Failed)?;
    Ok(Finished { paths, session })
}

/// Runs `work` with a driver on the live server: the live backend with progress and restarts,
/// Ctrl-C/SIGTERM (stops between runs and interrupts the run in flight), the hooks; writes the
/// reports after. Returns what `work` returned and the journal as it ended.
pub(super) fn with_live_driver<R>(
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
            paths.dir.join(crate::server::restart::RESTART_LOG),
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
    let log = runs_dir.join(crate::server::restart::RESTART_LOG);
    let restart = options.restart_cmd.as_deref().map(|cmd| {
        let _ = std::fs::create_dir_all(runs_dir);
        (
            cmd,
            Duration::from_secs(options.restart_timeout_s),
            log.as_path(),
        )
    });
    let wait = Duration::from_secs(options.wait_server_s);
    crate::server::restart::bring_up(rt.handle(), client, restart, wait, &mut |t| {
        progress.println(t)
    })
    .kind(ErrorKind::Unreachable)
}

/// Waits for a signal that asks the tool to stop: Ctrl-C (SIGINT), on Unix SIGTERM (what
/// systemd, Docker, Kubernetes and Slurm send) and SIGHUP (the terminal went away), on Windows
/// Ctrl-Break. All are handled alike: our prompt is interrupted on the server, the run and the
/// session are recorded as interrupted, and the process exits with status 130. Returns the
/// signal's name; `None` when no handler could be installed.
pub(crate) async fn stop_signal() -> Option<&'static str> {
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
    #[cfg(windows)]
    {
        let Ok(mut ctrl_break) = tokio::signal::windows::ctrl_break() else {
            return tokio::signal::ctrl_c().await.ok().map(|()| "SIGINT");
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.ok().map(|()| "SIGINT"),
            _ = ctrl_break.recv() => Some("Ctrl-Break"),
        }
    }
    #[cfg(not(any(unix, windows)))]
    {
        tokio::signal::ctrl_c().await.ok().map(|()| "SIGINT")
    }
}

/// The ladder order of a plan: the increments as given (`--order`), then the others in the
/// default order.
pub fn ladder_order(given: &[crate::ladder::Increment]) -> Vec<crate::ladder::Increment> {
    crate::session::prepare::full_order(given)
}

/// Checks that a bisect's options hold together: the deadline after the start (else nothing
/// could run), `--full-step-target` only with a few-step search. The error says what to change.
pub fn check_options(options: &SessionOptions) -> AppResult<()> {
    check_options_text(options).kind(ErrorKind::Input)
}

/// [`check_options`] with its error as text (the façade's callers get an [`AppError`](super::AppError)).
fn check_options_text(options: &SessionOptions) -> Result<(), String> {
    let at = |t: &Option<String>| t.as_deref().and_then(|t| t.parse::<jiff::Timestamp>().ok());
    if let (Some(s), Some(d)) = (at(&options.start_at), at(&options.deadline)) {
        if d <= s {
            return Err(format!(
                "--deadline {} is not after --start-at {}; nothing could run",
                options.deadline.as_deref().unwrap_or_default(),
                options.start_at.as_deref().unwrap_or_default()
            ));
        }
    }
    if options.full_step_target && options.search_steps.is_none() {
        return Err(
            "--full-step-target needs a few-step search (--search-sampler-steps N): with \
             --search-sampler-steps full every run is at the workflow's own steps already; \
             drop one of the two options"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_that_cannot_run_together_are_refused() {
        let options = SessionOptions {
            start_at: Some("2026-03-29T07:00:00+02:00".into()),
            deadline: Some("2026-03-29T05:00:00Z".into()),
            ..SessionOptions::default()
        };
        let e = check_options(&options).unwrap_err();
        assert!(e.message.contains("is not after --start-at"), "{e}");
        assert_eq!(e.kind, ErrorKind::Input);
        let later = SessionOptions {
            deadline: Some("2026-03-29T05:00:01Z".into()),
            ..options
        };
        assert_eq!(check_options(&later), Ok(()));
        let full = SessionOptions {
            full_step_target: true,
            search_steps: None,
            ..SessionOptions::default()
        };
        assert!(check_options(&full)
            .unwrap_err()
            .message
            .contains("--full-step-target"));
        let order = ladder_order(&[crate::ladder::Increment::Lora]);
        assert_eq!(order[0], crate::ladder::Increment::Lora);
        assert_eq!(order.len(), crate::ladder::Increment::LADDER.len());
    }

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
    fn resume_of_a_missing_session_is_an_input_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = match resume(ResumeOptions {
            runs_dir: tmp.path().to_path_buf(),
            session: Some("nope".into()),
            deadline: DeadlineChange::Drop,
            wait_server: None,
            deadline_grace: None,
            allow_shared_server: false,
            server: None,
        }) {
            Err(e) => e,
            Ok(_) => panic!("a missing session resumed"),
        };
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(err.message.contains("no session 'nope'"), "{}", err.message);
    }
}
