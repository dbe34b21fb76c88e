//! The graph formats of 2026 (issue 24, item 3) on the hand-written workflows of
//! `tests/fixtures/ui-2026/`: a subgraph whose definition uses the version-1 shape (links as
//! objects) inside a 0.4 file, the same workflow as a whole version-1 file (`state`, object
//! links, a reroute and a floating link), and a V3 dynamic-combo node whose sizes are dotted
//! sub-inputs (`resize_type.width`). They convert, validate and plan against the newer
//! `/object_info` of `tests/fixtures/comfyui-newer/`.

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::ui::{self, load_workflow_file};
use comfy_bisect_core::workflow::validate::validate;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const NEWER: &str = "tests/fixtures/comfyui-newer/object_info.json";
const V04: &str = "tests/fixtures/ui-2026/subgraph-dynamic-combo.v0.4.json";
const V1: &str = "tests/fixtures/ui-2026/subgraph-dynamic-combo.v1.json";

fn defs() -> NodeDefs {
    NodeDefs::load_file(Path::new(NEWER)).unwrap()
}

fn read(path: &str) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The API prompt both files must give: the KSampler inside subgraph instance 140 gets the
/// hierarchical id `140:125`, its inputs come from the nodes outside the boundary, and the
/// dynamic combo's chosen option submits its sub-inputs under dotted keys.
fn expected() -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "random_sd15.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a lighthouse on a cliff at dusk", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 768, "height": 512, "batch_size": 2}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["140:125", 0], "vae": ["4", 2]}},
        "150": {"class_type": "ResizeImageMaskNode", "inputs": {
            "resize_type": "scale dimensions", "resize_type.width": 1536, "resize_type.height": 1024,
            "resize_type.crop": "center", "scale_method": "lanczos", "input": ["8", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "ComfyUI", "images": ["150", 0]}},
        "140:125": {"class_type": "KSampler", "inputs": {
            "seed": 42, "steps": 20, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 1.0,
            "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}}
    })
}

/// Node id → inputs, without `_meta` (the titles are checked apart).
fn inputs_by_id(prompt: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (id, node) in prompt.as_object().unwrap() {
        out.insert(
            id.clone(),
            json!({"class_type": node["class_type"], "inputs": node["inputs"]}),
        );
    }
    Value::Object(out)
}

#[test]
fn a_v1_subgraph_in_a_04_file_converts_to_hierarchical_ids_and_dotted_keys() {
    let converted = ui::convert(&read(V04), &defs()).unwrap();
    let prompt = converted.workflow.to_value();
    assert_eq!(inputs_by_id(&prompt), expected());
    assert_eq!(prompt["140:125"]["_meta"]["title"], "KSampler");
    assert_eq!(prompt["150"]["_meta"]["title"], "Upscale");
    // The instance the inner node sits in, and the definition it comes from.
    let origin = &converted.provenance["140:125"];
    assert_eq!(origin.scope, vec!["140".to_string()]);
    assert_eq!(origin.node_id, "125");
    assert!(converted.instances.contains_key("140"));
}

#[test]
fn a_whole_v1_file_converts_like_its_04_twin() {
    let defs = defs();
    let v04 = ui::convert(&read(V04), &defs).unwrap();
    let v1 = ui::convert(&read(V1), &defs).unwrap();
    assert_eq!(v1.workflow.to_value(), v04.workflow.to_value());
    assert_eq!(v1.workflow.sha256(), v04.workflow.sha256());
    assert!(v1.warnings.is_empty(), "{:?}", v1.warnings);
}

/// `links` is optional in a version-1 file (the frontend's schema): a file whose nodes are not
/// connected is still a UI file, not an API prompt with odd keys.
#[test]
fn a_v1_file_without_links_is_read_as_a_ui_file() {
    let mut doc = read(V1);
    let obj = doc.as_object_mut().unwrap();
    obj.remove("links");
    obj.remove("floatingLinks");
    obj.remove("reroutes");
    obj.remove("definitions");
    obj["nodes"] = json!([obj["nodes"][0].clone()]);
    obj["nodes"][0]["outputs"] = json!([]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-node.v1.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let loaded = load_workflow_file(&path, &defs()).unwrap();
    assert!(loaded.ui.is_some(), "read as a UI file");
    assert_eq!(
        loaded.workflow.to_value()["4"]["inputs"],
        json!({"ckpt_name": "random_sd15.safetensors"})
    );
}

/// Slot indices may be saved as numeric strings (the frontend's schema parses them).
#[test]
fn string_slot_indices_of_object_links_are_read_as_numbers() {
    let mut doc = read(V1);
    for link in doc["links"].as_array_mut().unwrap() {
        let o = link["origin_slot"].as_u64().unwrap();
        link["origin_slot"] = json!(o.to_string());
        let t = link["target_slot"].as_u64().unwrap();
        link["target_slot"] = json!(t.to_string());
    }
    let converted = ui::convert(&doc, &defs()).unwrap();
    assert_eq!(inputs_by_id(&converted.workflow.to_value()), expected());
}

#[test]
fn the_converted_workflow_validates_against_the_v3_definitions() {
    let defs = defs();
    let converted = ui::convert(&read(V1), &defs).unwrap();
    let report = validate(&converted.workflow, &defs);
    let errors: Vec<_> = report.graph_errors().collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// `plan` on the v1 file: the resolution step scales the latent and the resize node's dotted
/// width/height together, the batch step restores the latent's batch, and the last step is
/// the target.
#[test]
fn plan_scales_the_dotted_sizes_of_the_dynamic_combo_with_the_latent() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["plan", "--object-info", NEWER, "--out"])
        .arg(dir.path())
        .arg(V1)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = read(dir.path().join("plan.json").to_str().unwrap());
    let steps = plan["steps"].as_array().unwrap();
    let minimal = read(
        dir.path()
            .join(steps[0]["file"].as_str().unwrap())
            .to_str()
            .unwrap(),
    );
    let latent = &minimal["5"]["inputs"];
    let resize = &minimal["150"]["inputs"];
    let (lw, lh) = (
        latent["width"].as_i64().unwrap(),
        latent["height"].as_i64().unwrap(),
    );
    let (rw, rh) = (
        resize["resize_type.width"].as_i64().unwrap(),
        resize["resize_type.height"].as_i64().unwrap(),
    );
    assert!(lw < 768 && lh < 512, "latent reduced: {latent}");
    assert!(rw < 1536 && rh < 1024, "resize reduced: {resize}");
    assert_eq!(latent["batch_size"], 1, "batch reduced: {latent}");
    // The subgraph's sampler keeps its hierarchical id in every variant.
    assert!(minimal.get("140:125").is_some(), "{minimal}");
    let increments: Vec<&str> = steps
        .iter()
        .filter_map(|s| s["increment"].as_str())
        .collect();
    assert!(increments.contains(&"resolution"), "{increments:?}");
    assert!(increments.contains(&"batch"), "{increments:?}");
    assert_eq!(steps.last().unwrap()["sha256"], plan["target_sha256"]);
}

/// What validation says of a V3 node whose values are wrong: an option key the dynamic combo
/// does not have, a missing sub-input of the chosen option, a dotted sub-input out of range,
/// and values missing from combos in the object form (`["COMBO", {"options": [...]}]`).
#[test]
fn validation_reads_v3_dynamic_combos_and_object_combos() {
    let defs = defs();
    let base = ui::convert(&read(V1), &defs).unwrap().workflow.to_value();
    let problems = |edit: &dyn Fn(&mut Value)| -> Vec<(String, String)> {
        let mut v = base.clone();
        edit(&mut v["150"]["inputs"]);
        let w = comfy_bisect_core::workflow::parse_api(&v, "edited.json").unwrap();
        validate(&w, &defs)
            .graph_errors()
            .map(|p| (format!("{:?}", p.kind), p.input.clone().unwrap_or_default()))
            .collect()
    };
    assert!(problems(&|_| {}).is_empty());
    let bad_key = problems(&|i| i["resize_type"] = json!("scale sideways"));
    assert!(
        bad_key.iter().any(|(_, input)| input == "resize_type"),
        "{bad_key:?}"
    );
    let missing = problems(&|i| {
        i.as_object_mut().unwrap().remove("resize_type.height");
    });
    assert_eq!(
        missing,
        vec![(
            "RequiredInputMissing".to_string(),
            "resize_type.height".to_string()
        )]
    );
    let too_big = problems(&|i| i["resize_type.width"] = json!(99999));
    assert!(
        too_big
            .iter()
            .any(|(_, input)| input == "resize_type.width"),
        "{too_big:?}"
    );
    let bad_crop = problems(&|i| i["resize_type.crop"] = json!("squash"));
    assert!(
        bad_crop
            .iter()
            .any(|(_, input)| input == "resize_type.crop"),
        "{bad_crop:?}"
    );
    let bad_method = problems(&|i| i["scale_method"] = json!("sharpest"));
    assert!(
        bad_method.iter().any(|(_, input)| input == "scale_method"),
        "{bad_method:?}"
    );
    // Another option's sub-inputs switch with the key: `scale by multiplier` needs only
    // `resize_type.multiplier`.
    let by_multiplier = problems(&|i| {
        let o = i.as_object_mut().unwrap();
        o.retain(|k, _| !k.starts_with("resize_type."));
        o.insert("resize_type".into(), json!("scale by multiplier"));
        o.insert("resize_type.multiplier".into(), json!(1.5));
    });
    assert!(by_multiplier.is_empty(), "{by_multiplier:?}");
}

/// The subgraph names of a UI file, by instance execution id, name its inner nodes as the
/// canvas shows them.
#[test]
fn subgraph_names_name_the_inner_nodes_of_both_files() {
    use comfy_bisect_core::workflow::label::node_label;
    for file in [V04, V1] {
        let names = ui::subgraph_names(&read(file));
        assert_eq!(names.get("140").map(String::as_str), Some("Sampler"));
        assert_eq!(
            node_label("140:125", "KSampler", &names),
            "KSampler #125 in subgraph 'Sampler' #140"
        );
    }
}

/// The ladder's bypass on the V3 resize node (a MatchType in and out) hands its image input to
/// the consumer, as ComfyUI's bypass does; the UI write-back of that variant converts back to
/// the same API prompt.
#[test]
fn bypassing_the_matchtype_resize_node_passes_its_image_through() {
    use comfy_bisect_core::workflow::Edit;
    let defs = defs();
    let doc = read(V1);
    let converted = ui::convert(&doc, &defs).unwrap();
    let mut variant = converted.workflow.clone();
    let edits = [Edit::Bypass { node: "150".into() }];
    variant.apply(&edits, &defs).unwrap();
    let v = variant.to_value();
    assert!(v.get("150").is_none(), "{v}");
    assert_eq!(v["9"]["inputs"]["images"], json!(["8", 0]));
    let written = ui::write_variant(&doc, &converted, &edits, &defs).unwrap();
    let back = ui::convert(&written, &defs).unwrap();
    assert_eq!(back.workflow.sha256(), variant.sha256());
    // The version-1 file stays one: links as objects, the link counter in `state`.
    let links = written["links"].as_array().unwrap();
    assert!(links.iter().all(Value::is_object), "{links:?}");
    let last = written["state"]["lastLinkId"].as_i64().unwrap();
    assert!(
        links.iter().all(|l| l["id"].as_i64().unwrap() <= last),
        "{links:?} last {last}"
    );
    assert!(written.get("last_link_id").is_none(), "{written}");
}
