//! `comfy-bisect simulate` as a user runs it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
}

#[test]
fn bad_arguments_exit_2_with_a_clear_message() {
    for (args, needle) in [
        (vec!["--vram", "512MiB"], "at least 1GiB"),
        (vec!["--vram", "lots"], "--vram"),
        (vec!["--faults", "meteor"], "unknown fault 'meteor'"),
        (vec!["--allocator", "magic"], "native or cudaMallocAsync"),
    ] {
        let out = bin()
            .arg("simulate")
            .args(["--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_until_ctrl_c() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = bin()
        .args(["simulate", "--port", &port.to_string(), "--vram", "12GiB"])
        .args([
            "--allocator",
            "cudaMallocAsync",
            "--faults",
            "slow-history=100",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/api/system_stats");
    let client = reqwest::Client::new();
    let started = Instant::now();
    let stats: serde_json::Value = loop {
        if let Ok(r) = client.get(&url).send().await {
            break r.json().await.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "simulator did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let dev = &stats["devices"][0];
    assert_eq!(dev["vram_total"], serde_json::json!(12u64 << 30));
    assert_eq!(dev["name"], "cuda:0 Simulated GPU : cudaMallocAsync");
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no exit after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains(&format!("http://127.0.0.1:{port}")), "{err}");
}
