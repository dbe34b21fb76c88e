//! Unit tests of the stage rules, one rule (or one boundary between two rules) at a time.

use super::super::failing_node;
use super::*;

fn rule(name: &str) -> Rule {
    RULES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no rule {name}"))
        .1
}

/// What the rule `name` answers for this evidence (a failure of kind `Other`).
fn ask(name: &str, e: &Evidence, s: &ConsoleSignals) -> Option<Answer> {
    ask_kind(name, e, s, FailureKind::Other)
}

fn ask_kind(name: &str, e: &Evidence, s: &ConsoleSignals, kind: FailureKind) -> Option<Answer> {
    let failing = failing_node(e);
    rule(name)(&Ctx::new(e, s, kind, false, &failing))
}

fn stage_of(a: Option<Answer>) -> Option<Stage> {
    a.map(|a| match a {
        Answer::Alone(s, _) | Answer::Found { stage: s, .. } => s,
    })
}

fn node(t: &str) -> Evidence {
    Evidence {
        node_type: Some(t.into()),
        ..Evidence::default()
    }
}

fn traceback(lines: &[&str]) -> Evidence {
    Evidence {
        traceback: lines.iter().map(|l| l.to_string()).collect(),
        ..Evidence::default()
    }
}

fn tail(t: ConsoleTail) -> ConsoleSignals {
    ConsoleSignals {
        tail: Some(t),
        ..ConsoleSignals::default()
    }
}

const LOAD_TB: &[&str] = &[
    r#"  File "/c/nodes.py", line 1, in sample"#,
    r#"  File "/c/comfy/model_management.py", line 444, in model_load"#,
];
const STEP_TB: &[&str] = &[
    r#"  File "/c/comfy/samplers.py", line 1, in sample"#,
    r#"  File "/c/comfy/k_diffusion/sampling.py", line 2, in sample_euler"#,
];

fn ended(line: &str, model: &str, ready: bool, bar: Option<(u64, u64)>) -> ConsoleSignals {
    ConsoleSignals {
        log_stopped: true,
        sampling_bar: bar,
        last_model: Some(crate::diagnose::ModelActivity {
            line: line.into(),
            model: model.into(),
            ready,
        }),
        ..ConsoleSignals::default()
    }
}

fn candidates_of(a: Option<Answer>) -> Vec<Stage> {
    match a {
        Some(Answer::Found { candidates, .. }) => candidates,
        _ => Vec::new(),
    }
}

/// Issue #40: a log that ends is placed by the role of its last model line.
#[test]
fn log_end_model_places_by_the_role_of_the_model() {
    let e = Evidence::default();
    let staged = "Model ZImageTEModel_ prepared for dynamic VRAM loading. 7671MB Staged.";
    let a = ask(
        "log_end_model",
        &e,
        &ended(staged, "ZImageTEModel_", true, None),
    );
    assert_eq!(candidates_of(a.clone()), [Stage::Condition, Stage::Load]);
    let Some(Answer::Found { why, .. }) = a else {
        panic!("answers");
    };
    assert!(why.contains(staged), "{why}");
    let a = ask(
        "log_end_model",
        &e,
        &ended("Requested to load WAN21", "WAN21", false, None),
    );
    assert_eq!(candidates_of(a), [Stage::Load, Stage::SampleFirst]);
    let a = ask(
        "log_end_model",
        &e,
        &ended("Model Flux2 prepared", "Flux2", true, None),
    );
    assert_eq!(candidates_of(a), [Stage::SampleFirst, Stage::Load]);
    let a = ask(
        "log_end_model",
        &e,
        &ended("Requested to load WanVAE", "WanVAE", false, Some((20, 20))),
    );
    assert_eq!(candidates_of(a), [Stage::Decode, Stage::Load]);
    // AutoencodingEngine (AutoencoderKL's base class) is the VAE too.
    let a = ask(
        "log_end_model",
        &e,
        &ended(
            "Requested to load AutoencodingEngine",
            "AutoencodingEngine",
            false,
            Some((9, 9)),
        ),
    );
    assert_eq!(candidates_of(a), [Stage::Decode, Stage::Load]);
    assert!(is_vae_load("Requested to load AutoencodingEngine"));
    assert!(!is_vae_load("Requested to load Flux"));
    let a = ask(
        "log_end_model",
        &e,
        &ended(
            "Requested to load AutoencoderKL",
            "AutoencoderKL",
            true,
            None,
        ),
    );
    assert_eq!(
        candidates_of(a),
        [Stage::Condition, Stage::Load, Stage::Decode]
    );
    let a = ask(
        "log_end_model",
        &e,
        &ended(
            "Requested to load RealESRGAN_x4",
            "RealESRGAN_x4",
            true,
            None,
        ),
    );
    assert_eq!(candidates_of(a), [Stage::Postprocess, Stage::Load]);
    // A crash with no Python error is placed by its last model line too (real lines of
    // comfy-aimdo#63: a text encoder staged, then `Windows fatal exception: access
    // violation`), and says it was a crash…
    let mut dead = ended(staged, "ZImageTEModel_", true, None);
    dead.death = Some("Windows fatal exception: access violation".into());
    dead.log_stopped = false;
    let a = ask("log_end_model", &e, &dead);
    assert!(
        matches!(&a, Some(Answer::Found { why, .. }) if why.contains("before the crash")),
        "{a:?}"
    );
    assert_eq!(candidates_of(a), [Stage::Condition, Stage::Load]);
    // …but a death with a Python error, or a run that neither ended nor crashed, is not
    // this rule's.
    let with_error = Evidence {
        exception_message: Some("CUDA error: out of memory".into()),
        ..Evidence::default()
    };
    let mut plain = ended("Requested to load WAN21", "WAN21", false, None);
    plain.death = Some("Killed".into());
    plain.log_stopped = false;
    assert_eq!(ask("log_end_model", &with_error, &plain), None);
    dead.death = None;
    dead.log_stopped = false;
    assert_eq!(ask("log_end_model", &e, &dead), None);
    // An error right after a staged VAE with no sampling: encoding inputs, or the decode
    // (rule 9: the likelier first, the other open).
    let error = Evidence {
        exception_message: Some("VRAM reservation failed".into()),
        ..Evidence::default()
    };
    let staged_vae = "Model AutoencoderKL prepared for dynamic VRAM loading. 159MB Staged.";
    let mut s = ended(staged_vae, "AutoencoderKL", true, None);
    s.log_stopped = false;
    assert_eq!(
        candidates_of(ask("log_end_model", &error, &s)),
        [Stage::Condition, Stage::Load, Stage::Decode]
    );
    // …but not after an old-style `Requested to load` line (console_model_loading's).
    let mut s = ended(
        "Requested to load AutoencoderKL",
        "AutoencoderKL",
        false,
        None,
    );
    s.log_stopped = false;
    assert_eq!(ask("log_end_model", &error, &s), None);
}

/// comfy-aimdo creates a model's VBAR when ComfyUI stages the model: its failures there are
/// a load, whatever node asked for the model.
#[test]
fn model_staging_is_a_load_whatever_the_node() {
    let s = ConsoleSignals::default();
    for message in [
        "VBAR allocation failed",
        "comfy-aimdo device 3 is not initialized",
    ] {
        let e = Evidence {
            exception_message: Some(message.into()),
            ..node("VAEDecodeTiled")
        };
        assert_eq!(
            stage_of(ask("model_staging", &e, &s)),
            Some(Stage::Load),
            "{message}"
        );
    }
    // aimdo's other errors (a cast buffer during a forward, no context at all) are not.
    for message in ["VRAM reservation failed", "comfy-aimdo is not initialized"] {
        let e = Evidence {
            exception_message: Some(message.into()),
            ..Evidence::default()
        };
        assert_eq!(ask("model_staging", &e, &s), None, "{message}");
    }
}

/// ffmpeg failing is a video being encoded from finished frames, unless the node reads an
/// input video.
#[test]
fn video_encoder_reads_ffmpeg_failures_as_postprocess() {
    let s = ConsoleSignals::default();
    let e = Evidence {
        exception_message: Some("RuntimeError: ffmpeg exited with status 1".into()),
        ..node("SegmentStitcher")
    };
    assert_eq!(
        stage_of(ask("video_encoder", &e, &s)),
        Some(Stage::Postprocess)
    );
    let reading = Evidence {
        exception_message: Some("ffmpeg could not open the file".into()),
        ..node("LoadVideoFromPath")
    };
    assert_eq!(ask("video_encoder", &reading, &s), None);
    let other = Evidence {
        exception_message: Some("shape mismatch".into()),
        ..node("SegmentStitcher")
    };
    assert_eq!(ask("video_encoder", &other, &s), None);
    // PyAV's encoder call (ComfyUI's SaveVideo; LTX-2 reports with NaN audio).
    let encoding = Evidence {
        exception_message: Some("[Errno 22] Invalid argument: 'avcodec_send_frame()'; last error log: [aac] Input contains (near) NaN/+-Inf".into()),
        ..Evidence::default()
    };
    assert_eq!(
        stage_of(ask("video_encoder", &encoding, &s)),
        Some(Stage::Postprocess)
    );
    let decoding = Evidence {
        exception_message: Some(
            "[Errno 1094995529] Invalid data found when processing input: 'avcodec_send_packet()'"
                .into(),
        ),
        ..node("LoadVideo")
    };
    assert_eq!(ask("video_encoder", &decoding, &s), None);
}

/// After `Attempting to release mmap` a non-memory error is in the model's use; an
/// out-of-memory error may be the release moving weights (left to the console rule).
#[test]
fn an_error_after_the_mmap_release_is_placed_by_its_kind() {
    let mut s = ended(
        "Attempting to release mmap (290)",
        "LTXAVTEModel_",
        false,
        None,
    );
    s.log_stopped = false;
    let e = Evidence {
        exception_message: Some("mat1 and mat2 shapes cannot be multiplied".into()),
        ..Evidence::default()
    };
    assert_eq!(
        candidates_of(ask("log_end_model", &e, &s)),
        [Stage::Condition, Stage::Load]
    );
    let oom = Evidence {
        exception_message: Some("CUDA error: out of memory".into()),
        ..Evidence::default()
    };
    assert_eq!(
        ask_kind("log_end_model", &oom, &s, FailureKind::CudaOom),
        None
    );
}

/// A prompt refused by validate_prompt never ran: no stage, even with a loader named.
#[test]
fn refused_at_validation_has_no_stage() {
    let s = ConsoleSignals::default();
    let e = Evidence {
        exception_message: Some(
            "Cannot execute because node FancyUnetLoader does not exist.".into(),
        ),
        ..node("FancyUnetLoader")
    };
    assert!(matches!(
        ask("refused_at_validation", &e, &s),
        Some(Answer::Alone(Stage::Unknown, ref why)) if why.contains("before any node ran")
    ));
    assert_eq!(
        ask("refused_at_validation", &node("FancyUnetLoader"), &s),
        None
    );
}

/// An error after a model's load finished (`loaded partially` / `loaded completely`) is in
/// that model's use; a bare `Requested to load` is still the console rule's load.
#[test]
fn an_error_after_a_finished_load_is_placed_by_the_model_role() {
    let error = Evidence {
        exception_message: Some("CUDA out of memory. Tried to allocate 64.00 MiB.".into()),
        ..Evidence::default()
    };
    let mut s = ended(
        "loaded partially; 9000.00 MB usable, 8800.00 MB loaded, 1200.00 MB offloaded",
        "SD3ClipModel",
        true,
        None,
    );
    s.log_stopped = false;
    assert_eq!(
        candidates_of(ask("log_end_model", &error, &s)),
        [Stage::Condition, Stage::Load]
    );
    let mut s = ended(
        "Requested to load SD3ClipModel",
        "SD3ClipModel",
        false,
        None,
    );
    s.log_stopped = false;
    assert_eq!(ask("log_end_model", &error, &s), None);
}

/// An error located in a sampler (its entry frame) with no bar leaves load and the steps
/// open, even after a staged diffusion model (rule 7(b)).
#[test]
fn a_ready_model_does_not_place_an_error_inside_a_sampler() {
    let mut s = ended(
        "Model QwenImage prepared for dynamic VRAM loading. 19483MB Staged.",
        "QwenImage",
        true,
        None,
    );
    s.log_stopped = false;
    let e = Evidence {
        exception_message: Some("Fault failed: 2".into()),
        ..traceback(&[
            r#"  File "nodes.py", line 1607, in sample"#,
            r#"  File "comfy/sample.py", line 74, in sample"#,
        ])
    };
    assert_eq!(ask("log_end_model", &e, &s), None);
    let failing = failing_node(&e);
    let v = super::super::resolve(&e, &s, FailureKind::Aimdo, false, &failing);
    assert_eq!(v.stage, Stage::Unknown, "{}", v.evidence);
    assert_eq!(
        v.candidates,
        [
            Stage::Unknown,
            Stage::Load,
            Stage::SampleFirst,
            Stage::SampleMiddle
        ]
    );
    // Without the sampler frame the error is in the staged model's use.
    let plain = Evidence {
        exception_message: Some("Fault failed: 2".into()),
        ..Evidence::default()
    };
    assert_eq!(
        candidates_of(ask("log_end_model", &plain, &s)),
        [Stage::SampleFirst, Stage::Load]
    );
}

/// After a finished bar, `N models unloaded.` with no request after the bar: a held model
/// comes back, for another pass or the decode.
#[test]
fn log_end_held_model_leaves_another_pass_and_the_decode_open() {
    let e = Evidence::default();
    let s = ConsoleSignals {
        log_stopped: true,
        sampling_bar: Some((12, 12)),
        tail: Some(ConsoleTail::ModelLoading("0 models".into())),
        ..ConsoleSignals::default()
    };
    assert!(matches!(
        ask("log_end_held_model", &e, &s),
        Some(Answer::Found { stage: Stage::Unknown, ref candidates, .. })
            if candidates == &[Stage::SampleFirst, Stage::Decode]
    ));
    // Mid-sampling, after a named model, or another loading line: not this rule's.
    let mid = ConsoleSignals {
        sampling_bar: Some((5, 12)),
        ..s.clone()
    };
    assert_eq!(ask("log_end_held_model", &e, &mid), None);
    let named = ConsoleSignals {
        last_model: Some(crate::diagnose::ModelActivity {
            line: "Requested to load WanVAE".into(),
            model: "WanVAE".into(),
            ready: false,
        }),
        ..s.clone()
    };
    assert_eq!(ask("log_end_held_model", &e, &named), None);
    let other = ConsoleSignals {
        tail: Some(ConsoleTail::ModelLoading("model_type FLOW".into())),
        ..s
    };
    assert_eq!(ask("log_end_held_model", &e, &other), None);
}

#[test]
fn the_table_order_is_the_documented_order() {
    let names: Vec<&str> = RULES.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "rejected",
            "refused_at_validation",
            "incomplete_output",
            "interrupted",
            "resurfaced_in_cleanup",
            "traceback_place",
            "traceback_step",
            "model_file",
            "model_staging",
            "video_encoder",
            "log_end_model",
            "log_end_held_model",
            "console_model_loading",
            "console_tiled_decode",
            "console_tiled_encode",
            "console_node_phase",
            "console_encoder_loaded",
            "console_lora_errors",
            "sampler_progress",
            "node_class",
            "sampler_unresolved",
        ]
    );
}

#[test]
fn rejected_and_incomplete_output_answer_alone_by_kind() {
    let (e, s) = (Evidence::default(), ConsoleSignals::default());
    assert!(matches!(
        ask_kind("rejected", &e, &s, FailureKind::Rejected),
        Some(Answer::Alone(Stage::Unknown, _))
    ));
    assert_eq!(ask("rejected", &e, &s), None);
    assert!(matches!(
        ask_kind("incomplete_output", &e, &s, FailureKind::IncompleteOutput),
        Some(Answer::Alone(Stage::Unknown, _))
    ));
    assert_eq!(ask("incomplete_output", &e, &s), None);
}

#[test]
fn interrupted_names_the_node_and_progress() {
    let e = Evidence {
        outcome: Some(RunOutcomeHint::Interrupted),
        ..node("KSampler")
    };
    let Some(Answer::Alone(Stage::Unknown, why)) =
        ask("interrupted", &e, &ConsoleSignals::default())
    else {
        panic!("the interrupt rule did not answer");
    };
    assert!(why.contains("interrupted in KSampler"), "{why}");
    assert_eq!(
        ask("interrupted", &node("KSampler"), &ConsoleSignals::default()),
        None
    );
}

#[test]
fn resurfaced_in_cleanup_fires_only_on_a_cleanup_frame() {
    let s = ConsoleSignals::default();
    let e = traceback(&[
        r#"  File "/c/execution.py", line 1, in execute"#,
        r#"  File "/c/comfy/model_management.py", line 2, in soft_empty_cache"#,
    ]);
    assert_eq!(
        stage_of(ask("resurfaced_in_cleanup", &e, &s)),
        Some(Stage::Unknown)
    );
    assert_eq!(ask("resurfaced_in_cleanup", &traceback(LOAD_TB), &s), None);
}

#[test]
fn traceback_place_reads_the_deepest_frame_but_not_a_step() {
    let s = ConsoleSignals::default();
    assert_eq!(
        stage_of(ask("traceback_place", &traceback(LOAD_TB), &s)),
        Some(Stage::Load)
    );
    assert_eq!(ask("traceback_place", &traceback(STEP_TB), &s), None);
    // An asynchronous error's traceback is not used.
    let e = traceback(LOAD_TB);
    let failing = failing_node(&e);
    let ctx = Ctx::new(&e, &s, FailureKind::CudaOom, true, &failing);
    assert_eq!(rule("traceback_place")(&ctx), None);
}

#[test]
fn traceback_step_uses_progress_to_tell_first_from_later() {
    let s = ConsoleSignals {
        sampling_bar: Some((7, 20)),
        ..ConsoleSignals::default()
    };
    assert_eq!(
        stage_of(ask("traceback_step", &traceback(STEP_TB), &s)),
        Some(Stage::SampleMiddle)
    );
    let none = ConsoleSignals::default();
    assert!(matches!(
        ask("traceback_step", &traceback(STEP_TB), &none),
        Some(Answer::Found { stage: Stage::Unknown, ref candidates, .. })
            if candidates == &[Stage::SampleFirst, Stage::SampleMiddle]
    ));
    assert_eq!(ask("traceback_step", &traceback(LOAD_TB), &s), None);
}

#[test]
fn model_file_fires_on_a_model_file_message_only() {
    let s = ConsoleSignals::default();
    let e = Evidence {
        exception_message: Some("Error while deserializing header: HeaderTooLarge".into()),
        ..Evidence::default()
    };
    assert_eq!(stage_of(ask("model_file", &e, &s)), Some(Stage::Load));
    let e = Evidence {
        exception_message: Some("CUDA out of memory.".into()),
        ..Evidence::default()
    };
    assert_eq!(ask("model_file", &e, &s), None);
}

#[test]
fn console_model_loading_is_not_for_decode_nodes() {
    let s = tail(ConsoleTail::ModelLoading("Requested to load Flux".into()));
    assert_eq!(
        stage_of(ask("console_model_loading", &node("KSampler"), &s)),
        Some(Stage::Load)
    );
    assert_eq!(ask("console_model_loading", &node("VAEDecode"), &s), None);
}

/// ComfyUI's `CLIP/text encoder model load device` line is printed once the text encoder
/// model is built: as the last line, its use (condition) comes next.
#[test]
fn the_text_encoder_built_line_is_its_use_next() {
    let line = "CLIP/text encoder model load device: cuda:0, offload device: cpu, current: cpu, dtype: torch.float16";
    let s = tail(ConsoleTail::ModelLoading(line.into()));
    assert_eq!(
        candidates_of(ask("console_model_loading", &Evidence::default(), &s)),
        [Stage::Condition, Stage::Load]
    );
    let other = tail(ConsoleTail::ModelLoading("model_type FLOW".into()));
    assert_eq!(
        candidates_of(ask("console_model_loading", &Evidence::default(), &other)),
        [Stage::Load]
    );
}

/// A crash stack in a generic layer forward (comfy/ops.py) with no bar, after a text encoder
/// finished loading, is the encoder's forward; a diffusion model's frame or a bar keeps the
/// step reading.
#[test]
fn a_generic_forward_after_a_ready_text_encoder_is_condition() {
    let ops = &[
        r#"  File "D:\c\comfy\ops.py", line 482 in forward"#,
        r#"  File "D:\c\comfy\ops.py", line 475 in forward_comfy_cast_weights"#,
    ];
    let mut s = tail(ConsoleTail::ModelLoading(
        "CLIP/text encoder model load device: cuda:0, offload device: cpu, current: cuda:0, dtype: torch.float16".into(),
    ));
    s.death = Some("Fatal Python error: Aborted".into());
    assert_eq!(
        candidates_of(ask("traceback_step", &traceback(ops), &s)),
        [Stage::Condition, Stage::Load]
    );
    let flux = &[r#"  File "/c/comfy/ldm/flux/model.py", line 184, in forward"#];
    assert_eq!(
        stage_of(ask("traceback_step", &traceback(flux), &s)),
        Some(Stage::Unknown)
    );
    s.sampling_bar = Some((0, 20));
    assert_eq!(
        stage_of(ask("traceback_step", &traceback(ops), &s)),
        Some(Stage::SampleFirst)
    );
}

#[test]
fn console_tiled_retries_name_decode_and_encode() {
    let e = Evidence::default();
    let dec = tail(ConsoleTail::TiledDecodeRetry);
    let enc = tail(ConsoleTail::TiledEncodeRetry);
    assert_eq!(
        stage_of(ask("console_tiled_decode", &e, &dec)),
        Some(Stage::Decode)
    );
    assert_eq!(ask("console_tiled_decode", &e, &enc), None);
    assert_eq!(
        stage_of(ask("console_tiled_encode", &e, &enc)),
        Some(Stage::Condition)
    );
    assert_eq!(ask("console_tiled_encode", &e, &dec), None);
    let phase = |l: &str| tail(ConsoleTail::NodePhase(l.into()));
    assert_eq!(
        candidates_of(ask(
            "console_node_phase",
            &e,
            &phase("━━ Phase 3: VAE decoding ━━")
        )),
        [Stage::Decode, Stage::Postprocess]
    );
    assert_eq!(
        candidates_of(ask(
            "console_node_phase",
            &e,
            &phase("Error in Phase 1 (Encoding): x")
        )),
        [Stage::Condition, Stage::Postprocess]
    );
    assert_eq!(
        candidates_of(ask(
            "console_node_phase",
            &e,
            &phase("━━ Phase 4: Post-processing ━━")
        )),
        [Stage::Postprocess]
    );
    assert_eq!(ask("console_node_phase", &e, &dec), None);
}

#[test]
fn console_encoder_loaded_needs_no_sampling_after_it() {
    let mut s = tail(ConsoleTail::EncoderLoaded("t5xxl".into()));
    assert_eq!(
        stage_of(ask("console_encoder_loaded", &Evidence::default(), &s)),
        Some(Stage::Condition)
    );
    s.sampling_bar = Some((3, 20));
    assert_eq!(
        ask("console_encoder_loaded", &Evidence::default(), &s),
        None
    );
}

#[test]
fn console_lora_errors_is_a_load() {
    let e = Evidence::default();
    assert_eq!(
        stage_of(ask(
            "console_lora_errors",
            &e,
            &tail(ConsoleTail::LoraPatchErrors(3))
        )),
        Some(Stage::Load)
    );
    assert_eq!(
        ask("console_lora_errors", &e, &ConsoleSignals::default()),
        None
    );
}

#[test]
fn sampler_progress_applies_to_samplers_only() {
    let s = ConsoleSignals {
        sampling_bar: Some((7, 20)),
        ..ConsoleSignals::default()
    };
    assert_eq!(
        stage_of(ask("sampler_progress", &node("KSampler"), &s)),
        Some(Stage::SampleMiddle)
    );
    assert_eq!(ask("sampler_progress", &node("VAEDecode"), &s), None);
    let done = ConsoleSignals {
        sampling_bar: Some((20, 20)),
        ..ConsoleSignals::default()
    };
    assert_eq!(
        stage_of(ask("sampler_progress", &node("KSampler"), &done)),
        Some(Stage::Decode)
    );
}

#[test]
fn node_class_places_known_classes() {
    let s = ConsoleSignals::default();
    assert_eq!(
        stage_of(ask("node_class", &node("VAEDecode"), &s)),
        Some(Stage::Decode)
    );
    assert!(matches!(
        ask("node_class", &node("CLIPTextEncode"), &s),
        Some(Answer::Found { stage: Stage::Condition, ref candidates, .. })
            if candidates == &[Stage::Condition, Stage::Load]
    ));
    assert_eq!(ask("node_class", &node("KSampler"), &s), None);
}

#[test]
fn sampler_unresolved_leaves_load_and_steps_open() {
    let s = ConsoleSignals::default();
    assert!(matches!(
        ask("sampler_unresolved", &node("KSampler"), &s),
        Some(Answer::Found { stage: Stage::Unknown, ref candidates, .. })
            if candidates == &[Stage::Load, Stage::SampleFirst, Stage::SampleMiddle]
    ));
    assert_eq!(ask("sampler_unresolved", &node("VAEDecode"), &s), None);
}

#[test]
fn unlocated_says_what_was_missing() {
    let s = ConsoleSignals::default();
    let e = Evidence {
        exception_message: Some("boom".into()),
        ..Evidence::default()
    };
    let failing = failing_node(&e);
    let Answer::Found { stage, why, .. } =
        unlocated(&Ctx::new(&e, &s, FailureKind::Other, false, &failing))
    else {
        panic!("unlocated answers with a verdict");
    };
    assert_eq!(stage, Stage::Unknown);
    assert!(why.starts_with("Only the message is available"), "{why}");
}
