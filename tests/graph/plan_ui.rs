//! `plan --out` on a UI workflow writes every step twice: the API variant that would be
//! submitted, and the original UI file with the same edits made the UI way. Converting the UI
//! version back gives exactly the API variant (same canonical hash).

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::{load_api_file, ui};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const NEWER: &str = "tests/fixtures/comfyui-newer/object_info.json";

#[test]
fn plan_of_a_ui_workflow_writes_ui_variants_that_convert_back_exactly() {
    let defs = NodeDefs::load_file(Path::new(NEWER)).unwrap();
    for template in [
        "image_qwen_image_2512_with_2steps_lora.json",
        "video_wan2_2_14B_fun_camera.json",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .args(["plan", "--object-info", NEWER, "--out"])
            .arg(dir.path())
            .arg(Path::new("tests/corpus/templates").join(template))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("plan.json")).unwrap()).unwrap();
        let steps = plan["steps"].as_array().unwrap();
        assert!(steps.len() >= 2, "{template}: {plan}");
        for step in steps {
            let file = step["file"].as_str().unwrap();
            let api = load_api_file(&dir.path().join(file)).unwrap();
            assert_eq!(api.sha256(), step["sha256"].as_str().unwrap());
            let ui_path = dir.path().join(file.replace(".json", ".ui.json"));
            let doc: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&ui_path).unwrap()).unwrap();
            assert!(
                doc.get("nodes").is_some(),
                "{} is a UI workflow",
                ui_path.display()
            );
            let back = ui::convert(&doc, &defs).unwrap();
            assert_eq!(back.workflow.sha256(), api.sha256(), "{template} {file}");
        }
        // The last step is the target itself.
        assert_eq!(steps.last().unwrap()["sha256"], plan["target_sha256"]);
    }
}

/// The pixel-space hires fix of `workflows/` as a UI file plans like its API export: minimal
/// (first pass only) → resolution → postprocess (upscale + second pass), the last step is the
/// target, and every UI variant converts back to its API variant.
#[test]
fn pixel_hires_fix_ui_plans_minimal_resolution_postprocess() {
    const DEFS: &str = "tests/fixtures/comfyui/GET__object_info.final.json";
    let defs = NodeDefs::load_file(Path::new(DEFS)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["plan", "--object-info", DEFS, "--out"])
        .arg(dir.path())
        .arg("workflows/sd15_hires_fix_pixel.ui.json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("plan.json")).unwrap()).unwrap();
    let steps = plan["steps"].as_array().unwrap();
    let increments: Vec<&str> = steps
        .iter()
        .map(|s| s["increment"].as_str().unwrap())
        .collect();
    assert_eq!(increments, ["minimal", "resolution", "postprocess"]);
    // The UI file and the API export of the same workflow are one target.
    let api_target = load_api_file(Path::new("workflows/sd15_hires_fix_pixel.json")).unwrap();
    assert_eq!(plan["target_sha256"], api_target.sha256());
    assert_eq!(steps[2]["sha256"], plan["target_sha256"]);
    let note = &steps[2]["changes"][0];
    assert_eq!(note["action"], "second_pass");
    assert_eq!(note["node"], "11");
    assert_eq!(note["to"], "1024×1024");
    let minimal = load_api_file(&dir.path().join("00-minimal.json")).unwrap();
    assert!(!minimal.nodes.contains_key("11"));
    for step in steps {
        let file = step["file"].as_str().unwrap();
        let api = load_api_file(&dir.path().join(file)).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join(file.replace(".json", ".ui.json"))).unwrap(),
        )
        .unwrap();
        let back = ui::convert(&doc, &defs).unwrap();
        assert_eq!(back.workflow.sha256(), api.sha256(), "{file}");
    }
}
