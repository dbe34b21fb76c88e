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
            .error_line()
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
            stage: r.stage,
            peak_vram_mib: r.oom_needed_mib.or(r.peak_vram_mib),
            peak_from_oom: r.oom_needed_mib.is_some(),
            degraded: if r.outcome == "passed" {
                r.delivered.degraded()
            } else {
                Vec::new()
            },
        })
        .collect();
    let gpu = env.and_then(|e| e.gpu.as_ref()).map(|g| {
        let memory = g
            .vram_total_mib
            .map(|m| format!(", {}", mib_rounded(m)))
            .unwrap_or_default();
        format!("{} ({}{memory})", g.name, g.kind)
    });
    // The user's own format: a UI file given gets the failing step's UI companion (a run has
    // one only when the input was a UI file; the source may no longer be there to tell).
    let given_ui = w.workflow.format.as_deref() != Some("api");
    let failing = w.attachments.first_failing.as_ref();
    let ui = failing
        .and_then(|a| a.ui_workflow.clone())
        .filter(|_| given_ui);
    Some(BugForm {
        expected,
        actual,
        workflow_ui: ui.is_some(),
        workflow: ui.or_else(|| failing.map(|a| a.workflow.clone())),
        given: w.workflow.path.clone(),
        steps,
        traceback_run: failure
            .run_id
            .clone()
            .filter(|_| !failure.traceback.is_empty()),
        traceback_packs: packs_in_traceback(&failure.traceback),
        gpu,
        comfyui_version: env.and_then(|e| e.comfyui_version.clone()),
    })
}

/// The custom node packs whose files the traceback's frames name (`File ".../custom_nodes/PACK/..."`,
/// POSIX or Windows separators), each once, in traceback order.
pub(crate) fn packs_in_traceback(traceback: &[String]) -> Vec<String> {
    let mut packs: Vec<String> = Vec::new();
    for line in traceback {
        let Some(rest) = line.trim_start().strip_prefix("File \"") else {
            continue;
        };
        let path = rest.split('"').next().unwrap_or_default();
        let mut parts = path.split(['/', '\\']);
        if parts.by_ref().any(|p| p == "custom_nodes") {
            // A pack is a folder, or a single module file (`custom_nodes/NAME.py`).
            if let Some(pack) = parts
                .next()
                .map(|p| p.strip_suffix(".py").unwrap_or(p))
                .filter(|p| !p.is_empty())
            {
                if !packs.iter().any(|p| p == pack) {
                    packs.push(pack.to_string());
                }
            }
        }
    }
    packs
}

#[cfg(test)]
mod tests {
    use super::packs_in_traceback;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn packs_are_read_from_the_frames_under_custom_nodes() {
        let tb = lines(
            r#"  File "/home/user/ComfyUI/execution.py", line 518, in execute
  File "/home/user/ComfyUI/custom_nodes/ComfyUI-KJNodes/nodes/model_optimization_nodes.py", line 20, in patched
    _check(z)
  File "C:\ComfyUI_windows_portable\ComfyUI\custom_nodes\comfyui-tiled-patch\__init__.py", line 11, in decode
  File "/home/user/ComfyUI/custom_nodes/ComfyUI-KJNodes/__init__.py", line 3, in f
  File "/home/user/ComfyUI/comfy/sd.py", line 820, in decode
    x = "custom_nodes/not-a-frame/a.py""#,
        );
        assert_eq!(
            packs_in_traceback(&tb),
            ["ComfyUI-KJNodes", "comfyui-tiled-patch"]
        );
    }

    #[test]
    fn a_core_traceback_names_no_pack_and_a_single_module_file_is_a_pack() {
        let core = lines(r#"  File "/home/user/ComfyUI/nodes.py", line 302, in decode"#);
        assert!(packs_in_traceback(&core).is_empty());
        let single = lines(
            r#"  File "/home/user/ComfyUI/custom_nodes/websocket_image_save.py", line 40, in save"#,
        );
        assert_eq!(packs_in_traceback(&single), ["websocket_image_save"]);
    }
}
