//! Samples `/system_stats` in the background while a run is in flight.

use super::record::VramSample;
use crate::comfy::Client;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running sampler; [`Sampler::stop`] returns the series.
pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<(Vec<VramSample>, u32)>,
}

impl Sampler {
    /// Starts sampling every `interval`; times are ms since `t0`. The first sample is taken one
    /// interval from now (the run's own stats before submission are its first point), so the
    /// sampler never competes with `POST /prompt`.
    pub fn start(client: &Client, interval: Duration, t0: Instant) -> Sampler {
        let (stop, mut stopped) = watch::channel(false);
        let client = client.with_request_timeout(interval.max(Duration::from_secs(2)));
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut failed = 0u32;
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = stopped.changed() => return (samples, failed),
            }
            loop {
                match client.system_stats().await {
                    Ok(stats) => {
                        if let Some(d) = stats.primary() {
                            samples.push(VramSample {
                                t_ms: t0.elapsed().as_millis() as u64,
                                used_bytes: d.used(),
                                reserved_bytes: d.torch_vram_total,
                            });
                        }
                    }
                    Err(_) => failed += 1,
                }
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = stopped.changed() => break,
                }
                if *stopped.borrow() {
                    break;
                }
            }
            (samples, failed)
        });
        Sampler { stop, task }
    }

    /// Stops sampling and returns (samples, failed sample count).
    pub async fn stop(self) -> (Vec<VramSample>, u32) {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}
