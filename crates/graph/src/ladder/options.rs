//! How to build the ladder ([`PlanOptions`]): the minimal variant's sizes and the order of the
//! increments.

use super::increment::Increment;

/// How to build the ladder.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Short side of the minimal resolution; 0 = each node's declared minimum.
    pub min_resolution: u32,
    /// Least frame count of the minimal variant (then the node's grid).
    pub min_frames: u32,
    /// Cap steps at this in the minimal variant (the `steps` increment); `None` = off.
    pub min_steps: Option<u32>,
    /// Increments in ladder order; unlisted ones follow in the default order.
    pub order: Vec<Increment>,
    /// Increments kept at the target value in every variant.
    pub keep: Vec<Increment>,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        PlanOptions {
            min_resolution: 256,
            min_frames: 2,
            min_steps: None,
            order: Increment::LADDER.to_vec(),
            keep: Vec::new(),
        }
    }
}

impl PlanOptions {
    /// The effective order: `order` first, then the rest of the default ladder, without
    /// kept increments (and without `steps` unless `min_steps` is set).
    pub fn ladder(&self) -> Vec<Increment> {
        let mut out: Vec<Increment> = Vec::new();
        for inc in self.order.iter().chain(Increment::LADDER.iter()) {
            if *inc == Increment::Minimal || out.contains(inc) || self.keep.contains(inc) {
                continue;
            }
            if *inc == Increment::Steps && self.min_steps.is_none() {
                continue;
            }
            out.push(*inc);
        }
        out
    }
}
