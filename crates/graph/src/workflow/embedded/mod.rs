//! The workflow ComfyUI writes into the files it saves: which container a file is (by its
//! magic bytes, never its name), the `prompt` (API) and `workflow` (UI) texts inside it, and
//! which one a command uses (the UI workflow when both are there, so variants written back
//! open in ComfyUI again).
//!
//! One reader per container, each over `Read + Seek` and bounded: only metadata is read, media
//! data is skipped with seeks, and no value larger than 64 MiB is read. Where each saver
//! puts the texts is in docs/inputs.md; tests/fixtures/media-workflows/ holds files written the
//! savers' way.

pub mod ebml;
mod exif;
mod id3;
mod isobmff;
mod matroska;
mod ogg;
mod png;
mod read;
mod vorbis;

use read::Entry;
pub(crate) use read::{read_up_to, ExtractError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};

/// A file format ComfyUI (or a popular saver node) writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// PNG and APNG (SaveImage, SaveAnimatedPNG, VideoHelperSuite's first-frame PNG).
    Png,
    /// WebP (SaveAnimatedWEBP, SaveImageWebP).
    WebP,
    /// FLAC (SaveAudio).
    Flac,
    /// MP3 with an ID3v2 tag (SaveAudioMP3).
    Mp3,
    /// Ogg: Opus (SaveAudioOpus) or Vorbis.
    Ogg,
    /// MP4 / QuickTime (SaveVideo, VideoHelperSuite's mp4 and ProRes formats).
    Mp4,
    /// Matroska / WebM (SaveWEBM, VideoHelperSuite's webm and mkv formats).
    Matroska,
    /// JPEG: no ComfyUI saver writes the workflow into one.
    Jpeg,
    /// GIF: no ComfyUI saver writes the workflow into one.
    Gif,
}

impl Container {
    /// The container a file starts like, from its first 12 bytes or more.
    pub fn sniff(head: &[u8]) -> Option<Container> {
        let at = |i: usize, magic: &[u8]| head.get(i..i + magic.len()) == Some(magic);
        Some(match () {
            () if at(0, b"\x89PNG\r\n\x1a\n") => Container::Png,
            () if at(0, b"RIFF") && at(8, b"WEBP") => Container::WebP,
            () if at(0, b"fLaC") => Container::Flac,
            () if at(0, b"ID3") => Container::Mp3,
            () if at(0, b"OggS") => Container::Ogg,
            () if at(0, b"\x1a\x45\xdf\xa3") => Container::Matroska,
            () if at(4, b"ftyp") || at(4, b"moov") || at(4, b"mdat") || at(4, b"wide") => {
                Container::Mp4
            }
            () if at(0, b"\xff\xd8\xff") => Container::Jpeg,
            () if at(0, b"GIF87a") || at(0, b"GIF89a") => Container::Gif,
            // An MP3 without a tag starts with a frame sync.
            // (`FF FE` is UTF-16's byte-order mark: a text file, not audio.)
            () if head.len() >= 2
                && head[0] == 0xff
                && head[1] & 0xe0 == 0xe0
                && head[1] != 0xfe =>
            {
                Container::Mp3
            }
            () => return None,
        })
    }

    /// Its usual name.
    pub fn name(self) -> &'static str {
        match self {
            Container::Png => "PNG",
            Container::WebP => "WebP",
            Container::Flac => "FLAC",
            Container::Mp3 => "MP3",
            Container::Ogg => "Ogg (Opus)",
            Container::Mp4 => "MP4",
            Container::Matroska => "WebM/Matroska",
            Container::Jpeg => "JPEG",
            Container::Gif => "GIF",
        }
    }
}

impl std::fmt::Display for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which of the saved texts a command uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Embedded {
    /// `workflow`: the UI workflow (what the frontend shows; converted like a UI file).
    Workflow,
    /// `prompt`: the API prompt the server ran.
    Prompt,
}

impl Embedded {
    /// The metadata key it is saved under.
    pub fn key(self) -> &'static str {
        match self {
            Embedded::Workflow => "workflow",
            Embedded::Prompt => "prompt",
        }
    }
}

/// The saved file a workflow was read from: recorded in the session's journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    /// The file's name (without its folder).
    pub file: String,
    /// sha256 (lower hex) of the whole file.
    pub sha256: String,
    /// The container, e.g. `PNG`.
    pub container: String,
    /// Which saved text was used.
    pub embedded: Embedded,
    /// True when the file also holds the other one (the API prompt beside a UI workflow).
    #[serde(default)]
    pub both: bool,
}

/// The texts found in a saved file, as JSON.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// `prompt`: the API prompt.
    pub prompt: Option<Value>,
    /// `workflow`: the UI workflow.
    pub workflow: Option<Value>,
}

/// Reads the `prompt` and `workflow` texts of a file of `container` (which [`Container::sniff`]
/// gave); an empty [`Found`] when it holds neither.
pub(crate) fn extract<R: Read + Seek>(
    r: &mut R,
    container: Container,
) -> Result<Found, ExtractError> {
    r.seek(SeekFrom::Start(0))?;
    let entries = match container {
        Container::Png => png::entries(r)?,
        Container::WebP => exif::webp_entries(r)?,
        Container::Flac => vorbis::flac_entries(r)?,
        Container::Mp3 => id3::entries(r)?,
        Container::Ogg => ogg::entries(r)?,
        Container::Mp4 => isobmff::entries(r)?,
        Container::Matroska => matroska::entries(r)?,
        Container::Jpeg | Container::Gif => Vec::new(),
    };
    found(entries)
}

/// Picks `prompt` and `workflow` out of the entries (keys compared without case: Matroska
/// upper-cases them), and unpacks VideoHelperSuite's older `comment` = `{"prompt", "workflow"}`.
fn found(entries: Vec<Entry>) -> Result<Found, ExtractError> {
    let mut out = Found::default();
    let mut bad = None;
    for (key, text) in &entries {
        let (slot, key) = if key.eq_ignore_ascii_case("prompt") {
            (&mut out.prompt, "prompt")
        } else if key.eq_ignore_ascii_case("workflow") {
            (&mut out.workflow, "workflow")
        } else {
            continue;
        };
        if slot.is_some() {
            continue;
        }
        match serde_json::from_str::<Value>(text.trim_end_matches('\0')) {
            Ok(value) => *slot = Some(value).filter(Value::is_object),
            Err(e) => {
                bad.get_or_insert(ExtractError::NotJson {
                    key,
                    message: e.to_string(),
                });
            }
        }
    }
    if out.prompt.is_none() && out.workflow.is_none() {
        for (key, text) in &entries {
            if !key.eq_ignore_ascii_case("comment") {
                continue;
            }
            // Any comment may be there; only one holding the two keys is the saver's.
            let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            out.prompt = map.remove("prompt").filter(Value::is_object);
            out.workflow = map.remove("workflow").filter(Value::is_object);
            if out.prompt.is_some() || out.workflow.is_some() {
                break;
            }
        }
    }
    // A text that is not JSON matters only when nothing usable was found.
    match bad {
        Some(e) if out.prompt.is_none() && out.workflow.is_none() => Err(e),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests;
