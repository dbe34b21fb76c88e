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
