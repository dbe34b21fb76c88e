//! Golden-file tests: report.md and report.json of fixed sessions (first failure, minimal
//! fails, could not reproduce, flaky, incomplete, killed mid-run), exactly as the session
//! driver writes them, as insta snapshots in `tests/golden/`: a change fails with the full diff;
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test --test report report::golden`)
//! accepts it — review the diff before committing.

use crate::report_support::{normalize, scenario};
use comfy_bisect_core::report::{md, write_session_reports};

/// Compares with the insta snapshot `tests/golden/<name>.snap`; a difference fails with the
/// whole diff, and `cargo insta review` (or `INSTA_UPDATE=always`) accepts a new version.
fn compare(name: &str, actual: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, actual));
}

/// report.md and report.json of a fixed session, as the driver writes them (paths normalised).
fn reports(name: &str) -> (String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario(name).write(tmp.path());
    let written = write_session_reports(&dir, true).unwrap();
    assert_eq!(
        written,
        vec![dir.join("report.md"), dir.join("report.json")]
    );
    let read = |file: &str| {
        normalize(
            &std::fs::read_to_string(dir.join(file)).unwrap(),
            tmp.path(),
        )
    };
    (read("report.md"), read("report.json"))
}

fn golden(name: &str) {
    let (markdown, json) = reports(name);
    let problems = md::check(&markdown);
    assert!(
        problems.is_empty(),
        "{name}: report.md is not well-formed: {problems:?}"
    );
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["schema_version"], 1);
    assert_eq!(value["redacted"], true);
    compare(&format!("report-{name}.md"), &markdown);
    compare(&format!("report-{name}.json"), &json);
}

#[test]
fn golden_first_failure() {
    golden("first-failure");
}

#[test]
fn golden_minimal_fails() {
    golden("minimal-fails");
}

#[test]
fn golden_could_not_reproduce() {
    golden("could-not-reproduce");
}

#[test]
fn golden_flaky() {
    golden("flaky");
}

#[test]
fn golden_incomplete() {
    golden("incomplete");
}

#[test]
fn golden_killed_mid_run() {
    golden("killed-mid-run");
}

#[test]
fn golden_search_steps() {
    golden("search-steps");
}

#[test]
fn golden_json_files_read_back_into_the_report_type_unchanged() {
    for name in [
        "first-failure",
        "minimal-fails",
        "could-not-reproduce",
        "flaky",
        "incomplete",
        "killed-mid-run",
        "search-steps",
    ] {
        let (_, text) = reports(name);
        let report: comfy_bisect_core::report::Report = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{name}: report.json does not match the schema: {e}"));
        assert_eq!(
            report.schema_version,
            comfy_bisect_core::report::SCHEMA_VERSION
        );
        let mut again = serde_json::to_string_pretty(&report).unwrap();
        again.push('\n');
        assert_eq!(again, text, "{name}: report.json does not round-trip");
    }
}
