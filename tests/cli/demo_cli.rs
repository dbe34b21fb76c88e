//! `comfy-bisect demo`, the README's first command, run the way a user runs it (from a folder of
//! their own, so the built-in examples and simulator are all it needs).

use serde_json::Value;
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
        // Sized for an issue (issue #38: 25–30 KB at first, 12–18 KB after its first pass,
        // now under 12 000 bytes); report.json keeps what report.md leaves out.
        assert!(report.len() < 12_000, "{} bytes: {report}", report.len());
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(s.path().join("report.json")).unwrap())
                .unwrap();
        moved_facts_are_in_report_json(&report, &json);
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

/// The fields of `workflows[0]` the "Only in report.json" line of `md` names.
fn named_fields(md: &str) -> Vec<String> {
    let lines: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("**Only in report.json**"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one line names what is only in report.json:\n{md}"
    );
    // `workflows[]` first, then one code span per part.
    lines[0]
        .split('`')
        .skip(3)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The values at `path` under `v` (`ladder[].models`: each row's `models`).
fn values<'a>(v: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut at = vec![v];
    for part in path.split('.') {
        let (key, each) = match part.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (part, false),
        };
        at = at
            .into_iter()
            .filter_map(|x| x.get(key))
            .flat_map(|x| match (each, x.as_array()) {
                (true, Some(a)) => a.iter().collect::<Vec<_>>(),
                _ => vec![x],
            })
            .collect();
    }
    at
}

/// Issue #38 item 9: every part report.md leaves out is in report.json, under the field the
/// report names, and whole: the chart, the products, the models per step, the node times, the
/// allocator numbers, what to check next, the model files' hashes and the reproduce commands.
fn moved_facts_are_in_report_json(md: &str, json: &Value) {
    let w = &json["workflows"][0];
    let fields = named_fields(md);
    for field in &fields {
        let found = values(w, field);
        assert!(
            found.iter().any(|v| !v.is_null()
                && v.as_array().is_none_or(|a| !a.is_empty())
                && v.as_object().is_none_or(|o| !o.is_empty())),
            "report.md says `{field}` is in report.json, which has none: {w}"
        );
    }
    // Each demo session has these: it failed, its runs produced outputs, read the console and
    // were timed.
    for field in [
        "memory_chart",
        "ladder[].product",
        "ladder[].memory_events",
        "node_times",
        "components",
        "attachments.runs[].reproduce",
    ] {
        assert!(
            fields.iter().any(|f| f == field),
            "{field} not named: {fields:?}"
        );
    }
    // ... and none of them is in report.md any more.
    for gone in [
        "```mermaid",
        "Node times at the boundary",
        "Models loaded per step",
        "| Allocator number |",
        "## What to check next",
        "## Component hashes",
        "comfy-bisect submit ",
    ] {
        assert!(!md.contains(gone), "{gone} is still in report.md:\n{md}");
    }
    let ladder = w["ladder"].as_array().unwrap();
    // The chart draws every step that ran, each passed step at its peak.
    let chart = w["memory_chart"]["mermaid"].as_str().unwrap();
    assert!(
        chart.starts_with("```mermaid\n") && chart.contains("xychart-beta"),
        "{chart}"
    );
    for r in ladder.iter().filter(|r| r["outcome"] != "not_run") {
        let label = format!("\"{} {}", r["step"], r["increment"].as_str().unwrap());
        assert!(chart.contains(&label), "{label} not in {chart}");
        if let (Some(peak), "passed") =
            (r["peak_vram_mib"].as_f64(), r["outcome"].as_str().unwrap())
        {
            assert!(
                chart.contains(&format!("{}", peak.round() as i64)),
                "{peak} not in {chart}"
            );
        }
    }
    assert!(!w["memory_chart"]["caption"].as_str().unwrap().is_empty());
    // Every step that passed has its product; the runs that ran have their model loads.
    for r in ladder.iter().filter(|r| r["outcome"] == "passed") {
        assert!(r["product"].is_string(), "{r}");
    }
    // The node times of the boundary runs: the last pass and the verdict's run.
    let roles: Vec<&str> = w["node_times"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert!(roles.contains(&"last pass"), "{roles:?}");
    assert!(!w["node_times"]["rows"].as_array().unwrap().is_empty());
    // What to check next (the OOMs), its explanations unproven, the root cause unknown.
    if w["verdict"]["failure_kind"] == "cuda_oom" {
        assert!(fields.iter().any(|f| f == "next_steps"), "{fields:?}");
        let next = &w["next_steps"];
        assert!(!next["next_check"].as_array().unwrap().is_empty(), "{next}");
        let candidates = next["candidates"].as_array().unwrap();
        assert!(!candidates.is_empty(), "{next}");
        assert!(
            candidates.iter().all(|c| c["status"] == "unproven"),
            "{next}"
        );
        assert_eq!(next["root_cause"], "unknown");
        // Their runs loaded models (a 2026 server stages them: memory events).
        assert!(fields.iter().any(|f| f == "ladder[].models"), "{fields:?}");
    }
    // The allocator numbers are the figures of the error report.md shows: "Tried to allocate
    // 1.88 GiB" is the `requested_mib` of report.json.
    if let Some(tried) = md.split("Tried to allocate ").nth(1) {
        let gib: f64 = tried.split(' ').next().unwrap().parse().unwrap();
        let requested = w["first_failure"]["numbers"]["requested_mib"]
            .as_f64()
            .unwrap();
        assert!(
            (requested / 1024.0 - gib).abs() < 0.01,
            "{gib} GiB vs {requested} MiB"
        );
        assert!(
            fields.iter().any(|f| f == "first_failure.numbers"),
            "{fields:?}"
        );
    }
    // The model files: report.md names each one; report.json has its folder, loader and its
    // hash or why it has none.
    let files = md
        .lines()
        .find(|l| l.starts_with("Model files: "))
        .unwrap_or_else(|| panic!("no model files line:\n{md}"));
    for c in w["components"].as_array().unwrap() {
        let file = c["file"].as_str().unwrap();
        assert!(
            files.contains(&format!("`{file}`")),
            "{file} not in {files}"
        );
        assert!(
            c["folder"].is_string() && c["node"]["class_type"].is_string(),
            "{c}"
        );
        assert!(c["sha256"].is_string() || c["reason"].is_string(), "{c}");
    }
    // One reproduce command per run, for the workflow file report.md attaches.
    let runs = w["attachments"]["runs"].as_array().unwrap();
    for r in runs {
        let command = r["reproduce"].as_str().unwrap();
        let workflow = r["workflow"].as_str().unwrap();
        assert!(
            command.starts_with("comfy-bisect submit ") && command.contains(workflow),
            "{r}"
        );
    }
    let failing = w["attachments"]["first_failing"]["workflow"]
        .as_str()
        .unwrap();
    assert!(md.contains(failing), "{failing} not in report.md");
    assert!(
        runs.iter().any(|r| r["workflow"] == failing),
        "no command for {failing}"
    );
}
