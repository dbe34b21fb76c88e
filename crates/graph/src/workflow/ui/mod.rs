//! UI-format workflows (what ComfyUI's "Save" writes: `nodes`, `links`, subgraph definitions):
//! conversion to the API prompt exactly as the official frontend's `graphToPrompt` builds it,
//! loading any workflow file format, and writing edited variants back as UI workflows.
//!
//! The rules are in docs/ui-format.md; where frontend versions differ, 1.58.1 is followed.

mod convert;
mod dynprompt;
mod parse;
mod widgets;
mod write;

pub use write::write_variant;

use super::load::parse_json;
use super::{detect_format, parse_api, Format, LoadError, NodeId, Workflow};
use crate::nodedefs::NodeDefs;
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

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

/// The name of every subgraph instance of a UI document, by execution id (`"140"`, nested
/// `"140:130"`): its definition's `name` in `definitions.subgraphs[]`, with inner node ids
/// renumbered as the frontend does on load (so the ids match the converted prompt's).
pub fn subgraph_names(ui: &Value) -> IndexMap<String, String> {
    fn walk(
        doc: &parse::UiDoc,
        graph: &parse::UiGraph,
        prefix: &str,
        depth: usize,
        out: &mut IndexMap<String, String>,
    ) {
        if depth > 64 {
            return;
        }
        for node in &graph.nodes {
            let Some(def) = doc.defs.get(&node.type_name) else {
                continue;
            };
            let exec = format!("{prefix}{}", node.id);
            out.insert(exec.clone(), def.name.clone());
            walk(doc, &def.graph, &format!("{exec}:"), depth + 1, out);
        }
    }
    let doc = parse::parse_doc(ui);
    let mut out = IndexMap::new();
    walk(&doc, &doc.root, "", 0, &mut out);
    out
}

/// Converts a UI workflow into the API prompt the official frontend (1.58.1) would queue.
pub fn convert(ui: &Value, defs: &NodeDefs) -> Result<Converted, UiError> {
    convert::convert(ui, defs)
}

/// A workflow read from a file of any format.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The API-format workflow.
    pub workflow: Workflow,
    /// For a UI file: the original document and the conversion (provenance, warnings).
    pub ui: Option<(Value, Converted)>,
}

/// Why a workflow file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadAnyError {
    /// Reading or parsing the file failed.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The UI workflow could not be converted.
    #[error("{file}: {source}")]
    Convert {
        /// File name.
        file: String,
        /// What failed.
        source: UiError,
    },
}

impl From<LoadError> for LoadAnyError {
    fn from(e: LoadError) -> Self {
        LoadAnyError::Load(Box::new(e))
    }
}

/// Reads a workflow file in any format (API, POST /prompt body, UI), converting UI files with
/// `defs`. The one call other commands use.
pub fn load_workflow_file(path: &Path, defs: &NodeDefs) -> Result<Loaded, LoadAnyError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        file: file.clone(),
        source,
    })?;
    let value = parse_json(&text, &file)?;
    load_workflow_value(value, &file, defs)
}

/// Like [`load_workflow_file`] for an already parsed document; `file` names it in errors.
pub(crate) fn load_workflow_value(
    value: Value,
    file: &str,
    defs: &NodeDefs,
) -> Result<Loaded, LoadAnyError> {
    match detect_format(&value) {
        Format::Ui => {
            let converted = convert(&value, defs).map_err(|source| LoadAnyError::Convert {
                file: file.to_string(),
                source,
            })?;
            // The same structural checks an API file gets.
            let workflow = parse_api(&converted.workflow.to_value(), file)?;
            Ok(Loaded {
                workflow,
                ui: Some((value, converted)),
            })
        }
        _ => Ok(Loaded {
            workflow: parse_api(&value, file)?,
            ui: None,
        }),
    }
}
