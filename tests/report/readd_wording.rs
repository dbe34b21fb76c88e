//! The report's "What changed" cell of a re-add step says what comes back ("LoraLoader #10
//! re-added", "EasyCache #a, #b re-added"), not the bypass that the step before it made: on the
//! example workflows of `workflows/`, through the ladder and through `demo` end to end.

use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::ladder::{describe_changes, plan, Increment, Plan, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::load_api_file;
use std::path::Path;
use std::process::Command;

fn planned(file: &str) -> Plan {
    let defs = NodeDefs::load_files(&[
        "tests/fixtures/comfyui-newer/object_info.json",
        "tests/fixtures/custom-nodes/object_info.custom.json",
    ])
    .expect("fixtures load");
    let target = load_api_file(Path::new(file)).expect("the example loads");
    plan(&target, &defs, &Catalog::builtin(), &PlanOptions::default()).expect("a plan")
}

fn step_text(p: &Plan, inc: Increment) -> Vec<String> {
    let step = p
        .steps
        .iter()
        .find(|s| s.increment == inc)
        .unwrap_or_else(|| panic!("no {inc} step"));
    describe_changes(&step.changes, step.index > 0)
}

#[test]
fn the_lora_and_upscale_steps_of_the_sd15_example_say_what_comes_back() {
    let p = planned("workflows/sd15_txt2img_lora_upscale.json");
    assert_eq!(step_text(&p, Increment::Lora), ["LoraLoader #10 re-added"]);
    let post = step_text(&p, Increment::Postprocess);
    assert_eq!(
        post,
        [
            "ImageUpscaleWithModel #12 re-added",
            "UpscaleModelLoader #11 re-added"
        ]
    );
    // Step 0 says what the minimal variant leaves out.
    let minimal = describe_changes(&p.steps[0].changes, false);
    assert!(
        minimal.contains(&"bypass LoraLoader #10".to_string()),
        "{minimal:?}"
    );
}

#[test]
fn two_nodes_of_one_class_come_back_on_one_line() {
    let p = planned("workflows/wan22_t2v_experts_lora_cache_rife.json");
    let cache = step_text(&p, Increment::Cache);
    let easy: Vec<&String> = cache
        .iter()
        .filter(|l| l.starts_with("EasyCache"))
        .collect();
    assert_eq!(easy.len(), 1, "{cache:?}");
    let ids: Vec<&str> = easy[0]
        .trim_start_matches("EasyCache ")
        .trim_end_matches(" re-added")
        .split(", ")
        .collect();
    assert_eq!(ids.len(), 2, "{cache:?}");
    assert!(ids.iter().all(|id| id.starts_with('#')), "{cache:?}");
    assert!(cache.iter().all(|l| !l.starts_with("bypass")), "{cache:?}");
}

#[test]
fn the_report_of_a_demo_session_says_what_each_step_re_adds() {
    let home = tempfile::tempdir().unwrap();
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows/sd15_txt2img_lora_upscale.json");
    let out = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["demo", "--quiet", "--time-scale", "0", "--vram", "6GiB"])
        .arg(&example)
        .current_dir(home.path())
        .env_remove("COMFY_BISECT_SERVER")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let session = std::fs::read_dir(home.path().join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().join("session.json").is_file())
        .expect("a session");
    let report = std::fs::read_to_string(session.path().join("report.md")).unwrap();
    // The Ladder table (the bug-form block above it has a five-column one).
    let ladder = &report[report.find("## Ladder").expect("a Ladder section")..];
    let row = |increment: &str| {
        ladder
            .lines()
            .find(|l| l.starts_with('|') && l.split('|').nth(2).map(str::trim) == Some(increment))
            .unwrap_or_else(|| panic!("no {increment} row: {report}"))
            .to_string()
    };
    assert!(
        row("lora").contains("| LoraLoader `#10` re-added |"),
        "{}",
        row("lora")
    );
    assert!(
        row("postprocess").contains(
            "| ImageUpscaleWithModel `#12` re-added<br>UpscaleModelLoader `#11` re-added |"
        ),
        "{}",
        row("postprocess")
    );
    // Step 0 counts what the minimal variant leaves out (the steps below say each part they
    // bring back); report.json lists the edits.
    assert!(
        row("minimal").contains("| the full workflow less 5 edits, which the steps below undo"),
        "{}",
        row("minimal")
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(session.path().join("report.json")).unwrap())
            .unwrap();
    let step0 = &json["workflows"][0]["ladder"][0]["changes"];
    assert!(
        step0
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "bypass LoraLoader #10"),
        "{step0}"
    );
}
