//! Which model files an API-format prompt references, and in which ComfyUI model folders.
//!
//! Pure: reads the prompt only. All knowledge is in one ordered table, `RULES`, derived from
//! the loader classes of ComfyUI's `/object_info` (core and popular custom node packs) and the
//! `directory` the official templates give for each model.

use serde::Serialize;
use serde_json::Value;

/// ComfyUI's `diffusion_models` folder name list (`unet` is the legacy folder).
const DIFFUSION_MODELS: &[&str] = &["diffusion_models", "unet"];
/// ComfyUI's `text_encoders` folder name list (`clip` is the legacy folder).
const TEXT_ENCODERS: &[&str] = &["text_encoders", "clip"];
/// ComfyUI's `controlnet` folder name list (T2I adapters share it).
const CONTROLNET: &[&str] = &["controlnet", "t2i_adapter"];

/// One model file a loader node references.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelRef {
    /// The node id in the prompt (may be a subgraph path such as `"92:57"`).
    pub node_id: String,
    /// The node's class_type.
    pub class_type: String,
    /// The input that names the file (`lora_2` for a Power Lora Loader row).
    pub input: String,
    /// The file name as the workflow gives it, relative to its model folder.
    pub file: String,
    /// Folders under `models/` where ComfyUI looks for it, in ComfyUI's order.
    pub folders: Vec<&'static str>,
}

/// Which classes a rule applies to.
#[derive(Debug, Clone, Copy)]
enum Class {
    Any,
    Exact(&'static str),
    Contains(&'static str),
}

/// Which inputs a rule applies to.
#[derive(Debug, Clone, Copy)]
enum Input {
    Exact(&'static str),
    /// `prefix` + one or more digits + `suffix`: `lora_1`, `lora_01`, `lora_3_name`, `clip_name2`.
    Numbered(&'static str, &'static str),
}

/// One line of the table: inputs of matching classes name files in `folders`
/// (empty `folders`: the file is not kept under `models/`, so it is not a reference).
#[derive(Debug, Clone, Copy)]
struct Rule {
    class: Class,
    input: Input,
    folders: &'static [&'static str],
}

const fn rule(class: Class, input: Input, folders: &'static [&'static str]) -> Rule {
    Rule {
        class,
        input,
        folders,
    }
}

use Class::{Any, Contains, Exact as Cls};
use Input::{Exact as In, Numbered};

/// The loader table; the first matching rule wins, so class-specific rules come first.
const RULES: &[Rule] = &[
    // Frame-Interpolation (RIFE VFI, FILM VFI) downloads into its own pack folder, not models/.
    rule(Contains(" VFI"), In("ckpt_name"), &[]),
    rule(Contains("CLIPVision"), In("clip_name"), &["clip_vision"]),
    rule(
        Cls("UpscaleModelLoader"),
        In("model_name"),
        &["upscale_models"],
    ),
    rule(
        Cls("LatentUpscaleModelLoader"),
        In("model_name"),
        &["latent_upscale_models"],
    ),
    rule(
        Cls("FrameInterpolationModelLoader"),
        In("model_name"),
        &["frame_interpolation"],
    ),
    rule(
        Cls("OpticalFlowLoader"),
        In("model_name"),
        &["optical_flow"],
    ),
    rule(
        Cls("LoadDA3Model"),
        In("model_name"),
        &["geometry_estimation"],
    ),
    rule(
        Cls("LoadMoGeModel"),
        In("model_name"),
        &["geometry_estimation"],
    ),
    rule(Cls("SAMLoader"), In("model_name"), &["sams"]),
    // Impact Subpack lists `bbox/x.pt` / `segm/x.pt` under models/ultralytics/.
    rule(
        Cls("UltralyticsDetectorProvider"),
        In("model_name"),
        &["ultralytics"],
    ),
    rule(
        Cls("DiffusionModelLoaderKJ"),
        In("model_name"),
        DIFFUSION_MODELS,
    ),
    rule(Cls("WanVideoModelLoader"), In("model"), DIFFUSION_MODELS),
    rule(Cls("WanVideoVAELoader"), In("model_name"), &["vae"]),
    rule(
        Cls("LoadWanVideoT5TextEncoder"),
        In("model_name"),
        TEXT_ENCODERS,
    ),
    rule(Cls("WanVideoLoraSelect"), In("lora"), &["loras"]),
    rule(Cls("ModelPatchLoader"), In("name"), &["model_patches"]),
    // By input name, for every class (core loaders, GGUF, Easy-Use, rgthree, WaveSpeed, …).
    rule(Any, In("ckpt_name"), &["checkpoints"]),
    rule(Any, In("unet_name"), DIFFUSION_MODELS),
    rule(Any, In("lora_name"), &["loras"]),
    rule(Any, In("existing_lora"), &["loras"]),
    rule(Any, Numbered("lora_", ""), &["loras"]),
    rule(Any, Numbered("lora_", "_name"), &["loras"]),
    rule(Any, In("vae_name"), &["vae"]),
    rule(Any, In("clip_name"), TEXT_ENCODERS),
    rule(Any, Numbered("clip_name", ""), TEXT_ENCODERS),
    rule(Any, In("text_encoder"), TEXT_ENCODERS),
    rule(Any, In("clip_vision"), &["clip_vision"]),
    rule(Any, In("control_net_name"), CONTROLNET),
    rule(Any, In("style_model_name"), &["style_models"]),
    rule(Any, In("gligen_name"), &["gligen"]),
    rule(Any, In("hypernetwork_name"), &["hypernetworks"]),
    rule(Any, In("photomaker_model_name"), &["photomaker"]),
    rule(Any, In("audio_encoder_name"), &["audio_encoders"]),
    rule(Any, In("bg_removal_name"), &["background_removal"]),
    rule(Any, In("conditioning_name"), &["embeddings"]),
];

/// Values that are a loader's "no file" or built-in choices rather than a file name.
const NOT_A_FILE: &[&str] = &["none", "[none]", "baked vae", "default"];

impl Class {
    fn matches(self, class_type: &str) -> bool {
        match self {
            Any => true,
            Cls(name) => class_type == name,
            Contains(part) => class_type.contains(part),
        }
    }
}

impl Input {
    fn matches(self, input: &str) -> bool {
        match self {
            In(name) => input == name,
            Numbered(prefix, suffix) => input
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .is_some_and(|digits| {
                    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                }),
        }
    }
}

/// The model folders for `input` of `class_type`, or `None` when it does not name a model file
/// kept under `models/`.
pub(crate) fn folders_for(class_type: &str, input: &str) -> Option<&'static [&'static str]> {
    RULES
        .iter()
        .find(|r| r.class.matches(class_type) && r.input.matches(input))
        .map(|r| r.folders)
        .filter(|folders| !folders.is_empty())
}

/// Every model file referenced by the loader nodes of an API-format prompt
/// (`{id: {class_type, inputs}}`), in prompt order. Links (`[node_id, slot]`) are skipped, as are
/// "None"-style choices, names without a file extension (built-ins such as `pixel_space`) and
/// Power Lora Loader rows that are switched off.
pub fn model_references(prompt: &Value) -> Vec<ModelRef> {
    let mut refs = Vec::new();
    let Some(nodes) = prompt.as_object() else {
        return refs;
    };
    for (node_id, node) in nodes {
        let Some(class_type) = node.get("class_type").and_then(Value::as_str) else {
            continue;
        };
        let Some(inputs) = node.get("inputs").and_then(Value::as_object) else {
            continue;
        };
        for (input, value) in inputs {
            let Some(folders) = folders_for(class_type, input) else {
                continue;
            };
            let Some(file) = file_name(value) else {
                continue;
            };
            refs.push(ModelRef {
                node_id: node_id.clone(),
                class_type: class_type.to_string(),
                input: input.clone(),
                file: file.to_string(),
                folders: folders.to_vec(),
            });
        }
    }
    refs
}

/// The file named by an input value: a string, or an rgthree Power Lora Loader row
/// `{"on": true, "lora": "<file>", …}`. `None` for links, switched-off rows and non-files.
fn file_name(value: &Value) -> Option<&str> {
    let name = match value {
        Value::String(s) => s.as_str(),
        Value::Object(row) => {
            if row.get("on").and_then(Value::as_bool) == Some(false) {
                return None;
            }
            row.get("lora")?.as_str()?
        }
        _ => return None,
    };
    let name = name.trim();
    if name.is_empty() || NOT_A_FILE.contains(&name.to_ascii_lowercase().as_str()) {
        return None;
    }
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.is_empty() => Some(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbered_inputs_need_digits() {
        assert!(Numbered("lora_", "").matches("lora_1"));
        assert!(Numbered("lora_", "").matches("lora_01"));
        assert!(Numbered("lora_", "_name").matches("lora_10_name"));
        assert!(Numbered("clip_name", "").matches("clip_name4"));
        assert!(!Numbered("lora_", "").matches("lora_"));
        assert!(!Numbered("lora_", "").matches("lora_1_strength"));
        assert!(!Numbered("clip_name", "").matches("clip_names"));
    }

    #[test]
    fn class_specific_rules_win_over_input_names() {
        assert_eq!(
            folders_for("CLIPVisionLoader", "clip_name"),
            Some(&["clip_vision"][..])
        );
        assert_eq!(folders_for("CLIPLoader", "clip_name"), Some(TEXT_ENCODERS));
        assert_eq!(
            folders_for("LatentUpscaleModelLoader", "model_name"),
            Some(&["latent_upscale_models"][..])
        );
        assert_eq!(folders_for("RIFE VFI", "ckpt_name"), None);
        assert_eq!(folders_for("SomeUnknownNode", "model_name"), None);
        assert_eq!(
            folders_for("UnetLoaderGGUF", "unet_name"),
            Some(DIFFUSION_MODELS)
        );
    }

    #[test]
    fn links_sentinels_and_switched_off_rows_are_skipped() {
        let prompt = json!({
            "1": {"class_type": "LoraLoader", "inputs": {"lora_name": ["4", 0], "model": ["2", 0]}},
            "2": {"class_type": "VAELoader", "inputs": {"vae_name": "pixel_space"}},
            "3": {"class_type": "easy loraStack", "inputs": {"lora_1_name": "None", "lora_2_name": "a/b.safetensors"}},
            "4": {"class_type": "Power Lora Loader (rgthree)", "inputs": {
                "PowerLoraLoaderHeaderWidget": {"type": "PowerLoraLoaderHeaderWidget"},
                "lora_1": {"on": true, "lora": "x.safetensors", "strength": 1.0},
                "lora_2": {"on": false, "lora": "y.safetensors", "strength": 1.0},
                "➕ Add Lora": ""}}
        });
        let got: Vec<(String, String, String)> = model_references(&prompt)
            .into_iter()
            .map(|r| (r.node_id, r.input, r.file))
            .collect();
        assert_eq!(
            got,
            vec![
                ("3".into(), "lora_2_name".into(), "a/b.safetensors".into()),
                ("4".into(), "lora_1".into(), "x.safetensors".into()),
            ]
        );
    }
}
