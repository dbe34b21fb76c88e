//! The headings `--help` groups options under, the same for every command: what a first run
//! needs, an unattended night, how the search runs, how the ladder is built, reaching the
//! server, and the mitigations tried after a verdict. (A file of its own: the argument structs
//! of several files name them.)

/// What a first run needs.
pub const BASICS: &str = "Basics";
/// Unattended nights: when to start and stop, restarting the server.
pub const OVERNIGHT: &str = "Overnight";
/// How the search runs and what counts as a failure.
pub const SEARCH: &str = "Search";
/// How the minimal variant and the increments are built.
pub const LADDER: &str = "Ladder";
/// Reaching the server (and its models folder).
pub const SERVER: &str = "Server";
/// The single-change controls tried after a verdict.
pub const MITIGATION: &str = "Mitigation";
