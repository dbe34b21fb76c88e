use super::*;
use crate::workflow::{read_document, LoadError};
use serde_json::Value;
use std::io::Cursor;
use std::path::{Path, PathBuf};

fn media(name: &str) -> PathBuf {
    Path::new(crate::FIXTURES)
        .join("media-workflows")
        .join(name)
}

fn corpus(dir: &str) -> Value {
    let path = format!("{}/../corpus/{dir}/flux_schnell.json", crate::FIXTURES);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn found(name: &str) -> (Container, Found) {
    let bytes = std::fs::read(media(name)).unwrap();
    let container = Container::sniff(&bytes).unwrap_or_else(|| panic!("{name}: not sniffed"));
    let found =
        extract(&mut Cursor::new(bytes), container).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    (container, found)
}

/// Every saver's file gives back both texts exactly as the corpus files they were made from.
#[test]
fn every_savers_file_gives_back_the_prompt_and_the_workflow() {
    let (ui, api) = (corpus("templates"), corpus("templates-api"));
    for (name, container) in [
        ("ComfyUI_00001_.png", Container::Png),
        ("ComfyUI_00002_.png", Container::Png),
        ("compressed_text.png", Container::Png),
        ("ComfyUI_00003_.webp", Container::WebP),
        ("ComfyUI_00004_.flac", Container::Flac),
        ("ComfyUI_00005_.mp3", Container::Mp3),
        ("ComfyUI_00006_.opus", Container::Ogg),
        ("ComfyUI_00007_.mp4", Container::Mp4),
        ("ComfyUI_00008_.webm", Container::Matroska),
        ("AnimateDiff_00001.mkv", Container::Matroska),
        ("AnimateDiff_00002.mp4", Container::Mp4),
    ] {
        let (got, found) = found(name);
        assert_eq!(got, container, "{name}");
        assert_eq!(found.prompt.as_ref(), Some(&api), "{name}: prompt");
        assert_eq!(found.workflow.as_ref(), Some(&ui), "{name}: workflow");
    }
}

#[test]
fn the_ui_workflow_is_preferred_and_recorded_with_the_files_sha256() {
    let path = media("ComfyUI_00001_.png");
    let doc = read_document(&path).unwrap();
    assert!(doc.is_ui());
    let source = doc.source.unwrap();
    assert_eq!(source.file, "ComfyUI_00001_.png");
    assert_eq!(source.container, "PNG");
    assert_eq!(source.embedded, Embedded::Workflow);
    assert!(source.both);
    assert_eq!(
        source.sha256,
        crate::workflow::sha256_hex(&std::fs::read(&path).unwrap())
    );
    // A file with only the API prompt (a prompt queued without the frontend's extra data).
    let doc = read_document(&media("api_prompt_only.png")).unwrap();
    assert_eq!(doc.value, corpus("templates-api"));
    let source = doc.source.unwrap();
    assert_eq!((source.embedded, source.both), (Embedded::Prompt, false));
}

#[test]
fn a_file_without_metadata_says_why_and_what_to_give_instead() {
    let err = read_document(&media("no_metadata.png")).unwrap_err();
    assert!(matches!(
        err,
        LoadError::NoWorkflowInside {
            container: Container::Png,
            ..
        }
    ));
    let text = err.to_string();
    for part in [
        "no_metadata.png",
        "--disable-metadata",
        "strips",
        "Workflow → Export",
    ] {
        assert!(text.contains(part), "{part} not in {text}");
    }
}

#[test]
fn binary_that_is_no_saved_file_is_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json");
    std::fs::write(&path, [0x00, 0x9f, 0x92, 0x96, 0xc3]).unwrap();
    assert!(matches!(
        read_document(&path),
        Err(LoadError::NotText { utf16: false, .. })
    ));
    std::fs::write(&path, [0xff, 0xfe, b'{', 0, b'}', 0, 0x80, 0xd8]).unwrap();
    assert!(matches!(
        read_document(&path),
        Err(LoadError::NotText { utf16: true, .. })
    ));
}

/// A file cut short, anywhere, is an error or an empty find, never a panic; its metadata
/// claims are never trusted for an allocation.
#[test]
fn cut_short_files_never_panic() {
    for name in [
        "ComfyUI_00001_.png",
        "ComfyUI_00002_.png",
        "compressed_text.png",
        "ComfyUI_00003_.webp",
        "ComfyUI_00004_.flac",
        "ComfyUI_00005_.mp3",
        "ComfyUI_00006_.opus",
        "ComfyUI_00007_.mp4",
        "ComfyUI_00008_.webm",
        "AnimateDiff_00001.mkv",
        "AnimateDiff_00002.mp4",
    ] {
        let bytes = std::fs::read(media(name)).unwrap();
        let container = Container::sniff(&bytes).unwrap();
        for cut in (0..bytes.len()).step_by(97) {
            let _ = extract(&mut Cursor::new(&bytes[..cut]), container);
            let mut flipped = bytes.clone();
            flipped[cut] ^= 0xff;
            let _ = extract(&mut Cursor::new(flipped), container);
        }
    }
}

#[test]
fn sniffing_goes_by_content_not_name() {
    assert_eq!(Container::sniff(b"\x89PNG\r\n\x1a\n"), Some(Container::Png));
    assert_eq!(
        Container::sniff(b"RIFF\0\0\0\0WEBPVP8L"),
        Some(Container::WebP)
    );
    assert_eq!(
        Container::sniff(b"\0\0\0\x20ftypisom"),
        Some(Container::Mp4)
    );
    assert_eq!(Container::sniff(b"\xff\xfb\x90\x00"), Some(Container::Mp3));
    assert_eq!(Container::sniff(b"\xff\xfe{\0"), None);
    assert_eq!(Container::sniff(b"{\"1\": {}}"), None);
    assert_eq!(Container::sniff(b"\xef\xbb\xbf{}"), None);
}

#[test]
fn a_comment_that_is_not_the_savers_is_ignored_and_bad_json_is_said() {
    let entries = vec![("comment".to_string(), "made with love".to_string())];
    let f = super::found(entries).unwrap();
    assert!(f.prompt.is_none() && f.workflow.is_none());
    let entries = vec![("prompt".to_string(), "{not json".to_string())];
    assert!(matches!(
        super::found(entries),
        Err(ExtractError::NotJson { key: "prompt", .. })
    ));
    // A broken `prompt` does not hide a good `workflow`.
    let entries = vec![
        ("prompt".to_string(), "{not json".to_string()),
        ("WORKFLOW".to_string(), "{\"nodes\": []}".to_string()),
    ];
    assert!(super::found(entries).unwrap().workflow.is_some());
}

#[test]
fn exif_in_either_byte_order() {
    // Big-endian TIFF, one ASCII entry (tag 0x0110) pointing past the IFD.
    let text = b"prompt:{\"1\":{}}\0";
    let mut tiff = b"MM\0*\0\0\0\x08\0\x01\x01\x10\0\x02".to_vec();
    tiff.extend_from_slice(&(text.len() as u32).to_be_bytes());
    tiff.extend_from_slice(&26u32.to_be_bytes());
    tiff.extend_from_slice(&[0, 0, 0, 0]);
    tiff.extend_from_slice(text);
    let entries = exif::tiff_entries(&tiff);
    assert_eq!(entries, vec![("prompt".into(), "{\"1\":{}}".into())]);
}
