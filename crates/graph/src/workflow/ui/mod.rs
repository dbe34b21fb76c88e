//! UI-format workflows (what ComfyUI's "Save" writes: `nodes`, `links`, subgraph definitions):
//! conversion to the API prompt exactly as the official frontend's `graphToPrompt` builds it,
//! loading any workflow file format, and writing edited variants back as UI workflows.
//!
//! The rules are in docs/ui-format.md; where frontend versions differ, 1.58.1 is followed.

mod convert;
mod converted;
mod dynprompt;
mod parse;
mod widgets;
mod write;

pub use converted::{Converted, Origin, UiError, UnknownNode};
pub use write::write_variant;

use super::{detect_format, parse_api, read_document, Document, Format, LoadError, Workflow};
use crate::nodedefs::NodeDefs;
use indexmap::IndexMap;
use serde_json::Value;
use std::path::Path;

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
    /// The image, audio or video file the workflow was read from, when it was one.
    pub source: Option<super::embedded::SourceFile>,
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
/// Also a file ComfyUI saved with the workflow inside ([`super::read_document`]).
pub fn load_workflow_file(path: &Path, defs: &NodeDefs) -> Result<Loaded, LoadAnyError> {
    load_document(read_document(path)?, path, defs)
}

/// Loads a document [`super::read_document`] read from `path`, converting a UI workflow with
/// `defs` (an API document needs none: pass `NodeDefs::default()`).
pub fn load_document(
    document: Document,
    path: &Path,
    defs: &NodeDefs,
) -> Result<Loaded, LoadAnyError> {
    let mut loaded = load_workflow_value(document.value, &path.display().to_string(), defs)?;
    loaded.source = document.source;
    Ok(loaded)
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
                source: None,
            })
        }
        _ => Ok(Loaded {
            workflow: parse_api(&value, file)?,
            ui: None,
            source: None,
        }),
    }
}
