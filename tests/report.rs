//! Golden-file tests: report.md and report.json of fixed sessions (first failure, minimal
//! fails, could not reproduce, flaky, incomplete, killed mid-run), exactly as the session
//! driver writes them. `UPDATE_GOLDEN=1 cargo test --test report` rewrites the golden files;
//! review the diff before committing.

mod report_support;

use comfy_bisect::report::{md, write_session_reports};
use report_support::{normalize, scenario};
use std::path::PathBuf;

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn compare(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} missing ({e}); run UPDATE_GOLDEN=1 cargo test --test report",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from its golden file at line {}:\n  golden: {:?}\n  actual: {:?}\n(UPDATE_GOLDEN=1 rewrites it; review the diff)",
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

fn golden(name: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario(name).write(tmp.path());
    let written = write_session_reports(&dir, true).unwrap();
    assert_eq!(
        written,
        vec![dir.join("report.md"), dir.join("report.json")]
    );
    let markdown = normalize(
        &std::fs::read_to_string(dir.join("report.md")).unwrap(),
        tmp.path(),
    );
    let json = normalize(
        &std::fs::read_to_string(dir.join("report.json")).unwrap(),
        tmp.path(),
    );
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
fn golden_json_files_read_back_into_the_report_type_unchanged() {
    for name in [
        "first-failure",
        "minimal-fails",
        "could-not-reproduce",
        "flaky",
        "incomplete",
        "killed-mid-run",
    ] {
        let path = golden_path(&format!("report-{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let report: comfy_bisect::report::Report = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} does not match the schema: {e}", path.display()));
        assert_eq!(report.schema_version, comfy_bisect::report::SCHEMA_VERSION);
        let mut again = serde_json::to_string_pretty(&report).unwrap();
        again.push('\n');
        assert_eq!(again, text, "{name}: report.json does not round-trip");
    }
}
