//! Issue #29 (item 11) as a user meets it: a session whose files were damaged (a corrupt
//! `session.json`, a corrupt `run.json`, a run folder a `kill -9` left with only its
//! workflow) is listed and reported with the file and what to do, never hidden.

mod report_support;

use comfy_bisect_core::session::journal::RUN_RECORD_FILE;
use report_support::scenario;
use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(args)
        .env_remove("COMFY_BISECT_SERVER")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn runs_lists_a_session_whose_journal_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario("first-failure").write(tmp.path());
    let runs = dir.parent().unwrap().to_str().unwrap().to_string();
    let journal = dir.join("session.json");
    let whole = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(&journal, &whole[..whole.len() / 2]).unwrap();
    let out = cli(&["runs", "--runs-dir", &runs]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("no sessions"), "{all}");
    assert!(all.contains("corrupt session journal"), "{all}");
    assert!(all.contains(journal.to_str().unwrap()), "the file is named: {all}");
    assert!(all.contains("restore session.json"), "how to fix it: {all}");
    let json = cli(&["runs", "--json", "--runs-dir", &runs]);
    let line: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&json.stdout).trim()).unwrap();
    assert_eq!(line["state"], "corrupt");
    assert_eq!(line["dir"], dir.to_str().unwrap());
}

#[test]
fn report_names_the_run_whose_record_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = scenario("first-failure");
    let dir = fixture.write(tmp.path());
    let (entry, _) = fixture
        .records
        .iter()
        .find(|(_, f)| f.is_some())
        .expect("a run with a record");
    let record = dir.join(&entry.dir).join(RUN_RECORD_FILE);
    std::fs::write(&record, "{\"run_id\": \"trunc").unwrap();
    let out = cli(&["report", dir.to_str().unwrap()]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let md = String::from_utf8_lossy(&out.stdout);
    for said in [
        "corrupt run record".to_string(),
        entry.run_id.clone(),
        format!("step {}", entry.step),
        format!("{}/{RUN_RECORD_FILE}", entry.dir),
    ] {
        assert!(md.contains(&said), "report.md does not say {said:?}:\n{md}");
    }
}
