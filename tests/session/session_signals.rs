//! Process-level (issue #29): SIGTERM and SIGHUP — what systemd, Docker, Kubernetes and Slurm
//! send, and what a closed terminal sends — stop a running `bisect` like Ctrl-C: our prompt is
//! interrupted on the server, the run and the session are recorded as interrupted, the exit
//! status is 130 and the exact `resume` command is printed.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{Outcome, RunStatus, SessionState, StopReason};
use std::io::Read;
use std::process::{Command, Stdio};

/// Starts `bisect` of the Wan example on a slow simulator, waits until a run is in flight,
/// sends `signal` and checks what the tool recorded, printed and exited with.
#[cfg(unix)]
fn stop_with(signal: libc::c_int) {
    let sim = Sim::with_vram_mib(57344, 0.02);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "wan",
        &example("wan22_t2v_experts_lora_cache_rife", &[]),
    );
    let runs = tmp.path().join("runs dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "--server",
            &sim.url(),
            "bisect",
            "-q",
            "--search-steps",
            "full",
        ])
        .arg("--runs-dir")
        .arg(&runs)
        .arg(&wf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The journal names the run before the prompt is submitted (write-ahead); a signal in that
    // gap rightly never reaches the server. Wait until the server runs the prompt the journal
    // names, so the interrupt is the server's to record.
    let flight = loop {
        let flight = wait_for_journal(&mut child, &runs, |s| {
            s.in_flight.as_ref().map(|f| f.run_id.clone())
        });
        let queue = get(&sim.url(), "/queue");
        let body = queue.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let queue: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let running = queue["queue_running"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if running.iter().any(|item| item[1] == flight.as_str()) {
            break flight;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // SAFETY: kill(2) on the child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let status = child.wait().unwrap();
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let shown = format!("{stdout}\n{stderr}");
    assert_eq!(status.code(), Some(130), "{status}\n{shown}");

    let (dir, session) = only_session(&runs);
    assert!(session.in_flight.is_none(), "the run was left in flight");
    match &session.state {
        SessionState::Stopped { reason, .. } => assert_eq!(*reason, StopReason::Interrupted),
        other => panic!("{other:?}\n{shown}"),
    }
    let run = session.workflows[0]
        .runs
        .iter()
        .find(|r| r.run_id == flight)
        .expect("the interrupted run is in the journal");
    assert_eq!(run.status, RunStatus::Done);
    assert_eq!(run.outcome, Some(Outcome::Interrupted));
    // Interrupted on the server: the simulator's history says so.
    let history = get(&sim.url(), &format!("/history/{flight}"));
    assert!(history.contains("execution_interrupted"), "{history}");

    let resume = format!(
        "exit status 130; to continue: comfy-bisect resume {} --runs-dir '{}'",
        session.session_id,
        runs.display()
    );
    assert!(stderr.contains(&resume), "{resume}\n{shown}");
    assert!(dir.starts_with(&runs));
}

/// The body of `GET path` on `base` (plain HTTP/1.1, `Connection: close`).
fn get(base: &str, path: &str) -> String {
    use std::io::Write;
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let mut sock = std::net::TcpStream::connect(host).unwrap();
    write!(
        sock,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    sock.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
#[cfg(unix)]
fn sigterm_interrupts_the_run_records_it_and_prints_the_resume_command() {
    stop_with(libc::SIGTERM);
}

#[test]
#[cfg(unix)]
fn sighup_is_handled_like_sigterm() {
    stop_with(libc::SIGHUP);
}
