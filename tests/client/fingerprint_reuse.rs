//! The environment fingerprint's cost on the simulator: `/object_info` is fetched only when
//! something suggests the node set may have changed, and reused otherwise.

use comfy_bisect_core::comfy::{Client, ExtraHeaders, Fingerprinter};
use comfy_bisect_core::run::{execute, RunRequest};
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, Faults, SimConfig, SimHandle, EXTRA_PACK};
use serde_json::json;
use std::time::Duration;

async fn sim(config: SimConfig) -> SimHandle {
    start(config.with_time_scale(0.0), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// A small model-free prompt; returns its prompt id once it finished.
async fn one_prompt(client: &Client) -> String {
    let v = json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "t"}}
    });
    let mut r = RunRequest::new(Workflow::from_json_str(&v.to_string(), "t.json").unwrap());
    r.sample_interval = Duration::from_millis(50);
    r.settle = Duration::from_millis(20);
    let record = execute(client, r).await;
    assert_eq!(
        record.outcome.to_string(),
        "passed",
        "{:?}",
        record.warnings
    );
    record.prompt_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_info_is_reused_until_something_suggests_a_change() {
    let sim =
        sim(SimConfig::default().with_faults(Faults::default().with_pack_added_after(2))).await;
    let client = Client::new(&sim.base_url(), ExtraHeaders::new()).unwrap();
    let mut fp = Fingerprinter::new(client.clone());
    let first = fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 1);
    assert!(first.core_nodes.is_some() && !first.packs.is_empty());

    // A run on a steady server: the next fingerprints reuse the node sets (same id).
    let id = one_prompt(&client).await;
    fp.ran(&id, false);
    let second = fp.take().await.unwrap();
    let third = fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 1, "reused");
    assert_eq!(second.id, first.id);
    assert_eq!(third.packs, first.packs);
    assert_eq!(third.object_info_sha256, first.object_info_sha256);

    // The 2nd prompt loads another pack: /extensions changes, so /object_info is fetched.
    let id = one_prompt(&client).await;
    fp.ran(&id, false);
    let with_pack = fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 2);
    assert!(with_pack.pack(EXTRA_PACK).is_some());
    assert_ne!(with_pack.id, first.id);
    fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 2, "reused again");

    // A socket that reconnected during the run: fetched again.
    fp.ran(&id, true);
    fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 3);

    // The server restarted since the last run (its prompt is gone from history).
    sim.restart().await.unwrap();
    fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 4);
    // Told by the session (a lost server, --restart-cmd).
    let id = one_prompt(&client).await;
    fp.ran(&id, false);
    fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 4);
    fp.invalidate();
    fp.take().await.unwrap();
    assert_eq!(fp.object_info_fetches(), 5);
    sim.shutdown().await;
}
