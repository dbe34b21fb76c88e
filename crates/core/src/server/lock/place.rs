//! Where a server's lock lives: the lock folder (`lock_dir`: `$COMFY_BISECT_LOCK_DIR`, else the
//! first usable of the user's runtime folder, cache folder and a per-user temporary folder —
//! never a symbolic link, a file, or a folder of another user) and the lock file's name, keyed by
//! the server's resolved address (`server_key`). Holding the lock is the parent module's job.

use std::fs;
use std::path::{Path, PathBuf};

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

/// Creates the lock folder (mode 0700 on Unix: it lives among the user's own files).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::super::SessionLock;
    use super::*;

    const SERVER: &str = "http://127.0.0.1:8188";

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
}
