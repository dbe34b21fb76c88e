//! `comfy-bisect plan` run the way a user runs it, on the custom-node fixtures.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const CORE_DEFS: &str = "tests/fixtures/comfyui/GET__object_info.final.json";
const CUSTOM_DEFS: &str = "tests/fixtures/custom-nodes/object_info.custom.json";
const WORKFLOWS: &str = "tests/fixtures/custom-nodes/workflows";

fn bisect(args: &[&str]) -> (u8, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(255) as u8,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn workflow(name: &str) -> String {
    format!("{WORKFLOWS}/{name}.json")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn plan_out_writes_plan_json_and_one_file_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan");
    let target = workflow("wan22_i2v_gguf_lightning_sage_teacache_rife");
    let (code, stdout, stderr) = bisect(&[
        "plan",
        &target,
        "--object-info",
        CORE_DEFS,
        "--object-info",
        CUSTOM_DEFS,
        "--min-resolution",
        "0",
        "--min-frames",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("minimal"), "{stdout}");
    assert!(stdout.contains("not separable"), "{stdout}");
    let plan = read_json(&out.join("plan.json"));
    let steps = plan["steps"].as_array().unwrap();
    let names: Vec<&str> = steps
        .iter()
        .map(|s| s["increment"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "minimal",
            "resolution",
            "frames",
            "models",
            "lora",
            "cache",
            "postprocess"
        ]
    );
    for s in steps {
        let file = out.join(s["file"].as_str().unwrap());
        assert!(file.exists(), "{}", file.display());
    }
    assert_eq!(steps[0]["file"], "00-minimal.json");
    assert_eq!(steps[6]["file"], "06-postprocess.json");
    // The last file is the target: same canonical hash.
    let (code, hash_out, _) = bisect(&["hash", out.join("06-postprocess.json").to_str().unwrap()]);
    assert_eq!(code, 0);
    let (_, target_hash, _) = bisect(&["hash", &target]);
    let first = |s: &str| s.split_whitespace().next().unwrap_or("").to_string();
    assert_eq!(first(&hash_out), first(&target_hash));
    assert_eq!(plan["target_sha256"], steps[6]["sha256"]);
    // The minimal variant: expected numbers of the fixture, memory savers kept.
    let minimal = read_json(&out.join("00-minimal.json"));
    assert_eq!(minimal["50"]["inputs"]["width"], 16);
    assert_eq!(minimal["50"]["inputs"]["length"], 1);
    assert_eq!(minimal["131"]["inputs"]["frame_rate"], 16);
    assert_eq!(minimal["92:58"]["inputs"]["noise_seed"], 264590);
    let mut ids: Vec<&str> = minimal
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    ids.sort();
    let mut expected = vec![
        "56", "55", "38", "6", "7", "39", "52", "50", "92:58", "8", "131", "111",
    ];
    expected.sort();
    assert_eq!(
        ids, expected,
        "SageAttention (111) is kept, everything else as expected"
    );
    // Every step validates apart from model files the fixture server lacks.
    for s in steps {
        let file = out.join(s["file"].as_str().unwrap());
        let (_, report, _) = bisect(&[
            "validate",
            "--json",
            "--object-info",
            CORE_DEFS,
            "--object-info",
            CUSTOM_DEFS,
            file.to_str().unwrap(),
        ]);
        let report: Value = serde_json::from_str(&report).unwrap();
        assert_eq!(report[0]["only_missing_files"], true, "{}", s["file"]);
    }
    let ns = plan["not_separable"].as_array().unwrap();
    assert!(ns.iter().any(
        |n| n["increment"] == "quantization" && n["reason"].as_str().unwrap().contains("gguf")
    ));
}

#[test]
fn plan_json_prints_the_contract_on_stdout() {
    let (code, stdout, stderr) = bisect(&[
        "plan",
        &workflow("hunyuanvideo_t2v_fbcache_compile_tiled"),
        "--object-info",
        CORE_DEFS,
        "--object-info",
        CUSTOM_DEFS,
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let steps = plan["steps"].as_array().unwrap();
    let names: Vec<&str> = steps
        .iter()
        .map(|s| s["increment"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["minimal", "resolution", "frames", "quantization", "cache"]
    );
    let quant = &steps[3]["changes"][0];
    assert_eq!(quant["node"], "12");
    assert_eq!(quant["class_type"], "UNETLoader");
    assert_eq!(quant["action"], "set");
    assert_eq!(quant["input"], "weight_dtype");
    assert_eq!(quant["from"], "default");
    assert_eq!(quant["to"], "fp8_e4m3fn_fast");
    let cache: Vec<&str> = steps[4]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(cache, ["bypass", "bypass"]);
    assert!(plan["kept"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["class_type"] == "VAEDecodeTiled"));
}

#[test]
fn already_minimal_workflow_has_a_single_step() {
    let (code, stdout, _) = bisect(&[
        "plan",
        &workflow("flux_gguf_already_minimal"),
        "--object-info",
        CORE_DEFS,
        "--object-info",
        CUSTOM_DEFS,
        "--min-resolution",
        "0",
    ]);
    assert_eq!(code, 0);
    assert!(stdout.contains("1 step(s)"), "{stdout}");
    assert!(stdout.contains("nothing to reduce"), "{stdout}");
}

#[test]
fn order_keep_and_catalog_options() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("roles.toml");
    // Declaring the upscaler as nothing special keeps it in every variant.
    std::fs::write(&catalog, "[classes]\n\"UltimateSDUpscale\" = []\n").unwrap();
    let (code, stdout, stderr) = bisect(&[
        "plan",
        &workflow("flux_dev_gguf_power_lora_usdu"),
        "--object-info",
        CORE_DEFS,
        "--object-info",
        CUSTOM_DEFS,
        "--json",
        "--order",
        "lora,batch",
        "--keep",
        "resolution",
        "--catalog",
        catalog.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["increment"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["minimal", "lora", "batch"]);
}

#[test]
fn bad_arguments_and_files_are_usage_errors() {
    let (code, _, stderr) = bisect(&[
        "plan",
        &workflow("flux_gguf_already_minimal"),
        "--object-info",
        CORE_DEFS,
        "--order",
        "resolution,colour",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("colour"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[classes]\nX = [\"not_a_role\"]\n").unwrap();
    let (code, _, stderr) = bisect(&[
        "plan",
        &workflow("flux_gguf_already_minimal"),
        "--object-info",
        CORE_DEFS,
        "--catalog",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("lora"),
        "{stderr}"
    );
    let (code, _, stderr) = bisect(&["plan", "does-not-exist.json", "--object-info", CORE_DEFS]);
    assert_eq!(code, 2);
    assert!(stderr.contains("does-not-exist.json"), "{stderr}");
}
