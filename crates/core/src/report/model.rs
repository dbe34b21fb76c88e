//! The report's content: one serializable value that every format renders. `report.json` is this
//! value as JSON (see docs/report.md for the schema); the Markdown renders the same fields.
//!
//! Field names and meanings are a stable contract: new fields may be added (optional ones are
//! omitted when absent), existing ones are never renamed or retyped without bumping
//! [`SCHEMA_VERSION`]. Every struct here is `#[skip_serializing_none]`: an `Option` field that is
//! `None` is left out of `report.json` (and reads back as `None`).

pub use crate::vocab::{ContractNumbers, ProductSummary, VerdictKind};
use crate::vocab::{FailureKind, Stage, StageConfidence};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

/// Version of the report.json schema.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a report says about one bisection session.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Schema version of this document ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The tool and version that wrote it, e.g. `comfy-bisect 0.1.0`.
    pub generator: String,
    /// The session id (the folder name under the runs directory).
    pub session_id: String,
    /// Where the session is: `preflight`, `waiting`, `running`, `done` or `stopped`.
    pub state: String,
    /// Why the session stopped early, in words (state `stopped`).
    pub stopped_because: Option<String>,
    /// Whether home directories, user and host names, IP addresses and secrets were replaced.
    pub redacted: bool,
    /// How the session was run.
    pub settings: Settings,
    /// The server's versions, hardware and launch arguments (absent before preflight).
    pub environment: Option<Environment>,
    /// Environment changes between runs (the fingerprint changed), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_changes: Vec<DriftRow>,
    /// One entry per workflow of the session, in the order they were run.
    pub workflows: Vec<WorkflowReport>,
    /// Things the reader should know (environment changed mid-session, warm cache hits, …).
    pub warnings: Vec<String>,
}

/// The environment changed between two runs.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriftRow {
    /// When it was seen (before the next run).
    pub detected_at: String,
    /// The workflow being worked on.
    pub workflow: String,
    /// Fingerprint id before.
    pub from: String,
    /// Fingerprint id after.
    pub to: String,
    /// What changed, one line each.
    pub changes: Vec<String>,
    /// `reanchor` or `stop`.
    pub action: String,
    /// The runs made again under the new environment (`anchor` runs): short description each.
    pub anchor_runs: Vec<String>,
}

/// The report of one workflow of the session.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowReport {
    /// The workflow's short name in the session.
    pub name: String,
    /// The input file and its hash.
    pub workflow: WorkflowInfo,
    /// The one-line verdict and its structured parts.
    pub verdict: Verdict,
    /// One row per ladder step, step 0 (minimal) first; steps the search skipped say `not_run`.
    pub ladder: Vec<LadderRow>,
    /// How peak VRAM was measured.
    pub vram: VramInfo,
    /// Evidence for the first failing run (or the failing minimal run).
    pub first_failure: Option<Evidence>,
    /// What to check next and the unproven explanations, for the failure's stage.
    pub next_steps: Option<NextSteps>,
    /// Repeated runs of the first failing and last passing steps (`--repeat`).
    pub repeats: Vec<RepeatRow>,
    /// Control runs: minimal plus one later increment alone (`--controls`).
    pub controls: Vec<ControlRow>,
    /// What preflight found missing (verdict `preflight_failed`).
    pub preflight: Option<Preflight>,
    /// Model files the failing (or last) run's workflow references, with their hashes.
    pub components: Vec<Component>,
    /// Files to attach and the commands that reproduce each run.
    pub attachments: Attachments,
    /// Single-change controls tried after the verdict (`mitigate`), passing ones first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mitigations: Vec<super::mitigations::MitigationRow>,
    /// The nodes of the failing run's workflow that come from custom node packs (absent when
    /// no run failed, or its record does not say: no `/object_info` was read, or an older
    /// record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_pack_nodes: Option<CustomPackNodes>,
    /// The failure in the fields of ComfyUI's bug form (absent when no run failed); report.md
    /// shows it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug_form: Option<BugForm>,
    /// The search at few steps (`--search-steps N`): which runs were reduced and how the
    /// boundary was confirmed at full steps; absent when every run had the workflow's own steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_steps: Option<SearchStepsReport>,
    /// Each node's execution time in the boundary runs (last pass, first memory pressure,
    /// first failure), from the `executing` transitions run.json keeps; absent when no such
    /// run has a timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_times: Option<NodeTimes>,
    /// The peak-memory chart of the ladder, a Mermaid block to paste into an issue comment
    /// (report.json only: report.md, sized for an issue, says it is here); absent when no run
    /// has a VRAM figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_chart: Option<MemoryChart>,
}

/// The peak-memory chart of a ladder ([`WorkflowReport::memory_chart`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryChart {
    /// The fenced Mermaid `xychart-beta` block (GitHub renders it).
    pub mermaid: String,
    /// What its bars and lines show, and which steps it leaves out.
    pub caption: String,
}

/// Node execution times of the boundary runs, side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTimes {
    /// The runs, in ladder order.
    pub runs: Vec<NodeTimesRun>,
    /// One row per node that ran in any of them, in the order the first run ran them.
    pub rows: Vec<NodeTimeRow>,
}

/// One boundary run of [`NodeTimes`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTimesRun {
    /// `last pass`, `first memory pressure` or `first failure`.
    pub role: String,
    /// Its ladder step.
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// Its seconds per sampler step (the first step apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_per_step: Option<f64>,
}

/// One node's time in each boundary run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTimeRow {
    /// Node id.
    pub node: String,
    /// Its class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_type: Option<String>,
    /// Seconds from its start to its end, per run of [`NodeTimes::runs`] (None: it did not
    /// run there, was cached, or did not finish).
    pub seconds: Vec<Option<f64>>,
}

/// Which nodes of the failing run's workflow come from custom node packs: ComfyUI's bug form
/// asks whether the failure stays with `--disable-all-custom-nodes`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomPackNodes {
    /// The failing run's step.
    pub step: usize,
    /// The failing run.
    pub run_id: String,
    /// Each node from a custom pack, by node id; empty: every node is ComfyUI's own.
    pub nodes: Vec<CustomPackNode>,
}

/// One node of a workflow that comes from a custom node pack.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomPackNode {
    /// The node.
    pub node: NodeRef,
    /// Its title (`_meta.title`), when it has one.
    pub title: Option<String>,
    /// The pack (its folder under `custom_nodes/`, from `python_module`).
    pub pack: String,
    /// The pack's version, when the server says (ComfyUI-Manager).
    pub version: Option<String>,
}

/// The failure in the fields of ComfyUI's bug form (Expected Behavior, Actual Behavior, Steps
/// to Reproduce, Debug Logs, Other), as plain text; the custom-pack nodes are
/// [`WorkflowReport::custom_pack_nodes`].
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BugForm {
    /// Expected Behavior: what the passing steps show.
    pub expected: String,
    /// Actual Behavior: the verdict sentence.
    pub actual: String,
    /// Steps to Reproduce: the workflow file to run (the failing run's variant, in UI format
    /// when the user gave a UI file and the run has its UI companion, else as submitted).
    pub workflow: Option<String>,
    /// `workflow` is in UI format (load it in ComfyUI) rather than the API format.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub workflow_ui: bool,
    /// The file the user gave (`bisect FILE`), whose variant `workflow` is.
    pub given: Option<String>,
    /// Steps to Reproduce: the ladder in five columns.
    pub steps: Vec<BugFormStep>,
    /// Debug Logs: the run whose traceback it is (`first_failure.traceback`), when it has one.
    pub traceback_run: Option<String>,
    /// Custom Node Testing: the custom node packs whose code the traceback passes through
    /// (their folders under `custom_nodes/`, in traceback order) — a pack can patch ComfyUI's
    /// own functions without any node of the workflow coming from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traceback_packs: Vec<String>,
    /// Other: the GPU (name, type, total memory).
    pub gpu: Option<String>,
    /// Other: the ComfyUI version.
    pub comfyui_version: Option<String>,
}

/// One ladder step in the bug form's five columns.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BugFormStep {
    /// The step (0 = minimal).
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// The outcome (`passed`, `failed`, `not_run`, …).
    pub outcome: String,
    /// The stage of a failure.
    pub stage: Option<Stage>,
    /// Peak VRAM in MiB: what the OOM message proves was needed for a run out of device
    /// memory (`peak_from_oom`), else the sampled peak.
    pub peak_vram_mib: Option<f64>,
    /// `peak_vram_mib` comes from the OOM message, not from sampling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peak_from_oom: bool,
    /// What made a pass degraded, short (`slowed 3.1×`, `weights streamed`, `tiled VAE decode
    /// fallback`): the short table never says "passed" alone for such a run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<String>,
}

/// The search at few steps of one workflow (`--search-steps N`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchStepsReport {
    /// The step cap of the search runs.
    pub cap: u32,
    /// The runs made at the reduced step count, in the order they ran.
    pub reduced_runs: Vec<ReducedRunRow>,
    /// How many runs had the workflow's own steps.
    pub full_runs: usize,
    /// Steps whose full-step run disagreed with their reduced-step run.
    pub disagreements: Vec<Disagreement>,
    /// `confirmed`: the verdict's boundary was confirmed at full steps; `searched_on`: a
    /// full-step run disagreed and the search went on at full steps; `pending`: no verdict yet.
    pub confirmation: String,
    /// The same in words.
    pub summary: String,
}

/// One run made at a reduced step count.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReducedRunRow {
    /// Ladder step.
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// The run's id.
    pub run_id: String,
    /// Its outcome (as in the ladder).
    pub outcome: String,
    /// Stage of a failure.
    pub stage: Option<Stage>,
    /// Steps it sampled and the workflow's own.
    pub steps: ReducedSteps,
}

/// A reduced run's steps: `steps` of `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReducedSteps {
    /// The steps sampled (the cap).
    pub steps: u32,
    /// The workflow's own steps (the highest sampler `steps` the cap lowered).
    pub of: u32,
}

/// A step whose result at full steps differs from its result at few steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// Ladder step.
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// Outcome at few steps.
    pub reduced: String,
    /// Outcome at full steps.
    pub full: String,
}

/// What preflight found before any run.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preflight {
    /// Node classes the server does not know (install the custom nodes).
    pub unknown_nodes: Vec<String>,
    /// Model files the server does not have, in words (`folder/file (Class #id input)`).
    pub missing_models: Vec<String>,
    /// Other problems, in words.
    pub other: Vec<String>,
}

/// The one-line verdict.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Which verdict.
    pub kind: VerdictKind,
    /// The verdict as one sentence of plain text.
    pub summary: String,
    /// The step the verdict is about (first failing step, or the failing minimal step 0).
    pub step: Option<usize>,
    /// Number of increments in the ladder (the full workflow is step `steps`).
    pub steps: usize,
    /// The increment added at `step`.
    pub increment: Option<String>,
    /// The named parts that increment brings back (`hires pass: KSampler #11 at 1024×1024`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
    /// The failure kind (`cuda_oom`, `host_ram`, …) of the failing run.
    pub failure_kind: Option<FailureKind>,
    /// The stage (`load`, `sample_first`, …) of the failing run.
    pub stage: Option<Stage>,
    /// Why the session is incomplete, or the flaky counts, in words.
    pub reason: Option<String>,
    /// The first step whose run went through a memory fallback, when it comes before the
    /// first failure (or when nothing failed).
    pub first_fallback_step: Option<usize>,
    /// Its increment.
    pub first_fallback_increment: Option<String>,
    /// What fell back there (`tiled VAE decode fallback`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_fallbacks: Vec<String>,
    /// The first step whose run passed under memory pressure, when it comes before the first
    /// failure (or when nothing failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_pressure_step: Option<usize>,
    /// Its increment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_pressure_increment: Option<String>,
    /// The evidence there, in words (`slowed 4.1× (…)`, `weights streamed (1640 MB staged)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_pressure: Vec<String>,
    /// When the target passed and the ladder was walked for the first step under memory
    /// pressure (`--walk-on-pass`): why, with the cue's numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walked: Option<String>,
    /// When the failing run crashed (server lost, timeout): how often the failure was seen,
    /// the crash and its confirming re-runs together (`--confirm-crashes`).
    pub reproduced: Option<u32>,
    /// Always `unknown`: a bisection locates a failure, it does not prove its cause.
    pub root_cause: String,
}

/// The bisected workflow.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkflowInfo {
    /// The input file as given on the command line.
    pub path: Option<String>,
    /// `api` or `ui` (the input format).
    pub format: Option<String>,
    /// Canonical sha256 of the full (target) workflow.
    pub sha256: Option<String>,
}

/// How the session was run.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The ComfyUI server URL.
    pub server: Option<String>,
    /// `linear` or `binary`.
    pub strategy: Option<String>,
    /// `--repeat N` (0 when not used).
    pub repeat: u32,
    /// Whether `--controls` was given.
    pub controls: bool,
    /// Whether cold runs were asked for (models and memory freed before each run).
    pub cold: bool,
    /// `--timeout` per run, seconds.
    pub timeout_s: Option<u64>,
    /// `--deadline` (RFC 3339).
    pub deadline: Option<String>,
    /// When the session started (RFC 3339).
    pub started_at: Option<String>,
    /// When the last run ended (RFC 3339).
    pub updated_at: Option<String>,
    /// The runs directory the session lives in.
    pub runs_dir: Option<String>,
    /// `--strict`: a pass under memory pressure or through a fallback counted as a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// Moves of the session to another server URL (`resume --server`, `mitigate --server`), in
    /// words:
    /// `from http://127.0.0.1:8188 to http://127.0.0.1:8189 at 2026-12-06T03:00:00Z`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_moves: Vec<String>,
    /// Workflows preflight had skipped that `resume` checked again, in words:
    /// `sd15 passed preflight when resumed at …; bisected from then on`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight_rechecks: Vec<String>,
}

/// The server's environment, from `/system_stats`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// ComfyUI version.
    pub comfyui_version: Option<String>,
    /// The frontend version the server requires (`required_frontend_version`).
    pub frontend_version: Option<String>,
    /// PyTorch version.
    pub pytorch_version: Option<String>,
    /// Python version (the number only; `python_version_full` has the build string).
    pub python_version: Option<String>,
    /// Python's full `sys.version`.
    pub python_version_full: Option<String>,
    /// Whether ComfyUI runs on the portable build's embedded Python.
    pub embedded_python: Option<bool>,
    /// Operating system as the server reports it (`posix`, `nt`, `linux`, `win32`, `darwin`).
    pub os: Option<String>,
    /// The device ComfyUI runs on.
    pub gpu: Option<Gpu>,
    /// Host RAM in MiB.
    pub ram_total_mib: Option<f64>,
    /// The server's launch arguments.
    pub argv: Vec<String>,
    /// The launch arguments that change memory behaviour, with what they do.
    pub memory_flags: Vec<MemoryFlag>,
    /// `cold` (models unloaded before every run), `warm`, `mixed` or `unknown`.
    pub runs: String,
    /// Short id of the environment fingerprint of the session's last run.
    pub fingerprint: Option<String>,
    /// Custom node packs the server has (from that fingerprint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_packs: Vec<NodePackRow>,
    /// Where the packs' versions came from (`ComfyUI-Manager`), when anywhere.
    pub pack_versions_from: Option<String>,
    /// The packs of `node_packs` the session's workflows use (their run records say which
    /// classes come from a pack); None when no record says. report.md lists only these.
    pub packs_used: Option<Vec<String>>,
    /// How the server manages memory (dynamic VRAM, pinned memory, offload, cache).
    pub memory_mode: Option<crate::comfy::fingerprint::MemoryMode>,
    /// Every device the server lists, the primary (the one runs are measured on) first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// `system.deploy_environment` (late-2026 servers).
    pub deploy_environment: Option<String>,
}

/// One custom node pack of the environment.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodePackRow {
    /// The pack (its folder under `custom_nodes/`).
    pub name: String,
    /// Number of node classes.
    pub classes: usize,
    /// Hash of their definitions (first 16 hex digits of a sha256).
    pub definitions_sha256: String,
    /// Version, or `version unknown`.
    pub version: String,
}

/// The device ComfyUI runs on.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Device name as ComfyUI prints it, without the allocator suffix.
    pub name: String,
    /// Device type (`cuda`, `cpu`, `mps`, `xpu`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Device index.
    pub index: Option<i64>,
    /// PyTorch allocator backend from the device name (`cudaMallocAsync`, `native`).
    pub allocator: Option<String>,
    /// Total device memory in MiB (system RAM on `--cpu`).
    pub vram_total_mib: Option<f64>,
}

/// One memory-relevant launch argument.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFlag {
    /// The flag as given, e.g. `--reserve-vram`.
    pub flag: String,
    /// Its value, when it takes one.
    pub value: Option<String>,
    /// What it changes about memory use, in words.
    pub effect: String,
}

/// A node of the workflow.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRef {
    /// Node id in the submitted prompt (`"140:125"` for a node inside a subgraph).
    pub id: String,
    /// Its class_type.
    pub class_type: String,
    /// Where it sits when inside a subgraph, as the canvas shows it: `subgraph 'Sampler' #140`
    /// (`crate::workflow::label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgraph: Option<String>,
}

/// One ladder step.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LadderRow {
    /// 0 = the minimal variant; the last step is the full workflow.
    pub step: usize,
    /// The increment's label (`minimal` for step 0).
    pub increment: String,
    /// The increment's kind (`resolution`, `frames`, `lora`, `cache`, …).
    pub increment_kind: Option<String>,
    /// What changed against the previous step, e.g. `resolution 256×144 → 1280×720`.
    pub changes: Vec<String>,
    /// The run's id (a UUID, also the prompt_id); absent when the step was not run.
    pub run_id: Option<String>,
    /// `passed`, `failed`, `rejected`, `interrupted`, `timeout`, `server_lost`, `running` or
    /// `not_run`.
    pub outcome: String,
    /// Failure kind for a failing run.
    pub failure_kind: Option<FailureKind>,
    /// Stage for a failing run.
    pub stage: Option<Stage>,
    /// The node that raised.
    pub failing_node: Option<NodeRef>,
    /// Highest sampled VRAM use in MiB (total − free).
    pub peak_vram_mib: Option<f64>,
    /// For a run that ran out of device memory: what its OOM message proves it needed (MiB)
    /// — the failing bar's height, as a sampled peak can miss the spike before the OOM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_needed_mib: Option<f64>,
    /// Where `oom_needed_mib` comes from (`in use by the process + requested`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_needed_from: Option<String>,
    /// How many VRAM samples were taken.
    pub vram_samples: Option<usize>,
    /// Device memory already in use before the run (after `/free` and the settle), MiB.
    pub baseline_vram_mib: Option<f64>,
    /// Peak system RAM in use in MiB (`ram_total − ram_free`, sampled).
    pub peak_ram_mib: Option<f64>,
    /// Peak resident memory of the server process in MiB (a server on this machine).
    pub peak_rss_mib: Option<f64>,
    /// Peak swap of the local server process in MiB.
    pub peak_swap_mib: Option<f64>,
    /// Wall time from submission to the terminal event, in seconds.
    pub duration_s: Option<f64>,
    /// Seconds per sampler step after the first (the slowest sampler pass's median).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_per_step: Option<f64>,
    /// Whether models were unloaded before the run.
    pub cold: Option<bool>,
    /// The run's folder.
    pub run_dir: Option<String>,
    /// What the run delivered (the journal's own words): `memory_fallbacks`, `product` and
    /// `product_warnings`, beside the fields above.
    #[serde(flatten)]
    pub delivered: ProductSummary,
    /// The run crashed (server lost, timeout) and was re-run to confirm it.
    pub crash_check: Option<CrashCheckRow>,
    /// The run was made at a reduced step count during the search (`--search-steps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduced: Option<ReducedSteps>,
    /// The models ComfyUI put on the device during the run, in order, from its console
    /// (`Requested to load X` + `loaded completely/partially …`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelLoadRow>,
    /// Other memory events of the run's console, in words (`ComfyUI ran out of memory and
    /// unloaded all models`, `2 models unloaded to make room`); fallbacks are in
    /// `memory_fallbacks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_events: Vec<String>,
}

/// One model load of a run, as ComfyUI's console printed it. ComfyUI prints these figures as
/// "MB" but computes them as bytes / 1024², so they are MiB.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLoadRow {
    /// The model class (`BaseModel`, `SD1ClipModel`, `AutoencoderKL`, `WAN21`, …), when the
    /// `Requested to load` line was seen.
    pub class: Option<String>,
    /// `true` for `loaded completely`, `false` for `loaded partially`.
    pub full: bool,
    /// MiB of the model placed on the device.
    pub loaded_mib: f64,
    /// MiB left in system memory (partial loads; only newer ComfyUI prints it).
    pub offloaded_mib: Option<f64>,
    /// Weights patched on the fly (partial loads).
    pub lowvram_patches: Option<u64>,
}

/// What the re-runs of a crashed run said (`--confirm-crashes`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrashCheckRow {
    /// `not_reproduced` (a re-run passed: the step counts as passed), `confirmed` (the
    /// re-runs failed too) or `pending` (not re-run yet).
    pub result: String,
    /// How often the failure was seen, the crash included.
    pub times: u32,
    /// The re-runs, in order.
    pub rerun_ids: Vec<String>,
}

/// How peak VRAM was measured.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VramInfo {
    /// The `/system_stats` sampling interval in milliseconds.
    pub sample_interval_ms: Option<u64>,
    /// The device's total memory in MiB (the chart's reference line).
    pub total_mib: Option<f64>,
    /// What "Peak RAM", "Server RSS" and "Swap" are, in words (None when no run sampled RAM).
    pub ram_note: Option<String>,
    /// What the numbers mean and miss, in words.
    pub note: String,
}

/// Progress a node reported before the failure.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressSeen {
    /// The node.
    pub node: NodeRef,
    /// Last progress value.
    pub value: u64,
    /// Progress maximum.
    pub max: u64,
}

/// Evidence for one failing run.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The step.
    pub step: usize,
    /// The increment added at that step.
    pub increment: String,
    /// The run's id.
    pub run_id: Option<String>,
    /// The run's outcome (`failed`, `server_lost`, `timeout`, `rejected`, …).
    pub outcome: String,
    /// The node that raised.
    pub node: Option<NodeRef>,
    /// Module-qualified exception class.
    pub exception_type: Option<String>,
    /// The exception message as printed.
    pub exception_message: Option<String>,
    /// Failure kind (diagnosis).
    pub failure_kind: Option<FailureKind>,
    /// Stage (diagnosis).
    pub stage: Option<Stage>,
    /// The evidence the stage rests on, in words.
    pub stage_evidence: Option<String>,
    /// How sure the stage is: `certain` (a frame, the exception or the node decided it),
    /// `likely` (only progress or console order), `unknown`.
    pub stage_confidence: Option<StageConfidence>,
    /// Numbers parsed from the message.
    pub numbers: ContractNumbers,
    /// Whether the numbers are finite, non-negative and ordered; inconsistent numbers are kept
    /// as printed and not used to reason. Absent when nothing was printed.
    pub numbers_consistent: Option<bool>,
    /// What is wrong with the numbers, when they are inconsistent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numbers_notes: Vec<String>,
    /// The last progress any node reported before the failure.
    pub last_progress: Option<ProgressSeen>,
    /// The traceback frames as ComfyUI sent them.
    pub traceback: Vec<String>,
    /// The failing node's inputs as ComfyUI sent them (trimmed; secrets redacted).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub current_inputs: Map<String, Value>,
    /// Inputs of `current_inputs` given back the workflow's value because the run was made at
    /// reduced steps (`steps 20 (the search ran it at 4)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs_restored: Vec<String>,
    /// What happened when there is no exception (server lost, timeout, rejection), in words.
    pub detail: Option<String>,
    /// The kernel's OOM kill of the server, as its log printed it (a lost local server).
    pub oom_kill: Option<crate::host::OomKill>,
    /// What the kernel log of the run's window showed, or why it could not be read.
    pub kernel_log: Option<String>,
    /// The kernel log's OOM-killer lines (also in the run folder's `kernel-oom.log`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_lines: Vec<String>,
    /// Host RAM during the run: peaks, and the pressure when it came close to the total.
    pub host_ram: Option<String>,
    /// The run's server console, whole: its `server.log` lines (`<server time> <line>`), from
    /// our prompt's `got prompt` to its end. report.md shows an excerpt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub console: Vec<String>,
    /// The file holding the console (`<run folder>/server.log`).
    pub console_file: Option<String>,
    /// The run's folder (its `run.json` holds the traceback and inputs whole).
    pub run_dir: Option<String>,
}

/// What to check next for the failure's stage.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NextSteps {
    /// The stage these apply to.
    pub stage: Stage,
    /// Checks to run next.
    pub next_check: Vec<String>,
    /// Possible explanations; none is proven by the evidence.
    pub candidates: Vec<Candidate>,
    /// Always `unknown`.
    pub root_cause: String,
}

/// One possible explanation.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The explanation.
    pub text: String,
    /// Always `unproven`.
    pub status: String,
}

/// Repeated runs of one step (`--repeat`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatRow {
    /// The step.
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// `first_failing` or `last_passing` (the role the step had in the ladder).
    pub role: String,
    /// Runs that passed (the ladder run included).
    pub passed: usize,
    /// Runs that failed.
    pub failed: usize,
    /// Runs that ended otherwise (timeout, server lost, …).
    pub other: usize,
    /// The runs' ids, in order.
    pub run_ids: Vec<String>,
}

/// One control run: the minimal variant plus a single later increment.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRow {
    /// The increment's step in the ladder.
    pub step: usize,
    /// The increment added alone to the minimal variant.
    pub increment: String,
    /// The run's id.
    pub run_id: Option<String>,
    /// The run's outcome.
    pub outcome: String,
    /// Stage, when it failed.
    pub stage: Option<Stage>,
    /// The node that raised, when it failed.
    pub failing_node: Option<NodeRef>,
    /// Peak sampled VRAM in MiB.
    pub peak_vram_mib: Option<f64>,
}

/// One model file a loader references.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    /// File name as the workflow gives it (never redacted: it identifies the component).
    pub file: String,
    /// ComfyUI model folder.
    pub folder: String,
    /// The loader node.
    pub node: NodeRef,
    /// The loader input naming the file.
    pub input: String,
    /// `hashed` or `unhashed`.
    pub status: String,
    /// Size in bytes.
    pub size_bytes: Option<u64>,
    /// Full-file sha256.
    pub sha256: Option<String>,
    /// First 10 hex digits of the sha256.
    pub autov2: Option<String>,
    /// Why it was not hashed.
    pub reason: Option<String>,
    /// Where the file really is when the name reaches it through a link out of the model
    /// folders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

/// Files to attach to an issue.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attachments {
    /// The session folder.
    pub session_dir: String,
    /// The last passing run below the first failure (the minimal passing workflow).
    pub minimal_passing: Option<AttachedRun>,
    /// The first failing run.
    pub first_failing: Option<AttachedRun>,
    /// Every run of the session with the command that reproduces it.
    pub runs: Vec<AttachedRun>,
}

/// One run's files and how to reproduce it.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachedRun {
    /// The step.
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// `ladder`, `repeat` or `control`.
    pub purpose: String,
    /// The run's id.
    pub run_id: String,
    /// Its outcome.
    pub outcome: String,
    /// The run's folder.
    pub run_dir: String,
    /// The API-format workflow exactly as submitted.
    pub workflow: String,
    /// The same variant in UI format, when the input was a UI workflow.
    pub ui_workflow: Option<String>,
    /// A copy of `workflow` with secrets and home paths replaced, written next to the report
    /// when redaction changed anything (attach this one instead).
    pub shareable_workflow: Option<String>,
    /// The comfy-bisect command that submits this workflow again.
    pub reproduce: String,
}

/// Where PyTorch's CUDA out-of-memory message turns from its figures to advice (c10's
/// `CUDACachingAllocator`: "… reserved by PyTorch but unallocated. If reserved but unallocated
/// memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True …").
const PYTORCH_OOM_ADVICE: &str = " If reserved but unallocated memory is large";

impl Evidence {
    /// The error in one line, as Python prints a traceback's last line: the exception type, then
    /// the first line of its message with its figures (`torch.OutOfMemoryError: CUDA out of
    /// memory. Tried to allocate 2.00 GiB …`), without PyTorch's advice after the figures
    /// (the traceback has the whole message); the type alone when there is no message.
    pub(crate) fn error_line(&self) -> Option<String> {
        let kind = self.exception_type.as_deref()?;
        let message = self
            .exception_message
            .as_deref()
            .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
            .map(|m| match m.find(PYTORCH_OOM_ADVICE) {
                Some(at) => format!("{} …", m[..at].trim_end()),
                None => m.to_string(),
            });
        Some(match message {
            Some(m) => format!("{kind}: {m}"),
            None => kind.to_string(),
        })
    }
}

/// The failure kind in words (`cuda_oom` → "CUDA out of memory").
pub(crate) fn kind_phrase(kind: FailureKind) -> String {
    match kind {
        FailureKind::CudaOom => "CUDA out of memory".into(),
        FailureKind::HipOom => "HIP (ROCm) out of memory".into(),
        FailureKind::MpsOom => "MPS (Apple) out of memory".into(),
        FailureKind::XpuOom => "XPU (Intel) out of memory".into(),
        FailureKind::DirectmlOom => "DirectML out of memory".into(),
        FailureKind::HostRam => "host RAM exhausted".into(),
        FailureKind::Aimdo => "a dynamic-VRAM offloader (comfy-aimdo) error".into(),
        FailureKind::ProcessKilled => "the server process died".into(),
        FailureKind::Timeout => "timed out".into(),
        FailureKind::Rejected => "rejected by the server".into(),
        FailureKind::Other => "an error that is not a memory failure".into(),
        FailureKind::IncompleteOutput => {
            "an output node produced nothing (incomplete product)".into()
        }
        FailureKind::MemoryFallback => {
            "passed only through a memory fallback, counted as a failure by --strict".into()
        }
        FailureKind::MemoryPressure => {
            "passed under memory pressure (weights streamed, steps slowed), counted as a failure by --strict".into()
        }
        FailureKind::Unknown => "no failure found in the text".into(),
    }
}

impl Verdict {
    /// A verdict not reached yet over a ladder of `steps` steps: nothing found, root cause
    /// unknown (the report's builder fills in what the journal says).
    pub(crate) fn in_progress(steps: usize) -> Verdict {
        Verdict {
            kind: VerdictKind::InProgress,
            summary: String::new(),
            step: None,
            steps,
            increment: None,
            parts: Vec::new(),
            failure_kind: None,
            stage: None,
            reason: None,
            first_fallback_step: None,
            first_fallback_increment: None,
            first_fallbacks: Vec::new(),
            first_pressure_step: None,
            first_pressure_increment: None,
            first_pressure: Vec::new(),
            walked: None,
            reproduced: None,
            root_cause: "unknown".into(),
        }
    }

    /// The verdict as one sentence; `emph` formats the increment name (bold in Markdown,
    /// unchanged in JSON).
    pub(crate) fn sentence(&self, emph: &dyn Fn(&str) -> String) -> String {
        let steps = self.steps;
        let what = || {
            let kind = self
                .failure_kind
                .map(kind_phrase)
                .unwrap_or_else(|| "failed".into());
            let stage = self.stage.unwrap_or(Stage::Unknown).phrase();
            format!("{kind} {stage}")
        };
        let reason = self.reason.clone().unwrap_or_default();
        let fallback = match (&self.first_fallback_step, &self.first_fallback_increment) {
            (Some(k), Some(inc)) => Some(format!(
                "first memory fallback at {} (step {k}: {})",
                emph(inc),
                self.first_fallbacks.join(", ")
            )),
            _ => None,
        };
        let pressure = match (&self.first_pressure_step, &self.first_pressure_increment) {
            (Some(k), Some(inc)) => Some(format!(
                "first memory pressure at {} (step {k}: {})",
                emph(inc),
                self.first_pressure.join(", ")
            )),
            _ => None,
        };
        let fallback = match (fallback, pressure) {
            (Some(f), Some(p)) => Some(format!("{f}; {p}")),
            (f, p) => f.or(p),
        };
        let named = || {
            if self.parts.is_empty() {
                String::new()
            } else {
                format!(" — {}", self.parts.join("; "))
            }
        };
        let reproduced = || match self.reproduced {
            Some(n) => format!(" (the crash was reproduced {n} times)"),
            None => String::new(),
        };
        match self.kind {
            VerdictKind::FirstFailure => match fallback {
                Some(f) => format!(
                    "{}; first failure at {}{} (step {} of {steps}): {}{}. Root cause: unknown.",
                    crate::text::capitalize(&f),
                    emph(self.increment.as_deref().unwrap_or("?")),
                    named(),
                    self.step.unwrap_or_default(),
                    what(),
                    reproduced()
                ),
                None => format!(
                    "First failure when adding {}{} (step {} of {steps}): {}{}. Root cause: unknown.",
                    emph(self.increment.as_deref().unwrap_or("?")),
                    named(),
                    self.step.unwrap_or_default(),
                    what(),
                    reproduced()
                ),
            },
            // The first pass under memory pressure (or through a fallback) is the finding: the
            // sentence leads with it, then says that nothing failed.
            VerdictKind::CouldNotReproduce if fallback.is_some() => {
                let walked = match &self.walked {
                    Some(why) => format!(" The ladder was walked because {why}."),
                    None => String::new(),
                };
                format!(
                    "{}. No step failed: the full workflow (step {steps} of {steps}) passed on this server, so no increment fails here (could not reproduce).{walked}",
                    crate::text::capitalize(&fallback.unwrap_or_default())
                )
            }
            VerdictKind::CouldNotReproduce if self.walked.is_some() => format!(
                "Could not reproduce: the full workflow (step {steps} of {steps}) passed on this server, so no increment fails here; no step before it showed memory pressure. The ladder was walked because {}.",
                self.walked.as_deref().unwrap_or_default()
            ),
            VerdictKind::MinimalFails => format!(
                "The minimal variant already fails (step 0 of {steps}): {}{}. Nothing to bisect. Root cause: unknown.",
                what(),
                reproduced()
            ),
            VerdictKind::CouldNotReproduce => format!(
                "Could not reproduce: the full workflow (step {steps} of {steps}) passed on this server, so no increment fails here."
            ),
            VerdictKind::Flaky => format!(
                "Flaky: {reason}. The same workflow both passed and failed, so no increment is blamed. Root cause: unknown."
            ),
            VerdictKind::Inconclusive => format!(
                "Inconclusive: {reason}. A rejected or interrupted run says nothing about the variant."
            ),
            VerdictKind::PreflightFailed => {
                format!("Preflight failed: {reason}. Nothing was run.")
            }
            VerdictKind::Check => {
                let head = "Check (one run of the workflow as given, no ladder)";
                match reason.as_str() {
                    "good" => format!("{head}: good — it passed with a complete product."),
                    "bad" => format!("{head}: bad — {}{}. Root cause: unknown.", what(), reproduced()),
                    _ => format!("{head}: {reason}; it says nothing about the workflow."),
                }
            }
            VerdictKind::Incomplete => format!("Incomplete: {reason}."),
            VerdictKind::InProgress => format!("In progress: {reason}."),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(reason: &str, kind: Option<&str>, stage: Option<&str>) -> String {
        let v = Verdict {
            kind: VerdictKind::Check,
            step: Some(0),
            increment: Some("target".into()),
            failure_kind: kind.map(|k| serde_json::from_value(Value::from(k)).unwrap()),
            stage: stage.map(Stage::from),
            reason: Some(reason.into()),
            ..Verdict::in_progress(0)
        };
        v.sentence(&|s: &str| s.to_string())
    }

    #[test]
    fn a_walked_ladder_says_why_and_what_it_found() {
        let mut v = Verdict {
            kind: VerdictKind::CouldNotReproduce,
            step: Some(5),
            increment: Some("cache".into()),
            walked: Some("--walk-on-pass always".into()),
            ..Verdict::in_progress(5)
        };
        let plain = |v: &Verdict| v.sentence(&|s: &str| s.to_string());
        assert_eq!(
            plain(&v),
            "Could not reproduce: the full workflow (step 5 of 5) passed on this server, so no increment fails here; no step before it showed memory pressure. The ladder was walked because --walk-on-pass always."
        );
        v.first_pressure_step = Some(2);
        v.first_pressure_increment = Some("frames".into());
        v.first_pressure = vec!["slowed 3.0× (…)".into()];
        assert_eq!(
            plain(&v),
            "First memory pressure at frames (step 2: slowed 3.0× (…)). No step failed: the full workflow (step 5 of 5) passed on this server, so no increment fails here (could not reproduce). The ladder was walked because --walk-on-pass always."
        );
        // Not walked: the pressure still leads.
        v.walked = None;
        assert_eq!(
            plain(&v),
            "First memory pressure at frames (step 2: slowed 3.0× (…)). No step failed: the full workflow (step 5 of 5) passed on this server, so no increment fails here (could not reproduce)."
        );
    }

    #[test]
    fn a_check_says_good_bad_or_cannot_test_and_no_ladder() {
        let head = "Check (one run of the workflow as given, no ladder)";
        assert_eq!(
            check("good", None, None),
            format!("{head}: good — it passed with a complete product.")
        );
        assert_eq!(
            check("bad", Some("cuda_oom"), Some("decode")),
            format!("{head}: bad — CUDA out of memory during the VAE decode (decode stage). Root cause: unknown.")
        );
        assert_eq!(
            check("cannot test — the run was interrupted", None, None),
            format!("{head}: cannot test — the run was interrupted; it says nothing about the workflow.")
        );
        for s in [check("good", None, None), check("bad", None, None)] {
            assert!(
                !s.contains("In progress") && !s.contains("steps 0–0"),
                "{s}"
            );
        }
    }
}
