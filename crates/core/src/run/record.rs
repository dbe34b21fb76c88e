//! The run record (`run.json`): what was submitted, what happened, and the raw evidence.

pub use super::console::ConsoleInfo;
pub use super::product::{IncompleteOutput, Product};
use crate::comfy::events::{FrameCounts, NodeTiming};
use crate::comfy::protocol::{ExecutionError, HistoryEntry, PromptErrorInfo, SystemStats};
use crate::comfy::{HttpExchange, MemoryEvent};
use crate::vocab::OutcomeKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Longest kept text of one `current_inputs` value (tensors print as huge multi-line strings).
pub(crate) const CURRENT_INPUT_LIMIT: usize = 300;

/// The outcome with the data that explains it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ran to success.
    Passed,
    /// The complete `execution_error` (current_inputs trimmed).
    Failed(ExecutionError),
    /// The server's refusal.
    Rejected(Rejection),
    /// Who interrupted and where.
    Interrupted(Interruption),
    /// Which limit passed.
    Timeout(TimeoutInfo),
    /// Why the server counts as lost.
    ServerLost(ServerLostInfo),
    /// ComfyUI said success, but an output node produced nothing (outcome `failed`, kind
    /// `incomplete_output`).
    IncompleteOutput(IncompleteOutput),
    /// No progress and no node change for the stall limit: where it hung.
    Hang(HangInfo),
}

impl Outcome {
    /// The outcome name.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Passed => OutcomeKind::Passed,
            Outcome::Failed(_) => OutcomeKind::Failed,
            Outcome::Rejected(_) => OutcomeKind::Rejected,
            Outcome::Interrupted(_) => OutcomeKind::Interrupted,
            Outcome::Timeout(_) => OutcomeKind::Timeout,
            Outcome::ServerLost(_) => OutcomeKind::ServerLost,
            Outcome::IncompleteOutput(_) => OutcomeKind::Failed,
            Outcome::Hang(_) => OutcomeKind::Hang,
        }
    }

    /// Splits into the record's `outcome` and `error` fields.
    pub(crate) fn into_parts(self) -> (OutcomeKind, Option<RunError>) {
        let kind = self.kind();
        let error = match self {
            Outcome::Passed => None,
            Outcome::Failed(e) => Some(RunError::ExecutionError(e)),
            Outcome::Rejected(r) => Some(RunError::Rejection(r)),
            Outcome::Interrupted(i) => Some(RunError::Interrupted(i)),
            Outcome::Timeout(t) => Some(RunError::Timeout(t)),
            Outcome::ServerLost(s) => Some(RunError::ServerLost(s)),
            Outcome::IncompleteOutput(i) => Some(RunError::IncompleteOutput(i)),
            Outcome::Hang(h) => Some(RunError::Hang(h)),
        };
        (kind, error)
    }
}

/// The `error` field of a run record: one key naming what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunError {
    /// `{"execution_error": {node_id, node_type, exception_type, exception_message, traceback, current_inputs, executed, …}}`.
    ExecutionError(ExecutionError),
    /// `{"rejection": {http_status, error, node_errors, …}}`.
    Rejection(Rejection),
    /// `{"interrupted": {by, node_id, …}}`.
    Interrupted(Interruption),
    /// `{"timeout": {reason, limit_ms, …}}`.
    Timeout(TimeoutInfo),
    /// `{"server_lost": {reason, submitted, …}}`.
    ServerLost(ServerLostInfo),
    /// `{"incomplete_output": {nodes: [{node_id, class_type}], message}}`.
    IncompleteOutput(IncompleteOutput),
    /// `{"hang": {limit_ms, last_node, node_type, step, max_steps, interrupt_sent, …}}`.
    Hang(HangInfo),
}

/// The server refused (part of) the prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    /// 400 (validation), 200 (partial: some outputs dropped) or a 5xx.
    pub http_status: u16,
    /// The top-level error (for a partial 200: a summary made by us).
    pub error: PromptErrorInfo,
    /// Per-node errors as the server sent them.
    #[serde(default)]
    pub node_errors: Map<String, Value>,
    /// True for a 200 with node_errors: the valid outputs were queued and ran.
    #[serde(default)]
    pub partial: bool,
    /// How the queued remainder of a partial prompt ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_run: Option<OutcomeKind>,
}

/// Who interrupted the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptedBy {
    /// We did, because the user pressed Ctrl-C.
    User,
    /// Someone else (another client, the web UI).
    Other,
}

/// Details of an interrupted run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    /// Who interrupted.
    pub by: InterruptedBy,
    /// Node that was running (from `execution_interrupted`), if the prompt had started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// Its class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    /// Nodes that finished before.
    #[serde(default)]
    pub executed: Vec<String>,
    /// True when the prompt was still waiting and was removed from the queue instead.
    #[serde(default)]
    pub removed_from_queue: bool,
}

/// Which limit a timed-out run hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutReason {
    /// The run took longer than `--timeout` (counted from submission; time `/queue` showed
    /// it pending behind other prompts excluded).
    Run,
    /// No event for our prompt for `--stall-timeout` while it was running.
    Stall,
    /// It waited in the queue behind other prompts for too long.
    Queue,
}

/// Details of a timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeoutInfo {
    /// Which limit.
    pub reason: TimeoutReason,
    /// The limit.
    pub limit_ms: u64,
    /// The node running when it hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_node: Option<String>,
    /// A targeted `POST /interrupt {prompt_id}` (or a queue delete) was sent.
    pub interrupt_sent: bool,
    /// The server confirmed with `execution_interrupted` (or the prompt left the queue).
    pub interrupt_confirmed: bool,
}

/// Where a run hung: no `progress` frame and no node change for `limit_ms` (`--stall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HangInfo {
    /// The stall limit.
    pub limit_ms: u64,
    /// The node running when progress stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_node: Option<String>,
    /// Its class (from the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    /// Its last reported step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The steps it was to take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// A targeted interrupt (or job cancel) was sent.
    pub interrupt_sent: bool,
    /// The server confirmed it with `execution_interrupted`; false when it ignored it.
    pub interrupt_confirmed: bool,
}

/// Why the server counts as lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerLostInfo {
    /// What was observed.
    pub reason: String,
    /// Whether the prompt had been accepted before the server went away.
    pub submitted: bool,
    /// The node running when contact was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_node: Option<String>,
}

/// Queue timing of the run (ms since the run started).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// `POST /prompt` answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_ms: Option<u64>,
    /// Our prompt started executing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// The server finished it (`executing {node: null}` or history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    /// Most prompts seen ahead of ours (other clients' work we waited for).
    #[serde(default)]
    pub max_ahead: usize,
    /// Queue number the server gave.
    #[serde(default)]
    pub number: Value,
}

/// One `/system_stats` sample of the primary device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VramSample {
    /// ms since the run started.
    pub t_ms: u64,
    /// `vram_total − vram_free`.
    pub used_bytes: u64,
    /// `torch_vram_total` (reserved by torch's allocator).
    pub reserved_bytes: u64,
}

/// Device memory over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VramReport {
    /// Primary device name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Primary device type (`cuda`, `cpu`, `mps` …). On `cpu` the "VRAM" is system RAM and
    /// there is no torch-reserved figure (`torch_vram_total` is the total RAM there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_kind: Option<String>,
    /// `vram_total` of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// Highest `used_bytes` sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_used_bytes: Option<u64>,
    /// Highest `reserved_bytes` sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_reserved_bytes: Option<u64>,
    /// Sampling interval.
    pub interval_ms: u64,
    /// Samples that failed (server busy or gone).
    #[serde(default)]
    pub failed_samples: u32,
    /// The series.
    #[serde(default)]
    pub samples: Vec<VramSample>,
    /// What the numbers can and cannot tell.
    #[serde(default)]
    pub note: String,
}

impl VramReport {
    /// A report over `samples` taken every `interval_ms` from `device`.
    pub fn from_samples(
        samples: Vec<VramSample>,
        interval_ms: u64,
        device: Option<&crate::comfy::Device>,
        failed_samples: u32,
    ) -> VramReport {
        let cpu = device.is_some_and(|d| d.kind == "cpu");
        VramReport {
            device: device.map(|d| d.name.clone()),
            device_kind: device.map(|d| d.kind.clone()).filter(|k| !k.is_empty()),
            total_bytes: device.map(|d| d.vram_total),
            peak_used_bytes: samples.iter().map(|s| s.used_bytes).max(),
            peak_reserved_bytes: if cpu {
                None
            } else {
                samples.iter().map(|s| s.reserved_bytes).max()
            },
            interval_ms,
            failed_samples,
            note: format!(
                "sampled GET /system_stats every {interval_ms} ms: allocations that live shorter \
                 than that (a spike right before an OOM) can be missed, so the true peak may be higher"
            ),
            samples,
        }
    }
}

pub(crate) use super::frames::WsTextRecord;

/// One HTTP exchange of the run (identical consecutive answers are folded into `repeats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRecord {
    /// ms since the run started.
    pub t_ms: u64,
    /// How many more identical exchanges followed (polling).
    #[serde(default)]
    pub repeats: u32,
    /// The exchange.
    pub exchange: HttpExchange,
}

/// Everything raw that the run saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawLog {
    /// Session ids used, one per socket.
    #[serde(default)]
    pub client_ids: Vec<String>,
    /// Frame counters (binary frames are counted, not stored).
    #[serde(default)]
    pub frames: FrameCounts,
    /// Text frames in arrival order.
    #[serde(default)]
    pub ws_text: Vec<WsTextRecord>,
    /// HTTP exchanges (no headers, so no credentials).
    #[serde(default)]
    pub http: Vec<HttpRecord>,
    /// Whether the server answered `GET /api/jobs/{id}` (the status came from the jobs API)
    /// or has no jobs API (`/queue` was polled); None when no status lookup was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_api: Option<bool>,
    /// Whether `POST /api/jobs/{id}/cancel` exists (it was used to stop our prompt) or not
    /// (`/interrupt` was); None when nothing was stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_cancel_api: Option<bool>,
    /// The frames not kept in `ws_text` and `events.ndjson` (the caps of
    /// [`super::frames`]); None when every frame was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_frames: Option<super::frames::DroppedFrames>,
    /// Decides which frames are kept while the run goes on (not written).
    #[serde(skip)]
    pub(crate) keeper: super::frames::FrameKeeper,
}

impl RawLog {
    /// Keeps a received text frame as the caps allow ([`super::frames`]); the frame to stream
    /// to `events.ndjson` now, if any (a frame among the last ones is streamed by
    /// [`RawLog::finish_frames`]).
    pub(crate) fn keep_text(
        &mut self,
        record: WsTextRecord,
        prompt_id: &str,
        bytes: usize,
    ) -> Option<&WsTextRecord> {
        let class = super::frames::FrameClass::of(record.json.as_ref(), prompt_id);
        match self.keeper.admit_text(class, &record, bytes as u64) {
            super::frames::Admit::Now => {
                self.ws_text.push(record);
                self.ws_text.last()
            }
            super::frames::Admit::Later | super::frames::Admit::Dropped => None,
        }
    }

    /// Whether the `events.ndjson` line of a frame `run.json` does not store (binary, console)
    /// is kept.
    pub(crate) fn keep_line(&mut self, t_ms: u64, bytes: usize) -> bool {
        self.keeper.admit_line(t_ms, bytes as u64) == super::frames::Admit::Now
    }

    /// Ends the run's frames: adds the held last frames to `ws_text`, records what was dropped
    /// and returns the added frames (to stream) and the note saying what was dropped.
    pub(crate) fn finish_frames(&mut self) -> (Vec<WsTextRecord>, Option<String>) {
        // The keeper's work ends here; a finished record equals its reloaded copy.
        let (held, dropped) = std::mem::take(&mut self.keeper).finish();
        self.ws_text.extend(held.iter().cloned());
        self.ws_text.sort_by_key(|r| r.t_ms);
        let note = dropped.as_ref().map(super::frames::dropped_note);
        self.dropped_frames = dropped;
        (held, note)
    }
}

/// Everything about one submission (`run.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Our run id (a UUID v4).
    pub run_id: String,
    /// The prompt id sent to the server (equal to `run_id`).
    pub prompt_id: String,
    /// The workflow hash of the submitted prompt (`comfy_bisect::workflow::Workflow::sha256`).
    pub workflow_sha256: String,
    /// Server URL, without credentials.
    pub server: String,
    /// RFC 3339 start time.
    pub started_at: String,
    /// RFC 3339 end time.
    pub finished_at: String,
    /// Wall time of the whole run.
    pub duration_ms: u64,
    /// Models and caches were freed before the run.
    pub cold: bool,
    /// `passed`, `failed`, `rejected`, `interrupted`, `timeout` or `server_lost`.
    pub outcome: OutcomeKind,
    /// The execution_error, rejection, … that explains a non-passing outcome.
    #[serde(default)]
    pub error: Option<RunError>,
    /// The diagnosis of a run that did not pass (the `diagnose --json` object). A record whose
    /// diagnosis this version cannot read (written by an older one) loads without it.
    #[serde(default, deserialize_with = "crate::diagnose::lenient_diagnosis")]
    pub diagnosis: Option<crate::diagnose::Diagnosis>,
    /// Queue timing.
    #[serde(default)]
    pub queue: QueueInfo,
    /// Nodes served from cache.
    #[serde(default)]
    pub cached_nodes: Vec<String>,
    /// Per-node timeline.
    #[serde(default)]
    pub timeline: Vec<NodeTiming>,
    /// Device memory.
    #[serde(default)]
    pub vram: VramReport,
    /// System RAM and, for a server on this machine, its process's RSS and swap.
    #[serde(default)]
    pub host: crate::host::HostReport,
    /// The kernel log of the run's window, read when a local server was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<crate::host::KernelEvidence>,
    /// `/system_stats` before the run.
    #[serde(default)]
    pub system_stats_before: Option<SystemStats>,
    /// `/system_stats` after the run.
    #[serde(default)]
    pub system_stats_after: Option<SystemStats>,
    /// Device memory already in use (total − free) after `POST /free` and the settle, just
    /// before submitting (cold runs only): memory of other processes, or memory ComfyUI did not
    /// give back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_baseline_bytes: Option<u64>,
    /// The server's history entry (the truth about the outcome).
    #[serde(default)]
    pub history: Option<HistoryEntry>,
    /// The server ran a different prompt than the one sent (its history prompt differs from
    /// the submitted variant): the hash of what ran and the differences. None when they match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_rewrite: Option<super::rewrite::PromptRewrite>,
    /// Things the reader should know (cached nodes on a cold run, reconnects …).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The server console during the run: whether it was read, how sure the attribution is.
    /// `None` in records made before the console was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<ConsoleInfo>,
    /// Memory events parsed from the run's console lines (model loads, unloads, tiled VAE
    /// fallbacks, ComfyUI's OOM unload, progress bars' last state).
    #[serde(default)]
    pub memory_events: Vec<MemoryEvent>,
    /// PyTorch's allocator table ComfyUI logged as `Memory summary:` before `Got an OOM,
    /// unloading all loaded models.` (the last one of the run's console).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_summary: Option<crate::comfy::memory_summary::AllocatorSummary>,
    /// What the output nodes produced: every file with its size, mismatches with what the
    /// variant asked for. `None` for a run that did not succeed, or a record made before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<Product>,
    /// The silent memory fallbacks the run survived through ("tiled VAE decode fallback"): a
    /// passed run with any is a pass with a warning.
    #[serde(default)]
    pub memory_fallbacks: Vec<String>,
    /// Time per sampler step, from the `progress` frames (the first step apart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_timing: Vec<super::timing::SamplerTiming>,
    /// The server's own measurement of the run (ComfyUI's benchmark capture, when the server
    /// has it): per-node and per-step times and its VRAM/RAM peaks, with where they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_benchmark: Option<super::benchmark::ServerBenchmark>,
    /// Raw evidence.
    #[serde(default)]
    pub raw: RawLog,
    /// The run's console lines, `<server time> <line>` (written as `server.log` next to
    /// `run.json`, not inside it).
    #[serde(skip)]
    pub server_log: String,
}

impl RunRecord {
    /// A record of `run_id` with its identity and outcome and nothing observed yet (no times,
    /// timeline, samples, console or product): what a record rebuilt from the journal, or a
    /// test's fixture, starts from; the caller sets what it knows with `..RunRecord::new(…)`.
    pub fn new(
        run_id: &str,
        workflow_sha256: String,
        server: &str,
        cold: bool,
        outcome: OutcomeKind,
        error: Option<RunError>,
    ) -> RunRecord {
        RunRecord {
            run_id: run_id.to_string(),
            prompt_id: run_id.to_string(),
            workflow_sha256,
            server: server.to_string(),
            started_at: String::new(),
            finished_at: String::new(),
            duration_ms: 0,
            cold,
            outcome,
            error,
            diagnosis: None,
            queue: QueueInfo::default(),
            cached_nodes: Vec::new(),
            timeline: Vec::new(),
            vram: VramReport::default(),
            host: Default::default(),
            kernel: None,
            system_stats_before: None,
            system_stats_after: None,
            vram_baseline_bytes: None,
            history: None,
            prompt_rewrite: None,
            warnings: Vec::new(),
            console: None,
            memory_events: Vec::new(),
            memory_summary: None,
            server_benchmark: None,
            memory_fallbacks: Vec::new(),
            product: None,
            step_timing: Vec::new(),
            raw: RawLog::default(),
            server_log: String::new(),
        }
    }

    /// The outcome with its data.
    pub fn outcome(&self) -> Outcome {
        match (&self.outcome, &self.error) {
            (OutcomeKind::Failed, Some(RunError::ExecutionError(e))) => Outcome::Failed(e.clone()),
            (OutcomeKind::Rejected, Some(RunError::Rejection(r))) => Outcome::Rejected(r.clone()),
            (OutcomeKind::Interrupted, Some(RunError::Interrupted(i))) => {
                Outcome::Interrupted(i.clone())
            }
            (OutcomeKind::Timeout, Some(RunError::Timeout(t))) => Outcome::Timeout(t.clone()),
            (OutcomeKind::ServerLost, Some(RunError::ServerLost(s))) => {
                Outcome::ServerLost(s.clone())
            }
            (OutcomeKind::Failed, Some(RunError::IncompleteOutput(i))) => {
                Outcome::IncompleteOutput(i.clone())
            }
            (OutcomeKind::Hang, Some(RunError::Hang(h))) => Outcome::Hang(h.clone()),
            _ => Outcome::Passed,
        }
    }

    /// The execution error of a failed run.
    pub fn execution_error(&self) -> Option<&ExecutionError> {
        match &self.error {
            Some(RunError::ExecutionError(e)) => Some(e),
            _ => None,
        }
    }

    /// Fills `diagnosis` for a run that did not pass (see [`RunRecord::diagnose`]).
    pub fn attach_diagnosis(&mut self) {
        self.diagnosis = self.diagnose(None);
    }

    /// Adds the host's evidence to a diagnosis of this run: the kernel's OOM kill of a lost
    /// server with its figures (kind `process_killed`, by the OOM killer), or, without one, that
    /// the server process died with the cause unknown (and whether the kernel log could be read);
    /// and host-RAM pressure when the samples show it. The root cause stays unknown.
    pub(crate) fn annotate_diagnosis(&self, d: &mut crate::diagnose::Diagnosis) {
        use crate::vocab::FailureKind;
        if self.outcome == OutcomeKind::ServerLost {
            if let (Some(p), Some(ms)) = (&self.host.process, self.host.process_gone_ms) {
                d.kind_evidence.push_str(&format!(
                    " The server process (pid {}, {}) was gone {:.1} s into the run.",
                    p.pid,
                    p.name,
                    ms as f64 / 1000.0
                ));
            }
        }
        if let Some(k) = &self.kernel {
            match &k.oom_kill {
                Some(kill) => {
                    d.kind = FailureKind::ProcessKilled;
                    let line = k
                        .lines
                        .iter()
                        .find(|l| l.contains("Killed process"))
                        .map(|l| format!(" Kernel log: \"{}\"", l.trim()))
                        .unwrap_or_default();
                    d.kind_evidence = format!(
                        "The kernel's OOM killer killed the server process: {}.{line}",
                        kill.summary()
                    );
                    d.next_check
                        .retain(|c| !c.starts_with("Check the kernel log (`dmesg"));
                    let check = if kill.constraint.as_deref() == Some("CONSTRAINT_MEMCG")
                        || kill.cgroup_limit
                    {
                        format!(
                            "The kill was a cgroup memory limit ({}), not the whole machine: check the limit of the container or service (MemoryMax, docker --memory) against the anon-rss the server reached.",
                            kill.cgroup.as_deref().unwrap_or("the server's cgroup")
                        )
                    } else {
                        "The machine's RAM and swap ran out: compare the server's anon-rss with system RAM, see what else held RAM, and whether the server's RAM grows from run to run.".to_string()
                    };
                    d.next_check.insert(0, check);
                }
                None => {
                    d.kind_evidence.push_str(&format!(" {}.", k.note));
                    if k.source.is_some() {
                        // Already read: no point in telling the user to read it.
                        d.next_check
                            .retain(|c| !c.starts_with("Check the kernel log (`dmesg"));
                        d.next_check.insert(0, "The kernel log has no OOM-killer line for the server: look at the end of the server's own console output (a native crash, an abort, a supervisor that stopped it) and compare the server's RAM with system RAM and swap.".into());
                    }
                }
            }
        }
        if let Some(pressure) = self.host.pressure() {
            if d.kind.is_memory() || d.kind == FailureKind::Timeout {
                d.kind_evidence.push_str(&format!(" {pressure}"));
                d.candidates.insert(
                    0,
                    "system RAM (not VRAM) ran short: host-RAM pressure was measured during this run".into(),
                );
            }
        }
    }
}

/// Trims each `current_inputs` value to [`CURRENT_INPUT_LIMIT`] characters.
pub(crate) fn trim_current_inputs(mut e: ExecutionError) -> ExecutionError {
    fn trim(v: &mut Value) {
        match v {
            Value::String(s) if s.chars().count() > CURRENT_INPUT_LIMIT => {
                let total = s.chars().count();
                let head: String = s.chars().take(CURRENT_INPUT_LIMIT).collect();
                *s = format!("{head}… [{total} characters]");
            }
            Value::Array(a) => a.iter_mut().for_each(trim),
            Value::Object(m) => m.values_mut().for_each(trim),
            _ => {}
        }
    }
    e.current_inputs.values_mut().for_each(trim);
    e
}

#[cfg(test)]
mod tests {

    #[test]
    fn on_a_cpu_device_there_is_no_torch_reserved_peak() {
        // Real 0.8.0 on --cpu: torch_vram_total is the total RAM (system_stats.json).
        let text = std::fs::read_to_string(format!(
            "{}/comfyui-0.8.0/system_stats.json",
            crate::FIXTURES
        ))
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let stats: crate::comfy::SystemStats = serde_json::from_value(v["body"].clone()).unwrap();
        let d = &stats.devices[0];
        let samples = vec![VramSample {
            t_ms: 0,
            used_bytes: d.used(),
            reserved_bytes: d.torch_vram_total,
        }];
        let cpu = VramReport::from_samples(samples.clone(), 500, Some(d), 0);
        assert_eq!(cpu.device_kind.as_deref(), Some("cpu"));
        assert_eq!(cpu.peak_reserved_bytes, None);
        let mut gpu = d.clone();
        gpu.kind = "cuda".into();
        let gpu = VramReport::from_samples(samples, 500, Some(&gpu), 0);
        assert_eq!(gpu.peak_reserved_bytes, Some(d.torch_vram_total));
    }
    use super::*;

    #[test]
    fn long_current_inputs_are_trimmed() {
        let mut e = ExecutionError::default();
        e.current_inputs.insert(
            "samples".into(),
            serde_json::json!(["x".repeat(5000), "short"]),
        );
        let e = trim_current_inputs(e);
        let v = e.current_inputs["samples"][0].as_str().unwrap();
        assert!(v.ends_with("[5000 characters]") && v.len() < 400);
        assert_eq!(e.current_inputs["samples"][1], "short");
    }

    /// A server-lost record whose kernel log of the window had `lines` (written from the kernel's
    /// published formats; the numbers are made up).
    fn lost_with_kernel_lines(lines: &[&str], pid: u32) -> RunRecord {
        let (outcome, error) = Outcome::ServerLost(ServerLostInfo {
            reason: "connection refused".into(),
            submitted: true,
            last_node: None,
        })
        .into_parts();
        let mut record: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r", "prompt_id": "r", "workflow_sha256": "h",
            "server": "http://127.0.0.1:8188", "started_at": "", "finished_at": "",
            "duration_ms": 1, "cold": true, "outcome": "server_lost",
        }))
        .unwrap();
        record.outcome = outcome;
        record.error = error;
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        record.kernel = Some(crate::host::KernelEvidence::from_lines(
            "journalctl -k".into(),
            "a".into(),
            "b".into(),
            Some(pid),
            &lines,
        ));
        record.attach_diagnosis();
        record
    }

    #[test]
    fn a_kernel_oom_kill_makes_the_diagnosis_name_the_oom_killer_with_its_figures() {
        let r = lost_with_kernel_lines(
            &[
                "2026-12-01T03:12:44+0000 vm kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=4414,uid=1000",
                "2026-12-01T03:12:44+0000 vm kernel: Out of memory: Killed process 4414 (python3) total-vm:34439708kB, anon-rss:18988872kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:40000kB oom_score_adj:0",
            ],
            4414,
        );
        let d = r.diagnosis.as_ref().unwrap();
        assert_eq!(d.kind.as_str(), "process_killed");
        let why = &d.kind_evidence;
        assert!(
            why.starts_with("The kernel's OOM killer killed the server process: pid 4414 (python3), total-vm 32.8 GiB, anon-rss 18.1 GiB"),
            "{why}"
        );
        assert!(why.contains("constraint CONSTRAINT_NONE"), "{why}");
        assert!(why.contains("Kernel log: \"2026-12-01T03:12:44+0000 vm kernel: Out of memory"));
        let first = &d.next_check[0];
        assert!(
            first.starts_with("The machine's RAM and swap ran out"),
            "{first}"
        );
        assert_eq!(d.root_cause, crate::diagnose::RootCause::Unknown);
        // A cgroup limit points at the limit instead.
        let r = lost_with_kernel_lines(
            &["[ 88.1] Memory cgroup out of memory: Killed process 77 (python3) total-vm:2097152kB, anon-rss:1048576kB, file-rss:0kB, shmem-rss:0kB"],
            77,
        );
        let first = r.diagnosis.as_ref().unwrap().next_check[0].clone();
        assert!(
            first.starts_with("The kill was a cgroup memory limit"),
            "{first}"
        );
    }

    #[test]
    fn without_an_oom_line_the_server_process_died_cause_unknown() {
        let r = lost_with_kernel_lines(&["[ 1.0] usb 1-1: new high-speed USB device"], 4414);
        let d = r.diagnosis.as_ref().unwrap();
        assert_eq!(d.kind.as_str(), "process_killed");
        let why = &d.kind_evidence;
        assert!(
            why.contains("the cause is not proven to be memory"),
            "{why}"
        );
        assert!(why.contains("no OOM-killer line for pid 4414"), "{why}");
        assert!(
            why.contains("the server process died, cause unknown"),
            "{why}"
        );
        assert!(!why.contains("OOM killer killed"), "{why}");
    }

    #[test]
    fn record_json_has_outcome_name_and_error_key() {
        let (outcome, error) = Outcome::Failed(ExecutionError {
            node_id: "3".into(),
            exception_type: "torch.OutOfMemoryError".into(),
            timestamp: Some(1795956723160),
            ..Default::default()
        })
        .into_parts();
        let stats: SystemStats = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/comfyui/GET__system_stats.final.json",
                crate::FIXTURES
            ))
            .unwrap(),
        )
        .unwrap();
        let record = RunRecord {
            run_id: "r".into(),
            prompt_id: "r".into(),
            workflow_sha256: "h".into(),
            server: "http://127.0.0.1:8188".into(),
            started_at: "2026-11-29T14:00:00Z".into(),
            finished_at: "2026-11-29T14:00:01Z".into(),
            duration_ms: 1000,
            cold: true,
            outcome,
            error,
            diagnosis: None,
            queue: QueueInfo::default(),
            cached_nodes: vec![],
            timeline: vec![],
            vram: VramReport::from_samples(
                vec![VramSample {
                    t_ms: 1,
                    used_bytes: 5,
                    reserved_bytes: 7,
                }],
                500,
                stats.primary(),
                0,
            ),
            host: Default::default(),
            kernel: None,
            system_stats_before: Some(stats.clone()),
            system_stats_after: None,
            vram_baseline_bytes: None,
            history: None,
            prompt_rewrite: None,
            warnings: vec![],
            console: None,
            memory_events: vec![],
            memory_summary: None,
            server_benchmark: None,
            memory_fallbacks: vec![],
            product: None,
            server_log: String::new(),
            step_timing: Vec::new(),
            raw: RawLog {
                http: vec![HttpRecord {
                    t_ms: 3,
                    repeats: 2,
                    exchange: HttpExchange {
                        method: "GET".into(),
                        path: "/queue".into(),
                        request_body: None,
                        status: Some(200),
                        response_body: Some(serde_json::json!({"queue_running": [[1, "r"]]})),
                        response_text: None,
                        error: None,
                        elapsed_ms: 4,
                    },
                }],
                ..RawLog::default()
            },
        };
        let v = serde_json::to_value(&record).unwrap();
        assert_eq!(v["outcome"], "failed");
        assert_eq!(v["error"]["execution_error"]["node_id"], "3");
        assert_eq!(v["vram"]["peak_used_bytes"], 5);
        let back: RunRecord =
            serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(back, record);
        assert_eq!(back.outcome().kind(), OutcomeKind::Failed);
    }
}
