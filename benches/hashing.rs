//! Hashing benchmark (issue 9, item 1): `cargo bench --bench hashing`.
//!
//! Generates a 2 GiB file in a temp dir and hashes it with `comfy-bisect hash-files`,
//! `openssl dgst -sha256` and `sha256sum`, alternating, several rounds (page cache warm); then
//! 4 files of 1 GiB in parallel; then a cached re-run, which must read 0 bytes. Prints Markdown
//! tables for docs/PERFORMANCE.md. The temp dir is deleted at the end.
//!
//! Environment: `HASH_BENCH_DIR` (where to create the temp dir; default the system temp dir),
//! `HASH_BENCH_GIB` (size of the big file, default 2), `HASH_BENCH_ROUNDS` (default 5),
//! `HASH_BENCH_ONLY=micro,sweep,side,parallel,cached` to run only some sections.
//!
//! Every table reports wall-clock throughput and CPU-time throughput (bytes / (user + sys) of the
//! hashing process, from /proc): on a busy machine the wall clock mostly measures the other load,
//! while CPU time measures what hashing costs.

use comfy_bisect_core::hashing::{hash_file_with, hash_files, HashCache, HashOptions};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const GIB: u64 = 1 << 30;
const TOOL: &str = env!("CARGO_BIN_EXE_comfy-bisect");

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and must not spend minutes writing 6 GiB of temp files.
    if !std::env::args().any(|a| a == "--bench") {
        println!("hashing benchmark skipped: run it with `cargo bench --bench hashing`");
        return;
    }
    let gib: u64 = env_or("HASH_BENCH_GIB", 2);
    let rounds: usize = env_or("HASH_BENCH_ROUNDS", 5);
    let only = std::env::var("HASH_BENCH_ONLY").unwrap_or_default();
    let wanted = |section: &str| only.is_empty() || only.split(',').any(|s| s == section);
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

    println!("- load average at start: {}\n", load_average());

    if wanted("micro") {
        micro();
    }
    if wanted("sweep") || wanted("side") {
        let big = dir.path().join("big.bin");
        generate(&big, gib * GIB, 1);
        warm(&big);
        if wanted("sweep") {
            buffer_sweep(&big);
        }
        if wanted("side") {
            side_by_side(&big, rounds);
        }
        drop(std::fs::remove_file(&big));
    }
    if wanted("parallel") || wanted("cached") {
        let parts: Vec<PathBuf> = (0..4)
            .map(|i| dir.path().join(format!("part{i}.bin")))
            .collect();
        for (i, p) in parts.iter().enumerate() {
            generate(p, GIB, 100 + i as u64);
            warm(p);
        }
        if wanted("parallel") {
            parallel(&parts, rounds.clamp(1, 3));
        }
        if wanted("cached") {
            cached(&parts, dir.path());
        }
    }
    println!("- load average at end: {}", load_average());
    drop(dir);
    println!("\n(temp files deleted)");
}

/// In-memory sha256 throughput of the sha2 crate vs `openssl speed` (no I/O at all), per CPU
/// second (`openssl speed` divides by user CPU time too).
fn micro() {
    let data = vec![0x5au8; 256 << 20];
    let mut best_cpu = f64::MAX;
    let mut best_wall = f64::MAX;
    for _ in 0..5 {
        let cpu = thread_cpu();
        let t = Instant::now();
        std::hint::black_box(Sha256::digest(std::hint::black_box(&data)));
        best_wall = best_wall.min(t.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(thread_cpu() - cpu);
    }
    let gb = data.len() as f64 / 1e9;
    println!("## In-memory sha256 (no I/O)\n");
    println!("| implementation | GB/s per CPU second | GB/s wall |\n|---|---|---|");
    println!(
        "| sha2 crate `Sha256::digest` (256 MiB buffer, best of 5) | {:.2} | {:.2} |",
        gb / best_cpu,
        gb / best_wall
    );
    match openssl_speed() {
        Some(v) => println!("| `openssl speed -evp sha256 -bytes 16384 -seconds 3` | {v:.2} | |"),
        None => println!("| `openssl speed` | n/a | |"),
    }
    println!();
}

fn openssl_speed() -> Option<f64> {
    let out = Command::new("openssl")
        .args([
            "speed", "-evp", "sha256", "-bytes", "16384", "-seconds", "3", "-mr",
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

/// Read size × reader thread, one pass each over the big file, in-process.
fn buffer_sweep(file: &Path) {
    let size = std::fs::metadata(file).unwrap().len();
    let gb = size as f64 / 1e9;
    println!(
        "## Read size sweep (in-process, one pass of {} each)\n",
        human(size)
    );
    println!("| read size | reader thread | GB/s wall | GB/s per CPU second | user s | sys s |\n|---|---|---|---|---|---|");
    for kib in [8usize, 32, 64, 128, 256, 512, 1024, 4096] {
        for reader_thread in [false, true] {
            let opts = HashOptions {
                buffer_size: kib << 10,
                reader_thread,
                jobs: 1,
            };
            let before = cpu_times();
            let t = Instant::now();
            let h = hash_file_with(file, &opts).expect("hash");
            let secs = t.elapsed().as_secs_f64();
            let after = cpu_times();
            assert_eq!(h.bytes_read, size);
            let (user, sys) = (after.user - before.user, after.sys - before.sys);
            println!(
                "| {} KiB | {} | {:.2} | {:.2} | {user:.2} | {sys:.2} |",
                kib,
                if reader_thread { "yes" } else { "no" },
                gb / secs,
                gb / (user + sys),
            );
        }
    }
    println!();
}

/// The tool, openssl and sha256sum on the same file, alternating, `rounds` rounds.
fn side_by_side(file: &Path, rounds: usize) {
    let size = std::fs::metadata(file).unwrap().len();
    let gb = size as f64 / 1e9;
    let f = file.to_str().unwrap();
    let tools: [(&str, Vec<&str>); 4] = [
        (
            "comfy-bisect hash-files",
            vec![TOOL, "hash-files", "--json", f],
        ),
        (
            "openssl dgst -sha256",
            vec!["openssl", "dgst", "-sha256", f],
        ),
        ("sha256sum", vec!["sha256sum", f]),
        (
            "comfy-bisect hash-files --reader-thread",
            vec![TOOL, "hash-files", "--json", "--reader-thread", f],
        ),
    ];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); tools.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); tools.len()];
    for round in 0..rounds {
        let mut digests = Vec::new();
        // Rotate the order every round so no tool always runs first.
        for k in 0..tools.len() {
            let i = (k + round) % tools.len();
            let m = run(&tools[i].1);
            wall[i].push(m.wall);
            cpu[i].push(m.cpu);
            digests.push(
                first_hex64(&m.stdout).unwrap_or_else(|| panic!("no digest from {}", tools[i].0)),
            );
        }
        assert!(
            digests.windows(2).all(|w| w[0] == w[1]),
            "digests differ: {digests:?}"
        );
    }
    println!(
        "## Side by side: one {} file, {rounds} rounds, alternating (page cache warm)\n",
        human(size)
    );
    println!("| tool | median wall s | GB/s wall (median) | GB/s wall (best) | GB/s per CPU s (median) | vs openssl, wall | vs openssl, CPU |\n|---|---|---|---|---|---|---|");
    let (ow, oc) = (median(&wall[1]), median(&cpu[1]));
    for (i, (name, _)) in tools.iter().enumerate() {
        let (w, c) = (median(&wall[i]), median(&cpu[i]));
        let best = wall[i].iter().cloned().fold(f64::MAX, f64::min);
        println!(
            "| {name} | {w:.3} | {:.2} | {:.2} | {:.2} | {:.3}× | {:.3}× |",
            gb / w,
            gb / best,
            gb / c,
            ow / w,
            oc / c
        );
    }
    let ratios = |v: &Vec<Vec<f64>>| -> String {
        (0..rounds)
            .map(|r| format!("{:.3}", v[1][r] / v[0][r]))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "\nthroughput ratio comfy-bisect / openssl per round, wall: {}",
        ratios(&wall)
    );
    println!(
        "throughput ratio comfy-bisect / openssl per round, CPU: {}\n",
        ratios(&cpu)
    );
}

/// Four 1 GiB files: the tool (one worker per core) vs 4 concurrent openssl / sha256sum processes.
fn parallel(parts: &[PathBuf], rounds: usize) {
    let total: u64 = parts
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let gb = total as f64 / 1e9;
    let names: Vec<&str> = parts.iter().map(|p| p.to_str().unwrap()).collect();
    let mut tool_args = vec![TOOL, "hash-files", "--json"];
    tool_args.extend(&names);
    let mut tool_seq = vec![TOOL, "hash-files", "--json", "--jobs", "1"];
    tool_seq.extend(&names);
    let mut rows: Vec<(&str, Vec<Measured>)> = vec![
        (
            "comfy-bisect hash-files (4 files, default jobs = cores)",
            vec![],
        ),
        ("comfy-bisect hash-files --jobs 1 (sequential)", vec![]),
        ("4 × openssl dgst -sha256, concurrently", vec![]),
        ("4 × sha256sum, concurrently", vec![]),
    ];
    for _ in 0..rounds {
        rows[0].1.push(run(&tool_args));
        rows[1].1.push(run(&tool_seq));
        rows[2]
            .1
            .push(run_concurrently("openssl", &["dgst", "-sha256"], &names));
        rows[3].1.push(run_concurrently("sha256sum", &[], &names));
    }
    println!(
        "## Parallel: 4 files of 1 GiB, {rounds} rounds ({} cores)\n",
        cores()
    );
    println!(
        "| command | median wall s | aggregate GB/s wall | GB/s per CPU s |\n|---|---|---|---|"
    );
    for (name, m) in &rows {
        let w = median(&m.iter().map(|x| x.wall).collect::<Vec<_>>());
        let c = median(&m.iter().map(|x| x.cpu).collect::<Vec<_>>());
        println!("| {name} | {w:.3} | {:.2} | {:.2} |", gb / w, gb / c);
    }
    println!();
}

/// A cached re-run: the tool must report 0 bytes read; in-process, /proc/self/io confirms it.
fn cached(parts: &[PathBuf], dir: &Path) {
    let cache = dir.join("hash-cache.json");
    let c = cache.to_str().unwrap();
    let mut args = vec![TOOL, "hash-files", "--json", "--cache", c];
    args.extend(parts.iter().map(|p| p.to_str().unwrap()));
    let first = run(&args);
    let second = run(&args);
    let read1 = bytes_read(&first.stdout);
    let read2 = bytes_read(&second.stdout);
    assert_eq!(read2, 0, "cached re-run read {read2} bytes");
    assert_eq!(first_hex64(&first.stdout), first_hex64(&second.stdout));

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
        first.wall
    );
    println!("| second (cache hit) | {:.4} s | {read2} |", second.wall);
    match (before, after) {
        (Some(b), Some(a)) => println!(
            "\nIn-process cached `hash_files` (cache file of {cache_size} bytes loaded before measuring): /proc/self/io rchar grew by {} bytes, which are this benchmark's own reads of /proc/self/io; none of the 4 GiB of data was read.",
            a - b
        ),
        _ => println!("\n/proc/self/io not available; relying on the tool's own count."),
    }
}

/// Wall time, CPU time (user + sys of the child processes) and stdout of one measurement.
struct Measured {
    wall: f64,
    cpu: f64,
    stdout: String,
}

fn run(argv: &[&str]) -> Measured {
    let before = cpu_times();
    let t = Instant::now();
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", argv[0]));
    let wall = t.elapsed().as_secs_f64();
    let after = cpu_times();
    assert!(out.status.success(), "{argv:?} failed: {}", out.status);
    Measured {
        wall,
        cpu: after.children - before.children,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

fn run_concurrently(program: &str, args: &[&str], files: &[&str]) -> Measured {
    let before = cpu_times();
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
    let wall = t.elapsed().as_secs_f64();
    Measured {
        wall,
        cpu: cpu_times().children - before.children,
        stdout: String::new(),
    }
}

/// CPU seconds of this process (all threads) and of its waited-for children, from /proc.
struct CpuTimes {
    user: f64,
    sys: f64,
    children: f64,
}

fn cpu_times() -> CpuTimes {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after "(comm) ": state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    let fields: Vec<f64> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    let tick = clock_ticks();
    CpuTimes {
        user: fields[11] / tick,
        sys: fields[12] / tick,
        children: (fields[13] + fields[14]) / tick,
    }
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU seconds of the calling thread (ns resolution), from /proc/thread-self/schedstat.
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |ns| ns / 1e9)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
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
