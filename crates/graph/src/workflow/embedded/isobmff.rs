//! MP4 / QuickTime (ISO BMFF). Container metadata is found in `moov`: FFmpeg with
//! `movflags=use_metadata_tags` (SaveVideo, VideoHelperSuite since 2026) writes a `meta` box
//! with `keys` (`mdta` names such as `prompt`) and an `ilst` whose items are indexed into them;
//! without it, iTunes-style `ilst` items (`©cmt` = `comment`, VideoHelperSuite before 2026) or
//! QuickTime `udta` text atoms. `mdat` and the tracks are skipped with seeks.

use super::read::{latin1, read_value, Entry, ExtractError};
use std::io::{Read, Seek, SeekFrom};

/// A box: its type and where its payload starts and ends.
struct BoxAt {
    kind: [u8; 4],
    start: u64,
    end: u64,
}

/// The next box before `limit`, the reader left at its payload.
fn next_box<R: Read + Seek>(r: &mut R, limit: u64) -> Result<Option<BoxAt>, ExtractError> {
    let pos = r.stream_position()?;
    if pos + 8 > limit {
        return Ok(None);
    }
    let mut head = [0; 8];
    r.read_exact(&mut head)?;
    let kind = [head[4], head[5], head[6], head[7]];
    let (start, end) = match u32::from_be_bytes([head[0], head[1], head[2], head[3]]) {
        0 => (pos + 8, limit),
        1 => {
            let mut large = [0; 8];
            r.read_exact(&mut large)?;
            (pos + 16, pos.saturating_add(u64::from_be_bytes(large)))
        }
        n => (pos + 8, pos + u64::from(n)),
    };
    if end < start || end > limit {
        return Err(ExtractError::Damaged(format!(
            "the `{}` box runs past its parent",
            latin1(&kind)
        )));
    }
    Ok(Some(BoxAt { kind, start, end }))
}

/// The metadata entries of an MP4/MOV file.
pub(crate) fn entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let mut out = Vec::new();
    while let Some(b) = next_box(r, len)? {
        if &b.kind == b"moov" {
            walk(r, b.end, &mut out, 0)?;
        }
        r.seek(SeekFrom::Start(b.end))?;
    }
    Ok(out)
}

/// Walks the children of `moov` or `udta` up to `end`.
fn walk<R: Read + Seek>(
    r: &mut R,
    end: u64,
    out: &mut Vec<Entry>,
    depth: u8,
) -> Result<(), ExtractError> {
    while let Some(b) = next_box(r, end)? {
        match &b.kind {
            b"udta" if depth == 0 => walk(r, b.end, out, 1)?,
            b"meta" => {
                let data = read_value(r, b.end - b.start)?;
                meta(&data, out);
            }
            [0xa9, ..] if depth == 1 => {
                // A QuickTime text atom: (u16 size, u16 language, text)…; the first is read.
                let data = read_value(r, b.end - b.start)?;
                if let Some(n) = data
                    .get(..2)
                    .map(|s| usize::from(u16::from_be_bytes([s[0], s[1]])))
                {
                    if let Some(text) = data.get(4..4 + n) {
                        out.push((
                            item_name(&b.kind),
                            String::from_utf8_lossy(text).into_owned(),
                        ));
                    }
                }
            }
            _ => {}
        }
        r.seek(SeekFrom::Start(b.end))?;
    }
    Ok(())
}

/// The boxes of an in-memory payload as (type, payload).
fn boxes(data: &[u8]) -> Vec<([u8; 4], &[u8])> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(head) = data.get(at..at + 8) {
        let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = [head[4], head[5], head[6], head[7]];
        let (start, end) =
            match size {
                0 => (at + 8, data.len()),
                1 => match data.get(at + 8..at + 16) {
                    Some(l) => (
                        at + 16,
                        at.saturating_add(
                            u64::from_be_bytes(l.try_into().unwrap_or_default()) as usize
                        ),
                    ),
                    None => break,
                },
                n => (at + 8, at.saturating_add(n)),
            };
        let Some(payload) = data.get(start..end) else {
            break;
        };
        out.push((kind, payload));
        at = end;
    }
    out
}

/// A `meta` box's `keys` and `ilst` as entries.
fn meta(data: &[u8], out: &mut Vec<Entry>) {
    // MP4's `meta` is a full box (version and flags first); QuickTime's is not.
    let data = match data.get(..4) {
        Some([0, 0, 0, 0]) => &data[4..],
        _ => data,
    };
    let children = boxes(data);
    let mut keys: Vec<String> = Vec::new();
    if let Some((_, k)) = children.iter().find(|(kind, _)| kind == b"keys") {
        // Version and flags, a count, then (u32 size, namespace, name) entries.
        let mut at = 8usize;
        while let Some(head) = k.get(at..at + 8) {
            let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let Some(name) = k.get(at + 8..at.saturating_add(size)) else {
                break;
            };
            keys.push(String::from_utf8_lossy(name).into_owned());
            at += size.max(8);
        }
    }
    let Some((_, ilst)) = children.iter().find(|(kind, _)| kind == b"ilst") else {
        return;
    };
    for (kind, item) in boxes(ilst) {
        let inner = boxes(item);
        let index = u32::from_be_bytes(kind) as usize;
        let name = if index >= 1 && index <= keys.len() && kind[0] != 0xa9 {
            keys[index - 1].clone()
        } else if &kind == b"----" {
            match inner.iter().find(|(k, _)| k == b"name") {
                Some((_, n)) => {
                    String::from_utf8_lossy(n.get(4..).unwrap_or_default()).into_owned()
                }
                None => continue,
            }
        } else {
            item_name(&kind)
        };
        // `data`: type indicator (1 = UTF-8), locale, value.
        if let Some((_, value)) = inner.iter().find(|(k, _)| k == b"data") {
            if let Some(text) = value.get(8..) {
                out.push((name, String::from_utf8_lossy(text).into_owned()));
            }
        }
    }
}

/// The key of an item or atom type: `©cmt` is `comment`, others their type.
fn item_name(kind: &[u8; 4]) -> String {
    match kind {
        [0xa9, b'c', b'm', b't'] => "comment".into(),
        _ => latin1(kind),
    }
}
