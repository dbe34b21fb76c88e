//! Vorbis comments (`KEY=value`, what FFmpeg writes for container metadata in FLAC and Ogg) and
//! FLAC's metadata blocks (SaveAudio's FLAC: `prompt` and `workflow` comments).

use super::read::{read_value, skip, Entry, ExtractError};
use std::io::{Read, Seek};

/// The comments of a FLAC file's VORBIS_COMMENT block.
pub(crate) fn flac_entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let mut magic = [0; 4];
    r.read_exact(&mut magic)?;
    loop {
        let mut head = [0; 4];
        r.read_exact(&mut head)?;
        let last = head[0] & 0x80 != 0;
        let kind = head[0] & 0x7f;
        let len = u64::from(u32::from_be_bytes([0, head[1], head[2], head[3]]));
        if kind == 4 {
            return Ok(comments(&read_value(r, len)?));
        }
        skip(r, len)?;
        if last {
            return Ok(Vec::new());
        }
    }
}

/// The `KEY=value` comments of a Vorbis comment packet (vendor string first; lengths are
/// little-endian u32). What does not parse ends the list.
pub(crate) fn comments(data: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let next = |at: &mut usize| -> Option<&[u8]> {
        let len = u32::from_le_bytes(data.get(*at..*at + 4)?.try_into().ok()?) as usize;
        let bytes = data.get(*at + 4..(*at + 4).checked_add(len)?)?;
        *at += 4 + len;
        Some(bytes)
    };
    if next(&mut at).is_none() {
        return out;
    }
    let Some(count) = data
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
    else {
        return out;
    };
    at += 4;
    for _ in 0..count {
        let Some(comment) = next(&mut at) else { break };
        let text = String::from_utf8_lossy(comment);
        if let Some((key, value)) = text.split_once('=') {
            out.push((key.to_string(), value.to_string()));
        }
    }
    out
}
