//! `comfy-bisect submit` as a user runs it: against the simulator, with Ctrl-C, and against a
//! server that is not there.

use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_sim::{start, SimConfig};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");

pub(crate) fn sd15(steps: u64) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "random_sd15.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a lighthouse"}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "blurry"}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
        "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0],
            "latent_image": ["5", 0], "seed": 1, "steps": steps, "cfg": 7.0, "sampler_name": "euler",
            "scheduler": "normal", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "test"}}
    })
}

pub(crate) fn write_workflow(dir: &tempfile::TempDir, name: &str, v: &Value) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    path
}

async fn wait_for_exit(
    child: &mut std::process::Child,
    limit: Duration,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("comfy-bisect did not exit within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_prints_the_outcome_and_exits_0_on_a_pass() {
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Also accepted: a POST /prompt body.
    let wf = write_workflow(&dir, "body.json", &json!({"prompt": sd15(3)}));
    let mut child = Command::new(BIN)
        .args([
            "submit",
            wf.to_str().unwrap(),
            "--server",
            &sim.base_url(),
            "--sample-ms",
            "50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_for_exit(&mut child, Duration::from_secs(60)).await;
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("outcome: passed"), "{stdout}");
    assert!(stdout.contains("peak memory"), "{stdout}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_json_on_oom_exits_1_with_the_execution_error() {
    let sim = start(
        SimConfig::default().with_vram_gib(2),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut v = sd15(3);
    v["5"]["inputs"] = json!({"width": 2048, "height": 2048, "batch_size": 8});
    let wf = write_workflow(&dir, "oom.json", &v);
    let out = tokio::task::spawn_blocking({
        let url = sim.base_url();
        move || {
            Command::new(BIN)
                .args(["submit", wf.to_str().unwrap(), "--server", &url, "--json"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["outcome"], "failed");
    assert_eq!(record["run_id"], record["prompt_id"]);
    assert_eq!(
        record["error"]["execution_error"]["exception_type"],
        "torch.OutOfMemoryError"
    );
    assert!(record["workflow_sha256"].as_str().unwrap().len() == 64);
    assert!(record.get("diagnosis").is_some());
    assert!(record["vram"]["interval_ms"] == 500);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_only_our_prompt_records_the_run_and_exits_130() {
    let sim = start(
        SimConfig::default().with_time_scale(0.5),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let client = Client::new(&sim.base_url(), ExtraHeaders::new()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "slow.json", &sd15(5000));
    let mut child = Command::new(BIN)
        .args([
            "submit",
            wf.to_str().unwrap(),
            "--server",
            &sim.base_url(),
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Wait until our prompt runs, then queue another client's prompt behind it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ours = loop {
        if let Ok(q) = client.queue().await {
            if let Some(id) = q.running_ids().first() {
                break id.to_string();
            }
        }
        assert!(Instant::now() < deadline, "the prompt never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let other_id = uuid::Uuid::new_v4().to_string();
    let answer = reqwest::Client::new()
        .post(format!("{}/prompt", sim.base_url()))
        .json(&json!({"prompt": sd15(2), "client_id": "someone-else", "prompt_id": other_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = wait_for_exit(&mut child, Duration::from_secs(30)).await;
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["prompt_id"], ours.as_str());
    assert_eq!(record["outcome"], "interrupted");
    assert_eq!(record["error"]["interrupted"]["by"], "user");

    // Only ours was interrupted: the other client's prompt still runs to success.
    let deadline = Instant::now() + Duration::from_secs(30);
    let other = loop {
        if let Some(h) = client.history(&other_id).await.unwrap() {
            break h;
        }
        assert!(Instant::now() < deadline, "the other prompt never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(other.status.status_str, "success");
    let ours_history = client
        .history(&ours)
        .await
        .unwrap()
        .expect("ours is in history");
    assert!(ours_history
        .status
        .messages
        .iter()
        .any(|(name, _)| name == "execution_interrupted"));
    sim.shutdown().await;
}

#[test]
fn unreachable_server_exits_3_and_says_what_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "wf.json", &sd15(2));
    let out = Command::new(BIN)
        .args([
            "submit",
            wf.to_str().unwrap(),
            "--server",
            "http://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("http://127.0.0.1:1"), "{stderr}");
    assert!(
        stderr.contains("--listen") && stderr.contains("--header"),
        "{stderr}"
    );
}

#[test]
fn unreadable_workflow_and_bad_arguments_exit_2() {
    let out = Command::new(BIN)
        .args([
            "submit",
            "/nonexistent/wf.json",
            "--server",
            "http://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "wf.json", &sd15(2));
    let out = Command::new(BIN)
        .args(["submit", wf.to_str().unwrap(), "--timeout", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("90s"));
    let out = Command::new(BIN)
        .args(["submit", wf.to_str().unwrap(), "--header", "no-colon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Name: value"));
}
