//! What `report.md` leaves to `report.json`, and the one line that says so. report.md is sized
//! for an issue (the demo's reports under 12 KB): the parts a maintainer does not need first are
//! in report.json only, each under the field the line names (in `workflows[]`), so no fact is
//! lost. Only the parts the report has are named.

use super::md::text;
use crate::report::model::{Report, WorkflowReport};

/// One part left to report.json: what it is, its field under `workflows[]`, and whether a
/// workflow has it.
struct Part {
    what: &'static str,
    field: &'static str,
    has: fn(&WorkflowReport) -> bool,
}

/// Every part report.md leaves to report.json, in the order the line names them.
const PARTS: [Part; 9] = [
    Part {
        what: "memory chart (Mermaid)",
        field: "memory_chart",
        has: |w| w.memory_chart.is_some(),
    },
    Part {
        what: "products",
        field: "ladder[].product",
        has: |w| w.ladder.iter().any(|r| r.delivered.product.is_some()),
    },
    Part {
        what: "models loaded",
        field: "ladder[].models",
        has: |w| w.ladder.iter().any(|r| !r.models.is_empty()),
    },
    Part {
        what: "memory events",
        field: "ladder[].memory_events",
        has: |w| w.ladder.iter().any(|r| !r.memory_events.is_empty()),
    },
    Part {
        what: "node times",
        field: "node_times",
        has: |w| w.node_times.is_some(),
    },
    Part {
        what: "allocator numbers",
        field: "first_failure.numbers",
        has: |w| {
            w.first_failure
                .as_ref()
                .is_some_and(|e| !e.numbers.is_empty())
        },
    },
    Part {
        what: "next checks and unproven explanations",
        field: "next_steps",
        has: |w| w.next_steps.is_some(),
    },
    Part {
        what: "model file hashes",
        field: "components",
        has: |w| !w.components.is_empty(),
    },
    Part {
        what: "reproduce commands",
        field: "attachments.runs[].reproduce",
        has: |w| !w.attachments.runs.is_empty(),
    },
];

/// The line that names them (empty when the report has none), with its blank line.
pub(crate) fn line(report: &Report) -> String {
    let named: Vec<String> = PARTS
        .iter()
        .filter(|p| report.workflows.iter().any(p.has))
        .map(|p| format!("{} (`{}`)", text(p.what), p.field))
        .collect();
    if named.is_empty() {
        return String::new();
    }
    format!(
        "**Only in report.json** (under `workflows[]`): {}.\n\n",
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{LadderRow, MemoryChart, ModelLoadRow, NodeTimes};

    fn report(w: WorkflowReport) -> Report {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "generator": "t", "session_id": "s", "state": "done",
            "redacted": false, "settings": crate::report::model::Settings::default(),
            "workflows": [], "warnings": []
        }))
        .map(|mut r: Report| {
            r.workflows.push(w);
            r
        })
        .unwrap()
    }

    fn workflow() -> WorkflowReport {
        serde_json::from_value(serde_json::json!({
            "name": "wf", "workflow": {},
            "verdict": {"kind": "in_progress", "summary": "", "steps": 0, "root_cause": "unknown"},
            "ladder": [], "vram": {"note": ""}, "repeats": [], "controls": [], "components": [],
            "attachments": {"session_dir": "runs/s", "runs": []}
        }))
        .unwrap()
    }

    #[test]
    fn only_the_parts_the_report_has_are_named() {
        assert_eq!(line(&report(workflow())), "");
        let mut w = workflow();
        w.memory_chart = Some(MemoryChart::default());
        w.node_times = Some(NodeTimes::default());
        w.ladder.push(LadderRow {
            models: vec![ModelLoadRow {
                class: None,
                full: true,
                loaded_mib: 1.0,
                offloaded_mib: None,
                lowvram_patches: None,
            }],
            ..LadderRow::default()
        });
        let r = report(w);
        let l = line(&r);
        let named: Vec<&str> = l.split('`').skip(3).step_by(2).collect();
        assert_eq!(
            named,
            ["memory_chart", "ladder[].models", "node_times"],
            "{l}"
        );
        assert!(l.starts_with("**Only in report.json**"), "{l}");
        assert!(l.contains("memory chart (Mermaid) (`memory_chart`)"), "{l}");
        assert!(!l.contains("components"), "{l}");
        assert_eq!(l.trim_end().lines().count(), 1, "one line: {l}");
    }
}
