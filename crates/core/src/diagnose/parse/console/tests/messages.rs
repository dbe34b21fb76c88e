//! Errors as the text shows them: exception blocks, messages alone, errors printed in words, the
//! error dialog and report (rendered, translated), cut exception lines.

use super::*;

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

#[test]
fn a_quoted_execution_error_names_its_node() {
    let log = "RuntimeError: [\"execution_error\", {\"prompt_id\": \"e1\", \"node_id\": \"9050\", \"node_type\": \"CLIPLoaderGGUF\", \"executed\": [\"9056\"], \"exception_message\": \"Unexpected text model architecture type in GGUF file: 'gemma4'\\n\", \"exception_type\": \"ValueError\", \"traceback\": [\"  File \\\"execution.py\\\", line 545";
    let p = parse_input(log).expect("parses");
    assert_eq!(p.evidence.node_type.as_deref(), Some("CLIPLoaderGGUF"));
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

/// A report translated into any language is read by the place of its fields (the title keeps
/// the product's name); the same list under another title is not a report.
#[test]
fn a_report_in_any_language_is_read_by_its_fields_places() {
    let report = "# Relatório de erro do ComfyUI\n## Detalhes do erro\n- **ID do nó:** 26\n- **Tipo de nó:** KSampler\n- **Tipo de exceção:** torch.OutOfMemoryError\n- **Mensagem de exceção:** Alocação no dispositivo\n## Rastreamento de pilha\n";
    let d = kind_of(report, FailureKind::CudaOom);
    assert_eq!(d.node_type.as_deref(), Some("KSampler"));
    assert_eq!(d.node_id.as_deref(), Some("26"));
    let notes = "# Meu computador\n## Placa\n- **GPU:** RTX 3060\n- **Driver:** 555\n- **Erro:** torch.OutOfMemoryError\n- **Memória:** 12 GB\n";
    assert!(crate::diagnose::diagnose_text(notes).is_err(), "{notes}");
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

/// An error report pasted above the console it came from (which starts with ComfyUI's start-up)
/// is a run's failure, not a start-up error ComfyUI went on after; a node pack's import error
/// before the start-up still is.
#[test]
fn a_report_above_its_start_up_log_is_the_failure() {
    let report = "# ComfyUI Error Report\n## Error Details\n- **Node ID:** 2\n- **Node Type:** STATIC_TRT_MODEL_CONVERSION\n- **Exception Type:** torch.onnx._internal.exporter._errors.TorchExportError\n- **Exception Message:** Failed to export the model with torch.export.\n\n** ComfyUI startup time: 2026-01-08 01:21:46.18\n** Platform: Linux\nTraceback (most recent call last):\n  File \"/home/user/env/lib/python3.12/site-packages/torch/export/__init__.py\", line 277, in export\n    return _export(\n";
    let d = kind_of(report, FailureKind::Other);
    assert_eq!(d.node_type.as_deref(), Some("STATIC_TRT_MODEL_CONVERSION"));
    let noise = "Traceback (most recent call last):\n  File \"/home/user/ComfyUI/custom_nodes/pack/__init__.py\", line 3, in <module>\n    import missing\nModuleNotFoundError: No module named 'missing'\n\n** ComfyUI startup time: 2026-01-08 01:21:46.18\n** Platform: Linux\n";
    assert!(crate::diagnose::diagnose_text(noise).is_err());
}

/// A node's own error line (after its tag, naming what it was doing) right above a traceback
/// cut before its exception line names that traceback's error; the same line followed by the
/// node's INFO lines is one the run went on after.
#[test]
fn an_error_line_above_its_cut_traceback_names_it() {
    let cut = "got prompt\n[UniRigLoadSkinningModel] Loading skinning model: VAST-AI/UniRig\n[UniRigLoadSkinningModel] Error loading model: No module named 'torch_cluster'\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/custom_nodes/ComfyUI-UniRig/nodes/model_loaders.py\", line 300, in load_model\n    model_cache = _get_model_cache()\n";
    message_saying(cut, FailureKind::Other, "torch_cluster");
    let went_on = "got prompt\n[worker:x] ERROR: Failed to import comfy_kitchen, Error: No module named 'comfy_kitchen', fp8 support will not be available.\n[worker:x] INFO: [LoadModels] Checking models...\n";
    assert_eq!(
        crate::diagnose::diagnose_text(went_on).unwrap().kind,
        FailureKind::Unknown
    );
}

/// A text with no run and no start-up in it is the error it ends its work on: a tool's error
/// lines (ffmpeg's `… Error closing file: …`), the reasons a prompt was refused, an error block
/// with the node's advice after it. An error the lines after it go on past (`Importing …`,
/// `Success`) is not.
#[test]
fn a_text_with_no_run_is_its_last_error() {
    let ffmpeg = "[vost#0:0/rawvideo @ 0x5b7c14f10080] Error submitting a packet to the muxer: Broken pipe\n[out#0/rawvideo @ 0x5b7c14f1f440] Error muxing a packet\n[out#0/rawvideo @ 0x5b7c14f1f440] Error closing file: Broken pipe\n";
    kind_of(ffmpeg, FailureKind::Other);
    let refused = "  - Value not in list: adaptive: '1' not in ['true', 'false']\n  - Value 0 smaller than min of 100: target_vertex_count\n  - Required input is missing: mesh\n";
    let d = kind_of(refused, FailureKind::Other);
    assert!(
        d.stage_evidence.contains("validation"),
        "{}",
        d.stage_evidence
    );
    let advice = "Failed to handle your request: HTTP Error 500: Internal Server Error\n\nError code: 60000\nError message: status: 404. error: {\"detail\":\"Not Found\"}\n\nThe cause of this issue may be incorrect parameters.\nPlease report it to the official support.\n";
    message_saying(advice, FailureKind::Other, "404");
    let went_on = "[comfy-env] Importing blender...\n[comfy-env] Failed to import .nodes.blender: No module named 'bpy'\n[comfy-env] Importing gpu...\n[comfy-env] Imported gpu: 3 nodes\n";
    assert!(crate::diagnose::diagnose_text(went_on).is_err());
    kind_of(
        "Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of [1, 175, 93]",
        FailureKind::Other,
    );
}

/// Python's logging failing to write a record (`--- Logging error ---`, its own traceback, the
/// call stack, up to `Arguments:`) is not the run's failure; the run's own error still is.
#[test]
fn a_logging_error_is_not_the_failure() {
    let logging = "got prompt\n[TTS] Loading local model\n--- Logging error ---\nTraceback (most recent call last):\n  File \"C:\\Python\\Lib\\logging\\__init__.py\", line 1154, in emit\n    stream.write(msg + self.terminator)\nUnicodeEncodeError: 'charmap' codec can't encode character '\\u274c' in position 36\nCall stack:\n  File \"C:\\Python\\Lib\\threading.py\", line 1044, in _bootstrap\nMessage: 'failed'\nArguments: ()\n";
    assert_eq!(
        crate::diagnose::diagnose_text(logging).unwrap().kind,
        FailureKind::Unknown
    );
    let run_error = "got prompt\n--- Logging error ---\n!!! Exception during processing !!! [Errno 22] Invalid argument\n--- Logging error ---\nTraceback (most recent call last):\n  File \"C:\\ComfyUI\\execution.py\", line 515, in execute\n";
    message_saying(run_error, FailureKind::Other, "Errno 22");
}

/// The message pasted above a traceback cut before its exception line names its error (the
/// error dialog shows the message, then the traceback); a thread's header above it does not.
/// ComfyUI's report of an unavailable comfy_kitchen backend at start-up is no error, and a node
/// pack's `❌ X failed` lines followed by `✅ … loaded` are errors the pack went on after.
#[test]
fn a_message_above_its_cut_traceback_names_it() {
    let cut = "The size of tensor a (3520) must match the size of tensor b (466816) at non-singleton dimension 2\n\nTraceback (most recent call last):\n  File \"/root/ComfyUI/execution.py\", line 518, in execute\n    output_data = get()\n";
    message_saying(cut, FailureKind::Other, "must match");
    let header = "Exception in thread Thread-14 (prompt_worker):\nTraceback (most recent call last):\n  File \"/root/ComfyUI/execution.py\", line 518, in execute\n    output_data = get()\n";
    kind_of(header, FailureKind::Unknown);
    let kitchen = "Set vram state to: NORMAL_VRAM\nFound comfy_kitchen backend cuda: {'available': False, 'disabled': True, 'unavailable_reason': 'DLL load failed while importing _C'}\n";
    assert!(crate::diagnose::diagnose_text(kitchen).is_err());
    let pack = "❌ IndexTTS-2 Engine failed: No module named 'utils.models'\n❌ RVC Engine failed: No module named 'engines.rvc'\n======\n✅ TTS Audio Suite loaded with 20 nodes:\n";
    assert!(crate::diagnose::diagnose_text(pack).is_err());
}

/// A node pack's import error at start-up is no failure also when only the notice after it
/// shows it: ComfyUI's `Cannot import X module for custom nodes: …` after the traceback, or a
/// pack's `… import failed:` opening its next import traceback. A script a pack runs in a
/// process of its own (`<module>` calling `main()`, each line under torchrun's `[rank1]: `) is
/// a run's failure. So are `Failed to <do>: <why>` after a run's work and a CUDA kernel's
/// device-side assertion.
#[test]
fn import_notices_worker_scripts_and_worded_failures() {
    let kjnodes = "File \"F:\\ComfyUI\\custom_nodes\\ComfyUI-KJNodes\\nodes\\model_optimization_nodes.py\", line 10, in <module>from comfy.ldm.modules.attention import wrap_attn\nImportError: cannot import name 'wrap_attn' from 'comfy.ldm.modules.attention'\n\nCannot import F:\\ComfyUI\\custom_nodes\\ComfyUI-KJNodes module for custom nodes: cannot import name 'wrap_attn'\n";
    assert!(crate::diagnose::diagnose_text(kjnodes).is_err());
    let nunchaku = "  File \"D:\\python_embeded\\Lib\\site-packages\\nunchaku\\models\\linear.py\", line 10, in <module>\n    from ..._C.ops import gemm_awq\nImportError: DLL load failed while importing _C: The specified module could not be found.\nNodes `NunchakuPulidApply` import failed:\nTraceback (most recent call last):\n  File \"D:\\ComfyUI\\custom_nodes\\ComfyUI-nunchaku\\__init__.py\", line 119, in <module>\n";
    assert!(crate::diagnose::diagnose_text(nunchaku).is_err());
    let worker = "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/home/user/ComfyUI/custom_nodes/pack/sp_worker.py\", line 136, in <module>\n[rank1]:     main()\n[rank1]:   File \"/home/user/ComfyUI/custom_nodes/pack/sp_forward.py\", line 470, in sp_forward\n[rank1]:     rows[~mask] = cond\n[rank1]: RuntimeError: shape mismatch: value tensor of shape [390, 96] cannot be broadcast\n";
    message_saying(worker, FailureKind::Other, "shape mismatch");
    let send = "got prompt\n100%|██████████| 4/4 [03:50<00:00, 57.68s/it]\nRequested to load WanVAE\nloaded completely; 287.28 MB usable, 242.03 MB loaded, full load: True\n[Distributed] Worker - Failed to send chunk to master: Cannot connect to host 10.0.0.2:8188\n[Distributed] Worker - Full error detai";
    message_saying(send, FailureKind::Other, "Failed to send chunk");
    let assert_line = "C:\\ComfyUI>.\\python_embeded\\python.exe -s ComfyUI\\main.py --windows-standalone-build\n[INFO] setup plugin alembic.autogenerate.schemas\nC:\\pytorch\\aten\\src\\ATen\\native\\cuda\\ScatterGatherKernel.cu:204: block: [0,0,0], thread: [97,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && \"scatter gather kernel index out of bounds\"` failed.\n";
    message_saying(assert_line, FailureKind::Other, "ScatterGatherKernel.cu");
}

/// An exception a node caught and printed, then its saying it falls back to another way, is an
/// error the run went on after; the same exception with nothing after it is the failure.
#[test]
fn an_exception_the_node_falls_back_from_is_no_failure() {
    let head = "[Cache] Found 48 blocks\nTraceback (most recent call last):\n  File \"/home/user/ComfyUI/custom_nodes/cache/nodes.py\", line 675, in enable\n    raise RuntimeError(\"adapter has no transformer\")\nRuntimeError: adapter has no transformer\n";
    let fell_back = format!("{head}[Cache] Falling back to a forward hook\n[Cache] Transformer already patched, skipping\n");
    assert!(crate::diagnose::diagnose_text(&fell_back).is_err());
    message_saying(head, FailureKind::Other, "no transformer");
    // ComfyUI's own report of the failed node stays the failure whatever follows it.
    let failed = format!("got prompt\n!!! Exception during processing !!! adapter has no transformer\n{head}[Cache] Falling back to a forward hook\n");
    message_saying(&failed, FailureKind::Other, "no transformer");
}

/// glibc's heap check printed as the text's last word (it aborts the process right after) is the
/// error the text ends on.
#[test]
fn a_glibc_heap_check_is_an_error() {
    let text = "Extracting keypoints: 100%|██████████| 10/10 [00:00<00:00, 51.67it/s]\nWarming up the pose model...\nPose model warmed up\nmunmap_chunk(): invalid pointer\n";
    message_saying(text, FailureKind::Other, "munmap_chunk");
    message_saying(
        "Loading model\ndouble free or corruption (out)\n",
        FailureKind::Other,
        "double free",
    );
    // any check of glibc's allocator, named by its function
    for check in [
        "free(): invalid next size (fast)",
        "malloc(): unaligned tcache chunk detected",
        "malloc_consolidate(): unaligned fastbin chunk detected",
        "tcache_thread_shutdown(): unaligned tcache chunk detected",
    ] {
        message_saying(
            &format!("Pose model warmed up\n{check}\n"),
            FailureKind::Other,
            check,
        );
    }
}

/// A debugger's backtrace deepest in comfy-aimdo's library is comfy-aimdo's crash (labelling
/// rule 3); one deepest in another library is not.
#[test]
fn a_native_stack_deepest_in_aimdo_is_aimdo() {
    let stack = |lib: &str| {
        format!("#0  0x0000000000000000 in ?? ()\n#1  0x00007ffff6a8d117 in alloc_hook () from /home/user/venv/lib/python3.12/site-packages/{lib}\n#2  0x00007ffeb80afcc4 in c10::hip::HIPCachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long) () from /home/user/venv/lib/python3.12/site-packages/torch/lib/libc10_hip.so\n")
    };
    let d = kind_of(&stack("comfy_aimdo/aimdo_rocm.so"), FailureKind::Aimdo);
    assert!(
        d.kind_evidence.contains("aimdo_rocm.so"),
        "{}",
        d.kind_evidence
    );
    let other = crate::diagnose::diagnose_text(&stack("torch/lib/libtorch_hip.so"))
        .map(|d| d.kind)
        .unwrap_or(FailureKind::Unknown);
    assert_ne!(other, FailureKind::Aimdo);
}

/// Exceptions Python reports and goes on after (an object's finaliser, asyncio's callback) are
/// no failure; exceptions not named `…Error` (torch.compile's `Unsupported`), comfy-aimdo's
/// `VBAR OOM` and hook error, the dialog's message whatever its words, a quoted message saying
/// something is not loaded are; a blank line between the lines of cudaMallocAsync's report does
/// not cut its figures.
#[test]
fn python_notices_and_named_errors() {
    let run = MID_RUN;
    let unraisable = "Exception ignored in: <function ModelPatcher.__del__ at 0x000001EAF8CA4F40>\nTraceback (most recent call last):\n  File \"A:\\C\\comfy\\model_patcher.py\", line 1357, in __del__\n    self.unpin_all_weights()\nAttributeError: 'ModelPatcher' object has no attribute 'pinned'\n";
    let callback = "Exception in callback _ProactorBasePipeTransport._call_connection_lost(None)\nhandle: <Handle _ProactorBasePipeTransport._call_connection_lost(None)>\nTraceback (most recent call last):\n  File \"H:\\C\\Lib\\asyncio\\events.py\", line 80, in _run\n    self._context.run(self._callback, *self._args)\nConnectionResetError: [WinError 10054] An existing connection was forcibly closed by the remote host\n";
    for notice in [unraisable, callback] {
        kind_of(&format!("{notice}{run}"), FailureKind::Unknown);
    }
    let startup = "PS C:\\ComfyUI> .\\python_embeded\\python.exe -m pip show transformers Name: transformers Version: 5.8.0\n\nCannot import C:\\ComfyUI\\custom_nodes\\seedvr2_videoupscale\n";
    assert!(crate::diagnose::diagnose_text(startup).is_err());
    let bnb = "bitsandbytes library load error: Configured CUDA binary not found at C:\\C\\.venv\\Lib\\site-packages\\bitsandbytes\\libbitsandbytes_cuda130.dll\n";
    assert!(crate::diagnose::diagnose_text(bnb).is_err());
    message_saying(
        &format!("{run}torch._dynamo.exc.Unsupported: Unsupported method call\n  Explanation: Dynamo does not know how to trace method `__mul__` of class `PyCSimpleType`\n"),
        FailureKind::Other,
        "Unsupported method call",
    );
    kind_of(
        &format!("{run}!!! Exception during processing !!! VBAR OOM\nTraceback (most recent call last):\n  File \"C:\\C\\comfy_aimdo\\model_vbar.py\", line 80, in alloc\n    raise MemoryError(\"VBAR OOM\")\nMemoryError: VBAR OOM\n"),
        FailureKind::Aimdo,
    );
    kind_of(
        "aimdo: src-win/cuda-detour.c:INFO:aimdo_setup_hooks: installing 6 hooks\naimdo: install_hook_entries: Hook cuMemAlloc_v2 failed 00007FFBAF2B5340\n",
        FailureKind::Aimdo,
    );
    kind_of(
        "SamplerCustomAdvanced\nFP8 _scaled_mm failed, falling back to dequantization: Both scale_a and scale_b must be float (fp32) tensors.\n",
        FailureKind::Other,
    );
    kind_of(
        "\"LTXVGemmaEnhancePrompt Processor not loaded - enhancement not available. Ensure your model directory has chat_template.json.\"\n",
        FailureKind::Other,
    );
    let spaced = "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory.\n\n(out of memory)Currently allocated     : 3.21 GiB\n\nRequested               : 1.53 GiB\n\nDevice limit            : 8.00 GiB\n\nFree (according to CUDA): 0 bytes\n";
    let d = kind_of(spaced, FailureKind::CudaOom);
    assert_eq!(d.numbers.requested_mib, Some(1566.72));
    assert_eq!(d.numbers.device_limit_mib, Some(8192.0));
}

/// Round 25, from comfy-aimdo's, Python's, aiohttp's, OpenCV's and ONNX Runtime's own words:
/// aimdo's CRITICAL lines and its other allocators' errors are `aimdo`; OpenCV's `Insufficient
/// memory` is host RAM; exceptions not named `…Error` end a traceback; an exception asyncio
/// logs and goes on after is no failure.
#[test]
fn library_words_read_from_their_sources() {
    let run = MID_RUN;
    let tb = "Traceback (most recent call last):\n  File \"/c/execution.py\", line 530, in execute\n    output_data = await get_output_data()\n  File \"/c/custom_nodes/x/nodes.py\", line 10, in run\n    y = f(x)\n";
    kind_of(
        &format!("{run}aimdo: src/pinned.c:88:CRITICAL:Host OOM\n"),
        FailureKind::Aimdo,
    );
    for msg in [
        "RuntimeError: VRAM grow failed: 1073741824 bytes",
        "RuntimeError: ModelMMAP allocation failed for /c/models/x.safetensors",
        "RuntimeError: HostBuffer.extend failed",
        "RuntimeError: HostBuffer allocation failed",
    ] {
        kind_of(&format!("{run}{tb}{msg}\n"), FailureKind::Aimdo);
    }
    kind_of(
        &format!("{run}{tb}cv2.error: OpenCV(4.10.0) /io/opencv/modules/core/src/alloc.cpp:73: error: (-4:Insufficient memory) Failed to allocate 1207959552 bytes in function 'OutOfMemoryError'\n"),
        FailureKind::HostRam,
    );
    for (line, part) in [
        ("cv2.error: OpenCV(4.10.0) resize.cpp:4152: error: (-215:Assertion failed) !ssize.empty() in function 'resize'", "Assertion failed"),
        ("onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : Load model from /c/models/x.onnx failed:Protobuf parsing failed.", "Protobuf parsing failed"),
        ("zipfile.BadZipFile: File is not a zip file", "not a zip file"),
    ] {
        message_saying(&format!("{run}{tb}{line}\n"), FailureKind::Other, part);
    }
    for notice in [
        "Task exception was never retrieved\nfuture: <Task finished name='Task-12' coro=<PromptServer.send() done> exception=ConnectionResetError('Cannot write to closing transport')>\nTraceback (most recent call last):\n  File \"/c/server.py\", line 900, in send\n    await ws.send_json(x)\nConnectionResetError: Cannot write to closing transport\n",
        "Future exception was never retrieved\nfuture: <Future finished exception=BrokenPipeError(32, 'Broken pipe')>\nTraceback (most recent call last):\n  File \"/usr/lib/python3.12/asyncio/proactor_events.py\", line 165, in _call_connection_lost\n    self._sock.shutdown(socket.SHUT_RDWR)\nBrokenPipeError: [Errno 32] Broken pipe\n",
    ] {
        kind_of(&format!("{notice}{run}"), FailureKind::Unknown);
    }
}

/// Issue #40 item 3 for an allocator: ggml's own `cudaMalloc failed: out of memory` (llama.cpp,
/// under a GGUF language-model node) wins over llama-cpp-python's `Failed to load model from
/// file` raised after it; without that line the wrapper is all there is.
#[test]
fn a_native_allocators_out_of_memory_line_wins_over_its_wrapper() {
    let head = "got prompt\nllama_model_loader: loaded meta data with 34 key-value pairs and 399 tensors from /m/LLM/q.gguf (version GGUF V3 (latest))\nload_tensors: offloading 28 repeating layers to GPU\n";
    let alloc = "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 7668.54 MiB on device 0: cudaMalloc failed: out of memory\nalloc_tensor_range: failed to allocate CUDA0 buffer of size 8040855552\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n";
    let tail = "!!! Exception during processing !!! Failed to load model from file: /m/LLM/q.gguf\nTraceback (most recent call last):\n  File \"/c/execution.py\", line 1, in execute\n    x()\n  File \"/v/site-packages/llama_cpp/llama.py\", line 374, in __init__\n    internals.LlamaModel(\n  File \"/v/site-packages/llama_cpp/_internals.py\", line 58, in __init__\n    raise ValueError(f\"Failed to load model from file: {path_model}\")\nValueError: Failed to load model from file: /m/LLM/q.gguf\n";
    let d = kind_of(&format!("{head}{alloc}{tail}"), FailureKind::CudaOom);
    assert_eq!(d.stage, crate::vocab::Stage::Load, "{d:?}");
    kind_of(&format!("{head}{tail}"), FailureKind::Other);
}
