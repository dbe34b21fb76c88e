//! `comfy-bisect bisect WORKFLOW...`: preflight, then bisect each workflow's ladder on the server,
//! journaling everything under the runs folder (the work is [`comfy_bisect_core::app`]'s). Also
//! the arguments `demo` and `plan` share (session and ladder options) and the printing `demo`
//! and `resume` share (the session line, the summary, the exit code).

use super::common::{
    fetch_object_info, print_error, read_loaded_with, CliError, CliResult, ConnectArgs, Connection,
    OrExit,
};
use super::schedule::{local_zone, parse_duration, parse_when, rfc3339};
use crate::cli::progress::ProgressView;
use crate::error::exit;
use comfy_bisect_core::app::{self, Finished, MitigateRequest, StartOptions, Started, Target};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::Client;
use comfy_bisect_core::ladder::{Increment, PlanOptions};
use comfy_bisect_core::session::journal::{SessionFile, SessionOptions, SessionState, StopReason};
use comfy_bisect_core::session::prepare::LadderConfig;
use comfy_bisect_core::session::setup::unique_name;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `bisect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// Failing workflow(s): API format, a POST /prompt body, or a UI workflow (converted with
    /// the server's node definitions; every variant is also written as a UI workflow). Several
    /// run one after another.
    #[arg(required = true)]
    pub workflows: Vec<PathBuf>,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub ladder: LadderArgs,
    /// After the verdict, in the same session, run the single-change controls for the failing
    /// stage on the target (what `mitigate SESSION` does; docs/mitigations.md).
    #[arg(long)]
    pub mitigate: bool,
    #[command(flatten)]
    pub mitigations: super::mitigate::MitigateArgs,
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
    pub strategy: super::choices::StrategyArg,
    /// Re-run the first failing and last passing steps N more times; disagreement = flaky.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub repeat: u32,
    /// Re-run a run that crashed the server or timed out up to N times before it counts as a
    /// failure; a passing re-run means "crash not reproduced" (0 = a crash counts at once).
    #[arg(long, default_value_t = comfy_bisect_core::session::journal::DEFAULT_CONFIRM_CRASHES, value_name = "N")]
    pub confirm_crashes: u32,
    /// Search with samplers and schedulers capped at N steps (never more than the workflow's
    /// own), then confirm the boundary at the workflow's own steps (the verdict is the one a
    /// full-step search gives); `full` runs every run at the workflow's own steps.
    #[arg(long, default_value_t = SearchSteps(Some(comfy_bisect_core::session::journal::DEFAULT_SEARCH_STEPS)), value_name = "N|full", value_parser = parse_search_steps)]
    pub search_steps: SearchSteps,
    /// With --search-steps N: run the target at its own steps too. A failure that needs many
    /// steps then wastes no reduced target: on the benchmark the search stayed within full-step
    /// binary search plus one full-step run in every case, at the price of the saving on the
    /// target, most often the largest run (docs/sessions.md).
    #[arg(long)]
    pub full_step_target: bool,
    /// When the server's environment changes between runs (versions, launch arguments, node
    /// packs, devices): reanchor = re-run the last passing step under it and go on; stop = end
    /// the session ("incomplete: environment changed").
    #[arg(long, value_enum, default_value = "reanchor", value_name = "ACTION")]
    pub on_drift: super::choices::OnDriftArg,
    /// After the first failure, also run minimal + each later increment alone.
    #[arg(long)]
    pub controls: bool,
    /// Run even when another comfy-bisect session is using the same server (same resolved
    /// address, whatever its runs folder): both sessions' memory peaks and out-of-memory errors
    /// then include the other's. Recorded in the session.
    #[arg(long)]
    pub allow_shared_server: bool,
    /// Do not run the target first: it is known to fail.
    #[arg(long)]
    pub assume_fails: bool,
    /// Count a run that only passed through a silent memory fallback (ComfyUI's tiled VAE
    /// decode/encode retry after an OOM) as a failure (kind `memory_fallback`), and one that
    /// passed under memory pressure too (kind `memory_pressure`).
    #[arg(long)]
    pub strict: bool,
    /// When the target passes: walk the ladder from step 1, one step at a time, to the first
    /// step under memory pressure. auto = when the passing target shows a cue (pressure, a
    /// partial load, a model staged at or above the card, its VRAM peak at the card's total);
    /// always; never = end with "could not reproduce".
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub walk_on_pass: super::choices::WalkOnPassArg,
    /// Memory pressure from a slowdown: a step may take F times what the added work explains
    /// (attention at most quadratic in latent pixels × frames × batch) before it counts; also
    /// the factor for steps slowing within one run. Default 1.5.
    #[arg(long, value_name = "F", value_parser = parse_slowdown)]
    pub max_slowdown: Option<f64>,
    /// Longest run (e.g. 30m, 1h30m). Default: 8 × the longest run of the session so far,
    /// at least 1h.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// A running prompt without a progress frame or a node change for this long is a hang
    /// (outcome `hang`, confirmed like a crash). Default: 5 × the longest such stretch of the
    /// session's runs so far, at least 10m.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub stall: Option<Duration>,
    /// Free models and memory before every run (the default).
    #[arg(long, overrides_with = "warm")]
    pub cold: bool,
    /// Keep models loaded between runs.
    #[arg(long, overrides_with = "cold")]
    pub warm: bool,
    /// How long to wait for a server that went away [default: 10m]; given, or with
    /// --restart-cmd, also for the first connection.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub wait_server: Option<Duration>,
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
    /// Stop at this time: HH:MM (local) or RFC 3339. No run starts after it; a run still
    /// going is interrupted once --deadline-grace has passed too (resume runs it again).
    #[arg(long, value_name = "TIME")]
    pub deadline: Option<String>,
    /// How long a run may go on past --deadline before it is interrupted.
    #[arg(long, default_value = "10m", value_name = "D", value_parser = parse_duration)]
    pub deadline_grace: Duration,
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
        if self.full_step_target && self.search_steps.0.is_none() {
            return Err(
                "--full-step-target needs a few-step search (--search-steps N): with \
                 --search-steps full every run is at the workflow's own steps already; \
                 drop one of the two options"
                    .into(),
            );
        }
        Ok(SessionOptions {
            strategy: self.strategy.into(),
            repeat: self.repeat,
            controls: self.controls,
            assume_fails: self.assume_fails,
            strict: self.strict,
            max_slowdown: self.max_slowdown,
            timeout_s: self.timeout.map(|d| d.as_secs().max(1)),
            stall_s: self.stall.map(|d| d.as_secs().max(1)),
            cold: !self.warm,
            wait_server_s: self.wait_server.map_or(600, |d| d.as_secs()),
            restart_cmd: self.restart_cmd.clone(),
            restart_each: self.restart_each,
            restart_timeout_s: self.restart_timeout.as_secs().max(1),
            deadline,
            deadline_grace_s: Some(self.deadline_grace.as_secs()),
            start_at,
            models_dirs: self.models_dirs.clone(),
            plan_args: ladder.as_args(),
            confirm_crashes: self.confirm_crashes,
            on_drift: self.on_drift.into(),
            search_steps: self.search_steps.0,
            full_step_target: self.full_step_target,
            allow_shared_server: self.allow_shared_server,
            walk_on_pass: self.walk_on_pass.into(),
        })
    }
}

/// `--search-steps`: a step cap, or none (`full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchSteps(pub Option<u32>);

impl std::fmt::Display for SearchSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("full"),
        }
    }
}

fn parse_search_steps(s: &str) -> Result<SearchSteps, String> {
    if s.trim().eq_ignore_ascii_case("full") {
        return Ok(SearchSteps(None));
    }
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(SearchSteps(Some(n))),
        _ => Err(format!(
            "'{s}' is not a step count; give a whole number of steps of at least 1 (e.g. 4) or `full`"
        )),
    }
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

/// Runs `bisect`.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let options = args.session.options(&args.ladder).or_usage()?;
    let catalog = args.ladder.catalog().or_usage()?;
    // One client for every request (headers, URL credentials, request timeout).
    let connection = args.session.connect.connect(server)?;
    // The first connection too waits for (and with --restart-cmd starts) the server.
    app::bring_up(
        &connection.runtime,
        &connection.client,
        &options,
        &args.session.runs_dir,
        &ProgressView::handle(args.session.quiet),
        args.session.wait_server.is_some(),
    )?;
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
    let start = StartOptions {
        runs_dir: args.session.runs_dir.clone(),
        session: options,
        ladder: LadderConfig {
            catalog,
            options: args.ladder.plan_options(),
            controls: args.session.controls,
        },
    };
    let Connection { client, runtime } = connection;
    let mitigate = args.mitigate.then(|| MitigateRequest {
        runs_dir: args.session.runs_dir.clone(),
        session: String::new(),
        max: args.mitigations.max_mitigations,
        launch_cmd: args.mitigations.launch_cmd.clone(),
        catalog: args.ladder.catalog().unwrap_or_else(|_| Catalog::builtin()),
        allow_shared_server: args.session.allow_shared_server,
    });
    if mitigate.is_none()
        && (args.mitigations.max_mitigations.is_some()
            || args.mitigations.launch_cmd.is_some()
            || args.mitigations.apply.is_some())
    {
        return Err(CliError::usage(
            "--max-mitigations, --launch-cmd and --apply go with --mitigate (or `comfy-bisect mitigate SESSION`)",
        ));
    }
    let mitigate = mitigate.map(|r| (r, args.mitigations.apply.clone()));
    run_session_then(
        &runtime,
        client,
        start,
        targets,
        args.session.quiet,
        mitigate,
    )
}

/// Starts a session, prints what preflight found or the session line, drives it and prints
/// the summary; shared by `bisect` and `demo`.
pub(crate) fn run_session(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: StartOptions,
    targets: Vec<Target>,
    quiet: bool,
) -> CliResult {
    run_session_then(rt, client, options, targets, quiet, None)
}

/// [`run_session`], then (`bisect --mitigate`) the mitigations of the same session once it has
/// ended: the exit status is then the mitigations' (0 when a control passed).
fn run_session_then(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: StartOptions,
    targets: Vec<Target>,
    quiet: bool,
    mitigate: Option<(MitigateRequest, Option<PathBuf>)>,
) -> CliResult {
    let mitigate_client = client.clone();
    let ready = match app::start(rt, client, options, targets)? {
        Started::Ready(ready) => *ready,
        Started::Problems(stopped) => {
            for (name, problems) in &stopped.problems {
                eprint!("{}", problems.render(name));
            }
            if let Some(e) = &stopped.save_error {
                print_error(e);
            }
            print!("{}", app::summary(&stopped.paths, &stopped.session));
            return Ok(exit::FAILED);
        }
    };
    if !quiet {
        let steps: Vec<String> = ready
            .session
            .workflows
            .iter()
            .map(|w| format!("{} (steps 0–{})", w.name, w.steps.len().saturating_sub(1)))
            .collect();
        eprintln!(
            "session {} in {}: {}",
            ready.session.session_id,
            ready.paths.dir.display(),
            steps.join(", ")
        );
    }
    let finished = ready.drive(rt, ProgressView::handle(quiet))?;
    let Some((mut request, apply)) = mitigate else {
        return print_finished(finished);
    };
    if !matches!(finished.session.state, SessionState::Done) {
        eprintln!("the session did not end: no mitigations (`comfy-bisect mitigate SESSION` runs them once it has)");
        return print_finished(finished);
    }
    print!("{}", finished.summary());
    request.session = finished.paths.dir.display().to_string();
    super::mitigate::print_mitigated(
        app::mitigate(rt, mitigate_client, request, ProgressView::handle(quiet))?,
        apply.as_deref(),
    )
}

/// Prints a finished session's summary; its exit code.
pub(crate) fn print_finished(finished: Finished) -> CliResult {
    print!("{}", finished.summary());
    let code = exit_code(&finished.session);
    if let Some(resume) = app::resume_command(&finished.paths, &finished.session) {
        eprintln!("exit status {code}; to continue: {resume}");
    }
    Ok(code)
}

/// `--max-slowdown F`: a factor above 1.
fn parse_slowdown(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 1.0 => Ok(f),
        _ => Err(format!(
            "'{s}' is not a slowdown factor: give a number above 1, e.g. --max-slowdown 2"
        )),
    }
}
