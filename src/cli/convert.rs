//! `comfy-bisect convert UI.json [--object-info FILE…] [-o OUT]`: a UI workflow converted into
//! the API prompt the official ComfyUI frontend would queue.

use super::common::{CliError, CliResult, DefsArgs, OrExit};
use crate::error::exit;
use comfy_bisect_core::workflow::ui::{load_workflow_file, LoadAnyError, UiError};
use std::path::PathBuf;

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// The UI workflow file (an API-format file is passed through unchanged), or a PNG, WebP,
    /// audio or video file ComfyUI saved with the workflow inside.
    pub workflow: PathBuf,
    #[command(flatten)]
    pub defs: DefsArgs,
    /// Write the API prompt here instead of stdout.
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Also write where each API node came from (UI scope, node id, title) to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub provenance: Option<PathBuf>,
}

/// Converts the workflow; exit 0 on success, 1 when it cannot be converted (unknown node
/// types, legacy group nodes, nothing left to run), 2 on input errors (a file that cannot be
/// read, is no workflow, or whose links or subgraphs loop — a subgraph that contains itself),
/// 3 when the server is unreachable.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let defs = args.defs.load_cli(server)?;
    let loaded = load_workflow_file(&args.workflow, &defs).map_err(|e| match e {
        LoadAnyError::Convert {
            source: UiError::Cycle(_),
            ..
        } => CliError::usage(e),
        LoadAnyError::Convert { .. } => CliError::failed(e),
        _ => CliError::usage(e),
    })?;
    if let Some(source) = &loaded.source {
        super::common::note_source(&args.workflow, source);
    }
    if let Some((_, converted)) = &loaded.ui {
        for w in &converted.warnings {
            eprintln!("warning: {}: {w}", args.workflow.display());
        }
    } else {
        eprintln!(
            "note: {} is already an API-format workflow; written as is",
            args.workflow.display()
        );
    }
    let text = loaded.workflow.to_pretty_json() + "\n";
    match &args.output {
        Some(out) => {
            std::fs::write(out, &text)
                .map_err(|e| format!("cannot write '{}': {e}", out.display()))
                .or_usage()?;
            eprintln!(
                "{}: {} API nodes, sha256 {} → {}",
                args.workflow.display(),
                loaded.workflow.nodes.len(),
                loaded.workflow.sha256(),
                out.display()
            );
        }
        None => print!("{text}"),
    }
    if let Some(path) = &args.provenance {
        let map = loaded
            .ui
            .as_ref()
            .map(|(_, c)| {
                serde_json::Value::Object(
                    c.provenance
                        .iter()
                        .map(|(id, o)| {
                            (
                                id.clone(),
                                serde_json::to_value(o).expect("origins serialize"),
                            )
                        })
                        .collect(),
                )
            })
            .unwrap_or_else(|| serde_json::json!({}));
        let body = serde_json::to_string_pretty(&map).expect("JSON values serialize") + "\n";
        std::fs::write(path, body)
            .map_err(|e| format!("cannot write '{}': {e}", path.display()))
            .or_usage()?;
    }
    Ok(exit::OK)
}
