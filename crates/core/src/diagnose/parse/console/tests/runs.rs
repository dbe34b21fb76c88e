//! Runs and their segments: what a log that stops was doing, start-up noise, runs after
//! `Prompt executed` or a refused prompt, retries the run got past.

use super::*;

#[test]
fn console_block_with_progress_and_final_line() {
    let log = "got prompt\nRequested to load BaseModel\nloaded completely 9000 2000 True\n 40%|████      | 8/20 [00:05<00:07,  1.6it/s]\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 512.00 MiB is free.\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\n  File \"/c/comfy/k_diffusion/sampling.py\", line 2, in sample_euler\n    y()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 512.00 MiB is free.\n\nGot an OOM, unloading all loaded models.\nPrompt executed in 9.00 seconds\n";
    let p = parse_input(log).unwrap();
    assert_eq!(p.signals.sampling_bar, Some((8, 20)));
    assert_eq!(p.signals.tail, None);
    assert_eq!(
        p.evidence.exception_type.as_deref(),
        Some("torch.OutOfMemoryError")
    );
    assert_eq!(p.evidence.traceback.len(), 4);
    assert!(p
        .evidence
        .exception_message
        .unwrap()
        .starts_with("CUDA out of memory"));
}

/// A custom node's import error that ComfyUI starts up after is no failure (rule 2); an
/// aimdo error at start-up is.
#[test]
fn an_error_comfyui_starts_up_after_is_no_failure() {
    let log = "Traceback (most recent call last):\n  File \"/c/nodes.py\", line 1, in load_custom_node\n    import x\nModuleNotFoundError: No module named 'x'\nCannot import /c/custom_nodes/x module for custom nodes: No module named 'x'\nImport times for custom nodes:\nStarting server\nTo see the GUI go to: http://127.0.0.1:8188\n";
    assert!(parse_input(log).is_err());
    let aimdo = "aimdo: src/model-vbar.c:236:ERROR: Could not reserve Virtual Address space\nImport times for custom nodes:\nStarting server\n";
    kind_of(aimdo, FailureKind::Aimdo);
}

#[test]
fn recovered_attempts_are_not_the_failure() {
    let log = "got prompt\nout of memory error, increasing steps and trying again 4\n 50%|█████     | 10/20 [00:10<00:10]\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB.\n";
    let p = parse_input(log).unwrap();
    assert_eq!(p.signals.sampling_bar, Some((10, 20)));
    assert!(p
        .evidence
        .exception_message
        .unwrap()
        .starts_with("CUDA out of memory"));
}

#[test]
fn startup_import_errors_are_not_the_run() {
    let log = "Traceback (most recent call last):\n  File \"/c/nodes.py\", line 1, in load_custom_node\n    import x\nModuleNotFoundError: No module named 'x'\nCannot import /c/custom_nodes/x module for custom nodes: No module named 'x'\nImport times for custom nodes:\nStarting server\nTo see the GUI go to: http://127.0.0.1:8188\ngot prompt\nRequested to load Flux\n";
    let p = parse_input(log).unwrap();
    assert_eq!(p.evidence.outcome, None);
    assert!(p.signals.log_stopped);
    assert!(p.evidence.exception_message.is_none());
    assert!(matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(_))));
}

/// Issue #40: a 2026 log whose last line stages a text encoder just ends; it is not a
/// dead server, and the stage comes from the encoder's role.
#[test]
fn a_log_ending_on_a_staged_text_encoder_is_not_a_dead_server() {
    use crate::vocab::{FailureKind, Stage};
    let log = "got prompt\nModel ZImageTEModel_ prepared for dynamic VRAM loading. 7671MB Staged. 0 patches attached.\n";
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_eq!(d.kind, FailureKind::Unknown, "{}", d.kind_evidence);
    assert!(!d.kind_evidence.contains("presumed gone"));
    assert_eq!(d.stage, Stage::Condition, "{}", d.stage_evidence);
    assert_eq!(d.stage_candidates, [Stage::Condition, Stage::Load]);
    assert!(
        d.stage_evidence.contains("7671MB Staged"),
        "{}",
        d.stage_evidence
    );
}

/// A paste cut inside the staging line that follows `Requested to load X` reads as that
/// line: the model was staged, so its role comes first.
#[test]
fn a_cut_staging_line_counts_as_staged() {
    use crate::vocab::Stage;
    let cut = "got prompt\nRequested to load HunyuanVideoVAE\nModel Hunyu";
    let d = crate::diagnose::diagnose_text(cut).unwrap();
    assert_eq!(d.stage, Stage::Condition, "{}", d.stage_evidence);
    assert_eq!(
        d.stage_candidates,
        [Stage::Condition, Stage::Load, Stage::Decode]
    );
    // A last line that is not the start of that line (another model, or too short to
    // tell) leaves the bare request: still loading.
    for last in ["Model Flux", "Model H"] {
        let text = format!("got prompt\nRequested to load HunyuanVideoVAE\n{last}");
        let d = crate::diagnose::diagnose_text(&text).unwrap();
        assert_eq!(d.stage, Stage::Load, "{last}: {}", d.stage_evidence);
    }
}

/// A paste cut inside `0 models unloaded.` after a finished bar: a held model was being
/// brought back; a `loaded …` line after the bar is never a model requested before it.
#[test]
fn a_cut_unload_line_after_a_finished_bar_leaves_two_stages_open() {
    use crate::vocab::Stage;
    let text = "got prompt\nRequested to load Cosmos\nModel Cosmos prepared for dynamic VRAM loading. 9000MB Staged. 0 patches attached.\n100%|██████████| 6/6 [00:30<00:00,  5.00s/it]\n0 models";
    let d = crate::diagnose::diagnose_text(text).unwrap();
    assert_eq!(d.stage, Stage::Unknown, "{}", d.stage_evidence);
    assert_eq!(
        d.stage_candidates,
        [Stage::Unknown, Stage::SampleFirst, Stage::Decode]
    );
    let p = parse_input(&text.replace("0 models", "0 models unloaded.")).unwrap();
    assert_eq!(p.signals.last_model, None);
}

/// The patcher prints `Attempting to release mmap` once its partial load is done, then
/// moves the listed modules to the device and back: a non-memory error after it is in the
/// model's use (a text encoder: encoding), loading second.
#[test]
fn an_error_after_the_mmap_release_is_in_the_models_use() {
    let log = "got prompt\nRequested to load LTXAVTEModel_\nloaded partially; 8525.88 MB usable, 0.00 MB loaded, 12431.60 MB offloaded, 8563.80 MB buffer reserved, lowvram patches: 0\nAttempting to release mmap (290)\n!!! Exception during processing !!! mat1 and mat2 shapes cannot be multiplied (56x188160 and 3840x188160)\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 524, in execute\n    x()\nRuntimeError: mat1 and mat2 shapes cannot be multiplied (56x188160 and 3840x188160)\n";
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_eq!(
        d.stage,
        crate::vocab::Stage::Condition,
        "{}",
        d.stage_evidence
    );
    assert_eq!(
        d.stage_candidates,
        [crate::vocab::Stage::Condition, crate::vocab::Stage::Load]
    );
}

/// What follows `Prompt executed in …` is the next run, even without its `got prompt`
/// (a benchmark log of city96/ComfyUI-GGUF#427 that stops inside the next run).
#[test]
fn a_run_after_prompt_executed_is_its_own_segment() {
    let log = "Model LTXAV prepared for dynamic VRAM loading. 16918MB Staged. 0 patches attached.\n100%|##########| 3/3 [00:35<00:00, 11.72s/it]\nModel VideoVAE prepared for dynamic VRAM loading. 1384MB Staged. 0 patches attached.\nPrompt executed in 164.28 seconds\nModel LTXAV prepared for dynamic VRAM loading. 16918MB Staged. 0 patches attached.\n100%|##########| 5/5 [00:24<00:00,  4.81s/it]\n0 models";
    let p = parse_input(log).unwrap();
    assert!(p.signals.log_stopped);
    assert_eq!(p.signals.sampling_bar, Some((5, 5)));
    let d = crate::diagnose::diagnose_input(&p);
    assert_eq!(
        d.kind,
        crate::vocab::FailureKind::Unknown,
        "{}",
        d.kind_evidence
    );
    // …and a log that ends with `Prompt executed` is still no failure.
    let done = log
        .split("\nModel LTXAV")
        .take(2)
        .collect::<Vec<_>>()
        .join("\nModel LTXAV");
    let done = done.split("Prompt executed").next().unwrap().to_string()
        + "Prompt executed in 164.28 seconds\n";
    assert!(matches!(
        parse_input(&done),
        Err(ParseError::NoFailureInLog(_))
    ));
}

/// `model weight dtype …` starts reading a new model (ComfyUI's diffusion-model loader); a
/// log stopping there is loading, and the model requested earlier is not the one named.
#[test]
fn a_log_stopping_at_model_weight_dtype_is_loading() {
    let log = "gguf qtypes: F16 (694), Q4_K (356), Q5_K (44), F32 (1)\nmodel weight dtype torch.float16, manual cast: None\nmodel_type FLOW\nRequested to load WAN21\nModel WAN21 prepared for dynamic VRAM loading. 8339MB Staged. 400 patches attached.\n100%|##########| 2/2 [00:10<00:00,  5.09s/it]\ngguf qtypes: F16 (694), Q4_K (356), Q5_K (44), F32 (1)\nmodel weight dtype t";
    let p = parse_input(log).unwrap();
    assert!(
        matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(ref l)) if l.starts_with("model weight dtype"))
    );
    assert!(p.signals.last_model.is_none(), "{:?}", p.signals.last_model);
    let d = crate::diagnose::diagnose_input(&p);
    assert_eq!(d.stage, crate::vocab::Stage::Load, "{}", d.stage_evidence);
}

/// A crash with no Python error after the video VAE was staged, both sampling passes done
/// (ComfyUI#12998): the decode, read from the last model line before the crash.
#[test]
fn a_crash_after_a_staged_vae_is_the_decode() {
    let log = "100%|##########| 8/8 [00:44<00:00,  5.62s/it]\nRequested to load VideoVAE\nModel VideoVAE prepared for dynamic VRAM loading. 1384MB Staged. 0 patches attached.\nRequested to load LTXAV\nModel LTXAV prepared for dynamic VRAM loading. 23838MB Staged. 1660 patches attached.\n100%|##########| 3/3 [01:38<00:00, 32.90s/it]\nRequested to load AudioVAE\nloaded completely; 28630.57 MB usable, 693.46 MB loaded, full load: True\nRequested to load VideoVAE\n0 models unloaded.\nModel VideoVAE prepared for dynamic VRAM loading. 1384MB Staged. 0 patches attached.\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"I:\\Ai\\ComfyUI\\comfy\\ldm\\lightricks\\vae\\causal_video_autoencoder.py\", line 564 in forward_orig\n  File \"I:\\Ai\\ComfyUI\\comfy\\ldm\\lightricks\\vae\\causal_video_autoencoder.py\", line 572 in forward\n";
    let d = kind_of(log, FailureKind::ProcessKilled);
    assert_eq!(d.stage, crate::vocab::Stage::Decode, "{}", d.stage_evidence);
    assert!(
        d.stage_evidence.contains("before the crash"),
        "{}",
        d.stage_evidence
    );
}

/// SeedVR2's phase lines and its plain-words lines (`Decoding batch 1/1`): the last one
/// before the error is the console's tail.
#[test]
fn a_node_phase_line_is_the_tail() {
    let log = "got prompt\n[19:45:40.615]  ━━━━━━━━ Phase 3: VAE decoding ━━━━━━━━\n[19:45:40.763] 🎨 Decoding batch 1/1\n!!! Exception during processing !!! MPS backend out of memory (MPS allocated: 18.69 GB, other allocations: 113.43 GB, max allowed: 132.19 GB). Tried to allocate 128.00 MB on private pool.\n";
    let p = parse_input(log).unwrap();
    assert!(
        matches!(&p.signals.tail, Some(ConsoleTail::NodePhase(l)) if l.contains("Decoding batch 1/1")),
        "{:?}",
        p.signals.tail
    );
    let dit = "got prompt\n[19:44:30.528]  ━━━━━━━━ Phase 2: DiT upscaling ━━━━━━━━\n!!! Exception during processing !!! MPS backend out of memory (MPS allocated: 1 GB, other allocations: 1 GB, max allowed: 2 GB). Tried to allocate 128.00 MB on private pool.\n";
    assert_eq!(parse_input(dit).unwrap().signals.tail, None);
}

#[test]
fn finished_log_is_not_a_failure() {
    let err =
        parse_input("got prompt\n100%|██| 20/20 [00:01<00:00]\nPrompt executed in 3.1 seconds")
            .unwrap_err();
    assert!(matches!(err, ParseError::NoFailureInLog(_)));
}

/// A prompt refused by validation, then a later prompt that prints its own work and stops: the
/// paste is about the later run (no failure shown). One cut line after `got prompt` is no work.
#[test]
fn a_later_run_after_a_refused_prompt_is_what_the_paste_is_about() {
    let refused = "got prompt\nFailed to validate prompt for output 94:\n* Trellis2ImageToShape 93:\n  - Value 49152 bigger than max of 50: shape_sampling_steps\nOutput will be ignored\nPrompt executed in 0.00 seconds\n";
    let later = format!("{refused}got prompt\n[trellis2] Running conditioning...\n[TRELLIS2] Loading DinoV3 feature extractor...\n[ComfyUI-TRELLIS2] Remapping facebook/dinov\n");
    let d = kind_of(&later, FailureKind::Unknown);
    assert_eq!(d.stage.as_str(), "load", "{}", d.stage_evidence);
    kind_of(&format!("{refused}got prompt\nFai"), FailureKind::Other);
}

/// Start-up noise: a node pack's import traceback (its `__init__.py` at module level) and its
/// own `Error loading X.py: …` lines are no failure; cmd.exe's syntax error in a launcher is.
#[test]
fn a_packs_import_errors_are_noise_and_a_launchers_syntax_error_is_not() {
    let import = "Node `NunchakuFluxDiTLoader` import failed:\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/custom_nodes/ComfyUI-nunchaku/__init__.py\", line 82, in <module>\n    from .nodes.models.flux import NunchakuFluxDiTLoader\n  File \"/home/user/ComfyUI/custom_nodes/ComfyUI-nunchaku/nodes/models/flux.py\", line 16, in <module>\n    from nunchaku import NunchakuFluxTransformer2dModel\nModuleNotFoundError: No module named 'nunchaku'\n";
    assert!(crate::diagnose::diagnose_text(import).is_err());
    let pack = "[ComfyUI-Manager] default cache updated: https://api.comfy.org/nodes\nError loading AILab_ImageMaskTools.py: No module named 'cv2'\nError loading AILab_RMBG.py: No module named 'cv2'\n[ComfyUI-RMBG] v2.9.4 | 8 nodes Loaded\n";
    assert!(crate::diagnose::diagnose_text(pack).is_err());
    kind_of(
        "HIP_PATH = C:\\Program Files\\AMD\\ROCm\\6.4\\\n[INFO] Detected Git version: 2.47.1.windows.1\n\\ComfyUI-Zluda\\ was unexpected at this time.\n",
        FailureKind::Other,
    );
}

/// More of a node pack failing to import at start-up, as ComfyUI and the packs print it: nodes.py's
/// warning for a pack of the V3 API whose `comfy_entrypoint` raised, a pack's own `❌ [X]
/// Critical Import Error: …` above its import traceback (exception line cut), and numpy's check
/// failing the import of a module built against another numpy. None is a run's failure, and
/// none hides one.
#[test]
fn more_of_a_packs_import_failing_is_start_up_noise() {
    for log in [
        "[INFO]    0.3 seconds (IMPORT FAILED): /root/ComfyUI/custom_nodes/some-pack\n\n[WARNING] Error while calling comfy_entrypoint in /root/ComfyUI/custom_nodes/some-pack: '/mnt/shared/model.pt' is not in the subpath of '/root/ComfyUI/models'\n",
        "[WARNING] Error while calling comfy_entrypoint in /home/user/ComfyUI/custom_nodes/pack: 'x' is not in the subpath of '/home/user/ComfyUI/models'",
        "❌ [Some-TTS] Critical Import Error: cannot import name 'check_model_inputs' from 'transformers.utils.generic'\n   Traceback for debugging:\nTraceback (most recent call last):\n  File \"E:\\ComfyUI\\custom_nodes\\some-tts\\nodes.py\", line 91, in <module>\n    import some_tts\n  File \"E:\\ComfyUI\\custom_nodes\\some-tts\\some_tts\\model.py\", line 60, in <module>\n    from transformers.utils.generic import check_model_inputs\nImportError:\n",
        "module for custom nodes: numpy.core.multiarray failed to import\nRuntimeError: module compiled against ABI version 0x1000009 but this version of numpy is 0x2000000\nWAS Node Suite Warning: OpenCV Python module cannot be found. Attempting install...\n",
    ] {
        assert!(crate::diagnose::diagnose_text(log).is_err(), "{log}");
    }
    let run = "got prompt\n!!! Exception during processing !!! CUDA error: out of memory\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\ntorch.AcceleratorError: CUDA error: out of memory\n";
    let notice = "[WARNING] Error while calling comfy_entrypoint in /c/custom_nodes/pack: boom\n";
    kind_of(&format!("{notice}{run}"), FailureKind::CudaOom);
}

/// A node pack's import error read alone is start-up noise: the pack's `Error loading module
/// …` (in inline code), ComfyUI's `Cannot import … module for custom nodes: …`, its file named
/// with its path (`Error loading D:\…\X.py: …`), or its exception line with that `Cannot
/// import` notice right after it (no traceback pasted).
#[test]
fn a_packs_import_error_alone_is_start_up_noise() {
    for text in [
        "`Error loading module AILab_QwenVL: cannot import name 'AutoModelForVision2Seq' from 'transformers'`",
        "Cannot import /home/user/ComfyUI/custom_nodes/pack module for custom nodes: No module named 'x'",
        "Error loading D:\\ComfyUI\\custom_nodes\\ComfyUI-RMBG\\py\\AILab_SAM2Segment.py: No module named 'sam2'\n",
        "ImportError: DLL load failed while importing flash_attn_2_cuda: The specified procedure could not be found.\n\nCannot import C:\\comfy\\custom_nodes\\seedvr2_videoupscaler module for custom nodes: DLL load failed while importing flash_attn_2_cuda: The specified procedure could not be found.\n",
    ] {
        assert!(crate::diagnose::diagnose_text(text).is_err(), "{text}");
    }
    // The same exception line with no notice after it is the failure.
    kind_of(
        "ImportError: DLL load failed while importing flash_attn_2_cuda: The specified procedure could not be found.\n",
        FailureKind::Other,
    );
}

/// A traceback through ComfyUI's executor running a node is a run's failure, also when the
/// paste shows ComfyUI's start-up after it (as the frontend's error report above its log is),
/// with a node pack's import traceback in it: neither makes it a start-up error.
#[test]
fn a_run_traceback_above_a_start_up_is_the_failure() {
    let run = "Traceback (most recent call last):\n  File \"C:\\ComfyUI\\execution.py\", line 534, in execute\n    output_data = get_output_data(obj)\n  File \"C:\\ComfyUI\\execution.py\", line 334, in get_output_data\n    return_values = _async_map_node_over_list(obj)\nRuntimeError: coroutine raised StopIteration\n";
    let start = "\nImport times for custom nodes:\n   0.0 seconds: C:\\ComfyUI\\custom_nodes\\websocket_image_save.py\n\nStarting server\n";
    message_saying(
        &format!("{run}{start}"),
        FailureKind::Other,
        "coroutine raised StopIteration",
    );
    // The same above a pack's import traceback and ComfyUI's notice for it, in the frontend's
    // layout (the exception line above its frames) and in Python's.
    let pack = "Traceback (most recent call last):\n  File \"C:\\ComfyUI\\nodes.py\", line 2227, in load_custom_node\n    module_spec.loader.exec_module(module)\n  File \"C:\\ComfyUI\\custom_nodes\\pack\\nodes.py\", line 20, in <module>\n    import cv2\nModuleNotFoundError: No module named 'cv2'\n\nCannot import C:\\ComfyUI\\custom_nodes\\pack module for custom nodes: No module named 'cv2'\n";
    let dialog = "RuntimeError: coroutine raised StopIteration\n\n\n  File \"C:\\ComfyUI\\execution.py\", line 534, in execute\n    output_data = get_output_data(obj)\n\n  File \"C:\\ComfyUI\\execution.py\", line 334, in get_output_data\n    return_values = _async_map_node_over_list(obj)\n\n";
    for above in [dialog, run] {
        message_saying(
            &format!("{above}{pack}{start}"),
            FailureKind::Other,
            "coroutine raised StopIteration",
        );
    }
    assert!(crate::diagnose::diagnose_text(&format!("{pack}{start}")).is_err());
    // An import traceback of a pack followed by the start-up stays noise.
    let import = "Traceback (most recent call last):\n  File \"C:\\ComfyUI\\nodes.py\", line 2227, in load_custom_node\n    module_spec.loader.exec_module(module)\nModuleNotFoundError: No module named 'cv2'\n";
    assert!(crate::diagnose::diagnose_text(&format!("{import}{start}")).is_err());
}

/// Errors ComfyUI's server and start-up log and go on after (server.py, main.py of 0.28.2) are
/// no failure, as a paste's last line or with the traceback they print under them; the errors
/// after which it exits (its port taken, the database with `--enable-assets`) are.
#[test]
fn errors_the_server_logs_and_goes_on_after_are_no_failure() {
    each_no_failure_after_a_run(&[
        "Error processing WebSocket message: Expecting value: line 1 column 1 (char 0)",
        "send error: Cannot write to closing transport",
        "Failed to register uploaded image as asset\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/server.py\", line 448, in upload_image\n    result = register_file_in_place(abs_path=filepath)\nValueError: no asset root",
        "[ERROR] An error occurred during the on_prompt_handler processing\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/server.py\", line 1452, in trigger_on_prompt\n    json_data = handler(json_data)\nKeyError: 'x'",
        "Failed to execute startup-script: /home/user/ComfyUI/custom_nodes/pack/prestartup_script.py / No module named 'x'",
        "Failed to initialize database. Please ensure you have installed the latest requirements. If the error persists, please report this as in future the database will be required: No module named 'alembic'",
    ]);
    let start = "** ComfyUI startup time: 2026-07-01 10:00:00.000\n** Platform: Linux\nTotal VRAM 24000 MB, total RAM 64000 MB\nStarting server\n\n";
    each_a_start_up_failure(
        start,
        &[
            "Port 8188 is already in use on address 127.0.0.1. Please close the other application or use a different port with --port.",
            "Failed to initialize database: No module named 'alembic'",
        ],
    );
}

/// Errors ComfyUI catches and says how it goes on (ComfyUI 0.28.2's attention, VAE, multi-GPU
/// and preview code: another way, or without the part that failed), errors its asset scanner,
/// API stubs and file routes log with their traceback, and ComfyUI-Manager's background checks
/// are no failure, as a paste's last line or with the run going on after them; the start-up
/// errors after which ComfyUI exits are one.
#[test]
fn errors_comfy_catches_and_goes_on_after_are_no_failure() {
    let run = MID_RUN;
    let after = "100%|██████████| 20/20 [00:41<00:00,  2.05s/it]\nRequested to load AutoencodingEngine\nloaded completely 2000.0 159.8 True\nPrompt executed in 62.41 seconds\n";
    for notice in [
        "Error running sage attention: No module named 'sageattention', using pytorch attention instead.",
        "Error running SageAttention3: CUDA error: invalid argument, falling back to pytorch attention.",
        "ran out of memory while running softmax in  _get_attention_scores_no_kv_chunking, trying slower in place softmax instead",
        "Select Model Device: cannot retarget model, passing through unchanged. (CUDA error: out of memory)",
        "TripoSplatSamplingPreview: preview failed, disabling (CUDA out of memory. Tried to allocate 2.00 GiB)",
        "Failed to import comfy_kitchen, Error: DLL load failed while importing _C, fp8 and fp4 support will not be available.",
        "Calculate Weight Failed: lora diffusion_model.blocks.0.attn.qkv.weight",
        "Failed to enrich output entry with asset id: ComfyUI_00001_.png\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/comfy_execution/asset_enrichment.py\", line 58, in enrich\n    aid = register(entry)\nsqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked",
        "Asset scan failed\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/app/assets/seeder.py\", line 620, in _run\n    self._scan()\nPermissionError: [Errno 13] Permission denied: '/home/user/ComfyUI/models/x'",
        "Error generating stub file for ComfyAPISync: [Errno 13] Permission denied: 'x.pyi'\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/comfy_api/internal/async_to_sync.py\", line 972, in create_stub_file\n    with open(sync_stub_path, \"w\") as f:\nPermissionError: [Errno 13] Permission denied: 'x.pyi'",
        "Error listing directory /home/user/ComfyUI/user/default/workflows: [Errno 13] Permission denied",
        "Error saving file '/home/user/ComfyUI/user/default/workflows/a.json': [Errno 28] No space left on device",
        "Error loading /home/user/ComfyUI/custom_nodes/pack/example_workflows/bad.json",
        "Failed to hash /home/user/ComfyUI/models/loras/x.safetensors: [Errno 5] Input/output error",
        "[ComfyUI-Manager] Failed to check state of the git node pack: /home/user/ComfyUI/custom_nodes/pack",
        "Fetch error: /home/user/ComfyUI/custom_nodes/pack",
    ] {
        kind_of(&format!("{run}{notice}\n"), FailureKind::Unknown);
        // the run finished after it: nothing failed
        assert!(
            crate::diagnose::diagnose_text(&format!("{run}{notice}\n{after}")).is_err(),
            "{notice}"
        );
    }
    // Real failures whose words are near those: exceptions saying what they got `instead` or
    // naming a `fallback`, an asynchronous CUDA error as the paste's last line.
    message_saying(
        &format!("{run}!!! Exception during processing !!! Expected 4-dimensional input for 4-dimensional weight [320, 4, 3, 3], but got 3-dimensional input of size [4, 64, 64] instead\n"),
        FailureKind::Other,
        "instead",
    );
    message_saying(
        &format!("{run}RuntimeError: no fallback kernel for this dtype, use fp16 instead\n"),
        FailureKind::Other,
        "no fallback kernel",
    );
    kind_of(
        &format!("{run}CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"),
        FailureKind::CudaOom,
    );
    let start = "** ComfyUI startup time: 2026-07-01 10:00:00.000\n** Platform: Linux\nTotal VRAM 24000 MB, total RAM 64000 MB\n";
    each_a_start_up_failure(start, &[
        "********** ERROR ***********\n\ncomfyui-frontend-package is not installed.\n\nPlease install the updated requirements.txt file by running:\n/usr/bin/python3 -m pip install -r requirements.txt\n\n********** ERROR ***********",
        "Database is locked. Another ComfyUI process is already using this database.\nTo resolve this, specify a separate database file for this instance:\n  --database-url sqlite:///path/to/another.db",
        "Failed to initialize database: (sqlite3.OperationalError) unable to open database file\nThe --enable-assets flag requires a working database connection.",
    ]);
}

/// A live preview failing is no failure of the run (ComfyUI-KJNodes' preview override logs its
/// decoder's errors, out-of-memory included, and the run goes on); nor is comfy's `sd1_clip`
/// printing an embedding's traceback before `error loading embedding, skipping loading: …`.
/// A pack saying some of its nodes will be unavailable is start-up noise.
#[test]
fn a_preview_or_an_embedding_failing_is_no_failure() {
    each_no_failure_after_a_run(&[
        "[KJ PreviewOverride] LTX VAE decode failed: CUDA out of memory. Tried to allocate 2.00 GiB",
        "LTX preview decode failed: CUDA error: out of memory",
        "Preview override failed: 'NoneType' object has no attribute 'shape'",
        "Active previewer raised, trying Latent2RGB fallback: CUDA out of memory",
        "KJNodes: LTXV nodes could not be imported. LTXV nodes will be unavailable. Error: No module named 'x'",
        "Traceback (most recent call last):\n  File \"/c/comfy/sd1_clip.py\", line 455, in load_embed\n    embed = safe_load_embed_zip(embed_path)\nzipfile.BadZipFile: File is not a zip file\n\n\nerror loading embedding, skipping loading: easynegative",
    ]);
    // An app's own preview run refused is a failure, and so is a preview node's error in the
    // dialog form.
    kind_of(
        "Preview failed: Media generation failed: Submit workflow failed: [400] {\"error\": {\"type\": \"missing_node_type\"}}\n",
        FailureKind::Other,
    );
    // A node's own failure that names a preview node is still read (the dialog form).
    kind_of(
        "PreviewImage\nCUDA error: out of memory\n",
        FailureKind::CudaOom,
    );
}
