//! Relaunching the server for a server control (`--launch-cmd 'TEMPLATE {args}'`) and putting
//! it back as it was.
//!
//! Before the first stop, how the server was launched is journaled in
//! `mitigations/server-launch.json` ([`LaunchRecord`]: its `/system_stats` argv and memory
//! flags, its process's command line and folder, the values of the environment variables the
//! server controls set) with `changed: true`; every restore works from that record, in this
//! process or the next (`mitigate`/`resume` put back a server a killed pass left changed before
//! anything else), and clears `changed` only once the server answers with its original flags.
//!
//! A server is stopped only once it is confirmed: the process listening on its port
//! ([`crate::host::process::locate`]) must have the command line the server's own
//! `/system_stats` argv describes (ComfyUI reports no PID), else the port belongs to a proxy, a
//! port forwarder or a supervisor and nothing is signalled. Signals go to that process pinned
//! by its start time (never a PID reused since): SIGTERM, then SIGKILL after [`STOP_WAIT`]. A
//! server on another machine cannot be stopped from here, so its server controls are not run.
//!
//! The template is started with `sh -c`, in its own process group (a Ctrl-C of the tool does
//! not reach it), its output appended to `mitigations/launch.log`; `{args}` becomes the memory
//! flags the server ran with (those of [`MEMORY_FLAGS`](super::flags::MEMORY_FLAGS) in its argv) plus the control's. Every
//! word is validated first (a flag name, a number, a known choice: [`carried_flags`]), so no
//! text from the server reaches a shell. A launch that exits with an error fails the control at
//! once ("could not relaunch"); a server that answers without the control's flags (one a
//! supervisor restarted) fails it too, so a control is never judged on another server.

use super::flags::{carried_flags, check_control, effective, fill, with_control};
use crate::comfy::fingerprint::MemoryMode;
use crate::host::process::Identity;
use crate::session::driver::{Backend, Clock, Driver};
use crate::session::journal::Mitigation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a stopped server may take to exit before it is killed.
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(30);

/// How long a killed server may take to exit.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// File name of the launch record in the session's `mitigations/` folder.
pub(crate) const LAUNCH_RECORD: &str = "server-launch.json";

/// What one server control changes at launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Launch {
    /// Flags added.
    pub args: Vec<String>,
    /// Environment set.
    pub env: BTreeMap<String, String>,
}

impl Launch {
    /// The launch change of a server control.
    pub(crate) fn of(m: &Mitigation) -> Launch {
        Launch {
            args: m.args.clone(),
            env: m.env.clone(),
        }
    }
}

/// `mitigations/server-launch.json`: how the server was launched before the first relaunch,
/// and whether it may run with a control's change now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LaunchRecord {
    /// The `--launch-cmd` template.
    pub template: String,
    /// The server's `/system_stats` argv before the first stop.
    pub argv: Vec<String>,
    /// Its memory flags (validated): what `{args}` becomes to put it back.
    pub flags: Vec<String>,
    /// Its memory mode then (compared after a restore).
    #[serde(default)]
    pub memory_mode: Option<MemoryMode>,
    /// The server process's command line, for putting it back by hand.
    pub cmdline: Vec<String>,
    /// The server process's working folder.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The environment variables the server controls set, with the value the server had
    /// (`null`: not set); a restore gives the same.
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
    /// True from before each stop until a restore is confirmed: the server may run with a
    /// control's change (or not at all).
    pub changed: bool,
    /// RFC 3339: when the record was taken.
    pub since: String,
}

impl LaunchRecord {
    /// How to put the server back by hand, in words.
    fn by_hand(&self, server: &str) -> String {
        let env: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={}", crate::shell::quote(v)),
                None => format!("{k} unset"),
            })
            .collect();
        let cd = self
            .cwd
            .as_deref()
            .map(|d| format!("cd {} && ", crate::shell::quote(d)))
            .unwrap_or_default();
        crate::text::escape_controls(&format!(
            "To put it back by hand: stop whatever answers at {server}, then start it as it was: \
             `{cd}{}`{} (or `{}`)",
            crate::shell::join(&self.cmdline),
            if env.is_empty() {
                String::new()
            } else {
                format!(" with {}", env.join(", "))
            },
            fill(&self.template, &self.flags)
        ))
        .into_owned()
    }
}

/// The launch record of the session in `session_dir` when a pass left the server changed.
pub(crate) fn left_changed(session_dir: &Path) -> Option<LaunchRecord> {
    let path = session_dir
        .join(crate::session::journal::MITIGATIONS_DIR)
        .join(LAUNCH_RECORD);
    let record: LaunchRecord = crate::session::journal::read_json(&path).ok()?;
    record.changed.then_some(record)
}

/// Relaunches the server for server controls and puts it back (see the module comment).
#[derive(Debug)]
pub(crate) struct Relaunch {
    template: String,
    dir: PathBuf,
    log: PathBuf,
    /// The environment variables any server control sets (their original values are kept).
    env_keys: Vec<String>,
    record: Option<LaunchRecord>,
    /// The last launch started, while it runs.
    child: Option<std::process::Child>,
}

impl Relaunch {
    /// A relauncher with `template`; its record and output go to `dir` (`mitigations/`).
    pub(crate) fn new(template: String, dir: PathBuf, env_keys: Vec<String>) -> Relaunch {
        Relaunch {
            template,
            log: dir.join("launch.log"),
            dir,
            env_keys,
            record: None,
            child: None,
        }
    }

    /// A relauncher that puts back the server `record` describes (a pass left it changed).
    pub(crate) fn from_record(record: LaunchRecord, dir: PathBuf) -> Relaunch {
        let mut r = Relaunch::new(
            record.template.clone(),
            dir,
            record.env.keys().cloned().collect(),
        );
        r.record = Some(record);
        r
    }

    /// Journals the record (durably: it must be on disk before the server is stopped).
    fn save(&self) -> Result<(), String> {
        let Some(record) = &self.record else {
            return Ok(());
        };
        crate::session::journal::write_json_atomic(&self.dir.join(LAUNCH_RECORD), record)
            .map_err(|e| format!("cannot journal how the server was launched: {e}"))
    }

    /// The process serving the session's server, confirmed against what the server says
    /// about itself, and its argv.
    fn confirm<B: Backend, C: Clock>(
        &self,
        driver: &mut Driver<'_, B, C>,
    ) -> Result<(Identity, Vec<String>), String> {
        use crate::host::process::{self, Located};
        let server = driver.session.server.clone();
        let argv = driver
            .parts()
            .backend
            .environment()
            .map(|fp| fp.argv)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                format!("the server {server} did not say how it was launched (/system_stats argv)")
            })?;
        let pid = match process::locate(&server) {
            Located::Found(p) => p.pid,
            Located::Remote => {
                return Err(format!(
                    "the server {server} is not on this machine: it cannot be stopped and relaunched from here"
                ))
            }
            Located::NotFound(why) => {
                return Err(format!("the server's process was not found: {why}"))
            }
        };
        let id = process::identity(pid).ok_or_else(|| {
            format!(
                "the process {pid} listening for {server} cannot be read (gone, or another user's)"
            )
        })?;
        if !process::argv_matches(&id.cmdline, &argv) {
            return Err(crate::text::escape_controls(&format!(
                "the process listening for {server} (pid {pid}: `{}`) is not the ComfyUI server \
                 that answers there (its /system_stats argv: `{}`): a proxy, a port forwarder or \
                 a supervisor owns the port, so comfy-bisect signals nothing; relaunch the \
                 server yourself, or point --server at the server's own port",
                crate::shell::join(&id.cmdline),
                crate::shell::join(&argv)
            ))
            .into_owned());
        }
        Ok((id, argv))
    }

    /// Stops the server and launches it with `launch` added; waits until it answers with the
    /// control's flags. The error says why the control cannot be judged.
    pub(crate) fn launch<B: Backend, C: Clock>(
        &mut self,
        driver: &mut Driver<'_, B, C>,
        launch: &Launch,
    ) -> Result<(), String> {
        check_control(&launch.args)?;
        if self.record.is_none() {
            // Before anything else: nothing the server says reaches a shell unchecked.
            let argv = driver
                .parts()
                .backend
                .environment()
                .map(|fp| fp.argv)
                .unwrap_or_default();
            carried_flags(&argv)?;
        }
        let (id, argv) = self.confirm(driver)?;
        if self.record.is_none() {
            let flags = carried_flags(&argv)?;
            let memory_mode = driver
                .parts()
                .backend
                .environment()
                .and_then(|fp| fp.memory_mode);
            let env = self
                .env_keys
                .iter()
                .map(|k| {
                    let v = crate::host::process::env_var(id.pid, k).ok_or_else(|| {
                        format!(
                            "the environment of the server process {} cannot be read, so it \
                             could not be put back as it was",
                            id.pid
                        )
                    })?;
                    Ok((k.clone(), v))
                })
                .collect::<Result<BTreeMap<_, _>, String>>()?;
            self.record = Some(LaunchRecord {
                template: self.template.clone(),
                argv: argv.clone(),
                flags,
                memory_mode,
                cmdline: id.cmdline.clone(),
                cwd: id.cwd.as_ref().map(|d| d.display().to_string()),
                env,
                changed: false,
                since: crate::units::now_rfc3339(),
            });
        }
        let record = self.record.clone().unwrap_or_else(|| unreachable!());
        let args = with_control(&record.flags, &launch.args);
        if let Some(r) = self.record.as_mut() {
            r.changed = true;
        }
        self.save()?;
        self.stop(driver, &id)?;
        let mut env = record.env.clone();
        for (k, v) in &launch.env {
            env.insert(k.clone(), Some(v.clone()));
        }
        let command = fill(&self.template, &args);
        self.start(&command, &env)?;
        let shown: Vec<String> = launch
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v} "))
            .collect();
        driver.parts().hooks.note(&format!(
            "relaunched the server: {}{command}",
            shown.concat()
        ));
        self.wait_started(driver, &command)?;
        let now = driver
            .parts()
            .backend
            .environment()
            .map(|fp| fp.argv)
            .unwrap_or_default();
        if launch.args.is_empty() || now.windows(launch.args.len()).any(|w| w == launch.args) {
            Ok(())
        } else {
            Err(crate::text::escape_controls(&format!(
                "the server that answers after `{command}` does not run with {} (its argv: `{}`): \
                 something else started it (a supervisor such as systemd Restart=always, or a \
                 restart loop); relaunch it through that supervisor",
                launch.args.join(" "),
                crate::shell::join(&now)
            ))
            .into_owned())
        }
    }

    /// Puts the server back as it was (its original flags and environment), when it may run
    /// with a control's change; a note says what was done, or plainly that it failed and how
    /// to put it back by hand.
    pub(crate) fn restore<B: Backend, C: Clock>(
        &mut self,
        driver: &mut Driver<'_, B, C>,
    ) -> Option<String> {
        let record = self.record.clone().filter(|r| r.changed)?;
        let server = driver.session.server.clone();
        let command = fill(&record.template, &record.flags);
        let failed = |e: &str| {
            format!(
                "could not put the server back as it was: {e}. {}",
                record.by_hand(&server)
            )
        };
        // The record is read back from disk: its flags are checked again before a shell sees
        // them.
        if let Err(e) = check_control(&record.flags) {
            return Some(failed(&e));
        }
        if driver.parts().backend.alive() {
            if self.runs_original(driver, &record) {
                return Some(self.restored(format!(
                        "the server already runs with its original memory flags (`{}`): nothing to put back",
                        record.flags.join(" ")
                    ),
                ));
            }
            let stopped = self
                .confirm(driver)
                .and_then(|(id, _)| self.stop(driver, &id));
            if let Err(e) = stopped {
                return Some(failed(&e));
            }
        }
        if let Err(e) = self.start(&command, &record.env) {
            return Some(failed(&e));
        }
        if let Err(e) = self.wait_started(driver, &command) {
            if driver.parts().backend.alive() && self.runs_original(driver, &record) {
                return Some(self.restored(format!(
                        "the server runs with its original memory flags again, though not from `{command}` ({e}): something else (a supervisor?) started it"
                    ),
                ));
            }
            return Some(failed(&e));
        }
        if !self.runs_original(driver, &record) {
            return Some(failed(&format!(
                "`{command}` started a server whose memory flags are not the original ones"
            )));
        }
        let now = driver
            .parts()
            .backend
            .environment()
            .and_then(|f| f.memory_mode);
        let words = if now == record.memory_mode {
            format!(
                "put the server back as it was (`{command}`); its memory mode is the original one"
            )
        } else {
            format!(
                "put the server back with `{command}`, but its memory mode differs from the original: {:?} → {:?}",
                record.memory_mode, now
            )
        };
        Some(self.restored(words))
    }

    /// Whether the server answering now has the record's memory flags and, in its process,
    /// the record's values of the environment variables the controls set (an environment
    /// control changes no flag).
    fn runs_original<B: Backend, C: Clock>(
        &self,
        driver: &mut Driver<'_, B, C>,
        record: &LaunchRecord,
    ) -> bool {
        let flags = driver
            .parts()
            .backend
            .environment()
            .is_some_and(|fp| effective(&fp.argv) == effective(&record.flags));
        if !flags || record.env.is_empty() {
            return flags;
        }
        self.confirm(driver).is_ok_and(|(id, _)| {
            record
                .env
                .iter()
                .all(|(k, v)| crate::host::process::env_var(id.pid, k).as_ref() == Some(v))
        })
    }

    /// Clears `changed` in the record (journaled) and returns `words`, or says the journal
    /// could not be written.
    fn restored(&mut self, words: String) -> String {
        if let Some(r) = self.record.as_mut() {
            r.changed = false;
        }
        match self.save() {
            Ok(()) => words,
            Err(e) => format!("{words} ({e})"),
        }
    }

    /// Stops the confirmed process `id` (SIGTERM, SIGKILL after [`STOP_WAIT`]) and waits until
    /// it has exited.
    fn stop<B: Backend, C: Clock>(
        &mut self,
        driver: &mut Driver<'_, B, C>,
        id: &Identity,
    ) -> Result<(), String> {
        use crate::host::process::{signal, still_running};
        signal(id, false)?;
        let clock = driver.parts().clock;
        let start = clock.now();
        let mut killed = false;
        loop {
            self.reap();
            if !still_running(id) {
                return Ok(());
            }
            let waited = (clock.now() - start).unsigned_abs();
            if !killed && waited >= STOP_WAIT {
                // Still the same process (checked again inside): it did not stop on SIGTERM.
                if signal(id, true).is_err() {
                    return Ok(());
                }
                killed = true;
            }
            if killed && waited >= STOP_WAIT + KILL_WAIT {
                return Err(format!(
                    "the server process {} did not exit even after SIGKILL",
                    id.pid
                ));
            }
            clock.sleep(Duration::from_millis(100));
        }
    }

    /// Reaps the last launch when it has exited; its status then.
    fn reap(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// Waits until the server answers (up to `--wait-server`); a launch that exits with an
    /// error fails at once, with the end of its output.
    fn wait_started<B: Backend, C: Clock>(
        &mut self,
        driver: &mut Driver<'_, B, C>,
        command: &str,
    ) -> Result<(), String> {
        let limit = Duration::from_secs(driver.session.options.wait_server_s);
        driver.parts().hooks.note(&format!(
            "waiting up to {}s for the relaunched server (--wait-server)",
            limit.as_secs()
        ));
        let start = driver.parts().clock.now();
        loop {
            if let Some(status) = self.reap().filter(|s| !s.success()) {
                return Err(format!(
                    "could not relaunch: `{command}` exited at once ({status}){}",
                    self.log_tail()
                ));
            }
            if driver.parts().backend.alive() {
                return Ok(());
            }
            if driver.stopping() {
                return Err(format!(
                    "interrupted while waiting for the server started by `{command}`"
                ));
            }
            let clock = driver.parts().clock;
            if (clock.now() - start).unsigned_abs() >= limit {
                return Err(format!(
                    "the server did not answer within --wait-server ({}s) after `{command}` (its output is in {})",
                    limit.as_secs(),
                    self.log.display()
                ));
            }
            clock.sleep(Duration::from_millis(250));
        }
    }

    /// `; its last output: …` from the launch log (at most three lines of its last 8 KiB).
    fn log_tail(&self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let mut bytes = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(8192)));
            let _ = f.take(8192).read_to_end(&mut bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
        if tail.is_empty() {
            format!(" (its output is in {})", self.log.display())
        } else {
            format!(
                "; its last output: {} (all of it in {})",
                crate::text::escape_controls(&tail),
                self.log.display()
            )
        }
    }

    /// Starts `command` detached (its own process group), with `env` (a `None` value unset),
    /// its output appended to the log.
    fn start(
        &mut self,
        command: &str,
        env: &BTreeMap<String, Option<String>>,
    ) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let mut cmd = crate::shell::user_command(command);
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err);
        crate::shell::own_process_group(&mut cmd);
        self.reap();
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run `{command}`: {e}"))?;
        self.child = Some(child);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn putting_back_by_hand_names_the_command_line_folder_and_environment() {
        let record = LaunchRecord {
            template: "exec python main.py {args}".into(),
            argv: v(&["main.py", "--port", "8188", "--cache-classic"]),
            flags: v(&["--cache-classic"]),
            memory_mode: None,
            cmdline: v(&["python3", "main.py", "--port", "8188", "--cache-classic"]),
            cwd: Some("/home/user/ComfyUI".into()),
            env: [("PYTORCH_CUDA_ALLOC_CONF".to_string(), None)].into(),
            changed: true,
            since: String::new(),
        };
        let words = record.by_hand("http://127.0.0.1:8188");
        assert!(
            words.contains(
                "`cd /home/user/ComfyUI && python3 main.py --port 8188 --cache-classic` with PYTORCH_CUDA_ALLOC_CONF unset"
            ),
            "{words}"
        );
        assert!(
            words.contains("`exec python main.py --cache-classic`"),
            "{words}"
        );
    }
}
