//! How a live session reports its progress: the [`ProgressSink`] a front end supplies (the
//! command line's progress line), the shared [`Progress`] handle the driver's hooks and the live
//! backend hold, and the texts a display shows (ladder marks, a finished run's line). Drawing
//! is the front end's job; this module does no terminal output.

use super::driver::Hooks;
use super::journal::{RunEntry, RunRole, SessionFile, SessionPaths, WorkflowJob};
use crate::run::{RunEvent, RunObserver};
use crate::units::compact_duration;
use crate::workflow::Workflow;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A progress display: the driver's hooks, the events of the run going on, and lines for the
/// user. Every method defaults to nothing.
pub trait ProgressSink: Hooks + RunObserver {
    /// Prints a line for the user (above the progress line, if any).
    fn println(&mut self, _text: &str) {}
    /// A run starts: its label (`workflow · step k increment`) and its workflow.
    fn begin_run(&mut self, _label: &str, _workflow: &Workflow) {}
    /// The session is over: remove the display.
    fn finish(&mut self) {}
}

/// A display that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoProgress;
impl Hooks for NoProgress {}
impl RunObserver for NoProgress {}
impl ProgressSink for NoProgress {}

/// A cloneable handle on a [`ProgressSink`] (the driver's hooks and the backend share one).
#[derive(Clone)]
pub struct Progress(Arc<Mutex<Box<dyn ProgressSink>>>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Default for Progress {
    fn default() -> Progress {
        Progress::silent()
    }
}

impl Progress {
    /// A handle on `sink`.
    pub fn new(sink: impl ProgressSink + 'static) -> Progress {
        Progress(Arc::new(Mutex::new(Box::new(sink))))
    }

    /// A handle that shows nothing.
    pub(crate) fn silent() -> Progress {
        Progress::new(NoProgress)
    }

    fn sink(&self) -> MutexGuard<'_, Box<dyn ProgressSink>> {
        // A display that panicked mid-draw is still good enough to keep drawing.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prints a line for the user.
    pub(crate) fn println(&self, text: &str) {
        self.sink().println(text);
    }

    /// A run starts.
    pub(crate) fn begin_run(&mut self, label: &str, workflow: &Workflow) {
        self.sink().begin_run(label, workflow);
    }

    /// Removes the display.
    pub(crate) fn finish(&self) {
        self.sink().finish();
    }
}

impl RunObserver for Progress {
    fn on_event(&mut self, event: &RunEvent) {
        self.sink().on_event(event);
    }
    fn on_raw(&mut self, event: &crate::run::RawEvent<'_>) {
        self.sink().on_raw(event);
    }
}

impl Hooks for Progress {
    fn run_started(&mut self, session: &SessionFile, workflow: usize, entry: &RunEntry) {
        self.sink().run_started(session, workflow, entry);
    }
    fn run_finished(&mut self, session: &SessionFile, workflow: usize, entry: &RunEntry) {
        self.sink().run_finished(session, workflow, entry);
    }
    fn journal_updated(&mut self, paths: &SessionPaths, session: &SessionFile) {
        self.sink().journal_updated(paths, session);
    }
    fn note(&mut self, text: &str) {
        self.sink().note(text);
    }
    fn estimate(&mut self, run: Option<Duration>, session_left: Option<Duration>) {
        self.sink().estimate(run, session_left);
    }
}

/// The ladder as marks: `✓` passed, `✗` failed, `?` other outcome, `▶` running, `·` not run.
pub fn ladder_marks(job: &WorkflowJob, running: Option<usize>) -> String {
    (0..job.steps.len())
        .map(|k| {
            if running == Some(k) {
                return '▶';
            }
            let runs: Vec<&RunEntry> = job
                .runs
                .iter()
                .filter(|r| r.step == k && r.role != RunRole::Control)
                .collect();
            if runs.iter().any(|r| r.failed()) {
                '✗'
            } else if runs.iter().any(|r| r.passed()) {
                '✓'
            } else if runs.is_empty() {
                '·'
            } else {
                '?'
            }
        })
        .collect()
}

/// The line of a finished run: `wf step 3 resolution [search] passed  12s  1a2b3c4d`.
pub fn finished_line(job: &WorkflowJob, entry: &RunEntry) -> String {
    let duration = entry
        .summary
        .as_ref()
        .map(|s| compact_duration(Duration::from_millis(s.duration_ms)))
        .unwrap_or_default();
    format!(
        "{} {}  {}  {}",
        job.name,
        super::driver::describe_run(entry),
        duration,
        &entry.run_id[..entry.run_id.len().min(8)]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::{Outcome, Phase, ReducedSteps, StepInfo};

    #[test]
    fn a_reduced_run_says_at_how_many_of_its_steps_it_runs() {
        let set = |node: &str, input: &str, from: u64, to: u64| crate::workflow::Change {
            node: node.into(),
            class_type: "KSamplerAdvanced".into(),
            action: "set".into(),
            input: Some(input.into()),
            from: Some(serde_json::json!(from)),
            to: Some(serde_json::json!(to)),
        };
        // Two experts of 20 steps split at 10: the window's end is scaled too, not a count.
        let reduced = ReducedSteps {
            cap: 4,
            changes: vec![
                set("14", "steps", 20, 4),
                set("14", "end_at_step", 10, 2),
                set("15", "steps", 20, 4),
            ],
        };
        assert_eq!(reduced.mark(), " · at 4 of 20 steps");
        let mut entry = RunEntry {
            increment: "resolution".into(),
            reduced: Some(reduced),
            ..RunEntry::done("r3", 3, Outcome::Passed)
        };
        assert_eq!(
            super::super::driver::describe_run(&entry),
            "step 3 resolution · at 4 of 20 steps [search] passed"
        );
        // A full-step run has no mark.
        entry.reduced = None;
        assert_eq!(
            super::super::driver::describe_run(&entry),
            "step 3 resolution [search] passed"
        );
    }

    #[test]
    fn a_pass_under_pressure_or_through_a_fallback_is_never_passed_alone() {
        let mut entry = RunEntry {
            increment: "frames".into(),
            ..RunEntry::done("r2", 2, Outcome::Passed)
        };
        let mut summary = crate::session::journal::RunSummary::default();
        summary.delivered.memory_pressure = vec![
            "slowed 3.1× (0.38 s/step vs 0.12 at step 1; the added work explains ≤ 1.5×)".into(),
            "weights streamed (19593 MB staged)".into(),
        ];
        entry.summary = Some(summary);
        assert_eq!(
            super::super::driver::describe_run(&entry),
            "step 2 frames [search] passed — slowed 3.1×, weights streamed"
        );
        let summary = entry.summary.as_mut().unwrap();
        summary.delivered.memory_pressure.clear();
        summary.delivered.memory_fallbacks = vec!["tiled VAE decode fallback".into()];
        assert_eq!(
            super::super::driver::describe_run(&entry),
            "step 2 frames [search] passed — tiled VAE decode fallback"
        );
    }

    #[test]
    fn ladder_marks_show_each_step() {
        let step = |i: usize| StepInfo {
            index: i,
            increment: format!("i{i}"),
            file: String::new(),
            sha256: String::new(),
            changes: vec![],
        };
        let run = |step: usize, outcome: Outcome| RunEntry::done(format!("r{step}"), step, outcome);
        let job = WorkflowJob {
            name: "wf".into(),
            source: String::new(),
            source_file: None,
            target_sha256: String::new(),
            steps: (0..5).map(step).collect(),
            controls: vec![],
            not_separable: vec![],
            kept: vec![],
            phase: Phase::Search,
            runs: vec![
                run(0, Outcome::Passed),
                run(
                    4,
                    Outcome::ServerLost {
                        detail: String::new(),
                    },
                ),
                run(
                    1,
                    Outcome::Rejected {
                        message: String::new(),
                    },
                ),
            ],
            verdict: None,
        };
        assert_eq!(ladder_marks(&job, Some(2)), "✓?▶·✗");
        assert_eq!(
            finished_line(&job, &job.runs[0]),
            "wf step 0  [search] passed    r0"
        );
    }
}
