//! What reading an output file's container costs (issue 14, item 4): `cargo bench --bench
//! product_reads`.
//!
//! Starts the in-tree simulator, runs one prompt whose output nodes write each kind of file the
//! product check reads (a still PNG, an APNG, an animated WebP, a WebM, a small MP4 and an MP4
//! whose `moov` follows a 1 MiB `mdat`, so it is read with a second, `Range` request), then times
//! `run::product::read_headers` on each file alone, `PRODUCT_BENCH_READS` times (default 200),
//! on a warm client. Prints a Markdown table (per file: bytes, requests, ms) for
//! docs/PERFORMANCE.md.

mod common;

use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::run::product::{read_headers, Product};
use comfy_bisect_core::run::{execute, RunRequest};
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, SimConfig};
use common::{load, ms, stats, Stats};
use serde_json::json;
use std::time::{Duration, Instant};

fn main() {
    let reads: usize = std::env::var("PRODUCT_BENCH_READS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("# Product container reads\n");
    println!("- {} ({})", common::cpu_model(), load());
    rt.block_on(async {
        let sim = start(
            SimConfig::default().with_time_scale(0.0),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .expect("start simulator");
        let w = json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 48, "batch_size": 8, "color": 0}},
            "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "png"}},
            "3": {"class_type": "SaveAnimatedPNG", "inputs": {"images": ["1", 0], "filename_prefix": "apng", "fps": 6.0, "compress_level": 4}},
            "4": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["1", 0], "filename_prefix": "webp", "fps": 6.0, "lossless": true, "quality": 80, "method": "default"}},
            "5": {"class_type": "SaveWEBM", "inputs": {"images": ["1", 0], "filename_prefix": "webm", "codec": "vp9", "fps": 12.0, "crf": 32.0}},
            "6": {"class_type": "CreateVideo", "inputs": {"images": ["1", 0], "fps": 8.0}},
            "7": {"class_type": "SaveVideo", "inputs": {"video": ["6", 0], "filename_prefix": "video/small", "format": "mp4", "codec": "h264"}},
            "8": {"class_type": "EmptyImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 16, "color": 0}},
            "9": {"class_type": "CreateVideo", "inputs": {"images": ["8", 0], "fps": 8.0}},
            "10": {"class_type": "SaveVideo", "inputs": {"video": ["9", 0], "filename_prefix": "video/big", "format": "mp4", "codec": "h264"}}
        });
        let mut req = RunRequest::new(
            Workflow::from_json_str(&w.to_string(), "bench.json").expect("workflow"),
        );
        req.settle = Duration::ZERO;
        let client = Client::new(&sim.base_url(), ExtraHeaders::new()).expect("client");
        let record = execute(&client, req).await;
        // Requests per file, as the run recorded them.
        let requests = |name: &str| {
            record
                .raw
                .http
                .iter()
                .filter(|h| {
                    h.exchange
                        .path
                        .starts_with(&format!("/view?filename={name}&"))
                })
                .count()
        };
        let files = record.product.clone().expect("a product").files;
        println!("- {reads} reads of each file on a warm client, simulator in-process\n");
        println!("| file | bytes | what it says | requests per read | min ms | median ms | p99 ms |");
        println!("|---|---:|---|---:|---:|---:|---:|");
        let mut files = files;
        files.sort_by_key(|f| f.node_id.parse::<u32>().unwrap_or(0));
        for f in files.iter().filter(|f| f.node_id != "2" || f.filename.contains("00001")) {
            let mut times = Vec::with_capacity(reads);
            let mut last = None;
            for _ in 0..reads {
                let mut one = Product {
                    files: vec![comfy_bisect_core::run::product::OutputFile {
                        animated: f.animated,
                        ..blank(f)
                    }],
                    ..Product::default()
                };
                let t = Instant::now();
                read_headers(&client, &mut one).await;
                times.push(ms(t, Instant::now()));
                last = Some(one);
            }
            let got = last.and_then(|p| p.summary()).unwrap_or_default();
            let Stats { min, median, p99, .. } = stats(&times);
            println!(
                "| `{}` ({}) | {} | {got} | {} | {min:.3} | **{median:.3}** | {p99:.3} |",
                f.filename,
                f.class_type,
                f.bytes.unwrap_or(0),
                requests(&f.filename),
            );
        }
        println!("\n- after: {}", load());
        sim.shutdown().await;
    });
}

/// The history's view of a file: name, place and flags, nothing read yet.
fn blank(
    f: &comfy_bisect_core::run::product::OutputFile,
) -> comfy_bisect_core::run::product::OutputFile {
    comfy_bisect_core::run::product::OutputFile {
        node_id: f.node_id.clone(),
        class_type: f.class_type.clone(),
        key: f.key.clone(),
        filename: f.filename.clone(),
        subfolder: f.subfolder.clone(),
        kind: f.kind.clone(),
        ..Default::default()
    }
}
