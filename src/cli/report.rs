//! `comfy-bisect report SESSION`: prints a session's report (Markdown or JSON), redacted unless
//! `--no-redact`; `--write` also rewrites `report.md` and `report.json` in the session folder;
//! `--bundle out.zip` packs the report and the boundary runs' files for attaching to an issue.

use super::common::{CliError, CliResult, OrExit};
use crate::error::exit;
use crate::report::{self, format_by_name};
use crate::session::journal::SESSION_FILE;
use std::path::{Path, PathBuf};

/// Arguments of `report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: its id (a unique prefix is enough) under --runs-dir, or its folder.
    pub session: String,
    /// Output format.
    #[arg(long, default_value = "md", value_parser = ["md", "markdown", "json"])]
    pub format: String,
    /// Keep home folders, user and host names, IP addresses and secret-looking inputs as
    /// recorded (the default replaces them by placeholders).
    #[arg(long)]
    pub no_redact: bool,
    /// Also rewrite report.md and report.json in the session folder.
    #[arg(long)]
    pub write: bool,
    /// Write a zip to attach to the issue instead of printing: report.md, report.json, and the
    /// last passing and first failing run's workflow (API, and UI when the input was UI),
    /// run.json and server.log, redacted like the report.
    #[arg(long, value_name = "OUT.zip")]
    pub bundle: Option<PathBuf>,
    /// The runs folder.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
}

/// Prints the report; exit 2 when the session cannot be found or read.
pub fn run(args: Args) -> CliResult {
    let dir = resolve_session(&args.session, &args.runs_dir).or_usage()?;
    let redact = !args.no_redact;
    let Some(format) = format_by_name(&args.format) else {
        return Err(CliError::usage(format!(
            "unknown format {:?}; use md or json",
            args.format
        )));
    };
    if args.write {
        report::write_session_reports(&dir, redact)
            .map_err(|e| CliError::usage(format!("{e:#}")))?;
    }
    if let Some(out) = &args.bundle {
        let names = report::bundle::write_bundle(&dir, out, redact)
            .map_err(|e| CliError::usage(format!("{e:#}")))?;
        eprintln!("wrote {} ({} files):", out.display(), names.len());
        for n in names {
            eprintln!("  {n}");
        }
        return Ok(exit::OK);
    }
    let text = report::session_report(&dir, redact, false)
        .and_then(|r| format.render(&r))
        .map_err(|e| CliError::usage(format!("{e:#}")))?;
    print!("{text}");
    Ok(exit::OK)
}

/// Finds the session folder: `session` as a folder holding session.json, else a session id or
/// unique id prefix under `runs_dir`.
pub fn resolve_session(session: &str, runs_dir: &Path) -> Result<PathBuf, String> {
    let as_path = Path::new(session);
    if as_path.join(SESSION_FILE).is_file() {
        return Ok(as_path.to_path_buf());
    }
    let exact = runs_dir.join(session);
    if exact.join(SESSION_FILE).is_file() {
        return Ok(exact);
    }
    let entries = std::fs::read_dir(runs_dir).map_err(|e| {
        format!(
            "no session {session:?}: cannot read the runs folder {} ({e}); pass --runs-dir DIR or the session folder",
            runs_dir.display()
        )
    })?;
    let mut matches: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.join(SESSION_FILE).is_file()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(session))
        })
        .collect();
    matches.sort();
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(format!(
            "no session {session:?} under {}: `comfy-bisect runs --runs-dir {}` lists the sessions",
            runs_dir.display(),
            runs_dir.display()
        )),
        _ => Err(format!(
            "{session:?} matches {} sessions under {} ({}); give more of the id",
            matches.len(),
            runs_dir.display(),
            matches
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
