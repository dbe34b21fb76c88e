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

/// A file of stored bytes and long runs of zeros that are never stored, counting the bytes
/// read: the readers must seek over media data, whatever its size.
struct Sparse {
    parts: Vec<Part>,
    pos: u64,
    read: u64,
}

enum Part {
    Bytes(Vec<u8>),
    Zeros(u64),
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::Zeros(n) => *n,
        }
    }
}

impl Sparse {
    fn new(parts: Vec<Part>) -> Sparse {
        Sparse {
            parts,
            pos: 0,
            read: 0,
        }
    }
    fn len(&self) -> u64 {
        self.parts.iter().map(Part::len).sum()
    }
}

impl std::io::Read for Sparse {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut start = 0;
        for part in &self.parts {
            let end = start + part.len();
            if self.pos < end {
                let at = self.pos - start;
                let n = (buf.len() as u64).min(end - self.pos) as usize;
                match part {
                    Part::Bytes(b) => buf[..n].copy_from_slice(&b[at as usize..at as usize + n]),
                    Part::Zeros(_) => buf[..n].fill(0),
                }
                self.pos += n as u64;
                self.read += n as u64;
                return Ok(n);
            }
            start = end;
        }
        Ok(0)
    }
}

impl std::io::Seek for Sparse {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(n) => n,
            SeekFrom::End(d) => self.len().saturating_add_signed(d),
            SeekFrom::Current(d) => self.pos.saturating_add_signed(d),
        };
        Ok(self.pos)
    }
}

const GIB: u64 = 1 << 30;

fn prompt_of(mut file: Sparse, container: Container) -> (Value, u64) {
    let found = extract(&mut file, container).unwrap();
    (found.prompt.expect("the prompt"), file.read)
}

#[test]
fn a_png_with_gigabytes_of_image_data_is_read_by_seeking() {
    let mut head = b"\x89PNG\r\n\x1a\n".to_vec();
    head.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
    head.extend_from_slice(b"IDAT");
    let text = b"prompt\0{\"1\": {\"class_type\": \"A\", \"inputs\": {}}}";
    let mut tail = vec![0; 4]; // the IDAT's CRC
    tail.extend_from_slice(&(text.len() as u32).to_be_bytes());
    tail.extend_from_slice(b"tEXt");
    tail.extend_from_slice(text);
    tail.extend_from_slice(&[0; 4]);
    tail.extend_from_slice(b"\0\0\0\0IEND\xaeB`\x82");
    let file = Sparse::new(vec![
        Part::Bytes(head),
        Part::Zeros(0x7fff_ffff),
        Part::Bytes(tail),
    ]);
    let (prompt, read) = prompt_of(file, Container::Png);
    assert_eq!(prompt["1"]["class_type"], "A");
    assert!(read < 4096, "read {read} bytes");
}

#[test]
fn an_mp4_with_its_moov_after_a_huge_mdat_is_read_by_seeking() {
    // The moov of a real SaveVideo file, after 3 GiB of media data (a 64-bit box size).
    let real = std::fs::read(media("ComfyUI_00007_.mp4")).unwrap();
    let mut at = 0;
    let mut moov = None;
    while at + 8 <= real.len() {
        let size = u32::from_be_bytes(real[at..at + 4].try_into().unwrap()) as usize;
        if &real[at + 4..at + 8] == b"moov" {
            moov = Some(real[at..at + size].to_vec());
        }
        at += size;
    }
    let mut head = b"\0\0\0\x10ftypisom\0\0\x02\0".to_vec();
    head.extend_from_slice(&1u32.to_be_bytes());
    head.extend_from_slice(b"mdat");
    head.extend_from_slice(&(16 + 3 * GIB).to_be_bytes());
    let file = Sparse::new(vec![
        Part::Bytes(head),
        Part::Zeros(3 * GIB),
        Part::Bytes(moov.expect("a moov box")),
    ]);
    let (prompt, read) = prompt_of(file, Container::Mp4);
    assert_eq!(prompt, corpus("templates-api"));
    assert!(read < 64 * 1024, "read {read} bytes");
}

#[test]
fn a_matroska_file_with_a_huge_cluster_before_its_tags_is_read_by_seeking() {
    fn element(id: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut out = id.to_vec();
        out.push(0x01); // an 8-byte size
        out.extend_from_slice(&(payload.len() as u64).to_be_bytes()[1..]);
        out.extend_from_slice(payload);
        out
    }
    let simple = [
        element(&[0x45, 0xa3], b"PROMPT"),
        element(
            &[0x44, 0x87],
            b"{\"1\": {\"class_type\": \"B\", \"inputs\": {}}}",
        ),
    ]
    .concat();
    let tags = element(
        &[0x12, 0x54, 0xc3, 0x67],
        &element(&[0x73, 0x73], &element(&[0x67, 0xc8], &simple)),
    );
    let mut head = element(&[0x1a, 0x45, 0xdf, 0xa3], b"\x42\x82\x84webm");
    // A Segment of unknown size, then a 2 GiB Cluster.
    head.extend_from_slice(&[
        0x18, 0x53, 0x80, 0x67, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]);
    head.extend_from_slice(&[0x1f, 0x43, 0xb6, 0x75, 0x01]);
    head.extend_from_slice(&(2 * GIB).to_be_bytes()[1..]);
    let file = Sparse::new(vec![
        Part::Bytes(head),
        Part::Zeros(2 * GIB),
        Part::Bytes(tags),
    ]);
    let (prompt, read) = prompt_of(file, Container::Matroska);
    assert_eq!(prompt["1"]["class_type"], "B");
    assert!(read < 4096, "read {read} bytes");
}
