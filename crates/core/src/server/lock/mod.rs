//! One bisection per GPU: an operating-system lock on a file per server, held in the user's
//! lock folder (`lock_dir`: `$COMFY_BISECT_LOCK_DIR`, else the first usable of
//! `$XDG_RUNTIME_DIR/comfy-bisect`, the user's cache folder and a per-user temporary folder;
//! never a symbolic link, a file, or a folder of another user) so every runs folder sees it,
//! and keyed by the server's *resolved* address (`server_key`: `localhost`, `127.0.0.1`,
//! `[::1]` and this machine's LAN address are one server; scheme, path and trailing slash do
//! not matter). ComfyUI reports no identity of its own (no id or PID in `/system_stats`), so
//! the address is the key.
//!
//! The lock is [`File::try_lock`] (an exclusive `flock` on Unix, `LockFileEx` on Windows): the
//! kernel holds it for the process and drops it the moment the process ends — exit, crash,
//! `kill -9`, or a zombie its parent has not reaped yet — so a dead holder never wedges it. The
//! file's JSON (host, pid, session id, start time) only says *who* holds it; nothing is decided
//! from it.
//!
//! **Who holds.** A process holds the lock when it holds the operating system's lock on the file
//! that is under the lock name, checked by the file's identity *after* locking it (device and
//! inode on Unix, volume and file id on Windows); one that locked a file no longer under the name
//! starts over. The name changes in two ways only: it is *created* when absent (a completely
//! written, already locked file published by hard link, which fails when a file is there), and
//! it is *replaced or removed* only by the process holding the lock on the file under it. Hence:
//! two holders would both hold the kernel's lock on the one file under the name, which the kernel
//! does not allow; and nobody can change the name under a holder (a link needs the name absent,
//! a replacement or removal needs the holder's lock), so a holder stays one until it lets go.
//!
//! **Taking over** a file left by a process that is gone is a claim in place: lock the file that
//! is there through a handle of our own, check it is still the one under the name, and it is
//! ours. Nothing is renamed over it to win: two takers race for that one file's kernel lock, and
//! the loser is told the lock is held. Only then is the new holder record published, by the one
//! way the platform allows without a reader ever seeing half of it (`Publish`, also used for
//! the real session id, known only after preflight):
//! - Unix: a complete, locked file is renamed over the name (allowed over an open file), and the
//!   old one unlocked after. `flock` is advisory: anyone may read the record at any time, so it
//!   is never written where it can be read.
//! - Windows: the record is rewritten through the holder's handle. Renaming over a file that is
//!   open — ours, or one the dead holder's process left open in a child — fails on many file
//!   systems (FAT, network shares, NTFS without POSIX semantics, wine); and `LockFileEx` is
//!   mandatory, so no other process can read a locked record, whole or half. A name that is
//!   being removed while another handle is still open to it is "delete pending" there: opening
//!   or linking it is refused (access denied) until that handle closes, which counts as a race
//!   lost, to start over.
//!
//! A holder removes the name while still holding the lock, on drop.

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

mod place;
pub(crate) use place::{lock_dir, lock_path_in, server_key, usable};
pub use place::{lock_path, LOCK_DIR_ENV};

/// What the lock file says about its holder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Process id of the holder.
    pub pid: u32,
    /// Host name of the holder.
    pub host: String,
    /// The server URL.
    pub server: String,
    /// The resolved address the lock is keyed by (`server_key`; empty in older files).
    #[serde(default)]
    pub address: String,
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
    publish: Publish,
}

/// How a holder publishes a new holder record under the lock name (the module comment says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Publish {
    /// A complete, locked file renamed over the name (Unix).
    Rename,
    /// Rewritten through the holder's own handle, the file staying the same (Windows).
    InPlace,
}

/// This platform's way ([`Publish`]); tests run both.
const PUBLISH: Publish = if cfg!(windows) {
    Publish::InPlace
} else {
    Publish::Rename
};

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
    /// No lock folder can be used.
    #[error("cannot take the server's lock: {reason}")]
    Folder {
        /// Why, with what was tried.
        reason: String,
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

/// What a refused session is told to do when it means to share the server.
const SHARE_HINT: &str = "(`--allow-shared-server` runs anyway, on purpose: both sessions' \
     memory peaks and out-of-memory errors then include the other's)";

fn held_message(holder: Option<&LockInfo>, server: &str, path: &Path) -> String {
    match holder {
        Some(h) => {
            let same = if h.server != server {
                format!(" (the same server as {server})")
            } else {
                String::new()
            };
            format!(
                "another comfy-bisect session ({}, pid {} on {}, since {}) is using {}{same}; wait \
                 for it to finish or stop it (the lock {} is released by the operating system the \
                 moment that process ends) {SHARE_HINT}",
                h.session_id,
                h.pid,
                h.host,
                h.since,
                h.server,
                path.display()
            )
        }
        None => format!(
            "another comfy-bisect session is using {server} (its lock {} is held; the holder \
             could not be read); wait for it to finish or stop it {SHARE_HINT}",
            path.display()
        ),
    }
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

/// Whether `file` is the file currently under `path` (the same [`crate::fileid`]: device and
/// inode, or volume and file id; a name being removed is no longer anyone's).
fn is_current(file: &File, path: &Path) -> std::io::Result<bool> {
    let named = match File::open(path) {
        Ok(named) => named,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || being_removed(&e) => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    Ok(crate::fileid::of(file)? == crate::fileid::of(&named)?)
}

/// Whether an error opening or linking the lock name means it is being removed while a handle
/// is still open to it (Windows' "delete pending", reported as access denied): a race lost.
fn being_removed(e: &std::io::Error) -> bool {
    cfg!(windows) && e.kind() == std::io::ErrorKind::PermissionDenied
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
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists || being_removed(&e) => {
                Ok(None)
            }
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
    /// Takes the lock for `server` in the lock folder ([`lock_dir`]).
    pub(crate) fn acquire(server: &str, session_id: &str) -> Result<SessionLock, LockError> {
        let dir = lock_dir().map_err(|reason| LockError::Folder { reason })?;
        SessionLock::acquire_in(&dir.path, server, session_id)
    }

    /// Takes the lock for `server` unless `shared` (`--allow-shared-server`): then a lock held
    /// by another session is not an error (None, with a warning), and a free one is still taken
    /// so that sessions without the flag are refused while this one runs.
    pub(crate) fn acquire_or_share(
        server: &str,
        session_id: &str,
        shared: bool,
    ) -> Result<Option<SessionLock>, LockError> {
        match SessionLock::acquire(server, session_id) {
            Ok(lock) => Ok(Some(lock)),
            Err(e @ LockError::Held { .. }) if shared => {
                tracing::warn!("--allow-shared-server: running anyway; {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Takes the lock for `server` in the folder `dir`; a file left by a process that is gone is
    /// taken over. Never waits: a live holder is an error naming it.
    pub(crate) fn acquire_in(
        dir: &Path,
        server: &str,
        session_id: &str,
    ) -> Result<SessionLock, LockError> {
        SessionLock::acquire_with(dir, server, session_id, PUBLISH)
    }

    /// [`SessionLock::acquire_in`], publishing the holder record the way `publish` says.
    fn acquire_with(
        dir: &Path,
        server: &str,
        session_id: &str,
        publish: Publish,
    ) -> Result<SessionLock, LockError> {
        let path = lock_path_in(dir, server);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        usable(dir).map_err(|why| {
            io(std::io::Error::other(format!(
                "the lock folder {} cannot be used: {why}",
                dir.display()
            )))
        })?;
        let info = LockInfo {
            pid: std::process::id(),
            host: host_name(),
            server: server.to_string(),
            address: server_key(server),
            session_id: session_id.to_string(),
            since: crate::units::now_rfc3339(),
        };
        // Published by hard link when the name is free, or renamed over a released file.
        let mut candidate = Candidate::new(&path, &info).map_err(io)?;
        let mut removing = None;
        for _ in 0..ATTEMPTS {
            // Written through this handle when it is taken over in place.
            let opened = OpenOptions::new()
                .read(true)
                .write(publish == Publish::InPlace)
                .open(&path);
            let current = match opened {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match candidate.link(&path).map_err(io)? {
                        Some(file) => {
                            return Ok(SessionLock {
                                path,
                                file,
                                info,
                                publish,
                            })
                        }
                        None => continue,
                    }
                }
                Err(e) if being_removed(&e) => {
                    removing = Some(e);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                Err(e) => return Err(io(e)),
            };
            match current.try_lock() {
                Ok(()) => {
                    if !is_current(&current, &path).map_err(io)? {
                        continue;
                    }
                    // Left by a process that is gone (the kernel released its lock): the file
                    // under the name is now locked by us, which makes us the holder. Only the
                    // record still names the old one.
                    tracing::info!("taking over the released lock {}", path.display());
                    let mut lock = SessionLock {
                        path,
                        file: current,
                        info: info.clone(),
                        publish,
                    };
                    if let Err(source) = lock.publish(info, Some(candidate)) {
                        // Dropping `lock` removes the name and lets go.
                        return Err(LockError::Io {
                            path: lock.path.clone(),
                            source,
                        });
                    }
                    return Ok(lock);
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
        Err(io(std::io::Error::other(match removing {
            Some(e) => format!("the lock file stays in the middle of being removed ({e})"),
            None => "other processes keep replacing the lock file".into(),
        })))
    }

    /// Publishes the real session id once it is known ([`Publish`]; the lock stays held).
    pub(crate) fn set_session(&mut self, session_id: &str) -> std::io::Result<()> {
        if self.info.session_id == session_id {
            return Ok(());
        }
        let mut info = self.info.clone();
        info.session_id = session_id.to_string();
        self.publish(info, None)
    }

    /// Makes `info` the holder record under the name, the way `self.publish` says; `candidate`
    /// is a file already written with it (one is written when None).
    fn publish(&mut self, info: LockInfo, candidate: Option<Candidate>) -> std::io::Result<()> {
        match self.publish {
            Publish::Rename => {
                let candidate = match candidate {
                    Some(c) => c,
                    None => Candidate::new(&self.path, &info)?,
                };
                // The old file is unlocked by this assignment, after the new one is in place.
                self.file = candidate.replace(&self.path)?;
            }
            Publish::InPlace => rewrite(&mut self.file, &info)?,
        }
        self.info = info;
        Ok(())
    }

    /// What the lock file says.
    #[cfg(test)]
    pub(crate) fn info(&self) -> &LockInfo {
        &self.info
    }

    /// The lock file.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Rewrites the holder record through `file`'s handle: the new text over the old from the start,
/// then cut to its length, and flushed to disk.
fn rewrite(file: &mut File, info: &LockInfo) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let text = serde_json::to_string_pretty(info).map_err(std::io::Error::other)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.set_len(text.len() as u64)?;
    file.sync_all()
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
        let first = SessionLock::acquire_in(dir.path(), SERVER, "s1").unwrap();
        let err = SessionLock::acquire_in(dir.path(), &format!("{SERVER}/"), "s2").unwrap_err();
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
        let other = SessionLock::acquire_in(dir.path(), "http://127.0.0.1:8189", "s3").unwrap();
        assert!(other.path().exists());
        drop(other);
        assert!(!lock_path_in(dir.path(), "http://127.0.0.1:8189").exists());
        drop(first);
        assert!(
            !lock_path_in(dir.path(), SERVER).exists(),
            "released = removed"
        );
        let again = SessionLock::acquire_in(dir.path(), SERVER, "s2").unwrap();
        assert_eq!(read_holder(again.path()).unwrap().session_id, "s2");
        let names = || -> Vec<String> {
            fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        // No temporary name is left behind: on Unix at once; on Windows the holder's handle
        // may keep it as "delete pending" (wine, or a file system without POSIX deletes)
        // until the lock is released.
        if cfg!(not(windows)) {
            assert_eq!(names().len(), 1, "{:?}", names());
        }
        drop(again);
        assert!(names().is_empty(), "{:?}", names());
    }

    #[test]
    fn the_real_session_id_replaces_the_placeholder_and_the_lock_stays_held() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = SessionLock::acquire_in(dir.path(), SERVER, "(starting)").unwrap();
        assert_eq!(read_holder(lock.path()).unwrap().session_id, "(starting)");
        lock.set_session("20261201-0100-abcd").unwrap();
        let on_disk = read_holder(lock.path()).unwrap();
        assert_eq!(on_disk.session_id, "20261201-0100-abcd");
        assert_eq!(&on_disk, lock.info());
        let holder = held_by(SessionLock::acquire_in(dir.path(), SERVER, "other").unwrap_err());
        assert_eq!(holder.session_id, "20261201-0100-abcd");
    }

    #[test]
    fn a_file_nobody_holds_is_taken_over_whatever_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path_in(dir.path(), SERVER);
        // A live-looking holder (pid 1, this host) whose lock the kernel has released: the
        // content does not matter, only the operating system's lock does.
        let leftover = LockInfo {
            pid: 1,
            host: host_name(),
            server: SERVER.into(),
            address: server_key(SERVER),
            session_id: "old".into(),
            since: "2026-11-29T01:00:00Z".into(),
        };
        for text in [
            serde_json::to_string(&leftover).unwrap(),
            String::new(),
            "{\"pid\": 12".into(),
        ] {
            fs::write(&path, &text).unwrap();
            let lock = SessionLock::acquire_in(dir.path(), SERVER, "new").unwrap();
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
                        SessionLock::acquire_in(&runs, SERVER, &format!("r{round}-t{i}"))
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

    /// A holder record left at the lock name by a process that is gone (no kernel lock on it).
    fn leave_released(dir: &Path, session_id: &str) -> PathBuf {
        let path = lock_path_in(dir, SERVER);
        let leftover = LockInfo {
            pid: 1,
            host: host_name(),
            server: SERVER.into(),
            address: server_key(SERVER),
            session_id: session_id.into(),
            since: "2026-11-29T01:00:00Z".into(),
        };
        fs::write(&path, serde_json::to_string_pretty(&leftover).unwrap()).unwrap();
        path
    }

    /// The holder record as `lock`'s file holds it (read through the holder's handle: on
    /// Windows no other can read a locked file).
    fn record(lock: &SessionLock) -> Option<LockInfo> {
        use std::io::{Seek, SeekFrom};
        let mut file = &lock.file;
        file.seek(SeekFrom::Start(0)).unwrap();
        read_from(file.try_clone().unwrap())
    }

    #[test]
    fn of_takers_of_a_released_lock_racing_each_other_exactly_one_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        // Windows refuses the rename over the released file, which the taker holds open.
        let ways: &[Publish] = if cfg!(windows) {
            &[Publish::InPlace]
        } else {
            &[Publish::Rename, Publish::InPlace]
        };
        for &publish in ways {
            for (round, n) in (0..40).map(|r| (r, if r % 2 == 0 { 2 } else { 8 })) {
                let path = leave_released(dir.path(), "gone");
                let barrier = Arc::new(Barrier::new(n));
                let threads: Vec<_> = (0..n)
                    .map(|i| {
                        let barrier = barrier.clone();
                        let dir = dir.path().to_path_buf();
                        let id = format!("{publish:?}-r{round}-t{i}");
                        std::thread::spawn(move || {
                            barrier.wait();
                            SessionLock::acquire_with(&dir, SERVER, &id, publish)
                        })
                    })
                    .collect();
                let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
                let what = format!("{publish:?}, round {round}, {n} takers");
                let holders: Vec<&SessionLock> =
                    results.iter().filter_map(|r| r.as_ref().ok()).collect();
                assert_eq!(holders.len(), 1, "{what}: {results:?}");
                for r in &results {
                    if let Err(e) = r {
                        assert!(matches!(e, LockError::Held { .. }), "{what}: {e}");
                    }
                }
                // The one holder is the one the file under the name names, and still holds it.
                let winner = holders[0].info().clone();
                assert!(is_current(&holders[0].file, &path).unwrap(), "{what}");
                assert_eq!(record(holders[0]).as_ref(), Some(&winner), "{what}");
                #[cfg(unix)]
                assert_eq!(read_holder(&path).as_ref(), Some(&winner), "{what}");
                let late = SessionLock::acquire_with(dir.path(), SERVER, "late", publish);
                assert!(matches!(late, Err(LockError::Held { .. })), "{what}");
                drop(results);
                assert!(!path.exists(), "{what}: released = removed");
            }
        }
    }

    /// The file under `path`: device and inode, or volume and file id.
    fn identity(path: &Path) -> String {
        format!(
            "{:?}",
            crate::fileid::of(&File::open(path).unwrap()).unwrap()
        )
    }

    /// Windows' way, run everywhere: the released file itself is claimed and rewritten through
    /// the taker's handle, never replaced, even with the dead holder's handle still open.
    /// Renaming over that open file, as takeovers did, is refused on many Windows file systems
    /// (and under wine: access denied); Linux allows it, so there this checks the file's
    /// identity instead, which the rename used to change.
    #[test]
    fn in_place_a_released_file_is_claimed_and_rewritten_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = leave_released(dir.path(), &"a long session id ".repeat(20));
        let before = identity(&path);
        // The dead holder's handle, left open.
        let leftover = File::open(&path).unwrap();
        let mut lock =
            SessionLock::acquire_with(dir.path(), SERVER, "new", Publish::InPlace).unwrap();
        assert_eq!(
            identity(&path),
            before,
            "the same file, not a new one renamed over it"
        );
        // The longer old record is gone whole: the file is exactly the new one.
        assert_eq!(record(&lock).as_ref(), Some(lock.info()));
        lock.set_session("20261201-0100-abcd").unwrap();
        assert_eq!(identity(&path), before);
        assert_eq!(record(&lock).unwrap().session_id, "20261201-0100-abcd");
        #[cfg(unix)]
        assert_eq!(read_holder(&path).as_ref(), Some(lock.info()));
        let refused = SessionLock::acquire_with(dir.path(), SERVER, "other", Publish::InPlace);
        assert!(
            matches!(refused, Err(LockError::Held { .. })),
            "{refused:?}"
        );
        drop(lock);
        drop(leftover);
        assert!(!path.exists());
        // Nothing but the lock file was ever left in the folder.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn localhost_and_127_0_0_1_share_one_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _first = SessionLock::acquire_in(dir.path(), "http://localhost:8188", "s1").unwrap();
        let err = SessionLock::acquire_in(dir.path(), SERVER, "s2").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(
                "is using http://localhost:8188 (the same server as http://127.0.0.1:8188)"
            ),
            "{text}"
        );
        assert!(text.contains("--allow-shared-server"), "{text}");
    }
}
