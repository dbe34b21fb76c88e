//! Issue #38 (the report a first-time user pastes into an issue): a pass under memory pressure is
//! named in the short table and leads the headline with the `--strict` hint; Debug Logs hold the
//! whole traceback, header to exception line; Actual Behavior has the error with its figures; a
//! warning repeated in every run is said once; Steps to Reproduce names the UI file when the
//! user gave one.

use crate::report_support::{scenario, Fixture};
use comfy_bisect_core::report::{md, write_session_reports};
use comfy_bisect_core::session::journal::{RunRole, Verdict};

/// report.md of `f`, written as the driver writes it.
fn markdown(f: &Fixture) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = f.write(tmp.path());
    write_session_reports(&dir, true).unwrap();
    let text = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md::check(&text).is_empty(), "{:?}", md::check(&text));
    text
}

/// The text of the `### NAME` field of the bug form.
fn field<'a>(md: &'a str, name: &str) -> &'a str {
    let start = md
        .find(&format!("### {name}\n"))
        .unwrap_or_else(|| panic!("no {name} in\n{md}"));
    let rest = &md[start + name.len() + 5..];
    rest[..rest.find("\n### ").unwrap_or(rest.len())].trim_start()
}

/// Marks run `id` of `f` as a pass under memory pressure, as the driver records one.
fn under_pressure(f: &mut Fixture, id: &str) {
    let words = vec![
        "slowed 3.1× (0.38 s/step vs 0.12 at step 1; the added work explains ≤ 1.5×)".to_string(),
        "weights streamed (19593 MB staged)".to_string(),
    ];
    for r in f.session.workflows[0]
        .runs
        .iter_mut()
        .chain(f.records.iter_mut().map(|(e, _)| e))
        .filter(|r| r.run_id == id)
    {
        r.summary.as_mut().unwrap().delivered.memory_pressure = words.clone();
    }
    for file in f.records.iter_mut().filter_map(|(_, file)| file.as_mut()) {
        if file.entry.run_id == id {
            file.entry
                .summary
                .as_mut()
                .unwrap()
                .delivered
                .memory_pressure = words.clone();
        }
    }
}

#[test]
fn a_pass_under_memory_pressure_is_named_in_the_short_table_and_leads_the_headline() {
    let mut f = scenario("first-failure");
    let pressed = f.session.workflows[0]
        .runs
        .iter()
        .find(|r| r.step == 2 && r.role == RunRole::Search)
        .unwrap()
        .run_id
        .clone();
    under_pressure(&mut f, &pressed);
    let md = markdown(&f);
    assert!(
        md.contains("| 2 | frames | passed — slowed 3.1×, weights streamed |"),
        "{md}"
    );
    let verdict = md.lines().find(|l| l.starts_with("**Verdict:**")).unwrap();
    assert!(
        verdict
            .starts_with("**Verdict:** First memory pressure at **frames** (step 2: slowed 3.1×"),
        "{verdict}"
    );
    assert!(md.contains("bisect again with `--strict`"), "{md}");
    // The journal's line (the closing summary, `runs`) leads with it too.
    let line = f.session.workflows[0].headline().unwrap();
    assert!(
        line.starts_with("first memory pressure at frames (step 2: slowed 3.1×, weights streamed); then first failure at increment LoRA"),
        "{line}"
    );
    // Without pressure: no hint, no lead.
    let clean = markdown(&scenario("first-failure"));
    assert!(!clean.contains("--strict"), "{clean}");
}

#[test]
fn a_target_that_passed_under_pressure_leads_with_the_pressure_not_could_not_reproduce() {
    let mut f = scenario("could-not-reproduce");
    let pressed = f.session.workflows[0]
        .runs
        .iter()
        .find(|r| r.passed() && r.step > 0)
        .unwrap()
        .run_id
        .clone();
    under_pressure(&mut f, &pressed);
    let md = markdown(&f);
    let verdict = md.lines().find(|l| l.starts_with("**Verdict:**")).unwrap();
    assert!(
        verdict.starts_with("**Verdict:** First memory pressure at"),
        "{verdict}"
    );
    assert!(verdict.contains("(could not reproduce)"), "{verdict}");
    assert!(matches!(
        f.session.workflows[0].verdict,
        Some(Verdict::CouldNotReproduce { .. })
    ));
}

#[test]
fn debug_logs_hold_the_whole_traceback_and_actual_behavior_the_error_with_its_figures() {
    let md = markdown(&scenario("first-failure"));
    let logs = field(&md, "Debug Logs");
    let block = &logs[logs.find("```text\n").unwrap() + 8..];
    let block = &block[..block.find("\n```").unwrap()];
    assert!(
        block.starts_with("Traceback (most recent call last):\n  File "),
        "{block}"
    );
    let last = block.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    // The fixture's error: cudaMallocAsync's wording, with its figures.
    let error = "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory.";
    assert!(
        block.lines().any(|l| l.starts_with(error)),
        "no exception line in\n{block}"
    );
    assert!(!last.starts_with("  File "), "ends at a frame: {last}");
    let actual = field(&md, "Actual Behavior");
    assert!(actual.contains(&format!("raised `{error}")), "{actual}");
}

#[test]
fn steps_to_reproduce_name_the_ui_file_when_the_user_gave_one() {
    // The first-failure session's input was a UI workflow; its failing run has the UI companion.
    let md = markdown(&scenario("first-failure"));
    let steps = field(&md, "Steps to Reproduce");
    assert!(steps.starts_with("Load the failing workflow `"), "{steps}");
    assert!(steps.contains("workflow.ui.json` (UI format"), "{steps}");
}

#[test]
fn a_warning_repeated_in_every_run_is_said_once_with_a_count() {
    let mut f = scenario("first-failure");
    for (_, file) in f.records.iter_mut() {
        if let Some(file) = file {
            file.record.warnings.push(format!(
                "WebSocket traffic capped: 1 frames (71 B) between {} ms and {} ms were not kept",
                file.entry.step * 10,
                file.entry.step * 10 + 5
            ));
        }
    }
    let md = markdown(&f);
    assert_eq!(md.matches("WebSocket traffic capped").count(), 1, "{md}");
    let runs = f.records.iter().filter(|(_, file)| file.is_some()).count();
    assert!(md.contains(&format!("in {runs} runs, the first")), "{md}");
}

#[test]
fn the_stopped_sessions_resume_hint_is_valid_markdown_with_an_absolute_runs_folder() {
    use comfy_bisect_core::session::journal::StopReason;
    let mut f = scenario("incomplete");
    // The driver's own words when a deadline stops a session (the command in backticks).
    f.stop(
        StopReason::Deadline,
        "deadline 2026-11-29T07:00:00Z reached; `comfy-bisect resume 20261129-010000-abcd --runs-dir /srv/my_runs` continues",
    );
    let md = markdown(&f);
    let resume_lines: Vec<&str> = md
        .lines()
        .filter(|l| l.contains("comfy-bisect resume"))
        .collect();
    assert!(!resume_lines.is_empty(), "{md}");
    for line in &resume_lines {
        // Each backtick-quoted command is one code span: no escaped or stray backticks.
        assert!(!line.contains("\\`"), "{line}");
        assert_eq!(line.matches('`').count() % 2, 0, "{line}");
    }
    // The hint under Attachments names the runs folder as an absolute path (cron has another
    // working directory).
    let hint = resume_lines
        .iter()
        .find(|l| l.starts_with("- No verdict yet"))
        .unwrap_or_else(|| panic!("{md}"));
    let runs_dir = hint
        .split("--runs-dir ")
        .nth(1)
        .unwrap_or_else(|| panic!("{hint}"));
    // (absolute on this platform: `/…` or `C:\…`, quoted or not)
    let bare = runs_dir.trim_end_matches('`').trim_matches(['\'', '"']);
    assert!(std::path::Path::new(bare).is_absolute(), "{hint}");
}
