//! One bisection per GPU: an operating-system lock on a file per server URL in the runs folder
//! (`runs/.lock-<hash of the URL>.json`).
//!
//! The lock is [`File::try_lock`] (an exclusive `flock` on Unix, `LockFileEx` on Windows): the
//! kernel holds it for the process and drops it the moment the process ends — exit, crash,
//! `kill -9`, or a zombie its parent has not reaped yet — so a dead holder never wedges it. The
//! file's JSON (host, pid, session id, start time) only says *who* holds it; nothing is decided
//! from it.
//!
//! No reader ever sees a half-written holder: every version of the file is written completely
//! and locked under a temporary name first, then published under the lock name (hard link when
//! there is none, rename over a released one), and never written again. The name is only changed
//! by the process holding the lock on the file currently under it, which it checks by identity
//! (device and inode) after locking; a process that locked a file which is no longer under the
//! name starts over. A new session id (known only after preflight) is published the same way.

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// What the lock file says about its holder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Process id of the holder.
    pub pid: u32,
    /// Host name of the holder.
    pub host: String,
    /// The server URL.
    pub server: String,
    /// The session being run (`(starting)` during preflight, before the session exists).
    pub session_id: String,
    /// RFC 3339: when the holder took the lock.
    pub since: String,
}

/// A held lock: the locked file stays open until drop, which removes the name and releases it.
#[derive(Debug)]
pub(crate) struct SessionLock {
    path: PathBuf,
    file: File,
    info: LockInfo,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another live process holds it (the operating system says so).
    #[error("{}", held_message(.holder.as_deref(), .server, .path))]
    Held {
        /// The holder, as its lock file says (None when it cannot be read).
        holder: Option<Box<LockInfo>>,
        /// The server URL.
        server: String,
        /// The lock file.
        path: PathBuf,
    },
    /// File system error.
    #[error("cannot take the lock {}: {source}", .path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn held_message(holder: Option<&LockInfo>, server: &str, path: &Path) -> String {
    match holder {
        Some(h) => format!(
            "another comfy-bisect session ({}, pid {} on {}, since {}) is using {server}; wait for \
             it to finish or stop it (the lock {} is released by the operating system the moment \
             that process ends)",
            h.session_id,
            h.pid,
            h.host,
            h.since,
            path.display()
        ),
        None => format!(
            "another comfy-bisect session is using {server} (its lock {} is held; the holder \
             could not be read); wait for it to finish or stop it",
            path.display()
        ),
    }
}

/// The lock file for `server` under `runs_dir`.
pub fn lock_path(runs_dir: &Path, server: &str) -> PathBuf {
    let normalized = server.trim().trim_end_matches('/').to_ascii_lowercase();
    let hash = crate::workflow::sha256_hex(normalized.as_bytes());
    runs_dir.join(format!(".lock-{}.json", &hash[..16]))
}

/// This machine's host name (best effort).
pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// Reads who holds the lock file `path` (None when absent, unreadable or not a holder record).
pub fn read_holder(path: &Path) -> Option<LockInfo> {
    let text = fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether `file` is the file currently under `path`.
#[cfg(unix)]
fn is_current(file: &File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let open = file.metadata()?;
    match fs::metadata(path) {
        Ok(named) => Ok(open.dev() == named.dev() && open.ino() == named.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `file` is the file currently under `path` (without inode numbers, only whether the
/// name still exists: a weaker check, enough where files are not replaced under an open handle).
#[cfg(not(unix))]
fn is_current(_file: &File, path: &Path) -> std::io::Result<bool> {
    Ok(path.exists())
}

/// A locked, completely written file under a temporary name next to `path`; removed on drop
/// unless published.
struct Candidate {
    tmp: PathBuf,
    file: Option<File>,
}

impl Candidate {
    fn new(path: &Path, info: &LockInfo) -> std::io::Result<Candidate> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(
            "{name}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut candidate = Candidate { tmp, file: None };
        // Nobody else knows the temporary name, so this cannot block.
        file.try_lock().map_err(std::io::Error::from)?;
        let text = serde_json::to_string_pretty(info).map_err(std::io::Error::other)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        candidate.file = Some(file);
        Ok(candidate)
    }

    /// Publishes under `path` when no file is there; false when one appeared meanwhile.
    fn link(&mut self, path: &Path) -> std::io::Result<Option<File>> {
        match fs::hard_link(&self.tmp, path) {
            Ok(()) => {
                let _ = fs::remove_file(&self.tmp);
                Ok(self.file.take())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!(
                    "cannot create {} ({e}; the runs folder needs a file system with hard links)",
                    path.display()
                ),
            )),
        }
    }

    /// Publishes under `path`, replacing the file there (the caller holds that file's lock).
    fn replace(mut self, path: &Path) -> std::io::Result<File> {
        fs::rename(&self.tmp, path)?;
        Ok(self.file.take().expect("a candidate is published once"))
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// How many times `acquire` starts over after losing a race on the name.
const ATTEMPTS: u32 = 1000;

impl SessionLock {
    /// Takes the lock for `server` in `runs_dir`; a file left by a process that is gone is taken
    /// over. Never waits: a live holder is an error naming it.
    pub(crate) fn acquire(
        runs_dir: &Path,
        server: &str,
        session_id: &str,
    ) -> Result<SessionLock, LockError> {
        let path = lock_path(runs_dir, server);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(runs_dir).map_err(io)?;
        let info = LockInfo {
            pid: std::process::id(),
            host: host_name(),
            server: server.to_string(),
            session_id: session_id.to_string(),
            since: super::journal::now_rfc3339(),
        };
        let mut candidate = Candidate::new(&path, &info).map_err(io)?;
        for _ in 0..ATTEMPTS {
            let current = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match candidate.link(&path).map_err(io)? {
                        Some(file) => return Ok(SessionLock { path, file, info }),
                        None => continue,
                    }
                }
                Err(e) => return Err(io(e)),
            };
            match current.try_lock() {
                Ok(()) => {
                    if !is_current(&current, &path).map_err(io)? {
                        continue;
                    }
                    // Left by a process that is gone (the kernel released its lock): replace it
                    // while holding its lock, so nobody else can replace it at the same time.
                    tracing::info!("taking over the released lock {}", path.display());
                    let file = candidate.replace(&path).map_err(io)?;
                    drop(current);
                    return Ok(SessionLock { path, file, info });
                }
                Err(TryLockError::WouldBlock) => {
                    let holder = read_from(current).map(Box::new);
                    return Err(LockError::Held {
                        holder,
                        server: server.to_string(),
                        path,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        Err(io(std::io::Error::other(
            "other processes keep replacing the lock file",
        )))
    }

    /// Publishes the real session id once it is known (the file is replaced whole).
    pub(crate) fn set_session(&mut self, session_id: &str) -> std::io::Result<()> {
        if self.info.session_id == session_id {
            return Ok(());
        }
        let mut info = self.info.clone();
        info.session_id = session_id.to_string();
        let candidate = Candidate::new(&self.path, &info)?;
        let file = candidate.replace(&self.path)?;
        // The old file is unlocked by this assignment, after the new one is in place.
        self.file = file;
        self.info = info;
        Ok(())
    }

    /// What the lock file says.
    #[cfg(test)]
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// The lock file.
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The holder record of an open lock file (None when unreadable, e.g. Windows' mandatory locks).
fn read_from(mut file: File) -> Option<LockInfo> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Remove the name while still holding the lock; whoever opened this file before locks
        // it afterwards, sees it is no longer under the name and starts over.
        if is_current(&self.file, &self.path).unwrap_or(false) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    const SERVER: &str = "http://127.0.0.1:8188";

    fn held_by(err: LockError) -> LockInfo {
        match err {
            LockError::Held { holder, .. } => *holder.expect("the holder is named"),
            other => panic!("expected Held, got {other}"),
        }
    }

    #[test]
    fn second_session_on_the_same_server_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = SessionLock::acquire(dir.path(), SERVER, "s1").unwrap();
        let err = SessionLock::acquire(dir.path(), &format!("{SERVER}/"), "s2").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("another comfy-bisect session (s1, pid"),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        let holder = held_by(err);
        assert_eq!(holder.pid, std::process::id());
        // Another server is independent.
        let other = SessionLock::acquire(dir.path(), "http://127.0.0.1:8189", "s3").unwrap();
        assert!(other.path().exists());
        drop(other);
        assert!(!lock_path(dir.path(), "http://127.0.0.1:8189").exists());
        drop(first);
        assert!(
            !lock_path(dir.path(), SERVER).exists(),
            "released = removed"
        );
        let again = SessionLock::acquire(dir.path(), SERVER, "s2").unwrap();
        assert_eq!(read_holder(again.path()).unwrap().session_id, "s2");
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn the_real_session_id_replaces_the_placeholder_and_the_lock_stays_held() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = SessionLock::acquire(dir.path(), SERVER, "(starting)").unwrap();
        assert_eq!(read_holder(lock.path()).unwrap().session_id, "(starting)");
        lock.set_session("20261201-0100-abcd").unwrap();
        let on_disk = read_holder(lock.path()).unwrap();
        assert_eq!(on_disk.session_id, "20261201-0100-abcd");
        assert_eq!(&on_disk, lock.info());
        let holder = held_by(SessionLock::acquire(dir.path(), SERVER, "other").unwrap_err());
        assert_eq!(holder.session_id, "20261201-0100-abcd");
    }

    #[test]
    fn a_file_nobody_holds_is_taken_over_whatever_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(dir.path(), SERVER);
        // A live-looking holder (pid 1, this host) whose lock the kernel has released: the
        // content does not matter, only the operating system's lock does.
        let leftover = LockInfo {
            pid: 1,
            host: host_name(),
            server: SERVER.into(),
            session_id: "old".into(),
            since: "2026-11-29T01:00:00Z".into(),
        };
        for text in [
            serde_json::to_string(&leftover).unwrap(),
            String::new(),
            "{\"pid\": 12".into(),
        ] {
            fs::write(&path, &text).unwrap();
            let lock = SessionLock::acquire(dir.path(), SERVER, "new").unwrap();
            assert_eq!(
                read_holder(lock.path()).unwrap().session_id,
                "new",
                "{text}"
            );
        }
    }

    #[test]
    fn of_many_sessions_started_at_the_same_instant_exactly_one_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let n = 8;
            let barrier = Arc::new(Barrier::new(n));
            let threads: Vec<_> = (0..n)
                .map(|i| {
                    let barrier = barrier.clone();
                    let runs = dir.path().to_path_buf();
                    std::thread::spawn(move || {
                        barrier.wait();
                        SessionLock::acquire(&runs, SERVER, &format!("r{round}-t{i}"))
                    })
                })
                .collect();
            let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            let holders: Vec<&SessionLock> =
                results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(holders.len(), 1, "round {round}");
            let winner = holders[0].info().session_id.clone();
            for r in &results {
                if let Err(e) = r {
                    assert!(e.to_string().contains(&winner), "round {round}: {e}");
                }
            }
        }
    }
}
