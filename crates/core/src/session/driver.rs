//! The session driver: walks the workflows one after another, asks `decide` what to run,
//! journals every state change, and stops cleanly (deadline, Ctrl-C, server lost and not back).
//!
//! The driver talks to the server only through [`Backend`] and to time only through [`Clock`],
//! so the state machine and the journal are tested with fakes; `session::live` has the real ones.
//!
//! This file is the loop (drive, one run, submit, finish, settle a run in flight, resume);
//! `driver/backend.rs` the traits it runs through, `driver/state.rs` the driver's state,
//! `driver/deadline.rs` time (start, deadline, limits, prediction), `driver/liveness.rs` the
//! server's liveness and drift, and `driver/files.rs` what a run leaves on disk.

use super::decide::{decide_steps_in, Decision};
use super::index::CheckMark;
use super::journal::{
    now_rfc3339, read_json, run_dir_name, InFlight, JournalError, Outcome, Phase, ReducedSteps,
    RunEntry, RunFile, RunRole, RunStatus, SessionState, StopReason, Verdict, RUN_EVENTS_FILE,
    RUN_RECORD_FILE, RUN_WORKFLOW_FILE,
};
use crate::run::RunRecord;
use crate::units;
use crate::workflow::Workflow;
use std::sync::atomic::Ordering;

mod backend;
mod deadline;
mod files;
mod liveness;
mod state;

pub use backend::{Attempt, Backend, Clock, Hooks, NoHooks, Recovery, RunSpec, SystemClock};
pub(crate) use deadline::DEFAULT_RUN_LIMIT;
pub(crate) use files::describe_run;
pub(crate) use state::{DriveResult, DriverParts};
pub use state::{Driver, RunResult};
use state::{EnvCheck, Submitted};

impl<'h, B: Backend, C: Clock> Driver<'h, B, C> {
    /// Runs the session until every workflow has a verdict or it has to stop; every journal
    /// write is durable when it returns.
    pub fn drive(&mut self) -> DriveResult {
        let result = self.drive_until_stop();
        let durable = self.durable.wait();
        result.and(durable)
    }

    fn drive_until_stop(&mut self) -> DriveResult {
        if let Some(until) = self.start_at() {
            if !self.wait_until(until)? {
                return Ok(());
            }
        }
        // A resumed session: the run in flight when the tool died comes first.
        if self.session.in_flight.is_some() && !self.settle_in_flight()? {
            return Ok(());
        }
        for w in 0..self.session.workflows.len() {
            if self.session.workflows[w]
                .verdict
                .as_ref()
                .is_some_and(|v| !matches!(v, Verdict::Incomplete { .. }))
            {
                continue;
            }
            self.session.workflows[w].verdict = None;
            self.session.state = SessionState::Running { workflow: w };
            self.save()?;
            if !self.drive_workflow(w)? {
                return Ok(());
            }
        }
        self.session.state = SessionState::Done;
        self.saved()
    }

    /// The exact command that continues this session: its id, and `--runs-dir` unless the
    /// runs folder is the default `runs`.
    pub(crate) fn resume_command(&self) -> String {
        crate::shell::resume_command(&self.session.session_id, Some(&self.paths.runs_dir))
    }

    /// Checks what stops the session between runs; true when it may go on.
    fn may_continue(&mut self, w: usize) -> Result<bool, JournalError> {
        if self.stop.load(Ordering::SeqCst) {
            self.stop_session(
                Some(w),
                StopReason::Interrupted,
                format!(
                    "interrupted (Ctrl-C, SIGTERM or SIGHUP); `{}` continues",
                    self.resume_command()
                ),
            )?;
            return Ok(false);
        }
        if let Some(deadline) = self.deadline() {
            if self.clock.now() >= deadline {
                let text = self.session.options.deadline.clone().unwrap_or_default();
                self.stop_session(
                    Some(w),
                    StopReason::Deadline,
                    format!(
                        "deadline {text} reached; `{}` continues",
                        self.resume_command()
                    ),
                )?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Works on one workflow until its verdict; false when the session had to stop.
    fn drive_workflow(&mut self, w: usize) -> Result<bool, JournalError> {
        loop {
            let costs = self.step_costs(w);
            let (phase, decision, cap) = decide_steps_in(
                &self.session.workflows[w],
                &self.session.options,
                self.env_now.as_deref(),
                costs.as_deref(),
            );
            self.session.workflows[w].phase = phase;
            match decision {
                Decision::Finish(verdict) => {
                    let job = &mut self.session.workflows[w];
                    job.phase = Phase::Done;
                    job.verdict = Some(verdict);
                    let line = job.headline().unwrap_or_default();
                    self.hooks.note(&format!("{}: {line}", job.name));
                    self.saved()?;
                    return Ok(true);
                }
                Decision::Run { .. } | Decision::Confirm { .. } => {
                    let (step, role, confirms) = match decision {
                        Decision::Run { step, role } => (step, role, None),
                        Decision::Confirm { step, crashed } => {
                            self.hooks.note(&format!(
                                "run {crashed} (step {step}) crashed; re-running it to confirm (--confirm-crashes)"
                            ));
                            (step, RunRole::Confirm, Some(crashed))
                        }
                        Decision::Finish(_) => unreachable!("handled above"),
                    };
                    if !self.may_continue(w)? {
                        return Ok(false);
                    }
                    if !self.predicted_in_time(w, step, role, cap)? {
                        return Ok(false);
                    }
                    if let Some(cmd) = self.session.options.restart_cmd.clone() {
                        if self.session.options.restart_each {
                            if let Err(e) = self.backend.restart(&cmd) {
                                self.hooks.note(&format!("--restart-cmd failed: {e}"));
                            }
                        }
                    }
                    if !self.ensure_server(w)? {
                        return Ok(false);
                    }
                    let fingerprint = match self.take_environment(w)? {
                        EnvCheck::Same(id) => id,
                        EnvCheck::Changed => continue,
                        EnvCheck::Stop => return Ok(false),
                    };
                    if !self.one_run(w, step, role, confirms, fingerprint, cap)? {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// Submits one run and journals it; false when the session had to stop.
    fn one_run(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        confirms: Option<String>,
        fingerprint: Option<String>,
        cap: Option<u32>,
    ) -> Result<bool, JournalError> {
        match self.submit(w, step, role, confirms, fingerprint, cap)? {
            Submitted::Not(_) => self.ensure_server(w),
            Submitted::Done { run_id, outcome } => match outcome {
                Outcome::Hang {
                    interrupt_confirmed: false,
                    ..
                } if self.session.options.restart_cmd.is_none() => {
                    // The hung prompt still holds the server's worker: every later run would
                    // wait behind it.
                    self.stop_session(
                        Some(w),
                        StopReason::ServerLost,
                        format!(
                            "run {run_id} hung and the server ignored the interrupt; restart \
                             ComfyUI (or give --restart-cmd so the session does it), then `{}` \
                             goes on",
                            self.resume_command()
                        ),
                    )?;
                    Ok(false)
                }
                Outcome::Hang {
                    interrupt_confirmed: false,
                    ..
                } => {
                    // Restart through --restart-cmd: the hung prompt holds the worker.
                    self.back_after_crash(w)
                }
                Outcome::ServerLost { .. } | Outcome::Timeout { .. } | Outcome::Hang { .. }
                    if self.will_confirm(w, &run_id) =>
                {
                    // A crash decides nothing alone: it is re-run once the server is back.
                    self.back_after_crash(w)
                }
                Outcome::ServerLost { .. } => {
                    // The variant killed the server: it counts as failing and is not
                    // resubmitted (beyond --repeat); the session needs the server back.
                    self.ensure_server(w)
                }
                Outcome::Interrupted
                    if !self.stop.load(Ordering::SeqCst)
                        && self.run_stop_at().is_some_and(|t| self.clock.now() >= t) =>
                {
                    let text = self.session.options.deadline.clone().unwrap_or_default();
                    self.stop_session(
                        Some(w),
                        StopReason::Deadline,
                        format!(
                            "deadline {text} reached while run {run_id} was still going; \
                             interrupted it after the grace period (--deadline-grace); `{}` \
                             runs it again",
                            self.resume_command()
                        ),
                    )?;
                    Ok(false)
                }
                Outcome::Interrupted => {
                    self.stop_session(
                        Some(w),
                        StopReason::Interrupted,
                        format!(
                            "the run was interrupted; `{}` runs it again",
                            self.resume_command()
                        ),
                    )?;
                    Ok(false)
                }
                _ => Ok(true),
            },
        }
    }

    /// Runs the last step of the first workflow once, as the target, and journals it (`check`:
    /// no ladder, no decision, no restart or wait afterwards; `mark` goes into its index line).
    /// With `confirms` (a crashed run's id) it is the second run that confirms the crash: the
    /// server is first restarted through `--restart-cmd` (when given) and waited for. The
    /// session ends `done`, or stopped when the run was interrupted.
    pub(crate) fn run_once(
        &mut self,
        mark: Option<CheckMark>,
        confirms: Option<String>,
    ) -> Result<RunResult, JournalError> {
        self.index_mark = mark;
        self.session.state = SessionState::Running { workflow: 0 };
        self.save()?;
        if confirms.is_some() && !self.wait_for_server(true) {
            return Ok(RunResult::NotSubmitted(format!(
                "the server {} was not back within {}s (--wait-server)",
                self.session.server, self.session.options.wait_server_s
            )));
        }
        let role = if confirms.is_some() {
            RunRole::Confirm
        } else {
            RunRole::Target
        };
        let fingerprint = match self.take_environment(0)? {
            EnvCheck::Same(id) => id,
            EnvCheck::Changed | EnvCheck::Stop => self.env_now.clone(),
        };
        let step = self.session.workflows[0].steps.len().saturating_sub(1);
        let submitted = self.submit(0, step, role, confirms, fingerprint, None)?;
        let result = match submitted {
            Submitted::Not(reason) => RunResult::NotSubmitted(reason),
            Submitted::Done { run_id, outcome } => {
                let entry = self.session.workflows[0]
                    .runs
                    .iter()
                    .find(|r| r.run_id == run_id)
                    .cloned();
                match entry {
                    Some(entry) => RunResult::Done(Box::new(entry)),
                    None => RunResult::NotSubmitted(format!(
                        "run {run_id} ({}) is not in the journal",
                        outcome.name()
                    )),
                }
            }
        };
        self.session.workflows[0].phase = Phase::Done;
        // The run decides the check (an interrupted one: cannot test).
        if let RunResult::Done(e) = &result {
            self.session.workflows[0].verdict = Some(Verdict::Checked {
                run_id: e.run_id.clone(),
            });
        }
        self.session.state = match &result {
            RunResult::Done(e) if matches!(e.outcome, Some(Outcome::Interrupted)) => {
                SessionState::Stopped {
                    reason: StopReason::Interrupted,
                    detail: "the run was interrupted".into(),
                }
            }
            RunResult::NotSubmitted(reason) => SessionState::Stopped {
                reason: StopReason::ServerLost,
                detail: format!("not submitted: {reason}"),
            },
            RunResult::Done(_) => SessionState::Done,
        };
        self.saved()?;
        self.durable.wait()?;
        Ok(result)
    }

    /// Submits one run and journals it (`run.json`, the index line, the session entry).
    fn submit(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        confirms: Option<String>,
        fingerprint: Option<String>,
        cap: Option<u32>,
    ) -> Result<Submitted, JournalError> {
        let (workflow, increment) = self.variant(w, step, role)?;
        let (workflow, reduced) =
            super::prepare::reduce_steps(workflow, cap, &self.paths.session_file())?;
        let run_id = uuid::Uuid::new_v4().to_string();
        let dir = run_dir_name(step, &increment, &run_id);
        let run_dir = self.paths.dir.join(&dir);
        std::fs::create_dir_all(&run_dir).map_err(|source| JournalError::Io {
            action: "cannot create run folder",
            path: run_dir.clone(),
            source,
        })?;
        self.durable.write_atomic(
            &run_dir.join(RUN_WORKFLOW_FILE),
            format!("{}\n", workflow.to_pretty_json()).as_bytes(),
        )?;
        self.copy_ui_companion(w, step, role, &run_dir)?;
        let entry = RunEntry {
            run_id: run_id.clone(),
            step,
            increment: increment.clone(),
            role,
            dir: dir.clone(),
            workflow_sha256: workflow.sha256(),
            status: RunStatus::InFlight,
            started_at: now_rfc3339(),
            finished_at: None,
            outcome: None,
            summary: None,
            diagnosis: None,
            confirms,
            fingerprint,
            reduced,
        };
        self.session.workflows[w].runs.push(entry.clone());
        self.session.in_flight = Some(InFlight {
            workflow: w,
            run_id: run_id.clone(),
        });
        self.save()?;
        self.hooks.run_started(&self.session, w, &entry);

        let events_file = run_dir.join(RUN_EVENTS_FILE);
        let label = format!(
            "{} · step {step} {increment}{}{}",
            self.session.workflows[w].name,
            if role == RunRole::Control {
                " (control)"
            } else {
                ""
            },
            entry
                .reduced
                .as_ref()
                .map(ReducedSteps::mark)
                .unwrap_or_default()
        );
        let (limit, why) = self.run_limit();
        // Said when the derived limit moves off the default (a given --timeout is known).
        if self.session.options.timeout_s.is_none()
            && self.last_limit.unwrap_or(DEFAULT_RUN_LIMIT) != limit
        {
            self.hooks.note(&format!(
                "per-run limit {} ({why})",
                units::compact_duration(limit)
            ));
            self.last_limit = Some(limit);
        }
        let stop_at = self.run_stop_at();
        let spec = RunSpec {
            run_id: &run_id,
            workflow: &workflow,
            cold: self.session.options.cold,
            timeout: Some(limit),
            stall: Some(self.stall_limit().0),
            stop_at,
            events_file: &events_file,
            label,
        };
        // Everything journaled so far (this run's files and in-flight entry, the last run's
        // record) is on disk before the GPU gets work.
        self.durable.wait()?;
        match self.backend.run(&spec) {
            Attempt::NotSubmitted(reason) => {
                self.hooks.note(&format!("not submitted: {reason}"));
                self.session.workflows[w]
                    .runs
                    .retain(|r| r.run_id != run_id);
                self.session.in_flight = None;
                let _ = std::fs::remove_dir_all(&run_dir);
                self.save()?;
                Ok(Submitted::Not(reason))
            }
            Attempt::Done(record) => {
                let outcome = self.finish_run(w, &run_id, *record, &workflow, false)?;
                Ok(Submitted::Done { run_id, outcome })
            }
        }
    }

    /// Journals a finished run: `run.json`, the index line, the session entry. Idempotent, so a
    /// kill between the steps is repaired on resume (`recovered`: the run was in flight when the
    /// tool died, so its index line may already be there).
    fn finish_run(
        &mut self,
        w: usize,
        run_id: &str,
        record: RunRecord,
        workflow: &Workflow,
        recovered: bool,
    ) -> Result<Outcome, JournalError> {
        let Some(i) = self.session.workflows[w]
            .runs
            .iter()
            .position(|r| r.run_id == run_id)
        else {
            return Err(JournalError::Invalid {
                path: self.paths.session_file(),
                reason: format!("run {run_id} is not in the journal"),
            });
        };
        let step = self.session.workflows[w].runs[i].step;
        let judged = self.judge_run(w, step, record, workflow, self.session.options.strict);
        let outcome = judged.outcome.clone();
        let entry = &mut self.session.workflows[w].runs[i];
        let (record, pressure) = judged.mark(entry);
        let entry = entry.clone();
        let components = self.write_run_files(w, &entry, workflow, record, pressure)?;
        tracing::debug!(run_id = %run_id, "run recorded (run.json written)");
        self.index(w, &entry, components, recovered)?;
        self.session.in_flight = None;
        self.saved()?;
        self.hooks.run_finished(&self.session, w, &entry);
        Ok(outcome)
    }

    /// Forgets the run in flight (run `i` of workflow `w`, its folder `run_dir`): the decision
    /// runs its step again.
    fn forget_in_flight(
        &mut self,
        w: usize,
        i: usize,
        run_dir: &std::path::Path,
    ) -> Result<(), JournalError> {
        self.session.workflows[w].runs.remove(i);
        self.session.in_flight = None;
        let _ = std::fs::remove_dir_all(run_dir);
        self.save()
    }

    /// Settles the run that was in flight when the tool died: `run.json` already written →
    /// journal it; else ask the server's history by prompt_id; else forget it (it is re-run).
    /// False when the session had to stop (server not back).
    fn settle_in_flight(&mut self) -> Result<bool, JournalError> {
        let Some(flight) = self.session.in_flight.clone() else {
            return Ok(true);
        };
        let w = flight.workflow;
        let Some(i) = self
            .session
            .workflows
            .get(w)
            .and_then(|job| job.runs.iter().position(|r| r.run_id == flight.run_id))
        else {
            self.session.in_flight = None;
            self.save()?;
            return Ok(true);
        };
        let entry = self.session.workflows[w].runs[i].clone();
        let run_dir = self.paths.run_dir(&entry);
        let (workflow, _) = self.variant(w, entry.step, entry.role)?;
        // Killed after run.json was written: finish the bookkeeping only.
        if let Ok(file) = read_json::<RunFile>(&run_dir.join(RUN_RECORD_FILE)) {
            self.finish_run(w, &entry.run_id, file.record, &workflow, true)?;
            return Ok(true);
        }
        loop {
            match self
                .backend
                .recover(&entry.run_id, &workflow, &run_dir.join(RUN_EVENTS_FILE))
            {
                Recovery::Finished(record)
                    if crate::session::evidence::pass_without_evidence(&record) =>
                {
                    self.hooks.note(&format!(
                        "run {} passed on the server while comfy-bisect was down, but its console \
                         (where a memory fallback or memory pressure shows) was not seen: it is \
                         not counted as a clean pass and will be run again (cold)",
                        entry.run_id
                    ));
                    self.forget_in_flight(w, i, &run_dir)?;
                    return Ok(true);
                }
                Recovery::Finished(record) => {
                    self.hooks.note(&format!(
                        "run {} was finished by the server while comfy-bisect was down; recovered from its history",
                        entry.run_id
                    ));
                    let outcome = self.finish_run(w, &entry.run_id, *record, &workflow, true)?;
                    if matches!(outcome, Outcome::ServerLost { .. }) {
                        return self.ensure_server(w);
                    }
                    return Ok(true);
                }
                Recovery::Unknown => {
                    self.hooks.note(&format!(
                        "run {} is not in the server's history; it will be run again",
                        entry.run_id
                    ));
                    self.forget_in_flight(w, i, &run_dir)?;
                    return Ok(true);
                }
                Recovery::Unreachable(reason) => {
                    self.hooks.note(&format!(
                        "cannot ask the server about the run in flight: {reason}"
                    ));
                    if !self.ensure_server(w)? {
                        return Ok(false);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
