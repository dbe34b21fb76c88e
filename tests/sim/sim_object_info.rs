//! The simulator ships a trimmed copy of the node definitions (`src/sim/object_info.sim.json`)
//! and of the node-role map (`src/sim/roles.sim.json`). This test regenerates both from the
//! shared sources and fails when the shipped copies differ, so they cannot drift.
//!
//! To regenerate after the sources changed: `COMFY_BISECT_REGEN_SIM=1 cargo test --test sim sim_object_info`.

use serde_json::{Map, Value};
use std::path::Path;

const CORE: &str = "tests/fixtures/comfyui/GET__object_info.final.json";
const CUSTOM: &str = "tests/fixtures/custom-nodes/object_info.custom.json";
const INVENTORY: &str = "tests/fixtures/custom-nodes/model-inventory.json";
const ROLES: &str = "tests/fixtures/node-roles-map.json";
const SHIPPED_DEFS: &str = "crates/sim/src/object_info.sim.json";
const SHIPPED_ROLES: &str = "crates/sim/src/roles.sim.json";

/// Core categories a bisection of image/video workflows never needs.
const EXCLUDED_CATEGORY_PREFIXES: &[&str] = &[
    "3d",
    "api node",
    "audio",
    "training",
    "advanced/model_merging",
    "advanced/hooks",
    "utils/string",
    "latent/3d",
    "latent/audio",
    "conditioning/3d_models",
    "_for_testing/photomaker",
];

/// Core loader inputs whose file lists get the model inventory's files of a folder, so the
/// custom-node fixture workflows validate against the simulator.
const INVENTORY_COMBOS: &[(&str, &str, &str)] = &[
    ("CheckpointLoaderSimple", "ckpt_name", "checkpoints"),
    ("CheckpointLoader", "ckpt_name", "checkpoints"),
    ("CheckpointLoader", "config_name", "configs"),
    ("unCLIPCheckpointLoader", "ckpt_name", "checkpoints"),
    ("ImageOnlyCheckpointLoader", "ckpt_name", "checkpoints"),
    ("UNETLoader", "unet_name", "diffusion_models"),
    ("CLIPLoader", "clip_name", "text_encoders"),
    ("DualCLIPLoader", "clip_name1", "text_encoders"),
    ("DualCLIPLoader", "clip_name2", "text_encoders"),
    ("TripleCLIPLoader", "clip_name1", "text_encoders"),
    ("TripleCLIPLoader", "clip_name2", "text_encoders"),
    ("TripleCLIPLoader", "clip_name3", "text_encoders"),
    ("QuadrupleCLIPLoader", "clip_name1", "text_encoders"),
    ("QuadrupleCLIPLoader", "clip_name2", "text_encoders"),
    ("QuadrupleCLIPLoader", "clip_name3", "text_encoders"),
    ("QuadrupleCLIPLoader", "clip_name4", "text_encoders"),
    ("VAELoader", "vae_name", "vae"),
    ("LoraLoader", "lora_name", "loras"),
    ("LoraLoaderModelOnly", "lora_name", "loras"),
    ("UpscaleModelLoader", "model_name", "upscale_models"),
    ("CLIPVisionLoader", "clip_name", "clip_vision"),
    ("LoadImage", "image", "input:image"),
    ("LoadImageMask", "image", "input:image"),
    ("LoadVideo", "file", "input:video"),
];

fn read(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

fn inventory_files(inventory: &Value, folder: &str) -> Vec<String> {
    let (folder, filter) = match folder.split_once(':') {
        Some((f, kind)) => (f, Some(kind)),
        None => (folder, None),
    };
    let list = inventory[folder]
        .as_array()
        .unwrap_or_else(|| panic!("model inventory has no folder {folder}"));
    list.iter()
        .filter_map(|v| v.as_str())
        .filter(|name| match filter {
            Some("image") => name.ends_with(".png") || name.ends_with(".jpg"),
            Some("video") => name.ends_with(".mp4") || name.ends_with(".webm"),
            _ => true,
        })
        .map(str::to_string)
        .collect()
}

/// Merges inventory files into a combo list: files sorted and de-duplicated, then the
/// non-file entries (such as `pixel_space`) in their original order.
fn merge_files(existing: &[Value], extra: &[String]) -> Vec<Value> {
    let mut files: Vec<String> = existing
        .iter()
        .filter_map(|v| v.as_str())
        .filter(|s| s.contains('.'))
        .map(str::to_string)
        .chain(extra.iter().cloned())
        .collect();
    files.sort();
    files.dedup();
    let others = existing
        .iter()
        .filter(|v| !v.as_str().is_some_and(|s| s.contains('.')));
    files
        .into_iter()
        .map(Value::String)
        .chain(others.cloned())
        .collect()
}

fn extend_combo(entry: &mut Value, input: &str, extra: &[String]) {
    let spec = ["required", "optional"]
        .iter()
        .find_map(|sec| entry["input"][*sec].get(input).map(|_| *sec))
        .unwrap_or_else(|| panic!("input {input} not found"));
    let spec = &mut entry["input"][spec][input];
    if spec[0].is_array() {
        let merged = merge_files(spec[0].as_array().unwrap(), extra);
        spec[0] = Value::Array(merged);
    } else if spec[0] == "COMBO" {
        let merged = merge_files(spec[1]["options"].as_array().unwrap(), extra);
        spec[1]["options"] = Value::Array(merged);
    } else {
        panic!("input {input} is not a combo");
    }
}

fn generate_defs() -> Map<String, Value> {
    let core = read(CORE);
    let custom = read(CUSTOM);
    let inventory = read(INVENTORY);
    let mut out = Map::new();
    for (name, entry) in core.as_object().unwrap() {
        if entry["api_node"].as_bool() == Some(true) {
            continue;
        }
        let category = entry["category"].as_str().unwrap_or("");
        if EXCLUDED_CATEGORY_PREFIXES
            .iter()
            .any(|p| category == *p || category.starts_with(&format!("{p}/")))
        {
            continue;
        }
        out.insert(name.clone(), entry.clone());
    }
    for (class, input, folder) in INVENTORY_COMBOS {
        let files = inventory_files(&inventory, folder);
        let entry = out
            .get_mut(*class)
            .unwrap_or_else(|| panic!("core class {class} missing"));
        extend_combo(entry, input, &files);
    }
    for (name, entry) in custom.as_object().unwrap() {
        out.insert(name.clone(), entry.clone());
    }
    out
}

fn generate_roles(defs: &Map<String, Value>) -> Map<String, Value> {
    let roles = read(ROLES);
    let mut out = Map::new();
    for (class, tags) in roles["classes"].as_object().unwrap() {
        if defs.contains_key(class) {
            out.insert(class.clone(), tags.clone());
        }
    }
    out
}

/// One class per line: small, and diffs stay readable.
fn render(map: &Map<String, Value>) -> String {
    let mut s = String::from("{\n");
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            s.push_str(",\n");
        }
        s.push_str(&serde_json::to_string(k).unwrap());
        s.push_str(": ");
        s.push_str(&serde_json::to_string(v).unwrap());
    }
    s.push_str("\n}\n");
    s
}

fn check_or_write(path: &str, expected: &str) {
    if std::env::var_os("COMFY_BISECT_REGEN_SIM").is_some() {
        std::fs::write(path, expected).unwrap();
        return;
    }
    let shipped = std::fs::read_to_string(Path::new(path)).unwrap();
    assert!(
        shipped == expected,
        "{path} differs from what the shared sources generate; run \
         `COMFY_BISECT_REGEN_SIM=1 cargo test --test sim sim_object_info` and commit the result"
    );
}

#[test]
fn shipped_node_definitions_equal_the_generated_ones() {
    let defs = generate_defs();
    check_or_write(SHIPPED_DEFS, &render(&defs));
    let roles = generate_roles(&defs);
    check_or_write(SHIPPED_ROLES, &render(&roles));
}

#[test]
fn trimmed_definitions_keep_what_bisection_needs() {
    let defs = generate_defs();
    let custom = read(CUSTOM);
    assert_eq!(custom.as_object().unwrap().len(), 55);
    for class in custom.as_object().unwrap().keys() {
        assert!(defs.contains_key(class), "custom class {class} missing");
    }
    for class in [
        "CheckpointLoaderSimple",
        "UNETLoader",
        "VAELoader",
        "KSampler",
        "KSamplerAdvanced",
        "SamplerCustomAdvanced",
        "EmptyLatentImage",
        "EmptyHunyuanLatentVideo",
        "EmptyLTXVLatentVideo",
        "WanImageToVideo",
        "VAEDecode",
        "VAEDecodeTiled",
        "SaveImage",
        "PreviewImage",
        "ImageUpscaleWithModel",
        "LoraLoaderModelOnly",
        "EasyCache",
        "SaveImageWebsocket",
    ] {
        assert!(defs.contains_key(class), "core class {class} missing");
    }
    for class in ["SaveAudio", "CheckpointSave", "RecraftColorRGB", "Load3D"] {
        assert!(!defs.contains_key(class), "{class} should be trimmed");
    }
    let ckpts = &defs["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"][0];
    assert!(ckpts
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "sd_xl_base_1.0.safetensors"));
    let vaes = defs["VAELoader"]["input"]["required"]["vae_name"][0]
        .as_array()
        .unwrap();
    assert_eq!(vaes.last().unwrap(), "pixel_space");
}

#[test]
fn every_custom_workflow_uses_only_shipped_classes() {
    let defs = generate_defs();
    let dir = Path::new("tests/fixtures/custom-nodes/workflows");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let wf = read(path.to_str().unwrap());
        for (id, node) in wf.as_object().unwrap() {
            let class = node["class_type"].as_str().unwrap();
            assert!(
                defs.contains_key(class),
                "{}: node {id} uses {class}, which the simulator does not ship",
                path.display()
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 6);
}
