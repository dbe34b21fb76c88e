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

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `/system_stats` until the server answers (generous timeout).
async fn stats_of(port: u16) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/api/system_stats");
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Ok(r) = client.get(&url).send().await {
            return r.json().await.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "simulator did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for `child` to exit (generous timeout) and returns its status.
fn exit_of(child: &mut std::process::Child) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no exit after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A mitigation restarts the server with other flags: ComfyUI's flags go after simulate's own,
/// show verbatim in `system.argv`, and SIGTERM stops it with the port free for the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_flags_show_in_argv_and_sigterm_frees_the_port() {
    let port = free_port();
    let mut child = bin()
        .args(["simulate", "--port", &port.to_string(), "--profile", "2026"])
        .args([
            "--reserve-vram",
            "2",
            "--disable-dynamic-vram",
            "--cache-none",
        ])
        .env("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stats = stats_of(port).await;
    let argv: Vec<String> = serde_json::from_value(stats["system"]["argv"].clone()).unwrap();
    // Its own command line, as ComfyUI reports its own sys.argv (the tool matches the two).
    assert_eq!(argv[0], env!("CARGO_BIN_EXE_comfy-bisect"), "{argv:?}");
    assert_eq!(argv[1], "simulate", "{argv:?}");
    assert!(
        argv.ends_with(&[
            "--reserve-vram".into(),
            "2".into(),
            "--disable-dynamic-vram".into(),
            "--cache-none".into()
        ]),
        "{argv:?}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(exit_of(&mut child).code(), Some(0));
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
        "{err}"
    );
    // Restarted without the flags on the same port, as a control run's cleanup does.
    let mut again = bin()
        .args(["simulate", "--port", &port.to_string(), "--profile", "2026"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stats = stats_of(port).await;
    let argv = stats["system"]["argv"].to_string();
    assert!(!argv.contains("--reserve-vram"), "{argv}");
    Command::new("kill")
        .args(["-TERM", &again.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(exit_of(&mut again).code(), Some(0));
}

#[test]
fn unknown_comfyui_flags_are_refused_as_comfyui_would() {
    for (args, needle) in [
        (vec!["--warp-drive"], "unrecognized arguments: --warp-drive"),
        (vec!["--vram-headroom", "1"], "add --profile 2026"),
        (
            vec!["--reserve-vram", "lots"],
            "invalid float value: 'lots'",
        ),
        (
            vec!["--use-sage-attention", "--use-split-cross-attention"],
            "not allowed with argument --use-sage-attention",
        ),
        (
            vec!["--cache-none", "--vram", "8GiB"],
            "put simulate's own options",
        ),
    ] {
        let out = bin()
            .args(["simulate", "--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
