//! The Ladder section of `report.md`: the full table (what changed, outcome, stage, peak VRAM
//! and RAM, product, models loaded, s/step, duration), the note on how peaks are measured, the
//! few-steps account of the search and the product warnings. The five-column ladder of the bug
//! form is `bug_form.rs`.

use super::md::{self, code, heading, short, text, text_with_code, Table, DASH};
use super::memory;
use crate::report::model::{kind_phrase, LadderRow, NodeTimes, VerdictKind, WorkflowReport};
use crate::units::mib_rounded as mib;
use crate::units::seconds as duration;

/// The Ladder section of `w`.
pub(crate) fn section(w: &WorkflowReport, level: usize) -> String {
    let mut out = heading(level, "Ladder");
    // Sized for an issue: the run ids, the failing node, the VRAM sample counts and the memory
    // held before each run are in report.json (`ladder`), not in these columns; the server's
    // RSS and swap only when it swapped.
    let ram = w.ladder.iter().any(|r| r.peak_ram_mib.is_some());
    // The server's RSS and swap matter when it swapped (host memory ran short).
    let swap = w
        .ladder
        .iter()
        .any(|r| r.peak_swap_mib.is_some_and(|s| s > 0.0));
    let mut headers = vec![
        "Step",
        "Increment",
        "What changed",
        "Outcome",
        "Stage",
        "Peak VRAM",
    ];
    if ram {
        headers.push("Peak RAM");
    }
    if swap {
        headers.push("Server RSS");
        headers.push("Swap");
    }
    let product = w.ladder.iter().any(|r| r.delivered.product.is_some());
    if product {
        headers.push("Product");
    }
    let models = memory::any(&w.ladder);
    if models {
        headers.push("Models loaded");
    }
    let timed = w.ladder.iter().any(|r| r.s_per_step.is_some());
    if timed {
        headers.push("s/step");
    }
    headers.push("Duration");
    let mut t = Table::new(&headers).right(0);
    for (col, name) in headers.iter().enumerate().skip(5) {
        if *name != "Product" {
            t = t.right(col);
        }
    }
    for r in &w.ladder {
        let mut cells = ladder_cells(r, w);
        let duration = cells.pop().unwrap_or_default();
        if ram {
            cells.push(r.peak_ram_mib.map(mib).unwrap_or_else(|| DASH.into()));
        }
        if swap {
            cells.push(r.peak_rss_mib.map(mib).unwrap_or_else(|| DASH.into()));
            cells.push(r.peak_swap_mib.map(mib).unwrap_or_else(|| DASH.into()));
        }
        if product {
            cells.push(product_cell(r));
        }
        if models {
            cells.push(memory::markdown_cell(r));
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
    out.push_str(&memory::markdown_details(&w.ladder));
    if let Some((chart, caption)) = super::chart::ladder_chart(w) {
        out.push_str(&chart);
        out.push_str(&format!("\n{caption}\n\n"));
    }
    if let Some(t) = &w.node_times {
        out.push_str(&node_times(t, level + 1));
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

/// Each node's time in the boundary runs, one column per run.
fn node_times(t: &NodeTimes, level: usize) -> String {
    let mut out = heading(level, "Node times at the boundary");
    out.push_str(
        "Seconds from each node's start to its end (the `executing` messages of the run; — : cached, not run or not finished).\n\n",
    );
    let titles: Vec<String> = t
        .runs
        .iter()
        .map(|r| format!("Step {} {} ({})", r.step, r.increment, r.role))
        .collect();
    let mut headers: Vec<&str> = vec!["Node"];
    headers.extend(titles.iter().map(String::as_str));
    let mut table = Table::new(&headers);
    for col in 1..headers.len() {
        table = table.right(col);
    }
    // Nodes that took under 0.05 s in every run are counted, not listed (report.json has them).
    const QUICK_S: f64 = 0.05;
    let quick = |r: &&crate::report::model::NodeTimeRow| {
        r.seconds.iter().all(|s| s.is_some_and(|s| s < QUICK_S))
    };
    let quick_rows = t.rows.iter().filter(quick).count();
    for r in t.rows.iter().filter(|r| !quick(r)) {
        let name = match &r.class_type {
            Some(c) => format!("{} `#{}`", text(c), text(&r.node)),
            None => format!("`#{}`", text(&r.node)),
        };
        let mut cells = vec![name];
        cells.extend(
            r.seconds
                .iter()
                .map(|s| s.map(per_step).unwrap_or_else(|| DASH.into())),
        );
        table.row(cells);
    }
    let mut cells = vec!["s/step (sampler)".to_string()];
    cells.extend(
        t.runs
            .iter()
            .map(|r| r.s_per_step.map(per_step).unwrap_or_else(|| DASH.into())),
    );
    table.row(cells);
    out.push_str(&table.render());
    if quick_rows > 0 {
        out.push_str(&format!(
            "\n{quick_rows} other node{} took under {QUICK_S} s in each run (report.json has every time).",
            if quick_rows == 1 { "" } else { "s" }
        ));
    }
    out.push_str("\n\n");
    out
}

/// The ladder's product cell: what the output nodes wrote, with a warning sign when it differs
/// from what the variant asked for.
fn product_cell(r: &LadderRow) -> String {
    let line = r
        .delivered
        .product
        .as_deref()
        .map(text)
        .unwrap_or_else(|| DASH.into());
    if r.delivered.product_warnings.is_empty() {
        line
    } else {
        format!("{line} ⚠")
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
    } else {
        // Up to three edits a step (report.json lists all).
        const SHOWN: usize = 3;
        let mut lines: Vec<String> = r.changes.iter().take(SHOWN).map(|c| text(c)).collect();
        if r.changes.len() > SHOWN {
            lines.push(format!(
                "… and {} more (report.json lists all)",
                r.changes.len() - SHOWN
            ));
        }
        if r.step == 0 {
            lines.insert(0, "reduced from the full workflow:".to_string());
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
