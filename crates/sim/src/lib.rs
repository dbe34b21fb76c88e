//! A ComfyUI-compatible server for tests, CI and machines without a GPU.
//!
//! The simulator owns: the HTTP routes and WebSocket protocol of ComfyUI 0.3.64 as captured in
//! `tests/fixtures/comfyui` (every route also under `/api`), prompt validation with the
//! server's 400/200 shapes, a queue with history and a node-output cache between prompts, and
//! a deterministic GPU memory model ([`memory`]) that makes workflows fail with
//! `torch.OutOfMemoryError` at a realistic stage ([`oom`]). Fault switches ([`Faults`]) make it
//! crash, drop sockets, delay history, answer 500 or send garbage frames.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use comfy_bisect_sim::{start, Faults, SimConfig};
//! let sim = start(SimConfig::default().with_vram_gib(12), "127.0.0.1:0".parse().unwrap()).await?;
//! println!("ComfyUI simulator on {}", sim.base_url());
//! sim.set_faults(Faults::default().with_drop_socket());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

/// The repository's `tests/fixtures` folder, for unit tests that compare with captures.
#[cfg(test)]
pub(crate) const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

mod exec;
pub mod flags;
mod http;
mod media;
pub mod memory;
pub mod nodes;
pub mod oom;
pub mod plant;
pub mod profile;
mod server;
mod state;
pub mod validate;

pub use flags::Launch;
pub use memory::{Stage, GIB, MIB};
pub use oom::Allocator;
pub use plant::{Condition, Plant};
pub use profile::Profile;

use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Fault switches. All off by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// The next prompt that starts executing kills the server mid-run: the listener and every
    /// connection close, queue and history are gone (one-shot; [`SimHandle::restart`] brings a
    /// fresh server back on the same port).
    pub crash_mid_run: bool,
    /// Every prompt closes its submitter's WebSocket mid-run (no close frame); the run goes on.
    pub drop_socket: bool,
    /// History entries appear this many real milliseconds after `executing {node: null}`.
    pub slow_history_ms: u64,
    /// A busy host (`busy-host=N`): the second half of every sampler's steps takes N times as
    /// long, as when another process takes the CPU or the card mid-run. Nothing about memory
    /// changes (no load line, no staging, the same device memory): a slowdown from outside.
    pub busy_host: u64,
    /// `POST /prompt` queues the prompt under an id of its own that is not a UUID
    /// (`job-N`) and answers that (`foreign-prompt-id`): no ComfyUI does (a client's id is
    /// kept, its own are UUIDs), a proxy in front might.
    pub foreign_prompt_id: bool,
    /// `GET /api/jobs/{id}` answers the job under another id (`foreign-job-id`): no ComfyUI
    /// does (`get_job` answers the id it was asked for), a caching proxy might.
    pub foreign_job_id: bool,
    /// `POST /prompt` answers 500 without queuing anything.
    pub prompt_500: bool,
    /// Non-JSON text frames and unknown binary frames are interleaved with each prompt's events.
    pub garbage_frames: bool,
    /// The prompts (1-based, counted in the order they start executing, across restarts) that
    /// kill the server mid-run, like [`Faults::crash_mid_run`] (`crash-on=3` or `crash-on=3:4`).
    pub crash_on: Vec<u64>,
    /// After a crash the server comes back by itself on the same port after this many real
    /// milliseconds, as under a supervisor (`revive-after=MS`).
    pub revive_after_ms: Option<u64>,
    /// Once the prompt with this ordinal (1-based, in execution order) has finished, the server
    /// reports and behaves as if restarted with `--lowvram` (`lowvram-after=N`): its
    /// environment fingerprint changes between two runs.
    pub lowvram_after: Option<u64>,
    /// Once the prompt with this ordinal (1-based) has finished, the server has one more custom
    /// node pack ([`EXTRA_PACK`]: its classes in `/object_info`, its script in `/extensions`),
    /// as after a restart with the pack installed (`pack-added-after=N`): the environment
    /// fingerprint changes and names the pack.
    pub pack_added_after: Option<u64>,
    /// Once the prompt with this ordinal (1-based) has finished, the server has one custom node
    /// pack fewer ([`REMOVED_PACK`], a pack of the custom-node fixture: its classes are gone
    /// from `/object_info` and validation rejects them), as after a restart without the pack
    /// (`pack-removed-after=N`): the environment fingerprint changes and names the pack.
    pub pack_removed_after: Option<u64>,
    /// Device memory not given back after each prompt (`leak=SIZE`): held outside PyTorch's
    /// allocator until the server restarts, so the memory in use after `/free` grows from run
    /// to run.
    pub leak_bytes: u64,
    /// A cache that grows across steps (`step-growth=SIZE`): every sampling step after the
    /// first keeps SIZE more device memory until the sampler ends, so the sampling peak rises
    /// with the step count and an OOM there shows at many steps but not at few
    /// (`sample_middle`).
    pub step_growth_bytes: u64,
    /// A CUDA OOM planted at one stage once a condition holds in the submitted graph
    /// (`plant=STAGE:class=NAME[>=K]` or `plant=STAGE:pixels>=N`, see [`Plant`]): puts a
    /// failure of a chosen stage at a chosen step of a ladder.
    pub plant: Option<Plant>,
    /// Each prompt's frames to its submitter's socket are held back (in order) until a
    /// `GET /history` answer has included the prompt: the client learns the end from history
    /// before it can read any of the socket's frames.
    pub socket_after_history: bool,
    /// The server has no `/internal/logs` routes (an older ComfyUI or a proxy): 404.
    pub no_internal_logs: bool,
    /// The server has no `/experiment/models` routes (an older ComfyUI or a proxy): 404, so
    /// clients list model files through `/models/{folder}` (names, no sizes).
    pub no_experiment_models: bool,
    /// Output nodes that run but silently produce nothing (no `executed` frame, no history
    /// output, no file), and the prompt still succeeds: every node of a class (`CLASS`), or the
    /// one node with that id (`#ID`, e.g. `#22`), see [`Faults::silences`].
    pub missing_output: Option<String>,
    /// Animated and video output files carry this many frames fewer than their node received
    /// (at least one), and the prompt still succeeds (`short-video=N`).
    pub short_video: u64,
    /// `/view` ignores `Range` and always answers 200 with the whole file, like a proxy that
    /// does not pass ranges on (`no-range`; ComfyUI itself honours them).
    pub no_range: bool,
    /// Every socket goes silent after its greeting (`status`): it stays open and accepts
    /// frames, but nothing more reaches the client, like a proxy that stopped forwarding a
    /// WebSocket (`silent-socket`; issue #29's hung socket).
    pub silent_socket: bool,
    /// `GET /queue` always answers both lists empty, like a caching proxy: no prompt is ever
    /// seen running or pending (`queue-hides`).
    pub queue_hides: bool,
    /// `GET /history/{id}` answers aiohttp's HTTP 500 (`history-500`).
    pub history_500: bool,
    /// A hostile server (issue #29): this text (control characters, terminal escapes, bidi
    /// overrides…) is appended to every free text the server reports — `comfyui_version`, the
    /// device name, a custom node pack's name (one more pack in `/object_info`), a failed
    /// node's `exception_message` and `node_type` and the console. Set in code only (not in
    /// the `--faults` list: it holds control characters).
    pub hostile_text: Option<String>,
    /// When each prompt starts executing, its submitter's socket gets this many small frames
    /// of other traffic (`ws-flood=N`, issue #29's endless frames): in turn the same `status`
    /// frame again, another prompt's `progress` and a binary preview — the shapes of the
    /// captures in `tests/fixtures/comfyui/` — then the prompt runs on.
    pub ws_flood: u64,
    /// Every image an output node writes is one flat colour (`flat-product`): the run
    /// succeeds and the PNGs `/view` serves decode to a single colour, a degenerate product.
    pub flat_product: bool,
    /// Every image an output node writes is black, as a VAE decode that produced NaN saves
    /// (`nan-decode`): the run succeeds, the PNGs decode to all-black pixels, and the console
    /// has numpy's cast warning from the saver.
    pub nan_decode: bool,
    /// The second prompt the server executes after it (re)started stops making progress
    /// after its first sampling step (`hang-second-run`): no more `progress` frames, no node
    /// change, nothing on the console — "the first run is fine, the second hangs" of ComfyUI
    /// issues #15255 and #15269. `/interrupt` ends it, unless [`Faults::hang_ignores_interrupt`].
    /// A restart clears it (the next hang is again the second prompt after the restart).
    pub hang_second_run: bool,
    /// The hung prompt ignores `/interrupt` too (`hang-second-run=ignore-interrupt`): only a
    /// restart ends it.
    pub hang_ignores_interrupt: bool,
    /// Every sampler fails after its first step with the dynamic-VRAM offloader's error
    /// (`aimdo-error`): comfy-aimdo's C-level `VRAM Allocation failed (non OOM)` line on the
    /// console, then `RuntimeError: Fault failed: 2` as the node's exception (the shape of
    /// ComfyUI issue #15269).
    pub aimdo_error: bool,
}

impl Faults {
    pub fn with_crash_mid_run(mut self) -> Self {
        self.crash_mid_run = true;
        self
    }
    pub fn with_drop_socket(mut self) -> Self {
        self.drop_socket = true;
        self
    }
    pub fn with_busy_host(mut self, factor: u64) -> Self {
        self.busy_host = factor;
        self
    }
    pub fn with_slow_history_ms(mut self, ms: u64) -> Self {
        self.slow_history_ms = ms;
        self
    }
    pub fn with_prompt_500(mut self) -> Self {
        self.prompt_500 = true;
        self
    }
    pub fn with_garbage_frames(mut self) -> Self {
        self.garbage_frames = true;
        self
    }
    /// Crash during the prompts with these ordinals (1-based, in execution order).
    pub fn with_crash_on(mut self, ordinals: &[u64]) -> Self {
        self.crash_on = ordinals.to_vec();
        self
    }
    /// Switch to `--lowvram` once prompt `n` (1-based) has finished.
    pub fn with_lowvram_after(mut self, n: u64) -> Self {
        self.lowvram_after = Some(n);
        self
    }
    /// Load [`EXTRA_PACK`] once prompt `n` (1-based) has finished.
    pub fn with_pack_added_after(mut self, n: u64) -> Self {
        self.pack_added_after = Some(n);
        self
    }
    /// Unload [`REMOVED_PACK`] once prompt `n` (1-based) has finished.
    pub fn with_pack_removed_after(mut self, n: u64) -> Self {
        self.pack_removed_after = Some(n);
        self
    }
    /// Keep `bytes` of device memory after every prompt.
    pub fn with_leak_bytes(mut self, bytes: u64) -> Self {
        self.leak_bytes = bytes;
        self
    }
    /// Come back by itself `ms` milliseconds after a crash.
    pub fn with_revive_after_ms(mut self, ms: u64) -> Self {
        self.revive_after_ms = Some(ms);
        self
    }
    pub fn with_socket_after_history(mut self) -> Self {
        self.socket_after_history = true;
        self
    }
    pub fn with_no_internal_logs(mut self) -> Self {
        self.no_internal_logs = true;
        self
    }
    pub fn with_no_experiment_models(mut self) -> Self {
        self.no_experiment_models = true;
        self
    }
    /// Output nodes of class `class` produce nothing.
    pub fn with_missing_output(mut self, class: &str) -> Self {
        self.missing_output = Some(class.to_string());
        self
    }
    /// The output node with id `id` (and no other) produces nothing: a node that only some
    /// variants have fails just the runs that have it.
    pub fn with_missing_output_node(mut self, id: &str) -> Self {
        self.missing_output = Some(format!("#{id}"));
        self
    }
    /// Whether [`Faults::missing_output`] silences node `id` of class `class`.
    pub fn silences(&self, id: &str, class: &str) -> bool {
        match self.missing_output.as_deref() {
            Some(m) => match m.strip_prefix('#') {
                Some(node) => node == id,
                None => m == class,
            },
            None => false,
        }
    }
    /// Sockets go silent after their greeting.
    pub fn with_silent_socket(mut self) -> Self {
        self.silent_socket = true;
        self
    }
    /// `/queue` always answers empty.
    pub fn with_queue_hides(mut self) -> Self {
        self.queue_hides = true;
        self
    }
    /// `/history/{id}` answers 500.
    pub fn with_history_500(mut self) -> Self {
        self.history_500 = true;
        self
    }

    /// `text` appended to every free text the server reports (see [`Faults::hostile_text`]).
    pub fn with_hostile_text(mut self, text: &str) -> Self {
        self.hostile_text = Some(text.to_string());
        self
    }
    /// `n` small frames of other traffic at the start of every prompt.
    pub fn with_ws_flood(mut self, n: u64) -> Self {
        self.ws_flood = n;
        self
    }
    /// `/view` ignores `Range`.
    pub fn with_no_range(mut self) -> Self {
        self.no_range = true;
        self
    }
    /// Animated and video files lose `n` frames.
    pub fn with_short_video(mut self, n: u64) -> Self {
        self.short_video = n;
        self
    }
    /// Every written image is one flat colour.
    pub fn with_flat_product(mut self) -> Self {
        self.flat_product = true;
        self
    }
    /// Every written image is black (a NaN decode).
    pub fn with_nan_decode(mut self) -> Self {
        self.nan_decode = true;
        self
    }
    /// The second prompt after each (re)start hangs after its first sampling step; with
    /// `ignore_interrupt` it ignores `/interrupt` too.
    pub fn with_hang_second_run(mut self, ignore_interrupt: bool) -> Self {
        self.hang_second_run = true;
        self.hang_ignores_interrupt = ignore_interrupt;
        self
    }
    /// Samplers fail with comfy-aimdo's `Fault failed` after their first step.
    pub fn with_aimdo_error(mut self) -> Self {
        self.aimdo_error = true;
        self
    }
    /// A failure planted at a stage once a condition holds (see [`Faults::plant`]).
    pub fn with_plant(mut self, plant: Plant) -> Self {
        self.plant = Some(plant);
        self
    }

    /// Parses the `--faults` list: `crash-mid-run,drop-socket,slow-history[=MS],busy-host=N,prompt-500,foreign-prompt-id,foreign-job-id,
    /// garbage-frames,socket-after-history,no-internal-logs,no-experiment-models,
    /// missing-output=CLASS|#ID,short-video=N,no-range,silent-socket,queue-hides,history-500,
    /// ws-flood=N,flat-product,nan-decode,hang-second-run[=ignore-interrupt],aimdo-error,
    /// crash-on=N[:N…],
    /// revive-after=MS,lowvram-after=N,pack-added-after=N,pack-removed-after=N,leak=SIZE,
    /// step-growth=SIZE,plant=STAGE:class=NAME[>=K]|pixels>=N`
    /// (`slow-history` defaults to 2000 ms; `none` or empty = no faults).
    pub fn parse(list: &str) -> Result<Faults, String> {
        let mut f = Faults::default();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, arg) = match item.split_once('=') {
                Some((n, a)) => (n.trim(), Some(a.trim())),
                None => (item, None),
            };
            match (name, arg) {
                ("none", None) => {}
                ("crash-mid-run", None) => f.crash_mid_run = true,
                ("drop-socket", None) => f.drop_socket = true,
                ("prompt-500", None) => f.prompt_500 = true,
                ("foreign-prompt-id", None) => f.foreign_prompt_id = true,
                ("foreign-job-id", None) => f.foreign_job_id = true,
                ("garbage-frames", None) => f.garbage_frames = true,
                ("socket-after-history", None) => f.socket_after_history = true,
                ("no-internal-logs", None) => f.no_internal_logs = true,
                ("no-experiment-models", None) => f.no_experiment_models = true,
                ("no-range", None) => f.no_range = true,
                ("silent-socket", None) => f.silent_socket = true,
                ("queue-hides", None) => f.queue_hides = true,
                ("history-500", None) => f.history_500 = true,
                ("flat-product", None) => f.flat_product = true,
                ("nan-decode", None) => f.nan_decode = true,
                ("hang-second-run", None) => f.hang_second_run = true,
                ("hang-second-run", Some("ignore-interrupt")) => {
                    f.hang_second_run = true;
                    f.hang_ignores_interrupt = true;
                }
                ("aimdo-error", None) => f.aimdo_error = true,
                ("missing-output", Some(target)) if !matches!(target, "" | "#") => {
                    f.missing_output = Some(target.to_string())
                }
                ("short-video", Some(n)) => {
                    f.short_video = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("--faults: short-video={n} is not a number of frames (≥ 1)")
                    })?
                }
                ("slow-history", None) => f.slow_history_ms = 2000,
                ("busy-host", Some(n)) => {
                    f.busy_host = n.parse().ok().filter(|n| *n > 1).ok_or_else(|| {
                        format!("--faults: busy-host={n} is not a slowdown factor (a whole number ≥ 2)")
                    })?
                }
                ("ws-flood", Some(n)) => {
                    f.ws_flood = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("--faults: ws-flood={n} is not a number of frames (≥ 1)")
                    })?
                }
                ("crash-on", Some(list)) => {
                    f.crash_on = list
                        .split(':')
                        .map(|n| n.trim().parse::<u64>().ok().filter(|n| *n > 0))
                        .collect::<Option<Vec<u64>>>()
                        .ok_or_else(|| {
                            format!(
                                "--faults: crash-on={list} is not a list of prompt numbers \
                                 (1-based, colon-separated: crash-on=3:4)"
                            )
                        })?
                }
                ("lowvram-after", Some(n)) => f.lowvram_after = Some(ordinal(name, n)?),
                ("pack-added-after", Some(n)) => f.pack_added_after = Some(ordinal(name, n)?),
                ("pack-removed-after", Some(n)) => f.pack_removed_after = Some(ordinal(name, n)?),
                ("step-growth", Some(size)) => {
                    f.step_growth_bytes =
                        parse_size(size).map_err(|e| format!("--faults: step-growth: {e}"))?
                }
                ("plant", Some(arg)) => f.plant = Some(Plant::parse(arg)?),
                ("leak", Some(size)) => {
                    f.leak_bytes = parse_size(size).map_err(|e| format!("--faults: leak: {e}"))?
                }
                ("revive-after", Some(ms)) => {
                    f.revive_after_ms = Some(ms.trim_end_matches("ms").parse().map_err(|_| {
                        format!("--faults: revive-after={ms} is not a number of milliseconds")
                    })?)
                }
                ("slow-history", Some(ms)) => {
                    f.slow_history_ms = ms.trim_end_matches("ms").parse().map_err(|_| {
                        format!("--faults: slow-history={ms} is not a number of milliseconds")
                    })?
                }
                _ => {
                    return Err(format!(
                        "--faults: unknown fault '{item}'; known: crash-mid-run, drop-socket, \
                         slow-history[=MS], busy-host=N, prompt-500, foreign-prompt-id, foreign-job-id, garbage-frames, socket-after-history, \
                         no-internal-logs, no-experiment-models, missing-output=CLASS|#ID, short-video=N, no-range, \
                         silent-socket, queue-hides, history-500, ws-flood=N, flat-product, nan-decode, \
                         hang-second-run[=ignore-interrupt], aimdo-error, crash-on=N[:N…], revive-after=MS, \
                         lowvram-after=N, pack-added-after=N, pack-removed-after=N, leak=SIZE, \
                         step-growth=SIZE, plant=STAGE:class=NAME[>=K]|pixels>=N"
                    ))
                }
            }
        }
        Ok(f)
    }
}

/// The faults as the `--faults` list that [`Faults::parse`] reads back (`none` when there are
/// none): what `simulate` prints on start.
impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut items: Vec<String> = Vec::new();
        let mut flag = |on: bool, name: &str| {
            if on {
                items.push(name.to_string());
            }
        };
        flag(self.crash_mid_run, "crash-mid-run");
        flag(self.drop_socket, "drop-socket");
        flag(self.prompt_500, "prompt-500");
        flag(self.foreign_prompt_id, "foreign-prompt-id");
        flag(self.foreign_job_id, "foreign-job-id");
        flag(self.garbage_frames, "garbage-frames");
        flag(self.socket_after_history, "socket-after-history");
        flag(self.no_internal_logs, "no-internal-logs");
        flag(self.no_experiment_models, "no-experiment-models");
        flag(self.no_range, "no-range");
        flag(self.silent_socket, "silent-socket");
        flag(self.queue_hides, "queue-hides");
        flag(self.history_500, "history-500");
        flag(self.flat_product, "flat-product");
        flag(self.nan_decode, "nan-decode");
        flag(
            self.hang_second_run && !self.hang_ignores_interrupt,
            "hang-second-run",
        );
        flag(
            self.hang_second_run && self.hang_ignores_interrupt,
            "hang-second-run=ignore-interrupt",
        );
        flag(self.aimdo_error, "aimdo-error");
        if self.slow_history_ms > 0 {
            items.push(format!("slow-history={}", self.slow_history_ms));
        }
        if self.busy_host > 0 {
            items.push(format!("busy-host={}", self.busy_host));
        }
        if !self.crash_on.is_empty() {
            let list: Vec<String> = self.crash_on.iter().map(u64::to_string).collect();
            items.push(format!("crash-on={}", list.join(":")));
        }
        for (name, value) in [
            ("revive-after", self.revive_after_ms),
            ("lowvram-after", self.lowvram_after),
            ("pack-added-after", self.pack_added_after),
            ("pack-removed-after", self.pack_removed_after),
        ] {
            if let Some(v) = value {
                items.push(format!("{name}={v}"));
            }
        }
        if self.leak_bytes > 0 {
            items.push(format!("leak={}", self.leak_bytes));
        }
        if self.step_growth_bytes > 0 {
            items.push(format!("step-growth={}", self.step_growth_bytes));
        }
        if let Some(plant) = &self.plant {
            items.push(format!("plant={plant}"));
        }
        if let Some(target) = &self.missing_output {
            items.push(format!("missing-output={target}"));
        }
        if self.short_video > 0 {
            items.push(format!("short-video={}", self.short_video));
        }
        if self.ws_flood > 0 {
            items.push(format!("ws-flood={}", self.ws_flood));
        }
        if items.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&items.join(","))
        }
    }
}

/// The line `simulate` prints when it listens: the URL, the VRAM and the faults as the
/// `--faults` list.
pub fn banner(url: &str, config: &SimConfig) -> String {
    let mut flags = config.launch.args.join(" ");
    if let Some(conf) = &config.launch.alloc_conf {
        flags = format!("PYTORCH_CUDA_ALLOC_CONF={conf} {flags}");
    }
    let flags = if flags.trim().is_empty() {
        String::new()
    } else {
        format!(", flags: {}", flags.trim())
    };
    format!(
        "ComfyUI simulator listening on {url} ({} VRAM, faults: {}{flags}); Ctrl-C or SIGTERM to stop",
        oom::format_size(config.vram_bytes),
        config.faults
    )
}

/// The prompt number (1-based) of fault `name=n`.
fn ordinal(name: &str, n: &str) -> Result<u64, String> {
    n.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("--faults: {name}={n} is not a prompt number (1-based)"))
}

/// Simulator settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Total device memory.
    pub vram_bytes: u64,
    /// System RAM reported by `/system_stats`. What is in use moves with the memory model
    /// (weights staged in RAM, IMAGE outputs held by the cache); a node whose images do not fit
    /// has the server killed, as the kernel's OOM killer would.
    pub ram_bytes: u64,
    pub faults: Faults,
    /// Real seconds per simulated second (0.001 by default, so a 20-step sampler takes
    /// milliseconds). 0 runs as fast as possible.
    pub time_scale: f64,
    /// Allocator backend: decides the OOM wording and the device name.
    pub allocator: Allocator,
    /// Imitate `--lowvram`: partial loads keep more room for activations (fewer first-step
    /// OOMs, slower steps); shown in `system_stats.system.argv`.
    pub lowvram: bool,
    /// Stand in for an authenticating reverse proxy: every request (HTTP and the WebSocket
    /// handshake) without this header (name case-insensitive, value exact) gets 401.
    pub require_header: Option<(String, String)>,
    /// The ComfyUI folder `GET /internal/folder_paths` names (`<root>/models/checkpoints` …).
    /// By default a folder that exists on no machine ([`SIM_MODELS_ROOT`]), so the simulator
    /// looks like a remote server; point it at a folder with model files to hash them.
    pub models_root: std::path::PathBuf,
    /// Which ComfyUI it answers as (0.3.64 by default; see [`Profile`]).
    pub profile: Profile,
    /// The ComfyUI flags and allocator environment it was started with (see [`Launch`]):
    /// shown in `system.argv`, honoured by the memory model.
    pub launch: Launch,
    /// The simulator process's own command line, shown as `system.argv` in place of the
    /// ComfyUI-shaped one: ComfyUI reports its `sys.argv`, the words of its own process, and a
    /// simulator run as a process (`comfy-bisect simulate`) does the same, so a tool can match
    /// the server that answers to the process listening on its port.
    pub process_argv: Option<Vec<String>>,
}

/// The default [`SimConfig::models_root`]: a path that exists nowhere.
pub const SIM_MODELS_ROOT: &str = "/comfyui-simulator-remote/ComfyUI";

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            vram_bytes: 24 * GIB,
            ram_bytes: 64 * GIB,
            faults: Faults::default(),
            time_scale: 0.001,
            allocator: Allocator::Native,
            lowvram: false,
            require_header: None,
            models_root: SIM_MODELS_ROOT.into(),
            profile: Profile::default(),
            launch: Launch::default(),
            process_argv: None,
        }
    }
}

impl SimConfig {
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }
    pub fn with_vram_gib(mut self, gib: u64) -> Self {
        self.vram_bytes = gib * GIB;
        self
    }
    pub fn with_vram_bytes(mut self, bytes: u64) -> Self {
        self.vram_bytes = bytes;
        self
    }
    pub fn with_ram_bytes(mut self, bytes: u64) -> Self {
        self.ram_bytes = bytes;
        self
    }
    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.time_scale = scale;
        self
    }
    pub fn with_allocator(mut self, allocator: Allocator) -> Self {
        self.allocator = allocator;
        self
    }
    /// Serves `root`'s model folders in `GET /internal/folder_paths` (see
    /// [`SimConfig::models_root`]).
    pub fn with_models_root(mut self, root: impl Into<std::path::PathBuf>) -> Self {
        self.models_root = root.into();
        self
    }
    /// Answers as `profile` (see [`Profile`]).
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }
    /// Started with these ComfyUI flags and allocator environment (see [`Launch::parse`]).
    pub fn with_launch(mut self, launch: Launch) -> Self {
        self.launch = launch;
        self
    }
    pub fn with_lowvram(mut self) -> Self {
        self.lowvram = true;
        self
    }
    /// Answers 401 to every request without header `name: value` (see
    /// [`SimConfig::require_header`]).
    pub fn with_required_header(mut self, name: &str, value: &str) -> Self {
        self.require_header = Some((name.to_ascii_lowercase(), value.to_string()));
        self
    }
}

/// Parses a byte size such as `24GiB`, `12 GB`, `8192MiB` (binary units; `GB` is read as GiB,
/// the way GPU memory is usually quoted).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 24GiB, 12GB, 8192MiB)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => MIB as f64,
        "g" | "gb" | "gib" => GIB as f64,
        "t" | "tb" | "tib" => (GIB * 1024) as f64,
        _ => {
            return Err(format!(
                "'{s}': unknown unit '{unit}' (use B, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    Ok((n * mult) as u64)
}

pub(crate) struct Shared {
    addr: SocketAddr,
    config: SimConfig,
    faults: Mutex<Faults>,
    submitted: Mutex<Vec<Value>>,
    current: Mutex<Option<Arc<state::Instance>>>,
    /// Prompts that started executing, across restarts (for [`Faults::crash_on`]).
    executed: std::sync::atomic::AtomicU64,
    /// `--lowvram` now (from the config, or switched on by [`Faults::lowvram_after`]).
    lowvram: std::sync::atomic::AtomicBool,
    /// [`EXTRA_PACK`] is loaded (switched on by [`Faults::pack_added_after`]).
    extra_pack: std::sync::atomic::AtomicBool,
    /// [`REMOVED_PACK`] is gone (switched on by [`Faults::pack_removed_after`]).
    pack_removed: std::sync::atomic::AtomicBool,
}

/// The custom node pack [`Faults::pack_added_after`] adds.
pub const EXTRA_PACK: &str = "ComfyUI-Sim-Extra-Pack";

/// The custom node pack [`Faults::pack_removed_after`] takes away: one of the custom-node
/// fixture's packs (`tests/fixtures/custom-nodes`) that no example workflow uses. While it is
/// loaded, `GET /extensions` lists its front-end script ([`REMOVED_PACK_SCRIPT`]), as a real
/// server lists the `web/` files of its packs.
pub const REMOVED_PACK: &str = "ComfyUI-VideoHelperSuite";

/// The front-end script of [`REMOVED_PACK`] in `GET /extensions` (the pack's `web/js/VHS.core.js`).
pub const REMOVED_PACK_SCRIPT: &str = "/extensions/ComfyUI-VideoHelperSuite/js/VHS.core.js";

impl Shared {
    /// Whether the server runs with `--lowvram` now.
    pub(crate) fn lowvram(&self) -> bool {
        self.lowvram.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether [`EXTRA_PACK`] is loaded now.
    pub(crate) fn extra_pack(&self) -> bool {
        self.extra_pack.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether [`REMOVED_PACK`] is gone now.
    pub(crate) fn pack_removed(&self) -> bool {
        self.pack_removed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The node definitions the server has now: the shipped ones (with the 2026 profile's V3
    /// classes), without [`REMOVED_PACK`] once it is gone (the classes of [`EXTRA_PACK`] are
    /// served apart).
    pub(crate) fn defs(&self) -> &'static nodes::Defs {
        if self.pack_removed() {
            nodes::defs_without_removed_pack()
        } else if self.config.profile == Profile::Y2026 {
            nodes::defs_2026()
        } else {
            nodes::defs()
        }
    }

    /// A prompt finished: applies [`Faults::pack_added_after`], [`Faults::pack_removed_after`]
    /// and [`Faults::lowvram_after`]; true when the server switched to `--lowvram`.
    pub(crate) fn prompt_finished(&self, ordinal: u64) -> bool {
        if self.faults().pack_added_after == Some(ordinal) {
            self.extra_pack
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if self.faults().pack_removed_after == Some(ordinal) {
            self.pack_removed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if self.faults().lowvram_after == Some(ordinal) && !self.lowvram() {
            self.lowvram
                .store(true, std::sync::atomic::Ordering::SeqCst);
            return true;
        }
        false
    }

    /// Counts a prompt that starts executing; its 1-based ordinal.
    pub(crate) fn next_execution(&self) -> u64 {
        self.executed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1
    }

    /// Brings a fresh server back on the same port, stopping the current one if it still runs.
    pub(crate) async fn relaunch(self: &Arc<Self>) -> std::io::Result<()> {
        if let Some(inst) = self.current.lock().expect("current lock").take() {
            inst.stop();
        }
        // The old listener closes asynchronously; retry briefly until the port is free.
        let mut last = None;
        for _ in 0..50 {
            match server::bind(self.addr) {
                Ok(listener) => {
                    let inst = launch(self.clone(), listener);
                    *self.current.lock().expect("current lock") = Some(inst);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("could not rebind")))
    }

    /// After a crash: with [`Faults::revive_after_ms`], a fresh server comes back by itself.
    pub(crate) fn crashed(self: &Arc<Self>) {
        if let Some(ms) = self.faults().revive_after_ms {
            let shared = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                if let Err(e) = shared.relaunch().await {
                    tracing::warn!("simulator could not come back after the crash: {e}");
                }
            });
        }
    }

    pub(crate) fn faults(&self) -> Faults {
        self.faults.lock().expect("faults lock").clone()
    }

    /// Clears the one-shot crash switch (it fired).
    pub(crate) fn crash_fired(&self) {
        self.faults.lock().expect("faults lock").crash_mid_run = false;
    }

    pub(crate) fn record_submission(&self, body: Value) {
        self.submitted.lock().expect("submitted lock").push(body);
    }
}

/// Starts a server on `listener`: a fresh [`state::Instance`], its accept loop
/// ([`server::accept_loop`]) and its worker ([`exec::worker`]).
fn launch(shared: Arc<Shared>, listener: tokio::net::TcpListener) -> Arc<state::Instance> {
    let inst = state::Instance::new(shared);
    let accept = tokio::spawn(server::accept_loop(inst.clone(), listener));
    let worker = tokio::spawn(exec::worker(inst.clone()));
    inst.keep_tasks([accept, worker]);
    inst
}

/// A running simulator.
pub struct SimHandle {
    shared: Arc<Shared>,
}

/// Starts a simulator bound to `bind` (port 0 picks a free port).
pub async fn start(config: SimConfig, bind: SocketAddr) -> std::io::Result<SimHandle> {
    let listener = server::bind(bind)?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        addr,
        faults: Mutex::new(config.faults.clone()),
        lowvram: std::sync::atomic::AtomicBool::new(config.lowvram || config.launch.lowvram()),
        extra_pack: std::sync::atomic::AtomicBool::new(false),
        pack_removed: std::sync::atomic::AtomicBool::new(false),
        config,
        submitted: Mutex::new(Vec::new()),
        current: Mutex::new(None),
        executed: std::sync::atomic::AtomicU64::new(0),
    });
    let inst = launch(shared.clone(), listener);
    *shared.current.lock().expect("current lock") = Some(inst);
    Ok(SimHandle { shared })
}

impl SimHandle {
    /// `http://127.0.0.1:PORT` (the address the server listens on).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Replaces the fault switches (takes effect for the next event).
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().expect("faults lock") = faults;
    }

    /// Every JSON body received on `POST /prompt`, in arrival order (across restarts).
    pub fn submitted_prompts(&self) -> Vec<Value> {
        self.shared
            .submitted
            .lock()
            .expect("submitted lock")
            .clone()
    }

    /// True while the server answers (false after a crash until [`SimHandle::restart`]).
    pub fn is_up(&self) -> bool {
        self.shared
            .current
            .lock()
            .expect("current lock")
            .as_ref()
            .is_some_and(|i| !i.is_stopped())
    }

    /// Kills the server as a crash would: listener and connections close, state is lost.
    pub fn crash(&self) {
        if let Some(inst) = self.shared.current.lock().expect("current lock").take() {
            inst.stop();
        }
    }

    /// Brings a fresh server (empty queue, history and cache, nothing loaded) back on the
    /// same port, stopping the old one if it still runs.
    pub async fn restart(&self) -> std::io::Result<()> {
        self.shared.relaunch().await
    }

    /// Host RAM in use as `/system_stats` would report it now (for tests and logs).
    pub fn host_ram_used(&self) -> u64 {
        self.shared
            .current
            .lock()
            .expect("current lock")
            .as_ref()
            .map(|i| i.lock().host_ram_used())
            .unwrap_or(0)
    }

    /// Stops the server and waits for its tasks.
    pub async fn shutdown(self) {
        let inst = self.shared.current.lock().expect("current lock").take();
        if let Some(inst) = inst {
            inst.stop();
            inst.join().await;
        }
    }
}

/// Runs a simulator until Ctrl-C or SIGTERM (for `comfy-bisect simulate`; a supervisor that
/// restarts it with other flags sends SIGTERM). Prints the URL on stderr; the port is free
/// when it returns.
pub fn run_blocking(config: SimConfig, bind: SocketAddr) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let sim = start(config.clone(), bind).await?;
        eprintln!("{}", banner(&sim.base_url(), &config));
        stop_signal().await?;
        sim.shutdown().await;
        Ok(())
    })
}

/// Waits for Ctrl-C (SIGINT) or, on Unix, SIGTERM.
async fn stop_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `simulate` names its faults as they are written on the command line, not as a Rust
    /// struct, and what it prints reads back as the same faults.
    #[test]
    fn the_banner_names_the_faults_as_the_faults_list() {
        let list = "crash-mid-run,drop-socket,slow-history=150,crash-on=3:4,leak=1048576,\
                    missing-output=#22,short-video=2,revive-after=500,silent-socket,queue-hides,\
                    history-500,step-growth=2048,flat-product,nan-decode,\
                    hang-second-run=ignore-interrupt,aimdo-error,\
                    plant=sample_middle:class=KSamplerAdvanced>=2";
        let config = SimConfig {
            faults: Faults::parse(list).unwrap(),
            ..SimConfig::default()
        };
        let line = banner("http://127.0.0.1:8188", &config);
        assert!(!line.contains("Faults {"), "{line}");
        assert!(!line.contains(": false"), "{line}");
        let printed = line
            .split("faults: ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap();
        assert_eq!(Faults::parse(printed).unwrap(), config.faults, "{line}");
        for name in ["crash-mid-run", "crash-on=3:4", "missing-output=#22"] {
            assert!(printed.contains(name), "{name}: {line}");
        }
        let none = banner("http://x", &SimConfig::default());
        assert!(none.contains("faults: none)"), "{none}");
    }

    #[test]
    fn fault_lists_parse() {
        assert_eq!(Faults::parse("").unwrap(), Faults::default());
        let f = Faults::parse(
            "crash-mid-run, drop-socket,slow-history=150,prompt-500,garbage-frames,\
             socket-after-history",
        )
        .unwrap();
        assert!(f.crash_mid_run && f.drop_socket && f.prompt_500 && f.garbage_frames);
        assert!(f.socket_after_history);
        assert_eq!(f.slow_history_ms, 150);
        assert_eq!(Faults::parse("slow-history").unwrap().slow_history_ms, 2000);
        assert_eq!(
            Faults::parse("busy-host=3").unwrap(),
            Faults::default().with_busy_host(3)
        );
        assert!(Faults::parse("busy-host=1").is_err());
        assert_eq!(
            Faults::default().with_busy_host(3).to_string(),
            "busy-host=3"
        );
        let f = Faults::parse("silent-socket,queue-hides,history-500").unwrap();
        assert!(f.silent_socket && f.queue_hides && f.history_500);
        assert_eq!(
            Faults::parse("flat-product,nan-decode").unwrap(),
            Faults::default().with_flat_product().with_nan_decode()
        );
        let f = Faults::parse("no-internal-logs,no-experiment-models,missing-output=SaveImage")
            .unwrap();
        assert!(f.no_internal_logs && f.no_experiment_models);
        assert_eq!(f.missing_output.as_deref(), Some("SaveImage"));
        assert!(Faults::parse("missing-output").is_err());
        assert!(Faults::parse("missing-output=#").is_err());
        // CLASS silences every node of the class; #ID the one node, whatever its class.
        assert!(f.silences("9", "SaveImage") && f.silences("17", "SaveImage"));
        assert!(!f.silences("9", "PreviewImage"));
        let f = Faults::parse("missing-output=#22").unwrap();
        assert_eq!(f, Faults::default().with_missing_output_node("22"));
        assert!(f.silences("22", "MaskPreview"));
        assert!(!f.silences("9", "SaveImage") && !f.silences("22x", "MaskPreview"));
        assert!(!Faults::default().silences("9", "SaveImage"));
        assert_eq!(
            Faults::parse("lowvram-after=2").unwrap().lowvram_after,
            Some(2)
        );
        assert!(Faults::parse("lowvram-after=0").is_err());
        let f = Faults::parse("pack-added-after=3,leak=256MiB").unwrap();
        assert_eq!(f.pack_added_after, Some(3));
        assert_eq!(f.leak_bytes, 256 * MIB);
        assert!(Faults::parse("pack-added-after=x").is_err());
        assert_eq!(
            Faults::parse("pack-removed-after=2").unwrap(),
            Faults::default().with_pack_removed_after(2)
        );
        assert!(Faults::parse("pack-removed-after=0").is_err());
        assert!(Faults::parse("leak=lots").is_err());
        assert_eq!(
            Faults::parse("step-growth=64MiB")
                .unwrap()
                .step_growth_bytes,
            64 * MIB
        );
        assert!(Faults::parse("step-growth=lots").is_err());
        // `plant=STAGE:CONDITION` (the grammar's cases are in `plant.rs`).
        let f = Faults::parse("plant=decode:pixels>=786432,drop-socket").unwrap();
        assert_eq!(
            f.plant,
            Some(Plant {
                stage: Stage::Decode,
                when: Condition::Pixels(786432)
            })
        );
        assert!(f.drop_socket);
        assert_eq!(
            Faults::parse("plant=postprocess:class=RIFE VFI").unwrap(),
            Faults::default().with_plant(Plant::parse("postprocess:class=RIFE VFI").unwrap())
        );
        assert!(Faults::parse("plant").is_err());
        assert!(Faults::parse("plant=load:class=X").is_err());
        let f = Faults::parse("crash-on=3:4,revive-after=200ms").unwrap();
        assert_eq!(f.crash_on, vec![3, 4]);
        assert_eq!(f.revive_after_ms, Some(200));
        assert!(Faults::parse("crash-on=0").is_err());
        assert!(Faults::parse("crash-on=x").is_err());
        assert!(Faults::parse("revive-after=soon").is_err());
        let err = Faults::parse("explode").unwrap_err();
        assert!(err.contains("unknown fault 'explode'"));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("24GiB").unwrap(), 24 * GIB);
        assert_eq!(parse_size("12 GB").unwrap(), 12 * GIB);
        assert_eq!(parse_size("8192MiB").unwrap(), 8 * GIB);
        assert_eq!(parse_size("1.5GiB").unwrap(), GIB + GIB / 2);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }
}
