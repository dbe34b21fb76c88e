//! Relaunching the server for a server control (`--launch-cmd 'TEMPLATE {args}'`) and putting
//! it back as it was.
//!
//! The running server is stopped through its process, found by its listening socket
//! ([`crate::host::process::locate`]): SIGTERM, then SIGKILL after [`STOP_WAIT`]. A server on
//! another machine cannot be stopped from here, so its server controls are not run. The
//! template is started with `sh -c`, in its own process group (a Ctrl-C of the tool does not
//! reach it), its output appended to `mitigations/launch.log`; `{args}` becomes the memory flags
//! the server ran with (those of [`MEMORY_FLAGS`] in its `/system_stats` `argv`) plus the
//! control's, shell-quoted. Putting it back launches the template with the original flags only
//! and checks that the fingerprint's memory mode equals the one before.

use crate::comfy::fingerprint::MemoryMode;
use crate::session::driver::{Backend, Clock, Driver, DriverParts};
use crate::session::journal::Mitigation;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How long a stopped server may take to stop answering before it is killed.
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(30);

/// ComfyUI launch flags that shape memory, with how many values follow each
/// (`comfy/cli_args.py`); the ones a relaunch carries over from the running server.
pub(crate) const MEMORY_FLAGS: &[(&str, usize)] = &[
    ("--reserve-vram", 1),
    ("--vram-headroom", 1),
    ("--disable-dynamic-vram", 0),
    ("--enable-dynamic-vram", 0),
    ("--disable-pinned-memory", 0),
    ("--disable-smart-memory", 0),
    ("--disable-async-offload", 0),
    ("--cache-none", 0),
    ("--cache-classic", 0),
    ("--cache-lru", 1),
    ("--cache-ram", 1),
    ("--use-split-cross-attention", 0),
    ("--use-quad-cross-attention", 0),
    ("--use-pytorch-cross-attention", 0),
    ("--use-sage-attention", 0),
    ("--use-flash-attention", 0),
    ("--lowvram", 0),
    ("--novram", 0),
    ("--normalvram", 0),
    ("--highvram", 0),
    ("--gpu-only", 0),
    ("--preview-method", 1),
];

/// The memory flags of `argv` (see [`MEMORY_FLAGS`]), in their order, with their values.
pub(crate) fn memory_flags(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (a.as_str(), None),
        };
        if let Some((_, n)) = MEMORY_FLAGS.iter().find(|(f, _)| *f == flag) {
            out.push(a.clone());
            if inline.is_none() {
                for v in argv.iter().skip(i + 1).take(*n) {
                    out.push(v.clone());
                }
                i += n;
            }
        }
        i += 1;
    }
    out
}

/// The original memory flags with a control's flags: a flag the control gives replaces the
/// original one (and its values), so the server sees each flag once.
pub(crate) fn with_control(original: &[String], control: &[String]) -> Vec<String> {
    let name = |a: &str| a.split_once('=').map_or(a, |(f, _)| f).to_string();
    let given: Vec<String> = control
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| name(a))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < original.len() {
        let a = &original[i];
        let n = MEMORY_FLAGS
            .iter()
            .find(|(f, _)| *f == name(a))
            .map_or(0, |(_, n)| if a.contains('=') { 0 } else { *n });
        if given.contains(&name(a)) {
            i += 1 + n;
            continue;
        }
        out.extend(original[i..(i + 1 + n).min(original.len())].iter().cloned());
        i += 1 + n;
    }
    out.extend(control.iter().cloned());
    out
}

/// `TEMPLATE` with `{args}` replaced by `args`, each shell-quoted.
pub(crate) fn fill(template: &str, args: &[String]) -> String {
    template.replace("{args}", &crate::shell::join(args))
}

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

/// The server as it was before the first relaunch.
#[derive(Debug, Clone)]
struct Original {
    flags: Vec<String>,
    memory_mode: Option<MemoryMode>,
}

/// Relaunches the server for server controls and puts it back (see the module comment).
#[derive(Debug)]
pub(crate) struct Relaunch {
    template: String,
    log: PathBuf,
    original: Option<Original>,
    /// The server runs with a control's change now.
    changed: bool,
}

impl Relaunch {
    /// A relauncher with `template`; its output goes to `dir/launch.log`.
    pub(crate) fn new(template: String, dir: PathBuf) -> Relaunch {
        Relaunch {
            template,
            log: dir.join("launch.log"),
            original: None,
            changed: false,
        }
    }

    /// Stops the server and launches it with `launch` added; waits until it answers.
    pub(crate) fn launch<B: Backend, C: Clock>(
        &mut self,
        driver: &mut Driver<'_, B, C>,
        launch: &Launch,
    ) -> Result<(), String> {
        if self.original.is_none() {
            let fp = driver.parts().backend.environment().ok_or_else(|| {
                "the server did not say how it was launched (/system_stats argv)".to_string()
            })?;
            self.original = Some(Original {
                flags: memory_flags(&fp.argv),
                memory_mode: fp.memory_mode.clone(),
            });
        }
        let original = self
            .original
            .as_ref()
            .map(|o| o.flags.clone())
            .unwrap_or_default();
        let args = with_control(&original, &launch.args);
        self.stop(driver)?;
        self.changed = true;
        self.start(&args, &launch.env)?;
        let env: Vec<String> = launch
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v} "))
            .collect();
        driver.parts().hooks.note(&format!(
            "relaunched the server: {}{}",
            env.concat(),
            fill(&self.template, &args)
        ));
        if !driver.wait_for_server(false) {
            return Err(format!(
                "the server did not answer within --wait-server after `{}` (its output is in {})",
                fill(&self.template, &args),
                self.log.display()
            ));
        }
        Ok(())
    }

    /// Puts the server back as it was (its original flags), when a control changed it; a note
    /// says what was done, and whether its memory mode is the original one.
    pub(crate) fn restore<B: Backend, C: Clock>(
        &mut self,
        driver: &mut Driver<'_, B, C>,
    ) -> Option<String> {
        if !self.changed {
            return None;
        }
        let original = self.original.clone()?;
        let command = fill(&self.template, &original.flags);
        if let Err(e) = self.stop(driver) {
            return Some(format!("could not put the server back: {e}"));
        }
        if let Err(e) = self.start(&original.flags, &BTreeMap::new()) {
            return Some(format!(
                "could not put the server back with `{command}`: {e}"
            ));
        }
        self.changed = false;
        if !driver.wait_for_server(false) {
            return Some(format!(
                "put the server back with `{command}`, but it did not answer within --wait-server (its output is in {})",
                self.log.display()
            ));
        }
        let now = driver
            .parts()
            .backend
            .environment()
            .and_then(|f| f.memory_mode);
        Some(if now == original.memory_mode {
            format!(
                "put the server back as it was (`{command}`); its memory mode is the original one"
            )
        } else {
            format!(
                "put the server back with `{command}`, but its memory mode differs from the original: {:?} → {:?}",
                original.memory_mode, now
            )
        })
    }

    /// Stops the local server process and waits until the server stops answering.
    fn stop<B: Backend, C: Clock>(&self, driver: &mut Driver<'_, B, C>) -> Result<(), String> {
        let server = driver.session.server.clone();
        let pid = match crate::host::process::locate(&server) {
            crate::host::process::Located::Found(p) => p.pid,
            crate::host::process::Located::Remote => {
                return Err(format!(
                    "the server {server} is not on this machine: it cannot be stopped and relaunched from here"
                ))
            }
            crate::host::process::Located::NotFound(why) => {
                return Err(format!("the server's process was not found: {why}"))
            }
        };
        #[cfg(unix)]
        let pid = i32::try_from(pid).map_err(|_| format!("process id {pid} out of range"))?;
        // SAFETY: kill(2) with a process id found listening on the server's port.
        #[cfg(unix)]
        unsafe {
            libc::kill(pid, libc::SIGTERM)
        };
        // Windows has no polite stop for a console process: the tree is ended at once.
        #[cfg(not(unix))]
        crate::shell::stop_tree(pid);
        let DriverParts { backend, clock, .. } = driver.parts();
        let start = clock.now();
        while backend.alive() {
            if (clock.now() - start).unsigned_abs() >= STOP_WAIT {
                // SAFETY: as above; it did not stop on SIGTERM.
                #[cfg(unix)]
                unsafe {
                    libc::kill(pid, libc::SIGKILL)
                };
                clock.sleep(Duration::from_millis(500));
                break;
            }
            clock.sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Starts the template with `args` and `env`, detached, its output appended to the log.
    fn start(&self, args: &[String], env: &BTreeMap<String, String>) -> Result<(), String> {
        let command = fill(&self.template, args);
        if let Some(dir) = self.log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let mut shell = crate::shell::user_command(&command);
        crate::shell::own_process_group(&mut shell);
        shell
            .envs(env)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map(|_| ())
            .map_err(|e| format!("cannot run `{command}`: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_memory_flags_and_their_values_are_carried_over() {
        let argv = v(&[
            "main.py",
            "--listen",
            "0.0.0.0",
            "--port",
            "8188",
            "--reserve-vram",
            "1.5",
            "--cache-lru=4",
            "--disable-pinned-memory",
            "--output-directory",
            "out",
            "--preview-method",
            "auto",
        ]);
        assert_eq!(
            memory_flags(&argv),
            v(&[
                "--reserve-vram",
                "1.5",
                "--cache-lru=4",
                "--disable-pinned-memory",
                "--preview-method",
                "auto"
            ])
        );
        assert!(memory_flags(&v(&["main.py", "--listen"])).is_empty());
    }

    #[test]
    fn a_control_flag_replaces_the_original_one() {
        let original = v(&[
            "--preview-method",
            "taesd",
            "--reserve-vram",
            "1",
            "--cache-none",
        ]);
        assert_eq!(
            with_control(&original, &v(&["--preview-method", "none"])),
            v(&[
                "--reserve-vram",
                "1",
                "--cache-none",
                "--preview-method",
                "none"
            ])
        );
        assert_eq!(
            with_control(&v(&["--reserve-vram=1"]), &v(&["--reserve-vram", "2"])),
            v(&["--reserve-vram", "2"])
        );
        assert_eq!(with_control(&original, &[]), original);
    }

    #[test]
    fn the_template_gets_its_args_shell_quoted() {
        assert_eq!(
            fill(
                "cd ~/ComfyUI && python main.py {args}",
                &v(&["--reserve-vram", "2"])
            ),
            "cd ~/ComfyUI && python main.py --reserve-vram 2"
        );
        assert_eq!(fill("x {args}", &v(&["a b", "it's"])), r"x 'a b' 'it'\''s'");
        assert_eq!(fill("x {args}", &[]), "x ");
    }
}
