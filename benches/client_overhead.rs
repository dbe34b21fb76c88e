//! Client overhead benchmark (issue 9, item 3): `cargo bench --bench client_overhead`.
//!
//! Starts the in-tree simulator with zero simulated latency (`time_scale` 0) and runs the same
//! SD1.5 workflow `CLIENT_BENCH_RUNS` times (default 100) one after the other through
//! `run::execute_with` — the call the session driver makes for every run — and records each
//! result the way the session does (`run.json`, written atomically with fsync). Per run:
//!
//! - **start**: from the call to the first WebSocket event of our prompt reaching the tool
//!   (system_stats, socket + greeting, sampler start, `POST /prompt`, the server queuing it);
//! - **finish**: from the server sending `executing {node: null}` to the record being on disk
//!   (detection, `/history` reconciliation, system_stats after, sampler stop, socket close,
//!   serialisation + fsync);
//! - **overhead** = start + finish (the server's execution in between is not the tool's);
//! - **detection**: from the server sending the terminal frame to the tool reading it.
//!
//! The server-side instants come from a loopback relay ([`common::WsTap`]) that timestamps the
//! frames as they leave the simulator; the relay's own hop is counted against the tool. A
//! second pass without the relay gives start/finish as the tool sees them with no extra hop
//! (finish then counts from the tool's own receipt of the terminal frame).
//!
//! A last pass runs a **whole session** the way a user does: the release `comfy-bisect bisect
//! --warm --repeat N` against the simulator behind the relay, on a workflow whose target fails
//! (about 2N + 3 runs; N = `CLIENT_BENCH_SESSION_REPEAT`, default 48, so ~100 runs). Between two
//! runs the tool diagnoses, hashes, journals (`run.json`, index, `session.json`, the next
//! variant's files) and starts the next run; the **gap** from the server's terminal frame of one
//! run to its first frame of the next is the tool's whole per-run cost in a session (plus the
//! server's own acceptance of the next prompt), measured from the server side.
//!
//! **Console and product** (issue 14): direct runs in blocks of 10, alternating the simulator
//! with its `no-internal-logs` fault (no console frames to read, no `Prompt executed` line to
//! wait for, no unsubscribe) and without it, so load drift falls on both series alike; and the two requests the run adds are timed alone, 200 times each on a
//! warm client: `PATCH /internal/logs/subscribe` (on the path before `POST /prompt`) and the
//! header read of one output file through `GET /view` (on the path after `/history`; the bench
//! workflow writes one image per run).
//!
//! Environment: `CLIENT_BENCH_RUNS` (default 100), `CLIENT_BENCH_COLD` (default 5 cold runs,
//! reported separately: the cold start waits 300 ms on purpose), `CLIENT_BENCH_STEPS` (sampler
//! steps, default 20).

mod common;

use comfy_bisect_core::comfy::media::{self, Header};
use comfy_bisect_core::comfy::{Client, ExtraHeaders, ViewFile};
use comfy_bisect_core::run::{execute_with, RawEvent, RunEvent, RunObserver, RunRequest};
use comfy_bisect_core::session::journal::write_json_atomic;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, Faults, SimConfig, SimHandle};
use common::{ms, stats, Stats, WsTap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const TOOL: &str = env!("CARGO_BIN_EXE_comfy-bisect");

/// Instants the tool saw, keyed to the prompt being run.
struct Watch {
    prompt_id: String,
    first_event: Option<Instant>,
    terminal: Option<Instant>,
    submitted: Option<Instant>,
    reconciling: Option<Instant>,
    submitting: Option<Instant>,
    /// The `/history/{id}` answer with our entry arrived (the tool learned the end by HTTP).
    history: Option<Instant>,
}

impl Watch {
    fn new(prompt_id: &str) -> Watch {
        Watch {
            prompt_id: prompt_id.to_string(),
            first_event: None,
            terminal: None,
            submitted: None,
            reconciling: None,
            submitting: None,
            history: None,
        }
    }
}

impl RunObserver for Watch {
    fn on_event(&mut self, event: &RunEvent) {
        if let RunEvent::Phase(p) = event {
            let now = Instant::now();
            if p == "submitting" {
                self.submitting.get_or_insert(now);
            } else if p == "submitted" {
                self.submitted.get_or_insert(now);
            } else if p.starts_with("reconciling") {
                self.reconciling.get_or_insert(now);
            }
        }
    }

    fn on_raw(&mut self, event: &RawEvent<'_>) {
        let now = Instant::now();
        if let RawEvent::Http { exchange, .. } = event {
            let ours =
                exchange.path.contains("/history/") && exchange.path.contains(&self.prompt_id);
            let entry = exchange
                .response_body
                .as_ref()
                .is_some_and(|b| b.get(&self.prompt_id).is_some());
            if ours && entry {
                self.history.get_or_insert(now);
            }
            return;
        }
        if let RawEvent::Ws {
            dir: "in",
            json: Some(v),
            ..
        } = event
        {
            if v["data"]["prompt_id"].as_str() != Some(self.prompt_id.as_str()) {
                return;
            }
            self.first_event.get_or_insert(now);
            if v["type"] == "executing" && v["data"]["node"].is_null() {
                self.terminal.get_or_insert(now);
            }
        }
    }
}

#[derive(Default)]
struct Series {
    start: Vec<f64>,
    finish: Vec<f64>,
    overhead: Vec<f64>,
    detection: Vec<f64>,
    wall: Vec<f64>,
    submit_to_first: Vec<f64>,
    write: Vec<f64>,
    write_plain: Vec<f64>,
    overhead_plain: Vec<f64>,
    before_submit: Vec<f64>,
    terminal_to_reconcile: Vec<f64>,
    server_exec: Vec<f64>,
    by_ws: usize,
    by_history: usize,
    failures: usize,
}

fn request(steps: u64, seed: u64, cold: bool) -> RunRequest {
    let v = common::sd15(512, 512, steps, seed);
    let workflow = Workflow::from_json_str(&v.to_string(), "bench.json").expect("workflow");
    let mut r = RunRequest::new(workflow);
    r.cold = cold;
    r
}

/// `runs` runs one after the other; each has its own seed so the server executes the sampler
/// and everything after it (no fully cached prompt).
async fn pass(
    base_url: &str,
    tap: Option<&WsTap>,
    steps: u64,
    seeds: std::ops::Range<u64>,
    cold: bool,
    dir: &Path,
) -> Series {
    let client = Client::new(base_url, ExtraHeaders::new()).expect("client");
    let mut s = Series::default();
    for (i, seed) in seeds.enumerate() {
        let req = request(steps, seed, cold);
        let prompt_id = req.run_id.to_string();
        let mut watch = Watch::new(&prompt_id);
        let t_call = Instant::now();
        let record = execute_with(&client, req, &mut watch).await;
        let t_returned = Instant::now();
        write_json_atomic(&dir.join(format!("run-{i:03}.json")), &record).expect("write run.json");
        let t_recorded = Instant::now();
        // For comparison only: the same record written without fsync.
        let text = serde_json::to_string_pretty(&record).expect("serialise");
        std::fs::write(dir.join("plain.json"), text).expect("write plain.json");
        let t_plain = Instant::now();
        if record.outcome().kind().as_str() != "passed" {
            s.failures += 1;
            eprintln!(
                "run {i}: {} ({:?})",
                record.outcome().kind().as_str(),
                record.warnings
            );
            continue;
        }
        // The tool learns the end from the WebSocket frame or, when its first /queue poll
        // already finds the prompt gone (zero latency), from /history.
        let seen_terminal = match (watch.terminal, watch.history) {
            (Some(w), Some(h)) => Some(w.min(h)),
            (w, h) => w.or(h),
        };
        let (Some(submitted), Some(seen_terminal)) = (watch.submitted, seen_terminal) else {
            s.failures += 1;
            eprintln!("run {i}: the tool saw neither the terminal event nor the history entry");
            continue;
        };
        if watch.terminal == Some(seen_terminal) {
            s.by_ws += 1;
        } else {
            s.by_history += 1;
        }
        let log = tap.map(|t| t.log());
        let server_terminal = log.as_ref().and_then(|l| l.terminal_of(&prompt_id));
        let server_first = log.as_ref().and_then(|l| l.first_of(&prompt_id));
        let end_ref = server_terminal.unwrap_or(seen_terminal);
        let start = ms(t_call, submitted);
        let finish = ms(end_ref, t_recorded);
        s.start.push(start);
        s.finish.push(finish);
        s.overhead.push(start + finish);
        s.wall.push(ms(t_call, t_recorded));
        if let Some(first) = server_first.or(watch.first_event) {
            s.server_exec.push(ms(first, end_ref));
            s.submit_to_first.push(ms(submitted, first));
        }
        if let Some(t) = server_terminal {
            s.detection.push(ms(t, seen_terminal));
        }
        s.terminal_to_reconcile.push(ms(seen_terminal, t_returned));
        s.write.push(ms(t_returned, t_recorded));
        s.write_plain.push(ms(t_recorded, t_plain));
        s.overhead_plain
            .push(start + finish - ms(t_returned, t_recorded) + ms(t_recorded, t_plain));
        s.before_submit
            .push(ms(t_call, watch.submitting.unwrap_or(submitted)));
    }
    s
}

fn row(name: &str, v: &[f64]) -> String {
    let Stats {
        n,
        min,
        median,
        p99,
        max,
    } = stats(v);
    format!("| {name} | {n} | {min:.2} | **{median:.2}** | {p99:.2} | {max:.2} |")
}

fn table(title: &str, s: &Series) {
    println!("\n### {title}\n");
    println!("| ms per run | n | min | median | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!("{}", row("overhead (start + finish)", &s.overhead));
    println!("{}", row("start: call → `POST /prompt` answered", &s.start));
    println!(
        "{}",
        row("finish: terminal event → run.json on disk", &s.finish)
    );
    if !s.detection.is_empty() {
        println!(
            "{}",
            row("detection: terminal sent → read by the tool", &s.detection)
        );
    }
    println!(
        "{}",
        row(
            "  call → `POST /prompt` sent (stats, socket, greeting)",
            &s.before_submit
        )
    );
    println!(
        "{}",
        row(
            "  tool knows the end → `execute` returns",
            &s.terminal_to_reconcile
        )
    );
    println!(
        "{}",
        row("  run.json written (atomic: fsync file + folder)", &s.write)
    );
    println!(
        "{}",
        row(
            "  (comparison) the same JSON written without fsync",
            &s.write_plain
        )
    );
    println!(
        "{}",
        row(
            "(comparison) overhead with that unsynced write",
            &s.overhead_plain
        )
    );
    println!(
        "{}",
        row(
            "  `POST /prompt` answered → server's first event",
            &s.submit_to_first
        )
    );
    println!(
        "{}",
        row("server execution (first → terminal event)", &s.server_exec)
    );
    println!("{}", row("wall time per run", &s.wall));
    println!(
        "\nEnd learned from the WebSocket in {} runs, from /history (the first /queue poll found the \
         prompt already finished) in {} runs.",
        s.by_ws, s.by_history
    );
    if s.failures > 0 {
        println!("\n{} runs did not pass and are left out.", s.failures);
    }
}

/// What a whole `bisect` session looked like from the server side.
struct SessionPass {
    exit: Option<i32>,
    runs: usize,
    wall_ms: f64,
    /// Server's terminal frame of run k → its first frame of run k+1.
    gaps: Vec<f64>,
    /// Server's first → terminal frame, per run.
    exec: Vec<f64>,
    /// Tool start → the server's first frame of the first run (setup, planning, files).
    to_first_ms: f64,
    /// Server's terminal frame of the last run → the tool exits (report, journal).
    after_last_ms: f64,
    /// The tool's `POST /prompt` (as it passed the relay) → the server's first event of it.
    submit_to_first: Vec<f64>,
    /// Server's terminal frame → the tool's debug log line that `run.json` is written.
    terminal_to_recorded: Vec<f64>,
    /// Per run: submit → first event plus terminal event → recorded (empty if not measured).
    overhead: Vec<f64>,
}

/// Runs `comfy-bisect bisect --warm --repeat N` against `tap` and reads the relay's log.
async fn session_pass(tap: &WsTap, steps: u64, repeat: usize, dir: &Path) -> SessionPass {
    let failing = dir.join("session-failing.json");
    // Fails on the simulator's default card (batch 8 at 2048²); the minimal variant passes.
    let mut v = common::sd15(2048, 2048, steps, 7);
    v["5"]["inputs"]["batch_size"] = 8.into();
    std::fs::write(&failing, v.to_string()).expect("write workflow");
    let runs_dir = dir.join("session-runs");
    let before = tap.log();
    let url = tap.base_url();
    let args: Vec<String> = vec![
        "--server".into(),
        url,
        "bisect".into(),
        "--warm".into(),
        "--quiet".into(),
        "--repeat".into(),
        repeat.to_string(),
        "--runs-dir".into(),
        runs_dir.display().to_string(),
        failing.display().to_string(),
    ];
    let log_file = dir.join("session-debug.log");
    let stderr = std::fs::File::create(&log_file).expect("log file");
    // The relay's instants become wall-clock times through one anchor pair, to compare them with
    // the timestamps of the tool's debug log.
    let anchor = (Instant::now(), std::time::SystemTime::now());
    let t0 = Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        Command::new(TOOL)
            .args(&args)
            .env(
                "COMFY_BISECT_LOG",
                "comfy_bisect_core::session::driver=debug",
            )
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(stderr)
            .status()
            .expect("run comfy-bisect bisect")
    })
    .await
    .expect("session");
    let t_end = Instant::now();
    let log = tap.log();
    let recorded = recorded_times(&log_file);
    let wall = |i: Instant| anchor.1 + (i - anchor.0);
    let posts: Vec<Instant> = log.posts[before.posts.len()..].to_vec();
    // This session's prompts, in the order the server started them.
    let mut with_ids: Vec<(&str, Instant, Instant)> = log
        .first
        .iter()
        .filter(|(p, _)| !before.first.iter().any(|(q, _)| q == p))
        .filter_map(|(p, first)| log.terminal_of(p).map(|t| (p.as_str(), *first, t)))
        .collect();
    with_ids.sort_by_key(|(_, first, _)| *first);
    // Per prompt, in run order: terminal event → the tool's "run recorded" log line.
    let terminal_to_recorded: Vec<f64> = with_ids
        .iter()
        .filter_map(|(id, _, terminal)| {
            let (_, at) = recorded.iter().find(|(r, _)| r == id)?;
            Some(match at.duration_since(wall(*terminal)) {
                Ok(d) => d.as_secs_f64() * 1e3,
                Err(e) => -e.duration().as_secs_f64() * 1e3,
            })
        })
        .collect();
    let prompts: Vec<(Instant, Instant)> = with_ids.iter().map(|(_, f, t)| (*f, *t)).collect();
    let gaps = prompts.windows(2).map(|w| ms(w[0].1, w[1].0)).collect();
    let exec = prompts.iter().map(|(f, t)| ms(*f, *t)).collect();
    // One POST per run, in order (a session submits one prompt at a time).
    let submit_to_first =
        if posts.len() == prompts.len() && terminal_to_recorded.len() == prompts.len() {
            posts
                .iter()
                .zip(&prompts)
                .map(|(post, (first, _))| ms(*post, *first))
                .collect()
        } else {
            eprintln!(
            "{} POST /prompt requests and {} recorded runs for {} prompts: the per-run overhead \
             in the session is not measured",
            posts.len(),
            terminal_to_recorded.len(),
            prompts.len()
        );
            Vec::new()
        };
    SessionPass {
        exit: status.code(),
        runs: prompts.len(),
        wall_ms: ms(t0, t_end),
        gaps,
        exec,
        to_first_ms: prompts.first().map(|(f, _)| ms(t0, *f)).unwrap_or(f64::NAN),
        after_last_ms: prompts
            .last()
            .map(|(_, t)| ms(*t, t_end))
            .unwrap_or(f64::NAN),
        overhead: submit_to_first
            .iter()
            .zip(&terminal_to_recorded)
            .map(|(a, b)| a + b)
            .collect(),
        submit_to_first,
        terminal_to_recorded,
    }
}

/// `(run id, wall-clock time)` of every "run recorded" line of the tool's debug log.
fn recorded_times(log: &Path) -> Vec<(String, std::time::SystemTime)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("run recorded"))
        .filter_map(|l| {
            let stamp = l.split_whitespace().next()?;
            let t: jiff::Timestamp = stamp.parse().ok()?;
            let run_id = l.split("run_id=").nth(1)?.split_whitespace().next()?;
            Some((run_id.to_string(), std::time::SystemTime::try_from(t).ok()?))
        })
        .collect()
}

fn session_table(p: &SessionPass) {
    println!(
        "\n### A whole session: `bisect --warm --repeat N` (release binary, through the relay)\n"
    );
    println!(
        "exit {:?}, {} runs, {:.0} ms wall: {:.0} ms to the first run's first event (start-up, \
         planning, variant files), {:.0} ms after the last run's terminal event (report, journal).\n",
        p.exit, p.runs, p.wall_ms, p.to_first_ms, p.after_last_ms
    );
    println!("| ms per run | n | min | median | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "{}",
        row(
            "gap: terminal event of run k → first event of run k+1",
            &p.gaps
        )
    );
    let n = p.gaps.len();
    if n >= 40 {
        // session.json holds every run's entry, so the journal's cost grows with the session.
        println!("{}", row("  gap, first 20 runs", &p.gaps[..20]));
        println!("{}", row("  gap, last 20 runs", &p.gaps[n - 20..]));
    }
    println!(
        "{}",
        row("server execution (first → terminal event)", &p.exec)
    );
    if !p.overhead.is_empty() {
        println!(
            "{}",
            row("overhead in the session (the two lines below)", &p.overhead)
        );
        println!(
            "{}",
            row(
                "  submit: `POST /prompt` sent → server's first event",
                &p.submit_to_first
            )
        );
        println!(
            "{}",
            row(
                "  record: terminal event → run.json written (debug log)",
                &p.terminal_to_recorded
            )
        );
    }
}

/// The console's and the product's share of a run (issue 14).
struct ConsoleProduct {
    no_logs: Series,
    with_logs: Series,
    subscribe: Vec<f64>,
    view: Vec<f64>,
    files_per_run: usize,
}

async fn console_and_product(
    sim: &SimHandle,
    steps: u64,
    runs: usize,
    dir: &Path,
) -> ConsoleProduct {
    // Blocks of 10 runs, alternating a server without /internal/logs and the normal one, so
    // that load drift over the minute the passes take falls on both series alike.
    let mut no_logs = Series::default();
    let mut with_logs = Series::default();
    let blocks = runs.div_ceil(10).max(1) as u64;
    for b in 0..blocks {
        for (half, faults, into) in [
            (0, Faults::default().with_no_internal_logs(), &mut no_logs),
            (10, Faults::default(), &mut with_logs),
        ] {
            sim.set_faults(faults);
            let seed = 4000 + b * 20 + half;
            let part = pass(&sim.base_url(), None, steps, seed..seed + 10, false, dir).await;
            into.overhead.extend(part.overhead);
            into.finish.extend(part.finish);
        }
    }
    sim.set_faults(Faults::default());
    let client = Client::new(&sim.base_url(), ExtraHeaders::new()).expect("client");
    let record = comfy_bisect_core::run::execute(&client, request(steps, 5000, false)).await;
    let files = record.product.map(|p| p.files).unwrap_or_default();
    let mut subscribe = Vec::new();
    let mut view = Vec::new();
    for i in 0..200 {
        let id = format!("bench-{i}");
        let t = Instant::now();
        client.logs_subscribe(&id, true).await.expect("subscribe");
        subscribe.push(ms(t, Instant::now()));
        client
            .logs_subscribe(&id, false)
            .await
            .expect("unsubscribe");
        if let Some(f) = files.first() {
            let file = ViewFile {
                filename: &f.filename,
                subfolder: &f.subfolder,
                kind: &f.kind,
            };
            let enough = |b: &[u8]| !matches!(media::parse(b), Header::NeedMore);
            let t = Instant::now();
            let head = client.view_head(&file, &enough).await.expect("view");
            view.push(ms(t, Instant::now()));
            assert!(head.is_some(), "the simulator serves the file it wrote");
        }
    }
    ConsoleProduct {
        no_logs,
        with_logs,
        subscribe,
        view,
        files_per_run: files.len(),
    }
}

fn console_product_table(c: &ConsoleProduct) {
    let direct = &c.with_logs;
    println!("\n### Console subscription and product header reads (issue 14)\n");
    println!("| ms per run | n | min | median | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "{}",
        row(
            "overhead, direct (console read + headers read)",
            &direct.overhead
        )
    );
    println!(
        "{}",
        row(
            "overhead, direct, server without /internal/logs",
            &c.no_logs.overhead
        )
    );
    println!("{}", row("finish, direct", &direct.finish));
    println!(
        "{}",
        row("finish, direct, without /internal/logs", &c.no_logs.finish)
    );
    println!(
        "{}",
        row(
            "PATCH /internal/logs/subscribe alone (before POST /prompt)",
            &c.subscribe
        )
    );
    println!(
        "{}",
        row("GET /view header read alone, per output file", &c.view)
    );
    let (with, without) = (stats(&direct.overhead), stats(&c.no_logs.overhead));
    let sub = stats(&c.subscribe);
    let view = stats(&c.view);
    println!(
        "\nMedian extra per run: console frames {:.2} ms (difference of the overhead medians) + subscribe {:.2} ms + {} header read(s) × {:.2} ms = {:.2} ms.",
        with.median - without.median,
        sub.median,
        c.files_per_run,
        view.median,
        with.median - without.median + sub.median + c.files_per_run as f64 * view.median
    );
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runs = env_or("CLIENT_BENCH_RUNS", 100);
    let cold_runs = env_or("CLIENT_BENCH_COLD", 5);
    let repeat = env_or("CLIENT_BENCH_SESSION_REPEAT", 48);
    let steps = env_or("CLIENT_BENCH_STEPS", 20) as u64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");

    println!("# Client overhead benchmark\n");
    println!("- {} ({})", common::cpu_model(), common::load());
    println!(
        "- simulator in-process, time_scale 0 (zero simulated latency), {steps} sampler steps"
    );
    println!("- {runs} warm runs per pass (`cold: false`), default client limits (500 ms VRAM sampling, 1 s polling)");

    rt.block_on(async {
        let sim = start(SimConfig::default().with_time_scale(0.0), "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start simulator");
        // Warm-up: connections, the simulator's model cache, page cache of the temp dir.
        let _ = pass(&sim.base_url(), None, steps, 0..3, false, dir.path()).await;

        let tap = WsTap::start(sim.addr(), None).await;
        let tapped = pass(&tap.base_url(), Some(&tap), steps, 1000..1000 + runs as u64, false, dir.path()).await;
        let direct = pass(&sim.base_url(), None, steps, 2000..2000 + runs as u64, false, dir.path()).await;
        let cold = pass(&tap.base_url(), Some(&tap), steps, 3000..3000 + cold_runs as u64, true, dir.path()).await;
        let session = session_pass(&tap, steps, repeat, dir.path()).await;
        let console = console_and_product(&sim, steps, runs, dir.path()).await;
        println!("- after the passes: {}", common::load());

        table("Through the timestamping relay (server-side instants)", &tapped);
        table("Direct (no relay; finish counted from the tool's receipt of the terminal event)", &direct);
        table("Cold runs (POST /free, idle wait, 300 ms settle by design)", &cold);
        session_table(&session);
        console_product_table(&console);

        let od = stats(&tapped.overhead);
        let dd = stats(&tapped.detection);
        println!("\n### Targets\n");
        println!("| target | measured | |\n|---|---|---|");
        println!(
            "| per-run overhead ≤ 5 ms median, run loop through the relay (fsync'd write each run) | {:.2} ms median, p99 {:.2} ms | {} |",
            od.median,
            od.p99,
            if od.median <= 5.0 { "met" } else { "missed" }
        );
        println!(
            "| detection ≤ 10 ms after the terminal event | {:.3} ms median, p99 {:.3} ms, max {:.3} ms | {} |",
            dd.median,
            dd.p99,
            dd.max,
            if dd.p99 <= 10.0 { "met" } else { "missed" }
        );
        if !session.overhead.is_empty() {
            let o = stats(&session.overhead);
            println!(
                "| per-run overhead ≤ 5 ms median, in a whole {}-run session (submit → first event + terminal event → recorded) | {:.2} ms median, p99 {:.2} ms | {} |",
                session.runs,
                o.median,
                o.p99,
                if o.median <= 5.0 { "met" } else { "missed" }
            );
        }
        let gap = stats(&session.gaps);
        println!(
            "| per-run cost in a whole session (gap between runs) ≤ 5 ms median | {:.2} ms median, p99 {:.2} ms ({} runs) | {} |",
            gap.median,
            gap.p99,
            session.runs,
            if gap.median <= 5.0 { "met" } else { "missed" }
        );
        tap.stop();
        sim.shutdown().await;
    });
}
