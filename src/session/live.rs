//! The real [`Backend`]: runs through `run::execute_with` on a ComfyUI server (or the simulator),
//! raw events appended to `events.ndjson` as they arrive, history lookups for resume, and the
//! `--restart-cmd` shell command.

use super::driver::{Attempt, Backend, Recovery, RunSpec};
use super::evidence::record_from_history;
use super::progress::ProgressView;
use crate::comfy::protocol::QueuePosition;
use crate::comfy::{Client, Fingerprint, Fingerprinter};
use crate::run::{execute_with, Both, NdjsonWriter, RunRequest};
use crate::workflow::Workflow;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::watch;

/// How long a resumed session waits for a prompt that is still queued or running.
pub const RECOVER_WAIT: Duration = Duration::from_secs(6 * 3600);

/// Runs on a real server through a tokio runtime handle (the driver itself is synchronous).
pub struct LiveBackend {
    handle: Handle,
    client: Client,
    server: String,
    cancel: watch::Receiver<bool>,
    progress: Option<ProgressView>,
    fingerprinter: Fingerprinter,
    /// `/system_stats` sampling interval.
    pub sample_interval: Duration,
    /// How often a resumed in-flight prompt is polled.
    pub poll_interval: Duration,
}

impl LiveBackend {
    /// A backend over `client`; `cancel` turns true on Ctrl-C.
    pub fn new(handle: Handle, client: Client, cancel: watch::Receiver<bool>) -> LiveBackend {
        let server = client.server_url();
        LiveBackend {
            handle,
            fingerprinter: Fingerprinter::new(client.clone()),
            client,
            server,
            cancel,
            progress: None,
            sample_interval: Duration::from_millis(500),
            poll_interval: Duration::from_secs(1),
        }
    }

    /// Shows node and step progress of each run on `progress`.
    pub fn with_progress(mut self, progress: ProgressView) -> LiveBackend {
        self.progress = Some(progress);
        self
    }
}

impl Backend for LiveBackend {
    fn run(&mut self, spec: &RunSpec<'_>) -> Attempt {
        let mut request = RunRequest::new(spec.workflow.clone());
        request.run_id = match uuid::Uuid::parse_str(spec.run_id) {
            Ok(id) => id,
            Err(e) => return Attempt::NotSubmitted(format!("bad run id {}: {e}", spec.run_id)),
        };
        request.cold = spec.cold;
        if let Some(t) = spec.timeout {
            request.timeout = t;
        }
        request.sample_interval = self.sample_interval;
        request.cancel = Some(self.cancel.clone());
        let file = match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(spec.events_file)
        {
            Ok(f) => f,
            Err(e) => {
                return Attempt::NotSubmitted(format!(
                    "cannot write {}: {e}",
                    spec.events_file.display()
                ))
            }
        };
        let mut writer = NdjsonWriter::new(file);
        let client = self.client.clone();
        let record = match self.progress.as_mut() {
            Some(p) => {
                p.begin_run(&spec.label, spec.workflow);
                let mut both = Both(&mut writer, p);
                self.handle
                    .block_on(execute_with(&client, request, &mut both))
            }
            None => self
                .handle
                .block_on(execute_with(&client, request, &mut writer)),
        };
        if let Some(e) = writer.error() {
            tracing::warn!("events.ndjson: {e}");
        }
        if let crate::run::Outcome::ServerLost(info) = record.outcome() {
            if !info.submitted {
                return Attempt::NotSubmitted(info.reason);
            }
        }
        Attempt::Done(Box::new(record))
    }

    fn recover(&mut self, run_id: &str, workflow: &Workflow, _events_file: &Path) -> Recovery {
        let client = self.client.clone();
        let server = self.server.clone();
        let poll = self.poll_interval;
        self.handle.block_on(async move {
            let start = Instant::now();
            loop {
                let queue = match client.queue().await {
                    Ok(q) => q,
                    Err(e) => return Recovery::Unreachable(e.to_string()),
                };
                match queue.position(run_id) {
                    QueuePosition::Running | QueuePosition::Pending { .. } => {
                        if start.elapsed() > RECOVER_WAIT {
                            return Recovery::Unknown;
                        }
                        tokio::time::sleep(poll).await;
                        continue;
                    }
                    QueuePosition::Absent => {}
                }
                // History can lag the queue briefly.
                for attempt in 0..5u32 {
                    match client.history(run_id).await {
                        Ok(Some(entry)) => {
                            if let Some(record) =
                                record_from_history(run_id, workflow, &server, true, &entry)
                            {
                                return Recovery::Finished(Box::new(record));
                            }
                        }
                        Ok(None) => {}
                        Err(e) => return Recovery::Unreachable(e.to_string()),
                    }
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt + 1))).await;
                }
                return Recovery::Unknown;
            }
        })
    }

    fn alive(&mut self) -> bool {
        let client = self.client.with_request_timeout(Duration::from_secs(5));
        self.handle
            .block_on(async move { client.system_stats().await.is_ok() })
    }

    fn restart(&mut self, command: &str) -> Result<(), String> {
        let status = if cfg!(windows) {
            std::process::Command::new("cmd")
                .args(["/C", command])
                .status()
        } else {
            std::process::Command::new("sh")
                .args(["-c", command])
                .status()
        };
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("'{command}' exited with {s}")),
            Err(e) => Err(format!("cannot run '{command}': {e}")),
        }
    }

    fn environment(&mut self) -> Option<Fingerprint> {
        let started = Instant::now();
        let fingerprinter = &mut self.fingerprinter;
        let fp = self.handle.block_on(fingerprinter.take());
        tracing::debug!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "environment fingerprint taken"
        );
        match fp {
            Ok(fp) => Some(fp),
            Err(e) => {
                tracing::warn!("no environment fingerprint: {e}");
                None
            }
        }
    }
}
