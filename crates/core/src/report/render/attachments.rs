//! The Attachments section of `report.md`: the last passing and first failing workflow files
//! (UI and shareable copies), the session folder and the resume hint when there is no verdict
//! yet. The command that reproduces each run is in report.json only
//! (`attachments.runs[].reproduce`).

use super::md::{code, heading, short, text};
use crate::report::model::{AttachedRun, Report, VerdictKind, WorkflowReport};

fn attachment_line(label: &str, a: &AttachedRun) -> String {
    let mut line = format!(
        "- {label} (step {}, {}, run {}): {}",
        a.step,
        text(&a.increment),
        code(&short(&a.run_id)),
        code(&a.workflow)
    );
    if let Some(ui) = &a.ui_workflow {
        line.push_str(&format!("; UI format: {}", code(ui)));
    }
    if let Some(s) = &a.shareable_workflow {
        line.push_str(&format!(
            "; shareable copy (secrets and home paths replaced): {}",
            code(s)
        ));
    }
    line.push('\n');
    line
}

/// The Attachments section of `w`.
pub(crate) fn section(w: &WorkflowReport, level: usize, report: &Report) -> String {
    let a = &w.attachments;
    let mut out = heading(level, "Attachments");
    if let Some(p) = &a.minimal_passing {
        out.push_str(&attachment_line("Last passing workflow", p));
    }
    if let Some(f) = &a.first_failing {
        let label = if matches!(
            w.verdict.kind,
            VerdictKind::Incomplete | VerdictKind::InProgress
        ) {
            "Lowest failing workflow so far"
        } else {
            "First failing workflow"
        };
        out.push_str(&attachment_line(label, f));
    }
    out.push_str(&format!("- Session folder: {}\n", code(&a.session_dir)));
    if matches!(
        w.verdict.kind,
        VerdictKind::Incomplete | VerdictKind::InProgress
    ) {
        let when = if report.state == "running" {
            "if the tool is no longer running (killed or crashed), continue with"
        } else {
            "continue with"
        };
        out.push_str(&format!(
            "- No verdict yet; {when} {}\n",
            code(&crate::shell::resume_command(
                &report.session_id,
                report
                    .settings
                    .runs_dir
                    .as_deref()
                    .map(std::path::Path::new)
            ))
        ));
    }
    out.push('\n');
    out
}
