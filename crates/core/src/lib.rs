//! comfy-bisect's library: find the first increment that makes a ComfyUI workflow fail.
//!
//! `units` (sizes, durations, timestamps), `vocab` (the outcome, failure kind, stage,
//! allocator numbers and verdict that records, journal and report share) and `text` (the one
//! sanitiser of server text for terminals and Markdown) sit below everything.
//! Data flows top to bottom: the graph layer (`workflow` → `nodedefs` → `catalog` → `ladder`,
//! re-exported from `comfy-bisect-graph`) → `comfy` (HTTP/WS client) → `diagnose` (failure
//! classification) → `host` (host RAM, the local server process, the kernel log) → `run` (one
//! submission and its evidence) → `analytics` (pure estimates: run time, memory pressure) and
//! `server` (lock, restart; relaunch runs through the driver) → `session` (the bisection driver and journal) → `check`
//! (one run for `git bisect run`) and `controls` (the mitigations after a verdict) → `report`
//! (Markdown/JSON) → `app` (the application façade a front end calls: start, resume and
//! drive a session, write a plan, find sessions and runs).

pub use comfy_bisect_graph::{catalog, ladder, mitigate, nodedefs, workflow};

pub mod analytics;
pub mod app;
pub(crate) mod atomic;
pub mod check;
pub mod comfy;
pub mod controls;
pub mod diagnose;
pub(crate) mod fileid;
pub mod hashing;
pub mod host;
pub mod report;
pub mod run;
pub mod server;
pub mod session;
pub(crate) mod shell;
pub mod text;
pub mod units;
pub mod vocab;

/// The repository's `tests/fixtures` folder, for unit tests that read captures.
#[cfg(test)]
pub(crate) const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
