//! The progress display: the ladder (one mark per step), the current run's node and sampler
//! step, and the time spent. A spinner line on a terminal; plain lines on stderr otherwise
//! (cron and systemd logs). The library drives it through its `ProgressSink` trait.

use comfy_bisect_core::comfy::TrackerEvent;
use comfy_bisect_core::run::{RunEvent, RunObserver};
use comfy_bisect_core::session::journal::{RunEntry, RunRole, SessionFile, SessionPaths};
use comfy_bisect_core::session::progress::{finished_line, ladder_marks, Progress, ProgressSink};
use comfy_bisect_core::session::Hooks;
use comfy_bisect_core::text::escape_controls;
use comfy_bisect_core::units::compact_duration as human;
use comfy_bisect_core::workflow::Workflow;
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
    /// The current sampler pass: its node and when each step value first arrived.
    steps: StepClock,
    run_start: Instant,
    session_start: Instant,
    classes: HashMap<String, String>,
    /// The predicted duration of the current run and the session's time left at its start
    /// (`analytics::predict`); `predicted` false before the first prediction was made.
    run_eta: Option<Duration>,
    session_eta: Option<Duration>,
    predicted: bool,
    /// When the last plain line (no terminal) was printed.
    plain_at: Option<Instant>,
    /// A run is going on (between its start and its recorded end).
    running: bool,
}

/// Without a terminal, the progress line is printed at most this often.
const PLAIN_EVERY: Duration = Duration::from_secs(60);

/// How often the line is checked for being due when no event redraws it.
const PLAIN_TICK: Duration = Duration::from_secs(5);

/// The progress line on stderr (the library shares it through a [`Progress`] handle).
pub struct ProgressView {
    bar: ProgressBar,
    state: Arc<Mutex<State>>,
    quiet: bool,
}

impl ProgressView {
    /// The handle the library's session calls take: a progress line on stderr (hidden when
    /// stderr is not a terminal; `quiet` prints nothing).
    pub fn handle(quiet: bool) -> Progress {
        Progress::new(ProgressView::new(quiet))
    }

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
        let view = ProgressView {
            bar,
            state: Arc::new(Mutex::new(State {
                ladder: String::new(),
                label: String::new(),
                node: String::new(),
                step: String::new(),
                steps: StepClock::default(),
                run_start: now,
                session_start: now,
                classes: HashMap::new(),
                run_eta: None,
                session_eta: None,
                predicted: false,
                plain_at: None,
                running: false,
            })),
            quiet,
        };
        // Without a terminal nothing redraws a line: a run with no event for a while (a long
        // load, a slow step) still gets its line once a minute.
        if view.bar.is_hidden() && !quiet {
            let state = Arc::downgrade(&view.state);
            std::thread::spawn(move || loop {
                std::thread::sleep(PLAIN_TICK);
                let Some(state) = state.upgrade() else { return };
                let Ok(mut s) = state.lock() else { return };
                if let Some(line) = plain_line(&mut s) {
                    eprintln!("{line}");
                }
            });
        }
        view
    }

    /// Prints a line above the progress (or on stderr when there is no progress line).
    fn print_line(&self, text: &str) {
        if self.quiet {
            return;
        }
        // Run lines quote server text (errors, node classes): control characters made visible.
        let text = &*escape_controls(text);
        if self.bar.is_hidden() {
            eprintln!("{text}");
        } else {
            self.bar.println(text);
        }
    }

    /// A run starts: remember its label and node classes.
    fn start_run(&mut self, label: &str, workflow: &Workflow) {
        if let Ok(mut s) = self.state.lock() {
            s.label = label.to_string();
            s.node.clear();
            s.step.clear();
            s.run_start = Instant::now();
            s.running = true;
            s.classes = workflow
                .nodes
                .iter()
                .map(|(id, n)| (id.clone(), n.class_type.clone()))
                .collect();
        }
        self.redraw();
    }

    fn redraw(&self) {
        let Ok(mut s) = self.state.lock() else { return };
        if self.bar.is_hidden() {
            if let Some(line) = plain_line(&mut s).filter(|_| !self.quiet) {
                eprintln!("{line}");
            }
            return;
        }
        self.bar
            .set_message(escape_controls(&message(&s)).into_owned());
    }

    /// Removes the progress line.
    fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

impl ProgressSink for ProgressView {
    fn println(&mut self, text: &str) {
        self.print_line(text);
    }
    fn begin_run(&mut self, label: &str, workflow: &Workflow) {
        self.start_run(label, workflow);
    }
    fn finish(&mut self) {
        self.clear();
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
                    TrackerEvent::Progress { node, value, max } => {
                        let (value, max) = (value.max(0.0) as u32, max.max(0.0) as u32);
                        s.steps.step(node, value, max, Instant::now());
                        s.step = format!("{value}/{max}");
                        if let Some(per) = s.steps.per_step() {
                            let left = per.mul_f64(f64::from(max.saturating_sub(value)));
                            s.step.push_str(&format!(
                                " · {:.1} s/step · ~{} left",
                                per.as_secs_f64(),
                                human(left)
                            ));
                        }
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
                s.running = false;
            }
            self.print_line(&finished_line(job, entry));
        }
        self.redraw();
    }

    fn journal_updated(&mut self, _paths: &SessionPaths, _session: &SessionFile) {}

    fn note(&mut self, text: &str) {
        self.print_line(text);
    }

    fn estimate(&mut self, run: Option<Duration>, session_left: Option<Duration>) {
        if let Ok(mut s) = self.state.lock() {
            s.run_eta = run;
            s.session_eta = session_left;
            s.predicted = true;
        }
        let said = match (run, session_left) {
            (Some(r), Some(l)) => format!(
                "next run predicted to take ~{}; ~{} left in the session",
                human(r),
                human(l)
            ),
            (Some(r), None) => format!("next run predicted to take ~{}", human(r)),
            _ => "run time: no estimate yet (none of this session's runs has finished)".into(),
        };
        self.print_line(&said);
    }
}

/// The progress line: ladder, run, node, sampler step, times and the ETA.
fn message(s: &State) -> String {
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
    if s.predicted {
        msg.push_str(&eta_text(s));
    }
    msg
}

/// Without a terminal (cron, systemd): the progress line as a plain line while a run goes on,
/// at most once per [`PLAIN_EVERY`]; None when not due.
fn plain_line(s: &mut State) -> Option<String> {
    let due = s.plain_at.is_none_or(|t| t.elapsed() >= PLAIN_EVERY);
    if !s.running || !due {
        return None;
    }
    s.plain_at = Some(Instant::now());
    Some(escape_controls(&message(s)).into_owned())
}

/// ` · ETA run ~X · session ~Y`: the prediction made at the run's start less the time spent,
/// and once the sampler's own pace is seen, its steps left at that pace.
fn eta_text(s: &State) -> String {
    let Some(run) = s.run_eta else {
        return " · ETA: no estimate yet".into();
    };
    let spent = s.run_start.elapsed();
    let mut left = run.saturating_sub(spent);
    if let Some(per) = s.steps.per_step() {
        let steps_left = per.mul_f64(f64::from(s.steps.max.saturating_sub(s.steps.last())));
        left = left.max(steps_left);
    }
    let mut text = format!(" · ETA run ~{}", human(left));
    if let Some(session) = s.session_eta {
        text.push_str(&format!(
            " · session ~{}",
            human(session.saturating_sub(run) + left)
        ));
    }
    text
}

/// When each step of the current sampler pass arrived, for its time per step and time left.
#[derive(Debug, Default)]
struct StepClock {
    node: String,
    max: u32,
    /// (step value, first arrival), values increasing.
    seen: Vec<(u32, Instant)>,
}

impl StepClock {
    /// A `progress` frame: a new pass starts when the node, the step count or the counting
    /// changes.
    fn step(&mut self, node: &str, value: u32, max: u32, at: Instant) {
        let same = self.node == node
            && self.max == max
            && self.seen.last().is_some_and(|(v, _)| *v <= value);
        if !same {
            self.node = node.to_string();
            self.max = max;
            self.seen.clear();
        }
        if self.seen.last().is_none_or(|(v, _)| *v < value) {
            self.seen.push((value, at));
        }
    }

    /// The last step value seen (0 before any).
    fn last(&self) -> u32 {
        self.seen.last().map(|(v, _)| *v).unwrap_or(0)
    }

    /// Mean time per step over the last (up to) five steps after the first step (which
    /// includes loading), None until two such steps were seen.
    fn per_step(&self) -> Option<Duration> {
        let later: Vec<&(u32, Instant)> = self.seen.iter().filter(|(v, _)| *v >= 1).collect();
        if later.len() < 2 {
            return None;
        }
        let recent = &later[later.len().saturating_sub(6)..];
        let (v0, t0) = recent[0];
        let (v1, t1) = recent[recent.len() - 1];
        let steps = v1.checked_sub(*v0).filter(|n| *n > 0)?;
        Some(t1.duration_since(*t0) / steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_per_step_leaves_out_the_first_step_and_follows_the_recent_ones() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut c = StepClock::default();
        c.step("3", 0, 20, at(0));
        c.step("3", 1, 20, at(9000)); // loading and the first step
        assert_eq!(c.per_step(), None);
        c.step("3", 2, 20, at(10_000));
        assert_eq!(c.per_step(), Some(Duration::from_millis(1000)));
        c.step("3", 2, 20, at(10_500)); // a repeated value (a preview) changes nothing
        for v in 3..=8 {
            c.step("3", v, 20, at(10_000 + 2000 * u64::from(v - 2)));
        }
        // The last five steps took 2 s each: the slower recent pace counts.
        assert_eq!(c.per_step(), Some(Duration::from_millis(2000)));
        // Another sampler starts over.
        c.step("7", 1, 4, at(30_000));
        assert_eq!(c.per_step(), None);
    }

    #[test]
    fn without_a_terminal_a_line_is_due_once_a_minute_while_a_run_goes_on() {
        let view = ProgressView::new(true);
        let mut s = view.state.lock().unwrap();
        assert_eq!(plain_line(&mut s), None, "no run yet");
        s.running = true;
        s.label = "wf · step 1 resolution".into();
        let line = plain_line(&mut s).unwrap();
        assert!(
            line.starts_with("[] wf · step 1 resolution · run "),
            "{line}"
        );
        assert_eq!(plain_line(&mut s), None, "not again within the minute");
        s.plain_at = Instant::now().checked_sub(PLAIN_EVERY);
        assert!(plain_line(&mut s).is_some(), "a minute later");
        s.plain_at = None;
        s.running = false;
        assert_eq!(plain_line(&mut s), None, "the run ended");
    }

    #[test]
    fn the_eta_says_no_estimate_yet_then_counts_the_prediction_down() {
        let mut view = ProgressView::new(true);
        assert_eq!(
            eta_text(&view.state.lock().unwrap()),
            " · ETA: no estimate yet"
        );
        view.estimate(None, None);
        assert_eq!(
            eta_text(&view.state.lock().unwrap()),
            " · ETA: no estimate yet"
        );
        let hour = Duration::from_secs(3600);
        view.estimate(Some(hour), Some(hour * 3));
        let text = eta_text(&view.state.lock().unwrap());
        // An hour predicted less the moment spent; the session counts the run once (its two
        // other hours after it).
        let (run, session) = text
            .strip_prefix(" · ETA run ~")
            .and_then(|t| t.split_once(" · session ~"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(run == "1h00m" || run.starts_with("59m"), "{text}");
        assert!(session == "3h00m" || session == "2h59m", "{text}");
    }
}
