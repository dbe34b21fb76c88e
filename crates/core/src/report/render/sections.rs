//! The smaller per-workflow sections of `report.md`: Preflight, Repeats, Controls, and the model
//! files in one line (their hashes are in report.json only, like what to check next).

use super::md::{code, heading, node, short, text, Table, DASH};
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

/// The model files of the recorded runs in one line: name, size and AutoV2 (the short hash
/// Civitai shows) or "unhashed", each file once, at most 12 (the others counted); empty without
/// any. Their sha256, folders, loaders and why a file is unhashed are in report.json only
/// (`components`).
pub(crate) fn model_files(w: &WorkflowReport) -> String {
    let hashed = w.components.iter().filter(|c| c.autov2.is_some()).count();
    let mut seen: Vec<&str> = Vec::new();
    let mut files = Vec::new();
    for c in &w.components {
        if seen.contains(&c.file.as_str()) {
            continue;
        }
        seen.push(&c.file);
        let mut about = Vec::new();
        if let Some(size) = c.size_bytes {
            about.push(crate::units::file_size(size));
        }
        match &c.autov2 {
            Some(a) => about.push(format!("AutoV2 {}", code(a))),
            None if hashed > 0 => about.push("unhashed".to_string()),
            None => {}
        }
        // A link out of the model folders says where the file really is.
        let file = match &c.link_target {
            Some(target) => format!("{} → {}", code(&c.file), code(target)),
            None => code(&c.file),
        };
        files.push(if about.is_empty() {
            file
        } else {
            format!("{file} ({})", about.join(", "))
        });
    }
    if files.is_empty() {
        return String::new();
    }
    // A workflow of many LoRAs keeps this one line short.
    const SHOWN: usize = 12;
    if files.len() > SHOWN {
        let more = files.len() - SHOWN;
        files.truncate(SHOWN);
        files.push(format!("… and {more} more"));
    }
    // Why a file is unhashed (a remote server, no --models-dir) is in report.json.
    let unhashed = if hashed == 0 {
        " None is hashed (report.json says why)."
    } else {
        ""
    };
    format!("Model files: {}.{unhashed}\n\n", files.join(", "))
}
