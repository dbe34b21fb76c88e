//! Finding the server with no `--server` and no `COMFY_BISECT_SERVER` (issue #37 item 5): the
//! first of ComfyUI's 8188 and ComfyUI Desktop's 8000 that answers as ComfyUI. The candidates are
//! replaced here through the test hook `COMFY_BISECT_DEFAULT_SERVERS` (a test cannot count on
//! ports 8188 and 8000 being free or its own): a free port stands for 8188, the simulator for
//! Desktop's 8000.

use crate::client_cli::{sd15, write_workflow};
use comfy_bisect_sim::{start, SimConfig};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `comfy-bisect ARGS` with the default servers replaced by `candidates` and no server named.
async fn run(args: Vec<String>, candidates: String) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(&args)
            .env_remove("COMFY_BISECT_SERVER")
            .env_remove("COMFY_BISECT_HEADERS")
            .env("COMFY_BISECT_DEFAULT_SERVERS", candidates)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_finds_comfyui_on_the_second_default_port() {
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "wf.json", &sd15(3));
    let nothing = format!("http://127.0.0.1:{}", free_port());
    let out = run(
        vec!["submit".into(), wf.display().to_string()],
        format!("{nothing},{}", sim.base_url()),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("outcome: passed"), "{stdout}");
    // It says which one answered, and which did not.
    assert!(
        stderr.contains(&format!("ComfyUI answered at {}", sim.base_url()))
            && stderr.contains(&format!("not at {nothing}")),
        "{stderr}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_default_port_is_used_quietly_when_it_answers() {
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "wf.json", &sd15(3));
    let out = run(
        vec!["submit".into(), wf.display().to_string()],
        format!("{},http://127.0.0.1:{}", sim.base_url(), free_port()),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("answered at"), "{stderr}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_answer_the_error_names_both_ports() {
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "wf.json", &sd15(3));
    let out = run(
        vec!["submit".into(), wf.display().to_string()],
        format!(
            "http://127.0.0.1:{},http://127.0.0.1:{}",
            free_port(),
            free_port()
        ),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Unreachable (exit 3), with the two places the tool looks when nothing is named.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("127.0.0.1:8188") && stderr.contains("127.0.0.1:8000"),
        "{stderr}"
    );
}

/// A loopback listener that counts the connections made to it (issue #38 item 8: a command
/// given `--object-info` must not look for a server at all).
fn counting_listener() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (url, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodedefs_saved_from_a_server_let_plan_run_with_no_server() {
    use std::sync::atomic::Ordering;
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = write_workflow(&dir, "wf.json", &sd15(3));
    let defs = dir.path().join("nodedefs.json");
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let out = run(
        args(&[
            "nodedefs",
            "save",
            defs.to_str().unwrap(),
            "--server",
            &sim.base_url(),
        ]),
        String::new(),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("node classes from"), "{stdout}");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&defs).unwrap()).unwrap();
    assert!(
        saved.get("KSampler").is_some(),
        "the server's own answer is saved"
    );
    // What the server plans with it, for comparison.
    let online = run(
        args(&[
            "plan",
            wf.to_str().unwrap(),
            "--json",
            "--server",
            &sim.base_url(),
        ]),
        String::new(),
    )
    .await;
    assert_eq!(online.status.code(), Some(0));
    sim.shutdown().await;

    // No server now; the default candidates count every connection made to them.
    let (candidate, connections) = counting_listener();
    let offline = run(
        args(&[
            "plan",
            wf.to_str().unwrap(),
            "--json",
            "--object-info",
            defs.to_str().unwrap(),
        ]),
        candidate.clone(),
    )
    .await;
    assert_eq!(
        offline.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&offline.stderr)
    );
    assert_eq!(
        offline.stdout, online.stdout,
        "the same plan offline as online"
    );
    for command in ["validate", "hash"] {
        let out = run(
            args(&[
                command,
                wf.to_str().unwrap(),
                "--object-info",
                defs.to_str().unwrap(),
            ]),
            candidate.clone(),
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{command}: {out:?}");
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "with --object-info no server is looked for"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodedefs_save_keeps_an_existing_file_without_force() {
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("nodedefs.json");
    std::fs::write(&defs, b"mine").unwrap();
    let save = |force: bool| {
        let mut v = vec![
            "nodedefs".to_string(),
            "save".into(),
            defs.display().to_string(),
            "--server".into(),
            sim.base_url(),
        ];
        if force {
            v.push("--force".into());
        }
        run(v, String::new())
    };
    let out = save(false).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--force"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&defs).unwrap(), b"mine");
    let out = save(true).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_ne!(std::fs::read(&defs).unwrap(), b"mine");
    sim.shutdown().await;
}
