//! How journal files are written: atomically through [`crate::atomic`] (the crate's one
//! atomic-write implementation), now or with the fsyncs left to helper threads
//! ([`SyncBehind`]), with errors that name the file.

use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Why a journal file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// File system error, with the path.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a valid journal.
    #[error("{path} is not a comfy-bisect session journal: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

pub(super) fn io_err(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> JournalError {
    let path = path.to_path_buf();
    move |source| JournalError::Io {
        action,
        path,
        source,
    }
}

/// Writes `bytes` to `path` atomically (see [`crate::atomic`]): a temp file in the same folder,
/// fsync, rename, and an fsync of the folder so the rename itself survives a crash.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), JournalError> {
    crate::atomic::write_atomic(path, bytes).map_err(JournalError::from)
}

impl From<crate::atomic::AtomicWriteError> for JournalError {
    fn from(e: crate::atomic::AtomicWriteError) -> JournalError {
        JournalError::Io {
            action: e.action,
            path: e.path,
            source: e.source,
        }
    }
}

/// Writes pretty JSON atomically.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), JournalError> {
    write_atomic(path, &pretty_json(path, value)?)
}

fn pretty_json<T: Serialize>(path: &Path, value: &T) -> Result<Vec<u8>, JournalError> {
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| JournalError::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    text.push(b'\n');
    Ok(text)
}

/// Journal writes made durable in the background ("write-behind").
///
/// Each write lands at once with the same atomicity as [`write_atomic`] (a temp file renamed over
/// the old one: a reader sees the old or the new file, a killed process loses nothing), but its
/// fsyncs (the file, then its folder) run on a helper thread. [`SyncBehind::wait`] joins them and
/// reports the first failure; the session driver calls it before every submission, so the
/// fsyncs of one run's bookkeeping overlap each other and the driver's work instead of adding
/// up, and nothing the journal says is at risk while the GPU runs. Dropping it waits too.
///
/// Windows: a helper thread holds the file it fsyncs open, and Windows refuses to rename a file
/// over one that is open (`MoveFileExW`: access denied; std's POSIX-semantics fallback exists only
/// on recent NTFS), where Unix simply unlinks the old name and lets the open handle finish its
/// fsync. So on Windows, replacing a path first waits for the pending fsync of that same path
/// (its handle is closed when its thread ends); fsyncs of other files still run behind. On Unix
/// nothing waits: the guarantees are the same on both (every write atomic, durable by
/// [`SyncBehind::wait`]), only the overlap differs.
#[derive(Debug, Default)]
pub(crate) struct SyncBehind {
    pending: Vec<Pending>,
}

/// One background fsync: the file's path and its thread.
#[derive(Debug)]
struct Pending {
    path: PathBuf,
    thread: std::thread::JoinHandle<Result<(), JournalError>>,
}

impl Pending {
    fn join(self) -> Result<(), JournalError> {
        self.thread.join().unwrap_or_else(|_| {
            Err(JournalError::Invalid {
                path: self.path,
                reason: "the background fsync of this file panicked".into(),
            })
        })
    }
}

impl SyncBehind {
    /// Writes `bytes` to `path` atomically now; fsyncs it (and its folder) in the background.
    pub(crate) fn write_atomic(&mut self, path: &Path, bytes: &[u8]) -> Result<(), JournalError> {
        #[cfg(windows)]
        self.wait_for(path)?;
        let (file, dir) = crate::atomic::replace(path, bytes, crate::atomic::Durability::Later)?;
        self.sync_later(file, path, Some(dir));
        Ok(())
    }

    /// [`SyncBehind::write_atomic`] of pretty JSON.
    pub fn write_json_atomic<T: Serialize>(
        &mut self,
        path: &Path,
        value: &T,
    ) -> Result<(), JournalError> {
        let bytes = pretty_json(path, value)?;
        self.write_atomic(path, &bytes)
    }

    /// Fsyncs `file` (written as `path`) and then `dir`, if given, on a helper thread.
    pub(crate) fn sync_later(&mut self, file: fs::File, path: &Path, dir: Option<PathBuf>) {
        let path = path.to_path_buf();
        let target = path.clone();
        let thread = std::thread::spawn(move || {
            file.sync_all().map_err(io_err("cannot fsync", &target))?;
            if let Some(dir) = dir {
                crate::atomic::sync_dir(&dir);
            }
            Ok(())
        });
        self.pending.push(Pending { path, thread });
    }

    /// Waits until every write so far is durable; the first failure, if any.
    pub(crate) fn wait(&mut self) -> Result<(), JournalError> {
        join_all(self.pending.drain(..))
    }

    /// Waits until the writes of `path` so far are durable (and their files closed); the first
    /// failure, if any. Windows only: see [`SyncBehind`].
    #[cfg(any(windows, test))]
    pub(super) fn wait_for(&mut self, path: &Path) -> Result<(), JournalError> {
        let (same, others) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.path == path);
        self.pending = others;
        join_all(same)
    }

    /// Writes not yet known to be durable.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// Joins every thread; the first failure, if any.
fn join_all(pending: impl IntoIterator<Item = Pending>) -> Result<(), JournalError> {
    let mut first = Ok(());
    for p in pending {
        let result = p.join();
        if first.is_ok() {
            first = result;
        }
    }
    first
}

impl Drop for SyncBehind {
    fn drop(&mut self) {
        if let Err(e) = self.wait() {
            tracing::warn!("journal write not durable: {e}");
        }
    }
}
