//! The custom-node fixtures against their `.expected.md` (numbers with `--min-resolution 0
//! --min-frames 1`; where an expected file removes block swap or attention patches, the
//! "memory savers are kept" rule wins).

use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::ladder::{plan, Increment, Plan, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::load_api_file;
use serde_json::json;
use std::path::Path;

fn planned(name: &str) -> Plan {
    let defs = NodeDefs::load_files(&[
        "tests/fixtures/comfyui/GET__object_info.final.json",
        "tests/fixtures/custom-nodes/object_info.custom.json",
    ])
    .unwrap();
    let path = format!("tests/fixtures/custom-nodes/workflows/{name}.json");
    let target = load_api_file(Path::new(&path)).unwrap();
    let options = PlanOptions {
        min_resolution: 0,
        min_frames: 1,
        ..PlanOptions::default()
    };
    plan(&target, &defs, &Catalog::builtin(), &options).unwrap()
}

fn ladder(p: &Plan) -> Vec<Increment> {
    p.steps[1..].iter().map(|s| s.increment).collect()
}

fn remaining(p: &Plan) -> Vec<String> {
    let mut ids: Vec<String> = p.steps[0].workflow.nodes.keys().cloned().collect();
    ids.sort();
    ids
}

fn sorted(ids: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn flux_power_lora_usdu() {
    use Increment::*;
    let p = planned("flux_dev_gguf_power_lora_usdu");
    assert_eq!(ladder(&p), [Resolution, Batch, Lora, Postprocess]);
    // The Power Lora Loader stays with every row off.
    assert_eq!(
        remaining(&p),
        sorted(&["31", "41", "10", "52", "6", "26", "35", "27", "3", "8", "62", "9"])
    );
    let m = &p.steps[0].workflow;
    assert_eq!(m.nodes["27"].inputs["width"].as_literal(), Some(&json!(16)));
    assert_eq!(
        m.nodes["27"].inputs["batch_size"].as_literal(),
        Some(&json!(1))
    );
}

#[test]
fn hunyuan_fbcache_compile_tiled() {
    use Increment::*;
    let p = planned("hunyuanvideo_t2v_fbcache_compile_tiled");
    assert_eq!(ladder(&p), [Resolution, Frames, Quantization, Cache]);
    assert_eq!(
        remaining(&p),
        sorted(&[
            "12", "11", "10", "67", "44", "26", "45", "25", "16", "17", "22", "13", "73", "78"
        ])
    );
    let m = &p.steps[0].workflow;
    assert_eq!(m.nodes["45"].inputs["length"].as_literal(), Some(&json!(1)));
    assert_eq!(
        m.nodes["12"].inputs["weight_dtype"].as_literal(),
        Some(&json!("default"))
    );
}

#[test]
fn sd15_easyuse_hiresfix_model_upscale() {
    use Increment::*;
    let p = planned("sd15_easyuse_hiresfix_model_upscale");
    assert_eq!(ladder(&p), [Resolution, Batch, Lora, Postprocess]);
    assert_eq!(remaining(&p), sorted(&["13", "3", "8", "9"]));
    let m = &p.steps[0].workflow;
    let n = &m.nodes["13"].inputs;
    assert_eq!(
        n["resolution"].as_literal(),
        Some(&json!("width x height (custom)"))
    );
    assert_eq!(n["empty_latent_width"].as_literal(), Some(&json!(64)));
    assert_eq!(n["lora_name"].as_literal(), Some(&json!("None")));
    assert!(!n.contains_key("optional_lora_stack"));
}

#[test]
fn wanvideowrapper_blockswap_teacache_loras() {
    use Increment::*;
    let p = planned("wanvideowrapper_t2v_blockswap_teacache_loras");
    assert_eq!(ladder(&p), [Resolution, Frames, Lora, Quantization, Cache]);
    // Block swap (39) and the attention mode stay: memory savers.
    assert_eq!(
        remaining(&p),
        sorted(&["11", "39", "22", "16", "37", "27", "38", "28", "30"])
    );
    let m = &p.steps[0].workflow;
    assert_eq!(m.nodes["37"].inputs["width"].as_literal(), Some(&json!(64)));
    assert_eq!(
        m.nodes["22"].inputs["attention_mode"].as_literal(),
        Some(&json!("sageattn"))
    );
    assert_eq!(
        m.nodes["22"].inputs["quantization"].as_literal(),
        Some(&json!("disabled"))
    );
    assert!(p.kept.iter().any(|k| k.node == "39"));
}

#[test]
fn flux_gguf_already_minimal() {
    let p = planned("flux_gguf_already_minimal");
    assert_eq!(p.steps.len(), 1);
    assert_eq!(p.steps[0].sha256, p.target_sha256);
    assert!(p
        .not_separable
        .iter()
        .any(|n| n.increment == Increment::Quantization));
}
