//! `run.json`: the complete record of one run (the session's entry, component and node hashes,
//! the environment, the custom packs its classes come from, the client's run record).

use super::types::*;
use crate::comfy::Fingerprint;
use crate::hashing::ComponentHash;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The custom node pack a node class comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackOfClass {
    /// The pack (its folder under `custom_nodes/`).
    pub pack: String,
    /// Its version, when the server says (ComfyUI-Manager's installed list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `run.json`: the complete record of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    /// [`SESSION_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The session.
    pub session_id: String,
    /// The workflow's name in the session.
    pub workflow: String,
    /// The session's view of the run (outcome, summary, diagnosis).
    pub entry: RunEntry,
    /// Component hashes of the submitted workflow's model files.
    #[serde(default)]
    pub component_hashes: Vec<ComponentHash>,
    /// Per-node component hashes: node id → sha256 (hex) of its canonical class_type + inputs.
    #[serde(default)]
    pub node_hashes: BTreeMap<String, String>,
    /// The environment fingerprint taken before the run (its id is `entry.fingerprint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Fingerprint>,
    /// The node classes of the submitted workflow that come from a custom node pack, by class
    /// (from `/object_info`'s `python_module`); the workflow's other classes are ComfyUI's
    /// own, so an empty map says every node is core. None: not known (no `/object_info` was
    /// read, or a record older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_nodes: Option<BTreeMap<String, PackOfClass>>,
    /// The run record from the client (timeline, VRAM series, system_stats before/after,
    /// execution_error or rejection, warnings, raw frames); the shape of `submit --json`.
    pub record: crate::run::RunRecord,
    /// The memory pressure a passed run completed under, with the numbers of each piece of
    /// evidence (none: no evidence fired, or a record older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pressure: Option<crate::analytics::pressure::MemoryPressure>,
}
