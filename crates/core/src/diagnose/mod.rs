//! Failure diagnosis: what kind of failure a run had, at which stage, with which allocator
//! numbers, and what to check next. The root cause is always reported as unknown.
//!
//! The module owns the classification rules (`kind`, `stage`, and `frames`: the table from
//! well-known traceback functions and files to stages), the allocator-number parser and
//! its consistency checks (`numbers`), the parsers for text a user pastes (`parse`: console logs
//! and tracebacks in `parse/console/`, execution_error / history / WebSocket JSON in
//! `parse/json.rs`), the advice per stage (`advice`) and the
//! human rendering (`render`). The types they all share — the evidence, the console signals,
//! the diagnosis — live in `evidence`; this file declares the parts, re-exports them and runs
//! them in order. Everything here is pure: no network, no file system.

mod advice;
mod evidence;
mod frames;
mod kind;
mod numbers;
mod parse;
mod render;
mod stage;

use crate::vocab::FailureKind;
pub use crate::vocab::{Numbers, RunOutcomeHint, Stage, StageConfidence};
pub use evidence::{
    lenient_diagnosis, ConsoleSignals, ConsoleTail, Diagnosis, Evidence, ModelActivity,
    NodeProgress, ParseError, ParsedInput, RootCause,
};
pub use parse::{console_signals, parse_input};

/// Diagnoses one failed run from its evidence (pure).
pub fn diagnose(evidence: &Evidence) -> Diagnosis {
    diagnose_with_signals(evidence, &ConsoleSignals::default())
}

/// Diagnoses a parsed paste: the evidence plus what the console log showed around the failure.
pub fn diagnose_input(input: &ParsedInput) -> Diagnosis {
    diagnose_with_signals(&input.evidence, &input.signals)
}

/// The diagnosis of input that holds no readable failure: kind and stage `unknown`, the reason
/// in `kind_evidence` and `stage_evidence` (what `comfy-bisect diagnose --json` prints then).
pub fn no_failure(reason: &str) -> Diagnosis {
    Diagnosis {
        kind: FailureKind::Unknown,
        stage: Stage::Unknown,
        stage_evidence: format!("No failure was found, so there is no stage: {reason}."),
        node_type: None,
        node_id: None,
        numbers: Numbers::default(),
        numbers_consistent: true,
        next_check: vec![
            "Paste the console from `got prompt` to the error (or the execution_error / /history JSON) and run diagnose again.".into(),
        ],
        candidates: Vec::new(),
        root_cause: RootCause::Unknown,
        kind_evidence: format!("No failure was found in the input: {reason}."),
        stage_candidates: vec![Stage::Unknown],
        stage_confidence: StageConfidence::Unknown,
        asynchronous_error_location_unreliable: false,
        inconsistencies: Vec::new(),
        fragmentation: None,
        exception_type: None,
        message: None,
        last_progress: None,
        outcome: None,
        cached_nodes: Vec::new(),
    }
}

/// Parses pasted text and diagnoses it.
pub fn diagnose_text(text: &str) -> Result<Diagnosis, ParseError> {
    parse_input(text).map(|p| diagnose_input(&p))
}

/// Renders a diagnosis for people (the non-`--json` output of `comfy-bisect diagnose`).
pub fn render_text(diagnosis: &Diagnosis) -> String {
    render::render(diagnosis)
}

fn diagnose_with_signals(evidence: &Evidence, signals: &ConsoleSignals) -> Diagnosis {
    let error_text = error_text(evidence);
    let kind_verdict = kind::classify(evidence, signals, &error_text);
    let numbers = if error_text.is_empty() {
        Numbers::default()
    } else {
        numbers::parse(&error_text)
    };
    let inconsistencies = numbers::check(&numbers);
    let numbers_consistent = inconsistencies.is_empty();
    let fragmentation = if numbers_consistent && kind_verdict.kind.is_gpu_oom() {
        numbers::fragmentation_visible(&numbers).then(|| "not proven".to_string())
    } else {
        None
    };
    let failing = stage::failing_node(evidence);
    let verdict = stage::resolve(
        evidence,
        signals,
        kind_verdict.kind,
        kind_verdict.asynchronous,
        &failing,
    );
    let advice = advice::advise(&advice::AdviceInput {
        kind: kind_verdict.kind,
        stage: verdict.stage,
        stage_candidates: &verdict.candidates,
        numbers: &numbers,
        numbers_consistent,
        fragmentation: fragmentation.is_some(),
        asynchronous: kind_verdict.asynchronous,
        interrupted: evidence.outcome == Some(RunOutcomeHint::Interrupted),
    });
    let message = evidence
        .exception_message
        .as_deref()
        .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(str::to_string);
    Diagnosis {
        kind: kind_verdict.kind,
        stage: verdict.stage,
        stage_evidence: verdict.evidence,
        node_type: failing.node_type.clone(),
        node_id: failing.node_id.clone(),
        numbers,
        numbers_consistent,
        next_check: advice.next_check,
        candidates: advice.candidates,
        root_cause: RootCause::Unknown,
        kind_evidence: kind_verdict.evidence,
        stage_candidates: verdict.candidates,
        stage_confidence: verdict.confidence,
        asynchronous_error_location_unreliable: kind_verdict.asynchronous,
        inconsistencies,
        fragmentation,
        exception_type: evidence.exception_type.clone(),
        message,
        last_progress: failing.progress.clone(),
        outcome: evidence.outcome,
        cached_nodes: evidence.cached_nodes.clone(),
    }
}

/// The exception type and message joined, the text the wording rules read.
fn error_text(evidence: &Evidence) -> String {
    let mut text = String::new();
    if let Some(t) = evidence.exception_type.as_deref() {
        text.push_str(t.trim());
    }
    if let Some(m) = evidence.exception_message.as_deref() {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(m.trim());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, class: &str, value: u64, max: u64) -> NodeProgress {
        NodeProgress {
            node_id: id.into(),
            class_type: Some(class.into()),
            value,
            max,
        }
    }

    /// A process that died without a Python error takes its stage from the last console
    /// evidence before the death: sampling finished, then the VAE was being loaded → decode,
    /// likely (issue #23 item 4).
    #[test]
    fn a_death_without_a_python_error_after_sampling_and_a_vae_load_is_a_likely_decode() {
        for death in [
            "Killed",
            "Fatal Python error: Aborted",
            "Process finished with exit code -1073741819 (0xC0000005)",
        ] {
            let text = format!(
                "got prompt\nRequested to load WAN21\nloaded completely 9500.0 8000.5 True\n\
                 100%|██████████| 20/20 [02:10<00:00,  6.50s/it]\nRequested to load WanVAE\n\
                 loaded completely 1200.0 242.0 True\n{death}\n"
            );
            let d = diagnose_text(&text).unwrap();
            assert_eq!(d.kind, FailureKind::ProcessKilled, "{death}: {d:?}");
            assert_eq!(d.stage, Stage::Decode, "{death}: {}", d.stage_evidence);
            assert_eq!(d.stage_confidence, StageConfidence::Likely, "{death}");
            // Died while the VAE was being loaded for the decode.
            let cut = text.replace("loaded completely 1200.0 242.0 True\n", "");
            let d = diagnose_text(&cut).unwrap();
            assert_eq!(d.stage, Stage::Decode, "{death}: {}", d.stage_evidence);
            assert_eq!(d.stage_confidence, StageConfidence::Likely, "{death}");
        }
    }

    #[test]
    fn server_lost_mid_sampling_uses_the_running_node() {
        let evidence = Evidence {
            progress: vec![
                node("4", "CheckpointLoaderSimple", 1, 1),
                node("6", "CLIPTextEncode", 1, 1),
                node("3", "KSampler", 5, 20),
            ],
            outcome: Some(RunOutcomeHint::ServerLost),
            ..Evidence::default()
        };
        let d = diagnose(&evidence);
        assert_eq!(d.kind, FailureKind::ProcessKilled);
        assert_eq!(d.stage, Stage::SampleMiddle);
        assert_eq!(d.node_id.as_deref(), Some("3"));
        assert_eq!(d.node_type.as_deref(), Some("KSampler"));
        assert!(d.stage_evidence.contains("5/20"), "{}", d.stage_evidence);
    }

    #[test]
    fn sampler_at_full_progress_fails_in_its_built_in_decode() {
        let evidence = Evidence {
            node_id: Some("12".into()),
            node_type: Some("WanVideoSampler".into()),
            exception_type: Some("torch.OutOfMemoryError".into()),
            exception_message: Some("CUDA out of memory. Tried to allocate 3.00 GiB.".into()),
            progress: vec![node("12", "WanVideoSampler", 30, 30)],
            ..Evidence::default()
        };
        assert_eq!(diagnose(&evidence).stage, Stage::Decode);
    }

    #[test]
    fn contract_field_names_are_stable() {
        let d = diagnose(&Evidence {
            exception_message: Some("CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 10.00 MiB is free. Of the allocated memory 4.00 GiB is allocated by PyTorch, and 3.00 GiB is reserved by PyTorch but unallocated.".into()),
            ..Evidence::default()
        });
        let v = serde_json::to_value(&d).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            &keys[..10],
            [
                "kind",
                "stage",
                "stage_evidence",
                "node_type",
                "node_id",
                "numbers",
                "numbers_consistent",
                "next_check",
                "candidates",
                "root_cause"
            ]
        );
        let numbers: Vec<&str> = v["numbers"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            &numbers[..8],
            [
                "requested_mib",
                "gpu_index",
                "total_mib",
                "free_mib",
                "process_in_use_mib",
                "allocated_mib",
                "reserved_unallocated_mib",
                "device_limit_mib"
            ]
        );
        assert_eq!(v["root_cause"], "unknown");
        assert_eq!(v["fragmentation"], "not proven");
        assert!(d
            .candidates
            .iter()
            .any(|c| c.starts_with("fragmentation: not proven")));
        let back: Diagnosis = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }
}
