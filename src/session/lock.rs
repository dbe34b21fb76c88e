//! One bisection per GPU: a lock file per server URL in the runs folder
//! (`runs/.lock-<hash of the URL>.json`), created atomically and recognised as stale when the
//! process that holds it is gone (same host) — then it is taken over.

use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::Write;
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
    /// The session being run.
    pub session_id: String,
    /// RFC 3339.
    pub since: String,
}

/// A held lock; released (file removed) on drop.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live session holds it.
    #[error("another comfy-bisect session ({}, pid {} on {}, since {}) is using {}; wait for it to finish, or delete {} if that process is gone", .holder.session_id, .holder.pid, .holder.host, .holder.since, .holder.server, .path.display())]
    Held {
        /// The holder.
        holder: Box<LockInfo>,
        /// The lock file.
        path: PathBuf,
    },
    /// File system error.
    #[error("cannot create the lock file {}: {source}", .path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The lock file for `server` under `runs_dir`.
pub fn lock_path(runs_dir: &Path, server: &str) -> PathBuf {
    let normalized = server.trim().trim_end_matches('/').to_ascii_lowercase();
    let hash = crate::workflow::sha256_hex(normalized.as_bytes());
    runs_dir.join(format!(".lock-{}.json", &hash[..16]))
}

/// This machine's host name (best effort).
pub fn host_name() -> String {
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

/// Whether process `pid` on this host is alive; None when this platform cannot tell.
fn process_alive(pid: u32) -> Option<bool> {
    let proc_root = Path::new("/proc");
    if proc_root.join("self").exists() {
        return Some(proc_root.join(pid.to_string()).exists());
    }
    None
}

impl SessionLock {
    /// Takes the lock for `server` in `runs_dir`, taking over a stale one.
    pub fn acquire(
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
        let me = LockInfo {
            pid: std::process::id(),
            host: host_name(),
            server: server.to_string(),
            session_id: session_id.to_string(),
            since: super::journal::now_rfc3339(),
        };
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let text = serde_json::to_string_pretty(&me).unwrap_or_default();
                    file.write_all(text.as_bytes()).map_err(io)?;
                    file.sync_all().map_err(io)?;
                    return Ok(SessionLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder: Option<LockInfo> = fs::read_to_string(&path)
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok());
                    let stale = match &holder {
                        // Unreadable or torn: the holder died while writing it.
                        None => true,
                        Some(h) if h.host == me.host => {
                            h.pid == me.pid || process_alive(h.pid) == Some(false)
                        }
                        Some(_) => false,
                    };
                    if !stale {
                        return Err(LockError::Held {
                            holder: Box::new(holder.expect("a live holder was read")),
                            path,
                        });
                    }
                    tracing::info!("taking over the stale lock {}", path.display());
                    let _ = fs::remove_file(&path);
                }
                Err(e) => return Err(io(e)),
            }
        }
        Err(io(std::io::Error::other(
            "another process keeps re-creating the lock file",
        )))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn second_session_on_the_same_server_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let server = "http://127.0.0.1:8188";
        // Pretend a live process (pid 1 exists on Linux) on this host holds it.
        let path = lock_path(dir.path(), server);
        let holder = LockInfo {
            pid: 1,
            host: host_name(),
            server: server.into(),
            session_id: "s1".into(),
            since: "2026-11-29T01:00:00Z".into(),
        };
        fs::write(&path, serde_json::to_string(&holder).unwrap()).unwrap();
        assert_eq!(process_alive(1), Some(true));
        let err = SessionLock::acquire(dir.path(), server, "s2").unwrap_err();
        assert!(err.to_string().contains("s1"), "{err}");
        // Another server is independent.
        let other = SessionLock::acquire(dir.path(), "http://127.0.0.1:8189", "s3").unwrap();
        assert!(other.path().exists());
        drop(other);
        assert!(!lock_path(dir.path(), "http://127.0.0.1:8189").exists());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn stale_lock_of_a_dead_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let server = "http://127.0.0.1:8188/";
        let path = lock_path(dir.path(), server);
        let dead = LockInfo {
            pid: u32::MAX - 7,
            host: host_name(),
            server: server.into(),
            session_id: "old".into(),
            since: "2026-11-29T01:00:00Z".into(),
        };
        fs::write(&path, serde_json::to_string(&dead).unwrap()).unwrap();
        assert_eq!(process_alive(dead.pid), Some(false));
        let lock = SessionLock::acquire(dir.path(), "http://127.0.0.1:8188", "new").unwrap();
        let info: LockInfo =
            serde_json::from_str(&fs::read_to_string(lock.path()).unwrap()).unwrap();
        assert_eq!(info.session_id, "new");
        drop(lock);
        // A torn lock file is stale too.
        fs::write(&path, "{\"pid\": 12").unwrap();
        let lock = SessionLock::acquire(dir.path(), server, "again").unwrap();
        assert!(lock.path().exists());
    }
}
