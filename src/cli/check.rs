//! `comfy-bisect check WORKFLOW`: one run of the workflow as given (no ladder) on a freshly
//! (re)started server, with the exit status `git bisect run` reads: 0 good, 1 bad, 125 cannot
//! test (the work is [`comfy_bisect_core::app::check`]'s).

use super::common::{parse_positive_duration, CliError, CliResult, ConnectArgs, Connection};
use super::schedule::parse_duration;
use crate::cli::progress::ProgressView;
use comfy_bisect_core::app::{self, ErrorKind};
use comfy_bisect_core::check::{CheckOptions, CheckStatus};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// The workflow: API format, a POST /prompt body, or a UI workflow (converted with the
    /// server's node definitions).
    pub workflow: PathBuf,
    /// Shell command run first to (re)start ComfyUI, so every commit gets a fresh server (it
    /// should stop the old server and start the new one in the background).
    #[arg(long, value_name = "CMD")]
    pub restart_cmd: Option<String>,
    /// Longest --restart-cmd run; past it the command and every process it started are killed
    /// (its output is appended to restart.log in the runs folder).
    #[arg(long, default_value = "5m", value_name = "D", value_parser = parse_positive_duration)]
    pub restart_timeout: Duration,
    /// How long to wait for the server to answer; not up by then: exit 125. Default: 10m after
    /// --restart-cmd (a server starting), 60s without it (a server that should be running).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub wait_server: Option<Duration>,
    /// The git checkout whose commit is recorded (default: the current folder, when it is a git
    /// checkout — where `git bisect run` runs the command).
    #[arg(long, value_name = "DIR")]
    pub checkout: Option<PathBuf>,
    /// Where the run is journaled (read it back with `comfy-bisect runs`).
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    /// Count a pass only through a silent memory fallback (tiled VAE retry after an OOM) as bad.
    #[arg(long)]
    pub strict: bool,
    /// Longest run (e.g. 30m); a run past it counts as bad.
    #[arg(long, value_name = "D", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,
    /// Keep models loaded (no POST /free before the run).
    #[arg(long)]
    pub warm: bool,
    /// ComfyUI models/ root for component hashes (repeatable).
    #[arg(long = "models-dir", value_name = "DIR")]
    pub models_dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Print the check as one JSON object instead of a line.
    #[arg(long)]
    pub json: bool,
    /// `-q`, given before or after the subcommand (a global flag of [`super::Cli`]).
    #[arg(skip)]
    pub quiet: bool,
}

/// How long `check` waits for a server started by --restart-cmd, unless --wait-server says.
pub const WAIT_AFTER_RESTART: Duration = Duration::from_secs(600);

/// How long `check` waits for a server without --restart-cmd, unless --wait-server says: it
/// should be running already, so a short wait before 125 (cannot test).
pub const WAIT_WITHOUT_RESTART: Duration = Duration::from_secs(60);

impl Args {
    /// How long to wait for the server: --wait-server, else [`WAIT_AFTER_RESTART`] with
    /// --restart-cmd, else [`WAIT_WITHOUT_RESTART`].
    pub fn wait_server(&self) -> Duration {
        self.wait_server.unwrap_or(if self.restart_cmd.is_some() {
            WAIT_AFTER_RESTART
        } else {
            WAIT_WITHOUT_RESTART
        })
    }
}

/// Runs `check`: exit 0 good, 1 bad, 125 cannot test, 130 interrupted, 2 bad arguments or
/// input. A journal that cannot be written is 125 too (the commit was not judged).
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let Connection { client, runtime } = args.connect.connect(server)?;
    let wait_server = args.wait_server();
    let options = CheckOptions {
        runs_dir: args.runs_dir,
        workflow: args.workflow,
        restart_cmd: args.restart_cmd,
        restart_timeout: args.restart_timeout,
        wait_server,
        checkout: args.checkout,
        strict: args.strict,
        timeout: args.timeout,
        cold: !args.warm,
        models_dirs: args.models_dirs,
        progress: ProgressView::handle(args.quiet),
    };
    let record = match app::check(&runtime, client, options) {
        Ok(r) => r,
        Err(e) if e.kind == ErrorKind::Input => return Err(e.into()),
        Err(e) => {
            return Err(CliError::new(
                CheckStatus::Skip.exit_code(),
                format!("cannot test: {e}"),
            ))
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&record).expect("a check record serialises")
        );
    } else {
        println!("{}", record.line());
    }
    Ok(record.exit_code)
}
