//! `comfy-bisect show RUN_ID`: one run (a unique prefix of its id is enough), found through
//! `runs/index.jsonl` of one or several runs folders.

use super::common::{CliError, CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_core::app::{self, FoundRun};
use comfy_bisect_core::session::folders;
use comfy_bisect_core::session::journal::RunFile;
use std::path::PathBuf;

/// Arguments of `show`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id or a unique prefix of it (as printed in the ladder table).
    pub run_id: String,
    /// Where sessions are written; repeat it (or give a pattern such as 'machines/*/runs') to
    /// look in the runs folders of several machines.
    #[arg(long = "runs-dir", default_value = "runs", value_name = "DIR")]
    pub runs_dirs: Vec<PathBuf>,
    /// Print run.json instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// Runs `show`.
pub fn run(args: Args) -> CliResult {
    let dirs = folders::expand(&args.runs_dirs).or_usage()?;
    let run = app::find_run(&dirs, &args.run_id).map_err(CliError::usage)?;
    if args.json {
        print!("{}", run.record_text().map_err(CliError::usage)?);
        return Ok(exit::OK);
    }
    let entry = &run.entry;
    println!("run {}", entry.run_id);
    println!(
        "  session:   {}  workflow {}",
        entry.session_id, entry.workflow
    );
    println!(
        "  step:      {} {} ({})",
        entry.step,
        entry.increment,
        serde_json::to_value(entry.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    );
    println!("  outcome:   {}", entry.outcome);
    println!("  workflow:  sha256 {}", entry.workflow_sha256);
    println!("  folder:    {}", run.dir.display());
    match run.record() {
        Ok(file) => print_record(&file, &run),
        Err(e) => println!("  (no run.json: {e})"),
    }
    Ok(exit::OK)
}

fn print_record(file: &RunFile, run: &FoundRun) {
    let r = &file.record;
    println!(
        "  timing:    {} → {} ({} ms){}",
        r.started_at,
        r.finished_at,
        r.duration_ms,
        if r.cold { ", cold" } else { ", warm" }
    );
    if let Some(peak) = r.vram.peak_used_bytes {
        println!(
            "  VRAM peak: {:.0} MiB (sampled every {} ms{})",
            peak as f64 / 1048576.0,
            r.vram.interval_ms,
            r.vram
                .total_bytes
                .map(|t| format!(", card {:.0} MiB", t as f64 / 1048576.0))
                .unwrap_or_default()
        );
    }
    if let Some((needed, from)) = r
        .diagnosis
        .as_ref()
        .and_then(|d| d.numbers.proven_demand_mib())
    {
        println!("  VRAM needed: at least {needed:.0} MiB ({from}, from the OOM message; the sampled peak can miss the spike before it)");
    }
    if let Some(e) = r.execution_error() {
        println!(
            "  error:     {}: {}: {}",
            run.node_label(&e.node_id, &e.node_type),
            e.exception_type,
            e.exception_message.lines().next().unwrap_or_default()
        );
    }
    if let Some(d) = &file.entry.diagnosis {
        println!("  diagnosis:");
        for line in comfy_bisect_core::diagnose::render_text(d).lines() {
            println!("    {line}");
        }
    }
    for w in &r.warnings {
        println!("  warning:   {w}");
    }
    // Which classes of the submitted workflow come from custom node packs (ComfyUI's bug form
    // asks about `--disable-all-custom-nodes`); nothing when the record does not say.
    match &file.custom_nodes {
        Some(packs) if packs.is_empty() => {
            println!("  custom nodes: none (every node class is ComfyUI's own)")
        }
        Some(packs) => {
            println!("  custom nodes:");
            for (class, p) in packs {
                let line = format!(
                    "    {class}  {} {}",
                    p.pack,
                    p.version.as_deref().unwrap_or("(version unknown)")
                );
                println!("{}", comfy_bisect_core::text::escape_controls(&line));
            }
        }
        None => {}
    }
    if !file.component_hashes.is_empty() {
        println!("  components:");
        for c in &file.component_hashes {
            match (&c.autov2, &c.reason) {
                (Some(a), _) => println!("    {}/{}  AutoV2 {a}", c.folder, c.file),
                (None, Some(reason)) => println!(
                    "    {}/{}  unhashed{}: {reason}",
                    c.folder,
                    c.file,
                    c.size.map(|n| format!(" ({n} bytes)")).unwrap_or_default()
                ),
                (None, None) => println!("    {}/{}", c.folder, c.file),
            }
        }
    }
}
