//! `comfy-bisect report SESSION --bundle out.zip` end to end: the zip holds the report and the
//! boundary runs' files, redacted — a password in the server URL, credential headers in the
//! console and the run record, home paths, host names and API keys do not reach it.

use crate::report_support::{scenario, unzip, SESSION_ID};
use std::process::Command;

const PLANTED: &[&str] = &[
    "hunter2",
    "aHVudGVyMg==",
    "planted-key-123",
    "planted-cookie-456",
    "alice",
    "sk-test-not-a-real-key",
    "sk-live-abcdefghijklmnopqrstuvwxyz",
    "gpu-box",
];

fn session(root: &std::path::Path) -> std::path::PathBuf {
    let mut f = scenario("first-failure");
    let server = "http://bob:hunter2@gpu-box.lan:8188";
    f.session.server = server.into();
    let failing = f.session.workflows[0].runs[5].run_id.clone();
    for (entry, file) in &mut f.records {
        let Some(file) = file else { continue };
        file.record.server = server.into();
        if entry.run_id == failing {
            file.record.server_log.push_str(
                "2026-11-29T01:00:13.000000 proxy: Authorization: Basic aHVudGVyMg== X-API-Key: planted-key-123\n",
            );
            file.record
                .warnings
                .push("the proxy answered 401 for Cookie: session=planted-cookie-456".into());
        }
    }
    f.write(root)
}

#[test]
fn the_bundle_holds_the_report_and_the_boundary_runs_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    session(tmp.path());
    let out = tmp.path().join("issue.zip");
    let run = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["report", "20261129-01", "--runs-dir"])
        .arg(tmp.path().join("runs"))
        .arg("--bundle")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.stdout.is_empty(), "the bundle is written, not printed");
    let entries = unzip(&out);
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    let pass = "last-passing/03-steps-5e550004-0000-4000-8000-000000000003";
    let fail = "first-failing/04-LoRA-5e550005-0000-4000-8000-000000000004";
    assert_eq!(
        names,
        vec![
            "report.md".to_string(),
            "report.json".to_string(),
            format!("{pass}/workflow.json"),
            format!("{pass}/workflow.ui.json"),
            format!("{pass}/run.json"),
            format!("{pass}/server.log"),
            format!("{fail}/workflow.json"),
            format!("{fail}/workflow.ui.json"),
            format!("{fail}/run.json"),
            format!("{fail}/server.log"),
        ]
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("(10 files)"), "{stderr}");
    for (name, text) in &entries {
        for secret in PLANTED {
            assert!(!text.contains(secret), "{secret} is in {name}");
        }
        if name.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(text)
                .unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
        }
    }
    let get = |n: &str| &entries.iter().find(|(name, _)| name == n).unwrap().1;
    assert!(get("report.md").starts_with("# comfy-bisect report\n\n**Verdict:** First failure"));
    let log = get(&format!("{fail}/server.log"));
    assert!(log.contains("Got an OOM, unloading all loaded models."));
    assert!(log.contains("Authorization: <secret>"), "{log}");
    assert!(log.contains("/home/<user>/ComfyUI/execution.py"));
    let record: serde_json::Value = serde_json::from_str(get(&format!("{fail}/run.json"))).unwrap();
    assert_eq!(
        record["record"]["server"],
        "http://<user>:<secret>@<host>:8188"
    );
    let workflow: serde_json::Value =
        serde_json::from_str(get(&format!("{fail}/workflow.json"))).unwrap();
    assert_eq!(workflow["30"]["inputs"]["api_key"], "<secret>");
    assert_eq!(workflow["3"]["class_type"], "KSampler");
    // The files in the session folder are untouched.
    let original = std::fs::read_to_string(
        tmp.path()
            .join("runs")
            .join(SESSION_ID)
            .join("04-LoRA-5e550005-0000-4000-8000-000000000004/server.log"),
    )
    .unwrap();
    assert!(original.contains("aHVudGVyMg=="));
}

#[test]
fn no_redact_keeps_everything_and_a_bad_target_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = session(tmp.path());
    let out = tmp.path().join("private.zip");
    let run = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .arg("report")
        .arg(&dir)
        .args(["--no-redact", "--bundle"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let all: String = unzip(&out).into_iter().map(|(_, t)| t).collect();
    assert!(all.contains("aHVudGVyMg==") && all.contains("/home/alice/"));

    // A file stands where the zip's folder should be.
    std::fs::write(tmp.path().join("a-file"), "x").unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .arg("report")
        .arg(&dir)
        .arg("--bundle")
        .arg(tmp.path().join("a-file/out.zip"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("cannot write the bundle"));

    // One bundle is one session.
    let run = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .arg("report")
        .arg(&dir)
        .arg(&dir)
        .arg("--bundle")
        .arg(tmp.path().join("two.zip"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("--bundle packs one session; 2 were given")
    );
    assert!(!tmp.path().join("two.zip").exists());
}

#[test]
fn a_bundle_pointed_into_the_session_folder_is_refused_and_the_journal_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = session(tmp.path());
    let journal = dir.join("session.json");
    let before = std::fs::read(&journal).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["report", SESSION_ID, "--runs-dir"])
        .arg(tmp.path().join("runs"))
        .arg("--bundle")
        .arg(&journal)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("inside the session folder"), "{stderr}");
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        before,
        "the journal is unchanged"
    );
}
