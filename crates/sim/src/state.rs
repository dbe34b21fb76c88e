//! One server instance's state: queue, history, connected sockets, node-output cache and the
//! simulated GPU. A crash drops the instance; a restart makes a new one.

use super::memory::Gpu;
use super::nodes::Val;
use super::Shared;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;

/// A frame for one socket.
#[derive(Debug, Clone)]
pub(crate) enum Out {
    Text(String),
    Binary(Vec<u8>),
    /// Close the TCP connection without a close frame (socket-drop fault).
    Drop,
    /// Keep the frames that follow until [`Out::Release`] (socket-after-history fault).
    Hold,
    /// Send the held frames, in order, and stop holding.
    Release,
}

pub(crate) struct Client {
    pub conn: u64,
    pub tx: mpsc::UnboundedSender<Out>,
    pub preview_metadata: bool,
}

/// One queued prompt: `[number, prompt_id, prompt, extra_data, outputs_to_execute]`.
#[derive(Debug, Clone)]
pub(crate) struct QueueItem {
    pub number: Value,
    pub sort: f64,
    pub prompt_id: String,
    pub prompt: Value,
    pub extra_data: Value,
    pub outputs: Vec<String>,
}

impl QueueItem {
    pub fn to_json(&self) -> Value {
        json!([
            self.number,
            self.prompt_id,
            self.prompt,
            self.extra_data,
            self.outputs
        ])
    }

    pub fn client_id(&self) -> Option<String> {
        self.extra_data
            .get("client_id")
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// A cached node result.
#[derive(Debug, Clone)]
pub(crate) struct CacheEntry {
    pub outputs: Vec<Val>,
    /// The node's UI output (`executed.output`), if it had one.
    pub ui: Option<Value>,
}

pub(crate) struct State {
    pub number: i64,
    pub pending: Vec<QueueItem>,
    pub running: Option<QueueItem>,
    pub history: Vec<(String, Value)>,
    pub clients: HashMap<String, Client>,
    pub next_conn: u64,
    pub cache: HashMap<String, CacheEntry>,
    pub gpu: Gpu,
    pub interrupt: bool,
    /// Prompts this server started executing since it (re)started (the `hang-second-run`
    /// fault hangs the second).
    pub started: u64,
    /// Pending `/free` flags: (unload_models, free_memory).
    pub free_flags: Option<(bool, bool)>,
    /// (client_id, node) of the node executing now, for reconnect greetings.
    pub executing: Option<(Option<String>, String)>,
    pub temp_prefix: String,
    pub save_counters: HashMap<String, u64>,
    pub resets: u64,
    /// The machine is out of host RAM (a node's output did not fit): `/system_stats` reports
    /// RAM full until the simulated OOM killer ends the server.
    pub ram_exhausted: bool,
    /// `/system_stats` requests answered (the OOM kill waits until one saw the full RAM).
    pub stats_served: u64,
    /// Sockets subscribed to the console (`PATCH /internal/logs/subscribe`), with whether the
    /// terminal size was sent to them yet.
    pub log_subscribers: HashMap<String, bool>,
    /// The console's ring buffer (`GET /internal/logs/raw`), the last [`LOG_RING`] writes.
    pub log_ring: std::collections::VecDeque<Value>,
    /// Sizes and frames of written output files (`type/subfolder/filename`), for the
    /// containers `/view` serves.
    pub files: HashMap<String, super::media::SimFile>,
}

/// Writes kept by the console's ring buffer (ComfyUI's default).
pub(crate) const LOG_RING: usize = 300;

/// The terminal size ComfyUI reports with the first `logs` frame.
pub(crate) fn log_size() -> Value {
    json!({"cols": 80, "rows": 24})
}

/// The server's local time as ComfyUI prints it in console entries (no zone).
fn log_time() -> String {
    let now = jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.subsec_nanosecond() / 1000
    )
}

/// Host RAM the rest of the machine uses (OS, desktop, the Python interpreter and torch).
pub(crate) const HOST_RAM_BASE: u64 = 3 * super::GIB;

/// `GET /queue`'s `queue_remaining`.
impl State {
    pub fn queue_remaining(&self) -> usize {
        self.pending.len() + usize::from(self.running.is_some())
    }

    pub(crate) fn status_message(&self, sid: Option<&str>) -> Value {
        let mut data =
            json!({"status": {"exec_info": {"queue_remaining": self.queue_remaining()}}});
        if let Some(sid) = sid {
            data["sid"] = json!(sid);
        }
        json!({"type": "status", "data": data})
    }

    /// Sends a JSON message to one socket (dropped silently if it is not connected).
    pub(crate) fn send_to(&self, sid: &str, msg: &Value) {
        if let Some(c) = self.clients.get(sid) {
            let _ = c.tx.send(Out::Text(msg.to_string()));
        }
    }

    pub(crate) fn send_raw(&self, sid: Option<&str>, out: Out) {
        match sid {
            Some(sid) => {
                if let Some(c) = self.clients.get(sid) {
                    let _ = c.tx.send(out);
                }
            }
            None => {
                for c in self.clients.values() {
                    let _ = c.tx.send(out.clone());
                }
            }
        }
    }

    pub fn broadcast(&self, msg: &Value) {
        let text = msg.to_string();
        for c in self.clients.values() {
            let _ = c.tx.send(Out::Text(text.clone()));
        }
    }

    /// One console write: kept in the ring buffer and sent as a `logs` frame to every
    /// subscribed socket (the console is global: all subscribers get every prompt's lines).
    pub fn log(&mut self, m: &str) {
        let entry = json!({"t": log_time(), "m": m});
        self.log_ring.push_back(entry.clone());
        while self.log_ring.len() > LOG_RING {
            self.log_ring.pop_front();
        }
        self.log_subscribers
            .retain(|sid, _| self.clients.contains_key(sid));
        for (sid, sized) in self.log_subscribers.iter_mut() {
            let size = if *sized { Value::Null } else { log_size() };
            *sized = true;
            if let Some(c) = self.clients.get(sid) {
                let msg =
                    json!({"type": "logs", "data": {"entries": [entry.clone()], "size": size}});
                let _ = c.tx.send(Out::Text(msg.to_string()));
            }
        }
    }

    pub(crate) fn broadcast_status(&self) {
        self.broadcast(&self.status_message(None));
    }

    /// The five-letter random part of PreviewImage's temp file names.
    pub(crate) fn new_temp_prefix(&mut self) {
        self.resets += 1;
        let mut x = self.resets.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d;
        let mut s = String::from("ComfyUI_temp_");
        for _ in 0..5 {
            x ^= x >> 33;
            x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
            s.push((b'a' + (x % 26) as u8) as char);
        }
        self.temp_prefix = s;
    }

    pub(crate) fn next_counter(&mut self, prefix: &str) -> u64 {
        let c = self.save_counters.entry(prefix.to_string()).or_insert(0);
        *c += 1;
        *c
    }

    /// Host RAM in use as the simulator models it: the rest of the machine
    /// ([`HOST_RAM_BASE`]), model weights staged in RAM (a quarter of what is on the device), and
    /// every IMAGE tensor the node-output cache holds (ComfyUI keeps images in system RAM: decoded
    /// frames, upscales, interpolated frames), plus the page-locked copy of offloaded weights
    /// when pinned memory is on ([`Gpu::pinned_host`]). `POST /free` with `free_memory` clears
    /// the cache.
    pub fn host_ram_used(&self) -> u64 {
        let images: u64 = self
            .cache
            .values()
            .flat_map(|e| e.outputs.iter())
            .map(|v| match v {
                Val::Image(i) => i.bytes(),
                _ => 0,
            })
            .sum();
        HOST_RAM_BASE + self.gpu.resident() / 4 + self.gpu.pinned_host() + images
    }

    /// Applies pending `/free` flags (the worker does this when idle or between prompts).
    pub(crate) fn apply_free_flags(&mut self) {
        if let Some((unload, free)) = self.free_flags.take() {
            if unload || free {
                self.gpu.unload_all();
            }
            if free {
                self.cache.clear();
                self.new_temp_prefix();
            }
        }
    }

    /// Pops the next prompt by (number, prompt_id).
    pub(crate) fn take_next(&mut self) -> Option<QueueItem> {
        let idx = self
            .pending
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| {
                a.sort
                    .partial_cmp(&b.sort)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.prompt_id.cmp(&b.prompt_id))
            })
            .map(|(i, _)| i)?;
        Some(self.pending.remove(idx))
    }

    pub(crate) fn insert_history(&mut self, id: String, entry: Value) {
        self.history.retain(|(k, _)| k != &id);
        self.history.push((id, entry));
        if self.history.len() > 10_000 {
            self.history.remove(0);
        }
    }
}

/// Milliseconds since the epoch (ComfyUI's `timestamp`).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) struct Instance {
    pub shared: Arc<Shared>,
    state: Mutex<State>,
    pub wake: Notify,
    stop_tx: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Instance {
    /// A fresh server's state (empty queue, history and cache); `sim::launch` starts its
    /// listener and worker.
    pub fn new(shared: Arc<Shared>) -> Arc<Instance> {
        let (stop_tx, _) = watch::channel(false);
        let mut st = State {
            number: 0,
            pending: Vec::new(),
            running: None,
            history: Vec::new(),
            clients: HashMap::new(),
            next_conn: 0,
            cache: HashMap::new(),
            gpu: {
                let mut gpu = Gpu::new(shared.config.vram_bytes);
                gpu.lowvram = shared.lowvram();
                gpu.knobs = shared.config.launch.knobs(shared.config.profile);
                gpu
            },
            interrupt: false,
            started: 0,
            free_flags: None,
            executing: None,
            temp_prefix: String::new(),
            save_counters: HashMap::new(),
            resets: 0,
            ram_exhausted: false,
            stats_served: 0,
            log_subscribers: HashMap::new(),
            log_ring: std::collections::VecDeque::new(),
            files: HashMap::new(),
        };
        st.new_temp_prefix();
        Arc::new(Instance {
            shared,
            state: Mutex::new(st),
            wake: Notify::new(),
            stop_tx,
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// Keeps the server's tasks, so that [`Instance::stop`] aborts them and
    /// [`Instance::join`] waits for them.
    pub(crate) fn keep_tasks(&self, tasks: impl IntoIterator<Item = JoinHandle<()>>) {
        self.tasks.lock().expect("tasks lock").extend(tasks);
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("simulator state lock")
    }

    pub(crate) fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop_tx.subscribe()
    }

    pub(crate) fn is_stopped(&self) -> bool {
        *self.stop_tx.borrow()
    }

    /// Stops everything: listener, connections, worker.
    pub fn stop(&self) {
        let _ = self.stop_tx.send(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("tasks lock"));
        for t in &tasks {
            t.abort();
        }
        *self.tasks.lock().expect("tasks lock") = tasks;
        let mut st = self.lock();
        for c in st.clients.values() {
            let _ = c.tx.send(Out::Drop);
        }
        st.clients.clear();
    }

    pub async fn join(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("tasks lock"));
        for t in tasks {
            let _ = t.await;
        }
    }
}
