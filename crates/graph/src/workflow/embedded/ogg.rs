//! Ogg (SaveAudioOpus): the second packet of the first stream is the comment header,
//! `OpusTags` (or Vorbis's `\x03vorbis`) followed by Vorbis comments. A packet may span pages;
//! the pages are read until it ends, the audio after it never.

use super::read::{read_value, Entry, ExtractError, MAX_VALUE};
use super::vorbis;
use std::io::{Read, Seek};

/// The comments of an Ogg Opus or Vorbis file.
pub(crate) fn entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let mut serial = None;
    let mut packets: Vec<Vec<u8>> = Vec::new();
    let mut packet = Vec::new();
    loop {
        let mut head = [0; 27];
        if super::read::read_up_to(r, &mut head)? < 27 || &head[..4] != b"OggS" {
            return Ok(Vec::new());
        }
        let page_serial = u32::from_le_bytes([head[14], head[15], head[16], head[17]]);
        let lacing = read_value(r, u64::from(head[26]))?;
        let body = read_value(r, lacing.iter().map(|&l| u64::from(l)).sum())?;
        if *serial.get_or_insert(page_serial) != page_serial {
            continue;
        }
        let mut at = 0;
        for &l in &lacing {
            packet.extend_from_slice(&body[at..at + usize::from(l)]);
            at += usize::from(l);
            if packet.len() as u64 > MAX_VALUE {
                return Err(ExtractError::Damaged(
                    "an Ogg header packet larger than the metadata read".into(),
                ));
            }
            if l < 255 {
                packets.push(std::mem::take(&mut packet));
                if packets.len() == 2 {
                    let tags = &packets[1];
                    let data = tags
                        .strip_prefix(b"OpusTags")
                        .or_else(|| tags.strip_prefix(b"\x03vorbis"))
                        .unwrap_or_default();
                    return Ok(vorbis::comments(data));
                }
            }
        }
    }
}
