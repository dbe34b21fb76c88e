//! The byte-level pieces every container reader shares: bounded reads, skips, Latin-1 text,
//! and the one error type.

use std::io::{self, Read, Seek, SeekFrom};

/// The largest metadata value read (a workflow's JSON is rarely above a few MiB).
pub(crate) const MAX_VALUE: u64 = 64 << 20;

/// Why the workflow of a saved file could not be read.
#[derive(Debug)]
pub(crate) enum ExtractError {
    /// Reading failed.
    Io(io::Error),
    /// The container is damaged where its metadata is.
    Damaged(String),
    /// A `prompt`/`workflow` text that is not JSON.
    NotJson {
        /// The metadata key.
        key: &'static str,
        /// serde_json's message.
        message: String,
    },
}

impl From<io::Error> for ExtractError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ExtractError::Damaged("the file ends inside its metadata (is it cut short?)".into())
        } else {
            ExtractError::Io(e)
        }
    }
}

/// One metadata entry: its key as written and its text.
pub(crate) type Entry = (String, String);

/// Reads `len` bytes, refusing a value larger than [`MAX_VALUE`].
pub(crate) fn read_value<R: Read>(r: &mut R, len: u64) -> Result<Vec<u8>, ExtractError> {
    if len > MAX_VALUE {
        return Err(ExtractError::Damaged(format!(
            "a metadata entry claims {len} bytes (more than the {} MiB read)",
            MAX_VALUE >> 20
        )));
    }
    let mut buf = vec![0; len as usize];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// Skips `len` bytes forward.
pub(crate) fn skip<R: Seek>(r: &mut R, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(|_| io::Error::other("a length past 2^63"))?;
    r.seek(SeekFrom::Current(len)).map(drop)
}

/// ISO-8859-1 bytes as text (PNG `tEXt`/`zTXt`, ComfyUI's `comf` chunk, ID3 encoding 0).
pub(crate) fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// Fills `buf` as far as the file goes; how many bytes were read.
pub(crate) fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
