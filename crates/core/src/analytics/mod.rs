//! Analytics: pure estimates below the bisection state machine. `cost` (the work a variant asks
//! for and the predicted cost of a ladder step), `predict` (run time from finished runs),
//! `pressure` (memory pressure on a passed run) and `walk` (the cues that a passing target may
//! hide memory pressure). Nothing here reads the journal or imports `session`: the state
//! machine hands these modules plain facts and reads their answers.

pub mod cost;
#[cfg(test)]
mod fixtures;
pub mod predict;
pub mod pressure;
pub mod walk;
