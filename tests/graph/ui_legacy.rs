//! Old saved UI layouts convert the way the frontend reads them: the seed's control slot is taken
//! by position whatever it holds (legacy booleans), early `sample_` sampler names lose the prefix,
//! and the converted prompt validates with no value problems (only the absent model file).

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::ui;
use comfy_bisect_core::workflow::validate::{validate, ProblemKind};
use comfy_bisect_core::workflow::Workflow;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const DEFS: &str = "tests/fixtures/comfyui/GET__object_info.final.json";

fn defs() -> NodeDefs {
    NodeDefs::load_file(Path::new(DEFS)).unwrap()
}

fn convert(name: &str) -> Workflow {
    let path = format!("tests/fixtures/ui-legacy/{name}.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    ui::convert(&doc, &defs()).unwrap().workflow
}

fn literal(w: &Workflow, node: &str, input: &str) -> Value {
    w.nodes[node].inputs[input].as_literal().unwrap().clone()
}

/// Only the model file the fixture server lacks; no value or type problem.
fn validates_but_for_files(w: &Workflow) {
    let report = validate(w, &defs());
    for p in &report.problems {
        assert!(
            matches!(p.kind, ProblemKind::MissingModelFile),
            "unexpected problem: {p:?}"
        );
    }
}

#[test]
fn boolean_seed_control_of_the_old_default_graph() {
    let w = convert("default_graph_boolean_seed_control");
    let sent: Value = serde_json::to_value(
        w.nodes["3"]
            .inputs
            .iter()
            .filter_map(|(k, v)| v.as_literal().map(|v| (k.clone(), v.clone())))
            .collect::<serde_json::Map<_, _>>(),
    )
    .unwrap();
    assert_eq!(
        sent,
        json!({"seed": 156680208700286u64, "steps": 20, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 1})
    );
    validates_but_for_files(&w);
}

#[test]
fn sample_prefix_and_false_control_on_advanced_samplers() {
    let w = convert("two_pass_sample_prefix_and_boolean_controls");
    assert_eq!(literal(&w, "3", "steps"), json!(25));
    assert_eq!(literal(&w, "3", "sampler_name"), json!("dpmpp_2m"));
    assert_eq!(
        literal(&w, "3", "return_with_leftover_noise"),
        json!("disable")
    );
    assert_eq!(literal(&w, "11", "steps"), json!(15));
    assert_eq!(literal(&w, "11", "sampler_name"), json!("euler_ancestral"));
    assert_eq!(literal(&w, "11", "denoise"), json!(0.5));
    assert_eq!(literal(&w, "10", "width"), json!(768));
    validates_but_for_files(&w);
}

#[test]
fn primitive_node_seed_with_boolean_controls() {
    let w = convert("primitive_seed_boolean_controls");
    assert_eq!(literal(&w, "3", "seed"), json!(987654321));
    assert_eq!(literal(&w, "3", "steps"), json!(28));
    assert_eq!(literal(&w, "3", "scheduler"), json!("karras"));
    assert!(
        !w.nodes.contains_key("12"),
        "the PrimitiveNode is frontend-only"
    );
    validates_but_for_files(&w);
}

/// Round trip from the command line: `convert` writes the API prompt, `validate` finds only
/// the missing model file (exit 1 with that one problem, no value problem).
#[test]
fn convert_then_validate_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "default_graph_boolean_seed_control",
        "two_pass_sample_prefix_and_boolean_controls",
        "primitive_seed_boolean_controls",
    ] {
        let api = dir.path().join(format!("{name}.api.json"));
        let out = Command::new(BIN)
            .args(["convert", "--object-info", DEFS, "-o"])
            .arg(&api)
            .arg(format!("tests/fixtures/ui-legacy/{name}.json"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new(BIN)
            .args(["validate", "--object-info", DEFS])
            .arg(&api)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 problem(s)"), "{name}: {text}");
        assert!(text.contains("missing model file"), "{name}: {text}");
    }
}
