//! Video and animated outputs in the run's product, against the simulator: each file's media
//! kind, size and frame count read from its container through `/view` (an MP4's `moov` after its
//! `mdat` through a `Range` request, as ComfyUI's aiohttp answers it), compared with the frames
//! the graph asks for; the `short-video=N` fault makes the files shorter and the mismatch a
//! warning, not a failure.

use crate::sim_support::{client, run_request, sim};
use comfy_bisect_core::comfy::container::MediaKind;
use comfy_bisect_core::run::{execute, RunRecord};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_sim::{Faults, SimConfig, SimHandle};
use serde_json::{json, Value};

/// Eight 64×48 frames (an EmptyImage batch, as in the real captures) into each animated and
/// video saver of ComfyUI 0.3.64 and into VideoHelperSuite's combine node (a GIF), and a batch
/// of three into a WebP: one file per node.
fn savers() -> Value {
    json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 48, "batch_size": 8, "color": 0}},
        "2": {"class_type": "CreateVideo", "inputs": {"images": ["1", 0], "fps": 8.0}},
        "3": {"class_type": "SaveVideo", "inputs": {"video": ["2", 0], "filename_prefix": "video/cap_mp4", "format": "mp4", "codec": "h264"}},
        "4": {"class_type": "SaveWEBM", "inputs": {"images": ["1", 0], "filename_prefix": "cap_webm", "codec": "vp9", "fps": 12.0, "crf": 32.0}},
        "5": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["1", 0], "filename_prefix": "cap_webp", "fps": 6.0, "lossless": true, "quality": 80, "method": "default"}},
        "6": {"class_type": "SaveAnimatedPNG", "inputs": {"images": ["1", 0], "filename_prefix": "cap_apng", "fps": 6.0, "compress_level": 4}},
        "7": {"class_type": "EmptyImage", "inputs": {"width": 80, "height": 48, "batch_size": 3, "color": 0}},
        "8": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["7", 0], "filename_prefix": "cap_webp3", "fps": 6.0, "lossless": false, "quality": 50, "method": "default"}},
        // VideoHelperSuite's combine node: a GIF listed under `gifs`.
        "12": {"class_type": "VHS_VideoCombine", "inputs": {"images": ["1", 0], "frame_rate": 8, "loop_count": 0, "filename_prefix": "vhs", "format": "image/gif", "pingpong": false, "save_output": true}},
        // 16 frames of 1024×1024: a 1 MiB mdat before the moov, more than any one chunk of
        // the answer, so the moov is read with a Range request.
        "9": {"class_type": "EmptyImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 16, "color": 0}},
        "10": {"class_type": "CreateVideo", "inputs": {"images": ["9", 0], "fps": 8.0}},
        "11": {"class_type": "SaveVideo", "inputs": {"video": ["10", 0], "filename_prefix": "video/big", "format": "mp4", "codec": "h264"}}
    })
}

/// Two MP4s with their moov after a 1 MiB and a 5 MiB mdat (80 frames of 1024×1024).
fn big_videos() -> Value {
    json!({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 16, "color": 0}},
        "2": {"class_type": "CreateVideo", "inputs": {"images": ["1", 0], "fps": 8.0}},
        "3": {"class_type": "SaveVideo", "inputs": {"video": ["2", 0], "filename_prefix": "video/big", "format": "mp4", "codec": "h264"}},
        "4": {"class_type": "EmptyImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 80, "color": 0}},
        "5": {"class_type": "CreateVideo", "inputs": {"images": ["4", 0], "fps": 8.0}},
        "6": {"class_type": "SaveVideo", "inputs": {"video": ["5", 0], "filename_prefix": "video/huge", "format": "mp4", "codec": "h264"}}
    })
}

async fn run_workflow(workflow: &Value, faults: Faults) -> RunRecord {
    let config = SimConfig::default().with_vram_gib(12).with_faults(faults);
    let sim: SimHandle = sim(config).await;
    execute(&client(&sim), run_request(workflow)).await
}

async fn run(faults: Faults) -> RunRecord {
    run_workflow(&savers(), faults).await
}

/// The recorded `/view` requests: (path, the answer's summary).
fn views(r: &RunRecord) -> Vec<(String, String)> {
    r.raw
        .http
        .iter()
        .filter(|h| h.exchange.path.starts_with("/view?"))
        .map(|h| {
            (
                h.exchange.path.clone(),
                h.exchange.response_text.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// (node, format, media, width, height, frames) of one recorded file.
type FileFacts = (String, String, Option<MediaKind>, u32, u32, Option<u64>);

/// Every recorded file's facts, by node.
fn files(r: &RunRecord) -> Vec<FileFacts> {
    let mut v: Vec<_> = r
        .product
        .as_ref()
        .unwrap()
        .files
        .iter()
        .map(|f| {
            (
                f.node_id.clone(),
                f.format.clone().unwrap_or_default(),
                f.media,
                f.width.unwrap_or(0),
                f.height.unwrap_or(0),
                f.frames,
            )
        })
        .collect();
    v.sort_by_key(|f| f.0.parse::<u32>().unwrap_or(0));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn video_and_animated_outputs_record_their_frames_and_match_the_graph() {
    let r = run(Faults::default()).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.error);
    let p = r.product.as_ref().unwrap();
    let f = |n: &str, fmt: &str, m, w, h, fr| (n.to_string(), fmt.to_string(), Some(m), w, h, fr);
    use MediaKind::{Animated, Video};
    assert_eq!(
        files(&r),
        [
            f("3", "mp4", Video, 64, 48, Some(8)),
            f("4", "webm", Video, 64, 48, Some(8)),
            f("5", "webp", Animated, 64, 48, Some(8)),
            f("6", "png", Animated, 64, 48, Some(8)),
            f("8", "webp", Animated, 80, 48, Some(3)),
            f("11", "mp4", Video, 1024, 1024, Some(16)),
            f("12", "gif", Animated, 64, 48, Some(8)),
        ]
    );
    assert!(p.mismatches.is_empty(), "{:?}", p.mismatches);
    assert!(
        !p.notes.iter().any(|n| n.contains("frames not checked")),
        "{:?}",
        p.notes
    );
    let summary = p.summary().unwrap();
    for part in [
        "1 × MP4 64×48, 8 frames",
        "1 × WEBM 64×48, 8 frames",
        "1 × WEBP 64×48, 8 frames",
        "1 × PNG 64×48, 8 frames",
        "1 × WEBP 80×48, 3 frames",
    ] {
        assert!(summary.contains(part), "{part} in {summary}");
    }
    // SaveVideo's file is in the subfolder of its prefix, like the capture's.
    let mp4 = p.files.iter().find(|f| f.node_id == "3").unwrap();
    assert_eq!(mp4.subfolder, "video");
    // The big MP4's moov follows a 1 MiB mdat: its head, then one Range request from the
    // moov, answered 206. Only MP4s are ever read twice; every other file in one request.
    let big = p.files.iter().find(|f| f.node_id == "11").unwrap();
    assert_eq!(
        (big.media, big.width, big.height, big.frames),
        (Some(Video), Some(1024), Some(1024), Some(16))
    );
    let views = views(&r);
    let of = |name: &str| -> Vec<&(String, String)> {
        views.iter().filter(|(p, _)| p.contains(name)).collect()
    };
    let big_reads = of("big_");
    assert_eq!(big_reads.len(), 2, "{views:#?}");
    assert!(big_reads[1].0.contains("(Range: bytes="), "{big_reads:?}");
    assert!(big_reads[1].1.contains("from byte"), "{big_reads:?}");
    for name in ["cap_webm_", "cap_webp_", "cap_apng_", "cap_webp3_"] {
        assert_eq!(of(name).len(), 1, "{name}: {views:#?}");
    }
    assert!(
        views
            .iter()
            .filter(|(p, _)| p.contains("Range"))
            .all(|(p, _)| p.contains(".mp4")),
        "{views:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_range_an_mp4_is_read_from_its_start_only_up_to_the_cap() {
    let r = run_workflow(&big_videos(), Faults::default().with_no_range()).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.error);
    let p = r.product.as_ref().unwrap();
    let got = files(&r);
    // The 1 MiB one: the second request's 200 answer is read from the start to the moov.
    assert_eq!(got[0].5, Some(16), "{got:?}");
    // The 5 MiB one: its moov lies past the 4 MiB cap, so nothing more is read; the size and
    // frames stay unknown, and the note says why.
    let huge = p.files.iter().find(|f| f.node_id == "6").unwrap();
    assert_eq!(
        (huge.media, huge.width, huge.frames),
        (Some(MediaKind::Video), None, None)
    );
    let note = huge.note.as_deref().unwrap_or("");
    assert!(
        note.contains("ignored Range") && note.contains("read cap"),
        "{note}"
    );
    assert!(huge.bytes.is_some_and(|b| b > 5_000_000));
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("frames not checked for SaveVideo #6")),
        "{:?}",
        p.notes
    );
    assert!(p.mismatches.is_empty(), "{:?}", p.mismatches);
    assert_eq!(
        p.summary().as_deref(),
        Some("1 × MP4 1024×1024, 16 frames, 1 × MP4 size unknown, frames unknown")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_video_is_a_warning_not_a_failure() {
    let r = run(Faults::default().with_short_video(2)).await;
    assert_eq!(r.outcome, OutcomeKind::Passed, "{:?}", r.error);
    let p = r.product.as_ref().unwrap();
    assert_eq!(
        files(&r).iter().map(|f| f.5).collect::<Vec<_>>(),
        [
            Some(6),
            Some(6),
            Some(6),
            Some(6),
            Some(1),
            Some(14),
            Some(6)
        ]
    );
    let m = &p.mismatches;
    for want in [
        "SaveVideo #3 wrote 6 frame(s), the graph asks for 8 (batch × frames)",
        "SaveWEBM #4 wrote 6 frame(s), the graph asks for 8 (batch × frames)",
        "SaveAnimatedWEBP #5 wrote 6 frame(s), the graph asks for 8",
        "SaveAnimatedPNG #6 wrote 6 frame(s), the graph asks for 8",
        "SaveAnimatedWEBP #8 wrote 1 frame(s), the graph asks for 3",
    ] {
        assert!(m.iter().any(|m| m.starts_with(want)), "{want} in {m:#?}");
    }
    assert!(
        m.iter()
            .any(|m| m.starts_with("VHS_VideoCombine #12 wrote 6 frame(s), the graph asks for 8")),
        "{m:#?}"
    );
    assert_eq!(m.len(), 7, "{m:#?}");
    // The mismatches are the run's warnings, not its error.
    assert!(r.error.is_none());
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("product: SaveVideo #3 wrote 6 frame(s)")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn short_video_parses_and_says_what_it_needs() {
    assert_eq!(Faults::parse("short-video=3").unwrap().short_video, 3);
    let e = Faults::parse("short-video=x").unwrap_err();
    assert!(e.contains("short-video=x"), "{e}");
    assert!(Faults::parse("short-video=0").is_err());
}

/// Every `GET /view` of the capture's `range.json` (ComfyUI 0.3.64 on aiohttp), replayed
/// against the simulator's file of the same kind: the same status, the same headers among
/// `Accept-Ranges`, `Content-Range` and `Content-Disposition`, and the same bytes relative to
/// the file's size. The capture's still PNG is replayed on the simulator's APNG (its header-only
/// PNG is shorter than the ranges asked; `/view` serves every file alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_answers_ranges_like_the_capture() {
    let capture: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/comfyui-outputs/range.json").unwrap(),
    )
    .unwrap();
    let config = SimConfig::default().with_vram_gib(12);
    let sim: SimHandle = sim(config).await;
    let r = execute(&client(&sim), run_request(&savers())).await;
    let p = r.product.unwrap();
    let sim_file = |ext: &str| {
        let f = p
            .files
            .iter()
            .find(|f| f.filename.ends_with(ext) && f.filename.starts_with("cap_"))
            .unwrap();
        (f.filename.clone(), f.subfolder.clone(), f.bytes.unwrap())
    };
    let http = reqwest::Client::new();
    let entries = capture["plain_view"]
        .as_array()
        .unwrap()
        .iter()
        .chain(capture["reencoding_params"].as_array().unwrap())
        .filter(|e| e.get("method").is_none());
    let mut replayed = 0;
    for e in entries {
        let file = e["file"].as_str().unwrap();
        let ext = file.rsplit('.').next().unwrap();
        let (name, subfolder, size) = sim_file(&format!(".{ext}"));
        let mut url = reqwest::Url::parse(&format!("{}/view", sim.base_url())).unwrap();
        url.query_pairs_mut()
            .append_pair("filename", &name)
            .append_pair("subfolder", &subfolder)
            .append_pair("type", "output");
        for (k, v) in e["query"].as_object().into_iter().flatten() {
            url.query_pairs_mut().append_pair(k, v.as_str().unwrap());
        }
        let mut req = http.get(url);
        let range = e["request_range"].as_str();
        if let Some(range) = range {
            req = req.header("Range", range);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.unwrap();
        let what = format!("{file} {range:?} {:?}", e["query"]);
        assert_eq!(Some(status as u64), e["status"].as_u64(), "{what}");
        let want = e["headers"].as_object().unwrap();
        for h in ["Accept-Ranges", "Content-Range", "Content-Disposition"] {
            assert_eq!(headers.contains_key(h), want.contains_key(h), "{what}: {h}");
        }
        assert_eq!(
            headers["content-disposition"].to_str().unwrap(),
            format!("filename=\"{name}\"")
        );
        let captured = e["body_bytes"].as_u64().unwrap();
        if e["query"].is_object() {
            // Re-encoded by ComfyUI: a different body; the Range is ignored either way.
            assert_eq!(body.len() as u64, size, "{what}");
            replayed += 1;
            continue;
        }
        // The capture's sizes for the same ranges: whole, 100, the last 100, from 100, 1, none.
        let expect = match (status, range) {
            (200, _) => size,
            (206, Some("bytes=100-")) => size - 100,
            (416, _) => 0,
            _ => captured,
        };
        assert_eq!(body.len() as u64, expect, "{what}");
        if let Some(cr) = headers.get("content-range") {
            let cr = cr.to_str().unwrap();
            let want_cr = want["Content-Range"].as_str().unwrap();
            // The same form, with the simulator's size: `bytes a-b/size` or `bytes */size`.
            let total = want_cr.rsplit('/').next().unwrap();
            let form = want_cr.replace(total, "");
            let (first_last, sim_total) = cr.rsplit_once('/').unwrap();
            assert_eq!(sim_total, size.to_string(), "{what}");
            if form.ends_with("*/") {
                assert_eq!(first_last, "bytes *", "{what}");
            } else {
                let (a, b) = first_last
                    .strip_prefix("bytes ")
                    .unwrap()
                    .split_once('-')
                    .unwrap();
                let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
                assert_eq!(b - a + 1, body.len() as u64, "{what}: {cr}");
            }
        }
        replayed += 1;
    }
    // 18 plain requests (3 files × 6) and 6 with re-encoding parameters; the HEADs are not replayed.
    assert_eq!(replayed, 24);
}
