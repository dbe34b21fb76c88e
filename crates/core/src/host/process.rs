//! The server's own process when it runs on this machine: whether a server URL points here, the
//! PID listening on its port (Linux: `/proc/net/tcp{,6}` → socket inode → `/proc/*/fd`), and that
//! process's memory (`/proc/PID/status`: VmRSS, VmSwap, VmHWM).

use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
#[cfg(any(target_os = "linux", test))]
use std::net::{Ipv4Addr, Ipv6Addr};
#[cfg(target_os = "linux")]
use std::path::Path;

/// The server process found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerProcess {
    /// Process id.
    pub pid: u32,
    /// Process name (`/proc/PID/comm`, e.g. `python` or `python3`).
    #[serde(default)]
    pub name: String,
}

/// Memory of one process (`/proc/PID/status`), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMemory {
    /// Resident set size (VmRSS).
    pub rss_bytes: u64,
    /// Swapped out (VmSwap).
    pub swap_bytes: u64,
    /// Peak resident set size since the process started (VmHWM).
    pub hwm_bytes: u64,
}

/// Where the server process is, as far as this machine can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// The URL does not point at this machine (nothing to sample locally).
    Remote,
    /// The server is local and its process was found.
    Found(ServerProcess),
    /// The server is local but its process was not found (why, in words).
    NotFound(String),
}

impl Located {
    /// As [`crate::run::RunRequest::server_process`] takes it: None for a remote server.
    pub(crate) fn into_request(self) -> Option<Result<ServerProcess, String>> {
        match self {
            Located::Remote => None,
            Located::Found(p) => Some(Ok(p)),
            Located::NotFound(why) => Some(Err(why)),
        }
    }
}

/// Host and port of an `http(s)://host[:port]/…` URL (port defaulted by scheme).
pub(crate) fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None => Some((authority.to_string(), default)),
    }
}

/// Whether `ip` is an address of this machine: loopback, unspecified, or one a socket can be
/// bound to (only local interface addresses can).
pub(crate) fn is_local_ip(ip: IpAddr) -> bool {
    // TCP, not UDP: wine 8 lets a UDP socket bind to an address no interface has (Linux and
    // Windows refuse both kinds), so only a TCP bind tells the same everywhere.
    ip.is_loopback() || ip.is_unspecified() || TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// The addresses `host` resolves to, when every one of them is on this machine; None otherwise.
fn local_addresses(host: &str, port: u16) -> Option<Vec<IpAddr>> {
    let ips: Vec<IpAddr> = (host, port)
        .to_socket_addrs()
        .ok()?
        .map(|a| a.ip())
        .collect();
    (!ips.is_empty() && ips.iter().all(|ip| is_local_ip(*ip))).then_some(ips)
}

/// Finds the process serving `server_url` on this machine.
pub fn locate(server_url: &str) -> Located {
    let Some((host, port)) = host_port(server_url) else {
        return Located::Remote;
    };
    let Some(ips) = local_addresses(&host, port) else {
        return Located::Remote;
    };
    locate_listener(&ips, port)
}

/// Finds the process listening on `port` at one of `ips` (or on a wildcard address).
#[cfg(target_os = "linux")]
pub(crate) fn locate_listener(ips: &[IpAddr], port: u16) -> Located {
    locate_in(Path::new("/proc"), ips, port)
}

/// Finds the process listening on `port`: not on this system (Linux only, through `/proc`).
#[cfg(not(target_os = "linux"))]
pub(crate) fn locate_listener(_ips: &[IpAddr], port: u16) -> Located {
    Located::NotFound(format!(
        "the process listening on port {port} is found through Linux's /proc only, not on {} \
         (its memory is not sampled; to restart the server give --restart-cmd)",
        std::env::consts::OS
    ))
}

/// [`locate_listener`] under a `/proc`-like root (tests point it elsewhere).
#[cfg(target_os = "linux")]
pub(crate) fn locate_in(proc_root: &Path, ips: &[IpAddr], port: u16) -> Located {
    let mut inodes = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(proc_root.join(table)) {
            inodes.extend(listening_inodes(&text, ips, port));
        }
    }
    if inodes.is_empty() {
        return Located::NotFound(format!(
            "no listening socket on port {port} in {}/net/tcp{{,6}} (a server in another network \
             namespace, e.g. a container, is not visible from here)",
            proc_root.display()
        ));
    }
    match owner_of(proc_root, &inodes) {
        Some(pid) => Located::Found(ServerProcess {
            pid,
            name: std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }),
        None => Located::NotFound(format!(
            "port {port} is listening, but no process visible to this user owns the socket (the \
             server runs as another user; run comfy-bisect as that user to sample its memory)"
        )),
    }
}

/// Socket inodes in LISTEN state on `port` at one of `ips` or a wildcard address, from the text
/// of `/proc/net/tcp` or `/proc/net/tcp6`.
#[cfg(any(target_os = "linux", test))]
pub(crate) fn listening_inodes(table: &str, ips: &[IpAddr], port: u16) -> Vec<u64> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (addr, p) = cols.get(1)?.split_once(':')?;
            if cols.get(3)? != &LISTEN || u16::from_str_radix(p, 16).ok()? != port {
                return None;
            }
            let ip = proc_ip(addr)?;
            let matches = ip.is_unspecified()
                || ips.iter().any(|want| same_ip(*want, ip))
                || ips.iter().any(|want| want.is_unspecified());
            if !matches {
                return None;
            }
            cols.get(9)?.parse::<u64>().ok().filter(|i| *i != 0)
        })
        .collect()
}

/// Equal addresses, an IPv4 address also matching its IPv4-mapped IPv6 form.
#[cfg(any(target_os = "linux", test))]
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    canon(a) == canon(b)
}

/// An address as `/proc/net/tcp{,6}` prints it: 32-bit words in hex, each in host byte order.
#[cfg(any(target_os = "linux", test))]
fn proc_ip(hex: &str) -> Option<IpAddr> {
    let word = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_ne_bytes);
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(hex)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(&hex[i * 8..i * 8 + 8])?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// The lowest PID with an open file descriptor on one of the socket `inodes` (a forked worker
/// shares its parent's listener; the parent is the server).
#[cfg(target_os = "linux")]
fn owner_of(proc_root: &Path, inodes: &[u64]) -> Option<u32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut pids: Vec<u32> = std::fs::read_dir(proc_root)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        let Ok(fds) = std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")) else {
            return false;
        };
        fds.filter_map(Result::ok).any(|fd| {
            std::fs::read_link(fd.path())
                .map(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
                .unwrap_or(false)
        })
    })
}

/// Whether `pid` still owns a socket listening on `port` (a cheap check before each run that
/// the process found earlier is still the server).
#[cfg(target_os = "linux")]
pub(crate) fn still_serving(pid: u32, ips: &[IpAddr], port: u16) -> bool {
    let root = Path::new("/proc");
    let mut inodes = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(root.join(table)) {
            inodes.extend(listening_inodes(&text, ips, port));
        }
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    std::fs::read_dir(root.join(pid.to_string()).join("fd"))
        .map(|fds| {
            fds.filter_map(Result::ok).any(|fd| {
                std::fs::read_link(fd.path())
                    .map(|t| wanted.iter().any(|w| t.as_os_str() == w.as_str()))
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false)
}

/// Whether `pid` still owns a socket listening on `port` (Linux only; elsewhere false).
#[cfg(not(target_os = "linux"))]
pub(crate) fn still_serving(_pid: u32, _ips: &[IpAddr], _port: u16) -> bool {
    false
}

/// One process as the process table shows it, pinned by its start time so that a PID the
/// kernel has given to another process since is never mistaken for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22).
    pub start: u64,
    /// Its command line (`/proc/PID/cmdline`).
    pub cmdline: Vec<String>,
    /// Its working folder (`/proc/PID/cwd`), when readable.
    pub cwd: Option<std::path::PathBuf>,
}

/// The start time of `pid` (None when it is gone, a zombie, or unreadable).
#[cfg(target_os = "linux")]
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) may hold spaces and ')': the fields after it follow the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is the state (field 3); the start time is field 22.
    if fields.first().is_some_and(|s| *s == "Z" || *s == "X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// The process `pid` now, with its command line and folder (None when it is gone or not
/// readable by this user; Linux only).
#[cfg(target_os = "linux")]
pub(crate) fn identity(pid: u32) -> Option<Identity> {
    let start = start_time(pid)?;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = raw
        .split(|b| *b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect::<Vec<_>>();
    let cmdline = match cmdline.split_last() {
        Some((last, rest)) if last.is_empty() => rest.to_vec(),
        _ => cmdline,
    };
    Some(Identity {
        pid,
        start,
        cmdline,
        cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
    })
}

/// The process `pid` now (Linux only: elsewhere None).
#[cfg(not(target_os = "linux"))]
pub(crate) fn identity(_pid: u32) -> Option<Identity> {
    None
}

/// Whether the process `id` names is still running (the same PID with the same start time,
/// and not a zombie).
#[cfg(target_os = "linux")]
pub(crate) fn still_running(id: &Identity) -> bool {
    start_time(id.pid) == Some(id.start)
}

/// Whether the process `id` names is still running (Linux only: elsewhere false).
#[cfg(not(target_os = "linux"))]
pub(crate) fn still_running(_id: &Identity) -> bool {
    false
}

/// The value of `key` in the environment process `pid` started with: `Some(None)` when it
/// was not set, None when the environment cannot be read.
#[cfg(target_os = "linux")]
pub(crate) fn env_var(pid: u32, key: &str) -> Option<Option<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    Some(
        raw.split(|b| *b == 0)
            .map(String::from_utf8_lossy)
            .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_string)),
    )
}

/// The environment of `pid` (Linux only: elsewhere None).
#[cfg(not(target_os = "linux"))]
pub(crate) fn env_var(_pid: u32, _key: &str) -> Option<Option<String>> {
    None
}

/// Whether a process whose command line is `cmdline` is the one ComfyUI describes with `argv`
/// (`sys.argv`, as `/system_stats` reports it): the arguments after the script are the last
/// words of the command line, and the script is one of its words (`python main.py …`, or the
/// program itself). Only an exact match counts: a proxy, a container's port forwarder or a
/// supervisor in front of the server has another command line.
pub(crate) fn argv_matches(cmdline: &[String], argv: &[String]) -> bool {
    let Some((script, args)) = argv.split_first() else {
        return false;
    };
    if cmdline.len() < argv.len() || !cmdline.ends_with(args) {
        return false;
    }
    let head = &cmdline[..cmdline.len() - args.len()];
    let file = |w: &str| {
        std::path::Path::new(w)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
    };
    head.last()
        .is_some_and(|w| w == script || (file(w).is_some() && file(w) == file(script)))
}

/// Sends SIGTERM (or SIGKILL when `kill`) to the process `id`, after checking that it is still
/// that process (never a PID the kernel has reused since).
#[cfg(unix)]
pub(crate) fn signal(id: &Identity, kill: bool) -> Result<(), String> {
    if !still_running(id) {
        return Err(format!("process {} has already exited", id.pid));
    }
    let pid =
        libc::pid_t::try_from(id.pid).map_err(|_| format!("process id {} out of range", id.pid))?;
    let sig = if kill { libc::SIGKILL } else { libc::SIGTERM };
    // SAFETY: kill(2) on a process confirmed just above by its PID and start time.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(format!(
            "cannot signal process {}: {}",
            id.pid,
            std::io::Error::last_os_error()
        ))
    }
}

/// Stopping a process is implemented for Unix only.
#[cfg(not(unix))]
pub(crate) fn signal(id: &Identity, _kill: bool) -> Result<(), String> {
    Err(format!(
        "stopping the server process {} is implemented for Linux only",
        id.pid
    ))
}

/// Memory of process `pid` now (None when it is gone or unreadable).
pub fn memory(pid: u32) -> Option<ProcessMemory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status(&text)
}

/// VmRSS, VmSwap and VmHWM of a `/proc/PID/status` text (None when VmRSS is missing, as for a
/// zombie or a kernel thread).
pub(crate) fn parse_status(text: &str) -> Option<ProcessMemory> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let rest = line[name.len()..].trim_start_matches(':').trim();
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    };
    let rss = field("VmRSS")?;
    Some(ProcessMemory {
        rss_bytes: rss,
        swap_bytes: field("VmSwap").unwrap_or(0),
        hwm_bytes: field("VmHWM").unwrap_or(rss),
    })
}

/// The addresses of a server URL's host, for `still_serving` (empty when it does not resolve).
pub(crate) fn addresses(server_url: &str) -> (Vec<IpAddr>, u16) {
    match host_port(server_url) {
        Some((host, port)) => (
            (host.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.map(|s| s.ip()).collect())
                .unwrap_or_default(),
            port,
        ),
        None => (Vec::new(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_host_and_port() {
        assert_eq!(
            host_port("http://127.0.0.1:8188"),
            Some(("127.0.0.1".into(), 8188))
        );
        assert_eq!(
            host_port("https://user:pw@comfy.example/api"),
            Some(("comfy.example".into(), 443))
        );
        assert_eq!(host_port("http://[::1]:8188/"), Some(("::1".into(), 8188)));
        assert_eq!(
            host_port("http://localhost"),
            Some(("localhost".into(), 80))
        );
        assert_eq!(host_port("not a url"), None);
    }

    #[test]
    fn loopback_is_local_and_a_documentation_address_is_not() {
        assert!(is_local_ip("127.0.0.1".parse().unwrap()));
        assert!(is_local_ip("0.0.0.0".parse().unwrap()));
        // TEST-NET-3 (RFC 5737) is never assigned to an interface.
        assert!(!is_local_ip("203.0.113.9".parse().unwrap()));
        assert_eq!(locate("http://203.0.113.9:8188"), Located::Remote);
    }

    #[test]
    fn proc_net_tables_are_read_in_host_byte_order() {
        // Written in the kernel's format (seq_printf "%08X:%04X" of the raw address words).
        let v4 = |a: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(a));
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             0: {}:1FFC 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4711 1 0000000000000000 100 0 0 10 0\n\
             1: {}:1FFC 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4712 1 0000000000000000 100 0 0 10 0\n\
             2: {}:1FFC {}:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4713 1 0000000000000000 100 0 0 10 0\n\
             3: {}:1FFD 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4714 1 0000000000000000 100 0 0 10 0\n",
            v4([127, 0, 0, 1]),
            v4([10, 0, 0, 7]),
            v4([127, 0, 0, 1]),
            v4([127, 0, 0, 1]),
            v4([0, 0, 0, 0]),
        );
        let lo: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap()];
        // Port 0x1FFC = 8188: the loopback listener only (not 10.0.0.7, not the connection).
        assert_eq!(listening_inodes(&table, &lo, 8188), vec![4711]);
        // The wildcard listener on 8189 serves every address.
        assert_eq!(listening_inodes(&table, &lo, 8189), vec![4714]);
        assert!(listening_inodes(&table, &lo, 9000).is_empty());
    }

    #[test]
    fn status_fields_are_read_in_bytes() {
        let status =
            "Name:\tpython3\nState:\tS (sleeping)\nVmPeak:\t34439708 kB\nVmHWM:\t19000000 kB\n\
                      VmRSS:\t18988872 kB\nVmSwap:\t  524288 kB\n";
        let m = parse_status(status).unwrap();
        assert_eq!(m.rss_bytes, 18988872 * 1024);
        assert_eq!(m.swap_bytes, 524288 * 1024);
        assert_eq!(m.hwm_bytes, 19000000 * 1024);
        // A zombie has no VmRSS line.
        assert_eq!(parse_status("Name:\tpython3\nState:\tZ (zombie)\n"), None);
    }

    #[test]
    fn a_command_line_matches_the_argv_comfyui_reports_and_a_proxy_does_not() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let argv = v(&["main.py", "--listen", "127.0.0.1", "--port", "8188"]);
        assert!(argv_matches(
            &v(&[
                "python3",
                "-u",
                "main.py",
                "--listen",
                "127.0.0.1",
                "--port",
                "8188"
            ]),
            &argv
        ));
        assert!(argv_matches(
            &v(&[
                "/usr/bin/python",
                "/home/user/ComfyUI/main.py",
                "--listen",
                "127.0.0.1",
                "--port",
                "8188"
            ]),
            &argv
        ));
        // A proxy, a port forwarder, another server with other flags.
        assert!(!argv_matches(
            &v(&["socat", "TCP-LISTEN:8188", "TCP:10.0.0.7:8188"]),
            &argv
        ));
        assert!(!argv_matches(
            &v(&["python", "main.py", "--port", "8188"]),
            &argv
        ));
        assert!(!argv_matches(
            &v(&[
                "python",
                "proxy.py",
                "--listen",
                "127.0.0.1",
                "--port",
                "8188"
            ]),
            &argv
        ));
        assert!(!argv_matches(&argv, &[]));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_is_known_by_its_start_time_and_an_exited_one_is_not_signalled() {
        let me = identity(std::process::id()).unwrap();
        assert!(still_running(&me));
        assert!(!me.cmdline.is_empty() && me.cwd.is_some());
        // The same PID with another start time is another process (a reused PID).
        let reused = Identity {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!still_running(&reused));
        assert!(signal(&reused, true)
            .unwrap_err()
            .contains("already exited"));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = identity(child.id());
        child.wait().unwrap();
        if let Some(id) = id {
            assert!(!still_running(&id));
            assert!(signal(&id, false).is_err());
        }
        assert_eq!(
            env_var(std::process::id(), "NO_SUCH_VARIABLE_HERE"),
            Some(None)
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_is_found_by_its_own_listening_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        match locate(&format!("http://127.0.0.1:{port}")) {
            Located::Found(p) => assert_eq!(p.pid, me),
            other => panic!("{other:?}"),
        }
        let m = memory(me).unwrap();
        assert!(m.rss_bytes > 0 && m.hwm_bytes >= m.rss_bytes);
        let (ips, port) = addresses(&format!("http://127.0.0.1:{port}"));
        assert!(still_serving(me, &ips, port));
        drop(listener);
        assert!(!still_serving(me, &ips, port));
    }
}
