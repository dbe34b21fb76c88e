//! Bisection sessions against the in-tree simulator, one scenario per verdict, run the way a
//! user runs them (`comfy-bisect bisect …`, `resume`, `show`). The simulator's VRAM budget is
//! set from what each ladder step needs, so the first failure lands where a scenario wants it.

use crate::session_support::*;
use comfy_bisect_core::ladder::PlanOptions;
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{
    read_json, RunFile, RunRole, SessionState, StopReason, Verdict, RUN_EVENTS_FILE,
    RUN_RECORD_FILE, RUN_WORKFLOW_FILE,
};
use comfy_bisect_sim::Profile;
use serde_json::{json, Value};

const SD15: &str = "sd15_txt2img_lora_upscale";
const WAN: &str = "wan22_t2v_experts_lora_cache_rife";

/// SD1.5 example with batch 1 (so its ladder is resolution → lora → postprocess).
fn sd15() -> Value {
    example(SD15, &[("5", "batch_size", json!(1))])
}

fn wan() -> Value {
    example(WAN, &[])
}

/// The step of `increment` in the ladder of `workflow` (default plan options).
fn step_of(workflow: &Value, increment: &str) -> usize {
    ladder(workflow, &PlanOptions::default())
        .iter()
        .position(|(i, _)| i == increment)
        .unwrap_or_else(|| panic!("no {increment} step"))
}

fn steps_of(workflow: &Value) -> usize {
    ladder(workflow, &PlanOptions::default()).len()
}

// Simulated cards (MiB) that place the first failure of each example where a scenario needs
// it. The simulator is deterministic; a table of pass/fail per step and VRAM size is in
// docs/sessions.md ("Testing against the simulator").
/// SD1.5 (batch 1): minimal passes, the full resolution runs out while sampling.
const SD15_FAILS_AT_RESOLUTION: u64 = 1792;
/// SD1.5 (batch 1): the whole target fits.
const SD15_FITS: u64 = 16384;
/// SD1.5: less than the checkpoint's weights.
const SD15_TOO_SMALL: u64 = 512;
/// Wan 2.2: the minimal variant samples, then its VAE decode runs out.
const WAN_FAILS_AT_DECODE: u64 = 1024;
/// Wan 2.2: 2 frames fit, the target's frame count does not.
const WAN_FAILS_AT_FRAMES: u64 = 16384;
/// Wan 2.2: both experts fit, the LoRAs on top do not.
const WAN_FAILS_AT_LORA: u64 = 38912;
/// Wan 2.2: everything but the step cache fits; the cache grows while sampling.
const WAN_FAILS_AT_CACHE: u64 = 57344;

/// Bisects `workflow` on a simulator with `mib` of VRAM; returns the session and its folder.
fn run_scenario(
    workflow: &Value,
    mib: u64,
    extra: &[&str],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    comfy_bisect_core::session::SessionFile,
    String,
) {
    let sim = Sim::with_vram_mib(mib, 0.0);
    let b = bisect_workflow(&sim, workflow, extra);
    let out = b.text();
    (b.tmp, b.dir, b.session, out)
}

/// The first-failure verdict (panics with the session otherwise).
fn first_failure(
    session: &comfy_bisect_core::session::SessionFile,
    out: &str,
) -> (usize, String, Option<comfy_bisect_core::vocab::Stage>) {
    match &session.workflows[0].verdict {
        Some(Verdict::FirstFailure {
            step,
            increment,
            stage,
            ..
        }) => (*step, increment.clone(), *stage),
        other => panic!("expected a first failure, got {other:?}\n{out}"),
    }
}

/// Every run has its folder with the three files and an index line.
fn assert_journal_complete(
    dir: &std::path::Path,
    session: &comfy_bisect_core::session::SessionFile,
) {
    let runs_dir = dir.parent().unwrap();
    let idx = index::read_all(runs_dir).unwrap();
    let runs: Vec<_> = session.workflows.iter().flat_map(|w| &w.runs).collect();
    assert_eq!(idx.len(), runs.len());
    for run in runs {
        let run_dir = dir.join(&run.dir);
        let submitted =
            comfy_bisect_core::workflow::load_api_file(&run_dir.join(RUN_WORKFLOW_FILE)).unwrap();
        assert_eq!(submitted.sha256(), run.workflow_sha256);
        let file: RunFile = read_json(&run_dir.join(RUN_RECORD_FILE)).unwrap();
        assert_eq!(file.record.run_id, run.run_id);
        assert_eq!(file.record.prompt_id, run.run_id);
        let events = std::fs::read_to_string(run_dir.join(RUN_EVENTS_FILE)).unwrap();
        assert!(
            events.lines().count() > 0,
            "no events in {}",
            run_dir.display()
        );
        assert!(idx
            .iter()
            .any(|e| e.run_id == run.run_id && e.workflow_sha256 == run.workflow_sha256));
    }
    assert!(dir.join("report.md").is_file(), "report.md missing");
    assert!(dir.join("report.json").is_file(), "report.json missing");
}

#[test]
fn failure_at_resolution() {
    failure_at_resolution_on(Profile::V0364);
}

/// The same card on the 2026 profile: dynamic VRAM streams weights, but the full resolution's
/// activations do not fit either way, so the first failure and its stage are the same.
#[test]
fn failure_at_resolution_on_2026() {
    failure_at_resolution_on(Profile::Y2026);
}

fn failure_at_resolution_on(profile: Profile) {
    let sim = Sim::on(profile, SD15_FAILS_AT_RESOLUTION, 0.0);
    let b = bisect_workflow(&sim, &sd15(), &[]);
    let (dir, s, out) = (b.dir.clone(), b.session.clone(), b.text());
    let (step, inc, stage) = first_failure(&s, &out);
    assert_eq!(
        (step, inc.as_str()),
        (step_of(&sd15(), "resolution"), "resolution"),
        "{out}"
    );
    assert_eq!(stage.map(|s| s.as_str()), Some("sample_first"), "{out}");
    assert!(
        out.contains("first failure at increment resolution"),
        "{out}"
    );
    assert_eq!(s.state, SessionState::Done);
    assert_journal_complete(&dir, &s);
    assert_runs_on(profile, &dir, &s);
}

#[test]
fn failure_at_frames() {
    let (_t, dir, s, out) = run_scenario(&wan(), WAN_FAILS_AT_FRAMES, &[]);
    let (step, inc, _) = first_failure(&s, &out);
    assert_eq!(
        (step, inc.as_str()),
        (step_of(&wan(), "frames"), "frames"),
        "{out}"
    );
    assert_journal_complete(&dir, &s);
}

#[test]
fn failure_at_lora() {
    let (_t, _dir, s, out) = run_scenario(&wan(), WAN_FAILS_AT_LORA, &[]);
    let (step, inc, _) = first_failure(&s, &out);
    assert_eq!(
        (step, inc.as_str()),
        (step_of(&wan(), "lora"), "lora"),
        "{out}"
    );
}

#[test]
fn failure_at_cache_is_mid_sampling() {
    let (_t, _dir, s, out) = run_scenario(&wan(), WAN_FAILS_AT_CACHE, &[]);
    let (step, inc, stage) = first_failure(&s, &out);
    assert_eq!(
        (step, inc.as_str()),
        (step_of(&wan(), "cache"), "cache"),
        "{out}"
    );
    assert_eq!(stage.map(|s| s.as_str()), Some("sample_middle"), "{out}");
}

/// Wan 2.2 with a heavy frame interpolation (RIFE ×100, nothing released until the end, fps
/// restored to 1): on a 64 GiB card every sampling step fits, the interpolation does not.
const WAN_HEAVY_RIFE_FAILS_AT_POSTPROCESS: u64 = 65536;

/// Post-processing as the first failing increment: sampling and decode pass at full size, the
/// frame interpolation added last runs out of memory.
#[test]
fn failure_at_postprocess() {
    let heavy = example(
        WAN,
        &[
            ("17", "multiplier", json!(100)),
            ("17", "clear_cache_after_n_frames", json!(1000)),
            ("18", "fps", json!(100.0)),
        ],
    );
    let (_t, _dir, s, out) = run_scenario(&heavy, WAN_HEAVY_RIFE_FAILS_AT_POSTPROCESS, &[]);
    let (step, inc, stage) = first_failure(&s, &out);
    assert_eq!(
        (step, inc.as_str()),
        (step_of(&heavy, "postprocess"), "postprocess"),
        "{out}"
    );
    assert_eq!(stage.map(|s| s.as_str()), Some("postprocess"), "{out}");
}

/// SD1.5 pixel-space hires fix (512 → upscale model ×4 → 1024 → encode → second KSampler):
/// the first pass fits at full size, the second pass at 1024×1024 does not.
const SD15_HIRES_FAILS_AT_SECOND_PASS: u64 = 2048;

/// A hires fix through pixels is post-processing: the minimal variant runs the first pass only,
/// `resolution` brings the first pass to its size, and the second pass failing is reported at
/// `postprocess` with the second sampler as the failing node and named in the report.
#[test]
fn hires_second_pass_failure_is_postprocess() {
    let hires = example("sd15_hires_fix_pixel", &[]);
    let ladder: Vec<String> = ladder(&hires, &PlanOptions::default())
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ladder, ["minimal", "resolution", "postprocess"]);
    let (_t, dir, s, out) = run_scenario(&hires, SD15_HIRES_FAILS_AT_SECOND_PASS, &[]);
    let (step, inc, stage) = first_failure(&s, &out);
    assert_eq!((step, inc.as_str()), (2, "postprocess"), "{out}");
    assert_eq!(stage.map(|s| s.as_str()), Some("sample_first"), "{out}");
    // The command line and the report's verdict name the hires pass, not `postprocess` alone
    // (issue #28).
    assert!(
        out.contains(
            "first failure at increment postprocess — hires pass: KSampler #11 at 1024×1024 (step 2)"
        ),
        "{out}"
    );
    let failed = s.workflows[0]
        .runs
        .iter()
        .find(|r| r.step == 2 && r.failed())
        .expect("the postprocess run failed");
    let diagnosis = failed.diagnosis.as_ref().expect("diagnosed");
    assert_eq!(diagnosis.node_id.as_deref(), Some("11"), "{out}");
    assert_eq!(diagnosis.node_type.as_deref(), Some("KSampler"));
    // The runs before it passed: the first pass alone, then at its full size.
    for k in [0, 1] {
        assert!(
            s.workflows[0]
                .runs
                .iter()
                .any(|r| r.step == k && r.passed()),
            "step {k} did not pass\n{out}"
        );
    }
    // Markdown code spans aside.
    let report = std::fs::read_to_string(dir.join("report.md"))
        .unwrap()
        .replace('`', "");
    assert!(
        report.contains("hires pass: KSampler #11 at 1024×1024"),
        "{report}"
    );
    assert!(
        report.contains("The failing node: KSampler #11"),
        "{report}"
    );
    // The commands to reproduce (report.json) hold the server's own address (a loopback one is
    // not redacted).
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let runs = json["workflows"][0]["attachments"]["runs"]
        .as_array()
        .unwrap();
    assert!(
        runs.iter().all(|r| r["reproduce"]
            .as_str()
            .is_some_and(|c| c.starts_with("comfy-bisect submit ")
                && c.contains("--server http://127.0.0.1:"))),
        "{runs:?}"
    );
    assert!(
        report.contains(
"First failure when adding **postprocess** — hires pass: KSampler #11 at 1024×1024 (step 2 of 2)"
        ),
        "{report}"
    );
    assert_journal_complete(&dir, &s);
}

/// The same hires fix saved as a UI file (ComfyUI's "Save") bisects to the same verdict.
#[test]
fn hires_second_pass_failure_is_postprocess_from_the_ui_file() {
    hires_from_the_ui_file_on(Profile::V0364);
}

/// The UI file's session on the 2026 profile: the second pass's activations do not fit with
/// weights streamed either, so the verdict is the same.
#[test]
fn hires_second_pass_failure_is_postprocess_from_the_ui_file_on_2026() {
    hires_from_the_ui_file_on(Profile::Y2026);
}

fn hires_from_the_ui_file_on(profile: Profile) {
    let text = std::fs::read_to_string("workflows/sd15_hires_fix_pixel.ui.json").unwrap();
    let ui: Value = serde_json::from_str(&text).unwrap();
    let sim = Sim::on(profile, SD15_HIRES_FAILS_AT_SECOND_PASS, 0.0);
    let b = bisect_workflow(&sim, &ui, &[]);
    let (dir, s, out) = (b.dir.clone(), b.session.clone(), b.text());
    let (step, inc, _) = first_failure(&s, &out);
    assert_eq!((step, inc.as_str()), (2, "postprocess"), "{out}");
    let failed = s.workflows[0]
        .runs
        .iter()
        .find(|r| r.step == 2 && r.failed())
        .expect("the postprocess run failed");
    let diagnosis = failed.diagnosis.as_ref().expect("diagnosed");
    assert_eq!(diagnosis.node_id.as_deref(), Some("11"), "{out}");
    // Markdown code spans aside.
    let report = std::fs::read_to_string(dir.join("report.md"))
        .unwrap()
        .replace('`', "");
    assert!(
        report.contains("hires pass: KSampler #11 at 1024×1024"),
        "{report}"
    );
    assert_runs_on(profile, &dir, &s);
}

/// A decode-stage failure. (With the examples' ladders, the simulator's memory model never
/// runs out after sampling once sampling fits, so this lands on the minimal variant.)
#[test]
fn failure_at_decode_stage() {
    let (_t, _dir, s, out) = run_scenario(&wan(), WAN_FAILS_AT_DECODE, &[]);
    match &s.workflows[0].verdict {
        Some(Verdict::MinimalFails { stage, .. }) => {
            assert_eq!(stage.map(|s| s.as_str()), Some("decode"), "{out}")
        }
        other => panic!("{other:?}\n{out}"),
    }
    let failed = &s.workflows[0].runs[0];
    assert_eq!(failed.diagnosis.as_ref().unwrap().kind.as_str(), "cuda_oom");
}

#[test]
fn minimal_variant_already_fails_at_load() {
    let (_t, _dir, s, out) = run_scenario(&sd15(), SD15_TOO_SMALL, &[]);
    match &s.workflows[0].verdict {
        Some(Verdict::MinimalFails { stage, .. }) => {
            assert_eq!(stage.map(|s| s.as_str()), Some("load"), "{out}")
        }
        other => panic!("{other:?}\n{out}"),
    }
    assert_eq!(s.workflows[0].runs.len(), 1);
    assert!(out.contains("minimal variant already fails"), "{out}");
}

#[test]
fn target_passes_could_not_reproduce() {
    let (_t, _dir, s, out) = run_scenario(&sd15(), SD15_FITS, &[]);
    assert!(
        matches!(
            s.workflows[0].verdict,
            Some(Verdict::CouldNotReproduce { .. })
        ),
        "{out}"
    );
    let roles: Vec<RunRole> = s.workflows[0].runs.iter().map(|r| r.role).collect();
    assert_eq!(roles, vec![RunRole::Minimal, RunRole::Target]);
}

#[test]
fn binary_strategy_stays_within_the_run_bound() {
    let n = steps_of(&wan()) - 1;
    let bound = ((n + 1) as f64).log2().ceil() as usize + 2;
    for (increment, mib) in [
        ("frames", WAN_FAILS_AT_FRAMES),
        ("cache", WAN_FAILS_AT_CACHE),
    ] {
        let (_t, _dir, s, out) = run_scenario(&wan(), mib, &["--strategy", "binary"]);
        let runs = s.workflows[0].runs.len();
        assert!(
            runs <= bound,
            "{runs} runs > bound {bound} on {n} steps\n{out}"
        );
        match &s.workflows[0].verdict {
            Some(Verdict::FirstFailure { step, not_run, .. }) => {
                assert_eq!(*step, step_of(&wan(), increment), "{out}");
                for k in not_run {
                    assert!(!s.workflows[0].runs.iter().any(|r| r.step == *k));
                }
            }
            other => panic!("{other:?}\n{out}"),
        }
    }
}

#[test]
fn server_crash_mid_run_then_resume() {
    server_crash_mid_run_then_resume_on(Profile::V0364);
}

/// On the 2026 profile the crash is found through the jobs API and resumed the same way.
#[test]
fn server_crash_mid_run_then_resume_on_2026() {
    server_crash_mid_run_then_resume_on(Profile::Y2026);
}

fn server_crash_mid_run_then_resume_on(profile: Profile) {
    let sim = Sim::on(profile, SD15_FAILS_AT_RESOLUTION, 0.0);
    // The first prompt that starts executing (the minimal variant) takes the server down.
    sim.set_faults(comfy_bisect_sim::Faults::default().with_crash_mid_run());
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "target", &sd15());
    let runs = tmp.path().join("runs");
    let out = bisect(
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--wait-server", "1s"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let (_, s) = only_session(&runs);
    assert!(
        matches!(
            s.state,
            SessionState::Stopped {
                reason: StopReason::ServerLost,
                ..
            }
        ),
        "{:?}",
        s.state
    );
    let lost = &s.workflows[0].runs[0];
    assert_eq!(lost.outcome.as_ref().unwrap().name(), "server_lost");

    sim.restart();
    let out = cli(&[
        "resume",
        "-q",
        "--runs-dir",
        runs.to_str().unwrap(),
        &s.session_id,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (dir, s) = only_session(&runs);
    // A crash decides nothing alone (--confirm-crashes 1): the crashed minimal variant is run
    // again on the restarted server, passes ("crash not reproduced"), and the search goes on.
    let job = &s.workflows[0];
    let confirm = &job.runs[1];
    assert_eq!(confirm.role, RunRole::Confirm);
    assert_eq!(confirm.confirms.as_deref(), Some(lost.run_id.as_str()));
    assert!(confirm.passed(), "{}", text(&out));
    match &job.verdict {
        Some(Verdict::FirstFailure { step, .. }) => {
            assert_eq!(*step, step_of(&sd15(), "resolution"))
        }
        other => panic!("{other:?}"),
    }
    assert_journal_complete(&dir, &s);
    assert_runs_on(profile, &dir, &s);
}

#[test]
fn show_finds_a_run_by_a_unique_prefix() {
    let (tmp, _dir, s, out) = run_scenario(&sd15(), SD15_FAILS_AT_RESOLUTION, &[]);
    let runs = tmp.path().join("runs");
    let run = &s.workflows[0].runs[1];
    let prefix = &run.run_id[..8];
    let shown = cli(&["show", prefix, "--runs-dir", runs.to_str().unwrap()]);
    assert_eq!(shown.status.code(), Some(0), "{}\n{out}", text(&shown));
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(stdout.contains(&run.run_id), "{stdout}");
    assert!(
        stdout.contains(&format!("step:      {} {}", run.step, run.increment)),
        "{stdout}"
    );
    let json = cli(&[
        "show",
        prefix,
        "--json",
        "--runs-dir",
        runs.to_str().unwrap(),
    ]);
    let file: RunFile = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(file.entry.run_id, run.run_id);
    // Every run id starts with a hex digit: a 0-length prefix is refused, an unknown one too.
    let none = cli(&["show", "zzzz", "--runs-dir", runs.to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(2));
    let listed = cli(&["runs", "--runs-dir", runs.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("first failure at increment resolution")
    );
}

#[test]
fn preflight_lists_what_to_install_and_runs_nothing() {
    let sim = Sim::with_vram_mib(24 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let mut broken = sd15();
    broken["4"]["inputs"]["ckpt_name"] = json!("not_on_this_server.safetensors");
    broken["99"] = json!({"class_type": "SomeCustomNode", "inputs": {"image": ["8", 0]}});
    broken["98"] =
        json!({"class_type": "SaveImage", "inputs": {"images": ["99", 0], "filename_prefix": "x"}});
    let wf = write_workflow(tmp.path(), "broken", &broken);
    let runs = tmp.path().join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("SomeCustomNode"), "{stderr}");
    assert!(
        stderr.contains("checkpoints/not_on_this_server.safetensors"),
        "{stderr}"
    );
    let (_, s) = only_session(&runs);
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::PreflightFailed { .. })
    ));
    assert!(s.workflows[0].runs.is_empty());
    assert!(
        sim.handle().submitted_prompts().is_empty(),
        "nothing may reach the GPU"
    );
}

#[test]
fn a_queue_goes_on_past_a_workflow_that_fails_preflight() {
    // Issue #38: one workflow with a missing model no longer stops the overnight queue; it is
    // skipped with its missing list and the next workflow runs.
    let sim = Sim::with_vram_mib(24 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let mut broken = sd15();
    broken["4"]["inputs"]["ckpt_name"] = json!("not_on_this_server.safetensors");
    let broken = write_workflow(tmp.path(), "broken", &broken);
    let good = write_workflow(tmp.path(), "good", &sd15());
    let runs = tmp.path().join("runs");
    let out = bisect(
        &sim.url(),
        &runs,
        &[broken.to_str().unwrap(), good.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("checkpoints/not_on_this_server.safetensors")
            && stderr.contains("broken: skipped (preflight failed); the other workflow runs"),
        "{}",
        text(&out)
    );
    assert!(!stderr.contains("runs the others"), "{stderr}");
    let (_, s) = only_session(&runs);
    assert!(matches!(s.state, SessionState::Done), "{:?}", s.state);
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::PreflightFailed { .. })
    ));
    assert!(s.workflows[0].runs.is_empty());
    assert!(!s.workflows[1].runs.is_empty(), "{}", text(&out));
    assert!(s.workflows[1].verdict.is_some(), "{}", text(&out));
    // A skipped workflow makes the exit status 1 (the README's table).
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

#[test]
fn unreachable_server_exits_3_with_the_url() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "target", &sd15());
    // A port nobody listens on: bind, take the port, drop the listener.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = bisect(&url, &tmp.path().join("runs"), &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&url));
}

#[test]
fn controls_run_each_later_increment_alone() {
    let (_t, dir, s, out) = run_scenario(&wan(), WAN_FAILS_AT_FRAMES, &["--controls"]);
    let frames = step_of(&wan(), "frames");
    let job = &s.workflows[0];
    let controls: Vec<usize> = job
        .runs
        .iter()
        .filter(|r| r.role == RunRole::Control)
        .map(|r| r.step)
        .collect();
    let expected: Vec<usize> = (frames + 1..job.steps.len()).collect();
    assert_eq!(controls, expected, "{out}");
    assert!(matches!(job.verdict, Some(Verdict::FirstFailure { step, .. }) if step == frames));
    for c in &job.controls {
        assert!(dir.join(&c.file).is_file());
    }
    assert_journal_complete(&dir, &s);
}

#[test]
fn component_hashes_of_model_files_under_models_dir() {
    let tmp_models = tempfile::tempdir().unwrap();
    let ckpt = sd15()["4"]["inputs"]["ckpt_name"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::create_dir_all(tmp_models.path().join("checkpoints")).unwrap();
    std::fs::write(tmp_models.path().join("checkpoints").join(&ckpt), b"abc").unwrap();
    let models = tmp_models.path().to_str().unwrap().to_string();
    let (_t, dir, s, out) = run_scenario(&sd15(), SD15_FITS, &["--models-dir", &models]);
    // The target run references every loader (LoRA and upscale model too).
    let run = s.workflows[0]
        .runs
        .iter()
        .find(|r| r.role == RunRole::Target)
        .unwrap();
    let file: RunFile = read_json(&dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap();
    let c = file
        .component_hashes
        .iter()
        .find(|c| c.file == ckpt)
        .unwrap_or_else(|| panic!("{:?}\n{out}", file.component_hashes));
    // sha256("abc")
    assert_eq!(
        c.sha256.as_deref(),
        Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(c.autov2.as_deref(), Some("ba7816bf8f"));
    // The LoRA is not under the roots: recorded as unhashed with the reason, never guessed.
    assert!(file
        .component_hashes
        .iter()
        .any(|c| c.sha256.is_none() && c.reason.is_some()));
    assert!(file.node_hashes.len() >= file.component_hashes.len());
    let idx = index::read_all(dir.parent().unwrap()).unwrap();
    let line = idx.iter().find(|e| e.run_id == run.run_id).unwrap();
    assert_eq!(line.component_hashes, file.component_hashes);
}

/// Issue #28: a run that ran out of device memory is shown at what its OOM message proves it
/// needed, not at the 500 ms sample (which misses the spike right before the OOM and drew the
/// failing bar below the last passing one).
#[test]
fn an_oom_runs_bar_is_what_its_message_proves_it_needed() {
    let (_t, dir, s, out) = run_scenario(&wan(), WAN_FAILS_AT_FRAMES, &[]);
    let (step, _, _) = first_failure(&s, &out);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let ladder = report["workflows"][0]["ladder"].as_array().unwrap();
    let failing = ladder.iter().find(|r| r["step"] == step).unwrap();
    let needed = failing["oom_needed_mib"]
        .as_f64()
        .expect("the OOM's figures");
    assert_eq!(
        failing["oom_needed_from"], "in use by the process + requested",
        "{failing}"
    );
    // More than the card has free: more than the device holds minus what was in use before.
    let total = report["workflows"][0]["vram"]["total_mib"]
        .as_f64()
        .unwrap();
    assert!(needed > total * 0.5, "{needed} of {total}");
    if let Some(sampled) = failing["peak_vram_mib"].as_f64() {
        assert!(needed >= sampled, "{needed} < sampled {sampled}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("needed** (OOM message)"), "{md}");
}
