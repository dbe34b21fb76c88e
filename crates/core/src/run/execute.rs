//! One run: optional cold start, socket first, submit, follow our prompt (`run/follow.rs`),
//! reconcile with history, sample VRAM, and turn all of it into a [`RunRecord`]. Every loop here
//! is bounded in time (run, stall, queue, reconnect and grace limits). The outcome of a
//! submitted prompt is decided in one place, `Runner::decide`. `Runner` owns our prompt's
//! server-side state (`run/state.rs`) and lends it to the follow phase through methods; its own
//! fields are private to this file.

use super::console::RunConsole;
use super::observer::{NoObserver, RawEvent, RunEvent, RunObserver};
use super::record::{
    trim_current_inputs, HangInfo, HttpRecord, InterruptedBy, Interruption, Outcome, QueueInfo,
    RawLog, Rejection, RunRecord, ServerLostInfo, TimeoutInfo, VramReport, VramSample,
    WsTextRecord,
};
use super::sampler::Sampler;
use super::state::FollowState;
use crate::comfy::events::TrackerEvent;
use crate::comfy::protocol::{
    canonical_prompt_id, explain_invalid_prompt_id, is_canonical_prompt_id, msg, HistoryEntry,
    LogsData, PromptErrorInfo, PromptRequest, QueuePosition, SystemStats, Terminal,
    INVALID_PROMPT_ID, PREVIEW_METHOD_NONE,
};
use crate::comfy::{Client, ClientError, HttpExchange, Submitted, WsFrame};
use crate::host::{HostReport, HostSample, ServerProcess};
use crate::workflow::Workflow;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use uuid::Uuid;

/// What to run and the limits of the run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The API-format workflow to submit.
    pub workflow: Workflow,
    /// Run id, also sent as `prompt_id`.
    pub run_id: Uuid,
    /// Free models and caches first, and wait until the server is idle.
    pub cold: bool,
    /// Longest run, counted from submission; only the time `/queue` shows our prompt pending
    /// behind others is excluded (the queue limit bounds that), so the deadline holds even when
    /// neither the socket nor `/queue` ever shows the prompt running.
    pub timeout: Duration,
    /// Longest time without any event for our running prompt.
    pub stall_timeout: Duration,
    /// `--stall`: longest time without a `progress` frame or a node change while our prompt
    /// runs; past it the run is a hang (`run/hang.rs`). None: no hang detection.
    pub stall: Option<Duration>,
    /// Longest wait behind other prompts (also bounds the cold-start idle wait).
    pub queue_timeout: Duration,
    /// `/system_stats` sampling interval.
    pub sample_interval: Duration,
    /// How often `/queue` (and `/history`) are checked when the socket is quiet.
    pub poll_interval: Duration,
    /// How long a lost socket may be retried before the server counts as lost.
    pub reconnect_window: Duration,
    /// `/history/{id}` attempts after the prompt finished (with backoff).
    pub history_attempts: u32,
    /// How long to wait for the server to confirm an interrupt we sent.
    pub interrupt_grace: Duration,
    /// Pause after the server became idle on a cold start (the worker frees memory then).
    pub settle: Duration,
    /// Set to `true` to cancel (Ctrl-C): our prompt alone is interrupted or dequeued.
    pub cancel: Option<watch::Receiver<bool>>,
    /// The server's process when it runs on this machine (its RSS and swap are sampled), or why
    /// it was not found; None for a remote server.
    pub server_process: Option<Result<ServerProcess, String>>,
}

impl RunRequest {
    /// A request with the default limits and a fresh run id.
    pub fn new(workflow: Workflow) -> RunRequest {
        RunRequest {
            workflow,
            run_id: Uuid::new_v4(),
            cold: true,
            timeout: Duration::from_secs(3600),
            stall_timeout: Duration::from_secs(600),
            stall: None,
            queue_timeout: Duration::from_secs(3600),
            sample_interval: Duration::from_millis(500),
            poll_interval: Duration::from_secs(1),
            reconnect_window: Duration::from_secs(15),
            history_attempts: 8,
            interrupt_grace: Duration::from_secs(30),
            settle: Duration::from_millis(300),
            cancel: None,
            server_process: None,
        }
    }
}

/// Runs one prompt and returns its record. Never fails: problems become the outcome.
pub async fn execute(client: &Client, request: RunRequest) -> RunRecord {
    execute_with(client, request, &mut NoObserver).await
}

/// Like [`execute`], reporting progress and raw events to `observer` as they happen.
pub async fn execute_with(
    client: &Client,
    request: RunRequest,
    observer: &mut dyn RunObserver,
) -> RunRecord {
    Runner::new(client, request, observer).go().await
}

type PendingHttp = Arc<Mutex<Vec<(u64, HttpExchange)>>>;

/// How following our prompt ended ([`Runner::follow`], `run/follow.rs`); [`Runner::decide`]
/// turns it into the run's [`Outcome`].
pub(super) enum End {
    /// The prompt ended on the server (its terminal event or history decides how).
    Finished,
    /// The user cancelled; `removed` when our prompt was still pending and got dequeued.
    Cancelled { removed: bool },
    /// A run, stall or queue limit passed and our prompt was interrupted.
    Timeout(TimeoutInfo),
    /// No progress for `--stall`: our prompt hung and was interrupted.
    Hang(HangInfo),
    /// The server went away or our prompt vanished.
    Lost(ServerLostInfo),
    /// The server answered about our prompt in a way ComfyUI never does (another id): what it
    /// said, quoted. The run is not judged (issue #39).
    Protocol(String),
}

/// The `error.type` of a run ended by a protocol error ([`End::Protocol`]): the server's
/// answers could not be followed, so the run says nothing about the workflow.
pub(crate) const PROTOCOL_ERROR: &str = "protocol_error";

/// An outcome for a server answer ComfyUI never gives (`message` quotes it): not judged.
pub(super) fn protocol_error(message: String) -> Outcome {
    Outcome::Rejected(Rejection {
        http_status: 200,
        error: PromptErrorInfo {
            kind: PROTOCOL_ERROR.into(),
            message: format!(
                "protocol error: {message}; the run is not judged (the prompt may still be on the \
                 server)"
            ),
            details: String::new(),
            extra_info: Value::Object(Map::new()),
        },
        node_errors: Map::new(),
        partial: false,
        partial_run: None,
    })
}

/// A server's answer for quoting in an error: compact JSON, at most 300 characters.
pub(super) fn quoted(answer: &Value) -> String {
    let text = answer.to_string();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// One run in progress: the request, our prompt on the server ([`FollowState`], which the follow
/// phase borrows), and everything else observed so far.
pub(super) struct Runner<'a> {
    state: FollowState,
    plain: Client,
    req: RunRequest,
    obs: &'a mut dyn RunObserver,
    t0: Instant,
    pending_http: PendingHttp,
    raw: RawLog,
    warnings: Vec<String>,
    queue: QueueInfo,
    stats_before: Option<SystemStats>,
    stats_after: Option<SystemStats>,
    stats_after_tried: bool,
    /// Device memory in use after `/free` and the settle (cold runs).
    baseline: Option<u64>,
    sampler: Option<Sampler>,
    partial: Option<Rejection>,
    /// Our share of the server console.
    console: RunConsole,
    /// `Some(true)` once the server took a log subscription, `Some(false)` when it has none.
    logs: Option<bool>,
    /// Why there is no console (no route, subscription failed).
    logs_note: Option<String>,
    /// What the output nodes produced (a run the server called a success).
    product: Option<super::product::Product>,
    /// Nodes that were running when binary (image) frames came.
    streamed: std::collections::BTreeSet<String>,
}

impl<'a> Runner<'a> {
    fn new(client: &Client, req: RunRequest, obs: &'a mut dyn RunObserver) -> Runner<'a> {
        let t0 = Instant::now();
        let pending_http: PendingHttp = Arc::new(Mutex::new(Vec::new()));
        let sink = pending_http.clone();
        let recording = client.recording(Arc::new(move |ex: HttpExchange| {
            let t = t0.elapsed().as_millis() as u64;
            if let Ok(mut v) = sink.lock() {
                v.push((t, ex));
            }
        }));
        let prompt_id = canonical_prompt_id(&req.run_id);
        Runner {
            state: FollowState::new(recording, prompt_id),
            plain: client.clone(),
            req,
            obs,
            t0,
            pending_http,
            raw: RawLog::default(),
            warnings: Vec::new(),
            queue: QueueInfo::default(),
            stats_before: None,
            stats_after: None,
            stats_after_tried: false,
            baseline: None,
            sampler: None,
            partial: None,
            console: RunConsole::new(),
            logs: None,
            logs_note: None,
            product: None,
            streamed: Default::default(),
        }
    }

    /// Milliseconds since the run began.
    pub(super) fn ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Our prompt on the server, for the follow phase.
    pub(super) fn state(&self) -> &FollowState {
        &self.state
    }

    /// Our prompt on the server, for the follow phase to change.
    pub(super) fn state_mut(&mut self) -> &mut FollowState {
        &mut self.state
    }

    /// The run's request (its limits).
    pub(super) fn request(&self) -> &RunRequest {
        &self.req
    }

    /// Takes the Ctrl-C receiver (the follow phase watches it from then on).
    pub(super) fn take_cancel(&mut self) -> Option<watch::Receiver<bool>> {
        self.req.cancel.take()
    }

    /// Our prompt waits behind `ahead` others: kept for the record (the most seen).
    pub(super) fn saw_ahead(&mut self, ahead: usize) {
        self.queue.max_ahead = self.queue.max_ahead.max(ahead);
    }

    /// Tells the observer of an event of the run.
    pub(super) fn event(&mut self, event: &RunEvent) {
        self.obs.on_event(event);
    }

    /// Merges our prompt's `/history` entry (warning when it disagrees with the socket).
    pub(super) fn keep_history(&mut self, entry: HistoryEntry) {
        let t = self.ms();
        if let Some(n) = self.state.merge_history(entry, t) {
            self.warn(n);
        }
    }

    async fn go(mut self) -> RunRecord {
        let started_at = now_rfc3339();
        let pid = self.server_pid();
        let mem_before = pid.and_then(crate::host::process::memory);
        let load_before = crate::host::load::read();
        let outcome = self.drive().await;
        // The socket is closed in the background (nobody waits for the server's close reply);
        // the last stats (unless fetched with the history already) and the sampler's series are
        // collected at the same time.
        if let Some(sock) = self.state.take_socket() {
            sock.close_in_background();
        }
        let want_stats = !self.stats_after_tried && !matches!(outcome, Outcome::ServerLost(_));
        let sampler = self.sampler.take();
        let (stats_after, series) = tokio::join!(self.stats_after_fetch(want_stats), async {
            match sampler {
                Some(s) => s.stop().await,
                None => Default::default(),
            }
        });
        let mem_after = pid.and_then(crate::host::process::memory);
        self.keep_stats_after(stats_after);
        self.flush_http();
        let (mut samples, failed) = (series.vram, series.failed);
        let mut host = self.host_report(series.host, (mem_before, mem_after));
        host.load = Some(crate::host::HostLoad::of(
            load_before,
            crate::host::load::read(),
            self.req.server_process.is_some(),
        ));
        for (stats, t_ms) in [(&self.stats_before, 0), (&self.stats_after, self.ms())] {
            if let Some(d) = stats.as_ref().and_then(SystemStats::primary) {
                samples.push(VramSample {
                    t_ms,
                    used_bytes: d.used(),
                    reserved_bytes: d.torch_vram_total,
                });
            }
        }
        samples.sort_by_key(|s| s.t_ms);
        let device = self
            .stats_before
            .as_ref()
            .or(self.stats_after.as_ref())
            .and_then(SystemStats::primary)
            .cloned();
        let vram = VramReport::from_samples(
            samples,
            self.req.sample_interval.as_millis() as u64,
            device.as_ref(),
            failed,
        );
        if self.req.cold && !self.state.tracker().cached().is_empty() {
            let nodes = self.state.tracker().cached().join(", ");
            self.warn(format!(
                "cold run, but the server served nodes [{nodes}] from its cache: POST /free did not \
                 clear the output cache (custom cache mode, or another client re-filled it)"
            ));
        }
        let mut timeline = self.state.tracker().timeline().to_vec();
        for n in &mut timeline {
            let id = n.display_node.as_deref().unwrap_or(&n.node_id);
            n.class_type = self.req.workflow.node(id).map(|w| w.class_type.clone());
        }
        self.queue.started_ms = self.state.tracker().started_ms();
        self.queue.finished_ms = self.state.tracker().finished_ms();
        self.raw.frames = self.state.tracker().counts().clone();
        let (held, dropped) = self.raw.finish_frames();
        if let Some(note) = dropped {
            self.warn(note);
        }
        for r in &held {
            self.obs.on_raw(&RawEvent::text_in(r));
        }
        let apis = self.state.apis();
        self.raw.jobs_api = apis.jobs;
        self.raw.jobs_cancel_api = apis.cancel;
        let (outcome, error) = outcome.into_parts();
        let console = std::mem::take(&mut self.console);
        let note =
            match self.logs {
                Some(_) => self.logs_note.clone(),
                None => Some(self.logs_note.clone().unwrap_or_else(|| {
                    "no console: no WebSocket was open to subscribe to it".into()
                })),
            };
        let (console, server_log, memory_events) = console.finish(self.logs == Some(true), note);
        let mut memory_fallbacks: Vec<String> = Vec::new();
        for e in memory_events.iter().filter(|e| e.is_fallback()) {
            let d = e.describe();
            if !memory_fallbacks.contains(&d) {
                memory_fallbacks.push(d);
            }
        }
        let product = self.product.take();
        for m in product.iter().flat_map(|p| &p.mismatches) {
            self.warnings.push(format!("product: {m}"));
        }
        let prompt_rewrite = self
            .state
            .history()
            .and_then(|h| super::rewrite::compare(&self.req.workflow, h));
        if let Some(r) = &prompt_rewrite {
            self.warnings.push(super::rewrite::warning(r));
        }
        let step_timing = super::timing::sampler_timings(&self.raw.ws_text, self.state.prompt_id());
        let server_benchmark = self.server_benchmark().await;
        let mut record = RunRecord {
            run_id: self.req.run_id.to_string(),
            prompt_id: self.state.prompt_id().to_string(),
            workflow_sha256: self.req.workflow.sha256(),
            server: self.state.client().server_url(),
            started_at,
            finished_at: now_rfc3339(),
            duration_ms: self.ms(),
            cold: self.req.cold,
            outcome,
            error,
            diagnosis: None,
            queue: self.queue,
            cached_nodes: self.state.tracker().cached().to_vec(),
            timeline,
            vram,
            host,
            kernel: None,
            system_stats_before: self.stats_before,
            system_stats_after: self.stats_after,
            vram_baseline_bytes: self.baseline,
            prompt_rewrite,
            history: self.state.take_history(),
            warnings: self.warnings,
            console: Some(console),
            memory_events,
            memory_summary: crate::comfy::memory_summary::last_summary(&server_log),
            memory_fallbacks,
            product,
            step_timing,
            server_benchmark,
            raw: self.raw,
            server_log,
        };
        record.attach_diagnosis();
        record
    }

    /// The server's benchmark capture of our prompt: its `benchmark` event among our frames,
    /// else — only when the socket was replaced, so our events may have gone to the old one —
    /// `output/benchmarks/<prompt_id>.json` through `/view` (a server without the capture
    /// answers 404: nothing).
    async fn server_benchmark(&mut self) -> Option<super::benchmark::ServerBenchmark> {
        use super::benchmark::{from_frames, read, CaptureSource};
        if let Some(b) = from_frames(&self.raw.ws_text, self.state.prompt_id()) {
            return Some(b);
        }
        if self.state.on_first_socket() || !self.state.tracker().is_finished() {
            return None;
        }
        let filename = format!("{}.json", self.state.prompt_id());
        let file = crate::comfy::ViewFile {
            filename: &filename,
            subfolder: "benchmarks",
            kind: "output",
        };
        let enough: &crate::comfy::client::Enough = &|_, _, _| false;
        let view = crate::comfy::client::ViewRead {
            from: None,
            cap: 8 << 20,
            enough,
        };
        let answer = self.state.client().view_read(&file, &view).await;
        self.flush_http();
        let head = answer.ok().flatten()?;
        let json: Value = serde_json::from_slice(&head.head).ok()?;
        read(&json, CaptureSource::File)
    }

    /// The local server's pid, when known.
    fn server_pid(&self) -> Option<u32> {
        match &self.req.server_process {
            Some(Ok(p)) => Some(p.pid),
            _ => None,
        }
    }

    /// System RAM and the server process's memory over the run: the sampler's series with the
    /// readings before and after the run at its ends.
    fn host_report(
        &self,
        mut samples: Vec<HostSample>,
        (before, after): (
            Option<crate::host::ProcessMemory>,
            Option<crate::host::ProcessMemory>,
        ),
    ) -> HostReport {
        let pid = self.server_pid();
        for (stats, mem, t_ms) in [
            (&self.stats_before, before, 0),
            (&self.stats_after, after, self.ms()),
        ] {
            let ram = stats.as_ref().and_then(|s| s.system.ram_used());
            if ram.is_some() || pid.is_some() {
                samples.push(HostSample {
                    t_ms,
                    ram_used_bytes: ram,
                    rss_bytes: mem.map(|m| m.rss_bytes),
                    swap_bytes: mem.map(|m| m.swap_bytes),
                });
            }
        }
        samples.sort_by_key(|s| s.t_ms);
        let gone = pid.and_then(|_| {
            samples
                .iter()
                .find(|s| s.rss_bytes.is_none())
                .map(|s| s.t_ms)
        });
        let ram_total = self
            .stats_before
            .as_ref()
            .or(self.stats_after.as_ref())
            .map(|s| s.system.ram_total)
            .filter(|t| *t > 0);
        let interval = self.req.sample_interval.as_millis();
        let (process, note) = match &self.req.server_process {
            Some(Ok(p)) => (
                Some(p.clone()),
                format!(
                    "system RAM in use (ram_total − ram_free of GET /system_stats) and the server \
                     process {} ({})'s VmRSS/VmSwap from /proc, every {interval} ms; peak RSS is \
                     the kernel's high-water mark (VmHWM) when it rose during the run",
                    p.pid, p.name
                ),
            ),
            Some(Err(why)) => (
                None,
                format!(
                    "system RAM in use (ram_total − ram_free of GET /system_stats) every \
                     {interval} ms; the server is on this machine but its process was not \
                     sampled: {why}"
                ),
            ),
            None => (
                None,
                format!(
                    "system RAM in use (ram_total − ram_free of GET /system_stats) every \
                     {interval} ms; the server's process was not sampled (the server is not on \
                     this machine, or it was not looked up)"
                ),
            ),
        };
        HostReport::from_samples(
            samples,
            ram_total,
            process,
            (before.map(|m| m.hwm_bytes), after.map(|m| m.hwm_bytes)),
            gone,
            note,
        )
    }

    /// `GET /system_stats` for after the run, on a copy of the client so it can run alongside
    /// other requests; `None` when not wanted.
    fn stats_after_fetch(
        &self,
        wanted: bool,
    ) -> impl std::future::Future<Output = Option<Result<SystemStats, ClientError>>> {
        let client = self.state.client().clone();
        async move {
            if wanted {
                Some(client.system_stats().await)
            } else {
                None
            }
        }
    }

    fn keep_stats_after(&mut self, fetched: Option<Result<SystemStats, ClientError>>) {
        match fetched {
            Some(Ok(s)) => self.stats_after = Some(s),
            Some(Err(e)) => self.warn(format!("GET /system_stats after the run failed: {e}")),
            None => return,
        }
        self.stats_after_tried = true;
    }

    async fn drive(&mut self) -> Outcome {
        if !self.req.cold {
            // Warm run: the first stats and the socket (handshake + greeting) at the same time.
            let client = self.state.client().clone();
            let (stats, socket) = tokio::join!(
                async move { client.system_stats().await },
                self.open_socket()
            );
            if let Some(outcome) = self.keep_stats_before(stats) {
                return outcome;
            }
            return self.submit_and_follow(socket).await;
        }
        let stats = self.state.client().system_stats().await;
        if let Some(outcome) = self.keep_stats_before(stats) {
            return outcome;
        }
        self.phase("cold start: POST /free {unload_models, free_memory}");
        if let Err(e) = self.state.client().free(true, true).await {
            if e.is_unreachable() {
                return self.lost(e.to_string());
            }
            self.warn(format!("POST /free failed, the run may not be cold: {e}"));
        }
        if let Some(outcome) = self.wait_idle().await {
            return outcome;
        }
        // The socket is opened while the worker settles after freeing memory; then the memory
        // still held (the run's baseline) is read.
        let settle = self.req.settle;
        let (_, socket) = tokio::join!(tokio::time::sleep(settle), self.open_socket());
        match self.state.client().system_stats().await {
            Ok(s) => self.baseline = s.primary().map(|d| d.used()),
            Err(e) => self.warn(format!(
                "GET /system_stats after /free failed, no memory baseline: {e}"
            )),
        }
        self.submit_and_follow(socket).await
    }

    /// Keeps the stats taken before the run; an outcome when the server is unreachable.
    fn keep_stats_before(&mut self, stats: Result<SystemStats, ClientError>) -> Option<Outcome> {
        match stats {
            Ok(s) => self.stats_before = Some(s),
            Err(e) if e.is_unreachable() => return Some(self.lost(e.to_string())),
            Err(e) => self.warn(format!("GET /system_stats before the run failed: {e}")),
        }
        None
    }

    /// From an opened (or failed) socket to the run's outcome: sampler, `POST /prompt`, follow,
    /// and the history reconciled alongside the stats after the run.
    async fn submit_and_follow(&mut self, socket: Result<(), ClientError>) -> Outcome {
        if let Err(e) = socket {
            if self.state.client().queue().await.is_err() {
                return self.lost(e.to_string());
            }
            self.warn(format!(
                "{e}; following the prompt by polling /queue and /history instead"
            ));
        }
        self.sampler = Some(Sampler::start(
            &self.plain,
            self.req.sample_interval,
            self.t0,
            self.server_pid(),
        ));
        if let Err(outcome) = self.submit().await {
            return outcome;
        }
        let end = self.follow().await;
        let lost = matches!(end, End::Lost(_));
        self.finish_console(lost).await;
        let unsubscribe = self.unsubscribe_logs(lost);
        if self.state.tracker().is_finished() || self.state.tracker().terminal().is_some() {
            let stats = self.stats_after_fetch(!lost);
            let (stats, (), unsubscribed) =
                tokio::join!(stats, self.reconcile_history(), unsubscribe);
            self.keep_stats_after(stats);
            self.keep_unsubscribe(unsubscribed);
            if let Some(Terminal::Success { .. }) = self.state.tracker().terminal() {
                let (w, t) = (&self.req.workflow, self.state.tracker());
                let cached = t.cached();
                let mut p = super::product::check(
                    w,
                    self.state.history(),
                    t.timeline(),
                    &self.streamed,
                    cached,
                );
                super::product::read_headers(self.state.client(), &mut p).await;
                self.flush_http();
                self.product = Some(p);
            }
        } else {
            let unsubscribed = unsubscribe.await;
            self.keep_unsubscribe(unsubscribed);
        }
        self.decide(end)
    }

    /// The run's outcome: how following ended, the prompt's terminal event, and a partial
    /// rejection (an accepted prompt with `node_errors`). The one place an outcome of a
    /// submitted prompt is decided.
    fn decide(&mut self, end: End) -> Outcome {
        let interrupted = |t: Option<&Terminal>| match t {
            Some(Terminal::Interrupted(i)) => (
                Some(i.node_id.clone()),
                Some(i.node_type.clone()),
                i.executed.clone(),
            ),
            _ => (None, None, Vec::new()),
        };
        match end {
            End::Cancelled { removed } => {
                let (node_id, node_type, executed) = interrupted(self.state.tracker().terminal());
                Outcome::Interrupted(Interruption {
                    by: InterruptedBy::User,
                    node_id,
                    node_type,
                    executed,
                    removed_from_queue: removed,
                })
            }
            End::Timeout(mut info) => {
                if matches!(
                    self.state.tracker().terminal(),
                    Some(Terminal::Interrupted(_))
                ) {
                    info.interrupt_confirmed = true;
                }
                Outcome::Timeout(info)
            }
            End::Hang(mut info) => {
                if matches!(
                    self.state.tracker().terminal(),
                    Some(Terminal::Interrupted(_))
                ) {
                    info.interrupt_confirmed = true;
                }
                Outcome::Hang(info)
            }
            End::Lost(info) => Outcome::ServerLost(info),
            End::Protocol(message) => protocol_error(message),
            End::Finished => {
                let run = match self.state.tracker().terminal().cloned() {
                    // Success said on the socket (or by the jobs API) with no /history entry:
                    // what ran and what it wrote cannot be checked (issue #39) — unknown.
                    Some(Terminal::Success { .. }) if self.state.history().is_none() => {
                        Outcome::ServerLost(ServerLostInfo {
                            reason: "the server reported success but /history has no entry for \
                                     the prompt: its end and its product cannot be checked, so \
                                     the run is unknown, not passed"
                                .into(),
                            submitted: true,
                            last_node: self.last_node(),
                        })
                    }
                    Some(Terminal::Success { .. }) => self
                        .product
                        .as_ref()
                        .and_then(super::product::Product::incomplete)
                        .map_or(Outcome::Passed, Outcome::IncompleteOutput),
                    Some(Terminal::Error(e)) => Outcome::Failed(trim_current_inputs(*e)),
                    Some(t @ Terminal::Interrupted(_)) => {
                        let (node_id, node_type, executed) = interrupted(Some(&t));
                        Outcome::Interrupted(Interruption {
                            by: InterruptedBy::Other,
                            node_id,
                            node_type,
                            executed,
                            removed_from_queue: false,
                        })
                    }
                    None => Outcome::ServerLost(ServerLostInfo {
                        reason: "the server ended the prompt without a success, error or \
                                 interrupt event, and /history has no entry for it"
                            .into(),
                        submitted: true,
                        last_node: self.last_node(),
                    }),
                };
                match self.partial.take() {
                    Some(mut rejection) => {
                        rejection.partial_run = Some(run.kind());
                        Outcome::Rejected(rejection)
                    }
                    None => run,
                }
            }
        }
    }

    fn lost(&mut self, reason: String) -> Outcome {
        Outcome::ServerLost(ServerLostInfo {
            reason,
            submitted: self.state.submitted(),
            last_node: self.last_node(),
        })
    }

    pub(super) fn last_node(&self) -> Option<String> {
        self.state
            .tracker()
            .current_node()
            .or_else(|| {
                self.state
                    .tracker()
                    .timeline()
                    .iter()
                    .rev()
                    .find(|n| !n.cached)
            })
            .map(|n| n.node_id.clone())
    }

    /// Polls `/queue` until nothing runs or waits (other clients' work is never touched).
    async fn wait_idle(&mut self) -> Option<Outcome> {
        self.phase("waiting until the server is idle");
        let deadline = Instant::now() + self.req.queue_timeout;
        let mut unreachable_since: Option<Instant> = None;
        loop {
            match self.state.client().queue().await {
                Ok(q) if q.is_idle() => return None,
                Ok(q) => {
                    unreachable_since = None;
                    let ahead = q.queue_running.len() + q.queue_pending.len();
                    self.saw_ahead(ahead);
                    self.event(&RunEvent::Queued { ahead });
                }
                Err(e) if e.is_unreachable() => {
                    let since = *unreachable_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > self.req.reconnect_window {
                        return Some(self.lost(e.to_string()));
                    }
                }
                Err(e) => self.warn(format!("GET /queue failed: {e}")),
            }
            self.flush_http();
            if self.is_cancelled() {
                return Some(Outcome::Interrupted(Interruption {
                    by: InterruptedBy::User,
                    node_id: None,
                    node_type: None,
                    executed: Vec::new(),
                    removed_from_queue: false,
                }));
            }
            if Instant::now() >= deadline {
                self.warn(format!(
                    "the server was still busy after {}s; submitting anyway, so the run may not be cold",
                    self.req.queue_timeout.as_secs()
                ));
                return None;
            }
            tokio::time::sleep(self.req.poll_interval.min(Duration::from_millis(250))).await;
        }
    }

    fn is_cancelled(&self) -> bool {
        self.req.cancel.as_ref().is_some_and(|c| *c.borrow())
    }

    /// `PATCH /internal/logs/subscribe` for a new socket, so the console comes on it as `logs`
    /// frames. A server without the route is noted once and the run goes on without a console.
    async fn subscribe_logs(&mut self, client_id: &str) {
        if (self.logs == Some(false) && self.logs_note.is_some()) || self.state.socket_dropped() {
            // After a drop, lines on a new socket cannot be placed against our prompt's events
            // (they stay on the old one): the backfill from /internal/logs/raw fills the gap.
            return;
        }
        match self.state.client().logs_subscribe(client_id, true).await {
            Ok(true) => self.logs = Some(true),
            Ok(false) => {
                self.logs = Some(false);
                let text = "the server has no /internal/logs (an older ComfyUI, or a proxy that \
                            does not pass it): the run has no server console";
                self.note(text);
                self.logs_note = Some(text.into());
            }
            Err(e) => {
                let text = format!("PATCH /internal/logs/subscribe failed ({e}): the run's server console may be missing");
                self.note(&text);
                if self.logs != Some(true) {
                    self.logs = Some(false);
                    self.logs_note = Some(text);
                }
            }
        }
        self.flush_http();
    }

    /// Takes the console lines that follow our end event (`Prompt executed` comes after
    /// `executing {node: null}` on the socket), then backfills from `/internal/logs/raw` what a
    /// dropped socket missed.
    async fn finish_console(&mut self, lost: bool) {
        if self.logs != Some(true) {
            return;
        }
        self.sync_console();
        let finished =
            self.state.tracker().is_finished() || self.state.tracker().terminal().is_some();
        if finished {
            self.console.ended();
        }
        if finished && !self.console.is_done() {
            // Bounded: a server that never prints the line costs at most this.
            let deadline = Instant::now() + Duration::from_secs(2);
            while !self.console.is_done() {
                let Some(sock) = self.state.socket_mut() else {
                    break;
                };
                match tokio::time::timeout_at(deadline.into(), sock.next_frame()).await {
                    Ok(frame) => {
                        let closed = matches!(frame, WsFrame::Closed(_));
                        self.handle_frame(frame);
                        if closed {
                            self.state.socket_lost();
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        if self.console.is_done() || lost || !self.state.submitted() {
            return;
        }
        // Not recorded in raw.http: the ring buffer holds other prompts' lines too.
        match self.plain.logs_raw().await {
            Ok(Some(raw)) => {
                let before = self.console.len();
                self.console.backfill(&raw.entries, self.queue.max_ahead);
                let added = self.console.len() - before;
                self.note(&format!(
                    "GET /internal/logs/raw: {added} console line(s) the socket missed"
                ));
            }
            Ok(None) => self.note("GET /internal/logs/raw: the server has no such route"),
            Err(e) => self.note(&format!("GET /internal/logs/raw failed: {e}")),
        }
    }

    /// `PATCH /internal/logs/subscribe {enabled: false}` for the open socket (run alongside the
    /// after-run requests).
    fn unsubscribe_logs(
        &self,
        lost: bool,
    ) -> impl std::future::Future<Output = Option<Result<bool, ClientError>>> {
        let client = self.state.client().clone();
        let id = match (
            self.state.socket(),
            self.logs,
            lost || self.state.socket_dropped(),
        ) {
            (Some(s), Some(true), false) => Some(s.client_id().to_string()),
            _ => None,
        };
        async move {
            match id {
                Some(id) => Some(client.logs_subscribe(&id, false).await),
                None => None,
            }
        }
    }

    fn keep_unsubscribe(&mut self, answer: Option<Result<bool, ClientError>>) {
        if let Some(Err(e)) = answer {
            self.note(&format!("PATCH /internal/logs/subscribe (off) failed: {e}"));
        }
        self.flush_http();
    }

    /// Tells the console collector where our prompt is (by the events seen so far).
    fn sync_console(&mut self) {
        if self.state.tracker().started_ms().is_some() {
            self.console.started();
        }
        if self.state.tracker().terminal().is_some() {
            self.console.ended();
        }
    }

    /// Opens a socket with a fresh session id and waits for the server's greeting.
    pub(super) async fn open_socket(&mut self) -> Result<(), ClientError> {
        let client_id = Uuid::new_v4().to_string();
        let mut sock = self.state.client().connect_ws(&client_id).await?;
        let socket = self.state.count_socket();
        self.raw.client_ids.push(client_id.clone());
        let t_ms = self.ms();
        self.obs.on_raw(&RawEvent::Ws {
            t_ms,
            socket,
            dir: "open",
            kind: None,
            json: None,
            raw: None,
            size: None,
            event_type: None,
            client_id: Some(&client_id),
            reason: None,
        });
        // The greeting (`status` with our sid) shows the server registered the session.
        match tokio::time::timeout(Duration::from_secs(5), sock.next_frame()).await {
            Ok(WsFrame::Closed(reason)) => {
                return Err(ClientError::WebSocket {
                    url: format!("{}/ws", self.state.client().server_url()),
                    detail: format!("closed right after the handshake: {reason}"),
                })
            }
            Ok(frame) => {
                self.state.keep_socket(sock);
                self.handle_frame(frame);
            }
            Err(_) => {
                self.state.keep_socket(sock);
                self.warn("the server sent no greeting on the new WebSocket within 5 s".into());
            }
        }
        self.subscribe_logs(&client_id).await;
        Ok(())
    }

    /// `POST /prompt`, retrying a 5xx after checking the prompt did not get queued anyway.
    async fn submit(&mut self) -> Result<(), Outcome> {
        let client_id = match self.state.socket() {
            Some(s) => s.client_id().to_string(),
            None => Uuid::new_v4().to_string(),
        };
        let mut extra_data = Map::new();
        extra_data.insert("preview_method".into(), PREVIEW_METHOD_NONE.into());
        // The server's own measurement where it has one (`run/benchmark.rs`); ignored elsewhere.
        extra_data.insert(super::benchmark::BENCHMARK_KEY.into(), Value::Bool(true));
        let prompt = match self.req.workflow.to_value() {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let prompt_id = self.state.prompt_id().to_string();
        let body = PromptRequest {
            prompt: &prompt,
            client_id: &client_id,
            prompt_id: &prompt_id,
            extra_data,
        };
        self.phase("submitting");
        self.console.submitted();
        const ATTEMPTS: u32 = 3;
        for attempt in 1..=ATTEMPTS {
            let answer = self.state.client().submit(&body).await;
            self.flush_http();
            match answer {
                Ok(Submitted::Accepted(r)) => {
                    self.state.mark_submitted();
                    self.queue.submitted_ms = Some(self.ms());
                    self.queue.number = r.number.clone();
                    if !r.prompt_id.is_empty() && !is_canonical_prompt_id(&r.prompt_id) {
                        // ComfyUI keeps a client's id and names its own with UUIDs.
                        let answer = serde_json::json!({
                            "prompt_id": r.prompt_id, "number": r.number,
                            "node_errors": r.node_errors,
                        });
                        return Err(protocol_error(format!(
                            "POST /prompt answered a prompt id that is not a UUID ({}) for our \
                             prompt {}",
                            quoted(&answer),
                            self.state.prompt_id()
                        )));
                    }
                    if !r.prompt_id.is_empty() && r.prompt_id != self.state.prompt_id() {
                        self.warn(format!(
                            "the server renamed the prompt to {} (it ignores client prompt ids)",
                            r.prompt_id
                        ));
                        self.state.renamed(r.prompt_id.clone());
                    }
                    if !r.node_errors.is_empty() {
                        let mut nodes: Vec<&String> = r.node_errors.keys().collect();
                        nodes.sort();
                        let nodes: Vec<&str> = nodes.into_iter().map(String::as_str).collect();
                        self.warn(format!(
                            "the server accepted the prompt but dropped output branches with errors \
                             in nodes [{}]; the rest runs, but this is not a pass",
                            nodes.join(", ")
                        ));
                        self.partial = Some(Rejection {
                            http_status: 200,
                            error: PromptErrorInfo {
                                kind: "node_errors_in_accepted_prompt".into(),
                                message: format!(
                                    "Prompt accepted with node_errors in nodes [{}]; only the valid outputs ran",
                                    nodes.join(", ")
                                ),
                                details: String::new(),
                                extra_info: Value::Object(Map::new()),
                            },
                            node_errors: r.node_errors,
                            partial: true,
                            partial_run: None,
                        });
                    }
                    self.phase("submitted");
                    return Ok(());
                }
                Ok(Submitted::Rejected(mut r)) => {
                    if r.error.kind == INVALID_PROMPT_ID {
                        let why = explain_invalid_prompt_id(self.state.prompt_id());
                        self.warn(why.clone());
                        r.error.details = if r.error.details.is_empty() {
                            why
                        } else {
                            format!("{} ({why})", r.error.details)
                        };
                    }
                    return Err(Outcome::Rejected(Rejection {
                        http_status: 400,
                        error: r.error,
                        node_errors: r.node_errors,
                        partial: false,
                        partial_run: None,
                    }));
                }
                Ok(Submitted::ServerError { status, body: text }) => {
                    if self.prompt_is_known().await {
                        self.warn(format!(
                            "POST /prompt answered HTTP {status}, but the prompt is queued; following it"
                        ));
                        self.state.mark_submitted();
                        self.queue.submitted_ms = Some(self.ms());
                        return Ok(());
                    }
                    if attempt == ATTEMPTS {
                        return Err(Outcome::Rejected(Rejection {
                            http_status: status,
                            error: PromptErrorInfo {
                                kind: format!("http_{status}"),
                                message: format!(
                                    "POST /prompt answered HTTP {status} {ATTEMPTS} times: {}",
                                    text.trim()
                                ),
                                details: String::new(),
                                extra_info: Value::Object(Map::new()),
                            },
                            node_errors: Map::new(),
                            partial: false,
                            partial_run: None,
                        }));
                    }
                    self.warn(format!(
                        "POST /prompt answered HTTP {status} (attempt {attempt} of {ATTEMPTS}); retrying"
                    ));
                }
                Err(e) => {
                    if self.prompt_is_known().await {
                        self.warn(format!(
                            "POST /prompt failed ({e}), but the prompt is queued"
                        ));
                        self.state.mark_submitted();
                        self.queue.submitted_ms = Some(self.ms());
                        return Ok(());
                    }
                    if e.is_unreachable() || attempt == ATTEMPTS {
                        return Err(self.lost(e.to_string()));
                    }
                    self.warn(format!("POST /prompt failed: {e}; retrying"));
                }
            }
            tokio::time::sleep(Duration::from_millis(500) * 2u32.pow(attempt - 1)).await;
        }
        Err(self.lost("POST /prompt kept failing".into()))
    }

    /// True when our prompt id is in the queue or in history.
    async fn prompt_is_known(&mut self) -> bool {
        let known = match self.state.client().queue().await {
            Ok(q) if q.position(self.state.prompt_id()) != QueuePosition::Absent => true,
            _ => matches!(
                self.state.client().history(self.state.prompt_id()).await,
                Ok(Some(_))
            ),
        };
        self.flush_http();
        known
    }

    /// Fetches `/history/{id}` with backoff (it can lag the socket) and merges it.
    async fn reconcile_history(&mut self) {
        if self.state.history().is_some() {
            return;
        }
        self.phase("reconciling with /history");
        let mut delay = Duration::from_millis(100);
        for attempt in 1..=self.req.history_attempts {
            let answer = self.state.client().history(self.state.prompt_id()).await;
            self.flush_http();
            match answer {
                Ok(Some(entry)) => {
                    self.keep_history(entry);
                    return;
                }
                Ok(None) => {}
                Err(e) if e.is_unreachable() => {
                    self.warn(format!("/history unreachable after the run: {e}"));
                    return;
                }
                Err(e) => self.note(&format!("GET /history attempt {attempt} failed: {e}")),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        self.warn(format!(
            "/history has no entry for {} after {} attempts; the outcome comes from the socket alone",
            self.state.prompt_id(),
            self.req.history_attempts
        ));
    }

    pub(super) fn handle_frame(&mut self, frame: WsFrame) {
        let t_ms = self.ms();
        let socket = self.state.sockets_opened().saturating_sub(1);
        match frame {
            WsFrame::Text(text) => {
                let json: Option<Value> = serde_json::from_str(&text).ok();
                if let Some(logs) = json
                    .as_ref()
                    .filter(|j| j.get("type").and_then(Value::as_str) == Some(msg::LOGS))
                    .and_then(|j| serde_json::from_value::<LogsData>(j["data"].clone()).ok())
                {
                    // Console lines go to server.log, not to the record's frame list.
                    if self.raw.keep_line(t_ms, text.len()) {
                        self.obs.on_raw(&RawEvent::Ws {
                            t_ms,
                            socket,
                            dir: "in",
                            kind: Some("text"),
                            json: json.as_ref(),
                            raw: None,
                            size: None,
                            event_type: None,
                            client_id: None,
                            reason: None,
                        });
                    }
                    self.state.tracker_mut().feed_text(&text, t_ms);
                    if !self.state.socket_dropped() {
                        self.sync_console();
                        self.console.feed(&logs.entries);
                    }
                    return;
                }
                let events = self.state.tracker_mut().feed_text(&text, t_ms);
                let bytes = text.len();
                let record = WsTextRecord {
                    t_ms,
                    socket,
                    raw: json.is_none().then_some(text),
                    json,
                };
                // What is kept is capped (run/frames.rs); our prompt's events go last.
                if let Some(kept) = self.raw.keep_text(record, self.state.prompt_id(), bytes) {
                    self.obs.on_raw(&RawEvent::text_in(kept));
                }
                for ev in events {
                    if let TrackerEvent::Blocked { node, message } = &ev {
                        self.warnings.push(format!(
                            "node {node} blocked execution (non-fatal): {}",
                            message.trim()
                        ));
                    }
                    self.obs.on_event(&RunEvent::Tracker(ev));
                }
            }
            WsFrame::Binary { len, event_type } => {
                if self.raw.keep_line(t_ms, len) {
                    self.obs.on_raw(&RawEvent::Ws {
                        t_ms,
                        socket,
                        dir: "in",
                        kind: Some("binary"),
                        json: None,
                        raw: None,
                        size: Some(len),
                        event_type,
                        client_id: None,
                        reason: None,
                    });
                }
                self.state.tracker_mut().feed_binary(len);
                if let Some(n) = self.state.tracker().current_node() {
                    self.streamed.insert(n.node_id.clone());
                }
            }
            WsFrame::Closed(reason) => {
                self.obs.on_raw(&RawEvent::Ws {
                    t_ms,
                    socket,
                    dir: "closed",
                    kind: None,
                    json: None,
                    raw: None,
                    size: None,
                    event_type: None,
                    client_id: None,
                    reason: Some(&reason),
                });
                self.warn(format!(
                    "WebSocket closed during the run ({reason}); reconnecting with a new clientId"
                ));
            }
        }
    }

    pub(super) fn flush_http(&mut self) {
        let drained: Vec<(u64, HttpExchange)> = match self.pending_http.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(_) => return,
        };
        for (t_ms, exchange) in drained {
            self.obs.on_raw(&RawEvent::Http {
                t_ms,
                exchange: &exchange,
            });
            if let Some(last) = self.raw.http.last_mut() {
                let a = &last.exchange;
                if a.method == exchange.method
                    && a.path == exchange.path
                    && a.request_body == exchange.request_body
                    && a.status == exchange.status
                    && a.response_body == exchange.response_body
                    && a.response_text == exchange.response_text
                    && a.error == exchange.error
                {
                    last.repeats += 1;
                    continue;
                }
            }
            self.raw.http.push(HttpRecord {
                t_ms,
                repeats: 0,
                exchange,
            });
        }
    }

    fn phase(&mut self, text: &str) {
        self.obs.on_event(&RunEvent::Phase(text.to_string()));
        self.note(text);
    }

    pub(super) fn note(&mut self, text: &str) {
        let t_ms = self.ms();
        self.obs.on_raw(&RawEvent::Note { t_ms, text });
    }

    pub(super) fn warn(&mut self, text: String) {
        self.note(&text);
        self.obs.on_event(&RunEvent::Warning(text.clone()));
        self.warnings.push(text);
    }
}

use crate::units::now_rfc3339;
