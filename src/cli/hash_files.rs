//! `comfy-bisect hash-files FILE... [--cache FILE] [--json]`: size, sha256 and AutoV2 per file.

use super::common::{print_error, CliError, CliResult};
use crate::error::exit;
use comfy_bisect_core::hashing::{hash_files, FileHash, HashCache, HashOptions};
use comfy_bisect_core::units::human_bytes;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Print size, full-file sha256 and AutoV2 (first 10 hex, as Civitai and A1111 show) per file.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files to hash (hashed in parallel, one per CPU core).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Hash cache to read and update; unchanged files (same size, mtime and inode) are not read.
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Files hashed at the same time (default: number of CPU cores).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Bytes per read call (benchmark knob; see docs/PERFORMANCE.md).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub read_size: Option<usize>,
    /// Read on a second thread while hashing (benchmark knob; see docs/PERFORMANCE.md).
    #[arg(long, hide = true)]
    pub reader_thread: bool,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct Output<'a> {
    files: &'a [FileHash],
    /// Total bytes read from the hashed files (0 when everything came from the cache).
    bytes_read: u64,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: Args) -> CliResult {
    for file in &args.files {
        match std::fs::metadata(file) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => {
                return Err(CliError::usage(format!(
                    "'{}' is not a regular file",
                    file.display()
                )))
            }
            Err(e) => {
                return Err(CliError::usage(format!(
                    "cannot read '{}': {e}",
                    file.display()
                )))
            }
        }
    }
    let mut cache = args.cache.as_ref().map(HashCache::open);
    for warning in cache.iter().flat_map(|c| c.warnings()) {
        eprintln!("warning: {warning}");
    }
    let defaults = HashOptions::default();
    let opts = HashOptions {
        jobs: args.jobs.unwrap_or(0),
        buffer_size: args.read_size.unwrap_or(defaults.buffer_size),
        reader_thread: defaults.reader_thread || args.reader_thread,
    };
    let started = Instant::now();
    let results = hash_files(&args.files, cache.as_mut(), &opts);
    let elapsed = started.elapsed();
    let mut hashes = Vec::with_capacity(results.len());
    let mut failed = false;
    for result in results {
        match result {
            Ok(hash) => hashes.push(hash),
            Err(e) => {
                // The other files are still hashed and printed; the exit code says one failed.
                print_error(&e);
                failed = true;
            }
        }
    }
    if let Some(cache) = cache.as_mut() {
        if let Err(e) = cache.save() {
            eprintln!("warning: {e:#}");
        }
    }
    let bytes_read: u64 = hashes.iter().map(|h| h.bytes_read).sum();
    if args.json {
        let output = Output {
            files: &hashes,
            bytes_read,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&output).expect("hashes serialize")
        );
    } else {
        print_table(&hashes);
        let cached = hashes.iter().filter(|h| h.cached).count();
        let secs = elapsed.as_secs_f64();
        eprintln!(
            "{} file(s), {} read in {:.2} s ({}/s), {} from cache",
            hashes.len(),
            human_bytes(bytes_read),
            secs,
            human_bytes(if secs > 0.0 {
                (bytes_read as f64 / secs) as u64
            } else {
                0
            }),
            cached
        );
    }
    Ok(if failed { exit::USAGE } else { exit::OK })
}

fn print_table(hashes: &[FileHash]) {
    println!("{:>10}  {:<64}  {:<10}  FILE", "SIZE", "SHA256", "AUTOV2");
    for h in hashes {
        println!(
            "{:>10}  {:<64}  {:<10}  {}",
            human_bytes(h.size),
            h.sha256,
            h.autov2,
            h.path.display()
        );
    }
}
