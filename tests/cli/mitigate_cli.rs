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

#[test]
fn mitigate_on_an_existing_session_is_resumable_and_keeps_to_its_budget() {
    let sim = Sim::with_vram_mib(DECODE_NEEDS_FALLBACK, 0.0);
    let b = bisect_workflow(&sim, &sd15_1024(), &["--strict"]);
    assert!(!b.dir.join(MITIGATIONS_FILE).exists());
    let session = b.session.session_id.clone();
    let runs = b.runs.to_str().unwrap();
    let url = sim.url();
    let out = cli(&[
        "--server",
        &url,
        "mitigate",
        &session,
        "--runs-dir",
        runs,
        "-q",
        "--max-mitigations",
        "0",
    ]);
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
