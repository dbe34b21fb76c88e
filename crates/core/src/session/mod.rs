//! Bisection sessions: the driver (a small state machine whose state is the journal), the
//! journal under `runs/<session-id>/`, resume, the per-server lock, the run index,
//! the progress hooks a display plugs into, and the mitigations tried after a verdict
//! (`mitigate`, with `relaunch` for server controls), and whether a passing target is worth
//! walking for the first step under memory pressure (`walk`).

pub mod check;
pub mod decide;
pub mod driver;
pub mod evidence;
pub mod folders;
pub mod index;
pub mod journal;
pub mod live;
pub mod lock;
pub mod mitigate;
pub mod predict;
pub mod prepare;
pub mod pressure;
pub mod progress;
pub mod relaunch;
pub mod restart;
pub mod setup;
pub mod walk;

pub use decide::{decide, Decision};
pub use driver::{Attempt, Backend, Clock, Driver, Hooks, NoHooks, Recovery, RunSpec, SystemClock};
pub use index::{CheckMark, IndexEntry, Lookup};
pub use journal::{
    ControlVariant, FlakyCount, InFlight, Outcome, Phase, RunEntry, RunFile, RunRole, RunStatus,
    RunSummary, SessionFile, SessionOptions, SessionPaths, SessionState, StepInfo, StopReason,
    Strategy, Verdict, WorkflowJob,
};
