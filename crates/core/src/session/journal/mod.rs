//! The session journal: `runs/<session-id>/session.json` and the per-run folders.
//!
//! These types are the saved state of the bisection driver and the contract the report reads.
//! `session.json` is rewritten atomically (temp file, rename) after every state change, so a
//! reader never sees a half-written file and a killed tool loses nothing. The session driver
//! makes its writes durable with `SyncBehind`: the fsyncs run on helper threads while the
//! driver goes on, and it waits for all of them before it submits the next prompt (a machine
//! that dies while the GPU works loses no journal entry).
//!
//! `types` holds what `session.json` says, `verdict` a workflow's answer in it, `run_file`
//! what `run.json` says; `durable` how a
//! journal file is written (atomic replacement through `crate::atomic`, write-behind fsyncs);
//! `files` where the files are and how they are read and saved; `mitigation` what
//! `mitigations.json` says (the controls tried after a verdict).

pub(crate) mod durable;
pub(crate) mod files;
pub(crate) mod mitigation;
pub(crate) mod run_file;
pub(crate) mod types;
pub(crate) mod verdict;

pub(crate) use durable::{write_atomic, SyncBehind};
pub use durable::{write_json_atomic, JournalError};
pub(crate) use files::{new_session_id, now_rfc3339, step_stem};
pub use files::{
    orphan_runs, read_json, run_dir_name, settle_orphan_runs, OrphanRun, SessionPaths,
};
pub use mitigation::{
    Judged, Mitigation, MitigationState, MitigationsFile, WorkflowMitigations, MITIGATIONS_DIR,
    MITIGATIONS_FILE,
};
pub use run_file::*;
pub use types::*;
pub use verdict::*;

#[cfg(test)]
mod tests;
