//! How `report.md` shows the per-step memory evidence of [`report::memory`](crate::report::memory):
//! a short cell in the ladder table and the details in a list below the table.

use super::md::{code, text};
use crate::report::model::{LadderRow, ModelLoadRow};
use crate::units::mib_rounded as mib;

/// Whether the ladder has anything for the "Models loaded" column.
pub(crate) fn any(ladder: &[LadderRow]) -> bool {
    ladder
        .iter()
        .any(|r| !r.models.is_empty() || !r.memory_events.is_empty())
}

/// The short ladder cell: how many loads and their MiB, and the partial loads with what they
/// offloaded (`3 · 3675 MiB<br>1 partial, 3390 MiB offloaded`); `—` for a run without loads.
pub(crate) fn markdown_cell(r: &LadderRow) -> String {
    if r.models.is_empty() {
        return if r.memory_events.is_empty() {
            "—".into()
        } else {
            "none".into()
        };
    }
    let total: f64 = r.models.iter().map(|m| m.loaded_mib).sum();
    let mut cell = format!("{} · {}", r.models.len(), mib(total));
    let partial: Vec<&ModelLoadRow> = r.models.iter().filter(|m| !m.full).collect();
    if !partial.is_empty() {
        cell.push_str(&format!("<br>{} partial", partial.len()));
        let off: f64 = partial.iter().filter_map(|m| m.offloaded_mib).sum();
        if partial.iter().any(|m| m.offloaded_mib.is_some()) {
            cell.push_str(&format!(", {} offloaded", mib(off)));
        }
    }
    cell
}

/// One model load in words: `` `BaseModel` 1639 MiB `` or
/// `` `WAN21` 9178 MiB partial (3390 MiB offloaded, lowvram patches: 0) ``. The class comes
/// from the server, so it is a code span (GitHub links nothing there).
fn load_text(m: &ModelLoadRow) -> String {
    let name = m
        .class
        .as_deref()
        .map(code)
        .unwrap_or_else(|| "model".into());
    let mut s = format!("{name} {}", mib(m.loaded_mib));
    if !m.full {
        let mut extra = Vec::new();
        if let Some(off) = m.offloaded_mib {
            extra.push(format!("{} offloaded", mib(off)));
        }
        if let Some(p) = m.lowvram_patches {
            extra.push(format!("lowvram patches: {p}"));
        }
        s.push_str(" **partial**");
        if !extra.is_empty() {
            s.push_str(&format!(" ({})", extra.join(", ")));
        }
    }
    s
}

/// The list under the ladder table: per run step, every model load, the fallbacks and the other
/// memory events. Empty when no step has any.
pub(crate) fn markdown_details(ladder: &[LadderRow]) -> String {
    let mut out = String::new();
    let mut previous: Option<(usize, Vec<String>)> = None;
    for r in ladder {
        if r.models.is_empty()
            && r.memory_events.is_empty()
            && r.delivered.memory_fallbacks.is_empty()
        {
            continue;
        }
        let mut parts = Vec::new();
        if r.models.is_empty() {
            parts.push("no model loaded".to_string());
        } else {
            parts.push(
                r.models
                    .iter()
                    .map(load_text)
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        parts.extend(
            r.delivered
                .memory_fallbacks
                .iter()
                .map(|f| format!("**{}**", text(f))),
        );
        parts.extend(r.memory_events.iter().map(|e| text(e)));
        // A step that loaded what the step before it did says so in two words.
        let line = match &previous {
            Some((step, p)) if *p == parts => format!("as step {step}"),
            _ => parts.join("; "),
        };
        out.push_str(&format!(
            "- Step {} ({}): {line}\n",
            r.step,
            text(&r.increment),
        ));
        if !line.starts_with("as step ") {
            previous = Some((r.step, parts));
        }
    }
    if out.is_empty() {
        return out;
    }
    format!(
        "Models loaded per step, from the server console (ComfyUI prints MB; it means MiB):\n\n{out}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::ProductSummary;

    fn load(class: &str, full: bool, mib: f64, off: Option<f64>) -> ModelLoadRow {
        ModelLoadRow {
            class: Some(class.into()),
            full,
            loaded_mib: mib,
            offloaded_mib: off,
            lowvram_patches: (!full).then_some(0),
        }
    }

    fn row(models: Vec<ModelLoadRow>, events: &[&str], fallbacks: &[&str]) -> LadderRow {
        LadderRow {
            step: 4,
            increment: "LoRA @alice".into(),
            run_id: Some("r".into()),
            outcome: "failed".into(),
            delivered: ProductSummary {
                memory_fallbacks: fallbacks.iter().map(|f| f.to_string()).collect(),
                ..ProductSummary::default()
            },
            models,
            memory_events: events.iter().map(|e| e.to_string()).collect(),
            ..LadderRow::default()
        }
    }

    #[test]
    fn the_cell_is_short_and_the_list_has_the_details() {
        let r = row(
            vec![
                load("SD1ClipModel", true, 235.84, None),
                load("WAN21", false, 9177.97, Some(3390.29)),
            ],
            &["ComfyUI ran out of memory and unloaded all models"],
            &["tiled VAE decode fallback"],
        );
        assert!(any(std::slice::from_ref(&r)));
        assert_eq!(
            markdown_cell(&r),
            "2 · 9414 MiB<br>1 partial, 3390 MiB offloaded"
        );
        let list = markdown_details(std::slice::from_ref(&r));
        assert!(list.contains(
            "- Step 4 (LoRA `@alice`): `SD1ClipModel` 236 MiB, `WAN21` 9178 MiB **partial** (3390 MiB offloaded, lowvram patches: 0); **tiled VAE decode fallback**; ComfyUI ran out of memory and unloaded all models\n"
        ), "{list}");
        let none = row(Vec::new(), &[], &[]);
        assert!(!any(std::slice::from_ref(&none)));
        assert_eq!(markdown_cell(&none), "—");
        assert_eq!(markdown_details(&[none]), "");
    }
}
