//! `comfy-bisect hash WORKFLOW`: the canonical workflow hash and node count. A UI workflow is
//! converted first, with the node definitions of `--object-info FILE` or of the server, as
//! `validate` and `plan` do: the hash is the API prompt's.

use super::common::{read_workflow_with, CliResult, DefsArgs, OrExit};
use crate::error::exit;
use std::path::PathBuf;

/// Arguments of `hash`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// The workflow file: API format, a POST /prompt body, or a UI workflow (what ComfyUI's
    /// "Save" writes; converted with the node definitions of --object-info or the server).
    pub workflow: PathBuf,
    #[command(flatten)]
    pub defs: DefsArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints the workflow hash.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let workflow = read_workflow_with(&args.workflow, || {
        args.defs.load(server).map_err(|e| {
            format!(
                "{} is a UI workflow; converting it needs the node definitions: {e}",
                args.workflow.display()
            )
        })
    })
    .or_usage()?;
    let sha = workflow.sha256();
    if args.json {
        let out = serde_json::json!({
            "workflow": args.workflow.display().to_string(),
            "sha256": sha,
            "nodes": workflow.nodes.len(),
        });
        println!("{out}");
    } else {
        println!(
            "{sha}  {} nodes  {}",
            workflow.nodes.len(),
            args.workflow.display()
        );
    }
    Ok(exit::OK)
}
