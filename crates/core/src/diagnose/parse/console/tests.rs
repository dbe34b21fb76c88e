//! Unit tests of the console parser.

use super::super::parse_input;
use crate::diagnose::RunOutcomeHint;
use crate::diagnose::{ConsoleTail, Diagnosis, ParseError};
use crate::vocab::FailureKind;

/// `log` diagnosed as a pasted text, asserted to be of `kind`.
fn kind_of(log: &str, kind: FailureKind) -> Diagnosis {
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_eq!(d.kind, kind, "{}", d.kind_evidence);
    d
}
/// `kind_of`, and the kind's evidence names each of `words`.
fn kind_saying(log: &str, kind: FailureKind, words: &[&str]) {
    let d = kind_of(log, kind);
    for w in words {
        assert!(d.kind_evidence.contains(w), "{w}: {}", d.kind_evidence);
    }
}
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

/// PyTorch's terminate handler (c10/util/AbortHandler.h) prints this, then aborts.
#[test]
fn pytorch_abort_handler_is_a_death() {
    let log = "Checkpoint files will always be loaded safely.\nUnhandled exception caught in c10/util/AbortHandler.h\n00007FFA79B2A9BC00007FFA79B19EB0 torch_python.dll!initModule [<unknown file> @ <unknown line number>]\n";
    kind_of(log, FailureKind::ProcessKilled);
}

/// bash's report of a killed child, with the command after `Killed`.
#[test]
fn a_shell_job_line_is_a_death() {
    kind_of("app | /home/x/entrypoint.sh: line 42:     8 Killed                  python3 ./ComfyUI/main.py --listen\n", FailureKind::ProcessKilled);
    kind_of(
        "[1]+  Killed                  python main.py\n",
        FailureKind::ProcessKilled,
    );
}

/// comfy_aimdo.control.init() logs its load error; ComfyUI then falls back. With no run
/// failure in the text, that is the failure; the fall-back notice alone is none.
#[test]
fn aimdo_start_up_load_error_is_aimdo_and_the_fallback_notice_is_nothing() {
    let log = "Total VRAM 8192 MB\ncomfy-aimdo failed to load: libcuda.so.1: cannot open shared object file: No such file or directory\nNOTE: comfy-aimdo is currently only support for Nvidia GPUs\nNo working comfy-aimdo install detected. DynamicVRAM support disabled. Falling back to legacy ModelPatcher.\nStarting server\n";
    kind_of(log, FailureKind::Aimdo);
    assert!(parse_input("No working comfy-aimdo install detected. DynamicVRAM support disabled. Falling back to legacy ModelPatcher.\n").is_err());
    assert!(parse_input("IMPORT FAILED: nodes_glsl.py\n").is_err());
}

/// A paste of only the message is read by its wording; the frontend's dialog puts the node
/// type over it.
#[test]
fn a_message_alone_is_read_by_its_wording() {
    kind_of("> Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64.\n", FailureKind::Other);
    let d = kind_of(
        "SaveVideo\n[Errno 22] Invalid argument: 'avcodec_send_frame()'\n",
        FailureKind::Other,
    );
    assert_eq!(d.node_type.as_deref(), Some("SaveVideo"));
    kind_of("VAEDecode\nAllocation on device\n", FailureKind::CudaOom);
    // hard-wrapped: still one message
    kind_of("SaveVideo\n[Errno 22] Invalid argument: 'avcodec_send_frame()'; last error log: [aac] Input c\nontains (near) NaN/+-Inf\n", FailureKind::Other);
    // prose is no message
    assert!(parse_input("my workflow is slow, any idea?\nthanks\n").is_err());
}

/// The error report pasted as rendered text: no bullets, no bold.
#[test]
fn a_rendered_error_report_is_read_like_the_markdown() {
    let log = "ComfyUI Error Report\nError Details\nNode ID: 125\nNode Type: SamplerCustomAdvanced\nException Type: RuntimeError\nException Message: RuntimeError: a helper is missing\nStack Trace\n  File \"/c/execution.py\", line 545, in execute\n    x()\n";
    let p = parse_input(log).unwrap();
    assert_eq!(
        p.evidence.node_type.as_deref(),
        Some("SamplerCustomAdvanced")
    );
    assert_eq!(
        p.evidence.exception_message.as_deref(),
        Some("RuntimeError: a helper is missing")
    );
    kind_of(log, FailureKind::Other);
    // generateErrorReport writes N/A for a field the error lacks
    let na = "# ComfyUI Error Report\n## Error Details\n- **Node ID:** N/A\n- **Node Type:** N/A\n- **Exception Type:** torch.OutOfMemoryError\n- **Exception Message:** Allocation on device\n## Stack Trace\n";
    let p = parse_input(na).unwrap();
    assert_eq!(p.evidence.node_type, None);
    assert_eq!(p.evidence.node_id, None);
    kind_of(na, FailureKind::CudaOom);
}

/// An error printed in words with no exception after it is the failure; one the run got
/// past (more work after it, `Prompt executed`) or one a death follows is not.
#[test]
fn an_error_printed_in_words_is_the_failure_unless_the_run_went_on() {
    let log =
        "got prompt\nRequested to load SDXL\nrocBLAS error: Could not initialize Tensile host\n";
    let d = kind_of(log, FailureKind::Other);
    assert!(d.message.unwrap().starts_with("rocBLAS error"));
    kind_of("got prompt\n 10%|#   | 1/10 [00:01<00:09]\n❌ [ERROR] Error in Phase 1 (Encoding): CUDA out of memory\n", FailureKind::CudaOom);
    let past = "got prompt\nrocBLAS error: retrying\n 50%|#####     | 10/20 [00:10<00:10]\n";
    assert_eq!(
        crate::diagnose::diagnose_text(past).unwrap().kind,
        FailureKind::Unknown
    );
    assert!(
        parse_input("got prompt\nrocBLAS error: x\nPrompt executed in 3.00 seconds\n").is_err()
    );
    kind_of(
        "got prompt\nrocBLAS error: x\nFatal Python error: Aborted\n",
        FailureKind::ProcessKilled,
    );
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
fn aimdo_error_line_alone_is_its_own_kind() {
    // Format of ComfyUI issue #12943 (comfy-aimdo's C logger, no Python exception).
    let log = "got prompt\nModel WAN21 prepared for dynamic VRAM loading. 13650MB Staged. 0 patches attached.\n 10%|#         | 2/20 [00:20<03:00, 10.00s/it]\naimdo: src/model-vbar.c:307:ERROR:VRAM Allocation failed (non OOM)\n";
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_eq!(d.kind, crate::vocab::FailureKind::Aimdo, "{d:?}");
}

#[test]
fn fatal_python_error_aborted_is_a_death() {
    let log = "got prompt\nRequested to load WAN21\n 50%|#####     | 10/20 [01:40<01:40, 10.00s/it]\nFatal Python error: Aborted\n";
    let p = parse_input(log).unwrap();
    assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::ServerLost));
    assert_eq!(
        p.signals.death.as_deref(),
        Some("Fatal Python error: Aborted")
    );
    let d = crate::diagnose::diagnose_input(&p);
    assert_eq!(d.kind, crate::vocab::FailureKind::ProcessKilled);
    assert_eq!(d.stage, crate::vocab::Stage::SampleMiddle, "{d:?}");
}

#[test]
fn killed_after_shard_loading() {
    let log = "Loading text encoder model (vlm) from: /x\nLoading checkpoint shards:  75%|█████▎  | 3/4 [01:34<00:31, 31.54s/it]Killed";
    let p = parse_input(log).unwrap();
    assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::ServerLost));
    assert!(p.signals.death.is_some());
    assert!(matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(_))));
}

#[test]
fn frontend_one_line_form_names_the_node() {
    let p = parse_input("KSampler : XPU out of memory. Tried to allocate 128.00 GiB. GPU 0 has a total capacity of 15.56 GiB.").unwrap();
    assert_eq!(p.evidence.node_type.as_deref(), Some("KSampler"));
    assert!(p
        .evidence
        .exception_message
        .unwrap()
        .starts_with("XPU out of memory"));
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

/// A fault handler's stack with its `Windows fatal exception` / `Fatal Python error` line cut
/// away: `Current thread 0x…` is only printed by a thread dumping itself (a fatal error),
/// `Thread 0x…` and `Stack …` also by the hang watchdog (labelling rule 3: no death sign).
/// Either way the stack (most recent call first) places the stage.
#[test]
fn a_fault_handler_stack_header_is_a_death_only_when_it_names_the_current_thread() {
    use crate::vocab::{FailureKind, Stage};
    for (header, kind) in [
        (
            "Current thread 0x00001a2b (most recent call first):",
            FailureKind::ProcessKilled,
        ),
        (
            "Thread 0x00007f3e (most recent call first):",
            FailureKind::Unknown,
        ),
        ("Stack (most recent call first):", FailureKind::Unknown),
    ] {
        let log = format!("got prompt\n{header}\n  File \"/c/comfy/utils.py\", line 136 in load_torch_file\n  File \"/c/comfy/sd.py\", line 9 in load_clip\n  File \"/c/execution.py\", line 3 in execute\n");
        let d = crate::diagnose::diagnose_text(&log).unwrap();
        assert_eq!(d.kind, kind, "{header}: {}", d.kind_evidence);
        assert_eq!(d.stage, Stage::Load, "{header}: {}", d.stage_evidence);
    }
}

/// A client quoting the server's validation refusal is read as the failure (kind `other`,
/// no stage: nothing ran).
#[test]
fn a_quoted_validation_refusal_is_the_failure() {
    use crate::vocab::{FailureKind, Stage};
    let text = "Server error: {'type': 'invalid_prompt', 'message': 'Cannot execute because node FancySampler does not exist.', 'details': \"Node ID '#4'\", 'extra_info': {}}";
    let d = crate::diagnose::diagnose_text(text).unwrap();
    assert_eq!(d.kind, FailureKind::Other, "{}", d.kind_evidence);
    assert_eq!(d.stage, Stage::Unknown, "{}", d.stage_evidence);
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

/// A traceback cut before its exception line, after a device guard's warning: the warning
/// names the error; without frames the warning alone is no failure.
#[test]
fn a_guard_warning_names_the_error_of_a_cut_traceback() {
    use crate::vocab::FailureKind;
    let warning = "/c/comfy/k_diffusion/sampling.py:70: UserWarning: CUDA warning: an illegal memory access was encountered (Triggered internally at /pytorch/c10/cuda/impl/CUDAGuardImpl.h:119.)";
    let text = format!("got prompt\n{warning}\nException in thread Thread-3 (prompt_worker):\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 496, in execute\n");
    let d = crate::diagnose::diagnose_text(&text).unwrap();
    assert_eq!(d.kind, FailureKind::Other, "{}", d.kind_evidence);
    assert_eq!(
        d.message.as_deref(),
        Some("an illegal memory access was encountered")
    );
    let p = parse_input(&format!("got prompt\n{warning}\n")).unwrap();
    assert!(p.evidence.exception_message.is_none());
}

/// Issue #40: only aimdo warnings between sampler steps, then nothing.
#[test]
fn aimdo_warnings_between_steps_then_nothing_is_mid_sampling_not_killed() {
    use crate::vocab::{FailureKind, Stage};
    let log = "got prompt\nModel Flux2 prepared for dynamic VRAM loading. 17316MB Staged. 0 patches attached.\n  0%|          | 0/20 [00:00<?, ?it/s,   Model Initializing ...  ]aimdo: src/model-vbar.c:74:WARNING:VBAR 0000024A04168030: Page 519 pin_count=4\n  5%|#         | 1/20 [00:11<03:31, 11.13s/it,  Model Initialization complete!  ]aimdo: src/model-vbar.c:74:WARNING:VBAR 0000024A04168030: Page 519 pin_count=4\n";
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_ne!(d.kind, FailureKind::ProcessKilled, "{}", d.kind_evidence);
    assert_eq!(d.stage, Stage::SampleMiddle, "{}", d.stage_evidence);
    let first = log.split("  5%").next().unwrap();
    let d = crate::diagnose::diagnose_text(first).unwrap();
    assert_eq!(d.stage, Stage::SampleFirst, "{}", d.stage_evidence);
}

/// Issue #40: the signs that the process died still make it `process_killed`.
#[test]
fn death_signs_other_than_killed() {
    use crate::vocab::FailureKind;
    for end in [
        "Process exited with code 1",
        "exit code: -9",
        "请按任意键继续. . .",
        "Starting server\n\nTo see the GUI go to: http://127.0.0.1:8188",
    ] {
        let log = format!("got prompt\nRequested to load WAN21\n{end}\n");
        let d = crate::diagnose::diagnose_text(&log).unwrap();
        assert_eq!(
            d.kind,
            FailureKind::ProcessKilled,
            "{end}: {}",
            d.kind_evidence
        );
    }
}

/// Windows' Application Error record (event 1000) is a crash; the faulting module names
/// whose code it was in (comfy-aimdo#48: `aimdo.dll`, a stack overflow).
#[test]
fn a_windows_crash_record_is_a_death_and_names_its_module() {
    use crate::vocab::FailureKind;
    let record = |module: &str| {
        format!("Faulting application: python.exe (3.13.11150.1013)\nFaulting module:      {module} (0.0.0.0, timestamp 0x69ea3089)\nException code:       0xc00000fd\n")
    };
    let d = crate::diagnose::diagnose_text(&record("aimdo.dll")).unwrap();
    assert_eq!(d.kind, FailureKind::Aimdo, "{}", d.kind_evidence);
    let d = crate::diagnose::diagnose_text(&record("ucrtbase.dll")).unwrap();
    assert_eq!(d.kind, FailureKind::ProcessKilled, "{}", d.kind_evidence);
}

/// comfy-aimdo#74: its hook-setup ERROR, broken after the location, with no exception.
#[test]
fn an_aimdo_error_broken_over_two_lines_is_aimdo() {
    let log = "aimdo: /project/src-posix/cuda-funchooks.c:37:\nERROR:aimdo_setup_hooks:\nfunchook_prepare(cuMemAlloc_v2) failed: 8\n\n[WARNING] No working comfy-aimdo install detected.\nDynamicVRAM support disabled.\n";
    kind_of(log, FailureKind::Aimdo);
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

/// Issue #40: any aimdo ERROR line wins over the message it precedes.
#[test]
fn an_aimdo_error_line_wins_over_a_plain_message() {
    let log = "got prompt\nModel AutoencoderKL prepared for dynamic VRAM loading. 159MB Staged. 0 patches attached.\naimdo: src/vrambuf.c:42:ERROR:vrambuf_create: 0 16777216k\n!!! Exception during processing !!! VRAM reservation failed\n";
    let d = kind_of(log, FailureKind::Aimdo);
    assert_eq!(
        d.stage,
        crate::vocab::Stage::Condition,
        "{}",
        d.stage_evidence
    );
    // Warnings are not errors.
    assert!(!super::is_aimdo_error(
        "aimdo: src/model-vbar.c:74:warning:vbar 0: page 519"
    ));
}

/// Issue #40: aimdo's own error line wins over the generic RuntimeError wrapping it.
#[test]
fn the_specific_aimdo_line_wins_over_its_wrapper() {
    let log = "got prompt\naimdo: src/model-vbar.c:307:ERROR:VRAM Allocation failed (non OOM)\n!!! Exception during processing !!! VRAM Allocation failed\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\nRuntimeError: VRAM Allocation failed\n";
    kind_of(log, FailureKind::Aimdo);
}

/// comfy-aimdo's ERROR line alone (comfy-aimdo#61, a file read for weight streaming) is
/// the failure, with no Python exception after it.
#[test]
fn an_aimdo_error_line_alone_is_the_failure() {
    let log = "[ERROR] aimdo: src-win/xfer-file-plat.c:43:ERROR:xfer_file_read_at: GetOverlappedResult failed error=1450 handle=0000000000001774 offset=11673711531 size=2097152\n";
    let d = kind_of(log, FailureKind::Aimdo);
    assert!(d.message.unwrap().contains("xfer_file_read_at"));
}

/// The launcher's pause after a run ended is the process exiting, not the run's failure:
/// the run's own exception is the answer.
#[test]
fn an_exit_after_a_finished_run_does_not_hide_its_error() {
    let log = "got prompt\n!!! Exception during processing !!! CUDA error: an illegal memory access was encountered\ntorch.AcceleratorError: CUDA error: an illegal memory access was encountered\n\nPrompt executed in 48.03 seconds\n\nC:\\ComfyUI_windows_portable>pause\nPress any key to continue . . .\n";
    let parsed = parse_input(log).unwrap();
    assert_eq!(
        parsed.evidence.exception_type.as_deref(),
        Some("torch.AcceleratorError")
    );
    assert!(parsed.signals.death.is_none(), "{:?}", parsed.signals.death);
    // With no error before it, the pause after a run is still read as the process ending.
    let quiet = "got prompt\nPrompt executed in 3.00 seconds\nPress any key to continue . . .\n";
    assert!(parse_input(quiet).unwrap().signals.death.is_some());
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
fn a_quoted_execution_error_names_its_node() {
    let log = "RuntimeError: [\"execution_error\", {\"prompt_id\": \"e1\", \"node_id\": \"9050\", \"node_type\": \"CLIPLoaderGGUF\", \"executed\": [\"9056\"], \"exception_message\": \"Unexpected text model architecture type in GGUF file: 'gemma4'\\n\", \"exception_type\": \"ValueError\", \"traceback\": [\"  File \\\"execution.py\\\", line 545";
    let p = parse_input(log).expect("parses");
    assert_eq!(p.evidence.node_type.as_deref(), Some("CLIPLoaderGGUF"));
}

#[test]
fn finished_log_is_not_a_failure() {
    let err =
        parse_input("got prompt\n100%|██| 20/20 [00:01<00:00]\nPrompt executed in 3.1 seconds")
            .unwrap_err();
    assert!(matches!(err, ParseError::NoFailureInLog(_)));
}

// Round six (issue #40): rules read from what the programs print.

#[test]
fn a_windows_fault_the_process_survived_is_no_death() {
    // faulthandler's vectored handler reports the access violation, the process handles it
    // and goes on loading: no death sign, and the frames without an exception name no kind.
    let log = "got prompt\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"C:\\ComfyUI\\comfy\\ops.py\", line 549 in _load_from_state_dict\n  File \"C:\\ComfyUI\\execution.py\", line 344 in get_output_data\n[INFO] Using split attention in VAE\n[INFO] Requested to load SD1ClipModel\n[INFO] loaded completely;  235.84 MB loaded, full load: True\n";
    let d = kind_of(log, FailureKind::Unknown);
    assert!(!d.kind_evidence.contains("died"), "{}", d.kind_evidence);
    // The same fault as the last thing the process printed is a death.
    let last = "got prompt\n[INFO] Requested to load SD1ClipModel\n[INFO] loaded completely;  235.84 MB loaded, full load: True\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"C:\\ComfyUI\\comfy\\ops.py\", line 549 in forward\n";
    kind_of(last, FailureKind::ProcessKilled);
}

#[test]
fn a_fault_handler_stack_without_its_header_is_no_death_sign() {
    let stack = "  File \"C:\\ComfyUI\\comfy\\ldm\\flux\\layers.py\", line 235 in forward\n  File \"C:\\ComfyUI\\execution.py\", line 306 in process_inputs\n";
    // `Stack (most recent call first):` is also the hang watchdog's header.
    kind_of(
        &format!("Stack (most recent call first):\n{stack}"),
        FailureKind::Unknown,
    );
    // `Current thread 0x…` is printed only by a thread dumping itself: a fatal error.
    kind_of(
        &format!("Current thread 0x00006d3c (most recent call first):\n{stack}"),
        FailureKind::ProcessKilled,
    );
}

#[test]
fn a_fatal_abort_after_the_error_is_the_failure() {
    // libstdc++'s terminate handler prints the uncaught C++ exception, then aborts.
    let log = "got prompt\n 12%|█         | 1/8 [01:03<07:26, 63.75s/it]\nterminate called after throwing an instance of 'c10::AcceleratorError'\n  what():  CUDA error: an illegal memory access was encountered\n\nFatal Python error: Aborted\n\nStack (most recent call first):\n  File \"/c/comfy/ldm/model.py\", line 1 in forward\n";
    kind_saying(
        log,
        FailureKind::ProcessKilled,
        &["Fatal Python error: Aborted", "illegal memory access"],
    );
    // A Python exception that ends the interpreter (exit code 1) keeps its own kind.
    let exit = "Traceback (most recent call last):\n  File \"/c/run.py\", line 53, in wait\n    raise RuntimeError(\"ComfyUI did not become ready\")\nRuntimeError: ComfyUI did not become ready at http://127.0.0.1:8188 within 180s\nProcess finished with exit code 1.\n";
    kind_of(exit, FailureKind::Other);
}

#[test]
fn a_death_sign_hard_wrapped_across_lines_is_read() {
    let log = "got prompt\n  0%|          | 0/2 [00:00<?, ?it/s,   Model Initializing ...  ]Fatal Python\n error: Aborted\n";
    kind_of(log, FailureKind::ProcessKilled);
}

#[test]
fn systemd_coredump_records_a_death() {
    let log = "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000. Reason: Page not present or supervisor privilege.\nJan 09 18:55:45 host systemd-coredump[134090]: Process 91762 (python) of user 60105 terminated abnormally with signal 6/ABRT, processing...\n";
    kind_of(log, FailureKind::ProcessKilled);
    // Without it, the HSA runtime's page fault report is the failure, not a memory one.
    kind_of(
        "Memory access fault by GPU node-1 (Agent handle: 0x563f6f3b7420) on address 0x7f88b5c01000. Reason: Page not present or supervisor privilege.\nGPU core dump created: gpucore.7155\n",
        FailureKind::Other,
    );
}

#[test]
fn comfyuis_got_an_oom_line_names_a_cuda_oom_whose_line_was_cut() {
    let log = "got prompt\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\n\nGot an OOM, unloading all loaded models.\nPrompt executed in 9.00 seconds\n";
    kind_saying(log, FailureKind::CudaOom, &["Got an OOM"]);
}

#[test]
fn errors_nodes_clients_and_launchers_print_in_words() {
    for log in [
        "got prompt\nLoading Turbo TTS model on cuda...\nAn unexpected error occurred during Turbo TTS: S3Token2Wav.__init__() got an unexpected keyword argument 'meanflow'\n",
        "[INFO] got prompt\n[DEBUG] process_images : 0.030s\n[ERROR] Inference failed:\nFailed to load model from file: D:\\models\\llm.gguf\n",
        "Missing Node Packs (1)\nThis workflow uses custom nodes you haven't installed yet.\n\nUnknown pack (1)\n\nMiniMaxH3ImageToVideo\n",
        "\"Error - ComfyUI execution error: Falscher Parameter.\"\n20:53:52.958 [Info] Us\n",
        "K:\\ComfyUI>python.exe main.py\nFatal error in launcher: Unable to create process using '\"python.exe\" \"offload-arch.exe\"'\n\n[WARNING] offload-arch failed with return code 1\n",
    ] {
        kind_of(log, FailureKind::Other);
    }
}

#[test]
fn an_error_reports_title_alone_is_no_failure() {
    let cut = "节点在执行过程中发生错误。\n\n# ComfyUI Error Report\n";
    assert!(crate::diagnose::diagnose_text(cut).is_err());
}

#[test]
fn a_user_space_oom_killer_ending_comfyui_is_a_death() {
    let log = "Aug 04 10:39:10 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%\nAug 04 10:39:10 debian earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3.13\": oom_score 1282, VmRSS 29931 MiB, cmdline \"/home/user/env/bin/python3.13 main.py --listen 0.0.0.0\"\nAug 04 10:39:12 debian earlyoom[845]: process 322603 exited after 2.805 seconds\n";
    kind_saying(log, FailureKind::ProcessKilled, &["out-of-memory killer"]);
}

#[test]
fn a_custom_node_import_error_alone_is_start_up_noise() {
    for log in [
        "`Error loading module AILab_QwenVL: cannot import name 'AutoModelForVision2Seq' from 'transformers'`",
        "Cannot import /home/user/ComfyUI/custom_nodes/pack module for custom nodes: No module named 'x'",
    ] {
        assert!(crate::diagnose::diagnose_text(log).is_err(), "{log}");
    }
}

#[test]
fn the_error_dialog_with_a_required_input_message_is_read() {
    let d = kind_of(
        "LTXVAudioVAELoader\nMetadata is required for audio VAE\n",
        FailureKind::Other,
    );
    assert_eq!(d.node_type.as_deref(), Some("LTXVAudioVAELoader"));
}

/// Labelling rule 1: a log whose last line is an error printed in words, in a shape no node's
/// own pattern knows, fails with that error; the same words in prose, an adapter's `ERROR lora`
/// line or a custom node's import notice are no failure.
#[test]
fn a_log_ending_on_an_error_in_words_fails_with_it() {
    for (log, message) in [
        (
            "got prompt\nRequested to load WanTEModel\nloaded completely 9000 6000 True\nFailed to load the tokenizer from /models/umt5\n",
            "Failed to load the tokenizer from /models/umt5",
        ),
        (
            "2026-05-02 10:11:12 got prompt\n2026-05-02 10:11:13 [MyNode] Error while running the pipeline - no frames returned\n",
            "[MyNode] Error while running the pipeline - no frames returned",
        ),
        (
            "Loading the model\nUsing device cuda:0\nstep 3 of 9\nDownload failed with code 403\n",
            "Download failed with code 403",
        ),
    ] {
        let d = kind_of(log, FailureKind::Other);
        let p = parse_input(log).unwrap();
        assert!(
            p.evidence
                .exception_message
                .as_deref()
                .is_some_and(|m| m.ends_with(message)),
            "{log}: {:?} ({})",
            p.evidence.exception_message,
            d.kind_evidence
        );
    }
    for stopped in [
        "got prompt\nRequested to load Flux\nloaded partially 4000 3700 0\nERROR lora diffusion_model.out.weight unsupported operand type(s) for *: 'NoneType' and 'float'\n",
        "Loading the model\nUsing device cuda:0\n## Additional Context\n(Please add any additional context or steps to reproduce the error here)\n",
    ] {
        kind_of(stopped, FailureKind::Unknown);
    }
    for no_failure in [
        "Thanks in advance\nI tried it twice\nThe error here is the same as before\n",
        "[INFO] 0.0 seconds (IMPORT FAILED): /home/user/ComfyUI/custom_nodes/a\n[INFO] 0.0 seconds: /home/user/ComfyUI/custom_nodes/b\n[INFO] 0.0 seconds (IMPORT FAILED): /home/user/ComfyUI/custom_nodes/c\n",
    ] {
        assert!(
            crate::diagnose::diagnose_text(no_failure).is_err(),
            "{no_failure}"
        );
    }
}

/// Labelling rule 4: a paste that stops one letter into the exception's message shows no
/// wording of the error; the same line whole, or a cut type that names a memory error, still
/// counts by what it shows.
#[test]
fn an_exception_line_cut_in_its_first_word_names_no_error() {
    let frames = "got prompt\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\n  File \"/c/torch/nn/functional.py\", line 2567, in embedding\n    return torch.embedding(weight, input)\n";
    kind_of(
        &format!("{frames}torch.AcceleratorError: C"),
        FailureKind::Unknown,
    );
    kind_of(
        &format!("{frames}torch.AcceleratorError: CUDA error: invalid device function\n"),
        FailureKind::Other,
    );
    kind_of(
        &format!("{frames}torch.OutOfMemoryError: C"),
        FailureKind::CudaOom,
    );
    // Not at the end of the text: a one-letter message the run printed whole.
    kind_of(
        &format!("{frames}ValueError: x\n\nPrompt executed in 1.00 seconds\n"),
        FailureKind::Other,
    );
}

/// The frontend's error dialog: the node's class, its title in the user's language, and a
/// message of one or several lines (a translated page prints `RuntimeError：` with a full-width
/// colon); a message in Python's own wording alone is read too.
#[test]
fn error_dialogs_and_python_wordings_are_read() {
    let d = kind_of(
        "CLIPLoader\nError(s) in loading state_dict for Llama2:\nsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([151936, 2560]) from checkpoint, the shape in current model is torch.Size([128256, 4096]).\nsize mismatch for model.norm.weight: copying a param with shape torch.Size([2560]) from checkpoint, the shape in current model is torch.Size([4096]).\n",
        FailureKind::Other,
    );
    assert_eq!(d.node_type.as_deref(), Some("CLIPLoader"));
    let d = kind_of(
        "CLIPTextEncode\nCLIP文本编码\n\nRuntimeError：mat1 和 mat2 形状无法相乘（1024x3840 和 1920x4096）\n",
        FailureKind::Other,
    );
    assert_eq!(d.node_type.as_deref(), Some("CLIPTextEncode"));
    for message in [
        "'Linear' object has no attribute 'weight_scale'",
        "module 'comfy.ldm.minimax.model' has no attribute 'time_shift_slope'",
        "copying a param with shape torch.Size([262208, 3840]) from checkpoint, the shape in current model is torch.Size([262208, 2304]).",
    ] {
        kind_of(message, FailureKind::Other);
    }
}

/// A browser-translated error report (Chinese field names, full-width colons) names its node
/// and error like the English one.
#[test]
fn a_translated_error_report_is_read() {
    let report = "# ComfyUI 错误报告\n## 错误详情\n- **节点 ID：** 71\n- **节点类型：** FB_Qwen3TTSDialogueInference\n- **异常类型：**运行时错误\n- **异常信息：** 分块推理期间对话生成失败：'dict' 对象没有属性 'ref_spk_embedding'\n\n## 堆栈跟踪\n";
    let d = kind_of(report, FailureKind::Other);
    assert_eq!(d.node_type.as_deref(), Some("FB_Qwen3TTSDialogueInference"));
    assert_eq!(d.node_id.as_deref(), Some("71"));
}

/// execution.py's marker with one `!` lost in the paste still carries the message; comfy-aimdo's
/// malloc-graph error is aimdo's own.
#[test]
fn a_marker_missing_a_bang_and_aimdos_compile_error_are_read() {
    let d = kind_of(
        "got prompt\n!! Exception during processing !!! 'NoneType' object has no attribute 'clone'\nTraceback (most recent call last):\n  File \"C:\\ComfyUI\\execution.py\", line 518, in execute\n",
        FailureKind::Other,
    );
    assert!(
        d.kind_evidence.contains("no out-of-memory"),
        "{}",
        d.kind_evidence
    );
    kind_of(
        "got prompt\nComfy model compiler graph breaks: 3, rogues: 249\n!!! Exception during processing !!! aimdo memory compile error\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 545, in execute\n    x()\n  File \"/v/site-packages/comfy_aimdo/malloc_graph.py\", line 16, in _call\n    raise RuntimeError(\"aimdo memory compile error\")\nRuntimeError: aimdo memory compile error\n",
        FailureKind::Aimdo,
    );
}

/// Labelling rules' second amendments: pip failing to build a node pack's requirement is the
/// failure (its `exit code: 1` is its build step's, no death); LLVM's Windows crash record and
/// a restart after the run's model loading (a journal's new process) are deaths; a kernel or
/// earlyoom journal line keeps its program's name.
#[test]
fn pip_failures_crash_records_and_restarts() {
    let pip = "Collecting git+https://github.com/example/pkg.git\n  Installing build dependencies: finished with status 'done'\n  Getting requirements to build wheel: finished with status 'error'\n  error: subprocess-exited-with-error\n\n  Getting requirements to build wheel did not run successfully.\n  exit code: 1\n\n  [23 lines of output]\n";
    let d = kind_of(pip, FailureKind::Other);
    assert!(
        d.kind_evidence.contains("no out-of-memory"),
        "{}",
        d.kind_evidence
    );
    kind_saying(
        "Requested to load Lumina2\nloaded completely; 12286.07 MB usable, 11739.54 MB loaded, full load: True\n  0%|          | 0/9 [00:00<?, ?it/s]Exception Code: 0x80000003\n  #0 0x00007ff941fbd9e5 (H:\\ComfyUI\\python_embeded\\Lib\\site-packages\\triton\\_C\\libtriton.pyd+0x3e5d9e5)\n  #1 0x00007ffa6d031881 (C:\\Windows\\System32\\ucrtbase.dll+0x71881)\n",
        FailureKind::ProcessKilled,
        &["Exception Code: 0x80000003"],
    );
    let journal = "Nov 24 10:19:34 host python3[20275]: 10:19:34 | INFO     | - | Requested to load FluxClipModel_\nNov 24 10:19:34 host python3[20275]: 10:19:34 | INFO     | - | loaded completely; 95.00 MB usable, 323.95 MB loaded, full load: True\nNov 24 10:19:56 host python3[20453]: 10:19:56 | INFO     | - | ### Loading: ComfyUI-Manager (V3.37.1)\nNov 24 10:19:56 host python3[20453]: Import times for custom nodes:\nNov 24 10:19:56 host python3[20453]: 10:19:56 | INFO     | - |    0.0 seconds: /home/user/ComfyUI/custom_nodes/websocket_image_save.py\n";
    kind_saying(journal, FailureKind::ProcessKilled, &["startup banner"]);
    kind_saying(
        "Aug 04 10:39:10 host earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3\": oom_score 1282, VmRSS 29931 MiB, cmdline \"/home/user/env/bin/python3 main.py\"\n",
        FailureKind::ProcessKilled,
        &["out-of-memory killer"],
    );
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

/// The launcher's pause at the top of a paste, then ComfyUI starting again with nothing of a run
/// before the pause: the process that died is not in the text. The same pause after a run is
/// that run's death; a message in a node's words (`Node: Torch not compiled with CUDA enabled`)
/// is an error.
#[test]
fn a_pause_before_a_fresh_start_is_not_the_texts_failure() {
    let fresh = "=====================\n请按任意键继续. . . [START] Security scan\n[DONE] Security scan\n** ComfyUI startup time: 2026-03-14 10:34:46.004\n** Platform: Windows\n[PRE] ComfyUI-Manager\n";
    assert!(crate::diagnose::diagnose_text(fresh).is_err());
    kind_of(
        "got prompt\nRequested to load WAN21\nloaded completely 9000 6000 True\nPress any key to continue . . .\n** ComfyUI startup time: 2026-03-14 10:34:46.004\n",
        FailureKind::ProcessKilled,
    );
    kind_of(
        "DiffuEraserSampler: Torch not compiled with CUDA enabled",
        FailureKind::Other,
    );
}

/// A one-line paste in an error message's shape is read as the message even when its words are
/// none the tool knows (labelling rule 5); prose with a word before a colon is not.
#[test]
fn a_message_in_an_errors_shape_is_read() {
    for message in [
        "WanVideoSampler: latent frames do not line up with the conditioning",
        "'clip_l' key from the state dict is unusable",
    ] {
        kind_of(message, FailureKind::Other);
    }
    for prose in ["Note: it happens every time", "Thanks for looking at this"] {
        assert!(crate::diagnose::diagnose_text(prose).is_err(), "{prose}");
    }
}
