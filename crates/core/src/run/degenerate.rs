//! Whether an image a run wrote is degenerate: one flat colour, or black all over (what a NaN
//! in the VAE decode gives once ComfyUI clips and casts it to 8 bits). Used to judge a
//! mitigation's product, where "it completed" is not enough. PNG only (what `SaveImage`
//! writes); the first image of an animated PNG. Pure: bytes in, verdict out.

use image::ImageFormat;

/// Most bytes of one output file read for the check.
pub(crate) const READ_CAP: usize = 64 * 1024 * 1024;

/// The PNG signature.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// `Ok(None)` for an image with content, `Ok(Some(why))` for a degenerate one, `Err` when the
/// bytes are not a PNG this can decode.
pub(crate) fn judge_png(bytes: &[u8]) -> Result<Option<String>, String> {
    if !bytes.starts_with(PNG_SIGNATURE) {
        return Err("not a PNG (only PNG images are checked)".into());
    }
    let image = image::load_from_memory_with_format(bytes, ImageFormat::Png)
        .map_err(|e| format!("cannot decode the PNG: {e}"))?
        .to_rgb8();
    let mut pixels = image.pixels();
    let Some(first) = pixels.next().copied() else {
        return Ok(Some("an image of no pixels".into()));
    };
    if pixels.any(|p| *p != first) {
        return Ok(None);
    }
    let [r, g, b] = first.0;
    Ok(Some(if [r, g, b] == [0, 0, 0] {
        format!(
            "black all over ({}×{}; what a NaN in the decode gives)",
            image.width(),
            image.height()
        )
    } else {
        format!(
            "one flat colour #{r:02x}{g:02x}{b:02x} ({}×{})",
            image.width(),
            image.height()
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageBuffer, Rgb};

    fn png(f: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let img = ImageBuffer::from_fn(16, 8, |x, y| Rgb(f(x, y)));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn flat_and_black_images_are_degenerate_and_content_is_not() {
        let black = judge_png(&png(|_, _| [0, 0, 0])).unwrap().unwrap();
        assert!(black.starts_with("black all over (16×8"), "{black}");
        let grey = judge_png(&png(|_, _| [128, 128, 128])).unwrap().unwrap();
        assert_eq!(grey, "one flat colour #808080 (16×8)");
        assert_eq!(judge_png(&png(|x, y| [x as u8, y as u8, 7])).unwrap(), None);
        // One pixel off is content.
        assert_eq!(
            judge_png(&png(|x, y| if (x, y) == (3, 3) {
                [1, 0, 0]
            } else {
                [0, 0, 0]
            }))
            .unwrap(),
            None
        );
    }

    #[test]
    fn comfyuis_own_pngs_of_solid_frames_are_flat() {
        // The captured outputs save `EmptyImage` frames (each one solid colour) through
        // SaveImage and SaveAnimatedPNG: real files with ComfyUI's metadata chunks.
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/comfyui-outputs/files/output"
        );
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "png") {
                let bytes = std::fs::read(&path).unwrap();
                let verdict = judge_png(&bytes).unwrap();
                assert!(
                    verdict.as_deref().is_some_and(
                        |v| v.starts_with("one flat colour #") || v.starts_with("black")
                    ),
                    "{}: {verdict:?}",
                    path.display()
                );
                checked += 1;
            }
        }
        assert!(checked > 0, "no PNG in {dir}");
    }

    #[test]
    fn what_is_not_a_png_is_not_judged() {
        assert!(judge_png(b"RIFF....WEBP")
            .unwrap_err()
            .contains("not a PNG"));
        assert!(judge_png(b"\x89PNG\r\n\x1a\nbroken")
            .unwrap_err()
            .contains("cannot decode"));
    }
}
