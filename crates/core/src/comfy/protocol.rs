//! Every ComfyUI protocol fact the client relies on: routes, WebSocket message types and their
//! fields, response and error shapes. Checked against the captures in
//! `tests/fixtures/comfyui/` (ComfyUI 0.3.64). Structs are strict about what ComfyUI promises
//! and lenient about extra fields (`#[serde(default)]`, unknown data kept as `Value`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// HTTP and WebSocket routes (each is also served under `/api`; the plain form is used).
pub(crate) mod routes {
    /// `GET` server and device information.
    pub(crate) const SYSTEM_STATS: &str = "/system_stats";
    /// `GET` node definitions (all, or `/object_info/{class}`).
    pub(crate) const OBJECT_INFO: &str = "/object_info";
    /// `GET /models/{folder}`: files of one model folder (404 for an unknown folder).
    pub(crate) const MODELS: &str = "/models";
    /// `GET` running and pending queue items; `POST {"delete": [...]}` removes pending items.
    pub(crate) const QUEUE: &str = "/queue";
    /// `GET /history/{prompt_id}`: `{id: entry}`, or `{}` when unknown or not finished yet.
    pub(crate) const HISTORY: &str = "/history";
    /// `POST` submit a prompt.
    pub(crate) const PROMPT: &str = "/prompt";
    /// `POST {"unload_models", "free_memory"}`: acted on by the worker when idle.
    pub(crate) const FREE: &str = "/free";
    /// `POST {"prompt_id"}`: interrupts that prompt only if it is running.
    pub(crate) const INTERRUPT: &str = "/interrupt";
    /// `GET` server feature flags.
    pub(crate) const FEATURES: &str = "/features";
    /// WebSocket endpoint; the session id goes in the `clientId` query parameter.
    pub(crate) const WS: &str = "/ws";
    /// Name of the WebSocket query parameter carrying the session id.
    pub(crate) const WS_CLIENT_ID_PARAM: &str = "clientId";
    /// `PATCH {"clientId", "enabled"}`: the server sends its console to that socket as `logs`
    /// frames (200 with an empty body). Not served under `/api` (the `/internal` sub-app).
    pub(crate) const LOGS_SUBSCRIBE: &str = "/internal/logs/subscribe";
    /// `GET` the console's ring buffer (the last 300 writes since start) as [`super::LogsData`].
    pub(crate) const LOGS_RAW: &str = "/internal/logs/raw";
    /// `GET` the front-end scripts of ComfyUI and of each custom node pack that has some
    /// (`["/extensions/core/groupNode.js", …, "/extensions/<pack>/….js"]`).
    pub(crate) const EXTENSIONS: &str = "/extensions";
    /// `GET` the absolute folders of each model folder kind on the server's machine
    /// (`{"checkpoints": ["/…/models/checkpoints", …], …}`). Not served under `/api`.
    pub(crate) const FOLDER_PATHS: &str = "/internal/folder_paths";
    /// `GET /view?filename=&subfolder=&type=`: an output file's bytes.
    pub(crate) const VIEW: &str = "/view";
    /// `GET /api/jobs/{id}`: one job (from 0.8.0; 404 `{"error": "Job not found"}` for an
    /// unknown id, a plain-text 404 on servers without the route). Only under `/api`.
    pub(crate) const JOBS: &str = "/api/jobs";
    /// `POST /api/jobs/{id}/cancel` → `{"cancelled": bool}`: dequeues a pending job or
    /// interrupts the running one (late 2026 servers; 0.8.0 answers 405).
    pub(crate) const JOB_CANCEL_SUFFIX: &str = "/cancel";
}

/// WebSocket message `type` values the client acts on.
pub(crate) mod msg {
    /// Queue size broadcast; the first frame of a connection also carries `sid`.
    pub(crate) const STATUS: &str = "status";
    /// The worker took the prompt.
    pub(crate) const EXECUTION_START: &str = "execution_start";
    /// Node ids served from the output cache.
    pub(crate) const EXECUTION_CACHED: &str = "execution_cached";
    /// A node starts; `node: null` means the prompt is finished (history already written).
    pub(crate) const EXECUTING: &str = "executing";
    /// Step progress of a node.
    pub(crate) const PROGRESS: &str = "progress";
    /// Snapshot of every non-pending node (broadcast when the prompt has no client_id).
    pub(crate) const PROGRESS_STATE: &str = "progress_state";
    /// An output node finished, with its UI output.
    pub(crate) const EXECUTED: &str = "executed";
    /// The prompt completed successfully.
    pub(crate) const EXECUTION_SUCCESS: &str = "execution_success";
    /// A node raised; see [`super::ExecutionError`].
    pub(crate) const EXECUTION_ERROR: &str = "execution_error";
    /// The prompt was interrupted.
    pub(crate) const EXECUTION_INTERRUPTED: &str = "execution_interrupted";
    /// Console writes, sent to sockets subscribed through `/internal/logs/subscribe`.
    pub(crate) const LOGS: &str = "logs";
}

/// `exception_type` of a non-fatal `execution_error` (an ExecutionBlocker): the prompt continues.
pub(crate) const EXECUTION_BLOCKED: &str = "ExecutionBlocked";

/// Binary WebSocket frame event types (first 4 bytes, big-endian).
pub mod binary {
    /// `[u32 1][u32 format 1=JPEG 2=PNG][image]`.
    pub const PREVIEW_IMAGE: u32 = 1;
}

/// The value for `extra_data.preview_method` that turns sampler previews off.
pub(crate) const PREVIEW_METHOD_NONE: &str = "none";

/// `GET /system_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemStats {
    /// Host information.
    pub system: SystemInfo,
    /// Devices, primary first.
    pub devices: Vec<Device>,
}

impl SystemStats {
    /// The primary device (the one ComfyUI runs on).
    pub(crate) fn primary(&self) -> Option<&Device> {
        self.devices.first()
    }
}

/// `system_stats.system`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemInfo {
    /// `os.name` (0.3.64) or `sys.platform` (newer).
    #[serde(default)]
    pub os: String,
    /// Host RAM in bytes.
    #[serde(default)]
    pub ram_total: u64,
    /// Free host RAM in bytes.
    #[serde(default)]
    pub ram_free: u64,
    /// ComfyUI version string.
    #[serde(default)]
    pub comfyui_version: String,
    /// Python `sys.version`.
    #[serde(default)]
    pub python_version: String,
    /// torch version.
    #[serde(default)]
    pub pytorch_version: String,
    /// Launch arguments (`--lowvram`, `--cache-*` …).
    #[serde(default)]
    pub argv: Vec<String>,
    /// Fields not modelled above.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One entry of `system_stats.devices`. On `--cpu` the VRAM numbers are system RAM.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// e.g. `"cuda:0 NVIDIA … : cudaMallocAsync"` or `"cpu"`.
    #[serde(default)]
    pub name: String,
    /// `cuda`, `cpu`, `mps` …
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Device index (null for cpu).
    #[serde(default)]
    pub index: Option<i64>,
    /// Total device memory in bytes.
    #[serde(default)]
    pub vram_total: u64,
    /// Free device memory in bytes.
    #[serde(default)]
    pub vram_free: u64,
    /// Bytes reserved by torch's caching allocator.
    #[serde(default)]
    pub torch_vram_total: u64,
    /// Reserved by torch but unused.
    #[serde(default)]
    pub torch_vram_free: u64,
}

/// Whether two `system.os` values can be the same operating system, across the two spellings
/// (`posix` covers `linux` and `darwin`, `nt` covers `win32` and `cygwin`).
pub(crate) fn same_os(a: &str, b: &str) -> bool {
    let family = |s: &str| match s {
        "posix" => &["posix", "linux", "darwin"][..],
        "nt" => &["nt", "win32", "cygwin"][..],
        _ => &[][..],
    };
    a == b || family(a).contains(&b) || family(b).contains(&a)
}

impl SystemInfo {
    /// Host RAM in use (`ram_total − ram_free`; ComfyUI's `ram_free` is the memory available to
    /// new allocations); None when the server did not report a total.
    pub(crate) fn ram_used(&self) -> Option<u64> {
        (self.ram_total > 0).then(|| self.ram_total.saturating_sub(self.ram_free))
    }
}

impl Device {
    /// Device memory in use (total − free).
    pub(crate) fn used(&self) -> u64 {
        self.vram_total.saturating_sub(self.vram_free)
    }
}

/// `GET /queue`. Items are `[number, prompt_id, prompt, extra_data, outputs_to_execute]`;
/// `queue_pending` is a heap array, not sorted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueState {
    /// The running item(s).
    pub queue_running: Vec<Vec<Value>>,
    /// Pending items in heap order.
    pub queue_pending: Vec<Vec<Value>>,
}

/// Where a prompt is in `/queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueuePosition {
    /// Being executed now.
    Running,
    /// Waiting; `ahead` prompts (running + pending with a lower number) come first.
    Pending {
        /// Prompts that run before this one.
        ahead: usize,
    },
    /// In neither list.
    Absent,
}

impl QueueState {
    fn item_id(item: &[Value]) -> Option<&str> {
        item.get(1).and_then(Value::as_str)
    }

    fn item_number(item: &[Value]) -> f64 {
        item.first().and_then(Value::as_f64).unwrap_or(f64::MAX)
    }

    /// Ids of the running prompts.
    pub fn running_ids(&self) -> Vec<&str> {
        self.queue_running
            .iter()
            .filter_map(|i| Self::item_id(i))
            .collect()
    }

    /// Ids of the pending prompts in execution order (sorted by number).
    pub(crate) fn pending_ids(&self) -> Vec<&str> {
        let mut items: Vec<&Vec<Value>> = self.queue_pending.iter().collect();
        items.sort_by(|a, b| Self::item_number(a).total_cmp(&Self::item_number(b)));
        items.into_iter().filter_map(|i| Self::item_id(i)).collect()
    }

    /// Where `prompt_id` is.
    pub fn position(&self, prompt_id: &str) -> QueuePosition {
        if self.running_ids().contains(&prompt_id) {
            return QueuePosition::Running;
        }
        let pending = self.pending_ids();
        match pending.iter().position(|id| *id == prompt_id) {
            Some(i) => QueuePosition::Pending {
                ahead: i + self.queue_running.len(),
            },
            None => QueuePosition::Absent,
        }
    }

    /// True when nothing runs and nothing waits.
    pub(crate) fn is_idle(&self) -> bool {
        self.queue_running.is_empty() && self.queue_pending.is_empty()
    }
}

/// Body of `POST /prompt`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PromptRequest<'a> {
    /// The API-format graph.
    pub prompt: &'a Map<String, Value>,
    /// WebSocket session that receives this prompt's messages.
    pub client_id: &'a str,
    /// Client-chosen prompt id (a canonical UUID).
    pub prompt_id: &'a str,
    /// Stored with the job (`preview_method` …).
    pub extra_data: Map<String, Value>,
}

/// 200 answer of `POST /prompt` (`prompt_id` and `node_errors` are required). A non-empty
/// `node_errors` means some outputs were dropped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptResponse {
    /// The prompt id the server uses.
    pub prompt_id: String,
    /// Queue number (an integer, or a float when the client chose it).
    #[serde(default)]
    pub number: Value,
    /// Errors of output branches that were dropped.
    pub node_errors: Map<String, Value>,
}

/// 400 answer of `POST /prompt`:
/// `{"error": {type, message, details, extra_info}, "node_errors": {id: {errors, dependent_outputs, class_type}}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptRejection {
    /// The top-level error.
    pub error: PromptErrorInfo,
    /// Per-node errors (node id → `{errors, dependent_outputs, class_type}`).
    #[serde(default)]
    pub node_errors: Map<String, Value>,
}

/// `error` of a 400 answer (also the shape of each per-node error).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptErrorInfo {
    /// e.g. `prompt_outputs_failed_validation`, `invalid_prompt`, `prompt_no_outputs`, `no_prompt`.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// Often `""`.
    #[serde(default)]
    pub details: String,
    /// Extra structured data.
    #[serde(default)]
    pub extra_info: Value,
}

/// Data of `execution_error` (also kept in history `status.messages`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutionError {
    /// The prompt.
    #[serde(default)]
    pub prompt_id: String,
    /// The node that raised.
    #[serde(default)]
    pub node_id: String,
    /// Its class.
    #[serde(default)]
    pub node_type: String,
    /// Nodes that finished before (unordered, excludes cached nodes).
    #[serde(default)]
    pub executed: Vec<String>,
    /// `str(exception)` plus ComfyUI's tips; ends with a newline.
    #[serde(default)]
    pub exception_message: String,
    /// Module-qualified exception class, e.g. `torch.OutOfMemoryError`.
    #[serde(default)]
    pub exception_type: String,
    /// Formatted frames, without the final "Type: message" line.
    #[serde(default)]
    pub traceback: Vec<String>,
    /// Input name → list of `str()`-formatted values (trimmed by the run recorder).
    #[serde(default)]
    pub current_inputs: Map<String, Value>,
    /// Node ids with cached outputs (not reliable as a record of completion).
    #[serde(default)]
    pub current_outputs: Value,
    /// Epoch milliseconds (absent for `ExecutionBlocked`).
    #[serde(default)]
    pub timestamp: Option<u64>,
}

impl ExecutionError {
    /// True for the non-fatal ExecutionBlocker error (the prompt continues).
    pub(crate) fn is_blocked(&self) -> bool {
        self.exception_type == EXECUTION_BLOCKED
    }
}

/// Data of `execution_interrupted`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutionInterrupted {
    /// The prompt.
    #[serde(default)]
    pub prompt_id: String,
    /// The node that was running (or about to run).
    #[serde(default)]
    pub node_id: String,
    /// Its class.
    #[serde(default)]
    pub node_type: String,
    /// Nodes that finished before.
    #[serde(default)]
    pub executed: Vec<String>,
    /// Epoch milliseconds.
    #[serde(default)]
    pub timestamp: Option<u64>,
}

/// One `GET /history/{id}` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// `[number, prompt_id, prompt, extra_data, outputs_to_execute]`.
    #[serde(default)]
    pub prompt: Vec<Value>,
    /// Node id → UI output.
    #[serde(default)]
    pub outputs: Map<String, Value>,
    /// Final status and the recorded messages.
    pub status: HistoryStatus,
    /// Node id → `{node_id, display_node, parent_node, real_node_id}`.
    #[serde(default)]
    pub meta: Map<String, Value>,
}

/// `history entry.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryStatus {
    /// `success` or `error` (interrupts are `error` too).
    #[serde(default)]
    pub status_str: String,
    /// True only on success.
    #[serde(default)]
    pub completed: bool,
    /// `[[event_name, data], …]`: execution_start, execution_cached and the terminal event.
    #[serde(default)]
    pub messages: Vec<(String, Value)>,
}

/// How a prompt ended, as far as the server said.
#[derive(Debug, Clone, PartialEq)]
pub enum Terminal {
    /// `execution_success`.
    Success {
        /// Epoch milliseconds.
        timestamp: Option<u64>,
    },
    /// A fatal `execution_error` (boxed: it carries the traceback and inputs).
    Error(Box<ExecutionError>),
    /// `execution_interrupted`.
    Interrupted(ExecutionInterrupted),
}

impl HistoryEntry {
    /// The terminal event recorded in `status.messages` (the last success/error/interrupt).
    pub fn terminal(&self) -> Option<Terminal> {
        self.status
            .messages
            .iter()
            .rev()
            .find_map(|(name, data)| terminal_from_message(name, data))
    }

    /// `nodes` of the recorded `execution_cached` message.
    pub fn cached_nodes(&self) -> Vec<String> {
        self.message(msg::EXECUTION_CACHED)
            .and_then(|d| serde_json::from_value::<CachedData>(d.clone()).ok())
            .map(|c| c.nodes)
            .unwrap_or_default()
    }

    /// Data of the first recorded message called `name`.
    pub(crate) fn message(&self, name: &str) -> Option<&Value> {
        self.status
            .messages
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d)
    }
}

/// Parses a terminal message (`execution_success` / fatal `execution_error` /
/// `execution_interrupted`); `None` for anything else, including `ExecutionBlocked` errors.
pub(crate) fn terminal_from_message(name: &str, data: &Value) -> Option<Terminal> {
    match name {
        msg::EXECUTION_SUCCESS => Some(Terminal::Success {
            timestamp: data.get("timestamp").and_then(Value::as_u64),
        }),
        msg::EXECUTION_ERROR => {
            let err: ExecutionError = serde_json::from_value(data.clone()).ok()?;
            (!err.is_blocked()).then(|| Terminal::Error(Box::new(err)))
        }
        msg::EXECUTION_INTERRUPTED => serde_json::from_value(data.clone())
            .ok()
            .map(Terminal::Interrupted),
        _ => None,
    }
}

/// `status` of a job in the jobs API (`comfy_execution/jobs.py`). An interrupted job is
/// `failed` too; only its `execution_status.messages` tell the two apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Queued, not started.
    Pending,
    /// Running now.
    InProgress,
    /// Ended with `execution_success`.
    Completed,
    /// Ended with an error or an interrupt.
    Failed,
    /// A status this client does not know (a newer server).
    #[serde(other)]
    Unknown,
}

/// `GET /api/jobs/{id}` (0.8.0 and later). The list form carries neither `outputs` nor
/// `execution_status`; the single-job form does once the job ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The prompt id.
    pub id: String,
    /// Where the job is.
    pub status: JobStatus,
    /// The queue `number`.
    #[serde(default)]
    pub priority: Option<f64>,
    /// Epoch milliseconds when it was queued.
    #[serde(default)]
    pub create_time: Option<u64>,
    /// Epoch milliseconds; absent while running.
    #[serde(default)]
    pub execution_start_time: Option<u64>,
    /// Epoch milliseconds; absent until it ended.
    #[serde(default)]
    pub execution_end_time: Option<u64>,
    /// How many output files it produced.
    #[serde(default)]
    pub outputs_count: Option<u64>,
    /// Node id → UI output, as in `/history` (ended jobs only).
    #[serde(default)]
    pub outputs: Option<Map<String, Value>>,
    /// The history `status` (ended jobs only).
    #[serde(default)]
    pub execution_status: Option<HistoryStatus>,
    /// The fatal `execution_error` data of a failed (not interrupted) job.
    #[serde(default)]
    pub execution_error: Option<Value>,
}

impl Job {
    /// True once the job ended (completed or failed).
    pub fn is_over(&self) -> bool {
        matches!(self.status, JobStatus::Completed | JobStatus::Failed)
    }

    /// How an ended job ended: from `execution_status.messages`, else from the status and
    /// `execution_error` (an interrupted job has only the message).
    pub fn terminal(&self) -> Option<Terminal> {
        let from_messages = self.execution_status.as_ref().and_then(|s| {
            s.messages
                .iter()
                .rev()
                .find_map(|(name, data)| terminal_from_message(name, data))
        });
        from_messages.or_else(|| match self.status {
            JobStatus::Completed => Some(Terminal::Success {
                timestamp: self.execution_end_time,
            }),
            JobStatus::Failed => self
                .execution_error
                .as_ref()
                .and_then(|e| terminal_from_message(msg::EXECUTION_ERROR, e)),
            _ => None,
        })
    }
}

/// The answer of `GET /api/jobs/{id}`.
#[derive(Debug, Clone, PartialEq)]
pub enum JobLookup {
    /// The server knows the job.
    Found(Box<Job>),
    /// The route exists (a JSON 404 `{"error": …}`) but the id is unknown.
    NotFound,
    /// The server has no jobs API (a 404/405 that is not the jobs API's own answer: 0.3.x).
    NoJobsApi,
}

/// Whether a 404/405 body of `GET /api/jobs/{id}` is the jobs API's own "not found" (a JSON
/// object with an `error` string) rather than the router's plain-text 404 of an older server.
pub(crate) fn is_jobs_api_not_found(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(|_| ()))
        .is_some()
}

/// The `error.type` of a 400 to a `prompt_id` that is not a canonical lowercase UUID
/// (late-2026 servers; 0.8.0 accepts any string).
pub(crate) const INVALID_PROMPT_ID: &str = "invalid_prompt_id";

/// The `prompt_id` this client sends for a run: the canonical lowercase hyphenated form of
/// its UUID, the only form late-2026 servers accept.
pub(crate) fn canonical_prompt_id(id: &uuid::Uuid) -> String {
    id.hyphenated().to_string()
}

/// Whether `s` is a canonical lowercase hyphenated UUID (what late-2026 servers require).
pub fn is_canonical_prompt_id(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok_and(|u| u.hyphenated().to_string() == s)
}

/// What a 400 `invalid_prompt_id` means and how to get past it, for the run record.
pub(crate) fn explain_invalid_prompt_id(sent: &str) -> String {
    format!(
        "the server rejected the prompt id {sent:?}: ComfyUI after 0.8.0 accepts a client-chosen \
         prompt_id only as a canonical lowercase hyphenated UUID (e.g. \
         4f1c2d3e-0a1b-4c2d-8e3f-123456789abc); comfy-bisect always sends one, so this id came \
         from elsewhere (a hand-edited journal or run id): start a new session or drop the id"
    )
}

/// Data of `execution_cached`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct CachedData {
    /// Cached node ids.
    #[serde(default)]
    pub nodes: Vec<String>,
}

/// Data of `executing` (`node: null` = prompt finished; no `prompt_id` on the reconnect greeting).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ExecutingData {
    /// Node id (may be a flattened subgraph id like `"20:2"`).
    #[serde(default)]
    pub node: Option<String>,
    /// Node of the submitted prompt it maps to.
    #[serde(default)]
    pub display_node: Option<String>,
}

/// Data of `progress`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ProgressData {
    /// Steps done (integer or float on the wire).
    #[serde(default)]
    pub value: f64,
    /// Steps total.
    #[serde(default)]
    pub max: f64,
    /// The node.
    #[serde(default)]
    pub node: Option<String>,
}

/// Data of `progress_state`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ProgressStateData {
    /// Node id → state of every non-pending node.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeProgressState>,
}

/// One node of `progress_state.nodes`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct NodeProgressState {
    /// Progress value.
    #[serde(default)]
    pub value: f64,
    /// Progress maximum.
    #[serde(default)]
    pub max: f64,
    /// `running`, `finished` or `error`.
    #[serde(default)]
    pub state: String,
    /// Node of the submitted prompt it maps to.
    #[serde(default)]
    pub display_node_id: Option<String>,
}

/// Data of `executed`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ExecutedData {
    /// The node.
    #[serde(default)]
    pub node: Option<String>,
    /// UI output (may be null).
    #[serde(default)]
    pub output: Value,
}

/// Data of `status` (`sid` only on a connection's first frame).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct StatusData {
    /// `{"exec_info": {"queue_remaining": N}}`.
    #[serde(default)]
    pub status: Value,
    /// The session id.
    #[serde(default)]
    pub sid: Option<String>,
}

impl StatusData {
    /// `status.exec_info.queue_remaining`.
    pub(crate) fn queue_remaining(&self) -> Option<u64> {
        self.status
            .get("exec_info")?
            .get("queue_remaining")?
            .as_u64()
    }
}

/// Body of `PATCH /internal/logs/subscribe`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LogsSubscribe<'a> {
    /// The socket's session id.
    #[serde(rename = "clientId")]
    pub client_id: &'a str,
    /// `true` to receive `logs` frames, `false` to stop.
    pub enabled: bool,
}

/// One console write: the server's local time without a zone (`2026-12-01T13:58:31.488302`)
/// and the text written. A write is not always a whole line: `""`, `"\n"` and tqdm's
/// `"\r 50%|…"` come as entries of their own, a traceback as one multi-line entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Server time of the write.
    #[serde(default)]
    pub t: String,
    /// The text written.
    #[serde(default)]
    pub m: String,
}

/// `data` of a `logs` frame, and the body of `GET /internal/logs/raw`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogsData {
    /// Console writes in order.
    #[serde(default)]
    pub entries: Vec<LogEntry>,
    /// Terminal size `{cols, rows}`; on frames only the first carries it, later ones `null`.
    #[serde(default)]
    pub size: Option<Value>,
}

/// A WebSocket text frame: `{"type": T, "data": {...}}`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WsMessage {
    /// Message type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Payload.
    #[serde(default)]
    pub data: Value,
}

impl WsMessage {
    /// Parses a text frame; `None` if it is not a `{type, data}` JSON object.
    pub fn parse(text: &str) -> Option<WsMessage> {
        serde_json::from_str(text).ok()
    }

    /// `data.prompt_id`, when present.
    pub(crate) fn prompt_id(&self) -> Option<&str> {
        self.data.get("prompt_id").and_then(Value::as_str)
    }
}

/// The event type of a binary frame (first 4 bytes, big-endian), if it has 4 bytes.
pub(crate) fn binary_event_type(frame: &[u8]) -> Option<u32> {
    let head: [u8; 4] = frame.get(..4)?.try_into().ok()?;
    Some(u32::from_be_bytes(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/comfyui/{name}", crate::FIXTURES);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
    }

    #[test]
    fn system_stats_fixture_parses_with_cpu_device() {
        let s: SystemStats =
            serde_json::from_str(&fixture("GET__system_stats.final.json")).unwrap();
        let d = s.primary().unwrap();
        assert_eq!(d.kind, "cpu");
        assert_eq!(d.index, None);
        assert_eq!(d.used(), 25276502016 - 22838980608);
        // Host RAM in use, from the system block (on --cpu the device numbers are the same).
        assert_eq!(s.system.ram_used(), Some(25276502016 - 22838980608));
        assert_eq!(SystemInfo::default().ram_used(), None);
        assert_eq!(s.system.comfyui_version, "0.3.64");
        assert!(s.system.argv.contains(&"--cpu".to_string()));
        assert!(s.system.extra.contains_key("embedded_python"));
    }

    #[test]
    fn queue_fixture_is_idle() {
        let q: QueueState = serde_json::from_str(&fixture("GET__queue.final.json")).unwrap();
        assert!(q.is_idle());
        assert_eq!(q.position("x"), QueuePosition::Absent);
    }

    #[test]
    fn queue_pending_is_sorted_by_number_not_heap_order() {
        let q: QueueState = serde_json::from_value(serde_json::json!({
            "queue_running": [[5, "a", {}, {}, []]],
            "queue_pending": [[-8, "d", {}, {}, []], [7, "c", {}, {}, []], [6, "b", {}, {}, []]]
        }))
        .unwrap();
        assert_eq!(q.pending_ids(), vec!["d", "b", "c"]);
        assert_eq!(q.position("a"), QueuePosition::Running);
        assert_eq!(q.position("d"), QueuePosition::Pending { ahead: 1 });
        assert_eq!(q.position("c"), QueuePosition::Pending { ahead: 3 });
    }

    #[test]
    fn history_terminal_distinguishes_error_and_interrupt() {
        let runtime: Map<String, Value> =
            serde_json::from_str(&fixture("history_execution_error_runtime_core.json")).unwrap();
        let entry: HistoryEntry =
            serde_json::from_value(runtime.values().next().unwrap().clone()).unwrap();
        match entry.terminal() {
            Some(Terminal::Error(e)) => {
                assert_eq!(e.node_id, "2");
                assert_eq!(e.node_type, "LatentUpscaleBy");
                assert_eq!(e.exception_type, "RuntimeError");
                assert!(e.exception_message.ends_with('\n'));
            }
            other => panic!("expected error, got {other:?}"),
        }
        let interrupted: Map<String, Value> =
            serde_json::from_str(&fixture("history_interrupted.json")).unwrap();
        let entry: HistoryEntry =
            serde_json::from_value(interrupted.values().next().unwrap().clone()).unwrap();
        assert_eq!(entry.status.status_str, "error");
        assert!(matches!(entry.terminal(), Some(Terminal::Interrupted(_))));
    }

    #[test]
    fn blocked_execution_error_is_not_terminal() {
        let data = serde_json::json!({"prompt_id": "p", "node_id": "3", "node_type": "X",
            "exception_type": "ExecutionBlocked", "exception_message": "blocked", "traceback": []});
        assert_eq!(terminal_from_message("execution_error", &data), None);
    }

    #[test]
    fn validation_fixture_400_bodies_parse() {
        let cases: Value =
            serde_json::from_str(&fixture("post_prompt_validation_errors.json")).unwrap();
        let mut seen_400 = 0;
        for case in cases["cases"].as_array().unwrap() {
            if case["status"] == 400 {
                let r: PromptRejection =
                    serde_json::from_value(case["response_body"].clone()).unwrap();
                assert!(!r.error.kind.is_empty(), "case {}", case["case"]);
                seen_400 += 1;
            } else if case["status"] == 200 {
                let r: PromptResponse =
                    serde_json::from_value(case["response_body"].clone()).unwrap();
                assert!(!r.prompt_id.is_empty());
            }
        }
        assert!(seen_400 >= 10);
    }

    #[test]
    fn strict_about_promised_fields_lenient_about_extra_ones() {
        assert!(serde_json::from_str::<PromptResponse>(r#"{"number": 1}"#).is_err());
        let r: PromptResponse = serde_json::from_str(
            r#"{"prompt_id": "p", "number": 7.0, "node_errors": {}, "added_later": true}"#,
        )
        .unwrap();
        assert_eq!(r.prompt_id, "p");
        assert!(serde_json::from_str::<QueueState>(r#"{"queue_running": []}"#).is_err());
        let s: SystemStats = serde_json::from_str(
            r#"{"system": {"os": "linux", "deploy_environment": "x"},
                "devices": [{"name": "cuda:0", "type": "cuda", "index": 0, "vram_total": 10,
                             "vram_free": 4, "torch_vram_total": 3, "torch_vram_free": 1,
                             "new_field": [1]}]}"#,
        )
        .unwrap();
        assert_eq!(s.primary().unwrap().used(), 6);
        assert_eq!(s.system.extra["deploy_environment"], "x");
    }

    #[test]
    fn binary_event_type_reads_big_endian() {
        assert_eq!(binary_event_type(&[0, 0, 0, 4, 0, 0]), Some(4));
        assert_eq!(binary_event_type(&[0, 0, 1]), None);
    }
}
