//! The real output captures in `tests/fixtures/comfyui-outputs/` (ComfyUI 0.3.64 on CPU): the set
//! is self-consistent (every file the ground truth names is there with its size and hash, every
//! file a history entry lists is there, every case has its socket frames), and the product check
//! gives the real outcome on them: model savers report nothing in `/history` and are exempt,
//! animated images and videos are found under `images` with the `animated` flag, a fully cached
//! model saver (`executed` with a null output) and a fully cached video pass, and the image
//! header parser reads the captured animated files' sizes.

use comfy_bisect_core::comfy::events::EventTracker;
use comfy_bisect_core::comfy::media::{self, Header};
use comfy_bisect_core::comfy::protocol::PromptResponse;
use comfy_bisect_core::comfy::HistoryEntry;
use comfy_bisect_core::run::product::{check, Produced, Product, NO_HISTORY_OUTPUT};
use comfy_bisect_core::workflow::Workflow;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const DIR: &str = "tests/fixtures/comfyui-outputs";

fn json(rel: &str) -> Value {
    let path = Path::new(DIR).join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every case: the stem shared by `history/<case>.json` and `ws/<case>.ndjson`.
fn cases() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(Path::new(DIR).join("history"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
        .collect();
    out.sort();
    out
}

/// The case's prompt id and history entry.
fn history(case: &str) -> (String, HistoryEntry) {
    let v = json(&format!("history/{case}.json"));
    let m = v.as_object().unwrap();
    assert_eq!(m.len(), 1, "{case}: one entry");
    let (id, e) = m.iter().next().unwrap();
    (id.clone(), serde_json::from_value(e.clone()).unwrap())
}

/// The submitted prompt (`prompt[2]`) as a workflow.
fn prompt_of(h: &HistoryEntry) -> Workflow {
    Workflow::from_json_str(&h.prompt[2].to_string(), "prompt.json").unwrap()
}

/// The case's socket frames folded by the client's own tracker (its timeline and cached nodes).
fn tracker(case: &str, prompt_id: &str) -> EventTracker {
    let text = std::fs::read_to_string(Path::new(DIR).join(format!("ws/{case}.ndjson"))).unwrap();
    let mut t = EventTracker::new(prompt_id);
    for (i, line) in text.lines().enumerate() {
        t.feed_text(line, i as u64);
    }
    t
}

/// The product check on a case, fed as the client feeds it.
fn product(case: &str) -> (HistoryEntry, Product) {
    let (id, h) = history(case);
    let t = tracker(case, &id);
    let p = check(
        &prompt_of(&h),
        Some(&h),
        t.timeline(),
        &BTreeSet::new(),
        t.cached(),
    );
    (h, p)
}

/// Where a listed output item is stored: `files/<type>/<subfolder>/<filename>`.
fn file_path(item: &Value) -> Option<String> {
    let name = item.get("filename")?.as_str()?;
    let kind = item.get("type")?.as_str()?;
    let sub = item.get("subfolder").and_then(Value::as_str).unwrap_or("");
    Some(if sub.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}/{sub}/{name}")
    })
}

fn listed_files(h: &HistoryEntry) -> Vec<String> {
    h.outputs
        .values()
        .flat_map(|o| o.as_object().into_iter().flatten())
        .flat_map(|(_, items)| items.as_array().into_iter().flatten())
        .filter_map(file_path)
        .collect()
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn every_file_in_the_ground_truth_is_present_with_its_size_and_hash_and_no_other() {
    let truth = json("ground_truth.json");
    let truth = truth.as_object().unwrap();
    assert!(!truth.is_empty());
    for (rel, t) in truth {
        let bytes = std::fs::read(Path::new(DIR).join("files").join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(bytes.len() as u64, t["bytes"].as_u64().unwrap(), "{rel}");
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            t["sha256"].as_str().unwrap(),
            "{rel}"
        );
        assert!(bytes.len() < 200 * 1024, "{rel} is too big for a fixture");
        for h in t["history"].as_array().unwrap() {
            assert!(
                Path::new(DIR).join(h.as_str().unwrap()).is_file(),
                "{rel}: {h}"
            );
        }
    }
    let mut files = Vec::new();
    all_files(&Path::new(DIR).join("files"), &mut files);
    let root = Path::new(DIR).join("files");
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        assert!(truth.contains_key(&rel), "{rel} has no ground truth");
    }
    assert_eq!(files.len(), truth.len());
}

#[test]
fn every_history_entry_lists_files_that_are_present_and_every_case_has_its_frames() {
    let truth = json("ground_truth.json");
    let mut listed = BTreeSet::new();
    let cases = cases();
    assert!(cases.len() >= 20, "{cases:?}");
    for case in &cases {
        let (id, h) = history(case);
        assert_eq!(h.status.status_str, "success", "{case}");
        for rel in listed_files(&h) {
            assert!(
                truth.get(&rel).is_some(),
                "{case}: {rel} not in the ground truth"
            );
            listed.insert(rel);
        }
        let t = tracker(case, &id);
        assert!(
            t.is_finished(),
            "{case}: the socket frames do not end the prompt"
        );
    }
    // No file is kept that no entry lists.
    let kept: BTreeSet<String> = truth.as_object().unwrap().keys().cloned().collect();
    assert_eq!(listed, kept);
}

#[test]
fn ground_truth_matches_what_the_graph_asked_where_frames_differ() {
    // Distinct frames: the container holds exactly the frames and size asked for.
    let truth = json("ground_truth.json");
    for (rel, t) in truth.as_object().unwrap() {
        let asked = &t["asked"];
        let Some(frames) = asked.get("frames").and_then(Value::as_u64) else {
            continue;
        };
        assert_eq!(t["width"], asked["width"], "{rel}");
        assert_eq!(t["height"], asked["height"], "{rel}");
        if asked.get("distinct_frames") == Some(&Value::Bool(false)) {
            // WebP and APNG writers merge identical frames into one.
            assert_eq!(t["frames"].as_u64(), Some(1), "{rel}");
            assert_eq!(t["animated"], Value::Bool(false), "{rel}");
        } else {
            assert_eq!(t["frames"].as_u64(), Some(frames), "{rel}");
        }
    }
}

/// Frames and size of the images a link carries in these captures' graphs: `EmptyImage`s joined
/// by `ImageBatch` (image2 is scaled to image1's size), through `CreateVideo`.
fn frames_of(prompt: &Value, link: &Value) -> Option<(u64, u64, u64)> {
    let node = &prompt[link[0].as_str()?];
    let inputs = &node["inputs"];
    match node["class_type"].as_str()? {
        "EmptyImage" => Some((
            inputs["batch_size"].as_u64()?,
            inputs["width"].as_u64()?,
            inputs["height"].as_u64()?,
        )),
        "ImageBatch" => {
            let (a, w, h) = frames_of(prompt, &inputs["image1"])?;
            let (b, _, _) = frames_of(prompt, &inputs["image2"])?;
            Some((a + b, w, h))
        }
        "CreateVideo" => frames_of(prompt, &inputs["images"]),
        _ => None,
    }
}

#[test]
fn what_the_ground_truth_says_was_asked_is_what_the_submitted_prompt_asks() {
    let truth = json("ground_truth.json");
    let mut checked = 0;
    for (rel, t) in truth.as_object().unwrap() {
        let asked = &t["asked"];
        let Some(want) = asked.get("frames").or(asked.get("images")) else {
            continue;
        };
        let name = rel.rsplit('/').next().unwrap();
        for h in t["history"].as_array().unwrap() {
            let case = h
                .as_str()
                .unwrap()
                .trim_start_matches("history/")
                .trim_end_matches(".json");
            let (_, entry) = history(case);
            let prompt = &entry.prompt[2];
            let (node, _) = entry
                .outputs
                .iter()
                .find(|(_, o)| o.to_string().contains(name))
                .unwrap_or_else(|| panic!("{case} does not list {name}"));
            let inputs = &prompt[node.as_str()]["inputs"];
            let link = inputs.get("images").or(inputs.get("video")).unwrap();
            let Some((frames, w, h)) = frames_of(prompt, link) else {
                continue;
            };
            assert_eq!(Some(frames), want.as_u64(), "{rel} in {case}");
            assert_eq!(
                (Some(w), Some(h)),
                (asked["width"].as_u64(), asked["height"].as_u64()),
                "{rel}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 25, "{checked}");
}

#[test]
fn model_savers_report_nothing_in_history_and_the_product_check_exempts_them() {
    let rows = json("model_savers.json");
    let rows = rows.as_array().unwrap();
    let mut classes = BTreeSet::new();
    for row in rows {
        let case = row["history"]
            .as_str()
            .unwrap()
            .trim_start_matches("history_")
            .trim_end_matches(".json")
            .to_string();
        let node = row["node_id"].as_str().unwrap();
        let class = row["class_type"].as_str().unwrap();
        let (id, h) = history(&case);
        assert_eq!(
            prompt_of(&h).node(node).unwrap().class_type,
            class,
            "{case}"
        );
        // What the server did: success, the saver among the outputs to execute, yet nothing
        // in `outputs` or `meta`, and no `executed` frame with an output.
        assert_eq!(h.status.status_str, "success", "{case}");
        let to_execute: Vec<&str> = h.prompt[4]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(to_execute.contains(&node), "{case}: {to_execute:?}");
        assert!(!h.outputs.contains_key(node), "{case}");
        assert!(!h.meta.contains_key(node), "{case}");
        let t = tracker(&case, &id);
        assert!(
            t.timeline()
                .iter()
                .filter(|n| n.node_id == node)
                .all(|n| n.output.as_ref().is_none_or(Value::is_null)),
            "{case}"
        );
        // The product check: not reported by design, so the product is complete.
        let (_, p) = product(&case);
        let n = p.nodes.iter().find(|n| n.node_id == node).unwrap();
        assert_eq!(n.produced, Produced::NotReported, "{case}");
        assert_eq!(p.incomplete(), None, "{case}");
        classes.insert(class.to_string());
        // Without the exemption the same entry would fail the run.
        let mut renamed = h.prompt[2].clone();
        renamed[node]["class_type"] = Value::String("SomeCustomSaver".into());
        let w = Workflow::from_json_str(&renamed.to_string(), "prompt.json").unwrap();
        let p = check(&w, Some(&h), t.timeline(), &BTreeSet::new(), t.cached());
        assert!(p.incomplete().is_some(), "{case}");
    }
    // Every captured saver class is in the exemption list.
    let captured: Vec<&str> = classes.iter().map(String::as_str).collect();
    assert_eq!(
        captured,
        [
            "CLIPSave",
            "CheckpointSave",
            "ImageOnlyCheckpointSave",
            "LoraSave",
            "ModelSave",
            "SaveLoRANode",
            "VAESave"
        ]
    );
    // ... which is the whole exemption list: each exemption is proven by a capture.
    let mut listed: Vec<&str> = NO_HISTORY_OUTPUT.to_vec();
    listed.sort();
    assert_eq!(captured, listed);
}

#[test]
fn a_model_saver_beside_an_image_saver_leaves_the_image_saver_checked() {
    let (_, p) = product("checkpoint_save_and_save_image");
    let nodes: Vec<(&str, &str, Produced)> = p
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.class_type.as_str(), n.produced))
        .collect();
    assert_eq!(
        nodes,
        [
            ("2", "CheckpointSave", Produced::NotReported),
            ("7", "SaveImage", Produced::History)
        ]
    );
    assert_eq!(p.files.len(), 2);
    assert!(p
        .files
        .iter()
        .all(|f| f.node_id == "7" && f.key == "images"));
    assert_eq!(p.incomplete(), None);
}

#[test]
fn a_fully_cached_model_saver_sends_a_null_output_and_still_passes() {
    let (id, h) = history("checkpoint_save_resubmitted");
    let t = tracker("checkpoint_save_resubmitted", &id);
    assert_eq!(h.cached_nodes(), ["1", "2"]);
    assert_eq!(t.cached(), ["1", "2"]);
    let (_, p) = product("checkpoint_save_resubmitted");
    assert_eq!(p.nodes.len(), 1);
    assert_eq!(p.nodes[0].produced, Produced::NotReported);
    assert!(p.nodes[0].cached);
    assert_eq!(p.incomplete(), None);
}

#[test]
fn animated_images_and_videos_are_listed_under_images_with_the_animated_flag() {
    let cases = [
        ("save_animated_webp_lossless", "SaveAnimatedWEBP"),
        ("save_animated_webp_lossy", "SaveAnimatedWEBP"),
        ("save_animated_webp_identical_frames", "SaveAnimatedWEBP"),
        ("save_animated_png", "SaveAnimatedPNG"),
        ("save_animated_png_identical_frames", "SaveAnimatedPNG"),
        ("save_video_mp4_h264", "SaveVideo"),
        ("save_video_auto", "SaveVideo"),
        ("save_webm_vp9", "SaveWEBM"),
        ("save_webm_av1", "SaveWEBM"),
        ("save_video_with_audio", "SaveVideo"),
        ("save_video_33_frames_with_workflow", "SaveVideo"),
        ("save_webm_33_frames_with_workflow", "SaveWEBM"),
        ("save_video_81_frames_832x480", "SaveVideo"),
        ("save_webm_81_frames_832x480", "SaveWEBM"),
        ("save_animated_webp_16_frames_832x480", "SaveAnimatedWEBP"),
    ];
    for (case, class) in cases {
        let (h, p) = product(case);
        assert_eq!(p.incomplete(), None, "{case}");
        assert_eq!(p.nodes.len(), 1, "{case}");
        assert_eq!(p.nodes[0].class_type, class, "{case}");
        assert_eq!(p.nodes[0].produced, Produced::History, "{case}");
        assert_eq!(p.files.len(), 1, "{case}");
        let f = &p.files[0];
        assert_eq!((f.key.as_str(), f.animated), ("images", true), "{case}");
        let out = &h.outputs[&p.nodes[0].node_id];
        assert_eq!(out["animated"], serde_json::json!([true]), "{case}");
    }
    // Still images have no `animated` key.
    for case in ["save_image_batch", "preview_image"] {
        let (h, p) = product(case);
        assert!(p.files.iter().all(|f| !f.animated), "{case}");
        assert!(
            h.outputs.values().all(|o| o.get("animated").is_none()),
            "{case}"
        );
    }
    let (_, p) = product("preview_image");
    assert!(p.files.iter().all(|f| f.kind == "temp"));
    let (_, p) = product("save_latent");
    assert_eq!(p.nodes[0].produced, Produced::History);
    assert_eq!(p.files[0].key, "latents");
}

#[test]
fn audio_outputs_are_listed_under_audio() {
    for (case, class, kind) in [
        ("save_audio_flac", "SaveAudio", "output"),
        ("save_audio_mp3", "SaveAudioMP3", "output"),
        ("save_audio_opus", "SaveAudioOpus", "output"),
        ("preview_audio", "PreviewAudio", "temp"),
    ] {
        let (_, p) = product(case);
        assert_eq!(p.incomplete(), None, "{case}");
        assert_eq!(
            (p.nodes[0].class_type.as_str(), p.nodes[0].produced),
            (class, Produced::History),
            "{case}"
        );
        assert_eq!(p.files.len(), 1, "{case}");
        let f = &p.files[0];
        assert_eq!(
            (f.key.as_str(), f.kind.as_str(), f.animated),
            ("audio", kind, false),
            "{case}"
        );
    }
}

#[test]
fn the_captured_mp4s_keep_their_index_after_the_frames() {
    // ComfyUI's MP4s are not "fast start": `moov` (the frame index and, in `udta`, the prompt and
    // workflow) comes after `mdat`, so the head of the file alone does not give the frame count.
    let truth = json("ground_truth.json");
    let mut seen = 0;
    for (rel, t) in truth.as_object().unwrap() {
        let Some(boxes) = t.get("mp4_top_level_boxes").and_then(Value::as_array) else {
            continue;
        };
        let bytes = std::fs::read(Path::new(DIR).join("files").join(rel)).unwrap();
        let mut at = 0u64;
        let mut names = Vec::new();
        for b in boxes {
            let (name, offset, size) = (
                b[0].as_str().unwrap(),
                b[1].as_u64().unwrap(),
                b[2].as_u64().unwrap(),
            );
            assert_eq!(offset, at, "{rel}");
            let o = offset as usize;
            assert_eq!(&bytes[o + 4..o + 8], name.as_bytes(), "{rel}");
            assert_eq!(
                u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap()) as u64,
                size,
                "{rel}"
            );
            names.push(name);
            at += size;
        }
        assert_eq!(at, bytes.len() as u64, "{rel}");
        assert_eq!(names, ["ftyp", "free", "mdat", "moov"], "{rel}");
        seen += 1;
    }
    assert!(seen >= 4, "{seen}");
}

#[test]
fn a_fully_cached_video_lists_the_earlier_file() {
    let (_, first) = product("save_video_mp4_h264");
    let (h, again) = product("save_video_mp4_h264_resubmitted");
    assert!(h.cached_nodes().contains(&"3".to_string()));
    assert_eq!(first.files[0].filename, again.files[0].filename);
    assert!(again.nodes[0].cached);
    assert_eq!(again.incomplete(), None);
    assert!(
        again.notes.iter().any(|n| n.contains("earlier run")),
        "{:?}",
        again.notes
    );
    // Resubmitted after other prompts, only part of it was cached: a new file.
    let (h, later) = product("resubmit_cached_video");
    assert!(!h.cached_nodes().contains(&"3".to_string()));
    assert_ne!(later.files[0].filename, first.files[0].filename);
}

#[test]
fn an_output_dropped_at_validation_is_only_in_the_post_answer() {
    let answer: PromptResponse =
        serde_json::from_value(json("post_prompt_partial_validation.json")["body"].clone())
            .unwrap();
    assert_eq!(answer.node_errors.keys().collect::<Vec<_>>(), ["5"]);
    assert_eq!(
        answer.node_errors["5"]["dependent_outputs"],
        serde_json::json!(["5"])
    );
    let (id, _) = history("partial_validation");
    assert_eq!(id, answer.prompt_id);
    let (_, p) = product("partial_validation");
    let ids: Vec<&str> = p.nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(ids, ["4"]);
    assert_eq!(p.incomplete(), None);
}

#[test]
fn the_header_parser_reads_the_captured_images_sizes() {
    let truth = json("ground_truth.json");
    let mut read = 0;
    for (rel, t) in truth.as_object().unwrap() {
        let Some(format) = t.get("format").and_then(Value::as_str) else {
            continue;
        };
        let bytes = std::fs::read(Path::new(DIR).join("files").join(rel)).unwrap();
        let Header::Done(info) = media::parse(&bytes) else {
            panic!("{rel}: no header");
        };
        assert_eq!(info.format, format.to_ascii_lowercase(), "{rel}");
        assert_eq!(info.width as u64, t["width"].as_u64().unwrap(), "{rel}");
        assert_eq!(info.height as u64, t["height"].as_u64().unwrap(), "{rel}");
        if format == "WEBP" {
            // The VP8X animation flag is set exactly when the file holds several frames.
            assert_eq!(info.animated, t["frames"].as_u64() > Some(1), "{rel}");
        }
        read += 1;
    }
    assert!(read >= 15, "{read}");
}

#[test]
fn view_honours_byte_ranges_on_plain_requests_only() {
    let truth = json("ground_truth.json");
    let range = json("range.json");
    let header = |r: &Value, k: &str| r["headers"][k].as_str().map(str::to_string);
    let mut sizes = std::collections::HashMap::new();
    for r in range["plain_view"].as_array().unwrap() {
        if r["request_range"].is_null() && r.get("method").is_none() {
            assert_eq!(r["status"], 200);
            assert_eq!(header(r, "Accept-Ranges").as_deref(), Some("bytes"));
            sizes.insert(
                r["file"].as_str().unwrap().to_string(),
                r["body_bytes"].as_u64().unwrap(),
            );
        }
    }
    // Where the file is in the fixture set, the served size is its size.
    for (rel, t) in truth.as_object().unwrap() {
        if let Some(n) = sizes.get(rel.rsplit('/').next().unwrap()) {
            assert_eq!(Some(*n), t["bytes"].as_u64(), "{rel}");
        }
    }
    let mut checked = 0;
    for r in range["plain_view"].as_array().unwrap() {
        let size = sizes[r["file"].as_str().unwrap()];
        let want = match r["request_range"].as_str() {
            Some("bytes=0-99") => Some((206, format!("bytes 0-99/{size}"), 100)),
            Some("bytes=-100") => Some((
                206,
                format!("bytes {}-{}/{size}", size - 100, size - 1),
                100,
            )),
            Some("bytes=100-") => Some((206, format!("bytes 100-{}/{size}", size - 1), size - 100)),
            Some("bytes=0-0") => Some((206, format!("bytes 0-0/{size}"), 1)),
            Some("bytes=99999-") => Some((416, format!("bytes */{size}"), 0)),
            _ => None,
        };
        if let Some((status, content_range, len)) = want {
            assert_eq!(r["status"], status, "{r}");
            assert_eq!(header(r, "Content-Range"), Some(content_range), "{r}");
            assert_eq!(r["body_bytes"].as_u64(), Some(len), "{r}");
            checked += 1;
        }
    }
    assert_eq!(checked, 15);
    // Re-encoding parameters ignore the range: the whole re-encoded body.
    for r in range["reencoding_params"].as_array().unwrap() {
        assert_eq!(r["status"], 200, "{r}");
        assert!(header(r, "Accept-Ranges").is_none() && header(r, "Content-Range").is_none());
    }
}
