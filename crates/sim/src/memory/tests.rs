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

// What each mitigation changes (issue #25): one control, the stage it targets, the others alone.

fn wan720() -> Work {
    let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    sample(m, latent(1280, 720, 81, 1), 20, 1)
}

fn gpu_with(knobs: Knobs) -> Gpu {
    let mut gpu = Gpu::new(24 * GIB);
    gpu.knobs = knobs;
    gpu
}

#[test]
fn dynamic_vram_turns_a_first_step_oom_into_a_slower_pass() {
    let estimate = Gpu::new(24 * GIB).plan(&wan720());
    assert_eq!(estimate.oom.unwrap().stage, Stage::SampleFirst);
    let dynamic = gpu_with(Knobs {
        dynamic: true,
        ..Knobs::default()
    })
    .plan(&wan720());
    assert!(dynamic.oom.is_none(), "{dynamic:?}");
    assert!(dynamic.step_seconds > estimate.step_seconds);
    assert!(
        dynamic
            .console
            .iter()
            .any(|l| l.contains("prepared for dynamic VRAM loading")),
        "{:?}",
        dynamic.console
    );
    // What does not stream still fails: activations larger than the device.
    let huge = sample(
        ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true),
        latent(1920, 1088, 241, 1),
        20,
        1,
    );
    let oom = gpu_with(Knobs {
        dynamic: true,
        ..Knobs::default()
    })
    .plan(&huge)
    .oom
    .expect("activations above the device still fail under dynamic VRAM");
    assert_eq!(oom.stage, Stage::SampleFirst);
}

#[test]
fn dynamic_vram_loads_what_the_estimate_cannot() {
    // A text encoder that must move whole fails at load on a small card; streamed, it passes.
    let enc = Work::Encode {
        key: "umt5".into(),
        bytes: 11 * GIB,
        full: true,
        cpu: false,
    };
    assert_eq!(Gpu::new(8 * GIB).plan(&enc).oom.unwrap().stage, Stage::Load);
    let mut gpu = Gpu::new(8 * GIB);
    gpu.knobs.dynamic = true;
    assert!(gpu.plan(&enc).oom.is_none());
}

#[test]
fn reserve_vram_leaves_room_for_the_first_step() {
    let normal = Gpu::new(24 * GIB).plan(&wan720());
    assert_eq!(normal.oom.unwrap().stage, Stage::SampleFirst);
    let reserved = gpu_with(Knobs {
        extra_reserve: 4 * GIB,
        ..Knobs::default()
    })
    .plan(&wan720());
    assert!(reserved.oom.is_none(), "{reserved:?}");
    assert!(
        reserved.step_seconds > normal.step_seconds,
        "more offloaded"
    );
}

#[test]
fn vram_headroom_only_acts_with_dynamic_vram() {
    let m = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors", true);
    let work = sample(m, latent(832, 480, 81, 1), 20, 1);
    let plain = gpu_with(Knobs::default()).plan(&work);
    let ignored = gpu_with(Knobs {
        headroom: 6 * GIB,
        ..Knobs::default()
    })
    .plan(&work);
    assert_eq!(plain, ignored);
    let base = gpu_with(Knobs {
        dynamic: true,
        ..Knobs::default()
    })
    .plan(&work);
    let headroom = gpu_with(Knobs {
        dynamic: true,
        headroom: 6 * GIB,
        ..Knobs::default()
    })
    .plan(&work);
    assert!(headroom.peak_allocated < base.peak_allocated);
    assert!(headroom.step_seconds > base.step_seconds);
}

#[test]
fn a_memory_saving_attention_lowers_the_sampling_peak_and_costs_time() {
    let m = ModelVal::from_file("v1-5-pruned-emaonly-fp16.safetensors", true);
    let work = sample(m, latent(1024, 1024, 1, 1), 20, 2);
    let default = Gpu::new(24 * GIB).plan(&work);
    let split = gpu_with(Knobs {
        attention_memory: 0.7,
        attention_time: 1.3,
        ..Knobs::default()
    })
    .plan(&work);
    assert!(split.peak_allocated < default.peak_allocated);
    assert!(split.step_seconds > default.step_seconds);
    // The attention backend leaves a decode alone.
    let dec = Work::Decode {
        key: "vae".into(),
        vae: VaeKind::Image,
        width: 1024,
        height: 1024,
        frames: 1,
        batch: 1,
        tiled: None,
        fallback: true,
        encode: false,
    };
    let k = Knobs {
        attention_memory: 0.7,
        attention_time: 1.3,
        ..Knobs::default()
    };
    assert_eq!(Gpu::new(24 * GIB).plan(&dec), gpu_with(k).plan(&dec));
}

#[test]
fn expandable_segments_keep_little_reserved_between_nodes() {
    let m = ModelVal::from_file("v1-5-pruned-emaonly-fp16.safetensors", true);
    let work = sample(m, latent(1024, 1024, 1, 1), 20, 2);
    let mut plain = Gpu::new(24 * GIB);
    plain.plan(&work);
    plain.finish_node();
    let mut expandable = gpu_with(Knobs {
        expandable_segments: true,
        ..Knobs::default()
    });
    expandable.plan(&work);
    expandable.finish_node();
    assert!(
        expandable.cached < plain.cached / 4,
        "{} vs {}",
        expandable.cached,
        plain.cached
    );
    assert!(expandable.free() > plain.free());
}

#[test]
fn pinned_memory_locks_offloaded_weights_in_host_ram() {
    let mut pinned = gpu_with(Knobs {
        dynamic: true,
        pinned: true,
        ..Knobs::default()
    });
    pinned.plan(&wan720());
    assert!(pinned.offloaded() > 0, "the 720p run offloads weights");
    assert_eq!(pinned.pinned_host(), pinned.offloaded());
    let mut unpinned = gpu_with(Knobs {
        dynamic: true,
        ..Knobs::default()
    });
    unpinned.plan(&wan720());
    assert_eq!(unpinned.pinned_host(), 0);
    assert_eq!(unpinned.offloaded(), pinned.offloaded());
}

fn decode(vae: VaeKind, w: u64, h: u64, frames: u64, tiled: Option<Tiling>) -> Work {
    Work::Decode {
        key: "vae".into(),
        vae,
        width: w,
        height: h,
        frames,
        batch: 1,
        tiled,
        fallback: false,
        encode: false,
    }
}

#[test]
fn tiled_decode_takes_its_peak_from_the_tile_and_costs_time() {
    let whole = Gpu::new(8 * GIB).plan(&decode(VaeKind::Image, 2048, 2048, 1, None));
    assert_eq!(whole.oom.unwrap().stage, Stage::Decode);
    let fits = Gpu::new(24 * GIB).plan(&decode(VaeKind::Image, 2048, 2048, 1, None));
    let tiled = Gpu::new(8 * GIB).plan(&decode(
        VaeKind::Image,
        2048,
        2048,
        1,
        Some(Tiling::spatial(512)),
    ));
    assert!(tiled.oom.is_none(), "{tiled:?}");
    assert!(tiled.peak_allocated < fits.peak_allocated / 4);
    assert!(tiled.setup_seconds > fits.setup_seconds);
    // More overlap: more work, the same peak.
    let overlapped = Gpu::new(8 * GIB).plan(&decode(
        VaeKind::Image,
        2048,
        2048,
        1,
        Some(Tiling {
            overlap: 128,
            ..Tiling::spatial(512)
        }),
    ));
    assert_eq!(overlapped.peak_allocated, tiled.peak_allocated);
    assert!(overlapped.setup_seconds > tiled.setup_seconds);
}

#[test]
fn temporal_chunks_lower_the_peak_only_where_frames_cost_memory() {
    let spatial = |temporal| Tiling {
        temporal,
        ..Tiling::spatial(256)
    };
    // HunyuanVideo's decode grows with frames: shorter chunks lower the peak.
    let long =
        Gpu::new(24 * GIB).plan(&decode(VaeKind::Hunyuan, 1280, 720, 129, Some(spatial(64))));
    let short =
        Gpu::new(24 * GIB).plan(&decode(VaeKind::Hunyuan, 1280, 720, 129, Some(spatial(16))));
    assert!(short.peak_allocated < long.peak_allocated);
    // Wan 2.1's causal VAE decodes frame by frame: chunking changes nothing.
    let a = Gpu::new(24 * GIB).plan(&decode(VaeKind::Wan21, 1280, 720, 81, Some(spatial(64))));
    let b = Gpu::new(24 * GIB).plan(&decode(VaeKind::Wan21, 1280, 720, 81, Some(spatial(16))));
    assert_eq!(a.peak_allocated, b.peak_allocated);
}

#[test]
fn fp8_weights_halve_the_load_and_leave_the_activations() {
    let fp16 = ModelVal::from_file("wan2.2_i2v_low_noise_14B_fp16.safetensors", true);
    let mut fp8 = fp16.clone();
    fp8.bytes /= 2;
    let l = latent(832, 480, 81, 1);
    let mut a = Gpu::new(48 * GIB);
    let pa = a.plan(&sample(fp16, l, 20, 1));
    let mut b = Gpu::new(48 * GIB);
    let pb = b.plan(&sample(fp8.clone(), l, 20, 1));
    assert!(pa.oom.is_none() && pb.oom.is_none());
    let weights = |g: &Gpu| g.loaded_models().iter().map(|(_, b)| *b).sum::<u64>();
    assert_eq!(weights(&b) * 2, weights(&a) - weights(&a) % 2);
    assert_eq!(
        pa.peak_allocated - weights(&a),
        pb.peak_allocated - weights(&b),
        "activations unchanged"
    );
}

#[test]
fn a_text_encoder_on_the_cpu_takes_no_device_memory_and_more_time() {
    let on_gpu = Work::Encode {
        key: "umt5".into(),
        bytes: 11 * GIB,
        full: false,
        cpu: false,
    };
    let on_cpu = Work::Encode {
        key: "umt5".into(),
        bytes: 11 * GIB,
        full: false,
        cpu: true,
    };
    let mut g = Gpu::new(8 * GIB);
    let gpu_plan = g.plan(&on_gpu);
    assert!(gpu_plan.peak_allocated > 0);
    let mut c = Gpu::new(8 * GIB);
    let cpu_plan = c.plan(&on_cpu);
    assert!(cpu_plan.oom.is_none());
    assert_eq!(cpu_plan.peak_allocated, 0);
    assert!(c.loaded_models().is_empty());
    assert!(cpu_plan.setup_seconds > gpu_plan.setup_seconds);
}

#[test]
fn previews_cost_time_and_a_little_memory_per_step() {
    let m = ModelVal::from_file("v1-5-pruned-emaonly-fp16.safetensors", true);
    let work = sample(m, latent(512, 512, 1, 1), 20, 2);
    let off = Gpu::new(8 * GIB).plan(&work);
    let mut g = Gpu::new(8 * GIB);
    g.previews = true;
    let on = g.plan(&work);
    assert!(on.step_seconds > off.step_seconds);
    assert!(on.peak_allocated > off.peak_allocated);
}

#[test]
fn batch_one_lowers_the_sampling_peak() {
    let m = ModelVal::from_file("v1-5-pruned-emaonly-fp16.safetensors", true);
    let four = Gpu::new(8 * GIB).plan(&sample(m.clone(), latent(1024, 1024, 1, 4), 20, 2));
    let one = Gpu::new(8 * GIB).plan(&sample(m, latent(1024, 1024, 1, 1), 20, 2));
    assert_eq!(four.oom.unwrap().stage, Stage::SampleFirst);
    assert!(one.oom.is_none());
}

#[test]
fn novram_lets_a_wrapper_model_load_partially() {
    let m = ModelVal::from_file("wan2.1_t2v_14B_bf16.safetensors", false);
    let work = sample(m, latent(832, 480, 33, 1), 10, 1);
    assert_eq!(
        Gpu::new(24 * GIB).plan(&work).oom.unwrap().stage,
        Stage::Load
    );
    let plan = gpu_with(Knobs {
        novram: true,
        ..Knobs::default()
    })
    .plan(&work);
    assert!(plan.oom.is_none(), "{plan:?}");
    assert!(plan.notes.iter().any(|n| n.contains("loaded partially")));
}
