//! `--restart-cmd`: the user's shell command that restarts ComfyUI, run with a time limit
//! (`--restart-timeout`). Its output (stdout and stderr) is appended to a log file; a command that
//! overruns is killed with every process it started (its whole process group), so a hung restart
//! cannot hold the session past its deadline. A command that finishes in time may leave a server
//! running in the background; that one is left alone. `wait_for_server` then waits for the
//! server to answer (`--wait-server`).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Default `--restart-timeout`.
pub(crate) const DEFAULT_RESTART_TIMEOUT: Duration = Duration::from_secs(300);

/// File name of the restart log in the session folder.
pub(crate) const RESTART_LOG: &str = "restart.log";

/// How often a running restart command is checked.
const POLL: Duration = Duration::from_millis(50);

/// Runs `command` with `sh -c` (`cmd /C` on Windows), its output appended to `log` (discarded
/// when `None`), for at most `limit`; the error in words (with where the output is).
pub(crate) fn run_restart(
    command: &str,
    limit: Duration,
    log: Option<&Path>,
) -> Result<(), String> {
    let mut log_file = match log {
        Some(path) => Some(
            crate::atomic::open_private()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open the restart log {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let started_at = jiff::Timestamp::now();
    if let Some(f) = &mut log_file {
        let _ = writeln!(
            f,
            "=== {started_at} $ {command} (limit {}s)",
            limit.as_secs()
        );
    }
    let output = |f: &Option<File>| match f.as_ref().map(File::try_clone) {
        Some(Ok(clone)) => Stdio::from(clone),
        _ => Stdio::null(),
    };
    let mut cmd = crate::shell::user_command(command);
    cmd.stdin(Stdio::null())
        .stdout(output(&log_file))
        .stderr(output(&log_file));
    // Its own process group, so everything it starts can be killed with it.
    crate::shell::own_process_group(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run '{command}': {e}"))?;
    let where_output = log
        .map(|p| format!(" (output in {})", p.display()))
        .unwrap_or_default();
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= limit => {
                kill_group(&mut child);
                let _ = child.wait();
                if let Some(f) = &mut log_file {
                    let _ = writeln!(
                        f,
                        "=== killed after {}s (--restart-timeout), with every process it started",
                        limit.as_secs()
                    );
                }
                return Err(format!(
                    "'{command}' did not finish within {}s (--restart-timeout); killed it and every process it started{where_output}",
                    limit.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(POLL.min(limit.saturating_sub(start.elapsed()))),
            Err(e) => {
                kill_group(&mut child);
                return Err(format!("cannot wait for '{command}': {e}"));
            }
        }
    };
    // What it started in the background (a server launched with `&`) keeps running.
    if let Some(f) = &mut log_file {
        let _ = writeln!(f, "=== {}", describe(status));
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "'{command}' exited with {}{where_output}",
            describe(status)
        ))
    }
}

/// How often a server that does not answer yet is asked again.
const SERVER_POLL: Duration = Duration::from_millis(250);

/// Whether an error may be a server that is still starting (no answer, or a proxy's 5xx in
/// front of it); a 4xx (authentication, a wrong URL) does not go away by waiting.
fn starting_up(error: &crate::comfy::ClientError) -> bool {
    use crate::comfy::ClientError;
    match error {
        ClientError::Unreachable { .. } => true,
        ClientError::Status { status, .. } => *status >= 500,
        _ => false,
    }
}

/// Asks `GET /system_stats` until the server answers or `limit` has passed (at once for an
/// error waiting does not change, see [`starting_up`]); its answer, or the last error in words. Each request is bounded by what is left of `limit` (at least a second).
pub(crate) async fn wait_for_server(
    client: &crate::comfy::Client,
    limit: Duration,
) -> Result<crate::comfy::SystemStats, String> {
    let start = Instant::now();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        let bounded = client
            .with_request_timeout(left.clamp(Duration::from_secs(1), Duration::from_secs(10)));
        let error = match bounded.system_stats().await {
            Ok(stats) => return Ok(stats),
            Err(e) => e,
        };
        if !starting_up(&error) || start.elapsed() >= limit {
            return Err(error.to_string());
        }
        tokio::time::sleep(SERVER_POLL.min(limit.saturating_sub(start.elapsed()))).await;
    }
}

/// Before a session's first request (`bisect`): when the server does not answer, runs
/// `restart` (command, limit, log file) when given, then waits up to `wait` for the server;
/// `note` tells the user. The error in words. A server that answers is left alone.
pub(crate) fn bring_up(
    handle: &tokio::runtime::Handle,
    client: &crate::comfy::Client,
    restart: Option<(&str, Duration, &Path)>,
    wait: Duration,
    note: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let url = client.server_url();
    let probe = client.with_request_timeout(Duration::from_secs(5));
    match handle.block_on(probe.system_stats()) {
        // An answer, or one waiting does not change (the preflight says what is wrong).
        Ok(_) => return Ok(()),
        Err(e) if !starting_up(&e) => return Ok(()),
        Err(_) => {}
    }
    if let Some((command, limit, log)) = restart {
        note(&format!(
            "the server {url} does not answer; starting it: {command}"
        ));
        if let Err(e) = run_restart(command, limit, Some(log)) {
            note(&format!("--restart-cmd failed: {e}"));
        }
    }
    note(&format!(
        "waiting up to {}s for the server {url} (--wait-server)",
        wait.as_secs()
    ));
    handle
        .block_on(wait_for_server(client, wait))
        .map(|_| ())
        .map_err(|e| {
            format!(
                "the server {url} did not answer within {}s (--wait-server): {e}. {}",
                wait.as_secs(),
                "Start ComfyUI, or give --restart-cmd to start it and a longer --wait-server"
            )
        })
}

fn describe(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => format!("{status}"),
    }
}

/// Kills the child with every process it started (its process group on Unix, its process
/// tree on Windows: [`crate::shell::stop_tree`]), else the child alone.
fn kill_group(child: &mut Child) {
    if !crate::shell::stop_tree(child.id()) {
        let _ = child.kill();
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Whether process `pid` is gone (or a zombie nobody reaped yet).
    fn gone(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    #[test]
    fn a_hanging_restart_is_killed_with_its_children_and_its_output_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(RESTART_LOG);
        let pid_file = dir.path().join("child.pid");
        let command = format!(
            "sleep 600 & echo $! > '{}'; echo restarting comfyui; echo oops >&2; wait",
            pid_file.display()
        );
        let began = Instant::now();
        let err = run_restart(&command, Duration::from_millis(500), Some(&log)).unwrap_err();
        // Bounded by the limit, not by `sleep 600` (the bound here is generous: no timing).
        assert!(began.elapsed() < Duration::from_secs(120));
        assert!(err.contains("did not finish within"), "{err}");
        assert!(err.contains("restart.log"), "{err}");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("restarting comfyui"), "{text}");
        assert!(text.contains("oops"), "stderr is kept too: {text}");
        assert!(text.contains("killed after"), "{text}");
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SIGKILL is delivered at once; reaping by init may take a moment.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(pid), "the background child {pid} survived");
    }

    #[test]
    fn a_restart_that_finishes_is_logged_with_its_status() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(RESTART_LOG);
        run_restart("echo up", Duration::from_secs(60), Some(&log)).unwrap();
        let err =
            run_restart("echo down; exit 3", Duration::from_secs(60), Some(&log)).unwrap_err();
        assert!(err.contains("exit status 3"), "{err}");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("$ echo up"), "{text}");
        assert!(text.contains("up\n=== exit status 0"), "{text}");
        assert!(text.contains("down\n=== exit status 3"), "{text}");
        assert!(run_restart("true", Duration::from_secs(60), None).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn the_restart_log_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(RESTART_LOG);
        run_restart("echo restarting", Duration::from_secs(60), Some(&log)).unwrap();
        let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }
}
