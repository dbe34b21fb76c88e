//! A crash never decides a verdict alone (`--confirm-crashes`), end to end from the command
//! line: the simulator is killed during a chosen prompt (`crash-on=N`) and comes back by itself
//! (`revive-after=MS`, as under a supervisor), the tool waits for it (`--wait-server`) and
//! re-runs the crashed step.

use crate::session_support::*;
use comfy_bisect_core::ladder::PlanOptions;
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{CrashCheck, RunRole, SessionState, Verdict};
use comfy_bisect_sim::{Faults, SimConfig, MIB};
use serde_json::Value;

const WAN: &str = "wan22_t2v_experts_lora_cache_rife";
/// Wan 2.2: 2 frames fit, the target's frame count does not (see tests/session_sim.rs).
const WAN_FAILS_AT_FRAMES: u64 = 16384;

fn step_of(workflow: &Value, increment: &str) -> usize {
    ladder(workflow, &PlanOptions::default())
        .iter()
        .position(|(i, _)| i == increment)
        .unwrap_or_else(|| panic!("no {increment} step"))
}

/// Bisects the Wan example on a simulator that crashes during the prompts `crash_on`
/// (1-based, in submission order) and comes back by itself.
fn crash_scenario(
    crash_on: &[u64],
    extra: &[&str],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    comfy_bisect_core::session::SessionFile,
    String,
) {
    let sim = Sim::start(
        SimConfig::default()
            .with_vram_bytes(WAN_FAILS_AT_FRAMES * MIB)
            .with_time_scale(0.0)
            .with_faults(
                Faults::default()
                    .with_crash_on(crash_on)
                    .with_revive_after_ms(300),
            ),
    );
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wan", &example(WAN, &[]));
    let runs = tmp.path().join("runs");
    let mut args = vec![wf.to_str().unwrap(), "--wait-server", "60s"];
    args.extend_from_slice(extra);
    let out = bisect(&sim.url(), &runs, &args);
    let (dir, session) = only_session(&runs);
    (tmp, dir, session, text(&out))
}

#[test]
fn a_crash_at_a_middle_step_that_does_not_repeat_lets_the_search_go_on() {
    let wan = example(WAN, &[]);
    let resolution = step_of(&wan, "resolution");
    let frames = step_of(&wan, "frames");
    assert_eq!(frames, resolution + 1);
    // Prompts: minimal, target, then steps 1, 2, … in order: the resolution step crashes.
    let (_t, dir, s, out) = crash_scenario(&[2 + resolution as u64], &[]);
    assert_eq!(s.state, SessionState::Done, "{out}");
    let job = &s.workflows[0];
    match &job.verdict {
        Some(Verdict::FirstFailure {
            step,
            last_pass_step,
            ..
        }) => assert_eq!((*step, *last_pass_step), (frames, resolution), "{out}"),
        other => panic!("{other:?}\n{out}"),
    }
    let crash = job
        .runs
        .iter()
        .find(|r| r.step == resolution && r.role == RunRole::Search)
        .unwrap();
    assert_eq!(crash.outcome.as_ref().unwrap().name(), "server_lost");
    let confirm = job
        .runs
        .iter()
        .find(|r| r.role == RunRole::Confirm)
        .expect("the crashed step was re-run");
    assert_eq!(confirm.step, resolution);
    assert_eq!(confirm.confirms.as_deref(), Some(crash.run_id.as_str()));
    assert!(confirm.passed(), "{out}");
    assert!(matches!(
        job.crash_check(crash, 1),
        CrashCheck::NotReproduced { .. }
    ));
    // Both runs keep their own id, folder and index line.
    let idx = index::read_all(dir.parent().unwrap()).unwrap();
    for run in [crash, confirm] {
        assert!(dir.join(&run.dir).join("run.json").is_file());
        assert!(idx.iter().any(|e| e.run_id == run.run_id));
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("crash not reproduced"),
        "the unconfirmed crash is shown:\n{report}"
    );
    assert!(report.contains(&confirm.run_id[..8]), "{report}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let row = &json["workflows"][0]["ladder"][resolution];
    assert_eq!(row["crash_check"]["result"], "not_reproduced", "{row}");
    assert_eq!(row["outcome"], "server_lost");
}

#[test]
fn a_crash_that_repeats_is_a_confirmed_failure() {
    let wan = example(WAN, &[]);
    let resolution = step_of(&wan, "resolution");
    let first = 2 + resolution as u64;
    let (_t, dir, s, out) = crash_scenario(&[first, first + 1], &[]);
    let job = &s.workflows[0];
    let Some(Verdict::FirstFailure { step, run_id, .. }) = &job.verdict else {
        panic!("{:?}\n{out}", job.verdict);
    };
    assert_eq!(*step, resolution, "{out}");
    let crash = job.runs.iter().find(|r| &r.run_id == run_id).unwrap();
    assert!(
        matches!(
            job.crash_check(crash, 1),
            CrashCheck::Confirmed { times: 2, .. }
        ),
        "{out}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("the crash was reproduced 2 times"),
        "{report}"
    );
    assert!(
        report.contains("crash confirmed: reproduced 2 times"),
        "{report}"
    );
}
