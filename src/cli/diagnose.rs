//! `comfy-bisect diagnose [FILE|-] [--json]`: classify a failure from pasted text.

use super::common::{CliError, CliResult};
use crate::error::exit;
use comfy_bisect_core::diagnose;
use comfy_bisect_core::workflow::embedded::Container;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// Diagnose a failure from a ComfyUI console log, a traceback, an execution_error JSON or a
/// /history JSON: failure kind, stage (with the evidence), allocator numbers, what to check
/// next and the unproven candidates. The root cause is always reported as unknown.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// File to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Print the diagnosis as JSON (stable contract, see docs/diagnose.md).
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand and returns the exit code: 0 diagnosed, 1 no failure found in the input,
/// 2 the input could not be read. With `--json`, JSON is printed in every case (kind `unknown`
/// and the reason when there is no failure to diagnose).
pub fn run(args: Args) -> CliResult {
    let (source, text) = match read_input(args.file.as_ref()) {
        Ok(x) => x,
        Err(message) => {
            if args.json {
                print_json(&diagnose::no_failure(&message))?;
            }
            return Err(CliError::usage(message));
        }
    };
    let diagnosis = match diagnose::diagnose_text(&text) {
        Ok(d) => d,
        Err(e) => {
            if args.json {
                print_json(&diagnose::no_failure(&e.to_string()))?;
            }
            return Err(CliError::failed(format!("cannot diagnose {source}: {e}")));
        }
    };
    if args.json {
        print_json(&diagnosis)?;
    } else {
        // Through the commands' `print!`: a closed pipe (e.g. `| head`) is not an error worth
        // a panic, and the pasted text's control characters are made visible.
        print!("{}", diagnose::render_text(&diagnosis));
    }
    Ok(exit::OK)
}

/// Prints a diagnosis as pretty JSON (exit 1 when it could not be serialized).
fn print_json(diagnosis: &diagnose::Diagnosis) -> Result<(), CliError> {
    let json = serde_json::to_string_pretty(diagnosis)
        .map_err(|e| CliError::failed(format!("could not serialize the diagnosis: {e}")))?;
    println!("{json}");
    Ok(())
}

fn read_input(file: Option<&PathBuf>) -> Result<(String, String), String> {
    match file {
        Some(path) if path.as_os_str() != "-" => {
            let bytes = std::fs::read(path)
                .map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
            if let Some(container) = Container::sniff(&bytes) {
                return Err(format!(
                    "'{}' is a {container} file, not text: diagnose reads a ComfyUI console log, a traceback, or an execution_error or /history JSON. To find the failing step of the workflow ComfyUI saved in it, run `comfy-bisect bisect {}`",
                    path.display(),
                    path.display()
                ));
            }
            Ok((
                format!("'{}'", path.display()),
                String::from_utf8_lossy(&bytes).into_owned(),
            ))
        }
        _ => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                eprintln!("Paste the console log, traceback or JSON, then press Ctrl-D (Ctrl-Z then Enter on Windows).");
            }
            let mut bytes = Vec::new();
            stdin
                .lock()
                .read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            Ok((
                "standard input".to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ))
        }
    }
}
