//! What converting a UI workflow gives ([`Converted`]: the API prompt with each node's
//! [`Origin`]) and why it can fail ([`UiError`], naming each [`UnknownNode`]). Conversion and
//! write-back both use these; this file uses neither.

use crate::workflow::{NodeId, Workflow};
use indexmap::IndexMap;
use serde::Serialize;

/// Where an API node came from in the UI file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// Execution ids of the subgraph instances it sits in, outermost first (empty at the root).
    pub scope: Vec<String>,
    /// The subgraph definition holding the node (`None` at the root).
    pub definition: Option<String>,
    /// The node id as saved in that graph.
    pub node_id: String,
    /// Index of the node in that graph's `nodes` array.
    pub index: usize,
    /// The title the UI shows.
    pub title: String,
}

/// A converted UI workflow.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The API prompt the frontend would queue.
    pub workflow: Workflow,
    /// API node id → where it is in the UI file.
    pub provenance: IndexMap<NodeId, Origin>,
    /// Execution id of every expanded subgraph instance (`"20"`, `"20:7"`) → where it is.
    pub instances: IndexMap<String, Origin>,
    /// Repairs made on a dirty file and other things the user should know.
    pub warnings: Vec<String>,
    /// Instance execution id → subgraph input name → index in the instance's `widgets_values`
    /// that holds its promoted value.
    pub(crate) instance_slots:
        std::collections::HashMap<String, std::collections::HashMap<String, usize>>,
}

/// A node whose type the server does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownNode {
    /// Execution id (`"12"`, `"20:3"`).
    pub id: String,
    /// The node type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The saved title, if any.
    pub title: Option<String>,
    /// The node pack recorded in the file (`cnr_id@ver`), if any.
    pub pack: Option<String>,
}

/// Why a UI workflow cannot be converted or written back.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// Not a UI workflow.
    #[error("not a UI-format workflow (expected an object with `nodes` and `links`)")]
    NotUi,
    /// Node types neither the server nor the frontend knows.
    #[error("{} node type(s) unknown to the server; install the missing node packs (or remove the nodes) and try again:\n{}", .0.len(), describe_unknown(.0))]
    UnknownTypes(Vec<UnknownNode>),
    /// Legacy group nodes.
    #[error("the workflow uses legacy group nodes, which are not supported: {}. Open it in a current ComfyUI (which converts group nodes to subgraphs) and save it again", describe_unknown(.0).replace('\n', "; "))]
    GroupNodes(Vec<UnknownNode>),
    /// The links loop.
    #[error("the workflow's links form a loop: {0}")]
    Cycle(String),
    /// Nothing left to run.
    #[error("the workflow has no node to run (every node is muted, bypassed or frontend-only)")]
    Empty,
    /// An edit that cannot be made in the UI file.
    #[error("cannot write the variant as a UI workflow: {0}")]
    WriteBack(String),
}

fn describe_unknown(nodes: &[UnknownNode]) -> String {
    nodes
        .iter()
        .map(|n| {
            let mut s = format!("  node {} type '{}'", n.id, n.type_name);
            if let Some(t) = &n.title {
                s.push_str(&format!(" (title \"{t}\")"));
            }
            match &n.pack {
                Some(p) if p.starts_with("comfy-core") => s.push_str(&format!(
                    " — a core node (saved with ComfyUI {}); update ComfyUI",
                    p.split_once('@')
                        .map(|(_, v)| v)
                        .unwrap_or("of a newer version")
                )),
                Some(p) => s.push_str(&format!(" — install node pack {p}")),
                None => s.push_str(" — no node pack recorded in the file"),
            }
            s
        })
        .collect::<Vec<_>>()
        .join("\n")
}
