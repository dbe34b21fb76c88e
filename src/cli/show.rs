//! `comfy-bisect show RUN_ID`: one run (a unique prefix of its id is enough), found through
//! `runs/index.jsonl` of one or several runs folders.

use super::common::{CliError, CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_core::app::run_entries;
use comfy_bisect_core::session::folders;
use comfy_bisect_core::session::index::{self, IndexEntry, Lookup};
use comfy_bisect_core::session::journal::{read_json, RunFile, RUN_RECORD_FILE, SESSION_FILE};
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
    let tagged: Vec<(&PathBuf, IndexEntry)> = dirs
        .iter()
        .flat_map(|d| run_entries(d).into_iter().map(move |e| (d, e)))
        .collect();
    let entries: Vec<IndexEntry> = tagged.iter().map(|(_, e)| e.clone()).collect();
    let places = |run_id: &str| {
        let mut places: Vec<PathBuf> = Vec::new();
        for (d, e) in &tagged {
            if e.run_id == run_id && !places.contains(d) {
                places.push((*d).clone());
            }
        }
        places
    };
    let where_ = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let entry = match index::lookup(&entries, &args.run_id) {
        Lookup::Found(e) => e,
        Lookup::NotFound => {
            // A session id where a run id belongs: say which command prints a session.
            let is_session = !args.run_id.is_empty()
                && dirs
                    .iter()
                    .filter_map(|d| std::fs::read_dir(d).ok())
                    .any(|entries| {
                        entries.filter_map(Result::ok).any(|e| {
                            e.file_name().to_string_lossy().starts_with(&args.run_id)
                                && e.path().join(SESSION_FILE).is_file()
                        })
                    });
            if is_session {
                return Err(CliError::usage(format!(
                    "'{0}' is a session, not a run: `comfy-bisect report {0}` prints the session's report (`show` prints one run; `comfy-bisect runs` lists the sessions)",
                    args.run_id
                )));
            }
            return Err(CliError::usage(format!(
                "no run id starts with '{}' in {} (`comfy-bisect runs` lists sessions)",
                args.run_id, where_
            )));
        }
        Lookup::Ambiguous(ids) => {
            return Err(CliError::usage(format!(
                "'{}' matches {} runs: {}; give more of the id",
                args.run_id,
                ids.len(),
                ids.join(", ")
            )))
        }
    };
    let places = places(&entry.run_id);
    if places.len() > 1 {
        let mut places = places;
        places.sort();
        return Err(CliError::usage(folders::Duplicate {
            what: "run",
            id: entry.run_id.clone(),
            places,
        }));
    }
    let run_dir = places[0].join(&entry.dir);
    let record_path = run_dir.join(RUN_RECORD_FILE);
    if args.json {
        let text = std::fs::read_to_string(&record_path).map_err(|e| {
            CliError::usage(format!(
                "cannot read {}: {e} (the run may still be in flight)",
                record_path.display()
            ))
        })?;
        print!("{text}");
        return Ok(exit::OK);
    }
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
    println!("  folder:    {}", run_dir.display());
    match read_json::<RunFile>(&record_path) {
        Ok(file) => print_record(&file, &run_dir),
        Err(e) => println!("  (no run.json: {e})"),
    }
    Ok(exit::OK)
}

/// Node `id` of class `class_type` as the canvas shows it; a node inside a subgraph is named
/// with the subgraph's name from the run's UI companion (`workflow.ui.json`) when there is one.
fn node_label(run_dir: &std::path::Path, id: &str, class_type: &str) -> String {
    let names = std::fs::read_to_string(run_dir.join("workflow.ui.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .map(|ui| comfy_bisect_core::workflow::ui::subgraph_names(&ui))
        .unwrap_or_default();
    comfy_bisect_core::workflow::label::node_label(id, class_type, &names)
}

fn print_record(file: &RunFile, run_dir: &std::path::Path) {
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
            node_label(run_dir, &e.node_id, &e.node_type),
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
