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

/// The environment variable naming the folder of the per-server locks (tests, unusual setups).
pub const LOCK_DIR_ENV: &str = "COMFY_BISECT_LOCK_DIR";

/// The lock folder in use, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockDir {
    /// The folder.
    pub path: PathBuf,
    /// Where it came from, in words (`$XDG_RUNTIME_DIR`, `a per-user temporary folder`…).
    pub from: &'static str,
}

/// The lock folders to try, in order: `$XDG_RUNTIME_DIR/comfy-bisect` (the user's runtime
/// folder), `comfy-bisect/locks` in the user's cache folder (`$XDG_CACHE_HOME` or `~/.cache`;
/// `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows), then a per-user folder in the
/// temporary folder (`comfy-bisect-UID` on Unix).
fn candidates() -> Vec<LockDir> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let mut out = Vec::new();
    if let Some(dir) = var("XDG_RUNTIME_DIR") {
        out.push(LockDir {
            path: dir.join("comfy-bisect"),
            from: "$XDG_RUNTIME_DIR",
        });
    }
    let cache = if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    };
    if let Some(dir) = cache {
        out.push(LockDir {
            path: dir.join("comfy-bisect").join("locks"),
            from: "the user's cache folder",
        });
    }
    #[cfg(unix)]
    let temp = format!("comfy-bisect-{}", euid());
    #[cfg(not(unix))]
    let temp = "comfy-bisect-locks".to_string();
    out.push(LockDir {
        path: std::env::temp_dir().join(temp),
        from: "a per-user temporary folder",
    });
    out
}

/// The effective user id.
#[cfg(unix)]
fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Makes `dir` the lock folder: creates it (mode 0700 on Unix) when it is missing, and refuses
/// one that is not a real folder of this user's own: a file in its place, a symbolic link
/// (which could put the locks anywhere, `/` included), another user's folder or one others may
/// write to. Why not, in words.
pub(crate) fn usable(dir: &Path) -> Result<(), String> {
    let md = match fs::symlink_metadata(dir) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create_private_dir(dir).map_err(|e| format!("cannot create it: {e}"))?;
            fs::symlink_metadata(dir).map_err(|e| format!("cannot read it: {e}"))?
        }
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    if md.file_type().is_symlink() {
        let to = fs::read_link(dir)
            .map(|t| format!(" (to {})", t.display()))
            .unwrap_or_default();
        return Err(format!(
            "it is a symbolic link{to}; a lock folder must be a real folder of your own"
        ));
    }
    if !md.is_dir() {
        return Err("a file is in its place, not a folder: remove the file".into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = euid();
        if md.uid() != me {
            return Err(format!(
                "it belongs to another user (uid {}, you are {me}), who could read or replace the locks",
                md.uid()
            ));
        }
        if md.mode() & 0o022 != 0 {
            return Err(format!(
                "others may write to it (mode {:o}); `chmod go-w` it",
                md.mode() & 0o777
            ));
        }
    }
    Ok(())
}

/// The folder of the per-server locks, the same whatever the runs folder:
/// `$COMFY_BISECT_LOCK_DIR` when set (an error when it cannot be used), else the first of
/// [`candidates`] that can be ([`usable`]); each one passed over is logged with why. The error
/// says what was tried.
pub(crate) fn lock_dir() -> Result<LockDir, String> {
    if let Some(dir) = std::env::var_os(LOCK_DIR_ENV).filter(|d| !d.is_empty()) {
        let path = PathBuf::from(dir);
        return match usable(&path) {
            Ok(()) => Ok(LockDir {
                path,
                from: "$COMFY_BISECT_LOCK_DIR",
            }),
            Err(why) => Err(format!(
                "the lock folder {} (${LOCK_DIR_ENV}) cannot be used: {why}; point \
                 {LOCK_DIR_ENV} at a folder of your own, or unset it",
                path.display()
            )),
        };
    }
    pick(candidates())
}

/// The first of `list` that can be used ([`usable`]), or what was tried.
fn pick(list: Vec<LockDir>) -> Result<LockDir, String> {
    let mut tried = Vec::new();
    for c in list {
        match usable(&c.path) {
            Ok(()) => {
                for t in &tried {
                    tracing::warn!("lock folder passed over: {t}");
                }
                tracing::info!("lock folder: {} ({})", c.path.display(), c.from);
                return Ok(c);
            }
            Err(why) => tried.push(format!("{} ({}): {why}", c.path.display(), c.from)),
        }
    }
    Err(format!(
        "no lock folder can be used ({}); set {LOCK_DIR_ENV} to a folder of your own",
        tried.join("; ")
    ))
}

/// The key of the server a URL reaches: its host resolved to IP addresses (sorted, every
/// address of this machine — loopback, unspecified, or one of its interfaces such as its LAN
/// address — written `this machine`) and the port (the scheme's default when
/// none is given). Scheme, credentials, path, query and a trailing slash do not count, so
/// `http://localhost:8188`, `127.0.0.1:8188` and `https://[::1]:8188/prefix/` are one server.
/// A host that does not resolve is keyed by its lower-cased name.
pub(crate) fn server_key(server: &str) -> String {
    use std::net::{IpAddr, ToSocketAddrs};
    let text = server.trim();
    let with_scheme = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    let url = match reqwest::Url::parse(&with_scheme) {
        Ok(url) if url.host().is_some() => url,
        _ => return text.trim_end_matches('/').to_ascii_lowercase(),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let ips: Vec<IpAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (bare, port)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .unwrap_or_default(),
    };
    let local = |ip: &IpAddr| {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(*ip),
            v4 => *v4,
        };
        crate::host::process::is_local_ip(ip)
    };
    let mut names: Vec<String> = ips
        .iter()
        .map(|ip| {
            if local(ip) {
                "this machine".to_string()
            } else {
                ip.to_string()
            }
        })
        .collect();
    names.sort();
    names.dedup();
    let host = if names.is_empty() {
        host.to_ascii_lowercase()
    } else {
        names.join(",")
    };
    format!("{host} port {port}")
}

/// The lock file for `server` in the lock folder (`lock_dir`; the first candidate when none
/// can be used).
pub fn lock_path(server: &str) -> PathBuf {
    let dir = lock_dir()
        .map(|d| d.path)
        .unwrap_or_else(|_| candidates().remove(0).path);
    lock_path_in(&dir, server)
}

/// The lock file for `server` in `dir`.
pub(crate) fn lock_path_in(dir: &Path, server: &str) -> PathBuf {
    let hash = crate::workflow::sha256_hex(server_key(server).as_bytes());
    dir.join(format!("server-{}.lock.json", &hash[..16]))
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
        #[cfg(not(windows))]
        {
            let candidate = Candidate::new(&self.path, &info)?;
            let file = candidate.replace(&self.path)?;
            // The old file is unlocked by this assignment, after the new one is in place.
            self.file = file;
        }
        // Windows refuses to rename over a file that is open (ours, locked), and nobody else can
        // read a locked file there anyway: the record is rewritten in place through our handle.
        #[cfg(windows)]
        {
            use std::io::{Seek, Write};
            let text = serde_json::to_string_pretty(&info).map_err(std::io::Error::other)?;
            self.file.set_len(0)?;
            self.file.seek(std::io::SeekFrom::Start(0))?;
            self.file.write_all(text.as_bytes())?;
            self.file.sync_all()?;
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

/// Creates the lock folder (mode 0700 on Unix: it lives among the user's own files).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
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

    #[test]
    fn one_server_has_one_key_whatever_its_url_says() {
        let key = server_key("http://127.0.0.1:8188");
        assert_eq!(key, "this machine port 8188");
        for same in [
            "http://localhost:8188",
            "127.0.0.1:8188",
            "https://[::1]:8188/prefix/",
            "http://LOCALHOST:8188/",
            "http://user:pw@127.0.0.2:8188",
            "http://0.0.0.0:8188",
        ] {
            assert_eq!(server_key(same), key, "{same}");
        }
        assert_ne!(server_key("http://127.0.0.1:8189"), key);
        assert_eq!(server_key("http://10.0.0.7"), "10.0.0.7 port 80");
        assert_eq!(server_key("https://10.0.0.7/"), "10.0.0.7 port 443");
        assert_eq!(server_key("http://10.0.0.7:80/x"), "10.0.0.7 port 80");
        // A host that does not resolve is keyed by its name.
        assert_eq!(
            server_key("http://no-such-host.invalid:8188"),
            "no-such-host.invalid port 8188"
        );
    }

    #[test]
    fn a_file_a_link_or_a_shared_folder_is_not_a_lock_folder_and_the_next_one_is_used() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("comfy-bisect");
        fs::write(&file, "").unwrap();
        let why = usable(&file).unwrap_err();
        assert!(why.contains("a file is in its place"), "{why}");
        let err = SessionLock::acquire_in(&file, SERVER, "s").unwrap_err();
        assert!(err.to_string().contains("a file is in its place"), "{err}");
        let fallback = tmp.path().join("fallback");
        let chosen = pick(vec![
            LockDir {
                path: file.clone(),
                from: "$XDG_RUNTIME_DIR",
            },
            LockDir {
                path: fallback.clone(),
                from: "a per-user temporary folder",
            },
        ])
        .unwrap();
        assert_eq!(chosen.path, fallback);
        assert_eq!(chosen.from, "a per-user temporary folder");
        assert!(fallback.is_dir(), "created");
        let none = pick(vec![LockDir {
            path: file.clone(),
            from: "$XDG_RUNTIME_DIR",
        }])
        .unwrap_err();
        assert!(
            none.contains("$XDG_RUNTIME_DIR") && none.contains(LOCK_DIR_ENV),
            "{none}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let link = tmp.path().join("link");
            std::os::unix::fs::symlink("/", &link).unwrap();
            let why = usable(&link).unwrap_err();
            assert!(why.contains("symbolic link (to /)"), "{why}");
            assert!(SessionLock::acquire_in(&link, SERVER, "s").is_err());
            let open = tmp.path().join("open");
            fs::create_dir(&open).unwrap();
            fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
            let why = usable(&open).unwrap_err();
            assert!(why.contains("others may write"), "{why}");
        }
    }

    #[test]
    fn this_machines_lan_address_and_127_0_0_1_are_one_server() {
        // The address this machine would send from (no packet is sent for UDP connect).
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let lan = socket
            .connect("203.0.113.9:9")
            .ok()
            .and_then(|()| socket.local_addr().ok())
            .map(|a| a.ip())
            .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
        let Some(lan) = lan else {
            // No interface but loopback here: nothing to compare.
            return;
        };
        assert_eq!(
            server_key(&format!("http://{lan}:8188")),
            server_key("http://127.0.0.1:8188")
        );
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
