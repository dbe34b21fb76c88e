//! The operating system's word on a server that died: the kernel log of a run's time window
//! (`journalctl -k`, else `dmesg`), its out-of-memory-killer lines, and the figures they print.
//!
//! The parser knows the wordings of `mm/oom_kill.c` across kernel versions:
//! `Out of memory: Kill process N (name) score S or sacrifice child` + `Killed process N (name)
//! total-vm:…kB, anon-rss:…kB, file-rss:…kB, shmem-rss:…kB` (before 5.1),
//! `Out of memory: Killed process N (name) total-vm:…` (5.1 on, later with `UID:` `pgtables:`
//! `oom_score_adj:`), `Memory cgroup out of memory: Killed process …` (a cgroup limit), and the
//! `oom-kill:constraint=…,oom_memcg=…,task_memcg=…,task=name,pid=N,uid=U` summary (4.19 on).

use serde::{Deserialize, Serialize};
use std::process::Command;

/// What the kernel log says about one OOM kill.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomKill {
    /// The killed process.
    pub pid: u32,
    /// Its name as the kernel printed it.
    pub process: String,
    /// Virtual size, kB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_vm_kb: Option<u64>,
    /// Anonymous resident memory, kB (what the process itself had allocated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon_rss_kb: Option<u64>,
    /// File-backed resident memory, kB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_rss_kb: Option<u64>,
    /// Shared-memory resident memory, kB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shmem_rss_kb: Option<u64>,
    /// `CONSTRAINT_NONE` (the whole machine ran out), `CONSTRAINT_MEMCG` (a cgroup limit, e.g. a
    /// container or a systemd unit's MemoryMax), `CONSTRAINT_CPUSET`, `CONSTRAINT_MEMORY_POLICY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// The cgroup whose limit was hit (`oom_memcg`), else the task's cgroup (`task_memcg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The kill was reported as "Memory cgroup out of memory" (a cgroup limit, not the machine).
    #[serde(default)]
    pub cgroup_limit: bool,
}

impl OomKill {
    /// One line for people: pid, name and the figures the kernel printed.
    pub(crate) fn summary(&self) -> String {
        let gib = |kb: u64| format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0));
        let mut parts = vec![format!("pid {} ({})", self.pid, self.process)];
        for (name, v) in [
            ("total-vm", self.total_vm_kb),
            ("anon-rss", self.anon_rss_kb),
            ("file-rss", self.file_rss_kb),
            ("shmem-rss", self.shmem_rss_kb),
        ] {
            if let Some(kb) = v {
                parts.push(format!("{name} {}", gib(kb)));
            }
        }
        if let Some(c) = &self.constraint {
            parts.push(format!("constraint {c}"));
        }
        if let Some(g) = &self.cgroup {
            parts.push(format!("cgroup {g}"));
        }
        parts.join(", ")
    }
}

/// Whether a kernel log line belongs to the OOM killer's report.
pub(crate) fn is_oom_line(line: &str) -> bool {
    [
        "invoked oom-killer",
        "Out of memory",
        "out of memory: Kill",
        "Killed process",
        "oom-kill:",
        "oom_reaper:",
    ]
    .iter()
    .any(|m| line.contains(m))
}

/// The pid a line is about: `Killed process N (`, `Kill process N (`, `reaped process N (` or
/// `…,pid=N,` of the `oom-kill:` summary.
fn line_pid(line: &str) -> Option<u32> {
    for marker in ["Killed process ", "Kill process ", "reaped process "] {
        if let Some(rest) = line.split(marker).nth(1) {
            return rest.split_whitespace().next()?.parse().ok();
        }
    }
    let summary = line.split("oom-kill:").nth(1)?;
    summary
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix("pid="))
        .and_then(|p| p.trim().parse().ok())
}

/// The process name in `process N (name)` or `task=name` of a line.
fn line_process(line: &str) -> Option<String> {
    for marker in ["Killed process ", "Kill process ", "reaped process "] {
        if let Some(rest) = line.split(marker).nth(1) {
            let open = rest.find('(')?;
            let name = &rest[open + 1..];
            // The name ends at the ")" before the figures (a name may itself hold a ")").
            let close = name.find(") ").or_else(|| name.rfind(')'))?;
            return Some(name[..close].to_string());
        }
    }
    let summary = line.split("oom-kill:").nth(1)?;
    summary
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix("task="))
        .map(str::to_string)
}

/// `key:NkB` anywhere in a line.
fn kb_field(line: &str, key: &str) -> Option<u64> {
    let rest = line.split(&format!("{key}:")).nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `key=value` of the `oom-kill:` summary.
fn summary_field(line: &str, key: &str) -> Option<String> {
    let summary = line.split("oom-kill:").nth(1)?;
    summary
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix(&format!("{key}=")))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && v != "(null)")
}

/// Reads the OOM kill of process `pid` from kernel log lines (any prefix: dmesg's
/// `[seconds]`, journalctl's date and host); None when no line names that pid.
pub(crate) fn parse_kill(lines: &[String], pid: u32) -> Option<OomKill> {
    let mine: Vec<&String> = lines
        .iter()
        .filter(|l| is_oom_line(l) && line_pid(l) == Some(pid))
        .collect();
    let killed = mine.iter().find(|l| l.contains("Killed process"))?;
    let mut kill = OomKill {
        pid,
        process: line_process(killed).unwrap_or_default(),
        total_vm_kb: kb_field(killed, "total-vm"),
        anon_rss_kb: kb_field(killed, "anon-rss"),
        file_rss_kb: kb_field(killed, "file-rss"),
        shmem_rss_kb: kb_field(killed, "shmem-rss"),
        cgroup_limit: lines
            .iter()
            .any(|l| l.contains("Memory cgroup out of memory") && line_pid(l) == Some(pid)),
        ..OomKill::default()
    };
    if let Some(summary) = mine.iter().find(|l| l.contains("oom-kill:")) {
        kill.constraint = summary_field(summary, "constraint");
        kill.cgroup =
            summary_field(summary, "oom_memcg").or_else(|| summary_field(summary, "task_memcg"));
    }
    if kill.constraint.is_none() && kill.cgroup_limit {
        kill.constraint = Some("CONSTRAINT_MEMCG".into());
    }
    Some(kill)
}

/// The pids of processes whose name looks like Python that the OOM killer killed in `lines`.
pub(crate) fn python_kills(lines: &[String]) -> Vec<u32> {
    let mut pids: Vec<u32> = lines
        .iter()
        .filter(|l| l.contains("Killed process"))
        .filter(|l| {
            line_process(l)
                .map(|n| n.to_ascii_lowercase().starts_with("python"))
                .unwrap_or(false)
        })
        .filter_map(|l| line_pid(l))
        .collect();
    pids.dedup();
    pids
}

/// What the kernel log said about a run whose server died.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelEvidence {
    /// The command read (`journalctl -k …` or `dmesg …`); None when neither was readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The window read, RFC 3339 (the run's start, and its end plus a margin).
    pub since: String,
    /// End of the window.
    pub until: String,
    /// The server's pid the lines were matched to (None: matched to a python process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_pid: Option<u32>,
    /// How the kill was matched: `pid` or `python process in the window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_by: Option<String>,
    /// The kill, when the OOM killer's lines name the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_kill: Option<OomKill>,
    /// The OOM-killer lines of the window (also written to `kernel-oom.log` in the run folder).
    #[serde(default)]
    pub lines: Vec<String>,
    /// What was read and what it shows, in words.
    pub note: String,
}

impl KernelEvidence {
    /// Matches the OOM-killer `lines` of a window to `pid` (else to a python process).
    pub fn from_lines(
        source: String,
        since: String,
        until: String,
        pid: Option<u32>,
        all: &[String],
    ) -> KernelEvidence {
        let lines: Vec<String> = all.iter().filter(|l| is_oom_line(l)).cloned().collect();
        let mut ev = KernelEvidence {
            source: Some(source.clone()),
            since,
            until,
            server_pid: pid,
            ..KernelEvidence::default()
        };
        let by_pid = pid.and_then(|p| parse_kill(&lines, p));
        let (kill, how) = match by_pid {
            Some(k) => (Some(k), "pid"),
            None => {
                let pythons = python_kills(&lines);
                match pythons.as_slice() {
                    [one] => (parse_kill(&lines, *one), "python process in the window"),
                    _ => (None, ""),
                }
            }
        };
        ev.note = match &kill {
            Some(k) => format!(
                "{source}: the kernel's OOM killer killed {} (matched by {how})",
                k.summary()
            ),
            None => format!(
                "{source}: no OOM-killer line for {} in the run's window; the server process \
                 died, cause unknown",
                pid.map(|p| format!("pid {p}"))
                    .unwrap_or_else(|| "a python process".into())
            ),
        };
        ev.matched_by = kill.as_ref().map(|_| how.to_string());
        ev.oom_kill = kill;
        ev.lines = lines;
        ev
    }
}

/// Reads the kernel log between two Unix times (seconds) — `journalctl -k`, else `dmesg`
/// filtered to the window — and matches it to `pid`. Says so when neither can be read.
pub(crate) fn read_window(since_unix: i64, until_unix: i64, pid: Option<u32>) -> KernelEvidence {
    let rfc = crate::units::unix_rfc3339;
    let (since, until) = (rfc(since_unix), rfc(until_unix));
    let mut tried = Vec::new();
    match journalctl(since_unix, until_unix) {
        Ok(lines) => {
            let source = format!("journalctl -k --since @{since_unix} --until @{until_unix}");
            return KernelEvidence::from_lines(source, since, until, pid, &lines);
        }
        Err(e) => tried.push(format!("journalctl -k: {e}")),
    }
    match dmesg(since_unix, until_unix) {
        Ok(lines) => {
            let source = "dmesg --time-format iso (filtered to the run's window)".to_string();
            return KernelEvidence::from_lines(source, since, until, pid, &lines);
        }
        Err(e) => tried.push(format!("dmesg: {e}")),
    }
    KernelEvidence {
        source: None,
        since,
        until,
        server_pid: pid,
        note: format!(
            "the kernel log is not readable by this user ({}); whether the OOM killer ended the \
             server is unknown (add the user to the systemd-journal or adm group, or run \
             `sudo dmesg -T | grep -i -E 'killed process|out of memory'`)",
            tried.join("; ")
        ),
        ..KernelEvidence::default()
    }
}

/// `journalctl -k` lines of the window; an error when it cannot run or read the kernel log.
fn journalctl(since: i64, until: i64) -> Result<Vec<String>, String> {
    let out = Command::new("journalctl")
        .args(["-k", "--no-pager", "-o", "short-iso"])
        .arg(format!("--since=@{since}"))
        .arg(format!("--until=@{until}"))
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{} {}", out.status, stderr.trim()));
    }
    // Without the right group journalctl answers 0 with a hint and no kernel lines.
    if stderr.contains("No journal files") || stderr.contains("insufficient permissions") {
        return Err(stderr.trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// `dmesg --time-format iso` lines of the window; an error when the ring buffer is not readable
/// (`kernel.dmesg_restrict`).
fn dmesg(since: i64, until: i64) -> Result<Vec<String>, String> {
    let out = Command::new("dmesg")
        .args(["--time-format", "iso"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| match iso_time(l) {
            Some(t) => t >= since && t <= until,
            None => false,
        })
        .map(str::to_string)
        .collect())
}

/// The Unix time of a `dmesg --time-format iso` line (`2026-12-01T03:12:44,123456+00:00 …`).
pub(crate) fn iso_time(line: &str) -> Option<i64> {
    let stamp = line.split_whitespace().next()?;
    let (date_time, offset) = match stamp.find(['+', 'Z']).or_else(|| stamp.rfind('-')) {
        Some(i) if i > 10 => stamp.split_at(i),
        _ => return None,
    };
    let seconds = date_time.split([',', '.']).next()?;
    let text = format!("{seconds}{}", if offset == "Z" { "+00:00" } else { offset });
    crate::units::parse_rfc3339(&text).map(|t| t.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(|l| l.trim().to_string()).collect()
    }

    // The lines below are written from the format strings in mm/oom_kill.c and mm/memcontrol.c
    // of the kernel versions named; the numbers are made up.

    /// Linux 4.x (dmesg prefix): "Kill process … or sacrifice child", then "Killed process".
    const KERNEL_4: &str = "\
        [123456.789012] python invoked oom-killer: gfp_mask=0x14280ca(GFP_HIGHUSER_MOVABLE|__GFP_ZERO), nodemask=(null), order=0, oom_score_adj=0
        [123456.801234] Out of memory: Kill process 4242 (python) score 912 or sacrifice child
        [123456.801301] Killed process 4242 (python) total-vm:34439708kB, anon-rss:18988872kB, file-rss:4096kB, shmem-rss:0kB
        [123456.950000] oom_reaper: reaped process 4242 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB";

    /// Linux 5.x/6.x (journalctl short-iso prefix): the summary line and "Killed process" on
    /// the "Out of memory" line itself, with UID, pgtables and oom_score_adj.
    const KERNEL_6: &str = "\
        2026-12-01T03:12:44+0000 vm kernel: python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
        2026-12-01T03:12:44+0000 vm kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/session-2.scope,task=python3,pid=4414,uid=1000
        2026-12-01T03:12:44+0000 vm kernel: Out of memory: Killed process 4414 (python3) total-vm:34439708kB, anon-rss:18988872kB, file-rss:1024kB, shmem-rss:2048kB, UID:1000 pgtables:40120kB oom_score_adj:0
        2026-12-01T03:12:45+0000 vm kernel: oom_reaper: reaped process 4414 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB";

    /// A cgroup limit (container / systemd MemoryMax), Linux 5.x wording.
    const MEMCG: &str = "\
        [ 8812.000001] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
        [ 8812.000900] memory: usage 16777216kB, limit 16777216kB, failcnt 120
        [ 8812.001000] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=comfyui.service,mems_allowed=0,oom_memcg=/system.slice/comfyui.service,task_memcg=/system.slice/comfyui.service,task=python3,pid=777,uid=1001
        [ 8812.001100] Memory cgroup out of memory: Killed process 777 (python3) total-vm:20971520kB, anon-rss:16000000kB, file-rss:12000kB, shmem-rss:0kB, UID:1001 pgtables:33000kB oom_score_adj:0";

    #[test]
    fn kernel_4_wording_gives_the_figures() {
        let k = parse_kill(&lines(KERNEL_4), 4242).unwrap();
        assert_eq!(k.process, "python");
        assert_eq!(k.total_vm_kb, Some(34439708));
        assert_eq!(k.anon_rss_kb, Some(18988872));
        assert_eq!(k.file_rss_kb, Some(4096));
        assert_eq!(k.shmem_rss_kb, Some(0));
        assert_eq!(k.constraint, None, "4.x before 4.19 prints no summary line");
        assert!(!k.cgroup_limit);
        assert_eq!(parse_kill(&lines(KERNEL_4), 4243), None, "another pid");
    }

    #[test]
    fn kernel_6_wording_gives_figures_constraint_and_cgroup() {
        let k = parse_kill(&lines(KERNEL_6), 4414).unwrap();
        assert_eq!(k.process, "python3");
        assert_eq!(k.anon_rss_kb, Some(18988872));
        assert_eq!(k.shmem_rss_kb, Some(2048));
        assert_eq!(k.constraint.as_deref(), Some("CONSTRAINT_NONE"));
        assert_eq!(
            k.cgroup.as_deref(),
            Some("/user.slice/user-1000.slice/session-2.scope")
        );
        assert!(k.summary().contains("anon-rss 18.1 GiB"), "{}", k.summary());
    }

    #[test]
    fn a_cgroup_limit_is_told_apart_from_the_machine_running_out() {
        let k = parse_kill(&lines(MEMCG), 777).unwrap();
        assert!(k.cgroup_limit);
        assert_eq!(k.constraint.as_deref(), Some("CONSTRAINT_MEMCG"));
        assert_eq!(k.cgroup.as_deref(), Some("/system.slice/comfyui.service"));
        assert_eq!(k.total_vm_kb, Some(20971520));
    }

    #[test]
    fn evidence_matches_the_pid_else_a_single_python_kill_else_says_unknown() {
        let all = lines(&format!(
            "{KERNEL_6}\n2026-12-01T03:12:50+0000 vm kernel: usb 1-1: new device"
        ));
        let ev = KernelEvidence::from_lines(
            "journalctl -k".into(),
            "a".into(),
            "b".into(),
            Some(4414),
            &all,
        );
        assert_eq!(ev.matched_by.as_deref(), Some("pid"));
        assert_eq!(ev.lines.len(), 4, "only the OOM killer's lines are kept");
        assert!(
            ev.note.contains("OOM killer killed pid 4414 (python3)"),
            "{}",
            ev.note
        );
        // The pid was not known (the server's process was not found): one python kill matches.
        let ev = KernelEvidence::from_lines("dmesg".into(), "a".into(), "b".into(), None, &all);
        assert_eq!(
            ev.matched_by.as_deref(),
            Some("python process in the window")
        );
        assert_eq!(ev.oom_kill.unwrap().pid, 4414);
        // Another pid than the server's: the single python kill of the window is taken.
        let ev = KernelEvidence::from_lines(
            "dmesg".into(),
            "a".into(),
            "b".into(),
            Some(1),
            &lines(MEMCG),
        );
        assert!(
            ev.oom_kill.is_some(),
            "falls back to the python process 777"
        );
        let ev = KernelEvidence::from_lines(
            "dmesg".into(),
            "a".into(),
            "b".into(),
            Some(1),
            &lines("[1.0] usb 1-1: new device"),
        );
        assert_eq!(ev.oom_kill, None);
        assert!(
            ev.note.contains("the server process died, cause unknown"),
            "{}",
            ev.note
        );
    }

    #[test]
    fn dmesg_iso_times_are_read() {
        let t = iso_time("2026-12-01T03:12:44,123456+00:00 Out of memory: Killed process 1 (x)")
            .unwrap();
        assert_eq!(t, 1_796_094_764);
        assert_eq!(iso_time("2026-12-01T04:12:44,000000+01:00 x"), Some(t));
        assert_eq!(iso_time("[123.456] no iso time"), None);
    }
}
