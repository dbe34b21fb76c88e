//! The failure in the fields of ComfyUI's bug form ("Bug Report" in Comfy-Org/ComfyUI's
//! `.github/ISSUE_TEMPLATE/bug-report.yml`: Custom Node Testing, Expected Behavior, Actual
//! Behavior, Steps to Reproduce, Debug Logs, Other), built from a workflow's report and the
//! environment. Plain text and numbers only: `render/bug_form.rs` writes the Markdown block.

use super::model::{BugForm, BugFormStep, Environment, WorkflowReport};
use crate::units::mib_rounded;

/// The bug form of `w`, when one of its runs failed (`first_failure`); `env` gives the GPU and
/// the ComfyUI version.
pub(super) fn bug_form(w: &WorkflowReport, env: Option<&Environment>) -> Option<BugForm> {
    let failure = w.first_failure.as_ref()?;
    let expected = match &w.attachments.minimal_passing {
        Some(p) => format!(
            "The workflow runs to the end, as its smaller variant at step {} ({}) did on the same server.",
            p.step, p.increment
        ),
        None => "The workflow runs to the end.".to_string(),
    };
    let mut actual = w.verdict.summary.clone();
    if let Some(n) = &failure.node {
        let raised = failure
            .exception_type
            .as_deref()
            .map(|t| format!(" raised {t}"))
            .unwrap_or_default();
        actual.push_str(&format!(
            " The failing node: {} #{}{raised}.",
            n.class_type, n.id
        ));
    }
    let steps = w
        .ladder
        .iter()
        .map(|r| BugFormStep {
            step: r.step,
            increment: r.increment.clone(),
            outcome: r.outcome.clone(),
            stage: r.stage.clone(),
            peak_vram_mib: r.oom_needed_mib.or(r.peak_vram_mib),
            peak_from_oom: r.oom_needed_mib.is_some(),
        })
        .collect();
    let gpu = env.and_then(|e| e.gpu.as_ref()).map(|g| {
        let memory = g
            .vram_total_mib
            .map(|m| format!(", {}", mib_rounded(m)))
            .unwrap_or_default();
        format!("{} ({}{memory})", g.name, g.kind)
    });
    Some(BugForm {
        expected,
        actual,
        workflow: w
            .attachments
            .first_failing
            .as_ref()
            .map(|a| a.workflow.clone()),
        steps,
        traceback_run: failure
            .run_id
            .clone()
            .filter(|_| !failure.traceback.is_empty()),
        gpu,
        comfyui_version: env.and_then(|e| e.comfyui_version.clone()),
    })
}
