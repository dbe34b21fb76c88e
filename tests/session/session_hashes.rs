//! Component hashes without `--models-dir`, end to end from the command line on the simulator:
//! the server's own model folders (`GET /internal/folder_paths`) are hashed when they are on
//! this machine, and a remote server's files are "unhashed (remote server)".

use crate::session_support::*;
use comfy_bisect_core::hashing::{hash_file, ComponentHash, ComponentStatus};
use comfy_bisect_core::session::journal::{read_json, RunFile, RUN_RECORD_FILE};
use comfy_bisect_sim::{Faults, SimConfig, MIB};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const SD15: &str = "sd15_txt2img_lora_upscale";

/// What one bisection on the simulator left: the component hashes of the run with the most
/// model files (the target: checkpoint, LoRA, upscaler), the report, the command's output,
/// what `show` printed for that run, and what the simulator lists in
/// `GET /experiment/models/{folder}` for each component's folder (name → size; empty when it
/// has no such route).
struct Hashed {
    components: Vec<ComponentHash>,
    report: String,
    out: String,
    shown: String,
    listed: BTreeMap<String, u64>,
}

/// Bisects the SD1.5 example (batch 1, fits) on `config`.
fn components(config: SimConfig) -> Hashed {
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
    let mut listed = BTreeMap::new();
    let folders: BTreeSet<&str> = file
        .component_hashes
        .iter()
        .map(|c| c.folder.as_str())
        .collect();
    for folder in folders {
        let url = format!("{}/experiment/models/{folder}", sim.url());
        let list: Option<Value> = sim.rt.block_on(async {
            let r = reqwest::get(&url).await.unwrap();
            if r.status().is_success() {
                Some(r.json().await.unwrap())
            } else {
                None
            }
        });
        for f in list.iter().flat_map(|l| l.as_array().unwrap()) {
            listed.insert(
                f["name"].as_str().unwrap().to_string(),
                f["size"].as_u64().unwrap(),
            );
        }
    }
    Hashed {
        components: file.component_hashes,
        report,
        out: text(&out),
        shown,
        listed,
    }
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
    let Hashed {
        components,
        report,
        out,
        listed,
        ..
    } = components(SimConfig::default().with_models_root(comfy.path()));
    let c = by_file(&components, "random_sd15.safetensors");
    assert_eq!(c.status, ComponentStatus::Hashed, "{c:?}\n{out}");
    assert_eq!(c.folder, "checkpoints");
    assert_eq!(c.autov2.as_deref(), Some(expected.autov2.as_str()));
    assert_eq!(c.sha256.as_deref(), Some(expected.sha256.as_str()));
    assert_eq!(c.size, Some(33));
    // The server lists the file on disk with its real size, so the sizes agree.
    assert_eq!(listed.get("random_sd15.safetensors"), Some(&33));
    // The LoRA is not in the server's loras folders: looked for there, and nowhere else.
    let lora = by_file(&components, "random_sd15_lora.safetensors");
    assert_eq!(lora.status, ComponentStatus::Unhashed);
    let reason = lora.reason.as_deref().unwrap();
    assert!(
        reason
            .starts_with("not found under the server's model folders (GET /internal/folder_paths)"),
        "{reason}"
    );
    // (Joined with the platform's separator: `models/loras\random_sd15_lora…` on Windows.)
    assert!(
        reason
            .replace('\\', "/")
            .contains("models/loras/random_sd15_lora.safetensors"),
        "{reason}"
    );
    assert!(report.contains(&expected.autov2), "{report}");
}

/// Asserts every component is "unhashed (remote server)" and returns each one's reason.
fn remote_reasons(components: &[ComponentHash]) -> Vec<&str> {
    assert!(!components.is_empty());
    components
        .iter()
        .map(|c| {
            assert_eq!(c.status, ComponentStatus::Unhashed, "{c:?}");
            let reason = c.reason.as_deref().unwrap();
            assert!(reason.starts_with("remote server: its "), "{reason}");
            assert!(
                reason.contains("folders are not on this machine"),
                "{reason}"
            );
            reason
        })
        .collect()
}

#[test]
fn a_remote_servers_files_are_unhashed_with_the_names_and_sizes_the_server_lists() {
    // The simulator's folders exist on no machine: a remote server. It lists its model files
    // with their sizes in GET /experiment/models/{folder}, as ComfyUI does.
    let h = components(SimConfig::default());
    let reasons = remote_reasons(&h.components);
    for (c, reason) in h.components.iter().zip(reasons) {
        let size = *h
            .listed
            .get(&c.file)
            .unwrap_or_else(|| panic!("the simulator lists {}: {:?}", c.file, h.listed));
        assert!(
            reason.contains(&format!("the server lists {} ({size} bytes)", c.file)),
            "{reason}"
        );
        // In run.json, and in `show`.
        assert_eq!(c.size, Some(size), "{c:?}");
        let line = format!("{}/{}  unhashed ({size} bytes): {reason}", c.folder, c.file);
        assert!(h.shown.contains(&line), "{line}\n{}", h.shown);
    }
    // report.md names the files; why none is hashed is in report.json (and run.json, above).
    assert!(
        h.report.contains("None is hashed (report.json says why)."),
        "{}",
        h.report
    );
}

#[test]
fn a_remote_server_without_sizes_has_its_files_listed_by_name_only() {
    // An older server (or a proxy) without /experiment/models: names from /models/{folder}.
    let h =
        components(SimConfig::default().with_faults(Faults::default().with_no_experiment_models()));
    assert!(h.listed.is_empty(), "{:?}", h.listed);
    let reasons = remote_reasons(&h.components);
    for (c, reason) in h.components.iter().zip(reasons) {
        assert!(
            reason.contains(&format!("the server lists {} (size unknown", c.file)),
            "{reason}\n{}",
            h.out
        );
        assert_eq!(c.size, None);
    }
    // report.md names the files; why none is hashed is in report.json (and run.json, above).
    assert!(
        h.report.contains("None is hashed (report.json says why)."),
        "{}",
        h.report
    );
}

#[test]
#[cfg(unix)]
fn a_model_file_that_is_a_link_into_a_shared_store_is_hashed_and_shown_with_its_target() {
    // As on the real 0.8.0 of issue #28: the install's model files are links into one store.
    let comfy = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ckpt_dir = comfy.path().join("models").join("checkpoints");
    std::fs::create_dir_all(&ckpt_dir).unwrap();
    let real = store.path().join("random_sd15.safetensors");
    std::fs::write(&real, b"a checkpoint kept in a shared store").unwrap();
    std::os::unix::fs::symlink(&real, ckpt_dir.join("random_sd15.safetensors")).unwrap();
    let expected = hash_file(&real).unwrap();
    let Hashed {
        components,
        report,
        out,
        ..
    } = components(SimConfig::default().with_models_root(comfy.path()));
    let c = by_file(&components, "random_sd15.safetensors");
    assert_eq!(c.status, ComponentStatus::Hashed, "{c:?}\n{out}");
    assert_eq!(c.sha256.as_deref(), Some(expected.sha256.as_str()));
    let target = std::fs::canonicalize(&real).unwrap().display().to_string();
    assert_eq!(c.link_target.as_deref(), Some(target.as_str()));
    assert!(
        report.contains("`random_sd15.safetensors` → `"),
        "the report shows where the link goes\n{report}"
    );
}
