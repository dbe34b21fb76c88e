//! Planning benchmark: `plan` on generated workflows of about 100, 1 000 and 10 000 nodes
//! (parallel SD pipelines, each with a chain of LoRAs, sizes from primitives, a hires-fix pass
//! and a model upscale). Prints the median time and the peak heap allocated while planning.
//!
//! Run: `cargo bench --bench plan` (results are recorded in docs/PERFORMANCE.md).

use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::ladder::{plan, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::{parse_api, Workflow};
use serde_json::{json, Map, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes and their peak while `COUNTING` is on.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static COUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static PEAK: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            let size = layout.size() as isize;
            let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const LORAS_PER_PIPELINE: usize = 8;

/// One pipeline of `9 + LORAS_PER_PIPELINE + 6` nodes with ids prefixed by `p`.
fn pipeline(p: usize, nodes: &mut Map<String, Value>) {
    let id = |s: &str| format!("{p}:{s}");
    nodes.insert(
        id("ckpt"),
        json!({"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd.safetensors"}}),
    );
    let mut model = json!([id("ckpt"), 0]);
    let mut clip = json!([id("ckpt"), 1]);
    for l in 0..LORAS_PER_PIPELINE {
        let lid = id(&format!("lora{l}"));
        nodes.insert(
            lid.clone(),
            json!({"class_type": "LoraLoader", "inputs": {
            "lora_name": "style.safetensors", "strength_model": 0.8, "strength_clip": 0.8,
            "model": model, "clip": clip}}),
        );
        model = json!([lid.clone(), 0]);
        clip = json!([lid, 1]);
    }
    nodes.insert(
        id("pos"),
        json!({"class_type": "CLIPTextEncode", "inputs": {"text": "a lighthouse", "clip": clip}}),
    );
    nodes.insert(
        id("neg"),
        json!({"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": clip}}),
    );
    nodes.insert(
        id("w"),
        json!({"class_type": "PrimitiveInt", "inputs": {"value": 1216}}),
    );
    nodes.insert(
        id("h"),
        json!({"class_type": "PrimitiveInt", "inputs": {"value": 832}}),
    );
    nodes.insert(id("lat"), json!({"class_type": "EmptyLatentImage", "inputs": {"width": [id("w"), 0], "height": [id("h"), 0], "batch_size": 2}}));
    nodes.insert(id("ks"), json!({"class_type": "KSampler", "inputs": {"seed": p, "steps": 30, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 1.0,
        "model": model, "positive": [id("pos"), 0], "negative": [id("neg"), 0], "latent_image": [id("lat"), 0]}}));
    nodes.insert(id("up"), json!({"class_type": "LatentUpscaleBy", "inputs": {"upscale_method": "nearest-exact", "scale_by": 1.5, "samples": [id("ks"), 0]}}));
    nodes.insert(id("ks2"), json!({"class_type": "KSampler", "inputs": {"seed": p, "steps": 15, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.5,
        "model": model, "positive": [id("pos"), 0], "negative": [id("neg"), 0], "latent_image": [id("up"), 0]}}));
    nodes.insert(id("dec"), json!({"class_type": "VAEDecode", "inputs": {"samples": [id("ks2"), 0], "vae": [id("ckpt"), 2]}}));
    nodes.insert(
        id("uml"),
        json!({"class_type": "UpscaleModelLoader", "inputs": {"model_name": "4x.pth"}}),
    );
    nodes.insert(id("ups"), json!({"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": [id("uml"), 0], "image": [id("dec"), 0]}}));
    nodes.insert(id("save"), json!({"class_type": "SaveImage", "inputs": {"filename_prefix": "bench", "images": [id("ups"), 0]}}));
}

fn workflow(target_nodes: usize) -> Workflow {
    let per = 14 + LORAS_PER_PIPELINE;
    let mut nodes = Map::new();
    for p in 0..target_nodes.div_ceil(per) {
        pipeline(p, &mut nodes);
    }
    parse_api(&Value::Object(nodes), "bench.json").expect("generated workflow parses")
}

fn main() {
    let defs = NodeDefs::load_file(std::path::Path::new(
        "tests/fixtures/comfyui/GET__object_info.final.json",
    ))
    .expect("run from the crate root (tests/corpus)");
    let catalog = Catalog::builtin();
    let options = PlanOptions::default();
    println!("| nodes | steps | median | min | peak heap while planning |");
    println!("|---:|---:|---:|---:|---:|");
    // `PLAN_BENCH_SIZES=1000,10000` picks the sizes (default: 100, 1 000 and 10 000 nodes).
    let sizes: Vec<usize> = std::env::var("PLAN_BENCH_SIZES")
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("PLAN_BENCH_SIZES: numbers"))
                .collect()
        })
        .unwrap_or_else(|_| vec![100, 1_000, 10_000]);
    let runs_env: Option<usize> = std::env::var("PLAN_BENCH_RUNS")
        .ok()
        .map(|n| n.parse().expect("PLAN_BENCH_RUNS: a number"));
    for size in sizes {
        let target = workflow(size);
        let runs = runs_env.unwrap_or(if size >= 10_000 { 3 } else { 11 });
        let mut times: Vec<Duration> = Vec::new();
        let mut steps = 0;
        // Timed runs without allocation counting.
        for _ in 0..runs {
            let start = Instant::now();
            let p = plan(&target, &defs, &catalog, &options).expect("plan succeeds");
            times.push(start.elapsed());
            steps = p.steps.len();
            drop(p);
        }
        // One counted run for the peak heap (bytes allocated during planning, at most).
        LIVE.store(0, Ordering::Relaxed);
        PEAK.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        let p = plan(&target, &defs, &catalog, &options).expect("plan succeeds");
        COUNTING.store(false, Ordering::Relaxed);
        let peak = PEAK.load(Ordering::Relaxed);
        drop(p);
        times.sort();
        println!(
            "| {} | {} | {:.1} ms | {:.1} ms | {:.1} MiB |",
            target.nodes.len(),
            steps,
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            peak as f64 / (1024.0 * 1024.0)
        );
    }
}
