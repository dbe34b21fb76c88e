//! Creating a session folder: the variant files of every workflow's ladder and the first
//! `session.json`.

use super::journal::{
    new_session_id, now_rfc3339, step_stem, write_atomic, ControlVariant, JournalError, Phase,
    SessionFile, SessionOptions, SessionPaths, SessionState, StepInfo, WorkflowJob,
    SESSION_SCHEMA_VERSION,
};
use crate::ladder::{Kept, NotSeparable};
use crate::workflow::embedded::SourceFile;
use crate::workflow::{Change, Workflow};
use serde_json::Value;

/// One variant of a prepared ladder.
#[derive(Debug, Clone)]
pub struct PreparedStep {
    /// The increment this step adds (`minimal` for step 0).
    pub increment: String,
    /// The variant.
    pub workflow: Workflow,
    /// What it changes compared to the previous step (the ladder's changes).
    pub changes: Vec<Change>,
    /// The same variant as a UI workflow (the original UI file with the same edits made the UI
    /// way), when the input was a UI workflow; written as `NN-<increment>.ui.json`.
    pub ui: Option<Value>,
}

/// A workflow with its ladder, ready to be journaled.
#[derive(Debug, Clone)]
pub struct PreparedWorkflow {
    /// Short name (unique within the session).
    pub name: String,
    /// The path as given.
    pub source: String,
    /// The image, audio or video file the target was read from, when it was one.
    pub source_file: Option<SourceFile>,
    /// The target.
    pub target: Workflow,
    /// Step 0 (minimal) … last (the target).
    pub steps: Vec<PreparedStep>,
    /// Control variants: (step, increment, minimal + that increment alone).
    pub controls: Vec<(usize, String, Workflow)>,
    /// Reductions the ladder could not do safely.
    pub not_separable: Vec<NotSeparable>,
    /// Memory savers the ladder keeps in every variant.
    pub kept: Vec<Kept>,
    /// `plan.json` of the ladder, written next to the variants when given.
    pub plan_json: Option<Value>,
    /// The UI document the target was converted from, for a workflow preflight skipped: kept
    /// as [`UI_SOURCE_FILE`] so that `resume` can plan it again with its UI forms.
    pub ui_source: Option<Value>,
}

/// The UI document of a workflow preflight skipped, in its folder (`workflows/<name>/`).
pub const UI_SOURCE_FILE: &str = "source.ui.json";

/// The UI-format companion of a variant file: `03-lora.json` → `03-lora.ui.json`.
pub fn ui_companion(file: &str) -> String {
    match file.strip_suffix(".json") {
        Some(stem) => format!("{stem}.ui.json"),
        None => format!("{file}.ui.json"),
    }
}

/// Makes `name` unique among `taken` and safe as a folder name.
pub fn unique_name(stem: &str, taken: &[String]) -> String {
    let base: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Never `.`, `..` or a hidden name: leading and trailing dots go (`...json` has the stem
    // `..`, which as a folder name is the parent).
    let base = base.trim_matches('.');
    let base = if base.is_empty() {
        "workflow".to_string()
    } else {
        base.to_string()
    };
    let mut name = base.clone();
    let mut i = 2;
    while taken.contains(&name) {
        name = format!("{base}-{i}");
        i += 1;
    }
    name
}

/// Creates `runs/<new id>/` with the variant files and `session.json`.
pub fn create_session(
    runs_dir: &std::path::Path,
    server: &str,
    options: SessionOptions,
    workflows: Vec<PreparedWorkflow>,
) -> Result<(SessionPaths, SessionFile), JournalError> {
    let session_id = new_session_id();
    let paths = SessionPaths::new(runs_dir, &session_id);
    let mut jobs = Vec::new();
    for prepared in workflows {
        jobs.push(write_job(&paths, prepared)?);
    }
    let now = now_rfc3339();
    let mut session = SessionFile {
        schema_version: SESSION_SCHEMA_VERSION,
        session_id,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: now.clone(),
        updated_at: now,
        server: server.to_string(),
        options,
        state: SessionState::Preflight,
        workflows: jobs,
        in_flight: None,
        environment: None,
        fingerprints: Default::default(),
        drifts: Vec::new(),
        server_moves: Vec::new(),
        preflight_rechecks: Vec::new(),
    };
    session.save(&paths)?;
    Ok((paths, session))
}

/// Writes one workflow's variant files (ladder steps with their UI companions, control
/// variants, `plan.json`, the UI source of a skipped workflow) under `workflows/<name>/` and
/// returns its job, pending. Rewriting them gives the same files, so a kill before the journal
/// names them loses nothing.
pub(crate) fn write_job(
    paths: &SessionPaths,
    prepared: PreparedWorkflow,
) -> Result<WorkflowJob, JournalError> {
    let folder = format!("workflows/{}", prepared.name);
    let mut steps = Vec::new();
    for (index, step) in prepared.steps.iter().enumerate() {
        let file = format!("{folder}/{}.json", step_stem(index, &step.increment));
        write_atomic(
            &paths.dir.join(&file),
            format!("{}\n", step.workflow.to_pretty_json()).as_bytes(),
        )?;
        if let Some(ui) = &step.ui {
            super::journal::write_json_atomic(&paths.dir.join(ui_companion(&file)), ui)?;
        }
        steps.push(StepInfo {
            index,
            increment: step.increment.clone(),
            file,
            sha256: step.workflow.sha256(),
            changes: step.changes.clone(),
        });
    }
    let mut controls = Vec::new();
    for (step, increment, workflow) in &prepared.controls {
        let file = format!("{folder}/control-{}.json", step_stem(*step, increment));
        write_atomic(
            &paths.dir.join(&file),
            format!("{}\n", workflow.to_pretty_json()).as_bytes(),
        )?;
        controls.push(ControlVariant {
            step: *step,
            increment: increment.clone(),
            file,
            sha256: workflow.sha256(),
        });
    }
    if let Some(doc) = &prepared.ui_source {
        super::journal::write_json_atomic(
            &paths.dir.join(format!("{folder}/{UI_SOURCE_FILE}")),
            doc,
        )?;
    }
    if let Some(plan) = &prepared.plan_json {
        super::journal::write_json_atomic(&paths.dir.join(format!("{folder}/plan.json")), plan)?;
    }
    Ok(WorkflowJob {
        name: prepared.name,
        source: prepared.source,
        source_file: prepared.source_file,
        target_sha256: prepared.target.sha256(),
        steps,
        controls,
        not_separable: prepared.not_separable,
        kept: prepared.kept,
        phase: Phase::Pending,
        runs: Vec::new(),
        verdict: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_safe_and_distinct() {
        let taken = vec!["wf".to_string(), "wf-2".to_string()];
        assert_eq!(unique_name("wf", &taken), "wf-3");
        assert_eq!(unique_name("my flow (1)", &[]), "my_flow__1_");
        assert_eq!(unique_name("", &[]), "workflow");
        for dots in [".", "..", "..."] {
            assert_eq!(unique_name(dots, &[]), "workflow", "{dots}");
        }
        assert_eq!(unique_name(".hidden", &[]), "hidden");
        assert_eq!(unique_name("v1.5.", &[]), "v1.5");
        assert_eq!(unique_name("..", &["workflow".into()]), "workflow-2");
    }
}
