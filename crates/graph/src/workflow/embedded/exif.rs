//! WebP's `EXIF` chunk. SaveAnimatedWEBP writes, through PIL, `prompt:<json>` into IFD0 tag
//! 0x0110 (Model) and `workflow:<json>` into 0x010F (Make), counting down for any further key;
//! every ASCII entry of IFD0 is read and split at its first `:`.

use super::read::{read_value, skip, Entry, ExtractError};
use std::io::{Read, Seek};

/// The `key:text` entries of a WebP's EXIF.
pub(crate) fn webp_entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let mut riff = [0; 12];
    r.read_exact(&mut riff)?;
    loop {
        let mut head = [0; 8];
        if super::read::read_up_to(r, &mut head)? < 8 {
            return Ok(Vec::new());
        }
        let len = u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]));
        if &head[..4] == b"EXIF" {
            let data = read_value(r, len)?;
            return Ok(tiff_entries(&data));
        }
        // Chunks are padded to an even size.
        skip(r, len + (len & 1))?;
    }
}

/// The `key:text` ASCII entries of a TIFF block's IFD0 (an `Exif\0\0` prefix allowed).
pub(crate) fn tiff_entries(data: &[u8]) -> Vec<Entry> {
    let tiff = data.strip_prefix(b"Exif\0\0").unwrap_or(data);
    let big = match tiff.get(..4) {
        Some(b"MM\0*") => true,
        Some(b"II*\0") => false,
        _ => return Vec::new(),
    };
    let u16_at = |i: usize| {
        tiff.get(i..i + 2).map(|b| {
            let b = [b[0], b[1]];
            if big {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        })
    };
    let u32_at = |i: usize| {
        tiff.get(i..i + 4).map(|b| {
            let b = [b[0], b[1], b[2], b[3]];
            if big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        })
    };
    let mut out = Vec::new();
    let Some(ifd) = u32_at(4).map(|o| o as usize) else {
        return out;
    };
    let count = u16_at(ifd).unwrap_or(0) as usize;
    for i in 0..count {
        let at = ifd + 2 + 12 * i;
        let (Some(kind), Some(n), Some(value)) = (u16_at(at + 2), u32_at(at + 4), u32_at(at + 8))
        else {
            break;
        };
        // ASCII (2) as PIL writes text; BYTE (1) and UNDEFINED (7) from other writers.
        if !matches!(kind, 1 | 2 | 7) {
            continue;
        }
        let n = n as usize;
        let bytes = if n <= 4 {
            tiff.get(at + 8..at + 8 + n)
        } else {
            tiff.get(value as usize..(value as usize).saturating_add(n))
        };
        let Some(bytes) = bytes else { continue };
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches('\0');
        if let Some((key, rest)) = text.split_once(':') {
            out.push((key.to_string(), rest.to_string()));
        }
    }
    out
}
