//! The real [`Backend`]: runs through `run::execute_with` on a ComfyUI server (or the simulator),
//! raw events appended to `events.ndjson` as they arrive, history lookups for resume, the
//! `--restart-cmd` shell command (bounded by `--restart-timeout`, see `crate::server::restart`), the
//! local server's process (found at the start, checked before every run, found again after a
//! restart) and the kernel log read after a lost server.

use super::driver::{Attempt, Backend, Recovery, RunSpec};
use super::evidence::record_from_history;
use super::progress::Progress;
use crate::comfy::protocol::QueuePosition;
use crate::comfy::{Client, Fingerprint, Fingerprinter};
use crate::host::{process, KernelEvidence, Located, ServerProcess};
use crate::run::{execute_with, Both, NdjsonWriter, RunRequest};
use crate::workflow::Workflow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::watch;

/// The OOM-killer lines of a lost server's run, in its run folder.
pub(crate) const KERNEL_LOG_FILE: &str = "kernel-oom.log";

/// Seconds added before the run's start and after its end when the kernel log is read.
const KERNEL_LOG_MARGIN_S: i64 = 10;

/// Puts the kernel's evidence into a record and diagnoses it again.
pub(crate) fn record_kernel(record: &mut crate::run::RunRecord, evidence: KernelEvidence) {
    record.kernel = Some(evidence);
    record.attach_diagnosis();
}

/// How long a resumed session waits for a prompt that is still queued or running.
pub(crate) const RECOVER_WAIT: Duration = Duration::from_secs(6 * 3600);

/// Aborts a watcher task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs on a real server through a tokio runtime handle (the driver itself is synchronous).
pub struct LiveBackend {
    handle: Handle,
    client: Client,
    server: String,
    cancel: watch::Receiver<bool>,
    progress: Option<Progress>,
    fingerprinter: Fingerprinter,
    /// The server's process when the server is on this machine (Err: why it was not found);
    /// None for a remote server.
    server_process: Option<Result<ServerProcess, String>>,
    /// `/system_stats` sampling interval.
    pub sample_interval: Duration,
    /// How often a resumed in-flight prompt is polled.
    pub poll_interval: Duration,
    /// `--restart-timeout`.
    pub restart_limit: Duration,
    /// Where `--restart-cmd`'s output is appended (discarded when `None`).
    pub restart_log: Option<PathBuf>,
}

impl LiveBackend {
    /// A backend over `client`; `cancel` turns true on Ctrl-C.
    pub fn new(handle: Handle, client: Client, cancel: watch::Receiver<bool>) -> LiveBackend {
        let server = client.server_url();
        let mut backend = LiveBackend {
            handle,
            fingerprinter: Fingerprinter::new(client.clone()),
            client,
            server,
            cancel,
            progress: None,
            server_process: None,
            sample_interval: Duration::from_millis(500),
            poll_interval: Duration::from_secs(1),
            restart_limit: crate::server::restart::DEFAULT_RESTART_TIMEOUT,
            restart_log: None,
        };
        backend.locate_server();
        backend
    }

    /// Finds the server's process when the server is on this machine.
    fn locate_server(&mut self) {
        let located = process::locate(&self.server);
        if let Located::Found(p) = &located {
            tracing::info!(pid = p.pid, name = %p.name, "the server's process is local");
        }
        self.server_process = located.into_request();
    }

    /// Before a run: the process found earlier must still be the one listening (a restart,
    /// by us or by a supervisor, starts a new one); otherwise it is looked up again.
    fn check_server_process(&mut self) {
        let current = match &self.server_process {
            None => return,
            Some(Ok(p)) => {
                let (ips, port) = process::addresses(&self.server);
                process::still_serving(p.pid, &ips, port)
            }
            Some(Err(_)) => false,
        };
        if !current {
            self.locate_server();
        }
    }

    /// After a run that lost a local server: the kernel log of the run's window, matched to
    /// the server's pid, recorded in the run and (its OOM-killer lines) in `run_dir`.
    fn read_kernel_log(&self, record: &mut crate::run::RunRecord, run_dir: Option<&Path>) {
        let pid = match &self.server_process {
            None => return,
            Some(Ok(p)) => Some(p.pid),
            Some(Err(_)) => None,
        };
        let unix = |t: &str| crate::units::parse_rfc3339(t).map(|t| t.as_second());
        let now = jiff::Timestamp::now().as_second();
        let since = unix(&record.started_at).unwrap_or(now) - KERNEL_LOG_MARGIN_S;
        let until = unix(&record.finished_at).unwrap_or(now).max(now) + KERNEL_LOG_MARGIN_S;
        let evidence = crate::host::kernel_log::read_window(since, until, pid);
        if let (Some(dir), false) = (run_dir, evidence.lines.is_empty()) {
            let path = dir.join(KERNEL_LOG_FILE);
            let text = evidence.lines.join("\n") + "\n";
            if let Err(e) = crate::atomic::write_atomic(&path, text.as_bytes()) {
                tracing::warn!("cannot write {}: {e}", path.display());
            }
        }
        record_kernel(record, evidence);
    }

    /// Bounds `--restart-cmd` by `limit` and appends its output to `log`.
    pub(crate) fn with_restart(mut self, limit: Duration, log: PathBuf) -> LiveBackend {
        self.restart_limit = limit;
        self.restart_log = Some(log);
        self
    }

    /// The cancel signal of one run: Ctrl-C (SIGTERM, SIGHUP), or `stop_at` passing (the
    /// deadline plus its grace). The watcher task ends when the guard is dropped.
    fn run_cancel(
        &self,
        stop_at: Option<jiff::Timestamp>,
    ) -> (watch::Receiver<bool>, Option<AbortOnDrop>) {
        let Some(at) = stop_at else {
            return (self.cancel.clone(), None);
        };
        let wait =
            Duration::try_from(at.duration_since(jiff::Timestamp::now())).unwrap_or_default();
        let (tx, rx) = watch::channel(*self.cancel.borrow());
        let mut user = self.cancel.clone();
        let task = self.handle.spawn(async move {
            let timer = tokio::time::sleep(wait);
            tokio::pin!(timer);
            let mut user_open = true;
            loop {
                tokio::select! {
                    _ = &mut timer => break,
                    changed = user.changed(), if user_open => match changed {
                        Ok(()) if *user.borrow() => break,
                        Ok(()) => {}
                        Err(_) => user_open = false,
                    },
                }
            }
            let _ = tx.send(true);
        });
        (rx, Some(AbortOnDrop(task)))
    }

    /// Shows node and step progress of each run on `progress`.
    pub(crate) fn with_progress(mut self, progress: Progress) -> LiveBackend {
        self.progress = Some(progress);
        self
    }
}

impl Backend for LiveBackend {
    fn output_file(
        &mut self,
        file: &crate::run::product::OutputFile,
        cap: usize,
    ) -> Result<Vec<u8>, String> {
        let view = crate::comfy::client::ViewFile {
            filename: &file.filename,
            subfolder: &file.subfolder,
            kind: &file.kind,
        };
        let never: &crate::comfy::client::Enough<'_> = &|_, _, _| false;
        let read = crate::comfy::client::ViewRead {
            from: None,
            cap,
            enough: never,
        };
        match self.handle.block_on(self.client.view_read(&view, &read)) {
            Ok(Some(head)) if head.total.is_some_and(|t| t > cap as u64) => {
                Err(format!("larger than {} MiB: not read", cap / (1024 * 1024)))
            }
            Ok(Some(head)) => Ok(head.head),
            Ok(None) => Err("the server has no such file (/view answered 404)".into()),
            Err(e) => Err(format!("cannot read it from /view: {e}")),
        }
    }

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
        request.stall = spec.stall;
        request.sample_interval = self.sample_interval;
        let (cancel, _deadline_watch) = self.run_cancel(spec.stop_at);
        request.cancel = Some(cancel);
        self.check_server_process();
        request.server_process = self.server_process.clone();
        let file = match crate::atomic::open_private()
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
        let mut record = record;
        // What the next fingerprint needs to know: a reconnected socket may mean a restart.
        self.fingerprinter
            .ran(&record.prompt_id, record.raw.client_ids.len() > 1);
        if let crate::run::Outcome::ServerLost(info) = record.outcome() {
            self.fingerprinter.invalidate();
            if !info.submitted {
                return Attempt::NotSubmitted(info.reason);
            }
            self.read_kernel_log(&mut record, spec.events_file.parent());
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
        let alive = self
            .handle
            .block_on(async move { client.system_stats().await.is_ok() });
        if !alive {
            // Whatever answers next may be another server process.
            self.fingerprinter.invalidate();
        }
        alive
    }

    fn restart(&mut self, command: &str) -> Result<(), String> {
        // The restarted server is a new process: looked up again before the next run, and its
        // node set is fetched again.
        self.server_process = self.server_process.take().map(|_| Err("restarted".into()));
        self.fingerprinter.invalidate();
        crate::server::restart::run_restart(
            command,
            self.restart_limit,
            self.restart_log.as_deref(),
        )
    }

    fn custom_classes(
        &self,
        classes: &[&str],
    ) -> Option<std::collections::BTreeMap<String, String>> {
        self.fingerprinter.custom_classes(classes.iter().copied())
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
