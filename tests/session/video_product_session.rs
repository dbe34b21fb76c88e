//! A video workflow's product from the command line against the simulator: each step's
//! `SaveVideo` file is recorded with its frame count read from the MP4, the ladder's Product
//! column says it (`1 × MP4 W×H, N frames`), and frames the variant did not get
//! (`short-video=N`) are a warning in the report, not a failure.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{
    read_json, Outcome, RunFile, RunRole, SessionFile, RUN_RECORD_FILE,
};
use comfy_bisect_sim::{Faults, SimConfig, MIB};
use serde_json::Value;
use std::path::PathBuf;

/// Wan 2.2 (tests/session_sim.rs): the minimal variant and the frames step fit 16 GiB, the
/// target's frame count does not.
const WAN_FAILS_AT_FRAMES: u64 = 16384;

/// A session on the Wan 2.2 example: the temporary folder (kept alive), the session folder,
/// the journal and report.md.
fn session(faults: Faults) -> (tempfile::TempDir, PathBuf, SessionFile, String) {
    let sim = Sim::start(
        SimConfig::default()
            .with_vram_bytes(WAN_FAILS_AT_FRAMES * MIB)
            .with_time_scale(0.0)
            .with_faults(faults),
    );
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "target",
        &example("wan22_t2v_experts_lora_cache_rife", &[]),
    );
    let runs = tmp.path().join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    let (dir, session) = only_session(&runs);
    let md = std::fs::read_to_string(dir.join("report.md"))
        .unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    (tmp, dir, session, md)
}

#[test]
fn each_steps_video_is_recorded_with_its_frames_and_the_report_shows_them() {
    let (_tmp, dir, session, md) = session(Faults::default());
    let job = &session.workflows[0];
    let r = job
        .runs
        .iter()
        .find(|r| r.step == 0 && r.role != RunRole::Control)
        .unwrap();
    assert_eq!(r.outcome, Some(Outcome::Passed), "{md}");
    let file: RunFile = read_json(&dir.join(&r.dir).join(RUN_RECORD_FILE)).unwrap();
    let p = file.record.product.as_ref().unwrap();
    let mp4 = p
        .files
        .iter()
        .find(|f| f.class_type == "SaveVideo")
        .unwrap_or_else(|| panic!("{:?}", p.files));
    let (w, h, n) = (mp4.width.unwrap(), mp4.height.unwrap(), mp4.frames.unwrap());
    // What the minimal variant asked for: its latent's size and length on the 4n+1 grid
    // (the frame interpolation is bypassed in it).
    let node = p.nodes.iter().find(|n| n.node_id == mp4.node_id).unwrap();
    let want = node.expected.unwrap_or_else(|| panic!("{:?}", p.notes));
    assert_eq!(
        (w as u64, h as u64, n),
        (want.width, want.height, want.count)
    );
    assert!(p.mismatches.is_empty(), "{:?}", p.mismatches);
    let line = format!("1 × MP4 {w}×{h}, {n} frames");
    assert_eq!(
        r.summary.as_ref().unwrap().delivered.product.as_deref(),
        Some(line.as_str())
    );
    // The product is report.json's; report.md names the field.
    assert!(md.contains("products (`ladder[].product`)"), "{md}");
    assert!(!md.contains("Product differs"), "{md}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["workflows"][0]["ladder"][0]["product"], line.as_str());
}

#[test]
fn frames_the_video_lost_are_a_warning_in_the_report() {
    let (_tmp, _dir, session, md) = session(Faults::default().with_short_video(1));
    let job = &session.workflows[0];
    let r = job
        .runs
        .iter()
        .find(|r| r.step == 0 && r.role != RunRole::Control)
        .unwrap();
    // Still a pass: a frame mismatch is a warning.
    assert_eq!(r.outcome, Some(Outcome::Passed), "{md}");
    let warnings = &r.summary.as_ref().unwrap().delivered.product_warnings;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("SaveVideo #") && warnings[0].contains("frame(s), the graph asks for"),
        "{warnings:?}"
    );
    assert!(md.contains("Product differs"), "{md}");
    // The report lists it under the ladder, the node as a code span.
    let (_, tail) = warnings[0].split_once(" wrote ").unwrap();
    assert!(
        md.contains("- step 0 (minimal): SaveVideo `#") && md.contains(tail),
        "{md}"
    );
}
