//! PNG and APNG: the text chunks `tEXt`, `zTXt`, `iTXt` (SaveImage writes `tEXt` through PIL's
//! `PngInfo.add_text`) and ComfyUI's own `comf` chunk after the image data (SaveAnimatedPNG:
//! `key\0text`, Latin-1). Image data chunks are skipped with seeks; CRCs are not checked.

use super::read::{latin1, read_value, skip, Entry, ExtractError, MAX_VALUE};
use std::io::{Read, Seek};

/// The text entries of a PNG whose key is `prompt` or `workflow`.
pub(crate) fn entries<R: Read + Seek>(r: &mut R) -> Result<Vec<Entry>, ExtractError> {
    let mut sig = [0; 8];
    r.read_exact(&mut sig)?;
    let mut out = Vec::new();
    loop {
        let mut head = [0; 8];
        if super::read::read_up_to(r, &mut head)? < 8 {
            // No IEND: a cut-short file still gives what it holds.
            break;
        }
        let len = u64::from(u32::from_be_bytes([head[0], head[1], head[2], head[3]]));
        let kind = &head[4..8];
        match kind {
            b"tEXt" | b"zTXt" | b"iTXt" | b"comf" => {
                let data = read_value(r, len)?;
                if let Some(entry) = text_chunk(kind, &data)? {
                    out.push(entry);
                }
                skip(r, 4)?;
            }
            b"IEND" => break,
            _ => skip(r, len + 4)?,
        }
    }
    Ok(out)
}

/// One text chunk as (key, text), when its key is one the savers write.
fn text_chunk(kind: &[u8], data: &[u8]) -> Result<Option<Entry>, ExtractError> {
    let Some(nul) = data.iter().position(|&b| b == 0) else {
        return Ok(None);
    };
    let key = latin1(&data[..nul]);
    if !matches!(key.as_str(), "prompt" | "workflow") {
        return Ok(None);
    }
    let rest = &data[nul + 1..];
    let text = match kind {
        // Keyword, NUL, compression method (0 = zlib), compressed Latin-1 text.
        b"zTXt" => latin1(&inflate(rest.get(1..).unwrap_or_default())?),
        // Keyword, NUL, compression flag, method, language tag NUL, translated keyword NUL,
        // UTF-8 text (zlib-compressed when the flag is 1).
        b"iTXt" => {
            let [flag, _method, tail @ ..] = rest else {
                return Ok(None);
            };
            let mut parts = tail.splitn(3, |&b| b == 0);
            let (Some(_lang), Some(_translated), Some(text)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Ok(None);
            };
            let bytes = if *flag == 1 {
                inflate(text)?
            } else {
                text.to_vec()
            };
            String::from_utf8(bytes)
                .map_err(|_| ExtractError::Damaged(format!("the iTXt `{key}` is not UTF-8")))?
        }
        _ => latin1(rest),
    };
    Ok(Some((key, text)))
}

/// zlib-inflates a compressed text, at most [`MAX_VALUE`] bytes of it.
fn inflate(data: &[u8]) -> Result<Vec<u8>, ExtractError> {
    miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(data, MAX_VALUE as usize).map_err(|e| {
        ExtractError::Damaged(format!("a compressed text chunk does not inflate: {e}"))
    })
}
