//! The server console of a run, end to end against the simulator: subscription, the run's
//! lines in `server.log` order with server timestamps, memory events in the record, a server
//! without `/internal/logs`, another client's prompt during ours, and the backfill from
//! `/internal/logs/raw` after a dropped socket.

use crate::sim_support::{client, run_request as request, sim};
use comfy_bisect_core::comfy::{MemoryEvent, VaeStage};
use comfy_bisect_core::run::{execute, RunRecord};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_sim::{Faults, SimConfig};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// SD1.5 at `width`×`width`, batch 1, `steps` steps.
fn sd15(width: u64, steps: u64) -> Value {
    crate::sim_support::sd15(width, width, 1, steps)
}

fn loads(r: &RunRecord) -> Vec<String> {
    r.memory_events
        .iter()
        .filter_map(|e| match e {
            MemoryEvent::ModelLoad { class, .. } => class.clone(),
            _ => None,
        })
        .collect()
}

fn lines(r: &RunRecord) -> Vec<&str> {
    r.server_log.lines().collect()
}

/// Every server.log line starts with the server's time (`YYYY-MM-DDTHH:MM:SS.ffffff `).
fn assert_timestamped(r: &RunRecord) {
    for l in lines(r) {
        let (t, _) = l.split_once(' ').unwrap();
        assert_eq!(t.len(), 26, "{l}");
        assert_eq!(&t[10..11], "T", "{l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_run_keeps_its_console_and_memory_events() {
    let sim = sim(SimConfig::default().with_vram_gib(12)).await;
    let r = execute(&client(&sim), request(&sd15(512, 4))).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.warnings);
    let c = r.console.as_ref().unwrap();
    assert!(c.available && c.start_seen && c.end_seen, "{c:?}");
    assert!(c.unsure.is_empty(), "{c:?}");
    let l = lines(&r);
    assert!(l[0].ends_with(" got prompt"), "{l:?}");
    assert!(l.last().unwrap().contains(" Prompt executed in "), "{l:?}");
    assert_timestamped(&r);
    assert_eq!(loads(&r), ["SD1ClipModel", "BaseModel", "AutoencoderKL"]);
    assert!(r.memory_events.iter().any(|e| matches!(e,
        MemoryEvent::Progress { bar, .. } if bar.value == 4 && bar.max == 4)));
    assert!(r.memory_fallbacks.is_empty());
    // The subscription was switched on before the prompt and off after it.
    let patches: Vec<&Value> = r
        .raw
        .http
        .iter()
        .filter(|h| h.exchange.method == "PATCH")
        .map(|h| h.exchange.request_body.as_ref().unwrap())
        .collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(patches[0]["enabled"], true);
    assert_eq!(patches[1]["enabled"], false);
    assert_eq!(patches[0]["clientId"], r.raw.client_ids[0].as_str());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiled_decode_fallback_is_a_memory_fallback_of_a_passed_run() {
    let p = json!({
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 2048, "height": 2048, "batch_size": 1}},
        "3": {"class_type": "VAEDecode", "inputs": {"samples": ["2", 0], "vae": ["1", 2]}},
        "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "big"}}
    });
    let sim = sim(SimConfig::default().with_vram_gib(8)).await;
    let r = execute(&client(&sim), request(&p)).await;
    assert_eq!(r.outcome, OutcomeKind::Passed);
    assert!(r.memory_events.iter().any(|e| matches!(
        e,
        MemoryEvent::TiledFallback {
            stage: VaeStage::Decode,
            ..
        }
    )));
    assert_eq!(r.memory_fallbacks, ["tiled VAE decode fallback"]);
    assert!(r.server_log.contains(
        "Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding."
    ));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_run_has_the_exception_and_the_oom_unload_in_its_console() {
    let sim = sim(SimConfig::default().with_vram_gib(4)).await;
    let r = execute(&client(&sim), request(&sd15(4096, 4))).await;
    assert_eq!(r.outcome, OutcomeKind::Failed);
    assert!(r.server_log.contains("!!! Exception during processing !!!"));
    assert!(r
        .memory_events
        .iter()
        .any(|e| matches!(e, MemoryEvent::OomUnload { .. })));
    assert!(r.console.as_ref().unwrap().end_seen);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_internal_logs_is_said_and_the_run_goes_on() {
    let sim = sim(SimConfig::default()
        .with_vram_gib(12)
        .with_faults(Faults::default().with_no_internal_logs()))
    .await;
    let r = execute(&client(&sim), request(&sd15(512, 2))).await;
    assert_eq!(r.outcome, OutcomeKind::Passed);
    let c = r.console.as_ref().unwrap();
    assert!(!c.available);
    assert!(
        c.note.as_deref().unwrap().contains("/internal/logs"),
        "{c:?}"
    );
    assert!(r.server_log.is_empty() && r.memory_events.is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_prompt_during_ours_is_not_attributed() {
    // Slow enough that the other client's submission lands while ours runs.
    let sim = sim(SimConfig::default().with_vram_gib(12).with_time_scale(0.05)).await;
    let c = client(&sim);
    let ours = tokio::spawn({
        let c = c.clone();
        async move { execute(&c, request(&sd15(512, 200))).await }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(q) = c.queue().await {
            if !q.running_ids().is_empty() {
                break;
            }
        }
        assert!(Instant::now() < deadline, "our prompt never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // An invalid prompt from someone else: `got prompt` + `invalid prompt: …` on the console.
    let http = reqwest::Client::new();
    let resp = http
        .post(format!("{}/prompt", sim.base_url()))
        .json(&json!({"prompt": {"1": {"class_type": "NoSuchNode", "inputs": {}}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let r = ours.await.unwrap();
    assert_eq!(r.outcome, OutcomeKind::Passed);
    let info = r.console.as_ref().unwrap();
    assert_eq!(
        r.server_log.matches("got prompt").count(),
        1,
        "{}",
        r.server_log
    );
    assert!(!r.server_log.contains("invalid prompt"), "{}", r.server_log);
    assert!(
        info.foreign_lines >= 2 && !info.unsure.is_empty(),
        "{info:?}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_a_dropped_socket_missed_come_from_internal_logs_raw() {
    let sim = sim(SimConfig::default()
        .with_vram_gib(12)
        .with_faults(Faults::default().with_drop_socket()))
    .await;
    let r = execute(&client(&sim), request(&sd15(512, 4))).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.warnings);
    let c = r.console.as_ref().unwrap();
    assert!(c.backfilled > 0 && c.end_seen, "{c:?}\n{}", r.server_log);
    assert_eq!(loads(&r), ["SD1ClipModel", "BaseModel", "AutoencoderKL"]);
    assert!(lines(&r)[0].ends_with(" got prompt"));
    assert_timestamped(&r);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_serves_a_png_header_of_the_written_size() {
    let sim = sim(SimConfig::default().with_vram_gib(12)).await;
    let r = execute(&client(&sim), request(&sd15(512, 2))).await;
    assert_eq!(r.outcome, OutcomeKind::Passed);
    let out = &r.history.as_ref().unwrap().outputs["9"]["images"][0];
    let url = format!(
        "{}/view?filename={}&subfolder={}&type={}",
        sim.base_url(),
        out["filename"].as_str().unwrap(),
        out["subfolder"].as_str().unwrap(),
        out["type"].as_str().unwrap()
    );
    let resp = reqwest::get(&url).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "image/png");
    let body = resp.bytes().await.unwrap();
    assert_eq!(&body[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&body[12..16], b"IHDR");
    let w = u32::from_be_bytes(body[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(body[20..24].try_into().unwrap());
    assert_eq!((w, h), (512, 512));
    let missing = reqwest::get(format!(
        "{}/view?filename=nope.png&type=output",
        sim.base_url()
    ))
    .await
    .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_missing_output_fault_leaves_the_node_out_of_history() {
    let sim = sim(SimConfig::default()
        .with_vram_gib(12)
        .with_faults(Faults::default().with_missing_output("SaveImage")))
    .await;
    let r = execute(&client(&sim), request(&sd15(512, 2))).await;
    // The server still calls it a success; only the history shows the missing output (and the
    // run fails as incomplete_output: tests/product_sim.rs).
    assert_eq!(r.history.as_ref().unwrap().status.status_str, "success");
    assert_eq!(r.outcome, OutcomeKind::Failed);
    let h = r.history.as_ref().unwrap();
    assert!(h.outputs.get("9").is_none(), "{:?}", h.outputs);
    assert!(r
        .timeline
        .iter()
        .all(|n| n.node_id != "9" || n.output.is_none()));
    sim.shutdown().await;
}
