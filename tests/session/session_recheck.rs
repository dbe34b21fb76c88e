//! `resume` runs preflight again for the workflows a session skipped (issue #38 item 4): one
//! that passes now (its custom node pack was installed) is bisected like the others, one that
//! still fails stays skipped with its refreshed list, the terminal and the report say which,
//! and a kill during the resume loses nothing. The simulator's custom node pack
//! (`Faults::pack_added_after`) stands in for a pack installed during the night.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{
    read_json, RunStatus, SessionFile, SessionState, StopReason, Verdict, SESSION_FILE,
};
use comfy_bisect_sim::{Faults, MIB};
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// SD1.5 (batch 1): on this much VRAM the minimal variant passes and the first increment
/// (resolution) runs out of memory.
const SD15_FAILS_AT_RESOLUTION: u64 = 1792;

fn sd15() -> Value {
    example(
        "sd15_txt2img_lora_upscale",
        &[("5", "batch_size", json!(1))],
    )
}

/// [`sd15`] with a node of the simulator's extra pack (`SimExtraPassimage`) before the save:
/// the server knows it only once the pack is loaded.
fn needs_pack() -> Value {
    let mut w = sd15();
    w["20"] = json!({"class_type": "SimExtraPassimage", "inputs": {"value": ["12", 0]}});
    w["9"]["inputs"]["images"] = json!(["20", 0]);
    w
}

/// A simulator on which the extra pack appears once the first prompt has finished.
fn sim_installing_the_pack() -> Sim {
    Sim::start(
        comfy_bisect_sim::SimConfig::default()
            .with_vram_bytes(SD15_FAILS_AT_RESOLUTION * MIB)
            .with_time_scale(0.0)
            .with_faults(Faults::default().with_pack_added_after(1)),
    )
}

fn resume(runs: &std::path::Path, id: &str) -> std::process::Output {
    cli(&["resume", "-q", id, "--runs-dir", runs.to_str().unwrap()])
}

fn journal(dir: &std::path::Path) -> SessionFile {
    read_json(&dir.join(SESSION_FILE)).unwrap()
}

/// The queue `needs_pack good` on `sim`: the first is skipped (its pack is not there yet), the
/// second runs (and its first prompt loads the pack). The runs folder, session folder and
/// journal.
fn queue_with_a_skipped_workflow(
    sim: &Sim,
    dir: &std::path::Path,
    skipped: &Value,
) -> (std::path::PathBuf, std::path::PathBuf, SessionFile) {
    let first = write_workflow(dir, "needs_pack", skipped);
    let good = write_workflow(dir, "good", &sd15());
    let runs = dir.join("runs");
    let out = bisect(
        &sim.url(),
        &runs,
        &[first.to_str().unwrap(), good.to_str().unwrap()],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("needs_pack: skipped (preflight failed); the other workflow runs; once what is listed is installed, `comfy-bisect resume ")
            && all.contains("` checks it again"),
        "{all}"
    );
    assert!(
        all.contains("skipped by preflight: needs_pack (workflow not run)"),
        "{all}"
    );
    let (dir, s) = only_session(&runs);
    assert!(matches!(s.state, SessionState::Done), "{:?}", s.state);
    match &s.workflows[0].verdict {
        Some(Verdict::PreflightFailed { unknown_nodes, .. }) => {
            assert_eq!(unknown_nodes, &["SimExtraPassimage".to_string()], "{all}")
        }
        other => panic!("{other:?}\n{all}"),
    }
    assert!(s.workflows[1].verdict.is_some(), "{all}");
    (runs, dir, s)
}

#[test]
fn resume_bisects_a_skipped_workflow_once_its_custom_node_is_installed() {
    let sim = sim_installing_the_pack();
    let tmp = tempfile::tempdir().unwrap();
    let (runs, dir, before) = queue_with_a_skipped_workflow(&sim, tmp.path(), &needs_pack());
    let good_runs = before.workflows[1].runs.clone();

    let out = resume(&runs, &before.session_id);
    let all = text(&out);
    assert!(
        all.contains(
            "needs_pack: preflight passes now (it was skipped); it is bisected in this session"
        ),
        "{all}"
    );
    assert!(!all.contains("skipped by preflight"), "{all}");
    let after = journal(&dir);
    assert!(
        matches!(after.state, SessionState::Done),
        "{:?}",
        after.state
    );
    let job = &after.workflows[0];
    assert!(
        job.steps.len() > 2,
        "its ladder is planned: {:?}",
        job.steps
    );
    assert!(
        matches!(job.verdict, Some(Verdict::FirstFailure { .. })),
        "{:?}\n{all}",
        job.verdict
    );
    assert!(job.runs.iter().all(|r| r.status == RunStatus::Done));
    // The runs went to the server with the pack's node in them.
    assert!(sim
        .handle()
        .submitted_prompts()
        .iter()
        .any(|p| p.to_string().contains("SimExtraPassimage")));
    // The other workflow's runs are the ones it had: nothing ran twice.
    assert_eq!(after.workflows[1].runs, good_runs);
    assert_eq!(after.preflight_rechecks.len(), 1);
    assert!(after.preflight_rechecks[0].passed);
    assert_eq!(after.preflight_rechecks[0].workflow, "needs_pack");
    assert_eq!(out.status.code(), Some(0), "{all}");
    // The report says it.
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("needs_pack passed preflight when resumed at "),
        "{report}"
    );
    // Resuming the ended session again checks nothing and runs nothing.
    let again = resume(&runs, &before.session_id);
    let last = journal(&dir);
    assert_eq!(last.preflight_rechecks.len(), 1, "{}", text(&again));
    assert_eq!(last.workflows, after.workflows);
}

#[test]
fn a_workflow_still_missing_something_stays_skipped_with_its_list_refreshed() {
    let sim = sim_installing_the_pack();
    let tmp = tempfile::tempdir().unwrap();
    // The pack's node and a model file the server never has.
    let mut skipped = needs_pack();
    skipped["4"]["inputs"]["ckpt_name"] = json!("not_on_this_server.safetensors");
    let (runs, dir, before) = queue_with_a_skipped_workflow(&sim, tmp.path(), &skipped);
    let prompts = sim.handle().submitted_prompts().len();

    let out = resume(&runs, &before.session_id);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("checkpoints/not_on_this_server.safetensors")
            && all.contains("needs_pack: still skipped (preflight failed again); once what is listed is installed, `comfy-bisect resume "),
        "{all}"
    );
    // The list is the one of now: the pack is there, the model is not.
    assert!(!all.contains("SimExtraPassimage"), "{all}");
    let after = journal(&dir);
    match &after.workflows[0].verdict {
        Some(Verdict::PreflightFailed {
            unknown_nodes,
            missing_models,
            ..
        }) => {
            assert!(unknown_nodes.is_empty(), "{unknown_nodes:?}");
            assert_eq!(missing_models[0].file, "not_on_this_server.safetensors");
        }
        other => panic!("{other:?}\n{all}"),
    }
    assert!(after.workflows[0].runs.is_empty());
    assert_eq!(after.preflight_rechecks.len(), 1);
    assert!(!after.preflight_rechecks[0].passed);
    assert_eq!(sim.handle().submitted_prompts().len(), prompts, "{all}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("needs_pack failed preflight again when resumed at "),
        "{report}"
    );
}

#[test]
fn a_session_of_one_skipped_workflow_promises_nothing_about_others() {
    let sim = Sim::with_vram_mib(SD15_FAILS_AT_RESOLUTION, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "needs_pack", &needs_pack());
    let runs = tmp.path().join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains("other workflow"), "{all}");
    assert!(
        all.contains("skipped by preflight: needs_pack (workflow not run); once what preflight listed is installed, `comfy-bisect resume "),
        "{all}"
    );
    let (dir, s) = only_session(&runs);
    let out = resume(&runs, &s.session_id);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("needs_pack: still skipped (preflight failed again)")
            && !all.contains("other workflow"),
        "{all}"
    );
    // Stopped at preflight, it has nothing to continue but the check: no "to continue" line.
    assert!(!all.contains("to continue"), "{all}");
    let after = journal(&dir);
    assert!(
        matches!(
            after.state,
            SessionState::Stopped {
                reason: StopReason::Preflight,
                ..
            }
        ),
        "{:?}",
        after.state
    );
    assert_eq!(after.preflight_rechecks.len(), 1);
    assert!(sim.handle().submitted_prompts().is_empty());
}

#[test]
fn a_kill_during_the_resume_of_a_rechecked_workflow_loses_nothing() {
    // Slow enough that the resume is still running when the test kills it.
    let sim = Sim::start(
        comfy_bisect_sim::SimConfig::default()
            .with_vram_bytes(SD15_FAILS_AT_RESOLUTION * MIB)
            .with_time_scale(0.05)
            .with_faults(Faults::default().with_pack_added_after(1)),
    );
    let tmp = tempfile::tempdir().unwrap();
    let (runs, dir, before) = queue_with_a_skipped_workflow(&sim, tmp.path(), &needs_pack());
    let mut child = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["resume", "-q", &before.session_id, "--runs-dir"])
        .arg(&runs)
        .env_remove("COMFY_BISECT_SERVER")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the check is journaled (the workflow has its ladder, its runs start).
    wait_for_journal(&mut child, &runs, |s| {
        (!s.preflight_rechecks.is_empty()).then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = journal(&dir);
    assert!(killed.preflight_rechecks[0].passed);
    let kept: Vec<String> = killed.workflows[0]
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Done)
        .map(|r| r.run_id.clone())
        .collect();

    let out = resume(&runs, &before.session_id);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let after = journal(&dir);
    // Checked once: the second resume continues the planned workflow.
    assert_eq!(after.preflight_rechecks.len(), 1, "{all}");
    assert!(!all.contains("preflight passes now"), "{all}");
    let job = &after.workflows[0];
    for id in &kept {
        assert!(job.runs.iter().any(|r| &r.run_id == id), "run {id} lost");
    }
    let steps: Vec<_> = job
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Done)
        .map(|r| (r.step, r.role))
        .collect();
    for (i, a) in steps.iter().enumerate() {
        assert!(!steps[i + 1..].contains(a), "a step ran twice: {steps:?}");
    }
    assert!(
        matches!(job.verdict, Some(Verdict::FirstFailure { .. })),
        "{:?}\n{all}",
        job.verdict
    );
    assert!(after.in_flight.is_none());
}

/// A server that does not answer when `resume` starts (ComfyUI still starting after a reboot):
/// without `--wait-server` (and no `--restart-cmd`) `resume` fails with exit 3 at once and
/// checks nothing; with it, `resume` waits, then checks the skipped workflow again and bisects
/// it.
#[test]
fn resume_waits_for_a_server_still_starting_before_checking_again() {
    let sim = sim_installing_the_pack();
    let tmp = tempfile::tempdir().unwrap();
    let (runs, dir, before) = queue_with_a_skipped_workflow(&sim, tmp.path(), &needs_pack());
    sim.handle().crash();

    let at_once = resume(&runs, &before.session_id);
    assert_eq!(at_once.status.code(), Some(3), "{}", text(&at_once));
    assert!(journal(&dir).preflight_rechecks.is_empty());

    let out = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            sim.restart();
        });
        cli(&[
            "resume",
            "-q",
            &before.session_id,
            "--runs-dir",
            runs.to_str().unwrap(),
            "--wait-server",
            "2m",
        ])
    });
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(
            "needs_pack: preflight passes now (it was skipped); it is bisected in this session"
        ),
        "{all}"
    );
    let after = journal(&dir);
    assert_eq!(after.preflight_rechecks.len(), 1);
    assert!(after.preflight_rechecks[0].passed);
    assert!(matches!(
        after.workflows[0].verdict,
        Some(Verdict::FirstFailure { .. })
    ));
}
