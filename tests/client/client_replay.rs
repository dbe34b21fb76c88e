//! Replays every real ComfyUI WebSocket capture (`tests/fixtures/comfyui/ws_*.ndjson`) through
//! the event tracker and checks the outcome it derives for each submitted prompt, and that the
//! captured `/history/{id}` answers agree with it.

use comfy_bisect_core::comfy::protocol::HistoryEntry;
use comfy_bisect_core::comfy::{EventTracker, Terminal, TerminalKind};
use serde_json::Value;
use std::collections::BTreeSet;

const DIR: &str = "tests/fixtures/comfyui";

struct Transcript {
    header: Value,
    events: Vec<Value>,
}

fn load(name: &str) -> Transcript {
    let path = format!("{DIR}/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().unwrap()["header"].clone();
    Transcript {
        header,
        events: lines.collect(),
    }
}

impl Transcript {
    /// Prompt ids returned by successful `POST /prompt` answers, in submission order.
    fn prompts(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["channel"] == "http" && e["dir"] == "response" && e["status"] == 200)
            .filter(|e| e["path"].as_str().is_some_and(|p| p.ends_with("/prompt")))
            .filter(|e| e["method"] == "POST" || e["method"].is_null())
            .filter_map(|e| e["body"]["prompt_id"].as_str().map(String::from))
            .collect()
    }

    /// Feeds every received frame to a tracker for `prompt_id`.
    fn replay(&self, prompt_id: &str) -> EventTracker {
        let mut t = EventTracker::new(prompt_id);
        for e in &self.events {
            if e["channel"] != "ws" || e["dir"] != "in" {
                continue;
            }
            let at_ms = (e["t"].as_f64().unwrap() * 1000.0) as u64;
            match e["kind"].as_str() {
                Some("text") => {
                    t.feed_text(&e["json"].to_string(), at_ms);
                }
                Some("binary") => t.feed_binary(e["size"].as_u64().unwrap() as usize),
                other => panic!("unknown frame kind {other:?}"),
            }
        }
        t
    }

    /// The last captured non-empty `GET /history/{prompt_id}` answer.
    fn history(&self, prompt_id: &str) -> Option<HistoryEntry> {
        self.events
            .iter()
            .filter(|e| e["channel"] == "http" && e["dir"] == "response")
            .filter(|e| e["path"].as_str().is_some_and(|p| p.ends_with(prompt_id)))
            .filter_map(|e| e["body"].get(prompt_id).cloned())
            .map(|v| serde_json::from_value(v).unwrap())
            .next_back()
    }
}

fn kind(t: &EventTracker) -> Option<TerminalKind> {
    t.terminal().map(Terminal::kind)
}

fn error_of(t: &EventTracker) -> &comfy_bisect_core::comfy::ExecutionError {
    match t.terminal() {
        Some(Terminal::Error(e)) => e,
        other => panic!("expected an execution_error, got {other:?}"),
    }
}

fn ran(t: &EventTracker) -> Vec<&str> {
    t.timeline()
        .iter()
        .filter(|n| !n.cached)
        .map(|n| n.node_id.as_str())
        .collect()
}

/// Replays one prompt, checks it finished and that history agrees; returns the tracker.
fn finished(tr: &Transcript, prompt_id: &str, expected: TerminalKind) -> EventTracker {
    let mut t = tr.replay(prompt_id);
    assert!(t.is_finished(), "{prompt_id}: no executing(node=null)");
    assert_eq!(kind(&t), Some(expected), "{prompt_id}");
    if let Some(h) = tr.history(prompt_id) {
        let before = t.terminal().cloned();
        assert_eq!(t.apply_history(&h, 999_999), None, "history disagrees");
        assert_eq!(
            t.terminal().cloned(),
            before,
            "history changed the terminal"
        );
    }
    t
}

fn check(name: &str) {
    let tr = load(name);
    let p = tr.prompts();
    match name {
        "ws_core_success.ndjson"
        | "ws_api_prefix.ndjson"
        | "ws_connect_without_clientId.ndjson" => {
            assert_eq!(p.len(), 1);
            let t = finished(&tr, &p[0], TerminalKind::Success);
            assert!(t.cached().is_empty());
            assert_eq!(
                ran(&t).into_iter().collect::<BTreeSet<_>>(),
                BTreeSet::from(["1", "2", "3", "4"])
            );
            let outputs = t.timeline().iter().filter(|n| n.output.is_some()).count();
            assert_eq!(outputs, 2, "SaveImage and PreviewImage report outputs");
            assert_eq!(t.sid(), tr.header["client_id"].as_str());
            assert!(t.timeline().iter().all(|n| n.state == "finished"));
        }
        "ws_core_cached.ndjson" => {
            assert_eq!(p.len(), 2);
            let full = finished(&tr, &p[0], TerminalKind::Success);
            assert_eq!(full.cached(), ["1", "2", "3", "4"]);
            assert!(ran(&full).is_empty(), "a full cache hit runs nothing");
            assert!(full.timeline().iter().all(|n| n.started_ms.is_none()));
            let out3 = full.timeline().iter().find(|n| n.node_id == "3").unwrap();
            assert!(
                out3.output.is_some(),
                "cached output nodes still report (old) outputs"
            );
            let partial = finished(&tr, &p[1], TerminalKind::Success);
            assert_eq!(partial.cached(), ["1", "4"]);
            assert_eq!(ran(&partial), ["2", "3"]);
        }
        "ws_execution_error_oom_core.ndjson" => {
            assert_eq!(p.len(), 2);
            for (i, id) in p.iter().enumerate() {
                let t = finished(&tr, id, TerminalKind::Error);
                let e = error_of(&t);
                assert_eq!(
                    (e.node_id.as_str(), e.node_type.as_str()),
                    ("2", "ImageScale")
                );
                assert_eq!(e.exception_type, "RuntimeError");
                assert!(e.exception_message.contains("DefaultCPUAllocator"));
                let failed = t.timeline().iter().find(|n| n.node_id == "2").unwrap();
                assert_eq!(failed.state, "error");
                if i == 1 {
                    assert_eq!(t.cached(), ["1"]);
                    assert!(e.executed.is_empty(), "cached nodes are not in `executed`");
                }
            }
        }
        "ws_execution_error_runtime_core.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Error);
            let e = error_of(&t);
            assert_eq!(
                (e.node_id.as_str(), e.node_type.as_str()),
                ("2", "LatentUpscaleBy")
            );
            assert!(e.exception_message.starts_with("Input and output sizes"));
            assert!(!e.traceback.is_empty());
            assert_eq!(e.executed, ["1"]);
        }
        "ws_sd15_execution_error_oom_1024px.ndjson"
        | "ws_sd15_execution_error_oom_2048px.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Error);
            let e = error_of(&t);
            assert_eq!(
                (e.node_id.as_str(), e.node_type.as_str()),
                ("3", "KSampler")
            );
            assert!(e.exception_message.contains("4294967296"));
            assert!(e
                .traceback
                .iter()
                .any(|f| f.contains("sub_quadratic_attention")));
        }
        "ws_sd15_execution_error_oom_vaedecode_2048px.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Error);
            let e = error_of(&t);
            assert_eq!(
                (e.node_id.as_str(), e.node_type.as_str()),
                ("8", "VAEDecode")
            );
            let decode = t.timeline().iter().find(|n| n.node_id == "8").unwrap();
            assert!(
                decode.duration_ms().unwrap() > 5000,
                "the decode ran ~6 s before failing"
            );
        }
        "ws_interrupt_model_free.ndjson" => {
            assert_eq!(p.len(), 3);
            for id in [&p[0], &p[2]] {
                let t = finished(&tr, id, TerminalKind::Interrupted);
                match t.terminal() {
                    Some(Terminal::Interrupted(i)) => {
                        assert_eq!(
                            (i.node_id.as_str(), i.node_type.as_str()),
                            ("4", "ImageScale")
                        );
                    }
                    other => panic!("{other:?}"),
                }
                let n4 = t.timeline().iter().find(|n| n.node_id == "4").unwrap();
                assert_eq!(n4.state, "interrupted");
            }
            let deleted = tr.replay(&p[1]);
            assert_eq!(
                deleted.counts().ours,
                0,
                "a deleted pending prompt gets no messages"
            );
            assert!(deleted.started_ms().is_none() && !deleted.is_finished());
            assert!(tr.history(&p[1]).is_none());
        }
        "ws_sd15_interrupt_during_ksampler.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Interrupted);
            let ks = t.timeline().iter().find(|n| n.node_id == "3").unwrap();
            assert_eq!(ks.state, "interrupted");
            let pr = ks.progress.unwrap();
            assert_eq!((pr.value, pr.max), (3.0, 30.0));
        }
        "ws_prompt_without_client_id.ndjson" => {
            let mut t = tr.replay(&p[0]);
            assert!(
                !t.is_finished() && t.terminal().is_none(),
                "no per-prompt events without client_id"
            );
            let from_broadcasts: BTreeSet<&str> =
                t.timeline().iter().map(|n| n.node_id.as_str()).collect();
            assert_eq!(
                from_broadcasts,
                BTreeSet::from(["1", "2", "3", "4"]),
                "progress_state is broadcast"
            );
            let h = tr.history(&p[0]).expect("captured history");
            assert_eq!(t.apply_history(&h, 1313), None);
            assert_eq!(kind(&t), Some(TerminalKind::Success));
            assert!(t.is_finished());
        }
        "ws_reconnect_during_execution.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Success);
            let ids: Vec<&str> = t.timeline().iter().map(|n| n.node_id.as_str()).collect();
            assert_eq!(
                ids,
                ["1", "2", "3", "4", "5", "6", "7"],
                "the greeting repeats node 3 once"
            );
        }
        "ws_queue_ordering_front.ndjson" => {
            assert_eq!(p.len(), 4);
            let ts: Vec<EventTracker> = p
                .iter()
                .map(|id| finished(&tr, id, TerminalKind::Success))
                .collect();
            let start = |i: usize| ts[i].server_start_timestamp().unwrap();
            assert!(
                start(0) < start(3) && start(3) < start(1) && start(1) < start(2),
                "front:true runs first"
            );
            for t in &ts {
                assert!(
                    t.counts().others > 0,
                    "the other prompts' frames were ignored"
                );
            }
        }
        "ws_binary_images_legacy.ndjson" | "ws_feature_flags_and_binary_images.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Success);
            assert_eq!(t.counts().binary, 2);
            let n2 = t.timeline().iter().find(|n| n.node_id == "2").unwrap();
            assert_eq!(
                n2.progress.map(|p| p.max),
                Some(2.0),
                "SaveImageWebsocket reports one step per image"
            );
        }
        "ws_feature_flags_not_first.ndjson" => {
            assert!(p.is_empty());
            let t = tr.replay("00000000-0000-4000-8000-000000000000");
            assert_eq!(
                t.counts().text,
                1,
                "only the greeting; no feature_flags reply"
            );
            assert_eq!(t.sid(), tr.header["client_id"].as_str());
            assert!(t.started_ms().is_none());
        }
        "ws_sd15_previews_legacy_jpeg.ndjson" | "ws_sd15_previews_with_metadata.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Success);
            assert_eq!(t.counts().binary, 4, "one preview per step");
            assert!(t.counts().binary_bytes > 200_000);
            let ks = t.timeline().iter().find(|n| n.node_id == "3").unwrap();
            assert_eq!(ks.progress.map(|p| (p.value, p.max)), Some((4.0, 4.0)));
        }
        "ws_sd15_lora_upscale.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Success);
            assert_eq!(t.cached(), ["4"]);
            let up = t.timeline().iter().find(|n| n.node_id == "12").unwrap();
            assert_eq!(up.progress.map(|p| (p.value, p.max)), Some((1.0, 1.0)));
            let outputs = t.timeline().iter().filter(|n| n.output.is_some()).count();
            assert_eq!(outputs, 2);
        }
        "ws_sd15_resolution_sweep.ndjson" => {
            assert_eq!(p.len(), 4);
            let ks: Vec<u64> = p
                .iter()
                .map(|id| {
                    let t = finished(&tr, id, TerminalKind::Success);
                    t.timeline()
                        .iter()
                        .find(|n| n.node_id == "3")
                        .unwrap()
                        .duration_ms()
                        .unwrap()
                })
                .collect();
            assert!(
                ks.windows(2).all(|w| w[0] < w[1]),
                "KSampler time grows with resolution: {ks:?}"
            );
        }
        "ws_sd15_txt2img_64px_first_run.ndjson" => {
            let t = finished(&tr, &p[0], TerminalKind::Success);
            let load = t.timeline().iter().find(|n| n.node_id == "4").unwrap();
            assert!(
                load.duration_ms().unwrap() > 5000,
                "checkpoint load took ~5.6 s"
            );
            assert_eq!(t.timeline().first().unwrap().node_id, "4");
        }
        other => panic!("no expectation written for fixture {other}; add one to this test"),
    }
}

#[test]
fn every_ws_fixture_replays_to_its_known_outcome() {
    let mut names: Vec<String> = std::fs::read_dir(DIR)
        .unwrap_or_else(|e| panic!("read {DIR}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ws_") && n.ends_with(".ndjson"))
        // The console captures are bare frames, one per line; they have their own test below.
        .filter(|n| !n.starts_with("ws_logs_"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 22, "fixture set changed: {names:?}");
    for name in &names {
        // Shown with the panic message when a fixture's expectation fails.
        eprintln!("replaying {name}");
        check(name);
    }
}

/// Feeds a bare-frame console capture (`ws_logs_*`: one received frame per line, no header) to a
/// tracker for the prompt its `execution_start` names.
fn replay_frames(name: &str) -> EventTracker {
    let path = format!("{DIR}/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let frames: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let prompt_id = frames
        .iter()
        .find(|f| f["type"] == "execution_start")
        .and_then(|f| f["data"]["prompt_id"].as_str())
        .unwrap_or_else(|| panic!("{name} has no execution_start"))
        .to_string();
    let mut t = EventTracker::new(&prompt_id);
    for (i, f) in frames.iter().enumerate() {
        t.feed_text(&f.to_string(), i as u64);
    }
    t
}

#[test]
fn every_console_capture_replays_to_its_known_outcome() {
    let mut names: Vec<String> = std::fs::read_dir(DIR)
        .unwrap_or_else(|e| panic!("read {DIR}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ws_logs_") && n.ends_with(".ndjson"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 5, "console capture set changed: {names:?}");
    for name in &names {
        eprintln!("replaying {name}");
        let t = replay_frames(name);
        match name.as_str() {
            "ws_logs_sd15_success.ndjson" | "ws_logs_vae_tiled_fallback_emulated.ndjson" => {
                assert_eq!(kind(&t), Some(TerminalKind::Success), "{name}");
            }
            "ws_logs_host_ram_failure.ndjson" => {
                let e = error_of(&t);
                assert_eq!(
                    (e.node_id.as_str(), e.node_type.as_str()),
                    ("1", "EmptyImage")
                );
                assert!(e.exception_message.contains("DefaultCPUAllocator"));
            }
            "ws_logs_oom_mid_sampling_emulated.ndjson" => {
                let e = error_of(&t);
                assert_eq!(
                    (e.node_id.as_str(), e.node_type.as_str()),
                    ("3", "KSampler")
                );
                assert_eq!(e.exception_type, "torch.OutOfMemoryError");
            }
            "ws_logs_vae_tiled_fallback_then_oom_emulated.ndjson" => {
                let e = error_of(&t);
                assert_eq!(
                    (e.node_id.as_str(), e.node_type.as_str()),
                    ("8", "VAEDecode")
                );
                assert_eq!(e.exception_type, "torch.OutOfMemoryError");
            }
            other => panic!("no expectation written for console capture {other}; add one"),
        }
    }
}

/// Captures of a real ComfyUI 0.8.0 (`tests/fixtures/comfyui-0.8.0/`, README there): every
/// WebSocket capture replays to the outcome its `/history` entry records, and the jobs API's
/// answers for a queued, running, finished, failed and interrupted job read as such.
mod comfyui_080 {
    use comfy_bisect_core::comfy::protocol::{
        is_canonical_prompt_id, HistoryEntry, Job, JobStatus, SystemStats,
    };
    use comfy_bisect_core::comfy::{EventTracker, Terminal, TerminalKind};
    use serde_json::Value;

    const DIR: &str = "tests/fixtures/comfyui-0.8.0";

    fn json(name: &str) -> Value {
        let path = format!("{DIR}/{name}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
    }

    /// The HTTP body of a `{status, body}` capture.
    fn body(name: &str) -> Value {
        json(name)["body"].clone()
    }

    fn history(name: &str, prompt_id: &str) -> HistoryEntry {
        let all = match json(name) {
            v if v.get("body").is_some() => v["body"].clone(),
            v => v,
        };
        serde_json::from_value(all[prompt_id].clone()).unwrap()
    }

    /// Feeds every captured text frame (in order, 1 ms apart) to a tracker for `prompt_id`.
    fn replay(ws: &str, prompt_id: &str) -> EventTracker {
        let mut t = EventTracker::new(prompt_id);
        let frames = json(ws);
        for (i, f) in frames.as_array().unwrap().iter().enumerate() {
            if f.get("type").is_some() {
                t.feed_text(&f.to_string(), i as u64);
            }
        }
        t
    }

    fn kind(t: Option<&Terminal>) -> Option<TerminalKind> {
        t.map(Terminal::kind)
    }

    #[test]
    fn every_080_socket_capture_ends_as_its_history_says() {
        let cases = [
            (
                "basic_post_prompt_response.json",
                "basic_ws_messages.json",
                "basic_history_entry.json",
                TerminalKind::Success,
            ),
            (
                "lora_upscale_post_prompt_response.json",
                "lora_upscale_ws_messages.json",
                "lora_upscale_history_entry.json",
                TerminalKind::Success,
            ),
            (
                "nonuuid_post_prompt_response.json",
                "nonuuid_ws_messages.json",
                "nonuuid_history_entry.json",
                TerminalKind::Success,
            ),
            (
                "realrun_post_prompt_512_oom.json",
                "realrun_ws_oom_run.json",
                "realrun_history_oom.json",
                TerminalKind::Error,
            ),
        ];
        for (post, ws, hist, expected) in cases {
            let id = body(post)["prompt_id"].as_str().unwrap().to_string();
            let mut t = replay(ws, &id);
            assert!(t.is_finished(), "{ws}: no executing(node=null) for {id}");
            assert_eq!(kind(t.terminal()), Some(expected), "{ws}");
            let h = history(hist, &id);
            assert_eq!(kind(h.terminal().as_ref()), Some(expected), "{hist}");
            assert_eq!(
                t.apply_history(&h, 999_999),
                None,
                "{hist} disagrees with {ws}"
            );
            // 0.8.0's progress_state nodes carry display/parent/real ids; a top-level node is
            // its own display node.
            assert!(t
                .timeline()
                .iter()
                .all(|n| n.display_node.as_deref().is_none_or(|d| d == n.node_id)));
        }
    }

    #[test]
    fn the_080_interrupt_capture_ends_interrupted_in_the_socket_and_the_jobs_api() {
        let job: Job =
            serde_json::from_value(body("realrun_api_jobs_id_interrupted.json")).unwrap();
        let t = replay("realrun_ws_interrupt_run.json", &job.id);
        assert_eq!(kind(t.terminal()), Some(TerminalKind::Interrupted));
        // 0.8.0 has no "interrupted" job status: the job is "failed" without an
        // execution_error, and only its messages say it was interrupted.
        assert_eq!(job.status, JobStatus::Failed);
        assert!(job.execution_error.is_none());
        match job.terminal() {
            Some(Terminal::Interrupted(i)) => {
                assert_eq!(
                    (i.node_id.as_str(), i.node_type.as_str()),
                    ("3", "KSampler")
                )
            }
            other => panic!("{other:?}"),
        }
        let h = history("realrun_history_interrupted.json", &job.id);
        assert_eq!(kind(h.terminal().as_ref()), Some(TerminalKind::Interrupted));
    }

    #[test]
    fn jobs_api_answers_read_as_their_state() {
        let queued: Job = serde_json::from_value(body("realrun_api_jobs_id_queued.json")).unwrap();
        assert_eq!(queued.status, JobStatus::Pending);
        assert!(!queued.is_over() && queued.terminal().is_none());

        let running: Job =
            serde_json::from_value(body("realrun_api_jobs_id_running.json")).unwrap();
        assert_eq!(running.status, JobStatus::InProgress);
        assert_eq!(
            running.execution_start_time, None,
            "0.8.0 has none while running"
        );
        assert!(!running.is_over());

        let done: Job = serde_json::from_value(body("realrun_api_jobs_id_done.json")).unwrap();
        assert_eq!(done.status, JobStatus::Completed);
        assert_eq!(kind(done.terminal().as_ref()), Some(TerminalKind::Success));
        assert!(done.outputs.as_ref().is_some_and(|o| !o.is_empty()));

        let failed: Job = serde_json::from_value(body("realrun_api_jobs_id_failed.json")).unwrap();
        assert_eq!(failed.status, JobStatus::Failed);
        match failed.terminal() {
            Some(Terminal::Error(e)) => {
                assert_eq!(e.node_type, "VAEDecode");
                assert_eq!(e.exception_type, "torch.OutOfMemoryError");
            }
            other => panic!("{other:?}"),
        }
        // Without its messages, a failed job's execution_error still says how it ended.
        let mut bare = failed.clone();
        bare.execution_status = None;
        assert_eq!(kind(bare.terminal().as_ref()), Some(TerminalKind::Error));

        let shared: Job = serde_json::from_value(body("api_job_by_id.json")).unwrap();
        assert_eq!(shared.status, JobStatus::Completed);
    }

    #[test]
    fn the_080_unknown_job_and_cancel_answers_are_what_the_client_expects() {
        // The jobs API's own 404 is JSON with an `error`; the cancel routes are not there yet.
        for f in ["api_job_not_found.json", "realrun_api_jobs_unknown_id.json"] {
            let v = json(f);
            assert_eq!(v["status"], 404, "{f}");
            assert!(v["body"]["error"].is_string(), "{f}");
        }
        let probe = json("realrun_cancel_endpoints_probe.json");
        let cancel = probe
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.starts_with("POST /api/jobs/") && k.ends_with("/cancel"))
            .map(|(_, v)| v)
            .unwrap();
        assert_eq!(cancel["status"], 405);
        assert_eq!(json("realrun_interrupt_running_id.json")["status"], 200);
    }

    #[test]
    fn the_080_system_stats_spell_the_os_as_sys_platform() {
        let s: SystemStats = serde_json::from_value(body("system_stats.json")).unwrap();
        assert_eq!(s.system.os, "linux");
        assert_eq!(s.system.comfyui_version, "0.8.0");
        assert_eq!(s.devices[0].kind, "cpu");
        assert_eq!(s.devices[0].torch_vram_total, s.devices[0].vram_total);
    }

    #[test]
    fn our_prompt_ids_are_canonical_and_080_took_a_non_uuid_one() {
        assert_eq!(
            body("nonuuid_post_prompt_response.json")["prompt_id"],
            "abc"
        );
        assert!(!is_canonical_prompt_id("abc"));
        for f in [
            "basic_post_prompt_response.json",
            "realrun_post_prompt_ok.json",
        ] {
            let id = body(f)["prompt_id"].as_str().unwrap().to_string();
            assert!(is_canonical_prompt_id(&id), "{f}: {id}");
        }
        assert!(!is_canonical_prompt_id(
            "F750B374-946C-47EE-A873-7242DC263695"
        ));
        assert!(!is_canonical_prompt_id("f750b374946c47eea8737242dc263695"));
    }
}
