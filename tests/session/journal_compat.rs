//! Sessions written before the journal stored typed ladder changes and diagnoses still load:
//! `tests/fixtures/journal-v1/` is a session folder written by that version (a `demo` run of
//! `workflows/sd15_txt2img_lora_upscale.json` on the simulator; see tests/fixtures/README.md).
//! Users resume such sessions overnight, so the on-disk shape must not change under them.

use comfy_bisect_core::report::session_report;
use comfy_bisect_core::session::journal::{read_json, RunFile, SessionFile, SessionPaths, Verdict};
use comfy_bisect_core::vocab::{FailureKind, Stage};
use comfy_bisect_core::workflow::Change;
use serde_json::Value;
use std::path::{Path, PathBuf};

const RUNS: &str = "tests/fixtures/journal-v1";
const SESSION: &str = "20261201-181130-b479";
const FIRST_FAILING: &str = "02-batch-d67d0f0d-daa4-4ac3-b55a-a0bc9dd69b34";
const LAST_PASSING: &str = "01-resolution-b0af6704-3a0c-46f1-8d84-5656f33120df";

fn session_dir() -> PathBuf {
    Path::new(RUNS).join(SESSION)
}

fn json_of(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn an_old_session_json_loads_with_typed_ladder_changes_and_keeps_its_shape() {
    let paths = SessionPaths::new(Path::new(RUNS), SESSION);
    let session = SessionFile::load(&paths).expect("the old journal loads");
    let job = &session.workflows[0];
    assert_eq!(job.steps.len(), 5);
    assert_eq!(
        job.steps[3].changes,
        vec![Change {
            node: "10".into(),
            class_type: "LoraLoader".into(),
            action: "bypass".into(),
            input: None,
            from: None,
            to: None,
        }]
    );
    let width = &job.steps[1].changes[0];
    assert_eq!(
        (width.input.as_deref(), width.from.clone(), width.to.clone()),
        (
            Some("width"),
            Some(Value::from(256)),
            Some(Value::from(768))
        )
    );
    let failed = job.runs.iter().find(|r| r.failed()).unwrap();
    assert_eq!(failed.diagnosis.as_ref().unwrap().kind.as_str(), "cuda_oom");
    // The preflight's /system_stats is read as typed data, the fields it does not model kept.
    let env = session.environment.as_ref().expect("preflight environment");
    assert_eq!(env.system.comfyui_version, "0.3.64");
    assert_eq!(env.devices[0].kind, "cuda");
    assert_eq!(env.devices[0].vram_total, 6442450944);
    assert_eq!(
        env.system.extra["required_frontend_version"],
        Value::from("1.27.10")
    );
    // Written back, it is the same document: the shape on disk did not change.
    assert_eq!(
        serde_json::to_value(&session).unwrap(),
        json_of(&paths.session_file())
    );
}

#[test]
fn an_old_run_json_loads_with_its_typed_diagnosis_and_keeps_its_shape() {
    for dir in [FIRST_FAILING, LAST_PASSING] {
        let path = session_dir().join(dir).join("run.json");
        let file: RunFile = read_json(&path).expect("the old run record loads");
        assert_eq!(
            serde_json::to_value(&file).unwrap(),
            json_of(&path),
            "{dir}"
        );
    }
    let file: RunFile = read_json(&session_dir().join(FIRST_FAILING).join("run.json")).unwrap();
    assert_eq!(
        file.custom_nodes, None,
        "written before the custom-pack map"
    );
    // Per-node hashes are typed (node id → sha256 hex).
    assert_eq!(file.node_hashes.len(), 7);
    assert!(file.node_hashes["3"].len() == 64 && file.node_hashes.contains_key("9"));
    let d = file.record.diagnosis.expect("the failed run's diagnosis");
    assert_eq!(
        (d.kind.as_str(), d.stage.as_str(), d.node_id.as_deref()),
        ("cuda_oom", "sample_first", Some("3"))
    );
}

#[test]
fn a_stored_diagnosis_this_version_cannot_read_loads_as_none_not_as_an_error() {
    let path = session_dir().join(FIRST_FAILING).join("run.json");
    let mut value = json_of(&path);
    value["record"]["diagnosis"]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    value["entry"]["diagnosis"] = serde_json::json!({"kind": "a kind from elsewhere"});
    let file: RunFile = serde_json::from_value(value).expect("the record still loads");
    assert!(file.record.diagnosis.is_none() && file.entry.diagnosis.is_none());
    assert!(file.record.execution_error().is_some());
}

#[test]
fn the_report_of_an_old_session_reads_its_changes_and_diagnosis() {
    let report = session_report(&session_dir(), false, false).expect("report of the old session");
    let w = &report.workflows[0];
    let changes: Vec<&[String]> = w.ladder.iter().map(|r| r.changes.as_slice()).collect();
    assert_eq!(
        changes[1],
        ["resolution 256×336 → 768×1024 (EmptyLatentImage #5)"]
    );
    assert_eq!(changes[2], ["batch_size 1 → 4 (EmptyLatentImage #5)"]);
    // The re-add steps of the LoRA and the upscale say what comes back.
    assert_eq!(changes[3], ["LoraLoader #10 re-added"]);
    assert_eq!(
        changes[4],
        [
            "ImageUpscaleWithModel #12 re-added",
            "UpscaleModelLoader #11 re-added"
        ]
    );
    assert_eq!(w.verdict.step, Some(2));
    let first = w
        .first_failure
        .as_ref()
        .expect("the first failure's evidence");
    assert_eq!(first.failure_kind, Some(FailureKind::CudaOom));
    assert_eq!(first.stage, Some(Stage::SampleFirst));
    assert!(
        report.warnings.iter().all(|w| !w.contains("not used")),
        "{:?}",
        report.warnings
    );
    // Its run.json files predate the custom-pack map: the bug form says it is not recorded
    // rather than calling every node core.
    assert!(w.custom_pack_nodes.is_none());
    let form = w.bug_form.as_ref().expect("a bug form for the failure");
    assert_eq!(form.traceback_run, first.run_id);
    let md = comfy_bisect_core::report::markdown::render(&report);
    assert!(
        md.contains("### Custom Node Testing\n\nNot recorded"),
        "{md}"
    );
}

#[test]
fn an_old_preflight_verdict_loads_its_missing_models_typed_and_keeps_its_shape() {
    // What the previous version wrote for a preflight failure (its `json!` entry; `node`,
    // `class_type` and `input` are null when unknown).
    let old = serde_json::json!({
        "kind": "preflight_failed",
        "unknown_nodes": [],
        "missing_models": [
            {"file": "detail.safetensors", "folder": "loras", "node": "10",
             "class_type": "LoraLoader", "input": "lora_name"},
            {"file": "x.safetensors", "folder": "", "node": null, "class_type": null, "input": null}
        ],
        "other": []
    });
    let verdict: Verdict = serde_json::from_value(old.clone()).expect("the old verdict loads");
    let Verdict::PreflightFailed { missing_models, .. } = &verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(
        missing_models[0].describe(),
        "loras/detail.safetensors (node #10 LoraLoader, input lora_name)"
    );
    assert_eq!(missing_models[1].describe(), "x.safetensors");
    assert_eq!(serde_json::to_value(&verdict).unwrap(), old);
}
