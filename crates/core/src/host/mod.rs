//! Host memory and the operating system's evidence: system RAM from `/system_stats`, the local
//! server process's RSS and swap ([`process`]), and the kernel log's OOM-killer lines for a server
//! that died (`kernel_log`), and this machine's load average over a run ([`load`]).
//!
//! This module owns the `host` section of `run.json` ([`HostReport`]) and the host-RAM pressure
//! reading of it (`HostReport::pressure`); `run` samples, `session` reads the kernel log after a
//! lost server, `report` shows peaks.

pub(crate) mod kernel_log;
pub mod load;
pub mod process;

pub use kernel_log::{KernelEvidence, OomKill};
pub use load::HostLoad;
pub use process::{Located, ProcessMemory, ServerProcess};

use serde::{Deserialize, Serialize};

/// One host-memory sample, taken with each `/system_stats` sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// ms since the run started.
    pub t_ms: u64,
    /// System RAM in use: `ram_total − ram_free` of `/system_stats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_used_bytes: Option<u64>,
    /// The server process's resident set (VmRSS), when it is local and was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// The server process's swapped-out memory (VmSwap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_bytes: Option<u64>,
}

/// Host memory over one run (`run.json` → `host`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// `ram_total` of `/system_stats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_total_bytes: Option<u64>,
    /// Highest system RAM in use sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_ram_used_bytes: Option<u64>,
    /// The server's process, when the server is on this machine and it was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ServerProcess>,
    /// Highest RSS of the server process: the kernel's own high-water mark (VmHWM) when it rose
    /// during the run (exact, spikes included), else the highest sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// Highest swap of the server process sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_swap_bytes: Option<u64>,
    /// VmHWM before the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hwm_before_bytes: Option<u64>,
    /// VmHWM at the last reading of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hwm_after_bytes: Option<u64>,
    /// ms since the start when the server process was first found gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_gone_ms: Option<u64>,
    /// The series.
    #[serde(default)]
    pub samples: Vec<HostSample>,
    /// What the numbers are (and why the process ones are missing, when they are).
    #[serde(default)]
    pub note: String,
    /// This machine's load average at the run's ends (issue #39: read beside a slowdown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<HostLoad>,
}

impl HostReport {
    /// A report over `samples`; `process` with its VmHWM before and after the run.
    pub fn from_samples(
        samples: Vec<HostSample>,
        ram_total_bytes: Option<u64>,
        process: Option<ServerProcess>,
        hwm: (Option<u64>, Option<u64>),
        process_gone_ms: Option<u64>,
        note: String,
    ) -> HostReport {
        let sampled_rss = samples.iter().filter_map(|s| s.rss_bytes).max();
        let peak_rss_bytes = match (hwm, sampled_rss) {
            ((Some(before), Some(after)), s) if after > before => Some(after.max(s.unwrap_or(0))),
            ((None, Some(after)), s) => Some(after.max(s.unwrap_or(0))),
            (_, s) => s,
        };
        HostReport {
            ram_total_bytes,
            peak_ram_used_bytes: samples.iter().filter_map(|s| s.ram_used_bytes).max(),
            process,
            peak_rss_bytes,
            peak_swap_bytes: samples.iter().filter_map(|s| s.swap_bytes).max(),
            hwm_before_bytes: hwm.0,
            hwm_after_bytes: hwm.1,
            process_gone_ms,
            samples,
            note,
            load: None,
        }
    }

    /// Host-RAM pressure in words when the run came close to the machine's RAM (system RAM in
    /// use at 90 % of the total or more) or the server process was swapping; None otherwise.
    pub(crate) fn pressure(&self) -> Option<String> {
        let gib = crate::units::gib_or_mib;
        let mut parts = Vec::new();
        if let (Some(peak), Some(total)) = (self.peak_ram_used_bytes, self.ram_total_bytes) {
            if total > 0 && peak as f64 >= 0.9 * total as f64 {
                parts.push(format!(
                    "system RAM in use peaked at {} of {} ({:.0} %)",
                    gib(peak),
                    gib(total),
                    100.0 * peak as f64 / total as f64
                ));
            }
        }
        if let Some(swap) = self.peak_swap_bytes.filter(|s| *s > 0) {
            parts.push(format!("the server process had {} in swap", gib(swap)));
        }
        if parts.is_empty() {
            return None;
        }
        if let Some(rss) = self.peak_rss_bytes {
            parts.push(format!(
                "the server process's resident memory peaked at {}",
                gib(rss)
            ));
        }
        Some(format!("Host-RAM pressure: {}.", parts.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn sample(t: u64, ram: u64, rss: u64, swap: u64) -> HostSample {
        HostSample {
            t_ms: t,
            ram_used_bytes: Some(ram),
            rss_bytes: Some(rss),
            swap_bytes: Some(swap),
        }
    }

    #[test]
    fn the_kernels_high_water_mark_is_the_peak_when_it_rose_during_the_run() {
        let samples = vec![sample(0, 4 * GIB, GIB, 0), sample(500, 9 * GIB, 3 * GIB, 0)];
        let proc = Some(ServerProcess {
            pid: 7,
            name: "python3".into(),
        });
        let r = HostReport::from_samples(
            samples.clone(),
            Some(24 * GIB),
            proc.clone(),
            (Some(2 * GIB), Some(5 * GIB)),
            None,
            String::new(),
        );
        assert_eq!(r.peak_rss_bytes, Some(5 * GIB), "a spike between samples");
        assert_eq!(r.peak_ram_used_bytes, Some(9 * GIB));
        // An earlier run set the high-water mark: this run's peak is the sampled one.
        let r = HostReport::from_samples(
            samples,
            Some(24 * GIB),
            proc,
            (Some(8 * GIB), Some(8 * GIB)),
            None,
            String::new(),
        );
        assert_eq!(r.peak_rss_bytes, Some(3 * GIB));
        assert_eq!(r.pressure(), None);
    }

    #[test]
    fn pressure_is_named_near_the_total_or_with_swap() {
        let r = HostReport::from_samples(
            vec![sample(0, 23 * GIB, 18 * GIB, 0)],
            Some(24 * GIB),
            None,
            (None, None),
            None,
            String::new(),
        );
        let p = r.pressure().unwrap();
        assert!(p.contains("23.0 GiB of 24.0 GiB (96 %)"), "{p}");
        let r = HostReport::from_samples(
            vec![sample(0, 10 * GIB, 8 * GIB, GIB)],
            Some(24 * GIB),
            None,
            (None, None),
            None,
            String::new(),
        );
        assert!(r.pressure().unwrap().contains("1.0 GiB in swap"));
    }
}
