//! `comfy-bisect bisect WORKFLOW...`: preflight, then bisect each workflow's ladder on the server,
//! journaling everything under the runs folder. Also the pieces `resume` and `demo` share:
//! driving a session with the live backend, the hooks (progress + report), the summary.

use super::common::{
    fetch_object_info, print_error, read_loaded_with, CliResult, ConnectArgs, Connection, OrExit,
};
use crate::error::exit;
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::Client;
use comfy_bisect_core::ladder::{Increment, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::session::driver::{Driver, Hooks, SystemClock};
use comfy_bisect_core::session::journal::{
    RunEntry, SessionFile, SessionOptions, SessionPaths, SessionState, StopReason, Strategy,
};
use comfy_bisect_core::session::live::LiveBackend;
use comfy_bisect_core::session::lock::SessionLock;
use comfy_bisect_core::session::prepare::{prepare, LadderConfig, Prepared};
use comfy_bisect_core::session::progress::ProgressView;
use comfy_bisect_core::session::schedule::{local_zone, parse_duration, parse_when, rfc3339};
use comfy_bisect_core::session::setup::{create_session, unique_name, PreparedWorkflow};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `bisect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Failing workflow(s): API format, a POST /prompt body, or a UI workflow (converted with
    /// the server's node definitions; every variant is also written as a UI workflow). Several
    /// run one after another.
    #[arg(required = true)]
    pub workflows: Vec<PathBuf>,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub ladder: LadderArgs,
}

/// Options shared by `bisect` and `demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    /// Where sessions are written.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    /// linear: one increment per run until the first failure; binary: bisection (assumes
    /// failures are monotone along the ladder).
    #[arg(long, value_enum, default_value = "linear")]
    pub strategy: Strategy,
    /// Re-run the first failing and last passing steps N more times; disagreement = flaky.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub repeat: u32,
    /// Re-run a run that crashed the server or timed out up to N times before it counts as a
    /// failure; a passing re-run means "crash not reproduced" (0 = a crash counts at once).
    #[arg(long, default_value_t = comfy_bisect_core::session::journal::DEFAULT_CONFIRM_CRASHES, value_name = "N")]
    pub confirm_crashes: u32,
    /// When the server's environment changes between runs (versions, launch arguments, node
    /// packs, devices): reanchor = re-run the last passing step under it and go on; stop = end
    /// the session ("incomplete: environment changed").
    #[arg(long, value_enum, default_value = "reanchor", value_name = "ACTION")]
    pub on_drift: comfy_bisect_core::session::journal::OnDrift,
    /// After the first failure, also run minimal + each later increment alone.
    #[arg(long)]
    pub controls: bool,
    /// Do not run the target first: it is known to fail.
    #[arg(long)]
    pub assume_fails: bool,
    /// Count a run that only passed through a silent memory fallback (ComfyUI's tiled VAE
    /// decode/encode retry after an OOM) as a failure (kind `memory_fallback`).
    #[arg(long)]
    pub strict: bool,
    /// Longest run (e.g. 30m, 1h30m).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Free models and memory before every run (the default).
    #[arg(long, overrides_with = "warm")]
    pub cold: bool,
    /// Keep models loaded between runs.
    #[arg(long, overrides_with = "cold")]
    pub warm: bool,
    /// How long to wait for a server that went away.
    #[arg(long, default_value = "10m", value_name = "D", value_parser = parse_duration)]
    pub wait_server: Duration,
    /// Shell command that restarts ComfyUI (run after a crash; before every run with --restart-each).
    #[arg(long, value_name = "CMD")]
    pub restart_cmd: Option<String>,
    /// Run --restart-cmd before every run.
    #[arg(long, requires = "restart_cmd")]
    pub restart_each: bool,
    /// Longest --restart-cmd run; past it the command and every process it started are killed
    /// (its output is in the session's restart.log).
    #[arg(long, default_value = "5m", value_name = "D", value_parser = crate::cli::common::parse_positive_duration)]
    pub restart_timeout: Duration,
    /// Wait until this time before the first run: HH:MM (local) or RFC 3339.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Stop cleanly between runs at this time: HH:MM (local) or RFC 3339.
    #[arg(long, value_name = "TIME")]
    pub deadline: Option<String>,
    /// ComfyUI models/ root for component hashes (repeatable).
    #[arg(long = "models-dir", value_name = "DIR")]
    pub models_dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// No progress line and no per-run lines (the summary is still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// How the ladder is planned (the options of `plan`).
#[derive(Debug, Clone, clap::Args)]
pub struct LadderArgs {
    /// Short side of the minimal resolution in pixels (0 = each node's declared minimum).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub min_resolution: u32,
    /// Least frame count of the minimal variant (rounded up to the node's grid, e.g. 4n+1).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub min_frames: u32,
    /// Also cap sampling steps at N in the minimal variant (adds a `steps` increment).
    #[arg(long, value_name = "N")]
    pub min_steps: Option<u32>,
    /// Ladder order, comma-separated (unlisted increments follow in the default order):
    /// resolution,frames,batch,models,lora,quantization,cache,postprocess,steps.
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = super::common::increment_parser())]
    pub order: Vec<Increment>,
    /// Keep these increments at the target value in every variant (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "INCREMENT", value_parser = super::common::increment_parser())]
    pub keep: Vec<Increment>,
    /// TOML file declaring roles of custom node classes (see docs/ladder.md).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
}

impl LadderArgs {
    /// The built-in catalog, plus the `--catalog` file's roles when given.
    pub fn catalog(&self) -> Result<Catalog, String> {
        match &self.catalog {
            Some(path) => Catalog::load_file(path)
                .map(|user| Catalog::builtin().with_user(user))
                .map_err(|e| e.to_string()),
            None => Ok(Catalog::builtin()),
        }
    }

    /// The planning options.
    pub(crate) fn plan_options(&self) -> PlanOptions {
        let mut order = self.order.clone();
        for inc in Increment::LADDER {
            if !order.contains(&inc) {
                order.push(inc);
            }
        }
        PlanOptions {
            min_resolution: self.min_resolution,
            min_frames: self.min_frames,
            min_steps: self.min_steps,
            order,
            keep: self.keep.clone(),
        }
    }

    /// The arguments as given, for the session record.
    pub(crate) fn as_args(&self) -> Vec<String> {
        let mut out = vec![
            format!("--min-resolution={}", self.min_resolution),
            format!("--min-frames={}", self.min_frames),
        ];
        if let Some(s) = self.min_steps {
            out.push(format!("--min-steps={s}"));
        }
        if !self.order.is_empty() {
            let names: Vec<&str> = self.order.iter().map(|i| i.name()).collect();
            out.push(format!("--order={}", names.join(",")));
        }
        if !self.keep.is_empty() {
            let names: Vec<&str> = self.keep.iter().map(|i| i.name()).collect();
            out.push(format!("--keep={}", names.join(",")));
        }
        out
    }
}

impl SessionArgs {
    /// The session options (times resolved to RFC 3339).
    pub fn options(&self, ladder: &LadderArgs) -> Result<SessionOptions, String> {
        let now = jiff::Timestamp::now();
        let (zone, warning) = local_zone();
        let needs_local = |t: &Option<String>| t.as_deref().is_some_and(|t| t.trim().len() <= 5);
        if needs_local(&self.start_at) || needs_local(&self.deadline) {
            if let Some(w) = warning {
                eprintln!("warning: {w}");
            }
        }
        let when = |t: &Option<String>, flag: &str| {
            t.as_deref()
                .map(|t| parse_when(t, now, &zone).map_err(|e| format!("{flag}: {e}")))
                .transpose()
        };
        let start_at = when(&self.start_at, "--start-at")?;
        let deadline = when(&self.deadline, "--deadline")?;
        if let (Some(s), Some(d)) = (&start_at, &deadline) {
            if d.timestamp() <= s.timestamp() {
                return Err(format!(
                    "--deadline {} is not after --start-at {}; nothing could run",
                    rfc3339(d),
                    rfc3339(s)
                ));
            }
        }
        let start_at = start_at.as_ref().map(rfc3339);
        let deadline = deadline.as_ref().map(rfc3339);
        Ok(SessionOptions {
            strategy: self.strategy,
            repeat: self.repeat,
            controls: self.controls,
            assume_fails: self.assume_fails,
            strict: self.strict,
            timeout_s: self.timeout.map(|d| d.as_secs().max(1)),
            cold: !self.warm,
            wait_server_s: self.wait_server.as_secs(),
            restart_cmd: self.restart_cmd.clone(),
            restart_each: self.restart_each,
            restart_timeout_s: self.restart_timeout.as_secs().max(1),
            deadline,
            start_at,
            models_dirs: self.models_dirs.clone(),
            plan_args: ladder.as_args(),
            confirm_crashes: self.confirm_crashes,
            on_drift: self.on_drift,
        })
    }
}

/// The hooks of a command-line session: the progress line and the report after every change.
pub(crate) struct SessionHooks {
    /// The progress line.
    pub progress: ProgressView,
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
}

/// The report call site: `report.md` and `report.json` in the session folder (redacted).
pub(crate) fn write_reports(session_dir: &Path, progress: &ProgressView) {
    if let Err(e) = comfy_bisect_core::report::write_session_reports(session_dir, true) {
        progress.println(&format!("warning: could not write the report: {e:#}"));
    }
}

/// Checks the server answers and fetches its node definitions (preflight, before GPU time).
pub fn server_preflight(
    rt: &tokio::runtime::Runtime,
    client: &Client,
) -> Result<(NodeDefs, comfy_bisect_core::comfy::SystemStats), String> {
    let url = client.server_url();
    let (stats, info) = rt.block_on(async {
        let stats = client.system_stats().await;
        let info = client.object_info(None).await;
        (stats, info)
    });
    let stats = stats.map_err(|e| {
        format!("cannot reach ComfyUI at {url}: {e}. Is it running (check --listen/--port), and is --server right?")
    })?;
    let info =
        info.map_err(|e| format!("cannot get node definitions from {url}/object_info: {e}"))?;
    let defs = NodeDefs::from_value(&info)
        .ok_or_else(|| format!("{url}/object_info did not answer an object of node classes"))?;
    Ok((defs, stats))
}

/// Plans and validates `targets` (name, source, workflow); prints the problems of those that fail.
pub(crate) fn prepare_all(
    targets: Vec<Target>,
    defs: &NodeDefs,
    config: &LadderConfig,
) -> (
    Vec<PreparedWorkflow>,
    Vec<(String, comfy_bisect_core::session::prepare::Problems)>,
) {
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

/// Drives a session to its end (or its stop) on the live server; returns the exit code.
pub(crate) fn drive_session(
    rt: &tokio::runtime::Runtime,
    client: Client,
    paths: SessionPaths,
    session: SessionFile,
    quiet: bool,
    lock: Option<SessionLock>,
) -> CliResult {
    let _lock = match lock {
        Some(l) => l,
        None => SessionLock::acquire(&paths.runs_dir, &session.server, &session.session_id)
            .or_failed()?,
    };
    let progress = ProgressView::new(quiet);
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let backend = LiveBackend::new(rt.handle().clone(), client, cancel_rx)
        .with_progress(progress.clone())
        .with_restart(
            Duration::from_secs(session.options.restart_timeout_s),
            paths
                .dir
                .join(comfy_bisect_core::session::restart::RESTART_LOG),
        );
    let mut hooks = SessionHooks {
        progress: progress.clone(),
        report: ReportThrottle::default(),
    };
    let mut driver = Driver::new(paths.clone(), session, backend, SystemClock, &mut hooks);
    let stop = driver.stop_flag();
    let ctrl_c = rt.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = cancel_tx.send(true);
        }
    });
    let result = driver.drive();
    ctrl_c.abort();
    progress.finish();
    write_reports(&paths.dir, &progress);
    result.or_failed()?;
    let session = driver.session.clone();
    print_summary(&paths, &session);
    Ok(exit_code(&session))
}

/// The exit code of a session: 0 every workflow has a verdict, 130 interrupted, 3 server lost,
/// 1 otherwise (preflight problems, deadline, errors).
pub fn exit_code(session: &SessionFile) -> u8 {
    match &session.state {
        SessionState::Done => exit::OK,
        SessionState::Stopped { reason, .. } => match reason {
            StopReason::Interrupted => exit::INTERRUPTED,
            StopReason::ServerLost => exit::UNREACHABLE,
            StopReason::Deadline
            | StopReason::Preflight
            | StopReason::Error
            | StopReason::EnvironmentChanged => exit::FAILED,
        },
        _ => exit::FAILED,
    }
}

/// Prints each workflow's verdict and where the session and report are.
pub(crate) fn print_summary(paths: &SessionPaths, session: &SessionFile) {
    println!("session {}", session.session_id);
    for job in &session.workflows {
        let verdict = job
            .verdict
            .as_ref()
            .map(|v| v.headline())
            .unwrap_or_else(|| "not started".into());
        println!("  {}: {verdict}", job.name);
    }
    if let SessionState::Stopped { detail, .. } = &session.state {
        println!("  stopped: {detail}");
    }
    println!("  journal: {}", paths.session_file().display());
    let report = paths.dir.join("report.md");
    if report.exists() {
        println!("  report:  {}", report.display());
    }
}

/// One workflow to bisect.
pub struct Target {
    /// Short unique name (the folder under `workflows/`).
    pub name: String,
    /// The path as given.
    pub source: String,
    /// The target, API format.
    pub workflow: comfy_bisect_core::workflow::Workflow,
    /// The UI document and its conversion, when the input was a UI workflow: every variant is
    /// then also written back as a UI workflow.
    pub ui: Option<(
        serde_json::Value,
        comfy_bisect_core::workflow::ui::Converted,
    )>,
}

/// Runs `bisect`.
pub fn run(args: Args, server: &str) -> CliResult {
    let options = args.session.options(&args.ladder).or_usage()?;
    let catalog = args.ladder.catalog().or_usage()?;
    // One client for every request (headers, URL credentials, request timeout).
    let connection = args.session.connect.connect(server)?;
    let mut targets = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for path in &args.workflows {
        // UI workflows are converted with the server's node definitions.
        let loaded = read_loaded_with(path, || {
            fetch_object_info(&connection).map_err(|e| e.to_string())
        })
        .or_usage()?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = unique_name(&stem, &names);
        names.push(name.clone());
        targets.push(Target {
            name,
            source: path.display().to_string(),
            workflow: loaded.workflow,
            ui: loaded.ui,
        });
    }
    let config = LadderConfig {
        catalog,
        options: args.ladder.plan_options(),
        controls: args.session.controls,
    };
    let Connection { client, runtime } = connection;
    start_session(
        &runtime,
        client,
        &args.session.runs_dir,
        options,
        targets,
        &config,
        args.session.quiet,
    )
}

/// Preflight, session creation and the drive; shared by `bisect` and `demo`.
pub(crate) fn start_session(
    rt: &tokio::runtime::Runtime,
    client: Client,
    runs_dir: &Path,
    options: SessionOptions,
    targets: Vec<Target>,
    config: &LadderConfig,
    quiet: bool,
) -> CliResult {
    // One bisection per GPU: taken before anything is written.
    let mut lock =
        SessionLock::acquire(runs_dir, &client.server_url(), "(starting)").or_failed()?;
    let (defs, environment) = server_preflight(rt, &client).or_unreachable()?;
    let (prepared, failed) = prepare_all(targets, &defs, config);
    let verdicts: Vec<Option<comfy_bisect_core::session::Verdict>> = prepared
        .iter()
        .map(|w| {
            failed
                .iter()
                .find(|(n, _)| *n == w.name)
                .and_then(|(_, p)| p.verdict())
        })
        .collect();
    let (paths, mut session) =
        create_session(runs_dir, &client.server_url(), options, prepared).or_failed()?;
    // Whoever is refused from now on is told which session holds the server.
    if let Err(e) = lock.set_session(&session.session_id) {
        tracing::warn!("could not write the session id into the lock file: {e}");
    }
    session.environment = Some(environment);
    for (job, verdict) in session.workflows.iter_mut().zip(verdicts) {
        if verdict.is_some() {
            job.phase = comfy_bisect_core::session::Phase::Done;
            job.verdict = verdict;
        }
    }
    if !failed.is_empty() {
        for (name, problems) in &failed {
            eprint!("{}", problems.render(name));
        }
        session.state = SessionState::Stopped {
            reason: StopReason::Preflight,
            detail: format!(
                "preflight found problems in {} workflow(s); install what is listed, then `comfy-bisect resume {}` runs the others",
                failed.len(),
                session.session_id
            ),
        };
        if let Err(e) = session.save(&paths) {
            // The problems and the summary below still matter more than the journal.
            print_error(&e);
        }
        write_reports(&paths.dir, &ProgressView::new(true));
        print_summary(&paths, &session);
        return Ok(exit::FAILED);
    }
    session.save(&paths).or_failed()?;
    if !quiet {
        let steps: Vec<String> = session
            .workflows
            .iter()
            .map(|w| format!("{} ({} steps)", w.name, w.steps.len()))
            .collect();
        eprintln!(
            "session {} in {}: {}",
            session.session_id,
            paths.dir.display(),
            steps.join(", ")
        );
    }
    drive_session(rt, client, paths, session, quiet, Some(lock))
}

#[cfg(test)]
mod tests {
    use super::ReportThrottle;
    use std::time::{Duration, Instant};

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
}
