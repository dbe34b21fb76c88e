//! Streaming sha256 of one file in constant memory, with reads overlapped with hashing.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;

/// Read size per `read` call, chosen with `cargo bench --bench hashing` (docs/PERFORMANCE.md):
/// small enough that each block is still in the L2 cache when it is hashed right after the
/// kernel copied it; 256 KiB and more cost ~50% more CPU time.
pub(crate) const DEFAULT_BUFFER_SIZE: usize = 128 << 10;

/// How a file is read while it is hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashOptions {
    /// Bytes requested per read (at least 1).
    pub buffer_size: usize,
    /// Read on a second thread while the calling thread hashes the previous buffer
    /// ([`crate::hashing::hash_files`] does so only while fewer files than cores are hashed).
    /// Off by default: measured, the hand-off costs more CPU than it overlaps.
    pub reader_thread: bool,
    /// Files hashed at the same time by [`crate::hashing::hash_files`] (0: one per CPU core).
    pub jobs: usize,
}

impl Default for HashOptions {
    fn default() -> Self {
        HashOptions {
            buffer_size: DEFAULT_BUFFER_SIZE,
            reader_thread: false,
            jobs: 0,
        }
    }
}

/// Size and digests of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHash {
    /// The path as given.
    pub path: PathBuf,
    /// File size in bytes.
    pub size: u64,
    /// Full-file sha256, lower-case hex.
    pub sha256: String,
    /// AutoV2: the first 10 hex digits of the sha256 (what Civitai and A1111 show).
    pub autov2: String,
    /// Bytes read from the file to produce this result (0 when it came from the cache).
    pub bytes_read: u64,
    /// Whether the digest came from the hash cache.
    pub cached: bool,
}

/// Why a file could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// Opening, inspecting or reading failed.
    #[error("cannot read '{path}': {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The path names something that is not a regular file.
    #[error("'{path}' is not a regular file (is it a directory?)")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Size or modification time changed between the start and the end of hashing.
    #[error("'{path}' changed while it was being hashed (still downloading or being written?); hash it again once it is complete")]
    Changed {
        /// The file.
        path: PathBuf,
    },
}

impl HashError {
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        HashError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The AutoV2 short hash of a lower-case hex sha256: its first 10 characters.
pub fn autov2(sha256_hex: &str) -> String {
    sha256_hex.chars().take(10).collect()
}

/// Hashes one file with the default options (streaming, constant memory).
pub fn hash_file(path: impl AsRef<Path>) -> Result<FileHash, HashError> {
    hash_file_with(path.as_ref(), &HashOptions::default())
}

/// Hashes one file with explicit read options. Never consults a cache.
pub fn hash_file_with(path: &Path, opts: &HashOptions) -> Result<FileHash, HashError> {
    let not_a_file = || HashError::NotAFile {
        path: path.to_path_buf(),
    };
    // Windows refuses to open a folder as a file (access denied): say what it is instead.
    let file = File::open(path).map_err(|e| {
        if path.is_dir() {
            not_a_file()
        } else {
            HashError::io(path, e)
        }
    })?;
    let before = file.metadata().map_err(|e| HashError::io(path, e))?;
    if !before.is_file() {
        return Err(not_a_file());
    }
    let (digest, bytes_read) = digest_file(file, opts).map_err(|e| HashError::io(path, e))?;
    let after = std::fs::metadata(path).map_err(|e| HashError::io(path, e))?;
    if changed(&before, &after) || bytes_read != before.len() {
        return Err(HashError::Changed {
            path: path.to_path_buf(),
        });
    }
    let sha256 = hex::encode(digest);
    Ok(FileHash {
        path: path.to_path_buf(),
        size: bytes_read,
        autov2: autov2(&sha256),
        sha256,
        bytes_read,
        cached: false,
    })
}

fn changed(before: &Metadata, after: &Metadata) -> bool {
    before.len() != after.len() || before.modified().ok() != after.modified().ok()
}

/// Streams `file` through sha256; returns the digest and the number of bytes read.
fn digest_file(file: File, opts: &HashOptions) -> io::Result<([u8; 32], u64)> {
    let size = opts.buffer_size.max(1);
    if opts.reader_thread {
        digest_overlapped(file, size)
    } else {
        digest_inline(file, size)
    }
}

fn digest_inline(mut file: File, size: usize) -> io::Result<([u8; 32], u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; size];
    let mut total = 0u64;
    loop {
        let n = fill(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hasher.finalize().into(), total))
}

/// Two buffers ping-pong between a reader thread and the hashing (calling) thread, so the
/// kernel copy of block N+1 overlaps the sha256 of block N. Memory: two buffers.
fn digest_overlapped(mut file: File, size: usize) -> io::Result<([u8; 32], u64)> {
    let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<(Vec<u8>, usize)>>(1);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(2);
    for _ in 0..2 {
        empty_tx.send(vec![0u8; size]).expect("receiver is alive");
    }
    // `move`: the channels end with the hashing side, so the reader can never wait forever.
    thread::scope(move |scope| {
        scope.spawn(move || {
            // Ends when the hasher drops `empty_tx`/`full_rx` (error) or at end of file.
            while let Ok(mut buf) = empty_rx.recv() {
                let result = fill(&mut file, &mut buf);
                let done = !matches!(result, Ok(n) if n > 0);
                if full_tx.send(result.map(|n| (buf, n))).is_err() || done {
                    break;
                }
            }
        });
        let mut hasher = Sha256::new();
        let mut total = 0u64;
        loop {
            let (buf, n) = full_rx
                .recv()
                .map_err(|_| io::Error::other("reader thread stopped unexpectedly"))??;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            total += n as u64;
            // The reader may already have finished; then the buffer is simply dropped.
            let _ = empty_tx.send(buf);
        }
        Ok((hasher.finalize().into(), total))
    })
}

/// Reads until `buf` is full or the file ends; returns the number of bytes read.
fn fill(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autov2_is_the_first_ten_hex_digits() {
        assert_eq!(autov2("0123456789abcdef"), "0123456789");
        assert_eq!(autov2("abc"), "abc");
    }

    #[test]
    fn a_directory_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = hash_file(dir.path()).unwrap_err();
        assert!(matches!(err, HashError::NotAFile { .. }), "{err}");
        assert!(err.to_string().contains("not a regular file"));
    }

    #[test]
    fn missing_file_error_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.safetensors");
        let err = hash_file(&missing).unwrap_err();
        assert!(err.to_string().contains("nope.safetensors"), "{err}");
    }
}
