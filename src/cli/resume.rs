//! `comfy-bisect resume SESSION`: continue a session after a crash, kill -9, Ctrl-C, deadline
//! or lost server. Completed runs are never re-run; the run in flight is first looked up in the
//! server's history by its prompt_id, else run again.

use super::bisect::{drive_session, print_summary};
use super::common::{CliError, CliResult, ConnectArgs, Connection, OrExit};
use crate::error::exit;
use comfy_bisect_core::session::journal::{SessionFile, SessionPaths, SESSION_FILE};
use comfy_bisect_core::session::schedule::{local_zone, parse_duration, parse_when, rfc3339};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `resume`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (or a unique prefix of it), or the session folder.
    pub session: String,
    /// Where sessions are written.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    /// A new deadline: HH:MM (local) or RFC 3339.
    #[arg(long, value_name = "TIME", conflicts_with = "no_deadline")]
    pub deadline: Option<String>,
    /// Drop the session's deadline.
    #[arg(long)]
    pub no_deadline: bool,
    /// A new --wait-server.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub wait_server: Option<Duration>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// No progress line and no per-run lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Finds a session folder from an id, a unique id prefix or a path.
pub(crate) fn find_session(runs_dir: &Path, query: &str) -> Result<SessionPaths, String> {
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

/// Runs `resume`.
pub fn run(args: Args) -> CliResult {
    let paths = find_session(&args.runs_dir, &args.session).or_usage()?;
    let mut session = SessionFile::load(&paths).or_usage()?;
    if args.no_deadline {
        session.options.deadline = None;
    }
    if let Some(d) = &args.deadline {
        let (zone, warning) = local_zone();
        if let Some(w) = warning.filter(|_| d.trim().len() <= 5) {
            eprintln!("warning: {w}");
        }
        let t = parse_when(d, jiff::Timestamp::now(), &zone)
            .map_err(|e| CliError::usage(format!("--deadline: {e}")))?;
        session.options.deadline = Some(rfc3339(&t));
    }
    if let Some(w) = args.wait_server {
        session.options.wait_server_s = w.as_secs();
    }
    // A start time that has passed no longer applies.
    session.options.start_at = None;
    if session.is_finished() && session.in_flight.is_none() {
        print_summary(&paths, &session);
        return Ok(exit::OK);
    }
    session.save(&paths).or_failed()?;
    let Connection { client, runtime } = args.connect.connect(&session.server)?;
    if !args.quiet {
        eprintln!(
            "resuming session {} on {}",
            session.session_id, session.server
        );
    }
    drive_session(&runtime, client, paths, session, args.quiet, None)
}
