//! `comfy-bisect mitigate SESSION`: after a session's verdict, run the catalogue's single-change
//! controls for the failing stage on the target, one run each, and judge them
//! (docs/mitigations.md). `bisect --mitigate` does the same at the end of a bisect. Resumable:
//! run it again and only what has not run yet runs (the run in flight is settled first).

use super::common::{CliError, CliResult, ConnectArgs, Connection};
use crate::error::exit;
use comfy_bisect_core::app::{self, MitigateRequest, Mitigated};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::session::mitigate::MitigateEnd;
use std::path::PathBuf;

/// The options `mitigate` and `bisect --mitigate` share.
#[derive(Debug, Clone, clap::Args)]
pub struct MitigateArgs {
    /// Run at most N controls per workflow (the matrix's "first" ones come first); the others
    /// are listed as not run.
    #[arg(long, value_name = "N")]
    pub max_mitigations: Option<usize>,
    /// How to start the server with other launch flags, for the server controls
    /// (`--reserve-vram 2`, `--disable-pinned-memory`…): a shell command where `{args}` becomes
    /// the memory flags the server runs with plus the control's, e.g.
    /// 'cd ~/ComfyUI && python main.py --listen --port 8188 {args}'. The server must run on this
    /// machine (it is stopped through its process) and is put back as it was afterwards.
    /// Without it, server controls are listed as "not run: needs --launch-cmd".
    #[arg(long, value_name = "TEMPLATE", value_parser = parse_launch_cmd)]
    pub launch_cmd: Option<String>,
}

fn parse_launch_cmd(s: &str) -> Result<String, String> {
    if s.contains("{args}") {
        Ok(s.to_string())
    } else {
        Err(format!(
            "'{s}' has no {{args}}: write where the launch flags go, e.g. 'python main.py --port 8188 {{args}}'"
        ))
    }
}

/// Arguments of `mitigate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (or a unique prefix of it), or the session folder.
    pub session: String,
    /// Where sessions are written.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    #[command(flatten)]
    pub mitigate: MitigateArgs,
    /// TOML file declaring roles of custom node classes (see docs/ladder.md).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Run even when another session is using the same server.
    #[arg(long)]
    pub allow_shared_server: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// No progress line and no per-run lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `mitigate`.
pub fn run(args: Args) -> CliResult {
    let catalog = match &args.catalog {
        Some(path) => Catalog::load_file(path)
            .map(|user| Catalog::builtin().with_user(user))
            .map_err(|e| CliError::usage(e.to_string()))?,
        None => Catalog::builtin(),
    };
    let paths = app::find_session(&args.runs_dir, &args.session).map_err(CliError::usage)?;
    let session = comfy_bisect_core::session::SessionFile::load(&paths)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let Connection { client, runtime } = args.connect.connect(&session.server)?;
    let request = MitigateRequest {
        runs_dir: args.runs_dir.clone(),
        session: args.session.clone(),
        max: args.mitigate.max_mitigations,
        launch_cmd: args.mitigate.launch_cmd.clone(),
        catalog,
        allow_shared_server: args.allow_shared_server,
    };
    print_mitigated(app::mitigate(&runtime, client, request, args.quiet)?)
}

/// Prints a mitigation pass's summary; exit 0 when a control passed, 1 when none did, 130
/// when it was interrupted.
pub(crate) fn print_mitigated(m: Mitigated) -> CliResult {
    print!("{}", m.summary());
    if let MitigateEnd::Stopped(why) = &m.end {
        if why.starts_with("interrupted") {
            return Ok(exit::INTERRUPTED);
        }
    }
    Ok(if m.any_passed() {
        exit::OK
    } else {
        exit::FAILED
    })
}
