//! How the simulator words an out-of-memory failure: PyTorch's allocator message (native or
//! cudaMallocAsync wording, PyTorch's own size formatting), ComfyUI's OOM tips, and a Python
//! traceback whose frames match the stage (load inside the sampler, first step, mid-sampling,
//! VAE decode, post-processing).

use super::memory::{Family, Oom, Stage};

/// Install prefix used in simulated tracebacks (the same rewritten prefix as the captures).
pub(crate) const ROOT: &str = "/home/user/ComfyUI";

/// ComfyUI's sentence appended to every OOM (`execution.py`).
pub(crate) const OOM_TIPS: &str = "This error means you ran out of memory on your GPU.\n\nTIPS: If the workflow worked before you might have accidentally set the batch_size to a large number.";

/// The exception class ComfyUI reports for a CUDA OOM on current PyTorch.
pub(crate) const OOM_EXCEPTION_TYPE: &str = "torch.OutOfMemoryError";

/// PyTorch CUDA allocator backend; decides the OOM wording and the device name suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Allocator {
    /// The caching allocator: "CUDA out of memory. Tried to allocate …".
    #[default]
    Native,
    /// `cudaMallocAsync` (ComfyUI's default on recent PyTorch): "Allocation on device …".
    CudaMallocAsync,
}

impl Allocator {
    /// The name `torch.cuda.get_allocator_backend()` returns.
    pub(crate) fn backend_name(self) -> &'static str {
        match self {
            Allocator::Native => "native",
            Allocator::CudaMallocAsync => "cudaMallocAsync",
        }
    }

    pub fn parse(s: &str) -> Option<Allocator> {
        match s.to_ascii_lowercase().as_str() {
            "native" => Some(Allocator::Native),
            "cudamallocasync" | "async" => Some(Allocator::CudaMallocAsync),
            _ => None,
        }
    }
}

/// PyTorch's `format_size` (c10/cuda/CUDACachingAllocator.cpp): bytes up to 1 KiB, then KiB,
/// MiB, GiB with two decimals.
pub(crate) fn format_size(size: u64) -> String {
    if size <= 1024 {
        format!("{size} bytes")
    } else if size <= 1_048_576 {
        format!("{:.2} KiB", size as f64 / 1024.0)
    } else if size <= 1_073_741_824 {
        format!("{:.2} MiB", size as f64 / 1_048_576.0)
    } else {
        format!("{:.2} GiB", size as f64 / 1_073_741_824.0)
    }
}

/// The exception text PyTorch raises.
pub(crate) fn torch_message(oom: &Oom, allocator: Allocator) -> String {
    match allocator {
        Allocator::Native => {
            let in_use = oom.total.saturating_sub(oom.free);
            format!(
                "CUDA out of memory. Tried to allocate {}. GPU 0 has a total capacity of {} of which {} is free. \
Including non-PyTorch memory, this process has {} memory in use. Of the allocated memory {} is allocated by PyTorch, \
and {} is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  \
(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)",
                format_size(oom.requested),
                format_size(oom.total),
                format_size(oom.free),
                format_size(in_use),
                format_size(oom.allocated),
                format_size(oom.reserved_free),
            )
        }
        Allocator::CudaMallocAsync => format!(
            "Allocation on device 0 would exceed allowed memory. (out of memory)\n\
Currently allocated     : {}\n\
Requested               : {}\n\
Device limit            : {}\n\
Free (according to CUDA): {}\n\
PyTorch limit (set by user-supplied memory fraction)\n                        : 17179869184.00 GiB",
            format_size(oom.allocated),
            format_size(oom.requested),
            format_size(oom.total),
            format_size(oom.free),
        ),
    }
}

/// `exception_message` as ComfyUI sends it: the torch text, a newline, the tips.
pub fn exception_message(oom: &Oom, allocator: Allocator) -> String {
    format!("{}\n{}", torch_message(oom, allocator), OOM_TIPS)
}

fn frame(path: &str, line: u32, func: &str, code: &str) -> String {
    let full = if path.starts_with("venv/") || path.starts_with('/') {
        if let Some(rest) = path.strip_prefix("venv/") {
            format!("{ROOT}/venv/lib/python3.11/site-packages/{rest}")
        } else {
            path.to_string()
        }
    } else {
        format!("{ROOT}/{path}")
    };
    format!("  File \"{full}\", line {line}, in {func}\n    {code}\n")
}

/// The four `execution.py` frames every node error starts with (copied from the captures).
pub(crate) fn execution_frames() -> Vec<String> {
    vec![
        "  File \"/home/user/ComfyUI/execution.py\", line 496, in execute\n    output_data, output_ui, has_subgraph, has_pending_tasks = await get_output_data(prompt_id, unique_id, obj, input_data_all, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)\n                                                              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n".to_string(),
        "  File \"/home/user/ComfyUI/execution.py\", line 315, in get_output_data\n    return_values = await _async_map_node_over_list(prompt_id, unique_id, obj, input_data_all, obj.FUNCTION, allow_interrupt=True, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)\n                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n".to_string(),
        "  File \"/home/user/ComfyUI/execution.py\", line 289, in _async_map_node_over_list\n    await process_inputs(input_dict, i)\n".to_string(),
        "  File \"/home/user/ComfyUI/execution.py\", line 277, in process_inputs\n    result = f(**inputs)\n             ^^^^^^^^^^^\n".to_string(),
    ]
}

/// Frames from the node function down to `CFGGuider.sample` for the sampler classes.
fn sampler_entry(class_type: &str) -> Vec<String> {
    let ksampler_tail = || {
        vec![
            frame("nodes.py", 1492, "common_ksampler", "samples = comfy.sample.sample(model, noise, steps, cfg, sampler_name, scheduler, positive, negative, latent_image,"),
            frame("comfy/sample.py", 45, "sample", "samples = sampler.sample(noise, positive, negative, cfg=cfg, latent_image=latent_image, start_step=start_step, last_step=last_step, force_full_denoise=force_full_denoise, denoise_mask=noise_mask, sigmas=sigmas, callback=callback, disable_pbar=disable_pbar, seed=seed)"),
            frame("comfy/samplers.py", 1161, "sample", "return sample(self.model, noise, positive, negative, cfg, self.device, sampler, sigmas, self.model_options, latent_image=latent_image, denoise_mask=denoise_mask, callback=callback, disable_pbar=disable_pbar, seed=seed)"),
            frame("comfy/samplers.py", 1051, "sample", "return cfg_guider.sample(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)"),
        ]
    };
    let mut v = match class_type {
        "KSampler" => {
            let mut v = vec![frame("nodes.py", 1525, "sample", "return common_ksampler(model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=denoise)")];
            v.extend(ksampler_tail());
            v
        }
        "KSamplerAdvanced" => {
            let mut v = vec![frame("nodes.py", 1558, "sample", "return common_ksampler(model, noise_seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=denoise, disable_noise=disable_noise, start_step=start_at_step, last_step=end_at_step, force_full_denoise=force_full_denoise)")];
            v.extend(ksampler_tail());
            v
        }
        "SamplerCustom" => vec![
            frame("comfy_extras/nodes_custom_sampler.py", 475, "sample", "samples = comfy.sample.sample_custom(model, noise, cfg, sampler, sigmas, positive, negative, latent_image, noise_mask=noise_mask, callback=callback, disable_pbar=disable_pbar, seed=noise_seed)"),
            frame("comfy/sample.py", 57, "sample_custom", "samples = comfy.samplers.sample(model, noise, positive, negative, cfg, model.load_device, sampler, sigmas, model_options=model.model_options, latent_image=latent_image, denoise_mask=noise_mask, callback=callback, disable_pbar=disable_pbar, seed=seed)"),
            frame("comfy/samplers.py", 1051, "sample", "return cfg_guider.sample(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)"),
        ],
        "UltimateSDUpscale" | "UltimateSDUpscaleNoUpscale" | "UltimateSDUpscaleCustomSample" => vec![
            frame("custom_nodes/ComfyUI_UltimateSDUpscale/nodes.py", 125, "upscale", "processed = script.run(p=sdprocessing, _=None, tile_width=tile_width, tile_height=tile_height,"),
            frame("custom_nodes/ComfyUI_UltimateSDUpscale/repositories/ultimate_sd_upscale/scripts/ultimate-upscale.py", 553, "run", "upscaler.process()"),
            frame("custom_nodes/ComfyUI_UltimateSDUpscale/repositories/ultimate_sd_upscale/scripts/ultimate-upscale.py", 136, "process", "self.image = self.redraw.start(self.p, self.image, self.rows, self.cols)"),
            frame("custom_nodes/ComfyUI_UltimateSDUpscale/repositories/ultimate_sd_upscale/scripts/ultimate-upscale.py", 243, "start", "return self.linear_process(p, image, rows, cols)"),
            frame("custom_nodes/ComfyUI_UltimateSDUpscale/modules/processing.py", 187, "process_images", "samples = sample(p.model, p.seed, p.steps, p.cfg, p.sampler_name, p.scheduler, positive_cropped,"),
            frame("custom_nodes/ComfyUI_UltimateSDUpscale/utils.py", 451, "sample", "samples = comfy.sample.sample(model, noise, steps, cfg, sampler_name, scheduler, positive, negative, latent_image,"),
            frame("comfy/sample.py", 45, "sample", "samples = sampler.sample(noise, positive, negative, cfg=cfg, latent_image=latent_image, start_step=start_step, last_step=last_step, force_full_denoise=force_full_denoise, denoise_mask=noise_mask, sigmas=sigmas, callback=callback, disable_pbar=disable_pbar, seed=seed)"),
            frame("comfy/samplers.py", 1051, "sample", "return cfg_guider.sample(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)"),
        ],
        "FaceDetailer" => vec![
            frame("custom_nodes/ComfyUI-Impact-Pack/modules/impact/impact_pack.py", 835, "doit", "enhanced_img, cropped_enhanced, cropped_enhanced_alpha, mask, cnet_pil_list = FaceDetailer.enhance_face("),
            frame("custom_nodes/ComfyUI-Impact-Pack/modules/impact/impact_pack.py", 776, "enhance_face", "DetailerForEach.do_detail(image, segs, model, clip, vae, guide_size, guide_size_for_bbox, max_size, seed, steps, cfg,"),
            frame("custom_nodes/ComfyUI-Impact-Pack/modules/impact/core.py", 360, "enhance_detail", "refined_latent = impact_sampling.ksampler_wrapper(model2, seed2, steps2, cfg2, sampler_name2, scheduler2, positive2, negative2,"),
            frame("comfy/sample.py", 45, "sample", "samples = sampler.sample(noise, positive, negative, cfg=cfg, latent_image=latent_image, start_step=start_step, last_step=last_step, force_full_denoise=force_full_denoise, denoise_mask=noise_mask, sigmas=sigmas, callback=callback, disable_pbar=disable_pbar, seed=seed)"),
            frame("comfy/samplers.py", 1051, "sample", "return cfg_guider.sample(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)"),
        ],
        // SamplerCustomAdvanced and anything else built on a guider.
        _ => vec![
            frame("comfy_extras/nodes_custom_sampler.py", 835, "sample", "samples = guider.sample(noise.generate_noise(latent), latent_image, sampler, sigmas, denoise_mask=noise_mask, callback=callback, disable_pbar=disable_pbar, seed=noise.seed)"),
        ],
    };
    v.push(frame("comfy/samplers.py", 1036, "sample", "output = executor.execute(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)"));
    v.push(frame(
        "comfy/patcher_extension.py",
        112,
        "execute",
        "return self.original(*args, **kwargs)",
    ));
    v
}

/// `load_models_gpu` frames: ComfyUI moves the model to the GPU inside the sampler.
fn load_frames(lora_patch: bool, partial: bool) -> Vec<String> {
    let mut v = vec![
        frame("comfy/samplers.py", 995, "outer_sample", "self.inner_model, self.conds, self.loaded_models = comfy.sampler_helpers.prepare_sampling(self.model_patcher, noise.shape, self.conds, self.model_options)"),
        frame("comfy/sampler_helpers.py", 130, "prepare_sampling", "return executor.execute(model, noise_shape, conds, model_options=model_options)"),
        frame("comfy/patcher_extension.py", 112, "execute", "return self.original(*args, **kwargs)"),
        frame("comfy/sampler_helpers.py", 138, "_prepare_sampling", "comfy.model_management.load_models_gpu([model] + models, memory_required=memory_required + inference_memory, minimum_memory_required=minimum_memory_required + inference_memory)"),
        frame("comfy/model_management.py", 701, "load_models_gpu", "loaded_model.model_load(lowvram_model_memory, force_patch_weights=force_patch_weights)"),
        frame("comfy/model_management.py", 506, "model_load", "self.model_use_more_vram(use_more_vram, force_patch_weights=force_patch_weights)"),
        frame("comfy/model_management.py", 535, "model_use_more_vram", "return self.model.partially_load(self.device, extra_memory, force_patch_weights=force_patch_weights)"),
    ];
    if partial {
        v.push(frame(
            "comfy/model_patcher.py",
            912,
            "partially_load",
            "raise e",
        ));
    }
    v.push(frame("comfy/model_patcher.py", 909, "partially_load", "self.load(device_to, lowvram_model_memory=current_used + extra_memory, force_patch_weights=force_patch_weights, full_load=full_load)"));
    if lora_patch {
        v.push(frame(
            "comfy/model_patcher.py",
            707,
            "load",
            "self.patch_weight_to_device(key, device_to=device_to)",
        ));
        v.push(frame("comfy/model_patcher.py", 621, "patch_weight_to_device", "temp_weight = comfy.model_management.cast_to_device(weight, device_to, torch.float32, copy=True)"));
        v.push(frame(
            "comfy/model_management.py",
            1093,
            "cast_to_device",
            "return cast_to(weight, dtype, device, non_blocking=non_blocking, copy=copy)",
        ));
        v.push(frame(
            "comfy/model_management.py",
            1078,
            "cast_to",
            "r = torch.empty_like(weight, dtype=dtype, device=device)",
        ));
    } else {
        v.push(frame(
            "comfy/model_patcher.py",
            716,
            "load",
            "x[2].to(device_to)",
        ));
        v.push(frame(
            "venv/torch/nn/modules/module.py",
            1369,
            "to",
            "return self._apply(convert)",
        ));
        v.push(frame(
            "venv/torch/nn/modules/module.py",
            955,
            "_apply",
            "param_applied = fn(param)",
        ));
        v.push(frame(
            "venv/torch/nn/modules/module.py",
            1355,
            "convert",
            "return t.to(",
        ));
    }
    v
}

/// From `outer_sample` into the sampler loop and the diffusion model's attention.
fn step_frames(family: Family, sampler_name: &str, step_cache: Option<&str>) -> Vec<String> {
    let mut v = vec![
        frame("comfy/samplers.py", 1004, "outer_sample", "output = self.inner_sample(noise, latent_image, device, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)"),
        frame("comfy/samplers.py", 987, "inner_sample", "samples = executor.execute(self, sigmas, extra_args, callback, noise, latent_image, denoise_mask, disable_pbar)"),
        frame("comfy/patcher_extension.py", 112, "execute", "return self.original(*args, **kwargs)"),
        frame("comfy/samplers.py", 759, "sample", "samples = self.sampler_function(model_k, noise, sigmas, extra_args=extra_args, callback=k_callback, disable=disable_pbar, **self.extra_options)"),
        frame("venv/torch/utils/_contextlib.py", 158, "no_grad", "return func(*args, **kwargs)"),
    ];
    let sampler = if sampler_name.is_empty() {
        "euler"
    } else {
        sampler_name
    };
    v.push(frame(
        "comfy/k_diffusion/sampling.py",
        199,
        &format!("sample_{sampler}"),
        "denoised = model(x, sigma_hat * s_in, **extra_args)",
    ));
    v.extend([
        frame("comfy/samplers.py", 408, "__call__", "out = self.inner_model(x, sigma, model_options=model_options, seed=seed)"),
        frame("comfy/samplers.py", 960, "__call__", "return self.outer_predict_noise(*args, **kwargs)"),
        frame("comfy/samplers.py", 970, "predict_noise", "return sampling_function(self.inner_model, x, timestep, self.conds.get(\"negative\", None), self.conds.get(\"positive\", None), self.cfg, model_options=model_options, seed=seed)"),
        frame("comfy/samplers.py", 388, "sampling_function", "out = calc_cond_batch(model, conds, x, timestep, model_options)"),
        frame("comfy/samplers.py", 206, "calc_cond_batch", "return _calc_cond_batch_outer(model, conds, x_in, timestep, model_options)"),
        frame("comfy/samplers.py", 333, "_calc_cond_batch", "output = model.apply_model(input_x, timestep_, **c).chunk(batch_chunks)"),
        frame("comfy/model_base.py", 199, "_apply_model", "model_output = self.diffusion_model(xc, t, context=context, control=control, transformer_options=transformer_options, **extra_conds).float()"),
        frame("venv/torch/nn/modules/module.py", 1787, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
        frame("venv/torch/nn/modules/module.py", 1798, "_call_impl", "return forward_call(*args, **kwargs)"),
    ]);
    if let Some(cache) = step_cache {
        v.extend(cache_frames(cache));
        return v;
    }
    v.extend(model_frames(family));
    v
}

fn model_frames(family: Family) -> Vec<String> {
    let attention = frame(
        "comfy/ldm/modules/attention.py",
        130,
        "wrapper",
        "return func(*args, **kwargs)",
    );
    let sdpa = frame(
        "comfy/ldm/modules/attention.py",
        498,
        "attention_pytorch",
        "out = comfy.ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)",
    );
    match family {
        Family::Sd15 | Family::Sdxl | Family::Other => vec![
            frame("comfy/ldm/modules/diffusionmodules/openaimodel.py", 873, "_forward", "h = forward_timestep_embed(module, h, emb, context, transformer_options, time_context=time_context, num_video_frames=num_video_frames, image_only_indicator=image_only_indicator)"),
            frame("comfy/ldm/modules/diffusionmodules/openaimodel.py", 44, "forward_timestep_embed", "x = layer(x, context, transformer_options)"),
            frame("comfy/ldm/modules/attention.py", 922, "forward", "x = block(x, context=context[i], transformer_options=transformer_options)"),
            frame("comfy/ldm/modules/attention.py", 808, "forward", "n = self.attn1(n, context=context_attn1, value=value_attn1, transformer_options=transformer_options)"),
            frame("comfy/ldm/modules/attention.py", 702, "forward", "out = optimized_attention(q, k, v, self.heads, attn_precision=self.attn_precision, transformer_options=transformer_options)"),
            attention,
            sdpa,
        ],
        Family::Flux => vec![
            frame("comfy/ldm/flux/model.py", 263, "forward", "out = self.forward_orig(img, img_ids, context, txt_ids, timestep, y, guidance, control, transformer_options, attn_mask=kwargs.get(\"attention_mask\", None))"),
            frame("comfy/ldm/flux/model.py", 157, "forward_orig", "img, txt = block(img=img,"),
            frame("comfy/ldm/flux/layers.py", 186, "forward", "attn = attention(torch.cat((txt_q, img_q), dim=2),"),
            frame("comfy/ldm/flux/math.py", 15, "attention", "x = optimized_attention(q, k, v, heads, skip_reshape=True, mask=mask, transformer_options=transformer_options)"),
            attention,
            sdpa,
        ],
        Family::Sd3 | Family::Qwen => vec![
            frame("comfy/ldm/qwen_image/model.py", 467, "forward", "return comfy.patcher_extension.WrapperExecutor.new_class_executor("),
            frame("comfy/ldm/qwen_image/model.py", 526, "_forward", "encoder_hidden_states, hidden_states = block("),
            frame("comfy/ldm/qwen_image/model.py", 263, "forward", "img_attn_output, txt_attn_output = self.attn("),
            frame("comfy/ldm/qwen_image/model.py", 151, "forward", "joint_hidden_states = optimized_attention_masked(joint_query, joint_key, joint_value, self.heads, attention_mask, transformer_options=transformer_options)"),
            attention,
            sdpa,
        ],
        Family::Wan14 | Family::Wan5 | Family::Wan1_3 => vec![
            frame("comfy/ldm/wan/model.py", 614, "forward", "return self.forward_orig(x, timestep, context, clip_fea=clip_fea, freqs=freqs, transformer_options=transformer_options, **kwargs)[:, :, :t, :h, :w]"),
            frame("comfy/ldm/wan/model.py", 584, "forward_orig", "x = block(x, e=e0, freqs=freqs, context=context, context_img_len=context_img_len, transformer_options=transformer_options)"),
            frame("comfy/ldm/wan/model.py", 235, "forward", "y = self.self_attn("),
            frame("comfy/ldm/wan/model.py", 72, "forward", "x = optimized_attention("),
            attention,
            sdpa,
        ],
        Family::Hunyuan => vec![
            frame("comfy/ldm/hunyuan_video/model.py", 405, "forward", "return self.forward_orig(x, img_ids, context, txt_ids, attention_mask, timestep, y, guidance, guiding_frame_index, ref_latent, control, transformer_options)"),
            frame("comfy/ldm/hunyuan_video/model.py", 324, "forward_orig", "img, txt = block(img=img, txt=txt, vec=vec, pe=pe, attn_mask=attn_mask, modulation_dims_img=modulation_dims, modulation_dims_txt=modulation_dims_txt, transformer_options=transformer_options)"),
            frame("comfy/ldm/flux/layers.py", 186, "forward", "attn = attention(torch.cat((txt_q, img_q), dim=2),"),
            frame("comfy/ldm/flux/math.py", 15, "attention", "x = optimized_attention(q, k, v, heads, skip_reshape=True, mask=mask, transformer_options=transformer_options)"),
            attention,
            sdpa,
        ],
        Family::Ltx2 | Family::Ltx13 => vec![
            frame("comfy/ldm/lightricks/model.py", 470, "forward", "hidden_states = block("),
            frame("comfy/ldm/lightricks/model.py", 304, "forward", "x += self.attn1(comfy.ldm.common_dit.rms_norm(x) * (1 + scale_msa) + shift_msa, pe=pe, transformer_options=transformer_options) * gate_msa"),
            frame("comfy/ldm/lightricks/model.py", 256, "forward", "out = comfy.ldm.modules.attention.optimized_attention(q, k, v, self.heads, attn_precision=self.attn_precision, transformer_options=transformer_options)"),
            attention,
            sdpa,
        ],
    }
}

fn cache_frames(cache: &str) -> Vec<String> {
    match cache {
        "TeaCache" => vec![frame(
            "custom_nodes/ComfyUI-TeaCache/nodes.py",
            596,
            "teacache_wanmodel_forward",
            "self.previous_residual_cond = (x - ori_x).to(self.teacache_state['cache_device'])",
        )],
        "MagCache" => vec![frame(
            "custom_nodes/ComfyUI-MagCache/nodes.py",
            612,
            "magcache_wanmodel_forward",
            "self.residual_cache[cache_index] = (x - ori_x).to(magcache_device)",
        )],
        "ApplyFBCacheOnModel" => vec![frame(
            "custom_nodes/Comfy-WaveSpeed/first_block_cache.py",
            430,
            "call_remaining_blocks",
            "set_buffer(\"hidden_states_residual\", hidden_states_residual)",
        )],
        "WanVideoTeaCache" | "WanVideoMagCache" | "WanVideoEasyCache" => vec![frame(
            "custom_nodes/ComfyUI-WanVideoWrapper/wanvideo/modules/model.py",
            2254,
            "forward",
            "self.cache_state[pred_id]['previous_residual'] = (x - ori_x).to(self.cache_device)",
        )],
        // Core EasyCache / LazyCache and anything else.
        _ => vec![
            frame(
                "comfy_extras/nodes_easycache.py",
                76,
                "easycache_forward_wrapper",
                "easycache.update_cache_diff(output, next_x_prev, uuids)",
            ),
            frame(
                "comfy_extras/nodes_easycache.py",
                301,
                "update_cache_diff",
                "self.uuid_cache_diffs[uuid] = output[i] - x[i]",
            ),
        ],
    }
}

fn wrapper_sampler_frames(stage: Stage, cache: Option<&str>) -> Vec<String> {
    let mut v = vec![frame(
        "custom_nodes/ComfyUI-WanVideoWrapper/nodes_sampler.py",
        1215,
        "process",
        "noise_pred, self.cache_state = predict_with_cfg(",
    )];
    if stage == Stage::Load {
        return vec![
            frame(
                "custom_nodes/ComfyUI-WanVideoWrapper/nodes_sampler.py",
                301,
                "process",
                "transformer.to(device)",
            ),
            frame(
                "venv/torch/nn/modules/module.py",
                1369,
                "to",
                "return self._apply(convert)",
            ),
            frame(
                "venv/torch/nn/modules/module.py",
                955,
                "_apply",
                "param_applied = fn(param)",
            ),
            frame(
                "venv/torch/nn/modules/module.py",
                1355,
                "convert",
                "return t.to(",
            ),
        ];
    }
    v.push(frame(
        "custom_nodes/ComfyUI-WanVideoWrapper/nodes_sampler.py",
        1016,
        "predict_with_cfg",
        "noise_pred_cond, cache_state_cond = transformer(",
    ));
    v.push(frame(
        "venv/torch/nn/modules/module.py",
        1798,
        "_call_impl",
        "return forward_call(*args, **kwargs)",
    ));
    match cache {
        Some(c) => v.extend(cache_frames(c)),
        None => v.extend([
            frame("custom_nodes/ComfyUI-WanVideoWrapper/wanvideo/modules/model.py", 2187, "forward", "x, x_ip = block(x, x_ip=x_ip, **kwargs)"),
            frame("custom_nodes/ComfyUI-WanVideoWrapper/wanvideo/modules/model.py", 1025, "forward", "y = self.self_attn.forward(q, k, v, seq_lens, lynx_ref_feature=lynx_ref_feature, lynx_ref_scale=lynx_ref_scale)"),
            frame("custom_nodes/ComfyUI-WanVideoWrapper/wanvideo/modules/attention.py", 201, "attention", "out = torch.nn.functional.scaled_dot_product_attention(q, k, v)"),
        ]),
    }
    v
}

fn decode_frames(class_type: &str, video: bool, tiled_fallback: bool) -> Vec<String> {
    let mut v = match class_type {
        "VAEDecodeTiled" => vec![
            frame("nodes.py", 330, "decode", "images = vae.decode_tiled(samples[\"samples\"], tile_x=tile_size // compression, tile_y=tile_size // compression, overlap=overlap // compression, tile_t=temporal_size, overlap_t=temporal_overlap)"),
            frame("comfy/sd.py", 748, "decode_tiled", if video { "output = self.decode_tiled_3d(samples, **args)" } else { "output = self.decode_tiled_(samples, **args)" }),
        ],
        "WanVideoDecode" => vec![
            frame("custom_nodes/ComfyUI-WanVideoWrapper/nodes.py", 1803, "decode", "images = vae.decode(latents, device=device, end_=(end_image is not None), tiled=enable_vae_tiling, tile_size=(tile_x//vae.upsampling_factor, tile_y//vae.upsampling_factor), tile_stride=(tile_stride_x//vae.upsampling_factor, tile_stride_y//vae.upsampling_factor))[0]"),
            frame("custom_nodes/ComfyUI-WanVideoWrapper/wanvideo/wan_video_vae.py", 1271, "decode", "video = self.single_decode(hidden_state, device, end_=end_)"),
            frame("custom_nodes/ComfyUI-WanVideoWrapper/wanvideo/wan_video_vae.py", 1244, "single_decode", "video = self.model.decode(hidden_state, self.scale, end_=end_)"),
        ],
        _ => vec![frame("nodes.py", 294, "decode", "images = vae.decode(samples[\"samples\"])")],
    };
    if class_type == "WanVideoDecode" {
        v.push(frame(
            "venv/torch/nn/modules/conv.py",
            717,
            "_conv_forward",
            "return F.conv3d(",
        ));
        return v;
    }
    if tiled_fallback {
        v.push(frame(
            "comfy/sd.py",
            687,
            "decode",
            if video {
                "pixel_samples = self.decode_tiled_3d(samples_in)"
            } else {
                "pixel_samples = self.decode_tiled_(samples_in)"
            },
        ));
    } else if class_type != "VAEDecodeTiled" {
        v.push(frame("comfy/sd.py", 680, "decode", "out = self.process_output(self.first_stage_model.decode(samples, **vae_options).to(self.output_device).float())"));
    }
    if tiled_fallback || class_type == "VAEDecodeTiled" {
        if video {
            v.push(frame("comfy/sd.py", 634, "decode_tiled_3d", "return self.process_output(comfy.utils.tiled_scale_multidim(samples, decode_fn, tile=(tile_t, tile_x, tile_y), overlap=overlap, upscale_amount=self.upscale_ratio, out_channels=self.latent_channels, downscale=False, index_formulas=self.upscale_index_formula, output_device=self.output_device))"));
        } else {
            v.push(frame("comfy/sd.py", 612, "decode_tiled_", "(comfy.utils.tiled_scale(samples, decode_fn, tile_x // 2, tile_y * 2, overlap, upscale_amount = self.upscale_ratio, output_device=self.output_device, pbar = pbar) +"));
        }
        v.push(frame(
            "comfy/utils.py",
            1003,
            "tiled_scale_multidim",
            "ps = function(s_in).to(output_device)",
        ));
    }
    if video {
        v.push(frame("comfy/ldm/wan/vae.py", 522, "decode", "out_ = self.decoder(x[:, :, i:i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx)"));
        v.push(frame(
            "comfy/ldm/wan/vae.py",
            63,
            "forward",
            "return super().forward(x)",
        ));
        v.push(frame(
            "venv/torch/nn/modules/conv.py",
            717,
            "_conv_forward",
            "return F.conv3d(",
        ));
    } else {
        v.push(frame(
            "comfy/ldm/modules/diffusionmodules/model.py",
            642,
            "forward",
            "h = self.up[i_level].block[i_block](h, temb, **kwargs)",
        ));
        v.push(frame(
            "comfy/ldm/modules/diffusionmodules/model.py",
            146,
            "forward",
            "h = self.norm1(h)",
        ));
        v.push(frame(
            "venv/torch/nn/functional.py",
            2955,
            "group_norm",
            "return torch.group_norm(",
        ));
    }
    v
}

fn postprocess_frames(class_type: &str) -> Vec<String> {
    match class_type {
        "ImageUpscaleWithModel" => vec![
            frame("comfy_extras/nodes_upscale_model.py", 91, "upscale", "raise e"),
            frame("comfy_extras/nodes_upscale_model.py", 85, "upscale", "s = comfy.utils.tiled_scale(in_img, lambda a: upscale_model(a), tile_x=tile, tile_y=tile, overlap=overlap, upscale_amount=upscale_model.scale, pbar=pbar)"),
            frame("comfy/utils.py", 1030, "tiled_scale", "return tiled_scale_multidim(samples, function, (tile_y, tile_x), overlap=overlap, upscale_amount=upscale_amount, out_channels=out_channels, output_device=output_device, pbar=pbar)"),
            frame("comfy/utils.py", 1003, "tiled_scale_multidim", "ps = function(s_in).to(output_device)"),
            frame("comfy_extras/nodes_upscale_model.py", 85, "<lambda>", "s = comfy.utils.tiled_scale(in_img, lambda a: upscale_model(a), tile_x=tile, tile_y=tile, overlap=overlap, upscale_amount=upscale_model.scale, pbar=pbar)"),
            frame("venv/spandrel/__helpers/model_descriptor.py", 472, "__call__", "output = self._call_fn(self.model, image)"),
            frame("venv/spandrel/architectures/ESRGAN/__arch/RRDB.py", 294, "forward", "out = self.model(x)"),
            frame("venv/torch/nn/modules/conv.py", 543, "_conv_forward", "return F.conv2d("),
        ],
        "ImageUpscaleWithModelBatched" => vec![
            frame("custom_nodes/ComfyUI-KJNodes/nodes/image_nodes.py", 2521, "upscale", "s = upscale_model(batch)"),
            frame("venv/spandrel/__helpers/model_descriptor.py", 472, "__call__", "output = self._call_fn(self.model, image)"),
            frame("venv/spandrel/architectures/ESRGAN/__arch/RRDB.py", 294, "forward", "out = self.model(x)"),
            frame("venv/torch/nn/modules/conv.py", 543, "_conv_forward", "return F.conv2d("),
        ],
        "FILM VFI" => vec![
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_models/film/__init__.py", 98, "vfi", "relust = inference(model, frame_0, frame_1, multiplier - 1)"),
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_models/film/__init__.py", 43, "inference", "prediction = model(x0, x1, dt)"),
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_models/film/film_arch.py", 141, "forward", "feature_pyramid0 = self.extract(image_pyramid0)"),
            frame("venv/torch/nn/modules/conv.py", 543, "_conv_forward", "return F.conv2d("),
        ],
        // RIFE VFI and other frame-by-frame post-processing.
        _ => vec![
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_models/rife/__init__.py", 123, "vfi", "out = postprocess_frames("),
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_utils.py", 222, "generic_frame_loop", "_generic_frame_loop(frames, clear_cache_after_n_frames, multiplier, return_middle_frame_function, *return_middle_frame_function_args, interpolation_states=interpolation_states, dtype=torch.float32)"),
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_utils.py", 172, "_generic_frame_loop", "middle_frame = return_middle_frame_function("),
            frame("custom_nodes/ComfyUI-Frame-Interpolation/vfi_models/rife/rife_arch.py", 495, "forward", "flow, mask = block(torch.cat((img0[:, :3], img1[:, :3], warped_img0, warped_img1, mask), 1), flow, scale=scale_list[i])"),
            frame("venv/torch/nn/modules/conv.py", 543, "_conv_forward", "return F.conv2d("),
        ],
    }
}

fn encode_frames(class_type: &str) -> Vec<String> {
    match class_type {
        "LoadWanVideoT5TextEncoder" | "WanVideoTextEncode" => vec![
            frame("custom_nodes/ComfyUI-WanVideoWrapper/nodes.py", 1130, "process", "encoder.model.to(device)"),
            frame("venv/torch/nn/modules/module.py", 1369, "to", "return self._apply(convert)"),
            frame("venv/torch/nn/modules/module.py", 955, "_apply", "param_applied = fn(param)"),
            frame("venv/torch/nn/modules/module.py", 1355, "convert", "return t.to("),
        ],
        _ => vec![
            frame("nodes.py", 77, "encode", "return (clip.encode_from_tokens_scheduled(tokens), )"),
            frame("comfy/sd.py", 170, "encode_from_tokens_scheduled", "pooled_dict = self.encode_from_tokens(tokens, return_pooled=return_pooled, return_dict=True)"),
            frame("comfy/sd.py", 228, "encode_from_tokens", "self.load_model()"),
            frame("comfy/sd.py", 208, "load_model", "model_management.load_model_gpu(self.patcher)"),
            frame("comfy/model_management.py", 717, "load_model_gpu", "return load_models_gpu([model])"),
            frame("comfy/model_management.py", 701, "load_models_gpu", "loaded_model.model_load(lowvram_model_memory, force_patch_weights=force_patch_weights)"),
            frame("comfy/model_management.py", 506, "model_load", "self.model_use_more_vram(use_more_vram, force_patch_weights=force_patch_weights)"),
            frame("venv/torch/nn/modules/module.py", 1355, "convert", "return t.to("),
        ],
    }
}

/// Context a traceback needs besides the failure itself.
#[derive(Debug, Clone, Default)]
pub struct TraceContext<'a> {
    pub class_type: &'a str,
    pub family: Option<Family>,
    pub sampler_name: &'a str,
    pub step_cache: Option<&'a str>,
    /// Video decode (3-D VAE).
    pub video: bool,
    /// WanVideoWrapper sampler.
    pub wrapper: bool,
}

/// The `traceback` list of an `execution_error` for an OOM at `oom.stage` in this node.
/// The dynamic-VRAM offloader's failure in a sampler (the `aimdo-error` fault), as ComfyUI
/// issue #15269 shows it: comfy-aimdo's C code prints the first line itself, then the node
/// raises `RuntimeError: Fault failed: 2` out of the sampler.
pub(crate) const AIMDO_CONSOLE_LINE: &str =
    "aimdo: src/model-vbar.c:393:ERROR:VRAM Allocation failed (non OOM)";

/// The exception of the `aimdo-error` fault.
pub(crate) const AIMDO_EXCEPTION_TYPE: &str = "RuntimeError";

/// Its message.
pub(crate) const AIMDO_MESSAGE: &str = "Fault failed: 2";

/// The traceback of the `aimdo-error` fault: the executor's frames and the sampler's entry.
pub(crate) fn aimdo_traceback(class_type: &str) -> Vec<String> {
    let mut v = execution_frames();
    v.extend(sampler_entry(class_type));
    v
}

pub fn traceback(oom: &Oom, ctx: &TraceContext) -> Vec<String> {
    let mut v = execution_frames();
    let family = ctx.family.unwrap_or(Family::Other);
    match oom.stage {
        Stage::Load | Stage::SampleFirst | Stage::SampleMiddle if ctx.wrapper => {
            let cache = ctx.step_cache.filter(|_| oom.stage == Stage::SampleMiddle);
            v.extend(wrapper_sampler_frames(oom.stage, cache));
        }
        Stage::Load | Stage::Condition if !crate::nodes::is_sampler_class(ctx.class_type) => {
            v.extend(encode_frames(ctx.class_type));
        }
        Stage::Load => {
            v.extend(sampler_entry(ctx.class_type));
            v.extend(load_frames(oom.lora_patch, oom.partial));
        }
        Stage::SampleFirst | Stage::SampleMiddle => {
            v.extend(sampler_entry(ctx.class_type));
            let cache = if oom.stage == Stage::SampleMiddle {
                ctx.step_cache
            } else {
                None
            };
            v.extend(step_frames(family, ctx.sampler_name, cache));
        }
        Stage::Condition => v.extend(encode_frames(ctx.class_type)),
        Stage::Decode => v.extend(decode_frames(ctx.class_type, ctx.video, oom.tiled_fallback)),
        Stage::Postprocess => v.extend(postprocess_frames(ctx.class_type)),
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{GIB, MIB};

    fn oom(stage: Stage) -> Oom {
        Oom {
            stage,
            after_steps: 0,
            requested: 4 * GIB + 512 * MIB,
            allocated: 21 * GIB,
            reserved_free: 305 * MIB,
            free: 1_536 * MIB,
            total: 24 * GIB,
            tiled_fallback: false,
            partial: false,
            lora_patch: false,
        }
    }

    #[test]
    fn sizes_are_formatted_like_pytorch() {
        assert_eq!(format_size(1024), "1024 bytes");
        assert_eq!(format_size(1025), "1.00 KiB");
        assert_eq!(format_size(20 * MIB), "20.00 MiB");
        assert_eq!(format_size(GIB), "1024.00 MiB");
        assert_eq!(format_size(GIB + 1), "1.00 GiB");
        assert_eq!(format_size(24 * GIB), "24.00 GiB");
    }

    #[test]
    fn native_message_has_pytorch_wording_and_comfy_tips() {
        let m = exception_message(&oom(Stage::SampleFirst), Allocator::Native);
        assert!(m.starts_with("CUDA out of memory. Tried to allocate 4.50 GiB. GPU 0 has a total capacity of 24.00 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this process has 22.50 GiB memory in use. Of the allocated memory 21.00 GiB is allocated by PyTorch, and 305.00 MiB is reserved by PyTorch but unallocated."), "{m}");
        assert!(m.ends_with(&format!("\n{OOM_TIPS}")));
    }

    #[test]
    fn async_message_uses_the_allocation_on_device_form() {
        let m = torch_message(&oom(Stage::Decode), Allocator::CudaMallocAsync);
        assert!(m.starts_with("Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 21.00 GiB\nRequested               : 4.50 GiB\nDevice limit            : 24.00 GiB\n"));
    }

    #[test]
    fn tracebacks_follow_the_stage() {
        let ctx = TraceContext {
            class_type: "KSampler",
            family: Some(Family::Sdxl),
            sampler_name: "euler",
            ..Default::default()
        };
        let mut load = oom(Stage::Load);
        load.lora_patch = true;
        let tb = traceback(&load, &ctx).concat();
        assert!(tb.contains("load_models_gpu") && tb.contains("patch_weight_to_device"));
        let tb = traceback(&oom(Stage::SampleFirst), &ctx).concat();
        assert!(tb.contains("sample_euler") && tb.contains("attention"));
        assert!(!tb.contains("load_models_gpu"));
        let mid = TraceContext {
            step_cache: Some("TeaCache"),
            ..ctx.clone()
        };
        let tb = traceback(&oom(Stage::SampleMiddle), &mid).concat();
        assert!(tb.contains("teacache"));
        let dec = TraceContext {
            class_type: "VAEDecode",
            ..Default::default()
        };
        let mut d = oom(Stage::Decode);
        d.tiled_fallback = true;
        let tb = traceback(&d, &dec).concat();
        assert!(tb.contains("decode_tiled_"));
        let up = TraceContext {
            class_type: "ImageUpscaleWithModel",
            ..Default::default()
        };
        assert!(traceback(&oom(Stage::Postprocess), &up)
            .concat()
            .contains("nodes_upscale_model.py"));
        let tb = traceback(&oom(Stage::Decode), &dec);
        assert!(tb[0].contains("execution.py\", line 496, in execute"));
        assert!(tb
            .iter()
            .all(|f| f.starts_with("  File \"") && f.ends_with('\n')));
    }
}
