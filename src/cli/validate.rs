//! `comfy-bisect validate WORKFLOW...`: offline validation against the server's node definitions.

use super::common::{read_workflow, CliError, CliResult, DefsArgs};
use crate::error::exit;
use comfy_bisect_core::workflow::ui::LoadAnyError;
use comfy_bisect_core::workflow::validate::{validate, ProblemKind};
use std::path::PathBuf;

/// Arguments of `validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// Workflow file(s): API format, a POST /prompt body, or a UI workflow (converted first).
    #[arg(required = true)]
    pub workflows: Vec<PathBuf>,
    #[command(flatten)]
    pub defs: DefsArgs,
    /// Print JSON (one object per workflow, in a list) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Validates each workflow; exit 0 when all are valid, 1 when any is invalid, 2 on input errors.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let defs = args.defs.load_cli(server)?;
    let mut code = exit::OK;
    let mut results = Vec::new();
    for path in &args.workflows {
        let workflow = match read_workflow(path, &defs) {
            Ok(w) => w,
            Err(e @ LoadAnyError::Convert { .. }) => {
                // A UI workflow this server cannot run (unknown node types, loops…): said
                // here, and the other workflows are still validated.
                code = CliError::failed(e).report();
                continue;
            }
            Err(e) => return Err(CliError::usage(e)),
        };
        let report = validate(&workflow, &defs);
        if !report.is_valid() {
            code = exit::FAILED;
        }
        if args.json {
            let mut counts = serde_json::Map::new();
            for p in &report.problems {
                let key = serde_json::to_value(p.kind).expect("kinds serialize");
                let key = key.as_str().expect("kinds are strings").to_string();
                let n = counts.get(&key).and_then(|v| v.as_u64()).unwrap_or(0);
                counts.insert(key, (n + 1).into());
            }
            results.push(serde_json::json!({
                "workflow": path.display().to_string(),
                "sha256": workflow.sha256(),
                "valid": report.is_valid(),
                "only_missing_files": report.only_missing_files(),
                "checked_nodes": report.checked_nodes,
                "counts": counts,
                "problems": report.problems,
            }));
            continue;
        }
        if report.is_valid() {
            println!(
                "{}: valid ({} nodes checked)",
                path.display(),
                report.checked_nodes
            );
            continue;
        }
        println!("{}: {} problem(s)", path.display(), report.problems.len());
        for group in [true, false] {
            for p in report
                .problems
                .iter()
                .filter(|p| p.kind.is_missing_file() == group)
            {
                let label = match p.kind {
                    ProblemKind::MissingModelFile => "missing model file",
                    ProblemKind::MissingInputFile => "missing input file",
                    _ => "error",
                };
                let place = match (&p.node, &p.class_type, &p.input) {
                    (Some(n), Some(c), Some(i)) => format!("node {n} ({c}) input '{i}': "),
                    (Some(n), Some(c), None) => format!("node {n} ({c}): "),
                    _ => String::new(),
                };
                println!("  {label}: {place}{}", p.message);
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).expect("JSON values serialize")
        );
    }
    Ok(code)
}
