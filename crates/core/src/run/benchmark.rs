//! The server's own measurement of a run, when it has one: ComfyUI's benchmark capture
//! (`comfy/benchmark/`, late 2026; absent from 0.8.0 and earlier). Every run opts in with a
//! truthy `extra_data.benchmark`; a server with the capture then sends one `benchmark`
//! WebSocket event for our prompt before `executing {node: null}` and writes
//! `output/benchmarks/<prompt_id>.json`; a server without it ignores the key. What is kept:
//! per-node and per-step times, the run's durations and the VRAM/RAM peaks of its own sampler,
//! with where they came from. Pure: it reads frames and JSON.

use super::frames::WsTextRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `extra_data` key that opts a run in, and the WebSocket event's type.
pub(crate) const BENCHMARK_KEY: &str = "benchmark";

/// Where a capture was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureSource {
    /// The `benchmark` WebSocket event for our prompt.
    Websocket,
    /// `output/benchmarks/<prompt_id>.json` through `/view`.
    File,
}

/// One node's time in the capture (`nodes[]`: executed, non-cached nodes in run order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTime {
    /// The node id.
    pub node_id: String,
    /// Its class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_type: Option<String>,
    /// Wall time of the node, ms.
    pub elapsed_ms: f64,
}

/// What the server measured of one run (`benchmark` event, `capture_schema_version` 1–3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerBenchmark {
    /// Where it was read.
    pub source: CaptureSource,
    /// `capture_schema_version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u64>,
    /// `durations.total_run_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_run_ms: Option<f64>,
    /// `durations.sampler_ms`: time inside the sampling loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler_ms: Option<f64>,
    /// `nodes[]`.
    #[serde(default)]
    pub nodes: Vec<NodeTime>,
    /// `sampling.step_durations_ms`: every denoising step of every sampler pass, in order.
    #[serde(default)]
    pub step_ms: Vec<f64>,
    /// `resources.peak.vram_used_mb` (the device's memory in use, from NVML or nvidia-smi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_peak_mb: Option<f64>,
    /// `resources.peak.ram_used_mb` (system RAM in use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_peak_mb: Option<f64>,
    /// `resources.sample_interval_ms`: the server's sampling interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_interval_ms: Option<u64>,
}

/// The capture of our prompt among the run's frames (the last `benchmark` event naming it).
pub(crate) fn from_frames(frames: &[WsTextRecord], prompt_id: &str) -> Option<ServerBenchmark> {
    frames.iter().rev().find_map(|f| {
        let json = f.json.as_ref()?;
        if json.get("type").and_then(Value::as_str) != Some(BENCHMARK_KEY) {
            return None;
        }
        let data = json.get("data")?;
        (data.get("prompt_id").and_then(Value::as_str) == Some(prompt_id))
            .then(|| read(data, CaptureSource::Websocket))
            .flatten()
    })
}

/// A capture record (the event's `data`, or the file's content); None when it is not one.
pub(crate) fn read(record: &Value, source: CaptureSource) -> Option<ServerBenchmark> {
    if record.get("type").and_then(Value::as_str) != Some(BENCHMARK_KEY) {
        return None;
    }
    let num = |v: &Value| v.as_f64();
    let nodes = record["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            Some(NodeTime {
                node_id: n.get("node_id").and_then(Value::as_str)?.to_string(),
                class_type: n
                    .get("class_type")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                elapsed_ms: num(n.get("elapsed_ms")?)?,
            })
        })
        .collect();
    let step_ms = record["sampling"]["step_durations_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(num)
        .collect();
    Some(ServerBenchmark {
        source,
        schema_version: record["capture_schema_version"].as_u64(),
        total_run_ms: num(&record["durations"]["total_run_ms"]),
        sampler_ms: num(&record["durations"]["sampler_ms"]),
        nodes,
        step_ms,
        vram_peak_mb: num(&record["resources"]["peak"]["vram_used_mb"]),
        ram_peak_mb: num(&record["resources"]["peak"]["ram_used_mb"]),
        sample_interval_ms: record["resources"]["sample_interval_ms"].as_u64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture() -> Value {
        let path = format!("{}/benchmark-capture/benchmark-event.json", crate::FIXTURES);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_event_for_our_prompt_gives_node_and_step_times_and_the_peaks() {
        let frames = vec![
            WsTextRecord {
                t_ms: 10,
                socket: 0,
                json: Some(
                    serde_json::json!({"type": "benchmark", "data": {"type": "benchmark", "prompt_id": "other"}}),
                ),
                raw: None,
            },
            WsTextRecord {
                t_ms: 20,
                socket: 0,
                json: Some(serde_json::json!({"type": "benchmark", "data": capture()})),
                raw: None,
            },
        ];
        let b = from_frames(&frames, "f7a1c2e0-1234-4abc-9def-0123456789ab").unwrap();
        assert_eq!(b.source, CaptureSource::Websocket);
        assert_eq!(b.schema_version, Some(3));
        assert_eq!(b.nodes.len(), 3);
        assert_eq!(b.nodes[1].class_type.as_deref(), Some("KSampler"));
        assert_eq!(b.nodes[1].elapsed_ms, 4120.88);
        assert_eq!(b.step_ms, vec![201.3, 199.8, 200.1]);
        assert_eq!(
            (b.vram_peak_mb, b.ram_peak_mb),
            (Some(22140.0), Some(16010.9))
        );
        assert_eq!(b.sample_interval_ms, Some(500));
        assert_eq!(from_frames(&frames, "absent"), None);
    }

    #[test]
    fn a_file_record_reads_the_same_and_other_json_is_not_a_capture() {
        let b = read(&capture(), CaptureSource::File).unwrap();
        assert_eq!(b.source, CaptureSource::File);
        assert_eq!(b.sampler_ms, Some(4012.9));
        assert_eq!(
            read(&serde_json::json!({"nodes": []}), CaptureSource::File),
            None
        );
    }
}
