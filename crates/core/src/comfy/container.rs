//! What an output file's container says about its size and frames: animated WebP (VP8X canvas,
//! ANMF chunks), APNG (`acTL` before the first `IDAT`), GIF (image descriptors), MP4/MOV (ISO
//! BMFF: the video track's `tkhd` size and `stsz` sample count, from a `moov` at the head or
//! after the `mdat`) and WebM/Matroska (the video track's PixelWidth/PixelHeight; blocks counted
//! only when the whole file is small). Stills go through [`super::media`]. Pure: the caller
//! feeds the bytes it has read and learns whether more (or bytes from a given offset) would
//! tell more; what it cannot read stays unknown, with a note saying why.
//!
//! "Cheap" is bounded: a caller reads at most `MAX_SCAN_BYTES` from the start of a file and,
//! for an MP4 whose `moov` follows its `mdat`, at most `MAX_SCAN_BYTES` more from that offset.
//! Formats whose frame count needs the whole file (GIF, animated WebP, WebM) are counted only
//! when the file is no larger than that.

use super::media::{self, be16, be32, le32, Header};
use comfy_bisect_graph::workflow::embedded::ebml::{self, Id};
use serde::{Deserialize, Serialize};

/// Most bytes read from one place of a file: the head (or the whole file for the formats that
/// need it), and again for an MP4's `moov` after its `mdat`.
pub(crate) const MAX_SCAN_BYTES: u64 = 4 * 1024 * 1024;

/// What kind of media a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    /// One picture.
    Image,
    /// An image format with several frames (animated WebP, APNG, GIF).
    Animated,
    /// A video container (MP4, MOV, WebM, Matroska).
    Video,
}

/// What the container says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// `png`, `webp`, `jpeg`, `gif`, `mp4`, `mov`, `webm` or `mkv`.
    pub format: String,
    /// Image, animated image or video.
    pub kind: MediaKind,
    /// Pixels, when read.
    pub width: Option<u32>,
    /// Pixels, when read.
    pub height: Option<u32>,
    /// Frames, when read.
    pub frames: Option<u64>,
    /// Why something is unknown.
    pub note: Option<String>,
}

impl Facts {
    fn new(format: &str, kind: MediaKind) -> Facts {
        Facts {
            format: format.into(),
            kind,
            width: None,
            height: None,
            frames: None,
            note: None,
        }
    }

    fn sized(mut self, width: u32, height: u32) -> Facts {
        if width > 0 && height > 0 {
            self.width = Some(width);
            self.height = Some(height);
        }
        self
    }

    fn noted(mut self, note: impl Into<String>) -> Facts {
        self.note = Some(note.into());
        self
    }
}

/// The answer for the bytes read so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Everything that can be known is known: stop reading.
    Done(Facts),
    /// More bytes from where the buffer ends would tell more; what is known so far.
    More(Option<Facts>),
    /// The rest is at this file offset (an MP4's `moov` after its `mdat`); what is known so far.
    At(u64, Facts),
    /// Not a format this module knows, or broken: stop reading.
    Unknown,
}

impl Probe {
    /// What is known now (for a caller that stops reading here); `capped` says why it stopped
    /// with frames unread.
    pub(crate) fn facts(self, capped: &str) -> Option<Facts> {
        match self {
            Probe::Done(f) => Some(f),
            Probe::More(f) => f.map(|mut f| {
                if f.frames.is_none() && f.note.is_none() {
                    f.note = Some(format!("frames unknown: {capped}"));
                }
                f
            }),
            Probe::At(_, mut f) => {
                if f.note.is_none() {
                    f.note = Some(format!("frames and size unknown: {capped}"));
                }
                Some(f)
            }
            Probe::Unknown => None,
        }
    }
}

/// Probes the first bytes of a file; `total` is its size when known (`Content-Length`),
/// `animated` whether ComfyUI's history flagged the output as animated (a PNG is then searched
/// for its `acTL`; otherwise its `IHDR` suffices).
pub fn probe(head: &[u8], total: Option<u64>, animated: bool) -> Probe {
    if head.len() >= 8 && &head[4..8] == b"ftyp" {
        return mp4(head, 0, total);
    }
    if head.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        return matroska(head, total);
    }
    if head.len() < 12 {
        let known = [
            b"\x89PNG\r\n\x1a\n".as_slice(),
            b"\xff\xd8",
            b"GIF8",
            b"RIFF",
            &[0x1a, 0x45, 0xdf, 0xa3],
        ]
        .iter()
        .any(|sig| sig.starts_with(head) || head.starts_with(sig));
        return if known || head.len() < 8 {
            Probe::More(None)
        } else {
            Probe::Unknown
        };
    }
    let info = match media::parse(head) {
        Header::Done(info) => info,
        Header::NeedMore => return Probe::More(None),
        Header::Unknown => return Probe::Unknown,
    };
    let still = Facts::new(&info.format, MediaKind::Image).sized(info.width, info.height);
    match info.format.as_str() {
        "png" if animated => apng(head, still),
        "webp" if info.animated => animated_webp(head, total, still),
        "webp" => Probe::Done(Facts {
            frames: Some(1),
            ..still
        }),
        "gif" => gif(head, total, still),
        _ => Probe::Done(still),
    }
}

/// Probes bytes read from file offset `at` (where [`Probe::At`] pointed): an MP4's boxes
/// from there on.
pub fn probe_at(buf: &[u8], at: u64, total: Option<u64>) -> Probe {
    mp4(buf, at, total)
}

/// Whether the whole file is in `buf` (its declared size, else `total`).
fn whole(buf: &[u8], total: Option<u64>) -> bool {
    total.is_some_and(|t| buf.len() as u64 >= t)
}

fn too_big(total: Option<u64>) -> bool {
    total.is_some_and(|t| t > MAX_SCAN_BYTES)
}

fn cap_text() -> String {
    format!("{} MiB", MAX_SCAN_BYTES / (1024 * 1024))
}

/// PNG chunks after the signature until `acTL` (APNG: frames = its `num_frames`) or the first
/// `IDAT` (no `acTL` before it: one frame, by the APNG specification).
fn apng(b: &[u8], still: Facts) -> Probe {
    let mut i = 8usize;
    loop {
        if i + 12 > b.len() {
            return Probe::More(Some(still));
        }
        let len = be32(&b[i..i + 4]) as usize;
        match &b[i + 4..i + 8] {
            b"acTL" => {
                if i + 12 > b.len() || len < 8 {
                    return Probe::More(Some(still));
                }
                return Probe::Done(Facts {
                    kind: MediaKind::Animated,
                    frames: Some(be32(&b[i + 8..i + 12]) as u64),
                    ..still
                });
            }
            b"IDAT" | b"IEND" => {
                return Probe::Done(Facts {
                    frames: Some(1),
                    ..still
                })
            }
            _ => {}
        }
        i = match i.checked_add(12 + len) {
            Some(n) => n,
            None => return Probe::Done(still),
        };
    }
}

/// An animated WebP's frames: the `ANMF` chunks after `VP8X`, which needs the whole file.
fn animated_webp(b: &[u8], total: Option<u64>, still: Facts) -> Probe {
    let facts = Facts {
        kind: MediaKind::Animated,
        ..still
    };
    let declared = le32(&b[4..8]) as u64 + 8;
    let end = total.map_or(declared, |t| t.min(declared));
    if end > MAX_SCAN_BYTES || too_big(total) {
        return Probe::Done(facts.noted(format!(
            "frames unknown: an animated WebP's frames are counted over the whole file, which \
             is larger than the {} read cap",
            cap_text()
        )));
    }
    let mut i = 12usize;
    let mut frames = 0u64;
    while (i as u64) < end {
        if i + 8 > b.len() {
            return Probe::More(Some(facts));
        }
        if &b[i..i + 4] == b"ANMF" {
            frames += 1;
        }
        let size = le32(&b[i + 4..i + 8]) as usize;
        i = match i.checked_add(8 + size + (size & 1)) {
            Some(n) => n,
            None => break,
        };
    }
    Probe::Done(Facts {
        frames: Some(frames),
        ..facts
    })
}

/// A GIF's frames: its image descriptors, counted to the trailer (the whole file).
fn gif(b: &[u8], total: Option<u64>, still: Facts) -> Probe {
    if too_big(total) {
        return Probe::Done(still.noted(format!(
            "frames unknown: a GIF's frames are counted over the whole file, which is larger \
             than the {} read cap",
            cap_text()
        )));
    }
    let more = |still: Facts| Probe::More(Some(still));
    if b.len() < 13 {
        return more(still);
    }
    let mut i = 13usize;
    if b[10] & 0x80 != 0 {
        i += 3 << ((b[10] & 0x07) + 1);
    }
    // Skips data sub-blocks from `i`; `None` when the buffer ends first.
    let sub_blocks = |mut i: usize| -> Option<usize> {
        loop {
            let n = *b.get(i)? as usize;
            i += 1 + n;
            if n == 0 {
                return Some(i);
            }
        }
    };
    let mut frames = 0u64;
    loop {
        match b.get(i) {
            None => return more(still),
            Some(0x3b) => break,
            Some(0x21) => {
                let Some(next) = sub_blocks(i + 2) else {
                    return more(still);
                };
                i = next;
            }
            Some(0x2c) => {
                let Some(&packed) = b.get(i + 9) else {
                    return more(still);
                };
                i += 10;
                if packed & 0x80 != 0 {
                    i += 3 << ((packed & 0x07) + 1);
                }
                // The LZW minimum code size, then the image data.
                let Some(next) = sub_blocks(i + 1) else {
                    return more(still);
                };
                i = next;
                frames += 1;
            }
            Some(_) => {
                return Probe::Done(
                    still.noted("frames unknown: the GIF's block structure is broken"),
                )
            }
        }
    }
    let kind = if frames > 1 {
        MediaKind::Animated
    } else {
        MediaKind::Image
    };
    Probe::Done(Facts {
        kind,
        frames: Some(frames),
        ..still
    })
}

/// An ISO BMFF box header at `i` of `b`: (header length, box size or `None` for "to the end",
/// type).
fn box_at(b: &[u8], i: usize) -> Option<(usize, Option<u64>, [u8; 4])> {
    let h = b.get(i..i + 8)?;
    let kind = [h[4], h[5], h[6], h[7]];
    match be32(&h[0..4]) {
        0 => Some((8, None, kind)),
        1 => {
            let l = b.get(i + 8..i + 16)?;
            let size = u64::from_be_bytes(l.try_into().ok()?);
            Some((16, Some(size), kind))
        }
        n => Some((8, Some(n as u64), kind)),
    }
}

/// Children of a box body, as (type, body).
fn children(b: &[u8]) -> Vec<([u8; 4], &[u8])> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while let Some((hl, size, kind)) = box_at(b, i) {
        let end = match size {
            None => b.len(),
            Some(s) if s < hl as u64 || (i as u64).saturating_add(s) > b.len() as u64 => break,
            Some(s) => i + s as usize,
        };
        out.push((kind, &b[i + hl..end]));
        i = end;
    }
    out
}

fn child<'a>(b: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    children(b)
        .into_iter()
        .find(|(k, _)| k == kind)
        .map(|(_, body)| body)
}

/// Top-level MP4 boxes of `buf` (which starts at file offset `at`, on a box boundary) until
/// `moov`.
fn mp4(buf: &[u8], at: u64, total: Option<u64>) -> Probe {
    let mut facts = Facts::new("mp4", MediaKind::Video);
    if at == 0 && buf.len() >= 12 && &buf[8..12] == b"qt  " {
        facts.format = "mov".into();
    }
    let mut i = 0usize;
    loop {
        let pos = at + i as u64;
        if total.is_some_and(|t| pos >= t) {
            return Probe::Done(facts.noted("frames and size unknown: the file has no moov box"));
        }
        let Some((hl, size, kind)) = box_at(buf, i) else {
            return Probe::More(Some(facts));
        };
        if &kind == b"moov" {
            if size.is_some_and(|s| s < hl as u64) {
                return Probe::Done(facts.noted("frames and size unknown: the moov box is broken"));
            }
            let end = size.map_or(buf.len() as u64, |s| (i as u64).saturating_add(s));
            if end > buf.len() as u64 {
                return if end - i as u64 > MAX_SCAN_BYTES {
                    Probe::Done(facts.noted(format!(
                        "frames and size unknown: the moov box is larger than the {} read cap",
                        cap_text()
                    )))
                } else {
                    Probe::More(Some(facts))
                };
            }
            return Probe::Done(moov(&buf[i + hl..end as usize], facts));
        }
        let Some(size) = size.filter(|&s| s >= hl as u64) else {
            // A box to the end of the file (or a broken size): no moov after it.
            return Probe::Done(facts.noted("frames and size unknown: the file has no moov box"));
        };
        let next = (i as u64).saturating_add(size);
        if next > buf.len() as u64 {
            return Probe::At(at.saturating_add(next), facts);
        }
        i = next as usize;
    }
}

/// The video track of a `moov` body: `tkhd` width × height (16.16), else the sample entry's;
/// frames from `stsz` (or `stz2`), else the `stts` sample counts.
fn moov(body: &[u8], mut facts: Facts) -> Facts {
    let traks = children(body);
    let mut fragmented = traks.iter().any(|(k, _)| k == b"mvex");
    for (kind, trak) in traks {
        if &kind != b"trak" {
            continue;
        }
        let Some(mdia) = child(trak, b"mdia") else {
            continue;
        };
        let handler = child(mdia, b"hdlr").and_then(|h| h.get(8..12));
        if handler != Some(b"vide".as_slice()) {
            continue;
        }
        if let Some(tkhd) = child(trak, b"tkhd") {
            let off = if tkhd.first() == Some(&1) { 88 } else { 76 };
            if let Some(wh) = tkhd.get(off..off + 8) {
                facts = facts.sized(be32(&wh[0..4]) >> 16, be32(&wh[4..8]) >> 16);
            }
        }
        let stbl = child(mdia, b"minf").and_then(|m| child(m, b"stbl"));
        if facts.width.is_none() {
            // The first sample entry: a VisualSampleEntry's 16-bit width and height.
            let entry = stbl
                .and_then(|s| child(s, b"stsd"))
                .and_then(|d| d.get(8 + 32..8 + 36));
            if let Some(e) = entry {
                facts = facts.sized(be16(&e[0..2]), be16(&e[2..4]));
            }
        }
        let stsz = stbl
            .and_then(|s| child(s, b"stsz"))
            .and_then(|z| z.get(8..12));
        let stz2 = stbl
            .and_then(|s| child(s, b"stz2"))
            .and_then(|z| z.get(8..12));
        let stts = stbl.and_then(|s| child(s, b"stts")).and_then(|t| {
            let n = be32(t.get(4..8)?) as usize;
            let entries = t.get(8..8 + n.checked_mul(8)?)?;
            Some(
                entries
                    .chunks(8)
                    .map(|e| be32(&e[0..4]) as u64)
                    .sum::<u64>(),
            )
        });
        let frames = stsz.or(stz2).map(|c| be32(c) as u64).or(stts);
        match frames {
            Some(0) => fragmented = true,
            Some(n) => facts.frames = Some(n),
            None => {}
        }
        break;
    }
    if facts.width.is_none() && facts.frames.is_none() {
        return facts.noted("frames and size unknown: no video track in the moov box");
    }
    if facts.frames.is_none() {
        let why = if fragmented {
            "frames unknown: a fragmented MP4 keeps them in its fragments, which are not read"
        } else {
            "frames unknown: the video track has no sample table"
        };
        facts.note = Some(why.into());
    }
    facts
}

/// One Matroska track entry as read so far.
#[derive(Default)]
struct Track {
    number: Option<u64>,
    video: bool,
    width: Option<u32>,
    height: Option<u32>,
}

/// WebM/Matroska: the EBML header's DocType, the video track's PixelWidth/PixelHeight, and,
/// when the whole file is at most [`MAX_SCAN_BYTES`], its blocks counted (a block carrying
/// laced frames leaves the count unknown). One flat walk that enters the master elements on
/// the way (Segment, Tracks, TrackEntry, Video, Cluster, BlockGroup) and skips every other
/// element's body, so unknown-size Segments and Clusters read the same. Elements are read with
/// the workflow reader's [`ebml`] (one EBML reader for both).
fn matroska(b: &[u8], total: Option<u64>) -> Probe {
    const MASTERS: [Id; 6] = [
        Id::SEGMENT,
        Id::TRACKS,
        Id::TRACK_ENTRY,
        Id::VIDEO,
        Id::CLUSTER,
        Id::BLOCK_GROUP,
    ];

    let mut facts = Facts::new("mkv", MediaKind::Video);
    let mut tracks: Vec<Track> = Vec::new();
    let mut blocks: Vec<(u64, bool)> = Vec::new();
    let mut clusters = false;
    let mut i = 0usize;
    let complete = loop {
        let Some(h) = b.get(i..).and_then(ebml::header) else {
            break b.len() == i && whole(b, total);
        };
        let body = i + h.len;
        if MASTERS.contains(&h.id) || h.id == Id::EBML {
            if h.id == Id::TRACK_ENTRY {
                tracks.push(Track::default());
            }
            clusters |= h.id == Id::CLUSTER;
            if h.id != Id::EBML || h.size.is_none() {
                i = body;
                continue;
            }
        }
        let Some(size) = h.size else {
            break false;
        };
        let end = match body.checked_add(size as usize) {
            Some(e) if e <= b.len() => e,
            _ => break false,
        };
        let data = &b[body..end];
        match h.id {
            Id::EBML => {
                // The header's children: only DocType matters.
                for (_, doc) in ebml::children(data).filter(|(id, _)| *id == Id::DOC_TYPE) {
                    let webm = ebml::text(doc) == "webm";
                    facts.format = if webm { "webm" } else { "mkv" }.into();
                }
            }
            Id::TRACK_NUMBER | Id::TRACK_TYPE | Id::PIXEL_WIDTH | Id::PIXEL_HEIGHT => {
                if let Some(t) = tracks.last_mut() {
                    let v = ebml::uint(data);
                    match h.id {
                        Id::TRACK_NUMBER => t.number = Some(v),
                        Id::TRACK_TYPE => t.video = v == 1,
                        Id::PIXEL_WIDTH => t.width = u32::try_from(v).ok(),
                        _ => t.height = u32::try_from(v).ok(),
                    }
                }
            }
            Id::SIMPLE_BLOCK | Id::BLOCK => {
                if let Some((track, tl)) = ebml::vint(data) {
                    // Track number, 16-bit timecode, flags: bits 1–2 are the lacing.
                    let laced = data.get(tl + 2).is_some_and(|f| f & 0x06 != 0);
                    blocks.push((track, laced));
                }
            }
            _ => {}
        }
        i = end;
    };
    let video = tracks.iter().find(|t| t.video);
    if let Some(t) = video {
        facts = facts.sized(t.width.unwrap_or(0), t.height.unwrap_or(0));
    }
    let header_known = video.is_some_and(|t| t.width.is_some() && t.height.is_some());
    if complete {
        let Some(t) = video else {
            return Probe::Done(facts.noted("frames and size unknown: no video track"));
        };
        let mine: Vec<bool> = blocks
            .iter()
            .filter(|(n, _)| Some(*n) == t.number)
            .map(|&(_, laced)| laced)
            .collect();
        if mine.iter().any(|&l| l) {
            return Probe::Done(facts.noted("frames unknown: the video blocks are laced"));
        }
        facts.frames = Some(mine.len() as u64);
        return Probe::Done(facts);
    }
    if header_known && (too_big(total) || total.is_none()) && clusters {
        let why = if total.is_none() {
            "frames unknown: WebM has no frame count in its header, and the file's size is not \
             known, so its blocks are not counted"
                .to_string()
        } else {
            format!(
                "frames unknown: WebM has no frame count in its header; its blocks are counted \
                 only in files up to the {} read cap",
                cap_text()
            )
        };
        return Probe::Done(facts.noted(why));
    }
    Probe::More(Some(facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/media/{name}", crate::FIXTURES)).unwrap()
    }

    fn done(p: Probe) -> Facts {
        match p {
            Probe::Done(f) => f,
            other => panic!("{other:?}"),
        }
    }

    /// Every prefix of `bytes` and a few corruptions: no panic; a prefix never claims a
    /// frame count the whole file does not have.
    fn robust(bytes: &[u8], animated: bool) {
        let whole = probe(bytes, Some(bytes.len() as u64), animated);
        let want = match &whole {
            Probe::Done(f) => f.frames,
            _ => None,
        };
        for n in 0..bytes.len() {
            let p = probe(&bytes[..n], Some(bytes.len() as u64), animated);
            if let Probe::Done(f) = &p {
                assert!(
                    f.frames.is_none() || f.frames == want,
                    "{n} bytes: {f:?} vs {want:?}"
                );
            }
            let _ = probe(&bytes[..n], None, animated);
            let _ = probe_at(&bytes[..n], 0, Some(bytes.len() as u64));
        }
        for pos in (0..bytes.len()).step_by(7) {
            let mut broken = bytes.to_vec();
            broken[pos] ^= 0xff;
            let _ = probe(&broken, Some(broken.len() as u64), animated);
            broken[pos] = 0;
            let _ = probe(&broken, Some(broken.len() as u64), animated);
        }
    }

    #[test]
    fn the_animated_webp_of_img2webp_has_two_frames() {
        let b = fixture("animated_37x21.webp");
        let f = done(probe(&b, Some(b.len() as u64), false));
        assert_eq!(
            (f.format.as_str(), f.kind, f.width, f.height, f.frames),
            ("webp", MediaKind::Animated, Some(37), Some(21), Some(2))
        );
        // The head alone asks for the rest; without it, frames stay unknown.
        let p = probe(&b[..40], Some(b.len() as u64), false);
        assert!(matches!(p, Probe::More(Some(_))), "{p:?}");
        let f = p.facts("the read stopped").unwrap();
        assert_eq!((f.width, f.frames), (Some(37), None));
        assert!(f.note.unwrap().contains("frames unknown"));
        robust(&b, false);
    }

    #[test]
    fn still_webps_are_one_frame() {
        for name in ["lossy_37x21.webp", "lossless_37x21.webp"] {
            let b = fixture(name);
            let f = done(probe(&b, Some(b.len() as u64), true));
            assert_eq!((f.kind, f.frames), (MediaKind::Image, Some(1)), "{name}");
            robust(&b, false);
        }
    }

    #[test]
    fn a_large_animated_webp_is_not_read_to_its_end() {
        let b = fixture("animated_37x21.webp");
        let f = done(probe(&b[..40], Some(MAX_SCAN_BYTES + 1), false));
        assert_eq!((f.width, f.frames), (Some(37), None));
        assert!(f.note.unwrap().contains("read cap"));
    }

    #[test]
    fn a_gif_of_two_frames_is_counted_to_its_trailer() {
        // GIF89a 2×1, global table of 2 colours, a NETSCAPE loop extension, two graphic
        // control extensions and two 2×1 images, written from the GIF89a specification.
        let mut b = b"GIF89a\x02\x00\x01\x00\x80\x00\x00".to_vec();
        b.extend([0, 0, 0, 255, 255, 255]);
        b.extend(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00");
        for _ in 0..2 {
            b.extend(b"\x21\xf9\x04\x00\x0a\x00\x00\x00");
            b.extend(b"\x2c\x00\x00\x00\x00\x02\x00\x01\x00\x00");
            b.extend(b"\x02\x02\x44\x01\x00");
        }
        b.push(0x3b);
        let f = done(probe(&b, Some(b.len() as u64), false));
        assert_eq!(
            (f.format.as_str(), f.kind, f.width, f.height, f.frames),
            ("gif", MediaKind::Animated, Some(2), Some(1), Some(2))
        );
        robust(&b, false);
        // Larger than the cap: the screen size only, and why.
        let f = done(probe(&b[..13], Some(MAX_SCAN_BYTES * 2), false));
        assert_eq!((f.width, f.frames), (Some(2), None));
        assert!(f.note.unwrap().contains("read cap"));
    }

    fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        c.extend(kind);
        c.extend(data);
        c.extend([0; 4]);
        c
    }

    #[test]
    fn apng_frames_come_from_actl_and_a_plain_png_is_one_frame() {
        let mut ihdr = 64u32.to_be_bytes().to_vec();
        ihdr.extend(48u32.to_be_bytes());
        ihdr.extend([8, 2, 0, 0, 0]);
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend(chunk(b"IHDR", &ihdr));
        png.extend(chunk(b"tEXt", b"prompt\0{}"));
        let mut apng = png.clone();
        let mut actl = 8u32.to_be_bytes().to_vec();
        actl.extend(0u32.to_be_bytes());
        apng.extend(chunk(b"acTL", &actl));
        apng.extend(chunk(b"IDAT", &[0; 4]));
        png.extend(chunk(b"IDAT", &[0; 4]));
        let f = done(probe(&apng, None, true));
        assert_eq!(
            (f.kind, f.width, f.height, f.frames),
            (MediaKind::Animated, Some(64), Some(48), Some(8))
        );
        let f = done(probe(&png, None, true));
        assert_eq!((f.kind, f.frames), (MediaKind::Image, Some(1)));
        // Not flagged animated: the IHDR suffices and frames are not looked for.
        let f = done(probe(&apng[..33], None, false));
        assert_eq!((f.kind, f.frames), (MediaKind::Image, None));
        robust(&apng, true);
    }

    fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut b = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        b.extend(kind);
        b.extend(body);
        b
    }

    /// A `moov` with one video track of `w`×`h` and `frames` samples, written from ISO/IEC
    /// 14496-12 (tkhd version 0, stsz with one size per sample, stts with one entry).
    fn moov_box(w: u32, h: u32, frames: u32) -> Vec<u8> {
        let mut tkhd = vec![0u8; 84];
        tkhd[76..80].copy_from_slice(&(w << 16).to_be_bytes());
        tkhd[80..84].copy_from_slice(&(h << 16).to_be_bytes());
        let mut hdlr = vec![0u8; 24];
        hdlr[8..12].copy_from_slice(b"vide");
        let mut stsz = vec![0u8; 12];
        stsz[8..12].copy_from_slice(&frames.to_be_bytes());
        stsz.extend((0..frames).flat_map(|_| 100u32.to_be_bytes()));
        let mut stts = vec![0, 0, 0, 0, 0, 0, 0, 1];
        stts.extend(frames.to_be_bytes());
        stts.extend(512u32.to_be_bytes());
        let stbl = bx(b"stbl", &[bx(b"stts", &stts), bx(b"stsz", &stsz)].concat());
        let minf = bx(b"minf", &stbl);
        let mdia = bx(b"mdia", &[bx(b"hdlr", &hdlr), minf].concat());
        let trak = bx(b"trak", &[bx(b"tkhd", &tkhd), mdia].concat());
        bx(b"moov", &[bx(b"mvhd", &[0; 100]), trak].concat())
    }

    #[test]
    fn mp4_with_moov_at_the_head_is_read_from_the_head() {
        let ftyp = bx(b"ftyp", b"isom\0\0\x02\0isomiso2avc1mp41");
        let file = [ftyp, moov_box(64, 48, 49), bx(b"mdat", &[0; 5000])].concat();
        let f = done(probe(&file[..4096], Some(file.len() as u64), false));
        assert_eq!(
            (f.format.as_str(), f.kind, f.width, f.height, f.frames),
            ("mp4", MediaKind::Video, Some(64), Some(48), Some(49))
        );
        robust(&file[..600], false);
    }

    #[test]
    fn mp4_with_moov_at_the_end_points_past_the_mdat() {
        let ftyp = bx(b"ftyp", b"isom\0\0\x02\0isomiso2avc1mp41");
        let mdat = bx(b"mdat", &[0; 100_000]);
        let at = (ftyp.len() + mdat.len()) as u64;
        let file = [ftyp, mdat, moov_box(832, 480, 81)].concat();
        let total = Some(file.len() as u64);
        let p = probe(&file[..65536], total, false);
        assert!(matches!(p, Probe::At(a, _) if a == at), "{p:?}");
        let f = done(probe_at(&file[at as usize..], at, total));
        assert_eq!(
            (f.width, f.height, f.frames),
            (Some(832), Some(480), Some(81))
        );
        // A tail cut short asks for more; a file without moov says so.
        let p = probe_at(&file[at as usize..at as usize + 50], at, total);
        assert!(matches!(p, Probe::More(Some(_))), "{p:?}");
        let cut = &file[..at as usize];
        let f = done(probe_at(&[], at, Some(cut.len() as u64)));
        assert!(f.note.unwrap().contains("no moov"));
        // Stopping at `At` leaves frames and size unknown, with the reason.
        let f = probe(&file[..100], total, false).facts("no Range").unwrap();
        assert_eq!((f.width, f.frames), (None, None));
        assert!(f.note.unwrap().contains("no Range"));
        robust(&file[at as usize..], false);
    }

    fn el(id: &[u8], body: &[u8]) -> Vec<u8> {
        // The size as an 8-byte EBML integer: the marker byte 0x01, then 7 bytes.
        let mut e = id.to_vec();
        e.push(0x01);
        e.extend(&(body.len() as u64).to_be_bytes()[1..]);
        e.extend(body);
        e
    }

    fn webm(blocks: usize, laced: bool, unknown_cluster: bool) -> Vec<u8> {
        let header = el(&[0x1a, 0x45, 0xdf, 0xa3], &el(&[0x42, 0x82], b"webm"));
        let video = el(
            &[0xe0],
            &[el(&[0xb0], &[64]), el(&[0xba], &[0, 48])].concat(),
        );
        let entry = el(
            &[0xae],
            &[el(&[0xd7], &[1]), el(&[0x83], &[1]), video].concat(),
        );
        let audio = el(&[0xae], &[el(&[0xd7], &[2]), el(&[0x83], &[2])].concat());
        let tracks = el(&[0x16, 0x54, 0xae, 0x6b], &[entry, audio].concat());
        let flags = if laced { 0x82 } else { 0x80 };
        let mut cluster_body = el(&[0xe7], &[0]);
        for _ in 0..blocks {
            cluster_body.extend(el(&[0xa3], &[0x81, 0, 0, flags, 1, 2, 3]));
            cluster_body.extend(el(&[0xa3], &[0x82, 0, 0, 0x80, 9]));
        }
        let cluster = if unknown_cluster {
            let mut c = vec![
                0x1f, 0x43, 0xb6, 0x75, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ];
            c.extend(&cluster_body);
            c
        } else {
            el(&[0x1f, 0x43, 0xb6, 0x75], &cluster_body)
        };
        let segment = el(&[0x18, 0x53, 0x80, 0x67], &[tracks, cluster].concat());
        [header, segment].concat()
    }

    #[test]
    fn webm_size_from_the_video_track_and_frames_from_its_blocks() {
        for unknown in [false, true] {
            let b = webm(5, false, unknown);
            let f = done(probe(&b, Some(b.len() as u64), false));
            assert_eq!(
                (f.format.as_str(), f.kind, f.width, f.height, f.frames),
                ("webm", MediaKind::Video, Some(64), Some(48), Some(5)),
                "unknown-size cluster: {unknown}"
            );
            robust(&b, false);
        }
        let b = webm(3, true, false);
        let f = done(probe(&b, Some(b.len() as u64), false));
        assert_eq!((f.width, f.frames), (Some(64), None));
        assert!(f.note.unwrap().contains("laced"));
        // A file over the cap: the size, and frames unknown with the reason.
        let b = webm(3, false, false);
        let f = done(probe(&b[..b.len() - 10], Some(MAX_SCAN_BYTES + 1), false));
        assert_eq!((f.width, f.height, f.frames), (Some(64), Some(48), None));
        assert!(f.note.unwrap().contains("no frame count in its header"));
    }

    /// Reads `b` as the client does: chunks of `chunk` bytes from the start until the probe
    /// stops asking for more (at most [`MAX_SCAN_BYTES`]), then, when it points at an offset,
    /// the bytes from there.
    fn read_like_the_client(b: &[u8], animated: bool, chunk: usize) -> Probe {
        let total = Some(b.len() as u64);
        let mut n = 0;
        let p = loop {
            n = (n + chunk).min(b.len());
            let p = probe(&b[..n], total, animated);
            if !matches!(p, Probe::More(_)) || n == b.len() || n as u64 >= MAX_SCAN_BYTES {
                break p;
            }
        };
        match p {
            Probe::At(at, _) => probe_at(&b[at as usize..], at, total),
            p => p,
        }
    }

    /// Every real output of ComfyUI 0.3.64 in `tests/fixtures/comfyui-outputs/files/`, against
    /// the ground truth measured with PyAV and Pillow (`ground_truth.json`, keyed by the path
    /// under `files/`), read the way the client reads them in chunks of a few sizes: videos and
    /// animated images give their size and frames, still PNGs their size, and audio and latent
    /// files nothing. History flags the SaveAnimatedPNG/SaveAnimatedWEBP outputs `animated`, so
    /// those PNGs are searched for `acTL`.
    #[test]
    fn the_captured_comfyui_outputs_match_their_ground_truth() {
        let dir = &format!("{}/comfyui-outputs", crate::FIXTURES);
        let truth: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{dir}/ground_truth.json")).unwrap(),
        )
        .unwrap();
        let mut seen = std::collections::BTreeMap::<&str, usize>::new();
        for (path, t) in truth.as_object().unwrap() {
            let b = std::fs::read(format!("{dir}/files/{path}")).unwrap();
            assert_eq!(t["bytes"].as_u64(), Some(b.len() as u64), "{path}");
            let ext = path.rsplit('.').next().unwrap();
            let animated = path.contains("apng") || ext == "webp";
            let size = |k: &str| t[k].as_u64().map(|v| v as u32);
            for chunk in [7, 4096, 65536] {
                let p = read_like_the_client(&b, animated, chunk);
                let what = format!("{path} in chunks of {chunk}: {p:?}");
                let kind = t["kind"].as_str().unwrap();
                if kind != "video" && kind != "image" {
                    // Audio (FLAC, MP3, Opus) and latents are no container this module reads.
                    assert_eq!(p, Probe::Unknown, "{what}");
                    *seen.entry("not media").or_default() += 1;
                    continue;
                }
                let f = match p {
                    Probe::Done(f) => f,
                    _ => panic!("{what}"),
                };
                let frames = t["frames"].as_u64();
                let want_kind = match (kind, frames) {
                    ("video", _) => MediaKind::Video,
                    (_, Some(n)) if n > 1 => MediaKind::Animated,
                    _ => MediaKind::Image,
                };
                // A still PNG not flagged animated is not searched for frames.
                let want_frames = if ext == "png" && !animated {
                    None
                } else {
                    frames
                };
                assert_eq!(
                    (f.format.as_str(), f.kind, f.width, f.height, f.frames),
                    (ext, want_kind, size("width"), size("height"), want_frames),
                    "{what}"
                );
                assert!(f.note.is_none(), "{what}");
                *seen.entry(ext).or_default() += 1;
            }
            robust(&b, animated);
        }
        // Every kind the capture has was read (three chunk sizes each).
        for (ext, at_least) in [("mp4", 6), ("webm", 4), ("webp", 4), ("png", 4)] {
            assert!(
                seen.get(ext).copied().unwrap_or(0) >= at_least * 3,
                "{seen:?}"
            );
        }
    }

    #[test]
    fn the_captured_mp4_keeps_its_moov_after_the_mdat() {
        // ftyp 32, free 8, mdat 978 at 40, moov at 1018 (PyAV through SaveVideo, no faststart):
        // the head points at byte 1018 and the bytes from there give 64×48, 8 frames.
        let b = std::fs::read(format!(
            "{}/comfyui-outputs/files/output/video/cap_mp4_00003_.mp4",
            crate::FIXTURES
        ))
        .unwrap();
        let total = Some(b.len() as u64);
        let p = probe(&b[..64], total, true);
        assert!(matches!(p, Probe::At(1018, _)), "{p:?}");
        let f = done(probe_at(&b[1018..], 1018, total));
        assert_eq!((f.width, f.height, f.frames), (Some(64), Some(48), Some(8)));
    }

    #[test]
    fn other_bytes_are_unknown() {
        assert_eq!(
            probe(b"{\"json\": true, \"x\": 1}", None, false),
            Probe::Unknown
        );
        assert_eq!(
            probe(b"RIFF\x10\0\0\0WAVEfmt ", None, false),
            Probe::Unknown
        );
        assert_eq!(probe(b"", None, false), Probe::More(None));
    }
}
