//! `comfy-bisect submit WORKFLOW`: run one workflow on the server and print the outcome (or the
//! whole run record with `--json`).

use super::common::{
    parse_positive_duration as parse_duration, print_error, read_workflow_with, CliError,
    CliResult, ConnectArgs, Connection, OrExit,
};
use crate::error::exit;
use comfy_bisect_core::comfy::{ClientError, TrackerEvent};
use comfy_bisect_core::run::{
    InterruptedBy, Outcome, RunEvent, RunObserver, RunRecord, TimeoutReason,
};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `submit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// Workflow file: API format, a POST /prompt body `{"prompt": {...}}`, or a UI workflow
    /// (converted with the server's node definitions first).
    pub workflow: PathBuf,
    /// Longest run, counted from when the server starts executing it (e.g. 90s, 10m, 1h).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Interrupt the run when the server sends no event for it this long.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub stall_timeout: Duration,
    /// Skip the cold start (POST /free and wait for idle): models and cache stay warm.
    #[arg(long)]
    pub warm: bool,
    /// Sample /system_stats every N milliseconds for the VRAM series.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    pub sample_ms: u64,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Print the run record as JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Submit even when a session holds the server's lock (its runs may then be skewed: the
    /// cold start frees its models).
    #[arg(long)]
    pub allow_shared_server: bool,
}

/// Submits the workflow; exit 0 passed, 1 failed/rejected/timeout, 3 server unreachable, 130 Ctrl-C.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let Connection { client, runtime } = args.connect.connect(server)?;
    let workflow = read_workflow_with(&args.workflow, || {
        let info = runtime
            .block_on(client.object_info(None))
            .map_err(|e| unreachable_message(&e))?;
        comfy_bisect_core::nodedefs::NodeDefs::from_value(&info)
            .ok_or_else(|| "the server's /object_info is not an object of node classes".to_string())
    })
    .or_usage()?;
    let options = comfy_bisect_core::app::SubmitOptions {
        cold: !args.warm,
        timeout: args.timeout,
        stall_timeout: args.stall_timeout,
        sample_interval: Duration::from_millis(args.sample_ms),
        allow_shared_server: args.allow_shared_server,
    };
    runtime.block_on(async {
        let mut progress = Progress::new();
        let record =
            comfy_bisect_core::app::submit(&client, workflow, &options, &mut progress, |signal| {
                eprintln!("\n{signal}: interrupting our prompt (Ctrl-C again to quit at once)…")
            })
            .await?;
        progress.finish();
        if args.json {
            match serde_json::to_string_pretty(&record) {
                Ok(text) => write_stdout(&format!("{text}\n")),
                Err(e) => print_error(&format!("cannot print the run record: {e}")),
            }
        } else {
            write_stdout(&summary(&record));
        }
        let code = exit_code(&record);
        if code == exit::UNREACHABLE {
            return Err(CliError::unreachable(format!(
                "lost contact with ComfyUI at {}. Check that the server is still running \
                 (it may have crashed or been OOM-killed) and reachable.",
                record.server
            )));
        }
        Ok(code)
    })
}

/// Writes to stdout, control and bidi characters made visible like every command's output
/// (`common::write_stdout`); a closed pipe (`| head`) is not an error worth a panic.
fn write_stdout(text: &str) {
    use std::io::Write;
    let text = comfy_bisect_core::text::escape_controls(text);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// The exit code for a finished run.
pub fn exit_code(record: &RunRecord) -> u8 {
    match record.outcome() {
        Outcome::Passed => exit::OK,
        Outcome::Interrupted(i) if i.by == InterruptedBy::User => exit::INTERRUPTED,
        Outcome::ServerLost(_) => exit::UNREACHABLE,
        _ => exit::FAILED,
    }
}

fn unreachable_message(e: &ClientError) -> String {
    format!("{e}\n{}.", e.advice())
}

/// A human summary of a run record.
pub fn summary(record: &RunRecord) -> String {
    let mut out = String::new();
    let cold = if record.cold { "cold" } else { "warm" };
    // Said plainly: `show` finds the runs of sessions, not this one.
    out.push_str(&format!(
        "run {} on {} ({cold}, {:.1} s; not saved under the runs folder: `submit --json > run.json` keeps the record)\n",
        record.run_id,
        record.server,
        record.duration_ms as f64 / 1000.0
    ));
    let detail = match record.outcome() {
        Outcome::Passed => String::new(),
        Outcome::Failed(e) => format!(
            ": {} (node {}) raised {}: {}",
            e.node_type,
            e.node_id,
            e.exception_type,
            e.exception_message.lines().next().unwrap_or("").trim()
        ),
        Outcome::Rejected(r) => {
            let mut s = format!(
                ": HTTP {} {}: {}",
                r.http_status, r.error.kind, r.error.message
            );
            for (node, err) in &r.node_errors {
                let class = err
                    .get("class_type")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?");
                for e in err
                    .get("errors")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                {
                    let msg = e.get("message").and_then(|v| v.as_str()).unwrap_or("");
                    let details = e.get("details").and_then(|v| v.as_str()).unwrap_or("");
                    s.push_str(&format!("\n  node {node} ({class}): {msg} {details}"));
                }
            }
            s
        }
        Outcome::Interrupted(i) => format!(
            " by {}{}",
            match i.by {
                InterruptedBy::User => "you (Ctrl-C)",
                InterruptedBy::Other => "someone else",
            },
            match (&i.node_type, &i.node_id) {
                (Some(t), Some(n)) => format!(" in {t} (node {n})"),
                _ if i.removed_from_queue => " while still queued (removed from the queue)".into(),
                _ => String::new(),
            }
        ),
        Outcome::Timeout(t) => format!(
            ": {} limit of {:.1} s reached{}; our prompt was interrupted",
            match t.reason {
                TimeoutReason::Run => "run",
                TimeoutReason::Stall => "stall (no event)",
                TimeoutReason::Queue => "queue wait",
            },
            t.limit_ms as f64 / 1000.0,
            t.last_node
                .as_deref()
                .map(|n| format!(" (last node {n})"))
                .unwrap_or_default()
        ),
        Outcome::ServerLost(s) => format!(": {}", s.reason),
        Outcome::Hang(h) => format!(
            ": no progress for {:.1} s{}{}",
            h.limit_ms as f64 / 1000.0,
            h.last_node
                .as_deref()
                .map(|n| format!(" at node {n}"))
                .unwrap_or_default(),
            match (h.step, h.max_steps) {
                (Some(s), Some(m)) => format!(", step {s}/{m}"),
                _ => String::new(),
            }
        ),
        Outcome::IncompleteOutput(i) => format!(" (incomplete_output): {}", i.message),
    };
    out.push_str(&format!("outcome: {}{detail}\n", record.outcome));
    if let Some(p) = &record.product {
        if let Some(line) = p.summary() {
            out.push_str(&format!("product: {line}\n"));
        }
        for m in &p.mismatches {
            out.push_str(&format!("warning: {m}\n"));
        }
    }
    if let Some(peak) = record.vram.peak_used_bytes {
        let reserved = match (
            record.vram.device_kind.as_deref(),
            record.vram.peak_reserved_bytes,
        ) {
            (Some("cpu"), _) => "CPU device: RAM, no torch-reserved figure".to_string(),
            (_, Some(r)) => format!("{} reserved by torch", gib(r)),
            (_, None) => "torch-reserved unknown".to_string(),
        };
        out.push_str(&format!(
            "peak memory: {} used, {reserved} ({} samples, every {} ms; shorter spikes are missed)\n",
            gib(peak),
            record.vram.samples.len(),
            record.vram.interval_ms
        ));
    }
    if let Some(d) = &record.diagnosis {
        out.push_str(&format!(
            "diagnosis: {} at stage {} (comfy-bisect diagnose explains more)\n",
            d.kind.as_str(),
            d.stage.as_str()
        ));
        if let Some(next) = d.next_check.first() {
            out.push_str(&format!("next check: {next}\n"));
        }
    }
    let ran = record.timeline.iter().filter(|n| !n.cached).count();
    out.push_str(&format!(
        "nodes: {ran} ran, {} cached\n",
        record.cached_nodes.len()
    ));
    for w in &record.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

use comfy_bisect_core::units::gib;

/// A one-line progress display on stderr (hidden when stderr is not a terminal).
struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    fn new() -> Progress {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl RunObserver for Progress {
    fn on_event(&mut self, event: &RunEvent) {
        // Node ids and warnings are server text: control and bidi characters made visible.
        let safe = |s: String| comfy_bisect_core::text::escape_controls(&s).into_owned();
        match event {
            RunEvent::Phase(p) => self.bar.set_message(safe(p.clone())),
            RunEvent::Queued { ahead } => self
                .bar
                .set_message(format!("waiting: {ahead} prompt(s) ahead of ours")),
            RunEvent::Tracker(TrackerEvent::NodeStarted { node }) => {
                self.bar.set_message(safe(format!("node {node}")))
            }
            RunEvent::Tracker(TrackerEvent::Progress { node, value, max }) => self
                .bar
                .set_message(safe(format!("node {node}: step {value}/{max}"))),
            RunEvent::Warning(w) => self.bar.println(safe(format!("warning: {w}"))),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_must_be_positive() {
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
