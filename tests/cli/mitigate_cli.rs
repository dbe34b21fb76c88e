//! `bisect --mitigate` and `mitigate SESSION` end to end on the simulator: the controls for the
//! failing stage run on the target, the "first" ones first; controls for another stage are not
//! run and say why; server controls without `--launch-cmd` are listed as not run.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{
    read_json, MitigationState, MitigationsFile, Verdict, MITIGATIONS_FILE,
};
use comfy_bisect_core::vocab::Stage;
use serde_json::{json, Value};

/// SD1.5 at 1024×1024, batch 1: on 3 GiB the sampling fits and the VAE decode only passes
/// through ComfyUI's tiled fallback (a failure under --strict); on 2.5 GiB sampling runs out.
fn sd15_1024() -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "random_sd15.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a lighthouse", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
        "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 4, "cfg": 7.0, "sampler_name": "euler",
              "scheduler": "normal", "denoise": 1.0, "model": ["4", 0], "positive": ["6", 0],
              "negative": ["7", 0], "latent_image": ["5", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "x", "images": ["8", 0]}}
    })
}
const DECODE_NEEDS_FALLBACK: u64 = 3072;
const SAMPLING_RUNS_OUT: u64 = 2560;

fn mitigations(b: &Bisected) -> MitigationsFile {
    read_json(&b.dir.join(MITIGATIONS_FILE)).unwrap_or_else(|e| panic!("{e}\n{}", b.text()))
}

#[test]
fn a_decode_failure_is_mitigated_by_tiled_decode_first() {
    let sim = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let b = bisect_workflow(&sim, &sd15_1024(), &["--strict", "--mitigate"]);
    let m = mitigations(&b);
    let w = &m.workflows[0];
    assert_eq!(w.stage, Stage::Decode, "{}", b.text());
    let first = &w.controls[0];
    assert_eq!(first.control, "tiled-decode");
    assert_eq!(first.state, MitigationState::Done, "{}", b.text());
    let judged = first.judged.as_ref().unwrap();
    assert!(judged.passed, "{judged:?}\n{}", b.text());
    assert!(
        judged.degenerate.is_empty() && judged.unchecked.is_empty(),
        "{judged:?}"
    );
    // A normal run: its folder, record, the workflow it ran, the index line.
    let run = first.run.as_ref().unwrap();
    let run_dir = b.dir.join(&run.dir);
    assert!(run_dir.join("run.json").is_file());
    let ran: Value = read_json(&run_dir.join("workflow.json")).unwrap();
    assert_eq!(ran["8"]["class_type"], "VAEDecodeTiled");
    let index = std::fs::read_to_string(b.runs.join("index.jsonl")).unwrap();
    assert!(index.contains(&run.run_id) && index.contains("\"mitigation\""));
    // The bisect's exit status is the mitigations': a control passed.
    assert_eq!(b.out.status.code(), Some(0), "{}", b.text());
    assert!(
        b.text().contains("tiled-decode: passed: complete product"),
        "{}",
        b.text()
    );
}

#[test]
fn a_sampling_failure_does_not_run_the_decode_controls() {
    let sim = Sim::with_vram_mib(SAMPLING_RUNS_OUT, 0.0);
    let b = bisect_workflow(&sim, &sd15_1024(), &["--mitigate"]);
    assert!(
        matches!(b.job().verdict, Some(Verdict::FirstFailure { .. })),
        "{}",
        b.text()
    );
    let m = mitigations(&b);
    let w = &m.workflows[0];
    assert!(w.stage.as_str().starts_with("sample"), "{}", b.text());
    let tiled = w
        .controls
        .iter()
        .find(|c| c.control == "tiled-decode")
        .unwrap();
    match &tiled.state {
        MitigationState::NotApplicable { reason } => {
            assert!(reason.starts_with("targets decode"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(tiled.run.is_none());
    // A server control is listed, not silently skipped.
    let reserve = w
        .controls
        .iter()
        .find(|c| c.control == "reserve-vram")
        .unwrap();
    assert_eq!(
        reserve.state,
        MitigationState::NotRun {
            reason: "needs --launch-cmd (a server launch change)".into()
        }
    );
    assert!(
        b.text()
            .contains("reserve-vram: not run: needs --launch-cmd"),
        "{}",
        b.text()
    );
}

/// `--server URL mitigate SESSION --max-mitigations 0`: the session's controls are planned and
/// recorded, none runs (exit 1).
fn mitigate_with_no_budget(url: &str, session: &str, runs: &str) -> std::process::Output {
    cli(&[
        "--server",
        url,
        "mitigate",
        session,
        "--runs-dir",
        runs,
        "-q",
        "--max-mitigations",
        "0",
    ])
}

#[test]
fn mitigate_on_an_existing_session_is_resumable_and_keeps_to_its_budget() {
    let sim = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let b = bisect_workflow(&sim, &sd15_1024(), &["--strict"]);
    assert!(!b.dir.join(MITIGATIONS_FILE).exists());
    let session = b.session.session_id.clone();
    let runs = b.runs.to_str().unwrap();
    let url = sim.url();
    let out = mitigate_with_no_budget(&url, &session, runs);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let m: MitigationsFile = read_json(&b.dir.join(MITIGATIONS_FILE)).unwrap();
    let tiled = &m.workflows[0].controls[0];
    assert_eq!(
        tiled.state,
        MitigationState::NotRun {
            reason: "--max-mitigations 0 reached".into()
        }
    );
    // Again without the budget: what did not run runs now.
    let out = cli(&[
        "--server",
        &url,
        "mitigate",
        &session,
        "--runs-dir",
        runs,
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let m: MitigationsFile = read_json(&b.dir.join(MITIGATIONS_FILE)).unwrap();
    assert_eq!(m.workflows[0].controls[0].state, MitigationState::Done);
    let again = cli(&[
        "--server",
        &url,
        "mitigate",
        &session,
        "--runs-dir",
        runs,
        "-q",
    ]);
    let m2: MitigationsFile = read_json(&b.dir.join(MITIGATIONS_FILE)).unwrap();
    assert_eq!(m, m2, "nothing runs twice\n{}", text(&again));
}

#[test]
fn mitigate_server_moves_the_session_before_or_after_the_subcommand() {
    // Issue #38 item 5: the session ran on one server; its mitigations run on another (a port
    // that changed after a reboot), given before or after the subcommand.
    let first = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let b = bisect_workflow(&first, &sd15_1024(), &["--strict"]);
    let session = b.session.session_id.clone();
    let runs = b.runs.to_str().unwrap();
    let on_first = first.handle().submitted_prompts().len();
    let second = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let third = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    // Before the subcommand (nothing runs: a budget of 0).
    let out = mitigate_with_no_budget(&second.url(), &session, runs);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let moved: comfy_bisect_core::session::SessionFile =
        read_json(&b.dir.join("session.json")).unwrap();
    assert_eq!(moved.server, second.url(), "{}", text(&out));
    // After it: the controls run on the third server, none on the others.
    let out = cli(&[
        "mitigate",
        &session,
        "--server",
        &third.url(),
        "--runs-dir",
        runs,
        "-q",
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!(
            "server: the session moves to {} (it ran on {})",
            third.url(),
            second.url()
        )),
        "{all}"
    );
    assert!(!third.handle().submitted_prompts().is_empty(), "{all}");
    assert!(second.handle().submitted_prompts().is_empty(), "{all}");
    assert_eq!(first.handle().submitted_prompts().len(), on_first, "{all}");
    let m: MitigationsFile = read_json(&b.dir.join(MITIGATIONS_FILE)).unwrap();
    assert_eq!(m.workflows[0].controls[0].state, MitigationState::Done);
    assert_eq!(m.server.len(), 2, "{:?}", m.server);
    assert!(m.server[0].contains(&format!("moves to {}", second.url())));
    // The journal records both moves, in order; the report names them.
    let s: comfy_bisect_core::session::SessionFile =
        read_json(&b.dir.join("session.json")).unwrap();
    assert_eq!(s.server, third.url());
    let moves: Vec<(&str, &str)> = s
        .server_moves
        .iter()
        .map(|m| (m.from.as_str(), m.to.as_str()))
        .collect();
    let (a, b2, c) = (first.url(), second.url(), third.url());
    assert_eq!(
        moves,
        vec![(a.as_str(), b2.as_str()), (b2.as_str(), c.as_str())]
    );
    let report = cli(&["report", "--no-redact", "--runs-dir", runs, &session]);
    assert!(
        text(&report).contains(&format!("moved from {b2} to {c} at ")),
        "{}",
        text(&report)
    );
}

/// Flux (fp16 weights, 22 GB) at 2048×2048 on 20 GiB: sampling runs out; with fp8 weights the
/// same target fits.
fn flux_2048() -> Value {
    json!({
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-dev.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors", "clip_name2": "t5xxl_fp8_e4m3fn_scaled.safetensors", "type": "flux"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["2", 0]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 2048, "height": 2048, "batch_size": 1}},
        "6": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["4", 0], "negative": ["4", 0], "latent_image": ["5", 0],
              "seed": 1, "steps": 4, "cfg": 1.0, "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0}},
        "7": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["3", 0]}},
        "8": {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": "out"}}
    })
}
const FLUX_SAMPLING_RUNS_OUT: u64 = 20480;

#[test]
fn a_sampling_failure_passes_with_fp8_weights_and_never_runs_tiled_decode() {
    let sim = Sim::with_vram_mib(FLUX_SAMPLING_RUNS_OUT, 0.0);
    let b = bisect_workflow(&sim, &flux_2048(), &["--mitigate"]);
    let m = mitigations(&b);
    let w = &m.workflows[0];
    assert!(w.stage.as_str().starts_with("sample"), "{}", b.text());
    let fp8 = w
        .controls
        .iter()
        .find(|c| c.control == "fp8-weights")
        .unwrap();
    assert_eq!(fp8.state, MitigationState::Done, "{}", b.text());
    assert!(fp8.judged.as_ref().unwrap().passed, "{fp8:?}");
    let ran: Value = read_json(
        &b.dir
            .join(&fp8.run.as_ref().unwrap().dir)
            .join("workflow.json"),
    )
    .unwrap();
    assert_eq!(ran["1"]["inputs"]["weight_dtype"], "fp8_e4m3fn");
    let tiled = w
        .controls
        .iter()
        .find(|c| c.control == "tiled-decode")
        .unwrap();
    assert!(tiled.run.is_none() && matches!(tiled.state, MitigationState::NotApplicable { .. }));
    // Every run made is a control for the failing stage.
    for c in w.controls.iter().filter(|c| c.run.is_some()) {
        assert!(c.stages.contains(&w.stage), "{c:?}");
    }
}

#[test]
fn a_flat_product_is_not_a_pass() {
    let sim = Sim::with_faults(
        DECODE_NEEDS_FALLBACK,
        comfy_bisect_sim::Faults::default().with_flat_product(),
    );
    let b = bisect_workflow(&sim, &sd15_1024(), &["--strict", "--mitigate"]);
    let m = mitigations(&b);
    let tiled = &m.workflows[0].controls[0];
    assert_eq!(tiled.control, "tiled-decode");
    let judged = tiled.judged.as_ref().unwrap();
    assert!(!judged.passed, "{judged:?}");
    assert!(
        judged.outcome.starts_with("failed: degenerate product"),
        "{judged:?}"
    );
    assert!(
        judged.degenerate[0].contains("one flat colour"),
        "{judged:?}"
    );
    assert_eq!(b.out.status.code(), Some(1), "{}", b.text());
}

/// The simulator a test started as a process (and whatever relaunched it on that port), stopped
/// when the test ends, also on a panic.
struct SimProcess {
    url: String,
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        if let comfy_bisect_core::host::Located::Found(p) =
            comfy_bisect_core::host::process::locate(&self.url)
        {
            // Never this test process (its in-process simulators listen on other ports; one
            // on this port would mean the launched one never started).
            if p.pid == std::process::id() {
                return;
            }
            let _ = std::process::Command::new("kill")
                .arg(p.pid.to_string())
                .status();
        }
    }
}

/// `/system_stats` `argv` of the server at `url`, polled (every 50 ms, at most 60 s) until it
/// answers.
fn argv_of(url: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client =
        comfy_bisect_core::comfy::Client::new(url, comfy_bisect_core::comfy::ExtraHeaders::new())
            .unwrap();
    for _ in 0..1200 {
        if let Ok(stats) = rt.block_on(client.system_stats()) {
            return stats.system.argv;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no simulator answered at {url}");
}

#[test]
fn a_server_control_runs_through_launch_cmd_and_the_server_is_put_back() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let bin = env!("CARGO_BIN_EXE_comfy-bisect");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sim.log");
    let start = format!(
        "exec '{bin}' simulate --port {port} --vram {SAMPLING_RUNS_OUT}MiB --time-scale 0 --cache-classic >>'{}' 2>&1 </dev/null",
        log.display()
    );
    let _sim = SimProcess { url: url.clone() };
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{start} &"))
        .status()
        .unwrap();
    let before = argv_of(&url);
    assert!(before.iter().any(|a| a == "--cache-classic"), "{before:?}");
    let wf = write_workflow(tmp.path(), "target", &sd15_1024());
    let runs = tmp.path().join("runs");
    let template = format!(
        "exec '{bin}' simulate --port {port} --vram {SAMPLING_RUNS_OUT}MiB --time-scale 0 {{args}} >>'{}' 2>&1 </dev/null",
        log.display()
    );
    let out = bisect(
        &url,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--mitigate",
            "--max-mitigations",
            "1",
            "--launch-cmd",
            &template,
        ],
    );
    let (dir, _) = only_session(&runs);
    let m: MitigationsFile =
        read_json(&dir.join(MITIGATIONS_FILE)).unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    let reserve = m.workflows[0]
        .controls
        .iter()
        .find(|c| c.control == "reserve-vram")
        .unwrap();
    assert_eq!(reserve.state, MitigationState::Done, "{}", text(&out));
    // The control ran on a server launched with its flag, the original memory flags kept.
    let run: Value = read_json(
        &dir.join(&reserve.run.as_ref().unwrap().dir)
            .join("run.json"),
    )
    .unwrap();
    let argv: Vec<String> = serde_json::from_value(run["environment"]["argv"].clone()).unwrap();
    assert!(
        argv.windows(2).any(|w| w == ["--reserve-vram", "2"])
            && argv.iter().any(|a| a == "--cache-classic"),
        "{argv:?}"
    );
    // Then the server is back as it was.
    let after = argv_of(&url);
    assert_eq!(after, before, "{}", text(&out));
    assert!(
        text(&out).contains("put the server back as it was"),
        "{}",
        text(&out)
    );
}

/// SIGTERM while a control runs: the run is interrupted and journaled, the pass stops (exit
/// 130), and the next `mitigate` runs that control again and judges it.
#[test]
#[cfg(unix)]
fn sigterm_during_a_control_then_mitigate_runs_it_again() {
    // Slow enough that a control's run is in flight for a while.
    let sim = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.05);
    let tmp = tempfile::tempdir().unwrap();
    let mut workflow = sd15_1024();
    workflow["3"]["inputs"]["steps"] = json!(100);
    let wf = write_workflow(tmp.path(), "target", &workflow);
    let runs = tmp.path().join("runs");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "--server",
            &sim.url(),
            "bisect",
            "-q",
            "--strict",
            "--mitigate",
            "--runs-dir",
        ])
        .arg(&runs)
        .arg(&wf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dir = wait_for_journal(&mut child, &runs, |s| {
        let dir = runs.join(&s.session_id);
        let m: MitigationsFile = read_json(&dir.join(MITIGATIONS_FILE)).ok()?;
        (m.workflows.first()?.controls.first()?.state == MitigationState::InFlight).then_some(dir)
    });
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130));
    let m: MitigationsFile = read_json(&dir.join(MITIGATIONS_FILE)).unwrap();
    let tiled = &m.workflows[0].controls[0];
    assert_eq!(tiled.state, MitigationState::Pending);
    let interrupted = tiled.run.as_ref().unwrap();
    assert!(dir.join(&interrupted.dir).join("run.json").is_file());
    let session = dir.file_name().unwrap().to_str().unwrap().to_string();
    let out = cli(&[
        "--server",
        &sim.url(),
        "mitigate",
        &session,
        "--runs-dir",
        runs.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let m: MitigationsFile = read_json(&dir.join(MITIGATIONS_FILE)).unwrap();
    let tiled = &m.workflows[0].controls[0];
    assert_eq!(tiled.state, MitigationState::Done);
    assert!(tiled.judged.as_ref().unwrap().passed);
    assert_ne!(tiled.run.as_ref().unwrap().run_id, interrupted.run_id);
}

/// A UI workflow's controls are written back as UI workflows (the node's new type and widgets),
/// and the control's run folder gets that UI form; a control that still fails records where.
#[test]
fn a_ui_input_gets_ui_variants_and_a_still_failing_control_says_where() {
    let sim = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workflows/sd15_hires_fix_pixel.ui.json");
    let runs = tmp.path().join("runs");
    let out = bisect(
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--strict", "--mitigate"],
    );
    let (dir, _) = only_session(&runs);
    let m: MitigationsFile =
        read_json(&dir.join(MITIGATIONS_FILE)).unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    let tiled = &m.workflows[0].controls[0];
    assert_eq!(tiled.control, "tiled-decode", "{}", text(&out));
    let ui: Value = read_json(&dir.join(tiled.ui_file.as_ref().unwrap())).unwrap();
    let decoders: Vec<&Value> = ui["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["type"] == "VAEDecodeTiled")
        .collect();
    assert_eq!(decoders.len(), 2, "both decoders replaced");
    assert_eq!(decoders[0]["widgets_values"], json!([256, 32, 4096, 8]));
    let run = tiled.run.as_ref().unwrap();
    assert!(dir.join(&run.dir).join("workflow.ui.json").is_file());
    // Still through the decode fallback (the hires pass's VAE encode/decode): failed, at decode,
    // the boundary where it was.
    let judged = tiled.judged.as_ref().unwrap();
    assert!(!judged.passed, "{judged:?}");
    assert_eq!(judged.stage_now.map(|s| s.as_str()), Some("decode"));
    assert_eq!(judged.moved, Some(false));
}

/// A free port on 127.0.0.1.
#[cfg(target_os = "linux")]
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `exec comfy-bisect simulate --port PORT … FLAGS`, its output appended to `log`; the time
/// scale comes from `$SIM_SCALE` (0 when unset).
#[cfg(target_os = "linux")]
fn sim_command(port: u16, flags: &str, log: &std::path::Path) -> String {
    format!(
        "exec '{}' simulate --port {port} --vram {SAMPLING_RUNS_OUT}MiB --time-scale ${{SIM_SCALE:-0}} {flags} >>'{}' 2>&1 </dev/null",
        env!("CARGO_BIN_EXE_comfy-bisect"),
        log.display()
    )
}

/// Starts the simulator as a process (detached, as a user's server is) and waits until it
/// answers; its argv.
#[cfg(target_os = "linux")]
fn start_sim_process(url: &str, command: &str) -> Vec<String> {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} &"))
        .env_remove("SIM_SCALE")
        .status()
        .unwrap();
    argv_of(url)
}

/// The session's `mitigations.json`.
fn mitigations_of(dir: &std::path::Path, out: &std::process::Output) -> MitigationsFile {
    read_json(&dir.join(MITIGATIONS_FILE)).unwrap_or_else(|e| panic!("{e}\n{}", text(out)))
}

fn control<'a>(
    m: &'a MitigationsFile,
    id: &str,
) -> &'a comfy_bisect_core::session::journal::Mitigation {
    m.workflows[0]
        .controls
        .iter()
        .find(|c| c.control == id)
        .unwrap()
}

/// A session whose mitigation pass was killed (`kill -9`) while its control ran on the
/// relaunched server (`--reserve-vram 2`), on a simulator process started with
/// `--cache-classic`.
#[cfg(target_os = "linux")]
struct KilledPass {
    _sim: SimProcess,
    tmp: tempfile::TempDir,
    url: String,
    runs: std::path::PathBuf,
    dir: std::path::PathBuf,
    session_id: String,
    template: String,
    /// The server's argv before the pass.
    before: Vec<String>,
}

#[cfg(target_os = "linux")]
impl KilledPass {
    fn new() -> KilledPass {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("sim.log");
        let sim = SimProcess { url: url.clone() };
        let before = start_sim_process(&url, &sim_command(port, "--cache-classic", &log));
        let template = sim_command(port, "{args}", &log);
        let mut workflow = sd15_1024();
        // Long enough that the control's run is still going when the pass is killed.
        workflow["3"]["inputs"]["steps"] = json!(100);
        let wf = write_workflow(tmp.path(), "target", &workflow);
        let runs = tmp.path().join("runs");
        let out = bisect(&url, &runs, &[wf.to_str().unwrap()]);
        let (dir, session) = only_session(&runs);
        assert!(session.workflows[0].verdict.is_some(), "{}", text(&out));
        let k = KilledPass {
            _sim: sim,
            tmp,
            url,
            runs,
            dir,
            session_id: session.session_id,
            template,
            before,
        };
        let mut killed = k
            .mitigate(true)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the control runs on the relaunched server, then kill -9.
        let started = std::time::Instant::now();
        loop {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "the control never started"
            );
            assert!(killed.try_wait().unwrap().is_none(), "the pass ended early");
            let inflight = read_json::<MitigationsFile>(&k.dir.join(MITIGATIONS_FILE))
                .ok()
                .is_some_and(|m| {
                    m.workflows.first().is_some_and(|w| {
                        w.controls.iter().any(|c| {
                            c.control == "reserve-vram" && c.state == MitigationState::InFlight
                        })
                    })
                });
            if inflight {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        killed.kill().unwrap();
        killed.wait().unwrap();
        let changed = argv_of(&k.url);
        assert!(
            changed.windows(2).any(|w| w == ["--reserve-vram", "2"]),
            "{changed:?}"
        );
        let record: Value = read_json(&k.dir.join("mitigations/server-launch.json")).unwrap();
        assert_eq!(record["changed"], true, "{record}");
        assert_eq!(record["flags"], json!(["--cache-classic"]), "{record}");
        k
    }

    /// `mitigate SESSION --max-mitigations 1 --launch-cmd TEMPLATE`, its controls' server slow
    /// when `slow`.
    fn mitigate(&self, slow: bool) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"));
        c.args(["--server", &self.url, "mitigate", &self.session_id, "-q"])
            .args(["--max-mitigations", "1", "--launch-cmd", &self.template])
            .arg("--runs-dir")
            .arg(&self.runs);
        if slow {
            c.env("SIM_SCALE", "0.05");
        } else {
            c.env_remove("SIM_SCALE");
        }
        c
    }

    /// The server is back with its original argv, the record says so, and `mitigations.json`
    /// says it was put back from the original launch (not the changed one).
    fn assert_put_back(&self, out: &std::process::Output) -> MitigationsFile {
        let m = mitigations_of(&self.dir, out);
        let first = &m.server[0];
        assert!(
            first.starts_with("left changed by an earlier pass")
                && first.contains("put the server back as it was")
                && !first.contains("reserve-vram"),
            "{first}\n{}",
            text(out)
        );
        assert!(text(out).contains(first.as_str()), "{}", text(out));
        for line in &m.server {
            assert!(!line.contains("--reserve-vram 2 "), "{line}");
        }
        assert_eq!(argv_of(&self.url), self.before, "{}", text(out));
        let record: Value = read_json(&self.dir.join("mitigations/server-launch.json")).unwrap();
        assert_eq!(record["changed"], false, "{record}");
        m
    }
}

/// Issue #39, finding 1: a pass killed while the server ran with a control's flag left it
/// changed, and the next pass called the changed flags the original. The launch is journaled
/// before the first stop, so the next `mitigate` puts the original back first, from that
/// record, says so in `mitigations.json`, and then runs the control again.
#[test]
#[cfg(target_os = "linux")]
fn a_pass_killed_after_the_relaunch_is_put_back_by_the_next_mitigate() {
    let k = KilledPass::new();
    let out = k.mitigate(false).output().unwrap();
    let m = k.assert_put_back(&out);
    let reserve = control(&m, "reserve-vram");
    assert_eq!(reserve.state, MitigationState::Done, "{}", text(&out));
    drop(k.tmp);
}

/// The same through `resume` of the finished session: the server is put back before anything
/// else, with no `--launch-cmd` given (the record has the template).
#[test]
#[cfg(target_os = "linux")]
fn resume_puts_back_a_server_a_killed_pass_left_changed() {
    let k = KilledPass::new();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "--server",
            &k.url,
            "resume",
            &k.session_id,
            "-q",
            "--runs-dir",
        ])
        .arg(&k.runs)
        .env_remove("SIM_SCALE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    k.assert_put_back(&out);
}

/// A TCP proxy in this test process: 127.0.0.1:(returned port) → `to`.
#[cfg(target_os = "linux")]
fn tcp_proxy(to: u16) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut c1, mut s1) = (client, server);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c1, &mut s1);
                let _ = s1.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    port
}

/// Issue #39, finding 4: with a proxy in front of the server, the relaunch stopped the proxy.
/// The process on the port is not the one the server's argv describes, so nothing is signalled
/// (the proxy here is this test process: a signal would end the test) and the control is not run.
#[test]
#[cfg(target_os = "linux")]
fn a_proxy_in_front_of_the_server_is_never_stopped() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sim.log");
    let _sim = SimProcess { url: url.clone() };
    let before = start_sim_process(&url, &sim_command(port, "--cache-classic", &log));
    let proxy = format!("http://127.0.0.1:{}", tcp_proxy(port));
    let wf = write_workflow(tmp.path(), "target", &sd15_1024());
    let runs = tmp.path().join("runs");
    let template = sim_command(port, "{args}", &log);
    let out = bisect(
        &proxy,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--mitigate",
            "--max-mitigations",
            "1",
            "--launch-cmd",
            &template,
        ],
    );
    let (dir, _) = only_session(&runs);
    let m = mitigations_of(&dir, &out);
    let reserve = control(&m, "reserve-vram");
    match &reserve.state {
        MitigationState::NotRun { reason } => assert!(
            reason.starts_with("could not relaunch")
                && reason.contains("is not the ComfyUI server that answers there")
                && reason.contains(&format!("pid {}", std::process::id())),
            "{reason}"
        ),
        other => panic!("{other:?}\n{}", text(&out)),
    }
    assert!(
        m.server.iter().all(|l| !l.contains("put the server back")),
        "{:?}",
        m.server
    );
    assert_eq!(argv_of(&url), before, "the server was left alone");
}

/// Issue #39, finding 7: a relaunch whose server exits at once ("unrecognized arguments") was
/// waited for the whole --wait-server. It fails the control at once, with the launch's last
/// output, and the original is put back.
#[test]
#[cfg(target_os = "linux")]
fn a_relaunch_that_exits_at_once_fails_the_control_at_once_and_the_original_is_put_back() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sim.log");
    let _sim = SimProcess { url: url.clone() };
    let before = start_sim_process(&url, &sim_command(port, "--cache-classic", &log));
    // ComfyUI's argparse refusing the control's flag; {args} inside double quotes (validated
    // words read the same there).
    let template = format!(
        "case \"{{args}}\" in *--reserve-vram*) echo \"main.py: error: unrecognized arguments: {{args}}\" >&2; exit 2;; esac; {}",
        sim_command(port, "{args}", &log)
    );
    let wf = write_workflow(tmp.path(), "target", &sd15_1024());
    let runs = tmp.path().join("runs");
    let out = bisect(
        &url,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--mitigate",
            "--max-mitigations",
            "1",
            "--wait-server",
            "1h",
            "--launch-cmd",
            &template,
        ],
    );
    let (dir, _) = only_session(&runs);
    let m = mitigations_of(&dir, &out);
    match &control(&m, "reserve-vram").state {
        MitigationState::NotRun { reason } => assert!(
            reason.starts_with("could not relaunch")
                && reason.contains("exited at once (exit status: 2)")
                && reason.contains("unrecognized arguments: --cache-classic --reserve-vram 2"),
            "{reason}"
        ),
        other => panic!("{other:?}\n{}", text(&out)),
    }
    assert!(
        m.server
            .iter()
            .any(|l| l.starts_with("put the server back as it was")),
        "{:?}\n{}",
        m.server,
        text(&out)
    );
    assert_eq!(argv_of(&url), before);
}

/// Issue #39, finding 5: under a supervisor that restarts the server the moment it exits (a
/// restart loop here, as systemd's Restart=always), a control was judged on the old server.
/// Whichever server wins the port, a control is judged only on a server that runs with its
/// flag, and the server ends with its original flags.
#[test]
#[cfg(target_os = "linux")]
fn under_a_restart_loop_a_control_is_never_judged_on_the_old_server() {
    // The loop restarts after 0.1 s (the relaunch usually takes the port first) and at once
    // (the loop's server usually does).
    under_a_restart_loop("sleep 0.1");
    under_a_restart_loop("true");
}

#[cfg(target_os = "linux")]
fn under_a_restart_loop(pause: &str) {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sim.log");
    let _sim = SimProcess { url: url.clone() };
    let server = sim_command(port, "--cache-classic", &log).replacen("exec ", "", 1);
    let stop = tmp.path().join("stop");
    let mut supervisor = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e '{}' ]; do {server}; {pause}; done",
            stop.display()
        ))
        .env_remove("SIM_SCALE")
        .spawn()
        .unwrap();
    let before = argv_of(&url);
    let wf = write_workflow(tmp.path(), "target", &sd15_1024());
    let runs = tmp.path().join("runs");
    let template = sim_command(port, "{args}", &log);
    let out = bisect(
        &url,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--mitigate",
            "--max-mitigations",
            "1",
            "--launch-cmd",
            &template,
        ],
    );
    std::fs::write(&stop, "").unwrap();
    let (dir, _) = only_session(&runs);
    let m = mitigations_of(&dir, &out);
    let reserve = control(&m, "reserve-vram");
    match &reserve.state {
        MitigationState::Done => {
            let run: Value = read_json(
                &dir.join(&reserve.run.as_ref().unwrap().dir)
                    .join("run.json"),
            )
            .unwrap();
            let argv: Vec<String> =
                serde_json::from_value(run["environment"]["argv"].clone()).unwrap();
            assert!(
                argv.windows(2).any(|w| w == ["--reserve-vram", "2"]),
                "judged on {argv:?}"
            );
        }
        MitigationState::NotRun { reason } => {
            assert!(reason.starts_with("could not relaunch"), "{reason}")
        }
        other => panic!("{other:?}\n{}", text(&out)),
    }
    let after = argv_of(&url);
    assert!(
        !after.iter().any(|a| a == "--reserve-vram")
            && after.iter().any(|a| a == "--cache-classic"),
        "{after:?} (before {before:?})\n{:?}",
        m.server
    );
    // End the loop and whatever it runs.
    let _ = std::process::Command::new("kill")
        .arg(supervisor.id().to_string())
        .status();
    let _ = supervisor.wait();
}

/// Issue #39, finding 2: `--apply runs/S/session.json` overwrote the journal; existing files
/// were replaced silently, links followed, a write error exited 1. Refusals come before any run.
#[test]
fn apply_refuses_the_journal_the_input_a_link_and_an_existing_file() {
    let sim = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let b = bisect_workflow(&sim, &sd15_1024(), &["--strict"]);
    let session_json = b.dir.join("session.json");
    let journal = std::fs::read(&session_json).unwrap();
    let existing = b.tmp.path().join("existing.json");
    std::fs::write(&existing, "{}").unwrap();
    let input = b.tmp.path().join("target.json");
    let url = sim.url();
    let mitigate = |extra: &[&str]| {
        let mut all = vec![
            "--server",
            url.as_str(),
            "mitigate",
            b.session.session_id.as_str(),
            "-q",
            "--runs-dir",
            b.runs.to_str().unwrap(),
        ];
        all.extend_from_slice(extra);
        cli(&all)
    };
    let refused = |target: &std::path::Path, why: &str| {
        let out = mitigate(&["--apply", target.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(why), "{}", text(&out));
        // Refused before any run.
        assert!(!b.dir.join(MITIGATIONS_FILE).exists(), "{}", text(&out));
    };
    refused(&session_json, "inside the runs folder");
    assert_eq!(std::fs::read(&session_json).unwrap(), journal);
    refused(&input, "the input workflow itself");
    refused(&existing, "the file exists; --force replaces it");
    #[cfg(unix)]
    {
        let link = b.tmp.path().join("link.json");
        std::os::unix::fs::symlink(&existing, &link).unwrap();
        refused(&link, "symbolic link");
        let out = mitigate(&["--apply", link.to_str().unwrap(), "--force"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert_eq!(std::fs::read(&existing).unwrap(), b"{}");
    }
    // A file that cannot be written: its own exit code, after the pass.
    let too_long = b.tmp.path().join(format!("{}.json", "x".repeat(300)));
    let out = mitigate(&["--apply", too_long.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    assert!(
        text(&out).contains("--apply: cannot write"),
        "{}",
        text(&out)
    );
    // --force replaces an existing file, keeping its permissions.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).unwrap();
        let out = mitigate(&["--apply", existing.to_str().unwrap(), "--force"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let written: Value = read_json(&existing).unwrap();
        assert_eq!(written["8"]["class_type"], "VAEDecodeTiled");
        let mode = std::fs::metadata(&existing).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{mode:o}");
    }
}

/// Issue #39, finding 6: an argv entry `--cache-lru=1$(touch …)` in `/system_stats` ran when
/// the template put `{args}` inside double quotes. Only flag names, numbers and known choices
/// reach the shell: the relaunch is refused with a message and nothing is run.
#[test]
fn a_hostile_argv_entry_never_reaches_the_launch_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let planted = tmp.path().join("planted");
    let launched = tmp.path().join("launched");
    let hostile = format!("--cache-lru=1$(touch '{}')", planted.display());
    let mut config = comfy_bisect_sim::SimConfig::default()
        .with_vram_bytes(SAMPLING_RUNS_OUT * 1024 * 1024)
        .with_time_scale(0.0);
    config.process_argv = Some(vec!["main.py".into(), hostile.clone()]);
    let sim = Sim::start(config);
    let wf = write_workflow(tmp.path(), "target", &sd15_1024());
    let runs = tmp.path().join("runs");
    let template = format!("touch '{}'; sh -c \"echo {{args}}\"", launched.display());
    let out = bisect(
        &sim.url(),
        &runs,
        &[
            wf.to_str().unwrap(),
            "--mitigate",
            "--max-mitigations",
            "1",
            "--launch-cmd",
            &template,
        ],
    );
    let (dir, _) = only_session(&runs);
    let m = mitigations_of(&dir, &out);
    match &control(&m, "reserve-vram").state {
        MitigationState::NotRun { reason } => assert!(
            reason.contains(&format!("`{hostile}` is not --cache-lru with a number"))
                && reason.contains("will not relaunch"),
            "{reason}"
        ),
        other => panic!("{other:?}\n{}", text(&out)),
    }
    assert!(!planted.exists() && !launched.exists(), "{}", text(&out));
}
