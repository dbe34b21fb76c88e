//! Fault switches, interrupts, the queue, /free and the cache, socket rules and feature flags.

use crate::sim_support::*;
use comfy_bisect_sim::{Faults, Launch, Profile, SimConfig};
use serde_json::{json, Value};
use std::time::Duration;

fn core(color: u64) -> Value {
    json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": color}},
        "2": {"class_type": "ImageScale", "inputs": {"image": ["1", 0], "upscale_method": "bilinear", "width": 128, "height": 96, "crop": "disabled"}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "fault"}},
        "4": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}}
    })
}

/// SD1.5 with many steps: slow enough (with time_scale 0.05) to act on it mid-run.
fn slow(steps: u64) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a lighthouse"}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
        "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0],
            "latent_image": ["5", 0], "seed": 1, "steps": steps, "cfg": 7.0, "sampler_name": "euler",
            "scheduler": "normal", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "slow"}}
    })
}

fn slow_config() -> SimConfig {
    SimConfig::default().with_time_scale(0.05)
}

async fn submit(base: &str, prompt: Value, client: Option<&str>) -> String {
    let mut body = json!({"prompt": prompt});
    if let Some(c) = client {
        body["client_id"] = json!(c);
    }
    let (status, resp) = post_prompt(base, &body).await;
    assert_eq!(status, 200, "{resp}");
    resp["prompt_id"].as_str().unwrap().to_string()
}

/// Waits for the first `progress` frame of `pid`.
async fn first_progress(ws: &mut Ws, pid: &str) {
    while let Some(m) = ws.next_json().await {
        if m["type"] == "progress" && m["data"]["prompt_id"] == pid {
            return;
        }
    }
    panic!("no progress for {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_500_queues_nothing() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_prompt_500())).await;
    let base = sim.base_url();
    let (status, body) = post_prompt(&base, &json!({"prompt": core(1)})).await;
    assert_eq!(status, 500);
    assert_eq!(
        body,
        json!("500 Internal Server Error\n\nServer got itself in trouble")
    );
    assert_eq!(
        get(&base, "/queue").await.1,
        json!({"queue_running": [], "queue_pending": []})
    );
    assert_eq!(sim.submitted_prompts().len(), 1);
    assert_eq!(sim.submitted_prompts()[0]["prompt"], core(1));
    // Switching the fault off lets the same prompt through.
    sim.set_faults(Faults::default());
    let (status, _) = post_prompt(&base, &json!({"prompt": core(1)})).await;
    assert_eq!(status, 200);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_frames_arrive_between_the_real_ones() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_garbage_frames())).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "g").await;
    let pid = submit(&base, core(2), Some("g")).await;
    let msgs = ws.until_done(&pid).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    assert!(!ws.garbage.is_empty());
    assert!(ws
        .binary
        .iter()
        .any(|b| b.len() >= 4 && u32::from_be_bytes([b[0], b[1], b[2], b[3]]) == 99));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_socket_loses_events_but_not_the_run() {
    let sim = sim(slow_config().with_faults(Faults::default().with_drop_socket())).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "d1").await;
    let pid = submit(&base, slow(20), Some("d1")).await;
    let mut saw_end = false;
    while let Some(m) = ws.next_json().await {
        saw_end |= m["type"] == "executing" && m["data"]["node"].is_null();
    }
    assert!(!saw_end, "the socket should close before the end");
    // A new socket with a fresh id; the run finishes and history has it.
    let _ws2 = Ws::connect(&base, "d2").await;
    let entry = history_entry(&base, &pid).await;
    assert_eq!(entry["status"]["status_str"], "success");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_history_lags_behind_the_socket() {
    let sim =
        sim(SimConfig::default().with_faults(Faults::default().with_slow_history_ms(400))).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "h").await;
    let pid = submit(&base, core(3), Some("h")).await;
    ws.until_done(&pid).await;
    assert_eq!(get(&base, &format!("/history/{pid}")).await.1, json!({}));
    let entry = history_entry(&base, &pid).await;
    assert_eq!(entry["status"]["completed"], true);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pack_removed_after_a_prompt_is_gone_from_object_info_extensions_and_validation() {
    use comfy_bisect_sim::{REMOVED_PACK, REMOVED_PACK_SCRIPT};
    let sim =
        sim(SimConfig::default().with_faults(Faults::default().with_pack_removed_after(2))).await;
    let base = sim.base_url();
    let module = format!("custom_nodes.{REMOVED_PACK}");
    let pack_classes = |info: &Value| -> Vec<String> {
        let mut v: Vec<String> = info
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, d)| d["python_module"] == module.as_str())
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    };
    let uses_pack = json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0}},
        "2": {"class_type": "VHS_VideoCombine", "inputs": {"images": ["1", 0], "frame_rate": 8,
            "loop_count": 0, "filename_prefix": "v", "format": "image/gif", "pingpong": false,
            "save_output": true}}
    });
    let before = get(&base, "/object_info").await.1;
    let classes = pack_classes(&before);
    assert_eq!(classes, ["VHS_LoadVideo", "VHS_VideoCombine"]);
    assert_eq!(
        get(&base, "/extensions").await.1,
        json!([REMOVED_PACK_SCRIPT])
    );
    let (status, body) = post_prompt(&base, &json!({"prompt": uses_pack})).await;
    assert_eq!(status, 200, "the pack is there: {body}");
    let mut ws = Ws::connect(&base, "p").await;
    let pid = submit(&base, core(1), Some("p")).await;
    ws.until_done(&pid).await;
    // Gone once the second prompt has finished.
    let after = get(&base, "/object_info").await.1;
    assert!(pack_classes(&after).is_empty());
    assert_eq!(
        after.as_object().unwrap().len(),
        before.as_object().unwrap().len() - 2
    );
    assert_eq!(
        get(&base, "/object_info/VHS_VideoCombine").await.1,
        json!({})
    );
    assert_eq!(get(&base, "/extensions").await.1, json!([]));
    let (status, body) = post_prompt(&base, &json!({"prompt": uses_pack})).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("VHS_VideoCombine"), "{body}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_run_takes_everything_down_and_restart_comes_back_empty() {
    let sim = sim(slow_config().with_faults(Faults::default().with_crash_mid_run())).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "c").await;
    let pid = submit(&base, slow(20), Some("c")).await;
    while ws.next_json().await.is_some() {}
    assert!(!sim.is_up());
    let err = http().get(format!("{base}/queue")).send().await;
    assert!(err.is_err(), "HTTP must be gone after a crash");
    sim.restart().await.unwrap();
    assert!(sim.is_up());
    assert_eq!(
        get(&base, &format!("/history/{pid}")).await,
        (200, json!({}))
    );
    assert_eq!(get(&base, "/history").await.1, json!({}));
    // The crash was one-shot: the same prompt now completes.
    let mut ws = Ws::connect(&base, "c2").await;
    let pid = submit(&base, slow(3), Some("c2")).await;
    let msgs = ws.until_done(&pid).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeted_interrupt_only_hits_the_named_running_prompt() {
    let sim = sim(slow_config()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "i").await;
    let pid = submit(&base, slow(200), Some("i")).await;
    first_progress(&mut ws, &pid).await;
    post(
        &base,
        "/interrupt",
        &json!({"prompt_id": "not-the-running-one"}),
    )
    .await;
    first_progress(&mut ws, &pid).await; // still running
    assert_eq!(
        post(&base, "/interrupt", &json!({"prompt_id": pid})).await,
        (200, String::new())
    );
    let msgs = ws.until_done(&pid).await;
    let t = types(&msgs);
    let n = t.len();
    assert_eq!(t[n - 3..], ["execution_interrupted", "status", "executing"]);
    let data = &msgs[n - 3]["data"];
    assert_eq!(data["node_id"], "3");
    assert_eq!(data["node_type"], "KSampler");
    let keys: Vec<&str> = data
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["prompt_id", "node_id", "node_type", "executed", "timestamp"]
    );
    let entry = history_entry(&base, &pid).await;
    assert_eq!(entry["status"]["status_str"], "error");
    assert_eq!(entry["outputs"], json!({}));
    let last = last_history_message(&entry);
    assert_eq!(last[0], "execution_interrupted");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_delete_front_and_global_interrupt() {
    let sim = sim(slow_config()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "q").await;
    let a = submit(&base, slow(200), Some("q")).await;
    first_progress(&mut ws, &a).await;
    let b = submit(&base, core(10), Some("q")).await;
    let c = submit(&base, core(11), Some("q")).await;
    let (_, resp) = post_prompt(
        &base,
        &json!({"prompt": core(12), "client_id": "q", "front": true}),
    )
    .await;
    let d = resp["prompt_id"].as_str().unwrap().to_string();
    assert!(resp["number"].as_i64().unwrap() < 0, "{resp}");
    let (_, q) = get(&base, "/queue").await;
    assert_eq!(q["queue_running"][0][1], a);
    assert_eq!(q["queue_pending"].as_array().unwrap().len(), 3);
    assert_eq!(
        get(&base, "/prompt").await.1["exec_info"]["queue_remaining"],
        4
    );
    post(&base, "/queue", &json!({"delete": [b]})).await;
    assert_eq!(
        get(&base, "/queue").await.1["queue_pending"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(post(&base, "/interrupt", &json!({})).await.0, 200);
    ws.until_done(&a).await;
    // front:true runs before the earlier normal prompt.
    ws.until_done(&d).await;
    ws.until_done(&c).await;
    assert_eq!(get(&base, &format!("/history/{b}")).await.1, json!({}));
    let (_, all) = get(&base, "/history").await;
    let order: Vec<&String> = all.as_object().unwrap().keys().collect();
    assert_eq!(order, [&a, &d, &c]);
    let (_, last) = get(&base, "/history?max_items=1").await;
    assert!(last.get(&c).is_some());
    let (_, mid) = get(&base, "/history?max_items=1&offset=1").await;
    assert!(mid.get(&d).is_some());
    post(&base, "/history", &json!({"clear": true})).await;
    assert_eq!(get(&base, "/history").await.1, json!({}));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_memory_drops_the_cache_unload_models_keeps_it() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "f").await;
    let cached_of = |msgs: &[Value]| -> Value {
        msgs.iter()
            .find(|m| m["type"] == "execution_cached")
            .unwrap()["data"]["nodes"]
            .clone()
    };
    let pid = submit(&base, core(5), Some("f")).await;
    assert_eq!(cached_of(&ws.until_done(&pid).await), json!([]));
    let pid = submit(&base, core(5), Some("f")).await;
    let msgs = ws.until_done(&pid).await;
    assert_eq!(cached_of(&msgs), json!(["1", "2", "3", "4"]));
    // A full cache hit executes nothing: the only `executing` is the final {node: null}.
    assert_eq!(types(&msgs).iter().filter(|t| *t == "executing").count(), 1);
    // Renumbered but identical graph: the node id is not part of the cache key.
    let renumbered = json!({
        "11": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 5}},
        "12": {"class_type": "ImageScale", "inputs": {"image": ["11", 0], "upscale_method": "bilinear", "width": 128, "height": 96, "crop": "disabled"}},
        "13": {"class_type": "SaveImage", "inputs": {"images": ["12", 0], "filename_prefix": "fault"}},
        "14": {"class_type": "PreviewImage", "inputs": {"images": ["11", 0]}}
    });
    let pid = submit(&base, renumbered, Some("f")).await;
    assert_eq!(
        cached_of(&ws.until_done(&pid).await),
        json!(["11", "12", "13", "14"])
    );
    // The worker applies /free flags before it takes the next prompt: no wait needed.
    post(&base, "/free", &json!({"unload_models": true})).await;
    let pid = submit(&base, core(5), Some("f")).await;
    assert_eq!(
        cached_of(&ws.until_done(&pid).await),
        json!(["1", "2", "3", "4"])
    );
    post(
        &base,
        "/free",
        &json!({"unload_models": true, "free_memory": true}),
    )
    .await;
    let pid = submit(&base, core(5), Some("f")).await;
    assert_eq!(cached_of(&ws.until_done(&pid).await), json!([]));
    assert_eq!(post(&base, "/free", &json!({})).await, (200, String::new()));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_client_id_only_broadcasts_arrive() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "watcher").await;
    let pid = submit(&base, core(6), None).await;
    history_entry(&base, &pid).await;
    let mut seen = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(300), ws.next_json()).await {
        seen.push(m["type"].as_str().unwrap().to_string());
    }
    assert!(seen.contains(&"progress_state".to_string()));
    for t in &seen {
        assert!(t == "status" || t == "progress_state", "unexpected {t}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feature_flags_negotiation_and_websocket_images() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let ws_prompt = json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 32, "height": 32, "batch_size": 2, "color": 255}},
        "2": {"class_type": "SaveImageWebsocket", "inputs": {"images": ["1", 0]}}
    });
    // Negotiated: the server answers with its flags, images come as type 4 before progress.
    let mut ws = Ws::connect(&base, "ff").await;
    ws.send_text(r#"{"type":"feature_flags","data":{"supports_preview_metadata":true,"max_upload_size":104857600}}"#).await;
    let reply = ws.next_json().await.unwrap();
    assert_eq!(reply["type"], "feature_flags");
    assert_eq!(reply["data"], get(&base, "/features").await.1);
    let pid = submit(&base, ws_prompt.clone(), Some("ff")).await;
    ws.until_done(&pid).await;
    assert_eq!(ws.binary.len(), 2);
    for b in &ws.binary {
        assert_eq!(&b[..4], &[0, 0, 0, 4]);
        let len = u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize;
        let meta: Value = serde_json::from_slice(&b[8..8 + len]).unwrap();
        assert_eq!(meta["prompt_id"], pid.as_str());
        assert_eq!(meta["image_type"], "image/png");
        assert_eq!(&b[8 + len..8 + len + 4], &[0x89, b'P', b'N', b'G']);
    }
    // Legacy: no negotiation, type 1 with format 2 (PNG).
    let mut legacy = Ws::connect(&base, "legacy").await;
    let pid = submit(&base, json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 32, "height": 32, "batch_size": 2, "color": 254}},
        "2": {"class_type": "SaveImageWebsocket", "inputs": {"images": ["1", 0]}}
    }), Some("legacy")).await;
    legacy.until_done(&pid).await;
    assert_eq!(legacy.binary.len(), 2);
    assert!(legacy
        .binary
        .iter()
        .all(|b| b[..8] == [0, 0, 0, 1, 0, 0, 0, 2]));
    // feature_flags as the second frame gets no reply.
    let mut late = Ws::connect(&base, "late").await;
    late.send_text(r#"{"type":"hello","data":{}}"#).await;
    late.send_text(r#"{"type":"feature_flags","data":{"supports_preview_metadata":true}}"#)
        .await;
    late.send_text("not json").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), late.next_json())
            .await
            .is_err(),
        "no reply expected"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_with_the_same_id_gets_the_executing_node() {
    let sim = sim(slow_config()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "same").await;
    let pid = submit(&base, slow(100), Some("same")).await;
    first_progress(&mut ws, &pid).await;
    ws.ws.close(None).await.unwrap();
    drop(ws);
    // No pause: the old socket's cleanup may run before or after the new one registers.
    let mut again = Ws::connect(&base, "same").await;
    let greet = again.next_json().await.unwrap();
    assert_eq!(greet, json!({"type": "executing", "data": {"node": "3"}}));
    let msgs = again.until_done(&pid).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    sim.shutdown().await;
}

/// A socket that closes after a newer one took over its clientId unregisters only itself: the
/// newer socket keeps receiving the prompt's events. (The old cleanup removed the sid whoever
/// held it, so the new socket went deaf when the old one's close was handled second.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_socket_closing_late_leaves_the_new_one_registered() {
    use futures_util::StreamExt;
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut old = Ws::connect(&base, "twice").await;
    let mut new = Ws::connect(&base, "twice").await;
    // Close the old socket only now, and wait until the server has dropped it: the server
    // closes the connection after its cleanup, so the end of the stream orders the two.
    old.ws.close(None).await.unwrap();
    while let Some(Ok(_)) = old.ws.next().await {}
    let pid = submit(&base, core(9), Some("twice")).await;
    let msgs = new.until_done(&pid).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    new.ws.close(None).await.unwrap();
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampler_previews_follow_the_prompt_and_the_negotiation() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    // Different step counts: an identical prompt would be a cache hit (no sampling, no previews).
    let body = |client: &str, steps: u64| json!({"prompt": slow(steps), "client_id": client, "extra_data": {"preview_method": "latent2rgb"}});
    // Legacy socket: type 1, format 1 (JPEG), one per step.
    let mut legacy = Ws::connect(&base, "pv1").await;
    let (_, r) = post_prompt(&base, &body("pv1", 4)).await;
    legacy.until_done(r["prompt_id"].as_str().unwrap()).await;
    assert_eq!(legacy.binary.len(), 4);
    assert!(legacy
        .binary
        .iter()
        .all(|b| b[..8] == [0, 0, 0, 1, 0, 0, 0, 1] && b[8..10] == [0xff, 0xd8]));
    // Negotiated socket: type 4 with image/jpeg metadata.
    let mut meta = Ws::connect(&base, "pv2").await;
    meta.send_text(r#"{"type":"feature_flags","data":{"supports_preview_metadata":true}}"#)
        .await;
    assert_eq!(meta.next_json().await.unwrap()["type"], "feature_flags");
    let (_, r) = post_prompt(&base, &body("pv2", 5)).await;
    meta.until_done(r["prompt_id"].as_str().unwrap()).await;
    assert_eq!(meta.binary.len(), 5);
    for b in &meta.binary {
        assert_eq!(&b[..4], &[0, 0, 0, 4]);
        let len = u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize;
        let m: Value = serde_json::from_slice(&b[8..8 + len]).unwrap();
        assert_eq!(m["image_type"], "image/jpeg");
        assert_eq!(m["node_id"], "3");
    }
    // preview_method "none" (the client's default): no binary frames.
    let mut none = Ws::connect(&base, "pv3").await;
    let (_, r) = post_prompt(
        &base,
        &json!({"prompt": slow(6), "client_id": "pv3", "extra_data": {"preview_method": "none"}}),
    )
    .await;
    none.until_done(r["prompt_id"].as_str().unwrap()).await;
    assert!(none.binary.is_empty());
    sim.shutdown().await;
}

/// socket-after-history: the prompt's frames reach its submitter only after a `/history`
/// answer included the prompt, complete and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_after_history_holds_the_frames_until_history_answers() {
    let faults = Faults::default().with_socket_after_history();
    let sim = sim(SimConfig::default().with_faults(faults)).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "held").await;
    let pid = submit(&base, core(7), Some("held")).await;
    // The prompt ran to its end (it left the queue) without anyone asking /history.
    loop {
        let (_, q) = get(&base, "/queue").await;
        if q["queue_running"] == json!([]) && q["queue_pending"] == json!([]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // So far only broadcasts without the prompt id came (what arrives later cannot make this
    // pass: the check is that nothing of the prompt is here yet).
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), ws.next_json()).await {
        assert_ne!(m["data"]["prompt_id"], pid.as_str(), "{m}");
    }
    history_entry(&base, &pid).await;
    let msgs = ws.until_done(&pid).await;
    let kinds = types(&msgs);
    let start = kinds.iter().position(|t| t == "execution_start").unwrap();
    let success = kinds.iter().position(|t| t == "execution_success").unwrap();
    assert!(start < success, "{kinds:?}");
    sim.shutdown().await;
}

/// The bytes `/view` serves for the first SaveImage file of a finished prompt.
async fn first_saved_png(base: &str, pid: &str) -> Vec<u8> {
    let entry = history_entry(base, pid).await;
    assert_eq!(entry["status"]["status_str"], "success", "{entry}");
    let f = &entry["outputs"]["3"]["images"][0];
    let r = http()
        .get(format!("{base}/view"))
        .query(&[
            ("filename", f["filename"].as_str().unwrap()),
            ("subfolder", f["subfolder"].as_str().unwrap()),
            ("type", f["type"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap().to_vec()
}

/// Whether a PNG has an `IDAT` chunk (pixels a decoder reads).
fn has_pixels(png: &[u8]) -> bool {
    png.starts_with(b"\x89PNG\r\n\x1a\n") && png.windows(4).any(|w| w == b"IDAT")
}

/// `flat-product` and `nan-decode`: the prompt succeeds, but the PNG `/view` serves is one flat
/// colour or black (decoded in the simulator's unit tests); a NaN decode also leaves numpy's
/// cast warning on the console.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degenerate_products_still_succeed_with_other_pixels() {
    let mut served = Vec::new();
    for faults in [
        Faults::default(),
        Faults::default().with_flat_product(),
        Faults::default().with_nan_decode(),
    ] {
        let sim = sim(SimConfig::default().with_faults(faults.clone())).await;
        let base = sim.base_url();
        let pid = submit(&base, core(0), None).await;
        let png = first_saved_png(&base, &pid).await;
        assert!(has_pixels(&png), "{faults}");
        let (_, logs) = get(&base, "/internal/logs/raw").await;
        let warned = logs
            .to_string()
            .contains("RuntimeWarning: invalid value encountered in cast");
        assert_eq!(warned, faults.nan_decode, "{faults}: {logs}");
        served.push(png);
        sim.shutdown().await;
    }
    assert_ne!(served[0], served[1], "flat differs from the picture");
    assert_ne!(served[1], served[2], "black differs from flat");
    assert_ne!(served[0], served[2], "black differs from the picture");
}

/// `--cache-none`: the same prompt again runs every node (nothing in `execution_cached`), where
/// the default cache replays it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_none_runs_every_node_every_time() {
    for (flags, replayed) in [(vec![], true), (vec!["--cache-none"], false)] {
        let launch = Launch::parse(&flags, Profile::V0364).unwrap();
        let sim = sim(SimConfig::default().with_launch(launch)).await;
        let base = sim.base_url();
        let mut ws = Ws::connect(&base, "c").await;
        let mut cached = Vec::new();
        for _ in 0..2 {
            let (_, r) = post_prompt(&base, &json!({"prompt": core(0), "client_id": "c"})).await;
            let msgs = ws.until_done(r["prompt_id"].as_str().unwrap()).await;
            let nodes = msgs
                .iter()
                .find(|m| m["type"] == "execution_cached")
                .unwrap()["data"]["nodes"]
                .as_array()
                .unwrap()
                .len();
            cached.push(nodes);
        }
        assert_eq!(cached[0], 0, "{flags:?}");
        assert_eq!(cached[1] == 4, replayed, "{flags:?}: {cached:?}");
        assert_eq!(cached[1] == 0, !replayed, "{flags:?}: {cached:?}");
        sim.shutdown().await;
    }
}
