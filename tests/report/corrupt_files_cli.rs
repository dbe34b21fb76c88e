//! Issue #29 (item 11) as a user meets it: a session whose files were damaged (a corrupt
//! `session.json`, a corrupt `run.json`, a run folder a `kill -9` left with only its
//! workflow) is listed and reported with the file and what to do, never hidden.

use crate::report_support::scenario;
use comfy_bisect_core::session::journal::RUN_RECORD_FILE;
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
    assert!(
        all.contains(journal.to_str().unwrap()),
        "the file is named: {all}"
    );
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
        format!(
            "{}{}{RUN_RECORD_FILE}",
            entry.dir,
            std::path::MAIN_SEPARATOR
        ),
    ] {
        assert!(md.contains(&said), "report.md does not say {said:?}:\n{md}");
    }
}

#[test]
fn an_orphan_run_folder_is_listed_and_resume_removes_it_only_when_it_holds_just_its_workflow() {
    use comfy_bisect_core::app::{resume, DeadlineChange, ResumeOptions, Resumed};
    use comfy_bisect_core::session::journal::{
        write_json_atomic, SessionFile, SessionState, StopReason, RUN_WORKFLOW_FILE,
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario("first-failure").write(tmp.path());
    let runs = dir.parent().unwrap().to_path_buf();
    // The session was stopped (so resume has work left) ...
    let journal = dir.join("session.json");
    let mut session: SessionFile =
        serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    session.state = SessionState::Stopped {
        reason: StopReason::Interrupted,
        detail: "killed".into(),
    };
    for w in &mut session.workflows {
        w.verdict = None;
    }
    write_json_atomic(&journal, &session).unwrap();
    // ... and killed right after creating a run folder (only the variant in it), while another
    // folder the journal does not know holds a record.
    let orphan = dir.join("03-lora-0b1c2d3e-0000-4000-8000-000000000001");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join(RUN_WORKFLOW_FILE), "{}").unwrap();
    let kept = dir.join("03-lora-0b1c2d3e-0000-4000-8000-000000000002");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join(RUN_WORKFLOW_FILE), "{}").unwrap();
    std::fs::write(kept.join(RUN_RECORD_FILE), "{}").unwrap();
    let out = cli(&["runs", "--runs-dir", runs.to_str().unwrap()]);
    let all = text(&out);
    assert!(
        all.contains(&format!("orphan run folder {}", orphan.display()))
            && all.contains("`resume` removes it"),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "run folder {} is not in session.json",
            kept.display()
        )),
        "{all}"
    );
    let pending = match resume(ResumeOptions {
        runs_dir: runs.clone(),
        session: Some(session.session_id.clone()),
        deadline: DeadlineChange::Keep,
        wait_server: None,
        allow_shared_server: false,
        server: None,
        deadline_grace: None,
    }) {
        Ok(Resumed::Pending(p)) => p,
        Ok(Resumed::Finished(_)) => panic!("the stopped session has work left"),
        Err(e) => panic!("{}", e.message),
    };
    assert!(!orphan.exists(), "the unsubmitted orphan is removed");
    assert!(
        kept.join(RUN_RECORD_FILE).exists(),
        "a folder with a record is kept"
    );
    assert_eq!(pending.notes.len(), 2, "{:?}", pending.notes);
    assert!(pending.notes[0].starts_with("removed the orphan run folder"));
    // Nothing the journal knows was touched.
    for w in &pending.session.workflows {
        for r in &w.runs {
            assert!(dir.join(&r.dir).exists(), "{}", r.dir);
        }
    }
    // `resume --server` moves the session (a port that changed after a reboot): the journal
    // records the move, the report names it (issue #38).
    let before = pending.session.server.clone();
    let moved = match resume(ResumeOptions {
        runs_dir: runs.clone(),
        session: Some(session.session_id.clone()),
        deadline: DeadlineChange::Keep,
        wait_server: None,
        allow_shared_server: false,
        server: Some("http://127.0.0.1:8199/".into()),
        deadline_grace: None,
    }) {
        Ok(Resumed::Pending(p)) => p,
        Ok(Resumed::Finished(_)) => panic!("the stopped session has work left"),
        Err(e) => panic!("{}", e.message),
    };
    assert_eq!(moved.session.server, "http://127.0.0.1:8199");
    assert!(
        moved
            .notes
            .iter()
            .any(|n| n.contains("moves to http://127.0.0.1:8199")),
        "{:?}",
        moved.notes
    );
    let saved: SessionFile =
        serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    assert_eq!(saved.server_moves.len(), 1);
    assert_eq!(saved.server_moves[0].from, before);
    assert_eq!(saved.server_moves[0].to, "http://127.0.0.1:8199");
    let report = cli(&[
        "report",
        "--no-redact",
        "--runs-dir",
        runs.to_str().unwrap(),
    ]);
    assert!(
        text(&report).contains(&format!("moved from {before} to http://127.0.0.1:8199 at ")),
        "{}",
        text(&report)
    );
}
