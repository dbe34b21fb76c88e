//! EBML, the binary format of Matroska and WebM: the one reader of its elements, for the
//! workflow in a saved file's tags (`matroska`) and for core's container probe (a video's
//! size and frames). An element is a header — its ID, then its body's size, both variable-length
//! integers (RFC 8794) — and the body; a master element's body is more elements. Read from a
//! byte slice ([`header`], [`children`]) or a reader ([`read_header`]), and the IDs of the
//! Matroska elements comfy-bisect looks at ([`Id`]).

use std::io::{self, Read};

/// An element ID as the specification writes it: its bytes with the length marker kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Id(pub u32);

impl std::fmt::Debug for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Id({:#X})", self.0)
    }
}

impl Id {
    /// The EBML header (its DocType says `webm` or `matroska`).
    pub const EBML: Id = Id(0x1A45_DFA3);
    /// The EBML header's DocType.
    pub const DOC_TYPE: Id = Id(0x4282);
    /// The Segment: every other top-level element.
    pub const SEGMENT: Id = Id(0x1853_8067);
    /// The Segment's Tracks.
    pub const TRACKS: Id = Id(0x1654_AE6B);
    /// One track of Tracks.
    pub const TRACK_ENTRY: Id = Id(0xAE);
    /// A TrackEntry's number, as its blocks name it.
    pub const TRACK_NUMBER: Id = Id(0xD7);
    /// A TrackEntry's type (1: video).
    pub const TRACK_TYPE: Id = Id(0x83);
    /// A TrackEntry's video settings.
    pub const VIDEO: Id = Id(0xE0);
    /// Video's width in pixels.
    pub const PIXEL_WIDTH: Id = Id(0xB0);
    /// Video's height in pixels.
    pub const PIXEL_HEIGHT: Id = Id(0xBA);
    /// A Cluster of blocks.
    pub const CLUSTER: Id = Id(0x1F43_B675);
    /// A Cluster's BlockGroup (one Block and what goes with it).
    pub const BLOCK_GROUP: Id = Id(0xA0);
    /// A Cluster's SimpleBlock.
    pub const SIMPLE_BLOCK: Id = Id(0xA3);
    /// A BlockGroup's Block.
    pub const BLOCK: Id = Id(0xA1);
    /// The Segment's Tags (where FFmpeg writes container metadata).
    pub const TAGS: Id = Id(0x1254_C367);
    /// One Tag of Tags.
    pub const TAG: Id = Id(0x7373);
    /// A Tag's (or a SimpleTag's) SimpleTag: a name and its value.
    pub const SIMPLE_TAG: Id = Id(0x67C8);
    /// A SimpleTag's name.
    pub const TAG_NAME: Id = Id(0x45A3);
    /// A SimpleTag's value as text.
    pub const TAG_STRING: Id = Id(0x4487);
}

/// The longest element ID, in bytes (Matroska's EBMLMaxIDLength).
const MAX_ID_LEN: usize = 4;

/// The longest size, in bytes (EBMLMaxSizeLength).
const MAX_SIZE_LEN: usize = 8;

/// An element's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The element.
    pub id: Id,
    /// Its body's size in bytes; None when unknown (all value bits set: the element goes on to
    /// the end of its parent, as a live stream's Segment and Clusters do).
    pub size: Option<u64>,
    /// How many bytes the header takes (its body starts there).
    pub len: usize,
}

/// How many bytes a variable-length integer takes, from its first byte (the position of its
/// first set bit); None for a zero byte, which would begin one longer than 8 bytes.
fn vint_len(first: u8) -> Option<usize> {
    (first != 0).then(|| first.leading_zeros() as usize + 1)
}

/// The variable-length integer at the start of `b`: its value (the length marker removed) and
/// its length; None when `b` ends inside it or it starts with a zero byte.
pub fn vint(b: &[u8]) -> Option<(u64, usize)> {
    let len = vint_len(*b.first()?)?;
    let bytes = b.get(..len)?;
    let marker_free = u64::from(bytes[0]) & ((1u64 << (8 - len)) - 1);
    let value = bytes[1..]
        .iter()
        .fold(marker_free, |v, &x| (v << 8) | u64::from(x));
    Some((value, len))
}

/// The header of the element at the start of `b`; None when `b` ends inside it, its ID is
/// longer than four bytes, or a number in it starts with a zero byte.
pub fn header(b: &[u8]) -> Option<Header> {
    let id_len = vint_len(*b.first()?).filter(|&l| l <= MAX_ID_LEN)?;
    let id = b
        .get(..id_len)?
        .iter()
        .fold(0u32, |v, &x| (v << 8) | u32::from(x));
    let (size, size_len) = vint(&b[id_len..])?;
    let unknown = size == (1u64 << (7 * size_len)) - 1;
    Some(Header {
        id: Id(id),
        size: (!unknown).then_some(size),
        len: id_len + size_len,
    })
}

/// The children of an element's body, in order, as (ID, body); the walk ends at the first that
/// does not fit in `body`, or that claims an unknown size (only a top-level master may).
pub fn children(body: &[u8]) -> impl Iterator<Item = (Id, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let rest = body.get(at..)?;
        let h = header(rest)?;
        let end = h.len.checked_add(usize::try_from(h.size?).ok()?)?;
        let child = rest.get(h.len..end)?;
        at += end;
        Some((h.id, child))
    })
}

/// An unsigned integer element's value (big-endian; at most its first 8 bytes).
pub fn uint(body: &[u8]) -> u64 {
    body.iter()
        .take(8)
        .fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

/// A string element's value (UTF-8, invalid bytes replaced; the NUL padding dropped).
pub fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .trim_end_matches('\0')
        .to_string()
}

/// Reads the header of the next element from `r`, leaving `r` at its body; None when `r` ends
/// before it, or right after its ID. A header that cannot be read is an `InvalidData` error
/// saying why; one cut short, `UnexpectedEof`.
pub fn read_header<R: Read>(r: &mut R) -> io::Result<Option<Header>> {
    let mut buf = [0u8; MAX_ID_LEN + MAX_SIZE_LEN];
    let mut n = 0;
    for max in [MAX_ID_LEN, MAX_SIZE_LEN] {
        let mut first = [0u8];
        match r.read_exact(&mut first) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = match vint_len(first[0]) {
            Some(len) if len <= max => len,
            Some(_) => return Err(invalid("an EBML ID longer than 4 bytes")),
            None => return Err(invalid("an EBML number longer than 8 bytes")),
        };
        buf[n] = first[0];
        r.read_exact(&mut buf[n + 1..n + len])?;
        n += len;
    }
    Ok(header(&buf[..n]))
}

/// A header that cannot be read, and why.
fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_alike_from_bytes_and_from_a_reader() {
        // The EBML header with a 1-byte size; a Segment of unknown size (8-byte form); a
        // Cluster with an 8-byte size of 5.
        let cases: [(&[u8], Header); 3] = [
            (
                &[0x1A, 0x45, 0xDF, 0xA3, 0x84],
                Header {
                    id: Id::EBML,
                    size: Some(4),
                    len: 5,
                },
            ),
            (
                &[
                    0x18, 0x53, 0x80, 0x67, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                ],
                Header {
                    id: Id::SEGMENT,
                    size: None,
                    len: 12,
                },
            ),
            (
                &[0x1F, 0x43, 0xB6, 0x75, 0x01, 0, 0, 0, 0, 0, 0, 5],
                Header {
                    id: Id::CLUSTER,
                    size: Some(5),
                    len: 12,
                },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(header(bytes), Some(want), "{bytes:02X?}");
            let mut r = bytes;
            assert_eq!(read_header(&mut r).unwrap(), Some(want), "{bytes:02X?}");
            assert!(r.is_empty(), "the reader is left at the body");
            // Cut short: no header from the bytes; from a reader, the end or a cut.
            for n in 0..bytes.len() {
                assert_eq!(header(&bytes[..n]), None, "{n}");
                let mut r = &bytes[..n];
                match read_header(&mut r) {
                    Ok(None) => assert!(n == 0 || n == 4, "{n}"),
                    Err(e) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{n}"),
                    Ok(Some(h)) => panic!("{n}: {h:?}"),
                }
            }
        }
    }

    #[test]
    fn an_id_over_4_bytes_or_a_zero_byte_is_no_header() {
        for bytes in [
            &[0x08, 1, 2, 3, 4, 0x81][..],
            &[0x00, 0x81],
            &[0x81, 0x00, 1],
        ] {
            assert_eq!(header(bytes), None, "{bytes:02X?}");
            let e = read_header(&mut &bytes[..]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bytes:02X?}");
        }
        assert_eq!(vint(&[0x00, 1, 2, 3, 4, 5, 6, 7, 8]), None);
        assert_eq!(vint(&[0x40, 0x02]), Some((2, 2)));
        assert_eq!(vint(&[0x01, 0, 0, 0, 0, 0, 0x01, 0x00]), Some((256, 8)));
    }

    #[test]
    fn children_stop_at_the_first_that_does_not_fit() {
        let body = [
            0x42, 0x82, 0x84, b'w', b'e', b'b', b'm', // DocType "webm"
            0xD7, 0x81, 0x01, // TrackNumber 1
            0xB0, 0x85, 0x01, // PixelWidth, cut short
        ];
        let got: Vec<(Id, &[u8])> = children(&body).collect();
        assert_eq!(
            got,
            [(Id::DOC_TYPE, &b"webm"[..]), (Id::TRACK_NUMBER, &[1][..])]
        );
        assert_eq!(text(b"webm\0\0"), "webm");
        assert_eq!(uint(&[0x01, 0x00]), 256);
        // An unknown size inside a body, or a zero byte where a header starts, ends the walk.
        assert_eq!(children(&[0xD7, 0xFF, 1]).count(), 0);
        assert_eq!(children(&[0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9]).count(), 0);
    }
}
