//! Issue #29 item 2 through the binary: a hostile server puts terminal escapes (OSC 0 window
//! title, OSC 52 clipboard write), BEL, NUL and a bidi override into its error message, node
//! type, device name, `comfyui_version` and a pack name (the simulator's `hostile_text`
//! fault). `submit`, `show`, `runs`, `report` and `diagnose` print them, and
//! `report.md` holds them, only as visible `\u001b` escapes; the JSON outputs keep the text.
//! Item 9: secrets in each free-text form in the server's error and console, and in inputs
//! named `civitai_key` / `webhook_url`, stay out of report.md, report.json and the bundle.

use crate::report_support::unzip;
use crate::session_support::*;
use comfy_bisect_core::text::is_unsafe;
use comfy_bisect_sim::Faults;
use serde_json::Value;
use std::process::Output;

/// The SD1.5 example passes its minimal variant and resolution step on this card and runs out
/// at batch (tests/fallback_session.rs).
const PASSES_TWO_STEPS: u64 = 2560;

/// A window title (OSC 0 … BEL), a clipboard write (OSC 52 … BEL), NUL and a right-to-left
/// override.
const HOSTILE: &str = "\u{1b}]0;pwned-title\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{7}\0\u{202e}lave";

/// Panics when `text` holds a raw control or bidi character (newlines and tabs are fine).
fn assert_safe(what: &str, text: &str) {
    if let Some((i, c)) = text.char_indices().find(|(_, c)| is_unsafe(*c)) {
        let from = text[..i].char_indices().rev().nth(60).map_or(0, |(j, _)| j);
        panic!("{what}: raw {c:?} at byte {i}, after {:?}", &text[from..i]);
    }
}

/// Stdout and stderr of `out`, checked for raw characters; their concatenation.
fn safe_output(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_safe(&format!("{what} stdout"), &stdout);
    assert_safe(&format!("{what} stderr"), &stderr);
    format!("{stdout}{stderr}")
}

#[test]
fn hostile_server_text_reaches_terminals_and_report_md_only_escaped() {
    let sim = Sim::with_faults(
        PASSES_TWO_STEPS,
        Faults::default().with_hostile_text(HOSTILE),
    );
    let target = example("sd15_txt2img_lora_upscale", &[]);
    let b = bisect_workflow(&sim, &target, &[]);
    safe_output("bisect", &b.out);
    let runs = b.runs.to_str().unwrap();

    // report.md: the error message, node type, device name, version and pack all escaped.
    let md = b.read("report.md");
    assert_safe("report.md", &md);
    for visible in [
        "\\u001b",
        "pwned-title",
        "\\u0007",
        "\\u0000",
        "\\u202elave",
    ] {
        assert!(md.contains(visible), "{visible} not in report.md:\n{md}");
    }
    // The hostile pack is installed but not used by the workflow: counted in report.md (issue
    // #38), named (escaped) in report.json.
    assert!(md.contains("other installed pack"), "pack count:\n{md}");
    assert!(!md.contains("hostile-pack\u{1b}"), "pack name:\n{md}");
    let json = b.read("report.json");
    assert!(json.contains("hostile-pack"), "pack name:\n{json}");

    // The failing run: `show` prints its error and node.
    let failed = b
        .job()
        .runs
        .iter()
        .find(|r| r.failed())
        .unwrap_or_else(|| panic!("no failed run\n{}", b.text()));
    let show = cli(&["show", &failed.run_id, "--runs-dir", runs]);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show));
    let shown = safe_output("show", &show);
    assert!(shown.contains("\\u001b]0;pwned-title"), "{shown}");

    // With a second runs folder `runs` groups sessions by environment (device, version).
    let other = b.tmp.path().join("other-machine");
    std::fs::create_dir_all(&other).unwrap();
    for args in [
        vec!["report", b.session.session_id.as_str(), "--runs-dir", runs],
        vec![
            "runs",
            "--runs-dir",
            runs,
            "--runs-dir",
            other.to_str().unwrap(),
        ],
    ] {
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let all = safe_output(args[0], &out);
        assert!(all.contains("\\u001b"), "{args:?}: {all}");
    }

    // `--json` keeps the original text: JSON escapes the controls, the bidi override is
    // escaped on the way out, and both come back when parsed.
    let json = cli(&[
        "report",
        &b.session.session_id,
        "--runs-dir",
        runs,
        "--json",
    ]);
    let doc = safe_output("report --json", &json);
    let report: Value = serde_json::from_str(&doc).unwrap();
    assert!(report.to_string().contains("\\u001b]0;pwned-title"));
    assert!(
        report.to_string().contains('\u{202e}'),
        "the parsed JSON keeps the bidi override"
    );

    // `submit` prints the run's error; `diagnose` the pasted console of that run.
    let wf = write_workflow(b.tmp.path(), "again", &target);
    let submit = cli(&["--server", &sim.url(), "submit", wf.to_str().unwrap()]);
    let submitted = safe_output("submit", &submit);
    assert!(submitted.contains("\\u001b]0;pwned-title"), "{submitted}");
    let log = b.tmp.path().join("pasted.log");
    std::fs::write(
        &log,
        format!("!!! Exception during processing !!! {HOSTILE}Allocation on device\ntorch.OutOfMemoryError: {HOSTILE}CUDA out of memory. Tried to allocate 2.00 GiB\n"),
    )
    .unwrap();
    let diagnose = cli(&["diagnose", log.to_str().unwrap()]);
    let diagnosed = safe_output("diagnose", &diagnose);
    assert!(diagnosed.contains("\\u001b"), "{diagnosed}");
}

/// Secrets in the forms of issue #29 item 9, each with a numbered marker.
const SECRETS: &str = " token=tok-s3cret-1 Client(api_key='key-s3cret-2') GET \
     https://api.example.com/v1?key=qry-s3cret-3 in /root/ComfyUI mail ops-s3cret-5@example.org \
     https://hooks.slack.com/services/T1/B2/slk-s3cret-6 \
     https://discord.com/api/webhooks/1/dsc-s3cret-7 host='nas-s3cret-8' ";

#[test]
fn secrets_in_server_errors_console_and_inputs_stay_out_of_the_report_and_bundle() {
    let sim = Sim::with_faults(
        PASSES_TWO_STEPS,
        Faults::default().with_hostile_text(SECRETS),
    );
    let mut target = example("sd15_txt2img_lora_upscale", &[]);
    target["4"]["inputs"]["civitai_key"] = "civ-s3cret-9".into();
    target["4"]["inputs"]["webhook_url"] = "https://example.net/x/hook-s3cret-10".into();
    let b = bisect_workflow(&sim, &target, &[]);
    let failed = b
        .job()
        .runs
        .iter()
        .find(|r| r.failed())
        .unwrap_or_else(|| panic!("no failed run\n{}", b.text()));
    // The journal keeps what the server said (it stays on this machine).
    let raw = std::fs::read_to_string(b.dir.join(&failed.dir).join("run.json")).unwrap();
    for n in [1, 2, 3, 5, 6, 7, 8, 9, 10] {
        assert!(
            raw.contains(&format!("s3cret-{n}")),
            "marker {n} not recorded"
        );
    }
    let zip = b.tmp.path().join("issue.zip");
    let out = cli(&[
        "report",
        &b.session.session_id,
        "--runs-dir",
        b.runs.to_str().unwrap(),
        "--bundle",
        zip.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut files = vec![
        ("report.md".to_string(), b.read("report.md")),
        ("report.json".to_string(), b.read("report.json")),
    ];
    files.extend(unzip(&zip));
    assert!(
        files.iter().any(|(n, _)| n.ends_with("server.log")),
        "{files:?}"
    );
    for (name, text) in &files {
        assert!(!text.contains("s3cret"), "{name} leaks a secret:\n{text}");
        assert!(!text.contains("/root/"), "{name} keeps /root:\n{text}");
    }
    let json = &files[1].1;
    for placeholder in [
        "token=<secret>",
        "api_key='<secret>'",
        "?key=<secret>",
        "<home>/ComfyUI",
        "<email>",
    ] {
        assert!(
            json.contains(placeholder),
            "{placeholder} not in report.json"
        );
    }
}
