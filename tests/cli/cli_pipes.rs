//! The read-only commands as a user pipes them (`show RUN | head -1`, `runs | head`): a reader
//! that goes away ends them quietly, and `report --json` is accepted like every other `--json`.
//! The sessions come from `demo` (the built-in simulator).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
}

/// A runs folder with the demo's two sessions, and one run id and one session id of it.
fn demo_runs(home: &Path) -> (PathBuf, String, String) {
    let out = bin()
        .args(["demo", "--quiet", "--time-scale", "0"])
        .current_dir(home)
        .env_remove("COMFY_BISECT_SERVER")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = home.join("runs");
    let index = std::fs::read_to_string(runs.join("index.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(index.lines().next().unwrap()).unwrap();
    (
        runs,
        first["run_id"].as_str().unwrap().to_string(),
        first["session_id"].as_str().unwrap().to_string(),
    )
}

/// Runs `args` with stdout a pipe whose reader has gone before the command writes: every
/// write meets a closed pipe. Returns the exit code and stderr.
fn with_closed_stdout(args: &[&str], runs: &Path) -> (Option<i32>, String) {
    let mut child = bin()
        .args(args)
        .arg("--runs-dir")
        .arg(runs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn read_only_commands_end_quietly_on_a_closed_pipe_and_report_takes_json() {
    let home = tempfile::tempdir().unwrap();
    let (runs, run_id, session_id) = demo_runs(home.path());
    for args in [
        vec!["runs"],
        vec!["runs", "--json"],
        vec!["show", run_id.as_str()],
        vec!["show", run_id.as_str(), "--json"],
        vec!["report", session_id.as_str()],
    ] {
        let (code, err) = with_closed_stdout(&args, &runs);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    }

    // `report SESSION --json` is the JSON report, as `--format json` prints it.
    let json = bin()
        .args(["report", &session_id, "--json", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(
        json.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let by_format = bin()
        .args(["report", &session_id, "--format", "json", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(json.stdout, by_format.stdout);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(value.is_object(), "{value}");

    // `show SESSION_ID` (a session where a run belongs) points to `report`.
    let show = bin()
        .args(["show", &session_id, "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(2));
    let err = String::from_utf8_lossy(&show.stderr);
    assert!(
        err.contains(&format!("`comfy-bisect report {session_id}`")),
        "{err}"
    );
}
