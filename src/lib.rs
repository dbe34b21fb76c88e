//! comfy-bisect: find the first increment that makes a ComfyUI workflow fail.
//!
//! Data flows top to bottom: `workflow` (graph model, formats, canonical hash) → `catalog`
//! (what each node class is) → `ladder` (minimal variant and increments) → `comfy` (HTTP/WS
//! client) → `host` (host RAM, the local server process, the kernel log) → `run` (one
//! submission and its evidence) → `diagnose` (failure classification) →
//! `session` (the bisection driver and journal) → `report` (Markdown/JSON).

/// A function returning a regex compiled once (`regex!(name, r"…")` defines `fn name()`).
macro_rules! regex {
    ($vis:vis $name:ident, $re:expr) => {
        $vis fn $name() -> &'static regex::Regex {
            static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
            RE.get_or_init(|| regex::Regex::new($re).expect("static regex"))
        }
    };
}

pub mod atomic;
pub mod catalog;
pub mod cli;
pub mod comfy;
pub mod diagnose;
pub mod error;
pub mod hashing;
pub mod host;
pub mod ladder;
pub mod nodedefs;
pub mod report;
pub mod run;
pub mod session;
pub mod sim;
pub mod workflow;
