//! Matroska / WebM (SaveWEBM, VideoHelperSuite's webm and mkv formats): FFmpeg writes container
//! metadata as `Tags` → `Tag` → `SimpleTag` (`TagName` upper-cased, `TagString`). The top-level
//! elements of the `Segment` are walked with [`super::ebml`] and all but `Tags` skipped with
//! seeks.

use super::ebml::{self, Id};
use super::read::{read_value, skip, Entry, ExtractError};
use std::io::{self, Read, Seek, SeekFrom};

/// The next element's header; a header that cannot be read is damage, said why.
fn next<R: Read>(r: &mut R) -> Result<Option<ebml::Header>, ExtractError> {
    ebml::read_header(r).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => ExtractError::Damaged(e.to_string()),
        _ => e.into(),
    })
}

/// The `SimpleTag` name/string pairs of a Matroska file.
pub(crate) fn entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let mut out = Vec::new();
    // The EBML header, then the Segment.
    while let Some(h) = next(r)? {
        if h.id != Id::SEGMENT {
            match h.size {
                Some(size) => skip(r, size)?,
                // To the end of the file: nothing after it.
                None => break,
            }
            continue;
        }
        let end = match h.size {
            Some(size) => r.stream_position()?.saturating_add(size).min(len),
            None => len,
        };
        while r.stream_position()? < end {
            let Some(h) = next(r)? else {
                break;
            };
            let Some(size) = h.size else {
                // An unknown-size Cluster (a live stream) cannot be skipped; tags before it
                // were read.
                if h.id == Id::CLUSTER {
                    break;
                }
                return Err(ExtractError::Damaged(
                    "an element of unknown size in the Segment".into(),
                ));
            };
            if h.id == Id::TAGS {
                let data = read_value(r, size)?;
                tags(&data, &mut out);
            } else {
                skip(r, size)?;
            }
        }
        break;
    }
    Ok(out)
}

/// The SimpleTags of a Tags element (nested SimpleTags included).
fn tags(data: &[u8], out: &mut Vec<Entry>) {
    fn simple(data: &[u8], out: &mut Vec<Entry>, depth: u8) {
        let text = |want: Id| {
            ebml::children(data)
                .find(|(id, _)| *id == want)
                .map(|(_, v)| ebml::text(v))
        };
        if let (Some(name), Some(value)) = (text(Id::TAG_NAME), text(Id::TAG_STRING)) {
            out.push((name, value));
        }
        if depth < 8 {
            for (id, child) in ebml::children(data) {
                if id == Id::SIMPLE_TAG {
                    simple(child, out, depth + 1);
                }
            }
        }
    }
    for (id, tag) in ebml::children(data) {
        if id != Id::TAG {
            continue;
        }
        for (id, child) in ebml::children(tag) {
            if id == Id::SIMPLE_TAG {
                simple(child, out, 0);
            }
        }
    }
}
