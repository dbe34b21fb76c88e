//! The workflow graph and what can be derived from it without a server, a clock or a file
//! write: `workflow` (the graph, its formats and canonical hash) → `nodedefs` (`/object_info`
//! as data) → `catalog` (what each node class is) → `ladder` (the minimal variant and the
//! increments back to the target) → `mitigate` (single-change controls after the verdict). Pure by construction: this crate has no network, async
//! runtime or clock among its dependencies.

pub mod catalog;
pub mod ladder;
pub mod mitigate;
pub mod nodedefs;
pub mod workflow;

/// The repository's `tests/fixtures` folder, for unit tests that read captures.
#[cfg(test)]
pub(crate) const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
