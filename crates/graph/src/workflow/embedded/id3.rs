//! MP3's ID3v2 tag (SaveAudioMP3: FFmpeg writes each container key as a `TXXX` frame, its
//! description the key). Versions 2.3 and 2.4; the audio frames after the tag are not read.

use super::read::{latin1, read_value, Entry, ExtractError};
use std::io::{Read, Seek};

/// The `TXXX` (and `COMM`) frames of the ID3v2 tag at the start of the file.
pub(crate) fn entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let mut head = [0; 10];
    if super::read::read_up_to(r, &mut head)? < 10 || &head[..3] != b"ID3" {
        return Ok(Vec::new());
    }
    let version = head[3];
    let flags = head[5];
    let mut tag = read_value(r, u64::from(syncsafe(&head[6..10])))?;
    if flags & 0x80 != 0 {
        tag = resync(&tag);
    }
    let mut at = 0usize;
    if flags & 0x40 != 0 {
        // The extended header: its size counts itself in 2.4, not in 2.3.
        let size = match version {
            4 => syncsafe(tag.get(..4).unwrap_or_default()) as usize,
            _ => 4 + be32(tag.get(..4).unwrap_or_default()) as usize,
        };
        at = size;
    }
    let mut out = Vec::new();
    while let Some(frame) = tag.get(at..at + 10) {
        let id = &frame[..4];
        if id[0] == 0 {
            break; // padding
        }
        let size = match version {
            4 => syncsafe(&frame[4..8]),
            _ => be32(&frame[4..8]),
        } as usize;
        let Some(body) = tag.get(at + 10..(at + 10).saturating_add(size)) else {
            break;
        };
        at += 10 + size;
        // Compressed or encrypted frames are not what FFmpeg writes.
        if frame[9] & 0x0c != 0 {
            continue;
        }
        match id {
            b"TXXX" => {
                if let Some((enc, rest)) = body.split_first() {
                    let (key, value) = split_terminated(*enc, rest);
                    out.push((decode(*enc, key), decode(*enc, value)));
                }
            }
            b"COMM" if body.len() > 4 => {
                // Encoding, language (3 bytes), description, text.
                let (key, value) = split_terminated(body[0], &body[4..]);
                let key = decode(body[0], key);
                out.push((
                    if key.is_empty() {
                        "comment".into()
                    } else {
                        key
                    },
                    decode(body[0], value),
                ));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn syncsafe(b: &[u8]) -> u32 {
    b.iter()
        .take(4)
        .fold(0, |n, &x| (n << 7) | u32::from(x & 0x7f))
}

fn be32(b: &[u8]) -> u32 {
    b.iter().take(4).fold(0, |n, &x| (n << 8) | u32::from(x))
}

/// Undoes the unsynchronisation scheme (`FF 00` → `FF`).
fn resync(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    for (i, &b) in data.iter().enumerate() {
        if !(b == 0 && i > 0 && data[i - 1] == 0xff) {
            out.push(b);
        }
    }
    out
}

/// Splits at the first terminator of the encoding (one NUL, or two for UTF-16).
fn split_terminated(enc: u8, data: &[u8]) -> (&[u8], &[u8]) {
    if matches!(enc, 1 | 2) {
        let mut i = 0;
        while i + 1 < data.len() {
            if data[i] == 0 && data[i + 1] == 0 {
                return (&data[..i], &data[i + 2..]);
            }
            i += 2;
        }
        (data, &[])
    } else {
        match data.iter().position(|&b| b == 0) {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &[]),
        }
    }
}

/// Text in an ID3 encoding: 0 Latin-1, 1 UTF-16 with BOM, 2 UTF-16BE, 3 UTF-8.
fn decode(enc: u8, data: &[u8]) -> String {
    match enc {
        1 | 2 => {
            let (big, data) = match data {
                [0xfe, 0xff, rest @ ..] => (true, rest),
                [0xff, 0xfe, rest @ ..] => (false, rest),
                _ => (enc == 2, data),
            };
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| {
                    if big {
                        u16::from_be_bytes([c[0], c[1]])
                    } else {
                        u16::from_le_bytes([c[0], c[1]])
                    }
                })
                .collect();
            String::from_utf16_lossy(&units)
        }
        3 => String::from_utf8_lossy(data).into_owned(),
        _ => latin1(data),
    }
    .trim_end_matches('\0')
    .to_string()
}
