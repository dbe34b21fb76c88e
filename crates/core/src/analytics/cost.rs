//! The step-cost facts the analytics and the decision share: the work a variant asks for
//! ([`work_of`]) and the predicted time of one ladder step's run ([`StepCost`]).

use crate::catalog::Catalog;
use crate::ladder::work::Work;
use crate::nodedefs::NodeDefs;
use crate::workflow::Workflow;

/// The work of a variant with the built-in catalog (see [`crate::ladder::work`]).
pub fn work_of(w: &Workflow) -> Work {
    crate::ladder::work::work_of(w, &Catalog::builtin(), &NodeDefs::default())
}

/// The predicted time of one ladder step's run, in seconds: at the variant's own steps and at
/// the search's step count (from [`super::predict`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    /// At the variant's own steps.
    pub full: f64,
    /// At `--search-steps`.
    pub reduced: f64,
}
