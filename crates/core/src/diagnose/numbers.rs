//! Allocator numbers in MiB from the PyTorch, cudaMallocAsync, MPS, XPU, DirectML, numpy and
//! CPU-allocator messages, and the checks that decide whether they can be reasoned with.
//!
//! Units are binary: bytes ÷ 1048576, KiB ÷ 1024, GiB × 1024; the old `KB`/`MB`/`GB` wording of
//! PyTorch is computed in powers of 1024 too. The cudaMallocAsync "no limit" sentinel is dropped.

use regex::{Regex, RegexBuilder};
use std::sync::OnceLock;

use crate::vocab::Numbers;

/// A value followed by its unit; group `n` is the number, `u` the unit.
const VAL: &str =
    r"(?P<n>\d+(?:\.\d*)?|\.\d+)\s*(?P<u>tib|gib|mib|kib|tb|gb|mb|kb|bytes|byte|b)(?-u:\b)";

/// Values at or above this many GiB are the cudaMallocAsync "no limit" sentinel (2^34 GiB).
const SENTINEL_GIB: f64 = 1.0e9;

/// Values above this many MiB (1 PiB) cannot be real memory sizes: an overflowed counter.
const IMPLAUSIBLE_MIB: f64 = 1024.0 * 1024.0 * 1024.0;

struct Patterns {
    requested: Vec<Regex>,
    total: Vec<Regex>,
    free: Vec<Regex>,
    process_in_use: Vec<Regex>,
    other_process: Regex,
    allocated: Vec<Regex>,
    reserved_unallocated: Vec<Regex>,
    reserved_total: Vec<Regex>,
    device_limit: Vec<Regex>,
    pytorch_limit: Vec<Regex>,
    mps_allocated: Vec<Regex>,
    mps_other: Vec<Regex>,
    mps_max: Vec<Regex>,
    gpu_index: Vec<Regex>,
}

fn build(templates: &[&str]) -> Vec<Regex> {
    templates
        .iter()
        .map(|t| {
            RegexBuilder::new(&t.replace("{V}", VAL))
                .case_insensitive(true)
                .build()
                .expect("static regex")
        })
        .collect()
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        requested: build(&[
            r"tried to allocate\s+{V}",
            r"requested\s*:\s*{V}",
            r"could not allocate tensor with\s+{V}",
            r"unable to allocate\s+{V}\s+for an array",
            r"unable to mmap\s+{V}",
        ]),
        total: build(&[
            r"total\s+capac(?:i)?ty\s+of\s+{V}",
            r"{V}\s+total\s+capacity",
        ]),
        free: build(&[
            r"of\s+which\s+{V}\s+is\s+free",
            r"free\s*\(according to cuda\)\s*:\s*{V}",
            // same line only: cudaMallocAsync's `Device limit : X` ends one line and the next
            // starts `Free (according to CUDA):` (ComfyUI issue #13598, cut after "Free").
            r"{V}[ \t]+free(?-u:\b)",
        ]),
        process_in_use: build(&[r"this\s+process\s+has\s+{V}\s+memory\s+in\s+use"]),
        other_process: build(&[r"(?-u:\b)process\s+\d+\s+has\s+{V}\s+memory\s+in\s+use"]).remove(0),
        allocated: build(&[
            r"{V}\s+is\s+allocated\s+by\s+pytorch",
            r"{V}\s+already\s+allocated",
            r"currently\s+allocated\s*:\s*{V}",
        ]),
        reserved_unallocated: build(&[r"{V}\s+is\s+reserved\s+by\s+pytorch\s+but\s+unallocated"]),
        reserved_total: build(&[
            r"{V}\s+reserved\s+in\s+total\s+by\s+pytorch",
            r"{V}\s+cached(?-u:\b)",
        ]),
        device_limit: build(&[r"device\s+limit\s*:\s*{V}"]),
        pytorch_limit: build(&[
            r"pytorch\s+limit\s*\(set by user-supplied memory fraction\)\s*:\s*{V}",
        ]),
        mps_allocated: build(&[r"mps\s+allocated\s*:\s*{V}"]),
        mps_other: build(&[r"other\s+allocations\s*:\s*{V}"]),
        mps_max: build(&[r"max\s+allowed\s*:\s*{V}"]),
        gpu_index: build(&[
            r"(?-u:\b)gpu\s+(?P<i>\d+)(?-u:\b)",
            r"(?-u:\b)device\s+(?P<i>\d+)(?-u:\b)",
        ]),
    })
}

/// Converts a number and unit to MiB (binary units; KB/MB/GB/TB treated as KiB/MiB/GiB/TiB).
pub(crate) fn to_mib(number: f64, unit: &str) -> Option<f64> {
    let factor = match unit.to_ascii_lowercase().as_str() {
        "tib" | "tb" => 1024.0 * 1024.0,
        "gib" | "gb" => 1024.0,
        "mib" | "mb" => 1.0,
        "kib" | "kb" => 1.0 / 1024.0,
        "b" | "byte" | "bytes" => 1.0 / (1024.0 * 1024.0),
        _ => return None,
    };
    Some(round3(number * factor))
}

fn round3(x: f64) -> f64 {
    if x.abs() < 1.0e12 {
        (x * 1000.0).round() / 1000.0
    } else {
        x
    }
}

fn capture_value(re: &Regex, text: &str) -> Option<(f64, String)> {
    let caps = re.captures(text)?;
    let number: f64 = caps.name("n")?.as_str().parse().ok()?;
    let unit = caps.name("u")?.as_str().to_string();
    Some((number, unit))
}

fn first(res: &[Regex], text: &str) -> Option<f64> {
    res.iter()
        .find_map(|re| capture_value(re, text))
        .and_then(|(n, u)| to_mib(n, &u))
}

/// Parses every allocator number present in an error message.
pub(crate) fn parse(text: &str) -> Numbers {
    let p = patterns();
    let other: Vec<f64> = p
        .other_process
        .captures_iter(text)
        .filter_map(|c| {
            let n: f64 = c.name("n")?.as_str().parse().ok()?;
            to_mib(n, c.name("u")?.as_str())
        })
        .collect();
    let pytorch_limit = p
        .pytorch_limit
        .iter()
        .find_map(|re| capture_value(re, text))
        .and_then(|(n, u)| {
            let mib = to_mib(n, &u)?;
            (mib < SENTINEL_GIB * 1024.0).then_some(mib)
        });
    let gpu_index = p.gpu_index.iter().find_map(|re| {
        re.captures(text)
            .and_then(|c| c.name("i")?.as_str().parse::<u32>().ok())
    });
    Numbers {
        requested_mib: first(&p.requested, text),
        gpu_index,
        total_mib: first(&p.total, text),
        free_mib: first(&p.free, text),
        process_in_use_mib: first(&p.process_in_use, text),
        allocated_mib: first(&p.allocated, text),
        reserved_unallocated_mib: first(&p.reserved_unallocated, text),
        device_limit_mib: first(&p.device_limit, text),
        reserved_total_mib: first(&p.reserved_total, text),
        other_processes_mib: (!other.is_empty()).then(|| round3(other.iter().sum())),
        pytorch_limit_mib: pytorch_limit,
        mps_allocated_mib: first(&p.mps_allocated, text),
        mps_other_allocations_mib: first(&p.mps_other, text),
        mps_max_allowed_mib: first(&p.mps_max, text),
    }
}

impl Numbers {
    /// The MiB fields with their JSON names, for checks and rendering.
    pub fn named_values(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("requested_mib", self.requested_mib),
            ("total_mib", self.total_mib),
            ("free_mib", self.free_mib),
            ("process_in_use_mib", self.process_in_use_mib),
            ("allocated_mib", self.allocated_mib),
            ("reserved_unallocated_mib", self.reserved_unallocated_mib),
            ("device_limit_mib", self.device_limit_mib),
            ("reserved_total_mib", self.reserved_total_mib),
            ("other_processes_mib", self.other_processes_mib),
            ("pytorch_limit_mib", self.pytorch_limit_mib),
            ("mps_allocated_mib", self.mps_allocated_mib),
            ("mps_other_allocations_mib", self.mps_other_allocations_mib),
            ("mps_max_allowed_mib", self.mps_max_allowed_mib),
        ]
    }

    /// True when no number was printed at all.
    pub fn is_empty(&self) -> bool {
        self.gpu_index.is_none() && self.named_values().iter().all(|(_, v)| v.is_none())
    }

    /// The reserved-but-unallocated gap, from the new or the old message format.
    pub(crate) fn reserved_gap_mib(&self) -> Option<f64> {
        self.reserved_unallocated_mib.or_else(|| {
            match (self.reserved_total_mib, self.allocated_mib) {
                (Some(r), Some(a)) if r >= a => Some(round3(r - a)),
                _ => None,
            }
        })
    }
}

/// Slack for comparisons between printed values, which are rounded to two decimals of a GiB.
fn slack(x: f64) -> f64 {
    (x.abs() * 0.01).max(16.0)
}

use crate::units::mib;

/// Checks that the numbers are finite, non-negative, plausible and ordered. Each problem is
/// returned in words; an empty list means the numbers can be reasoned with.
pub(crate) fn check(n: &Numbers) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, value) in n.named_values() {
        let Some(v) = value else { continue };
        if !v.is_finite() {
            problems.push(format!("{name} is not a finite number"));
        } else if v < 0.0 {
            problems.push(format!("{name} is negative ({})", mib(v)));
        } else if v > IMPLAUSIBLE_MIB {
            problems.push(format!(
                "{name} = {} is larger than any real device: an overflowed (unsigned underflow) value, kept as printed but not trusted",
                mib(v)
            ));
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    let mut ordered = |cond: bool, text: String| {
        if !cond {
            problems.push(text);
        }
    };
    if let (Some(free), Some(total)) = (n.free_mib, n.total_mib) {
        ordered(
            free <= total + slack(total),
            format!(
                "free ({}) is larger than the total capacity ({})",
                mib(free),
                mib(total)
            ),
        );
    }
    if let (Some(a), Some(total)) = (n.allocated_mib, n.total_mib) {
        let reserved = a + n.reserved_unallocated_mib.unwrap_or(0.0);
        ordered(
            reserved <= total + slack(total),
            format!(
                "allocated plus reserved-unallocated ({}) is larger than the total capacity ({})",
                mib(reserved),
                mib(total)
            ),
        );
    }
    if let (Some(a), Some(r)) = (n.allocated_mib, n.reserved_total_mib) {
        ordered(
            a <= r + slack(r),
            format!(
                "allocated ({}) is larger than reserved in total ({})",
                mib(a),
                mib(r)
            ),
        );
    }
    if let (Some(r), Some(total)) = (n.reserved_total_mib, n.total_mib) {
        ordered(
            r <= total + slack(total),
            format!(
                "reserved in total ({}) is larger than the total capacity ({})",
                mib(r),
                mib(total)
            ),
        );
    }
    if let (Some(p), Some(total)) = (n.process_in_use_mib, n.total_mib) {
        ordered(
            p <= total + slack(total),
            format!(
                "this process's memory in use ({}) is larger than the total capacity ({})",
                mib(p),
                mib(total)
            ),
        );
    }
    if let (Some(p), Some(a)) = (n.process_in_use_mib, n.allocated_mib) {
        let reserved = a + n.reserved_unallocated_mib.unwrap_or(0.0);
        ordered(
            p + slack(p) >= reserved,
            format!(
                "this process's memory in use ({}) is smaller than what PyTorch reserved ({})",
                mib(p),
                mib(reserved)
            ),
        );
    }
    // No rule compares "Currently allocated" with "Device limit": with dynamic VRAM the
    // allocated figure counts mapped (not resident) weights and is often above the limit
    // (ComfyUI issues #13598, #13117). No rule compares free with the request either: both are
    // printed to two decimals, a request can fail with as much free (fragmentation, the
    // driver's own reservations), and the two figures are read at different moments.
    if let (Some(a), Some(o), Some(max)) = (
        n.mps_allocated_mib,
        n.mps_other_allocations_mib,
        n.mps_max_allowed_mib,
    ) {
        let need = a + o + n.requested_mib.unwrap_or(0.0);
        ordered(
            need + slack(max) >= max,
            format!(
                "MPS allocated + other allocations + request ({}) stays below the maximum allowed ({})",
                mib(need),
                mib(max)
            ),
        );
    }
    problems
}

/// True when a large reserved-but-unallocated gap is visible (fragmentation: not proven).
pub(crate) fn fragmentation_visible(n: &Numbers) -> bool {
    let Some(gap) = n.reserved_gap_mib() else {
        return false;
    };
    if gap <= 0.0 {
        return false;
    }
    match n.requested_mib {
        Some(req) => gap >= req || gap >= 1024.0,
        None => gap >= 1024.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_cuda_format() {
        let n = parse("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 23.65 GiB of which 1.08 GiB is free. Process 1234 has 1.00 GiB memory in use. Process 99 has 512.00 MiB memory in use. Including non-PyTorch memory, this process has 21.05 GiB memory in use. Of the allocated memory 19.97 GiB is allocated by PyTorch, and 127.96 MiB is reserved by PyTorch but unallocated.");
        assert_eq!(n.requested_mib, Some(2048.0));
        assert_eq!(n.gpu_index, Some(1));
        assert_eq!(n.total_mib, Some(24217.6));
        assert_eq!(n.free_mib, Some(1105.92));
        assert_eq!(n.process_in_use_mib, Some(21555.2));
        assert_eq!(n.other_processes_mib, Some(1536.0));
        assert_eq!(n.allocated_mib, Some(20449.28));
        assert_eq!(n.reserved_unallocated_mib, Some(127.96));
        assert!(check(&n).is_empty());
    }

    #[test]
    fn old_parenthesised_format() {
        let n = parse("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; 3.43 GiB already allocated; 0 bytes free; 3.47 GiB reserved in total by PyTorch)");
        assert_eq!(n.requested_mib, Some(20.0));
        assert_eq!(n.total_mib, Some(4096.0));
        assert_eq!(n.allocated_mib, Some(3512.32));
        assert_eq!(n.free_mib, Some(0.0));
        assert_eq!(n.reserved_total_mib, Some(3553.28));
        assert_eq!(n.gpu_index, Some(0));
        assert_eq!(n.reserved_gap_mib(), Some(40.96));
        assert!(fragmentation_visible(&n));
    }

    #[test]
    fn malloc_async_sentinel_dropped_and_limit_kept() {
        let n = parse("Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 10.36 GiB\nRequested               : 384.00 MiB\nDevice limit            : 12.00 GiB\nFree (according to CUDA): 0 bytes\nPyTorch limit (set by user-supplied memory fraction)\n                        : 17179869184.00 GiB");
        assert_eq!(n.allocated_mib, Some(10608.64));
        assert_eq!(n.requested_mib, Some(384.0));
        assert_eq!(n.device_limit_mib, Some(12288.0));
        assert_eq!(n.free_mib, Some(0.0));
        assert_eq!(n.pytorch_limit_mib, None);
        assert_eq!(n.total_mib, None);
        assert_eq!(n.gpu_index, Some(0));
    }

    #[test]
    fn mps_decimal_looking_units_are_binary() {
        let n = parse("MPS backend out of memory (MPS allocated: 8.72 GB, other allocations: 110.16 MB, max allowed: 9.07 GB). Tried to allocate 405.00 MB on private pool.");
        assert_eq!(n.mps_allocated_mib, Some(8929.28));
        assert_eq!(n.mps_other_allocations_mib, Some(110.16));
        assert_eq!(n.mps_max_allowed_mib, Some(9287.68));
        assert_eq!(n.requested_mib, Some(405.0));
        assert!(check(&n).is_empty());
    }

    #[test]
    fn byte_counts_and_lowercase_units() {
        assert_eq!(
            parse("Could not allocate tensor with 58982400 bytes.").requested_mib,
            Some(56.25)
        );
        assert_eq!(
            parse("unable to allocate 10.0 gib for an array with shape (2433, 720, 512, 3)")
                .requested_mib,
            Some(10240.0)
        );
        assert_eq!(
            parse("unable to mmap 1048576 bytes from file <x>: Cannot allocate memory (12)")
                .requested_mib,
            Some(1.0)
        );
        assert_eq!(
            parse("Unable to allocate 512. KiB for an array with shape (1,)").requested_mib,
            Some(0.5)
        );
    }

    #[test]
    fn a_device_limit_before_a_cut_free_line_is_not_free() {
        // ComfyUI issue #13598 as stored: the message stops after "Free (according to".
        let n = parse("Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 8.23 GiB\nRequested               : 3.46 GiB\nDevice limit            : 15.47 GiB\nFree (according to");
        let near = |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() < 1e-6);
        assert!(near(n.device_limit_mib, 15841.28), "{n:?}");
        assert!(near(n.requested_mib, 3543.04), "{n:?}");
        assert_eq!(n.free_mib, None);
    }

    #[test]
    fn underflowed_free_is_kept_but_flagged() {
        let n = parse("HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 512.00 MiB of which 17179869183.96 GiB is free.");
        assert_eq!(n.free_mib, Some(17179869183.96 * 1024.0));
        let problems = check(&n);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("free_mib"));
    }

    #[test]
    fn ordering_problems_are_flagged() {
        let n = parse("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; 5.43 GiB already allocated; 0 bytes free; 3.47 GiB reserved in total by PyTorch)");
        let problems = check(&n);
        assert!(
            problems.iter().any(|p| p.contains("reserved in total")),
            "{problems:?}"
        );
    }

    #[test]
    fn dynamic_vram_allocated_above_the_device_limit_is_consistent() {
        // The 2026 cudaMallocAsync message (ComfyUI issues #13598, #13117): mapped weights
        // count as allocated, so allocated above the device limit is normal.
        let n = parse("Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 22.43 GiB\nRequested               : 4.07 GiB\nDevice limit            : 16.00 GiB\nFree (according to CUDA): 0 bytes");
        assert_eq!(n.allocated_mib, Some(22968.32));
        assert_eq!(n.requested_mib, Some(4167.68));
        assert_eq!(n.device_limit_mib, Some(16384.0));
        assert_eq!(n.free_mib, Some(0.0));
        assert_eq!(check(&n), Vec::<String>::new());
    }

    #[test]
    fn free_equal_to_the_request_as_rounded_is_consistent() {
        // Both figures are printed to two decimals: "1.44 GiB … of which 1.44 GiB is free".
        let n = parse("CUDA out of memory. Tried to allocate 1.44 GiB. GPU 0 has a total capacity of 8.00 GiB of which 1.44 GiB is free. Including non-PyTorch memory, this process has 6.55 GiB memory in use. Of the allocated memory 5.91 GiB is allocated by PyTorch, and 402.37 MiB is reserved by PyTorch but unallocated.");
        assert_eq!(n.requested_mib, n.free_mib);
        assert_eq!(check(&n), Vec::<String>::new());
        let n = parse("HIP out of memory. Tried to allocate 432.00 MiB. GPU 0 has a total capacity of 15.92 GiB of which 7.12 GiB is free.");
        assert_eq!(check(&n), Vec::<String>::new());
    }

    #[test]
    fn truncated_message_only_has_what_is_printed() {
        let n = parse("CUDA out of memory. Tried to allocate 22.15 GiB. GPU");
        assert_eq!(n.requested_mib, Some(22681.6));
        assert_eq!(n.gpu_index, None);
        assert_eq!(n.total_mib, None);
    }
}
