//! What `mitigations.json` says: the controls considered after a workflow's verdict (issue
//! #25), each with its single change, the observation it predicted, whether it ran and how it
//! was judged. A file of its own beside `session.json`, so the bisection journal keeps its shape
//! and a session without mitigations has no such file.

use super::types::RunEntry;
use crate::mitigate::{Kind, Place};
use crate::vocab::Stage;
use crate::workflow::Change;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// File name of the mitigations record inside a session folder.
pub const MITIGATIONS_FILE: &str = "mitigations.json";

/// Folder of the mitigation runs inside a session folder (outside the ladder's run folders).
pub const MITIGATIONS_DIR: &str = "mitigations";

/// `mitigations.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MitigationsFile {
    /// One entry per workflow that got mitigations, in session order.
    pub workflows: Vec<WorkflowMitigations>,
    /// What relaunching the server for server controls did, in order (`put the server back as
    /// it was …; its memory mode is the original one`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<String>,
}

/// The mitigations of one workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowMitigations {
    /// The workflow's name in the session.
    pub workflow: String,
    /// The failing stage the controls were chosen for.
    pub stage: Stage,
    /// The failing node of the verdict's run (`VAEDecode #8`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_node: Option<String>,
    /// The run the controls are compared with (the verdict's failing run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_run: Option<String>,
    /// Every control considered, in the order tried (applicable ones first).
    pub controls: Vec<Mitigation>,
}

/// One control considered for a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mitigation {
    /// The catalogue id (`tiled-decode`).
    pub control: String,
    /// Graph edit or server launch change.
    pub kind: Kind,
    /// The single change, in words.
    pub change: String,
    /// The observation it predicted, stated before it ran.
    pub predicts: String,
    /// Its place in the matrix for the failing stage (none: it targets other stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<Place>,
    /// The stages it targets.
    pub stages: Vec<Stage>,
    /// The edits it made to the target (graph controls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Launch arguments added (server controls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment set for the server (server controls).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The edited target, relative to the session folder (graph controls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its UI-format companion, when the input was a UI workflow and the edits have a UI form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_file: Option<String>,
    /// Canonical sha256 of the edited target (graph controls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Where it is.
    pub state: MitigationState,
    /// Its run (once submitted): a normal run entry, its folder under `mitigations/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunEntry>,
    /// How the run was judged (once done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<Judged>,
}

/// Where one control is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MitigationState {
    /// To be run.
    Pending,
    /// Submitted; the outcome is not recorded yet (`mitigate` settles it first).
    InFlight,
    /// Run and judged.
    Done,
    /// Not run, and why (`needs --launch-cmd`, `--max-mitigations reached`): a later
    /// `mitigate` may run it.
    NotRun {
        /// In words.
        reason: String,
    },
    /// Not for this failure, and why (wrong stage, nothing to edit, not on this server).
    NotApplicable {
        /// In words.
        reason: String,
    },
}

/// How a control's run was judged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// Complete product, no memory fallback, no degenerate image.
    pub passed: bool,
    /// The outcome in words (`passed: complete product`, `failed: VAEDecodeTiled (node 8)
    /// raised torch.OutOfMemoryError`).
    pub outcome: String,
    /// The stage of the failure now (a failing control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_now: Option<Stage>,
    /// The failing node now (`KSampler #3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_node: Option<String>,
    /// Whether the boundary moved: the failure is at another stage or node than before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<bool>,
    /// Images that are one flat colour or NaN-black (each `SaveImage #9 out_00001_.png: …`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degenerate: Vec<String>,
    /// Image outputs whose first image could not be read for the degenerate check, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<String>,
}

impl MitigationsFile {
    /// The entry of `workflow`, when it has one.
    pub(crate) fn of(&self, workflow: &str) -> Option<&WorkflowMitigations> {
        self.workflows.iter().find(|w| w.workflow == workflow)
    }
}
