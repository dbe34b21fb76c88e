//! The memory model seen from a client: OOM at every stage with PyTorch's wording, ComfyUI's
//! tips and a matching traceback, VRAM numbers in /system_stats, /free semantics, determinism.

use crate::sim_support::*;
use comfy_bisect_sim::{Allocator, Launch, Profile, SimConfig, GIB};
use serde_json::{json, Value};

const TIPS: &str = "This error means you ran out of memory on your GPU.\n\nTIPS: If the workflow worked before you might have accidentally set the batch_size to a large number.";

/// Wan 2.2 i2v (core nodes) at 832×480×81 with an optional step cache.
fn wan_i2v(teacache: bool) -> Value {
    let mut p = json!({
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan", "device": "default"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "wan_2.1_vae.safetensors"}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["2", 0], "text": "a fox in snow"}},
        "5": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["2", 0], "text": ""}},
        "6": {"class_type": "WanImageToVideo", "inputs": {"positive": ["4", 0], "negative": ["5", 0], "vae": ["3", 0],
            "width": 832, "height": 480, "length": 81, "batch_size": 1}},
        "7": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["6", 0], "negative": ["6", 1],
            "latent_image": ["6", 2], "seed": 1, "steps": 20, "cfg": 3.5, "sampler_name": "uni_pc",
            "scheduler": "simple", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["7", 0], "vae": ["3", 0]}},
        "9": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["8", 0], "filename_prefix": "wan",
            "fps": 16.0, "lossless": false, "quality": 90, "method": "default"}}
    });
    if teacache {
        p["10"] = json!({"class_type": "TeaCache", "inputs": {"model": ["1", 0], "model_type": "wan2.1_i2v_480p_14B",
            "rel_l1_thresh": 0.3, "start_percent": 0.1, "end_percent": 1.0, "cache_device": "cuda"}});
        p["7"]["inputs"]["model"] = json!(["10", 0]);
    }
    p
}

struct Failure {
    error: Value,
    progress: usize,
    types: Vec<String>,
}

/// Runs a prompt on a fresh simulator and returns its execution_error (panics on success).
async fn fail(config: SimConfig, prompt: &Value) -> Failure {
    let sim = sim(config).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "mem-test").await;
    let (status, resp) =
        post_prompt(&base, &json!({"prompt": prompt, "client_id": "mem-test"})).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["node_errors"], json!({}));
    let pid = resp["prompt_id"].as_str().unwrap().to_string();
    let msgs = ws.until_done(&pid).await;
    let error = msgs
        .iter()
        .find(|m| m["type"] == "execution_error")
        .unwrap_or_else(|| panic!("expected an OOM, got {:?}", types(&msgs)))
        .clone();
    let progress = msgs
        .iter()
        .filter(|m| m["type"] == "progress" && m["data"]["node"] == error["data"]["node_id"])
        .count();
    // History keeps the same error; outputs are empty.
    let entry = history_entry(&base, &pid).await;
    assert_eq!(entry["status"]["status_str"], "error");
    assert_eq!(entry["status"]["completed"], false);
    assert_eq!(entry["outputs"], json!({}));
    let last = last_history_message(&entry);
    assert_eq!(last[0], "execution_error");
    assert_eq!(last[1], error["data"]);
    // ComfyUI unloads every model after an OOM.
    let (_, stats) = get(&base, "/system_stats").await;
    assert_eq!(stats["devices"][0]["torch_vram_total"], 0);
    sim.shutdown().await;
    Failure {
        error: error["data"].clone(),
        progress,
        types: types(&msgs),
    }
}

fn tb(f: &Failure) -> String {
    f.error["traceback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect()
}

fn assert_cuda_oom(f: &Failure) {
    let e = &f.error;
    assert_eq!(e["exception_type"], "torch.OutOfMemoryError");
    let msg = e["exception_message"].as_str().unwrap();
    assert!(
        msg.starts_with("CUDA out of memory. Tried to allocate "),
        "{msg}"
    );
    assert!(msg.contains(" is free. Including non-PyTorch memory, this process has "));
    assert!(msg.contains(" is reserved by PyTorch but unallocated."));
    assert!(msg.ends_with(&format!("\n{TIPS}")));
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "prompt_id",
            "node_id",
            "node_type",
            "executed",
            "exception_message",
            "exception_type",
            "traceback",
            "current_inputs",
            "current_outputs",
            "timestamp"
        ]
    );
    assert!(tb(f).starts_with("  File \"/home/user/ComfyUI/execution.py\", line 496, in execute"));
    // The error replaces execution_success; the run still ends with status + executing null.
    let n = f.types.len();
    assert_eq!(f.types[n - 3..], ["execution_error", "status", "executing"]);
    assert!(!f.types.contains(&"execution_success".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_on_the_first_sampling_step() {
    let f = fail(
        SimConfig::default().with_vram_gib(8),
        &sd15(2048, 2048, 1, 20),
    )
    .await;
    assert_cuda_oom(&f);
    assert_eq!(f.error["node_id"], "3");
    assert_eq!(f.error["node_type"], "KSampler");
    assert_eq!(f.progress, 0);
    let t = tb(&f);
    assert!(
        t.contains("in sample_euler") && t.contains("attention_pytorch"),
        "{t}"
    );
    assert!(!t.contains("load_models_gpu"));
    // current_inputs keep primitives and render objects like Python's str().
    assert_eq!(f.error["current_inputs"]["steps"], json!([20]));
    assert!(f.error["current_inputs"]["model"][0]
        .as_str()
        .unwrap()
        .starts_with("<comfy.model_patcher.ModelPatcher object at 0x"));
    let mut executed: Vec<&str> = f.error["executed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    executed.sort();
    assert_eq!(executed, ["4", "5", "6", "7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_cache_fails_mid_sampling_after_some_progress() {
    let f = fail(SimConfig::default(), &wan_i2v(true)).await;
    assert_cuda_oom(&f);
    assert_eq!(f.error["node_type"], "KSampler");
    assert!(f.progress >= 1 && f.progress < 20, "{}", f.progress);
    assert!(tb(&f).contains("ComfyUI-TeaCache/nodes.py"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_graph_without_the_cache_passes() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "c").await;
    let (_, resp) = post_prompt(&base, &json!({"prompt": wan_i2v(false), "client_id": "c"})).await;
    let pid = resp["prompt_id"].as_str().unwrap();
    let msgs = ws.until_done(pid).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    let steps = msgs
        .iter()
        .filter(|m| m["type"] == "progress" && m["data"]["node"] == "7")
        .count();
    assert_eq!(steps, 20);
    // The model stays loaded after a success; /free unload_models releases it.
    let (_, stats) = get(&base, "/system_stats").await;
    let dev = &stats["devices"][0];
    assert!(dev["vram_free"].as_u64().unwrap() < 20 * GIB);
    assert!(dev["torch_vram_total"].as_u64().unwrap() > 10 * GIB);
    post(&base, "/free", &json!({"unload_models": true})).await;
    for _ in 0..100 {
        let (_, stats) = get(&base, "/system_stats").await;
        if stats["devices"][0]["torch_vram_total"] == 0 {
            sim.shutdown().await;
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("/free unload_models did not release the models");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lora_patching_fails_while_loading_inside_the_sampler() {
    let mut p = json!({
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-dev.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors", "clip_name2": "t5xxl_fp8_e4m3fn_scaled.safetensors", "type": "flux", "device": "default"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["2", 0], "text": "a cat"}},
        "5": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
        "6": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["4", 0], "negative": ["4", 0],
            "latent_image": ["5", 0], "seed": 1, "steps": 20, "cfg": 1.0, "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0}},
        "7": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["3", 0]}},
        "8": {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": "flux"}}
    });
    let loras = [
        "flux/FLUX.1-Turbo-Alpha.safetensors",
        "flux/aidmaImageUpgrader-FLUX-v0.3.safetensors",
        "flux/flux_realism_lora.safetensors",
    ];
    let mut prev = "1".to_string();
    for i in 0..9 {
        let id = format!("{}", 20 + i);
        p[&id] = json!({"class_type": "LoraLoaderModelOnly", "inputs": {"model": [prev, 0], "lora_name": loras[i % 3], "strength_model": 0.8}});
        prev = id;
    }
    p["6"]["inputs"]["model"] = json!([prev, 0]);
    let f = fail(SimConfig::default(), &p).await;
    assert_cuda_oom(&f);
    assert_eq!(f.error["node_type"], "KSampler");
    assert_eq!(f.progress, 0);
    let t = tb(&f);
    assert!(
        t.contains("load_models_gpu") && t.contains("patch_weight_to_device"),
        "{t}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrapper_text_encoder_fails_moving_to_the_gpu() {
    let wf: Value = serde_json::from_str(
        &std::fs::read_to_string(
            "tests/fixtures/custom-nodes/workflows/wanvideowrapper_t2v_blockswap_teacache_loras.json",
        )
        .unwrap(),
    )
    .unwrap();
    let f = fail(SimConfig::default().with_vram_gib(6), &wf).await;
    assert_cuda_oom(&f);
    assert_eq!(f.error["node_type"], "WanVideoTextEncode");
    assert!(tb(&f).contains("encoder.model.to(device)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_tiled_decode_can_still_fail_in_decode() {
    let p = json!({
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 4096, "height": 4096, "batch_size": 1}},
        "3": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["2", 0], "vae": ["1", 2], "tile_size": 4096,
            "overlap": 64, "temporal_size": 64, "temporal_overlap": 8}},
        "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "big"}}
    });
    let f = fail(SimConfig::default().with_vram_gib(8), &p).await;
    assert_cuda_oom(&f);
    assert_eq!(f.error["node_type"], "VAEDecodeTiled");
    assert!(tb(&f).contains("decode_tiled_"));
}

/// The simulator's log lines (its `tracing` output, where it writes what ComfyUI prints to its
/// console), collected for the whole test binary: every simulator of `tests/sim` logs here once
/// this ran, so a check names its node (no other test there falls back on a node `3`).
fn sim_log() -> &'static std::sync::Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<&'static std::sync::Mutex<Vec<u8>>> =
        std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let log: &'static std::sync::Mutex<Vec<u8>> =
            Box::leak(Box::new(std::sync::Mutex::new(Vec::new())));
        struct Writer(&'static std::sync::Mutex<Vec<u8>>);
        impl std::io::Write for Writer {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        tracing_subscriber::fmt()
            .with_env_filter("comfy_bisect_sim=info")
            .with_ansi(false)
            .with_writer(move || Writer(log))
            .init();
        log
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_vae_decode_retries_tiled_and_passes() {
    let log = sim_log();
    let p = json!({
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 2048, "height": 2048, "batch_size": 1}},
        "3": {"class_type": "VAEDecode", "inputs": {"samples": ["2", 0], "vae": ["1", 2]}},
        "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "big"}}
    });
    // The whole frame does not fit on this card: 2048² × 4356 B (ComfyUI's estimate) ≈ 17 GiB.
    let whole_frame = 2048u64 * 2048 * 4356;
    assert!(whole_frame > 8 * GIB);
    let sim = sim(SimConfig::default().with_vram_gib(8)).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "d").await;
    let (_, resp) = post_prompt(&base, &json!({"prompt": p, "client_id": "d"})).await;
    let msgs = ws.until_done(resp["prompt_id"].as_str().unwrap()).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    // The decode node ran (not cached) and wrote the image.
    assert!(msgs
        .iter()
        .any(|m| m["type"] == "executing" && m["data"]["node"] == "3"));
    assert!(msgs
        .iter()
        .any(|m| m["type"] == "executed" && m["data"]["node"] == "4"));
    // It got there by ComfyUI's fallback: the OOM of the regular decode, then tiles.
    let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(
        text.lines().any(|l| l.contains("node=\"3\"")
            && l.contains(
                "Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding"
            )),
        "no tiled retry logged for node 3:\n{text}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_interpolation_fails_in_postprocessing_after_some_frames() {
    let p = json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 1920, "height": 1080, "batch_size": 161, "color": 0}},
        "2": {"class_type": "RIFE VFI", "inputs": {"frames": ["1", 0], "ckpt_name": "rife47.pth", "clear_cache_after_n_frames": 100,
            "multiplier": 4, "fast_mode": true, "ensemble": true, "scale_factor": 1.0, "dtype": "float32", "torch_compile": false, "batch_size": 1}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "vfi"}}
    });
    let f = fail(SimConfig::default().with_vram_gib(4), &p).await;
    assert_cuda_oom(&f);
    assert_eq!(f.error["node_type"], "RIFE VFI");
    assert!(f.progress > 0);
    assert!(tb(&f).contains("ComfyUI-Frame-Interpolation"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_deterministic_and_the_allocator_changes_the_wording() {
    let a = fail(
        SimConfig::default().with_vram_gib(8),
        &sd15(2048, 2048, 1, 20),
    )
    .await;
    let b = fail(
        SimConfig::default().with_vram_gib(8),
        &sd15(2048, 2048, 1, 20),
    )
    .await;
    for k in [
        "node_id",
        "exception_message",
        "traceback",
        "current_inputs",
    ] {
        assert_eq!(a.error[k], b.error[k], "{k}");
    }
    let c = fail(
        SimConfig::default()
            .with_vram_gib(8)
            .with_allocator(Allocator::CudaMallocAsync),
        &sd15(2048, 2048, 1, 20),
    )
    .await;
    let msg = c.error["exception_message"].as_str().unwrap();
    assert!(msg.starts_with("Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : "), "{msg}");
    assert!(msg.ends_with(TIPS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_custom_node_workflows_validate_and_run() {
    let dir = std::path::Path::new("tests/fixtures/custom-nodes/workflows");
    let sim = sim(SimConfig::default().with_time_scale(0.0)).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "wf").await;
    let mut ran = 0;
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    for path in names {
        let wf: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let (status, resp) = post_prompt(&base, &json!({"prompt": wf, "client_id": "wf"})).await;
        assert_eq!(status, 200, "{}: {resp}", path.display());
        assert_eq!(resp["node_errors"], json!({}), "{}", path.display());
        let msgs = ws.until_done(resp["prompt_id"].as_str().unwrap()).await;
        let t = types(&msgs);
        assert!(
            t.contains(&"execution_success".to_string())
                || t.contains(&"execution_error".to_string()),
            "{}: {t:?}",
            path.display()
        );
        ran += 1;
    }
    assert_eq!(ran, 6);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_loaders_still_feed_the_memory_model() {
    // Warm server: the loader and text encoders are cached from the first run, yet the bigger
    // second run must still load the model inside the sampler and run out of memory.
    let sim = sim(SimConfig::default().with_vram_gib(8)).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "warm").await;
    let (_, r) = post_prompt(
        &base,
        &json!({"prompt": sd15(512, 512, 1, 4), "client_id": "warm"}),
    )
    .await;
    let msgs = ws.until_done(r["prompt_id"].as_str().unwrap()).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    let (_, r) = post_prompt(
        &base,
        &json!({"prompt": sd15(2048, 2048, 1, 4), "client_id": "warm"}),
    )
    .await;
    let msgs = ws.until_done(r["prompt_id"].as_str().unwrap()).await;
    let cached = &msgs
        .iter()
        .find(|m| m["type"] == "execution_cached")
        .unwrap()["data"]["nodes"];
    assert_eq!(*cached, json!(["4", "6", "7"]));
    let err = msgs
        .iter()
        .find(|m| m["type"] == "execution_error")
        .expect("OOM expected");
    assert_eq!(err["data"]["node_type"], "KSampler");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowvram_turns_a_first_step_oom_into_a_slow_pass() {
    let mut p = wan_i2v(false);
    p["6"]["inputs"]["width"] = json!(1280);
    p["6"]["inputs"]["height"] = json!(720);
    let f = fail(SimConfig::default(), &p).await;
    assert_eq!(f.error["node_type"], "KSampler");
    assert_eq!(f.progress, 0);
    let sim = sim(SimConfig::default().with_lowvram()).await;
    let base = sim.base_url();
    let (_, stats) = get(&base, "/system_stats").await;
    assert!(stats["system"]["argv"]
        .as_array()
        .unwrap()
        .contains(&json!("--lowvram")));
    let mut ws = Ws::connect(&base, "low").await;
    let (_, r) = post_prompt(&base, &json!({"prompt": p, "client_id": "low"})).await;
    let msgs = ws.until_done(r["prompt_id"].as_str().unwrap()).await;
    assert!(types(&msgs).contains(&"execution_success".to_string()));
    sim.shutdown().await;
}

/// What the project's diagnosis makes of a simulated failure.
fn diagnosed(f: &Failure, steps: u64) -> comfy_bisect_core::diagnose::Diagnosis {
    use comfy_bisect_core::diagnose::{diagnose, Evidence, NodeProgress};
    let e = &f.error;
    let s = |k: &str| e[k].as_str().map(str::to_string);
    let traceback = e["traceback"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|fr| {
            fr.as_str()
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let progress = if f.progress > 0 {
        vec![NodeProgress {
            node_id: s("node_id").unwrap(),
            class_type: s("node_type"),
            value: f.progress as u64,
            max: steps,
        }]
    } else {
        Vec::new()
    };
    diagnose(&Evidence {
        node_id: s("node_id"),
        node_type: s("node_type"),
        exception_type: s("exception_type"),
        exception_message: s("exception_message"),
        traceback,
        progress,
        outcome: None,
        cached_nodes: Vec::new(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagnosis_reads_the_simulated_stage_and_numbers() {
    use comfy_bisect_core::diagnose::Stage;
    use comfy_bisect_core::vocab::FailureKind;
    let first = fail(
        SimConfig::default().with_vram_gib(8),
        &sd15(2048, 2048, 1, 20),
    )
    .await;
    let middle = fail(SimConfig::default(), &wan_i2v(true)).await;
    let rife = json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 1920, "height": 1080, "batch_size": 161, "color": 0}},
        "2": {"class_type": "RIFE VFI", "inputs": {"frames": ["1", 0], "ckpt_name": "rife47.pth", "clear_cache_after_n_frames": 100,
            "multiplier": 4, "fast_mode": true, "ensemble": true, "scale_factor": 1.0, "dtype": "float32", "torch_compile": false, "batch_size": 1}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "vfi"}}
    });
    let post = fail(SimConfig::default().with_vram_gib(4), &rife).await;
    let decode = json!({
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 4096, "height": 4096, "batch_size": 1}},
        "3": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["2", 0], "vae": ["1", 2], "tile_size": 4096,
            "overlap": 64, "temporal_size": 64, "temporal_overlap": 8}},
        "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "big"}}
    });
    let decode = fail(SimConfig::default().with_vram_gib(8), &decode).await;
    for (f, steps, stage) in [
        (&decode, 0, Stage::Decode),
        (&first, 20, Stage::SampleFirst),
        (&middle, 20, Stage::SampleMiddle),
        (&post, 160, Stage::Postprocess),
    ] {
        let d = diagnosed(f, steps);
        assert_eq!(d.kind, FailureKind::CudaOom, "{:?}", f.error["node_type"]);
        assert!(
            d.stage == stage || d.stage_candidates.contains(&stage),
            "{}: diagnosed {:?} ({}) {:?}",
            f.error["node_type"],
            d.stage,
            d.stage_evidence,
            d.stage_candidates
        );
        assert!(d.numbers_consistent, "{:?}", d.inconsistencies);
        assert!(
            d.numbers.requested_mib.is_some()
                && d.numbers.free_mib.is_some()
                && d.numbers.total_mib.is_some()
        );
    }
}

/// Runs `prompt` on a fresh simulator; true when it succeeds, with the server's console.
async fn passes(config: SimConfig, prompt: &Value) -> (bool, String) {
    let sim = sim(config).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "ctl").await;
    let (status, r) = post_prompt(&base, &json!({"prompt": prompt, "client_id": "ctl"})).await;
    assert_eq!(status, 200, "{r}");
    let msgs = ws.until_done(r["prompt_id"].as_str().unwrap()).await;
    let (_, logs) = get(&base, "/internal/logs/raw").await;
    sim.shutdown().await;
    (
        types(&msgs).contains(&"execution_success".to_string()),
        logs.to_string(),
    )
}

fn y2026(flags: &[&str]) -> SimConfig {
    SimConfig::default()
        .with_profile(Profile::Y2026)
        .with_launch(Launch::parse(flags, Profile::Y2026).unwrap())
}

/// Dynamic VRAM (the 2026 default) streams the weights a 720p Wan run cannot hold with its
/// activations; `--disable-dynamic-vram` brings back the estimate-based load and its OOM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_dynamic_vram_turns_a_slow_pass_into_a_first_step_oom() {
    let mut p = wan_i2v(false);
    p["6"]["inputs"]["width"] = json!(1280);
    p["6"]["inputs"]["height"] = json!(720);
    let (ok, console) = passes(y2026(&[]), &p).await;
    assert!(ok, "{console}");
    assert!(
        console.contains("prepared for dynamic VRAM loading"),
        "{console}"
    );
    let f = fail(y2026(&["--disable-dynamic-vram"]), &p).await;
    assert_eq!(f.error["node_type"], "KSampler");
    assert_eq!(f.progress, 0);
    // On 0.3.64, --reserve-vram keeps room for the activations the estimate misses.
    let reserve = SimConfig::default()
        .with_launch(Launch::parse(&["--reserve-vram", "4"], Profile::V0364).unwrap());
    assert!(passes(reserve, &p).await.0);
}

/// A decode that fails even after ComfyUI's own tiled retry passes as an explicit
/// `VAEDecodeTiled` with smaller temporal chunks (HunyuanVideo's decode grows with frames).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiled_decode_passes_where_vae_decode_runs_out() {
    let mut p = json!({
        "1": {"class_type": "VAELoader", "inputs": {"vae_name": "hunyuan_video_vae_bf16.safetensors"}},
        "2": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": 1280, "height": 720, "length": 129, "batch_size": 1}},
        "3": {"class_type": "VAEDecode", "inputs": {"samples": ["2", 0], "vae": ["1", 0]}},
        "4": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["3", 0], "filename_prefix": "hy",
            "fps": 24.0, "lossless": false, "quality": 90, "method": "default"}}
    });
    let f = fail(SimConfig::default().with_vram_gib(6), &p).await;
    assert_eq!(f.error["node_type"], "VAEDecode");
    p["3"] = json!({"class_type": "VAEDecodeTiled", "inputs": {"samples": ["2", 0], "vae": ["1", 0],
        "tile_size": 256, "overlap": 64, "temporal_size": 16, "temporal_overlap": 4}});
    let (ok, console) = passes(SimConfig::default().with_vram_gib(6), &p).await;
    assert!(ok, "{console}");
}

/// Pinned memory (the 2026 default) page-locks the weights dynamic VRAM left in host RAM;
/// `--disable-pinned-memory` does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_memory_holds_offloaded_weights_in_host_ram() {
    let mut p = wan_i2v(false);
    p["6"]["inputs"]["width"] = json!(1280);
    p["6"]["inputs"]["height"] = json!(720);
    let mut used = Vec::new();
    for flags in [&[][..], &["--disable-pinned-memory"][..]] {
        let sim = sim(y2026(flags)).await;
        let base = sim.base_url();
        let mut ws = Ws::connect(&base, "pin").await;
        let (_, r) = post_prompt(&base, &json!({"prompt": p, "client_id": "pin"})).await;
        let msgs = ws.until_done(r["prompt_id"].as_str().unwrap()).await;
        assert!(types(&msgs).contains(&"execution_success".to_string()));
        used.push(sim.host_ram_used());
        sim.shutdown().await;
    }
    assert!(
        used[0] > used[1] + GIB,
        "pinned {} vs unpinned {}",
        used[0],
        used[1]
    );
}

/// SD1.5 at 512×512 (20 steps) with a 2× model upscale after the decode: a graph with every
/// stage a failure can be planted at.
fn sd15_upscaled() -> Value {
    let mut p = sd15(512, 512, 1, 20);
    p["11"] = json!({"class_type": "UpscaleModelLoader", "inputs": {"model_name": "random_compact_x2.safetensors"}});
    p["12"] = json!({"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": ["11", 0], "image": ["8", 0]}});
    p["9"]["inputs"]["images"] = json!(["12", 0]);
    p
}

/// The `plant` fault on a graph that fits with room to spare: each stage fails as the memory
/// model fails it (the node, progress, the diagnosis's stage and consistent numbers), and only
/// while its condition holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_failure_fails_its_stage_only_when_its_condition_holds() {
    use comfy_bisect_core::diagnose::Stage;
    use comfy_bisect_core::vocab::FailureKind;
    use comfy_bisect_sim::{Faults, Plant};
    let planted = |plant: &str| {
        SimConfig::default().with_faults(Faults::default().with_plant(Plant::parse(plant).unwrap()))
    };
    let prompt = sd15_upscaled();
    // 512 × 512 pixels at every stage here (the upscaler's input is the decoded image).
    for (plant, node, progress, stage) in [
        (
            "sample_first:class=ImageUpscaleWithModel",
            "KSampler",
            0,
            Stage::SampleFirst,
        ),
        (
            "sample_middle:pixels>=262144",
            "KSampler",
            10,
            Stage::SampleMiddle,
        ),
        (
            "decode:class=UpscaleModelLoader",
            "VAEDecode",
            0,
            Stage::Decode,
        ),
        (
            "postprocess:pixels>=262144",
            "ImageUpscaleWithModel",
            0,
            Stage::Postprocess,
        ),
    ] {
        let f = fail(planted(plant), &prompt).await;
        assert_eq!(f.error["node_type"], node, "{plant}");
        assert_eq!(f.progress, progress, "{plant}: {:?}", f.types);
        assert_eq!(f.error["exception_type"], "torch.OutOfMemoryError");
        let message = f.error["exception_message"].as_str().unwrap();
        assert!(
            message.starts_with("CUDA out of memory. Tried to allocate"),
            "{message}"
        );
        assert!(message.ends_with(TIPS), "{message}");
        let d = diagnosed(&f, 20);
        assert_eq!(d.kind, FailureKind::CudaOom, "{plant}");
        assert!(
            d.stage == stage || d.stage_candidates.contains(&stage),
            "{plant}: diagnosed {:?} ({}) {:?}",
            d.stage,
            d.stage_evidence,
            d.stage_candidates
        );
        assert!(d.numbers_consistent, "{plant}: {:?}", d.inconsistencies);
    }
    // The condition does not hold: a class absent, a count not reached, a threshold above the
    // stage's work, a stage the graph does not have.
    for plant in [
        "sample_first:class=LoraLoader",
        "decode:class=KSampler>=2",
        "sample_middle:pixels>=262145",
        "postprocess:pixels>=1",
    ] {
        let bare = sd15(512, 512, 1, 20);
        let p = if plant.starts_with("postprocess") {
            &bare
        } else {
            &prompt
        };
        let (ok, _) = passes(planted(plant), p).await;
        assert!(ok, "{plant}");
    }
}
