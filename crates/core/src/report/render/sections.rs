//! The smaller per-workflow sections of `report.md`: Preflight, What to check next, Repeats,
//! Controls and Component hashes.

use super::md::{code, heading, node, short, text, text_with_code, Table, DASH};
use crate::report::model::WorkflowReport;
use crate::units::mib_rounded as mib;

/// Preflight: the node classes and model files missing on the server (empty without one).
pub(crate) fn preflight(w: &WorkflowReport, level: usize) -> String {
    let mut out = String::new();
    if let Some(p) = &w.preflight {
        out.push_str(&heading(level, "Preflight"));
        for n in &p.unknown_nodes {
            out.push_str(&format!(
                "- Unknown node class {} (install its custom node pack)\n",
                code(n)
            ));
        }
        for m in &p.missing_models {
            out.push_str(&format!("- Missing model file: {}\n", text(m)));
        }
        for o in &p.other {
            out.push_str(&format!("- {}\n", text(o)));
        }
        out.push('\n');
    }
    out
}

/// What to check next for the failing stage, the unproven explanations and the root cause.
pub(crate) fn next_steps(w: &WorkflowReport, level: usize) -> String {
    let mut out = String::new();
    if let Some(n) = &w.next_steps {
        out.push_str(&heading(level, "What to check next"));
        out.push_str(&format!(
            "For a failure in the {} stage:\n\n",
            code(n.stage.as_str())
        ));
        for c in &n.next_check {
            out.push_str(&format!("- {}\n", text_with_code(c)));
        }
        if !n.candidates.is_empty() {
            out.push_str(
                "\nPossible explanations. Each is **unproven**: the evidence above fits it, but does not show that it, or anything else, is the cause.\n\n",
            );
            for c in &n.candidates {
                out.push_str(&format!(
                    "- {} — *{}*\n",
                    text_with_code(&c.text),
                    text(&c.status)
                ));
            }
        }
        out.push_str(&format!("\nRoot cause: {}.\n\n", text(&n.root_cause)));
    }
    out
}

/// Repeats (`--repeat`): pass/fail counts of the boundary steps.
pub(crate) fn repeats(w: &WorkflowReport, level: usize) -> String {
    let mut out = String::new();
    if !w.repeats.is_empty() {
        out.push_str(&heading(level, "Repeats (flakiness check)"));
        let mut t = Table::new(&[
            "Step",
            "Increment",
            "Role",
            "Passed",
            "Failed",
            "Other",
            "Runs",
        ])
        .right(0)
        .right(3)
        .right(4)
        .right(5);
        for r in &w.repeats {
            t.row(vec![
                r.step.to_string(),
                text(&r.increment),
                text(&r.role.replace('_', " ")),
                r.passed.to_string(),
                r.failed.to_string(),
                r.other.to_string(),
                r.run_ids
                    .iter()
                    .map(|id| code(&short(id)))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    out
}

/// Controls (`--increments-alone`): the minimal variant plus one increment alone.
pub(crate) fn controls(w: &WorkflowReport, level: usize) -> String {
    let mut out = String::new();
    if !w.controls.is_empty() {
        out.push_str(&heading(level, "Controls (minimal + one increment alone)"));
        let mut t = Table::new(&[
            "Step",
            "Increment alone",
            "Run",
            "Outcome",
            "Stage",
            "Failing node",
            "Peak VRAM",
        ])
        .right(0)
        .right(6);
        for c in &w.controls {
            t.row(vec![
                c.step.to_string(),
                text(&c.increment),
                c.run_id
                    .as_deref()
                    .map(|r| code(&short(r)))
                    .unwrap_or_else(|| DASH.into()),
                text(&c.outcome),
                c.stage
                    .map(|s| s.as_str())
                    .map(text)
                    .unwrap_or_else(|| DASH.into()),
                c.failing_node
                    .as_ref()
                    .map(node)
                    .unwrap_or_else(|| DASH.into()),
                c.peak_vram_mib.map(mib).unwrap_or_else(|| DASH.into()),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    out
}

/// Component hashes: the model files of the recorded runs.
pub(crate) fn components(w: &WorkflowReport, level: usize) -> String {
    let mut out = String::new();
    out.push_str(&heading(level, "Component hashes"));
    if w.components.is_empty() {
        out.push_str(
            "No model files referenced by the recorded runs (or no run recorded yet).\n\n",
        );
    } else {
        let mut t = Table::new(&["File", "Folder", "Loader", "Size", "sha256", "AutoV2"]).right(3);
        // Why a file is unhashed is said once per reason (the file name left out of it), in a
        // numbered note under the table, not in every row.
        let mut reasons: Vec<String> = Vec::new();
        for c in &w.components {
            let (sha, autov2) = match (&c.sha256, &c.autov2) {
                (Some(s), Some(a)) => (code(s), code(a)),
                _ => {
                    let reason = c
                        .reason
                        .as_deref()
                        .unwrap_or("no reason recorded")
                        .replace(&c.file, "the file")
                        .replace(&format!("its {} folders", c.folder), "its model folders");
                    let reason = match reason.find("; the server lists the file (") {
                        // The size the server lists is the Size column.
                        Some(at) => match reason[at..].find(");") {
                            Some(end) => format!("{}{}", &reason[..at], &reason[at + end + 1..]),
                            None => reason,
                        },
                        None => reason,
                    };
                    let n = match reasons.iter().position(|r| *r == reason) {
                        Some(i) => i + 1,
                        None => {
                            reasons.push(reason);
                            reasons.len()
                        }
                    };
                    (format!("unhashed ({n})"), DASH.to_string())
                }
            };
            let file = match &c.link_target {
                Some(target) => format!("{} → {}", code(&c.file), code(target)),
                None => code(&c.file),
            };
            t.row(vec![
                file,
                text(&c.folder),
                format!("{} ({})", node(&c.node), code(&c.input)),
                c.size_bytes
                    .map(crate::units::file_size)
                    .unwrap_or_else(|| DASH.into()),
                sha,
                autov2,
            ]);
        }
        out.push_str(&t.render());
        out.push_str("\nsha256 is over the whole file; AutoV2 is its first 10 hex digits (what Civitai and A1111 show).\n\n");
        for (i, r) in reasons.iter().enumerate() {
            out.push_str(&format!("{}. Unhashed: {}\n", i + 1, text_with_code(r)));
        }
        if !reasons.is_empty() {
            out.push('\n');
        }
    }
    out
}
