//! report.md stays under GitHub's issue-body limit (65 536 characters) however long the failing
//! run's traceback, message, inputs and console are, and still opens with the verdict and the
//! ladder; report.json keeps everything whole.

use crate::report_support::{scenario, Fixture};
use comfy_bisect_core::comfy::console::{classify, ConsoleLine};
use comfy_bisect_core::report::budget::{github_length, GITHUB_BODY_LIMIT};
use comfy_bisect_core::report::{md, write_session_reports};
use comfy_bisect_core::run::record::RunError;
use comfy_bisect_core::session::journal::RunRole;
use serde_json::{json, Value};
use std::path::MAIN_SEPARATOR;

/// The first-failure session whose failing run printed far too much.
fn huge() -> Fixture {
    let mut f = scenario("first-failure");
    let failing = f.session.workflows[0].runs[5].run_id.clone();
    for (entry, file) in &mut f.records {
        let Some(file) = file else { continue };
        if entry.run_id != failing {
            continue;
        }
        if let Some(RunError::ExecutionError(e)) = &mut file.record.error {
            e.traceback = (0..1500)
                .map(|i| format!("  File \"/home/alice/ComfyUI/deep{i}.py\", line {i}, in f{i}\n    call_{i}(x) — ×\n"))
                .collect();
            e.exception_message = (0..600)
                .map(|i| format!("message line {i} {}", "é".repeat(50)))
                .collect::<Vec<_>>()
                .join("\n");
            let mut inputs = serde_json::Map::new();
            for i in 0..600 {
                inputs.insert(
                    format!("input_{i}"),
                    json!([format!("tensor({})", "9".repeat(200))]),
                );
            }
            e.current_inputs = inputs;
        }
        let mut log = String::from("2026-11-29T01:00:00.000000 got prompt\n");
        for i in 0..2000 {
            log.push_str(&format!(
                "2026-11-29T01:00:01.000000 {:3}%|█         | {i}/2000 [00:01<00:05, 2.0it/s]\n",
                i / 20
            ));
            log.push_str(&format!(
                "2026-11-29T01:00:01.000000 a noisy custom node says {i} {}\n",
                "→".repeat(200)
            ));
        }
        log.push_str("2026-11-29T01:00:02.000000 Prompt executed in 40.00 seconds\n");
        file.record.server_log = log;
        file.record.warnings = (0..500)
            .map(|i| format!("warning number {i}: {}", "w".repeat(300)))
            .collect();
    }
    f
}

fn check_fits(doc: &str, what: &str) {
    assert!(
        github_length(doc) <= GITHUB_BODY_LIMIT,
        "{what}: {} > {GITHUB_BODY_LIMIT}",
        github_length(doc)
    );
    assert!(doc.chars().count() <= GITHUB_BODY_LIMIT);
    assert!(
        doc.starts_with("# comfy-bisect report\n\n**Verdict:** First failure when adding **LoRA** (step 4 of 7)"),
        "{what}"
    );
    assert!(doc.contains("## Ladder\n\n| Step | Increment |"), "{what}");
    // The block for ComfyUI's bug form comes first and is whole, its traceback trimmed.
    let block = &doc[..doc.find("## Environment").expect("environment section")];
    let mut at = 0;
    for part in [
        "## For ComfyUI's bug form",
        "### Custom Node Testing",
        "### Expected Behavior",
        "### Actual Behavior",
        "### Steps to Reproduce",
        "| Step | Increment | Outcome | Stage | Peak VRAM |",
        "### Debug Logs",
        "<summary>Traceback of step 4 (",
        "lines left out in the middle; the whole traceback is in `",
        "### Other\n\nGPU: ",
    ] {
        let found = block[at..]
            .find(part)
            .unwrap_or_else(|| panic!("{what}: {part:?} missing or out of order in\n{block}"));
        at += found + part.len();
    }
    assert!(
        doc.contains("| 4 | LoRA | LoraLoader `#10` re-added | **failed"),
        "{what}"
    );
    let problems = md::check(doc);
    assert!(problems.is_empty(), "{what}: {problems:#?}");
}

#[test]
fn a_huge_traceback_message_inputs_and_console_are_trimmed_in_report_md_and_whole_in_report_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = huge().write(tmp.path());
    let written = write_session_reports(&dir, true).unwrap();
    let doc = std::fs::read_to_string(&written[0]).unwrap();
    check_fits(&doc, "huge failure");
    assert!(
        !doc.contains("report.md was cut here"),
        "trimming was enough"
    );
    // Each trimmed part says what was left out and where it is whole.
    assert!(doc.contains("<summary>Traceback of step 4 ("), "{doc}");
    assert!(doc.contains("lines left out in the middle; the whole traceback is in `"));
    // (the folder's separator is the platform's)
    assert!(doc.contains(&format!("{MAIN_SEPARATOR}run.json` and report.json.")));
    assert!(doc.contains("more lines of the message; the whole message is in run.json"));
    assert!(doc.contains("; the whole inputs is in `"));
    assert!(doc.contains("lines are left out in the middle; "));
    assert!(doc.contains("; the whole console is in `"));
    assert!(doc.contains(&format!("{MAIN_SEPARATOR}server.log` and report.json.")));
    // The 500 warnings of one kind are one line (issue #38), report.json has each.
    assert!(doc.contains("500 times in run "), "{doc}");
    // The console's end (our prompt's last line) is shown.
    assert!(doc.contains("Prompt executed in 40.00 seconds"));
    // report.json has everything.
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&written[1]).unwrap()).unwrap();
    let ff = &json["workflows"][0]["first_failure"];
    assert_eq!(ff["traceback"].as_array().unwrap().len(), 1500);
    assert_eq!(ff["console"].as_array().unwrap().len(), 4002);
    assert_eq!(ff["current_inputs"].as_object().unwrap().len(), 600);
    assert_eq!(
        ff["exception_message"].as_str().unwrap().lines().count(),
        600
    );
    assert!(json["warnings"].as_array().unwrap().len() >= 500);
    // Progress bars are folded: no two consecutive states of the bar are shown.
    let shown: Vec<&str> = doc.lines().collect();
    assert!(!shown.windows(2).any(|w| {
        let bar = |l: &str| {
            matches!(
                classify(l.split_once(' ').map(|x| x.1).unwrap_or(l)),
                Some(ConsoleLine::Bar(_))
            )
        };
        bar(w[0]) && bar(w[1])
    }));
}

#[test]
fn when_trimming_is_not_enough_the_report_is_cut_after_the_ladder_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = huge();
    // A thousand control runs: their table alone is far over the limit.
    let control = f.session.workflows[0]
        .runs
        .iter()
        .find(|r| r.step > 0)
        .unwrap()
        .clone();
    for i in 0..1000 {
        let mut c = control.clone();
        c.role = RunRole::Control;
        c.run_id = format!("c0{i:06}-0000-4000-8000-000000000000");
        f.session.workflows[0].runs.push(c);
    }
    // And 800 model files: the line of model files names a few and counts the others.
    for (_, file) in &mut f.records {
        if let Some(file) = file {
            let one = file.component_hashes[0].clone();
            file.component_hashes = (0..800)
                .map(|i| {
                    let mut c = one.clone();
                    c.file = format!("loras/set-{i}/very-long-model-file-name-{i}.safetensors");
                    c
                })
                .collect();
        }
    }
    let dir = f.write(tmp.path());
    let written = write_session_reports(&dir, true).unwrap();
    let doc = std::fs::read_to_string(&written[0]).unwrap();
    check_fits(&doc, "cut");
    assert!(doc.contains(
        "**report.md was cut here to stay under GitHub's 65 536-character issue-body limit.**"
    ));
    assert!(
        doc.ends_with("--bundle report.zip`).\n"),
        "{}",
        &doc[doc.len() - 300..]
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&written[1]).unwrap()).unwrap();
    assert_eq!(
        json["workflows"][0]["components"].as_array().unwrap().len(),
        800
    );
    // The evidence of the failing run comes before the cut.
    assert!(doc.contains("## First failing run (step 4, LoRA)"));
    assert!(doc.contains("… and 788 more."), "{doc}");
    assert!(json["workflows"][0]["controls"].as_array().unwrap().len() > 1000);
}
