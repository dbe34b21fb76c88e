//! Memory pressure without an OOM, end to end from the command line on the simulator's 2026
//! profile (dynamic VRAM): a Wan-like workflow where no step runs out of memory, but the
//! target's frames make the weights stream, each step slower. The bisection names the first
//! step under pressure with its slowdown and the MB staged; `--strict` stops there with kind
//! `memory_pressure` (issue #23 items 2, 3).

use crate::session_support::*;
use comfy_bisect_core::analytics::pressure::Evidence;
use comfy_bisect_core::analytics::walk::{Cue, VRAM_LIMIT_MARGIN_MIB};
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{
    read_json, Outcome, RunFile, RunRole, Verdict, RUN_RECORD_FILE,
};
use comfy_bisect_sim::{Profile, SimConfig, MIB};
use serde_json::{json, Value};

/// A card on which the Wan 2.2 example at 720p fits whole at 129 frames and streams about
/// half its weights at 161 (the simulator's dynamic VRAM keeps the sampler's activations free
/// and slows each step by what streams).
const CARD_MIB: u64 = 44 * 1024;
/// The simulator's seconds run 200 times faster: a 720p step still takes over 100 ms, well
/// above the noise of the frames' clock.
const TIME_SCALE: f64 = 0.005;

/// The Wan example at 161 frames, 8 steps (4 per expert). Its step cache (EasyCache) then
/// runs out of memory on the first step.
fn target() -> Value {
    example(
        "wan22_t2v_experts_lora_cache_rife",
        &[
            ("13", "length", json!(161)),
            ("14", "steps", json!(8)),
            ("14", "end_at_step", json!(4)),
            ("15", "steps", json!(8)),
            ("15", "start_at_step", json!(4)),
        ],
    )
}

/// [`target`] without its step cache: no step runs out of memory.
fn target_without_cache() -> Value {
    let mut v = target();
    v["14"]["inputs"]["model"] = json!(["7", 0]);
    v["15"]["inputs"]["model"] = json!(["8", 0]);
    let nodes = v.as_object_mut().unwrap();
    nodes.remove("9");
    nodes.remove("10");
    v
}

fn sim() -> Sim {
    Sim::start(
        SimConfig::default()
            .with_profile(Profile::Y2026)
            .with_vram_bytes(CARD_MIB * MIB)
            .with_time_scale(TIME_SCALE),
    )
}

/// The verdict is the first failure at (step, increment).
fn first_failure(b: &Bisected) -> (usize, String) {
    match &b.job().verdict {
        Some(Verdict::FirstFailure {
            step, increment, ..
        }) => (*step, increment.clone()),
        other => panic!("{other:?}\n{}", b.text()),
    }
}

#[test]
fn the_verdict_names_the_first_memory_pressure_before_the_first_failure() {
    let sim = sim();
    let b = bisect_workflow(&sim, &target(), &["--min-frames", "129"]);
    assert_eq!(first_failure(&b), (5, "cache".to_string()));
    let md = b.read("report.md");
    assert!(
        md.contains("First memory pressure at **frames** (step 2: slowed "),
        "{md}"
    );
    assert!(
        md.contains(" MiB); first failure at **cache** (step 5 of "),
        "{md}"
    );
    assert_eq!(b.main_run(3).outcome, Some(Outcome::Passed));
    // Issue #38: the terminal never says "passed" alone for the run that streamed: the closing
    // summary leads with the pressure and hints at --strict, and the bug form's short table
    // names it too (the run line's words: `session::progress`'s unit test).
    let out = b.text();
    assert!(
        out.contains(": first memory pressure at frames (step 2: slowed "),
        "{out}"
    );
    assert!(out.contains("rerun with --strict"), "{out}");
    assert!(md.contains("| 2 | frames | passed — slowed "), "{md}");
    assert_eq!(b.out.status.code(), Some(0), "first failure found: {out}");
    // The ladder has a time per step; the boundary runs' nodes are timed side by side in
    // report.json (report.md, sized for an issue, says they are there).
    assert!(md.contains(" s/step | Duration |"), "{md}");
    assert!(md.contains("node times (`node_times`)"), "{md}");
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let times = &json["workflows"][0]["node_times"];
    let runs = timed_runs(times);
    assert_eq!(
        runs,
        [
            (2, "first memory pressure"),
            (4, "last pass"),
            (5, "first failure")
        ],
        "{times}"
    );
    let sampler = times["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node"] == "14" && r["class_type"] == "KSamplerAdvanced")
        .unwrap_or_else(|| panic!("{times}"));
    let timed = sampler["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.is_f64())
        .count();
    assert!(timed >= 2, "{sampler}");
}

#[test]
fn the_first_step_whose_weights_stream_is_the_first_memory_pressure() {
    let sim = sim();
    // Nothing runs out of memory, so the target passes; a cue on it walks the ladder (no
    // --assume-fails), one step at a time, to the first step whose weights stream.
    let b = bisect_workflow(&sim, &target_without_cache(), &["--min-frames", "129"]);
    assert!(
        matches!(b.job().verdict, Some(Verdict::CouldNotReproduce { .. })),
        "{:?}\n{}",
        b.job().verdict,
        b.text()
    );
    // Nothing failed but a step streamed: exit 5 (memory pressure only), not 4 (could not
    // reproduce), and the summary leads with the pressure (issue #38).
    assert_eq!(b.out.status.code(), Some(5), "{}", b.text());
    assert!(
        b.text()
            .contains(": first memory pressure at frames (step 2: "),
        "{}",
        b.text()
    );
    // The cue, with its numbers, on the target's summary: its VRAM peak at the card's total
    // (dynamic VRAM fills the card with weights before it streams).
    let target = b.main_run(5);
    let cues = &target.summary.as_ref().unwrap().walk_cues;
    match &cues[..] {
        [Cue::VramAtLimit {
            peak_mib,
            vram_total_mib,
            ..
        }] => {
            assert_eq!(*vram_total_mib, CARD_MIB as f64);
            assert!(
                *peak_mib >= vram_total_mib - VRAM_LIMIT_MARGIN_MIB,
                "{cues:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The walk stopped at the first pressure: minimal, target, steps 1 and 2, nothing above.
    let made: Vec<(usize, RunRole)> = b.job().runs.iter().map(|r| (r.step, r.role)).collect();
    assert_eq!(
        made,
        [
            (0, RunRole::Minimal),
            (5, RunRole::Target),
            (1, RunRole::Search),
            (2, RunRole::Search)
        ],
        "{}",
        b.text()
    );
    // Step 1 (resolution, 129 frames) fits; step 2 (frames) streams.
    let res = b.main_run(1);
    assert_eq!(res.outcome, Some(Outcome::Passed));
    assert!(
        res.summary
            .as_ref()
            .unwrap()
            .delivered
            .memory_pressure
            .is_empty(),
        "{:?}",
        res.summary
    );
    let frames = b.main_run(2);
    assert_eq!(frames.increment, "frames");
    assert_eq!(frames.outcome, Some(Outcome::Passed));
    let words = frames
        .summary
        .as_ref()
        .unwrap()
        .delivered
        .memory_pressure
        .clone();
    assert!(words.len() == 3, "{words:?}");
    assert!(words[0].starts_with("slowed "), "{words:?}");
    assert!(words[1].starts_with("weights streamed ("), "{words:?}");
    // Time alone decides nothing (issue #39): the slowdown counts beside a memory sign.
    assert!(words[2].starts_with("memory sign: VRAM peak "), "{words:?}");
    // run.json: the evidence with its numbers, judged against step 1.
    let file: RunFile = read_json(&b.dir.join(&frames.dir).join(RUN_RECORD_FILE)).unwrap();
    let p = file.memory_pressure.expect("memory_pressure in run.json");
    match &p.evidence[..] {
        [Evidence::Slowdown {
            previous_step,
            slowdown,
            work_bound,
            ..
        }] => {
            assert_eq!(*previous_step, 1);
            assert!(*slowdown > work_bound * 1.5, "{slowdown} vs {work_bound}");
        }
        other => panic!("{other:?}"),
    }
    assert!(p.staged_mb.is_some_and(|mb| mb > 10_000), "{p:?}");
    // The staging lines are in the run's memory events, and in step 1's too (not pressure).
    let step1: RunFile = read_json(&b.dir.join(&res.dir).join(RUN_RECORD_FILE)).unwrap();
    assert!(step1.memory_pressure.is_none());
    assert!(step1
        .record
        .memory_events
        .iter()
        .any(|e| e.describe().ends_with("MB staged")));
    // The index line.
    let idx = index::read_all(&b.runs).unwrap();
    let line = idx.iter().find(|e| e.run_id == frames.run_id).unwrap();
    assert_eq!(line.outcome, "passed");
    assert_eq!(line.memory_pressure, words);
    // The report: the ladder cell and the verdict.
    let md = b.read("report.md");
    assert!(md.contains("passed — slowed "), "{md}");
    // The pressure leads the verdict (issue #38), then that nothing failed.
    assert!(
        md.contains("**Verdict:** First memory pressure at **frames** (step 2: slowed "),
        "{md}"
    );
    assert!(md.contains(" MB staged), memory sign: VRAM peak "), "{md}");
    assert!(md.contains(". No step failed: "), "{md}");
    // Why the ladder was walked after the target passed.
    assert!(
        md.contains("The ladder was walked because the target's VRAM peak ")
            && md.contains(&format!("MiB of the card's {CARD_MIB} MiB.")),
        "{md}"
    );
    // Nothing failed: the node times (report.json) set the pressure beside the pass before
    // it, and name no failure (the verdict's step is the passing target).
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let times = &json["workflows"][0]["node_times"];
    let runs = timed_runs(times);
    assert_eq!(
        runs,
        [(1, "last pass"), (2, "first memory pressure")],
        "{times}"
    );
}

#[test]
fn a_passing_target_without_a_cue_ends_after_the_minimal_and_the_target() {
    // A card on which nothing streams: the target passes with no cue, as before the walk.
    let sim = Sim::start(
        SimConfig::default()
            .with_profile(Profile::Y2026)
            .with_vram_bytes(4 * CARD_MIB * MIB)
            .with_time_scale(TIME_SCALE),
    );
    let b = bisect_workflow(&sim, &target_without_cache(), &["--min-frames", "129"]);
    assert!(
        matches!(b.job().verdict, Some(Verdict::CouldNotReproduce { .. })),
        "{}",
        b.text()
    );
    let made: Vec<RunRole> = b.job().runs.iter().map(|r| r.role).collect();
    assert_eq!(made, [RunRole::Minimal, RunRole::Target], "{}", b.text());
    // Could not reproduce, no pressure: exit 4 (issue #38).
    assert_eq!(b.out.status.code(), Some(4), "{}", b.text());
    assert!(b.main_run(5).summary.as_ref().unwrap().walk_cues.is_empty());
    let md = b.read("report.md");
    assert!(!md.contains("The ladder was walked"), "{md}");
}

#[test]
fn strict_walks_a_passing_target_to_the_first_pressure_and_names_it_as_the_failure() {
    let sim = sim();
    // The target passes (nothing runs out of memory, and against the minimal its slowdown is
    // within the work bound); the walk finds the pressure at frames, a failure under --strict.
    let b = bisect_workflow(
        &sim,
        &target_without_cache(),
        &["--min-frames", "129", "--strict"],
    );
    assert_eq!(first_failure(&b), (2, "frames".to_string()));
    assert_eq!(b.main_run(5).outcome, Some(Outcome::Passed));
    assert!(matches!(
        b.main_run(2).outcome,
        Some(Outcome::MemoryPressure { .. })
    ));
    assert!(
        b.job().runs.iter().all(|r| r.step <= 2 || r.step == 5),
        "{}",
        b.text()
    );
    // The closing line names the kind, as the report does.
    let out = String::from_utf8_lossy(&b.out.stdout);
    assert!(
        out.contains(
            "first failure at increment frames (step 2), stage sample_middle: passed under memory pressure, counted as a failure by --strict"
        ),
        "{out}"
    );
}

#[test]
fn strict_stops_at_the_first_memory_pressure() {
    let sim = sim();
    // The target runs out of memory at its step cache; the pressure two steps before it is
    // where --strict stops.
    let b = bisect_workflow(&sim, &target(), &["--min-frames", "129", "--strict"]);
    assert_eq!(first_failure(&b), (2, "frames".to_string()));
    let run = b.main_run(2);
    match &run.outcome {
        Some(Outcome::MemoryPressure { evidence }) => {
            assert!(evidence[0].starts_with("slowed "), "{evidence:?}")
        }
        other => panic!("{other:?}\n{}", b.text()),
    }
    let idx = index::read_all(&b.runs).unwrap();
    assert_eq!(
        idx.iter().find(|e| e.run_id == run.run_id).unwrap().outcome,
        "memory_pressure"
    );
    let md = b.read("report.md");
    assert!(md.contains("passed under memory pressure"), "{md}");
    // Between the boundary and the target nothing ran.
    assert!(
        b.job()
            .runs
            .iter()
            .all(|r| r.step <= 2 || r.role == RunRole::Target),
        "{}",
        b.text()
    );
}

/// Issue #39 finding 11: a busy machine reads as memory pressure. The simulator's `busy-host`
/// fault slows the second half of every sampler's steps threefold with nothing about memory
/// changed, on a card where nothing streams; before, `--strict` called the minimal variant a
/// failure ("minimal variant already fails (stage sample_middle)") from that slowdown alone.
#[test]
fn an_outside_slowdown_is_no_memory_pressure() {
    let sim = Sim::start(
        SimConfig::default()
            .with_profile(Profile::Y2026)
            .with_vram_bytes(96 * 1024 * MIB)
            .with_time_scale(TIME_SCALE)
            .with_faults(comfy_bisect_sim::Faults::default().with_busy_host(3)),
    );
    let b = bisect_workflow(
        &sim,
        &target_without_cache(),
        &[
            "--min-frames",
            "129",
            "--strict",
            "--walk-on-pass",
            "always",
        ],
    );
    assert!(
        matches!(b.job().verdict, Some(Verdict::CouldNotReproduce { .. })),
        "{:?}\n{}",
        b.job().verdict,
        b.text()
    );
    assert!(
        b.job()
            .runs
            .iter()
            .all(|r| r.outcome == Some(Outcome::Passed)),
        "{}",
        b.text()
    );
    // The slowdown is shown, with why it does not count and this machine's load beside it.
    let minimal = b.main_run(0);
    let said = &minimal.summary.as_ref().unwrap().delivered;
    assert!(said.memory_pressure.is_empty(), "{said:?}");
    assert!(
        said.slowdown_only[0].starts_with("steps slowed ")
            && said.slowdown_only[1].starts_with("time alone, not counted as memory pressure")
            && said
                .slowdown_only
                .iter()
                .any(|w| w.contains("load ") || w.contains("load average not recorded")),
        "{said:?}"
    );
    let file: RunFile = read_json(&b.dir.join(&minimal.dir).join(RUN_RECORD_FILE)).unwrap();
    assert_eq!(file.memory_pressure, None);
    assert!(file.record.host.load.is_some());
    let md = b.read("report.md");
    assert!(
        md.contains("time alone, not counted as memory pressure"),
        "{md}"
    );
    assert!(!md.contains("First memory pressure"), "{md}");
}

#[test]
fn a_max_slowdown_that_is_not_above_1_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "target", &target());
    let runs = tmp.path().join("runs");
    for bad in ["1", "0.5", "fast"] {
        let out = bisect(
            "http://127.0.0.1:9",
            &runs,
            &[wf.to_str().unwrap(), "--max-slowdown", bad],
        );
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "'{bad}' is not a slowdown factor: give a number above 1"
            )),
            "{err}"
        );
    }
    assert!(!runs.exists(), "no session folder for a refused option");
}

/// The (step, role) of each run report.json's node times set side by side.
fn timed_runs(times: &Value) -> Vec<(u64, &str)> {
    times["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["step"].as_u64().unwrap(), r["role"].as_str().unwrap()))
        .collect()
}
