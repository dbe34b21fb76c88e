//! Samples `/system_stats` (VRAM and system RAM) and, when the server runs on this machine, its
//! process's RSS and swap, in the background while a run is in flight.

use super::record::VramSample;
use crate::comfy::Client;
use crate::host::HostSample;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running sampler; [`Sampler::stop`] returns the series.
pub(crate) struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Series>,
}

/// What a sampler collected.
#[derive(Debug, Default)]
pub(crate) struct Series {
    /// VRAM of the primary device.
    pub vram: Vec<VramSample>,
    /// System RAM in use and the server process's memory.
    pub host: Vec<HostSample>,
    /// `/system_stats` requests that failed.
    pub failed: u32,
}

impl Sampler {
    /// Starts sampling every `interval`; times are ms since `t0`; `pid` is the server's process
    /// when it runs on this machine. The first sample is taken one interval from now (the run's
    /// own stats before submission are its first point), so the sampler never competes with
    /// `POST /prompt`.
    pub(crate) fn start(
        client: &Client,
        interval: Duration,
        t0: Instant,
        pid: Option<u32>,
    ) -> Sampler {
        let (stop, mut stopped) = watch::channel(false);
        let client = client.with_request_timeout(interval.max(Duration::from_secs(2)));
        let task = tokio::spawn(async move {
            let mut series = Series::default();
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = stopped.changed() => return series,
            }
            loop {
                let mut host = HostSample::default();
                match client.system_stats().await {
                    Ok(stats) => {
                        if let Some(d) = stats.primary() {
                            series.vram.push(VramSample {
                                t_ms: t0.elapsed().as_millis() as u64,
                                used_bytes: d.used(),
                                reserved_bytes: d.torch_vram_total,
                            });
                        }
                        host.ram_used_bytes = stats.system.ram_used();
                    }
                    Err(_) => series.failed += 1,
                }
                // Read even when the server does not answer: a process that swaps or dies shows.
                if let Some(pid) = pid {
                    let m = crate::host::process::memory(pid);
                    host.rss_bytes = m.map(|m| m.rss_bytes);
                    host.swap_bytes = m.map(|m| m.swap_bytes);
                }
                if pid.is_some() || host.ram_used_bytes.is_some() {
                    host.t_ms = t0.elapsed().as_millis() as u64;
                    series.host.push(host);
                }
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = stopped.changed() => break,
                }
                if *stopped.borrow() {
                    break;
                }
            }
            series
        });
        Sampler { stop, task }
    }

    /// Stops sampling and returns what was collected.
    pub(crate) async fn stop(self) -> Series {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}
