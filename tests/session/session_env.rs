//! The environment of every run, end to end from the command line on the simulator: the
//! fingerprint taken before each run (run.json, the index, the report's Environment section
//! with the custom node packs).

use crate::session_support::*;
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{
    read_json, OnDrift, RunFile, RunRole, SessionFile, SessionState, StopReason, Verdict,
    RUN_RECORD_FILE,
};
use comfy_bisect_sim::{Faults, SimConfig, MIB, REMOVED_PACK};
use serde_json::{json, Value};

const SD15: &str = "sd15_txt2img_lora_upscale";

#[test]
fn every_run_records_the_environment_fingerprint() {
    let sim = Sim::with_vram_mib(16384, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "sd15",
        &example(SD15, &[("5", "batch_size", json!(1))]),
    );
    let runs = tmp.path().join("runs");
    let out = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    let (dir, session) = only_session(&runs);
    let job = &session.workflows[0];
    assert!(!job.runs.is_empty(), "{}", text(&out));
    let idx = index::read_all(&runs).unwrap();
    let first = job.runs[0].fingerprint.clone().expect("a fingerprint id");
    assert_eq!(first.len(), 12);
    for run in &job.runs {
        assert_eq!(
            run.fingerprint.as_ref(),
            Some(&first),
            "one environment all night"
        );
        let file: RunFile = read_json(&dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap();
        let env = file
            .environment
            .expect("run.json holds the whole fingerprint");
        assert_eq!(env.id, first);
        assert_eq!(env.compute_id(), env.id);
        let line = idx.iter().find(|e| e.run_id == run.run_id).unwrap();
        assert_eq!(line.fingerprint.as_ref(), Some(&first));
        // Cold runs record the memory held after /free and the settle.
        let baseline = file.record.vram_baseline_bytes.expect("baseline recorded");
        assert!(baseline < file.record.vram.total_bytes.unwrap());
        assert!(run.summary.as_ref().unwrap().vram_baseline_mib.is_some());
    }
    let fp = &session.fingerprints[&first];
    assert_eq!(fp.comfyui_version.as_deref(), Some("0.3.64"));
    assert_eq!(fp.devices[0].kind, "cuda");
    // The simulator's node definitions carry the custom-node fixture's packs.
    let wan = fp.pack("ComfyUI-WanVideoWrapper").expect("pack listed");
    assert_eq!(wan.nodes.classes, 15);
    assert!(wan.version.is_none(), "no ComfyUI-Manager on the simulator");
    assert!(!fp.models.is_empty(), "model listings recorded");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    // The fingerprint id is report.json's (report.md shows it only where it changed).
    assert!(!report.contains(&format!("`{first}`")), "{report}");
    // report.md lists the packs the workflow uses (the SD1.5 example: none) and counts the
    // others (issue #38); report.json lists every pack, and the memory held before each run.
    assert!(
        report
            .contains("Custom node packs: the workflows use none (no versions: the server has no ComfyUI-Manager)"),
        "{report}"
    );
    assert!(
        report.contains("14 other installed packs not used (report.json lists every pack"),
        "{report}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let packs = json["environment"]["node_packs"].as_array().unwrap();
    let wan = packs
        .iter()
        .find(|p| p["name"] == "ComfyUI-WanVideoWrapper")
        .unwrap();
    assert_eq!(wan["classes"], 15);
    assert_eq!(wan["version"], "version unknown");
    assert!(json["workflows"][0]["ladder"][0]["baseline_vram_mib"].is_number());
    assert_eq!(json["environment"]["fingerprint"], first.as_str());
    assert_eq!(
        json["environment"]["node_packs"].as_array().unwrap().len(),
        14
    );
}

/// The SD1.5 example (batch 1) on a simulator that is "restarted with `--lowvram`" once
/// `after` prompts have finished.
fn drift_scenario(
    after: u64,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, SessionFile, String) {
    faulty_scenario(Faults::default().with_lowvram_after(after), 1792, extra)
}

/// The SD1.5 example (batch 1) on a simulator with `faults` and `mib` of VRAM.
fn faulty_scenario(
    faults: Faults,
    mib: u64,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, SessionFile, String) {
    let sim = Sim::start(
        SimConfig::default()
            .with_vram_bytes(mib * MIB)
            .with_time_scale(0.0)
            .with_faults(faults),
    );
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "sd15",
        &example(SD15, &[("5", "batch_size", json!(1))]),
    );
    let runs = tmp.path().join("runs");
    let mut args = vec![wf.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = bisect(&sim.url(), &runs, &args);
    let (dir, session) = only_session(&runs);
    (tmp, dir, session, text(&out))
}

#[test]
fn a_server_restarted_with_other_flags_is_drift_and_the_last_pass_is_reanchored() {
    // Prompts: minimal, target; then the server comes back with --lowvram.
    let (_t, dir, s, out) = drift_scenario(2, &[]);
    assert_eq!(s.state, SessionState::Done, "{out}");
    assert_eq!(s.drifts.len(), 1, "{out}");
    let drift = &s.drifts[0];
    assert_eq!(drift.action, OnDrift::Reanchor);
    assert!(
        drift
            .changes
            .iter()
            .any(|c| c.starts_with("launch arguments:") && c.ends_with("--lowvram`")),
        "{:?}",
        drift.changes
    );
    let job = &s.workflows[0];
    // The runs before the change are in one environment, the rest in the other.
    assert_eq!(
        job.runs[0].fingerprint.as_deref(),
        Some(drift.from.as_str())
    );
    assert_eq!(
        job.runs[1].fingerprint.as_deref(),
        Some(drift.from.as_str())
    );
    let anchor = &job.runs[2];
    assert_eq!(
        (anchor.step, anchor.role),
        (0, RunRole::Anchor),
        "the last passing step (the minimal variant) is run again first:\n{out}"
    );
    assert_eq!(anchor.fingerprint.as_deref(), Some(drift.to.as_str()));
    for r in &job.runs[2..] {
        assert_eq!(r.fingerprint.as_deref(), Some(drift.to.as_str()));
    }
    // Whatever the verdict, both of its ends come from the new environment.
    let ends: Vec<&str> = match &job.verdict {
        Some(Verdict::FirstFailure {
            run_id,
            last_pass_run_id,
            ..
        }) => vec![run_id, last_pass_run_id],
        Some(Verdict::CouldNotReproduce { run_id }) => vec![run_id],
        Some(Verdict::MinimalFails { run_id, .. }) => vec![run_id],
        other => panic!("{other:?}\n{out}"),
    };
    for id in ends {
        let r = job.runs.iter().find(|r| r.run_id == id).unwrap();
        assert_eq!(r.fingerprint.as_deref(), Some(drift.to.as_str()), "{out}");
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Environment changes"), "{report}");
    assert!(report.contains("--lowvram"), "{report}");
    assert!(report.contains("re-anchored: step 0 (minimal)"), "{report}");
    let problems = comfy_bisect_core::report::md::check(&report);
    assert!(problems.is_empty(), "{problems:?}");
}

/// A session that `--on-drift stop` ended at its only drift, after the minimal variant and
/// the target: state, verdict, exit code and report say so, the change starting with `change`.
fn assert_stopped_by_the_drift(dir: &std::path::Path, s: &SessionFile, out: &str, change: &str) {
    assert!(
        matches!(
            s.state,
            SessionState::Stopped {
                reason: StopReason::EnvironmentChanged,
                ..
            }
        ),
        "{out}"
    );
    assert_eq!(s.drifts.len(), 1, "{out}");
    assert_eq!(s.drifts[0].action, OnDrift::Stop);
    let job = &s.workflows[0];
    assert_eq!(job.runs.len(), 2, "nothing ran after the change");
    let v = job.verdict.as_ref().unwrap();
    assert!(
        v.headline()
            .starts_with(&format!("incomplete: environment changed: {change}")),
        "{}",
        v.headline()
    );
    assert!(out.contains("environment changed"), "{out}");
    // Stopped before a verdict: exit 6 (the README's table).
    assert!(out.starts_with("exit Some(6)"), "{out}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Environment changes"), "{report}");
    assert!(report.contains(change), "{report}");
    assert!(report.contains("the session stopped here"), "{report}");
}

#[test]
fn on_drift_stop_ends_the_session_as_incomplete() {
    let (_t, dir, s, out) = drift_scenario(2, &["--on-drift", "stop"]);
    assert_stopped_by_the_drift(&dir, &s, &out, "launch arguments");
}

#[test]
fn a_node_pack_added_mid_session_is_drift_that_names_the_pack() {
    // Prompts: minimal, target; then the server has one more custom node pack.
    let (_t, dir, s, out) = faulty_scenario(Faults::default().with_pack_added_after(2), 1792, &[]);
    assert_eq!(s.drifts.len(), 1, "{out}");
    let drift = &s.drifts[0];
    assert_eq!(drift.action, OnDrift::Reanchor);
    assert_eq!(
        drift.changes,
        vec![format!(
            "node pack added: {} (2 classes, version unknown)",
            comfy_bisect_sim::EXTRA_PACK
        )],
        "only the pack changed"
    );
    let after = &s.fingerprints[&drift.to];
    assert!(after.pack(comfy_bisect_sim::EXTRA_PACK).is_some());
    assert!(s.fingerprints[&drift.from]
        .pack(comfy_bisect_sim::EXTRA_PACK)
        .is_none());
    let job = &s.workflows[0];
    assert_eq!(
        (job.runs[2].step, job.runs[2].role),
        (0, RunRole::Anchor),
        "re-anchored under the new node set:\n{out}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Environment changes"), "{report}");
    assert!(report.contains(comfy_bisect_sim::EXTRA_PACK), "{report}");
}

#[test]
fn a_node_pack_removed_mid_session_is_drift_reanchored_under_the_new_node_set() {
    // Prompts: minimal, target; then the server has lost one of the fixture's packs.
    let (_t, dir, s, out) =
        faulty_scenario(Faults::default().with_pack_removed_after(2), 1792, &[]);
    assert_eq!(s.state, SessionState::Done, "{out}");
    assert_eq!(s.drifts.len(), 1, "{out}");
    let drift = &s.drifts[0];
    assert_eq!(drift.action, OnDrift::Reanchor);
    assert_eq!(
        drift.changes,
        vec![format!("node pack removed: {REMOVED_PACK}")],
        "only the pack changed"
    );
    assert!(s.fingerprints[&drift.from].pack(REMOVED_PACK).is_some());
    assert!(s.fingerprints[&drift.to].pack(REMOVED_PACK).is_none());
    let job = &s.workflows[0];
    for r in &job.runs[..2] {
        assert_eq!(r.fingerprint.as_deref(), Some(drift.from.as_str()), "{out}");
    }
    assert_eq!(
        (job.runs[2].step, job.runs[2].role),
        (0, RunRole::Anchor),
        "re-anchored under the new node set:\n{out}"
    );
    for r in &job.runs[2..] {
        assert_eq!(r.fingerprint.as_deref(), Some(drift.to.as_str()), "{out}");
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Environment changes"), "{report}");
    assert!(
        report.contains(&format!("node pack removed: {REMOVED_PACK}")),
        "{report}"
    );
    assert!(report.contains("re-anchored: step 0 (minimal)"), "{report}");
}

#[test]
fn a_node_pack_removed_mid_session_stops_the_session_with_on_drift_stop() {
    let (_t, dir, s, out) = faulty_scenario(
        Faults::default().with_pack_removed_after(2),
        1792,
        &["--on-drift", "stop"],
    );
    let removed = format!("node pack removed: {REMOVED_PACK}");
    assert_stopped_by_the_drift(&dir, &s, &out, &removed);
    assert_eq!(s.drifts[0].changes, [removed], "only the pack changed");
}

#[test]
fn memory_not_given_back_after_each_run_is_called_out_in_the_report() {
    // Minimal, target (fails), then step by step; each prompt keeps 160 MiB.
    let (_t, dir, s, out) = faulty_scenario(
        Faults::default().with_leak_bytes(160 * MIB),
        1792,
        &["--strategy", "linear"],
    );
    let job = &s.workflows[0];
    let baselines: Vec<f64> = job
        .runs
        .iter()
        .filter_map(|r| r.summary.as_ref()?.vram_baseline_mib)
        .collect();
    assert!(baselines.len() >= 3, "{baselines:?}\n{out}");
    for w in baselines.windows(2) {
        assert!(
            (w[1] - w[0] - 160.0).abs() < 1.0,
            "160 MiB more held before every run: {baselines:?}"
        );
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("the memory held before each run (after /free) grew from run to run"),
        "{report}"
    );
}

/// The failing run of a bisect on the simulator: its `run.json` and submitted workflow.
fn failing_run(dir: &std::path::Path, session: &SessionFile) -> (RunFile, Value) {
    let job = &session.workflows[0];
    let run_id = match &job.verdict {
        Some(Verdict::FirstFailure { run_id, .. }) | Some(Verdict::MinimalFails { run_id, .. }) => {
            run_id.clone()
        }
        other => panic!("no failure: {other:?}"),
    };
    let run = job.runs.iter().find(|r| r.run_id == run_id).unwrap();
    let run_dir = dir.join(&run.dir);
    let file: RunFile = read_json(&run_dir.join(RUN_RECORD_FILE)).unwrap();
    let workflow: Value = read_json(&run_dir.join("workflow.json")).unwrap();
    (file, workflow)
}

#[test]
fn the_failing_workflows_custom_pack_nodes_are_recorded_and_named_in_the_bug_form_block() {
    // The Wan example loads its models through GGUF and KJNodes loaders (custom packs in the
    // simulator's /object_info, as captured); 16 GiB fails it at the frames step.
    let sim = Sim::with_vram_mib(16384, 0.0);
    let b = bisect_workflow(
        &sim,
        &example("wan22_t2v_experts_lora_cache_rife", &[]),
        &[],
    );
    let (file, workflow) = failing_run(&b.dir, &b.session);
    let packs = file
        .custom_nodes
        .expect("run.json says which classes come from custom packs");
    assert_eq!(packs["CLIPLoaderGGUF"].pack, "ComfyUI-GGUF", "{packs:?}");
    assert_eq!(packs["DiffusionModelLoaderKJ"].pack, "ComfyUI-KJNodes");
    assert_eq!(
        packs["DiffusionModelLoaderKJ"].version, None,
        "the simulator has no ComfyUI-Manager to say versions"
    );
    let classes: Vec<&str> = workflow
        .as_object()
        .unwrap()
        .values()
        .filter_map(|n| n["class_type"].as_str())
        .collect();
    for class in packs.keys() {
        assert!(
            classes.contains(&class.as_str()),
            "{class} is not in the run's workflow"
        );
    }
    for core in ["KSamplerAdvanced", "VAEDecode", "CLIPTextEncode"] {
        assert!(!packs.contains_key(core), "{core} is ComfyUI's own");
    }
    // The report names each such node of the failing workflow, first, in the bug-form block.
    let report = b.read("report.md");
    let block = &report[..report.find("## Environment").expect("environment section")];
    assert!(block.contains("### Custom Node Testing"), "{block}");
    let (id, _) = workflow
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, n)| n["class_type"] == "CLIPLoaderGGUF")
        .unwrap();
    assert!(
        block.contains(&format!("| `CLIPLoaderGGUF #{id}` |"))
            && block.contains("| ComfyUI-GGUF | unknown |"),
        "{block}"
    );
    assert!(block.contains("--disable-all-custom-nodes"), "{block}");
    // `show` of the failing run lists them too.
    let run_id = file.entry.run_id.clone();
    let show = cli(&["show", &run_id, "--runs-dir", b.runs.to_str().unwrap()]);
    let shown = text(&show);
    assert!(
        shown.contains("  custom nodes:\n")
            && shown.contains("    CLIPLoaderGGUF  ComfyUI-GGUF (version unknown)\n"),
        "{shown}"
    );
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let nodes = json["workflows"][0]["custom_pack_nodes"]["nodes"]
        .as_array()
        .expect("report.json lists them");
    assert_eq!(
        nodes.len(),
        classes.iter().filter(|c| packs.contains_key(**c)).count(),
        "one entry per node of a pack class"
    );
}

#[test]
fn a_failing_workflow_of_core_nodes_only_is_said_to_be_all_core() {
    let (_tmp, dir, session, out) = faulty_scenario(Faults::default(), 1792, &[]);
    let (file, _) = failing_run(&dir, &session);
    assert_eq!(
        file.custom_nodes,
        Some(Default::default()),
        "every class of the SD1.5 example is ComfyUI's own\n{out}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("is one of ComfyUI's own: none comes from a custom node pack"),
        "{report}"
    );
}
