//! The run's product: after ComfyUI calls a prompt a success, every output node it executed
//! must have produced its outputs in `/history`. Each output file is recorded (node, class,
//! file, subfolder, type) with what its container says, read through `/view` within a bound
//! ([`crate::comfy::container`]: images their header's width × height; videos and animated
//! images also their frames), and compared with what the variant asked for
//! ([`crate::ladder::product`]). A missing output makes the run fail with kind
//! `incomplete_output`; a size, count or frame mismatch is a warning.
//!
//! Which nodes are output nodes comes from the server itself: the history entry's
//! `outputs_to_execute` (`prompt[4]`), the output nodes of the prompt by their `OUTPUT_NODE`
//! definition. Not every output node reports in history, by design:
//! - `SaveImageWebsocket` streams its images as binary frames and sends no `executed` frame
//!   (`ws_feature_flags_and_binary_images.ndjson`, `ws_binary_images_legacy.ndjson`), so it
//!   has no history output; any output node that streamed binary frames while it ran counts as
//!   having produced them over the socket.
//! - The model savers write a model file and report nothing to the UI: no history output, no
//!   `meta`, no `executed` frame (captured for every class of [`NO_HISTORY_OUTPUT`] in
//!   `tests/fixtures/comfyui-outputs/`, checked by `tests/graph/outputs_fixtures.rs`).
//!
//! A fully cached run replays the old outputs (`history_core_cached.json`: every node in
//! `execution_cached`, the outputs still listed with the earlier files' names); those count as
//! produced and are marked `cached` (no new file was written).

use crate::comfy::container::{self, Facts, MediaKind, Probe, MAX_SCAN_BYTES};
use crate::comfy::media::MAX_HEADER_BYTES;
use crate::comfy::{Client, HistoryEntry, NodeTiming, ViewFile, ViewRead};
use crate::ladder::product::{expected_images, ExpectedImages};
use crate::workflow::Workflow;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// Output nodes that send their outputs over the socket only (no history output).
pub(crate) const SOCKET_ONLY: &[&str] = &["SaveImageWebsocket"];

/// Output nodes that save a model file and report nothing in history.
pub const NO_HISTORY_OUTPUT: &[&str] = &[
    "CheckpointSave",
    "CLIPSave",
    "VAESave",
    "ModelSave",
    "ImageOnlyCheckpointSave",
    "LoraSave",
    "SaveLoRANode",
];

/// Most files per output node whose header is read (a batch has one size; a video saved as
/// frames would otherwise cost one request per frame).
pub(crate) const HEADERS_PER_NODE: usize = 8;

/// How an output node produced its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Produced {
    /// Its outputs are in `/history`.
    History,
    /// It streamed them as binary WebSocket frames (no history output by design).
    Socket,
    /// It reports nothing to the UI by design (model savers): not checked.
    NotReported,
    /// Nothing: the product is incomplete.
    Missing,
}

/// One output node of the submitted prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputNode {
    /// Node id.
    pub node_id: String,
    /// Its class.
    pub class_type: String,
    /// How it produced its outputs.
    pub produced: Produced,
    /// Served from the cache: the outputs are an earlier run's (no new file).
    #[serde(default)]
    pub cached: bool,
    /// What the variant asked this node to receive, where the graph says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<ExpectedImages>,
}

/// One output file as `/history` lists it, with what its header says. Two files compare
/// equal whatever their per-run asset ids (`asset_id`, `preview_id`): the same product made
/// twice, or served from the cache, gets new ids on late-2026 servers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OutputFile {
    /// The output node.
    pub node_id: String,
    /// Its class.
    pub class_type: String,
    /// The history key it was listed under (`images`, `gifs`, `audio`, `3d`, …).
    pub key: String,
    /// File name.
    pub filename: String,
    /// Subfolder of the output/temp folder.
    #[serde(default)]
    pub subfolder: String,
    /// `output` or `temp`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// `png`, `webp`, `jpeg`, `gif`, `mp4`, `mov`, `webm`, `mkv` from the container; else the
    /// file name's extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Image, animated image or video, from the container (absent in records written before
    /// containers were read, and when the file was not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<MediaKind>,
    /// Pixels, from the header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Pixels, from the header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Frames, from the container (an image file has one); absent when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<u64>,
    /// History's `animated` flag, or the container's animation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub animated: bool,
    /// Bytes (`Content-Length` of `/view`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Why there is no size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The per-run asset id late-2026 servers give the file (`id` in its history entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset_id: Option<String>,
    /// The asset id of its preview (`preview_id`), when the server made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_id: Option<String>,
}

impl PartialEq for OutputFile {
    /// Everything but the asset ids.
    fn eq(&self, other: &Self) -> bool {
        let strip = |f: &OutputFile| OutputFile {
            asset_id: None,
            preview_id: None,
            ..f.clone()
        };
        let (a, b) = (strip(self), strip(other));
        (
            &a.node_id,
            &a.class_type,
            &a.key,
            &a.filename,
            &a.subfolder,
            &a.kind,
            &a.format,
        ) == (
            &b.node_id,
            &b.class_type,
            &b.key,
            &b.filename,
            &b.subfolder,
            &b.kind,
            &b.format,
        ) && (
            a.media, a.width, a.height, a.frames, a.animated, a.bytes, &a.note,
        ) == (
            b.media, b.width, b.height, b.frames, b.animated, b.bytes, &b.note,
        )
    }
}

/// The run's product (`run.json` `product`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Product {
    /// Every output node the server executed.
    #[serde(default)]
    pub nodes: Vec<OutputNode>,
    /// Every output file.
    #[serde(default)]
    pub files: Vec<OutputFile>,
    /// Differences from what the variant asked for (warnings, not failures).
    #[serde(default)]
    pub mismatches: Vec<String>,
    /// What was not checked, and why.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// An output node that produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingOutput {
    /// Node id.
    pub node_id: String,
    /// Its class.
    pub class_type: String,
}

/// The `incomplete_output` failure: ComfyUI said success, but these nodes produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncompleteOutput {
    /// The nodes without outputs.
    pub nodes: Vec<MissingOutput>,
    /// One sentence naming them.
    pub message: String,
}

impl Product {
    /// The failure, when an output node produced nothing.
    pub fn incomplete(&self) -> Option<IncompleteOutput> {
        let nodes: Vec<MissingOutput> = self
            .nodes
            .iter()
            .filter(|n| n.produced == Produced::Missing)
            .map(|n| MissingOutput {
                node_id: n.node_id.clone(),
                class_type: n.class_type.clone(),
            })
            .collect();
        if nodes.is_empty() {
            return None;
        }
        let names: Vec<String> = nodes
            .iter()
            .map(|n| format!("{} #{}", n.class_type, n.node_id))
            .collect();
        Some(IncompleteOutput {
            message: format!(
                "ComfyUI reported success, but {} produced no output in /history",
                names.join(", ")
            ),
            nodes,
        })
    }

    /// One line for a report: `4 × PNG 768×1024`, `1 × MP4 64×48, 8 frames`, `1 × WEBM 64×48,
    /// frames unknown`; groups of equal files joined by `, `.
    pub fn summary(&self) -> Option<String> {
        let mut groups: Vec<(String, usize)> = Vec::new();
        for f in &self.files {
            let format = f.format.as_deref().unwrap_or("file").to_uppercase();
            let what = match (f.width, f.height) {
                (Some(w), Some(h)) => format!("{format} {w}×{h}"),
                _ if f.media.is_some() => format!("{format} size unknown"),
                _ => format!("{format} {}", f.key),
            };
            let what = match (f.media, f.frames) {
                // A record from before containers were read: as it was shown then.
                (None, _) if f.animated && f.width.is_some() => format!("{what} animated"),
                (None, _) => what,
                _ if !multi_frame(f) => what,
                (_, Some(1)) => format!("{what}, 1 frame"),
                (_, Some(n)) => format!("{what}, {n} frames"),
                (_, None) => format!("{what}, frames unknown"),
            };
            match groups.iter_mut().find(|(g, _)| *g == what) {
                Some((_, n)) => *n += 1,
                None => groups.push((what, 1)),
            }
        }
        if groups.is_empty() {
            return None;
        }
        Some(
            groups
                .iter()
                .map(|(what, n)| format!("{n} × {what}"))
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

/// Whether a history output holds anything (a non-empty list under any key but `animated`).
fn has_output(v: Option<&Value>) -> bool {
    let Some(Value::Object(m)) = v else {
        return false;
    };
    m.iter().any(|(k, v)| {
        k != "animated"
            && match v {
                Value::Array(a) => !a.is_empty(),
                Value::Null => false,
                Value::Object(o) => !o.is_empty(),
                _ => true,
            }
    })
}

/// The output nodes of a finished prompt and their files (pure): `history` is the prompt's
/// entry, `timeline` the socket's per-node record (its `executed` outputs stand in for history
/// when the entry is missing), `streamed` the nodes that sent binary frames while they ran,
/// `cached` the nodes served from the cache.
pub fn check(
    workflow: &Workflow,
    history: Option<&HistoryEntry>,
    timeline: &[NodeTiming],
    streamed: &BTreeSet<String>,
    cached: &[String],
) -> Product {
    let mut product = Product::default();
    let Some(history) = history else {
        product.notes.push(
            "no /history entry: the outputs were not checked (the outcome comes from the socket)"
                .into(),
        );
        return product;
    };
    let listed: Vec<String> = match history.prompt.get(4) {
        Some(Value::Array(ids)) => ids
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => {
            product.notes.push(
                "the history entry does not list its output nodes (prompt[4]): the outputs \
                 were not checked"
                    .into(),
            );
            return product;
        }
    };
    for id in listed {
        let class = workflow
            .node(&id)
            .map(|n| n.class_type.clone())
            .unwrap_or_else(|| "?".into());
        let output = history.outputs.get(&id).or_else(|| {
            timeline
                .iter()
                .find(|t| t.node_id == id || t.display_node.as_deref() == Some(id.as_str()))
                .and_then(|t| t.output.as_ref())
        });
        let produced = if has_output(output) {
            Produced::History
        } else if streamed.contains(&id) || SOCKET_ONLY.contains(&class.as_str()) {
            Produced::Socket
        } else if NO_HISTORY_OUTPUT.contains(&class.as_str()) {
            Produced::NotReported
        } else {
            Produced::Missing
        };
        let animated = output
            .and_then(|o| o.get("animated"))
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_bool() == Some(true)));
        if let Some(Value::Object(m)) = output {
            for (key, items) in m {
                for item in items.as_array().into_iter().flatten() {
                    let Some(filename) = item.get("filename").and_then(Value::as_str) else {
                        continue;
                    };
                    let text = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                    product.files.push(OutputFile {
                        node_id: id.clone(),
                        class_type: class.clone(),
                        key: key.clone(),
                        filename: filename.to_string(),
                        subfolder: text("subfolder").to_string(),
                        kind: text("type").to_string(),
                        animated,
                        asset_id: item.get("id").and_then(Value::as_str).map(String::from),
                        preview_id: item
                            .get("preview_id")
                            .and_then(Value::as_str)
                            .map(String::from),
                        ..OutputFile::default()
                    });
                }
            }
        }
        product.nodes.push(OutputNode {
            expected: expected_images(workflow, &id),
            node_id: id.clone(),
            class_type: class,
            produced,
            cached: cached.contains(&id),
        });
    }
    if product
        .nodes
        .iter()
        .any(|n| n.cached && n.produced == Produced::History)
    {
        product.notes.push(
            "cached output nodes report an earlier run's files (no new file was written)".into(),
        );
    }
    product
}

/// Whether a file's name says it is a video (when its container could not be read).
fn is_video(name: &str) -> bool {
    let ext = name.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    matches!(ext.as_str(), "mp4" | "webm" | "mov" | "mkv" | "avi" | "m4v")
}

/// Why a read stopped with the bytes it had: the cap, or the answer ended.
fn stopped(read: usize, cap: u64, what: &str) -> String {
    if read as u64 >= cap {
        format!(
            "only the first {} KiB of {what} were read (the read cap)",
            cap / 1024
        )
    } else {
        format!("{what} ended after {read} bytes")
    }
}

/// Reads what the containers of the product's files say through `/view` (the first
/// `HEADERS_PER_NODE` of each node) and compares sizes and frames with what the variant
/// asked for. Per file at most two requests: the head (up to `MAX_HEADER_BYTES` for a
/// still PNG or JPEG, else up to `MAX_SCAN_BYTES`, which also covers the formats whose
/// frames are counted over the whole file), and for an MP4 whose `moov` follows its `mdat` the
/// bytes from the `moov` on (`Range: bytes=N-`, at most `MAX_SCAN_BYTES`; a server that
/// ignores Range is read from the start only when the `moov` lies inside that cap).
pub async fn read_headers(client: &Client, product: &mut Product) {
    let mut per_node: std::collections::HashMap<String, usize> = Default::default();
    let mut skipped = 0usize;
    for f in &mut product.files {
        let n = per_node.entry(f.node_id.clone()).or_default();
        *n += 1;
        if *n > HEADERS_PER_NODE {
            skipped += 1;
            continue;
        }
        let hint = f.animated;
        let ext = f
            .filename
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        let cap = if hint || !matches!(ext.as_str(), "png" | "jpg" | "jpeg") {
            MAX_SCAN_BYTES
        } else {
            MAX_HEADER_BYTES as u64
        };
        let file = ViewFile {
            filename: &f.filename,
            subfolder: &f.subfolder,
            kind: &f.kind,
        };
        let enough = move |b: &[u8], _: u64, total: Option<u64>| {
            !matches!(container::probe(b, total, hint), Probe::More(_))
        };
        let head = ViewRead {
            from: None,
            cap: cap as usize,
            enough: &enough,
        };
        let facts = match client.view_read(&file, &head).await {
            Ok(Some(head)) => {
                f.bytes = head.total;
                let mut probe = container::probe(&head.head, head.total, hint);
                let mut why = stopped(head.head.len(), cap, "the file");
                if let Probe::At(at, _) = probe {
                    (probe, why) = read_from(client, &file, at, hint, probe).await;
                }
                probe.facts(&why)
            }
            Ok(None) => {
                f.note = Some("GET /view: no such file (404)".into());
                None
            }
            Err(e) => {
                f.note = Some(format!("GET /view failed: {e}"));
                None
            }
        };
        match facts {
            Some(x) => apply(f, x),
            None if f.note.is_some() => {}
            None if is_video(&f.filename) => {
                f.media = Some(MediaKind::Video);
                f.note = Some("a container this tool does not read: byte size only".into());
            }
            None => f.note = Some("no image or video size in the file's first bytes".into()),
        }
        if f.format.is_none() {
            f.format = Some(ext).filter(|e| !e.is_empty());
        }
    }
    if skipped > 0 {
        product.notes.push(format!(
            "headers read for the first {HEADERS_PER_NODE} files of each node; {skipped} more not read"
        ));
    }
    let (mismatches, notes) = compare(product);
    product.mismatches = mismatches;
    product.notes.extend(notes);
}

/// The second read of an MP4 whose `moov` is at `at` (after its `mdat`): the probe of what it
/// gave, and why it stopped.
async fn read_from(
    client: &Client,
    file: &ViewFile<'_>,
    at: u64,
    hint: bool,
    first: Probe,
) -> (Probe, String) {
    // A 206 starts at `at`; a server that ignores Range sends the file from its start.
    let enough = move |b: &[u8], offset: u64, total: Option<u64>| {
        let p = if offset == 0 {
            container::probe(b, total, hint)
        } else {
            container::probe_at(b, offset, total)
        };
        !matches!(p, Probe::More(_) | Probe::At(..))
    };
    let read = ViewRead {
        from: Some(at),
        cap: MAX_SCAN_BYTES as usize,
        enough: &enough,
    };
    match client.view_read(file, &read).await {
        Ok(Some(t)) if t.offset == at => (
            container::probe_at(&t.head, at, t.total),
            stopped(
                t.head.len(),
                MAX_SCAN_BYTES,
                &format!("the bytes from {at}"),
            ),
        ),
        Ok(Some(t)) if !t.head.is_empty() => (
            container::probe(&t.head, t.total, hint),
            format!(
                "the server ignored Range and {}",
                stopped(t.head.len(), MAX_SCAN_BYTES, "the file")
            ),
        ),
        Ok(Some(_)) => (
            first,
            format!(
                "the server ignored Range, and the moov box at byte {at} lies past the {} KiB \
                 read cap",
                MAX_SCAN_BYTES / 1024
            ),
        ),
        Ok(None) => (
            first,
            "GET /view from the moov box: no such file (404)".into(),
        ),
        Err(e) => (first, format!("GET /view from the moov box failed: {e}")),
    }
}

/// Copies what the container said into the record.
fn apply(f: &mut OutputFile, x: Facts) {
    f.animated |= x.kind == MediaKind::Animated;
    f.format = Some(x.format);
    f.media = Some(x.kind);
    f.width = x.width;
    f.height = x.height;
    f.frames = x.frames;
    f.note = x.note;
}

/// Whether a file holds (or was meant to hold) several frames: an animated image or a video,
/// or one that history flagged `animated`.
fn multi_frame(f: &OutputFile) -> bool {
    matches!(f.media, Some(MediaKind::Animated | MediaKind::Video)) || f.animated
}

/// The mismatches, and the notes on what could not be compared (frames the graph or the
/// container does not say).
fn compare(product: &Product) -> (Vec<String>, Vec<String>) {
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for node in &product.nodes {
        let files: Vec<&OutputFile> = product
            .files
            .iter()
            .filter(|f| f.node_id == node.node_id && matches!(f.key.as_str(), "images" | "gifs"))
            .collect();
        if files.is_empty() {
            continue;
        }
        let name = format!("{} #{}", node.class_type, node.node_id);
        let multi = files.iter().any(|f| multi_frame(f));
        let Some(want) = node.expected else {
            if multi {
                notes.push(format!(
                    "frames not checked for {name}: the graph does not say how many reach it"
                ));
            }
            continue;
        };
        let mut sizes: Vec<(u32, u32)> = files
            .iter()
            .filter_map(|f| Some((f.width?, f.height?)))
            .filter(|&(w, h)| (w as u64, h as u64) != (want.width, want.height))
            .collect();
        sizes.dedup();
        for (w, h) in sizes {
            out.push(format!(
                "{name} wrote {w}×{h}, the graph asks for {}×{}",
                want.width, want.height
            ));
        }
        if !multi {
            if files.len() as u64 != want.count {
                out.push(format!(
                    "{name} wrote {} image(s), the graph asks for {} (batch × frames)",
                    files.len(),
                    want.count
                ));
            }
            continue;
        }
        let frames: Option<u64> = files.iter().map(|f| f.frames).sum();
        match frames {
            Some(n) if n != want.count => {
                let merged = files
                    .iter()
                    .any(|f| matches!(f.format.as_deref(), Some("webp" | "png")));
                out.push(format!(
                    "{name} wrote {n} frame(s), the graph asks for {} (batch × frames){}",
                    want.count,
                    if merged {
                        "; WebP and APNG writers merge identical consecutive frames, so fewer \
                         can also mean a still scene"
                    } else {
                        ""
                    }
                ));
            }
            Some(_) => {}
            None => {
                let why = files
                    .iter()
                    .find(|f| f.frames.is_none())
                    .and_then(|f| f.note.clone())
                    .unwrap_or_else(|| "the file was not read".into());
                notes.push(format!("frames not checked for {name}: {why}"));
            }
        }
    }
    (out, notes)
}

/// The differences between what each node wrote and what the graph asked for (pure).
#[cfg(test)]
fn mismatches(product: &Product) -> Vec<String> {
    compare(product).0
}

#[cfg(test)]
mod tests {

    #[test]
    fn asset_ids_are_kept_but_do_not_make_two_products_differ() {
        let mut h = entry("history_core_success.json");
        let node = h.outputs.keys().next().unwrap().clone();
        let plain = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        let first = &mut h.outputs.get_mut(&node).unwrap()["images"][0];
        first["id"] = "0b5e7b2e-1f00-4c1a-9d7e-4f2f6b1a2c3d".into();
        first["preview_id"] = "1c6f8c3f-2a11-4d2b-8e8f-5a3a7c2b3d4e".into();
        let with_ids = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        let f = with_ids.files.iter().find(|f| f.node_id == node).unwrap();
        assert_eq!(
            f.asset_id.as_deref(),
            Some("0b5e7b2e-1f00-4c1a-9d7e-4f2f6b1a2c3d")
        );
        assert_eq!(
            f.preview_id.as_deref(),
            Some("1c6f8c3f-2a11-4d2b-8e8f-5a3a7c2b3d4e")
        );
        assert_eq!(with_ids, plain, "asset ids are not part of the product");
        let mut renamed = with_ids.clone();
        renamed.files[0].filename.push('x');
        assert_ne!(renamed, plain);
    }
    use super::*;

    fn entry(name: &str) -> HistoryEntry {
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{}/comfyui/{name}", crate::FIXTURES)).unwrap(),
        )
        .unwrap();
        let (_, e) = v.as_object().unwrap().iter().next().unwrap();
        serde_json::from_value(e.clone()).unwrap()
    }

    fn prompt_of(h: &HistoryEntry) -> Workflow {
        Workflow::from_json_str(&h.prompt[2].to_string(), "p.json").unwrap()
    }

    #[test]
    fn a_captured_success_lists_every_output_node_with_its_files() {
        let h = entry("history_sd15_lora_upscale.json");
        let p = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        assert_eq!(p.incomplete(), None);
        let nodes: Vec<(&str, &str, Produced)> = p
            .nodes
            .iter()
            .map(|n| (n.node_id.as_str(), n.class_type.as_str(), n.produced))
            .collect();
        assert_eq!(
            nodes,
            [
                ("9", "SaveImage", Produced::History),
                ("13", "SaveImage", Produced::History)
            ]
        );
        let files: Vec<(&str, &str, &str)> = p
            .files
            .iter()
            .map(|f| (f.node_id.as_str(), f.filename.as_str(), f.kind.as_str()))
            .collect();
        assert!(files.contains(&("13", "fixture_lora_upscaled_00001_.png", "output")));
        assert!(files.contains(&("9", "fixture_lora_00001_.png", "output")));
    }

    #[test]
    fn a_missing_output_node_makes_the_product_incomplete_and_is_named() {
        let mut h = entry("history_sd15_lora_upscale.json");
        h.outputs.remove("13");
        let p = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        let i = p.incomplete().unwrap();
        assert_eq!(
            i.nodes,
            [MissingOutput {
                node_id: "13".into(),
                class_type: "SaveImage".into()
            }]
        );
        assert!(i.message.contains("SaveImage #13"), "{}", i.message);
        // An empty list is no output either.
        h.outputs
            .insert("13".into(), serde_json::json!({"images": []}));
        let p = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        assert!(p.incomplete().is_some());
    }

    #[test]
    fn a_fully_cached_resubmission_still_counts_its_old_outputs() {
        // history_core_cached.json: every node in execution_cached, the outputs listed with
        // the first run's file names.
        let h = entry("history_core_cached.json");
        let cached = h.cached_nodes();
        assert_eq!(cached, ["1", "2", "3", "4"]);
        let p = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &cached);
        assert_eq!(p.incomplete(), None);
        assert!(p.nodes.iter().all(|n| n.cached));
        assert!(
            p.notes.iter().any(|n| n.contains("earlier run")),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn socket_only_nodes_are_not_failed_for_having_no_history_output() {
        // The prompt of ws_feature_flags_and_binary_images.ndjson: SaveImageWebsocket sends two
        // binary frames and no `executed` frame, so its history has no output for it.
        let w = Workflow::from_json_str(
            r#"{"1": {"class_type": "EmptyImage", "inputs": {"width": 32, "height": 32, "batch_size": 2, "color": 255}},
                "2": {"class_type": "SaveImageWebsocket", "inputs": {"images": ["1", 0]}}}"#,
            "w.json",
        )
        .unwrap();
        let h: HistoryEntry = serde_json::from_value(serde_json::json!({
            "prompt": [3, "e4e1ce70", w.to_value(), {}, ["2"]],
            "outputs": {},
            "status": {"status_str": "success", "completed": true, "messages": []}
        }))
        .unwrap();
        let p = check(&w, Some(&h), &[], &BTreeSet::new(), &[]);
        assert_eq!(p.nodes[0].produced, Produced::Socket);
        assert_eq!(p.incomplete(), None);
        // Any output node that streamed binary frames while it ran counts the same way.
        let w2 = Workflow::from_json_str(
            r#"{"2": {"class_type": "ETN_SendImageWebSocket", "inputs": {}}}"#,
            "w.json",
        )
        .unwrap();
        let streamed: BTreeSet<String> = ["2".to_string()].into();
        let p = check(&w2, Some(&h), &[], &streamed, &[]);
        assert_eq!(p.nodes[0].produced, Produced::Socket);
        let p = check(&w2, Some(&h), &[], &BTreeSet::new(), &[]);
        assert_eq!(p.nodes[0].produced, Produced::Missing);
    }

    #[test]
    fn without_a_history_entry_nothing_is_failed() {
        let h = entry("history_sd15_success.json");
        let p = check(&prompt_of(&h), None, &[], &BTreeSet::new(), &[]);
        assert!(p.nodes.is_empty() && p.incomplete().is_none());
        assert!(p.notes[0].contains("no /history entry"));
    }

    /// The product of a captured animated/video prompt, with each file's facts probed from
    /// the real output file, as `read_headers` records them.
    fn captured_product(history: &str) -> Product {
        let dir = &format!("{}/comfyui-outputs", crate::FIXTURES);
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{dir}/history/{history}")).unwrap(),
        )
        .unwrap();
        let (_, e) = v.as_object().unwrap().iter().next().unwrap();
        let h: HistoryEntry = serde_json::from_value(e.clone()).unwrap();
        let mut p = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        for f in &mut p.files {
            let path = [f.kind.as_str(), f.subfolder.as_str(), f.filename.as_str()]
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("/");
            let b = std::fs::read(format!("{dir}/files/{path}")).unwrap();
            let total = Some(b.len() as u64);
            let probe = match container::probe(&b, total, f.animated) {
                Probe::At(at, _) => container::probe_at(&b[at as usize..], at, total),
                p => p,
            };
            f.bytes = total;
            apply(f, probe.facts("cut").unwrap());
        }
        let (m, notes) = compare(&p);
        p.mismatches = m;
        p.notes.extend(notes);
        p
    }

    #[test]
    fn captured_videos_and_animations_record_their_frames_and_match_the_graph() {
        for (history, summary) in [
            ("save_video_mp4_h264.json", "1 × MP4 64×48, 8 frames"),
            ("save_video_auto.json", "1 × MP4 64×64, 4 frames"),
            ("save_webm_vp9.json", "1 × WEBM 64×48, 6 frames"),
            ("save_animated_webp_lossy.json", "1 × WEBP 80×48, 6 frames"),
            ("save_animated_png.json", "1 × PNG 64×48, 5 frames"),
            ("save_image_batch.json", "4 × PNG 64×48"),
        ] {
            let p = captured_product(history);
            assert_eq!(p.summary().as_deref(), Some(summary), "{history}");
            assert_eq!(p.mismatches, Vec::<String>::new(), "{history}");
            assert!(
                !p.notes.iter().any(|n| n.contains("frames not checked")),
                "{history}: {:?}",
                p.notes
            );
        }
        let p = captured_product("save_video_mp4_h264.json");
        let f = &p.files[0];
        assert_eq!(
            (f.media, f.frames, f.bytes, f.subfolder.as_str()),
            (Some(MediaKind::Video), Some(8), Some(3736), "video")
        );
        // The record round-trips through run.json.
        let back: Product = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn merged_identical_frames_are_a_warning_that_says_why_they_may_be_fewer() {
        // Six frames of one colour: ComfyUI's WebP writer merged them into a still file while
        // history says animated (ground_truth.json).
        let p = captured_product("save_animated_webp_identical_frames.json");
        assert_eq!(p.summary().as_deref(), Some("1 × WEBP 64×64, 1 frame"));
        assert_eq!(p.mismatches.len(), 1, "{:?}", p.mismatches);
        let m = &p.mismatches[0];
        assert!(
            m.contains("SaveAnimatedWEBP #2 wrote 1 frame(s), the graph asks for 6"),
            "{m}"
        );
        assert!(m.contains("merge identical consecutive frames"), "{m}");
        // A failure it is not.
        assert_eq!(p.incomplete(), None);
    }

    #[test]
    fn frames_the_graph_or_the_container_does_not_say_are_noted_not_checked() {
        let mut p = captured_product("save_webm_vp9.json");
        // A custom node upstream: the graph does not say.
        p.nodes[0].expected = None;
        let (m, notes) = compare(&p);
        assert!(m.is_empty());
        assert_eq!(
            notes,
            ["frames not checked for SaveWEBM #2: the graph does not say how many reach it"]
        );
        // The container did not say (a WebM larger than the read cap).
        let mut p = captured_product("save_webm_vp9.json");
        p.files[0].frames = None;
        p.files[0].note = Some("frames unknown: WebM has no frame count in its header".into());
        assert_eq!(
            p.summary().as_deref(),
            Some("1 × WEBM 64×48, frames unknown")
        );
        let (m, notes) = compare(&p);
        assert!(m.is_empty());
        assert!(notes[0].starts_with("frames not checked for SaveWEBM #2: frames unknown"));
        // Fewer frames than asked: a warning.
        p.files[0].frames = Some(5);
        let (m, _) = compare(&p);
        assert_eq!(
            m,
            ["SaveWEBM #2 wrote 5 frame(s), the graph asks for 6 (batch × frames)"]
        );
    }

    #[test]
    fn a_product_recorded_before_containers_were_read_still_loads_and_reads_the_same() {
        // product.files as run.json held them before `media` and `frames` existed.
        let old = serde_json::json!({
            "nodes": [{"node_id": "5", "class_type": "SaveAnimatedWEBP", "produced": "history"}],
            "files": [
                {"node_id": "5", "class_type": "SaveAnimatedWEBP", "key": "images",
                 "filename": "a_00001_.webp", "subfolder": "", "type": "output",
                 "format": "webp", "width": 64, "height": 64, "animated": true, "bytes": 348},
                {"node_id": "6", "class_type": "SaveVideo", "key": "images",
                 "filename": "v_00001_.mp4", "subfolder": "video", "type": "output",
                 "format": "mp4", "animated": true, "bytes": 2147,
                 "note": "a video: byte size only (frame count and size are not read)"}
            ],
            "mismatches": [],
            "notes": []
        });
        let p: Product = serde_json::from_value(old.clone()).unwrap();
        assert_eq!((p.files[0].media, p.files[0].frames), (None, None));
        assert_eq!(
            p.summary().as_deref(),
            Some("1 × WEBP 64×64 animated, 1 × MP4 images")
        );
        // Written back, it keeps its shape (no new keys appear).
        assert_eq!(serde_json::to_value(&p).unwrap()["files"], old["files"]);
    }

    #[test]
    fn sizes_and_counts_are_compared_with_the_graph() {
        let h = entry("history_core_success.json");
        let mut p = check(&prompt_of(&h), Some(&h), &[], &BTreeSet::new(), &[]);
        // The sizes /view answered in ws_core_success.ndjson.
        for f in &mut p.files {
            let (w, h) = if f.node_id == "3" {
                (128, 96)
            } else {
                (64, 64)
            };
            (f.format, f.width, f.height) = (Some("png".into()), Some(w), Some(h));
        }
        assert_eq!(mismatches(&p), Vec::<String>::new());
        assert_eq!(p.summary().unwrap(), "1 × PNG 128×96, 1 × PNG 64×64");
        p.files[0].width = Some(100);
        let m = mismatches(&p);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains("wrote 100×"), "{m:?}");
        p.files.push(p.files[1].clone());
        let m = mismatches(&p);
        assert!(
            m.iter()
                .any(|m| m.contains("wrote 2 image(s), the graph asks for 1")),
            "{m:?}"
        );
    }
}
