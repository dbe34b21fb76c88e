//! Every real error captured from a ComfyUI server in tests/fixtures/comfyui/: the /history
//! bodies, the WebSocket transcripts of failed and interrupted runs, and the execution_error
//! message shapes cut out of them.

use comfy_bisect_core::diagnose::{self, Diagnosis, RunOutcomeHint, Stage};
use comfy_bisect_core::vocab::FailureKind;
use serde_json::{json, Value};

const DIR: &str = "tests/fixtures/comfyui";

/// What one fixture must come out as.
struct Expect {
    file: &'static str,
    kind: FailureKind,
    stage: Stage,
    node_id: &'static str,
    node_type: &'static str,
    requested_mib: Option<f64>,
}

const fn expect(
    file: &'static str,
    kind: FailureKind,
    stage: Stage,
    node_id: &'static str,
    node_type: &'static str,
    requested_mib: Option<f64>,
) -> Expect {
    Expect {
        file,
        kind,
        stage,
        node_id,
        node_type,
        requested_mib,
    }
}

const EXPECTED: &[Expect] = &[
    expect(
        "history_execution_error_oom_core.json",
        FailureKind::HostRam,
        Stage::Postprocess,
        "2",
        "ImageScale",
        Some(12288.0),
    ),
    expect(
        "history_execution_error_runtime_core.json",
        FailureKind::Other,
        Stage::Unknown,
        "2",
        "LatentUpscaleBy",
        None,
    ),
    expect(
        "history_sd15_execution_error_oom_1024px.json",
        FailureKind::HostRam,
        Stage::Unknown,
        "3",
        "KSampler",
        Some(4096.0),
    ),
    expect(
        "history_sd15_execution_error_oom_2048px.json",
        FailureKind::HostRam,
        Stage::Unknown,
        "3",
        "KSampler",
        Some(4096.0),
    ),
    expect(
        "history_interrupted.json",
        FailureKind::Other,
        Stage::Unknown,
        "4",
        "ImageScale",
        None,
    ),
    expect(
        "history_sd15_interrupted.json",
        FailureKind::Other,
        Stage::Unknown,
        "3",
        "KSampler",
        None,
    ),
    expect(
        "ws_execution_error_oom_core.ndjson",
        FailureKind::HostRam,
        Stage::Postprocess,
        "2",
        "ImageScale",
        Some(12288.0),
    ),
    expect(
        "ws_execution_error_runtime_core.ndjson",
        FailureKind::Other,
        Stage::Unknown,
        "2",
        "LatentUpscaleBy",
        None,
    ),
    expect(
        "ws_sd15_execution_error_oom_1024px.ndjson",
        FailureKind::HostRam,
        Stage::SampleFirst,
        "3",
        "KSampler",
        Some(4096.0),
    ),
    expect(
        "ws_sd15_execution_error_oom_2048px.ndjson",
        FailureKind::HostRam,
        Stage::SampleFirst,
        "3",
        "KSampler",
        Some(4096.0),
    ),
    expect(
        "ws_sd15_execution_error_oom_vaedecode_2048px.ndjson",
        FailureKind::HostRam,
        Stage::Decode,
        "8",
        "VAEDecode",
        Some(4096.0),
    ),
    expect(
        "ws_interrupt_model_free.ndjson",
        FailureKind::Other,
        Stage::Unknown,
        "4",
        "ImageScale",
        None,
    ),
    expect(
        "ws_sd15_interrupt_during_ksampler.ndjson",
        FailureKind::Other,
        Stage::Unknown,
        "3",
        "KSampler",
        None,
    ),
];

fn read(name: &str) -> String {
    let path = format!("{DIR}/{name}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn is_real_error_fixture(name: &str) -> bool {
    (name.starts_with("history_")
        && (name.contains("execution_error") || name.contains("interrupted")))
        || (name.starts_with("ws_")
            && (name.contains("execution_error") || name.contains("interrupt")))
}

fn check(name: &str, d: &Diagnosis, e: &Expect) {
    assert_eq!(d.kind, e.kind, "{name}: {}", d.kind_evidence);
    assert_eq!(d.stage, e.stage, "{name}: {}", d.stage_evidence);
    assert!(d.stage_candidates.contains(&d.stage), "{name}");
    assert_eq!(d.node_id.as_deref(), Some(e.node_id), "{name}");
    assert_eq!(d.node_type.as_deref(), Some(e.node_type), "{name}");
    assert_eq!(d.numbers.requested_mib, e.requested_mib, "{name}");
    assert_eq!(serde_json::to_value(d).unwrap()["root_cause"], "unknown");
    if e.kind == FailureKind::HostRam {
        assert!(d.numbers_consistent, "{name}: {:?}", d.inconsistencies);
        assert!(
            d.next_check[0].contains("system RAM"),
            "{name}: {:?}",
            d.next_check
        );
    }
}

#[test]
fn every_real_error_fixture_is_diagnosed() {
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(DIR).expect("fixture folder") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !is_real_error_fixture(&name) {
            continue;
        }
        let Some(expected) = EXPECTED.iter().find(|e| e.file == name) else {
            panic!("{name} holds a real error but has no expectation in this test");
        };
        let d = diagnose::diagnose_text(&read(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        check(&name, &d, expected);
        seen.push(name);
    }
    assert_eq!(seen.len(), EXPECTED.len(), "fixtures seen: {seen:?}");
}

#[test]
fn websocket_timeline_separates_first_step_from_unknown_progress() {
    // The transcript shows KSampler started and no step finished: the first step, for certain.
    let ws = diagnose::diagnose_text(&read("ws_sd15_execution_error_oom_1024px.ndjson")).unwrap();
    assert_eq!(ws.stage_candidates, vec![Stage::SampleFirst]);
    // History alone has no progress: the frames place it in a step, but first or later step
    // stay open, so the stage is unknown (no default) with both steps as candidates.
    let history =
        diagnose::diagnose_text(&read("history_sd15_execution_error_oom_1024px.json")).unwrap();
    assert_eq!(history.stage, Stage::Unknown);
    assert_eq!(
        history.stage_candidates,
        vec![Stage::Unknown, Stage::SampleFirst, Stage::SampleMiddle]
    );
}

#[test]
fn interrupt_during_sampling_reports_where_it_stopped() {
    let p = diagnose::parse_input(&read("ws_sd15_interrupt_during_ksampler.ndjson")).unwrap();
    assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::Interrupted));
    let ksampler = p
        .evidence
        .progress
        .iter()
        .find(|n| n.node_id == "3")
        .unwrap();
    assert_eq!((ksampler.value, ksampler.max), (3, 30));
    assert_eq!(ksampler.class_type.as_deref(), Some("KSampler"));
    let order: Vec<&str> = p
        .evidence
        .progress
        .iter()
        .map(|n| n.node_id.as_str())
        .collect();
    assert_eq!(order, ["5", "7", "6", "3"]);
    let d = diagnose::diagnose_input(&p);
    assert!(
        d.stage_evidence.contains("interrupted"),
        "{}",
        d.stage_evidence
    );
    assert!(d.stage_evidence.contains("3/30"), "{}", d.stage_evidence);
}

/// The execution_error cut out of a history body, as the WebSocket message, as its bare data and
/// as a `[event, data]` pair: all three read the same.
#[test]
fn execution_error_message_shapes() {
    let history: Value =
        serde_json::from_str(&read("history_execution_error_oom_core.json")).unwrap();
    let entry = history.as_object().unwrap().values().next().unwrap();
    let messages = entry["status"]["messages"].as_array().unwrap();
    let data = messages
        .iter()
        .find(|m| m[0] == "execution_error")
        .map(|m| m[1].clone())
        .unwrap();
    let shapes = [
        json!({"type": "execution_error", "data": data}),
        data.clone(),
        json!(["execution_error", data]),
        entry.clone(),
    ];
    for shape in shapes {
        let d = diagnose::diagnose_text(&shape.to_string()).unwrap();
        check("shape", &d, &EXPECTED[0]);
    }
}

#[test]
fn whole_server_history_picks_a_failed_prompt() {
    let d = diagnose::diagnose_text(&read("history_all_final_server.json")).unwrap();
    assert_eq!(d.kind, FailureKind::Other);
    assert!(d.node_type.is_some());
}

#[test]
fn successful_runs_are_not_failures() {
    for name in ["history_core_success.json", "ws_core_success.ndjson"] {
        let err = diagnose::diagnose_text(&read(name)).unwrap_err();
        assert!(err.to_string().contains("no failure"), "{name}: {err}");
    }
}
