//! Tests of the journal: round trips, atomic and write-behind writes, names.

use super::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

fn sample() -> SessionFile {
    SessionFile {
        schema_version: SESSION_SCHEMA_VERSION,
        session_id: "20261129-010000-abcd".into(),
        tool_version: "0.1.0".into(),
        created_at: now_rfc3339(),
        updated_at: now_rfc3339(),
        server: "http://127.0.0.1:8188".into(),
        options: SessionOptions::default(),
        state: SessionState::Running { workflow: 0 },
        workflows: vec![WorkflowJob {
            name: "wf".into(),
            source: "wf.json".into(),
            source_file: None,
            target_sha256: "ab".into(),
            steps: vec![],
            controls: vec![],
            not_separable: vec![],
            kept: vec![],
            phase: Phase::Search,
            runs: vec![RunEntry {
                run_id: "r1".into(),
                step: 0,
                increment: MINIMAL.into(),
                role: RunRole::Minimal,
                dir: run_dir_name(0, MINIMAL, "r1"),
                workflow_sha256: "cd".into(),
                status: RunStatus::Done,
                started_at: now_rfc3339(),
                finished_at: Some(now_rfc3339()),
                outcome: Some(Outcome::Failed {
                    node_id: "3".into(),
                    node_type: "KSampler".into(),
                    exception_type: "torch.OutOfMemoryError".into(),
                    exception_message: "CUDA out of memory.".into(),
                }),
                summary: Some(RunSummary::default()),
                diagnosis: None,
                confirms: None,
                fingerprint: None,
                reduced: None,
            }],
            verdict: Some(Verdict::MinimalFails {
                run_id: "r1".into(),
                stage: Some("load".into()),
            }),
        }],
        in_flight: None,
        environment: None,
        fingerprints: BTreeMap::new(),
        drifts: Vec::new(),
        server_moves: Vec::new(),
        preflight_rechecks: Vec::new(),
    }
}

fn assert_no_temp_files(dir: &Path) {
    let leftovers: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn a_failed_journal_write_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("run.json");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("x"), b"x").unwrap();
    assert!(write_atomic(&target, b"{}").is_err());
    assert!(SyncBehind::default().write_atomic(&target, b"{}").is_err());
    assert_no_temp_files(dir.path());
}

#[test]
fn session_round_trips_through_an_atomic_write() {
    let dir = tempfile::tempdir().unwrap();
    let paths = SessionPaths::new(dir.path(), "s1");
    let mut file = sample();
    file.save(&paths).unwrap();
    let back = SessionFile::load(&paths).unwrap();
    assert_eq!(back, file);
    assert_no_temp_files(&paths.dir);
}

#[test]
fn write_behind_lands_at_once_and_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let paths = SessionPaths::new(dir.path(), "s1");
    let mut sync = SyncBehind::default();
    let mut file = sample();
    file.save_behind(&paths, &mut sync).unwrap();
    let run = paths.dir.join("00-minimal-x").join(RUN_RECORD_FILE);
    sync.write_json_atomic(&run, &serde_json::json!({"a": 1}))
        .unwrap();
    // Readable (renamed into place) before any fsync was waited for.
    assert_eq!(SessionFile::load(&paths).unwrap(), file);
    assert_eq!(
        read_json::<Value>(&run).unwrap(),
        serde_json::json!({"a": 1})
    );
    assert_eq!(sync.pending(), 2);
    // What Windows waits for before replacing a file: that file's fsync alone.
    sync.wait_for(&run).unwrap();
    assert_eq!(sync.pending(), 1);
    sync.wait().unwrap();
    assert_eq!(sync.pending(), 0);
    // Rewriting a file whose fsync is still pending (what Windows refused while that thread held
    // the file open) lands, and the last write wins.
    for n in 0..5 {
        sync.write_json_atomic(&run, &serde_json::json!({ "n": n }))
            .unwrap();
    }
    assert_eq!(
        read_json::<Value>(&run).unwrap(),
        serde_json::json!({"n": 4})
    );
    sync.wait().unwrap();
    // A write that cannot land fails at once, naming the file.
    fs::write(dir.path().join("plain"), "x").unwrap();
    let err = sync
        .write_atomic(&dir.path().join("plain").join("f.json"), b"{}")
        .unwrap_err();
    assert!(err.to_string().contains("plain"), "{err}");
    assert_no_temp_files(&paths.dir);
}

#[test]
fn verdict_and_outcome_serialize_with_kind_tags() {
    let v = serde_json::to_value(&sample().workflows[0].verdict).unwrap();
    assert_eq!(v["kind"], "minimal_fails");
    assert_eq!(v["stage"], "load");
    let o = serde_json::to_value(&sample().workflows[0].runs[0].outcome).unwrap();
    assert_eq!(o["kind"], "failed");
    assert_eq!(o["node_type"], "KSampler");
}

#[test]
fn newer_schema_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let paths = SessionPaths::new(dir.path(), "s1");
    let mut file = sample();
    file.schema_version = SESSION_SCHEMA_VERSION + 1;
    write_json_atomic(&paths.session_file(), &file).unwrap();
    let err = SessionFile::load(&paths).unwrap_err().to_string();
    assert!(err.contains("update comfy-bisect"), "{err}");
}

#[test]
fn run_dir_names_are_safe_and_sorted_by_step() {
    assert_eq!(run_dir_name(3, "lora", "abc"), "03-lora-abc");
    assert_eq!(run_dir_name(12, "a/b c", "x"), "12-a_b_c-x");
}

#[test]
fn failure_classes() {
    assert!(Outcome::ServerLost { detail: "".into() }.is_failure());
    assert!(Outcome::Timeout { detail: "".into() }.is_failure());
    assert!(!Outcome::Rejected { message: "".into() }.is_failure());
    assert!(!Outcome::Interrupted.is_failure());
    assert!(!Outcome::Passed.is_failure());
}

#[test]
fn the_preflight_environment_is_typed_and_an_unreadable_one_loads_as_none() {
    let stats: crate::comfy::SystemStats = serde_json::from_str(
        r#"{"system": {"os": "posix", "comfyui_version": "0.3.64", "argv": ["main.py", "--lowvram"],
            "embedded_python": false},
            "devices": [{"name": "cuda:0 X : native", "type": "cuda", "index": 0,
            "vram_total": 1024, "vram_free": 512}]}"#,
    )
    .unwrap();
    let mut s = sample();
    s.environment = Some(stats.clone());
    let text = serde_json::to_string(&s).unwrap();
    let back: SessionFile = serde_json::from_str(&text).unwrap();
    let env = back.environment.as_ref().unwrap();
    assert_eq!(env, &stats);
    assert_eq!(env.system.argv, ["main.py", "--lowvram"]);
    // A field this version does not model is kept through the round trip.
    assert_eq!(
        env.system.extra.get("embedded_python"),
        Some(&Value::Bool(false))
    );
    // Another shape (a hand-edited or foreign journal) does not stop the session loading.
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["environment"] = serde_json::json!("posix, 0.3.64");
    let odd: SessionFile = serde_json::from_value(v).unwrap();
    assert!(odd.environment.is_none());
    assert_eq!(odd.workflows, s.workflows);
}

#[test]
fn a_run_summary_writes_what_the_run_delivered_beside_its_numbers() {
    let summary = RunSummary {
        duration_ms: 1200,
        delivered: crate::vocab::ProductSummary {
            memory_fallbacks: vec!["tiled VAE decode fallback".into()],
            product: Some("1 × PNG 512×512".into()),
            product_warnings: vec!["SaveImage #9 wrote 512×512".into()],
            ..Default::default()
        },
        ..RunSummary::default()
    };
    let json = serde_json::to_value(&summary).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "duration_ms",
            "cold",
            "recovered_from_history",
            "memory_fallbacks",
            "product",
            "product_warnings"
        ]
    );
    assert_eq!(json["product"], "1 × PNG 512×512");
    assert_eq!(serde_json::from_value::<RunSummary>(json).unwrap(), summary);
    // A summary written before any of the three existed still loads.
    let old: RunSummary =
        serde_json::from_str(r#"{"duration_ms": 5, "vram_peak_mib": 1.5, "cold": true}"#).unwrap();
    assert_eq!(old.delivered, crate::vocab::ProductSummary::default());
    assert_eq!(old.vram_peak_mib, Some(1.5));
}

#[test]
fn a_strict_first_failure_headline_names_its_kind() {
    let mut job = sample().workflows.remove(0);
    job.verdict = Some(Verdict::FirstFailure {
        step: 0,
        increment: MINIMAL.into(),
        run_id: "r1".into(),
        last_pass_step: 0,
        last_pass_run_id: "r1".into(),
        stage: Some("sample_middle".into()),
        not_run: vec![],
    });
    let plain = "first failure at increment minimal (step 0), stage sample_middle";
    assert_eq!(job.headline().as_deref(), Some(plain));
    job.runs[0].outcome = Some(Outcome::MemoryPressure {
        evidence: vec!["slowed 3.0× (…)".into()],
    });
    assert_eq!(
        job.headline(),
        Some(format!(
            "{plain}: passed under memory pressure, counted as a failure by --strict"
        ))
    );
    job.runs[0].outcome = Some(Outcome::MemoryFallback {
        fallbacks: vec!["tiled VAE decode fallback".into()],
    });
    assert_eq!(
        job.headline(),
        Some(format!(
            "{plain}: passed only through a memory fallback, counted as a failure by --strict"
        ))
    );
    // A verdict whose run the journal no longer has still has its headline.
    job.runs.clear();
    assert_eq!(job.headline().as_deref(), Some(plain));
}
