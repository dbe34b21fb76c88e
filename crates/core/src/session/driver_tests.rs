//! The driver against a fake backend and a fake clock: journal, index, stops and resume.

use super::*;
use crate::run::Outcome as RunOutcome;
use crate::session::evidence::{bare_record, server_lost_record};
use crate::session::index;
use crate::session::journal::SessionOptions;
use crate::session::journal::{
    now_rfc3339, read_json, run_dir_name, InFlight, Outcome, RunEntry, RunFile, RunRole, RunStatus,
    SessionFile, SessionPaths, SessionState, StopReason, Verdict, RUN_EVENTS_FILE, RUN_RECORD_FILE,
    RUN_WORKFLOW_FILE,
};
use crate::session::setup::{create_session, PreparedStep, PreparedWorkflow};
use crate::vocab::FailureKind;
use crate::workflow::Workflow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Time that moves only when slept or when a fake run takes time.
#[derive(Clone)]
struct FakeClock(Rc<Cell<jiff::Timestamp>>);

impl FakeClock {
    fn new() -> FakeClock {
        FakeClock(Rc::new(Cell::new(
            crate::units::parse_rfc3339("2026-11-29T22:00:00Z").unwrap(),
        )))
    }
    fn advance(&self, d: Duration) {
        self.0.set(self.0.get() + d);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> jiff::Timestamp {
        self.0.get()
    }
    fn sleep(&self, d: Duration) {
        self.advance(d);
    }
}

/// What the fake server does with a variant (by the size the fake workflow asks for).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Act {
    Pass,
    Oom,
    /// The server dies with the run.
    Crash,
}

struct FakeBackend {
    clock: FakeClock,
    /// Steps with size ≥ this fail.
    budget: i64,
    /// Sizes that crash the server instead of failing.
    crash_at: Option<i64>,
    /// How many times `crash_at` crashes before it runs normally (None: always).
    crashes_left: Rc<Cell<Option<u32>>>,
    run_time: Duration,
    alive: Rc<Cell<bool>>,
    restart_revives: bool,
    restarts: Rc<Cell<u32>>,
    /// Sizes submitted, in order.
    calls: Rc<RefCell<Vec<i64>>>,
    /// What the server's history knows: run id → passed?
    history: HashMap<String, bool>,
    /// The submission (0-based, in order) that someone interrupts mid-run.
    interrupt_call: Option<usize>,
    /// The per-run limit each submission was given, in order.
    limits: Rc<RefCell<Vec<Option<Duration>>>>,
    /// Records carry the progress timing of 10 sampler steps on node "1" (the predictor's
    /// input): a sixth of the run before them, a twelfth after.
    timed: bool,
    /// The size whose first run hangs at step 3 of 20, its interrupt ignored.
    hang_at: Option<i64>,
    /// The hang limit (`--stall`) each submission was given, in order.
    stalls: Rc<RefCell<Vec<Option<Duration>>>>,
}

impl FakeBackend {
    fn new(clock: &FakeClock, budget: i64) -> FakeBackend {
        FakeBackend {
            clock: clock.clone(),
            budget,
            crash_at: None,
            crashes_left: Rc::new(Cell::new(None)),
            run_time: Duration::from_secs(600),
            alive: Rc::new(Cell::new(true)),
            restart_revives: false,
            restarts: Rc::new(Cell::new(0)),
            calls: Rc::new(RefCell::new(Vec::new())),
            history: HashMap::new(),
            interrupt_call: None,
            limits: Rc::new(RefCell::new(Vec::new())),
            timed: false,
            hang_at: None,
            stalls: Rc::new(RefCell::new(Vec::new())),
        }
    }
    fn act(&self, size: i64) -> Act {
        let crashes = Some(size) == self.crash_at && self.crashes_left.get() != Some(0);
        if crashes {
            if let Some(n) = self.crashes_left.get() {
                self.crashes_left.set(Some(n - 1));
            }
            Act::Crash
        } else if size >= self.budget {
            Act::Oom
        } else {
            Act::Pass
        }
    }
}

fn size_of(workflow: &Workflow) -> i64 {
    workflow.nodes["1"].inputs["size"]
        .as_literal()
        .and_then(|v| v.as_i64())
        .unwrap()
}

fn oom() -> RunOutcome {
    RunOutcome::Failed(crate::comfy::ExecutionError {
        node_id: "1".into(),
        node_type: "KSampler".into(),
        exception_type: "torch.OutOfMemoryError".into(),
        exception_message: "Allocation on device \n".into(),
        traceback: vec![],
        ..Default::default()
    })
}

impl Backend for FakeBackend {
    fn run(&mut self, spec: &RunSpec<'_>) -> Attempt {
        if !self.alive.get() {
            return Attempt::NotSubmitted("connection refused".into());
        }
        let size = size_of(spec.workflow);
        self.calls.borrow_mut().push(size);
        self.limits.borrow_mut().push(spec.timeout);
        self.stalls.borrow_mut().push(spec.stall);
        if self.hang_at == Some(size) {
            self.hang_at = None;
            let hang = RunOutcome::Hang(crate::run::HangInfo {
                limit_ms: spec.stall.unwrap_or_default().as_millis() as u64,
                last_node: Some("1".into()),
                node_type: Some("KSampler".into()),
                step: Some(3),
                max_steps: Some(20),
                interrupt_sent: true,
                interrupt_confirmed: false,
            });
            std::fs::write(spec.events_file, "{\"channel\":\"note\"}\n").unwrap();
            let record = bare_record(spec.run_id, spec.workflow, "fake", spec.cold, hang);
            return Attempt::Done(Box::new(record));
        }
        std::fs::write(spec.events_file, "{\"channel\":\"note\"}\n").unwrap();
        // A run that would go past the deadline's grace is interrupted then, as the live
        // backend does.
        if let Some(at) = spec.stop_at {
            if self.clock.now() + self.run_time > at {
                if at > self.clock.now() {
                    self.clock.0.set(at);
                }
                let interrupted = RunOutcome::Interrupted(crate::run::Interruption {
                    by: crate::run::InterruptedBy::User,
                    node_id: Some("1".into()),
                    node_type: Some("KSampler".into()),
                    executed: vec![],
                    removed_from_queue: false,
                });
                let record =
                    bare_record(spec.run_id, spec.workflow, "fake", spec.cold, interrupted);
                return Attempt::Done(Box::new(record));
            }
        }
        self.clock.advance(self.run_time);
        if self.interrupt_call == Some(self.calls.borrow().len() - 1) {
            let interrupted = RunOutcome::Interrupted(crate::run::Interruption {
                by: crate::run::InterruptedBy::Other,
                node_id: Some("1".into()),
                node_type: Some("KSampler".into()),
                executed: vec![],
                removed_from_queue: false,
            });
            let record = bare_record(spec.run_id, spec.workflow, "fake", spec.cold, interrupted);
            return Attempt::Done(Box::new(record));
        }
        let record = match self.act(size) {
            Act::Pass => bare_record(
                spec.run_id,
                spec.workflow,
                "fake",
                spec.cold,
                RunOutcome::Passed,
            ),
            Act::Oom => bare_record(spec.run_id, spec.workflow, "fake", spec.cold, oom()),
            Act::Crash => {
                self.alive.set(false);
                server_lost_record(
                    spec.run_id,
                    spec.workflow,
                    "fake",
                    spec.cold,
                    "socket and HTTP gone",
                )
            }
        };
        let mut record = record;
        record.duration_ms = self.run_time.as_millis() as u64;
        if self.timed {
            let ms = record.duration_ms;
            let step = ms * 3 / 40;
            record.step_timing = vec![crate::run::timing::SamplerTiming {
                node: "1".into(),
                steps: 10,
                reached: 10,
                first_step_ms: None,
                step_ms: vec![step; 9],
                s_per_step: Some(step as f64 / 1000.0),
                slowing: None,
                start_ms: Some(ms / 6 + step),
                end_ms: Some(ms / 6 + 10 * step),
            }];
        }
        Attempt::Done(Box::new(record))
    }
    fn recover(&mut self, run_id: &str, workflow: &Workflow, _events: &Path) -> Recovery {
        if !self.alive.get() {
            return Recovery::Unreachable("connection refused".into());
        }
        let message = match self.history.get(run_id) {
            Some(true) => (
                "execution_success".to_string(),
                serde_json::json!({"prompt_id": run_id, "timestamp": 1}),
            ),
            Some(false) => (
                "execution_error".to_string(),
                serde_json::json!({
                "prompt_id": run_id, "node_id": "1", "node_type": "KSampler",
                "exception_type": "torch.OutOfMemoryError", "exception_message": "Allocation on device \n",
                "traceback": [], "current_inputs": {}, "current_outputs": {}, "executed": [], "timestamp": 1}),
            ),
            None => return Recovery::Unknown,
        };
        let entry = crate::comfy::HistoryEntry {
            status: crate::comfy::protocol::HistoryStatus {
                status_str: if message.0 == "execution_success" {
                    "success".into()
                } else {
                    "error".into()
                },
                completed: message.0 == "execution_success",
                messages: vec![message],
            },
            ..Default::default()
        };
        let record =
            crate::session::evidence::record_from_history(run_id, workflow, "fake", true, &entry)
                .unwrap();
        Recovery::Finished(Box::new(record))
    }
    fn alive(&mut self) -> bool {
        self.alive.get()
    }
    fn restart(&mut self, _command: &str) -> Result<(), String> {
        self.restarts.set(self.restarts.get() + 1);
        if self.restart_revives {
            self.alive.set(true);
        }
        Ok(())
    }
}

fn variant(size: i64) -> Workflow {
    Workflow::from_json_str(
        &format!(r#"{{"1": {{"class_type": "Fake", "inputs": {{"size": {size}}}}}}}"#),
        "fake.json",
    )
    .unwrap()
}

/// A ladder whose step k has size k (step 0 = minimal, `n` = target).
fn prepared(name: &str, n: i64) -> PreparedWorkflow {
    let names = [
        "minimal",
        "resolution",
        "frames",
        "lora",
        "cache",
        "postprocess",
    ];
    PreparedWorkflow {
        name: name.into(),
        source: format!("{name}.json"),
        source_file: None,
        target: variant(n),
        steps: (0..=n)
            .map(|k| PreparedStep {
                increment: names[k as usize].into(),
                workflow: variant(k),
                changes: vec![],
                ui: None,
            })
            .collect(),
        controls: vec![],
        not_separable: vec![],
        kept: vec![],
        plan_json: None,
        ui_source: None,
    }
}

fn new_session(
    dir: &Path,
    options: SessionOptions,
    workflows: Vec<PreparedWorkflow>,
) -> (SessionPaths, SessionFile) {
    create_session(dir, "http://127.0.0.1:1", options, workflows).unwrap()
}

fn drive(paths: &SessionPaths, backend: FakeBackend, clock: &FakeClock) -> SessionFile {
    drive_with(paths, backend, clock, &mut NoHooks)
}

/// [`drive`] with these hooks.
fn drive_with(
    paths: &SessionPaths,
    backend: FakeBackend,
    clock: &FakeClock,
    hooks: &mut dyn Hooks,
) -> SessionFile {
    let session = SessionFile::load(paths).unwrap();
    let mut driver = Driver::new(paths.clone(), session, backend, clock.clone(), hooks);
    driver.drive().unwrap();
    assert_eq!(
        driver.durable.pending(),
        0,
        "drive() returns with every fsync done"
    );
    let loaded = SessionFile::load(paths).unwrap();
    // session.json is serde's pretty JSON of the journal.
    let mut expected = serde_json::to_vec_pretty(&loaded).unwrap();
    expected.push(b'\n');
    assert_eq!(
        String::from_utf8(std::fs::read(paths.session_file()).unwrap()).unwrap(),
        String::from_utf8(expected).unwrap()
    );
    loaded
}

#[test]
fn linear_session_journals_every_run_and_indexes_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 5), prepared("b", 3)],
    );
    let backend = FakeBackend::new(&clock, 3);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(s.state, SessionState::Done);
    assert!(s.in_flight.is_none());
    assert_eq!(*calls.borrow(), vec![0, 5, 1, 2, 3, 0, 3, 1, 2]);
    let v = s.workflows[0].verdict.clone().unwrap();
    assert_eq!(
        v.headline(),
        "first failure at increment lora (step 3)".to_string()
            + &match &v {
                Verdict::FirstFailure {
                    stage: Some(st), ..
                } => format!(", stage {st}"),
                _ => String::new(),
            }
    );
    assert!(matches!(
        s.workflows[1].verdict,
        Some(Verdict::FirstFailure { step: 3, .. })
    ));
    let index = index::read_all(dir.path()).unwrap();
    assert_eq!(index.len(), 9);
    for job in &s.workflows {
        for run in &job.runs {
            assert_eq!(run.status, RunStatus::Done);
            let run_dir = paths.run_dir(run);
            let submitted =
                crate::workflow::load_api_file(&run_dir.join(RUN_WORKFLOW_FILE)).unwrap();
            assert_eq!(submitted.sha256(), run.workflow_sha256);
            let file: RunFile = read_json(&run_dir.join(RUN_RECORD_FILE)).unwrap();
            assert_eq!(file.entry, *run);
            assert!(run_dir.join(RUN_EVENTS_FILE).exists());
            let line = index.iter().find(|e| e.run_id == run.run_id).unwrap();
            assert_eq!(line.workflow_sha256, run.workflow_sha256);
            assert_eq!(line.outcome, run.outcome.as_ref().unwrap().name());
            assert!(dir.path().join(&line.dir).join(RUN_RECORD_FILE).exists());
        }
    }
    // Failed runs carry a diagnosis.
    let failed = s.workflows[0].runs.iter().find(|r| r.failed()).unwrap();
    assert_eq!(failed.diagnosis.as_ref().unwrap().kind.as_str(), "cuda_oom");
}

#[test]
fn deadline_stops_between_runs_and_resume_never_reruns_completed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let deadline = clock.now() + Duration::from_secs(25 * 60);
    let options = SessionOptions {
        deadline: Some(deadline.to_string()),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 5)]);
    let backend = FakeBackend::new(&clock, 4);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    // 10-minute runs: 0 and 5 and 1 start before the deadline, then it stops.
    assert_eq!(*calls.borrow(), vec![0, 5, 1]);
    assert!(matches!(
        s.state,
        SessionState::Stopped {
            reason: StopReason::Deadline,
            ..
        }
    ));
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::Incomplete {
            reason: StopReason::Deadline,
            ..
        })
    ));
    assert!(!s.is_finished());
    // The stop says the exact command that continues it: the id, and the runs folder.
    let SessionState::Stopped { detail, .. } = &s.state else {
        unreachable!()
    };
    let command = format!(
        "`comfy-bisect resume {} --runs-dir {}` continues",
        s.session_id,
        crate::shell::quote(&dir.path().display().to_string())
    );
    assert!(detail.contains(&command), "{detail}");
    // `resume` without an id takes this session: the only unfinished one.
    assert_eq!(
        crate::app::latest_unfinished(dir.path()).unwrap().dir,
        paths.dir
    );

    // resume without a deadline
    let mut s2 = s.clone();
    s2.options.deadline = None;
    s2.save(&paths).unwrap();
    let backend = FakeBackend::new(&clock, 4);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(*calls.borrow(), vec![2, 3, 4]);
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::FirstFailure { step: 4, .. })
    ));
    assert_eq!(index::read_all(dir.path()).unwrap().len(), 6);
    // Finished: nothing is left for a bare `resume`.
    let err = crate::app::latest_unfinished(dir.path()).unwrap_err();
    assert!(err.contains("no unfinished session"), "{err}");
}

#[test]
fn a_run_predicted_to_end_after_the_deadline_and_its_grace_is_not_started() {
    // Samplers of 10 steps (the predictor reads the work from the variant).
    let sampled = |n: i64| {
        let variant = |size: i64| {
            Workflow::from_json_str(
                &format!(
                    r#"{{"1": {{"class_type": "KSampler", "inputs": {{"size": {size}, "steps": 10}}}}}}"#
                ),
                "fake.json",
            )
            .unwrap()
        };
        let mut p = prepared("a", n);
        p.target = variant(n);
        for (k, s) in p.steps.iter_mut().enumerate() {
            s.workflow = variant(k as i64);
        }
        p
    };
    // 10-minute runs. Deadline 25 min, no grace: 0 and 5 run (the first with no estimate);
    // 1 is predicted to end at 30 min and is not started. Deadline 35 min: 1 runs (ends at
    // 30), 2 would end at 40.
    for (deadline_min, calls_made) in [(25, vec![0, 5]), (35, vec![0, 5, 1])] {
        let dir = tempfile::tempdir().unwrap();
        let clock = FakeClock::new();
        let deadline = clock.now() + Duration::from_secs(deadline_min * 60);
        let options = SessionOptions {
            deadline: Some(deadline.to_string()),
            deadline_grace_s: Some(0),
            ..SessionOptions::default()
        };
        let (paths, _) = new_session(dir.path(), options, vec![sampled(5)]);
        let mut backend = FakeBackend::new(&clock, 4);
        backend.timed = true;
        let calls = backend.calls.clone();
        let s = drive(&paths, backend, &clock);
        assert_eq!(*calls.borrow(), calls_made, "deadline {deadline_min} min");
        let SessionState::Stopped { reason, detail } = &s.state else {
            panic!("{:?}", s.state)
        };
        assert_eq!(*reason, StopReason::Deadline);
        let next = calls_made.len() - 1;
        assert!(
            detail.contains(&format!("not starting step {next} ")),
            "{detail}"
        );
        assert!(detail.contains("predicted to take 10m00s"), "{detail}");
        assert!(
            detail.contains(&format!("comfy-bisect resume {}", s.session_id)),
            "{detail}"
        );
        // Every run that started finished: nothing was interrupted.
        assert!(s.workflows[0]
            .runs
            .iter()
            .all(|r| matches!(r.outcome, Some(Outcome::Passed | Outcome::Failed { .. }))));
    }
}

#[test]
fn a_run_still_going_past_the_deadline_grace_is_interrupted_and_resume_runs_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    // 10-minute runs; the deadline falls 5 minutes into the second run, the grace is 2
    // minutes: the second run is stopped 7 minutes in, not left to overrun by 5.
    let deadline = clock.now() + Duration::from_secs(15 * 60);
    let options = SessionOptions {
        deadline: Some(deadline.to_string()),
        deadline_grace_s: Some(120),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 5)]);
    let backend = FakeBackend::new(&clock, 4);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(*calls.borrow(), vec![0, 5]);
    assert_eq!(clock.now(), deadline + Duration::from_secs(120));
    let SessionState::Stopped { reason, detail } = &s.state else {
        panic!("{:?}", s.state)
    };
    assert_eq!(*reason, StopReason::Deadline);
    assert!(detail.contains("--deadline-grace"), "{detail}");
    assert!(
        detail.contains(&format!("comfy-bisect resume {}", s.session_id)),
        "{detail}"
    );
    // The overrunning run is recorded as interrupted, nothing is left in flight.
    let last = s.workflows[0].runs.last().unwrap();
    assert_eq!(last.step, 5);
    assert!(matches!(last.outcome, Some(Outcome::Interrupted)));
    assert!(s.in_flight.is_none());

    // resume without a deadline runs the interrupted step again, and only it of the two.
    let mut s2 = s.clone();
    s2.options.deadline = None;
    s2.save(&paths).unwrap();
    let backend = FakeBackend::new(&clock, 4);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(calls.borrow()[0], 5);
    assert!(!calls.borrow().contains(&0));
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::FirstFailure { step: 4, .. })
    ));
}

#[test]
fn without_timeout_the_run_limit_follows_the_longest_run_of_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 2)],
    );
    // 10-minute runs: the first run gets the one-hour default, the later ones 8 × 10 min.
    let backend = FakeBackend::new(&clock, 9);
    let limits = backend.limits.clone();
    drive(&paths, backend, &clock);
    let limits = limits.borrow();
    assert!(limits.len() >= 2, "{limits:?}");
    assert_eq!(limits[0], Some(DEFAULT_RUN_LIMIT));
    assert!(
        limits[1..]
            .iter()
            .all(|l| *l == Some(Duration::from_secs(80 * 60))),
        "{limits:?}"
    );

    // --timeout wins.
    let dir = tempfile::tempdir().unwrap();
    let options = SessionOptions {
        timeout_s: Some(90),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 2)]);
    let backend = FakeBackend::new(&clock, 9);
    let limits = backend.limits.clone();
    drive(&paths, backend, &clock);
    assert!(limits
        .borrow()
        .iter()
        .all(|l| *l == Some(Duration::from_secs(90))));
}

/// Hooks that keep the notes.
#[derive(Default)]
struct Notes(Vec<String>);

impl Hooks for Notes {
    fn note(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
}

/// The notes of a drive.
fn drive_noting(paths: &SessionPaths, backend: FakeBackend, clock: &FakeClock) -> Vec<String> {
    let mut notes = Notes::default();
    drive_with(paths, backend, clock, &mut notes);
    notes.0
}

/// A two-step session whose server is down, waited for `wait_server_s`.
fn lost_server(dir: &Path, clock: &FakeClock, wait_server_s: u64) -> (SessionPaths, FakeBackend) {
    let options = SessionOptions {
        wait_server_s,
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir, options, vec![prepared("a", 2)]);
    let backend = FakeBackend::new(clock, 2);
    backend.alive.set(false);
    (paths, backend)
}

#[test]
fn waits_say_they_are_still_waiting_without_a_terminal() {
    // A lost server: a line a minute until --wait-server (5 min) gives up.
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, backend) = lost_server(dir.path(), &clock, 300);
    let notes = drive_noting(&paths, backend, &clock);
    let still: Vec<_> = notes
        .iter()
        .filter(|n| n.starts_with("still waiting for the server"))
        .collect();
    assert_eq!(still.len(), 4, "{notes:#?}");
    assert!(still[0].contains("(1m00s of 5m00s)"), "{}", still[0]);

    // --start-at 35 minutes ahead: how long is left, every 10 minutes.
    let dir = tempfile::tempdir().unwrap();
    let options = SessionOptions {
        start_at: Some((clock.now() + Duration::from_secs(35 * 60)).to_string()),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 1)]);
    let notes = drive_noting(&paths, FakeBackend::new(&clock, 9), &clock);
    let left: Vec<_> = notes
        .iter()
        .filter(|n| n.contains("(--start-at):") && n.ends_with("left"))
        .collect();
    assert_eq!(left.len(), 3, "{notes:#?}");
    assert!(left[0].ends_with("25m00s left"), "{}", left[0]);
}

/// Puts a run in flight as a killed tool leaves it.
fn leave_in_flight(paths: &SessionPaths, step: usize) -> String {
    leave_in_flight_as(paths, step, RunRole::Minimal, None)
}

/// [`leave_in_flight`] with a role (and the crashed run a `confirm` run re-runs).
fn leave_in_flight_as(
    paths: &SessionPaths,
    step: usize,
    role: RunRole,
    confirms: Option<String>,
) -> String {
    let mut s = SessionFile::load(paths).unwrap();
    let run_id = uuid::Uuid::new_v4().to_string();
    let dir = run_dir_name(step, &s.workflows[0].steps[step].increment, &run_id);
    std::fs::create_dir_all(paths.dir.join(&dir)).unwrap();
    let increment = s.workflows[0].steps[step].increment.clone();
    s.workflows[0].runs.push(RunEntry {
        run_id: run_id.clone(),
        step,
        increment,
        role,
        dir,
        workflow_sha256: variant(step as i64).sha256(),
        status: RunStatus::InFlight,
        started_at: now_rfc3339(),
        finished_at: None,
        outcome: None,
        summary: None,
        diagnosis: None,
        confirms,
        fingerprint: None,
        reduced: None,
    });
    s.in_flight = Some(InFlight {
        workflow: 0,
        run_id: run_id.clone(),
    });
    s.save(paths).unwrap();
    run_id
}

#[test]
fn an_in_flight_pass_is_run_again_its_console_unseen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 2)],
    );
    let run_id = leave_in_flight(&paths, 0);
    let mut backend = FakeBackend::new(&clock, 2);
    backend.history.insert(run_id.clone(), true);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    // Issue #39: the pass's console (a fallback, memory pressure) was never seen, so it is
    // not counted as a clean pass: step 0 is run again.
    assert_eq!(*calls.borrow(), vec![0, 2, 1], "step 0 must be re-run");
    assert!(s.workflows[0].runs.iter().all(|r| r.run_id != run_id));
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::FirstFailure { step: 2, .. })
    ));
}

#[test]
fn an_in_flight_failure_is_taken_from_the_server_history() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 2)],
    );
    let run_id = leave_in_flight(&paths, 2);
    let mut backend = FakeBackend::new(&clock, 2);
    backend.history.insert(run_id.clone(), false);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert!(!calls.borrow().contains(&2), "step 2 must not be re-run");
    let recovered = s.workflows[0]
        .runs
        .iter()
        .find(|r| r.run_id == run_id)
        .unwrap();
    assert!(recovered.failed());
    assert!(recovered.summary.as_ref().unwrap().recovered_from_history);
}

#[test]
fn in_flight_run_unknown_to_the_server_is_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 2)],
    );
    let run_id = leave_in_flight(&paths, 0);
    let backend = FakeBackend::new(&clock, 2);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(*calls.borrow(), vec![0, 2, 1]);
    assert!(s.find_run(&run_id).is_none());
    assert!(!paths.dir.join(run_dir_name(0, "minimal", &run_id)).exists());
}

#[test]
fn without_confirmation_a_variant_that_kills_the_server_is_not_resubmitted_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let options = SessionOptions {
        wait_server_s: 30,
        confirm_crashes: 0,
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 4)]);
    let mut backend = FakeBackend::new(&clock, 3);
    backend.crash_at = Some(2);
    let alive = backend.alive.clone();
    let s = drive(&paths, backend, &clock);
    assert!(matches!(
        s.state,
        SessionState::Stopped {
            reason: StopReason::ServerLost,
            ..
        }
    ));
    let lost = s.workflows[0].runs.last().unwrap();
    assert_eq!(lost.step, 2);
    assert_eq!(lost.outcome.as_ref().unwrap().name(), "server_lost");
    assert_eq!(
        lost.diagnosis.as_ref().unwrap().kind.as_str(),
        "process_killed"
    );

    alive.set(true);
    let mut backend = FakeBackend::new(&clock, 3);
    backend.crash_at = Some(2);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert!(
        calls.borrow().is_empty(),
        "nothing left to run: {:?}",
        calls.borrow()
    );
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::FirstFailure { step: 2, .. })
    ));
}

#[test]
fn a_crash_is_rerun_once_the_server_is_back_and_a_pass_lets_the_search_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 5)],
    );
    // Step 2 takes the server down once (something else happened); a supervisor brings it
    // back after a minute.
    let mut backend = FakeBackend::new(&clock, 4);
    backend.crash_at = Some(2);
    backend.crashes_left.set(Some(1));
    let calls = backend.calls.clone();
    let alive = backend.alive.clone();
    let mut hooks = ReviveAfter(alive);
    let session = SessionFile::load(&paths).unwrap();
    let mut driver = Driver::new(paths.clone(), session, backend, clock.clone(), &mut hooks);
    driver.drive().unwrap();
    let s = SessionFile::load(&paths).unwrap();
    assert_eq!(*calls.borrow(), vec![0, 5, 1, 2, 2, 3, 4]);
    let job = &s.workflows[0];
    let crash = &job.runs[3];
    let confirm = &job.runs[4];
    assert_eq!(crash.outcome.as_ref().unwrap().name(), "server_lost");
    assert_eq!(confirm.role, RunRole::Confirm);
    assert_eq!(confirm.confirms.as_deref(), Some(crash.run_id.as_str()));
    assert!(confirm.passed());
    assert_ne!(confirm.run_id, crash.run_id);
    // Both runs have their own folder, record and index line.
    let index = index::read_all(dir.path()).unwrap();
    for run in [crash, confirm] {
        assert!(paths.run_dir(run).join(RUN_RECORD_FILE).is_file());
        assert!(index.iter().any(|e| e.run_id == run.run_id));
    }
    match &job.verdict {
        Some(Verdict::FirstFailure {
            step,
            last_pass_step,
            ..
        }) => assert_eq!((*step, *last_pass_step), (4, 3)),
        other => panic!("{other:?}"),
    }
}

/// Hooks that bring the fake server back when the driver says it waits for it.
struct ReviveAfter(Rc<Cell<bool>>);

impl Hooks for ReviveAfter {
    fn note(&mut self, text: &str) {
        if text.starts_with("waiting up to") {
            self.0.set(true);
        }
    }
}

#[test]
fn a_crash_that_repeats_is_confirmed_and_the_restart_cmd_runs_before_the_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let options = SessionOptions {
        wait_server_s: 30,
        restart_cmd: Some("systemctl restart comfyui".into()),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 4)]);
    let mut backend = FakeBackend::new(&clock, 4);
    backend.crash_at = Some(2);
    backend.restart_revives = true;
    let restarts = backend.restarts.clone();
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(*calls.borrow(), vec![0, 4, 1, 2, 2]);
    assert_eq!(
        restarts.get(),
        2,
        "one restart before the re-run, one after it"
    );
    let job = &s.workflows[0];
    match &job.verdict {
        Some(Verdict::FirstFailure { step, run_id, .. }) => {
            assert_eq!(*step, 2);
            let crash = job.runs.iter().find(|r| &r.run_id == run_id).unwrap();
            assert!(matches!(
                job.crash_check(crash, 1),
                crate::session::journal::CrashCheck::Confirmed { times: 2, .. }
            ));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hang_whose_interrupt_is_ignored_restarts_the_server_and_is_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let options = SessionOptions {
        wait_server_s: 30,
        restart_cmd: Some("systemctl restart comfyui".into()),
        stall_s: Some(90),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 4)]);
    let mut backend = FakeBackend::new(&clock, 4);
    backend.hang_at = Some(2);
    backend.restart_revives = true;
    let restarts = backend.restarts.clone();
    let calls = backend.calls.clone();
    let stalls = backend.stalls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(*calls.borrow(), vec![0, 4, 1, 2, 2, 3]);
    assert!(restarts.get() >= 1, "the hung server was restarted");
    assert!(stalls
        .borrow()
        .iter()
        .all(|s| *s == Some(Duration::from_secs(90))));
    let job = &s.workflows[0];
    let hung = job
        .runs
        .iter()
        .find(|r| r.outcome.as_ref().is_some_and(|o| o.name() == "hang"))
        .unwrap();
    assert!(matches!(
        job.crash_check(hung, 1),
        crate::session::journal::CrashCheck::NotReproduced { .. }
    ));
    assert!(matches!(
        job.verdict,
        Some(Verdict::FirstFailure { step: 4, .. })
    ));
}

#[test]
fn the_default_stall_limit_is_the_floor_until_a_run_stays_quiet_longer() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 4)],
    );
    let backend = FakeBackend::new(&clock, 4);
    let stalls = backend.stalls.clone();
    drive(&paths, backend, &clock);
    assert!(stalls
        .borrow()
        .iter()
        .all(|s| *s == Some(crate::run::hang::STALL_FLOOR)));
}

#[test]
fn a_kill_during_the_confirmation_is_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let options = SessionOptions {
        wait_server_s: 5,
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 4)]);
    // Night one: step 2 crashes and the server does not come back.
    let mut backend = FakeBackend::new(&clock, 4);
    backend.crash_at = Some(2);
    let s = drive(&paths, backend, &clock);
    assert!(matches!(
        s.state,
        SessionState::Stopped {
            reason: StopReason::ServerLost,
            ..
        }
    ));
    let crashed = s.workflows[0].runs.last().unwrap().run_id.clone();
    // The re-run was submitted, then the tool was killed; the server forgot it (restarted).
    let lost = leave_in_flight_as(&paths, 2, RunRole::Confirm, Some(crashed.clone()));
    let backend = FakeBackend::new(&clock, 4);
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(*calls.borrow(), vec![2, 3], "the re-run is made again");
    let job = &s.workflows[0];
    assert!(s.find_run(&lost).is_none());
    let confirm = job
        .runs
        .iter()
        .find(|r| r.role == RunRole::Confirm)
        .unwrap();
    assert_eq!(confirm.confirms.as_deref(), Some(crashed.as_str()));
    assert!(confirm.passed());
    assert!(matches!(
        job.verdict,
        Some(Verdict::FirstFailure { step: 4, .. })
    ));

    // Killed after the re-run's record was written: only the bookkeeping is finished.
    let dir2 = tempfile::tempdir().unwrap();
    let (paths2, _) = new_session(
        dir2.path(),
        SessionOptions {
            wait_server_s: 5,
            ..SessionOptions::default()
        },
        vec![prepared("a", 4)],
    );
    let mut backend = FakeBackend::new(&clock, 4);
    backend.crash_at = Some(2);
    let s = drive(&paths2, backend, &clock);
    let crashed = s.workflows[0].runs.last().unwrap().run_id.clone();
    let lost = leave_in_flight_as(&paths2, 2, RunRole::Confirm, Some(crashed));
    let mut backend = FakeBackend::new(&clock, 4);
    backend.history.insert(lost.clone(), true);
    let calls = backend.calls.clone();
    let s = drive(&paths2, backend, &clock);
    // Its pass was recovered from history without its console (issue #39): not counted, the
    // re-run is made again.
    assert_eq!(
        *calls.borrow(),
        vec![2, 3],
        "the recovered pass is run again"
    );
    assert!(s.find_run(&lost).is_none());
}

#[test]
fn restart_cmd_brings_the_server_back_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let options = SessionOptions {
        wait_server_s: 30,
        restart_cmd: Some("systemctl restart comfyui".into()),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 4)]);
    let mut backend = FakeBackend::new(&clock, 3);
    backend.crash_at = Some(4);
    backend.restart_revives = true;
    let restarts = backend.restarts.clone();
    let calls = backend.calls.clone();
    let s = drive(&paths, backend, &clock);
    // The target crashes twice (confirmed); each crash is followed by a restart.
    assert_eq!(*calls.borrow(), vec![0, 4, 4, 1, 2, 3]);
    assert_eq!(restarts.get(), 2);
    assert_eq!(s.state, SessionState::Done);
    assert!(matches!(
        s.workflows[0].verdict,
        Some(Verdict::FirstFailure { step: 3, .. })
    ));
}

#[test]
fn restart_each_restarts_before_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let options = SessionOptions {
        restart_cmd: Some("true".into()),
        restart_each: true,
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 2)]);
    let backend = FakeBackend::new(&clock, 2);
    let restarts = backend.restarts.clone();
    let s = drive(&paths, backend, &clock);
    assert_eq!(restarts.get() as usize, s.workflows[0].runs.len());
}

#[test]
fn start_at_waits_before_the_first_run() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let start = clock.now() + Duration::from_secs(3 * 3600);
    let options = SessionOptions {
        start_at: Some(start.to_string()),
        ..SessionOptions::default()
    };
    let (paths, _) = new_session(dir.path(), options, vec![prepared("a", 1)]);
    let s = drive(&paths, FakeBackend::new(&clock, 1), &clock);
    let first =
        crate::units::utc(crate::units::parse_rfc3339(&s.workflows[0].runs[0].started_at).unwrap());
    assert!(clock.now() >= start);
    // started_at is wall time (not the fake clock): only check the run happened after waiting.
    assert!(first.year() >= 2026);
    assert_eq!(s.state, SessionState::Done);
}

#[test]
fn stop_flag_stops_before_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, session) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 2)],
    );
    let mut hooks = NoHooks;
    let mut driver = Driver::new(
        paths.clone(),
        session,
        FakeBackend::new(&clock, 2),
        clock.clone(),
        &mut hooks,
    );
    driver.stop_flag().store(true, Ordering::SeqCst);
    driver.drive().unwrap();
    let s = SessionFile::load(&paths).unwrap();
    assert!(matches!(
        s.state,
        SessionState::Stopped {
            reason: StopReason::Interrupted,
            ..
        }
    ));
    assert!(s.workflows[0].runs.is_empty());
}

#[test]
fn server_down_before_a_run_is_waited_for_then_the_session_stops() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, backend) = lost_server(dir.path(), &clock, 10);
    let before = clock.now();
    let s = drive(&paths, backend, &clock);
    assert!((clock.now() - before).as_secs() >= 10);
    assert!(matches!(
        s.state,
        SessionState::Stopped {
            reason: StopReason::ServerLost,
            ..
        }
    ));
    assert!(s.workflows[0].runs.is_empty());
}

/// A session whose step 2 takes the server down once (a supervisor brings it back, the
/// confirmation passes), with submission `interrupt` interrupted and the session resumed
/// afterwards: the calls of both drives and the report of the journal's final state.
fn interrupted_and_resumed(interrupt: Option<usize>) -> (Vec<i64>, crate::report::Report) {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new();
    let (paths, _) = new_session(
        dir.path(),
        SessionOptions::default(),
        vec![prepared("a", 5)],
    );
    let crashes_left = Rc::new(Cell::new(Some(1)));
    let mut calls = Vec::new();
    for interrupt_call in [interrupt, None] {
        let mut backend = FakeBackend::new(&clock, 4);
        backend.crash_at = Some(2);
        backend.crashes_left = crashes_left.clone();
        backend.interrupt_call = interrupt_call;
        let made = backend.calls.clone();
        let mut hooks = ReviveAfter(backend.alive.clone());
        let session = SessionFile::load(&paths).unwrap();
        let mut driver = Driver::new(paths.clone(), session, backend, clock.clone(), &mut hooks);
        driver.drive().unwrap();
        calls.extend(made.borrow().iter().copied());
        if interrupt.is_none() {
            break;
        }
    }
    let report = crate::report::session_report(&paths.dir, false, false).unwrap();
    (calls, report)
}

#[test]
fn the_report_after_an_interruption_at_any_phase_and_resume_is_the_uninterrupted_one() {
    let (reference_calls, reference) = interrupted_and_resumed(None);
    // minimal, target, search, the crash, its confirmation, search, search
    assert_eq!(reference_calls, vec![0, 5, 1, 2, 2, 3, 4]);
    let rows = |r: &crate::report::Report| -> Vec<(usize, String, Option<FailureKind>)> {
        r.workflows[0]
            .ladder
            .iter()
            .map(|row| (row.step, row.outcome.clone(), row.failure_kind))
            .collect()
    };
    for k in 0..reference_calls.len() {
        let (calls, report) = interrupted_and_resumed(Some(k));
        // The interrupted submission is made again on resume.
        assert_eq!(
            calls.len(),
            reference_calls.len() + 1,
            "interrupt {k}: {calls:?}"
        );
        let w = &report.workflows[0];
        assert_eq!(rows(&report), rows(&reference), "interrupt {k}");
        assert!(
            w.ladder.iter().all(|row| row.outcome != "interrupted"),
            "interrupt {k}: {:?}",
            w.ladder
        );
        // The chart is drawn from these rows (the fake runs have no VRAM samples to draw).
        if let Some((chart, caption)) = crate::report::chart::ladder_chart(w) {
            assert!(
                !chart.contains("interrupted") && !caption.contains("interrupted"),
                "interrupt {k}: {chart}\n{caption}"
            );
        }
        // The verdict, the ladder and the attachments name the same runs.
        let row_run = |step: usize| {
            w.ladder
                .iter()
                .find(|r| r.step == step)
                .unwrap()
                .run_id
                .clone()
        };
        let (passing, failing) = (
            w.attachments.minimal_passing.as_ref().unwrap(),
            w.attachments.first_failing.as_ref().unwrap(),
        );
        assert_eq!(Some(passing.run_id.clone()), row_run(3), "interrupt {k}");
        assert_eq!(Some(failing.run_id.clone()), row_run(4), "interrupt {k}");
    }
}
