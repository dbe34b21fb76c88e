//! Time: `--start-at`, `--deadline` and its grace, the per-run and stall limits, stopping the
//! session, and the prediction that a run ends before the deadline (the work of each ladder
//! step, the step costs the reduced search weighs, the ETA the hooks show).

use super::backend::{Backend, Clock};
use super::state::{DriveResult, Driver};
use crate::analytics::cost::{self, StepCost};
use crate::analytics::predict;
use crate::ladder::work::Work;
use crate::session::eta;
use crate::session::journal::{JournalError, Outcome, RunRole, SessionState, StopReason, Verdict};
use crate::units;
use jiff::tz::Offset;
use jiff::Timestamp;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The work of a step whose variant could not be read (predicts nothing but setup).
pub(super) const ZERO_WORK: Work = Work {
    steps: 0,
    pixels: 0,
    frames: 1,
    latent_frames: Some(1),
    batch: 1,
    models: None,
};

/// How often the `--start-at` wait says how long is left.
const START_NOTE_EVERY: Duration = Duration::from_secs(600);

/// The per-run limit while no run of the session has finished, when `--timeout` is not given.
pub(crate) const DEFAULT_RUN_LIMIT: Duration = Duration::from_secs(3600);

/// Without `--timeout`, a run may take this many times the longest finished run of the
/// session (never less than [`DEFAULT_RUN_LIMIT`]).
pub(crate) const RUN_LIMIT_FACTOR: u32 = 8;

impl<'h, B: Backend, C: Clock> Driver<'h, B, C> {
    pub(super) fn start_at(&self) -> Option<(Timestamp, Offset)> {
        let text = self.session.options.start_at.as_deref()?;
        let (t, offset) = units::parse_rfc3339_offset(text)?;
        (t > self.clock.now()).then_some((t, offset))
    }

    pub(crate) fn deadline(&self) -> Option<Timestamp> {
        let text = self.session.options.deadline.as_deref()?;
        units::parse_rfc3339(text)
    }

    /// When a run still going is interrupted: the deadline plus `--deadline-grace`.
    pub(crate) fn run_stop_at(&self) -> Option<Timestamp> {
        let grace = self
            .session
            .options
            .deadline_grace_s
            .map(Duration::from_secs)
            .unwrap_or(crate::session::journal::DEFAULT_DEADLINE_GRACE);
        self.deadline()?.checked_add(grace).ok()
    }

    /// The limit of the next run: `--timeout` when given; otherwise [`RUN_LIMIT_FACTOR`] times
    /// the longest run of the session that ended by itself (passed or failed: a timeout, an
    /// interruption or a lost server says nothing of how long the work takes), at least
    /// [`DEFAULT_RUN_LIMIT`]. The second part says where the limit comes from.
    pub(crate) fn run_limit(&self) -> (Duration, String) {
        if let Some(s) = self.session.options.timeout_s {
            return (Duration::from_secs(s), "--timeout".into());
        }
        let longest = self
            .session
            .workflows
            .iter()
            .flat_map(|w| &w.runs)
            .filter(|r| matches!(r.outcome, Some(Outcome::Passed | Outcome::Failed { .. })))
            .filter_map(|r| r.summary.as_ref().map(|s| s.duration_ms))
            .max()
            .map(Duration::from_millis);
        match longest {
            Some(l) if l * RUN_LIMIT_FACTOR > DEFAULT_RUN_LIMIT => (
                l * RUN_LIMIT_FACTOR,
                format!(
                    "{RUN_LIMIT_FACTOR} × the longest run so far ({}); --timeout sets it",
                    units::compact_duration(l)
                ),
            ),
            _ => (
                DEFAULT_RUN_LIMIT,
                "the default while no run took over 1/8 of it; --timeout sets it".into(),
            ),
        }
    }

    /// The hang limit of the next run ([`crate::run::hang::stall_limit`]): `--stall`, else
    /// derived from the longest quiet stretch of the session's runs that ended by themselves.
    pub(crate) fn stall_limit(&self) -> (Duration, String) {
        let quiet = self
            .session
            .workflows
            .iter()
            .flat_map(|w| &w.runs)
            .filter(|r| matches!(r.outcome, Some(Outcome::Passed | Outcome::Failed { .. })))
            .filter_map(|r| r.summary.as_ref().and_then(|s| s.longest_quiet_ms))
            .max()
            .map(Duration::from_millis);
        crate::run::hang::stall_limit(self.session.options.stall_s.map(Duration::from_secs), quiet)
    }

    /// Waits for `--start-at`; false when stopped meanwhile.
    pub(super) fn wait_until(
        &mut self,
        (until, offset): (Timestamp, Offset),
    ) -> Result<bool, JournalError> {
        let text = units::format_rfc3339(until, offset);
        self.session.state = SessionState::Waiting {
            until: text.clone(),
        };
        self.save()?;
        self.hooks.note(&format!(
            "waiting until {text} before the first run (--start-at)"
        ));
        let mut last_note: Option<Timestamp> = None;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                self.stop_session(
                    None,
                    StopReason::Interrupted,
                    "interrupted while waiting for --start-at".into(),
                )?;
                return Ok(false);
            }
            let now = self.clock.now();
            if now >= until {
                return Ok(true);
            }
            let left = (until - now).unsigned_abs();
            if last_note.is_none_or(|t| (now - t).unsigned_abs() >= START_NOTE_EVERY) {
                if last_note.is_some() {
                    self.hooks.note(&format!(
                        "waiting until {text} (--start-at): {} left",
                        units::compact_duration(left)
                    ));
                }
                last_note = Some(now);
            }
            self.clock.sleep(left.min(Duration::from_secs(1)));
        }
    }

    /// Marks the session stopped (and the current workflow incomplete).
    pub(super) fn stop_session(
        &mut self,
        workflow: Option<usize>,
        reason: StopReason,
        detail: String,
    ) -> DriveResult {
        if let Some(w) = workflow {
            let job = &mut self.session.workflows[w];
            job.verdict = Some(Verdict::Incomplete {
                reason,
                detail: detail.clone(),
            });
        }
        self.hooks.note(&format!("stopping: {detail}"));
        self.session.state = SessionState::Stopped { reason, detail };
        self.saved()
    }

    /// With `--search-steps`: the predicted time of each ladder step's run of workflow `w`
    /// (full, reduced) from the session's finished runs, which decides where few steps pay;
    /// None before any run finished.
    pub(super) fn step_costs(&mut self, w: usize) -> Option<Vec<StepCost>> {
        self.session.options.search_steps?;
        let seen = eta::observed(&self.session);
        if seen.is_empty() {
            return None;
        }
        let works = self.step_works(w);
        predict::step_costs(&seen, w, &works, self.session.options.cold)
    }

    /// The work of each ladder step of workflow `w` (full, reduced), read once.
    pub(super) fn step_works(&mut self, w: usize) -> Vec<(Work, Work)> {
        if self.works.len() <= w {
            self.works.resize(w + 1, None);
        }
        if let Some(works) = &self.works[w] {
            return works.clone();
        }
        let cap = self.session.options.search_steps;
        let works: Vec<(Work, Work)> = (0..self.session.workflows[w].steps.len())
            .map(|k| self.run_work(w, k, RunRole::Search, cap))
            .map(|(full, cut)| (full.unwrap_or(ZERO_WORK), cut.unwrap_or(ZERO_WORK)))
            .collect();
        self.works[w] = Some(works.clone());
        works
    }

    /// The work of step `step`'s variant at full steps and at `cap` (None: unreadable).
    pub(super) fn run_work(
        &self,
        w: usize,
        step: usize,
        role: RunRole,
        cap: Option<u32>,
    ) -> (Option<Work>, Option<Work>) {
        let Ok((workflow, _)) = self.variant(w, step, role) else {
            return (None, None);
        };
        let full = cost::work_of(&workflow);
        let cut = crate::session::prepare::reduce_steps(workflow, cap, &self.paths.session_file())
            .ok()
            .map(|(reduced, _)| cost::work_of(&reduced));
        (Some(full), cut)
    }

    /// Predicts the next run and the session's time left (said to the hooks); with
    /// `--deadline`, a run predicted to end after the deadline and its grace is not started:
    /// the session stops, resumable. False when it stopped.
    pub(super) fn predicted_in_time(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        cap: Option<u32>,
    ) -> Result<bool, JournalError> {
        let seen = eta::observed(&self.session);
        let cold = self.session.options.cold;
        let run = self
            .run_work(w, step, role, cap)
            .1
            .and_then(|work| predict::predict_run(&seen, w, step, &work, cold));
        let mut left = run.map(|r| r.total());
        for v in w..self.session.workflows.len() {
            let works = self.step_works(v);
            let mut runs = eta::runs_left(&self.session.workflows[v], &self.session.options);
            if v == w {
                // The next run is counted once, as predicted above.
                if let Some(i) = runs.iter().position(|r| r.0 == step && r.2 >= 1.0) {
                    runs.remove(i);
                }
            }
            left = match (left, predict::time_left(&seen, v, &runs, &works, cold)) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        self.hooks.estimate(run.map(|r| r.total()), left);
        let (Some(run), Some(stop_at), Some(deadline)) = (
            run,
            self.run_stop_at(),
            self.session.options.deadline.clone(),
        ) else {
            return Ok(true);
        };
        let now = self.clock.now();
        let Some(end) = now.checked_add(run.total()).ok().filter(|e| *e > stop_at) else {
            return Ok(true);
        };
        let offset = units::parse_rfc3339_offset(&deadline)
            .map(|(_, o)| o)
            .unwrap_or(Offset::UTC);
        let grace = (stop_at - self.deadline().unwrap_or(stop_at)).unsigned_abs();
        let job = &self.session.workflows[w];
        let increment = job
            .steps
            .get(step)
            .map(|s| s.increment.clone())
            .unwrap_or_default();
        self.stop_session(
            Some(w),
            StopReason::Deadline,
            format!(
                "not starting step {step} {increment}: predicted to take {} (from this session's \
                 runs), it would end at {}, after the deadline {deadline} + {} grace \
                 (--deadline-grace); `{}` continues with a later --deadline (or \
                 --no-deadline)",
                units::compact_duration(run.total()),
                units::format_rfc3339(end.round(jiff::Unit::Second).unwrap_or(end), offset),
                units::compact_duration(grace),
                self.resume_command()
            ),
        )?;
        Ok(false)
    }
}
