//! Hashing benchmark (issue 9, item 1): `cargo bench --bench hashing`.
//!
//! Generates a 2 GiB file in a temp dir and hashes it with `comfy-bisect hash-files`,
//! `openssl dgst -sha256` and `sha256sum`, alternating, several rounds (page cache warm); then
//! 4 files of 1 GiB in parallel; then a cached re-run, which must read 0 bytes. Prints Markdown
//! tables for docs/PERFORMANCE.md. The temp dir is deleted at the end.
//!
//! Environment: `HASH_BENCH_DIR` (where to create the temp dir; default the system temp dir),
//! `HASH_BENCH_GIB` (size of the big file, default 2), `HASH_BENCH_ROUNDS` (default 5),
//! `HASH_BENCH_SWEEP=0` to skip the buffer-size sweep.

use comfy_bisect::hashing::{hash_file_with, hash_files, HashCache, HashOptions};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;
const TOOL: &str = env!("CARGO_BIN_EXE_comfy-bisect");

fn main() {
    let gib: u64 = env_or("HASH_BENCH_GIB", 2);
    let rounds: usize = env_or("HASH_BENCH_ROUNDS", 5);
    let sweep = std::env::var("HASH_BENCH_SWEEP").map_or(true, |v| v != "0");
    let base = std::env::var_os("HASH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = tempfile::Builder::new()
        .prefix("comfy-bisect-hash-bench")
        .tempdir_in(&base)
        .expect("create temp dir");

    println!("# Hashing benchmark\n");
    println!(
        "- CPU: {} ({} cores), SHA extensions detected at run time: {}",
        cpu_model(),
        cores(),
        sha_ni()
    );
    println!("- openssl: {}", tool_version("openssl", &["version"]));
    println!("- sha256sum: {}", tool_version("sha256sum", &["--version"]));
    println!("- tool: {TOOL}\n");

    micro();

    let big = dir.path().join("big.bin");
    generate(&big, gib * GIB, 1);
    warm(&big);

    if sweep {
        buffer_sweep(&big);
    }
    side_by_side(&big, rounds);
    drop(std::fs::remove_file(&big));

    let parts: Vec<PathBuf> = (0..4)
        .map(|i| dir.path().join(format!("part{i}.bin")))
        .collect();
    for (i, p) in parts.iter().enumerate() {
        generate(p, GIB, 100 + i as u64);
        warm(p);
    }
    parallel(&parts, rounds.clamp(1, 3));
    cached(&parts, dir.path());
    drop(dir);
    println!("\n(temp files deleted)");
}

/// In-memory sha256 throughput of the sha2 crate vs `openssl speed` (no I/O at all).
fn micro() {
    let data = vec![0x5au8; 256 << 20];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        std::hint::black_box(Sha256::digest(&data));
        best = best.min(t.elapsed().as_secs_f64());
    }
    let ours = data.len() as f64 / best / 1e9;
    let openssl = openssl_speed();
    println!("## In-memory sha256 (no I/O)\n");
    println!("| implementation | GB/s |\n|---|---|");
    println!("| sha2 crate (`Sha256::digest`, 256 MiB buffer, best of 3) | {ours:.2} |");
    match openssl {
        Some(v) => println!("| `openssl speed -evp sha256 -bytes 16384` | {v:.2} |"),
        None => println!("| `openssl speed` | n/a |"),
    }
    println!();
}

fn openssl_speed() -> Option<f64> {
    let out = Command::new("openssl")
        .args([
            "speed", "-evp", "sha256", "-bytes", "16384", "-seconds", "2", "-mr",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    // Machine-readable line: "+F:<n>:sha256:<bytes per second>"
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("+F:"))?;
    let bps: f64 = line.rsplit(':').next()?.trim().parse().ok()?;
    Some(bps / 1e9)
}

/// Buffer size × reader thread, one pass each over the big file, in-process.
fn buffer_sweep(file: &Path) {
    let size = std::fs::metadata(file).unwrap().len();
    println!(
        "## Read size sweep (in-process, one pass of {} each)\n",
        human(size)
    );
    println!("| read size | reader thread | GB/s |\n|---|---|---|");
    for kib in [64usize, 256, 1024, 2048, 4096, 8192] {
        for reader_thread in [false, true] {
            let opts = HashOptions {
                buffer_size: kib << 10,
                reader_thread,
                jobs: 1,
            };
            let t = Instant::now();
            let h = hash_file_with(file, &opts).expect("hash");
            let secs = t.elapsed().as_secs_f64();
            assert_eq!(h.bytes_read, size);
            println!(
                "| {} KiB | {} | {:.2} |",
                kib,
                if reader_thread { "yes" } else { "no" },
                size as f64 / secs / 1e9
            );
        }
    }
    println!();
}

/// The tool, openssl and sha256sum on the same file, alternating, `rounds` rounds.
fn side_by_side(file: &Path, rounds: usize) {
    let size = std::fs::metadata(file).unwrap().len();
    let f = file.to_str().unwrap();
    let tools: [(&str, Vec<&str>); 3] = [
        (
            "comfy-bisect hash-files",
            vec![TOOL, "hash-files", "--json", "--jobs", "1", f],
        ),
        (
            "openssl dgst -sha256",
            vec!["openssl", "dgst", "-sha256", f],
        ),
        ("sha256sum", vec!["sha256sum", f]),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); tools.len()];
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut digests = Vec::new();
        // Rotate the order every round so no tool always runs first.
        for k in 0..tools.len() {
            let i = (k + round) % tools.len();
            let (elapsed, out) = run(&tools[i].1);
            times[i].push(elapsed.as_secs_f64());
            digests
                .push(first_hex64(&out).unwrap_or_else(|| panic!("no digest from {}", tools[i].0)));
        }
        assert!(
            digests.windows(2).all(|w| w[0] == w[1]),
            "digests differ: {digests:?}"
        );
        let n = times[0].len() - 1;
        ratios.push(times[1][n] / times[0][n]);
    }
    println!(
        "## Side by side: one {} file, {rounds} rounds, alternating (page cache warm)\n",
        human(size)
    );
    println!("| tool | median s | median GB/s | best GB/s | vs openssl (median) |\n|---|---|---|---|---|");
    let openssl_median = median(&times[1]);
    for (i, (name, _)) in tools.iter().enumerate() {
        let med = median(&times[i]);
        let best = times[i].iter().cloned().fold(f64::MAX, f64::min);
        println!(
            "| {name} | {med:.3} | {:.2} | {:.2} | {:.3}× |",
            size as f64 / med / 1e9,
            size as f64 / best / 1e9,
            openssl_median / med
        );
    }
    let per_round: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
    println!(
        "\nthroughput ratio comfy-bisect / openssl per round: {} (median {:.3})\n",
        per_round.join(", "),
        median(&ratios)
    );
}

/// Four 1 GiB files: the tool (one worker per core) vs 4 concurrent openssl / sha256sum processes.
fn parallel(parts: &[PathBuf], rounds: usize) {
    let total: u64 = parts
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let names: Vec<&str> = parts.iter().map(|p| p.to_str().unwrap()).collect();
    let mut tool_args = vec![TOOL, "hash-files", "--json"];
    tool_args.extend(&names);
    let mut tool_seq = vec![TOOL, "hash-files", "--json", "--jobs", "1"];
    tool_seq.extend(&names);
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        (
            "comfy-bisect hash-files (4 files, default jobs = cores)",
            vec![],
        ),
        ("comfy-bisect hash-files --jobs 1 (sequential)", vec![]),
        ("4 × openssl dgst -sha256, concurrently", vec![]),
        ("4 × sha256sum, concurrently", vec![]),
    ];
    for _ in 0..rounds {
        rows[0].1.push(run(&tool_args).0.as_secs_f64());
        rows[1].1.push(run(&tool_seq).0.as_secs_f64());
        rows[2]
            .1
            .push(run_concurrently("openssl", &["dgst", "-sha256"], &names));
        rows[3].1.push(run_concurrently("sha256sum", &[], &names));
    }
    println!(
        "## Parallel: 4 files of 1 GiB, {rounds} rounds ({} cores)\n",
        cores()
    );
    println!("| command | median s | aggregate GB/s |\n|---|---|---|");
    for (name, t) in &rows {
        let m = median(t);
        println!("| {name} | {m:.3} | {:.2} |", total as f64 / m / 1e9);
    }
    println!();
}

/// A cached re-run: the tool must report 0 bytes read; in-process, /proc/self/io confirms it.
fn cached(parts: &[PathBuf], dir: &Path) {
    let cache = dir.join("hash-cache.json");
    let c = cache.to_str().unwrap();
    let mut args = vec![TOOL, "hash-files", "--json", "--cache", c];
    args.extend(parts.iter().map(|p| p.to_str().unwrap()));
    let (first, out1) = run(&args);
    let (second, out2) = run(&args);
    let read1 = bytes_read(&out1);
    let read2 = bytes_read(&out2);
    assert_eq!(read2, 0, "cached re-run read {read2} bytes");
    assert_eq!(first_hex64(&out1), first_hex64(&out2));

    let mut in_process = HashCache::open(&cache);
    let before = rchar();
    let results = hash_files(parts, Some(&mut in_process), &HashOptions::default());
    let after = rchar();
    assert!(results
        .iter()
        .all(|r| r.as_ref().is_ok_and(|h| h.cached && h.bytes_read == 0)));
    let cache_size = std::fs::metadata(&cache).unwrap().len();
    println!("## Cached re-run (4 files of 1 GiB, `--cache`)\n");
    println!("| run | time | bytes read (tool's count) |\n|---|---|---|");
    println!(
        "| first (fills the cache) | {:.3} s | {read1} |",
        first.as_secs_f64()
    );
    println!(
        "| second (cache hit) | {:.4} s | {read2} |",
        second.as_secs_f64()
    );
    match (before, after) {
        (Some(b), Some(a)) => println!(
            "\nIn-process cached `hash_files`: /proc/self/io rchar grew by {} bytes (the cache file itself is {cache_size} bytes; the 4 GiB of model data were not read).",
            a - b
        ),
        _ => println!("\n/proc/self/io not available; relying on the tool's own count."),
    }
}

fn run(argv: &[&str]) -> (Duration, String) {
    let t = Instant::now();
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", argv[0]));
    let elapsed = t.elapsed();
    assert!(out.status.success(), "{argv:?} failed: {}", out.status);
    (elapsed, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run_concurrently(program: &str, args: &[&str], files: &[&str]) -> f64 {
    let t = Instant::now();
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            Command::new(program)
                .args(args)
                .arg(f)
                .stdout(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    t.elapsed().as_secs_f64()
}

/// Writes `size` pseudo-random bytes (xorshift64*, seeded) in 8 MiB blocks.
fn generate(path: &Path, size: u64, seed: u64) {
    let mut w = BufWriter::with_capacity(8 << 20, File::create(path).expect("create bench file"));
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut block = vec![0u8; 8 << 20];
    let mut left = size;
    while left > 0 {
        for chunk in block.chunks_exact_mut(8) {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            chunk.copy_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n]).expect("write bench file");
        left -= n as u64;
    }
    w.flush().expect("flush bench file");
}

/// Reads the file once so every measured pass sees a warm page cache.
fn warm(path: &Path) {
    let opts = HashOptions {
        jobs: 1,
        ..HashOptions::default()
    };
    hash_file_with(path, &opts).expect("warm-up read");
}

fn first_hex64(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(63)).find_map(|i| {
        let w = &bytes[i..i + 64];
        let boundary = |j: Option<&u8>| j.is_none_or(|b| !b.is_ascii_hexdigit());
        (w.iter().all(|b| b.is_ascii_hexdigit())
            && (i == 0 || boundary(bytes.get(i - 1)))
            && boundary(bytes.get(i + 64)))
        .then(|| String::from_utf8_lossy(w).to_lowercase())
    })
}

fn bytes_read(json: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(json).expect("tool prints JSON");
    v["bytes_read"].as_u64().expect("bytes_read")
}

fn rchar() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar:"))
        .and_then(|v| v.trim().parse().ok())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn human(n: u64) -> String {
    if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn sha_ni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("sha")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn tool_version(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "not found".into())
}
