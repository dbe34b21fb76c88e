//! Human-readable rendering of a diagnosis: kind, stage and why, numbers, next check, candidates.

use super::Diagnosis;
use std::fmt::Write;

use crate::units::mib;

/// Renders the diagnosis as plain text, most important first.
pub(crate) fn render(d: &Diagnosis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "kind:        {}", d.kind.as_str());
    let _ = writeln!(out, "  why:       {}", d.kind_evidence);
    if let Some(m) = &d.message {
        let ty = d
            .exception_type
            .as_deref()
            .map(|t| format!("{t}: "))
            .unwrap_or_default();
        let _ = writeln!(out, "  message:   {ty}{m}");
    }
    let _ = write!(out, "stage:       {}", d.stage.as_str());
    let open: Vec<&str> = d
        .stage_candidates
        .iter()
        .map(|s| s.as_str())
        .filter(|s| *s != d.stage.as_str())
        .collect();
    if !open.is_empty() {
        let _ = write!(out, " (the evidence also fits: {})", open.join(", "));
    }
    out.push('\n');
    let _ = writeln!(out, "  confidence: {}", d.stage_confidence.as_str());
    let _ = writeln!(out, "  why:       {}", d.stage_evidence);
    if d.asynchronous_error_location_unreliable {
        let _ = writeln!(
            out,
            "  note:      asynchronous error: the reported location may be wrong"
        );
    }
    match (d.node_id.as_deref(), d.node_type.as_deref()) {
        (Some(id), Some(t)) if !id.is_empty() => {
            // A node inside a subgraph (`140:125`) also as the canvas shows it.
            let no_names = indexmap::IndexMap::new();
            let _ = match crate::workflow::label::subgraph_location(id, &no_names) {
                Some(_) => writeln!(
                    out,
                    "node:        {id} ({})",
                    crate::workflow::label::node_label(id, t, &no_names)
                ),
                None => writeln!(out, "node:        {id} ({t})"),
            };
        }
        (_, Some(t)) => {
            let _ = writeln!(out, "node:        {t}");
        }
        (Some(id), None) if !id.is_empty() => {
            let _ = writeln!(out, "node:        {id}");
        }
        _ => {}
    }
    if let Some(p) = &d.last_progress {
        let _ = writeln!(out, "progress:    {}/{}", p.value, p.max);
    }
    if d.numbers.is_empty() {
        let _ = writeln!(out, "numbers:     none printed");
    } else {
        let _ = writeln!(out, "numbers:");
        if let Some(i) = d.numbers.gpu_index {
            let _ = writeln!(out, "  gpu_index                  {i}");
        }
        for (name, value) in d.numbers.named_values() {
            if let Some(v) = value {
                let _ = writeln!(out, "  {name:<26} {}", mib(v));
            }
        }
        if d.numbers_consistent {
            let _ = writeln!(out, "  consistent: yes");
        } else {
            let _ = writeln!(
                out,
                "  consistent: no (kept as printed, not used to reason)"
            );
            for p in &d.inconsistencies {
                let _ = writeln!(out, "    - {p}");
            }
        }
    }
    if let Some(f) = &d.fragmentation {
        let _ = writeln!(out, "fragmentation: {f}");
    }
    if !d.next_check.is_empty() {
        let _ = writeln!(out, "next check:");
        for c in &d.next_check {
            let _ = writeln!(out, "  - {c}");
        }
    }
    if !d.candidates.is_empty() {
        let _ = writeln!(out, "unproven candidates:");
        for c in &d.candidates {
            let _ = writeln!(out, "  - {c} (unproven)");
        }
    }
    let _ = writeln!(out, "root cause:  unknown");
    out
}
