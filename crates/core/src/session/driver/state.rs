//! The driver's state: the [`Driver`] (the journal, the backend, the clock, the write-behind),
//! what it hands a runner outside its loop ([`DriverParts`]), and the results of its steps
//! (a judged run, a submission, an environment check).

use super::backend::{Backend, Clock, Hooks};
use crate::hashing::HashCache;
use crate::ladder::work::Work;
use crate::run::RunRecord;
use crate::session::index::CheckMark;
use crate::session::journal::{
    now_rfc3339, JournalError, Outcome, RunEntry, RunStatus, SessionFile, SessionPaths, SyncBehind,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why the driver returned an error (the journal could not be written or read).
pub(crate) type DriveResult = Result<(), JournalError>;

/// The bisection driver over one session.
pub struct Driver<'h, B: Backend, C: Clock> {
    /// Where the session lives.
    pub paths: SessionPaths,
    /// The journal (the state of the machine).
    pub session: SessionFile,
    pub(super) backend: B,
    pub(super) clock: C,
    pub(super) hooks: &'h mut dyn Hooks,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) hash_cache: Option<HashCache>,
    /// Fsyncs of journal writes still running; waited for before every submission.
    pub(super) durable: SyncBehind,
    /// Fingerprint id of the environment the next run happens in (the last one taken).
    pub(super) env_now: Option<String>,
    /// What `check` adds to the index line of its run.
    pub(super) index_mark: Option<CheckMark>,
    /// The per-run limit given to the last run (a change of the derived default is noted).
    pub(super) last_limit: Option<Duration>,
    /// The work of every ladder step per workflow, at full and at the reduced step count
    /// (read once, for the predictor).
    pub(super) works: Vec<Option<Vec<(Work, Work)>>>,
}

/// The driver's equipment, borrowed by name for a runner outside its loop ([`Driver::parts`]).
pub(crate) struct DriverParts<'d, B, C> {
    /// The server the runs go to.
    pub backend: &'d mut B,
    /// The front end's hooks (progress, notes).
    pub hooks: &'d mut dyn Hooks,
    /// The journal's write-behind: atomic writes whose fsyncs finish in the background.
    pub journal: &'d mut SyncBehind,
    /// The clock.
    pub clock: &'d C,
}

/// A finished run as [`Driver::judge_run`] judged it.
pub(crate) struct JudgedRun {
    /// The record, with its diagnosis.
    pub(crate) record: RunRecord,
    /// Its outcome.
    pub(crate) outcome: Outcome,
    /// Its journal summary.
    pub(crate) summary: crate::session::journal::RunSummary,
    /// Its diagnosis (a run that did not pass).
    pub(crate) diagnosis: Option<crate::diagnose::Diagnosis>,
    /// Memory pressure it passed under.
    pub(crate) pressure: Option<crate::analytics::pressure::MemoryPressure>,
}

impl JudgedRun {
    /// Marks `entry` done with this judgement; returns the record and the pressure for
    /// [`Driver::write_run_files`].
    pub(crate) fn mark(
        self,
        entry: &mut RunEntry,
    ) -> (
        RunRecord,
        Option<crate::analytics::pressure::MemoryPressure>,
    ) {
        entry.status = RunStatus::Done;
        entry.finished_at = Some(if self.record.finished_at.is_empty() {
            now_rfc3339()
        } else {
            self.record.finished_at.clone()
        });
        entry.outcome = Some(self.outcome);
        entry.summary = Some(self.summary);
        entry.diagnosis = self.diagnosis;
        (self.record, self.pressure)
    }
}

/// What came of [`Driver::submit`].
pub(super) enum Submitted {
    /// Nothing was submitted; why.
    Not(String),
    /// The run is journaled with this outcome.
    Done { run_id: String, outcome: Outcome },
}

/// What came of `Driver::run_once`.
#[derive(Debug, Clone)]
pub enum RunResult {
    /// The run is journaled: its session entry.
    Done(Box<RunEntry>),
    /// Nothing was submitted (the server did not answer); why.
    NotSubmitted(String),
}

/// What the environment check before a run found.
pub(super) enum EnvCheck {
    /// Same environment as the previous run (its fingerprint id, if the server gave one).
    Same(Option<String>),
    /// The environment changed: decide again in the new one.
    Changed,
    /// The environment changed and the session stopped (`--on-drift stop`).
    Stop,
}

impl<'h, B: Backend, C: Clock> Driver<'h, B, C> {
    /// A driver over `session` (already saved under `paths`).
    pub fn new(
        paths: SessionPaths,
        session: SessionFile,
        backend: B,
        clock: C,
        hooks: &'h mut dyn Hooks,
    ) -> Self {
        let cache_path = paths.runs_dir.join(crate::hashing::DEFAULT_CACHE_FILE);
        let hash_cache = if session.options.models_dirs.is_empty() {
            None
        } else {
            Some(HashCache::open(cache_path))
        };
        Driver {
            paths,
            session,
            backend,
            clock,
            hooks,
            stop: Arc::new(AtomicBool::new(false)),
            hash_cache,
            durable: SyncBehind::default(),
            env_now: None,
            index_mark: None,
            last_limit: None,
            works: Vec::new(),
        }
    }

    /// The flag that stops the session between runs (set it from a Ctrl-C handler).
    pub(crate) fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// What a runner outside the driver's loop borrows from it (the mitigations of
    /// [`crate::controls`], a relaunch of [`crate::server::relaunch`]).
    pub(crate) fn parts(&mut self) -> DriverParts<'_, B, C> {
        DriverParts {
            backend: &mut self.backend,
            hooks: &mut *self.hooks,
            journal: &mut self.durable,
            clock: &self.clock,
        }
    }

    /// True once Ctrl-C (or SIGTERM, SIGHUP) asked the session to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub(super) fn save(&mut self) -> DriveResult {
        self.session.save_behind(&self.paths, &mut self.durable)
    }

    pub(crate) fn saved(&mut self) -> DriveResult {
        self.save()?;
        self.hooks.journal_updated(&self.paths, &self.session);
        Ok(())
    }
}
