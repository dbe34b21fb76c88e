//! The progress display: the ladder (one mark per step), the current run's node and sampler
//! step, and the time spent. A spinner line on a terminal; plain lines on stderr otherwise
//! (cron and systemd logs).

use super::driver::Hooks;
use super::journal::{RunEntry, RunRole, SessionFile, SessionPaths, WorkflowJob};
use crate::comfy::TrackerEvent;
use crate::run::{RunEvent, RunObserver};
use crate::units::compact_duration as human;
use crate::workflow::Workflow;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct State {
    ladder: String,
    label: String,
    node: String,
    step: String,
    run_start: Instant,
    session_start: Instant,
    classes: HashMap<String, String>,
}

/// A cloneable handle on the progress line (the driver's hooks and the backend share it).
#[derive(Clone)]
pub(crate) struct ProgressView {
    bar: ProgressBar,
    state: Arc<Mutex<State>>,
    quiet: bool,
}

/// The ladder as marks: `✓` passed, `✗` failed, `?` other outcome, `▶` running, `·` not run.
pub(crate) fn ladder_marks(job: &WorkflowJob, running: Option<usize>) -> String {
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

impl ProgressView {
    /// A progress line on stderr (hidden when stderr is not a terminal; `quiet` prints nothing).
    pub fn new(quiet: bool) -> ProgressView {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new_spinner()
        };
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        let now = Instant::now();
        ProgressView {
            bar,
            state: Arc::new(Mutex::new(State {
                ladder: String::new(),
                label: String::new(),
                node: String::new(),
                step: String::new(),
                run_start: now,
                session_start: now,
                classes: HashMap::new(),
            })),
            quiet,
        }
    }

    /// Prints a line above the progress (or on stderr when there is no progress line).
    pub fn println(&self, text: &str) {
        if self.quiet {
            return;
        }
        if self.bar.is_hidden() {
            eprintln!("{text}");
        } else {
            self.bar.println(text);
        }
    }

    /// A run starts: remember its label and node classes.
    pub(crate) fn begin_run(&mut self, label: &str, workflow: &Workflow) {
        if let Ok(mut s) = self.state.lock() {
            s.label = label.to_string();
            s.node.clear();
            s.step.clear();
            s.run_start = Instant::now();
            s.classes = workflow
                .nodes
                .iter()
                .map(|(id, n)| (id.clone(), n.class_type.clone()))
                .collect();
        }
        self.redraw();
    }

    fn redraw(&self) {
        let Ok(s) = self.state.lock() else { return };
        let mut msg = format!("[{}] {}", s.ladder, s.label);
        if !s.node.is_empty() {
            msg.push_str(&format!(" · node {}", s.node));
        }
        if !s.step.is_empty() {
            msg.push_str(&format!(" {}", s.step));
        }
        msg.push_str(&format!(
            " · run {} · total {}",
            human(s.run_start.elapsed()),
            human(s.session_start.elapsed())
        ));
        self.bar.set_message(msg);
    }

    /// Removes the progress line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl RunObserver for ProgressView {
    fn on_event(&mut self, event: &RunEvent) {
        if let RunEvent::Tracker(t) = event {
            if let Ok(mut s) = self.state.lock() {
                match t {
                    TrackerEvent::NodeStarted { node } => {
                        let class = s.classes.get(node).cloned().unwrap_or_default();
                        s.node = format!("{node} {class}").trim().to_string();
                        s.step.clear();
                    }
                    TrackerEvent::Progress { value, max, .. } => {
                        s.step = format!("{value:.0}/{max:.0}");
                    }
                    _ => {}
                }
            }
        }
        self.redraw();
    }
}

impl Hooks for ProgressView {
    fn run_started(&mut self, session: &SessionFile, workflow: usize, entry: &RunEntry) {
        if let Some(job) = session.workflows.get(workflow) {
            let running = (entry.role != RunRole::Control).then_some(entry.step);
            if let Ok(mut s) = self.state.lock() {
                s.ladder = ladder_marks(job, running);
            }
        }
        self.redraw();
    }

    fn run_finished(&mut self, session: &SessionFile, workflow: usize, entry: &RunEntry) {
        if let Some(job) = session.workflows.get(workflow) {
            if let Ok(mut s) = self.state.lock() {
                s.ladder = ladder_marks(job, None);
            }
            let duration = entry
                .summary
                .as_ref()
                .map(|s| human(Duration::from_millis(s.duration_ms)))
                .unwrap_or_default();
            self.println(&format!(
                "{} {}  {}  {}",
                job.name,
                super::driver::describe_run(entry),
                duration,
                &entry.run_id[..entry.run_id.len().min(8)]
            ));
        }
        self.redraw();
    }

    fn journal_updated(&mut self, _paths: &SessionPaths, _session: &SessionFile) {}

    fn note(&mut self, text: &str) {
        self.println(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::{Outcome, Phase, RunStatus, StepInfo};

    #[test]
    fn ladder_marks_show_each_step() {
        let step = |i: usize| StepInfo {
            index: i,
            increment: format!("i{i}"),
            file: String::new(),
            sha256: String::new(),
            changes: vec![],
        };
        let run = |step: usize, outcome: Outcome| RunEntry {
            run_id: format!("r{step}"),
            step,
            increment: String::new(),
            role: RunRole::Search,
            dir: String::new(),
            workflow_sha256: String::new(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(outcome),
            summary: None,
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: None,
        };
        let job = WorkflowJob {
            name: "wf".into(),
            source: String::new(),
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
    }
}
