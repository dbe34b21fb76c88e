//! The client against the in-tree ComfyUI simulator: every outcome (passed, failed OOM,
//! rejected 400, partial 200, interrupted, timeout, server lost) and every fault (socket drop,
//! slow history, 500 on /prompt, garbage frames, crash), plus a busy queue with a second client.

use crate::sim_support::{client, run_request as request, sim};
use comfy_bisect_core::comfy::{Client, ExtraHeaders, QueuePosition};
use comfy_bisect_core::run::{
    execute, execute_with, InterruptedBy, NdjsonWriter, Outcome, RunRecord, TimeoutReason,
};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{Faults, SimConfig, SimHandle};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// SD1.5 txt2img (`crate::sim_support::sd15`) with the checkpoint of the real captures,
/// `random_sd15.safetensors`.
fn sd15(width: u64, height: u64, batch: u64, steps: u64) -> Value {
    let mut v = crate::sim_support::sd15(width, height, batch, steps);
    v["4"]["inputs"]["ckpt_name"] = json!("random_sd15.safetensors");
    v
}

fn workflow(v: &Value) -> Workflow {
    Workflow::from_json_str(&v.to_string(), "test.json").unwrap()
}

/// Slow enough to be interrupted: thousands of sampler steps at real-time speed.
fn slow_config() -> SimConfig {
    SimConfig::default().with_time_scale(0.5)
}

async fn wait_until_running(client: &Client, prompt_id: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(q) = client.queue().await {
            if let Some(id) = q.running_ids().first() {
                if prompt_id.is_none_or(|p| p == *id) {
                    return id.to_string();
                }
            }
        }
        assert!(Instant::now() < deadline, "no prompt started running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_common(record: &RunRecord, v: &Value) {
    assert_eq!(record.prompt_id, record.run_id);
    assert!(uuid::Uuid::parse_str(&record.run_id).is_ok());
    assert_eq!(record.workflow_sha256, workflow(v).sha256());
    assert!(!record.started_at.is_empty() && !record.finished_at.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passed_run_has_timeline_history_vram_and_raw_events() {
    let sim = sim(SimConfig::default()).await;
    let v = sd15(512, 512, 1, 4);
    let mut events = NdjsonWriter::new(Vec::new());
    let record = execute_with(&client(&sim), request(&v), &mut events).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert_common(&record, &v);
    assert!(record.cold && record.error.is_none() && record.diagnosis.is_none());
    let ks = record.timeline.iter().find(|n| n.node_id == "3").unwrap();
    assert_eq!(ks.class_type.as_deref(), Some("KSampler"));
    assert_eq!(ks.progress.map(|p| p.max), Some(4.0));
    assert!(ks.duration_ms().is_some());
    // Time per step from the sampler's progress frames (issue #23): one pass of 4 steps.
    assert_eq!(record.step_timing.len(), 1, "{:?}", record.step_timing);
    let pass = &record.step_timing[0];
    assert_eq!((pass.node.as_str(), pass.steps, pass.reached), ("3", 4, 4));
    assert_eq!(pass.step_ms.len(), 3, "steps 2–4, the first step apart");
    assert!(pass.s_per_step.is_some());
    assert!(record.history.as_ref().unwrap().status.completed);
    assert!(record.vram.peak_used_bytes.unwrap() > 0);
    assert!(record.vram.samples.len() >= 2);
    assert!(record.vram.note.contains("can be missed"));
    assert!(record.system_stats_before.is_some() && record.system_stats_after.is_some());
    assert_eq!(record.raw.client_ids.len(), 1);
    assert!(record.raw.ws_text.iter().any(|f| f
        .json
        .as_ref()
        .is_some_and(|j| j["type"] == "execution_success")));
    assert!(record.raw.http.iter().any(|h| h.exchange.path == "/free"));

    // What the server received: socket first, our prompt id, previews off, cold start first.
    let posted = sim.submitted_prompts();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0]["prompt_id"], record.run_id.as_str());
    assert_eq!(posted[0]["client_id"], record.raw.client_ids[0].as_str());
    assert_eq!(posted[0]["extra_data"]["preview_method"], "none");
    // Every run asks for the server's benchmark capture; the simulator has none, like 0.8.0:
    // nothing is recorded and nothing else changes.
    assert_eq!(posted[0]["extra_data"]["benchmark"], true);
    assert_eq!(record.server_benchmark, None);

    let log = String::from_utf8(events.into_inner()).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines
        .iter()
        .any(|l| l["channel"] == "ws" && l["dir"] == "open"));
    assert!(lines
        .iter()
        .any(|l| l["channel"] == "http" && l["exchange"]["path"] == "/prompt"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_run_fails_with_the_complete_execution_error() {
    let sim = sim(SimConfig::default().with_vram_gib(4)).await;
    let v = sd15(2048, 2048, 8, 4);
    let record = execute(&client(&sim), request(&v)).await;
    assert_eq!(record.outcome, OutcomeKind::Failed, "{:?}", record.error);
    assert_common(&record, &v);
    let e = record.execution_error().unwrap();
    assert_eq!(e.exception_type, "torch.OutOfMemoryError");
    assert!(!e.node_id.is_empty() && !e.node_type.is_empty());
    assert!(!e.traceback.is_empty());
    assert!(
        e.exception_message.contains("out of memory")
            || e.exception_message.contains("OutOfMemory")
    );
    for values in e.current_inputs.values() {
        for s in values
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            assert!(s.chars().count() < 400, "current_inputs are trimmed");
        }
    }
    let failed = record
        .timeline
        .iter()
        .find(|n| n.node_id == e.node_id)
        .unwrap();
    assert_eq!(failed.state, "error");
    let diagnosis = record
        .diagnosis
        .as_ref()
        .expect("a failed run is diagnosed");
    assert_eq!(diagnosis.kind.as_str(), "cuda_oom", "{diagnosis:?}");
    assert_eq!(diagnosis.node_id.as_deref(), Some(e.node_id.as_str()));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_prompt_is_rejected_with_node_errors() {
    let sim = sim(SimConfig::default()).await;
    let mut v = sd15(512, 512, 1, 4);
    v["3"]["inputs"]["steps"] = json!(0);
    let record = execute(&client(&sim), request(&v)).await;
    assert_eq!(record.outcome, OutcomeKind::Rejected);
    match record.outcome() {
        Outcome::Rejected(r) => {
            assert_eq!(r.http_status, 400);
            assert_eq!(r.error.kind, "prompt_outputs_failed_validation");
            assert!(r.node_errors.contains_key("3"), "{:?}", r.node_errors);
            assert!(!r.partial);
        }
        other => panic!("{other:?}"),
    }
    assert!(record.timeline.is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_prompt_with_node_errors_is_not_a_pass() {
    let sim = sim(SimConfig::default()).await;
    let mut v = sd15(512, 512, 1, 2);
    v["20"] = json!({"class_type": "EmptyImage", "inputs": {"width": 99999, "height": 64, "batch_size": 1, "color": 0}});
    v["21"] = json!({"class_type": "SaveImage", "inputs": {"images": ["20", 0], "filename_prefix": "bad"}});
    let record = execute(&client(&sim), request(&v)).await;
    assert_eq!(record.outcome, OutcomeKind::Rejected, "{:?}", record.error);
    match record.outcome() {
        Outcome::Rejected(r) => {
            assert_eq!(r.http_status, 200);
            assert!(r.partial);
            assert!(r.node_errors.contains_key("20"));
            assert_eq!(
                r.partial_run,
                Some(OutcomeKind::Passed),
                "the valid branch still ran"
            );
        }
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_by_someone_else_is_recorded() {
    let sim = sim(slow_config()).await;
    let c = client(&sim);
    let run = tokio::spawn({
        let c = c.clone();
        async move { execute(&c, request(&sd15(512, 512, 1, 5000))).await }
    });
    wait_until_running(&c, None).await;
    // A global interrupt, as the web UI's "cancel" button sends.
    reqwest::Client::new()
        .post(format!("{}/interrupt", sim.base_url()))
        .send()
        .await
        .unwrap();
    let record = run.await.unwrap();
    assert_eq!(
        record.outcome,
        OutcomeKind::Interrupted,
        "{:?}",
        record.error
    );
    match record.outcome() {
        Outcome::Interrupted(i) => {
            assert_eq!(i.by, InterruptedBy::Other);
            assert!(i.node_type.is_some(), "the node that was running is named");
        }
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_timeout_interrupts_only_our_prompt() {
    let sim = sim(slow_config()).await;
    let mut r = request(&sd15(512, 512, 1, 5000));
    r.timeout = Duration::from_millis(500);
    let record = execute(&client(&sim), r).await;
    assert_eq!(record.outcome, OutcomeKind::Timeout, "{:?}", record.error);
    match record.outcome() {
        Outcome::Timeout(t) => {
            assert_eq!(t.reason, TimeoutReason::Run);
            assert!(t.interrupt_sent && t.interrupt_confirmed);
        }
        other => panic!("{other:?}"),
    }
    let interrupt = record
        .raw
        .http
        .iter()
        .find(|h| h.exchange.path == "/interrupt")
        .expect("an interrupt was sent");
    assert_eq!(
        interrupt.exchange.request_body,
        Some(json!({"prompt_id": record.prompt_id})),
        "the interrupt names our prompt"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_timeout_fires_when_no_event_comes() {
    // 1 step that takes ~20 real seconds: no progress event for a long time.
    let sim = sim(SimConfig::default().with_time_scale(100.0)).await;
    let mut r = request(&sd15(512, 512, 1, 1));
    r.cold = false;
    r.stall_timeout = Duration::from_millis(400);
    r.interrupt_grace = Duration::from_secs(1);
    let record = execute(&client(&sim), r).await;
    assert_eq!(record.outcome, OutcomeKind::Timeout, "{:?}", record.error);
    match record.outcome() {
        Outcome::Timeout(t) => assert_eq!(t.reason, TimeoutReason::Stall),
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_crash_mid_run_is_server_lost() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_crash_mid_run())).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 20))).await;
    assert_eq!(
        record.outcome,
        OutcomeKind::ServerLost,
        "{:?}",
        record.error
    );
    match record.outcome() {
        Outcome::ServerLost(s) => {
            assert!(s.submitted);
            assert!(s.reason.contains("unreachable"), "{}", s.reason);
        }
        other => panic!("{other:?}"),
    }
    assert!(!sim.is_up());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_run_is_server_lost() {
    let sim = sim(slow_config()).await;
    let c = client(&sim);
    let run = tokio::spawn({
        let c = c.clone();
        async move { execute(&c, request(&sd15(512, 512, 1, 5000))).await }
    });
    wait_until_running(&c, None).await;
    sim.restart().await.unwrap();
    let record = run.await.unwrap();
    assert_eq!(
        record.outcome,
        OutcomeKind::ServerLost,
        "{:?}",
        record.error
    );
    match record.outcome() {
        Outcome::ServerLost(s) => assert!(s.reason.contains("vanished"), "{}", s.reason),
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_socket_reconnects_with_a_new_client_id() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_drop_socket())).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 20))).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert!(record.raw.client_ids.len() >= 2, "a new socket was opened");
    assert_ne!(record.raw.client_ids[0], record.raw.client_ids[1]);
    assert!(record.warnings.iter().any(|w| w.contains("reconnected")));
    assert!(
        record.history.is_some(),
        "the outcome was confirmed from history"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_history_is_retried() {
    let sim =
        sim(SimConfig::default().with_faults(Faults::default().with_slow_history_ms(1200))).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 2))).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert!(record.history.is_some());
    let empty_answers: u32 = record
        .raw
        .http
        .iter()
        .filter(|h| {
            h.exchange.path.starts_with("/history/") && h.exchange.response_body == Some(json!({}))
        })
        .map(|h| h.repeats + 1)
        .sum();
    assert!(empty_answers >= 1, "history lagged and was asked again");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_500_on_prompt_is_a_rejection() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_prompt_500())).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 2))).await;
    assert_eq!(record.outcome, OutcomeKind::Rejected);
    match record.outcome() {
        Outcome::Rejected(r) => assert_eq!(r.http_status, 500),
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.submitted_prompts().len(), 3, "three attempts");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_500_on_prompt_is_retried() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_prompt_500())).await;
    let c = client(&sim);
    let run = tokio::spawn({
        let c = c.clone();
        async move { execute(&c, request(&sd15(512, 512, 1, 2))).await }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while sim.submitted_prompts().is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sim.set_faults(Faults::default());
    let record = run.await.unwrap();
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert!(record.warnings.iter().any(|w| w.contains("HTTP 500")));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_frames_are_ignored() {
    let sim = sim(SimConfig::default().with_faults(Faults::default().with_garbage_frames())).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 4))).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert!(record.raw.frames.unparsed > 0 || record.raw.frames.binary > 0);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_server_waits_for_the_prompt_ahead_and_never_interrupts_it() {
    let sim = sim(SimConfig::default().with_time_scale(0.05)).await;
    let c = client(&sim);
    // Another client's prompt, running first.
    let other_id = occupy(&sim, &c, 300).await;

    let mut r = request(&sd15(512, 512, 1, 2));
    r.cold = false;
    let record = execute(&c, r).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert!(
        record.queue.max_ahead >= 1,
        "our prompt waited behind the other"
    );
    assert!(!record
        .raw
        .http
        .iter()
        .any(|h| h.exchange.path == "/interrupt"));
    let other_history = c
        .history(&other_id)
        .await
        .unwrap()
        .expect("the other prompt finished");
    assert_eq!(other_history.status.status_str, "success");
    assert_eq!(
        c.queue().await.unwrap().position(&other_id),
        QueuePosition::Absent
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_runs_reuse_the_cache_and_cold_runs_start_empty() {
    let sim = sim(SimConfig::default()).await;
    let c = client(&sim);
    let v = sd15(512, 512, 1, 2);
    let first = execute(&c, request(&v)).await;
    assert_eq!(first.outcome, OutcomeKind::Passed, "{:?}", first.error);
    let mut warm = request(&v);
    warm.cold = false;
    let warm = execute(&c, warm).await;
    assert_eq!(warm.outcome, OutcomeKind::Passed);
    assert!(!warm.cold);
    assert!(
        !warm.cached_nodes.is_empty(),
        "an identical warm run is served from cache"
    );
    assert!(!warm.raw.http.iter().any(|h| h.exchange.path == "/free"));
    let cold = execute(&c, request(&v)).await;
    assert_eq!(cold.outcome, OutcomeKind::Passed);
    assert!(cold.cached_nodes.is_empty(), "POST /free dropped the cache");
    assert!(!cold.warnings.iter().any(|w| w.contains("cold run")));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_header_values_never_reach_the_record_or_the_event_log() {
    let sim = sim(SimConfig::default()).await;
    let headers =
        ExtraHeaders::from_sources(&["X-Proxy-Token: s3cret-value".into()], None).unwrap();
    let c = Client::new(&sim.base_url(), headers).unwrap();
    let mut events = NdjsonWriter::new(Vec::new());
    let record = execute_with(&c, request(&sd15(512, 512, 1, 2)), &mut events).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    let log = String::from_utf8(events.into_inner()).unwrap();
    let json = serde_json::to_string(&record).unwrap();
    assert!(!log.contains("s3cret-value") && !json.contains("s3cret-value"));
    assert!(!log.contains("X-Proxy-Token") && !json.contains("X-Proxy-Token"));
    sim.shutdown().await;
}

/// Queues another client's slow prompt and waits until it runs; returns its id.
async fn occupy(sim: &SimHandle, c: &Client, steps: u64) -> String {
    let other_id = uuid::Uuid::new_v4().to_string();
    let body = json!({"prompt": sd15(512, 512, 1, steps), "client_id": "someone-else", "prompt_id": other_id});
    let answer = reqwest::Client::new()
        .post(format!("{}/prompt", sim.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    wait_until_running(c, Some(&other_id)).await;
    other_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_removes_our_pending_prompt_and_leaves_the_running_one_alone() {
    let sim = sim(slow_config()).await;
    let c = client(&sim);
    let other_id = occupy(&sim, &c, 5000).await;
    let mut r = request(&sd15(512, 512, 1, 2));
    r.cold = false;
    r.queue_timeout = Duration::from_millis(400);
    let record = execute(&c, r).await;
    assert_eq!(record.outcome, OutcomeKind::Timeout, "{:?}", record.error);
    match record.outcome() {
        Outcome::Timeout(t) => {
            assert_eq!(t.reason, TimeoutReason::Queue);
            assert!(t.interrupt_confirmed, "our prompt left the queue");
        }
        other => panic!("{other:?}"),
    }
    let q = c.queue().await.unwrap();
    assert_eq!(
        q.position(&other_id),
        QueuePosition::Running,
        "the other prompt still runs"
    );
    assert_eq!(q.position(&record.prompt_id), QueuePosition::Absent);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_queued_removes_our_prompt_only() {
    let sim = sim(slow_config()).await;
    let c = client(&sim);
    let other_id = occupy(&sim, &c, 5000).await;
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut r = request(&sd15(512, 512, 1, 2));
    r.cold = false;
    r.cancel = Some(rx);
    let run = tokio::spawn({
        let c = c.clone();
        async move { execute(&c, r).await }
    });
    // Cancel once our prompt waits in the queue.
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.queue().await.unwrap().queue_pending.is_empty() {
        assert!(Instant::now() < deadline, "our prompt was never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.send(true).unwrap();
    let record = run.await.unwrap();
    match record.outcome() {
        Outcome::Interrupted(i) => {
            assert_eq!(i.by, InterruptedBy::User);
            assert!(i.removed_from_queue);
        }
        other => panic!("{other:?}"),
    }
    assert!(!record
        .raw
        .http
        .iter()
        .any(|h| h.exchange.path == "/interrupt"));
    assert_eq!(
        c.queue().await.unwrap().position(&other_id),
        QueuePosition::Running
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_socket_with_lagging_history_is_not_mistaken_for_a_lost_server() {
    let faults = Faults::default()
        .with_drop_socket()
        .with_slow_history_ms(800);
    let sim = sim(SimConfig::default().with_faults(faults)).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 20))).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert!(record.raw.client_ids.len() >= 2);
    sim.shutdown().await;
}

/// A run's stage does not depend on whether `/history` or the socket reports the end first.
/// With socket-after-history every frame of the prompt is held back until `/history` has
/// answered with its entry; the step progress those frames carry must still reach the
/// timeline before the failure is classified (Wan 2.2 whose step cache runs out after the
/// first step: `sample_middle`, with or without the fault).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_does_not_depend_on_whether_history_or_the_socket_answers_first() {
    let text = std::fs::read_to_string("workflows/wan22_t2v_experts_lora_cache_rife.json").unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    for faults in [
        Faults::default(),
        Faults::default().with_socket_after_history(),
    ] {
        let config = SimConfig::default()
            .with_vram_bytes(57344 * comfy_bisect_sim::MIB)
            .with_time_scale(0.0)
            .with_faults(faults.clone());
        let sim = sim(config).await;
        let record = execute(&client(&sim), request(&v)).await;
        assert_eq!(
            record.outcome,
            OutcomeKind::Failed,
            "{faults:?}: {:?}",
            record.error
        );
        let diagnosis = record
            .diagnosis
            .as_ref()
            .expect("a failed run is diagnosed");
        assert_eq!(
            diagnosis.stage.as_str(),
            "sample_middle",
            "{faults:?}: {diagnosis:?}"
        );
        assert!(
            record
                .timeline
                .iter()
                .any(|n| n.progress.is_some_and(|p| p.value >= 1.0)),
            "{faults:?}: {:?}",
            record.timeline
        );
        assert!(record.history.is_some(), "{faults:?}");
        sim.shutdown().await;
    }
}

/// Issue #39 finding 9: a non-UUID prompt id in the server's answer was followed until "our
/// prompt vanished"; ComfyUI keeps a client's id and names its own prompts with UUIDs, so it is
/// a protocol error now, the answer quoted, and the run is not judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_id_that_is_not_a_uuid_is_a_protocol_error() {
    let faults = Faults::parse("foreign-prompt-id").unwrap();
    let sim = sim(SimConfig::default().with_faults(faults)).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 2))).await;
    match record.outcome() {
        Outcome::Rejected(r) => {
            assert_eq!(r.error.kind, "protocol_error", "{r:?}");
            assert!(
                r.error.message.contains("not a UUID")
                    && r.error.message.contains("\"prompt_id\":\"job-"),
                "{}",
                r.error.message
            );
        }
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

/// A job answered under another id than ours (`GET /api/jobs/{id}`) is a protocol error too,
/// never silently accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_under_another_id_is_a_protocol_error() {
    let faults = Faults::parse("foreign-job-id").unwrap();
    let sim = sim(SimConfig::default()
        .with_profile(comfy_bisect_sim::Profile::Y2026)
        .with_time_scale(0.05)
        .with_faults(faults))
    .await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 20))).await;
    match record.outcome() {
        Outcome::Rejected(r) => {
            assert_eq!(r.error.kind, "protocol_error", "{r:?}");
            assert!(
                r.error.message.contains("answered another job: {"),
                "{}",
                r.error.message
            );
        }
        other => panic!("{other:?} {:?}", record.warnings),
    }
    sim.shutdown().await;
}

/// A prompt the socket ends with success but `/history` never shows: it passed with no
/// product checked; it is unknown now (a crash to confirm, never a pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_without_a_history_entry_is_unknown_not_passed() {
    let faults = Faults::parse("slow-history=600000").unwrap();
    let sim = sim(SimConfig::default().with_faults(faults)).await;
    let record = execute(&client(&sim), request(&sd15(512, 512, 1, 2))).await;
    assert_eq!(
        record.outcome,
        OutcomeKind::ServerLost,
        "{:?}",
        record.error
    );
    match record.outcome() {
        Outcome::ServerLost(info) => assert!(
            info.reason.contains("/history has no entry") && info.reason.contains("not passed"),
            "{}",
            info.reason
        ),
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}
