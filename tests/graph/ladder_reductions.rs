//! One test per reduction, on small hand-made graphs checked against real node definitions
//! (the newer core fixture plus the custom-node packs).

use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::ladder::{plan, Increment, Plan, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::validate::validate;
use comfy_bisect_core::workflow::{parse_api, Input, Link, Workflow};
use serde_json::{json, Value};
use std::sync::OnceLock;

fn defs() -> &'static NodeDefs {
    static DEFS: OnceLock<NodeDefs> = OnceLock::new();
    DEFS.get_or_init(|| {
        NodeDefs::load_files(&[
            "tests/fixtures/comfyui-newer/object_info.json",
            "tests/fixtures/custom-nodes/object_info.custom.json",
        ])
        .expect("fixtures load")
    })
}

fn wf(v: Value) -> Workflow {
    parse_api(&v, "test.json").expect("test graph parses")
}

fn plan_with(target: &Workflow, options: PlanOptions) -> Plan {
    let p = plan(target, defs(), &Catalog::builtin(), &options).expect("plan succeeds");
    // Every plan: last step is the target, every step validates.
    assert_eq!(p.steps.last().unwrap().sha256, target.sha256());
    for s in &p.steps {
        let r = validate(&s.workflow, defs());
        assert!(
            r.only_missing_files(),
            "step {} invalid: {:?}",
            s.index,
            r.graph_errors().collect::<Vec<_>>()
        );
    }
    p
}

fn plan_default(target: &Workflow) -> Plan {
    plan_with(target, PlanOptions::default())
}

fn lit<'a>(w: &'a Workflow, node: &str, input: &str) -> &'a Value {
    w.nodes[node].inputs[input]
        .as_literal()
        .unwrap_or_else(|| panic!("{node}.{input} is linked"))
}

fn link(w: &Workflow, node: &str, input: &str) -> Link {
    w.nodes[node].inputs[input]
        .as_link()
        .unwrap_or_else(|| panic!("{node}.{input} is not linked"))
        .clone()
}

fn l(node: &str, slot: usize) -> Link {
    Link {
        node: node.into(),
        slot,
    }
}

fn increments(p: &Plan) -> Vec<Increment> {
    p.steps.iter().map(|s| s.increment).collect()
}

/// A plain SD graph: checkpoint → (LoRA) → KSampler → decode → save.
fn sd_graph(width: i64, height: i64, batch: i64) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["4", 1]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": width, "height": height, "batch_size": batch}},
        "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 30, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 1.0,
              "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "x", "images": ["8", 0]}}
    })
}

#[test]
fn resolution_keeps_aspect_snaps_to_16_and_is_the_first_increment() {
    let target = wf(sd_graph(1280, 720, 1));
    let p = plan_default(&target);
    assert_eq!(increments(&p), [Increment::Minimal, Increment::Resolution]);
    let m = &p.steps[0].workflow;
    assert_eq!(lit(m, "5", "height"), &json!(256));
    assert_eq!(lit(m, "5", "width"), &json!(448)); // 455.1 snapped to 16
    assert!(p.steps[1].describe().contains("256") && p.steps[1].describe().contains("1280×720"));
    // 0 = the node's declared minimum.
    let p = plan_with(
        &target,
        PlanOptions {
            min_resolution: 0,
            ..PlanOptions::default()
        },
    );
    assert_eq!(lit(&p.steps[0].workflow, "5", "width"), &json!(16));
    assert_eq!(lit(&p.steps[0].workflow, "5", "height"), &json!(16));
}

#[test]
fn already_small_target_is_its_own_minimal_variant() {
    let target = wf(sd_graph(256, 256, 1));
    let p = plan_default(&target);
    assert_eq!(p.steps.len(), 1);
    assert_eq!(p.steps[0].sha256, target.sha256());
    assert_eq!(p.steps[0].file, "00-minimal.json");
}

#[test]
fn linked_sizes_are_changed_at_their_constant_source_consistently() {
    let mut v = sd_graph(0, 0, 1);
    v["20"] = json!({"class_type": "PrimitiveInt", "inputs": {"value": 1024}});
    v["21"] = json!({"class_type": "PrimitiveInt", "inputs": {"value": 768}});
    v["5"]["inputs"]["width"] = json!(["20", 0]);
    v["5"]["inputs"]["height"] = json!(["21", 0]);
    // A second consumer of the same sizes must see the same values.
    v["22"] = json!({"class_type": "ModelSamplingFlux", "inputs": {"max_shift": 1.15, "base_shift": 0.5, "width": ["20", 0], "height": ["21", 0], "model": ["4", 0]}});
    v["3"]["inputs"]["model"] = json!(["22", 0]);
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    assert_eq!(lit(m, "20", "value"), &json!(336)); // 1024 × 256/768 = 341.3 → 336
    assert_eq!(lit(m, "21", "value"), &json!(256));
    assert_eq!(link(m, "5", "width"), l("20", 0));
    assert_eq!(link(m, "22", "height"), l("21", 0));
}

#[test]
fn sizes_not_known_statically_are_overridden_with_the_reference_size() {
    let v = json!({
        "1": {"class_type": "LoadImage", "inputs": {"image": "in.png"}},
        "2": {"class_type": "GetImageSize", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "EmptyImage", "inputs": {"width": ["2", 0], "height": ["2", 1], "batch_size": 1, "color": 0}},
        "4": {"class_type": "ImageScale", "inputs": {"upscale_method": "nearest-exact", "width": 1920, "height": 1080, "crop": "disabled", "image": ["3", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "x", "images": ["4", 0]}}
    });
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    assert_eq!(lit(m, "4", "width"), &json!(448));
    assert_eq!(lit(m, "4", "height"), &json!(256));
    // The unknown size follows the reference, so both nodes agree.
    assert_eq!(lit(m, "3", "width"), &json!(448));
    assert_eq!(lit(m, "3", "height"), &json!(256));
    assert!(!m.nodes.contains_key("2"), "the size probe no longer runs");
}

fn video_graph(length: Value) -> Value {
    json!({
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "wan.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t5.safetensors", "type": "wan", "device": "default"}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "wan_vae.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a fox", "clip": ["2", 0]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["2", 0]}},
        "40": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": 832, "height": 480, "length": length, "batch_size": 1}},
        "10": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 20, "cfg": 5.0, "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0,
               "model": ["1", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["40", 0]}},
        "11": {"class_type": "VAEDecode", "inputs": {"samples": ["10", 0], "vae": ["3", 0]}},
        "12": {"class_type": "SaveAnimatedWEBP", "inputs": {"filename_prefix": "v", "fps": 16.0, "lossless": false, "quality": 80, "method": "default", "images": ["11", 0]}}
    })
}

#[test]
fn frames_take_the_smallest_count_on_the_4n_plus_1_grid() {
    let target = wf(video_graph(json!(81)));
    let p = plan_default(&target);
    assert_eq!(
        increments(&p),
        [Increment::Minimal, Increment::Resolution, Increment::Frames]
    );
    assert_eq!(lit(&p.steps[0].workflow, "40", "length"), &json!(5));
    // Step 1 (resolution back) still has the reduced frames; step 2 is the target.
    assert_eq!(lit(&p.steps[1].workflow, "40", "length"), &json!(5));
    assert_eq!(lit(&p.steps[1].workflow, "40", "width"), &json!(832));
    let p = plan_with(
        &target,
        PlanOptions {
            min_frames: 1,
            ..PlanOptions::default()
        },
    );
    assert_eq!(lit(&p.steps[0].workflow, "40", "length"), &json!(1));
    let p = plan_with(
        &target,
        PlanOptions {
            min_frames: 10,
            ..PlanOptions::default()
        },
    );
    assert_eq!(lit(&p.steps[0].workflow, "40", "length"), &json!(13));
}

#[test]
fn linked_frame_count_feeds_video_and_audio_consistently() {
    let mut v = video_graph(json!(["30", 0]));
    v["30"] = json!({"class_type": "PrimitiveInt", "inputs": {"value": 121}});
    v["31"] =
        json!({"class_type": "LTXVAudioVAELoader", "inputs": {"ckpt_name": "ltx.safetensors"}});
    v["32"] = json!({"class_type": "LTXVEmptyLatentAudio", "inputs": {"frames_number": ["30", 0], "frame_rate": 25, "batch_size": 1, "audio_vae": ["31", 0]}});
    v["33"] = json!({"class_type": "SaveLatent", "inputs": {"filename_prefix": "a", "samples": ["32", 0]}});
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    assert_eq!(lit(m, "30", "value"), &json!(5));
    assert_eq!(link(m, "32", "frames_number"), l("30", 0));
}

#[test]
fn batch_goes_to_one() {
    let target = wf(sd_graph(256, 256, 4));
    let p = plan_default(&target);
    assert_eq!(increments(&p), [Increment::Minimal, Increment::Batch]);
    assert_eq!(lit(&p.steps[0].workflow, "5", "batch_size"), &json!(1));
}

fn dual_expert_graph() -> Value {
    let mut v = video_graph(json!(81));
    v["50"] = json!({"class_type": "UNETLoader", "inputs": {"unet_name": "high.safetensors", "weight_dtype": "default"}});
    v["51"] = json!({"class_type": "LoraLoaderModelOnly", "inputs": {"lora_name": "l.safetensors", "strength_model": 1.0, "model": ["50", 0]}});
    v["57"] = json!({"class_type": "KSamplerAdvanced", "inputs": {"add_noise": "enable", "noise_seed": 42, "steps": 4, "cfg": 1.0, "sampler_name": "euler", "scheduler": "simple",
        "start_at_step": 0, "end_at_step": 2, "return_with_leftover_noise": "enable",
        "model": ["51", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["40", 0]}});
    v["10"] = json!({"class_type": "KSamplerAdvanced", "inputs": {"add_noise": "disable", "noise_seed": 0, "steps": 4, "cfg": 1.0, "sampler_name": "euler", "scheduler": "simple",
        "start_at_step": 2, "end_at_step": 10000, "return_with_leftover_noise": "disable",
        "model": ["1", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["57", 0]}});
    v
}

#[test]
fn dual_experts_become_one_sampler_over_all_steps_with_the_low_noise_model() {
    let target = wf(dual_expert_graph());
    let p = plan_default(&target);
    assert!(increments(&p).contains(&Increment::Models));
    let m = &p.steps[0].workflow;
    assert!(!m.nodes.contains_key("57") && !m.nodes.contains_key("50"));
    assert_eq!(lit(m, "10", "add_noise"), &json!("enable"));
    assert_eq!(lit(m, "10", "noise_seed"), &json!(42));
    assert_eq!(lit(m, "10", "start_at_step"), &json!(0));
    assert_eq!(lit(m, "10", "end_at_step"), &json!(10000));
    assert_eq!(
        lit(m, "10", "return_with_leftover_noise"),
        &json!("disable")
    );
    assert_eq!(link(m, "10", "latent_image"), l("40", 0));
    assert_eq!(link(m, "10", "model"), l("1", 0));
    // The models step brings back the split exactly.
    let models = p
        .steps
        .iter()
        .position(|s| s.increment == Increment::Models)
        .unwrap();
    let s = &p.steps[models].workflow;
    assert_eq!(lit(s, "10", "add_noise"), &json!("disable"));
    assert_eq!(link(s, "10", "latent_image"), l("57", 0));
}

#[test]
fn base_and_refiner_keep_the_base_and_decode_with_its_vae() {
    let mut v = sd_graph(1024, 1024, 1);
    v["12"] = json!({"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "refiner.safetensors"}});
    v["15"] =
        json!({"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["12", 1]}});
    v["16"] = json!({"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["12", 1]}});
    v["3"] = json!({"class_type": "KSamplerAdvanced", "inputs": {"add_noise": "enable", "noise_seed": 7, "steps": 25, "cfg": 8.0, "sampler_name": "euler", "scheduler": "normal",
        "start_at_step": 0, "end_at_step": 20, "return_with_leftover_noise": "enable",
        "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}});
    v["11"] = json!({"class_type": "KSamplerAdvanced", "inputs": {"add_noise": "disable", "noise_seed": 0, "steps": 25, "cfg": 8.0, "sampler_name": "euler", "scheduler": "normal",
        "start_at_step": 20, "end_at_step": 10000, "return_with_leftover_noise": "disable",
        "model": ["12", 0], "positive": ["15", 0], "negative": ["16", 0], "latent_image": ["3", 0]}});
    v["8"]["inputs"] = json!({"samples": ["11", 0], "vae": ["12", 2]});
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    assert!(!m.nodes.contains_key("11") && !m.nodes.contains_key("12"));
    assert_eq!(link(m, "8", "samples"), l("3", 0));
    assert_eq!(link(m, "8", "vae"), l("4", 2));
    assert_eq!(lit(m, "3", "end_at_step"), &json!(10000));
    assert_eq!(lit(m, "3", "return_with_leftover_noise"), &json!("disable"));
}

#[test]
fn split_sigma_experts_sample_the_whole_schedule_once() {
    let v = json!({
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "low.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "UNETLoader", "inputs": {"unet_name": "high.safetensors", "weight_dtype": "default"}},
        "c": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t5.safetensors", "type": "wan", "device": "default"}},
        "v": {"class_type": "VAELoader", "inputs": {"vae_name": "vae.safetensors"}},
        "p": {"class_type": "CLIPTextEncode", "inputs": {"text": "x", "clip": ["c", 0]}},
        "lat": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 256, "height": 256, "batch_size": 1}},
        "sch": {"class_type": "BasicScheduler", "inputs": {"scheduler": "simple", "steps": 8, "denoise": 1.0, "model": ["1", 0]}},
        "split": {"class_type": "SplitSigmas", "inputs": {"step": 4, "sigmas": ["sch", 0]}},
        "ks": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "a": {"class_type": "SamplerCustom", "inputs": {"add_noise": true, "noise_seed": 5, "cfg": 1.0, "model": ["2", 0], "positive": ["p", 0], "negative": ["p", 0],
              "sampler": ["ks", 0], "sigmas": ["split", 0], "latent_image": ["lat", 0]}},
        "b": {"class_type": "SamplerCustom", "inputs": {"add_noise": false, "noise_seed": 0, "cfg": 1.0, "model": ["1", 0], "positive": ["p", 0], "negative": ["p", 0],
              "sampler": ["ks", 0], "sigmas": ["split", 1], "latent_image": ["a", 0]}},
        "d": {"class_type": "VAEDecode", "inputs": {"samples": ["b", 0], "vae": ["v", 0]}},
        "s": {"class_type": "SaveImage", "inputs": {"filename_prefix": "x", "images": ["d", 0]}}
    });
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(increments(&p), [Increment::Minimal, Increment::Models]);
    let m = &p.steps[0].workflow;
    assert_eq!(link(m, "b", "sigmas"), l("sch", 0));
    assert_eq!(lit(m, "b", "add_noise"), &json!(true));
    assert_eq!(lit(m, "b", "noise_seed"), &json!(5));
    assert_eq!(link(m, "b", "latent_image"), l("lat", 0));
    assert!(
        !m.nodes.contains_key("a") && !m.nodes.contains_key("2") && !m.nodes.contains_key("split")
    );
}

#[test]
fn lora_loaders_are_bypassed_and_power_lora_rows_turned_off() {
    let mut v = sd_graph(256, 256, 1);
    v["10"] = json!({"class_type": "LoraLoader", "inputs": {"lora_name": "a.safetensors", "strength_model": 1.0, "strength_clip": 1.0, "model": ["4", 0], "clip": ["4", 1]}});
    v["11"] = json!({"class_type": "Power Lora Loader (rgthree)", "inputs": {
        "PowerLoraLoaderHeaderWidget": {"type": "PowerLoraLoaderHeaderWidget"},
        "lora_1": {"on": true, "lora": "b.safetensors", "strength": 0.8, "strengthTwo": null},
        "lora_2": {"on": false, "lora": "c.safetensors", "strength": 1.0, "strengthTwo": null},
        "➕ Add Lora": "", "model": ["10", 0], "clip": ["10", 1]}});
    v["3"]["inputs"]["model"] = json!(["11", 0]);
    v["6"]["inputs"]["clip"] = json!(["11", 1]);
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(increments(&p), [Increment::Minimal, Increment::Lora]);
    let m = &p.steps[0].workflow;
    assert!(!m.nodes.contains_key("10"));
    assert_eq!(link(m, "11", "model"), l("4", 0));
    assert_eq!(link(m, "11", "clip"), l("4", 1));
    assert_eq!(lit(m, "11", "lora_1")["on"], json!(false));
    assert_eq!(lit(m, "11", "lora_2"), lit(&target, "11", "lora_2"));
}

#[test]
fn caches_go_memory_savers_stay_and_are_listed_as_kept() {
    let mut v = video_graph(json!(5));
    v["40"]["inputs"]["width"] = json!(256);
    v["40"]["inputs"]["height"] = json!(256);
    v["20"] = json!({"class_type": "PathchSageAttentionKJ", "inputs": {"sage_attention": "auto", "allow_compile": false, "model": ["1", 0]}});
    v["21"] = json!({"class_type": "TeaCache", "inputs": {"model_type": "wan2.1_t2v_1.3B", "rel_l1_thresh": 0.3, "start_percent": 0.1, "end_percent": 1.0, "cache_device": "cuda", "model": ["20", 0]}});
    v["10"]["inputs"]["model"] = json!(["21", 0]);
    v["11"] = json!({"class_type": "VAEDecodeTiled", "inputs": {"tile_size": 256, "overlap": 64, "temporal_size": 64, "temporal_overlap": 8, "samples": ["10", 0], "vae": ["3", 0]}});
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(increments(&p), [Increment::Minimal, Increment::Cache]);
    let m = &p.steps[0].workflow;
    assert_eq!(link(m, "10", "model"), l("20", 0));
    assert!(m.nodes.contains_key("20") && m.nodes.contains_key("11"));
    let kept: Vec<&str> = p.kept.iter().map(|k| k.node.as_str()).collect();
    assert!(kept.contains(&"20") && kept.contains(&"11"), "{kept:?}");
}

#[test]
fn widget_quantization_is_reset_and_file_quantization_reported() {
    let mut v = sd_graph(256, 256, 1);
    v["1"] = json!({"class_type": "UNETLoader", "inputs": {"unet_name": "model_bf16.safetensors", "weight_dtype": "fp8_e4m3fn"}});
    v["2"] = json!({"class_type": "UnetLoaderGGUF", "inputs": {"unet_name": "other-Q4_K_M.gguf"}});
    v["3"]["inputs"]["model"] = json!(["1", 0]);
    v["30"] = json!({"class_type": "KSampler", "inputs": {"seed": 1, "steps": 30, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 1.0,
              "model": ["2", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}});
    v["31"] = json!({"class_type": "SaveLatent", "inputs": {"filename_prefix": "x", "samples": ["30", 0]}});
    let target = wf(v);
    let p = plan_default(&target);
    assert!(increments(&p).contains(&Increment::Quantization));
    assert_eq!(
        lit(&p.steps[0].workflow, "1", "weight_dtype"),
        &json!("default")
    );
    let q = p
        .not_separable
        .iter()
        .find(|n| n.increment == Increment::Quantization)
        .expect("GGUF is reported");
    assert_eq!(q.nodes, ["2"]);
    assert!(q.reason.contains("other-Q4_K_M.gguf"));
}

#[test]
fn hires_fix_second_pass_is_removed_and_the_first_pass_decoded() {
    let mut v = sd_graph(512, 512, 1);
    v["20"] = json!({"class_type": "LatentUpscaleBy", "inputs": {"upscale_method": "nearest-exact", "scale_by": 2.0, "samples": ["3", 0]}});
    v["21"] = json!({"class_type": "KSampler", "inputs": {"seed": 1, "steps": 15, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.5,
              "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["20", 0]}});
    v["8"]["inputs"]["samples"] = json!(["21", 0]);
    v["30"] = json!({"class_type": "UpscaleModelLoader", "inputs": {"model_name": "4x.pth"}});
    v["31"] = json!({"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": ["30", 0], "image": ["8", 0]}});
    v["9"]["inputs"]["images"] = json!(["31", 0]);
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(
        increments(&p),
        [
            Increment::Minimal,
            Increment::Resolution,
            Increment::Postprocess
        ]
    );
    let m = &p.steps[0].workflow;
    assert_eq!(link(m, "8", "samples"), l("3", 0));
    assert_eq!(link(m, "9", "images"), l("8", 0));
    for gone in ["20", "21", "30", "31"] {
        assert!(!m.nodes.contains_key(gone), "{gone} still there");
    }
}

/// The pixel-space hires fix of `workflows/`: 512 → decode → upscale model ×4 → ImageScale
/// 1024 → encode → second KSampler (#11), next to the first pass's own SaveImage.
fn pixel_hires() -> Value {
    serde_json::from_str(&std::fs::read_to_string("workflows/sd15_hires_fix_pixel.json").unwrap())
        .unwrap()
}

fn second_pass_note(p: &Plan, step: usize) -> Option<&comfy_bisect_core::workflow::Change> {
    p.steps[step]
        .changes
        .iter()
        .find(|c| c.action == comfy_bisect_core::ladder::SECOND_PASS)
}

#[test]
fn pixel_hires_fix_second_pass_is_post_processing_not_resolution() {
    let target = wf(pixel_hires());
    let p = plan_default(&target);
    assert_eq!(
        increments(&p),
        [
            Increment::Minimal,
            Increment::Resolution,
            Increment::Postprocess
        ]
    );
    // Minimal: the first pass only, at the reduced size; the hires decode reads it.
    let m = &p.steps[0].workflow;
    for gone in ["11", "12", "14", "15", "16"] {
        assert!(!m.nodes.contains_key(gone), "{gone} still there");
    }
    assert_eq!(link(m, "13", "samples"), l("3", 0));
    assert_eq!(lit(m, "5", "width"), &json!(256));
    assert!(
        m.nodes.contains_key("9"),
        "the first pass keeps its own output"
    );
    // Resolution brings the first pass to its size and nothing else.
    let r = &p.steps[1];
    assert!(r.changes.iter().all(|c| c.node == "5"), "{:?}", r.changes);
    assert!(!r.workflow.nodes.contains_key("11"));
    // Postprocess brings the upscale and the second pass back at their target sizes.
    let post = &p.steps[2];
    assert_eq!(post.sha256, target.sha256());
    assert_eq!(lit(&post.workflow, "16", "width"), &json!(1024));
    let note = second_pass_note(&p, 2).expect("the pass is named");
    assert_eq!(note.node, "11");
    assert_eq!(note.to, Some(json!("1024×1024")));
    assert!(post
        .describe()
        .starts_with("hires pass: KSampler #11 at 1024×1024"));
    assert_eq!(
        second_pass_note(&p, 0).and_then(|c| c.from.clone()),
        Some(json!("1024×1024"))
    );
}

#[test]
fn a_kept_second_pass_keeps_its_target_size() {
    let target = wf(pixel_hires());
    let p = plan_with(
        &target,
        PlanOptions {
            keep: vec![Increment::Postprocess],
            ..PlanOptions::default()
        },
    );
    assert_eq!(increments(&p), [Increment::Minimal, Increment::Resolution]);
    let m = &p.steps[0].workflow;
    assert_eq!(lit(m, "5", "width"), &json!(256));
    assert_eq!(lit(m, "16", "width"), &json!(1024));
    assert_eq!(lit(m, "16", "height"), &json!(1024));
}

#[test]
fn a_second_pass_without_its_own_first_output_reads_the_first_pass() {
    // No SaveImage on the first pass: the hires decode is the only output.
    let mut v = pixel_hires();
    v.as_object_mut().unwrap().remove("9");
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(
        increments(&p),
        [
            Increment::Minimal,
            Increment::Resolution,
            Increment::Postprocess
        ]
    );
    let m = &p.steps[0].workflow;
    assert_eq!(link(m, "13", "samples"), l("3", 0));
    assert!(
        !m.nodes.contains_key("8"),
        "the first decode fed only the pass"
    );
}

#[test]
fn a_second_pass_through_pixels_with_another_model_is_not_post_processing() {
    // The second sampler refines with another checkpoint (a refiner through pixels).
    let mut v = pixel_hires();
    v["40"] = json!({"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "refiner.safetensors"}});
    v["11"]["inputs"]["model"] = json!(["40", 0]);
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    assert!(m.nodes.contains_key("11"), "the other model's pass stays");
    assert!(second_pass_note(&p, 0).is_none());
    assert!(
        !p.steps
            .iter()
            .any(|s| s.increment == Increment::Postprocess
                && s.changes.iter().any(|c| c.node == "11"))
    );
}

#[test]
fn chained_second_passes_all_go_and_come_back_together() {
    // Two hires passes in a row: 512 → 1024 (pixels) → ×1.5 latent → third sampler.
    let mut v = pixel_hires();
    v["20"] = json!({"class_type": "LatentUpscaleBy", "inputs": {"upscale_method": "nearest-exact", "scale_by": 1.5, "samples": ["11", 0]}});
    v["21"] = json!({"class_type": "KSampler", "inputs": {"seed": 1, "steps": 10, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.4,
              "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["20", 0]}});
    v["13"]["inputs"]["samples"] = json!(["21", 0]);
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    for gone in ["11", "12", "20", "21"] {
        assert!(!m.nodes.contains_key(gone), "{gone} still there");
    }
    assert_eq!(link(m, "13", "samples"), l("3", 0));
    let last = p.steps.len() - 1;
    let notes: Vec<_> = p.steps[last]
        .changes
        .iter()
        .filter(|c| c.action == comfy_bisect_core::ladder::SECOND_PASS)
        .map(|c| (c.node.clone(), c.to.clone()))
        .collect();
    assert_eq!(
        notes,
        [
            ("11".to_string(), Some(json!("1024×1024"))),
            ("21".to_string(), Some(json!("1536×1536")))
        ]
    );
}

/// Every widget input of `class` at its default (first option for combos).
fn widget_defaults(class: &str) -> serde_json::Map<String, Value> {
    use comfy_bisect_core::nodedefs::InputKind;
    let def = defs().get(class).unwrap();
    let mut m = serde_json::Map::new();
    for i in def.visible_inputs() {
        if i.section != comfy_bisect_core::nodedefs::Section::Required {
            continue;
        }
        let v = match (&i.kind, i.default_value()) {
            (_, Some(d)) => d.clone(),
            (InputKind::Combo { options, .. }, None) => match options.first() {
                Some(o) => o.clone(),
                None => continue,
            },
            _ if i.type_name() == "STRING" => json!(""),
            _ if i.type_name() == "INT" => json!(0),
            _ => continue,
        };
        m.insert(i.name.clone(), v);
    }
    m
}

#[test]
fn detailers_and_tiled_upscale_samplers_stay_post_processing() {
    // A face detailer re-samples with the same model after the decode: post-processing
    // (bypassed), not a second pass, and no `second_pass` note.
    let mut v = sd_graph(1024, 1024, 1);
    let mut fd = widget_defaults("FaceDetailer");
    for (k, link) in [
        ("image", json!(["8", 0])),
        ("model", json!(["4", 0])),
        ("clip", json!(["4", 1])),
        ("vae", json!(["4", 2])),
        ("positive", json!(["6", 0])),
        ("negative", json!(["7", 0])),
        ("bbox_detector", json!(["50", 0])),
    ] {
        fd.insert(k.into(), link);
    }
    v["50"] = json!({"class_type": "UltralyticsDetectorProvider", "inputs": widget_defaults("UltralyticsDetectorProvider")});
    v["51"] = json!({"class_type": "FaceDetailer", "inputs": fd});
    v["9"]["inputs"]["images"] = json!(["51", 0]);
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(
        increments(&p),
        [
            Increment::Minimal,
            Increment::Resolution,
            Increment::Postprocess
        ]
    );
    let m = &p.steps[0].workflow;
    assert!(!m.nodes.contains_key("51"));
    assert_eq!(link(m, "9", "images"), l("8", 0));
    assert!(second_pass_note(&p, 0).is_none());
}

#[test]
fn frame_interpolation_is_bypassed_and_the_frame_rate_restored() {
    let mut v = video_graph(json!(5));
    v["40"]["inputs"]["width"] = json!(256);
    v["40"]["inputs"]["height"] = json!(256);
    v["13"] = json!({"class_type": "RIFE VFI", "inputs": {"ckpt_name": "rife47.pth", "clear_cache_after_n_frames": 10, "multiplier": 2, "fast_mode": true, "ensemble": true,
        "scale_factor": 1.0, "dtype": "float32", "torch_compile": false, "batch_size": 1, "frames": ["11", 0]}});
    v["12"]["inputs"]["images"] = json!(["13", 0]);
    v["12"]["inputs"]["fps"] = json!(32.0);
    let target = wf(v);
    let p = plan_default(&target);
    let m = &p.steps[0].workflow;
    assert_eq!(link(m, "12", "images"), l("11", 0));
    assert_eq!(lit(m, "12", "fps").as_f64(), Some(16.0));
}

#[test]
fn steps_only_with_min_steps_and_options_reorder_and_keep() {
    let target = wf(sd_graph(1024, 1024, 2));
    let p = plan_default(&target);
    assert!(!increments(&p).contains(&Increment::Steps));
    let p = plan_with(
        &target,
        PlanOptions {
            min_steps: Some(4),
            order: vec![Increment::Batch],
            keep: vec![Increment::Resolution],
            ..PlanOptions::default()
        },
    );
    assert_eq!(
        increments(&p),
        [Increment::Minimal, Increment::Batch, Increment::Steps]
    );
    let m = &p.steps[0].workflow;
    assert_eq!(lit(m, "3", "steps"), &json!(4));
    assert_eq!(lit(m, "5", "width"), &json!(1024));
    // Step 1 re-adds batch only: steps still capped.
    assert_eq!(lit(&p.steps[1].workflow, "5", "batch_size"), &json!(2));
    assert_eq!(lit(&p.steps[1].workflow, "3", "steps"), &json!(4));
    assert_eq!(p.steps[2].file, "02-steps.json");
}

#[test]
fn a_reduction_that_would_break_the_graph_is_not_separable() {
    // A user declares a loader as a LoRA: bypassing it would leave the sampler without a model.
    let user = Catalog::from_toml_str(
        "[classes]\n\"CheckpointLoaderSimple\" = [\"lora\"]\n",
        "mine.toml",
    )
    .unwrap();
    let catalog = Catalog::builtin().with_user(user);
    let target = wf(sd_graph(256, 256, 1));
    let p = plan(&target, defs(), &catalog, &PlanOptions::default()).unwrap();
    assert_eq!(p.steps.len(), 1);
    let n = &p.not_separable[0];
    assert_eq!(n.increment, Increment::Lora);
    assert!(n.reason.contains("invalid"), "{}", n.reason);
    assert_eq!(n.nodes, ["4"]);
}

#[test]
fn each_step_is_the_target_with_only_the_later_reductions() {
    let mut v = dual_expert_graph();
    v["40"]["inputs"]["batch_size"] = json!(2);
    let target = wf(v);
    let p = plan_default(&target);
    assert_eq!(
        increments(&p),
        [
            Increment::Minimal,
            Increment::Resolution,
            Increment::Frames,
            Increment::Batch,
            Increment::Models,
            Increment::Lora
        ]
    );
    for s in &p.steps {
        let mut again = target.clone();
        again.apply(&s.edits, defs()).unwrap();
        assert_eq!(again.sha256(), s.sha256, "step {}", s.index);
    }
    // plan.json contract.
    let j = p.to_json();
    assert_eq!(j["target_sha256"], json!(target.sha256()));
    assert_eq!(j["steps"][0]["file"], json!("00-minimal.json"));
    assert_eq!(j["steps"][3]["increment"], json!("batch"));
    let change = &j["steps"][3]["changes"][0];
    assert_eq!(change["action"], json!("set"));
    assert_eq!(change["from"], json!(1));
    assert_eq!(change["to"], json!(2));
    assert!(matches!(
        target.nodes["40"].inputs["batch_size"],
        Input::Literal(_)
    ));
}
