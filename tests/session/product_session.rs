//! The product of every run, from the command line against the simulator: a session records
//! what each step's output nodes wrote (sizes from the files' headers) with no mismatch against
//! what the variant asked for; a session whose output node silently produces nothing
//! (`missing-output=SaveImage`) fails at that step with kind `incomplete_output`, the node
//! named in run.json, session.json, the index and the report; `submit` says the same; and a
//! preview that only the `postprocess` step brings back (`missing-output=#22`) passes every
//! step before it and fails the session at that step.

use crate::session_support::*;
use comfy_bisect_core::run::RunError;
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{read_json, Outcome, RunFile, Verdict, RUN_RECORD_FILE};
use comfy_bisect_sim::{Faults, Profile};
use serde_json::Value;

/// The SD1.5 example passes its minimal variant and resolution step on this card and runs out
/// at batch (tests/fallback_session.rs).
const PASSES_TWO_STEPS: u64 = 2560;

/// A card on which every variant of both targets fits (24 GiB).
const BIG_CARD: u64 = 24 * 1024;

fn target() -> Value {
    example("sd15_txt2img_lora_upscale", &[])
}

/// The SD1.5 example with a face detailer after the upscaler (Impact Pack's `FaceDetailer`
/// #21, its detector #20) and a `MaskPreview` #22 of the detailer's mask. Bypassing the
/// detailer cannot feed a MASK output, so the ladder removes that preview with the detailer
/// and only the `postprocess` step (the target) brings it back: the one output node that not
/// every variant has.
fn target_with_detailer_preview() -> Value {
    let mut v = target();
    v["20"] = serde_json::json!({"class_type": "UltralyticsDetectorProvider",
        "inputs": {"model_name": "bbox/face_yolov8m.pt"}});
    v["21"] = serde_json::json!({"class_type": "FaceDetailer", "inputs": {
        "image": ["12", 0], "model": ["10", 0], "clip": ["10", 1], "vae": ["4", 2],
        "positive": ["6", 0], "negative": ["7", 0], "bbox_detector": ["20", 0],
        "guide_size": 512, "guide_size_for": true, "max_size": 1024, "seed": 0, "steps": 20,
        "cfg": 8.0, "sampler_name": "euler", "scheduler": "simple", "denoise": 0.5,
        "feather": 5, "noise_mask": true, "force_inpaint": true, "bbox_threshold": 0.5,
        "bbox_dilation": 10, "bbox_crop_factor": 3.0, "sam_detection_hint": "center-1",
        "sam_dilation": 0, "sam_threshold": 0.93, "sam_bbox_expansion": 0,
        "sam_mask_hint_threshold": 0.7, "sam_mask_hint_use_negative": "False",
        "drop_size": 10, "wildcard": "", "cycle": 1}});
    v["9"]["inputs"]["images"] = serde_json::json!(["21", 0]);
    v["22"] = serde_json::json!({"class_type": "MaskPreview", "inputs": {"mask": ["21", 3]}});
    v
}

#[test]
fn a_session_records_each_steps_product_without_mismatch() {
    records_each_steps_product_on(Profile::V0364);
}

/// On the 2026 profile the products carry asset ids, which the product check leaves out:
/// the same steps pass with the same products and no mismatch.
#[test]
fn a_session_records_each_steps_product_without_mismatch_on_2026() {
    records_each_steps_product_on(Profile::Y2026);
}

fn records_each_steps_product_on(profile: Profile) {
    let sim = Sim::on(profile, PASSES_TWO_STEPS, 0.0);
    let b = bisect_workflow(&sim, &target(), &[]);
    let dir = &b.dir;
    // Step 0: 256×336, batch 1, no upscaler; step 1: the full 768×1024.
    for (step, want) in [(0, "1 × PNG 256×336"), (1, "1 × PNG 768×1024")] {
        let r = b.main_run(step);
        assert_eq!(r.outcome, Some(Outcome::Passed), "{}", b.text());
        let s = &r.summary.as_ref().unwrap().delivered;
        assert_eq!(s.product.as_deref(), Some(want), "step {step}");
        assert!(s.product_warnings.is_empty(), "{:?}", s.product_warnings);
        let file: RunFile = read_json(&dir.join(&r.dir).join(RUN_RECORD_FILE)).unwrap();
        let p = file.record.product.as_ref().unwrap();
        assert!(p.mismatches.is_empty(), "{:?}", p.mismatches);
        assert_eq!(p.files.len(), 1);
        assert_eq!(p.files[0].node_id, "9");
        assert_eq!(p.files[0].class_type, "SaveImage");
        assert_eq!(p.files[0].subfolder, "comfy-bisect");
    }
    let md = b.read("report.md");
    // Each step's product is in report.json (report.md names the field and lists only the
    // products that differ from what was asked).
    assert!(md.contains("products (`ladder[].product`)"), "{md}");
    assert!(!md.contains("Product differs"), "{md}");
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let ladder = json["workflows"][0]["ladder"].as_array().unwrap();
    assert_eq!(ladder[1]["product"], "1 × PNG 768×1024");
    assert_runs_on(profile, dir, &b.session);
}

#[test]
fn a_silently_missing_output_fails_the_step_as_incomplete_output() {
    let sim = Sim::with_faults(BIG_CARD, Faults::default().with_missing_output("SaveImage"));
    let b = bisect_workflow(&sim, &target(), &[]);
    let (dir, job, out) = (&b.dir, b.job(), &b.out);
    // Every variant has the SaveImage, so the first step run shows it: the minimal variant.
    let r = b.main_run(0);
    match &r.outcome {
        Some(Outcome::IncompleteOutput {
            node_id, node_type, ..
        }) => assert_eq!((node_id.as_str(), node_type.as_str()), ("9", "SaveImage")),
        other => panic!("{other:?}\n{}", b.text()),
    }
    assert_eq!(r.outcome.as_ref().unwrap().name(), "failed");
    let file: RunFile = read_json(&dir.join(&r.dir).join(RUN_RECORD_FILE)).unwrap();
    assert_eq!(file.record.outcome.as_str(), "failed");
    match &file.record.error {
        Some(RunError::IncompleteOutput(i)) => {
            assert!(i.message.contains("SaveImage #9"), "{}", i.message)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        file.record.diagnosis.as_ref().unwrap().kind.as_str(),
        "incomplete_output"
    );
    let idx = index::read_all(&b.runs).unwrap();
    assert_eq!(
        idx.iter().find(|e| e.run_id == r.run_id).unwrap().outcome,
        "failed"
    );
    let md = b.read("report.md");
    assert!(
        md.contains("failed (an output node produced nothing (incomplete product))"),
        "{md}"
    );
    assert!(md.contains("`SaveImage #9`"), "{md}");
    // A verdict was reached (exit 0): the minimal variant already fails.
    assert_eq!(out.status.code(), Some(0), "{}", b.text());
    assert!(
        matches!(job.verdict, Some(Verdict::MinimalFails { .. })),
        "{:?}",
        job.verdict
    );
}

#[test]
fn submit_says_which_output_node_produced_nothing() {
    let sim = Sim::with_faults(BIG_CARD, Faults::default().with_missing_output("SaveImage"));
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "target", &target());
    let out = cli(&["--server", &sim.url(), "submit", wf.to_str().unwrap()]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("outcome: failed (incomplete_output): ComfyUI reported success, but SaveImage #9 produced no output in /history"),
        "{all}"
    );
    // Without the fault the same command passes and names the product.
    sim.set_faults(Faults::default());
    let out = cli(&["--server", &sim.url(), "submit", wf.to_str().unwrap()]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("product: 4 × PNG 1536×2048"), "{all}");
}

/// Without the fault the same target passes every step, and the detailer's mask preview is a
/// real file: the simulator serves it at the mask's size, the detailer's image size (a mask is
/// per image), which is what the SaveImage of that run wrote.
#[test]
fn the_detailer_mask_preview_is_served_at_the_images_size() {
    let sim = Sim::with_faults(BIG_CARD, Faults::default());
    let b = bisect_workflow(&sim, &target_with_detailer_preview(), &[]);
    let last = b.job().steps.len() - 1;
    let run = b.main_run(last);
    assert_eq!(run.outcome, Some(Outcome::Passed), "{}", b.text());
    let file: RunFile = read_json(&b.dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap();
    let p = file.record.product.as_ref().unwrap();
    let size = |id: &str| {
        let f = p
            .files
            .iter()
            .find(|f| f.node_id == id)
            .unwrap_or_else(|| panic!("{p:?}"));
        assert_eq!(f.note, None, "{f:?}");
        (f.width, f.height)
    };
    assert_eq!(size("22"), size("9"));
    // 768×1024 through the example's ×2 upscaler.
    assert_eq!(size("9"), (Some(1536), Some(2048)));
}

/// The Done-when of issue 14: "a session with a silently missing output fails at that step".
/// The ladder keeps the SaveImage in every variant, so a class-wide fault fails step 0
/// (above); what makes an output node appear later is the ladder itself: the detailer's mask
/// preview exists only from the `postprocess` step on (`target_with_detailer_preview`). With
/// that one node silenced, every step without it passes and the step that brings it back fails
/// with `incomplete_output` naming it.
#[test]
fn an_output_node_that_only_a_later_step_brings_back_fails_at_that_step() {
    let steps = ladder(&target_with_detailer_preview(), &Default::default());
    let with_preview: Vec<usize> = (0..steps.len())
        .filter(|&k| steps[k].1.nodes.contains_key("22"))
        .collect();
    assert_eq!(with_preview, [steps.len() - 1], "only the target has #22");
    assert_eq!(steps.last().unwrap().0, "postprocess");
    let last = steps.len() - 1;

    let sim = Sim::with_faults(BIG_CARD, Faults::parse("missing-output=#22").unwrap());
    let b = bisect_workflow(&sim, &target_with_detailer_preview(), &[]);
    let (dir, job, out) = (&b.dir, b.job(), &b.out);
    assert_eq!(out.status.code(), Some(0), "{}", b.text());
    for step in 0..last {
        assert_eq!(
            b.main_run(step).outcome,
            Some(Outcome::Passed),
            "step {step}"
        );
    }
    let failed = b.main_run(last);
    match &failed.outcome {
        Some(Outcome::IncompleteOutput {
            node_id, node_type, ..
        }) => assert_eq!(
            (node_id.as_str(), node_type.as_str()),
            ("22", "MaskPreview")
        ),
        other => panic!("{other:?}\n{}", b.text()),
    }
    let file: RunFile = read_json(&dir.join(&failed.dir).join(RUN_RECORD_FILE)).unwrap();
    match &file.record.error {
        Some(RunError::IncompleteOutput(i)) => {
            assert!(i.message.contains("MaskPreview #22"), "{}", i.message)
        }
        other => panic!("{other:?}"),
    }
    // The SaveImage of the same run wrote its images: only the preview is missing.
    let p = file.record.product.as_ref().unwrap();
    assert!(p.files.iter().any(|f| f.node_id == "9"), "{p:?}");
    assert!(p.files.iter().all(|f| f.node_id != "22"), "{p:?}");
    match &job.verdict {
        Some(Verdict::FirstFailure {
            step,
            increment,
            last_pass_step,
            run_id,
            ..
        }) => {
            assert_eq!((*step, increment.as_str()), (last, "postprocess"));
            assert_eq!(*last_pass_step, last - 1);
            assert_eq!(run_id, &failed.run_id);
        }
        other => panic!("{other:?}\n{}", b.text()),
    }
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let verdict = &json["workflows"][0]["verdict"];
    assert_eq!(verdict["failure_kind"], "incomplete_output", "{verdict}");
    assert_eq!(verdict["step"], last);
    let md = b.read("report.md");
    assert!(md.contains("`MaskPreview #22`"), "{md}");
    assert!(
        md.contains(&format!(
            "**Verdict:** First failure when adding **postprocess** (step {last} of {last}): \
             an output node produced nothing (incomplete product)"
        )),
        "{md}"
    );
}
