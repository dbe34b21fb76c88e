//! The Markdown is well-formed for every fixed session, with or without redaction, also when
//! messages, node classes and increments contain pipes, backticks, HTML and newlines; and the
//! `report` command prints it end to end.

use crate::report_support::{scenario, Fixture, SCENARIOS, SESSION_ID};
use comfy_bisect_core::report::{build, load, md, redact_report, Json, Markdown, ReportFormat};
use comfy_bisect_core::run::record::RunError;
use comfy_bisect_core::session::journal::{Outcome, Verdict};
use std::path::Path;
use std::process::Command;

fn render(dir: &Path, redacted: bool) -> String {
    let mut report = build(&load(dir).unwrap());
    if redacted {
        report = redact_report(&report).unwrap();
    }
    Markdown.render(&report).unwrap()
}

fn assert_well_formed(doc: &str, what: &str) {
    let problems = md::check(doc);
    assert!(problems.is_empty(), "{what}: {problems:#?}\n---\n{doc}");
}

#[test]
fn every_scenario_renders_well_formed_markdown() {
    for name in SCENARIOS {
        let tmp = tempfile::tempdir().unwrap();
        let dir = scenario(name).write(tmp.path());
        for redacted in [true, false] {
            let doc = render(&dir, redacted);
            assert_well_formed(&doc, &format!("{name} (redacted: {redacted})"));
            assert!(
                doc.starts_with("# comfy-bisect report\n\n**Verdict:** "),
                "{name}"
            );
        }
    }
}

/// The first-failure session with hostile text everywhere a user's data reaches the report.
fn hostile() -> Fixture {
    let mut f = scenario("first-failure");
    f.session.workflows[0].steps[4].increment = "LoRA | *strong* <b>".into();
    f.session.workflows[0].steps[1].changes[0].to = Some(serde_json::json!("12|80\n`x`"));
    for entry in &mut f.session.workflows[0].runs {
        if let Some(Outcome::Failed { node_type, .. }) = &mut entry.outcome {
            *node_type = "Bad|Node`s <i>".into();
        }
    }
    for (entry, file) in &mut f.records {
        if let Some(Outcome::Failed { node_type, .. }) = &mut entry.outcome {
            *node_type = "Bad|Node`s <i>".into();
        }
        if let Some(file) = file {
            file.entry = entry.clone();
            if let Some(RunError::ExecutionError(e)) = &mut file.record.error {
                e.exception_message
                    .push_str("| a | b |\n```\n</details>\n<details>\n~~~\n");
                e.traceback
                    .push("  File \"x.py\", line 1, in <module>\n    a = '```'\n".into());
                file.record.server_log.push_str(
                    "2026-11-29T01:00:13.000000 ````\n2026-11-29T01:00:14.000000 </details>\n",
                );
            }
        }
    }
    f
}

#[test]
fn hostile_text_cannot_break_tables_fences_or_details() {
    let tmp = tempfile::tempdir().unwrap();
    let f = hostile();
    let dir = f.write(tmp.path());
    let doc = render(&dir, true);
    assert_well_formed(&doc, "hostile session");
    assert!(
        !doc.lines()
            .any(|l| l.starts_with('|') && l.contains("Bad|Node")),
        "pipes in node classes are escaped"
    );
    assert!(
        doc.contains("&lt;b&gt;"),
        "HTML in increment names is escaped"
    );
}

/// The first-failure session where node classes, increments, changed values, file names and
/// error messages hold text GitHub would turn into mentions and references.
fn pinging() -> Fixture {
    let mut f = scenario("first-failure");
    let job = &mut f.session.workflows[0];
    job.steps[4].increment = "LoRA for @alice".into();
    job.steps[1].changes[0].to = Some(serde_json::json!("see owner/repo#12 and GH-34"));
    let class = "Sampler by @bob (#56)";
    for entry in &mut job.runs {
        if let Some(Outcome::Failed { node_type, .. }) = &mut entry.outcome {
            *node_type = class.into();
        }
    }
    for (entry, file) in &mut f.records {
        if let Some(Outcome::Failed { node_type, .. }) = &mut entry.outcome {
            *node_type = class.into();
        }
        if let Some(file) = file {
            for c in &mut file.component_hashes {
                c.file = format!("@carol/#78-{}", c.file);
            }
            file.entry = entry.clone();
            if let Some(RunError::ExecutionError(e)) = &mut file.record.error {
                e.node_type = class.into();
                e.exception_message = format!(
                    "Ping @dave about #90, commit 1a2b3c4d5e. {}",
                    e.exception_message
                );
                file.record
                    .server_log
                    .push_str("2026-11-29T01:00:13.000000 custom node by @erin, see #91\n");
            }
        }
    }
    f
}

/// The document with fenced blocks and code spans removed: what GitHub scans for mentions.
fn outside_code(doc: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in doc.lines() {
        let t = line.trim_start();
        let ticks: String = t.chars().take_while(|&c| c == '`').collect();
        if let Some(open) = &fence {
            if ticks.len() >= open.len() && t.trim() == ticks {
                fence = None;
            }
            continue;
        }
        if ticks.len() >= 3 {
            fence = Some(ticks);
            continue;
        }
        // Code spans: a run of n backticks up to the next run of exactly n.
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            out.push_str(&rest[..start]);
            let n = rest[start..].chars().take_while(|&c| c == '`').count();
            let after = &rest[start + n..];
            let closing = "`".repeat(n);
            match after.find(&closing) {
                Some(end) => rest = &after[end + n..],
                None => {
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

#[test]
fn mentions_and_references_stay_in_code_where_github_does_not_link_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = pinging().write(tmp.path());
    let linkable = regex::Regex::new(
        r"(?i)(^|[^\w`])@[a-z0-9]|#[0-9]|\bgh-[0-9]|\b[0-9a-f]{7,40}\b|github\.com/",
    )
    .unwrap();
    for redacted in [true, false] {
        let doc = render(&dir, redacted);
        assert_well_formed(&doc, "pinging session");
        let plain = outside_code(&doc);
        let found: Vec<&str> = plain.lines().filter(|l| linkable.is_match(l)).collect();
        assert!(
            found.is_empty(),
            "GitHub would link these lines (redacted: {redacted}):\n{}",
            found.join("\n")
        );
        // The text is still there, in code.
        for token in [
            "@alice",
            "owner/repo#12",
            "GH-34",
            "@bob",
            "#56",
            "@dave",
            "#90",
            "by @erin, see #91",
        ] {
            assert!(
                doc.contains(token),
                "{token} missing (redacted: {redacted})"
            );
        }
        if !redacted {
            assert!(doc.contains("@carol/#78-"), "file names are shown");
        }
    }
}

#[test]
fn a_session_with_two_workflows_has_one_section_each() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = scenario("first-failure");
    let mut second = f.session.workflows[0].clone();
    second.name = "second-workflow".into();
    second.verdict = None;
    second.runs.clear();
    f.session.workflows.push(second);
    let dir = f.write(tmp.path());
    let doc = render(&dir, true);
    assert_well_formed(&doc, "two workflows");
    assert!(doc.contains("## Workflow `wan-video-lora`"));
    assert!(doc.contains("## Workflow `second-workflow`"));
    assert!(doc.contains("- `second-workflow`: In progress: not started yet."));
    // The failing workflow's bug-form block comes first, named; the other has none.
    let block = doc
        .find("## For ComfyUI's bug form: `wan-video-lora`")
        .expect("the failing workflow's block");
    assert!(block < doc.find("## Environment").unwrap());
    assert!(!doc.contains("## For ComfyUI's bug form: `second-workflow`"));
    let json: serde_json::Value =
        serde_json::from_str(&Json.render(&build(&load(&dir).unwrap())).unwrap()).unwrap();
    assert_eq!(json["workflows"].as_array().unwrap().len(), 2);
    assert_eq!(json["workflows"][1]["verdict"]["kind"], "in_progress");
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
}

#[test]
fn report_command_prints_markdown_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    scenario("first-failure").write(tmp.path());
    let runs = tmp.path().join("runs");

    let out = bin()
        .args(["report", "20261129-01", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md_text = String::from_utf8(out.stdout).unwrap();
    assert!(md_text.starts_with("# comfy-bisect report"));
    assert!(md_text.contains("First failure when adding **LoRA** (step 4 of 7)"));
    assert!(!md_text.contains("gpu-box"), "redacted by default");
    assert_well_formed(&md_text, "report command output");

    let out = bin()
        .args(["report", "--format", "json", "--no-redact"])
        .arg(runs.join(SESSION_ID))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["redacted"], false);
    assert_eq!(v["settings"]["server"], "http://gpu-box.lan:8188");
    assert!(
        !runs.join(SESSION_ID).join("report.md").exists(),
        "printing writes nothing"
    );

    let out = bin()
        .args(["report", SESSION_ID, "--write", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(runs.join(SESSION_ID).join("report.md").is_file());
    assert!(runs.join(SESSION_ID).join("report.json").is_file());
}

#[test]
fn report_command_explains_an_unknown_session() {
    let tmp = tempfile::tempdir().unwrap();
    scenario("flaky").write(tmp.path());
    let out = bin()
        .args(["report", "2025", "--runs-dir"])
        .arg(tmp.path().join("runs"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no session \"2025\""), "{err}");
    assert!(err.contains("comfy-bisect runs"), "{err}");
}

#[test]
fn preflight_failure_lists_what_to_install() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = scenario("could-not-reproduce");
    f.session.workflows[0].runs.clear();
    f.records.clear();
    f.verdict(Verdict::PreflightFailed {
        unknown_nodes: vec!["WanVideoSampler".into()],
        missing_models: vec![comfy_bisect_core::session::journal::MissingModel {
            folder: "loras".into(),
            file: "detail.safetensors".into(),
            node: Some("10".into()),
            class_type: Some("LoraLoader".into()),
            input: Some("lora_name".into()),
        }],
        other: vec![],
    });
    let dir = f.write(tmp.path());
    let doc = render(&dir, true);
    assert_well_formed(&doc, "preflight");
    assert!(doc.contains(
        "**Verdict:** Preflight failed: 1 unknown node class (WanVideoSampler); 1 missing model file. Nothing was run."
    ), "{doc}");
    assert!(doc.contains("- Unknown node class `WanVideoSampler` (install its custom node pack)"));
    assert!(
        doc.contains(
            "- Missing model file: loras/detail.safetensors (node `#10` LoraLoader, input lora_name)"
        ),
        "{doc}"
    );
}

#[test]
fn inconclusive_names_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = scenario("could-not-reproduce");
    let run = f.session.workflows[0].runs[1].run_id.clone();
    f.verdict(Verdict::Inconclusive {
        run_id: run.clone(),
        detail: "was interrupted by another client".into(),
    });
    let dir = f.write(tmp.path());
    let doc = render(&dir, true);
    assert_well_formed(&doc, "inconclusive");
    assert!(doc.contains(&format!(
        "**Verdict:** Inconclusive: run {} was interrupted by another client. A rejected or interrupted run says nothing about the variant.",
        &run[..8]
    )), "{doc}");
}

#[test]
fn runs_recovered_from_history_are_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = scenario("could-not-reproduce");
    let summary = f.session.workflows[0].runs[1].summary.as_mut().unwrap();
    summary.recovered_from_history = true;
    summary.vram_peak_mib = None;
    let dir = f.write(tmp.path());
    let doc = render(&dir, true);
    assert_well_formed(&doc, "recovered");
    assert!(
        doc.contains("was recovered from the server's history after the tool stopped"),
        "{doc}"
    );
}

#[test]
fn a_server_killed_by_the_oom_killer_shows_the_kernels_figures_and_host_ram() {
    use comfy_bisect_core::host::{HostReport, HostSample, KernelEvidence, ServerProcess};
    const GIB: u64 = 1 << 30;
    let tmp = tempfile::tempdir().unwrap();
    let mut f = scenario("incomplete");
    // The target's run (step 7) killed the server; the kernel log of its window (lines written
    // from the kernel's published format, made-up numbers) names the server's pid.
    let lines: Vec<String> = [
        "2026-11-29T01:00:40+0000 vm kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=4414,uid=1000",
        "2026-11-29T01:00:40+0000 vm kernel: Out of memory: Killed process 4414 (python3) total-vm:34439708kB, anon-rss:18988872kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:40000kB oom_score_adj:0",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    for (entry, file) in f.records.iter_mut() {
        let Some(file) = file.as_mut() else { continue };
        let lost = entry.step == 7;
        let peak = if lost { 23 * GIB } else { 6 * GIB };
        file.record.host = HostReport::from_samples(
            vec![HostSample {
                t_ms: 100,
                ram_used_bytes: Some(peak),
                rss_bytes: Some(peak - 3 * GIB),
                swap_bytes: Some(if lost { 2 * GIB } else { 0 }),
            }],
            Some(24 * GIB),
            Some(ServerProcess {
                pid: 4414,
                name: "python3".into(),
            }),
            (None, None),
            None,
            String::new(),
        );
        if lost {
            file.record.kernel = Some(KernelEvidence::from_lines(
                "journalctl -k".into(),
                "2026-11-29T01:00:00Z".into(),
                "2026-11-29T01:01:00Z".into(),
                Some(4414),
                &lines,
            ));
            file.record.attach_diagnosis();
        }
        let summary = comfy_bisect_core::session::evidence::summary_of(&file.record, None, None);
        let s = entry.summary.as_mut().unwrap();
        s.ram_peak_mib = summary.ram_peak_mib;
        s.rss_peak_mib = summary.rss_peak_mib;
        s.swap_peak_mib = summary.swap_peak_mib;
        s.ram_total_mib = summary.ram_total_mib;
        file.entry = entry.clone();
    }
    let runs: Vec<_> = f.records.iter().map(|(e, _)| e.clone()).collect();
    f.session.workflows[0].runs = runs;
    let dir = f.write(tmp.path());
    let doc = render(&dir, true);
    assert_well_formed(&doc, "oom-killer");
    assert!(
        doc.contains("| Peak RAM | Server RSS | Swap | Duration |"),
        "{doc}"
    );
    assert!(
        doc.contains("| 23.0 GiB |") || doc.contains("| 23552 MiB |"),
        "{doc}"
    );
    assert!(
        doc.contains("- Killed by the kernel's OOM killer: pid 4414 (python3), total-vm 32.8 GiB, anon-rss 18.1 GiB, file-rss 0.0 GiB, shmem-rss 0.0 GiB, constraint CONSTRAINT_NONE"),
        "{doc}"
    );
    assert!(
        doc.contains("Kernel log (OOM killer lines of the run's window)"),
        "{doc}"
    );
    assert!(doc.contains("anon-rss:18988872kB"), "{doc}");
    assert!(
        doc.contains("- Host RAM: System RAM in use peaked at 23.0 GiB of 24.0 GiB"),
        "{doc}"
    );
    // The chart (report.json only) draws the RAM line too.
    let report = build(&load(&dir).unwrap());
    let chart = &report.workflows[0].memory_chart.as_ref().unwrap().mermaid;
    assert!(chart.contains("Peak VRAM and RAM per step"), "{chart}");
    assert!(
        doc.contains("memory chart (Mermaid) (`memory_chart`)"),
        "{doc}"
    );
}
