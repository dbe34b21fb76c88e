//! The failing run's evidence in `report.md`: run, failing node, kind, stage and its evidence,
//! last progress, what happened, the kernel's verdict and host RAM, the exception (when the bug
//! form does not show it), the allocator numbers, the server console excerpt and the failing
//! node's inputs.

use super::budget::{self, trimmed_block, Limits};
use super::console;
use super::md::{code, details, heading, node, text, text_with_code};
use crate::report::model::{kind_phrase, Evidence, VerdictKind};

/// The heading of the failing run's evidence: the first failure, the failing minimal run, the
/// failing check, or the lowest failure so far when there is no verdict yet.
pub(crate) fn title(e: &Evidence, kind: VerdictKind) -> String {
    match kind {
        VerdictKind::Check => "Failing run (the workflow as given)".to_string(),
        VerdictKind::FirstFailure | VerdictKind::MinimalFails | VerdictKind::Flaky
            if e.step == 0 =>
        {
            "Failing minimal run".to_string()
        }
        VerdictKind::FirstFailure | VerdictKind::MinimalFails | VerdictKind::Flaky => format!(
            "First failing run (step {}, {})",
            e.step,
            text(&e.increment)
        ),
        _ => format!(
            "Lowest failing step so far (step {}, {}; no verdict yet)",
            e.step,
            text(&e.increment)
        ),
    }
}

/// The failing run's evidence under `title`; `traceback_above`: the bug-form block at the top shows its
/// traceback (under Debug Logs), so it is not repeated here.
pub(crate) fn section(
    e: &Evidence,
    level: usize,
    title: &str,
    traceback_above: bool,
    limits: &Limits,
) -> String {
    let mut out = heading(level, title);
    let mut lines = Vec::new();
    if let Some(id) = &e.run_id {
        lines.push(format!(
            "- Run: {} — outcome {}",
            code(id),
            text(&e.outcome)
        ));
    }
    // With the bug form above, its Actual Behavior names the failing node.
    if let Some(n) = e.node.as_ref().filter(|_| !traceback_above) {
        lines.push(format!("- Failing node: {}", node(n)));
    }
    if let Some(k) = &e.failure_kind {
        lines.push(format!(
            "- Kind: {} ({})",
            code(k.as_str()),
            text(&kind_phrase(*k))
        ));
    }
    if let Some(s) = &e.stage {
        let mut line = format!("- Stage: {}", code(s.as_str()));
        if let Some(c) = e
            .stage_confidence
            .filter(|c| *c != crate::vocab::StageConfidence::Unknown)
        {
            line.push_str(&format!(" (confidence: {})", text(c.as_str())));
        }
        if let Some(ev) = &e.stage_evidence {
            line.push_str(&format!(" — {}", text_with_code(ev)));
        }
        lines.push(line);
    }
    match &e.last_progress {
        Some(p) => lines.push(format!(
            "- Last progress seen: {} at {}/{}",
            node(&p.node),
            p.value,
            p.max
        )),
        None => lines.push(
            "- Last progress seen: none (no node reported progress before the failure)".into(),
        ),
    }
    if let Some(d) = &e.detail {
        lines.push(format!("- What happened: {}", text_with_code(d)));
    }
    match (&e.oom_kill, &e.kernel_log) {
        (Some(k), _) => lines.push(format!(
            "- Killed by the kernel's OOM killer: {}",
            text(&k.summary())
        )),
        (None, Some(note)) => lines.push(format!("- Kernel log: {}", text_with_code(note))),
        _ => {}
    }
    if let Some(h) = &e.host_ram {
        lines.push(format!("- Host RAM: {}", text(h)));
    }
    out.push_str(&lines.join("\n"));
    out.push_str("\n\n");
    // With the traceback above, its last lines are the exception and its whole message.
    let message_above = traceback_above && !e.traceback.is_empty();
    if let (Some(t), false) = (&e.exception_type, message_above) {
        out.push_str(&format!("Exception {}:\n\n", code(t)));
    }
    if let (Some(m), false) = (&e.exception_message, message_above) {
        let lines: Vec<&str> = m.trim_end().lines().collect();
        let t = budget::trim_middle(&lines, limits.message_lines, limits.line_chars);
        out.push_str(&trimmed_block(e, "message", "text", &t, limits.line_chars));
        out.push('\n');
    }
    // The allocator numbers are in report.json only (`first_failure.numbers`): their figures
    // are the exception message's, under Debug Logs. Only a reason not to trust them is said.
    if e.numbers_consistent == Some(false) {
        out.push_str(
            "The allocator numbers of the message are **inconsistent**: kept as printed, not \
             used to reason.\n\n",
        );
    }
    for note in &e.numbers_notes {
        out.push_str(&format!("- {}\n", text(note)));
    }
    if !e.numbers_notes.is_empty() {
        out.push('\n');
    }
    if !e.kernel_lines.is_empty() {
        let t = budget::trim_middle(&e.kernel_lines, limits.kernel_lines, limits.line_chars);
        let body = trimmed_block(e, "kernel log", "text", &t, limits.line_chars);
        out.push_str(&details(
            "Kernel log (OOM killer lines of the run's window)",
            &body,
        ));
        out.push('\n');
    }
    if !e.traceback.is_empty() {
        if traceback_above {
            out.push_str("The exception and its traceback are under **Debug Logs** above.\n\n");
        } else {
            out.push_str(&super::bug_form::traceback(e, limits));
            out.push('\n');
        }
    }
    out.push_str(&console::markdown(
        e,
        limits.console_lines,
        limits.line_chars,
    ));
    if !e.current_inputs.is_empty() {
        // One input a line (`"steps": [25],`): the pretty form takes three lines for each.
        let n = e.current_inputs.len();
        let mut lines: Vec<String> = vec!["{".to_string()];
        // A linked input prints as the repr of a Python object (a model, a tensor): its kind
        // is kept, its figures are in report.json.
        let shown = |v: &serde_json::Value| -> String {
            let one = match v {
                serde_json::Value::Array(a) if a.len() == 1 => &a[0],
                other => other,
            };
            match one.as_str() {
                Some(r) if r.contains(" object at 0x") || r.contains("tensor(") => {
                    let kind = if r.contains("tensor(") {
                        "tensor"
                    } else {
                        "object"
                    };
                    // ComfyUI's own note of a tensor's shape is a fact worth its line.
                    let shape = r
                        .rfind("# shape [")
                        .map(|at| format!(", {}", r[at + 2..].trim()))
                        .unwrap_or_default();
                    format!("[\"<{kind}{shape}>\"]")
                }
                _ => v.to_string(),
            }
        };
        lines.extend(e.current_inputs.iter().enumerate().map(|(i, (k, v))| {
            format!(
                "  {}: {}{}",
                serde_json::Value::from(k.as_str()),
                shown(v),
                if i + 1 < n { "," } else { "" }
            )
        }));
        lines.push("}".to_string());
        let t = budget::trim_middle(&lines, limits.inputs_lines, limits.line_chars);
        let body = trimmed_block(e, "inputs", "json", &t, limits.line_chars);
        let mut title = if e.inputs_restored.is_empty() {
            "Failing node's inputs (as ComfyUI printed them, trimmed)".to_string()
        } else {
            format!(
                "Failing node's inputs as the workflow has them: {}",
                e.inputs_restored.join(", ")
            )
        };
        if lines
            .iter()
            .any(|l| l.contains("[\"<object") || l.contains("[\"<tensor"))
        {
            title.push_str("; objects and tensors by kind, printed whole in report.json");
        }
        out.push_str(&details(&title, &body));
        out.push('\n');
    }
    out
}
