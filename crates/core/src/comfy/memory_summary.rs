//! The allocator table ComfyUI logs on an OOM: `execution.py` writes `Memory summary: ` and
//! `comfy.model_management.debug_memory_summary()` — PyTorch's `torch.cuda.memory_summary()` on
//! NVIDIA and AMD, nothing elsewhere — just before `Got an OOM, unloading all loaded models.`
//! The table is framed in `|`, says the device, the allocator's OOM and retry counts, and per
//! metric the current and peak use (the "all" row; the large/small pool rows are skipped).
//! Pure: text in, figures out.

use serde::{Deserialize, Serialize};

/// One memory metric of the table: current and peak use, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// `Cur Usage`.
    pub current_bytes: u64,
    /// `Peak Usage`.
    pub peak_bytes: u64,
}

/// The figures of one `Memory summary:` block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorSummary {
    /// `device ID N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// `CUDA OOMs: N` (the allocator's count since the process started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ooms: Option<u64>,
    /// `cudaMalloc retries: N` (allocations that succeeded only after freeing the cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc_retries: Option<u64>,
    /// `Allocated memory`: held by tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<Usage>,
    /// `Requested memory`: what the tensors asked for (before rounding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Usage>,
    /// `GPU reserved memory`: held by PyTorch's caching allocator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Usage>,
    /// `Non-releasable memory`: reserved but split, not given back (fragmentation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_releasable: Option<Usage>,
}

/// The marker ComfyUI writes before the table.
const MARKER: &str = "Memory summary:";

/// The last `Memory summary:` block of a console text, when it holds a PyTorch table (an
/// empty summary, as on a device without one, gives None).
pub(crate) fn last_summary(console: &str) -> Option<AllocatorSummary> {
    let start = console.rfind(MARKER)?;
    let rest = &console[start + MARKER.len()..];
    let mut summary = AllocatorSummary::default();
    let mut seen = false;
    for (i, line) in rest.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with('|') {
            if i == 0 {
                continue;
            }
            break;
        }
        seen |= read_line(line, &mut summary);
    }
    seen.then_some(summary)
}

/// Reads one `|…|` line into `summary`; true when it held a figure.
fn read_line(line: &str, summary: &mut AllocatorSummary) -> bool {
    if let Some(id) = after(line, "memory summary, device ID") {
        summary.device = first_number(id).map(|n| n as u32);
        return summary.device.is_some();
    }
    if let Some(ooms) = after(line, "OOMs:") {
        summary.ooms = first_number(ooms);
        summary.alloc_retries = after(line, "retries:").and_then(first_number);
        return true;
    }
    let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
    if cells.len() < 3 {
        return false;
    }
    let slot = match cells[0] {
        "Allocated memory" => &mut summary.allocated,
        "Requested memory" => &mut summary.requested,
        "GPU reserved memory" | "Reserved memory" => &mut summary.reserved,
        "Non-releasable memory" => &mut summary.non_releasable,
        _ => return false,
    };
    match (size(cells[1]), size(cells[2])) {
        (Some(current_bytes), Some(peak_bytes)) => {
            *slot = Some(Usage {
                current_bytes,
                peak_bytes,
            });
            true
        }
        _ => false,
    }
}

fn after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.find(key).map(|i| &line[i + key.len()..])
}

fn first_number(text: &str) -> Option<u64> {
    let digits: String = text
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `13824 MiB`, `523264 KiB`, `0 B` (PyTorch ≥ 1.x) or `4261 MB` (older tables; binary too).
fn size(cell: &str) -> Option<u64> {
    let (n, unit) = cell.split_once(' ')?;
    let n: u64 = n.trim().parse().ok()?;
    let shift = match unit.trim() {
        "B" => 0,
        "KiB" | "KB" => 10,
        "MiB" | "MB" => 20,
        "GiB" | "GB" => 30,
        "TiB" | "TB" => 40,
        "PiB" | "PB" => 50,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_table_before_got_an_oom_gives_device_counts_and_current_and_peak_figures() {
        let log =
            std::fs::read_to_string(format!("{}/oom-2026/memory-summary.log", crate::FIXTURES))
                .unwrap();
        let s = last_summary(&log).expect("a summary");
        assert_eq!(
            (s.device, s.ooms, s.alloc_retries),
            (Some(0), Some(1), Some(2))
        );
        assert_eq!(
            s.allocated,
            Some(Usage {
                current_bytes: 13824 * MIB,
                peak_bytes: 14301 * MIB
            })
        );
        assert_eq!(s.requested.unwrap().peak_bytes, 14262 * MIB);
        assert_eq!(s.reserved.unwrap().current_bytes, 14336 * MIB);
        assert_eq!(s.non_releasable.unwrap().current_bytes, 523264 << 10);
    }

    #[test]
    fn an_empty_summary_or_none_gives_nothing() {
        let empty = "Memory summary: \nGot an OOM, unloading all loaded models.\n";
        assert_eq!(last_summary(empty), None);
        assert_eq!(
            last_summary("got prompt\nPrompt executed in 1.00 seconds\n"),
            None
        );
    }

    #[test]
    fn older_tables_in_mb_read_as_binary_units() {
        let log = "Memory summary: |====|\n\
                   |                  PyTorch CUDA memory summary, device ID 1                 |\n\
                   | Allocated memory      |  146836 KB |    4261 MB |     847 GB |     847 GB |\n";
        let s = last_summary(log).unwrap();
        assert_eq!(s.device, Some(1));
        assert_eq!(s.allocated.unwrap().peak_bytes, 4261 * MIB);
    }
}
