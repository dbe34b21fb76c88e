//! The Attachments section of `report.md`: the last passing and first failing workflow files
//! (UI and shareable copies), the session folder, the resume hint when there is no verdict yet,
//! and the commands that reproduce the runs.

use super::budget::Limits;
use super::md::{code, fence, heading, short, text};
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
pub(crate) fn section(
    w: &WorkflowReport,
    level: usize,
    report: &Report,
    limits: &Limits,
) -> String {
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
    if !a.runs.is_empty() {
        let mut body = String::new();
        let key = |r: &AttachedRun| {
            [&a.minimal_passing, &a.first_failing]
                .iter()
                .any(|k| k.as_ref().is_some_and(|k| k.run_id == r.run_id))
        };
        let mut others = 0;
        let mut shown: Vec<&AttachedRun> = a
            .runs
            .iter()
            .filter(|r| {
                if key(r) {
                    return true;
                }
                others += 1;
                others <= limits.reproduce
            })
            .collect();
        let left_out = a.runs.len() - shown.len();
        // In ladder order (runs of one step in the order they ran), as the Ladder table.
        shown.sort_by_key(|r| r.step);
        for r in shown {
            body.push_str(&format!(
                "# step {} {} ({}) — {}, run {}\n{}\n",
                r.step,
                r.increment,
                r.purpose,
                r.outcome,
                short(&r.run_id),
                r.reproduce
            ));
        }
        if left_out > 0 {
            body.push_str(&format!(
                "# … {left_out} more runs: report.json (attachments.runs) has every command\n"
            ));
        }
        out.push_str("Reproduce each run with comfy-bisect");
        // Redaction may have put placeholders where the server's address was.
        if report.redacted && body.contains('<') {
            out.push_str(" (put your server's address where the placeholders are)");
        }
        out.push_str(":\n\n");
        out.push_str(&fence("sh", body.trim_end()));
        out.push('\n');
    }
    out
}
