//! A bisection where ComfyUI's tiled VAE decode fallback first saves a run one step before the
//! first failure, run from the command line against the simulator: the fallback is recorded
//! (run.json, server.log, the index, the ladder table, the verdict), and `--strict` stops at it
//! with kind `memory_fallback`.

use crate::session_support::*;
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{read_json, Outcome, RunFile, Verdict, RUN_RECORD_FILE};
use serde_json::Value;

/// SD1.5 example (resolution → batch → lora → postprocess). On a 2560 MiB card the full
/// resolution's VAE decode only passes tiled, and the batch runs out (scanned with the
/// simulator: 2048 MiB fails at resolution, 4096 MiB decodes without the fallback).
const FALLBACK_BEFORE_BATCH: u64 = 2560;

fn target() -> Value {
    example("sd15_txt2img_lora_upscale", &[])
}

/// The session's verdict is the first failure at (step, increment).
fn assert_first_failure(b: &Bisected, want: (usize, &str)) {
    match &b.job().verdict {
        Some(Verdict::FirstFailure {
            step, increment, ..
        }) => assert_eq!((*step, increment.as_str()), want, "{}", b.text()),
        other => panic!("{other:?}\n{}", b.text()),
    }
}

#[test]
fn the_fallback_one_step_before_the_first_failure_is_reported() {
    let sim = Sim::with_vram_mib(FALLBACK_BEFORE_BATCH, 0.0);
    let b = bisect_workflow(&sim, &target(), &[]);
    let dir = &b.dir;
    assert_first_failure(&b, (2, "batch"));
    // Step 1 passed, with the fallback in its summary, run.json, server.log and index line.
    let res = b.main_run(1);
    assert_eq!(res.outcome, Some(Outcome::Passed));
    let fallbacks = vec!["tiled VAE decode fallback".to_string()];
    assert_eq!(
        res.summary.as_ref().unwrap().delivered.memory_fallbacks,
        fallbacks
    );
    let file: RunFile = read_json(&dir.join(&res.dir).join(RUN_RECORD_FILE)).unwrap();
    assert_eq!(file.record.memory_fallbacks, fallbacks);
    let log = std::fs::read_to_string(dir.join(&res.dir).join("server.log")).unwrap();
    assert!(log.contains("retrying with tiled VAE decoding"), "{log}");
    let idx = index::read_all(&b.runs).unwrap();
    let line = idx.iter().find(|e| e.run_id == res.run_id).unwrap();
    assert_eq!(line.outcome, "passed");
    assert_eq!(line.memory_fallbacks, fallbacks);
    // No other step fell back.
    assert!(idx
        .iter()
        .filter(|e| e.run_id != res.run_id)
        .all(|e| e.memory_fallbacks.is_empty()));
    // The report: the ladder cell and the verdict naming both steps.
    let md = b.read("report.md");
    assert!(md.contains("passed — tiled VAE decode fallback"), "{md}");
    assert!(
        md.contains("First memory fallback at **resolution** (step 1: tiled VAE decode fallback); first failure at **batch** (step 2 of"),
        "{md}"
    );
    // Per step, the models the simulator's console said it loaded, and the fallback: in
    // report.json (report.md, sized for an issue, names the field).
    assert!(md.contains("models loaded (`ladder[].models`)"), "{md}");
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let step1 = &json["workflows"][0]["ladder"][1];
    assert_eq!(step1["step"], 1, "{step1}");
    assert!(
        step1["models"].as_array().is_some_and(|m| !m.is_empty()),
        "{step1}"
    );
    assert_eq!(
        step1["memory_fallbacks"][0], "tiled VAE decode fallback",
        "{step1}"
    );
    // The failing run's console, from its `got prompt`, in a details block.
    let console = md
        .split("<summary>Server console of the failing run")
        .nth(1)
        .unwrap_or_else(|| panic!("no console block:\n{md}"));
    let console = &console[..console.find("</details>").unwrap()];
    assert!(console.contains(" got prompt\n"), "{console}");
    assert!(console.contains("Prompt executed in"), "{console}");
    // The chart (report.json): the fallback step passed, the failing step is in the failed
    // series.
    let chart = json["workflows"][0]["memory_chart"]["mermaid"]
        .as_str()
        .unwrap_or_else(|| panic!("no chart: {json}"));
    assert!(
        chart.contains("\"1 resolution (passed, fallback)\""),
        "{chart}"
    );
    assert!(chart.contains("\"2 batch (failed)\""), "{chart}");
}

#[test]
fn strict_makes_the_fallback_the_first_failure() {
    let sim = Sim::with_vram_mib(FALLBACK_BEFORE_BATCH, 0.0);
    let b = bisect_workflow(&sim, &target(), &["--strict"]);
    assert_first_failure(&b, (1, "resolution"));
    let res = b.job().runs.iter().find(|r| r.step == 1).unwrap();
    assert_eq!(
        res.outcome,
        Some(Outcome::MemoryFallback {
            fallbacks: vec!["tiled VAE decode fallback".into()]
        })
    );
    let idx = index::read_all(&b.runs).unwrap();
    assert_eq!(
        idx.iter().find(|e| e.run_id == res.run_id).unwrap().outcome,
        "memory_fallback"
    );
    let md = b.read("report.md");
    assert!(md.contains("memory fallback"), "{md}");
}
