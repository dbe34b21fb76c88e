//! Liveness and drift: whether the server answers (restarting it, waiting for it), the
//! environment fingerprint taken before every run and what its drift does (`--on-drift`), and
//! confirming a crash once the server is back.

use super::backend::{Backend, Clock};
use super::state::{Driver, EnvCheck};
use crate::session::journal::{now_rfc3339, Drift, JournalError, OnDrift, RunRole, StopReason};
use crate::units;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often a wait for a lost server says it is still waiting.
const WAIT_NOTE_EVERY: Duration = Duration::from_secs(60);

impl<'h, B: Backend, C: Clock> Driver<'h, B, C> {
    /// Waits for the server (restarting it first when `--restart-cmd` is given and `restart`);
    /// stops the session when it does not come back within `--wait-server`.
    pub(super) fn ensure_server(&mut self, w: usize) -> Result<bool, JournalError> {
        if self.backend.alive() {
            return Ok(true);
        }
        if self.wait_for_server(true) {
            return Ok(true);
        }
        let detail = format!(
            "server {} lost and not back within {}s (--wait-server); `{}` continues",
            self.session.server,
            self.session.options.wait_server_s,
            self.resume_command()
        );
        self.stop_session(Some(w), StopReason::ServerLost, detail)?;
        Ok(false)
    }

    /// Polls the server for up to `--wait-server`; true when it answers.
    pub(crate) fn wait_for_server(&mut self, restart: bool) -> bool {
        if restart {
            if let Some(cmd) = self.session.options.restart_cmd.clone() {
                self.hooks.note(&format!("restarting the server: {cmd}"));
                if let Err(e) = self.backend.restart(&cmd) {
                    self.hooks.note(&format!("--restart-cmd failed: {e}"));
                }
            }
        }
        let limit = Duration::from_secs(self.session.options.wait_server_s);
        self.hooks.note(&format!(
            "waiting up to {}s for the server {} (--wait-server)",
            limit.as_secs(),
            self.session.server
        ));
        let start = self.clock.now();
        let mut noted = Duration::ZERO;
        loop {
            if self.backend.alive() {
                return true;
            }
            let waited = (self.clock.now() - start).unsigned_abs();
            if self.stop.load(Ordering::SeqCst) || waited >= limit {
                return false;
            }
            // A line a minute, so a log without a terminal shows the wait going on.
            if waited >= noted + WAIT_NOTE_EVERY {
                noted = waited;
                self.hooks.note(&format!(
                    "still waiting for the server {} ({} of {})",
                    self.session.server,
                    units::compact_duration(waited),
                    units::compact_duration(limit)
                ));
            }
            self.clock.sleep(Duration::from_secs(1));
        }
    }

    /// Takes the environment fingerprint before a run and compares it with the one the
    /// session's previous run saw. A change is journaled as a drift; then the next decision is
    /// made again in the new environment (re-anchoring) or, with `--on-drift stop`, the
    /// session ends.
    pub(super) fn take_environment(&mut self, w: usize) -> Result<EnvCheck, JournalError> {
        let Some(fp) = self.backend.environment() else {
            return Ok(EnvCheck::Same(None));
        };
        let id = fp.id.clone();
        let previous = self
            .env_now
            .clone()
            .or_else(|| self.session.last_run_fingerprint().map(str::to_string));
        let before = previous
            .as_ref()
            .and_then(|p| self.session.fingerprints.get(p))
            .cloned();
        self.session
            .fingerprints
            .entry(id.clone())
            .or_insert(fp.clone());
        self.env_now = Some(id.clone());
        let Some(from) = previous.filter(|p| *p != id) else {
            return Ok(EnvCheck::Same(Some(id)));
        };
        let mut changes = before
            .map(|b| crate::comfy::fingerprint::diff(&b, &fp))
            .unwrap_or_default();
        if changes.is_empty() {
            changes.push(format!("fingerprint {from} → {id}"));
        }
        let action = self.session.options.on_drift;
        self.hooks.note(&format!(
            "the server's environment changed ({}); {}",
            changes.join("; "),
            match action {
                OnDrift::Reanchor =>
                    "re-running the last passing step under it (--on-drift reanchor)",
                OnDrift::Stop => "stopping (--on-drift stop)",
            }
        ));
        self.session.drifts.push(Drift {
            detected_at: now_rfc3339(),
            workflow: w,
            from,
            to: id,
            changes: changes.clone(),
            action,
        });
        if action == OnDrift::Stop {
            self.stop_session(
                Some(w),
                StopReason::EnvironmentChanged,
                format!("environment changed: {}", changes.join("; ")),
            )?;
            return Ok(EnvCheck::Stop);
        }
        self.save()?;
        Ok(EnvCheck::Changed)
    }

    /// After a crash that will be re-run to confirm it: with `--restart-cmd` the server is
    /// restarted (even when it answers: a crash may leave it in a bad state), then waited for.
    pub(super) fn back_after_crash(&mut self, w: usize) -> Result<bool, JournalError> {
        if self.session.options.restart_cmd.is_none() {
            return self.ensure_server(w);
        }
        if self.wait_for_server(true) {
            return Ok(true);
        }
        let detail = format!(
            "server {} not back within {}s after --restart-cmd (--wait-server); `{}` continues",
            self.session.server,
            self.session.options.wait_server_s,
            self.resume_command()
        );
        self.stop_session(Some(w), StopReason::ServerLost, detail)?;
        Ok(false)
    }

    /// Whether the crash of run `run_id` of workflow `w` is going to be re-run.
    pub(super) fn will_confirm(&self, w: usize, run_id: &str) -> bool {
        let job = &self.session.workflows[w];
        job.runs
            .iter()
            .find(|r| r.run_id == run_id)
            .is_some_and(|r| {
                r.role != RunRole::Control
                    && job.crash_check(r, self.session.options.confirm_crashes)
                        == crate::session::journal::CrashCheck::Pending
            })
    }
}
