//! This machine's own load over a run (issue #39): the 1-minute load average when the run
//! began and when it ended, beside the CPU count, so a slowdown can be read against a busy
//! machine. Linux reads `/proc/loadavg`; elsewhere (Windows has no load average) it is "not
//! recorded", in words. It is the load of the machine comfy-bisect runs on: the server's only
//! when the server is local.

use serde::{Deserialize, Serialize};

/// This machine's load over one run (`run.json` → `host.load`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// The 1-minute load average when the run began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<f64>,
    /// The 1-minute load average when the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<f64>,
    /// Logical CPUs of this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
    /// What the numbers are, or why they are missing.
    #[serde(default)]
    pub note: String,
}

impl HostLoad {
    /// The load as read at the run's two ends (`before`, `after`: what [`read`] gave);
    /// `local`: the server runs on this machine.
    pub(crate) fn of(before: Result<f64, String>, after: Result<f64, String>, local: bool) -> Self {
        let cpus = std::thread::available_parallelism().ok().map(|n| n.get());
        let whose = if local {
            "this machine's (the server's too)"
        } else {
            "this machine's (not the server's: the server is elsewhere or was not found here)"
        };
        let note = match (&before, &after) {
            (Err(why), _) | (_, Err(why)) => format!("load average not recorded: {why}"),
            _ => format!(
                "1-minute load average from /proc/loadavg at the run's start and end, {whose}"
            ),
        };
        HostLoad {
            before: before.ok(),
            after: after.ok(),
            cpus,
            note,
        }
    }

    /// In words for beside a slowdown: `load 3.10 → 4.20 on 2 CPUs`, or why it is missing.
    pub(crate) fn describe(&self) -> String {
        match (self.before, self.after) {
            (Some(b), Some(a)) => {
                let cpus = self
                    .cpus
                    .map(|n| format!(" on {n} CPUs"))
                    .unwrap_or_default();
                format!("this machine's load {b:.2} → {a:.2}{cpus}")
            }
            _ => self.note.clone(),
        }
    }
}

/// The 1-minute load average of this machine (`/proc/loadavg`), or why it cannot be read.
#[cfg(target_os = "linux")]
pub(crate) fn read() -> Result<f64, String> {
    let text = std::fs::read_to_string("/proc/loadavg")
        .map_err(|e| format!("/proc/loadavg could not be read ({e})"))?;
    parse(&text).ok_or_else(|| format!("/proc/loadavg is not a load average: {:?}", text.trim()))
}

/// The 1-minute load average of this machine: not kept outside Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) fn read() -> Result<f64, String> {
    Err("this system has no /proc/loadavg (Windows keeps no load average)".to_string())
}

/// The first figure of a `/proc/loadavg` line (`0.52 0.58 0.59 1/467 12345`).
#[cfg(any(target_os = "linux", test))]
fn parse(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_figure_of_proc_loadavg_is_the_one_minute_load() {
        assert_eq!(parse("3.10 2.05 1.00 2/467 12345\n"), Some(3.10));
        assert_eq!(parse(""), None);
        assert_eq!(parse("busy"), None);
    }

    #[test]
    fn a_load_reads_beside_the_cpus_or_says_why_it_is_missing() {
        let mut l = HostLoad::of(Ok(3.1), Ok(4.2), true);
        l.cpus = Some(2);
        assert_eq!(l.describe(), "this machine's load 3.10 → 4.20 on 2 CPUs");
        let none = HostLoad::of(Err("no /proc/loadavg".into()), Ok(1.0), false);
        assert_eq!(
            none.describe(),
            "load average not recorded: no /proc/loadavg"
        );
        assert_eq!(none.before, None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_has_a_load_average() {
        assert!(read().is_ok());
    }
}
