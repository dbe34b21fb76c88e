//! Component hashes without `--models-dir`, end to end from the command line on the simulator:
//! the server's own model folders (`GET /internal/folder_paths`) are hashed when they are on
//! this machine, and a remote server's files are "unhashed (remote server)".

mod session_support;

use comfy_bisect::hashing::{hash_file, ComponentHash, ComponentStatus};
use comfy_bisect::session::journal::{read_json, RunFile, RUN_RECORD_FILE};
use comfy_bisect::sim::{SimConfig, MIB};
use serde_json::json;
use session_support::*;

const SD15: &str = "sd15_txt2img_lora_upscale";

/// Bisects the SD1.5 example (batch 1, fits) on `config` and returns the component hashes of
/// the run with the most model files (the target: checkpoint, LoRA, upscaler) and the report.
fn components(config: SimConfig) -> (Vec<ComponentHash>, String, String) {
    let sim = Sim::start(config.with_vram_bytes(16384 * MIB).with_time_scale(0.0));
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "sd15",
        &example(SD15, &[("5", "batch_size", json!(1))]),
    );
    let runs = tmp.path().join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    let (dir, session) = only_session(&runs);
    let file = session.workflows[0]
        .runs
        .iter()
        .map(|run| read_json::<RunFile>(&dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap())
        .max_by_key(|f| f.component_hashes.len())
        .expect("a run");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    // `show` prints each component with its hash or why it has none.
    let shown = cli(&[
        "show",
        &file.entry.run_id,
        "--runs-dir",
        runs.to_str().unwrap(),
    ]);
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    for c in &file.component_hashes {
        let line = match &c.autov2 {
            Some(a) => format!("{}/{}  AutoV2 {a}", c.folder, c.file),
            None => format!("{}/{}  unhashed", c.folder, c.file),
        };
        assert!(shown.contains(&line), "{line}\n{shown}");
    }
    (file.component_hashes, report, text(&out))
}

fn by_file<'a>(components: &'a [ComponentHash], file: &str) -> &'a ComponentHash {
    components
        .iter()
        .find(|c| c.file == file)
        .unwrap_or_else(|| panic!("{file} in {components:?}"))
}

#[test]
fn a_server_on_this_machine_has_its_model_files_hashed_without_models_dir() {
    let comfy = tempfile::tempdir().unwrap();
    let ckpt_dir = comfy.path().join("models").join("checkpoints");
    std::fs::create_dir_all(&ckpt_dir).unwrap();
    let ckpt = ckpt_dir.join("random_sd15.safetensors");
    std::fs::write(&ckpt, b"a small stand-in for a checkpoint").unwrap();
    let expected = hash_file(&ckpt).unwrap();
    let (components, report, out) = components(SimConfig::default().with_models_root(comfy.path()));
    let c = by_file(&components, "random_sd15.safetensors");
    assert_eq!(c.status, ComponentStatus::Hashed, "{c:?}\n{out}");
    assert_eq!(c.folder, "checkpoints");
    assert_eq!(c.autov2.as_deref(), Some(expected.autov2.as_str()));
    assert_eq!(c.sha256.as_deref(), Some(expected.sha256.as_str()));
    assert_eq!(c.size, Some(33));
    // The LoRA is not in the server's loras folders: looked for there, and nowhere else.
    let lora = by_file(&components, "random_sd15_lora.safetensors");
    assert_eq!(lora.status, ComponentStatus::Unhashed);
    let reason = lora.reason.as_deref().unwrap();
    assert!(
        reason
            .starts_with("not found under the server's model folders (GET /internal/folder_paths)"),
        "{reason}"
    );
    assert!(
        reason.contains("models/loras/random_sd15_lora.safetensors"),
        "{reason}"
    );
    assert!(report.contains(&expected.autov2), "{report}");
}

#[test]
fn a_remote_servers_files_are_unhashed_with_what_the_server_lists() {
    // The simulator's folders exist on no machine: a remote server.
    let (components, report, out) = components(SimConfig::default());
    assert!(!components.is_empty(), "{out}");
    for c in &components {
        assert_eq!(c.status, ComponentStatus::Unhashed, "{c:?}");
        let reason = c.reason.as_deref().unwrap();
        assert!(reason.starts_with("remote server: its "), "{reason}");
        assert!(
            reason.contains("folders are not on this machine"),
            "{reason}"
        );
        // The simulator lists names through /models/{folder} only: no sizes.
        assert!(
            reason.contains(&format!("the server lists {} (size unknown", c.file)),
            "{reason}"
        );
        assert_eq!(c.size, None);
    }
    assert!(report.contains("remote server"), "{report}");
}
