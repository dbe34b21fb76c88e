//! What `session.json` says: the whole session, its options, its workflows with their ladder
//! and runs, with the questions the driver and the report ask of them. A workflow's answer is
//! in [`super::verdict`], a run's own record (`run.json`) in [`super::run_file`]. No I/O here
//! (see [`super::files`]).

use super::verdict::*;
use crate::comfy::{Fingerprint, SystemStats};
use crate::ladder::{Kept, NotSeparable};
pub use crate::vocab::Outcome;
use crate::vocab::{ProductSummary, Stage};
use crate::workflow::Change;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Version of the `session.json` layout; bumped on incompatible changes.
pub const SESSION_SCHEMA_VERSION: u32 = 1;
/// File name of the session journal inside a session folder.
pub const SESSION_FILE: &str = "session.json";
/// File name of the submitted workflow inside a run folder.
pub const RUN_WORKFLOW_FILE: &str = "workflow.json";
/// File name of the run record inside a run folder.
pub const RUN_RECORD_FILE: &str = "run.json";
/// File name of the raw WebSocket frames inside a run folder.
pub const RUN_EVENTS_FILE: &str = "events.ndjson";
/// Name of the increment of step 0 (the minimal variant).
#[cfg(test)]
pub(crate) const MINIMAL: &str = "minimal";

/// The whole journal of one session (`session.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFile {
    /// [`SESSION_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The session id (also the folder name), e.g. `20261129-231500-3f2a`.
    pub session_id: String,
    /// comfy-bisect version that created the session.
    pub tool_version: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last write.
    pub updated_at: String,
    /// The ComfyUI server URL (the report redacts host names).
    pub server: String,
    /// The options the session was started with (resume reuses them).
    pub options: SessionOptions,
    /// Where the driver is.
    pub state: SessionState,
    /// One job per workflow given on the command line, run one after another.
    pub workflows: Vec<WorkflowJob>,
    /// The run submitted and not yet recorded, if any (what `resume` looks up first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
    /// The server's `/system_stats` answer at preflight (versions, devices, launch arguments;
    /// fields this version does not model are kept). A stored value this version cannot read
    /// loads as `None`: the report then takes the environment from the runs' records.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_system_stats"
    )]
    pub environment: Option<SystemStats>,
    /// Every environment fingerprint the session's runs saw, by id (each run names its own
    /// in `fingerprint`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fingerprints: BTreeMap<String, Fingerprint>,
    /// Environment changes seen between two runs, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifts: Vec<Drift>,
    /// The session moved to another server URL (`resume --server`, `mitigate --server`), in
    /// order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_moves: Vec<ServerMove>,
    /// `resume` ran preflight again for a workflow preflight had skipped, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight_rechecks: Vec<PreflightRecheck>,
}

/// `resume` checked a skipped workflow (verdict `preflight_failed`) against the server again:
/// one that passes gets its ladder and is bisected; one that fails keeps its verdict with the
/// refreshed list of what is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightRecheck {
    /// The workflow's name in the session.
    pub workflow: String,
    /// When (RFC 3339).
    pub at: String,
    /// The server it was checked on.
    pub server: String,
    /// True when it passed (and was planned to be bisected).
    pub passed: bool,
}

impl PreflightRecheck {
    /// `sd15 passed preflight when resumed at …; bisected from then on` (or `… failed
    /// preflight again …; still skipped`).
    pub fn describe(&self) -> String {
        if self.passed {
            format!(
                "{} passed preflight when resumed at {}; bisected from then on",
                self.workflow, self.at
            )
        } else {
            format!(
                "{} failed preflight again when resumed at {}; still skipped",
                self.workflow, self.at
            )
        }
    }
}

/// A move of a session to another server URL (a port that changed after a reboot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerMove {
    /// The URL before.
    pub from: String,
    /// The URL after.
    pub to: String,
    /// When (RFC 3339).
    pub at: String,
}

impl SessionFile {
    /// Moves the session to `server` (recorded in [`SessionFile::server_moves`]); false when
    /// it is already there.
    pub fn move_to_server(&mut self, server: &str) -> bool {
        if self.server == server {
            return false;
        }
        self.server_moves.push(ServerMove {
            from: std::mem::replace(&mut self.server, server.to_string()),
            to: server.to_string(),
            at: crate::units::now_rfc3339(),
        });
        true
    }
}

/// Reads [`SessionFile::environment`] leniently: a value of another shape is `None` rather than
/// a session that no longer loads.
fn lenient_system_stats<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SystemStats>, D::Error> {
    let value = Option::<Value>::deserialize(d)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

/// The environment changed between two runs of a session (`--on-drift`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// RFC 3339 time it was seen (before the next run).
    pub detected_at: String,
    /// Index into `workflows` of the workflow being worked on.
    pub workflow: usize,
    /// Fingerprint id of the runs before.
    pub from: String,
    /// Fingerprint id now.
    pub to: String,
    /// What changed, one line each (`launch arguments: … → …`, `node pack added: …`).
    pub changes: Vec<String>,
    /// What the session did about it.
    pub action: OnDrift,
}

/// What a session does when the environment changes (`--on-drift`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDrift {
    /// Re-run the last passing step under the new environment, then go on.
    #[default]
    Reanchor,
    /// End the session: "incomplete: environment changed".
    Stop,
}

/// The options of `bisect` that shape the session (saved so `resume` continues the same way).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    /// Search strategy.
    pub strategy: Strategy,
    /// `--repeat N`: extra runs of the first failing and last passing steps (0 = off).
    pub repeat: u32,
    /// `--controls`: also run minimal + each later increment alone.
    pub controls: bool,
    /// `--assume-fails`: the target is not run as an endpoint.
    pub assume_fails: bool,
    /// `--strict`: a run that only passed through a memory fallback counts as a failure.
    #[serde(default)]
    pub strict: bool,
    /// `--max-slowdown F`: how many times what the added work explains a step may take before
    /// the slowdown counts as memory pressure (None = `analytics::pressure::DEFAULT_MAX_SLOWDOWN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_slowdown: Option<f64>,
    /// `--timeout` per run, seconds (None = the runner's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// `--stall`, seconds: a running prompt without progress or a node change for this long
    /// is a hang (None = derived, `run::hang::stall_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_s: Option<u64>,
    /// Cold runs (free models and memory before each run); `--warm` turns it off.
    pub cold: bool,
    /// `--wait-server`, seconds.
    pub wait_server_s: u64,
    /// `--restart-cmd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_cmd: Option<String>,
    /// `--restart-each`: run the restart command before every run.
    pub restart_each: bool,
    /// `--restart-timeout`, seconds: a restart command running longer is killed.
    #[serde(default = "default_restart_timeout_s")]
    pub restart_timeout_s: u64,
    /// `--deadline`, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// `--deadline-grace`, seconds: a run still going this long after the deadline is
    /// interrupted (None = `DEFAULT_DEADLINE_GRACE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_grace_s: Option<u64>,
    /// `--start-at`, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// `--models-dir` roots used for component hashes.
    #[serde(default)]
    pub models_dirs: Vec<PathBuf>,
    /// Ladder options as given (`--order`, `--keep`, `--min-resolution`, …), for the record.
    #[serde(default)]
    pub plan_args: Vec<String>,
    /// `--confirm-crashes N`: a run that ends `server_lost` or `timeout` is re-run up to N
    /// times before it counts (0 = a crash counts as a failure at once).
    #[serde(default = "default_confirm_crashes")]
    pub confirm_crashes: u32,
    /// `--on-drift`: what to do when the environment fingerprint changes between runs.
    #[serde(default)]
    pub on_drift: OnDrift,
    /// `--search-steps N`: during the search, samplers and schedulers run at most N steps and
    /// the boundary is then confirmed at the workflow's own steps (None = `full`: every run
    /// at the workflow's own steps, as sessions before this option; the command line's
    /// default is [`DEFAULT_SEARCH_STEPS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_steps: Option<u32>,
    /// `--full-step-target`: with `search_steps`, the target still runs at its own steps (the
    /// probes between may run reduced). It gives up the saving on the largest run for the
    /// bound of issue 27: never more than full-step binary search plus one full-step run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full_step_target: bool,
    /// `--allow-shared-server`: run even when another session holds the server's lock (both
    /// sessions' memory numbers then include the other's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_shared_server: bool,
    /// `--walk-on-pass`: when the target passes, whether to walk the ladder from step 1 for
    /// the first step under memory pressure (a session saved before the option: `never`, as
    /// it ran; `never` is not written, so such a journal keeps its shape).
    #[serde(
        default = "walk_before_the_option",
        skip_serializing_if = "WalkOnPass::is_never"
    )]
    pub walk_on_pass: WalkOnPass,
}

fn walk_before_the_option() -> WalkOnPass {
    WalkOnPass::Never
}

impl WalkOnPass {
    fn is_never(&self) -> bool {
        *self == WalkOnPass::Never
    }
}

/// Whether a session whose target passes walks the ladder for the first step under memory
/// pressure (`--walk-on-pass`; `analytics::walk` has the cues).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WalkOnPass {
    /// Walk when a cue on the passing target fires (pressure, a partial load, a model staged at
    /// or above the card, the VRAM peak at the card's total).
    #[default]
    Auto,
    /// Walk whenever the target passes.
    Always,
    /// Never: a passing target ends the workflow ("could not reproduce").
    Never,
}

/// The default of `--deadline-grace`: how long a run may go on past `--deadline` before it is
/// interrupted (and run again by `resume`).
pub(crate) const DEFAULT_DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// The default of `--search-steps`: the step cap of the search runs. Four steps give each of
/// two experts splitting the steps (Wan 2.2 high/low noise) a first step and a later one, and
/// are the count that few-step distillations (Lightning, lightx2v) run at; see docs/sessions.md.
pub const DEFAULT_SEARCH_STEPS: u32 = 4;

/// The default of `--confirm-crashes`.
pub const DEFAULT_CONFIRM_CRASHES: u32 = 1;

fn default_confirm_crashes() -> u32 {
    DEFAULT_CONFIRM_CRASHES
}

fn default_restart_timeout_s() -> u64 {
    crate::server::restart::DEFAULT_RESTART_TIMEOUT.as_secs()
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            strategy: Strategy::Linear,
            repeat: 0,
            controls: false,
            assume_fails: false,
            strict: false,
            max_slowdown: None,
            timeout_s: None,
            stall_s: None,
            cold: true,
            wait_server_s: 600,
            restart_cmd: None,
            restart_each: false,
            restart_timeout_s: default_restart_timeout_s(),
            deadline: None,
            deadline_grace_s: None,
            start_at: None,
            models_dirs: Vec::new(),
            plan_args: Vec::new(),
            confirm_crashes: DEFAULT_CONFIRM_CRASHES,
            on_drift: OnDrift::Reanchor,
            search_steps: None,
            full_step_target: false,
            allow_shared_server: false,
            walk_on_pass: WalkOnPass::Auto,
        }
    }
}

/// How the ladder is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// One increment per run, in ladder order, until the first failure.
    Linear,
    /// Bisection over the ladder (assumes failures are monotone).
    Binary,
}

/// Where the session driver is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionState {
    /// Checking server, node definitions and every variant.
    Preflight,
    /// Waiting for `--start-at`.
    Waiting {
        /// RFC 3339.
        until: String,
    },
    /// Working on `workflows[workflow]`.
    Running {
        /// Index into `workflows`.
        workflow: usize,
    },
    /// Every workflow has a final verdict.
    Done,
    /// Stopped before the end; `resume` continues.
    Stopped {
        /// Why.
        reason: StopReason,
        /// In words.
        detail: String,
    },
}

/// One workflow of the session and everything run for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowJob {
    /// Short name (file stem), used in folder names and output.
    pub name: String,
    /// The path as given on the command line.
    pub source: String,
    /// The image, audio or video file ComfyUI saved that the workflow was read from (its name,
    /// sha256, container and which text was used), when it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_file: Option<crate::workflow::embedded::SourceFile>,
    /// Canonical sha256 of the target workflow.
    pub target_sha256: String,
    /// The ladder: step 0 = minimal variant, last step = the target.
    pub steps: Vec<StepInfo>,
    /// Control variants (`--controls`): minimal + one increment alone, one per step ≥ 1.
    #[serde(default)]
    pub controls: Vec<ControlVariant>,
    /// Reductions that could not be done safely (the ladder's `not_separable`).
    #[serde(default)]
    pub not_separable: Vec<NotSeparable>,
    /// Memory-saving settings kept in every variant (the ladder's `kept`).
    #[serde(default)]
    pub kept: Vec<Kept>,
    /// What the driver is doing for this workflow (derived from `runs`, saved for readers).
    pub phase: Phase,
    /// Every run, in the order submitted (a run appears once it is submitted).
    pub runs: Vec<RunEntry>,
    /// Final verdict, once reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One rung of the ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    /// 0 = minimal variant; `steps.len() - 1` = target.
    pub index: usize,
    /// The increment this step adds (`minimal` for step 0).
    pub increment: String,
    /// The variant file, relative to the session folder (`workflows/<name>/NN-<increment>.json`).
    pub file: String,
    /// Canonical sha256 of the variant.
    pub sha256: String,
    /// What this step changes compared to the previous one (the ladder's changes, written as
    /// `{"node","class_type","action","input","from","to"}`; their text comes from
    /// [`crate::ladder::describe_changes`]).
    #[serde(default)]
    pub changes: Vec<Change>,
}

/// A control variant: the minimal variant plus the increment of `step` alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlVariant {
    /// The step whose increment is added alone.
    pub step: usize,
    /// That increment.
    pub increment: String,
    /// The variant file, relative to the session folder (`workflows/<name>/control-NN-<increment>.json`).
    pub file: String,
    /// Canonical sha256 of the variant.
    pub sha256: String,
}

/// What the driver is doing for one workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Not started.
    Pending,
    /// Running the minimal variant.
    Minimal,
    /// Running the target.
    Target,
    /// Searching the ladder.
    Search,
    /// Repeating the boundary steps (`--repeat`).
    Repeat,
    /// Running controls (`--controls`).
    Controls,
    /// Verdict reached.
    Done,
}

/// Why a run was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunRole {
    /// Endpoint: the minimal variant (must pass).
    Minimal,
    /// Endpoint: the target (must fail).
    Target,
    /// A ladder step during the search.
    Search,
    /// A repeat of a boundary step (`--repeat`).
    Repeat,
    /// Minimal + one later increment alone (`--controls`); `increment` names it.
    Control,
    /// A re-run of a run that crashed (`server_lost` or `timeout`), to confirm the crash
    /// (`--confirm-crashes`); `confirms` names the crashed run.
    Confirm,
    /// A re-run of a step under a new environment (`--on-drift reanchor`), so that the first
    /// failure is bracketed by a pass and a fail in one environment.
    Anchor,
    /// A single-change control on the target after the verdict (`--mitigate`, `mitigate`);
    /// its entry lives in `mitigations.json`, not in the workflow's runs.
    Mitigation,
}

/// Whether a run is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Submitted; the outcome is not recorded yet.
    InFlight,
    /// The outcome is recorded (in `outcome` and in `run.json`).
    Done,
}

/// One run as the session sees it (the full record is `dir/run.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// The run id (UUID v4), also the ComfyUI prompt_id.
    pub run_id: String,
    /// The ladder step (for a control: the step of the increment added alone).
    pub step: usize,
    /// The increment of that step (`minimal` for step 0).
    pub increment: String,
    /// Why the run was made.
    pub role: RunRole,
    /// The run folder, relative to the session folder (`NN-<increment>-<run-id>`).
    pub dir: String,
    /// Canonical sha256 of the submitted workflow.
    pub workflow_sha256: String,
    /// In flight or done.
    pub status: RunStatus,
    /// RFC 3339 submission time.
    pub started_at: String,
    /// RFC 3339 end time (when done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The outcome (when done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Summary numbers of the run (when done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<RunSummary>,
    /// The diagnosis of a failed run (the `diagnose --json` object; one this version cannot
    /// read loads as none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::diagnose::lenient_diagnosis"
    )]
    pub diagnosis: Option<crate::diagnose::Diagnosis>,
    /// For a `confirm` run: the run id of the crashed run it re-runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirms: Option<String>,
    /// Id of the environment fingerprint taken before the run (see `SessionFile::fingerprints`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Set when the run was made at a reduced step count (`--search-steps`): the cap and the
    /// ladder's edits that made it; none = the variant's own steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduced: Option<ReducedSteps>,
}

/// How a reduced-step run differs from its variant (`--search-steps`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReducedSteps {
    /// The step cap.
    pub cap: u32,
    /// The sampler and scheduler `steps` inputs it lowered (from = the variant's value).
    pub changes: Vec<Change>,
}

impl ReducedSteps {
    /// ` · at 4 of 20 steps`: the mark of a run made at a reduced step count (`--search-steps`), in
    /// its progress line and its line when it ended; the cap of the `steps` inputs it lowered and
    /// the largest of them in the variant (samplers with different counts: the largest).
    pub(crate) fn mark(&self) -> String {
        let full = self
            .changes
            .iter()
            .filter(|c| c.input.as_deref() == Some("steps"))
            .filter_map(|c| c.from.as_ref().and_then(|v| v.as_u64()))
            .max();
        match full {
            Some(full) => format!(" · at {} of {full} steps", self.cap),
            None => format!(" · at {} steps", self.cap),
        }
    }
}

#[cfg(test)]
impl RunEntry {
    /// A finished search run at `step` with `outcome`, nothing else recorded (unit tests set
    /// the fields they need on it).
    pub(crate) fn done(run_id: impl Into<String>, step: usize, outcome: Outcome) -> RunEntry {
        RunEntry {
            run_id: run_id.into(),
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
        }
    }
}

impl RunEntry {
    /// True when the run was made at a reduced step count.
    pub(crate) fn is_reduced(&self) -> bool {
        self.reduced.is_some()
    }

    /// True when the run is done and crashed: the server went away or the run timed out.
    pub(crate) fn crashed(&self) -> bool {
        self.outcome.as_ref().is_some_and(Outcome::is_crash)
    }

    /// True when the run is done and passed.
    pub fn passed(&self) -> bool {
        matches!(self.outcome, Some(Outcome::Passed))
    }

    /// True when the run is done and counts as a failure of the variant.
    pub fn failed(&self) -> bool {
        self.outcome.as_ref().is_some_and(Outcome::is_failure)
    }
}

/// What the re-runs of a crashed run say (`--confirm-crashes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrashCheck {
    /// The run did not crash (or crashes are not confirmed): it stands as it is.
    NotACrash,
    /// More re-runs are needed; none is conclusive yet.
    Pending,
    /// A re-run passed: the crash is not reproduced and the step counts as passed.
    NotReproduced {
        /// The passing re-run.
        by: String,
    },
    /// The re-runs failed too (crashed again, or ran out of memory).
    Confirmed {
        /// How often the failure was seen, the crash included.
        times: u32,
        /// The failing re-runs, in order.
        by: Vec<String>,
    },
}

impl WorkflowJob {
    /// The first ladder step that passed under memory pressure or through a memory fallback
    /// before the verdict's failing step (or anywhere, when the target passed), in words:
    /// `first memory pressure at frames (step 2: slowed 3.0×, weights streamed)`. None when
    /// every pass was clean or the verdict is not a bisection's.
    pub fn first_degraded_pass(&self) -> Option<String> {
        let limit = match self.verdict.as_ref()? {
            Verdict::FirstFailure { step, .. } => *step,
            Verdict::CouldNotReproduce { .. } => usize::MAX,
            _ => return None,
        };
        let run = self
            .runs
            .iter()
            .filter(|r| r.role != RunRole::Control && r.step < limit && r.passed())
            .filter(|r| {
                r.summary
                    .as_ref()
                    .is_some_and(|s| !s.delivered.degraded().is_empty())
            })
            .min_by_key(|r| r.step)?;
        let delivered = &run.summary.as_ref()?.delivered;
        let what = if delivered.memory_pressure.is_empty() {
            "memory fallback"
        } else {
            "memory pressure"
        };
        Some(format!(
            "first {what} at {} (step {}: {})",
            run.increment,
            run.step,
            delivered.degraded().join(", ")
        ))
    }

    /// The verdict's line, naming the part of the workflow the failing step brings back (a
    /// hires pass); None before a verdict.
    pub fn headline(&self) -> Option<String> {
        let verdict = self.verdict.as_ref()?;
        if let Verdict::Checked { run_id } = verdict {
            // A check: what its one run says.
            let outcome = self
                .runs
                .iter()
                .find(|r| &r.run_id == run_id)?
                .outcome
                .as_ref()?;
            let status = match outcome {
                Outcome::Passed => "good",
                o if o.is_failure() => "bad",
                _ => "cannot test",
            };
            return Some(format!("check: {status} ({})", outcome.name()));
        }
        let parts = match verdict {
            Verdict::FirstFailure { step, .. } => self
                .steps
                .iter()
                .find(|s| s.index == *step)
                .map(|s| crate::ladder::named_parts(&s.changes))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let line = verdict.headline_with(&parts);
        // A pass under memory pressure or through a fallback before the verdict's step is the
        // session's first finding: the line leads with it.
        let line = match self.first_degraded_pass() {
            Some(lead) => format!("{lead}; then {line}"),
            None => line,
        };
        // With --strict, a pass through a fallback or under pressure is the failure: say which.
        if let Verdict::FirstFailure { run_id, .. } = verdict {
            let outcome = self
                .runs
                .iter()
                .find(|r| &r.run_id == run_id)
                .and_then(|r| r.outcome.as_ref());
            match outcome {
                Some(Outcome::MemoryPressure { .. }) => {
                    return Some(format!(
                        "{line}: passed under memory pressure, counted as a failure by --strict"
                    ))
                }
                Some(Outcome::MemoryFallback { .. }) => {
                    return Some(format!(
                        "{line}: passed only through a memory fallback, counted as a failure by --strict"
                    ))
                }
                _ => {}
            }
        }
        Some(line)
    }

    /// What the `confirm` re-runs of `run` say, with `n` = `--confirm-crashes`. The re-runs are
    /// looked at in order: a pass means "not reproduced"; a failure that is not a crash (an
    /// out-of-memory error, …) confirms at once; a crash counts towards `n`.
    pub fn crash_check(&self, run: &RunEntry, n: u32) -> CrashCheck {
        if n == 0 || run.role == RunRole::Confirm || !run.crashed() {
            return CrashCheck::NotACrash;
        }
        let mut by = Vec::new();
        for r in self
            .runs
            .iter()
            .filter(|r| r.role == RunRole::Confirm && r.confirms.as_deref() == Some(&run.run_id))
        {
            if r.passed() {
                return CrashCheck::NotReproduced {
                    by: r.run_id.clone(),
                };
            }
            if !r.failed() {
                continue;
            }
            by.push(r.run_id.clone());
            if !r.crashed() || by.len() as u32 >= n {
                return CrashCheck::Confirmed {
                    times: by.len() as u32 + 1,
                    by,
                };
            }
        }
        CrashCheck::Pending
    }
}

/// Numbers of one run the ladder table shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Wall time from submission to the end, milliseconds.
    pub duration_ms: u64,
    /// Peak VRAM used (sampled), MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_peak_mib: Option<f64>,
    /// The VRAM sampling interval, milliseconds (short peaks between samples are missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_sample_ms: Option<u64>,
    /// The card's total VRAM, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_total_mib: Option<f64>,
    /// Device memory already in use before the run (after `/free` and the settle), MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_baseline_mib: Option<f64>,
    /// Peak system RAM in use (sampled `ram_total − ram_free`), MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_peak_mib: Option<f64>,
    /// Peak resident memory of the server process (local server only), MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_peak_mib: Option<f64>,
    /// Peak swap of the local server process, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_peak_mib: Option<f64>,
    /// The machine's total RAM, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_total_mib: Option<f64>,
    /// Models and memory were freed before the run.
    pub cold: bool,
    /// The last node that ran (or the failing one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_node: Option<String>,
    /// Diagnosis stage of a failure (`load`, `sample_middle`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// The outcome was recovered from the server's history after the tool was killed
    /// (no timeline or VRAM series for this run).
    #[serde(default)]
    pub recovered_from_history: bool,
    /// What the run delivered: its product and the memory fallbacks it went through
    /// (`memory_fallbacks`, `product`, `product_warnings` beside the fields above).
    #[serde(flatten)]
    pub delivered: ProductSummary,
    /// Seconds per sampler step after the first (the slowest sampler pass's median; run.json's
    /// `step_timing` has every pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_per_step: Option<f64>,
    /// The run's time before, in and after its sampler steps (for the run-time predictor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<crate::run::timing::RunPhases>,
    /// What the submitted variant asked of the sampler (steps, latent size, frames, batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<crate::ladder::work::Work>,
    /// Where `vram_peak_mib` and `vram_sample_ms` come from when not from the tool's own
    /// `/system_stats` sampling: `server benchmark capture` (ComfyUI's own measurement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_peak_source: Option<String>,
    /// The longest stretch without a progress frame or a node change, ms (the default
    /// `--stall` is derived from it: `run::hang::stall_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_quiet_ms: Option<u64>,
    /// On a passing target: the cues that its pass may hide memory pressure, with their
    /// numbers (`--walk-on-pass auto` walks the ladder when there is one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub walk_cues: Vec<crate::analytics::walk::Cue>,
}

/// The submitted-but-unrecorded run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// Index into `workflows`.
    pub workflow: usize,
    /// The run id (= prompt_id on the server).
    pub run_id: String,
}

impl SessionFile {
    /// Finds a run by id in any workflow: (workflow index, run index).
    #[cfg(test)]
    pub(crate) fn find_run(&self, run_id: &str) -> Option<(usize, usize)> {
        self.workflows.iter().enumerate().find_map(|(w, job)| {
            job.runs
                .iter()
                .position(|r| r.run_id == run_id)
                .map(|i| (w, i))
        })
    }

    /// The fingerprint id of the session's last run that has one (workflows run one after
    /// another, so the last such run of the last workflow with runs).
    pub fn last_run_fingerprint(&self) -> Option<&str> {
        self.workflows
            .iter()
            .rev()
            .flat_map(|job| job.runs.iter().rev())
            .find_map(|r| r.fingerprint.as_deref())
    }

    /// The workflows preflight skipped (verdict `preflight_failed`), by index.
    pub fn skipped_by_preflight(&self) -> Vec<usize> {
        self.workflows
            .iter()
            .enumerate()
            .filter(|(_, w)| matches!(w.verdict, Some(Verdict::PreflightFailed { .. })))
            .map(|(i, _)| i)
            .collect()
    }

    /// True when runs are left: a workflow without its final verdict, or a run in flight.
    pub(crate) fn has_runs_left(&self) -> bool {
        !self.is_finished() || self.in_flight.is_some()
    }

    /// True when every workflow has a verdict that is not `incomplete`.
    pub(crate) fn is_finished(&self) -> bool {
        self.workflows.iter().all(|w| {
            w.verdict
                .as_ref()
                .is_some_and(|v| !matches!(v, Verdict::Incomplete { .. }))
        })
    }
}
