//! Every corpus template that converts validates, apart from model and input files: no value
//! (`value_*`) or type (`invalid_input_type`) problem after conversion, so a widget misalignment
//! cannot hide behind a model-file miss.

use comfy_bisect_core::nodedefs::{InputKind, NodeDefs};
use comfy_bisect_core::workflow::ui;
use comfy_bisect_core::workflow::validate::{validate, Problem, ProblemKind};
use comfy_bisect_core::workflow::Workflow;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn templates() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("tests/corpus/templates")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn value_problem(kind: ProblemKind) -> bool {
    matches!(
        kind,
        ProblemKind::InvalidInputType
            | ProblemKind::ValueSmallerThanMin
            | ProblemKind::ValueBiggerThanMax
            | ProblemKind::ValueNotInList
    )
}

/// A combo choice newer than the definitions (a string where the definition lists only
/// strings, e.g. CLIPLoader `type: "flux2"` on an older server): version drift, not a value
/// that landed on the wrong widget.
fn newer_choice(defs: &NodeDefs, p: &Problem) -> bool {
    if p.kind != ProblemKind::ValueNotInList || !p.value.as_ref().is_some_and(Value::is_string) {
        return false;
    }
    let Some(input) = p
        .class_type
        .as_deref()
        .and_then(|c| defs.get(c))
        .and_then(|d| d.input(p.input.as_deref().unwrap_or("")))
    else {
        return false;
    };
    match &input.kind {
        InputKind::Combo { options, .. } => options.iter().all(Value::is_string),
        _ => false,
    }
}

fn key(p: &Problem) -> (String, String, String) {
    (
        p.node.clone().unwrap_or_default(),
        p.input.clone().unwrap_or_default(),
        format!("{:?}", p.kind),
    )
}

/// Converts every template with `defs`; returns (converted, problems as text). A problem the
/// real frontend's own conversion of the template (in one of `oracle_dirs`, validated with the
/// same definitions) has too is the frontend's behaviour, reproduced on purpose, and is
/// printed, not counted.
fn check(defs: &NodeDefs, oracle_dirs: &[&str]) -> (usize, Vec<String>) {
    let mut converted = 0;
    let mut bad = Vec::new();
    for path in templates() {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Ok(c) = ui::convert(&doc, defs) else {
            continue; // unknown node types for these definitions: nothing to validate
        };
        converted += 1;
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let mut frontend: Vec<(String, String, String)> = Vec::new();
        for dir in oracle_dirs {
            let oracle = Path::new("tests/corpus")
                .join(dir)
                .join(path.file_name().unwrap());
            if let Ok(text) = std::fs::read_to_string(&oracle) {
                let w = Workflow::from_json_str(&text, "oracle.json").unwrap();
                frontend.extend(validate(&w, defs).problems.iter().map(key));
            }
        }
        for p in validate(&c.workflow, defs).problems {
            if !value_problem(p.kind) || newer_choice(defs, &p) {
                continue;
            }
            let line = format!(
                "{name}: node {} input {}: {}",
                p.node.as_deref().unwrap_or("?"),
                p.input.as_deref().unwrap_or("?"),
                p.message
            );
            if frontend.contains(&key(&p)) {
                println!("as the frontend sends it: {line}");
            } else {
                bad.push(line);
            }
        }
    }
    (converted, bad)
}

#[test]
fn converted_templates_have_no_value_problems_with_newer_definitions() {
    let defs =
        NodeDefs::load_file(Path::new("tests/fixtures/comfyui-newer/object_info.json")).unwrap();
    let (converted, bad) = check(&defs, &["templates-api-newer"]);
    assert!(converted >= 191, "only {converted} templates converted");
    assert!(
        bad.is_empty(),
        "{} value problem(s):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn converted_templates_have_no_value_problems_with_0_3_64_definitions() {
    let defs = NodeDefs::load_file(Path::new(
        "tests/fixtures/comfyui/GET__object_info.final.json",
    ))
    .unwrap();
    // comfy-bisect follows frontend 1.58.1 where 1.27.10 differs (docs/ui-format.md), so the
    // 1.58.1 conversion counts as the frontend's too.
    let (converted, bad) = check(&defs, &["templates-api", "templates-api-newer"]);
    assert!(converted >= 47, "only {converted} templates converted");
    assert!(
        bad.is_empty(),
        "{} value problem(s):\n{}",
        bad.len(),
        bad.join("\n")
    );
}
