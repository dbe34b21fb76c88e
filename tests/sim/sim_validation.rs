//! The simulator's server-side validation and the offline validator (`workflow::validate`) must
//! agree on what is broken: for every captured validation case and every custom-node fixture
//! workflow, the simulator reports node errors (400, or 200 with `node_errors`) exactly when the
//! offline validator finds a problem.

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::{validate::validate as offline, Workflow};
use comfy_bisect_sim::nodes::defs;
use comfy_bisect_sim::validate::{validate, Verdict};
use serde_json::Value;

fn offline_defs() -> NodeDefs {
    NodeDefs::from_value(&Value::Object(defs().map.clone())).expect("shipped defs parse")
}

/// True when the simulator would not run the whole prompt.
fn sim_objects(prompt: &serde_json::Map<String, Value>) -> bool {
    match validate(prompt, None, defs()) {
        Verdict::Reject(_) => true,
        Verdict::Accept { node_errors, .. } => !node_errors.is_empty(),
    }
}

/// True when the offline validator finds a problem (or cannot even load the graph).
fn offline_objects(prompt: &Value, nd: &NodeDefs) -> bool {
    match Workflow::from_json_str(&prompt.to_string(), "case.json") {
        Ok(wf) => !offline(&wf, nd).is_valid(),
        Err(_) => true,
    }
}

#[test]
fn both_validators_agree_on_the_captured_cases() {
    let nd = offline_defs();
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/comfyui/post_prompt_validation_errors.json")
            .unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for case in fixture["cases"].as_array().unwrap() {
        let Some(prompt) = case["request_body"]["prompt"].as_object() else {
            continue;
        };
        if prompt.is_empty() {
            continue; // no nodes: the server says prompt_no_outputs, offline has nothing to load
        }
        let name = case["case"].as_str().unwrap();
        let captured_objects = case["status"] == 400
            || case["response_body"]["node_errors"]
                .as_object()
                .is_some_and(|m| !m.is_empty());
        assert_eq!(sim_objects(prompt), captured_objects, "simulator, {name}");
        assert_eq!(
            offline_objects(&case["request_body"]["prompt"], &nd),
            captured_objects,
            "offline validator, {name}"
        );
        checked += 1;
    }
    assert!(checked >= 15, "{checked}");
}

#[test]
fn both_validators_accept_the_custom_node_workflows() {
    let nd = offline_defs();
    for entry in std::fs::read_dir("tests/fixtures/custom-nodes/workflows").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let wf: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            !sim_objects(wf.as_object().unwrap()),
            "simulator: {}",
            path.display()
        );
        assert!(!offline_objects(&wf, &nd), "offline: {}", path.display());
    }
}
