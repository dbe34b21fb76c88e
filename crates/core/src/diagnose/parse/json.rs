//! The JSON forms of pasted input: an execution_error (the WebSocket message or its data), a
//! `/history` response, a `/prompt` rejection, and a stream of WebSocket messages (one JSON
//! object per line).

use crate::diagnose::{ConsoleSignals, ParseError, ParsedInput};
use crate::diagnose::{Evidence, NodeProgress, RunOutcomeHint};
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

fn str_field(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Splits traceback entries (one frame per entry, possibly multi-line) into lines without the
/// caret markers.
fn traceback_lines(v: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |s: &str| {
        for line in s.lines() {
            let t = line.trim_end();
            if t.trim().is_empty() || t.trim().chars().all(|c| "^~".contains(c)) {
                continue;
            }
            out.push(t.to_string());
        }
    };
    match v {
        Some(Value::Array(items)) => {
            for item in items {
                if let Some(s) = item.as_str() {
                    push(s);
                }
            }
        }
        Some(Value::String(s)) => push(s),
        _ => {}
    }
    out
}

fn evidence_from_error(data: &Value) -> Evidence {
    Evidence {
        node_id: str_field(data, "node_id"),
        node_type: str_field(data, "node_type"),
        exception_type: str_field(data, "exception_type"),
        exception_message: str_field(data, "exception_message"),
        traceback: traceback_lines(data.get("traceback")),
        progress: Vec::new(),
        outcome: None,
        cached_nodes: Vec::new(),
    }
}

/// A field of an execution_error's data as JSON writes it: `"exception_type": "OSError"`.
static CUT_FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""(?P<k>node_id|node_type|exception_type|exception_message)"\s*:\s*(?P<v>"(?:[^"\\]|\\.)*"|\d+)"#)
        .expect("static regex")
});
/// Its traceback array, when the text holds it whole.
static CUT_TRACEBACK_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""traceback"\s*:\s*(?P<v>\[(?:[^\]"]|"(?:[^"\\]|\\.)*")*\])"#)
        .expect("static regex")
});

/// The execution_error of a `/history` response or a WebSocket message whose JSON the paste
/// cut (it does not parse as a whole): its fields read where the text holds them after the
/// `"execution_error"` key.
pub(super) fn cut_execution_error(text: &str) -> Option<ParsedInput> {
    let at = text.rfind("\"execution_error\"")?;
    let rest = &text[at..];
    let mut data = serde_json::Map::new();
    for c in CUT_FIELD_RE.captures_iter(rest) {
        let value: Value = serde_json::from_str(&c["v"]).ok()?;
        data.entry(c["k"].to_string()).or_insert(value);
    }
    if let Some(tb) = CUT_TRACEBACK_RE
        .captures(rest)
        .and_then(|c| serde_json::from_str::<Value>(&c["v"]).ok())
    {
        data.insert("traceback".into(), tb);
    }
    let data = Value::Object(data);
    let evidence = evidence_from_error(&data);
    (evidence.exception_type.is_some() || evidence.exception_message.is_some()).then(|| {
        ParsedInput {
            evidence,
            signals: ConsoleSignals::default(),
        }
    })
}

fn evidence_from_interrupt(data: &Value) -> Evidence {
    Evidence {
        node_id: str_field(data, "node_id"),
        node_type: str_field(data, "node_type"),
        outcome: Some(RunOutcomeHint::Interrupted),
        ..Evidence::default()
    }
}

fn from_event(event: &str, data: &Value) -> Option<Evidence> {
    match event {
        "execution_error" => Some(evidence_from_error(data)),
        "execution_interrupted" => Some(evidence_from_interrupt(data)),
        _ => None,
    }
}

pub(super) fn parse_json(value: &Value) -> Result<ParsedInput, ParseError> {
    let wrap = |evidence: Evidence| ParsedInput {
        evidence,
        signals: ConsoleSignals::default(),
    };
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(t)), Some(data)) = (map.get("type"), map.get("data")) {
                return from_event(t, data)
                    .map(wrap)
                    .ok_or_else(|| ParseError::NoFailureInJson(format!("it is a `{t}` message")));
            }
            if map.contains_key("exception_message") || map.contains_key("exception_type") {
                return Ok(wrap(evidence_from_error(value)));
            }
            if map.contains_key("executed") && map.contains_key("node_id") {
                return Ok(wrap(evidence_from_interrupt(value)));
            }
            if map.contains_key("error") && map.contains_key("node_errors") {
                return Ok(wrap(evidence_from_rejection(value)));
            }
            // A jobs API entry (`GET /api/jobs/{id}`, ComfyUI 0.8 and later): a failed job
            // carries its execution_error at the top level; an interrupted one is `failed` too,
            // with only its status messages saying so.
            if let (Some(Value::String(status)), true) = (map.get("status"), map.contains_key("id"))
            {
                if let Some(error) = map.get("execution_error").filter(|v| v.is_object()) {
                    return Ok(wrap(evidence_from_error(error)));
                }
                let entry = serde_json::json!({ "status": map.get("execution_status") });
                return history_entry_failure(&entry)
                    .map(|(_, e)| wrap(e))
                    .ok_or_else(|| {
                        ParseError::NoFailureInJson(format!(
                            "it is a /api/jobs entry with status `{status}` and neither an \
                             execution_error nor an interruption"
                        ))
                    });
            }
            if map.contains_key("status") && map.contains_key("prompt") {
                return history_entry_failure(value)
                    .map(|(_, e)| wrap(e))
                    .ok_or_else(|| {
                        ParseError::NoFailureInJson(
                            "the history entry finished without an error".into(),
                        )
                    });
            }
            // A /history response: prompt_id -> entry. Take the latest failed prompt.
            let mut best: Option<(f64, Evidence)> = None;
            let mut entries = 0;
            for entry in map.values() {
                if entry.get("status").is_none() {
                    continue;
                }
                entries += 1;
                if let Some((number, e)) = history_entry_failure(entry) {
                    if best.as_ref().is_none_or(|(n, _)| number >= *n) {
                        best = Some((number, e));
                    }
                }
            }
            match best {
                Some((_, e)) => Ok(wrap(e)),
                None if entries > 0 => Err(ParseError::NoFailureInJson(format!(
                    "none of the {entries} history entries ended with execution_error or execution_interrupted"
                ))),
                None => Err(ParseError::NoFailureInJson(
                    "it is neither an execution_error nor a /history response".into(),
                )),
            }
        }
        Value::Array(items) => {
            // A `[event, data]` pair as in history's status.messages.
            if let (Some(Value::String(event)), Some(data)) = (items.first(), items.get(1)) {
                if let Some(e) = from_event(event, data) {
                    return Ok(wrap(e));
                }
            }
            if items.iter().all(|v| v.is_object()) && !items.is_empty() {
                return parse_ws_stream(items);
            }
            Err(ParseError::NoFailureInJson(
                "the array holds no execution_error".into(),
            ))
        }
        _ => Err(ParseError::NoFailureInJson(
            "it is a bare JSON value".into(),
        )),
    }
}

/// The failure of one history entry, with the prompt's queue number for ordering.
fn history_entry_failure(entry: &Value) -> Option<(f64, Evidence)> {
    let messages = entry.get("status")?.get("messages")?.as_array()?;
    let number = entry
        .get("prompt")
        .and_then(|p| p.get(0))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let mut found = None;
    for m in messages {
        let (Some(event), Some(data)) = (m.get(0).and_then(Value::as_str), m.get(1)) else {
            continue;
        };
        if let Some(e) = from_event(event, data) {
            found = Some(e);
        }
    }
    let mut evidence = found?;
    if evidence.node_type.is_none() {
        if let (Some(id), Some(graph)) = (
            evidence.node_id.as_deref(),
            entry.get("prompt").and_then(|p| p.get(2)),
        ) {
            evidence.node_type = graph
                .get(id)
                .and_then(|n| n.get("class_type"))
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }
    Some((number, evidence))
}

fn evidence_from_rejection(value: &Value) -> Evidence {
    let error = value.get("error").cloned().unwrap_or(Value::Null);
    let mut message = str_field(&error, "message").unwrap_or_default();
    if let Some(details) = str_field(&error, "details").filter(|d| !d.is_empty()) {
        message.push_str(": ");
        message.push_str(&details);
    }
    let mut node_id = None;
    let mut node_type = None;
    if let Some(Value::Object(nodes)) = value.get("node_errors") {
        if let Some((id, node)) = nodes.iter().next() {
            node_id = Some(id.clone());
            node_type = str_field(node, "class_type");
            if let Some(Value::Array(errors)) = node.get("errors") {
                for e in errors {
                    let m = str_field(e, "message").unwrap_or_default();
                    let d = str_field(e, "details").unwrap_or_default();
                    message.push_str(&format!("\n{m}: {d}"));
                }
            }
        }
    }
    Evidence {
        node_id,
        node_type,
        exception_type: str_field(&error, "type"),
        exception_message: Some(message),
        outcome: Some(RunOutcomeHint::Rejected),
        ..Evidence::default()
    }
}

/// The `{"type","data"}` frame inside one NDJSON object (a bare frame, or a capture record with
/// the frame under `json`).
fn frame_of(v: &Value) -> Option<(&str, &Value)> {
    let f = if v.get("type").is_some() && v.get("data").is_some() {
        v
    } else {
        v.get("json")?
    };
    Some((f.get("type")?.as_str()?, f.get("data")?))
}

#[derive(Default)]
struct PromptRun {
    order: Vec<String>,
    progress: std::collections::HashMap<String, (u64, u64)>,
    failure: Option<Evidence>,
    finished: bool,
}

fn as_count(v: Option<&Value>) -> Option<u64> {
    let f = v?.as_f64()?;
    (f.is_finite() && f >= 0.0).then(|| f.round() as u64)
}

/// A stream of WebSocket messages: builds the node timeline of the last failed (or unfinished)
/// prompt.
pub(super) fn parse_ws_stream(values: &[Value]) -> Result<ParsedInput, ParseError> {
    let mut runs: Vec<(String, PromptRun)> = Vec::new();
    let mut class_types: std::collections::HashMap<String, String> = Default::default();
    let mut pending_graph: Option<&Value> = None;
    let mut graphs: std::collections::HashMap<String, &Value> = Default::default();
    let mut current: Option<String> = None;
    fn run_for<'a>(runs: &'a mut Vec<(String, PromptRun)>, id: &str) -> &'a mut PromptRun {
        if let Some(i) = runs.iter().position(|(p, _)| p == id) {
            return &mut runs[i].1;
        }
        runs.push((id.to_string(), PromptRun::default()));
        &mut runs.last_mut().expect("just pushed").1
    }
    for v in values {
        if let Some(body) = v.get("body") {
            if let Some(graph) = body.get("prompt").filter(|g| g.is_object()) {
                pending_graph = Some(graph);
            }
            if let (Some(id), Some(graph)) = (str_field(body, "prompt_id"), pending_graph) {
                graphs.insert(id, graph);
            }
        }
        let Some((kind, data)) = frame_of(v) else {
            continue;
        };
        let prompt_id = str_field(data, "prompt_id").or_else(|| current.clone());
        match kind {
            "execution_start" => {
                if let Some(id) = &prompt_id {
                    current = Some(id.clone());
                    run_for(&mut runs, id);
                }
            }
            "executing" => {
                let (Some(id), Some(node)) = (prompt_id, str_field(data, "node")) else {
                    continue;
                };
                let run = run_for(&mut runs, &id);
                if !run.order.contains(&node) {
                    run.order.push(node.clone());
                }
                run.progress.entry(node).or_insert((0, 1));
            }
            "progress" => {
                let (Some(id), Some(node)) = (prompt_id, str_field(data, "node")) else {
                    continue;
                };
                let (Some(value), Some(max)) =
                    (as_count(data.get("value")), as_count(data.get("max")))
                else {
                    continue;
                };
                let run = run_for(&mut runs, &id);
                if !run.order.contains(&node) {
                    run.order.push(node.clone());
                }
                run.progress.insert(node, (value, max));
            }
            "progress_state" => {
                let Some(id) = prompt_id else { continue };
                let Some(Value::Object(nodes)) = data.get("nodes") else {
                    continue;
                };
                let run = run_for(&mut runs, &id);
                for (node, state) in nodes {
                    let (Some(value), Some(max)) =
                        (as_count(state.get("value")), as_count(state.get("max")))
                    else {
                        continue;
                    };
                    if !run.order.contains(node) {
                        run.order.push(node.clone());
                    }
                    run.progress.insert(node.clone(), (value, max));
                }
            }
            "execution_error" | "execution_interrupted" => {
                if let Some(id) = prompt_id {
                    let run = run_for(&mut runs, &id);
                    run.failure = from_event(kind, data);
                    run.finished = true;
                }
            }
            "execution_success" => {
                if let Some(id) = prompt_id {
                    run_for(&mut runs, &id).finished = true;
                }
            }
            _ => {}
        }
    }
    for (id, graph) in &graphs {
        if let Value::Object(nodes) = graph {
            for (node, def) in nodes {
                if let Some(ct) = def.get("class_type").and_then(Value::as_str) {
                    class_types.insert(format!("{id}/{node}"), ct.to_string());
                }
            }
        }
    }
    let chosen = runs
        .iter()
        .rev()
        .find(|(_, r)| r.failure.is_some())
        .or_else(|| {
            runs.iter()
                .rev()
                .find(|(_, r)| !r.finished && !r.order.is_empty())
        });
    let Some((prompt_id, run)) = chosen else {
        return Err(ParseError::NoFailureInJson(if runs.is_empty() {
            "the lines hold no ComfyUI WebSocket messages".into()
        } else {
            "every prompt in the WebSocket messages finished successfully".into()
        }));
    };
    let mut evidence = match &run.failure {
        Some(e) => e.clone(),
        None => Evidence {
            outcome: Some(RunOutcomeHint::ServerLost),
            ..Evidence::default()
        },
    };
    evidence.progress = run
        .order
        .iter()
        .map(|node| {
            let (value, max) = run.progress.get(node).copied().unwrap_or((0, 1));
            let class_type = class_types
                .get(&format!("{prompt_id}/{node}"))
                .cloned()
                .or_else(|| {
                    (evidence.node_id.as_deref() == Some(node.as_str()))
                        .then(|| evidence.node_type.clone())
                        .flatten()
                });
            NodeProgress {
                node_id: node.clone(),
                class_type,
                value,
                max,
            }
        })
        .collect();
    Ok(ParsedInput {
        evidence,
        signals: ConsoleSignals::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse_input;
    use crate::diagnose::RunOutcomeHint;
    #[test]
    fn rejection_body() {
        let p = parse_input(r#"{"error":{"type":"prompt_outputs_failed_validation","message":"Prompt outputs failed validation","details":"","extra_info":{}},"node_errors":{"4":{"errors":[{"type":"value_not_in_list","message":"Value not in list","details":"ckpt_name: 'x' not in []","extra_info":{}}],"dependent_outputs":["9"],"class_type":"CheckpointLoaderSimple"}}}"#).unwrap();
        assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::Rejected));
        assert_eq!(
            p.evidence.node_type.as_deref(),
            Some("CheckpointLoaderSimple")
        );
    }

    /// The bodies of `GET /api/jobs/{id}` from a real ComfyUI 0.8.0 (the capture's `body`).
    fn job(name: &str) -> String {
        let path = format!(
            "{}/comfyui-0.8.0/realrun_api_jobs_id_{name}.json",
            crate::FIXTURES
        );
        let capture: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        capture["body"].to_string()
    }

    #[test]
    fn a_cut_history_response_is_read_by_its_execution_error() {
        let cut = r#"                "17"
            ]
        ],
        "status": {
            "messages": [
                [
                    "execution_error",
                    {
                        "node_id": "13",
                        "node_type": "IndexTTSEngineNode",
                        "exception_message": "[Errno 22] Invalid argument\n",
                        "exception_type": "OSError",
                        "traceback": [
                            "  File \"/w/execution.py\", line 496, in execute\n"
                        ],
                        "current_inputs": {"#;
        let parsed = super::cut_execution_error(cut).expect("read");
        let e = &parsed.evidence;
        assert_eq!(e.exception_type.as_deref(), Some("OSError"));
        assert_eq!(e.node_type.as_deref(), Some("IndexTTSEngineNode"));
        assert_eq!(e.node_id.as_deref(), Some("13"));
        assert_eq!(e.traceback.len(), 1);
        assert!(super::cut_execution_error("\"execution_error\", {\"node_id\": \"13\"").is_none());
    }

    #[test]
    fn a_failed_job_of_the_jobs_api_is_read_as_its_execution_error() {
        let p = parse_input(&job("failed")).unwrap();
        assert_eq!(p.evidence.node_type.as_deref(), Some("VAEDecode"));
        assert_eq!(p.evidence.node_id.as_deref(), Some("8"));
        assert!(p.evidence.exception_type.is_some());
    }

    #[test]
    fn an_interrupted_job_is_read_from_its_status_messages() {
        let p = parse_input(&job("interrupted")).unwrap();
        assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::Interrupted));
        assert_eq!(p.evidence.node_type.as_deref(), Some("KSampler"));
    }

    #[test]
    fn a_finished_job_says_it_is_a_job_without_a_failure() {
        let err = parse_input(&job("done")).unwrap_err().to_string();
        assert!(err.contains("/api/jobs entry"), "{err}");
    }
}
