//! `--search-steps`: the search runs at few steps on the simulator, the boundary is confirmed at
//! the workflow's own steps, and the verdict is the one a full-step search gives — also for a
//! failure that grows across steps (the simulator's `step-growth` fault).

use crate::session_support::*;
use comfy_bisect_core::session::journal::Verdict;
use comfy_bisect_sim::Faults;
use serde_json::{json, Value};

/// SD1.5 example with batch 1 (its ladder: resolution → lora → postprocess; 25 steps).
fn sd15() -> Value {
    example(
        "sd15_txt2img_lora_upscale",
        &[("5", "batch_size", json!(1))],
    )
}

/// SD1.5 (batch 1): minimal passes, the full resolution runs out in the first step.
const SD15_FAILS_AT_RESOLUTION: u64 = 1792;

fn verdict_key(v: &Option<Verdict>) -> String {
    match v {
        Some(Verdict::FirstFailure {
            step,
            last_pass_step,
            ..
        }) => format!("first failure {last_pass_step}→{step}"),
        Some(other) => other.kind().to_string(),
        None => "none".into(),
    }
}

#[test]
fn a_step_independent_failure_is_found_at_few_steps_and_the_last_pass_rerun_at_full() {
    let full = bisect_workflow(
        &Sim::with_vram_mib(SD15_FAILS_AT_RESOLUTION, 0.0),
        &sd15(),
        &[],
    );
    let fast = bisect_workflow(
        &Sim::with_vram_mib(SD15_FAILS_AT_RESOLUTION, 0.0),
        &sd15(),
        &["--search-steps", "2"],
    );
    let (want, got) = (
        verdict_key(&full.job().verdict),
        verdict_key(&fast.job().verdict),
    );
    assert_eq!(got, want, "{}", fast.text());
    let Some(Verdict::FirstFailure {
        step,
        last_pass_step,
        run_id,
        last_pass_run_id,
        stage,
        ..
    }) = &fast.job().verdict
    else {
        panic!("{}", fast.text())
    };
    assert_eq!(
        stage.map(|s| s.as_str()),
        Some("sample_first"),
        "{}",
        fast.text()
    );
    let runs = &fast.job().runs;
    let by_id = |id: &str| runs.iter().find(|r| r.run_id == id).unwrap();
    // The failure stands at reduced steps (its stage cannot depend on the step count) …
    let fail = by_id(run_id);
    assert_eq!(fail.step, *step);
    assert_eq!(fail.reduced.as_ref().map(|r| r.cap), Some(2));
    // … and the last pass is a full-step run, the only one of the session.
    assert!(by_id(last_pass_run_id).reduced.is_none());
    let full_runs: Vec<usize> = runs
        .iter()
        .filter(|r| r.reduced.is_none())
        .map(|r| r.step)
        .collect();
    assert_eq!(full_runs, vec![*last_pass_step], "{}", fast.text());
    // The reduced run's journal says what changed: the sampler's steps, 25 → 2.
    let change = &fail.reduced.as_ref().unwrap().changes[0];
    let text = serde_json::to_string(change).unwrap();
    assert!(text.contains("steps") && text.contains("25"), "{text}");
    let submitted =
        std::fs::read_to_string(fast.dir.join(&fail.dir).join("workflow.json")).unwrap();
    let submitted: Value = serde_json::from_str(&submitted).unwrap();
    assert_eq!(submitted["3"]["inputs"]["steps"], json!(2));
}

/// The SD1.5 example as shipped (batch 4) on 11063 MiB with a cache that keeps 49 MiB more every
/// step (a case of `benches/gpu_seconds.rs`): at full steps the minimal variant and `resolution`
/// pass and `batch` runs out in the middle of sampling; at few steps even the target passes.
fn growing() -> (Sim, Value) {
    (
        Sim::with_faults(11063, Faults::parse("step-growth=49MiB").unwrap()),
        example("sd15_txt2img_lora_upscale", &[]),
    )
}

#[test]
fn a_failure_that_grows_across_steps_gets_the_full_step_verdict() {
    let (sim, wf) = growing();
    let full = bisect_workflow(&sim, &wf, &[]);
    let (sim, wf) = growing();
    let fast = bisect_workflow(&sim, &wf, &["--search-steps", "2"]);
    let want = verdict_key(&full.job().verdict);
    assert_eq!(want, "first failure 1→2", "{}", full.text());
    assert_eq!(verdict_key(&fast.job().verdict), want, "{}", fast.text());
    // The reduced search saw the target pass; the confirmation at full steps caught it.
    let runs = &fast.job().runs;
    assert!(
        runs.iter().any(|r| r.reduced.is_some() && r.passed()),
        "{}",
        fast.text()
    );
    assert!(
        runs.iter().any(|r| r.reduced.is_none() && r.failed()),
        "{}",
        fast.text()
    );
    // The report says the confirmation disagreed and the search went on at full steps.
    let report = fast.read("report.md");
    assert!(
        report.contains("The confirmation disagreed")
            && report.contains("at full steps though it passed at 2"),
        "{report}"
    );
}

#[test]
fn without_the_option_the_search_runs_at_the_default_step_count_and_keeps_the_verdict() {
    use comfy_bisect_core::session::journal::DEFAULT_SEARCH_STEPS;
    // A failure in the first step, and one that needs many steps (step growth).
    let cases = [
        (
            Sim::with_vram_mib(SD15_FAILS_AT_RESOLUTION, 0.0),
            Sim::with_vram_mib(SD15_FAILS_AT_RESOLUTION, 0.0),
        ),
        (growing().0, growing().0),
    ];
    let workflows = [sd15(), growing().1];
    for ((full_sim, default_sim), wf) in cases.iter().zip(&workflows) {
        let full = bisect_workflow(full_sim, wf, &[]);
        let by_default = bisect_workflow_as_given(default_sim, wf, &[]);
        assert_eq!(full.session.options.search_steps, None);
        assert_eq!(
            by_default.session.options.search_steps,
            Some(DEFAULT_SEARCH_STEPS),
            "{}",
            by_default.text()
        );
        assert_eq!(
            verdict_key(&by_default.job().verdict),
            verdict_key(&full.job().verdict),
            "{}",
            by_default.text()
        );
        let runs = &by_default.job().runs;
        // The search ran at the default cap (the example samples 25 steps) …
        assert!(
            runs.iter()
                .any(|r| r.reduced.as_ref().map(|x| x.cap) == Some(DEFAULT_SEARCH_STEPS)),
            "{}",
            by_default.text()
        );
        // … and the verdict's last pass, when there is one, is a full-step run.
        if let Some(Verdict::FirstFailure {
            last_pass_run_id, ..
        }) = &by_default.job().verdict
        {
            let pass = runs.iter().find(|r| &r.run_id == last_pass_run_id).unwrap();
            assert!(pass.reduced.is_none(), "{}", by_default.text());
        }
    }
}

#[test]
fn with_full_step_target_the_target_runs_at_its_own_steps_and_the_verdict_stays() {
    let (sim, wf) = growing();
    let fast = bisect_workflow(&sim, &wf, &["--search-steps", "2", "--full-step-target"]);
    assert_eq!(
        verdict_key(&fast.job().verdict),
        "first failure 1→2",
        "{}",
        fast.text()
    );
    assert!(fast.session.options.full_step_target);
    let runs = &fast.job().runs;
    let n = fast.job().steps.len() - 1;
    // The target ran at its own steps (without the option it runs at 2 and passes) …
    let target: Vec<_> = runs.iter().filter(|r| r.step == n).collect();
    assert!(
        !target.is_empty() && target.iter().all(|r| r.reduced.is_none()),
        "{}",
        fast.text()
    );
    // … and failed in the middle of sampling, a failure seen only at full steps: no probe is
    // reduced while it is narrowed down (a pass at 2 steps could not tell it from one further
    // up), so no run is wasted.
    assert!(runs.iter().all(|r| r.reduced.is_none()), "{}", fast.text());
}

#[test]
fn full_step_target_without_a_few_step_search_is_refused() {
    let sim = Sim::with_vram_mib(SD15_FAILS_AT_RESOLUTION, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "target", &sd15());
    let out = bisect_as_given(
        &sim.url(),
        &tmp.path().join("runs"),
        &[
            wf.to_str().unwrap(),
            "--search-steps",
            "full",
            "--full-step-target",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("--full-step-target needs a few-step search"),
        "{}",
        text(&out)
    );
    // Refused before anything ran: no session folder.
    let runs = tmp.path().join("runs");
    assert!(!runs.exists() || runs.read_dir().unwrap().next().is_none());
}
