//! The files the simulator's output nodes write, as `/view` serves them: real container
//! structure with the size and frame count the node wrote, laid out like ComfyUI 0.3.64's
//! own outputs in `tests/fixtures/comfyui-outputs/files/`:
//! - PNG: signature, `IHDR`, `IDAT`, `IEND`, with real pixels a decoder reads ([`Look`]: a
//!   colour ramp, or one flat colour or all black under the `flat-product` and `nan-decode`
//!   faults); an animated one (SaveAnimatedPNG) has `acTL` right after `IHDR`, then `fcTL` +
//!   `IDAT` and `fcTL` + `fdAT` per further frame (`cap_apng_00001_.png`), every frame with
//!   the same pixels.
//!
//! The other containers carry no pixels:
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
    /// What the pixels look like.
    pub look: Look,
}

/// What the pixels of a written image look like (PNG only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) enum Look {
    /// A picture: red ramps across, green down (a product a client must accept).
    #[default]
    Picture,
    /// One flat colour everywhere (the `flat-product` fault).
    Flat,
    /// Every pixel black, as a VAE decode that produced NaN saves (the `nan-decode` fault).
    Black,
}

/// The flat colour of [`Look::Flat`].
pub(crate) const FLAT_RGB: [u8; 3] = [118, 124, 131];

/// The bytes and content type `/view` serves for a file named `name`; `None` for a name whose
/// format the simulator does not write.
pub(crate) fn file_bytes(name: &str, f: &SimFile) -> Option<(&'static str, Vec<u8>)> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    let (w, h, n) = (f.width as u32, f.height as u32, f.frames.max(1) as u32);
    Some(match ext.as_str() {
        "png" if f.animated => ("image/png", apng(w, h, n, f.look)),
        "png" => ("image/png", png(w, h, f.look)),
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

/// The zlib stream of one image's scanlines. Every row is Sub-filtered (PNG filter 1): the
/// first pixel as is, then each byte minus the one three bytes before, so a ramp or a flat
/// colour is the first pixel, one 3-byte step and that step repeated. The stream is one
/// fixed-Huffman deflate block: the first seven bytes of a row as literals, the rest as
/// copies at distance 3 (cheap to write even for large images, and any inflater reads it).
fn pixels(width: u32, height: u32, look: Look) -> Vec<u8> {
    let (w, h) = (width.max(1) as usize, height.max(1) as usize);
    let mut bits = Bits::default();
    bits.put(1, 1); // BFINAL
    bits.put(1, 2); // BTYPE = fixed Huffman
    let mut adler = Adler::default();
    let step = if look == Look::Picture { 1 } else { 0 };
    // Every row ends in the same bytes: the step repeated (its checksum is computed once).
    let row_len = 1 + 3 * w;
    let tail: Vec<u8> = [step, 0, 0]
        .iter()
        .copied()
        .cycle()
        .take(row_len.saturating_sub(4))
        .collect();
    let mut tail_sum = Adler::default();
    tail_sum.update(&tail);
    for y in 0..h {
        let first = match look {
            Look::Picture => [0, y as u8, 128],
            Look::Flat => FLAT_RGB,
            Look::Black => [0, 0, 0],
        };
        let head = [1, first[0], first[1], first[2]];
        adler.update(&head);
        adler.append(&tail_sum, tail.len());
        let row: Vec<u8> = head.iter().chain(tail.iter().take(3)).copied().collect();
        for &b in &row {
            bits.literal(b);
        }
        let mut left = row_len - row.len();
        while left >= 261 {
            bits.copy3(258);
            left -= 258;
        }
        while left > 10 {
            bits.copy3(8);
            left -= 8;
        }
        if left >= 3 {
            bits.copy3(left as u32);
        } else {
            // At most two bytes: the end of the tail.
            for &b in &tail[tail.len() - left..] {
                bits.literal(b);
            }
        }
    }
    bits.huffman(0, 7); // end of block (256)
    let mut out = vec![0x78, 0x01];
    out.extend(bits.finish());
    out.extend(adler.value().to_be_bytes());
    out
}

/// A deflate bit writer (least significant bit first).
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u32, len: u32) {
        self.acc |= (value as u64) << self.n;
        self.n += len;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code, which deflate stores most significant bit first.
    fn huffman(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }

    /// A literal byte in the fixed code.
    fn literal(&mut self, b: u8) {
        match b {
            0..=143 => self.huffman(0x30 + b as u32, 8),
            _ => self.huffman(0x190 + (b as u32 - 144), 9),
        }
    }

    /// A copy of `len` bytes (3 to 10, or 258) from three bytes back.
    fn copy3(&mut self, len: u32) {
        match len {
            // Symbols 257–264 (lengths 3–10) have 7-bit codes and no extra bits.
            3..=10 => self.huffman(len - 2, 7),
            // Symbol 285 (length 258): an 8-bit code, no extra bits.
            258 => self.huffman(0xc0 + 5, 8),
            _ => unreachable!("length {len} is not written"),
        }
        // Distance code 2 (distance 3): five bits, no extra bits.
        self.huffman(2, 5);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// The Adler-32 checksum that ends a zlib stream.
struct Adler {
    a: u32,
    b: u32,
}

impl Default for Adler {
    fn default() -> Self {
        Adler { a: 1, b: 0 }
    }
}

impl Adler {
    fn update(&mut self, data: &[u8]) {
        // 5552 bytes is the most that can be summed before the 32-bit sums must be reduced.
        for chunk in data.chunks(5552) {
            for &x in chunk {
                self.a += x as u32;
                self.b += self.a;
            }
            self.a %= 65521;
            self.b %= 65521;
        }
    }

    /// Continues the checksum with data of `len` bytes whose own checksum is `other`
    /// (zlib's `adler32_combine`).
    fn append(&mut self, other: &Adler, len: usize) {
        const BASE: u64 = 65521;
        let rem = len as u64 % BASE;
        let (a1, b1) = (self.a as u64, self.b as u64);
        let a = (a1 + other.a as u64 + BASE - 1) % BASE;
        let b = (b1 + other.b as u64 + rem * a1 % BASE + BASE - rem) % BASE;
        self.a = a as u32;
        self.b = b as u32;
    }

    fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

/// A still PNG of `width` × `height` with pixels that look like `look`.
fn png(width: u32, height: u32, look: Look) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr(width, height));
    png_chunk(&mut out, b"IDAT", &pixels(width, height, look));
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// An APNG of `frames` frames: `acTL` after `IHDR`, then a frame control and data chunk per
/// frame (the first frame's data in `IDAT`), every frame the same pixels.
fn apng(width: u32, height: u32, frames: u32, look: Look) -> Vec<u8> {
    let data = pixels(width, height, look);
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
            png_chunk(&mut out, b"IDAT", &data);
        } else {
            let mut fdat = seq.to_be_bytes().to_vec();
            fdat.extend(&data);
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

    /// The RGB pixels of a still PNG as a decoder reads them: chunks checked (CRC), `IDAT`
    /// inflated, every row's filter undone (only None and Sub occur here).
    fn decode_png(b: &[u8]) -> (u32, u32, Vec<[u8; 3]>) {
        use std::io::Read;
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        let (mut at, mut w, mut h, mut idat) = (8, 0, 0, Vec::new());
        while at < b.len() {
            let len = u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            let body = &b[at + 4..at + 8 + len];
            let crc = u32::from_be_bytes(b[at + 8 + len..at + 12 + len].try_into().unwrap());
            assert_eq!(crc32fast::hash(body), crc, "chunk CRC");
            match &body[..4] {
                b"IHDR" => {
                    w = u32::from_be_bytes(body[4..8].try_into().unwrap());
                    h = u32::from_be_bytes(body[8..12].try_into().unwrap());
                    assert_eq!(&body[12..14], &[8, 2], "8-bit RGB");
                }
                b"IDAT" => idat.extend(&body[4..]),
                _ => {}
            }
            at += 12 + len;
        }
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&idat[..])
            .read_to_end(&mut raw)
            .unwrap();
        let stride = 1 + 3 * w as usize;
        assert_eq!(raw.len(), stride * h as usize);
        let mut px = Vec::new();
        for row in raw.chunks(stride) {
            let mut line = row[1..].to_vec();
            match row[0] {
                0 => {}
                1 => {
                    for i in 3..line.len() {
                        line[i] = line[i].wrapping_add(line[i - 3]);
                    }
                }
                f => panic!("filter {f}"),
            }
            px.extend(line.chunks(3).map(|c| [c[0], c[1], c[2]]));
        }
        (w, h, px)
    }

    #[test]
    fn pngs_carry_pixels_a_decoder_reads_and_the_faults_flatten_them() {
        let file = |look| SimFile {
            width: 300,
            height: 200,
            frames: 1,
            animated: false,
            look,
        };
        let distinct = |px: &[[u8; 3]]| {
            let mut v = px.to_vec();
            v.sort();
            v.dedup();
            v
        };
        let (_, picture) = file_bytes("p.png", &file(Look::Picture)).unwrap();
        let (w, h, px) = decode_png(&picture);
        assert_eq!((w, h, px.len()), (300, 200, 60_000));
        assert!(distinct(&px).len() > 1000, "a picture, not a flat image");
        let (_, flat) = file_bytes("p.png", &file(Look::Flat)).unwrap();
        assert_eq!(distinct(&decode_png(&flat).2), vec![FLAT_RGB]);
        let (_, black) = file_bytes("p.png", &file(Look::Black)).unwrap();
        assert_eq!(distinct(&decode_png(&black).2), vec![[0, 0, 0]]);
        // Every width writes rows the decoder reads back whole.
        for width in [1, 2, 3, 4, 87, 90, 173, 1024] {
            let f = SimFile {
                width,
                height: 3,
                ..file(Look::Picture)
            };
            let (w, _, px) = decode_png(&file_bytes("p.png", &f).unwrap().1);
            assert_eq!(w as u64, width);
            assert_eq!(px[(width - 1) as usize], [(width - 1) as u8, 0, 128]);
        }
        // A big still stays small on the wire: the rows compress.
        let big = SimFile {
            width: 2048,
            height: 2048,
            ..file(Look::Picture)
        };
        assert!(file_bytes("p.png", &big).unwrap().1.len() < 256 * 1024);
    }

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
                look: Look::Picture,
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
                look: Look::Picture,
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
                    animated: false,
                    look: Look::Picture,
                }
            ),
            None
        );
    }
}
