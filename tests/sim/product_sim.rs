//! The run's product against the simulator: every output node's files recorded with the size
//! read from its header through `/view` and compared with what the variant asked for; a silently
//! missing output fails the run (`incomplete_output`, the node named); a fully cached
//! resubmission and a socket-only output node pass.

use crate::sim_support::{client, run_request, sim};
use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::run::product::Produced;
use comfy_bisect_core::run::{execute, RunError, RunRecord, RunRequest};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_sim::{Faults, SimConfig};
use serde_json::{json, Value};

/// SD1.5 txt2img at `w`×`h`, batch `batch`, 2 steps, plus a 1.5× ImageScaleBy into a
/// PreviewImage.
fn sd15(w: u64, h: u64, batch: u64) -> Value {
    let mut v = crate::sim_support::sd15(w, h, batch, 2);
    v["10"] = json!({"class_type": "ImageScaleBy", "inputs": {"image": ["8", 0], "upscale_method": "lanczos", "scale_by": 1.5}});
    v["11"] = json!({"class_type": "PreviewImage", "inputs": {"images": ["10", 0]}});
    v
}

fn request(v: &Value, cold: bool) -> RunRequest {
    let mut r = run_request(v);
    r.cold = cold;
    r
}

/// (node, format, width, height) of every recorded file.
fn sizes(r: &RunRecord) -> Vec<(String, String, u32, u32)> {
    r.product
        .as_ref()
        .unwrap()
        .files
        .iter()
        .map(|f| {
            (
                f.node_id.clone(),
                f.format.clone().unwrap_or_default(),
                f.width.unwrap_or(0),
                f.height.unwrap_or(0),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_output_file_is_recorded_with_its_header_size_and_no_mismatch() {
    let sim = sim(SimConfig::default().with_vram_gib(12)).await;
    let r = execute(&client(&sim), request(&sd15(512, 384, 2), true)).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.error);
    let p = r.product.as_ref().unwrap();
    let mut got = sizes(&r);
    got.sort();
    let png = |n: &str, w, h| (n.to_string(), "png".to_string(), w, h);
    assert_eq!(
        got,
        [
            png("11", 768, 576),
            png("11", 768, 576),
            png("9", 512, 384),
            png("9", 512, 384)
        ]
    );
    assert!(p.mismatches.is_empty(), "{:?}", p.mismatches);
    assert!(r.warnings.iter().all(|w| !w.starts_with("product:")));
    assert_eq!(p.summary().unwrap(), "2 × PNG 512×384, 2 × PNG 768×576");
    // Each file's record: node, class, file, subfolder, type, byte size.
    let f = p.files.iter().find(|f| f.node_id == "9").unwrap();
    assert_eq!(
        (f.class_type.as_str(), f.kind.as_str()),
        ("SaveImage", "output")
    );
    assert!(f.filename.starts_with("test_") && f.filename.ends_with(".png"));
    assert!(f.bytes.is_some_and(|b| b > 24));
    let t = p.files.iter().find(|f| f.node_id == "11").unwrap();
    assert_eq!(
        (t.class_type.as_str(), t.kind.as_str()),
        ("PreviewImage", "temp")
    );
    // The header reads went through the recorded client like every other request.
    let views = r
        .raw
        .http
        .iter()
        .filter(|h| h.exchange.path.starts_with("/view?"))
        .count();
    assert_eq!(views, 4);
    // The expectation came from the graph.
    let node = p.nodes.iter().find(|n| n.node_id == "11").unwrap();
    let e = node.expected.unwrap();
    assert_eq!((e.width, e.height, e.count), (768, 576, 2));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_missing_output_fails_the_run_as_incomplete_output() {
    let sim = sim(SimConfig::default()
        .with_vram_gib(12)
        .with_faults(Faults::default().with_missing_output("PreviewImage")))
    .await;
    let r = execute(&client(&sim), request(&sd15(512, 512, 1), true)).await;
    // The server calls it a success; the product says otherwise.
    assert_eq!(
        r.history.as_ref().unwrap().status.status_str,
        "success",
        "{:?}",
        r.history
    );
    assert_eq!(r.outcome, OutcomeKind::Failed);
    match &r.error {
        Some(RunError::IncompleteOutput(i)) => {
            assert_eq!(i.nodes.len(), 1);
            assert_eq!(
                (i.nodes[0].node_id.as_str(), i.nodes[0].class_type.as_str()),
                ("11", "PreviewImage")
            );
            assert!(i.message.contains("PreviewImage #11"), "{}", i.message);
        }
        other => panic!("{other:?}"),
    }
    let d = r.diagnosis.as_ref().unwrap();
    assert_eq!(d.kind.as_str(), "incomplete_output");
    assert_eq!(d.node_id.as_deref(), Some("11"));
    assert_eq!(d.node_type.as_deref(), Some("PreviewImage"));
    // The other output is recorded as produced.
    let p = r.product.as_ref().unwrap();
    let produced: Vec<(&str, Produced)> = p
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.produced))
        .collect();
    assert!(produced.contains(&("9", Produced::History)), "{produced:?}");
    assert!(
        produced.contains(&("11", Produced::Missing)),
        "{produced:?}"
    );
    // run.json round trip keeps outcome and error.
    let back: RunRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.outcome().kind(), OutcomeKind::Failed);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["error"]["incomplete_output"]["nodes"][0]["node_id"], "11");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_cached_resubmission_passes_with_the_earlier_files() {
    let sim = sim(SimConfig::default().with_vram_gib(12)).await;
    let c = client(&sim);
    let first = execute(&c, request(&sd15(512, 512, 1), true)).await;
    assert_eq!(first.outcome, OutcomeKind::Passed);
    // Warm: the output cache serves every node, as in history_core_cached.json.
    let again = execute(&c, request(&sd15(512, 512, 1), false)).await;
    assert_eq!(again.outcome, OutcomeKind::Passed, "{:?}", again.error);
    let p = again.product.as_ref().unwrap();
    assert!(p
        .nodes
        .iter()
        .all(|n| n.cached && n.produced == Produced::History));
    let names = |r: &RunRecord| -> Vec<String> {
        let mut v: Vec<String> = r
            .product
            .as_ref()
            .unwrap()
            .files
            .iter()
            .map(|f| f.filename.clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&again), names(&first));
    assert_eq!(sizes(&again).len(), 2);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_only_output_node_passes() {
    let sim = sim(SimConfig::default().with_vram_gib(12)).await;
    let w = json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 32, "height": 32, "batch_size": 2, "color": 255}},
        "2": {"class_type": "SaveImageWebsocket", "inputs": {"images": ["1", 0]}}
    });
    let r = execute(&client(&sim), request(&w, true)).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.error);
    let p = r.product.as_ref().unwrap();
    assert_eq!(p.nodes[0].produced, Produced::Socket);
    assert!(p.files.is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_reads_carry_the_clients_extra_headers() {
    // A proxy that refuses every request without the header: the /view reads pass it too.
    let sim = sim(SimConfig::default()
        .with_vram_gib(12)
        .with_required_header("X-Proxy-Token", "s3cret"))
    .await;
    let mut headers = ExtraHeaders::new();
    headers.push("X-Proxy-Token", "s3cret").unwrap();
    let c = Client::new(&sim.base_url(), headers).unwrap();
    let r = execute(&c, request(&sd15(512, 384, 1), true)).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.error);
    let p = r.product.as_ref().unwrap();
    assert!(
        p.files
            .iter()
            .all(|f| f.width.is_some() && f.note.is_none()),
        "{:?}",
        p.files
    );
    sim.shutdown().await;
}
