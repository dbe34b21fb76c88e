//! `comfy-bisect plan WORKFLOW`: the minimal variant and the increment ladder, printed and
//! optionally written as `DIR/plan.json` plus one API-format file per step.

use super::common::{read_loaded, CliResult, DefsArgs, OrExit};
use super::session_args::LadderArgs;
use crate::error::exit;
use comfy_bisect_core::app::{write_plan, UiSource};
use comfy_bisect_core::ladder::{plan, Plan};
use std::path::{Path, PathBuf};

/// Arguments of `plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// The failing target workflow (API format, a POST /prompt body, or a UI workflow).
    pub workflow: PathBuf,
    #[command(flatten)]
    pub defs: DefsArgs,
    /// Write DIR/plan.json and one workflow per step (DIR/00-minimal.json, DIR/01-….json…).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print plan.json to stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ladder: LadderArgs,
}

/// Plans the ladder; exit 0 on success, 2 on input errors, 3 when the server is unreachable.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let catalog = args.ladder.catalog().or_usage()?;
    let defs = args.defs.load_cli(server)?;
    let loaded = read_loaded(&args.workflow, &defs).or_usage()?;
    let target = &loaded.workflow;
    let planned = plan(target, &defs, &catalog, &args.ladder.plan_options())
        .map_err(|e| format!("{}: {e}", args.workflow.display()))
        .or_usage()?;
    if let Some(dir) = &args.out {
        let ui = loaded.ui.as_ref().map(|(doc, converted)| UiSource {
            document: doc,
            converted,
            defs: &defs,
        });
        for warning in write_plan(&planned, dir, ui).or_usage()? {
            eprintln!("warning: {warning}");
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&planned.to_json()).expect("JSON values serialize")
        );
    } else {
        print!("{}", render(&planned, &args.workflow));
    }
    Ok(exit::OK)
}

/// The human listing: one line per step, then what is not separable and what is kept.
pub fn render(planned: &Plan, path: &Path) -> String {
    let mut out = format!(
        "{}: {} step(s), target {}\n",
        path.display(),
        planned.steps.len(),
        &planned.target_sha256[..12]
    );
    for step in &planned.steps {
        out.push_str(&format!(
            "  {:>2} {:<13} {}  {}\n",
            step.index,
            step.increment.name(),
            &step.sha256[..12],
            step.describe()
        ));
    }
    if planned.steps.len() == 1 {
        out.push_str("  nothing to reduce: the minimal variant is the target\n");
    }
    if !planned.not_separable.is_empty() {
        out.push_str("not separable:\n");
        for n in &planned.not_separable {
            out.push_str(&format!(
                "  {} (nodes {}): {}\n",
                n.increment,
                n.nodes.join(", "),
                n.reason
            ));
        }
    }
    if !planned.kept.is_empty() {
        out.push_str("kept in every variant (memory savers):\n");
        for k in &planned.kept {
            out.push_str(&format!("  {} {}: {}\n", k.node, k.class_type, k.what));
        }
    }
    out
}
