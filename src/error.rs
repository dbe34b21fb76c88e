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
    /// An output file could not be written (`mitigate --apply`).
    pub const WRITE_FAILED: u8 = 4;
    /// Interrupted by Ctrl-C.
    pub const INTERRUPTED: u8 = 130;
}
