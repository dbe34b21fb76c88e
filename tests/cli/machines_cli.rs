//! Several runs folders read as one record ("two machines", one session each on its own
//! simulator), from the command line: `runs` lists them grouped by environment and prints one
//! JSON line per session, `show` and `report` find runs and sessions in any of them, and an id
//! found in two folders is reported, not merged.

use crate::session_support::*;
use serde_json::{json, Value};
use std::path::Path;

const SD15: &str = "sd15_txt2img_lora_upscale";

/// One "machine": a simulator with `vram_mib`, one bisect session into `<root>/<name>/runs`.
fn machine(root: &Path, name: &str, vram_mib: u64) -> String {
    let sim = Sim::with_vram_mib(vram_mib, 0.0);
    let wf = write_workflow(root, name, &example(SD15, &[("5", "batch_size", json!(1))]));
    let runs = root.join(name).join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    let (_, session) = only_session(&runs);
    assert!(!session.workflows[0].runs.is_empty(), "{}", text(&out));
    session.session_id
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn two_machines_runs_folders_list_show_and_report_together() {
    let tmp = tempfile::tempdir().unwrap();
    let a = machine(tmp.path(), "gpu-1", 16384);
    let b = machine(tmp.path(), "gpu-2", 12288);
    let dir_a = tmp.path().join("gpu-1/runs");
    let dir_b = tmp.path().join("gpu-2/runs");
    let pattern = tmp.path().join("gpu-*").join("runs");
    let pattern = pattern.to_str().unwrap();

    // Text: both sessions, grouped by environment (two cards: two fingerprints).
    let listed = cli(&[
        "runs",
        "--runs-dir",
        dir_a.to_str().unwrap(),
        "--runs-dir",
        dir_b.to_str().unwrap(),
    ]);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed));
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(stdout.contains(&a) && stdout.contains(&b), "{stdout}");
    // One heading per runs folder and environment (issue #38: what a restart keeps, not the
    // fingerprint id with its port), then one line per session.
    let headings: Vec<&str> = stdout.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(headings.len(), 2, "{stdout}");
    assert!(
        headings[0].starts_with(&format!("{} — ComfyUI ", dir_a.display()))
            && headings[1].starts_with(&format!("{} — ComfyUI ", dir_b.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("16384 MiB") && stdout.contains("12288 MiB"),
        "{stdout}"
    );

    // JSON lines through a pattern: one per session, what a scheduler collects.
    let json_out = cli(&["runs", "--json", "--runs-dir", pattern]);
    assert_eq!(json_out.status.code(), Some(0), "{}", text(&json_out));
    let lines: Vec<Value> = String::from_utf8_lossy(&json_out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["session_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&a.as_str()) && ids.contains(&b.as_str()),
        "{ids:?}"
    );
    for line in &lines {
        assert!(
            line["runs_dir"]
                .as_str()
                .unwrap()
                .ends_with(&format!("{}runs", std::path::MAIN_SEPARATOR)),
            "{line}"
        );
        assert!(line["server"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"));
        assert_eq!(line["fingerprint"].as_str().unwrap().len(), 12, "{line}");
        assert_eq!(line["state"]["kind"], "done", "{line}");
        assert_eq!(line["state_text"], "done", "{line}");
        let w = &line["workflows"][0];
        assert!(w["steps"].as_u64().unwrap() >= 1, "{line}");
        assert!(w["runs"].as_u64().unwrap() >= 1, "{line}");
        assert!(w["headline"].is_string(), "{line}");
    }
    assert_ne!(lines[0]["fingerprint"], lines[1]["fingerprint"]);

    // `report` finds both sessions and prints them together.
    // (the first by its folder, the second by its id)
    let folder_a = dir_a.join(&a);
    let report = cli(&[
        "report",
        folder_a.to_str().unwrap(),
        &b,
        "--runs-dir",
        pattern,
    ]);
    assert_eq!(report.status.code(), Some(0), "{}", text(&report));
    let md = String::from_utf8_lossy(&report.stdout);
    assert_eq!(md.matches("# comfy-bisect report").count(), 2, "{md}");

    // `show` finds a run of the second machine.
    let (_, s_b) = only_session(&dir_b);
    let run_b = &s_b.workflows[0].runs[0].run_id;
    let shown = cli(&["show", &run_b[..10], "--runs-dir", pattern]);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    assert!(String::from_utf8_lossy(&shown.stdout).contains(run_b.as_str()));

    // A copy of machine 1's session in a third folder: the same ids twice, reported.
    let copy = tmp.path().join("copy/runs");
    copy_dir(&dir_a.join(&a), &copy.join(&a));
    let both = [
        "--runs-dir",
        dir_a.to_str().unwrap(),
        "--runs-dir",
        copy.to_str().unwrap(),
    ];
    let listed = cli(&[&["runs"][..], &both[..]].concat());
    assert_eq!(listed.status.code(), Some(0));
    let err = String::from_utf8_lossy(&listed.stderr);
    assert!(
        err.contains(&format!("warning: session {a} is in 2 runs folders")),
        "{err}"
    );
    assert!(err.contains("not merged"), "{err}");
    let (_, s_a) = only_session(&dir_a);
    let run_a = &s_a.workflows[0].runs[0].run_id;
    let shown = cli(&[&["show", run_a.as_str()][..], &both[..]].concat());
    assert_eq!(shown.status.code(), Some(2), "{}", text(&shown));
    assert!(
        String::from_utf8_lossy(&shown.stderr)
            .contains(&format!("run {run_a} is in 2 runs folders")),
        "{}",
        text(&shown)
    );
    let report = cli(&[&["report", a.as_str()][..], &both[..]].concat());
    assert_eq!(report.status.code(), Some(2), "{}", text(&report));
    assert!(String::from_utf8_lossy(&report.stderr)
        .contains(&format!("session {a} is in 2 runs folders")));
}
