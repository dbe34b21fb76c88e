//! `comfy-bisect report [SESSION…]`: prints a session's report (the latest one when none is
//! named; Markdown or JSON), redacted unless
//! `--no-redact`; `--write` also rewrites `report.md` and `report.json` in the session folder.
//! Sessions are found in one or several runs folders (one per machine). `--bundle out.zip`
//! packs one session's report and boundary runs' files for attaching to an issue.

use super::common::{CliError, CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_core::app::{self, resolve_session};
use comfy_bisect_core::report::{self, format_by_name};
use comfy_bisect_core::session::folders;
use std::path::PathBuf;

/// Arguments of `report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session(s): an id (a unique prefix is enough) under --runs-dir, or a session folder.
    /// Several are printed one after another (Markdown) or as a JSON array. None: the session
    /// written last.
    #[arg(num_args = 0..)]
    pub sessions: Vec<String>,
    /// Output format.
    #[arg(long, default_value = "md", value_parser = ["md", "markdown", "json"])]
    pub format: String,
    /// The report as JSON (the same as --format json, like the other commands' --json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Keep home folders, user and host names, IP addresses and secret-looking inputs as
    /// recorded (the default replaces them by placeholders).
    #[arg(long)]
    pub no_redact: bool,
    /// Also rewrite report.md and report.json in the session folder.
    #[arg(long)]
    pub write: bool,
    /// Write a zip to attach to the issue instead of printing (one session): report.md,
    /// report.json, and the last passing and first failing run's workflow (API, and UI when the
    /// input was UI), run.json and server.log, redacted like the report.
    #[arg(long, value_name = "OUT.zip", conflicts_with_all = ["json", "format"])]
    pub bundle: Option<PathBuf>,
    /// The runs folder; repeat it (or give a pattern such as 'machines/*/runs') to find the
    /// sessions in the runs folders of several machines.
    #[arg(long = "runs-dir", default_value = "runs", value_name = "DIR")]
    pub runs_dirs: Vec<PathBuf>,
}

/// Prints the report(s); exit 2 when a session cannot be found or read.
pub fn run(args: Args) -> CliResult {
    let runs_dirs = folders::expand(&args.runs_dirs).or_usage()?;
    let redact = !args.no_redact;
    let name = if args.json {
        "json"
    } else {
        args.format.as_str()
    };
    let Some(format) = format_by_name(name) else {
        return Err(CliError::usage(format!(
            "unknown format {:?}; use md or json",
            args.format
        )));
    };
    let dirs = if args.sessions.is_empty() {
        vec![app::latest_session(&runs_dirs).or_usage()?]
    } else {
        args.sessions
            .iter()
            .map(|s| resolve_session(s, &runs_dirs))
            .collect::<Result<Vec<_>, _>>()
            .or_usage()?
    };
    if let Some(out) = &args.bundle {
        let [dir] = dirs.as_slice() else {
            return Err(CliError::usage(format!(
                "--bundle packs one session; {} were given",
                dirs.len()
            )));
        };
        if args.write {
            report::write_session_reports(dir, redact)
                .map_err(|e| CliError::usage(format!("{e:#}")))?;
        }
        let names = report::bundle::write_bundle(dir, out, redact)
            .map_err(|e| CliError::usage(format!("{e:#}")))?;
        eprintln!("wrote {} ({} files):", out.display(), names.len());
        for n in names {
            eprintln!("  {n}");
        }
        return Ok(exit::OK);
    }
    let mut texts = Vec::new();
    for dir in &dirs {
        if args.write {
            report::write_session_reports(dir, redact)
                .map_err(|e| CliError::usage(format!("{e:#}")))?;
        }
        let text = report::session_report(dir, redact, false)
            .and_then(|r| format.render(&r))
            .map_err(|e| CliError::usage(format!("{}: {e:#}", dir.display())))?;
        texts.push(text);
    }
    if texts.len() == 1 {
        print!("{}", texts[0]);
    } else if name == "json" {
        // One JSON array of the reports.
        let values = texts
            .iter()
            .map(|t| serde_json::from_str::<serde_json::Value>(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CliError::failed(format!("a JSON report does not parse: {e}")))?;
        println!(
            "{}",
            serde_json::to_string_pretty(&values).expect("JSON values serialize")
        );
    } else {
        print!("{}", texts.join("\n---\n\n"));
    }
    Ok(exit::OK)
}
