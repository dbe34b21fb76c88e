//! The exit codes the command line promises, shared by every subcommand.

/// Exit codes documented in the README.
pub mod exit {
    /// Success (valid, passed).
    pub const OK: u8 = 0;
    /// The checked thing is bad: invalid workflow, failed or rejected run.
    pub const FAILED: u8 = 1;
    /// Usage or input error: unreadable file, bad JSON, bad arguments.
    pub const USAGE: u8 = 2;
    /// The ComfyUI server could not be reached.
    pub const UNREACHABLE: u8 = 3;
    /// `bisect`/`resume`: could not reproduce — the target passed, and no step passed under
    /// memory pressure or through a fallback.
    pub const NOT_REPRODUCED: u8 = 4;
    /// `bisect`/`resume`: memory pressure only — nothing failed, but a step passed under memory
    /// pressure or through a memory fallback (`--strict` counts that as the failure).
    pub const PRESSURE_ONLY: u8 = 5;
    /// `bisect`/`resume`: the session stopped before its verdict (deadline, environment change,
    /// an error); `resume` continues it.
    pub const STOPPED: u8 = 6;
    /// An output file could not be written (`mitigate --apply`).
    pub const WRITE_FAILED: u8 = 7;
    /// Interrupted by Ctrl-C.
    pub const INTERRUPTED: u8 = 130;
}
