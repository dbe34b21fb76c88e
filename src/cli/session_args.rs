//! The options `bisect` and `demo` share (how the session runs) and those `plan` shares too
//! (how the ladder is planned), turned into the library's plain option structs.

use super::common::ConnectArgs;
use super::heading;
use super::schedule::{describe_when, local_zone, parse_duration, parse_when, rfc3339};
use comfy_bisect_core::app;
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::ladder::{Increment, PlanOptions};
use comfy_bisect_core::session::journal::SessionOptions;
use std::path::PathBuf;
use std::time::Duration;

/// Options shared by `bisect` and `demo`. Those a first run needs show in `-h`; the others
/// only in `--help`.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    /// Where sessions are written (also accepted before the subcommand).
    #[arg(long, default_value = "runs", value_name = "DIR", help_heading = heading::BASICS)]
    pub runs_dir: PathBuf,
    /// Count a pass under memory pressure (weights streamed, steps slowed) or through a silent
    /// fallback (ComfyUI's tiled VAE retry after an OOM) as a failure.
    #[arg(long, help_heading = heading::BASICS)]
    pub strict: bool,
    /// linear: one increment per run until the first failure; binary: bisection (assumes
    /// failures are monotone along the ladder).
    #[arg(long, value_enum, default_value = "linear", help_heading = heading::SEARCH, hide_short_help = true)]
    pub strategy: super::choices::StrategyArg,
    /// Re-run the first failing and last passing steps N more times; disagreement = flaky.
    #[arg(long, default_value_t = 0, value_name = "N", help_heading = heading::SEARCH, hide_short_help = true)]
    pub repeat: u32,
    /// Re-run a run that crashed the server or timed out up to N times before it counts as a
    /// failure; a passing re-run means "crash not reproduced" (0 = a crash counts at once).
    #[arg(long, default_value_t = comfy_bisect_core::session::journal::DEFAULT_CONFIRM_CRASHES, value_name = "N", help_heading = heading::SEARCH, hide_short_help = true)]
    pub confirm_crashes: u32,
    /// Sampler steps of the search runs: samplers and schedulers capped at N (never more than
    /// the workflow's own), the boundary then confirmed at the workflow's own steps; `full`
    /// runs everything at the workflow's own steps.
    #[arg(long = "search-sampler-steps", alias = "search-steps", default_value_t = SearchSteps(Some(comfy_bisect_core::session::journal::DEFAULT_SEARCH_STEPS)), value_name = "N|full", value_parser = parse_search_steps, help_heading = heading::SEARCH, hide_short_help = true)]
    pub search_steps: SearchSteps,
    /// With --search-sampler-steps N: run the target at its own steps too (costs the saving on
    /// the target; docs/sessions.md says when it pays).
    #[arg(long, help_heading = heading::SEARCH, hide_short_help = true)]
    pub full_step_target: bool,
    /// When the server's environment changes between runs (versions, launch arguments, node
    /// packs, devices): reanchor = re-run the last passing step under it and go on; stop = end
    /// the session ("incomplete: environment changed").
    #[arg(long, value_enum, default_value = "reanchor", value_name = "ACTION", help_heading = heading::SEARCH, hide_short_help = true)]
    pub on_drift: super::choices::OnDriftArg,
    /// After the first failure, also run the minimal variant plus each later increment alone
    /// (isolation runs; not the mitigations of --mitigate).
    #[arg(long = "increments-alone", alias = "controls", help_heading = heading::SEARCH, hide_short_help = true)]
    pub controls: bool,
    /// Run even when another comfy-bisect session is using the same server (same resolved
    /// address, whatever its runs folder): both sessions' memory peaks and out-of-memory errors
    /// then include the other's. Recorded in the session.
    #[arg(long, help_heading = heading::SERVER, hide_short_help = true)]
    pub allow_shared_server: bool,
    /// Do not run the target first: it is known to fail.
    #[arg(long, help_heading = heading::SEARCH, hide_short_help = true)]
    pub assume_fails: bool,
    /// When the target passes: walk the ladder from step 1, one step at a time, to the first
    /// step under memory pressure. auto = when the passing target shows a cue (pressure, a
    /// partial load, a model staged at or above the card, its VRAM peak at the card's total);
    /// always; never = end with "could not reproduce".
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN", help_heading = heading::SEARCH, hide_short_help = true)]
    pub walk_on_pass: super::choices::WalkOnPassArg,
    /// Memory pressure from a slowdown: a step may take F times what the added work explains
    /// (attention at most quadratic in latent pixels × frames × batch) before it counts; also
    /// the factor for steps slowing within one run. Default 1.5.
    #[arg(long, value_name = "F", value_parser = parse_slowdown, help_heading = heading::SEARCH, hide_short_help = true)]
    pub max_slowdown: Option<f64>,
    /// Longest run (e.g. 30m, 1h30m). Default: 8 × the longest run of the session so far,
    /// at least 1h.
    #[arg(long, value_name = "D", value_parser = parse_duration, help_heading = heading::SEARCH, hide_short_help = true)]
    pub timeout: Option<Duration>,
    /// A running prompt without a progress frame or a node change for this long is a hang
    /// (outcome `hang`, confirmed like a crash). Default: 5 × the longest such stretch of the
    /// session's runs so far, at least 10m.
    #[arg(long = "stall-timeout", alias = "stall", value_name = "D", value_parser = parse_duration, help_heading = heading::SEARCH, hide_short_help = true)]
    pub stall: Option<Duration>,
    /// Free models and memory before every run (the default).
    #[arg(long, overrides_with = "warm", help_heading = heading::SEARCH, hide_short_help = true)]
    pub cold: bool,
    /// Keep models loaded between runs.
    #[arg(long, overrides_with = "cold", help_heading = heading::SEARCH, hide_short_help = true)]
    pub warm: bool,
    /// How long to wait for a server that went away [default: 10m]; given, or with
    /// --restart-cmd, also for the first connection.
    #[arg(long, value_name = "D", value_parser = parse_duration, help_heading = heading::OVERNIGHT, hide_short_help = true)]
    pub wait_server: Option<Duration>,
    /// Shell command that restarts ComfyUI (run after a crash; before every run with --restart-each).
    #[arg(long, value_name = "CMD", help_heading = heading::OVERNIGHT)]
    pub restart_cmd: Option<String>,
    /// Run --restart-cmd before every run.
    #[arg(long, requires = "restart_cmd", help_heading = heading::OVERNIGHT, hide_short_help = true)]
    pub restart_each: bool,
    /// Longest --restart-cmd run; past it the command and every process it started are killed
    /// (its output is in the session's restart.log).
    #[arg(long, default_value = "5m", value_name = "D", value_parser = crate::cli::common::parse_positive_duration, help_heading = heading::OVERNIGHT, hide_short_help = true)]
    pub restart_timeout: Duration,
    /// Wait until this time before the first run: HH:MM (local) or RFC 3339 (echoed at start as
    /// a date and time).
    #[arg(long, value_name = "TIME", help_heading = heading::OVERNIGHT, hide_short_help = true)]
    pub start_at: Option<String>,
    /// Stop at this time: HH:MM (the next one, local) or RFC 3339; echoed at start as a date
    /// and time. No run starts after it; a run still going is interrupted once
    /// --deadline-grace has passed too (resume runs it again).
    #[arg(long, value_name = "TIME", help_heading = heading::OVERNIGHT)]
    pub deadline: Option<String>,
    /// How long a run may go on past --deadline before it is interrupted.
    #[arg(long, default_value = "10m", value_name = "D", value_parser = parse_duration, help_heading = heading::OVERNIGHT, hide_short_help = true)]
    pub deadline_grace: Duration,
    /// ComfyUI models/ root for component hashes (repeatable).
    #[arg(long = "models-dir", value_name = "DIR", help_heading = heading::SERVER, hide_short_help = true)]
    pub models_dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// `-q`, given before or after the subcommand (a global flag of [`super::Cli`]).
    #[arg(skip)]
    pub quiet: bool,
}

/// How the ladder is planned (the options of `plan`), under the heading "Ladder", in `--help`
/// only.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = heading::LADDER)]
pub struct LadderArgs {
    /// Short side of the minimal resolution in pixels (0 = each node's declared minimum).
    #[arg(long, default_value_t = 256, value_name = "N", hide_short_help = true)]
    pub min_resolution: u32,
    /// Least frame count of the minimal variant (rounded up to the node's grid, e.g. 4n+1).
    #[arg(long, default_value_t = 2, value_name = "N", hide_short_help = true)]
    pub min_frames: u32,
    /// Also cap sampling steps at N in the minimal variant (adds a `steps` increment).
    #[arg(long, value_name = "N", hide_short_help = true)]
    pub min_steps: Option<u32>,
    /// Ladder order, comma-separated (unlisted increments follow in the default order):
    /// resolution,frames,batch,models,lora,quantization,cache,postprocess,steps.
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = super::common::increment_parser(), hide_short_help = true)]
    pub order: Vec<Increment>,
    /// Keep these increments at the target value in every variant (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "INCREMENT", value_parser = super::common::increment_parser(), hide_short_help = true)]
    pub keep: Vec<Increment>,
    /// TOML file declaring roles of custom node classes (see docs/ladder.md).
    #[arg(long, value_name = "FILE", hide_short_help = true)]
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
        PlanOptions {
            min_resolution: self.min_resolution,
            min_frames: self.min_frames,
            min_steps: self.min_steps,
            order: app::ladder_order(&self.order),
            keep: self.keep.clone(),
        }
    }

    /// The arguments as given, for the session record (read back by
    /// `LadderConfig::from_record`).
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
        // Absolute, so `resume` (which plans a skipped workflow again) finds it from any
        // folder.
        if let Some(path) = &self.catalog {
            let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            out.push(format!("--catalog={}", path.display()));
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
        // Each time is echoed as a date and time on this machine's clock, so `--deadline 21:00`
        // given at 21:33 says "tomorrow" instead of meaning it silently.
        let when = |t: &Option<String>, flag: &str| {
            t.as_deref()
                .map(|t| {
                    let at = parse_when(t, now, &zone).map_err(|e| format!("{flag}: {e}"))?;
                    eprintln!("{flag} {t}: {}", describe_when(&at, now, &zone));
                    Ok::<_, String>(at)
                })
                .transpose()
        };
        let start_at = when(&self.start_at, "--start-at")?.as_ref().map(rfc3339);
        let deadline = when(&self.deadline, "--deadline")?.as_ref().map(rfc3339);
        let options = SessionOptions {
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
        };
        app::check_options(&options).map_err(|e| e.message)?;
        Ok(options)
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

/// `--max-slowdown F`: a factor above 1.
fn parse_slowdown(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 1.0 => Ok(f),
        _ => Err(format!(
            "'{s}' is not a slowdown factor: give a number above 1, e.g. --max-slowdown 2"
        )),
    }
}
