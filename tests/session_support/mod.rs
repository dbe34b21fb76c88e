//! Shared pieces of the session tests: an in-process simulator (of either profile: the key
//! end-to-end scenarios run on 0.3.64 and on 2026, see [`Sim::on`]), the ladder of an example
//! workflow, the VRAM a variant needs on the simulator, and running the CLI.
#![allow(dead_code)]

use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::ladder::{plan, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::run::{execute, RunRecord, RunRequest};
use comfy_bisect_core::session::journal::{
    read_json, RunEntry, RunFile, RunRole, SessionFile, WorkflowJob, RUN_RECORD_FILE, SESSION_FILE,
};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, Faults, Profile, SimConfig, SimHandle, MIB};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A simulator running on its own runtime.
pub struct Sim {
    pub rt: tokio::runtime::Runtime,
    pub handle: Option<SimHandle>,
}

impl Sim {
    pub fn start(config: SimConfig) -> Sim {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let handle = rt
            .block_on(start(config, "127.0.0.1:0".parse().unwrap()))
            .unwrap();
        Sim {
            rt,
            handle: Some(handle),
        }
    }
    pub fn with_vram_mib(mib: u64, time_scale: f64) -> Sim {
        Sim::on(Profile::V0364, mib, time_scale)
    }
    /// A simulator answering as `profile` with `mib` MiB of VRAM (the 2026 profile with its
    /// defaults: dynamic VRAM on).
    pub fn on(profile: Profile, mib: u64, time_scale: f64) -> Sim {
        Sim::start(
            SimConfig::default()
                .with_vram_bytes(mib * MIB)
                .with_time_scale(time_scale)
                .with_profile(profile),
        )
    }
    /// A simulator with `mib` MiB of VRAM, running as fast as it can, with `faults` on.
    pub fn with_faults(mib: u64, faults: Faults) -> Sim {
        Sim::start(
            SimConfig::default()
                .with_vram_bytes(mib * MIB)
                .with_time_scale(0.0)
                .with_faults(faults),
        )
    }
    /// Runs `workflow` once through comfy-bisect's client, warm (nothing freed first, no
    /// settle), and returns its record.
    pub fn run_warm(&self, workflow: &Workflow) -> RunRecord {
        let client = Client::new(&self.url(), ExtraHeaders::new()).unwrap();
        let mut request = RunRequest::new(workflow.clone());
        request.cold = false;
        request.settle = Duration::ZERO;
        request.sample_interval = Duration::from_millis(50);
        self.rt.block_on(execute(&client, request))
    }
    pub fn handle(&self) -> &SimHandle {
        self.handle.as_ref().unwrap()
    }
    pub fn url(&self) -> String {
        self.handle().base_url()
    }
    pub fn set_faults(&self, faults: Faults) {
        self.handle().set_faults(faults);
    }
    pub fn restart(&self) {
        self.rt.block_on(self.handle().restart()).unwrap();
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
    }
}

/// Every run of `session` (folder `dir`) followed its prompt the way `profile` serves it:
/// through the jobs API on 2026, through `/queue` and `/history` on 0.3.64. Proves a scenario
/// ran on the profile it names.
pub fn assert_runs_on(profile: Profile, dir: &Path, session: &SessionFile) {
    let want = Some(profile == Profile::Y2026);
    for run in session.workflows.iter().flat_map(|w| &w.runs) {
        let file: RunFile = read_json(&dir.join(&run.dir).join(RUN_RECORD_FILE)).unwrap();
        if file.record.raw.jobs_api.is_some() {
            assert_eq!(file.record.raw.jobs_api, want, "run {}", run.dir);
        }
    }
    let any = session.workflows.iter().flat_map(|w| &w.runs).any(|run| {
        read_json::<RunFile>(&dir.join(&run.dir).join(RUN_RECORD_FILE))
            .is_ok_and(|f| f.record.raw.jobs_api == want)
    });
    assert!(
        any,
        "no run of {} asked the server for its jobs API",
        dir.display()
    );
}

/// The simulator's node definitions.
pub fn sim_defs() -> NodeDefs {
    let value: Value = serde_json::from_str(comfy_bisect_sim::nodes::OBJECT_INFO).unwrap();
    NodeDefs::from_value(&value).expect("the simulator's node definitions")
}

/// An example workflow from `workflows/`, edited by `edit` (node id, input, value).
pub fn example(name: &str, edits: &[(&str, &str, Value)]) -> Value {
    let text = std::fs::read_to_string(format!("workflows/{name}.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    for (node, input, value) in edits {
        v[*node]["inputs"][*input] = value.clone();
    }
    v
}

/// Writes `workflow` into `dir/name.json`.
pub fn write_workflow(dir: &Path, name: &str, workflow: &Value) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(workflow).unwrap()).unwrap();
    path
}

/// The ladder's variants (step 0 … target) and their increments.
pub fn ladder(workflow: &Value, options: &PlanOptions) -> Vec<(String, Workflow)> {
    let target = Workflow::from_json_str(&workflow.to_string(), "test.json").unwrap();
    let p = plan(&target, &sim_defs(), &Catalog::builtin(), options).unwrap();
    p.steps
        .into_iter()
        .map(|s| (s.increment.name().to_string(), s.workflow))
        .collect()
}

/// Whether `workflow` passes on a fresh simulator with `mib` MiB of VRAM.
pub fn passes(workflow: &Workflow, mib: u64) -> bool {
    let sim = Sim::with_vram_mib(mib, 0.0);
    sim.run_warm(workflow).outcome == OutcomeKind::Passed
}

/// Runs the comfy-bisect binary.
pub fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(args)
        .env_remove("COMFY_BISECT_SERVER")
        .env_remove("COMFY_BISECT_HEADERS")
        .output()
        .unwrap()
}

/// `comfy-bisect --server URL bisect ARGS... --runs-dir DIR -q`, every run at the workflow's
/// own steps (`--search-steps full`) unless ARGS say otherwise: the session tests count and
/// compare runs of other features; `tests/search_steps.rs` covers the default.
pub fn bisect(url: &str, runs: &Path, args: &[&str]) -> Output {
    if args.contains(&"--search-steps") {
        return bisect_as_given(url, runs, args);
    }
    let mut all = args.to_vec();
    all.extend_from_slice(&["--search-steps", "full"]);
    bisect_as_given(url, runs, &all)
}

/// `comfy-bisect --server URL bisect ARGS... --runs-dir DIR -q` with the defaults as a user
/// gets them.
pub fn bisect_as_given(url: &str, runs: &Path, args: &[&str]) -> Output {
    let mut all = vec![
        "--server",
        url,
        "bisect",
        "-q",
        "--runs-dir",
        runs.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    cli(&all)
}

/// Text of an output, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The session folders under `runs`.
pub fn session_dirs(runs: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(SESSION_FILE).is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The only session under `runs`.
pub fn only_session(runs: &Path) -> (PathBuf, SessionFile) {
    let dirs = session_dirs(runs);
    assert_eq!(dirs.len(), 1, "expected one session in {}", runs.display());
    let s: SessionFile = read_json(&dirs[0].join(SESSION_FILE)).unwrap();
    (dirs[0].clone(), s)
}

/// A `bisect` of one workflow run from the command line, finished: its output and the one
/// session it wrote (the temporary folder lives as long as this).
pub struct Bisected {
    pub tmp: tempfile::TempDir,
    /// The `--runs-dir`.
    pub runs: PathBuf,
    /// The session folder.
    pub dir: PathBuf,
    pub session: SessionFile,
    pub out: Output,
}

impl Bisected {
    /// The session's (only) workflow.
    pub fn job(&self) -> &WorkflowJob {
        &self.session.workflows[0]
    }
    /// The command's exit code and output, for assertion messages.
    pub fn text(&self) -> String {
        text(&self.out)
    }
    /// The run of ladder step `step` (not a control run); panics with the output when none.
    pub fn main_run(&self, step: usize) -> &RunEntry {
        self.job()
            .runs
            .iter()
            .find(|r| r.step == step && r.role != RunRole::Control)
            .unwrap_or_else(|| panic!("no run of step {step}\n{}", self.text()))
    }
    /// A file of the session folder (`report.md`, `report.json`…) as text.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap()
    }
}

/// Writes `workflow` as `target.json` into a fresh folder and bisects it on `sim`
/// (`bisect -q --runs-dir …/runs target.json EXTRA...`).
/// Runs at the workflow's own steps unless EXTRA gives `--search-steps` (see [`bisect`]).
pub fn bisect_workflow(sim: &Sim, workflow: &Value, extra: &[&str]) -> Bisected {
    bisect_workflow_by(bisect, sim, workflow, extra)
}

/// [`bisect_workflow`] with the defaults as a user gets them ([`bisect_as_given`]).
pub fn bisect_workflow_as_given(sim: &Sim, workflow: &Value, extra: &[&str]) -> Bisected {
    bisect_workflow_by(bisect_as_given, sim, workflow, extra)
}

fn bisect_workflow_by(
    run: fn(&str, &Path, &[&str]) -> Output,
    sim: &Sim,
    workflow: &Value,
    extra: &[&str],
) -> Bisected {
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "target", workflow);
    let runs = tmp.path().join("runs");
    let mut args = vec![wf.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&sim.url(), &runs, &args);
    let (dir, session) = only_session(&runs);
    Bisected {
        tmp,
        runs,
        dir,
        session,
        out,
    }
}

/// Polls the journal of the one session under `runs` (every 20 ms, at most 120 s) until `ready`
/// takes a value from it; panics when the bisect process `child` ends first.
pub fn wait_for_journal<T>(
    child: &mut std::process::Child,
    runs: &Path,
    ready: impl Fn(&SessionFile) -> Option<T>,
) -> T {
    let start = std::time::Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the session never got going"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("bisect ended before the session got where the test waits: {status}");
        }
        let dirs = if runs.exists() {
            session_dirs(runs)
        } else {
            vec![]
        };
        if let Some(dir) = dirs.first() {
            if let Ok(s) = read_json::<SessionFile>(&dir.join(SESSION_FILE)) {
                if let Some(v) = ready(&s) {
                    return v;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
