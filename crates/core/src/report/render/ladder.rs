//! The Ladder section of `report.md`: the full table (what changed, outcome, stage, peak VRAM
//! and RAM, s/step, duration), the note on how peaks are measured, the few-steps account of the
//! search and the steps whose product differs from what they asked for. The five-column ladder
//! of the bug form is `bug_form.rs`; the peak-memory chart, each step's product, the models it
//! loaded and the node times at the boundary are in report.json only (`json_only.rs`).

use super::md::{self, code, heading, short, text, text_with_code, Table, DASH};
use crate::report::model::{kind_phrase, LadderRow, VerdictKind, WorkflowReport};
use crate::units::mib_rounded as mib;
use crate::units::seconds as duration;

/// The Ladder section of `w`.
pub(crate) fn section(w: &WorkflowReport, level: usize) -> String {
    let mut out = heading(level, "Ladder");
    // Sized for an issue: the run ids, the failing node, the product, the models loaded, the
    // VRAM sample counts and the memory held before each run are in report.json (`ladder`),
    // not in these columns; the server's RSS and swap only when it swapped.
    let ram = w.ladder.iter().any(|r| r.peak_ram_mib.is_some());
    // The server's RSS and swap matter when it swapped (host memory ran short).
    let swap = w
        .ladder
        .iter()
        .any(|r| r.peak_swap_mib.is_some_and(|s| s > 0.0));
    // With the bug form above, its five-column ladder gives each step's stage.
    let stage = w.bug_form.is_none();
    let mut headers = vec!["Step", "Increment", "What changed", "Outcome"];
    if stage {
        headers.push("Stage");
    }
    headers.push("Peak VRAM");
    if ram {
        headers.push("Peak RAM");
    }
    if swap {
        headers.push("Server RSS");
        headers.push("Swap");
    }
    let timed = w.ladder.iter().any(|r| r.s_per_step.is_some());
    if timed {
        headers.push("s/step");
    }
    headers.push("Duration");
    let mut t = Table::new(&headers).right(0);
    // The figures, from Peak VRAM on, are right-aligned.
    let figures = headers.len() - usize::from(ram) - 2 * usize::from(swap) - usize::from(timed) - 2;
    for col in figures..headers.len() {
        t = t.right(col);
    }
    for r in &w.ladder {
        let mut cells = ladder_cells(r, w);
        if !stage {
            cells.remove(4);
        }
        let duration = cells.pop().unwrap_or_default();
        if ram {
            cells.push(r.peak_ram_mib.map(mib).unwrap_or_else(|| DASH.into()));
        }
        if swap {
            cells.push(r.peak_rss_mib.map(mib).unwrap_or_else(|| DASH.into()));
            cells.push(r.peak_swap_mib.map(mib).unwrap_or_else(|| DASH.into()));
        }
        if timed {
            cells.push(r.s_per_step.map(per_step).unwrap_or_else(|| DASH.into()));
        }
        cells.push(duration);
        t.row(cells);
    }
    out.push_str(&t.render());
    out.push('\n');
    out.push_str(&text(&w.vram.note));
    if let Some(note) = w.vram.ram_note.as_ref().filter(|_| ram) {
        // Its sentence on the server's RSS and swap goes with those columns.
        let note = if swap {
            note.as_str()
        } else {
            note.split(" Server RSS ").next().unwrap_or(note)
        };
        out.push(' ');
        out.push_str(&text(note));
    }
    out.push_str("\n\n");
    if let Some(few) = &w.search_steps {
        out.push_str(&format!(
            "**Few steps for the search.** {}\n\n",
            text_with_code(&few.summary)
        ));
    }
    out
}

/// Seconds per sampler step, two decimals under 10 s (`0.38 s`).
fn per_step(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else {
        duration(s)
    }
}

/// The steps whose product differs from what their variant asked for (warnings, not failures).
pub(crate) fn product_warnings(w: &WorkflowReport) -> String {
    let rows: Vec<&LadderRow> = w
        .ladder
        .iter()
        .filter(|r| !r.delivered.product_warnings.is_empty())
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "⚠ **Product differs from what the variant asked for** (a warning, not a failure):\n\n",
    );
    for r in rows {
        for m in &r.delivered.product_warnings {
            out.push_str(&format!(
                "- step {} ({}): {}\n",
                r.step,
                text(&r.increment),
                text(m)
            ));
        }
    }
    out.push('\n');
    out
}

fn ladder_cells(r: &LadderRow, w: &WorkflowReport) -> Vec<String> {
    let is_verdict_step = w.verdict.step == Some(r.step)
        && matches!(
            w.verdict.kind,
            VerdictKind::FirstFailure | VerdictKind::MinimalFails
        );
    let outcome = match &r.failure_kind {
        Some(k)
            if *k == crate::vocab::FailureKind::MemoryPressure
                && !r.delivered.memory_pressure.is_empty() =>
        {
            format!(
                "{} — {}",
                r.outcome.replace('_', " "),
                r.delivered.memory_pressure.join(", ")
            )
        }
        Some(k) => format!("{} ({})", r.outcome.replace('_', " "), kind_phrase(*k)),
        None if !r.delivered.memory_fallbacks.is_empty()
            || !r.delivered.memory_pressure.is_empty()
            || !r.delivered.slowdown_only.is_empty() =>
        {
            format!(
                "{} — {}",
                r.outcome.replace('_', " "),
                r.delivered
                    .memory_fallbacks
                    .iter()
                    .chain(&r.delivered.memory_pressure)
                    .chain(&r.delivered.slowdown_only)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        None => r.outcome.replace('_', " "),
    };
    let mut outcome = if is_verdict_step {
        md::bold(&outcome)
    } else {
        text(&outcome)
    };
    if let Some(few) = &r.reduced {
        outcome.push_str(&format!(
            "<br>at {} of {} steps (search)",
            few.steps, few.of
        ));
    }
    if let Some(c) = &r.crash_check {
        let reruns: Vec<String> = c.rerun_ids.iter().map(|id| code(&short(id))).collect();
        outcome.push_str("<br>");
        outcome.push_str(&match c.result.as_str() {
            "not_reproduced" => format!(
                "crash not reproduced: re-run {} passed, the step counts as passed",
                reruns.join(", ")
            ),
            "confirmed" => format!(
                "crash confirmed: reproduced {} times (re-runs {})",
                c.times,
                reruns.join(", ")
            ),
            _ => "crash not confirmed yet (re-run pending)".to_string(),
        });
    }
    let changes = if r.changes.is_empty() {
        if r.step == 0 {
            "minimal variant".to_string()
        } else {
            DASH.to_string()
        }
    } else if r.step == 0 {
        // The steps below undo these edits one part at a time, each saying what it brings back.
        format!(
            "the full workflow less {} edit{}, which the steps below undo (report.json lists them)",
            r.changes.len(),
            if r.changes.len() == 1 { "" } else { "s" }
        )
    } else {
        // Up to two edits a step (report.json lists all).
        const SHOWN: usize = 2;
        let mut lines: Vec<String> = r.changes.iter().take(SHOWN).map(|c| text(c)).collect();
        if r.changes.len() > SHOWN {
            lines.push(format!(
                "… and {} more (report.json lists all)",
                r.changes.len() - SHOWN
            ));
        }
        lines.join("<br>")
    };
    let mut peak = r.peak_vram_mib.map(mib).unwrap_or_else(|| DASH.into());
    if let (Some(needed), Some(_)) = (r.oom_needed_mib, &r.oom_needed_from) {
        let sampled = if peak == DASH {
            String::new()
        } else {
            format!("<br>sampled: {peak}")
        };
        // How the figure was read (`in use + requested`) is in report.json.
        peak = format!("**≥ {} needed** (OOM message){sampled}", mib(needed));
    }
    let increment = match (&r.increment_kind, r.step) {
        (Some(k), s) if s > 0 && k != &r.increment => {
            format!("{} ({})", text(&r.increment), text(k))
        }
        _ => text(&r.increment),
    };
    vec![
        r.step.to_string(),
        increment,
        changes,
        outcome,
        r.stage
            .map(|s| s.as_str())
            .map(text)
            .unwrap_or_else(|| DASH.into()),
        peak,
        r.duration_s.map(duration).unwrap_or_else(|| DASH.into()),
    ]
}
