//! Variants written back as UI workflows convert to exactly the API variant (same canonical
//! hash), on every template of the 1.58.1 oracle set, with generated edits: every KSampler's
//! steps changed, every LoRA loader bypassed, every empty-latent width set, every preview node
//! removed. Layout (positions, groups, notes) is kept.

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::edit::Edit;
use comfy_bisect_core::workflow::ui::{convert, write_variant};
use serde_json::{json, Value};
use std::path::Path;

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn generated_edits(workflow: &comfy_bisect_core::workflow::Workflow) -> Vec<Edit> {
    let mut edits = Vec::new();
    for (id, node) in &workflow.nodes {
        match node.class_type.as_str() {
            "KSampler" | "KSamplerAdvanced" if node.inputs.contains_key("steps") => {
                edits.push(Edit::SetInput {
                    node: id.clone(),
                    input: "steps".into(),
                    value: json!(7),
                })
            }
            "LoraLoader" | "LoraLoaderModelOnly" => edits.push(Edit::Bypass { node: id.clone() }),
            "EmptyLatentImage" | "EmptySD3LatentImage" | "EmptyHunyuanLatentVideo"
                if node.inputs.contains_key("width") =>
            {
                edits.push(Edit::SetInput {
                    node: id.clone(),
                    input: "width".into(),
                    value: json!(512),
                })
            }
            "PreviewImage" => edits.push(Edit::Remove {
                nodes: vec![id.clone()],
            }),
            _ => {}
        }
    }
    edits
}

/// Node positions and groups of every scope, for the layout check.
fn layout(ui: &Value) -> Value {
    let mut scopes = vec![ui.clone()];
    if let Some(subgraphs) = ui["definitions"]["subgraphs"].as_array() {
        scopes.extend(subgraphs.iter().cloned());
    }
    Value::Array(
        scopes
            .iter()
            .map(|s| {
                json!({
                    "groups": s["groups"],
                    "nodes": s["nodes"].as_array().map(|n| n.iter().map(|n| json!([n["id"], n["type"], n["pos"], n["size"]])).collect::<Vec<_>>()),
                })
            })
            .collect(),
    )
}

#[test]
fn written_back_variants_convert_to_the_api_variant() {
    let defs =
        NodeDefs::load_file(Path::new("tests/fixtures/comfyui-newer/object_info.json")).unwrap();
    let mut names: Vec<String> = std::fs::read_dir("tests/corpus/templates-api-newer")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let (mut templates, mut edit_count, mut failures) = (0, 0, Vec::new());
    let mut kinds = std::collections::BTreeMap::new();
    for name in &names {
        let ui = read(&Path::new("tests/corpus/templates").join(name));
        let converted = convert(&ui, &defs).unwrap();
        let edits = generated_edits(&converted.workflow);
        if edits.is_empty() {
            continue;
        }
        templates += 1;
        edit_count += edits.len();
        for e in &edits {
            let kind = serde_json::to_value(e).unwrap()["edit"]
                .as_str()
                .unwrap()
                .to_string();
            *kinds.entry(kind).or_insert(0) += 1;
        }
        let mut want = converted.workflow.clone();
        want.apply(&edits, &defs).unwrap();
        let written = match write_variant(&ui, &converted, &edits, &defs) {
            Ok(w) => w,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let back = convert(&written, &defs).unwrap();
        if back.workflow.sha256() != want.sha256() {
            failures.push(format!(
                "{name}: the written UI file converts to another workflow"
            ));
        }
        if layout(&written) != layout(&ui) {
            failures.push(format!("{name}: the layout changed"));
        }
    }
    println!(
        "write-back round trip: {templates} templates, {edit_count} edits {kinds:?}, {} failures",
        failures.len()
    );
    for f in &failures {
        println!("FAIL {f}");
    }
    assert!(templates > 100, "the generated edits cover most templates");
    assert!(failures.is_empty());
}

/// A node given another class (a mitigation's `VAEDecode` → `VAEDecodeTiled`) and its new
/// widgets are written back the UI way: the converted file is the API variant.
#[test]
fn a_class_change_with_its_widgets_is_written_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ui = read(&root.join("workflows/sd15_hires_fix_pixel.ui.json"));
    let defs =
        NodeDefs::load_file(&root.join("tests/fixtures/comfyui/GET__object_info.final.json"))
            .unwrap();
    let converted = convert(&ui, &defs).unwrap();
    let (id, _) = converted
        .workflow
        .nodes
        .iter()
        .find(|(_, n)| n.class_type == "VAEDecode")
        .unwrap();
    let id = id.clone();
    let set: serde_json::Map<String, Value> = [
        ("tile_size", json!(256)),
        ("overlap", json!(32)),
        ("temporal_size", json!(4096)),
        ("temporal_overlap", json!(8)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let edits = vec![Edit::SetClass {
        node: id.clone(),
        class_type: "VAEDecodeTiled".into(),
        set,
    }];
    let written = write_variant(&ui, &converted, &edits, &defs).unwrap_or_else(|e| panic!("{e}"));
    let mut want = converted.workflow.clone();
    want.apply(&edits, &defs).unwrap();
    let again = convert(&written, &defs).unwrap();
    assert_eq!(again.workflow.sha256(), want.sha256());
    assert_eq!(again.workflow.nodes[&id].class_type, "VAEDecodeTiled");
}
