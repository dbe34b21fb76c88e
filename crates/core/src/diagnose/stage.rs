//! Stage of the run: read from the traceback (deepest recognisable frame), the console lines
//! before the failure, the progress seen, and — as a clue, not the answer — the failing node.

use super::{ConsoleSignals, Evidence, Stage, StageConfidence};
use crate::vocab::FailureKind;

mod activity;
mod facts;
mod rules;

pub(crate) use activity::{is_background_line, node_activity};
pub(crate) use facts::{
    failing_node, is_validation_reason, model_role, validation_refusal, Failing, ModelRole,
};

/// The stage, every stage left open, and the evidence in words.
pub(crate) struct StageVerdict {
    pub stage: Stage,
    pub candidates: Vec<Stage>,
    /// How sure: a frame, the exception or the node decided (`certain`), only progress or
    /// console order did (`likely`), or nothing located it (`unknown`).
    pub confidence: StageConfidence,
    pub evidence: String,
}

/// Decides the stage, for every kind of failure: the first rule of [`rules::RULES`] that
/// answers, tried in order — the kind and outcome that leave no stage, traceback frames (unless
/// the error is asynchronous), an exception that names a model file, the console lines before
/// the failure, progress, then the node class. Nothing locating it gives `unknown`.
pub(crate) fn resolve(
    evidence: &Evidence,
    signals: &ConsoleSignals,
    kind: FailureKind,
    asynchronous: bool,
    failing: &Failing,
) -> StageVerdict {
    let ctx = rules::Ctx::new(evidence, signals, kind, asynchronous, failing);
    let answer = rules::RULES
        .iter()
        .find_map(|(_, rule)| rule(&ctx))
        .unwrap_or_else(|| rules::unlocated(&ctx));
    verdict_of(answer, ctx.notes)
}

/// The verdict for a rule's answer: the notes, then its reason; an unknown stage is never more
/// than `unknown` sure, and the stage is always among the candidates (an unknown stage lists
/// the stages left open after it).
fn verdict_of(answer: rules::Answer, mut notes: Vec<String>) -> StageVerdict {
    match answer {
        rules::Answer::Alone(stage, why) => single(stage, why),
        rules::Answer::Found {
            stage,
            mut candidates,
            confidence,
            why,
        } => {
            notes.push(why);
            let confidence = if stage == Stage::Unknown {
                StageConfidence::Unknown
            } else {
                confidence
            };
            if !candidates.contains(&stage) {
                candidates.insert(0, stage);
            }
            StageVerdict {
                stage,
                candidates,
                confidence,
                evidence: notes.join(" "),
            }
        }
    }
}

fn single(stage: Stage, why: String) -> StageVerdict {
    StageVerdict {
        stage,
        candidates: vec![stage],
        confidence: StageConfidence::Unknown,
        evidence: why,
    }
}

#[cfg(test)]
mod tests {
    use super::super::frames::{Frame, FrameCat};
    use super::super::NodeProgress;
    use super::facts::*;
    use super::*;

    fn frames(lines: &[&str]) -> Vec<Frame> {
        parse_frames(&lines.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_node_inside_a_subgraph_is_described_by_its_own_id_and_its_instance() {
        let failing = |id: &str| Failing {
            node_id: Some(id.into()),
            node_type: Some("KSampler".into()),
            progress: None,
            from_timeline: false,
        };
        assert_eq!(
            describe_node(&failing("140:125")).as_deref(),
            Some("node 125 (KSampler) in subgraph #140")
        );
        assert_eq!(
            describe_node(&failing("3")).as_deref(),
            Some("node 3 (KSampler)")
        );
    }

    #[test]
    fn load_inside_sampler_is_load() {
        let f = frames(&[
            r#"  File "/c/nodes.py", line 1, in sample"#,
            r#"  File "/c/comfy/model_management.py", line 444, in model_load"#,
            r#"  File "/c/comfy/model_patcher.py", line 555, in patch_weight_to_device"#,
            r#"  File "/c/comfy/model_management.py", line 999, in cast_to_device"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Load);
    }

    /// A model being built from its weights (`supported_models … get_model` constructing
    /// `model_base.X`) is a load, though model_base's other frames are a step.
    #[test]
    fn building_the_model_is_load() {
        let f = frames(&[
            r#"  File "/c/comfy/sd.py", line 1, in load_diffusion_model_state_dict"#,
            r#"  File "/c/comfy/supported_models.py", line 2, in get_model"#,
            r#"  File "/c/comfy/model_base.py", line 3, in __init__"#,
            r#"  File "/c/comfy/ldm/cosmos/model.py", line 4, in __init__"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Load);
        let f = frames(&[
            r#"  File "/c/comfy/samplers.py", line 1, in sample"#,
            r#"  File "/c/comfy/model_base.py", line 2, in apply_model"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Step);
    }

    /// Frames a reporter shortened (no line number) are read, in the order of the others.
    #[test]
    fn frames_without_line_numbers_are_read() {
        let f = frames(&[
            r#"File "comfy/text_encoders/t5.py", in encode_token_weights"#,
            r#"File "comfy/ops.py" in cast_bias_weight"#,
        ]);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].func, "encode_token_weights");
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Condition);
        // With a fault-handler stack (most recent call first) they do not stop the reversal.
        let f = frames(&[
            r#"  File "/c/comfy/utils.py", line 9 in load_torch_file"#,
            r#"  File "/c/nodes.py" in load_clip"#,
            r#"  File "/c/execution.py", line 3 in execute"#,
        ]);
        assert_eq!(f.first().unwrap().func, "execute");
    }

    #[test]
    fn preview_inside_sampler_is_preview() {
        let f = frames(&[
            r#"  File "/c/comfy/k_diffusion/sampling.py", line 1, in sample_euler"#,
            r#"  File "/c/latent_preview.py", line 2, in callback"#,
            r#"  File "/c/comfy/taesd/taesd.py", line 3, in decode"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Preview);
    }

    #[test]
    fn vae_attention_stays_decode() {
        let f = frames(&[
            r#"  File "/c/nodes.py", line 1, in decode"#,
            r#"  File "/c/comfy/ldm/models/autoencoder.py", line 211, in decode"#,
            r#"  File "/c/comfy/ldm/modules/diffusionmodules/model.py", line 255, in normal_attention"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Decode);
    }

    #[test]
    fn model_forward_below_sampler_entry_is_a_step() {
        let f = frames(&[
            r#"  File "/c/nodes.py", line 1467, in sample"#,
            r#"  File "/v/site-packages/torch/nn/modules/module.py", line 1747, in _call_impl"#,
            r#"  File "/c/comfy/ldm/flux/model.py", line 184, in forward"#,
        ]);
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Step);
    }

    #[test]
    fn error_resurfacing_in_cleanup_is_not_located() {
        let f = frames(&[
            r#"  File "/c/execution.py", line 1, in execute"#,
            r#"  File "/c/comfy/model_management.py", line 2, in soft_empty_cache"#,
            r#"  File "/v/site-packages/torch/cuda/memory.py", line 3, in empty_cache"#,
        ]);
        assert_eq!(
            resurfaced_in_cleanup(&f).as_deref(),
            Some("soft_empty_cache")
        );
        let f = frames(&[r#"  File "/c/comfy/model_patcher.py", line 1, in partially_load"#]);
        assert_eq!(resurfaced_in_cleanup(&f), None);
    }

    fn verdict(evidence: &Evidence, kind: FailureKind, signals: &ConsoleSignals) -> StageVerdict {
        resolve(evidence, signals, kind, false, &failing_node(evidence))
    }

    #[test]
    fn a_non_memory_error_keeps_the_stage_of_its_place() {
        let e = Evidence {
            node_type: Some("VAEEncodeTiled".into()),
            exception_message: Some("INTERNAL ASSERT FAILED".into()),
            ..Evidence::default()
        };
        let v = verdict(&e, FailureKind::Other, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::Condition);
        assert_eq!(v.confidence, StageConfidence::Certain);
        let e = Evidence {
            exception_message: Some("mat1 and mat2 shapes cannot be multiplied".into()),
            traceback: vec![
                r#"  File "/c/comfy/samplers.py", line 1, in sample"#.into(),
                r#"  File "/c/comfy/k_diffusion/sampling.py", line 2, in sample_euler"#.into(),
            ],
            ..Evidence::default()
        };
        let signals = ConsoleSignals {
            sampling_bar: Some((7, 20)),
            ..ConsoleSignals::default()
        };
        assert_eq!(
            verdict(&e, FailureKind::Other, &signals).stage,
            Stage::SampleMiddle
        );
    }

    #[test]
    fn mapping_or_reading_a_model_file_is_load() {
        for msg in [
            "unable to mmap 23802932552 bytes from file <ComfyUI/models/unet/flux1-dev.safetensors>: Cannot allocate memory (12)",
            "Error while deserializing header: HeaderTooLarge",
            "GGUF magic invalid",
            // llama-cpp-python loading a language model's GGUF
            "Failed to load model from file: D:\\C\\models\\llm\\Qwen3VL-8B-Instruct-Q8_0.gguf",
        ] {
            let e = Evidence {
                exception_message: Some(msg.into()),
                ..Evidence::default()
            };
            let v = verdict(&e, FailureKind::HostRam, &ConsoleSignals::default());
            assert_eq!(v.stage, Stage::Load, "{msg}");
            assert_eq!(v.confidence, StageConfidence::Certain, "{msg}");
        }
        // An input image is not a model file.
        let e = Evidence {
            exception_message: Some(
                "unable to mmap 100 bytes from file <input/cat.png>: Cannot allocate memory (12)"
                    .into(),
            ),
            ..Evidence::default()
        };
        assert_eq!(
            verdict(&e, FailureKind::HostRam, &ConsoleSignals::default()).stage,
            Stage::Unknown
        );
    }

    #[test]
    fn nothing_locating_it_is_unknown_not_a_default() {
        let e = Evidence {
            node_type: Some("KSampler".into()),
            exception_message: Some("CUDA out of memory.".into()),
            ..Evidence::default()
        };
        let v = verdict(&e, FailureKind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::Unknown);
        assert_eq!(v.confidence, StageConfidence::Unknown);
        assert_eq!(
            v.candidates,
            vec![
                Stage::Unknown,
                Stage::Load,
                Stage::SampleFirst,
                Stage::SampleMiddle
            ]
        );
        assert!(
            v.evidence.contains("cannot be told apart"),
            "{}",
            v.evidence
        );
    }

    #[test]
    fn progress_alone_is_likely() {
        let e = Evidence {
            node_type: Some("KSampler".into()),
            exception_message: Some("CUDA out of memory.".into()),
            ..Evidence::default()
        };
        let signals = ConsoleSignals {
            sampling_bar: Some((0, 30)),
            ..ConsoleSignals::default()
        };
        let v = verdict(&e, FailureKind::CudaOom, &signals);
        assert_eq!(v.stage, Stage::SampleFirst);
        assert_eq!(v.confidence, StageConfidence::Likely);
    }

    #[test]
    fn a_timeline_node_without_progress_had_finished_no_step() {
        let e = Evidence {
            node_id: Some("3".into()),
            node_type: Some("KSampler".into()),
            exception_message: Some("CUDA out of memory.".into()),
            traceback: vec![
                r#"  File "/c/nodes.py", line 1, in sample"#.into(),
                r#"  File "/c/comfy/k_diffusion/sampling.py", line 2, in sample_euler"#.into(),
            ],
            progress: vec![NodeProgress {
                node_id: "3".into(),
                class_type: Some("KSampler".into()),
                value: 0,
                max: 0,
            }],
            ..Evidence::default()
        };
        let v = verdict(&e, FailureKind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::SampleFirst, "{}", v.evidence);
        // Without the timeline entry, first and later step stay open.
        let e = Evidence {
            progress: vec![],
            ..e
        };
        let v = verdict(&e, FailureKind::CudaOom, &ConsoleSignals::default());
        assert_eq!(v.stage, Stage::Unknown);
        assert_eq!(
            v.candidates,
            vec![Stage::Unknown, Stage::SampleFirst, Stage::SampleMiddle]
        );
    }

    #[test]
    fn faulthandler_stacks_are_read_deepest_first() {
        // faulthandler prints the most recent call first and no comma before `in`.
        let f = frames(&[
            r#"File "E:/a/site-packages/torch/storage.py", line 314 in __getitem__"#,
            r#"File "E:/a/site-packages/safetensors/torch.py", line 310 in load_file"#,
            r#"File "E:/a/custom_nodes/ComfyUI-SUPIR/sgm/modules/encoders/modules.py", line 465 in __init__"#,
        ]);
        assert_eq!(f.first().unwrap().func, "__init__");
        assert_eq!(classify_traceback(&f).unwrap().0, FrameCat::Load);
    }

    fn text_stage(log: &str) -> (Stage, Vec<Stage>, String) {
        let d = crate::diagnose::diagnose_text(log).expect("a failure or a log that ends");
        (d.stage, d.stage_candidates, d.stage_evidence)
    }

    /// Issue #40's rule 7(d): a node's own line in plain words, as the last activity before the
    /// end or the error, places the stage (lines shaped like real node logs).
    #[test]
    fn a_node_line_as_the_last_activity_places_the_stage() {
        let ends = "got prompt\n[22:32:48] [  0.64s] [I2V-Inference] Encoding 73 frames at 480x480 resolution...\n[22:32:54] [  6.58s] [I2V-Inference] Running dual-expert rCM sampling...\n[22:32:54] [  6.58s] [I2V-Inference] Aggressive VRAM cleanup before loading diffusion model...\n[22:32:55] [  7.07s] [I2V-Inference] VRAM before high noise model: 0.02GB allocated, 0.12GB reserved\n";
        let (stage, _, why) = text_stage(ends);
        assert_eq!(stage, Stage::Load, "{why}");
        assert!(why.contains("loading diffusion model"), "{why}");
        let error = "got prompt\nRequested to load WanVAE\nloaded completely; 9000.00 MB usable, 242.00 MB loaded, full load: True\n2026-02-01 10:00:00,000 - INFO - 🎨 [MyNode] VAE encoding 81 frames\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 2.00 GiB.\n";
        let (stage, candidates, why) = text_stage(error);
        assert_eq!(stage, Stage::Condition, "{why}");
        assert_eq!(candidates, [Stage::Condition, Stage::Load]);
        let upscale = "got prompt\n100%|██████████| 20/20 [00:10<00:00,  2.00it/s]\n[RIFE] Interpolating 81 frames x2\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB.\n";
        assert_eq!(text_stage(upscale).0, Stage::Postprocess);
        let sampling = "got prompt\n[Sampler-Pack] Sampling 30 steps with euler\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB.\n";
        assert_eq!(text_stage(sampling).0, Stage::SampleFirst);
    }

    /// A model line, a bar or a staged model after the node's line is the later activity; a
    /// plain node class decides before the node's lines.
    #[test]
    fn a_node_line_is_only_read_when_it_is_the_last_activity() {
        let model_after =
            "got prompt\n[MyNode] Encoding image with VAE...\nRequested to load WAN21\n";
        let (_, candidates, why) = text_stage(model_after);
        assert_eq!(candidates, [Stage::Load, Stage::SampleFirst], "{why}");
        let staged_after = "got prompt\n[MyNode] Encoding image with VAE...\nRequested to load WAN21\nModel WAN21 prepared for dynamic VRAM loading. 13627MB Staged. 0 patches attached.\n";
        let (_, candidates, why) = text_stage(staged_after);
        assert_eq!(candidates, [Stage::SampleFirst, Stage::Load], "{why}");
        let bar_after = "got prompt\n[MyNode] Loading transformer model weights\n 35%|███▌      | 7/20 [00:10<00:20,  1.5s/it]\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB.\n";
        assert_eq!(text_stage(bar_after).0, Stage::SampleMiddle);
        let plain_node = "got prompt\n[MyNode] Loading models from: [\n!!! Exception during processing !!! CUDA out of memory. Tried to allocate 1.00 GiB.\n\n## Error Details\n- **Node ID:** 8\n- **Node Type:** VAEDecode\n";
        assert_eq!(text_stage(plain_node).0, Stage::Decode);
    }

    #[test]
    fn node_classes() {
        assert_eq!(node_category("VHS_LoadVideoPath"), NodeCat::InputMedia);
        assert_eq!(node_category("NunchakuQwenImageDiTLoader"), NodeCat::Loader);
        assert_eq!(node_category("UpscaleModelLoader"), NodeCat::Loader);
        assert_eq!(node_category("RIFE VFI"), NodeCat::Postprocess);
        assert_eq!(node_category("vhs_videocombine"), NodeCat::Postprocess);
        assert_eq!(node_category("VAEDecodeTiled"), NodeCat::Decode);
        assert_eq!(node_category("CLIPTextEncode"), NodeCat::Condition);
        assert_eq!(node_category("BNK_Unsampler"), NodeCat::Sampler);
        assert_eq!(node_category("SamplerCustomAdvanced"), NodeCat::Sampler);
        assert_eq!(node_category("LatentUpscaleBy"), NodeCat::Other);
        // A model family with a media word in its name is still a model loader.
        assert_eq!(node_category("ZImageLoader"), NodeCat::Loader);
        assert_eq!(node_category("LoadImage"), NodeCat::InputMedia);
        assert_eq!(node_category("LTXVImgToVideoInplace"), NodeCat::Condition);
        assert_eq!(node_category("WanImageToVideo"), NodeCat::Condition);
    }
}
