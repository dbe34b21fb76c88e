//! The shared vocabulary of runs, diagnoses, the journal and the report: how a run ended
//! ([`OutcomeKind`], [`Outcome`], [`RunOutcomeHint`]), what kind of failure it was
//! ([`FailureKind`]), where it happened ([`Stage`], [`StageConfidence`]), the allocator numbers
//! a failure message printed ([`Numbers`], and the report's [`ContractNumbers`]), the
//! verdict kinds ([`VerdictKind`]) and what a run delivered ([`ProductSummary`]).
//!
//! The module owns the canonical definitions and their serialised names: `run.json`,
//! `session.json`, `diagnose --json` and `report.json` all write these values, so a name here
//! is an on-disk contract and never changes. The journal, the run record, the report model and
//! the mitigations hold these types, not their names as strings (the report's failure kind of a
//! `--strict` pass is [`FailureKind::MemoryFallback`] or [`FailureKind::MemoryPressure`]); a
//! [`Stage`] or [`StageConfidence`] stored by another version outside the list reads as
//! `Unknown`.

use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// The prompt ran to `execution_success`.
    Passed,
    /// A node raised (`execution_error`).
    Failed,
    /// The server refused the prompt (400, or a 200 with non-empty `node_errors`, or 5xx).
    Rejected,
    /// The prompt was interrupted (by us on Ctrl-C, or by someone else).
    Interrupted,
    /// The run or stall timeout passed; our prompt was interrupted.
    Timeout,
    /// The server went away or restarted; our prompt vanished.
    ServerLost,
    /// No progress frame and no node change for `--stall`: the prompt hung; it was interrupted
    /// (or the server restarted when it ignored the interrupt).
    Hang,
}

impl OutcomeKind {
    /// The name used in JSON and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Passed => "passed",
            OutcomeKind::Failed => "failed",
            OutcomeKind::Rejected => "rejected",
            OutcomeKind::Interrupted => "interrupted",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::ServerLost => "server_lost",
            OutcomeKind::Hang => "hang",
        }
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended (the session's view of the run record's outcome).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The prompt executed to the end.
    Passed,
    /// An `execution_error`.
    Failed {
        /// Failing node id.
        node_id: String,
        /// Its class.
        node_type: String,
        /// E.g. `torch.OutOfMemoryError`.
        exception_type: String,
        /// First line of the exception message.
        exception_message: String,
    },
    /// The server refused the prompt (400, or 200 with node_errors).
    Rejected {
        /// The server's message.
        message: String,
    },
    /// Interrupted (by Ctrl-C or another client).
    Interrupted,
    /// The run or stall timeout hit; the prompt was interrupted.
    Timeout {
        /// What timed out, in words.
        detail: String,
    },
    /// The server process went away during the run (crashed or killed).
    ServerLost {
        /// What was seen.
        detail: String,
    },
    /// No progress frame and no node change for `--stall` while the prompt ran: it hung at
    /// `node_id` (step `step` of `max_steps` when a sampler was reporting steps).
    Hang {
        /// The node running when progress stopped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_id: Option<String>,
        /// Its class.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_type: Option<String>,
        /// The last step reported by that node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<u64>,
        /// The steps it was to take.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_steps: Option<u64>,
        /// What hung and for how long, in words.
        detail: String,
        /// The server confirmed our interrupt; false when it ignored it (the server is
        /// restarted through `--restart-cmd` before the next run).
        #[serde(default)]
        interrupt_confirmed: bool,
    },
    /// `--strict`: the prompt completed, but only through a silent memory fallback (a tiled
    /// VAE decode or encode after an OOM); counted as a failure.
    MemoryFallback {
        /// The fallbacks, e.g. `tiled VAE decode fallback`.
        fallbacks: Vec<String>,
    },
    /// `--strict`: the prompt completed, but under memory pressure (weights streamed or
    /// offloaded, steps slowed beyond what the added work explains); counted as a failure.
    MemoryPressure {
        /// The evidence that fired, in words (`slowed 4.1× (work allows ≤ 1.3×)`).
        evidence: Vec<String>,
    },
    /// ComfyUI said success, but an output node produced nothing: named `failed`, kind
    /// `incomplete_output`.
    IncompleteOutput {
        /// The (first) node without outputs.
        node_id: String,
        /// Its class.
        node_type: String,
        /// What is missing, in one sentence.
        message: String,
    },
}

impl Outcome {
    /// The outcome name used in `run.json`, the index and the report.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed { .. } => "failed",
            Outcome::Rejected { .. } => "rejected",
            Outcome::Interrupted => "interrupted",
            Outcome::Timeout { .. } => "timeout",
            Outcome::ServerLost { .. } => "server_lost",
            Outcome::Hang { .. } => "hang",
            Outcome::MemoryFallback { .. } => "memory_fallback",
            Outcome::MemoryPressure { .. } => "memory_pressure",
            Outcome::IncompleteOutput { .. } => "failed",
        }
    }

    /// Whether this outcome says the variant fails. A variant that killed the server or ran
    /// into the timeout fails; a rejection or an interruption says nothing about the variant
    /// and stops the search instead.
    pub(crate) fn is_failure(&self) -> bool {
        matches!(
            self,
            Outcome::Failed { .. }
                | Outcome::Timeout { .. }
                | Outcome::ServerLost { .. }
                | Outcome::Hang { .. }
                | Outcome::MemoryFallback { .. }
                | Outcome::MemoryPressure { .. }
                | Outcome::IncompleteOutput { .. }
        )
    }

    /// A crash: the server went away, the run timed out or hung. Each can have causes
    /// outside the variant (another job, an update, a driver reset, a server that hangs on
    /// its second run), so a crash alone decides nothing (`--confirm-crashes`).
    pub(crate) fn is_crash(&self) -> bool {
        matches!(
            self,
            Outcome::Timeout { .. } | Outcome::ServerLost { .. } | Outcome::Hang { .. }
        )
    }
}

/// How a run ended when there was no execution_error to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcomeHint {
    /// The server process went away (socket and HTTP gone, or restarted).
    ServerLost,
    /// The run exceeded its time limit or stalled.
    Timeout,
    /// The server refused the prompt (validation failure).
    Rejected,
    /// The run was interrupted (not a failure of the workflow).
    Interrupted,
    /// ComfyUI reported success, but an output node produced nothing (`node_id` names it).
    IncompleteOutput,
}

/// Failure kind, decided by the wording of the error (not by the vendor of the card).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// "CUDA out of memory", "CUDA error: out of memory", cudaMallocAsync "Allocation on device".
    CudaOom,
    /// "HIP out of memory" (ROCm).
    HipOom,
    /// "MPS backend out of memory" (Apple silicon).
    MpsOom,
    /// "XPU out of memory" (Intel).
    XpuOom,
    /// torch-directml "not enough GPU video memory".
    DirectmlOom,
    /// System RAM exhausted inside the process.
    HostRam,
    /// An error of the dynamic-VRAM offloader (comfy-aimdo): `VRAM Allocation failed (non
    /// OOM)`, `Fault failed`, `HostBuffer.read_file_slice failed` (ComfyUI ≥ 0.15).
    Aimdo,
    /// The server died without a Python error.
    ProcessKilled,
    /// The run timed out.
    Timeout,
    /// The prompt was rejected by the server.
    Rejected,
    /// ComfyUI reported success, but an output node produced nothing in `/history`.
    IncompleteOutput,
    /// `--strict`: the run passed only through a silent memory fallback (the report's kind of
    /// such a run; a diagnosis never gives it).
    MemoryFallback,
    /// `--strict`: the run passed under memory pressure (the report's kind of such a run; a
    /// diagnosis never gives it).
    MemoryPressure,
    /// Not a memory failure (including look-alikes) or not a failure at all.
    Other,
    /// The input holds no failure that could be read (empty, a finished run, unrecognisable).
    Unknown,
}

impl FailureKind {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::CudaOom => "cuda_oom",
            FailureKind::HipOom => "hip_oom",
            FailureKind::MpsOom => "mps_oom",
            FailureKind::XpuOom => "xpu_oom",
            FailureKind::DirectmlOom => "directml_oom",
            FailureKind::HostRam => "host_ram",
            FailureKind::Aimdo => "aimdo",
            FailureKind::ProcessKilled => "process_killed",
            FailureKind::Timeout => "timeout",
            FailureKind::Rejected => "rejected",
            FailureKind::IncompleteOutput => "incomplete_output",
            FailureKind::MemoryFallback => "memory_fallback",
            FailureKind::MemoryPressure => "memory_pressure",
            FailureKind::Other => "other",
            FailureKind::Unknown => "unknown",
        }
    }

    /// True for the out-of-memory kinds of a GPU allocator.
    pub fn is_gpu_oom(self) -> bool {
        matches!(
            self,
            FailureKind::CudaOom
                | FailureKind::HipOom
                | FailureKind::MpsOom
                | FailureKind::XpuOom
                | FailureKind::DirectmlOom
        )
    }

    /// True when the failure is about memory (GPU, host RAM, the offloader, or a killed process).
    pub(crate) fn is_memory(self) -> bool {
        self.is_gpu_oom()
            || matches!(
                self,
                FailureKind::HostRam | FailureKind::Aimdo | FailureKind::ProcessKilled
            )
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure kind reads as its JSON name where text is expected (`kind.as_deref()`), as the
/// string fields it replaced did.
/// Stage of the run where the failure happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Weights being loaded or moved to a device.
    Load,
    /// Text/vision encoders, VAE encode of inputs.
    Condition,
    /// A denoising step before any step finished.
    SampleFirst,
    /// A denoising step after at least one finished (including live previews).
    SampleMiddle,
    /// Final VAE decode.
    Decode,
    /// Upscale, interpolation, restoration, video combine.
    Postprocess,
    /// The evidence does not say; also what a stored name outside this list reads as (a
    /// journal or `mitigations.json` of another version still loads).
    #[default]
    #[serde(other)]
    Unknown,
}

impl Stage {
    /// Every stage, in run order, `Unknown` last.
    pub(crate) const ALL: [Stage; 7] = [
        Stage::Load,
        Stage::Condition,
        Stage::SampleFirst,
        Stage::SampleMiddle,
        Stage::Decode,
        Stage::Postprocess,
        Stage::Unknown,
    ];

    /// The stage a snake_case name stands for (`Unknown` for any other text).
    pub(crate) fn from_name(name: &str) -> Stage {
        Stage::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .unwrap_or(Stage::Unknown)
    }

    /// The stage in words, with its name (`load` → "while loading weights (load stage)").
    pub(crate) fn phrase(self) -> String {
        let words = match self {
            Stage::Load => "while loading weights",
            Stage::Condition => "while encoding the conditioning",
            Stage::SampleFirst => "in the first sampling step",
            Stage::SampleMiddle => "during sampling, after the first step",
            Stage::Decode => "during the VAE decode",
            Stage::Postprocess => "during post-processing",
            Stage::Unknown => return "(stage unknown)".into(),
        };
        format!("{words} ({} stage)", self.as_str())
    }

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Load => "load",
            Stage::Condition => "condition",
            Stage::SampleFirst => "sample_first",
            Stage::SampleMiddle => "sample_middle",
            Stage::Decode => "decode",
            Stage::Postprocess => "postprocess",
            Stage::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stage reads as its JSON name where text is expected (`stage.as_deref()`, `&stage` for a
/// `&str`), as the string fields it replaced did.
impl From<&str> for Stage {
    fn from(name: &str) -> Stage {
        Stage::from_name(name)
    }
}

/// How sure the stage is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageConfidence {
    /// A traceback frame, the exception itself (a model file it names) or the failing node's
    /// class decided it.
    Certain,
    /// Only progress or the order of console lines decided it.
    Likely,
    /// Nothing located it (the stage is `unknown`); also what a stored name outside this
    /// list reads as.
    #[default]
    #[serde(other)]
    Unknown,
}

impl StageConfidence {
    /// The snake_case name used in JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StageConfidence::Certain => "certain",
            StageConfidence::Likely => "likely",
            StageConfidence::Unknown => "unknown",
        }
    }
}

/// Allocator numbers, each in MiB and present only when the message prints it. The first eight
/// fields are the JSON contract; the others are additions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Numbers {
    /// The allocation that failed.
    pub requested_mib: Option<f64>,
    /// Device index from `GPU N` / `device N`.
    pub gpu_index: Option<u32>,
    /// Total capacity of the device.
    pub total_mib: Option<f64>,
    /// Free memory on the device as reported.
    pub free_mib: Option<f64>,
    /// Memory in use by this process (including non-PyTorch memory).
    pub process_in_use_mib: Option<f64>,
    /// Memory allocated by PyTorch (also the old "already allocated" and cudaMallocAsync's
    /// "Currently allocated").
    pub allocated_mib: Option<f64>,
    /// Reserved by PyTorch but unallocated.
    pub reserved_unallocated_mib: Option<f64>,
    /// cudaMallocAsync's device limit (kept apart from the total capacity).
    pub device_limit_mib: Option<f64>,
    /// The old "reserved in total by PyTorch" (or "cached").
    pub reserved_total_mib: Option<f64>,
    /// Sum of "Process N has X memory in use" lines (other processes on the device).
    pub other_processes_mib: Option<f64>,
    /// A real user-set memory-fraction limit (the "no limit" sentinel is not recorded).
    pub pytorch_limit_mib: Option<f64>,
    /// MPS: memory allocated by the MPS backend.
    pub mps_allocated_mib: Option<f64>,
    /// MPS: other allocations.
    pub mps_other_allocations_mib: Option<f64>,
    /// MPS: the maximum allowed (high-watermark limit).
    pub mps_max_allowed_mib: Option<f64>,
}

impl Numbers {
    /// The device memory an out-of-memory message proves the run needed, with where the
    /// figure comes from: what the process had in use plus what it asked for (or PyTorch's
    /// allocated + reserved + requested), else the device limit it hit. None without such
    /// figures. A sampled peak can miss the spike before an OOM; this cannot.
    pub fn proven_demand_mib(&self) -> Option<(f64, &'static str)> {
        let requested = self.requested_mib?;
        if let Some(in_use) = self.process_in_use_mib {
            return Some((in_use + requested, "in use by the process + requested"));
        }
        if let Some(allocated) = self.allocated_mib {
            let reserved = self.reserved_unallocated_mib.unwrap_or(0.0);
            return Some((
                allocated + reserved + requested,
                "allocated + reserved + requested",
            ));
        }
        self.device_limit_mib
            .or(self.total_mib)
            .map(|limit| (limit, "the device limit it hit"))
    }

    /// The eight numbers of the diagnosis contract, as the report prints them.
    pub(crate) fn contract(&self) -> ContractNumbers {
        ContractNumbers {
            requested_mib: self.requested_mib,
            gpu_index: self.gpu_index,
            total_mib: self.total_mib,
            free_mib: self.free_mib,
            process_in_use_mib: self.process_in_use_mib,
            allocated_mib: self.allocated_mib,
            reserved_unallocated_mib: self.reserved_unallocated_mib,
            device_limit_mib: self.device_limit_mib,
        }
    }
}

/// The eight allocator numbers of the diagnosis contract as the report prints them: the same
/// facts as [`Numbers`], absent ones left out of the JSON (see `Numbers::contract`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContractNumbers {
    /// Size of the allocation that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_mib: Option<f64>,
    /// The device index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_index: Option<u32>,
    /// The device's total capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_mib: Option<f64>,
    /// Free device memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_mib: Option<f64>,
    /// Memory in use by the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_in_use_mib: Option<f64>,
    /// Allocated by PyTorch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_mib: Option<f64>,
    /// Reserved by PyTorch but unallocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_unallocated_mib: Option<f64>,
    /// cudaMallocAsync device limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_limit_mib: Option<f64>,
}

impl ContractNumbers {
    /// Whether no number was printed.
    pub(crate) fn is_empty(&self) -> bool {
        self == &ContractNumbers::default()
    }
}

/// What a run delivered, in words: its output in one line, where that differs from what the
/// variant asked for, and the silent memory fallbacks it went through to get there. The
/// journal's run summary and the report's ladder row both embed it, flattened: its fields stand
/// beside theirs in `session.json`, `run.json` and `report.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductSummary {
    /// Silent memory fallbacks the run went through (`tiled VAE decode fallback`): a pass with
    /// any is the early warning a bisection looks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_fallbacks: Vec<String>,
    /// Memory pressure the run passed under, in words: the evidence that fired with its
    /// numbers, then the MB staged (`slowed 4.1× (work allows ≤ 1.3×)`, `weights streamed
    /// (13650 MB staged)`). A pass with any is a degraded pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_pressure: Vec<String>,
    /// A slowdown from time alone, in words: the reading, that it is not counted (no memory
    /// sign came with it: a busy machine slows steps too, issue #39) and this machine's load
    /// and the card's memory outside PyTorch beside it. Never a verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowdown_only: Vec<String>,
    /// What the output nodes wrote (`4 × PNG 768×1024`), from the run's headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    /// Where the product differs from what the variant asked for (warnings, not failures).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub product_warnings: Vec<String>,
}

impl ProductSummary {
    /// What made a pass degraded, short: the fallbacks, then the memory pressure, each without
    /// its figures in parentheses (`tiled VAE decode fallback`, `slowed 3.1×`, `weights
    /// streamed`); empty for a clean pass. Wherever a pass is printed, these follow it.
    pub fn degraded(&self) -> Vec<String> {
        self.memory_fallbacks
            .iter()
            .chain(&self.memory_pressure)
            .map(|w| match w.find(" (") {
                Some(at) => w[..at].to_string(),
                None => w.clone(),
            })
            .collect()
    }

    /// `passed`, or `passed — slowed 3.1×, weights streamed` for a degraded pass: how a pass
    /// is named in a run line and a table cell.
    pub fn passed_words(&self) -> String {
        let degraded = self.degraded();
        if degraded.is_empty() {
            "passed".into()
        } else {
            format!("passed — {}", degraded.join(", "))
        }
    }
}

/// The verdict kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// The minimal variant passed and adding one increment made it fail.
    FirstFailure,
    /// The minimal variant already fails.
    MinimalFails,
    /// The full workflow passed: the failure did not reproduce.
    CouldNotReproduce,
    /// Repeated runs of the boundary steps disagreed.
    Flaky,
    /// The session stopped before a verdict (deadline, interrupted, server lost).
    Incomplete,
    /// A run was rejected or interrupted, which says nothing about the variant.
    Inconclusive,
    /// Preflight stopped the workflow before any run (unknown nodes, missing models).
    PreflightFailed,
    /// `check`: one run of the workflow as given, no ladder (good, bad or cannot test).
    Check,
    /// No verdict yet: the session is still running (the report is rewritten after every run)
    /// or has not reached this workflow.
    InProgress,
}

impl VerdictKind {
    /// The snake_case name used in JSON (`first_failure`, `minimal_fails`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            VerdictKind::FirstFailure => "first_failure",
            VerdictKind::MinimalFails => "minimal_fails",
            VerdictKind::CouldNotReproduce => "could_not_reproduce",
            VerdictKind::Flaky => "flaky",
            VerdictKind::Incomplete => "incomplete",
            VerdictKind::Inconclusive => "inconclusive",
            VerdictKind::PreflightFailed => "preflight_failed",
            VerdictKind::Check => "check",
            VerdictKind::InProgress => "in_progress",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_keeps_its_names_and_reads_an_unlisted_one_as_unknown() {
        for stage in Stage::ALL {
            let json = serde_json::to_string(&stage).unwrap();
            assert_eq!(json, format!("\"{}\"", stage.as_str()));
            assert_eq!(serde_json::from_str::<Stage>(&json).unwrap(), stage);
            assert_eq!(Stage::from_name(stage.as_str()), stage);
        }
        let other: Stage = serde_json::from_str("\"sampling\"").unwrap();
        assert_eq!(other, Stage::Unknown);
        assert_eq!(
            Stage::Decode.phrase(),
            "during the VAE decode (decode stage)"
        );
        assert_eq!(Stage::Unknown.phrase(), "(stage unknown)");
    }

    #[test]
    fn an_oom_proves_what_was_in_use_plus_what_was_asked_for() {
        let n = Numbers {
            requested_mib: Some(1925.0),
            process_in_use_mib: Some(4260.0),
            allocated_mib: Some(3840.0),
            total_mib: Some(6144.0),
            ..Numbers::default()
        };
        assert_eq!(
            n.proven_demand_mib(),
            Some((6185.0, "in use by the process + requested"))
        );
        // Without the process figure (cudaMallocAsync, older messages): PyTorch's own.
        let n = Numbers {
            process_in_use_mib: None,
            reserved_unallocated_mib: Some(100.0),
            ..n
        };
        assert_eq!(
            n.proven_demand_mib(),
            Some((5865.0, "allocated + reserved + requested"))
        );
        // Only a limit: the limit it hit.
        let n = Numbers {
            requested_mib: Some(20.0),
            device_limit_mib: Some(8000.0),
            ..Numbers::default()
        };
        assert_eq!(
            n.proven_demand_mib(),
            Some((8000.0, "the device limit it hit"))
        );
        assert_eq!(Numbers::default().proven_demand_mib(), None);
    }
}
