//! A workflow read from the file ComfyUI saved (PNG, WebP, audio, video), as a user runs it:
//! `hash`, `plan`, `convert`, `validate` and `bisect` of the file give the workflow hash of the
//! JSON inside, the session records the file, and a file with nothing inside is refused with
//! exit 2 and what to give instead. The files are written the savers' way
//! (tests/fixtures/media-workflows/README.md).

use crate::session_support::*;
use serde_json::Value;
use std::process::Output;

const MEDIA: &str = "tests/fixtures/media-workflows";
const DEFS: &str = "tests/fixtures/comfyui/GET__object_info.final.json";
/// The UI workflow and the API prompt saved in every fixture but the sd15 one.
const UI: &str = "tests/corpus/templates/flux_schnell.json";
const API: &str = "tests/corpus/templates-api/flux_schnell.json";

fn media(name: &str) -> String {
    format!("{MEDIA}/{name}")
}

fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", text(out));
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap_or_else(|e| panic!("{e}\n{}", text(out)))
}

fn hash(path: &str) -> String {
    let doc = json(&cli(&["hash", "--json", path, "--object-info", DEFS]));
    doc["sha256"].as_str().unwrap().to_string()
}

#[test]
fn every_saved_format_hashes_like_the_json_inside() {
    let want = hash(API);
    assert_eq!(hash(UI), want, "the UI template converts to its API prompt");
    for name in [
        "ComfyUI_00001_.png",
        "api_prompt_only.png",
        "compressed_text.png",
        "ComfyUI_00002_.png",
        "ComfyUI_00003_.webp",
        "ComfyUI_00004_.flac",
        "ComfyUI_00005_.mp3",
        "ComfyUI_00006_.opus",
        "ComfyUI_00007_.mp4",
        "ComfyUI_00008_.webm",
        "AnimateDiff_00001.mkv",
        "AnimateDiff_00002.mp4",
    ] {
        assert_eq!(hash(&media(name)), want, "{name}");
    }
}

#[test]
fn plan_convert_and_validate_of_a_png_and_a_webp_give_the_same_hash() {
    let want = hash(API);
    for name in ["ComfyUI_00001_.png", "ComfyUI_00003_.webp"] {
        let path = media(name);
        let plan = json(&cli(&["plan", "--json", &path, "--object-info", DEFS]));
        assert_eq!(plan["target_sha256"], want.as_str(), "plan {name}");

        let dir = tempfile::tempdir().unwrap();
        let out_file = dir.path().join("api.json");
        let out = cli(&[
            "convert",
            &path,
            "--object-info",
            DEFS,
            "-o",
            out_file.to_str().unwrap(),
        ]);
        ok(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&want), "convert {name}: {stderr}");
        assert!(
            stderr.contains("using the UI workflow (`workflow`)"),
            "which text was used is said: {stderr}"
        );
        assert_eq!(hash(out_file.to_str().unwrap()), want);

        let out = cli(&["validate", "--json", &path, "--object-info", DEFS]);
        // The capture's server lacks the flux checkpoint: invalid (exit 1), but read.
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc[0]["sha256"], want.as_str(), "validate {name}");
    }
}

#[test]
fn bisect_of_a_png_records_the_file_and_writes_ui_variants() {
    let sim = Sim::with_vram_mib(24 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let png = media("sd15_hires_fix_pixel.png");
    let out = bisect(&sim.url(), &runs, &[&png]);
    let (dir, session) = only_session(&runs);
    let job = &session.workflows[0];
    let want = json(&cli(&[
        "hash",
        "--json",
        "workflows/sd15_hires_fix_pixel.json",
    ]));
    assert_eq!(
        job.target_sha256,
        want["sha256"].as_str().unwrap(),
        "{}",
        text(&out)
    );
    let source = job
        .source_file
        .as_ref()
        .expect("the saved file is recorded");
    assert_eq!(source.file, "sd15_hires_fix_pixel.png");
    assert_eq!(source.container, "PNG");
    assert_eq!(
        source.sha256,
        comfy_bisect_core::workflow::sha256_hex(&std::fs::read(&png).unwrap())
    );
    // The UI workflow was used, so every variant is also a UI file to drag into ComfyUI.
    let step = &job.steps[0].file;
    let ui = dir.join(comfy_bisect_core::session::setup::ui_companion(step));
    assert!(ui.is_file(), "{} missing\n{}", ui.display(), text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("saved by ComfyUI"));
}

#[test]
fn a_file_with_no_workflow_inside_is_refused_with_why_and_what_instead() {
    let png = media("no_metadata.png");
    for args in [
        vec!["hash", png.as_str(), "--object-info", DEFS],
        vec!["plan", png.as_str(), "--object-info", DEFS],
        vec!["--server", "http://127.0.0.1:9", "bisect", png.as_str()],
    ] {
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        for part in [
            "holds no ComfyUI workflow",
            "--disable-metadata",
            "Workflow → Export",
        ] {
            assert!(stderr.contains(part), "{args:?}: {part} not in {stderr}");
        }
    }
}

#[test]
fn diagnose_of_a_saved_image_is_an_input_error() {
    let out = cli(&["diagnose", &media("ComfyUI_00001_.png")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a PNG file") && stderr.contains("comfy-bisect bisect"),
        "{stderr}"
    );
}
