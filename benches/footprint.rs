//! Footprint benchmark (issue 9, item 5): `cargo bench --bench footprint`.
//!
//! Runs the `comfy-bisect` binary as a child process (`comfy-bisect submit`, a full run with
//! the cold start, VRAM sampling, the WebSocket and the `/history` reconciliation) against the
//! in-tree simulator, with and without a flood of WebSocket preview frames, and reports the
//! child's peak RSS (GNU time's `%M`, i.e. `ru_maxrss` of the tool alone, cross-checked with
//! `VmHWM` sampled from `/proc/<pid>/status`) and its RSS over time. The simulator sends no live previews itself, so
//! a loopback relay in front of it ([`common::WsTap`]) adds ComfyUI-style binary preview frames
//! (event type 1, JPEG) after every `progress` event — with 400 sampler steps and 4 × 256 KiB
//! per step that is 400 MiB of binary frames, so any accumulation would show.
//!
//! Environment: `FOOTPRINT_STEPS` (default 400), `FOOTPRINT_FRAMES` (previews per step, default
//! 4), `FOOTPRINT_FRAME_KIB` (default 256), `FOOTPRINT_ROUNDS` (default 3).

mod common;

use comfy_bisect_sim::{start, SimConfig};
use common::{median, Previews, WsTap};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOOL: &str = env!("CARGO_BIN_EXE_comfy-bisect");

struct Measured {
    exit: i32,
    maxrss_kib: u64,
    hwm_kib: u64,
    rss_first_kib: u64,
    rss_last_kib: u64,
    secs: f64,
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs the tool once under GNU time (`/usr/bin/time -f %M`) and returns its peak RSS.
///
/// Why not `wait4` on our own child: Linux keeps a process's `maxrss` across `execve`, and a
/// child spawned from this benchmark (which itself buffers the relayed frames) starts with the
/// benchmark's high-water mark. GNU time forks the tool from its own small image, so its
/// `%M` is the tool's own peak. `VmHWM` of the tool is also sampled every 5 ms as a check.
fn measure(server: &str, command: &[String], out: &std::path::Path) -> Measured {
    let t0 = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(out)
        .arg(TOOL)
        .args(["--server", server])
        .args(command)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn /usr/bin/time comfy-bisect");
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let sampler = std::thread::spawn(move || {
        let (mut hwm, mut first, mut last) = (0, 0, 0);
        let mut tool: Option<u32> = None;
        while !flag.load(Ordering::Relaxed) {
            if tool.is_none() {
                tool = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                    .ok()
                    .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()));
            }
            if let Some(t) = tool {
                if let Some(h) = status_kib(t, "VmHWM:") {
                    hwm = hwm.max(h);
                }
                if let Some(r) = status_kib(t, "VmRSS:") {
                    if first == 0 {
                        first = r;
                    }
                    last = r;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (hwm, first, last)
    });
    let status = child.wait().expect("wait for /usr/bin/time");
    done.store(true, Ordering::Relaxed);
    let (hwm, first, last) = sampler.join().expect("sampler");
    let maxrss_kib = std::fs::read_to_string(out)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    Measured {
        exit: status.code().unwrap_or(-1),
        maxrss_kib,
        hwm_kib: hwm,
        rss_first_kib: first,
        rss_last_kib: last,
        secs: t0.elapsed().as_secs_f64(),
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let steps = env_or("FOOTPRINT_STEPS", 400);
    let frames = env_or("FOOTPRINT_FRAMES", 4) as u32;
    let frame_kib = env_or("FOOTPRINT_FRAME_KIB", 256) as usize;
    let rounds = env_or("FOOTPRINT_ROUNDS", 3) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let wf = dir.path().join("bench.json");
    std::fs::write(&wf, common::sd15(512, 512, steps, 1).to_string()).expect("write workflow");
    // Fails on the 12 GiB card (batch 8 at 2048²): a real session with endpoints and a search.
    let failing = dir.path().join("failing.json");
    let mut v = common::sd15(2048, 2048, steps, 1);
    v["5"]["inputs"]["batch_size"] = 8.into();
    std::fs::write(&failing, v.to_string()).expect("write workflow");
    let submit: Vec<String> = vec!["submit".into(), "--json".into(), wf.display().to_string()];
    let bisect: Vec<String> = vec![
        "bisect".into(),
        "--runs-dir".into(),
        dir.path().join("runs").display().to_string(),
        failing.display().to_string(),
    ];

    println!("# Footprint benchmark\n");
    println!("- {} ({})", common::cpu_model(), common::load());
    // The installed binary's size (target: at most 25 MB, issue #37); `cargo bench` builds it
    // with the release profile's settings (no debug info, debug sections stripped).
    let size = std::fs::metadata(TOOL).map(|m| m.len()).unwrap_or(0);
    println!(
        "- binary size: {:.1} MB ({size} bytes; target ≤ 25 MB)",
        size as f64 / 1e6
    );
    println!("- `comfy-bisect submit` / `bisect` (release build) against the simulator (12 GiB, time_scale 0), {steps} sampler steps");
    println!(
        "- previews: {frames} binary frames × {frame_kib} KiB after every progress event \
         ({:.0} MiB per run)",
        (steps as f64 * f64::from(frames) * frame_kib as f64) / 1024.0
    );

    let rows = rt.block_on(async {
        let sim = start(
            SimConfig::default().with_vram_gib(12).with_time_scale(0.0),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .expect("start simulator");
        let plain = WsTap::start(sim.addr(), None).await;
        let flood = WsTap::start(
            sim.addr(),
            Some(Previews {
                per_progress: frames,
                frame_bytes: frame_kib * 1024,
            }),
        )
        .await;
        let mut rows: Vec<(&str, Vec<Measured>, u64)> = Vec::new();
        for (name, tap, command) in [
            ("`submit`, no previews", &plain, &submit),
            ("`submit`, previews on", &flood, &submit),
            ("`bisect` session, no previews", &plain, &bisect),
            ("`bisect` session, previews on", &flood, &bisect),
        ] {
            let mut ms = Vec::new();
            let before = tap.log().injected_bytes;
            for _ in 0..rounds {
                let url = tap.base_url();
                let command = command.clone();
                let out = dir.path().join("time.txt");
                ms.push(
                    tokio::task::spawn_blocking(move || measure(&url, &command, &out))
                        .await
                        .expect("measure"),
                );
            }
            let injected = (tap.log().injected_bytes - before) / rounds.max(1) as u64;
            rows.push((name, ms, injected));
        }
        plain.stop();
        flood.stop();
        sim.shutdown().await;
        rows
    });

    println!("- after the runs: {}\n", common::load());
    println!("| run | exit | peak RSS (GNU time %M), median of {rounds} | VmHWM sampled | RSS first → last sample | binary bytes received per run | seconds |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut peak_all = 0.0f64;
    for (name, ms, injected) in &rows {
        let peak: Vec<f64> = ms.iter().map(|m| mib(m.maxrss_kib)).collect();
        let hwm: Vec<f64> = ms.iter().map(|m| mib(m.hwm_kib)).collect();
        let first: Vec<f64> = ms.iter().map(|m| mib(m.rss_first_kib)).collect();
        let last: Vec<f64> = ms.iter().map(|m| mib(m.rss_last_kib)).collect();
        let secs: Vec<f64> = ms.iter().map(|m| m.secs).collect();
        let exits: Vec<String> = ms.iter().map(|m| m.exit.to_string()).collect();
        peak_all = peak_all.max(peak.iter().copied().fold(0.0, f64::max));
        println!(
            "| {name} | {} | **{:.1} MiB** (max {:.1}) | {:.1} MiB | {:.1} → {:.1} MiB | {:.0} MiB | {:.2} |",
            exits.join(","),
            median(&peak),
            peak.iter().copied().fold(0.0, f64::max),
            median(&hwm),
            median(&first),
            median(&last),
            *injected as f64 / (1024.0 * 1024.0),
            median(&secs)
        );
    }
    println!(
        "\nThe `bisect` session (linear): minimal passes (all {steps} steps, so all previews), target \
         and step 1 fail on the first sampler step; exit 0 = the session reached its verdict.\n\n\
         | target | measured | |\n|---|---|---|\n| peak RSS ≤ 30 MB | {peak_all:.1} MiB (largest of all runs) | {} |",
        if peak_all * 1.048_576 <= 30.0 { "met" } else { "missed" }
    );
}
