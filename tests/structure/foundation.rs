//! The foundation as a user meets it: `hash` and `validate` on files, structural errors with
//! file/node/class/input named, canonical hashing, and validation over the official templates.

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::validate::{validate, ProblemKind};
use comfy_bisect_core::workflow::{load_api_file, LoadError, Workflow};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const CORE: &str = "tests/fixtures/comfyui/GET__object_info.final.json";
const CUSTOM: &str = "tests/fixtures/custom-nodes/object_info.custom.json";
const NEWER: &str = "tests/fixtures/comfyui-newer/object_info.json";
const TEMPLATES_API: &str = "tests/corpus/templates-api-newer";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load_err(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "wf.json", text);
    let err = load_api_file(&p).expect_err("must be refused");
    err.to_string()
}

#[test]
fn json_syntax_error_names_line_and_column() {
    let msg = load_err("{\n  \"1\": {\"class_type\": \"A\",\n  }\n}");
    assert!(msg.contains("wf.json"), "{msg}");
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("column"), "{msg}");
}

#[test]
fn node_without_class_type_is_named() {
    let msg = load_err(r#"{"1": {"class_type": "A", "inputs": {}}, "7": {"inputs": {}}}"#);
    assert!(msg.contains("node '7' has no class_type"), "{msg}");
}

#[test]
fn link_to_missing_node_names_node_class_input_and_target() {
    let msg = load_err(r#"{"1": {"class_type": "VAEDecode", "inputs": {"samples": ["9", 0]}}}"#);
    assert!(
        msg.contains("node '1' (VAEDecode), input 'samples' links to node '9'"),
        "{msg}"
    );
}

#[test]
fn link_slot_must_be_a_non_negative_integer() {
    for slot in ["-1", "1.5", "\"0\""] {
        let text = format!(
            r#"{{"1": {{"class_type": "A", "inputs": {{}}}}, "2": {{"class_type": "B", "inputs": {{"x": ["1", {slot}]}}}}}}"#
        );
        let msg = load_err(&text);
        assert!(msg.contains("node '2' (B), input 'x'"), "{msg}");
        assert!(msg.contains("not a non-negative integer"), "{msg}");
    }
}

#[test]
fn cycle_lists_its_nodes() {
    let msg = load_err(
        r#"{"1": {"class_type": "A", "inputs": {"x": ["3", 0]}},
            "2": {"class_type": "B", "inputs": {"x": ["1", 0]}},
            "3": {"class_type": "C", "inputs": {"x": ["2", 0]}},
            "4": {"class_type": "D", "inputs": {}}}"#,
    );
    assert!(msg.contains("cycle"), "{msg}");
    // Only the part after the file name: the temp folder's random name may hold any digit.
    let cycle = msg
        .split("cycle")
        .nth(1)
        .expect("the message names the cycle");
    for id in ["1", "2", "3"] {
        assert!(cycle.contains(id), "{msg}");
    }
    assert!(!cycle.contains('4'), "{msg}");
}

#[test]
fn a_huge_cycle_names_its_first_nodes_and_counts_the_rest() {
    // 100 000 nodes in one cycle made the message one 989 KB line (issue #29); 2 000 show it
    // (about 14 KB without the cap) and keep the test fast.
    let n = 2_000;
    let nodes: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            let next = (i + 1) % n;
            (
                i.to_string(),
                serde_json::json!({"class_type": "A", "inputs": {"x": [next.to_string(), 0]}}),
            )
        })
        .collect();
    let msg = load_err(&serde_json::Value::Object(nodes).to_string());
    assert!(
        msg.contains("the links form a cycle through nodes"),
        "{msg}"
    );
    // The first 20 nodes, then how many more (the cycle closes on its first node).
    assert!(msg.contains(" → … and 1981 more"), "{msg}");
    assert!(msg.contains(" more; a workflow must be acyclic"), "{msg}");
    assert!(msg.len() < 1000, "{} bytes", msg.len());
}

#[test]
fn a_workflow_saved_with_a_byte_order_mark_loads() {
    let text = "\u{feff}{\"1\": {\"class_type\": \"A\", \"inputs\": {}}}";
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bom.json", text);
    let wf = load_api_file(&p).expect("a BOM is accepted");
    assert_eq!(wf.node("1").unwrap().class_type, "A");
    assert_eq!(
        wf.sha256(),
        Workflow::from_json_str(&text[3..], "x.json")
            .unwrap()
            .sha256()
    );
}

#[test]
fn ui_format_is_recognised_and_refused_with_advice() {
    let template = std::fs::read_dir("tests/corpus/templates")
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let err = load_api_file(&template).unwrap_err();
    assert!(matches!(err, LoadError::UiFormat { .. }), "{err}");
    assert!(err.to_string().contains("Export (API)"));
}

#[test]
fn wrapped_prompt_body_and_value_literals_load() {
    let wf = Workflow::from_json_str(
        r#"{"prompt": {"1": {"class_type": "A", "inputs": {"list": {"__value__": [1, 2]}, "pair": {"__value__": ["x", 0]}}}}, "client_id": "c"}"#,
        "body.json",
    )
    .unwrap();
    let node = &wf.nodes["1"];
    assert!(node.inputs["pair"].as_literal().is_some());
    assert!(node.inputs["list"].as_literal().is_some());
}

#[test]
fn hash_ignores_key_order_whitespace_and_meta_but_not_values() {
    let a = Workflow::from_json_str(
        r#"{"1": {"class_type": "KSampler", "inputs": {"seed": 5, "cfg": 7.5}, "_meta": {"title": "A"}},
            "2": {"class_type": "X", "inputs": {"m": ["1", 0]}}}"#,
        "a.json",
    )
    .unwrap();
    let b = Workflow::from_json_str(
        "{\"2\":{\"inputs\":{\"m\":[\"1\",0]},\"class_type\":\"X\"},\n\n \"1\" : { \"_meta\": {\"title\": \"B\"}, \"inputs\": {\"cfg\": 7.5, \"seed\": 5}, \"class_type\": \"KSampler\"}}",
        "b.json",
    )
    .unwrap();
    assert_eq!(a.sha256(), b.sha256());
    let c = Workflow::from_json_str(
        r#"{"1": {"class_type": "KSampler", "inputs": {"seed": 6, "cfg": 7.5}},
            "2": {"class_type": "X", "inputs": {"m": ["1", 0]}}}"#,
        "c.json",
    )
    .unwrap();
    assert_ne!(a.sha256(), c.sha256());
    assert_eq!(a.sha256().len(), 64);
}

/// The canonical bytes of the whole prompt object, built the slow way: a JSON tree without `_meta`.
fn canonical_via_tree(wf: &Workflow) -> Vec<u8> {
    let tree = serde_json::Value::Object(
        wf.nodes
            .iter()
            .map(|(id, n)| (id.clone(), n.to_value(false)))
            .collect(),
    );
    comfy_bisect_core::workflow::canonical_json(&tree).into_bytes()
}

#[test]
fn canonical_bytes_are_those_of_the_json_tree() {
    // Escapes, unicode, numbers as written, literal arrays, extra node fields, links.
    let wf = Workflow::from_json_str(
        r#"{"b\"q": {"class_type": "K\u00e9\n", "is_changed": ["x", {"z": 1, "a": 1e3}],
                "inputs": {"seed": 18446744073709551615, "cfg": 7.10, "list": {"__value__": [1, "t\t"]},
                "m": ["1", 2], "txt": "\u2028 </script> \u0001", "none": null, "on": true}},
            "1": {"class_type": "X", "inputs": {}, "_meta": {"title": "T"}},
            "10": {"class_type": "Y", "inputs": {"y": ["1", 0]}}}"#,
        "c.json",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(wf.canonical_bytes()).unwrap(),
        String::from_utf8(canonical_via_tree(&wf)).unwrap()
    );
    // And on every official template prompt and custom-node workflow.
    let mut checked = 0;
    for dir in [TEMPLATES_API, "tests/fixtures/custom-nodes/workflows"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(wf) = load_api_file(&path) else {
                continue;
            };
            assert_eq!(
                wf.canonical_bytes(),
                canonical_via_tree(&wf),
                "{}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 150, "only {checked} prompts compared");
}

#[test]
fn u64_seed_and_floats_round_trip_exactly() {
    let text = r#"{"3": {"class_type": "KSampler", "inputs": {"seed": 18446744073709551615, "cfg": 7.10, "denoise": 0.30000000000000004}}}"#;
    let wf = Workflow::from_json_str(text, "s.json").unwrap();
    let written = wf.to_pretty_json();
    assert!(written.contains("18446744073709551615"), "{written}");
    assert!(written.contains("7.10"), "{written}");
    assert!(written.contains("0.30000000000000004"), "{written}");
    let again = Workflow::from_json_str(&written, "s2.json").unwrap();
    assert_eq!(wf, again);
    assert_eq!(wf.sha256(), again.sha256());
}

#[test]
fn graph_queries() {
    let wf = Workflow::from_json_str(
        r#"{"9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0]}},
            "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
            "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0]}},
            "4": {"class_type": "CheckpointLoaderSimple", "inputs": {}},
            "20": {"class_type": "CheckpointLoaderSimple", "inputs": {}}}"#,
        "q.json",
    )
    .unwrap();
    let defs = NodeDefs::load_file(Path::new(CORE)).unwrap();
    let order = wf.topological_order();
    let pos = |id: &str| order.iter().position(|x| x == id).unwrap();
    assert!(pos("4") < pos("3") && pos("3") < pos("8") && pos("8") < pos("9"));
    assert_eq!(wf.consumers("4", 2).len(), 1);
    assert_eq!(wf.consumers("4", 0)[0].node, "3");
    let reach = wf.reachable_from_outputs(&defs);
    assert!(reach.contains("4") && !reach.contains("20"));
    assert_eq!(wf.output_nodes(&defs), vec!["9".to_string()]);
    let up = wf.upstream_closure(["8"]);
    assert_eq!(up.len(), 3);
}

#[test]
fn hash_command_prints_hash_and_node_count() {
    let out = Command::new(BIN)
        .args(["hash", "workflows/sd15_txt2img_lora_upscale.json", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let wf = load_api_file(Path::new("workflows/sd15_txt2img_lora_upscale.json")).unwrap();
    assert_eq!(v["sha256"], wf.sha256());
    assert_eq!(v["nodes"], 10);
}

#[test]
fn validate_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new(BIN)
        .args([
            "validate",
            "--object-info",
            CORE,
            "--object-info",
            CUSTOM,
            "workflows/sd15_txt2img_lora_upscale.json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    let bad = write(
        dir.path(),
        "bad.json",
        r#"{"1": {"class_type": "EmptyLatentImage", "inputs": {"width": 8, "height": 512, "batch_size": 1}},
            "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}}}"#,
    );
    let out = Command::new(BIN)
        .args(["validate", "--object-info", CORE])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("width") && text.contains("minimum 16"),
        "{text}"
    );
    assert!(
        text.contains("expects LATENT") || text.contains("LATENT"),
        "{text}"
    );
    let broken = write(dir.path(), "broken.json", "{ not json");
    let out = Command::new(BIN)
        .args(["validate", "--object-info", CORE])
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.json"));
    let missing_defs = Command::new(BIN)
        .args([
            "validate",
            "--object-info",
            "no/such/file.json",
            "workflows/sd15_txt2img_lora_upscale.json",
        ])
        .output()
        .unwrap();
    assert_eq!(missing_defs.status.code(), Some(2));
}

#[test]
fn example_workflows_validate_against_the_fixture_server() {
    let defs = NodeDefs::load_files(&[CORE, CUSTOM]).unwrap();
    let sd = load_api_file(Path::new("workflows/sd15_txt2img_lora_upscale.json")).unwrap();
    let report = validate(&sd, &defs);
    assert!(report.is_valid(), "{:#?}", report.problems);
    // The fixture server has no Wan VAE file: that is the only thing it lacks for this example.
    let wan = load_api_file(Path::new(
        "workflows/wan22_t2v_experts_lora_cache_rife.json",
    ))
    .unwrap();
    let report = validate(&wan, &defs);
    assert_eq!(report.graph_errors().count(), 0, "{:#?}", report.problems);
    let missing: Vec<_> = report
        .problems
        .iter()
        .map(|p| p.value.clone().unwrap())
        .collect();
    assert_eq!(missing, vec![serde_json::json!("wan_2.1_vae.safetensors")]);
}

/// Validation of the official frontend's API prompts against the newer node definitions:
/// missing model and input files (the server has only random test models) reported as such,
/// and the genuine errors of templates newer than that server.
#[test]
fn validate_every_official_template_prompt() {
    let defs = NodeDefs::load_file(Path::new(NEWER)).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(TEMPLATES_API)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 191);
    let mut totals: BTreeMap<ProblemKind, usize> = BTreeMap::new();
    let mut valid = 0;
    let mut only_missing_files = 0;
    for f in &files {
        let wf = load_api_file(f).unwrap_or_else(|e| panic!("{e}"));
        let report = validate(&wf, &defs);
        valid += report.is_valid() as usize;
        only_missing_files += (!report.is_valid() && report.only_missing_files()) as usize;
        for p in &report.problems {
            *totals.entry(p.kind).or_default() += 1;
            // Every problem names where it is.
            assert!(p.node.is_some() || p.kind == ProblemKind::NoOutputNode);
        }
    }
    eprintln!(
        "templates: {} valid, {only_missing_files} only missing files; {totals:?}",
        valid
    );
    let count = |k| totals.get(&k).copied().unwrap_or(0);
    assert_eq!(valid, 1);
    assert_eq!(only_missing_files, 111);
    assert_eq!(count(ProblemKind::MissingModelFile), 662);
    assert_eq!(count(ProblemKind::MissingInputFile), 173);
    // Genuine errors: a `type` (or other) option the server does not list, links from outputs
    // that old SaveImage/PreviewImage/PreviewAny lack, values the older definitions reject.
    assert_eq!(count(ProblemKind::ValueNotInList), 87);
    assert_eq!(count(ProblemKind::BadLinkSlot), 50);
    assert_eq!(count(ProblemKind::ValueSmallerThanMin), 3);
    assert_eq!(count(ProblemKind::InvalidInputType), 2);
    assert_eq!(count(ProblemKind::ReturnTypeMismatch), 1);
    assert_eq!(count(ProblemKind::RequiredInputMissing), 1);
    assert_eq!(count(ProblemKind::UnknownClass), 0);
}
