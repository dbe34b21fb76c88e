//! Run-time prediction accuracy (issue #27 item 2): `cargo bench --bench eta`.
//!
//! Bisects the example workflows on the simulator (its time model scaled to real seconds by
//! `--time-scale`) with each strategy and at VRAM sizes that fail at different increments,
//! then replays the journal: for every run after the first, the prediction the driver made
//! before it (`analytics::predict` over the runs finished before it) against its measured
//! duration. Target: within ±25% once one run of the session has finished. Prints a table and
//! the share of runs within the target; a measurement, not a test (it never fails on accuracy).

// A few of the session tests' helpers.
#[allow(dead_code)]
#[path = "../tests/support/session.rs"]
mod session_support;

use comfy_bisect_core::analytics::predict::{predict_run, Observed};
use comfy_bisect_core::session::eta::observed;
use comfy_bisect_core::session::SessionFile;
use session_support::*;

/// (example workflow, VRAM MiB, time scale, strategy)
const CASES: &[(&str, u64, f64, &str)] = &[
    ("sd15_txt2img_lora_upscale", 3 * 1024, 1.0, "linear"),
    ("sd15_txt2img_lora_upscale", 3 * 1024, 1.0, "binary"),
    ("sd15_hires_fix_pixel", 4 * 1024, 1.0, "linear"),
    ("sd15_hires_fix_pixel", 4 * 1024, 1.0, "binary"),
    (
        "wan22_t2v_experts_lora_cache_rife",
        40 * 1024,
        0.05,
        "linear",
    ),
    (
        "wan22_t2v_experts_lora_cache_rife",
        40 * 1024,
        0.05,
        "binary",
    ),
    (
        "wan22_t2v_experts_lora_cache_rife",
        56 * 1024,
        0.05,
        "linear",
    ),
    (
        "wan22_t2v_experts_lora_cache_rife",
        56 * 1024,
        0.05,
        "binary",
    ),
];

fn main() {
    // Passed runs: the prediction against the run. A failed run stops where it fails, which
    // no measurement of earlier runs says: its prediction is what it would take had it
    // passed, an upper bound (counted: at least 75% of the actual).
    let mut errors: Vec<f64> = Vec::new();
    let (mut failed, mut failed_within) = (0, 0);
    println!(
        "| workflow | VRAM | strategy | run | step | outcome | predicted | actual | error | \
         predicted setup + steps + post | measured |"
    );
    println!("|---|---:|---|---:|---|---|---:|---:|---:|---|---|");
    // ETA_JOURNALS=DIR keeps each case's journal in DIR and replays it on the next run
    // instead of bisecting again (the runs a session makes do not depend on the predictor
    // with `--search-steps full`), to compare predictors on the same measured runs.
    let journals = std::env::var_os("ETA_JOURNALS").map(std::path::PathBuf::from);
    for &(name, mib, scale, strategy) in CASES {
        let kept = journals
            .as_ref()
            .map(|d| d.join(format!("{name}-{mib}-{strategy}.json")));
        let session: SessionFile = match kept.as_ref().filter(|f| f.exists()) {
            Some(file) => serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap(),
            None => {
                let sim = Sim::with_vram_mib(mib, scale);
                let b = bisect_workflow(
                    &sim,
                    &example(name, &[]),
                    &["--strategy", strategy, "--search-steps", "full"],
                );
                if let Some(file) = &kept {
                    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                    std::fs::write(file, serde_json::to_vec_pretty(&b.session).unwrap()).unwrap();
                }
                b.session
            }
        };
        let session = &session;
        let job = &session.workflows[0];
        for (i, run) in job.runs.iter().enumerate() {
            let Some(summary) = &run.summary else {
                continue;
            };
            let Some(work) = summary.work else { continue };
            // What the driver knew before this run: the runs finished before it.
            let mut known = session.clone();
            known.workflows[0].runs.truncate(i);
            let before: Vec<Observed> = observed(&known);
            let Some(p) = predict_run(&before, 0, run.step, &work, summary.cold) else {
                continue;
            };
            let actual = summary.duration_ms as f64 / 1000.0;
            let predicted = p.total().as_secs_f64();
            let error = (predicted - actual) / actual;
            if run.passed() {
                errors.push(error);
            } else {
                failed += 1;
                failed_within += usize::from(predicted >= actual * 0.75);
            }
            let outcome = run.outcome.as_ref().map(|o| o.name()).unwrap_or("?");
            let parts =
                |setup: f64, steps: f64, post: f64| format!("{setup:.2} + {steps:.2} + {post:.2}");
            let measured = summary
                .phases
                .map(|m| {
                    parts(
                        m.setup_ms as f64 / 1000.0,
                        m.step_ms * f64::from(m.steps) / 1000.0,
                        m.post_ms as f64 / 1000.0,
                    )
                })
                .unwrap_or_else(|| "—".into());
            println!(
                "| {name} | {} GiB | {strategy} | {} | {} {} | {outcome} | {predicted:.2} s | \
                 {actual:.2} s | {:+.0}% | {} | {measured} |",
                mib / 1024,
                i + 1,
                run.step,
                run.increment,
                error * 100.0,
                parts(
                    p.setup.as_secs_f64(),
                    p.steps.as_secs_f64(),
                    p.post.as_secs_f64()
                ),
            );
        }
    }
    let within = errors.iter().filter(|e| e.abs() <= 0.25).count();
    let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    println!(
        "\npassed runs: {within} of {} predictions within ±25%; median |error| {:.0}%, worst \
         {:.0}%\nfailed runs: {failed_within} of {failed} predicted at least 75% of the actual \
         (an upper bound: a failure ends a run early)",
        errors.len(),
        abs.get(abs.len() / 2).copied().unwrap_or(0.0) * 100.0,
        abs.last().copied().unwrap_or(0.0) * 100.0
    );
}
