//! A hang is an outcome (issue #23 item 3) and an offloader error is its own kind, end to end
//! from the command line: the simulator's `hang-second-run` fault stops the second prompt of
//! the server at its first sampling step ("the first run is fine, the second hangs"), and
//! `aimdo-error` fails every sampler with comfy-aimdo's `Fault failed`.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{CrashCheck, Outcome, RunRole, SessionState, Verdict};
use comfy_bisect_sim::Faults;

const SD15: &str = "sd15_txt2img_lora_upscale";

#[test]
fn the_second_run_hangs_is_a_hang_that_is_confirmed_and_never_decides_alone() {
    // Enough memory for every step: only the hang can fail a run.
    let sim = Sim::with_faults(24 * 1024, Faults::default().with_hang_second_run(false));
    let b = bisect_workflow(&sim, &example(SD15, &[]), &["--stall", "2s"]);
    let job = b.job();
    // Prompts: minimal ✓, target — the server's second prompt — hangs, its re-run passes.
    let hung = job
        .runs
        .iter()
        .find(|r| r.outcome.as_ref().is_some_and(|o| o.name() == "hang"))
        .unwrap_or_else(|| panic!("no hang\n{}", b.text()));
    match hung.outcome.as_ref().unwrap() {
        Outcome::Hang {
            node_id,
            node_type,
            step,
            interrupt_confirmed,
            detail,
            ..
        } => {
            assert_eq!(node_type.as_deref(), Some("KSampler"), "{detail}");
            assert!(node_id.is_some(), "{detail}");
            assert_eq!(*step, Some(1), "{detail}");
            assert!(*interrupt_confirmed, "{detail}");
            assert!(detail.contains("--stall"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    let confirm = job
        .runs
        .iter()
        .find(|r| r.role == RunRole::Confirm)
        .unwrap_or_else(|| panic!("the hang was not re-run\n{}", b.text()));
    assert_eq!(confirm.confirms.as_deref(), Some(hung.run_id.as_str()));
    assert!(confirm.passed(), "{}", b.text());
    assert!(
        matches!(job.crash_check(hung, 1), CrashCheck::NotReproduced { .. }),
        "{}",
        b.text()
    );
    assert!(
        matches!(job.verdict, Some(Verdict::CouldNotReproduce { .. })),
        "one hang decided the verdict: {:?}\n{}",
        job.verdict,
        b.text()
    );
    let run_json = std::fs::read_to_string(b.dir.join(&hung.dir).join("run.json")).unwrap();
    let run: serde_json::Value = serde_json::from_str(&run_json).unwrap();
    let record = &run["record"];
    assert_eq!(record["outcome"], "hang", "{record}");
    assert_eq!(record["error"]["hang"]["step"], 1, "{}", record["error"]);
    assert_eq!(
        record["error"]["hang"]["limit_ms"], 2000,
        "{}",
        record["error"]
    );
    let report = b.read("report.md");
    assert!(report.contains("hang"), "{report}");
    assert!(report.contains("crash not reproduced"), "{report}");
}

#[test]
fn a_hang_whose_interrupt_is_ignored_stops_the_session_without_restart_cmd() {
    // The hung prompt keeps the server's worker: every later run would queue behind it, so
    // without --restart-cmd the session stops and says how to go on.
    let sim = Sim::with_faults(24 * 1024, Faults::default().with_hang_second_run(true));
    let b = bisect_workflow(&sim, &example(SD15, &[]), &["--stall", "2s"]);
    let job = b.job();
    let hung = job
        .runs
        .iter()
        .find(|r| r.outcome.as_ref().is_some_and(|o| o.name() == "hang"))
        .unwrap_or_else(|| panic!("no hang\n{}", b.text()));
    assert!(
        matches!(
            hung.outcome,
            Some(Outcome::Hang {
                interrupt_confirmed: false,
                ..
            })
        ),
        "{:?}",
        hung.outcome
    );
    match &b.session.state {
        SessionState::Stopped { detail, .. } => assert!(
            detail.contains("ignored the interrupt") && detail.contains("--restart-cmd"),
            "{detail}"
        ),
        other => panic!("{other:?}\n{}", b.text()),
    }
}

#[test]
fn an_offloader_error_is_kind_aimdo() {
    let sim = Sim::with_faults(24 * 1024, Faults::default().with_aimdo_error());
    let b = bisect_workflow(&sim, &example(SD15, &[]), &[]);
    let job = b.job();
    let failed = job
        .runs
        .iter()
        .find(|r| r.failed())
        .unwrap_or_else(|| panic!("no failure\n{}", b.text()));
    let diagnosis = failed.diagnosis.as_ref().expect("a diagnosis");
    assert_eq!(diagnosis.kind.as_str(), "aimdo", "{}", b.text());
    assert!(
        matches!(job.verdict, Some(Verdict::MinimalFails { .. })),
        "{:?}",
        job.verdict
    );
}
