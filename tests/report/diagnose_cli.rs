//! `comfy-bisect diagnose` as a user runs it: on a file, on standard input, with `--json`, and
//! the exit-2 cases for empty, unrecognisable and unreadable input.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const HISTORY_OOM: &str = "tests/fixtures/comfyui/history_execution_error_oom_core.json";

const CONSOLE_LOG: &str = "got prompt
Requested to load SDXL
loaded completely 9000 4897 True
 35%|███▌      | 7/20 [00:10<00:19,  1.47s/it]
!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 300.00 MiB is free. Of the allocated memory 6.50 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.
Traceback (most recent call last):
  File \"/c/execution.py\", line 1, in execute
    run()
  File \"/c/comfy/k_diffusion/sampling.py\", line 2, in sample_euler
    step()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 300.00 MiB is free. Of the allocated memory 6.50 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.

Prompt executed in 15.32 seconds
";

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run comfy-bisect");
    {
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn human_output_on_a_history_file() {
    let o = run(&["diagnose", HISTORY_OOM], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let kind_at = out.find("kind:        host_ram").expect(&out);
    let stage_at = out.find("stage:       postprocess").expect(&out);
    let next_at = out.find("next check:").expect(&out);
    let cand_at = out.find("unproven candidates:").expect(&out);
    assert!(
        kind_at < stage_at && stage_at < next_at && next_at < cand_at,
        "{out}"
    );
    assert!(out.contains("node:        2 (ImageScale)"), "{out}");
    assert!(
        out.contains("requested_mib              12288.00 MiB"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("root cause:  unknown"), "{out}");
}

#[test]
fn json_contract_on_stdin() {
    let o = run(&["diagnose", "-", "--json"], Some(CONSOLE_LOG));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    for key in [
        "kind",
        "stage",
        "stage_evidence",
        "node_type",
        "node_id",
        "numbers",
        "numbers_consistent",
        "next_check",
        "candidates",
        "root_cause",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    for key in [
        "requested_mib",
        "gpu_index",
        "total_mib",
        "free_mib",
        "process_in_use_mib",
        "allocated_mib",
        "reserved_unallocated_mib",
        "device_limit_mib",
    ] {
        assert!(v["numbers"].get(key).is_some(), "missing numbers.{key}");
    }
    assert_eq!(v["kind"], "cuda_oom");
    assert_eq!(v["stage"], "sample_middle");
    assert_eq!(v["numbers"]["requested_mib"], 1024.0);
    assert_eq!(v["numbers"]["gpu_index"], 0);
    assert_eq!(v["numbers"]["total_mib"], 8192.0);
    assert_eq!(v["numbers"]["free_mib"], 300.0);
    assert_eq!(v["numbers"]["allocated_mib"], 6656.0);
    assert_eq!(v["numbers"]["reserved_unallocated_mib"], 100.0);
    assert_eq!(v["numbers"]["process_in_use_mib"], Value::Null);
    assert_eq!(v["numbers_consistent"], true);
    assert_eq!(v["root_cause"], "unknown");
    assert!(v["stage_evidence"].as_str().unwrap().contains("7/20"));
    assert!(!v["next_check"].as_array().unwrap().is_empty());
    assert!(!v["candidates"].as_array().unwrap().is_empty());
}

#[test]
fn stdin_without_a_file_argument() {
    let o = run(&["diagnose"], Some("RuntimeError: MPS backend out of memory (MPS allocated: 5.56 GB, other allocations: 1.10 GB, max allowed: 6.80 GB). Tried to allocate 768.00 MB on private pool."));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("kind:        mps_oom"));
}

#[test]
fn empty_input_exits_1_and_says_what_it_expected() {
    let o = run(&["diagnose", "-"], Some("  \n\n"));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("empty"), "{err}");
    assert!(
        err.contains("console log") && err.contains("execution_error"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn unrecognisable_input_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "my workflow is slow, any idea?\nthanks\n").unwrap();
    let o = run(&["diagnose", path.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("notes.txt"), "{err}");
    assert!(err.contains("expected"), "{err}");
}

#[test]
fn unreadable_file_exits_2_with_its_name() {
    let o = run(&["diagnose", "/nonexistent/comfy.log"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent/comfy.log"),
        "{}",
        stderr(&o)
    );
}

/// `--json` prints JSON whatever the input: no failure in it gives kind `unknown`, the reason, and
/// exit code 1; every contract key is still there.
#[test]
fn json_is_printed_even_when_there_is_no_failure() {
    let inputs = [
        "  \n\n",
        "my workflow is slow, any idea?\nthanks\n",
        "got prompt\n100%|██████████| 20/20 [00:05<00:00,  3.9it/s]\nPrompt executed in 6.01 seconds\n",
        "{\"type\": \"status\", \"data\": {}}",
    ];
    for input in inputs {
        let o = run(&["diagnose", "-", "--json"], Some(input));
        assert_eq!(o.status.code(), Some(1), "{input:?}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o))
            .unwrap_or_else(|e| panic!("{input:?}: no JSON on stdout ({e}): {}", stdout(&o)));
        assert_eq!(v["kind"], "unknown", "{input:?}");
        assert_eq!(v["stage"], "unknown", "{input:?}");
        assert_eq!(v["stage_confidence"], "unknown", "{input:?}");
        assert_eq!(v["root_cause"], "unknown", "{input:?}");
        let why = v["kind_evidence"].as_str().unwrap();
        assert!(why.starts_with("No failure was found"), "{input:?}: {why}");
        assert!(
            why.len() > "No failure was found in the input: ".len() + 10,
            "{why}"
        );
        for key in [
            "stage_evidence",
            "numbers",
            "next_check",
            "candidates",
            "stage_candidates",
        ] {
            assert!(v.get(key).is_some(), "{input:?}: {key} missing");
        }
    }
    // An unreadable file is still exit 2, and still JSON.
    let o = run(&["diagnose", "/nonexistent/comfy.log", "--json"], None);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    assert_eq!(v["kind"], "unknown");
    assert!(v["kind_evidence"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/comfy.log"));
}

/// The human output and the JSON both say how sure the stage is.
#[test]
fn stage_confidence_is_shown() {
    let o = run(&["diagnose", "-"], Some(CONSOLE_LOG));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("  confidence: certain"),
        "{}",
        stdout(&o)
    );
    let o = run(&["diagnose", "-", "--json"], Some(CONSOLE_LOG));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["stage"], "sample_middle");
    assert_eq!(v["stage_confidence"], "certain");
}

/// The failure shapes of ComfyUI ≥ 0.15 (tests/fixtures/oom-2026, written from quoted formats).
fn diagnose_json(file: &str) -> Value {
    let path = format!("tests/fixtures/oom-2026/{file}");
    let o = run(&["diagnose", "--json", &path], None);
    assert_eq!(o.status.code(), Some(0), "{file}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("JSON")
}

#[test]
fn allocated_above_the_device_limit_keeps_its_numbers() {
    let v = diagnose_json("allocation-exceeds-device-limit.log");
    assert_eq!(v["kind"], "cuda_oom");
    assert_eq!(v["numbers_consistent"], true, "{}", v["inconsistencies"]);
    assert_eq!(v["numbers"]["allocated_mib"], 22968.32);
    assert_eq!(v["numbers"]["requested_mib"], 4167.68);
    assert_eq!(v["numbers"]["device_limit_mib"], 16384.0);
    assert_eq!(v["numbers"]["free_mib"], 0.0);
    assert_eq!(v["stage"], "sample_first");
}

#[test]
fn accelerator_error_is_a_cuda_oom() {
    let v = diagnose_json("accelerator-error.log");
    assert_eq!(v["kind"], "cuda_oom");
    assert_eq!(v["exception_type"], "torch.AcceleratorError");
    assert_eq!(v["stage"], "sample_middle");
}

#[test]
fn aimdo_errors_are_their_own_kind() {
    for file in ["aimdo-fault-failed.log", "aimdo-read-file-slice.log"] {
        let v = diagnose_json(file);
        assert_eq!(v["kind"], "aimdo", "{file}: {v}");
        assert!(
            v["next_check"][0]
                .as_str()
                .unwrap()
                .contains("--disable-pinned-memory"),
            "{file}: {v}"
        );
    }
}

/// A failed job's body from `GET /api/jobs/{id}` of a real ComfyUI 0.8.0 is diagnosed like its
/// execution_error (the planted decode OOM of the capture).
#[test]
fn a_jobs_api_body_is_diagnosed() {
    let capture: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/comfyui-0.8.0/realrun_api_jobs_id_failed.json")
            .unwrap(),
    )
    .unwrap();
    let body = capture["body"].to_string();
    let o = run(&["diagnose", "-", "--json"], Some(&body));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "cuda_oom", "{v}");
    assert_eq!(v["stage"], "decode", "{v}");
}

/// A failure inside a subgraph (the node's prompt id is hierarchical, `140:2`) is named with its
/// own id and the subgraph instance it sits in, not as an unknown node.
#[test]
fn a_node_inside_a_subgraph_is_named_with_its_instance() {
    let text = std::fs::read_to_string(HISTORY_OOM)
        .unwrap()
        .replace("\"node_id\": \"2\"", "\"node_id\": \"140:2\"");
    assert!(text.contains("140:2"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.json");
    std::fs::write(&path, text).unwrap();
    let o = run(&["diagnose", path.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("node:        140:2 (ImageScale #2 in subgraph #140)"),
        "{out}"
    );
}
