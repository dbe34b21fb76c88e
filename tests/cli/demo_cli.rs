//! `comfy-bisect demo`, the README's first command, run the way a user runs it (from a folder of
//! their own, so the built-in examples and simulator are all it needs).

use std::process::Command;

#[test]
fn demo_bisects_the_examples_and_writes_their_reports() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        // As fast as the simulator goes: the first two verdicts do not depend on time; the
        // third (read from step times) keeps the clock it needs.
        .args(["demo", "--quiet", "--time-scale", "0"])
        .current_dir(home.path())
        .env_remove("COMFY_BISECT_SERVER")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // One verdict per example, each a first failure (the demo's cards are chosen for that).
    for example in [
        "sd15_txt2img_lora_upscale",
        "wan22_t2v_experts_lora_cache_rife",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(example) && l.contains("first failure at increment")),
            "{example}: {stdout}"
        );
    }
    // The third, on the 2026 simulator (--strict): memory pressure at frames, not an OOM.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("wan22_t2v_2026_dynamic_vram")
                && l.contains("first failure at increment frames (step 2), stage sample_middle: passed under memory pressure, counted as a failure by --strict")),
        "{stdout}"
    );
    // The sessions are under ./runs with their reports, as the README says.
    let runs = home.path().join("runs");
    let sessions: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("session.json").is_file())
        .collect();
    assert_eq!(sessions.len(), 3, "{stdout}");
    let mut pressure = 0;
    for s in &sessions {
        let report = std::fs::read_to_string(s.path().join("report.md")).unwrap();
        // Sized for an issue (issue #38: 16–30 KB before, 12–18 KB after; report.json keeps
        // the rest). The bound leaves room for paths and durations that vary.
        assert!(report.len() < 20 * 1024, "{} bytes: {report}", report.len());
        assert!(report.starts_with("# comfy-bisect report"), "{report}");
        assert!(report.contains("Root cause: unknown"), "{report}");
        if report.contains("passed under memory pressure") {
            pressure += 1;
            assert!(report.contains("memory pressure — slowed "), "{report}");
            assert!(report.contains(" MB staged)"), "{report}");
            // The verdict is the pressure, not the target's later OOM.
            let verdict = report
                .lines()
                .find(|l| l.starts_with("**Verdict:**"))
                .unwrap();
            assert!(verdict.contains("**frames**"), "{verdict}");
            assert!(!verdict.contains("CUDA out of memory"), "{verdict}");
        }
    }
    assert_eq!(pressure, 1, "one session names memory pressure: {stdout}");
    // And `runs` lists them.
    let listed = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["runs", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(listed.status.code(), Some(0));
    let listed = String::from_utf8_lossy(&listed.stdout);
    for s in &sessions {
        let id = s.file_name().to_string_lossy().into_owned();
        assert!(listed.contains(&id), "{id} not listed: {listed}");
    }
    // One line per session, newest last, its local start time to the second, its verdict and
    // mode; the groups are not keyed by a fingerprint id holding the port.
    let lines: Vec<&str> = listed
        .lines()
        .filter(|l| l.trim_start().starts_with("20"))
        .collect();
    assert_eq!(lines.len(), 3, "{listed}");
    let times: Vec<&str> = lines.iter().map(|l| &l.trim_start()[..19]).collect();
    let mut sorted = times.clone();
    sorted.sort();
    assert_eq!(times, sorted, "newest last: {listed}");
    assert!(
        times
            .iter()
            .all(|t| t.as_bytes()[10] == b' ' && !t.contains('.')),
        "{listed}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("wan22_t2v_2026_dynamic_vram: ") && l.contains("[strict]")),
        "{listed}"
    );
    assert!(!listed.contains("--port"), "{listed}");
    // `report` without a session shows the latest; a bundle with --json is refused.
    let latest = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["report", "--json", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(latest.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&latest.stdout).contains("wan22_t2v_2026_dynamic_vram"));
    let both = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["report", "--json", "--bundle", "r.zip", "--runs-dir"])
        .arg(&runs)
        .current_dir(home.path())
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    assert!(!home.path().join("r.zip").exists());
}
