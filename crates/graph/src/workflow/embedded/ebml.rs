//! Matroska / WebM (SaveWEBM, VideoHelperSuite's webm and mkv formats): FFmpeg writes container
//! metadata as `Tags` → `Tag` → `SimpleTag` (`TagName` upper-cased, `TagString`). The top-level
//! elements of the `Segment` are walked and all but `Tags` skipped with seeks.

use super::read::{read_value, Entry, ExtractError};
use std::io::{Read, Seek, SeekFrom};

const SEGMENT: u64 = 0x1853_8067;
const CLUSTER: u64 = 0x1F43_B675;
const TAGS: u64 = 0x1254_C367;
const TAG: u64 = 0x7373;
const SIMPLE_TAG: u64 = 0x67C8;
const TAG_NAME: u64 = 0x45A3;
const TAG_STRING: u64 = 0x4487;

/// A variable-length integer from a reader: the value (marker kept for ids, dropped for sizes)
/// and whether all its value bits are set (an unknown size).
fn read_vint<R: Read>(r: &mut R, keep_marker: bool) -> Result<Option<(u64, bool)>, ExtractError> {
    let mut first = [0; 1];
    if super::read::read_up_to(r, &mut first)? == 0 {
        return Ok(None);
    }
    let len = first[0].leading_zeros() as usize + 1;
    if len > 8 {
        return Err(ExtractError::Damaged(
            "an EBML number longer than 8 bytes".into(),
        ));
    }
    let mut rest = [0; 7];
    r.read_exact(&mut rest[..len - 1])?;
    Ok(Some(vint_value(first[0], &rest[..len - 1], keep_marker)))
}

fn vint_value(first: u8, rest: &[u8], keep_marker: bool) -> (u64, bool) {
    let len = rest.len() + 1;
    let marker_mask = if len == 8 { 0 } else { 0xffu8 >> len };
    let head = if keep_marker {
        first
    } else {
        first & marker_mask
    };
    let value = rest
        .iter()
        .fold(u64::from(head), |v, &b| (v << 8) | u64::from(b));
    let all_ones = (len * 7) < 64 && (value & ((1u64 << (len * 7)) - 1)) == (1u64 << (len * 7)) - 1;
    (value, !keep_marker && all_ones)
}

/// The `SimpleTag` name/string pairs of a Matroska file.
pub(crate) fn entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let mut out = Vec::new();
    // The EBML header, then the Segment.
    while let Some((id, _)) = read_vint(r, true)? {
        let Some((size, unknown)) = read_vint(r, false)? else {
            break;
        };
        if id != SEGMENT {
            r.seek(SeekFrom::Current(i64::try_from(size).unwrap_or(i64::MAX)))?;
            continue;
        }
        let end = if unknown {
            len
        } else {
            r.stream_position()?.saturating_add(size).min(len)
        };
        while r.stream_position()? < end {
            let Some((id, _)) = read_vint(r, true)? else {
                break;
            };
            let Some((size, unknown)) = read_vint(r, false)? else {
                break;
            };
            if unknown {
                // An unknown-size Cluster (a live stream) cannot be skipped; tags before it
                // were read.
                if id == CLUSTER {
                    break;
                }
                return Err(ExtractError::Damaged(
                    "an element of unknown size in the Segment".into(),
                ));
            }
            if id == TAGS {
                let data = read_value(r, size)?;
                tags(&data, &mut out);
            } else {
                r.seek(SeekFrom::Current(i64::try_from(size).unwrap_or(i64::MAX)))?;
            }
        }
        break;
    }
    Ok(out)
}

/// The children of an in-memory element as (id, payload).
fn elements(data: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let vint = |at: &mut usize, keep: bool| -> Option<u64> {
        let first = *data.get(*at)?;
        let len = first.leading_zeros() as usize + 1;
        let rest = data.get(*at + 1..*at + len)?;
        *at += len;
        Some(vint_value(first, rest, keep).0)
    };
    while let Some(id) = vint(&mut at, true) {
        let Some(size) = vint(&mut at, false) else {
            break;
        };
        let Some(payload) = data.get(at..at.saturating_add(size as usize)) else {
            break;
        };
        at += payload.len();
        out.push((id, payload));
    }
    out
}

/// The SimpleTags of a Tags element (nested SimpleTags included).
fn tags(data: &[u8], out: &mut Vec<Entry>) {
    fn simple(data: &[u8], out: &mut Vec<Entry>, depth: u8) {
        let children = elements(data);
        let text = |want: u64| {
            children.iter().find(|(id, _)| *id == want).map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .trim_end_matches('\0')
                    .to_string()
            })
        };
        if let (Some(name), Some(value)) = (text(TAG_NAME), text(TAG_STRING)) {
            out.push((name, value));
        }
        if depth < 8 {
            for (id, child) in &children {
                if *id == SIMPLE_TAG {
                    simple(child, out, depth + 1);
                }
            }
        }
    }
    for (id, tag) in elements(data) {
        if id != TAG {
            continue;
        }
        for (id, child) in elements(tag) {
            if id == SIMPLE_TAG {
                simple(child, out, 0);
            }
        }
    }
}
