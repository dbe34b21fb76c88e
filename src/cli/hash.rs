//! `comfy-bisect hash WORKFLOW`: the canonical workflow hash and node count.

use super::common::{CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_core::workflow::load_api_file;
use std::path::PathBuf;

/// Arguments of `hash`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file (API format, or a POST /prompt body).
    pub workflow: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints the workflow hash.
pub fn run(args: Args) -> CliResult {
    let workflow = load_api_file(&args.workflow).or_usage()?;
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
