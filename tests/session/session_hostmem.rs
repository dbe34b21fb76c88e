//! Host memory on the simulator run as a local process (it listens in this test process, so the
//! server's PID is this test's): every run of a session records system RAM and the server
//! process's RSS and swap, and a session whose target blows host RAM — the simulated OOM killer
//! ends the server — reports the peak, the host-RAM pressure and "Peak RAM" in the report.

use crate::session_support::*;
use comfy_bisect_core::ladder::PlanOptions;
use comfy_bisect_core::session::journal::{read_json, RunFile, Verdict, RUN_RECORD_FILE};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{SimConfig, GIB, MIB};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Enough VRAM that nothing of the Wan example fails on the device.
const VRAM_MIB: u64 = 131072;

fn config(ram_bytes: u64) -> SimConfig {
    SimConfig::default()
        .with_vram_bytes(VRAM_MIB * MIB)
        .with_ram_bytes(ram_bytes)
        .with_time_scale(0.0)
}

/// Host RAM the simulator holds after running `workflow` on a fresh server with plenty of RAM
/// (IMAGE outputs stay in its cache until the next `/free`, so this is the run's peak).
fn host_ram_needed(workflow: &Workflow) -> u64 {
    let sim = Sim::start(config(1024 * GIB));
    let record = sim.run_warm(workflow);
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    sim.handle().host_ram_used()
}

/// Restarts the simulator whenever it is down, as a supervisor (systemd `Restart=always`)
/// restarts a killed ComfyUI; stops when the returned flag is set.
fn supervise(sim: Arc<Sim>) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            if !sim.handle().is_up() {
                sim.restart();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (stop, thread)
}

#[test]
#[cfg(target_os = "linux")]
fn a_target_that_blows_host_ram_is_reported_with_its_peak() {
    let wan = example("wan22_t2v_experts_lora_cache_rife", &[]);
    let steps = ladder(&wan, &PlanOptions::default());
    let minimal = host_ram_needed(&steps[0].1);
    let target = host_ram_needed(&steps.last().unwrap().1);
    assert!(
        target > minimal + GIB,
        "the target holds more images: {minimal} vs {target}"
    );
    // RAM between what the minimal variant and the target need.
    let ram = (minimal + target) / 2;
    let sim = Arc::new(Sim::start(config(ram)));
    let (stop, supervisor) = supervise(sim.clone());
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wan", &wan);
    let runs = tmp.path().join("runs");
    let out = bisect(
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--wait-server", "2m"],
    );
    stop.store(true, Ordering::SeqCst);
    supervisor.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (dir, session) = only_session(&runs);
    let job = &session.workflows[0];
    let failing = match &job.verdict {
        Some(Verdict::FirstFailure { run_id, .. }) => run_id.clone(),
        other => panic!("{other:?}\n{}", text(&out)),
    };
    let me = std::process::id();
    for entry in &job.runs {
        let file: RunFile = read_json(&dir.join(&entry.dir).join(RUN_RECORD_FILE)).unwrap();
        let host = &file.record.host;
        assert_eq!(host.ram_total_bytes, Some(ram), "{}", entry.run_id);
        assert!(host.peak_ram_used_bytes.is_some(), "{}", entry.run_id);
        assert!(
            host.samples
                .iter()
                .filter(|s| s.ram_used_bytes.is_some())
                .count()
                >= 2,
            "RAM before the run and during or after it: {:?}",
            host.samples
        );
        // The server listens in this test process: its PID, RSS and swap were sampled.
        assert_eq!(host.process.as_ref().map(|p| p.pid), Some(me), "{host:?}");
        assert!(host.peak_rss_bytes.is_some_and(|r| r > 0));
        assert!(host.peak_swap_bytes.is_some());
        let summary = entry.summary.as_ref().unwrap();
        assert!(summary.ram_peak_mib.is_some() && summary.rss_peak_mib.is_some());
    }
    let entry = job.runs.iter().find(|r| r.run_id == failing).unwrap();
    assert_eq!(entry.outcome.as_ref().unwrap().name(), "server_lost");
    let file: RunFile = read_json(&dir.join(&entry.dir).join(RUN_RECORD_FILE)).unwrap();
    let peak = file.record.host.peak_ram_used_bytes.unwrap();
    assert!(
        peak as f64 >= 0.99 * ram as f64,
        "the peak {peak} shows the RAM full ({ram})"
    );
    assert!(file.record.kernel.is_some(), "the kernel log was consulted");
    let diagnosis = entry.diagnosis.as_ref().unwrap();
    assert_eq!(diagnosis.kind.as_str(), "process_killed");
    assert!(
        diagnosis
            .kind_evidence
            .contains("Host-RAM pressure: system RAM in use peaked at"),
        "{}",
        diagnosis.kind_evidence
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("| Peak RAM |"), "{report}");
    // The chart (report.json only) draws the RAM line too.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let chart = json["workflows"][0]["memory_chart"]["mermaid"]
        .as_str()
        .unwrap_or_else(|| panic!("no chart: {json}"));
    assert!(chart.contains("Peak VRAM and RAM per step"), "{chart}");
    assert!(
        report.contains("- Host RAM: System RAM in use peaked at"),
        "{report}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn the_simulators_process_is_found_by_its_listening_socket() {
    use comfy_bisect_core::host::process::{locate, memory, Located};
    let sim = Sim::start(config(64 * GIB));
    // The simulator listens in this test process, so the PID listening on its port is ours.
    match locate(&sim.url()) {
        Located::Found(p) => assert_eq!(p.pid, std::process::id(), "{p:?}"),
        other => panic!("{other:?}"),
    }
    assert!(memory(std::process::id()).is_some_and(|m| m.rss_bytes > 0));
    // `localhost` is this machine too.
    let port = sim.handle().addr().port();
    match locate(&format!("http://localhost:{port}/")) {
        Located::Found(p) => assert_eq!(p.pid, std::process::id()),
        other => panic!("{other:?}"),
    }
    let url = sim.url();
    drop(sim);
    // Nobody listens any more: local, but no process.
    assert!(
        matches!(locate(&url), Located::NotFound(_)),
        "{:?}",
        locate(&url)
    );
}
