//! The memory model's unit tests: sizes from names, planning, fallbacks, LRU unloading.

use super::*;

fn latent(w: u64, h: u64, frames: u64, batch: u64) -> LatentVal {
    LatentVal {
        width: w,
        height: h,
        frames,
        batch,
    }
}

fn sample(model: ModelVal, l: LatentVal, steps: u32, passes: u32) -> Work {
    Work::Sample {
        model,
        latent: l,
        steps,
        passes,
        tiles: 1,
        tile: None,
    }
}

#[test]
fn families_and_sizes_from_names() {
    assert_eq!(
        Family::from_name("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors"),
        Family::Wan14
    );
    assert_eq!(Family::from_name("flux1-dev-Q4_K_S.gguf"), Family::Flux);
    assert_eq!(
        Family::from_name("sd_xl_base_1.0.safetensors"),
        Family::Sdxl
    );
    assert_eq!(
        Family::from_name("v1-5-pruned-emaonly-fp16.safetensors"),
        Family::Sd15
    );
    let fp16 = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp16.safetensors", true);
    let fp8 = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    let q4 = ModelVal::from_file("Wan2.2-I2V-A14B-LowNoise-Q4_K_M.gguf", true);
    assert!(fp16.bytes > 26 * GIB && fp16.bytes < 29 * GIB);
    assert!(fp8.bytes > 13 * GIB && fp8.bytes < 14 * GIB);
    assert!(q4.bytes > 7 * GIB && q4.bytes < 9 * GIB);
    assert_eq!(upscale_model("4x-UltraSharp.pth").1, 4);
    assert_eq!(upscale_model("RealESRGAN_x2plus.pth").1, 2);
    assert_eq!(
        lora_file_bytes(
            "Wan21_T2V_14B_lightx2v_cfg_step_distill_lora_rank32.safetensors",
            Family::Wan14
        ),
        300 * MIB
    );
}

#[test]
fn token_counts_follow_the_latent_geometry() {
    assert_eq!(Family::Sd15.tokens(512, 512, 1), 4096);
    assert_eq!(Family::Flux.tokens(1024, 1024, 1), 4096);
    // Wan 832x480x81: 21 latent frames of 52x30 patches.
    assert_eq!(Family::Wan14.tokens(832, 480, 81), 21 * 52 * 30);
    assert_eq!(Family::Ltx2.tokens(768, 512, 97), 13 * 24 * 16);
}

#[test]
fn sd15_fits_at_512_and_fails_first_step_at_2048_on_8gib() {
    let mut gpu = Gpu::new(8 * GIB);
    let m = ModelVal::from_file("v1-5-pruned-emaonly-fp16.safetensors", true);
    let ok = gpu.plan(&sample(m.clone(), latent(512, 512, 1, 1), 20, 2));
    assert!(ok.oom.is_none(), "{ok:?}");
    gpu.finish_node();
    let bad = gpu.plan(&sample(m, latent(2048, 2048, 1, 1), 20, 2));
    let oom = bad
        .oom
        .expect("2048px SD1.5 with cfg must not fit in 8 GiB");
    assert_eq!(oom.stage, Stage::SampleFirst);
    assert_eq!(oom.after_steps, 0);
    assert!(oom.requested > oom.free);
}

#[test]
fn wan_720p_fails_first_step_but_480p_fits_on_24gib() {
    let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    let mut gpu = Gpu::new(24 * GIB);
    assert!(gpu
        .plan(&sample(m.clone(), latent(832, 480, 81, 1), 20, 1))
        .oom
        .is_none());
    gpu.unload_all();
    let oom = gpu
        .plan(&sample(m, latent(1280, 720, 81, 1), 20, 1))
        .oom
        .unwrap();
    assert_eq!(oom.stage, Stage::SampleFirst);
    assert!(
        oom.partial,
        "a 14 GB model plus 720p activations is loaded partially"
    );
}

#[test]
fn lowvram_trades_speed_for_a_pass() {
    let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    let work = sample(m, latent(1280, 720, 81, 1), 20, 1);
    let normal = Gpu::new(24 * GIB).plan(&work);
    assert_eq!(normal.oom.unwrap().stage, Stage::SampleFirst);
    let mut low = Gpu::new(24 * GIB);
    low.lowvram = true;
    let plan = low.plan(&work);
    assert!(plan.oom.is_none(), "{plan:?}");
    assert!(plan.step_seconds > normal.step_seconds);
}

#[test]
fn block_swap_lets_a_wrapper_model_load() {
    let mut m = ModelVal::from_file("wan2.1_t2v_14B_bf16.safetensors", false);
    let mut gpu = Gpu::new(24 * GIB);
    let oom = gpu
        .plan(&sample(m.clone(), latent(832, 480, 33, 1), 10, 1))
        .oom
        .unwrap();
    assert_eq!(oom.stage, Stage::Load);
    gpu.unload_all();
    m.offload = 0.6;
    assert!(gpu
        .plan(&sample(m, latent(832, 480, 33, 1), 10, 1))
        .oom
        .is_none());
}

#[test]
fn step_cache_fails_mid_sampling() {
    let mut m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    let l = latent(832, 480, 81, 1);
    let mut gpu = Gpu::new(24 * GIB);
    assert!(gpu.plan(&sample(m.clone(), l, 20, 1)).oom.is_none());
    gpu.unload_all();
    m.step_cache = Some("TeaCache".into());
    let oom = gpu.plan(&sample(m, l, 20, 1)).oom.unwrap();
    assert_eq!(oom.stage, Stage::SampleMiddle);
    assert!(oom.after_steps >= 1 && oom.after_steps < 4, "{oom:?}");
}

#[test]
fn lora_patching_can_fail_at_load() {
    let mut m = ModelVal::from_file("flux1-dev.safetensors", true);
    for i in 0..8 {
        m.loras.push((format!("l{i}.safetensors"), 600 * MIB));
    }
    let mut gpu = Gpu::new(24 * GIB);
    let oom = gpu
        .plan(&sample(m, latent(1024, 1024, 1, 1), 20, 1))
        .oom
        .unwrap();
    assert_eq!(oom.stage, Stage::Load);
    assert!(oom.lora_patch);
}

#[test]
fn core_vae_decode_falls_back_to_tiles() {
    let mut gpu = Gpu::new(8 * GIB);
    let work = Work::Decode {
        key: "vae".into(),
        vae: VaeKind::Image,
        width: 2048,
        height: 2048,
        frames: 1,
        batch: 1,
        tiled: None,
        fallback: true,
        encode: false,
    };
    let plan = gpu.plan(&work);
    assert!(plan.oom.is_none());
    assert!(plan.notes[0].contains("tiled"));
    // Without the fallback (a wrapper decode) the same decode fails.
    gpu.unload_all();
    let Work::Decode { .. } = work else {
        unreachable!()
    };
    let strict = Work::Decode {
        key: "vae".into(),
        vae: VaeKind::Image,
        width: 2048,
        height: 2048,
        frames: 1,
        batch: 1,
        tiled: None,
        fallback: false,
        encode: false,
    };
    assert_eq!(gpu.plan(&strict).oom.unwrap().stage, Stage::Decode);
}

#[test]
fn models_are_unloaded_lru_to_make_room() {
    let mut gpu = Gpu::new(24 * GIB);
    let enc = Work::Encode {
        key: "umt5".into(),
        bytes: 11 * GIB,
        full: false,
        cpu: false,
    };
    assert!(gpu.plan(&enc).oom.is_none());
    gpu.finish_node();
    assert_eq!(gpu.loaded_models().len(), 1);
    let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    assert!(gpu
        .plan(&sample(m, latent(832, 480, 81, 1), 4, 1))
        .oom
        .is_none());
    let names: Vec<String> = gpu.loaded_models().into_iter().map(|m| m.0).collect();
    assert_eq!(
        names,
        vec!["wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors"]
    );
}

#[test]
fn planning_is_deterministic() {
    let m = ModelVal::from_file("flux1-dev-Q8_0.gguf", true);
    let w = sample(m, latent(1536, 1536, 1, 2), 20, 1);
    let a = Gpu::new(12 * GIB).plan(&w);
    let b = Gpu::new(12 * GIB).plan(&w);
    assert_eq!(a, b);
}

#[test]
fn interpolation_grows_until_it_fails() {
    let mut gpu = Gpu::new(4 * GIB);
    let plan = gpu.plan(&Work::Interpolate {
        key: "rife".into(),
        film: false,
        image: ImageVal {
            width: 1920,
            height: 1080,
            count: 161,
        },
        multiplier: 4,
        clear_after: 100,
    });
    let oom = plan.oom.unwrap();
    assert_eq!(oom.stage, Stage::Postprocess);
    assert!(oom.after_steps > 0);
}
