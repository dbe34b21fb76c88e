//! Issue #29 (part A) as a user meets it through the binary: logs that cannot print a
//! secret at any level, files only the user can read, `report --bundle` that cannot overwrite
//! the session it reads, and clear errors for careless input.

use comfy_bisect_sim::{start, SimConfig};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");

fn sd15(steps: u64) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "random_sd15.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a lighthouse"}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
        "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0],
            "latent_image": ["5", 0], "seed": 1, "steps": steps, "cfg": 7.0, "sampler_name": "euler",
            "scheduler": "normal", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "test"}}
    })
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the binary to its end (killing it after `limit`, which fails the test). Its output
/// goes to files, so a chatty run never blocks on a full pipe.
fn run_env(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("out"), logs.path().join("err"));
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("COMFY_BISECT_HEADERS")
        .env_remove("COMFY_BISECT_SERVER")
        .env_remove("COMFY_BISECT_LOG")
        .stdout(Stdio::from(std::fs::File::create(&out_path).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err_path).unwrap()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "comfy-bisect {args:?} did not exit within {limit:?}; stderr: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_logging_never_prints_credentials_or_header_values() {
    let sim = start(
        SimConfig::default().with_required_header("X-Proxy-Auth", "hdr-s3cret-value"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = write(&dir, "wf.json", &sd15(2).to_string());
    let wf = wf.to_str().unwrap().to_string();
    let server = format!("http://alice:pw-s3cret-value@{}", sim.addr());
    let outs = tokio::task::spawn_blocking(move || {
        let args = [
            "submit",
            &wf,
            "--server",
            &server,
            "--header",
            "X-Proxy-Auth: hdr-s3cret-value",
        ];
        let vvv = run_env(
            &[&args[..], &["-vvv"][..]].concat(),
            &[],
            Duration::from_secs(120),
        );
        let env = run_env(
            &args,
            &[("COMFY_BISECT_LOG", "trace,tungstenite=trace,hyper=trace")],
            Duration::from_secs(120),
        );
        (vvv, env)
    })
    .await
    .unwrap();
    // `alice:pw-s3cret-value` and the Basic header's base64 of it.
    let basic = "YWxpY2U6cHctczNjcmV0LXZhbHVl";
    for out in [outs.0, outs.1] {
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        // The network libraries still log at debug: the level really was raised.
        assert!(all.contains("DEBUG"), "{all}");
        for secret in ["s3cret", basic] {
            assert!(!all.contains(secret), "{secret} leaked: {all}");
        }
    }
    sim.shutdown().await;
}

/// Every file a session writes (journal, records, event streams, the run index, the console)
/// is readable by its owner only.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_of_a_session_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = write(&dir, "wf.json", &sd15(2).to_string());
    let runs = dir.path().join("runs");
    let (wf, runs_arg, url) = (
        wf.to_str().unwrap().to_string(),
        runs.to_str().unwrap().to_string(),
        sim.base_url(),
    );
    let out = tokio::task::spawn_blocking(move || {
        run_env(
            &[
                "bisect",
                &wf,
                "--server",
                &url,
                "--runs-dir",
                &runs_arg,
                "--quiet",
            ],
            &[],
            Duration::from_secs(120),
        )
    })
    .await
    .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 4 | 5)),
        "{}",
        text(&out)
    );
    let mut files = Vec::new();
    let mut stack = vec![runs.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "events.ndjson"), "{names:?}");
    for f in &files {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", f.display());
    }
    sim.shutdown().await;
}
