//! The block report.md starts with: the failure in the fields of ComfyUI's bug form, each
//! field a `###` heading as GitHub shows a submitted form (Custom Node Testing, Expected
//! Behavior, Actual Behavior, Steps to Reproduce, Debug Logs, Other), so each part can be
//! pasted into the field of the same name. It holds the verdict, a five-column ladder, the
//! custom-pack nodes of the failing workflow, the one traceback of the report (folded) and the
//! GPU and ComfyUI version; the full tables follow it.

use super::budget::{self, trimmed_block, Limits};
use super::md::{self, code, details, node, text, Table};
use crate::report::model::{BugForm, CustomPackNodes, Evidence, VerdictKind, WorkflowReport};
use crate::units::mib_rounded as mib;

const DASH: &str = "—";

/// The block of `w` (empty when it has no bug form); `title` names the workflow when the
/// session has several; `level` is the block's heading level (its fields are one deeper).
pub fn markdown(
    w: &WorkflowReport,
    session_id: &str,
    title: Option<&str>,
    level: usize,
    limits: &Limits,
) -> String {
    let Some(form) = &w.bug_form else {
        return String::new();
    };
    let hashes = "#".repeat(level);
    let field = |name: &str| format!("{}# {name}\n\n", hashes);
    let mut out = match title {
        Some(t) => format!("{hashes} For ComfyUI's bug form: {}\n\n", code(t)),
        None => format!("{hashes} For ComfyUI's bug form\n\n"),
    };
    out.push_str(&format!(
        "Paste what is under each heading into the field of that name in ComfyUI's issue form \
         (New issue → *Bug Report*); {} packs the files to attach.\n\n",
        code(&format!(
            "comfy-bisect report {session_id} --bundle report.zip"
        ))
    ));
    out.push_str(&field("Custom Node Testing"));
    out.push_str(&custom_nodes(w.custom_pack_nodes.as_ref()));
    out.push_str(&traceback_packs(&form.traceback_packs));
    out.push_str(&field("Expected Behavior"));
    out.push_str(&format!("{}\n\n", text(&form.expected)));
    out.push_str(&field("Actual Behavior"));
    out.push_str(&format!(
        "{}{}\n\n",
        w.verdict.sentence(&|s: &str| md::bold(s)),
        failing_node(w.first_failure.as_ref())
    ));
    out.push_str(&field("Steps to Reproduce"));
    out.push_str(&steps(form, w));
    out.push_str(&field("Debug Logs"));
    match w.first_failure.as_ref().filter(|e| !e.traceback.is_empty()) {
        Some(e) => {
            out.push_str(&traceback(e, limits));
            out.push('\n');
        }
        None => out.push_str(
            "The failing run has no Python traceback (the server sent none); the server \
             console of the run is below, under the failing run.\n\n",
        ),
    }
    out.push_str(&field("Other"));
    let mut other = Vec::new();
    other.push(format!(
        "GPU: {}",
        form.gpu.as_deref().map(text).unwrap_or_else(|| DASH.into())
    ));
    other.push(format!(
        "ComfyUI {}",
        form.comfyui_version
            .as_deref()
            .map(text)
            .unwrap_or_else(|| DASH.into())
    ));
    out.push_str(&format!(
        "{}. Found with comfy-bisect.\n\n",
        other.join(" · ")
    ));
    out
}

/// "The failing node: `VAEDecode #8` raised `torch.OutOfMemoryError`."
fn failing_node(e: Option<&Evidence>) -> String {
    let Some(n) = e.and_then(|e| e.node.as_ref()) else {
        return String::new();
    };
    let raised = e
        .and_then(Evidence::error_line)
        .map(|t| format!(" raised {}", code(&t)))
        .unwrap_or_default();
    format!(" The failing node: {}{raised}.", node(n))
}

/// The custom-pack nodes of the failing workflow, all core, or not recorded.
fn custom_nodes(c: Option<&CustomPackNodes>) -> String {
    let Some(c) = c else {
        return "Not recorded: the failing run's record does not say which of its nodes come \
                from custom node packs (an older record, or the server's node definitions \
                could not be read). The Environment section lists the server's packs.\n\n"
            .to_string();
    };
    if c.nodes.is_empty() {
        return format!(
            "Every node of the failing workflow (step {}) is one of ComfyUI's own: none comes \
             from a custom node pack.\n\n",
            c.step
        );
    }
    let mut out = format!(
        "The failing workflow (step {}) has {} node{} from custom node packs. ComfyUI asks \
         whether the failure stays with `--disable-all-custom-nodes`; a failure that needs \
         these nodes belongs to the pack's author.\n\n",
        c.step,
        c.nodes.len(),
        if c.nodes.len() == 1 { "" } else { "s" }
    );
    let mut t = Table::new(&["Node", "Title", "Pack", "Version"]);
    for n in &c.nodes {
        t.row(vec![
            node(&n.node),
            n.title.as_deref().map(text).unwrap_or_else(|| DASH.into()),
            text(&n.pack),
            n.version
                .as_deref()
                .map(text)
                .unwrap_or_else(|| "unknown".into()),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    out
}

/// The packs whose code the traceback passes through (empty: none).
fn traceback_packs(packs: &[String]) -> String {
    if packs.is_empty() {
        return String::new();
    }
    let names: Vec<String> = packs.iter().map(|p| code(p)).collect();
    format!(
        "The traceback passes through the code of the custom node pack{} {}: a pack can change \
         ComfyUI's own functions when it loads, whether or not the workflow uses its nodes. \
         Check whether the failure stays with `--disable-all-custom-nodes`.\n\n",
        if packs.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// The workflow to queue and the ladder in five columns.
fn steps(form: &BugForm, w: &WorkflowReport) -> String {
    let how = if w.verdict.kind == VerdictKind::Check {
        "comfy-bisect ran the workflow as given once (`check`, no ladder):"
    } else {
        "comfy-bisect reduced the full workflow to a minimal variant and added its parts back \
         one step at a time:"
    };
    let of_given = form
        .given
        .as_deref()
        .map(|g| format!(", the failing variant of {}", code(g)))
        .unwrap_or_default();
    let mut out = match &form.workflow {
        Some(file) if form.workflow_ui => format!(
            "Load the failing workflow {} (UI format{of_given}) in ComfyUI and queue it on a \
             server like the one under Other. {how}\n\n",
            code(file)
        ),
        Some(file) => format!(
            "Queue the failing workflow {} (API format, as it was submitted{of_given}) on a \
             server like the one under Other. {how}\n\n",
            code(file)
        ),
        None => format!("{how}\n\n"),
    };
    let mut t = Table::new(&["Step", "Increment", "Outcome", "Stage", "Peak VRAM"])
        .right(0)
        .right(4);
    for s in &form.steps {
        let outcome = if s.degraded.is_empty() {
            s.outcome.replace('_', " ")
        } else {
            format!(
                "{} — {}",
                s.outcome.replace('_', " "),
                s.degraded.join(", ")
            )
        };
        let outcome = if w.verdict.step == Some(s.step) && s.outcome != "passed" {
            md::bold(&outcome)
        } else {
            text(&outcome)
        };
        let peak = match s.peak_vram_mib {
            Some(p) if s.peak_from_oom => format!("≥ {} (OOM message)", mib(p)),
            Some(p) => mib(p),
            None => DASH.into(),
        };
        t.row(vec![
            s.step.to_string(),
            text(&s.increment),
            outcome,
            s.stage
                .map(|s| s.as_str())
                .map(text)
                .unwrap_or_else(|| DASH.into()),
            peak,
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    out
}

/// What ComfyUI sends of a traceback (`traceback.format_tb`: the frames only) made whole as
/// Python prints it: `Traceback (most recent call last):`, the frames, and the exception line
/// with its message (`torch.OutOfMemoryError: CUDA out of memory. …`), so a maintainer reads
/// the error where they expect it.
fn whole_traceback(e: &Evidence) -> Vec<String> {
    let mut lines: Vec<String> = e
        .traceback
        .iter()
        .flat_map(|l| l.trim_end_matches('\n').lines())
        .map(str::to_string)
        .collect();
    if lines.first().map(|l| l.trim()) == Some(TRACEBACK_HEADER) {
        lines.remove(0);
    }
    let exception = exception_lines(e);
    if !exception.is_empty() && lines.ends_with(&exception) {
        lines.truncate(lines.len() - exception.len());
    }
    let mut out = vec![TRACEBACK_HEADER.to_string()];
    out.extend(lines);
    out.extend(exception);
    out
}

/// A line of only `^` and `~` (Python 3.11+ column markers under a frame's code).
fn is_marker_line(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| matches!(c, '^' | '~'))
}

/// The first line of every Python traceback.
const TRACEBACK_HEADER: &str = "Traceback (most recent call last):";

/// The traceback's last lines: `type: message`, the message's further lines below it.
fn exception_lines(e: &Evidence) -> Vec<String> {
    let Some(kind) = e.exception_type.as_deref() else {
        return Vec::new();
    };
    let message = e.exception_message.as_deref().unwrap_or_default();
    let mut lines = message.trim_end().lines();
    let first = match lines.next().map(str::trim_end) {
        Some(m) if !m.is_empty() => format!("{kind}: {m}"),
        _ => kind.to_string(),
    };
    std::iter::once(first)
        .chain(lines.map(str::to_string))
        .collect()
}

/// The failing run's traceback, folded (`<details>`) and trimmed to `limits`: the one place
/// report.md shows it.
pub(crate) fn traceback(e: &Evidence, limits: &Limits) -> String {
    let lines = whole_traceback(e);
    // The header and the exception lines stay; only the frames between them are trimmed.
    // Python's `^^^^` marker lines under a frame's code point at columns, not at facts.
    let frames: Vec<&String> = lines[1..lines.len() - exception_lines(e).len()]
        .iter()
        .filter(|l| !is_marker_line(l))
        .collect();
    let markers = lines.len() - 1 - exception_lines(e).len() - frames.len();
    let room = limits
        .traceback_lines
        .saturating_sub(lines.len() - frames.len());
    let mut t = budget::trim_middle(&frames, room, limits.line_chars);
    t.lines.insert(0, lines[0].clone());
    let exception = exception_lines(e);
    let keep = limits.message_lines.max(1);
    for l in exception.iter().take(keep) {
        // The exception's message keeps its figures: a long line is cut in its middle.
        t.lines
            .push(budget::cut_middle(l, limits.line_chars.max(600)));
    }
    if exception.len() > keep {
        t.lines.push(format!(
            "[… {} more lines of the message; the whole message is in run.json and report.json …]",
            exception.len() - keep
        ));
        t.omitted += exception.len() - keep;
    }
    // No run id here: a summary cannot hold a code span, and GitHub links a bare hex word.
    let summary = if t.omitted + markers > 0 {
        format!(
            "Traceback of step {} ({} of {} lines shown{})",
            e.step,
            lines.len() - t.omitted - markers,
            lines.len(),
            if markers > 0 {
                ", without Python's ^^^ marker lines"
            } else {
                ""
            }
        )
    } else {
        format!("Traceback of step {}", e.step)
    };
    let body = trimmed_block(e, "traceback", "text", &t, limits.line_chars);
    details(&summary, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::budget::LEVELS;
    use serde_json::json;

    /// A failing workflow's report: step 1 ran out of memory in node 3, step 0 passed.
    fn failing(custom_pack_nodes: serde_json::Value) -> WorkflowReport {
        let mut w: WorkflowReport = serde_json::from_value(json!({
            "name": "wf",
            "workflow": {},
            "verdict": {"kind": "first_failure", "summary": "First failure when adding batch (step 1 of 1): CUDA out of memory during the VAE decode (decode stage). Root cause: unknown.",
                        "step": 1, "steps": 1, "increment": "batch", "failure_kind": "cuda_oom",
                        "stage": "decode", "root_cause": "unknown"},
            "ladder": [
                {"step": 0, "increment": "minimal", "changes": [], "outcome": "passed", "peak_vram_mib": 2100.0},
                {"step": 1, "increment": "batch", "changes": [], "outcome": "failed", "stage": "decode",
                 "peak_vram_mib": 3000.0, "oom_needed_mib": 6963.2, "oom_needed_from": "in use + requested"}
            ],
            "vram": {"note": "sampled"},
            "first_failure": {"step": 1, "increment": "batch", "run_id": "5e550000-aaaa", "outcome": "failed",
                              "node": {"id": "8", "class_type": "VAEDecode"},
                              "exception_type": "torch.OutOfMemoryError",
                              "numbers": {}, "traceback": ["  File \"nodes.py\", line 296, in decode\n"]},
            "repeats": [], "controls": [], "components": [],
            "attachments": {"session_dir": "runs/s", "runs": [],
                            "first_failing": {"step": 1, "increment": "batch", "purpose": "ladder",
                                "run_id": "5e550000-aaaa", "outcome": "failed", "run_dir": "runs/s/01",
                                "workflow": "runs/s/01/workflow.json", "reproduce": "comfy-bisect submit"}},
            "custom_pack_nodes": custom_pack_nodes
        }))
        .unwrap();
        w.bug_form = crate::report::bug_form::bug_form(&w, None);
        w
    }

    #[test]
    fn the_fields_come_in_the_forms_order_with_the_ladder_in_five_columns() {
        let md = markdown(&failing(serde_json::Value::Null), "s1", None, 2, &LEVELS[0]);
        let mut at = 0;
        for part in [
            "## For ComfyUI's bug form\n",
            "`comfy-bisect report s1 --bundle report.zip` packs the files",
            "### Custom Node Testing\n\nNot recorded",
            "### Expected Behavior\n",
            "### Actual Behavior\n\nFirst failure when adding **batch**",
            "The failing node: `VAEDecode #8` raised `torch.OutOfMemoryError`.",
            "### Steps to Reproduce\n\nQueue the failing workflow `runs/s/01/workflow.json`",
            "| Step | Increment | Outcome | Stage | Peak VRAM |",
            "| 0 | minimal | passed | — | 2100 MiB |",
            "| 1 | batch | **failed** | decode | ≥ 6963 MiB (OOM message) |",
            "### Debug Logs\n\n<details>\n<summary>Traceback of step 1</summary>",
            "in decode",
            "### Other\n\nGPU: — · ComfyUI —. Found with comfy-bisect.",
        ] {
            let found = md[at..]
                .find(part)
                .unwrap_or_else(|| panic!("{part:?} missing or out of order in\n{md}"));
            at += found + part.len();
        }
        assert!(md::check(&md).is_empty(), "{md}");
    }

    #[test]
    fn custom_pack_nodes_are_a_table_or_said_to_be_all_core() {
        let w = failing(json!({"step": 1, "run_id": "r", "nodes": [
            {"node": {"id": "40", "class_type": "RIFE VFI"}, "title": "RIFE ×2",
             "pack": "ComfyUI-Frame-Interpolation"},
            {"node": {"id": "92:57", "class_type": "UnetLoaderGGUF", "subgraph": "subgraph 'Load' #92"},
             "pack": "ComfyUI-GGUF", "version": "1.2.0"}
        ]}));
        let md = markdown(&w, "s1", None, 2, &LEVELS[0]);
        assert!(md.contains("has 2 nodes from custom node packs"), "{md}");
        assert!(md.contains("`--disable-all-custom-nodes`"), "{md}");
        assert!(
            md.contains("| `RIFE VFI #40` | RIFE ×2 | ComfyUI-Frame-Interpolation | unknown |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `UnetLoaderGGUF #57 in subgraph 'Load' #92` | — | ComfyUI-GGUF | 1.2.0 |"
            ),
            "{md}"
        );
        let core = markdown(
            &failing(json!({"step": 1, "run_id": "r", "nodes": []})),
            "s1",
            None,
            2,
            &LEVELS[0],
        );
        assert!(
            core.contains("Every node of the failing workflow (step 1) is one of ComfyUI's own"),
            "{core}"
        );
    }

    #[test]
    fn no_failure_no_block() {
        let mut w = failing(serde_json::Value::Null);
        w.first_failure = None;
        w.bug_form = crate::report::bug_form::bug_form(&w, None);
        assert!(w.bug_form.is_none());
        assert_eq!(markdown(&w, "s1", None, 2, &LEVELS[0]), "");
    }
}
