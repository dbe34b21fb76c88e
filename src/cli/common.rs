//! Pieces several subcommands share: where node definitions come from, reading workflows,
//! printing errors.

use crate::nodedefs::NodeDefs;
use crate::workflow::ui::{load_workflow_file, LoadAnyError, Loaded};
use crate::workflow::Workflow;
use std::path::{Path, PathBuf};

/// Where the node definitions come from.
#[derive(Debug, Clone, clap::Args)]
pub struct DefsArgs {
    /// `/object_info` JSON file(s) instead of asking the server; repeat to add classes
    /// (e.g. core plus a custom-node pack).
    #[arg(long = "object-info", value_name = "FILE")]
    pub object_info: Vec<PathBuf>,
}

/// Why node definitions could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DefsSourceError {
    /// A file was unusable.
    #[error(transparent)]
    File(#[from] crate::nodedefs::DefsError),
    /// The server could not be asked.
    #[error("cannot get node definitions from {url}: {reason}. Is ComfyUI running there (check --listen/--port), or pass --object-info FILE")]
    Server {
        /// The URL asked.
        url: String,
        /// What failed.
        reason: String,
    },
}

impl DefsArgs {
    /// Like [`DefsArgs::load`], printing the error and returning the exit code on failure:
    /// 3 when the server could not be asked, 2 when a file is unusable.
    pub fn load_or_report(&self, server: &str) -> Result<NodeDefs, u8> {
        self.load(server).map_err(|e| {
            print_error(&e);
            match e {
                DefsSourceError::Server { .. } => crate::error::exit::UNREACHABLE,
                DefsSourceError::File(_) => crate::error::exit::USAGE,
            }
        })
    }

    /// Loads the definitions from the files, or from `GET {server}/object_info`.
    pub fn load(&self, server: &str) -> Result<NodeDefs, DefsSourceError> {
        if !self.object_info.is_empty() {
            return Ok(NodeDefs::load_files(&self.object_info)?);
        }
        fetch_object_info(server)
    }
}

/// A plain `GET /object_info` on the server.
pub fn fetch_object_info(server: &str) -> Result<NodeDefs, DefsSourceError> {
    let url = format!("{}/object_info", server.trim_end_matches('/'));
    let err = |reason: String| DefsSourceError::Server {
        url: url.clone(),
        reason,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| err(e.to_string()))?;
    let value: serde_json::Value = runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(&url)
            .send()
            .await
            .map_err(|e| err(e.to_string()))?;
        if !response.status().is_success() {
            return Err(err(format!("HTTP {}", response.status())));
        }
        response.json().await.map_err(|e| err(e.to_string()))
    })?;
    NodeDefs::from_value(&value)
        .ok_or_else(|| err("the answer is not an object of node classes".into()))
}

/// Reads a workflow file of any format (API, POST /prompt body, or UI, which is converted with
/// `defs` exactly as the ComfyUI frontend would).
pub fn read_workflow(path: &Path, defs: &NodeDefs) -> Result<Workflow, LoadAnyError> {
    Ok(read_loaded(path, defs)?.workflow)
}

/// Like [`read_workflow`], keeping the UI document and its conversion (provenance, warnings)
/// for commands that write variants back as UI workflows. Conversion warnings go to stderr.
pub fn read_loaded(path: &Path, defs: &NodeDefs) -> Result<Loaded, LoadAnyError> {
    let loaded = load_workflow_file(path, defs)?;
    if let Some((_, converted)) = &loaded.ui {
        for w in &converted.warnings {
            eprintln!("warning: {}: {w}", path.display());
        }
    }
    Ok(loaded)
}

/// Reads a workflow file of any format, asking for node definitions only when it is a UI
/// workflow (API files need none): `defs` is called at most once.
pub fn read_workflow_with(
    path: &Path,
    defs: impl FnOnce() -> Result<NodeDefs, String>,
) -> Result<Workflow, String> {
    match crate::workflow::load_api_file(path) {
        Ok(workflow) => Ok(workflow),
        Err(crate::workflow::LoadError::UiFormat { .. }) => {
            let defs = defs()?;
            read_workflow(path, &defs).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Like [`read_workflow_with`], keeping the UI document and its conversion when the file is a
/// UI workflow (for writing variants back as UI workflows).
pub fn read_loaded_with(
    path: &Path,
    defs: impl FnOnce() -> Result<NodeDefs, String>,
) -> Result<Loaded, String> {
    match crate::workflow::load_api_file(path) {
        Ok(workflow) => Ok(Loaded { workflow, ui: None }),
        Err(crate::workflow::LoadError::UiFormat { .. }) => {
            let defs = defs()?;
            read_loaded(path, &defs).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Prints an error for the user on stderr.
pub fn print_error(error: &dyn std::fmt::Display) {
    eprintln!("error: {error}");
}
