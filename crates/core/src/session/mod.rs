//! Bisection sessions, the state machine: the driver (its state is the journal), the decision
//! (`decide`), the journal under `runs/<session-id>/` and resume, the run index, the evidence a
//! run leaves, preparing and setting up a session's variants (and
//! preparing again, on resume, a workflow preflight skipped), the live backend, several runs
//! folders read as one, and the progress hooks a display plugs into. Below it: `analytics`
//! (prediction, memory pressure, walk cues) and `server` (lock, restart, relaunch); above it:
//! `check` and `controls` (the mitigations), which run through the driver.

pub mod decide;
pub mod driver;
pub mod eta;
pub mod evidence;
pub mod folders;
pub mod index;
pub mod journal;
pub mod live;
pub mod prepare;
pub mod progress;
pub mod recheck;
pub mod setup;

pub use decide::{decide, Decision};
pub use driver::{Attempt, Backend, Clock, Driver, Hooks, NoHooks, Recovery, RunSpec, SystemClock};
pub use index::{CheckMark, IndexEntry, Lookup};
pub use journal::{
    ControlVariant, FlakyCount, InFlight, Outcome, Phase, RunEntry, RunFile, RunRole, RunStatus,
    RunSummary, SessionFile, SessionOptions, SessionPaths, SessionState, StepInfo, StopReason,
    Strategy, Verdict, WorkflowJob,
};
