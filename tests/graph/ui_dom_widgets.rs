//! DOM widgets the browser frontend queues with the prompt: the audio player (`audioUI: ""`) on
//! the audio loaders and savers, the refresh button (`refresh: "refresh"`) of a remote combo
//! (LoadImageOutput). `convert` sends them too, so a user's own "Export (API)" of the same file
//! and our conversion have one hash.

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::ui;
use comfy_bisect_core::workflow::validate::validate;
use comfy_bisect_core::workflow::Workflow;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const DEFS: &str = "tests/fixtures/comfyui/GET__object_info.final.json";

/// LoadAudio → SaveAudio, and LoadImageOutput → PreviewImage, as the frontend saves them.
fn ui_file() -> Value {
    json!({
        "last_node_id": 4, "last_link_id": 2, "version": 0.4, "groups": [], "config": {}, "extra": {},
        "nodes": [
            {"id": 1, "type": "LoadAudio", "mode": 0, "pos": [0, 0], "size": [300, 140], "flags": {}, "order": 0,
             "inputs": [], "outputs": [{"name": "AUDIO", "type": "AUDIO", "links": [1]}],
             "properties": {"Node name for S&R": "LoadAudio"}, "widgets_values": ["song.mp3", null, ""]},
            {"id": 2, "type": "SaveAudio", "mode": 0, "pos": [400, 0], "size": [300, 120], "flags": {}, "order": 1,
             "inputs": [{"name": "audio", "type": "AUDIO", "link": 1}], "outputs": [],
             "properties": {"Node name for S&R": "SaveAudio"}, "widgets_values": ["audio/ComfyUI"]},
            {"id": 3, "type": "LoadImageOutput", "mode": 0, "pos": [0, 300], "size": [300, 300], "flags": {}, "order": 2,
             "inputs": [], "outputs": [{"name": "IMAGE", "type": "IMAGE", "links": [2]}, {"name": "MASK", "type": "MASK", "links": null}],
             "properties": {"Node name for S&R": "LoadImageOutput"}, "widgets_values": ["ComfyUI_00001_.png [output]", false, "refresh", "image"]},
            {"id": 4, "type": "PreviewImage", "mode": 0, "pos": [400, 300], "size": [300, 300], "flags": {}, "order": 3,
             "inputs": [{"name": "images", "type": "IMAGE", "link": 2}], "outputs": [],
             "properties": {"Node name for S&R": "PreviewImage"}, "widgets_values": []}
        ],
        "links": [[1, 1, 0, 2, 0, "AUDIO"], [2, 3, 0, 4, 0, "IMAGE"]]
    })
}

/// What the browser's "Export (API)" of that file holds.
fn browser_export() -> Value {
    json!({
        "1": {"inputs": {"audio": "song.mp3", "audioUI": ""}, "class_type": "LoadAudio", "_meta": {"title": "Load Audio"}},
        "2": {"inputs": {"filename_prefix": "audio/ComfyUI", "audioUI": "", "audio": ["1", 0]}, "class_type": "SaveAudio", "_meta": {"title": "Save Audio"}},
        "3": {"inputs": {"image": "ComfyUI_00001_.png [output]", "refresh": "refresh"}, "class_type": "LoadImageOutput", "_meta": {"title": "Load Image (from Outputs)"}},
        "4": {"inputs": {"images": ["3", 0]}, "class_type": "PreviewImage", "_meta": {"title": "Preview Image"}}
    })
}

fn defs() -> NodeDefs {
    NodeDefs::load_file(Path::new(DEFS)).unwrap()
}

#[test]
fn dom_widget_values_are_sent_like_the_browser_does() {
    let c = ui::convert(&ui_file(), &defs()).unwrap();
    let got = c.workflow.to_value();
    for (id, node) in browser_export().as_object().unwrap() {
        assert_eq!(got[id]["inputs"], node["inputs"], "node {id}");
    }
    let export = Workflow::from_json_str(&browser_export().to_string(), "export.json").unwrap();
    assert_eq!(c.workflow.sha256(), export.sha256());
    // The server ignores them; validation only misses the input files.
    let report = validate(&c.workflow, &defs());
    assert!(report.only_missing_files(), "{:?}", report.problems);
}

#[test]
fn convert_and_the_users_export_hash_the_same_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let ui_path = dir.path().join("audio.json");
    std::fs::write(&ui_path, ui_file().to_string()).unwrap();
    let export_path = dir.path().join("audio.api.json");
    std::fs::write(&export_path, browser_export().to_string()).unwrap();
    let converted = dir.path().join("converted.json");
    let out = Command::new(BIN)
        .args(["convert", "--object-info", DEFS, "-o"])
        .arg(&converted)
        .arg(&ui_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hash = |p: &Path| {
        let out = Command::new(BIN).arg("hash").arg(p).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(hash(&converted), hash(&export_path));
}

/// `hash` takes the UI file too: converted with `--object-info`, its hash is the API prompt's.
#[test]
fn hash_of_a_ui_workflow_is_the_hash_of_its_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let ui_path = dir.path().join("audio.json");
    std::fs::write(&ui_path, ui_file().to_string()).unwrap();
    let export_path = dir.path().join("audio.api.json");
    std::fs::write(&export_path, browser_export().to_string()).unwrap();
    let first_word = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let of_ui = Command::new(BIN)
        .args(["hash", "--object-info", DEFS])
        .arg(&ui_path)
        .output()
        .unwrap();
    let of_export = Command::new(BIN)
        .arg("hash")
        .arg(&export_path)
        .output()
        .unwrap();
    assert_eq!(first_word(of_ui), first_word(of_export));
}
