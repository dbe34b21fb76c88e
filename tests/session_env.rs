//! The environment of every run, end to end from the command line on the simulator: the
//! fingerprint taken before each run (run.json, the index, the report's Environment section
//! with the custom node packs).

mod session_support;

use comfy_bisect::session::index;
use comfy_bisect::session::journal::{read_json, RunFile, RUN_RECORD_FILE};
use serde_json::{json, Value};
use session_support::*;

const SD15: &str = "sd15_txt2img_lora_upscale";

#[test]
fn every_run_records_the_environment_fingerprint() {
    let sim = Sim::with_vram_mib(16384, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "sd15",
        &example(SD15, &[("5", "batch_size", json!(1))]),
    );
    let runs = tmp.path().join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    let (dir, session) = only_session(&runs);
    let job = &session.workflows[0];
    assert!(!job.runs.is_empty(), "{}", text(&out));
    let idx = index::read_all(&runs).unwrap();
    let first = job.runs[0].fingerprint.clone().expect("a fingerprint id");
    assert_eq!(first.len(), 12);
    for run in &job.runs {
        assert_eq!(
            run.fingerprint.as_ref(),
            Some(&first),
            "one environment all night"
        );
        let file: RunFile = read_json(&dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap();
        let env = file
            .environment
            .expect("run.json holds the whole fingerprint");
        assert_eq!(env.id, first);
        assert_eq!(env.compute_id(), env.id);
        let line = idx.iter().find(|e| e.run_id == run.run_id).unwrap();
        assert_eq!(line.fingerprint.as_ref(), Some(&first));
    }
    let fp = &session.fingerprints[&first];
    assert_eq!(fp.comfyui_version.as_deref(), Some("0.3.64"));
    assert_eq!(fp.devices[0].kind, "cuda");
    // The simulator's node definitions carry the custom-node fixture's packs.
    let wan = fp.pack("ComfyUI-WanVideoWrapper").expect("pack listed");
    assert_eq!(wan.nodes.classes, 15);
    assert!(wan.version.is_none(), "no ComfyUI-Manager on the simulator");
    assert!(!fp.models.is_empty(), "model listings recorded");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains(&format!("`{first}`")), "{report}");
    assert!(report.contains("Custom node packs (14;"), "{report}");
    assert!(
        report.contains("| ComfyUI-WanVideoWrapper | 15 |"),
        "{report}"
    );
    assert!(report.contains("version unknown"), "{report}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["environment"]["fingerprint"], first.as_str());
    assert_eq!(
        json["environment"]["node_packs"].as_array().unwrap().len(),
        14
    );
}
