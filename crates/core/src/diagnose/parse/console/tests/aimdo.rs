//! comfy-aimdo's own errors and notices: start-up, ERROR lines, their wrappers.

use super::*;

/// comfy_aimdo.control.init() logs its load error; ComfyUI then falls back. With no run
/// failure in the text, that is the failure; the fall-back notice alone is none.
#[test]
fn aimdo_start_up_load_error_is_aimdo_and_the_fallback_notice_is_nothing() {
    let log = "Total VRAM 8192 MB\ncomfy-aimdo failed to load: libcuda.so.1: cannot open shared object file: No such file or directory\nNOTE: comfy-aimdo is currently only support for Nvidia GPUs\nNo working comfy-aimdo install detected. DynamicVRAM support disabled. Falling back to legacy ModelPatcher.\nStarting server\n";
    kind_of(log, FailureKind::Aimdo);
    assert!(parse_input("No working comfy-aimdo install detected. DynamicVRAM support disabled. Falling back to legacy ModelPatcher.\n").is_err());
    assert!(parse_input("IMPORT FAILED: nodes_glsl.py\n").is_err());
}

#[test]
fn aimdo_error_line_alone_is_its_own_kind() {
    // Format of ComfyUI issue #12943 (comfy-aimdo's C logger, no Python exception).
    let log = "got prompt\nModel WAN21 prepared for dynamic VRAM loading. 13650MB Staged. 0 patches attached.\n 10%|#         | 2/20 [00:20<03:00, 10.00s/it]\naimdo: src/model-vbar.c:307:ERROR:VRAM Allocation failed (non OOM)\n";
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_eq!(d.kind, crate::vocab::FailureKind::Aimdo, "{d:?}");
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

/// comfy-aimdo#74: its hook-setup ERROR, broken after the location, with no exception.
#[test]
fn an_aimdo_error_broken_over_two_lines_is_aimdo() {
    let log = "aimdo: /project/src-posix/cuda-funchooks.c:37:\nERROR:aimdo_setup_hooks:\nfunchook_prepare(cuMemAlloc_v2) failed: 8\n\n[WARNING] No working comfy-aimdo install detected.\nDynamicVRAM support disabled.\n";
    kind_of(log, FailureKind::Aimdo);
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
    assert!(!crate::diagnose::kind::is_aimdo_error_line(
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
