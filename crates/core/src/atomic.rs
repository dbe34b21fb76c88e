//! Atomic file replacement, the one implementation every writer uses (session journal, run
//! records, reports, hash cache): the bytes go to a uniquely named temp file beside the target,
//! are fsynced, and the temp file is renamed over the target, then the folder is fsynced so the
//! rename survives a crash (on Windows a rename refused while another process has the target
//! open is tried again for up to 3 s). A reader sees the old file or the new one, never a mix,
//! and on any error the temp file is removed (no `.tmp` leftovers). The temp file is created
//! 0600, and the files appended to (event streams, the run index, `restart.log`) are opened by
//! [`open_private`], so every file under `runs/` is readable by its owner only.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A step of an atomic write that failed, with the path it concerned.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub(crate) struct AtomicWriteError {
    /// What was being done (`cannot create folder`, `cannot write`, …).
    pub action: &'static str,
    /// The file or folder.
    pub path: PathBuf,
    /// The error.
    #[source]
    pub source: std::io::Error,
}

/// Whether [`replace`] waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// fsync the file before the rename and the folder after it.
    Now,
    /// No fsync: the caller fsyncs the returned file and folder later (write-behind).
    Later,
}

/// Writes `bytes` to `path` atomically, fsynced (file, then folder).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    replace(path, bytes, Durability::Now).map(|_| ())
}

/// Writes `bytes` to a temp file beside `path` and renames it over `path`; the written file
/// (still open) and its folder, for a later fsync with [`Durability::Later`].
pub(crate) fn replace(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(File, PathBuf), AtomicWriteError> {
    let fail = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| AtomicWriteError {
            action,
            path,
            source,
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(fail("cannot create folder", &dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Dropped on any error below: the temp file is deleted.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(fail("cannot create a temp file in", &dir))?;
    tmp.write_all(bytes)
        .map_err(fail("cannot write", tmp.path()))?;
    if durability == Durability::Now {
        tmp.as_file()
            .sync_all()
            .map_err(fail("cannot fsync", tmp.path()))?;
    }
    let mut tmp = tmp;
    let mut waited = Duration::ZERO;
    let file = loop {
        match tmp.persist(path) {
            Ok(file) => break file,
            Err(e) if refused_for_now(&e.error) && waited < RENAME_PATIENCE => {
                // Doubling pauses from 10 ms, each at most 200 ms.
                let pause = (Duration::from_millis(10) + waited).min(Duration::from_millis(200));
                std::thread::sleep(pause);
                waited += pause;
                tmp = e.file;
            }
            Err(e) => return Err(fail("cannot rename a temp file to", path)(e.error)),
        }
    };
    if durability == Durability::Now {
        sync_dir(&dir);
    }
    Ok((file, dir))
}

/// How long a rename Windows refuses for the moment is tried again.
const RENAME_PATIENCE: Duration = Duration::from_secs(3);

/// Whether a rename was refused only for as long as another process has the target open
/// without sharing its deletion (Windows: access denied, a sharing or lock violation), as a
/// reader of the journal, an antivirus scanner or a backup tool may for a moment.
fn refused_for_now(e: &std::io::Error) -> bool {
    cfg!(windows)
        && (e.kind() == std::io::ErrorKind::PermissionDenied
            || matches!(e.raw_os_error(), Some(32 | 33)))
}

/// `OpenOptions` that create a file readable and writable by its owner only (0600 on Unix;
/// an existing file keeps its mode). Every append-only file of a session is opened through it.
pub(crate) fn open_private() -> std::fs::OpenOptions {
    #[allow(unused_mut)]
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// fsyncs a folder (so a rename in it is durable); best effort, as not every platform allows it.
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/session.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        let (_, folder) = replace(&path, b"three", Durability::Later).unwrap();
        assert_eq!(folder, dir.path().join("sub"));
        assert_eq!(std::fs::read(&path).unwrap(), b"three");
        assert_eq!(names(&dir.path().join("sub")), ["session.json"]);
    }

    #[test]
    fn a_failed_write_leaves_no_temp_file_and_the_old_content() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a folder that is not empty: the rename fails.
        let target = dir.path().join("report.md");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"x").unwrap();
        let e = write_atomic(&target, b"new").unwrap_err();
        assert!(e.to_string().contains("report.md"), "{e}");
        assert_eq!(names(dir.path()), ["report.md"]);
        assert_eq!(names(&target), ["keep"]);
    }

    /// Windows: a rename refused while another process holds the target open without sharing
    /// its deletion (a reader, an antivirus scanner) goes through once the handle is closed.
    #[cfg(windows)]
    #[test]
    fn a_rename_refused_for_a_moment_is_tried_again() {
        use std::os::windows::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        write_atomic(&path, b"one").unwrap();
        // Shared for reading only: no deletion, so no rename over it, while it is open.
        let held = std::fs::OpenOptions::new()
            .read(true)
            .share_mode(1)
            .open(&path)
            .unwrap();
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        });
        write_atomic(&path, b"two").unwrap();
        reader.join().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["session.json"]);
    }
}
