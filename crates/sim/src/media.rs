//! The files the simulator's output nodes write, as `/view` serves them: real container
//! structure with the size and frame count the node wrote, laid out like ComfyUI 0.3.64's
//! own outputs in `tests/fixtures/comfyui-outputs/files/` (the pixels are not simulated):
//! - PNG: signature, `IHDR`, `IEND`; an animated one (SaveAnimatedPNG) has `acTL` right after
//!   `IHDR`, then `fcTL` + `IDAT` and `fcTL` + `fdAT` per further frame (`cap_apng_00001_.png`).
//! - WebP: `RIFF`/`WEBP`, `VP8X` with the animation flag, `ANIM`, one `ANMF` per frame
//!   (`cap_webp_lossless_00001_.webp`); one frame is `VP8X` + `VP8L`, not animated
//!   (`cap_webp_same_00001_.webp`: ComfyUI's writer makes a still of a single frame).
//! - MP4: `ftyp`, `free`, `mdat`, then `moov` at the end (PyAV writes no faststart:
//!   `cap_mp4_00001_.mp4`), whose video track has `tkhd` width × height and `stts`/`stsz`
//!   with one sample per frame; the `mdat` grows with the frames' pixels.
//! - WebM: EBML header (DocType `webm`), a Segment with `Info`, `Tracks` (one video track with
//!   PixelWidth/PixelHeight) and a Cluster of one SimpleBlock per frame (`cap_webm_vp9_…`).
//! - GIF (VideoHelperSuite's `image/gif`): one image descriptor per frame.
//!
//! Which format a file is comes from its name, as ComfyUI's savers name them.

/// What an output node wrote into one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SimFile {
    /// Pixels.
    pub width: u64,
    /// Pixels.
    pub height: u64,
    /// Frames in the file (1 for a still image).
    pub frames: u64,
    /// Written by an animated saver (a PNG then carries `acTL`).
    pub animated: bool,
}

/// The bytes and content type `/view` serves for a file named `name`; `None` for a name whose
/// format the simulator does not write.
pub(crate) fn file_bytes(name: &str, f: &SimFile) -> Option<(&'static str, Vec<u8>)> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    let (w, h, n) = (f.width as u32, f.height as u32, f.frames.max(1) as u32);
    Some(match ext.as_str() {
        "png" if f.animated => ("image/png", apng(w, h, n)),
        "png" => ("image/png", png_of_size(f.width, f.height)),
        "webp" => ("image/webp", webp(w, h, n)),
        "mp4" => ("video/mp4", mp4(w, h, n)),
        "webm" => ("video/webm", webm(w, h, n)),
        "gif" => ("image/gif", gif(w, h, n)),
        _ => return None,
    })
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let mut body = kind.to_vec();
    body.extend(data);
    out.extend(&body);
    out.extend(crc32fast::hash(&body).to_be_bytes());
}

fn ihdr(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = Vec::new();
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    // 8-bit RGB, as SaveImage writes.
    ihdr.extend([8, 2, 0, 0, 0]);
    ihdr
}

/// A PNG file of `width` × `height` as `/view` serves it: the signature, a real IHDR and
/// IEND; the pixels are not simulated.
pub(crate) fn png_of_size(width: u64, height: u64) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr(width as u32, height as u32));
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// An APNG of `frames` frames: `acTL` after `IHDR`, then a frame control and data chunk per
/// frame (the first frame's data in `IDAT`).
fn apng(width: u32, height: u32, frames: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr(width, height));
    let mut actl = frames.to_be_bytes().to_vec();
    actl.extend(0u32.to_be_bytes());
    png_chunk(&mut out, b"acTL", &actl);
    let mut seq = 0u32;
    for i in 0..frames {
        let mut fctl = seq.to_be_bytes().to_vec();
        fctl.extend(width.to_be_bytes());
        fctl.extend(height.to_be_bytes());
        fctl.extend([0; 8]);
        // 1/6 s per frame (fps 6, SaveAnimatedPNG's default), no dispose, no blend.
        fctl.extend([0, 1, 0, 6, 0, 0]);
        png_chunk(&mut out, b"fcTL", &fctl);
        seq += 1;
        if i == 0 {
            png_chunk(&mut out, b"IDAT", &[0x78, 0x9c, 0x03, 0x00]);
        } else {
            let mut fdat = seq.to_be_bytes().to_vec();
            fdat.extend([0x78, 0x9c, 0x03, 0x00]);
            png_chunk(&mut out, b"fdAT", &fdat);
            seq += 1;
        }
    }
    png_chunk(&mut out, b"IEND", &[]);
    out
}

fn riff_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend(kind);
    out.extend((data.len() as u32).to_le_bytes());
    out.extend(data);
    if data.len() % 2 == 1 {
        out.push(0);
    }
}

fn le24(v: u32) -> [u8; 3] {
    let b = v.to_le_bytes();
    [b[0], b[1], b[2]]
}

/// A lossless bitstream header of `width` × `height` (signature 0x2f, 14-bit sizes − 1).
fn vp8l(width: u32, height: u32) -> Vec<u8> {
    let bits = (width - 1) & 0x3fff | ((height - 1) & 0x3fff) << 14;
    let mut d = vec![0x2f];
    d.extend(bits.to_le_bytes());
    d
}

/// A WebP: animated (`VP8X` flag, `ANIM`, one `ANMF` per frame) or, for one frame, a
/// `VP8X` + `VP8L` still.
fn webp(width: u32, height: u32, frames: u32) -> Vec<u8> {
    let (width, height) = (width.max(1), height.max(1));
    let mut body = b"WEBP".to_vec();
    let mut vp8x = vec![if frames > 1 { 0x02 } else { 0x00 }, 0, 0, 0];
    vp8x.extend(le24(width - 1));
    vp8x.extend(le24(height - 1));
    riff_chunk(&mut body, b"VP8X", &vp8x);
    if frames > 1 {
        // Background colour, loop count 0.
        riff_chunk(&mut body, b"ANIM", &[0, 0, 0, 0, 0, 0]);
        for _ in 0..frames {
            let mut anmf = Vec::new();
            anmf.extend(le24(0));
            anmf.extend(le24(0));
            anmf.extend(le24(width - 1));
            anmf.extend(le24(height - 1));
            anmf.extend(le24(166));
            anmf.push(0);
            riff_chunk(&mut anmf, b"VP8L", &vp8l(width, height));
            riff_chunk(&mut body, b"ANMF", &anmf);
        }
    } else {
        riff_chunk(&mut body, b"VP8L", &vp8l(width, height));
    }
    let mut out = b"RIFF".to_vec();
    out.extend((body.len() as u32).to_le_bytes());
    out.extend(body);
    out
}

fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut b = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    b.extend(kind);
    b.extend(body);
    b
}

/// A full box body: version and flags, then `rest`.
fn full(version: u8, rest: &[u8]) -> Vec<u8> {
    let mut b = vec![version, 0, 0, 0];
    b.extend(rest);
    b
}

/// An MP4 as SaveVideo writes it: `ftyp` (isom), `free`, `mdat` with one tiny sample per
/// frame, and the `moov` last.
fn mp4(width: u32, height: u32, frames: u32) -> Vec<u8> {
    let ftyp = bx(b"ftyp", b"isom\x00\x00\x02\x00isomiso2avc1mp41");
    let free = bx(b"free", &[]);
    // One sample per frame of width × height / 16 bytes (the capture's 64×48 frames took
    // about 120), so a large video's moov lies far from its head, as in a real one.
    let sample_len = ((width as usize * height as usize) / 16).max(6);
    let mut sample = vec![0u8; sample_len];
    sample[..6].copy_from_slice(&[0, 0, 0, 2, 0x65, 0x88]);
    let mdat = bx(b"mdat", &sample.repeat(frames as usize));
    let mdat_data = (ftyp.len() + free.len() + 8) as u32;
    // 12288 units per second at 8 fps: 1536 per frame.
    let (timescale, delta) = (12288u32, 1536u32);
    let duration = delta * frames;
    let mut mvhd = Vec::new();
    mvhd.extend([0u8; 8]);
    mvhd.extend(1000u32.to_be_bytes());
    mvhd.extend((duration * 1000 / timescale).to_be_bytes());
    mvhd.extend(0x0001_0000u32.to_be_bytes());
    mvhd.extend(0x0100u16.to_be_bytes());
    mvhd.extend([0u8; 10]);
    mvhd.extend(matrix());
    mvhd.extend([0u8; 24]);
    mvhd.extend(2u32.to_be_bytes());
    let mut tkhd = Vec::new();
    tkhd.extend([0u8; 8]);
    tkhd.extend(1u32.to_be_bytes());
    tkhd.extend([0u8; 4]);
    tkhd.extend((duration * 1000 / timescale).to_be_bytes());
    tkhd.extend([0u8; 16]);
    tkhd.extend(matrix());
    tkhd.extend((width << 16).to_be_bytes());
    tkhd.extend((height << 16).to_be_bytes());
    let mut mdhd = Vec::new();
    mdhd.extend([0u8; 8]);
    mdhd.extend(timescale.to_be_bytes());
    mdhd.extend(duration.to_be_bytes());
    mdhd.extend([0x55, 0xc4, 0, 0]);
    let mut hdlr = vec![0u8; 4];
    hdlr.extend(b"vide");
    hdlr.extend([0u8; 12]);
    hdlr.extend(b"VideoHandler\0");
    // A VisualSampleEntry `avc1` without its codec configuration.
    let mut avc1 = vec![0u8; 6];
    avc1.extend(1u16.to_be_bytes());
    avc1.extend([0u8; 16]);
    avc1.extend((width as u16).to_be_bytes());
    avc1.extend((height as u16).to_be_bytes());
    avc1.extend(0x0048_0000u32.to_be_bytes());
    avc1.extend(0x0048_0000u32.to_be_bytes());
    avc1.extend([0u8; 4]);
    avc1.extend(1u16.to_be_bytes());
    avc1.extend([0u8; 32]);
    avc1.extend(0x0018u16.to_be_bytes());
    avc1.extend(0xffffu16.to_be_bytes());
    let mut stsd = 1u32.to_be_bytes().to_vec();
    stsd.extend(bx(b"avc1", &avc1));
    let mut stts = 1u32.to_be_bytes().to_vec();
    stts.extend(frames.to_be_bytes());
    stts.extend(delta.to_be_bytes());
    let mut stsc = 1u32.to_be_bytes().to_vec();
    stsc.extend(1u32.to_be_bytes());
    stsc.extend(frames.to_be_bytes());
    stsc.extend(1u32.to_be_bytes());
    let mut stsz = 0u32.to_be_bytes().to_vec();
    stsz.extend(frames.to_be_bytes());
    for _ in 0..frames {
        stsz.extend((sample.len() as u32).to_be_bytes());
    }
    let mut stco = 1u32.to_be_bytes().to_vec();
    stco.extend(mdat_data.to_be_bytes());
    let stbl = bx(
        b"stbl",
        &[
            bx(b"stsd", &full(0, &stsd)),
            bx(b"stts", &full(0, &stts)),
            bx(b"stsc", &full(0, &stsc)),
            bx(b"stsz", &full(0, &stsz)),
            bx(b"stco", &full(0, &stco)),
        ]
        .concat(),
    );
    let minf = bx(b"minf", &[bx(b"vmhd", &full(0, &[0; 8])), stbl].concat());
    let mdia = bx(
        b"mdia",
        &[
            bx(b"mdhd", &full(0, &mdhd)),
            bx(b"hdlr", &full(0, &hdlr)),
            minf,
        ]
        .concat(),
    );
    let trak = bx(b"trak", &[bx(b"tkhd", &full(0, &tkhd)), mdia].concat());
    let moov = bx(b"moov", &[bx(b"mvhd", &full(0, &mvhd)), trak].concat());
    [ftyp, free, mdat, moov].concat()
}

/// The identity transformation matrix of `mvhd` and `tkhd`.
fn matrix() -> Vec<u8> {
    [0x0001_0000u32, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect()
}

/// An EBML element with an 8-byte size.
fn el(id: &[u8], body: &[u8]) -> Vec<u8> {
    let mut e = id.to_vec();
    e.push(0x01);
    e.extend(&(body.len() as u64).to_be_bytes()[1..]);
    e.extend(body);
    e
}

/// A WebM as SaveWEBM writes it: the EBML header, a Segment with Info, Tracks (one VP9 video
/// track) and one Cluster of a SimpleBlock per frame.
fn webm(width: u32, height: u32, frames: u32) -> Vec<u8> {
    let header = el(
        &[0x1a, 0x45, 0xdf, 0xa3],
        &[
            el(&[0x42, 0x86], &[1]),
            el(&[0x42, 0xf7], &[1]),
            el(&[0x42, 0xf2], &[4]),
            el(&[0x42, 0xf3], &[8]),
            el(&[0x42, 0x82], b"webm"),
            el(&[0x42, 0x87], &[2]),
            el(&[0x42, 0x85], &[2]),
        ]
        .concat(),
    );
    let info = el(
        &[0x15, 0x49, 0xa9, 0x66],
        &[
            el(&[0x2a, 0xd7, 0xb1], &1_000_000u32.to_be_bytes()),
            el(&[0x4d, 0x80], b"Lavf"),
        ]
        .concat(),
    );
    let video = el(
        &[0xe0],
        &[
            el(&[0xb0], &(width as u16).to_be_bytes()),
            el(&[0xba], &(height as u16).to_be_bytes()),
        ]
        .concat(),
    );
    let entry = el(
        &[0xae],
        &[
            el(&[0xd7], &[1]),
            el(&[0x73, 0xc5], &[1]),
            el(&[0x83], &[1]),
            el(&[0x86], b"V_VP9"),
            video,
        ]
        .concat(),
    );
    let tracks = el(&[0x16, 0x54, 0xae, 0x6b], &entry);
    let mut cluster = el(&[0xe7], &[0]);
    for i in 0..frames {
        // Track 1, timecode i × 83 ms, key frame for the first, then one byte of data.
        let tc = ((i * 83) as u16).to_be_bytes();
        let flags = if i == 0 { 0x80 } else { 0x00 };
        cluster.extend(el(&[0xa3], &[0x81, tc[0], tc[1], flags, 0]));
    }
    let cluster = el(&[0x1f, 0x43, 0xb6, 0x75], &cluster);
    let segment = el(&[0x18, 0x53, 0x80, 0x67], &[info, tracks, cluster].concat());
    [header, segment].concat()
}

/// A GIF89a with a two-colour global table, a loop extension and one image per frame.
fn gif(width: u32, height: u32, frames: u32) -> Vec<u8> {
    let mut b = b"GIF89a".to_vec();
    b.extend((width as u16).to_le_bytes());
    b.extend((height as u16).to_le_bytes());
    b.extend([0x80, 0, 0]);
    b.extend([0, 0, 0, 255, 255, 255]);
    b.extend(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00");
    for _ in 0..frames {
        b.extend(b"\x21\xf9\x04\x00\x0d\x00\x00\x00");
        b.push(0x2c);
        b.extend([0, 0, 0, 0]);
        b.extend((width as u16).to_le_bytes());
        b.extend((height as u16).to_le_bytes());
        b.push(0);
        // LZW minimum code size 2, one sub-block (clear, end), terminator.
        b.extend([0x02, 0x02, 0x44, 0x01, 0x00]);
    }
    b.push(0x3b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use comfy_bisect_core::comfy::container::{probe, probe_at, MediaKind, Probe};

    /// The client's probes (tested on ComfyUI's real outputs) read back what the simulator
    /// wrote. The simulator may use the client's probe in its tests: the bytes are the
    /// simulator's, the reader is tested against captures.
    #[test]
    fn every_written_container_reads_back_its_size_and_frames() {
        for (name, animated, frames, kind) in [
            ("a.png", false, 1, MediaKind::Image),
            ("a.png", true, 5, MediaKind::Animated),
            ("a.webp", true, 6, MediaKind::Animated),
            ("a.webp", true, 1, MediaKind::Image),
            ("a.mp4", true, 49, MediaKind::Video),
            ("a.webm", true, 6, MediaKind::Video),
            ("a.gif", true, 3, MediaKind::Animated),
        ] {
            let f = SimFile {
                width: 80,
                height: 48,
                frames,
                animated,
            };
            let (_, b) = file_bytes(name, &f).unwrap();
            let total = Some(b.len() as u64);
            let p = match probe(&b, total, animated) {
                Probe::At(at, _) => probe_at(&b[at as usize..], at, total),
                p => p,
            };
            let Probe::Done(x) = p else {
                panic!("{name}: {p:?}")
            };
            let want_frames = if name == "a.png" && !animated {
                None
            } else {
                Some(frames)
            };
            assert_eq!(
                (x.kind, x.width, x.height, x.frames),
                (kind, Some(80), Some(48), want_frames),
                "{name} ×{frames}"
            );
        }
        // The MP4 keeps its moov at the end, like ComfyUI's: the head points past the mdat.
        let (_, b) = file_bytes(
            "a.mp4",
            &SimFile {
                width: 64,
                height: 48,
                frames: 8,
                animated: true,
            },
        )
        .unwrap();
        assert!(matches!(
            probe(&b[..48], Some(b.len() as u64), true),
            Probe::At(..)
        ));
        assert_eq!(
            file_bytes(
                "a.latent",
                &SimFile {
                    width: 1,
                    height: 1,
                    frames: 1,
                    animated: false
                }
            ),
            None
        );
    }
}
