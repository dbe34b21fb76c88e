//! What a variant asks its output nodes to write, where the graph says it: the pixel size and
//! number of images reaching an output node, followed upstream through the core nodes whose
//! effect on the size is known (latent sources, samplers, VAE decode/encode, latent and image
//! scalers, model upscalers with the scale in the model's name, batch repeats). Anything else on
//! the way (a custom node, a loaded image) means "the graph does not say", never a guess. Pure.

use crate::catalog::{self, Temporal};
use crate::workflow::{Input, Workflow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The images a node receives, as the graph asks for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedImages {
    /// Pixels.
    pub width: u64,
    /// Pixels.
    pub height: u64,
    /// Images (batch × frames).
    pub count: u64,
}

/// Deepest chain followed (a graph is acyclic; this bounds a malformed one).
const MAX_DEPTH: usize = 64;

/// The images that reach output node `node` through its `images` input (or, for `SaveVideo`,
/// the images its `video` was made of by `CreateVideo`); `None` when the graph does not say.
/// An animated or video saver writes them all as the frames of one file (SaveAnimatedWEBP,
/// SaveAnimatedPNG, SaveWEBM, SaveVideo, VHS_VideoCombine), so `count` is its frame count.
pub fn expected_images(w: &Workflow, node: &str) -> Option<ExpectedImages> {
    let n = w.node(node)?;
    // VHS_VideoCombine's ping-pong appends the frames backwards: only a literal `false` (or
    // no such input) keeps the count.
    let pingpong = n.inputs.get("pingpong").map(Input::as_literal);
    if n.class_type == "VHS_VideoCombine"
        && pingpong.is_some_and(|v| v.and_then(Value::as_bool) != Some(false))
    {
        return None;
    }
    if let Some(source) = n.inputs.get("images").and_then(Input::as_link) {
        return image_of(w, &source.node, 0);
    }
    let video = n.inputs.get("video")?.as_link()?;
    let maker = w.node(&video.node)?;
    if maker.class_type != "CreateVideo" {
        return None;
    }
    image_of(w, linked(w, &video.node, "images")?, 1)
}

/// An integer input: a literal, or a link to a primitive node's `value`.
fn int(w: &Workflow, node: &str, name: &str) -> Option<i64> {
    num(w, node, name).map(|f| f as i64)
}

fn num(w: &Workflow, node: &str, name: &str) -> Option<f64> {
    let input = w.node(node)?.inputs.get(name)?;
    let literal = match input {
        Input::Literal(v) => v.clone(),
        Input::Link(l) => w.node(&l.node)?.inputs.get("value")?.as_literal()?.clone(),
    };
    match literal {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn linked<'a>(w: &'a Workflow, node: &str, name: &str) -> Option<&'a str> {
    w.node(node)?
        .inputs
        .get(name)?
        .as_link()
        .map(|l| l.node.as_str())
}

impl ExpectedImages {
    /// The same images scaled by `s` on both sides, rounded as ComfyUI rounds.
    fn scaled(self, s: f64) -> ExpectedImages {
        ExpectedImages {
            width: round(self.width as f64 * s),
            height: round(self.height as f64 * s),
            ..self
        }
    }
}

fn round(x: f64) -> u64 {
    x.round().max(1.0) as u64
}

/// Explicit width/height where 0 keeps the aspect of `upstream` (ComfyUI's `ImageScale` and
/// `LatentUpscale`).
fn explicit_size(w: &Workflow, node: &str, up: ExpectedImages) -> Option<(u64, u64)> {
    let (wi, hi) = (int(w, node, "width")?, int(w, node, "height")?);
    match (wi.max(0) as u64, hi.max(0) as u64) {
        (0, 0) => Some((up.width, up.height)),
        (0, h) => Some((round(up.width as f64 * h as f64 / up.height as f64), h)),
        (wd, 0) => Some((wd, round(up.height as f64 * wd as f64 / up.width as f64))),
        (wd, h) => Some((wd, h)),
    }
}

/// Pixel images out of `node`.
fn image_of(w: &Workflow, node: &str, depth: usize) -> Option<ExpectedImages> {
    if depth > MAX_DEPTH {
        return None;
    }
    let class = w.node(node)?.class_type.as_str();
    let up = |input: &str| image_of(w, linked(w, node, input)?, depth + 1);
    match class {
        "EmptyImage" => Some(ExpectedImages {
            width: int(w, node, "width")? as u64,
            height: int(w, node, "height")? as u64,
            count: int(w, node, "batch_size")? as u64,
        }),
        "VAEDecode" | "VAEDecodeTiled" => latent_of(w, linked(w, node, "samples")?, depth + 1),
        "ImageScale" => {
            let u = up("image")?;
            let (width, height) = explicit_size(w, node, u)?;
            Some(ExpectedImages { width, height, ..u })
        }
        "ImageScaleBy" => {
            let u = up("image")?;
            let s = num(w, node, "scale_by")?;
            Some(u.scaled(s))
        }
        "ImageScaleToTotalPixels" => {
            let u = up("image")?;
            let total = num(w, node, "megapixels")? * 1024.0 * 1024.0;
            let s = (total / (u.width * u.height) as f64).sqrt();
            Some(u.scaled(s))
        }
        "ImageUpscaleWithModel" => {
            let u = up("image")?;
            let loader = w.node(linked(w, node, "upscale_model")?)?;
            let s = loader
                .inputs
                .values()
                .filter_map(Input::as_literal)
                .filter_map(Value::as_str)
                .find_map(super::passes::model_scale)?;
            Some(u.scaled(s))
        }
        "RepeatImageBatch" => {
            let u = up("image")?;
            Some(ExpectedImages {
                count: u.count * int(w, node, "amount")?.max(1) as u64,
                ..u
            })
        }
        // image2 is scaled to image1's size and appended.
        "ImageBatch" => {
            let (a, b) = (up("image1")?, up("image2")?);
            Some(ExpectedImages {
                count: a.count + b.count,
                ..a
            })
        }
        _ => None,
    }
}

/// Video latent sources with a `length` input followed here: the spatial compression `s` of
/// the VAE they are made for; the temporal one `t` is the catalog's ([`catalog::temporal`]).
/// The latent holds `(length − 1) / t + 1` frames of `width / s` × `height / s` (integer
/// division), which the VAE decodes to `(frames − 1) · t + 1` images of `s` times the latent
/// size, batch after batch. `WanVaceToVideo` is not here: a reference image adds latent frames
/// that `TrimVideoLatent` later removes.
const VIDEO_LATENTS: &[(&str, u64)] = &[
    ("EmptyHunyuanLatentVideo", 8),
    ("HunyuanImageToVideo", 8),
    ("WanImageToVideo", 8),
    ("WanFirstLastFrameToVideo", 8),
    ("WanFunControlToVideo", 8),
    ("WanFunInpaintToVideo", 8),
    ("WanCameraImageToVideo", 8),
    ("WanPhantomSubjectToVideo", 8),
    ("Wan22ImageToVideoLatent", 16),
    ("EmptyMochiLatentVideo", 8),
    ("EmptyLTXVLatentVideo", 32),
    ("LTXVImgToVideo", 32),
    ("EmptyCosmosLatentVideo", 8),
    ("CosmosImageToVideoLatent", 8),
];

/// The images a video latent source's `length` × `batch_size` decode to.
fn video_latent(w: &Workflow, node: &str, t: u64, s: u64) -> Option<ExpectedImages> {
    let length = int(w, node, "length")?;
    let batch = int(w, node, "batch_size").unwrap_or(1);
    if length < 1 || batch < 1 {
        return None;
    }
    let latent_frames = (length as u64 - 1) / t + 1;
    Some(ExpectedImages {
        width: int(w, node, "width")?.max(0) as u64 / s * s,
        height: int(w, node, "height")?.max(0) as u64 / s * s,
        count: ((latent_frames - 1) * t + 1) * batch as u64,
    })
}

/// The pixel size a latent out of `node` decodes to (its latent size × 8) and its batch.
fn latent_of(w: &Workflow, node: &str, depth: usize) -> Option<ExpectedImages> {
    if depth > MAX_DEPTH {
        return None;
    }
    let class = w.node(node)?.class_type.as_str();
    let up = |input: &str| latent_of(w, linked(w, node, input)?, depth + 1);
    // Latents are 1/8 of the pixels, rounded down.
    let eighth = |px: u64| px / 8 * 8;
    match class {
        "EmptyLatentImage" | "EmptySD3LatentImage" => Some(ExpectedImages {
            width: eighth(int(w, node, "width")? as u64),
            height: eighth(int(w, node, "height")? as u64),
            count: int(w, node, "batch_size")? as u64,
        }),
        "KSampler" | "KSamplerAdvanced" | "SamplerCustom" | "SamplerCustomAdvanced" => {
            up("latent_image")
        }
        "LatentUpscale" => {
            let u = up("samples")?;
            let (width, height) = explicit_size(w, node, u)?;
            Some(ExpectedImages {
                width: eighth(width),
                height: eighth(height),
                ..u
            })
        }
        "LatentUpscaleBy" => {
            let u = up("samples")?;
            let s = num(w, node, "scale_by")?;
            Some(ExpectedImages {
                width: round(u.width as f64 / 8.0 * s) * 8,
                height: round(u.height as f64 / 8.0 * s) * 8,
                ..u
            })
        }
        "RepeatLatentBatch" => {
            let u = up("samples")?;
            Some(ExpectedImages {
                count: u.count * int(w, node, "amount")?.max(1) as u64,
                ..u
            })
        }
        // One latent per frame (the SVD VAE has no temporal compression).
        "SVD_img2vid_Conditioning" => Some(ExpectedImages {
            width: eighth(int(w, node, "width")? as u64),
            height: eighth(int(w, node, "height")? as u64),
            count: int(w, node, "video_frames")?.max(1) as u64,
        }),
        c if VIDEO_LATENTS.iter().any(|(v, _)| *v == c) => {
            let &(_, s) = VIDEO_LATENTS.iter().find(|(v, _)| *v == c)?;
            let Some(Temporal::Stride(t)) = catalog::temporal(c) else {
                return None;
            };
            video_latent(w, node, t, s)
        }
        "VAEEncode" | "VAEEncodeTiled" => {
            let u = image_of(w, linked(w, node, "pixels")?, depth + 1)?;
            Some(ExpectedImages {
                width: eighth(u.width),
                height: eighth(u.height),
                ..u
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wf(v: Value) -> Workflow {
        Workflow::from_json_str(&v.to_string(), "t.json").unwrap()
    }

    fn exp(width: u64, height: u64, count: u64) -> Option<ExpectedImages> {
        Some(ExpectedImages {
            width,
            height,
            count,
        })
    }

    #[test]
    fn the_example_asks_for_its_latent_size_times_the_upscaler_times_the_batch() {
        let text = std::fs::read_to_string(format!(
            "{}/../../workflows/sd15_txt2img_lora_upscale.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let w = Workflow::from_json_str(&text, "x.json").unwrap();
        // EmptyLatentImage 768×1024 batch 4 → KSampler → VAEDecode → random_compact_x2 → SaveImage.
        assert_eq!(expected_images(&w, "9"), exp(1536, 2048, 4));
    }

    #[test]
    fn the_captured_core_prompt_scales_to_its_explicit_size() {
        // The prompt of ws_core_success / history_core_success: EmptyImage 64×64 → ImageScale
        // 128×96 → SaveImage (3), and PreviewImage (4) of the EmptyImage. /view answered PNGs of
        // 128×96 and 64×64 (their IHDR in the capture).
        let h: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/comfyui/history_core_success.json",
                crate::FIXTURES
            ))
            .unwrap(),
        )
        .unwrap();
        let (_, entry) = h.as_object().unwrap().iter().next().unwrap();
        let w = wf(entry["prompt"][2].clone());
        assert_eq!(expected_images(&w, "3"), exp(128, 96, 1));
        assert_eq!(expected_images(&w, "4"), exp(64, 64, 1));
    }

    #[test]
    fn scalers_follow_comfyui_rounding_and_zero_keeps_the_aspect() {
        let w = wf(json!({
            "1": {"class_type": "EmptyLatentImage", "inputs": {"width": 770, "height": 500, "batch_size": 2}},
            "2": {"class_type": "KSampler", "inputs": {"latent_image": ["1", 0]}},
            "3": {"class_type": "LatentUpscaleBy", "inputs": {"samples": ["2", 0], "scale_by": 1.5}},
            "4": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0]}},
            "5": {"class_type": "ImageScaleBy", "inputs": {"image": ["4", 0], "scale_by": 0.5}},
            "6": {"class_type": "SaveImage", "inputs": {"images": ["5", 0]}},
            "7": {"class_type": "ImageScale", "inputs": {"image": ["4", 0], "width": 0, "height": 360}},
            "8": {"class_type": "PreviewImage", "inputs": {"images": ["7", 0]}},
            "9": {"class_type": "RepeatImageBatch", "inputs": {"image": ["4", 0], "amount": 3}},
            "10": {"class_type": "SaveImage", "inputs": {"images": ["9", 0]}}
        }));
        // 770×500 → latent 96×62 → ×1.5 = 144×93 → 1152×744 pixels → ×0.5 = 576×372.
        assert_eq!(expected_images(&w, "6"), exp(576, 372, 2));
        // Height 360, width from the aspect: 1152 × 360 / 744 = 557.4 → 557.
        assert_eq!(expected_images(&w, "8"), exp(557, 360, 2));
        assert_eq!(expected_images(&w, "10"), exp(1152, 744, 6));
    }

    fn captured_prompt(name: &str) -> Workflow {
        let h: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/comfyui-outputs/history/{name}",
                crate::FIXTURES
            ))
            .unwrap(),
        )
        .unwrap();
        let (_, entry) = h.as_object().unwrap().iter().next().unwrap();
        wf(entry["prompt"][2].clone())
    }

    #[test]
    fn the_captured_animated_and_video_prompts_ask_for_their_frames() {
        // The real prompts of tests/fixtures/comfyui-outputs: EmptyImage frames chained with
        // ImageBatch into the saver; ground_truth.json has what ComfyUI wrote.
        for (file, node, want) in [
            ("save_animated_webp_lossless.json", "2", exp(64, 64, 6)),
            ("save_animated_webp_lossy.json", "2", exp(80, 48, 6)),
            ("save_animated_png.json", "2", exp(64, 48, 5)),
            ("save_webm_vp9.json", "2", exp(64, 48, 6)),
            ("save_image_batch.json", "2", exp(64, 48, 4)),
            // CreateVideo #2 → SaveVideo #3.
            ("save_video_mp4_h264.json", "3", exp(64, 48, 8)),
            ("save_video_auto.json", "3", exp(64, 64, 4)),
        ] {
            assert_eq!(
                expected_images(&captured_prompt(file), node),
                want,
                "{file}"
            );
        }
    }

    #[test]
    fn every_followed_video_latent_has_its_stride_in_the_catalog() {
        for (class, _) in VIDEO_LATENTS {
            assert!(
                matches!(catalog::temporal(class), Some(Temporal::Stride(_))),
                "{class}"
            );
        }
    }

    #[test]
    fn video_latents_decode_to_their_length_on_the_vae_grid() {
        let w = wf(json!({
            "1": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": 848, "height": 480, "length": 49, "batch_size": 1}},
            "2": {"class_type": "KSampler", "inputs": {"latent_image": ["1", 0]}},
            "3": {"class_type": "VAEDecode", "inputs": {"samples": ["2", 0]}},
            "4": {"class_type": "CreateVideo", "inputs": {"images": ["3", 0], "fps": 24.0}},
            "5": {"class_type": "SaveVideo", "inputs": {"video": ["4", 0]}},
            "6": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["3", 0]}},
            // Off the 4n+1 grid: the latent holds (50 − 1) / 4 + 1 = 13 frames → 49 images.
            "7": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": 850, "height": 480, "length": 50, "batch_size": 2}},
            "8": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["7", 0]}},
            "9": {"class_type": "SaveWEBM", "inputs": {"images": ["8", 0]}},
            // WanImageToVideo's latent is its third output.
            "10": {"class_type": "WanImageToVideo", "inputs": {"width": 832, "height": 480, "length": 81, "batch_size": 1}},
            "11": {"class_type": "KSamplerAdvanced", "inputs": {"latent_image": ["10", 2]}},
            "12": {"class_type": "VAEDecode", "inputs": {"samples": ["11", 0]}},
            "13": {"class_type": "VHS_VideoCombine", "inputs": {"images": ["12", 0], "pingpong": false}},
            "14": {"class_type": "VHS_VideoCombine", "inputs": {"images": ["12", 0], "pingpong": true}},
            // LTXV: 8× in time, 32× in space.
            "15": {"class_type": "EmptyLTXVLatentVideo", "inputs": {"width": 768, "height": 500, "length": 97, "batch_size": 1}},
            "16": {"class_type": "VAEDecode", "inputs": {"samples": ["15", 0]}},
            "17": {"class_type": "SaveAnimatedPNG", "inputs": {"images": ["16", 0]}},
            // A video from somewhere the graph does not follow.
            "18": {"class_type": "LoadVideo", "inputs": {"file": "x.mp4"}},
            "19": {"class_type": "SaveVideo", "inputs": {"video": ["18", 0]}}
        }));
        assert_eq!(expected_images(&w, "5"), exp(848, 480, 49));
        assert_eq!(expected_images(&w, "6"), exp(848, 480, 49));
        assert_eq!(expected_images(&w, "9"), exp(848, 480, 98));
        assert_eq!(expected_images(&w, "13"), exp(832, 480, 81));
        assert_eq!(expected_images(&w, "14"), None);
        assert_eq!(expected_images(&w, "17"), exp(768, 480, 97));
        assert_eq!(expected_images(&w, "19"), None);
    }

    #[test]
    fn unknown_nodes_and_links_mean_the_graph_does_not_say() {
        let w = wf(json!({
            "1": {"class_type": "LoadImage", "inputs": {"image": "x.png"}},
            "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}},
            "3": {"class_type": "EmptyLatentImage", "inputs": {"width": ["9", 0], "height": 512, "batch_size": 1}},
            "9": {"class_type": "PrimitiveInt", "inputs": {"value": 640}},
            "4": {"class_type": "SomeCustomSampler", "inputs": {"latent": ["3", 0]}},
            "5": {"class_type": "VAEDecode", "inputs": {"samples": ["4", 0]}},
            "6": {"class_type": "SaveImage", "inputs": {"images": ["5", 0]}},
            "7": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0]}},
            "8": {"class_type": "SaveImage", "inputs": {"images": ["7", 0]}},
            "10": {"class_type": "UpscaleModelLoader", "inputs": {"model_name": "mystery.pth"}},
            "11": {"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": ["10", 0], "image": ["7", 0]}},
            "12": {"class_type": "SaveImage", "inputs": {"images": ["11", 0]}}
        }));
        assert_eq!(expected_images(&w, "2"), None);
        assert_eq!(expected_images(&w, "6"), None);
        // A primitive's value is read through its link.
        assert_eq!(expected_images(&w, "8"), exp(640, 512, 1));
        // An upscaler whose name does not say its scale.
        assert_eq!(expected_images(&w, "12"), None);
        assert_eq!(expected_images(&w, "99"), None);
    }
}
