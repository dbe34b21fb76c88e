//! The plan files: a ladder's step workflows and `plan.json`, and with a UI source every step
//! as a UI workflow too; and the saved node definitions a plan can be made from offline.

use super::{AppResult, ErrorKind, Kind};
use crate::ladder::Plan;
use crate::nodedefs::NodeDefs;
use crate::workflow::ui::{write_variant, Converted};
use std::path::Path;

/// The UI workflow a plan was made from, for writing each step back as a UI file.
pub struct UiSource<'a> {
    /// The original UI document.
    pub document: &'a serde_json::Value,
    /// Its conversion (provenance for the write-back).
    pub converted: &'a Converted,
    /// The node definitions it was converted with.
    pub defs: &'a NodeDefs,
}

/// Writes `dir/plan.json` and every step's workflow file; with a UI source also
/// `NN-<increment>.ui.json`, the original UI file with the same edits made the UI way. Returns
/// a warning for each step that has no faithful UI form (only its API file is written).
pub fn write_plan(planned: &Plan, dir: &Path, ui: Option<UiSource>) -> AppResult<Vec<String>> {
    write_plan_text(planned, dir, ui).kind(ErrorKind::Failed)
}

/// [`write_plan`] with its error as text (the façade's callers get an [`AppError`](super::AppError)).
fn write_plan_text(
    planned: &Plan,
    dir: &Path,
    ui: Option<UiSource>,
) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output folder '{}': {e}", dir.display()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write '{}': {e}", path.display()))
    };
    let mut warnings = Vec::new();
    for step in &planned.steps {
        write(&step.file, step.workflow.to_pretty_json() + "\n")?;
        if let Some(ui) = &ui {
            match write_variant(ui.document, ui.converted, &step.edits, ui.defs) {
                Ok(doc) => write(
                    &ui_file_name(&step.file),
                    serde_json::to_string_pretty(&doc).expect("JSON values serialize") + "\n",
                )?,
                Err(e) => warnings.push(format!(
                    "step {} ({}) has no faithful UI form, only the API file is written: {e}",
                    step.index,
                    step.increment.name()
                )),
            }
        }
    }
    write(
        "plan.json",
        serde_json::to_string_pretty(&planned.to_json()).expect("JSON values serialize") + "\n",
    )?;
    Ok(warnings)
}

/// `03-lora.json` → `03-lora.ui.json`.
fn ui_file_name(api_file: &str) -> String {
    match api_file.strip_suffix(".json") {
        Some(stem) => format!("{stem}.ui.json"),
        None => format!("{api_file}.ui.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ui_files_are_named_after_their_api_files() {
        assert_eq!(ui_file_name("03-lora.json"), "03-lora.ui.json");
        assert_eq!(ui_file_name("plan"), "plan.ui.json");
    }
}

/// What [`save_node_defs`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedNodeDefs {
    /// Node classes in the file.
    pub classes: usize,
    /// Size of the file in bytes.
    pub bytes: usize,
}

/// Writes a server's `/object_info` answer to `path` (atomically, like every file the tool
/// writes), for `--object-info FILE` offline. An answer that is not an object of node classes
/// is refused (`Unreachable`: the server is not ComfyUI); a file that cannot be written is
/// `Input`.
pub fn save_node_defs(path: &Path, answer: &serde_json::Value) -> AppResult<SavedNodeDefs> {
    let defs = NodeDefs::from_value(answer).ok_or_else(|| {
        super::AppError::new(
            ErrorKind::Unreachable,
            "the server's /object_info answer is not an object of node classes: is --server the address of ComfyUI itself?",
        )
    })?;
    let bytes = serde_json::to_vec(answer).expect("JSON values serialize");
    crate::atomic::write_atomic(path, &bytes)
        .map_err(|e| format!("{e} (is the folder there and writable? or name another file)"))
        .kind(ErrorKind::Input)?;
    Ok(SavedNodeDefs {
        classes: defs.len(),
        bytes: bytes.len(),
    })
}
