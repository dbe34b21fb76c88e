//! Image sizes from the first bytes of a file (PNG, WebP — VP8, VP8L, VP8X —, JPEG, GIF), so a
//! run can say what its output nodes wrote while reading only the header through `/view`. Pure:
//! the caller feeds the bytes it has and learns whether it needs more.

use serde::{Deserialize, Serialize};

/// The most bytes worth reading for a header: a JPEG's frame header can follow large EXIF or ICC
/// segments; past this the size is given up on (the rest of the body is never read).
pub(crate) const MAX_HEADER_BYTES: usize = 256 * 1024;

/// What a header says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// `png`, `webp`, `jpeg` or `gif`.
    pub format: String,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// True for an animated WebP (VP8X animation flag); its frame count is not in the header.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub animated: bool,
}

/// The answer for the bytes read so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// The size is known; stop reading.
    Done(ImageInfo),
    /// A known format whose size comes later: read more.
    NeedMore,
    /// Not an image this parser knows (or a broken header): stop reading.
    Unknown,
}

/// Parses the start of a file.
pub fn parse(bytes: &[u8]) -> Header {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 12 {
        // Too short for any signature check but PNG/JPEG/GIF prefixes.
        let known = [PNG, b"\xff\xd8", b"GIF8", b"RIFF"]
            .iter()
            .any(|sig| sig.starts_with(bytes) || bytes.starts_with(sig));
        return if known {
            Header::NeedMore
        } else {
            Header::Unknown
        };
    }
    if bytes.starts_with(PNG) {
        return png(bytes);
    }
    if bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        return webp(bytes);
    }
    if bytes.starts_with(b"\xff\xd8") {
        return jpeg(bytes);
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return gif(bytes);
    }
    Header::Unknown
}

fn info(format: &str, width: u32, height: u32, animated: bool) -> Header {
    if width == 0 || height == 0 {
        return Header::Unknown;
    }
    Header::Done(ImageInfo {
        format: format.into(),
        width,
        height,
        animated,
    })
}

// Byte readers for the header and container parsers (`container.rs` too); the caller has
// checked the length.

pub(super) fn be16(b: &[u8]) -> u32 {
    u16::from_be_bytes([b[0], b[1]]) as u32
}

pub(super) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(super) fn le16(b: &[u8]) -> u32 {
    u16::from_le_bytes([b[0], b[1]]) as u32
}

pub(super) fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le24(b: &[u8]) -> u32 {
    b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16
}

/// Signature, then the IHDR chunk first: length 13, `IHDR`, width and height big-endian.
fn png(b: &[u8]) -> Header {
    if b.len() < 24 {
        return Header::NeedMore;
    }
    if &b[12..16] != b"IHDR" {
        return Header::Unknown;
    }
    info("png", be32(&b[16..20]), be32(&b[20..24]), false)
}

/// `RIFF <size> WEBP` and the first chunk: `VP8 ` (lossy key frame: start code, 14-bit sizes),
/// `VP8L` (signature 0x2f, 14-bit sizes − 1) or `VP8X` (24-bit canvas sizes − 1, flags).
fn webp(b: &[u8]) -> Header {
    if b.len() < 30 {
        return Header::NeedMore;
    }
    let data = &b[20..];
    match &b[12..16] {
        b"VP8 " => {
            if data[3..6] != [0x9d, 0x01, 0x2a] {
                return Header::Unknown;
            }
            info(
                "webp",
                le16(&data[6..8]) & 0x3fff,
                le16(&data[8..10]) & 0x3fff,
                false,
            )
        }
        b"VP8L" => {
            if data[0] != 0x2f {
                return Header::Unknown;
            }
            let bits = u32::from_le_bytes([data[1], data[2], data[3], data[4]]);
            info(
                "webp",
                (bits & 0x3fff) + 1,
                ((bits >> 14) & 0x3fff) + 1,
                false,
            )
        }
        b"VP8X" => {
            let animated = data[0] & 0x02 != 0;
            info(
                "webp",
                le24(&data[4..7]) + 1,
                le24(&data[7..10]) + 1,
                animated,
            )
        }
        _ => Header::Unknown,
    }
}

/// Segments after SOI until a start-of-frame marker (SOF0–SOF15 but DHT, JPG and DAC):
/// `FF Cn len P Y X`, height then width big-endian.
fn jpeg(b: &[u8]) -> Header {
    let mut i = 2;
    loop {
        // Fill bytes (FF FF …) may precede a marker.
        while i < b.len() && b[i] == 0xff && b.get(i + 1) == Some(&0xff) {
            i += 1;
        }
        if i + 4 > b.len() {
            return Header::NeedMore;
        }
        if b[i] != 0xff {
            return Header::Unknown;
        }
        let marker = b[i + 1];
        let len = u16::from_be_bytes([b[i + 2], b[i + 3]]) as usize;
        let sof = (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if sof {
            if i + 9 > b.len() {
                return Header::NeedMore;
            }
            let height = u16::from_be_bytes([b[i + 5], b[i + 6]]) as u32;
            let width = u16::from_be_bytes([b[i + 7], b[i + 8]]) as u32;
            return info("jpeg", width, height, false);
        }
        if marker == 0xda || marker == 0xd9 || len < 2 {
            // Scan data or the end before any frame header.
            return Header::Unknown;
        }
        i += 2 + len;
    }
}

/// `GIF8?a`, then the logical screen width and height, little-endian.
fn gif(b: &[u8]) -> Header {
    info("gif", le16(&b[6..8]), le16(&b[8..10]), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/media/{name}", crate::FIXTURES)).unwrap()
    }

    fn size(h: Header) -> (String, u32, u32, bool) {
        match h {
            Header::Done(i) => (i.format, i.width, i.height, i.animated),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn png_headers_of_the_captured_view_answers() {
        // body_head_hex of the two GET /view answers in ws_core_success.ndjson (the ImageScale
        // output of 128×96 and the PreviewImage of the 64×64 EmptyImage).
        let saved = hex("89504e470d0a1a0a0000000d49484452000000800000006008020000005a18ed");
        assert_eq!(size(parse(&saved)), ("png".into(), 128, 96, false));
        let preview = hex("89504e470d0a1a0a0000000d4948445200000040000000400802000000250be6");
        assert_eq!(size(parse(&preview)), ("png".into(), 64, 64, false));
        // Every prefix shorter than the IHDR sizes asks for more, never guesses.
        for n in 0..24 {
            assert_eq!(parse(&saved[..n]), Header::NeedMore, "{n} bytes");
        }
    }

    #[test]
    fn webp_lossy_lossless_and_animated() {
        for (name, animated) in [
            ("lossy_37x21.webp", false),
            ("lossless_37x21.webp", false),
            ("animated_37x21.webp", true),
        ] {
            let bytes = fixture(name);
            assert_eq!(
                size(parse(&bytes)),
                ("webp".into(), 37, 21, animated),
                "{name}"
            );
            assert_eq!(parse(&bytes[..29]), Header::NeedMore, "{name}");
        }
    }

    #[test]
    fn jpeg_baseline_and_progressive_frame_headers() {
        for name in ["baseline_37x21.jpg", "progressive_37x21.jpg"] {
            let bytes = fixture(name);
            assert_eq!(
                size(parse(&bytes)),
                ("jpeg".into(), 37, 21, false),
                "{name}"
            );
            // The frame header comes after the quantisation tables: a short read asks for more.
            assert_eq!(parse(&bytes[..40]), Header::NeedMore, "{name}");
        }
    }

    #[test]
    fn gif_screen_size() {
        let mut b = b"GIF89a".to_vec();
        b.extend([0x25, 0x00, 0x15, 0x00, 0xf0, 0, 0]);
        assert_eq!(size(parse(&b)), ("gif".into(), 37, 21, false));
    }

    #[test]
    fn other_files_are_unknown_at_once() {
        assert_eq!(
            parse(b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00"),
            Header::Unknown
        );
        assert_eq!(parse(b"\x1aE\xdf\xa3 webm ebml header"), Header::Unknown);
        assert_eq!(parse(b"{\"json\": true}"), Header::Unknown);
        assert_eq!(parse(b"RIFF\x10\0\0\0WAVEfmt "), Header::Unknown);
        // A JPEG whose scan starts before any frame header is broken, not "need more".
        assert_eq!(parse(b"\xff\xd8\xff\xda\x00\x08abcdefgh"), Header::Unknown);
    }
}
