//! Issue #28 (unattended nights): `--deadline` does not wait for a run that would overrun it.
//! A run still going `--deadline-grace` after the deadline is interrupted on the server,
//! recorded as interrupted, and the session stops with the exact `resume` command.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{Outcome, RunStatus, SessionState, StopReason};
use std::time::Duration;

#[test]
fn a_run_still_going_after_the_deadline_grace_is_interrupted_and_recorded() {
    // A real-time simulator: the Wan example's target takes minutes.
    let sim = Sim::with_vram_mib(57344, 1.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "wan",
        &example("wan22_t2v_experts_lora_cache_rife", &[]),
    );
    let runs = tmp.path().join("runs");
    // Far enough ahead that the first run has started under any load, near enough to keep
    // the test short.
    let deadline = jiff::Timestamp::now() + Duration::from_secs(15);
    let deadline = deadline.round(jiff::Unit::Second).unwrap().to_string();
    let started = std::time::Instant::now();
    let out = bisect(
        &sim.url(),
        &runs,
        &[
            wf.to_str().unwrap(),
            "--deadline",
            &deadline,
            "--deadline-grace",
            "1s",
        ],
    );
    let shown = text(&out);
    let (_, session) = only_session(&runs);
    let SessionState::Stopped { reason, detail } = &session.state else {
        panic!("{:?}\n{shown}", session.state)
    };
    assert_eq!(*reason, StopReason::Deadline, "{detail}\n{shown}");
    assert!(detail.contains("--deadline-grace"), "{detail}");
    assert!(
        detail.contains(&format!("comfy-bisect resume {}", session.session_id)),
        "{detail}"
    );
    assert!(session.in_flight.is_none(), "the run was left in flight");
    // Whichever run the deadline fell in (the minimal variant takes about 18 s here) is the
    // last one, interrupted; none started after the deadline.
    let runs_of = &session.workflows[0].runs;
    let run = runs_of.last().expect("a run started before the deadline");
    assert!(
        runs_of[..runs_of.len() - 1]
            .iter()
            .all(|r| r.outcome == Some(Outcome::Passed)),
        "{runs_of:#?}"
    );
    assert_eq!(run.status, RunStatus::Done);
    assert_eq!(run.outcome, Some(Outcome::Interrupted), "{shown}");
    // The simulator's run would have taken minutes: it was stopped soon after the grace.
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

/// Real seconds per simulated second: the minimal variant takes a few seconds, the target
/// over a minute (and is predicted longer still from the minimal run alone).
const SCALE: f64 = 0.25;
/// The deadline, from the start: far beyond the minimal run under load, far before the
/// target's predicted end.
const DEADLINE_S: u64 = 60;

#[test]
fn a_run_predicted_to_end_after_the_deadline_is_not_started() {
    // The Wan example's minimal variant takes seconds here, its target many times longer;
    // once the minimal run finished, the target's prediction ends after the deadline.
    let sim = Sim::with_vram_mib(57344, SCALE);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "wan",
        &example("wan22_t2v_experts_lora_cache_rife", &[]),
    );
    let runs = tmp.path().join("runs");
    // Far enough ahead for the minimal run under any load, far before the target's end.
    let deadline = jiff::Timestamp::now() + Duration::from_secs(DEADLINE_S);
    let deadline = deadline.round(jiff::Unit::Second).unwrap().to_string();
    let out = bisect(
        &sim.url(),
        &runs,
        &[
            wf.to_str().unwrap(),
            "--search-steps",
            "full",
            "--deadline",
            &deadline,
            "--deadline-grace",
            "1s",
        ],
    );
    let shown = text(&out);
    let (_, session) = only_session(&runs);
    let SessionState::Stopped { reason, detail } = &session.state else {
        panic!("{:?}\n{shown}", session.state)
    };
    assert_eq!(*reason, StopReason::Deadline, "{detail}\n{shown}");
    assert!(detail.contains("predicted to take"), "{detail}");
    let stored = session.options.deadline.clone().unwrap();
    assert!(detail.contains(&format!("deadline {stored}")), "{detail}");
    assert!(
        detail.contains(&format!("comfy-bisect resume {}", session.session_id)),
        "{detail}"
    );
    // The minimal variant ran and passed; the target was not started.
    let done = &session.workflows[0].runs;
    assert_eq!(done.len(), 1, "{done:#?}\n{shown}");
    assert_eq!(done[0].step, 0);
    assert_eq!(done[0].outcome, Some(Outcome::Passed));
    assert!(session.in_flight.is_none());
    // The session can go on: `resume` refuses nothing about it (its deadline has not passed
    // the run it would start next, so it stops again at once with the same reason).
    let again = cli(&[
        "--server",
        &sim.url(),
        "resume",
        &session.session_id,
        "-q",
        "--runs-dir",
        runs.to_str().unwrap(),
    ]);
    let (_, resumed) = only_session(&runs);
    assert!(
        matches!(
            resumed.state,
            SessionState::Stopped {
                reason: StopReason::Deadline,
                ..
            }
        ),
        "{:?}\n{}",
        resumed.state,
        text(&again)
    );
    assert_eq!(resumed.workflows[0].runs.len(), 1, "{}", text(&again));
}
