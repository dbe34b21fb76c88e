//! The Markdown of "Mitigations tried" (the rows are built in `report/mitigations.rs`): a table
//! of the controls that ran, passing ones first, the line that a passing control is a way
//! around and not a cause, then the controls not run and those not for this failure in a list.

use super::md::{code, text, Table};
use crate::report::mitigations::MitigationRow;

const DASH: &str = "—";

/// The section for one workflow; empty when it has no mitigations.
pub(crate) fn section(rows: &[MitigationRow], level: usize, session_id: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!("{} Mitigations tried\n\n", "#".repeat(level + 1));
    out.push_str(&format!(
        "Each control changes one thing on the target and runs it once, cold, for the failure at {} (`comfy-bisect mitigate`). It passes only with a complete product, no memory fallback and no flat or black image.\n\n",
        code(rows[0].stage_targeted.as_str())
    ));
    let ran: Vec<&MitigationRow> = rows.iter().filter(|r| r.run_id.is_some()).collect();
    if !ran.is_empty() {
        let mut t = Table::new(&[
            "control",
            "the single change",
            "targets",
            "predicted",
            "run",
            "outcome",
            "stage now",
            "peak VRAM",
            "time",
            "product",
        ])
        .right(7)
        .right(8);
        for r in &ran {
            let change = if r.edits.is_empty() {
                text(&r.change)
            } else {
                format!("{}<br>{}", text(&r.change), text(&r.edits.join("; ")))
            };
            let targets = match &r.place {
                Some(p) => format!("{} ({})", code(r.stage_targeted.as_str()), text(p)),
                None => code(r.stage_targeted.as_str()),
            };
            let stage_now = match (&r.stage_now, r.moved) {
                (Some(s), Some(true)) => format!("{} (moved)", code(s.as_str())),
                (Some(s), _) => format!("{} (not moved)", code(s.as_str())),
                (None, _) if r.passed() => DASH.into(),
                (None, _) => "unknown".into(),
            };
            let outcome = if r.passed() {
                format!("**{}**", text(&r.outcome))
            } else {
                text(&r.outcome)
            };
            t.row(vec![
                code(&r.control),
                change,
                targets,
                text(&r.predicted),
                r.run_id
                    .as_deref()
                    .map(|id| code(&id[..id.len().min(8)]))
                    .unwrap_or_else(|| DASH.into()),
                outcome,
                stage_now,
                r.vram_peak_mib
                    .map(crate::units::mib_rounded)
                    .unwrap_or_else(|| DASH.into()),
                r.duration_ms
                    .map(|ms| crate::units::seconds(ms as f64 / 1000.0))
                    .unwrap_or_else(|| DASH.into()),
                r.product
                    .as_deref()
                    .map(text)
                    .unwrap_or_else(|| DASH.into()),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    if rows.iter().any(MitigationRow::passed) {
        out.push_str(
            "A passing control is a way around the failure under these inputs, not its cause.",
        );
        if let Some(r) = rows
            .iter()
            .find(|r| r.passed() && r.workflow_file.is_some())
        {
            out.push_str(&format!(
                " Its workflow: {}{}; {} writes it where you want it.",
                code(r.workflow_file.as_deref().unwrap_or_default()),
                r.ui_file
                    .as_deref()
                    .map(|u| format!(" (UI: {})", code(u)))
                    .unwrap_or_default(),
                code(&format!("comfy-bisect mitigate {session_id} --apply FILE"))
            ));
        }
        out.push_str("\n\n");
    } else if !ran.is_empty() {
        out.push_str("No control passed.\n\n");
    }
    let listed = |status: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r.status == status)
            .map(|r| {
                format!(
                    "{} ({})",
                    code(&r.control),
                    text(
                        r.outcome
                            .split_once(": ")
                            .map_or(r.outcome.as_str(), |(_, why)| why)
                    )
                )
            })
            .collect()
    };
    for (status, label) in [
        ("pending", "Not run yet"),
        ("in_flight", "In flight"),
        ("not_run", "Not run"),
        ("not_applicable", "Not for this failure"),
    ] {
        let items = listed(status);
        if !items.is_empty() {
            out.push_str(&format!("{label}: {}.\n\n", items.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(control: &str, status: &str, outcome: &str) -> MitigationRow {
        MitigationRow {
            control: control.into(),
            kind: crate::mitigate::Kind::Graph,
            change: "VAE decode → the tiled decoder".into(),
            stage_targeted: "decode".into(),
            place: Some("first".into()),
            predicted: "decode completes".into(),
            status: status.into(),
            outcome: outcome.into(),
            ..MitigationRow::default()
        }
    }

    #[test]
    fn passing_controls_come_with_the_way_around_line_and_the_rest_are_listed() {
        let mut pass = row("tiled-decode", "passed", "passed: complete product");
        pass.run_id = Some("0123456789abcdef".into());
        pass.workflow_file = Some("workflows/t/mitigation-tiled-decode.json".into());
        let mut fail = row(
            "batch-1",
            "failed",
            "failed: VAEDecode (node 8) raised torch.OutOfMemoryError",
        );
        fail.run_id = Some("fedcba9876543210".into());
        fail.stage_now = Some("decode".into());
        fail.moved = Some(false);
        let md = section(
            &[
                pass,
                fail,
                row("reserve-vram", "not_run", "not run: needs --launch-cmd"),
                row(
                    "fp8-weights",
                    "not_applicable",
                    "not for this failure: targets load",
                ),
            ],
            2,
            "20261201-0102",
        );
        assert!(md.starts_with("### Mitigations tried\n"), "{md}");
        assert!(md.contains("| `tiled-decode` |"), "{md}");
        assert!(md.contains("**passed: complete product**"), "{md}");
        assert!(md.contains("`decode` (not moved)"), "{md}");
        assert!(
            md.contains("a way around the failure under these inputs, not its cause"),
            "{md}"
        );
        assert!(
            md.contains("Not run: `reserve-vram` (needs --launch-cmd)."),
            "{md}"
        );
        assert!(
            md.contains("Not for this failure: `fp8-weights` (targets load)."),
            "{md}"
        );
        assert!(
            md.contains("`comfy-bisect mitigate 20261201-0102 --apply FILE`"),
            "{md}"
        );
        assert!(section(&[], 2, "s").is_empty());
    }
}
