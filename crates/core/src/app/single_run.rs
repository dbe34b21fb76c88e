//! The one-run commands: `check` (one run for `git bisect run`) and `submit` (one workflow,
//! its record), each interrupted on our prompt only by Ctrl-C, SIGTERM or SIGHUP.

use super::session::stop_signal;
use super::{AppError, AppResult, ErrorKind};
use crate::comfy::Client;
use crate::workflow::Workflow;
use std::time::Duration;

/// Runs `check`: one run of a workflow as given on a freshly (re)started server, answered as
/// `git bisect run` reads exit statuses (see [`crate::check`]); Ctrl-C, SIGTERM and
/// SIGHUP interrupt it. Errors: bad input (`Input`), the journal cannot be written (`Failed`).
pub fn check(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: crate::check::CheckOptions,
) -> AppResult<crate::check::CheckRecord> {
    use crate::check::CheckError;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let signals = rt.spawn(async move {
        if stop_signal().await.is_some() {
            let _ = cancel_tx.send(true);
        }
    });
    let result = crate::check::check(rt.handle(), client, options, cancel_rx);
    signals.abort();
    result.map_err(|e| match e {
        CheckError::Input(m) => AppError::new(ErrorKind::Input, m),
        CheckError::Journal(e) => AppError::new(ErrorKind::Failed, e),
    })
}

/// How `submit` runs one workflow.
#[derive(Debug, Clone)]
pub struct SubmitOptions {
    /// Free models and memory first (`--warm` turns it off).
    pub cold: bool,
    /// Longest run, from submission.
    pub timeout: Duration,
    /// Longest time without an event for our running prompt.
    pub stall_timeout: Duration,
    /// `/system_stats` sampling interval.
    pub sample_interval: Duration,
    /// `--allow-shared-server`: run even when a session holds the server's lock.
    pub allow_shared_server: bool,
}

/// Runs `workflow` once on the server (`submit`): checks that the server answers, interrupts
/// only our prompt on Ctrl-C, SIGTERM or SIGHUP (`on_signal` is told the signal's name; a
/// second one exits at once with 130), samples the local server's process when there is one,
/// and returns the run's record. Error: the server does not answer (`Unreachable`).
pub async fn submit(
    client: &Client,
    workflow: Workflow,
    options: &SubmitOptions,
    observer: &mut dyn crate::run::RunObserver,
    on_signal: fn(&str),
) -> AppResult<crate::run::RunRecord> {
    // One user of a GPU at a time, as for a bisect or a check: a submit in the middle of a
    // session would free its models (POST /free) and skew its runs. Held until the run ends.
    let _lock = crate::server::lock::SessionLock::acquire_or_share(
        &client.server_url(),
        "(submit)",
        options.allow_shared_server,
    )
    .map_err(|e| AppError {
        kind: ErrorKind::Failed,
        message: format!("cannot submit: {e}"),
    })?;
    if let Err(e) = client.system_stats().await {
        return Err(AppError {
            kind: ErrorKind::Unreachable,
            message: format!("{e}\n{}.", e.advice()),
        });
    }
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(async move {
        if let Some(signal) = stop_signal().await {
            on_signal(signal);
            let _ = cancel_tx.send(true);
            if stop_signal().await.is_some() {
                std::process::exit(130);
            }
        }
    });
    let mut request = crate::run::RunRequest::new(workflow);
    request.cold = options.cold;
    request.timeout = options.timeout;
    request.stall_timeout = options.stall_timeout;
    request.sample_interval = options.sample_interval;
    request.cancel = Some(cancel_rx);
    request.server_process = crate::host::process::locate(&client.server_url()).into_request();
    let record = crate::run::execute_with(client, request, observer).await;
    watcher.abort();
    Ok(record)
}
