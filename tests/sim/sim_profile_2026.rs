//! The simulator's 2026 profile (`simulate --profile 2026`) answers with the shapes of the real
//! ComfyUI 0.8.0 captures (`tests/fixtures/comfyui-0.8.0/`), and comfy-bisect's client runs
//! against both profiles: on 2026 it follows its prompt through `GET /api/jobs/{id}` and stops
//! it through `POST /api/jobs/{id}/cancel`; on 0.3.64 it finds no jobs API and polls `/queue`.

use crate::sim_support::{client, http, run_request, sim};
use comfy_bisect_core::run::{execute, Outcome, RunRecord, TimeoutReason};
use comfy_bisect_core::session::journal::{read_json, RunFile, Verdict, RUN_RECORD_FILE};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_sim::{Profile, SimConfig, MIB};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

const CAPTURES: &str = "tests/fixtures/comfyui-0.8.0";

fn capture(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{CAPTURES}/{name}")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn y2026() -> SimConfig {
    SimConfig::default()
        .with_time_scale(0.0)
        .with_profile(Profile::Y2026)
}

fn sd15() -> Value {
    let mut v = crate::sim_support::sd15(512, 512, 1, 4);
    v["4"]["inputs"]["ckpt_name"] = json!("random_sd15.safetensors");
    v
}

/// The paths of the HTTP requests a run made, e.g. `GET /queue`.
fn requests(record: &RunRecord) -> Vec<String> {
    record
        .raw
        .http
        .iter()
        .map(|h| format!("{} {}", h.exchange.method, h.exchange.path))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_system_stats_and_features_have_every_field_of_the_080_capture() {
    let sim = sim(y2026()).await;
    let url = sim.base_url();
    let stats: Value = http()
        .get(format!("{url}/system_stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let real = capture("system_stats.json")["body"].clone();
    let missing: Vec<_> = keys(&real["system"])
        .difference(&keys(&stats["system"]))
        .cloned()
        .collect();
    assert!(missing.is_empty(), "system lacks {missing:?}");
    assert_eq!(stats["system"]["os"], "linux");
    assert!(stats["system"]["comfy_package_versions"].is_array());
    assert_eq!(stats["system"]["deploy_environment"], "local-git");
    assert_eq!(keys(&stats["devices"][0]), keys(&real["devices"][0]));

    let features: Value = http()
        .get(format!("{url}/api/features"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let real = capture("features.json")["body"].clone();
    for k in keys(&real) {
        assert_eq!(features[&k], real[&k], "/features {k}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_profile_rejects_a_non_uuid_prompt_id_and_the_default_takes_it() {
    for (config, expected) in [(y2026(), 400), (SimConfig::default(), 200)] {
        let sim = sim(config).await;
        let answer = http()
            .post(format!("{}/prompt", sim.base_url()))
            .json(&json!({"prompt": sd15(), "prompt_id": "abc", "client_id": "c"}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), expected);
        if expected == 400 {
            let body: Value = answer.json().await.unwrap();
            assert_eq!(body["error"]["type"], "invalid_prompt_id");
            assert_eq!(body["node_errors"], json!({}));
        }
        sim.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_2026_is_followed_through_the_jobs_api_and_its_outputs_carry_asset_ids() {
    let sim = sim(y2026()).await;
    let c = client(&sim);
    let record = execute(&c, run_request(&sd15())).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    assert_eq!(record.raw.jobs_api, Some(true));
    let reqs = requests(&record);
    let jobs = format!("GET /api/jobs/{}", record.prompt_id);
    assert!(reqs.contains(&jobs), "{reqs:?}");
    // The asset ids are kept in the record's history and product...
    let out = &record.history.as_ref().unwrap().outputs["9"]["images"][0];
    assert!(out["id"].is_string(), "{out}");
    let product = record.product.as_ref().unwrap();
    assert_eq!(product.files[0].asset_id.as_deref(), out["id"].as_str());
    // ...and the prompt that ran is the one sent.
    assert_eq!(record.prompt_rewrite, None);
    // ...and the finished job reads like the real one.
    match c.job(&record.prompt_id).await.unwrap() {
        comfy_bisect_core::comfy::JobLookup::Found(job) => {
            assert_eq!(job.status, comfy_bisect_core::comfy::JobStatus::Completed);
            assert_eq!(job.outputs_count, Some(1));
        }
        other => panic!("{other:?}"),
    }
    let ours: Value = http()
        .get(format!("{}/api/jobs/{}", sim.base_url(), record.prompt_id))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let real = capture("realrun_api_jobs_id_done.json")["body"].clone();
    assert_eq!(keys(&ours), keys(&real), "{ours}");
    assert_eq!(keys(&ours["preview_output"]), keys(&real["preview_output"]));
    assert_eq!(
        c.job("6a1c7a43-0000-4000-8000-000000000000").await.unwrap(),
        comfy_bisect_core::comfy::JobLookup::NotFound
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_0_3_64_finds_no_jobs_api_and_polls_the_queue() {
    let sim = sim(SimConfig::default().with_time_scale(0.0)).await;
    let c = client(&sim);
    let record = execute(&c, run_request(&sd15())).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    let reqs = requests(&record);
    // The first status lookup found out, once, and /queue was used from then on.
    assert_eq!(record.raw.jobs_api, Some(false));
    let tries = reqs
        .iter()
        .filter(|r| r.starts_with("GET /api/jobs/"))
        .count();
    assert_eq!(tries, 1, "{reqs:?}");
    assert!(reqs.iter().any(|r| r == "GET /queue"), "{reqs:?}");
    assert_eq!(
        c.job(&record.prompt_id).await.unwrap(),
        comfy_bisect_core::comfy::JobLookup::NoJobsApi
    );
    assert_eq!(c.cancel_job(&record.prompt_id).await.unwrap(), None);
    sim.shutdown().await;
}

/// Issue #23 item 6: the 2026 server (0.38 has `comfy/benchmark/`) measures an opted-in run
/// itself; comfy-bisect opts every run in and keeps the `benchmark` event's figures. On the
/// 0.3.64 profile nothing comes and nothing else changes (`tests/run_sim.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_2026_keeps_the_servers_benchmark_capture() {
    let sim = sim(y2026()).await;
    let record = execute(&client(&sim), run_request(&sd15())).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    let b = record
        .server_benchmark
        .as_ref()
        .expect("the capture of our prompt");
    assert_eq!(
        b.source,
        comfy_bisect_core::run::benchmark::CaptureSource::Websocket
    );
    assert_eq!(b.schema_version, Some(3));
    assert_eq!(b.step_ms.len(), 4, "one time per denoising step");
    assert!(
        b.nodes
            .iter()
            .any(|n| n.class_type.as_deref() == Some("KSampler")),
        "{:?}",
        b.nodes
    );
    assert!(b.vram_peak_mb.is_some_and(|mb| mb > 0.0), "{b:?}");
    let summary = comfy_bisect_core::session::evidence::summary_of(&record, None, None);
    assert_eq!(
        summary.vram_peak_source.as_deref(),
        Some("server benchmark capture")
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_timeout_on_2026_cancels_through_the_jobs_api() {
    let sim = sim(y2026().with_time_scale(0.5)).await;
    let mut r = run_request(&crate::sim_support::sd15(512, 512, 1, 5000));
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
    assert_eq!(record.raw.jobs_cancel_api, Some(true));
    let reqs = requests(&record);
    let cancel = format!("POST /api/jobs/{}/cancel", record.prompt_id);
    assert!(reqs.contains(&cancel), "{reqs:?}");
    assert!(!reqs.iter().any(|r| r == "POST /interrupt"), "{reqs:?}");
    sim.shutdown().await;
}

#[test]
fn a_bisect_on_the_2026_profile_finds_the_resolution_step() {
    // 1792 MiB: the SD1.5 example fits at its minimal size and fails at its full resolution
    // (tests/session_sim.rs, failure_at_resolution).
    let sim = crate::session_support::Sim::start(
        SimConfig::default()
            .with_vram_bytes(1792 * MIB)
            .with_time_scale(0.0)
            .with_profile(Profile::Y2026),
    );
    let wf = crate::session_support::example(
        "sd15_txt2img_lora_upscale",
        &[("5", "batch_size", json!(1))],
    );
    let b = crate::session_support::bisect_workflow(&sim, &wf, &[]);
    match &b.job().verdict {
        Some(Verdict::FirstFailure { increment, .. }) => {
            assert_eq!(increment, "resolution", "{}", b.text())
        }
        other => panic!("expected a first failure, got {other:?}\n{}", b.text()),
    }
    for run in &b.job().runs {
        let file: RunFile = read_json(&b.dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap();
        assert_eq!(file.record.raw.jobs_api, Some(true), "run {}", run.dir);
    }
}

/// Issue 24's done-when for the graph formats: a UI workflow (a whole version-1 file) with a
/// subgraph and a V3 dynamic-combo node converts against the 2026 server's `/object_info`,
/// plans and bisects; the sampler inside the subgraph runs under its hierarchical id and the
/// report names it as the canvas shows it.
#[test]
fn a_v1_ui_workflow_with_a_subgraph_and_a_dynamic_combo_bisects_on_2026() {
    let sim = crate::session_support::Sim::start(
        SimConfig::default()
            .with_vram_bytes(1792 * MIB)
            .with_time_scale(0.0)
            .with_profile(Profile::Y2026),
    );
    let wf: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/ui-2026/subgraph-dynamic-combo.v1.json").unwrap(),
    )
    .unwrap();
    let b = crate::session_support::bisect_workflow(&sim, &wf, &[]);
    match &b.job().verdict {
        Some(Verdict::FirstFailure { .. }) => {}
        other => panic!("expected a first failure, got {other:?}\n{}", b.text()),
    }
    // The minimal variant ran the subgraph's sampler under its hierarchical id and the
    // resize node with its dotted sub-inputs.
    let first = b.main_run(0);
    let file: RunFile = read_json(&b.dir.join(&first.dir).join(RUN_RECORD_FILE)).unwrap();
    assert!(
        file.record.timeline.iter().any(|t| t.node_id == "140:125"),
        "{:?}",
        file.record.timeline
    );
    let report = b.read("report.md");
    assert!(
        report.contains("KSampler #125 in subgraph 'Sampler' #140"),
        "{report}"
    );
    // In report.json the node keeps its prompt id and says where it sits.
    let json: Value = serde_json::from_str(&b.read("report.json")).unwrap();
    let sampler_failures: Vec<&Value> = json["workflows"][0]["ladder"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row.get("failing_node"))
        .filter(|node| node["id"] == "140:125")
        .collect();
    assert!(!sampler_failures.is_empty(), "{json}");
    for node in sampler_failures {
        assert_eq!(node["class_type"], "KSampler");
        assert_eq!(node["subgraph"], "subgraph 'Sampler' #140", "{json}");
    }
    // `show` of that run names it the same way (from the run's UI companion), and the
    // diagnosis says where it sits.
    let run = b
        .job()
        .runs
        .iter()
        .find(|r| {
            matches!(&r.outcome, Some(comfy_bisect_core::session::Outcome::Failed { node_id, .. }) if node_id == "140:125")
        })
        .unwrap_or_else(|| panic!("no run failed in the sampler
{}", b.text()));
    let shown =
        crate::session_support::cli(&["show", &run.run_id, "--runs-dir", b.runs.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(
        stdout.contains("error:     KSampler #125 in subgraph 'Sampler' #140: "),
        "{stdout}"
    );
    assert!(
        stdout.contains("node 125 (KSampler) in subgraph #140"),
        "{stdout}"
    );
}

/// The API prompt of the hand-written v1 UI file (a subgraph and a V3 dynamic combo), as the
/// frontend would queue it.
fn subgraph_prompt() -> Value {
    let defs = comfy_bisect_core::nodedefs::NodeDefs::load_file(std::path::Path::new(
        "tests/fixtures/comfyui-newer/object_info.json",
    ))
    .unwrap();
    let ui: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/ui-2026/subgraph-dynamic-combo.v1.json").unwrap(),
    )
    .unwrap();
    comfy_bisect_core::workflow::ui::convert(&ui, &defs)
        .unwrap()
        .workflow
        .to_value()
}

/// A node inside a subgraph runs under its hierarchical id: `executing`, `progress` and every
/// `progress_state` entry name `140:125`, and (not an expanded node) its `display_node_id` and
/// `real_node_id` are that id with no parent, as `DynamicPrompt.get_display_node_id` /
/// `get_real_node_id` / `get_parent_node_id` answer for a prompt node upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_inside_a_subgraph_report_their_hierarchical_id_on_2026() {
    let sim = sim(y2026()).await;
    let base = sim.base_url();
    let mut ws = crate::sim_support::Ws::connect(&base, "c-2026-sub").await;
    let body = json!({"prompt": subgraph_prompt(), "client_id": "c-2026-sub"});
    let (status, answer) = crate::sim_support::post_prompt(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    let pid = answer["prompt_id"].as_str().unwrap().to_string();
    let msgs = ws.until_done(&pid).await;
    assert!(
        msgs.iter()
            .any(|m| m["type"] == "executing" && m["data"]["node"] == "140:125"),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m["type"] == "progress" && m["data"]["node"] == "140:125"),
        "{msgs:?}"
    );
    let states: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["type"] == "progress_state")
        .filter_map(|m| m["data"]["nodes"].get("140:125"))
        .collect();
    assert!(!states.is_empty(), "{msgs:?}");
    for s in states {
        assert_eq!(s["node_id"], "140:125");
        assert_eq!(s["display_node_id"], "140:125");
        assert_eq!(s["real_node_id"], "140:125");
        assert!(s["parent_node_id"].is_null(), "{s}");
    }
    // The dynamic combo's node ran with its dotted sub-inputs: the product is the resized
    // image.
    let entry = crate::sim_support::history_entry(&base, &pid).await;
    assert_eq!(entry["status"]["status_str"], "success", "{entry}");
    sim.shutdown().await;
}

/// The client follows such a run: its timeline holds the sampler under its hierarchical id
/// with its class and progress, never as an unknown node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_tracks_a_subgraph_node_by_its_hierarchical_id() {
    let sim = sim(y2026()).await;
    let c = client(&sim);
    let record = execute(&c, run_request(&subgraph_prompt())).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    let sampler = record
        .timeline
        .iter()
        .find(|t| t.node_id == "140:125")
        .unwrap_or_else(|| panic!("{:?}", record.timeline));
    assert_eq!(sampler.class_type.as_deref(), Some("KSampler"));
    assert!(sampler.progress.is_some(), "{sampler:?}");
    let product = record.product.as_ref().unwrap();
    assert_eq!(
        (product.files[0].width, product.files[0].height),
        (Some(1536), Some(1024)),
        "{product:?}"
    );
    sim.shutdown().await;
}

/// `GET /api/jobs` as 0.38 serves it (`server.py` `get_jobs`, `comfy_execution/jobs.py`
/// `get_all_jobs`): every job newest first, `status` / `sort_order` / `limit` / `offset`
/// filter and page it, `pagination` says where the page is, and bad parameters are a 400.
/// The 0.3.64 profile has no such route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_jobs_list_filters_sorts_and_pages() {
    let sim = sim(y2026()).await;
    let base = sim.base_url();
    let c = client(&sim);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let record = execute(&c, run_request(&sd15())).await;
        assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
        ids.push(record.prompt_id.clone());
        // create_time is in milliseconds: keep the three apart.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, all) = crate::sim_support::get(&base, "/api/jobs").await;
    assert_eq!(status, 200, "{all}");
    let listed: Vec<&str> = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed, newest_first, "{all}");
    assert_eq!(
        all["pagination"],
        json!({"offset": 0, "limit": null, "total": 3, "has_more": false})
    );
    // A list item is the job's summary: no outputs, execution status or workflow.
    let first = &all["jobs"][0];
    assert_eq!(first["status"], "completed");
    assert_eq!(first["outputs_count"], 1);
    for k in ["outputs", "execution_status", "workflow"] {
        assert!(first.get(k).is_none(), "{k} in {first}");
    }
    assert!(first["create_time"].is_u64(), "{first}");

    let (_, page) =
        crate::sim_support::get(&base, "/api/jobs?sort_order=asc&limit=1&offset=1").await;
    assert_eq!(page["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(page["jobs"][0]["id"], ids[1].as_str());
    assert_eq!(
        page["pagination"],
        json!({"offset": 1, "limit": 1, "total": 3, "has_more": true})
    );
    let (_, none) = crate::sim_support::get(&base, "/api/jobs?status=pending,in_progress").await;
    assert_eq!(none["jobs"], json!([]));
    assert_eq!(none["pagination"]["total"], 0);

    for (query, error) in [
        ("status=done", "Invalid status value(s): done."),
        ("sort_by=name", "sort_by must be"),
        ("sort_order=up", "sort_order must be"),
        ("limit=0", "limit must be a positive integer"),
        ("limit=x", "limit must be an integer"),
        ("offset=x", "offset must be an integer"),
    ] {
        let (status, body) = crate::sim_support::get(&base, &format!("/api/jobs?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        let msg = body["error"].as_str().unwrap();
        assert!(msg.starts_with(error), "{query}: {msg}");
    }
    sim.shutdown().await;

    let old = crate::sim_support::sim(SimConfig::default().with_time_scale(0.0)).await;
    let (status, _) = crate::sim_support::get(&old.base_url(), "/api/jobs").await;
    assert_eq!(status, 404);
    old.shutdown().await;
}

/// A 2026 `progress_state` entry carries `activity` while the node spends its time on
/// something other than steps (`NodeProgressState.activity`): the 2026 profile says
/// `loading` while the sampler loads its model, and clears it before the first step. 0.3.64
/// never sends the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_progress_state_says_when_a_node_is_loading() {
    for (config, expect) in [
        (y2026(), true),
        (SimConfig::default().with_time_scale(0.0), false),
    ] {
        let sim = sim(config).await;
        let base = sim.base_url();
        let mut ws = crate::sim_support::Ws::connect(&base, "c-activity").await;
        let body = json!({"prompt": sd15(), "client_id": "c-activity"});
        let (status, answer) = crate::sim_support::post_prompt(&base, &body).await;
        assert_eq!(status, 200, "{answer}");
        let pid = answer["prompt_id"].as_str().unwrap().to_string();
        let msgs = ws.until_done(&pid).await;
        // The sampler's entries in the order sent.
        let sampler: Vec<&Value> = msgs
            .iter()
            .filter(|m| m["type"] == "progress_state")
            .filter_map(|m| m["data"]["nodes"].get("3"))
            .collect();
        let loading: Vec<usize> = sampler
            .iter()
            .enumerate()
            .filter(|(_, s)| s.get("activity").is_some())
            .map(|(i, _)| i)
            .collect();
        if !expect {
            assert!(loading.is_empty(), "{sampler:?}");
            sim.shutdown().await;
            continue;
        }
        assert!(!loading.is_empty(), "{sampler:?}");
        for &i in &loading {
            assert_eq!(sampler[i]["activity"], "loading");
            assert_eq!(sampler[i]["state"], "running");
            assert_eq!(sampler[i]["value"], 0.0, "loading comes before the steps");
        }
        let after = &sampler[loading.last().unwrap() + 1];
        assert!(after.get("activity").is_none(), "{after}");
        let last = sampler.last().unwrap();
        assert_eq!(last["state"], "finished");
        assert!(last.get("activity").is_none(), "{last}");
        sim.shutdown().await;
    }
    // comfy-bisect's client follows a run with these entries as any other.
    let sim = sim(y2026()).await;
    let record = execute(&client(&sim), run_request(&sd15())).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    sim.shutdown().await;
}

/// SD1.5 whose decoded image goes through `ResizeImagesByLongerEdge` (longer edge 256) into
/// the save node: a class 0.38 no longer has and replaces before running.
fn sd15_with_retired_resize() -> Value {
    let mut v = sd15();
    v["10"] = json!({"class_type": "ResizeImagesByLongerEdge",
        "inputs": {"images": ["8", 0], "longer_edge": 256}});
    v["9"]["inputs"]["images"] = json!(["10", 0]);
    v
}

/// What ran vs what was sent, end to end: the 2026 profile replaces the retired
/// `ResizeImagesByLongerEdge` with `ImageScaleToMaxDimension` before it runs (ComfyUI's
/// built-in node replacement), `/history` stores the prompt that ran, and comfy-bisect's run
/// record names the rewrite (`prompt_rewrite`: the hash of what ran, the differences, and a
/// warning) while the product is the one the replacement made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_node_replacement_is_recorded_as_what_ran_vs_what_was_sent() {
    let sim = sim(y2026()).await;
    let sent = sd15_with_retired_resize();
    let record = execute(&client(&sim), run_request(&sent)).await;
    assert_eq!(record.outcome, OutcomeKind::Passed, "{:?}", record.error);
    let ran = &record.history.as_ref().unwrap().prompt[2];
    assert_eq!(ran["10"]["class_type"], "ImageScaleToMaxDimension", "{ran}");
    let rewrite = record.prompt_rewrite.as_ref().expect("a recorded rewrite");
    assert_ne!(rewrite.ran_sha256, record.workflow_sha256);
    assert_eq!(
        rewrite.changes,
        [
            "node 10: class ResizeImagesByLongerEdge → ImageScaleToMaxDimension",
            "node 10: input images removed",
            "node 10: input longer_edge removed",
            "node 10: input image added ([\"8\",0])",
            "node 10: input largest_size added (256)",
            "node 10: input upscale_method added (\"lanczos\")",
        ],
        "{rewrite:?}"
    );
    assert!(
        record
            .warnings
            .iter()
            .any(|w| w.contains(&rewrite.ran_sha256[..12])),
        "{:?}",
        record.warnings
    );
    let product = record.product.as_ref().unwrap();
    assert_eq!(
        (product.files[0].width, product.files[0].height),
        (Some(256), Some(256)),
        "{product:?}"
    );
    sim.shutdown().await;

    // 0.3.64 has no replacements: the class is missing and the prompt is rejected.
    let old = crate::sim_support::sim(SimConfig::default().with_time_scale(0.0)).await;
    let (status, body) = crate::sim_support::post_prompt(
        &old.base_url(),
        &json!({"prompt": sent, "client_id": "c"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    old.shutdown().await;
}
