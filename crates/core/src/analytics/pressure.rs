//! Memory pressure on a passed run: the evidence that a run completed while its weights
//! streamed or were offloaded, measured and named like an OOM. Three kinds count (issue #23):
//! a partial load with offloaded MB of a model the previous passing step loaded whole (on a
//! small card every step may load partially; the step where it starts is the one to name), a
//! slowdown against the previous passing step beyond what
//! the added work can cost, and steps that get slower within the run. A staging line alone
//! (`… prepared for dynamic VRAM loading. N MB Staged.`) does not: a 2026 server stages every
//! model. Pure: it reads a finished record, its workflow and the journal's earlier summaries.
//!
//! Time alone is never a verdict (issue #39): a busy machine, a browser or a game on the card
//! slow steps as much as streaming weights do. A slowdown counts only beside a memory sign of
//! the same run (`memory_signs`: a partial load, weights staged beyond the card, the VRAM
//! peak at the card's total, a memory fallback, ComfyUI's OOM unload, host-RAM pressure);
//! without one, `confirm` keeps it apart as a slowdown "from time alone", shown with this
//! machine's load and the card's memory outside PyTorch, and it decides nothing.

use crate::comfy::MemoryEvent;
use crate::run::RunRecord;
use crate::workflow::{Input, Workflow};
use serde::{Deserialize, Serialize};

/// The default `--max-slowdown`: a step may take this many times what the added work
/// explains before the slowdown counts as memory pressure (docs/sessions.md says why).
pub(crate) const DEFAULT_MAX_SLOWDOWN: f64 = 1.5;

/// How close to the card's total a run's VRAM peak must come to be a memory sign, MiB.
/// ComfyUI keeps `minimum_inference_memory()` free when it places weights: 0.8 GiB plus
/// `EXTRA_RESERVED_VRAM` (0.4 GiB on Linux, 0.6–0.7 GiB on Windows;
/// `comfy/model_management.py`), and dynamic VRAM fills the rest of the card with weights
/// before it streams; so a run whose weights filled the card peaks within about 1.2–1.5 GiB of
/// the total, the sampler's activations on top.
pub const VRAM_LIMIT_MARGIN_MIB: f64 = 1536.0;

/// Seconds per step below which a step is too short to compare: the frames' millisecond
/// clock and scheduling noise would decide the ratio.
pub(crate) const MIN_TIMED_STEP_S: f64 = 0.02;

/// The work of one sampler step, in the units of the conservative bound (issue #23: the
/// tokens): pixels × latent frames × batch as the ladder measures it (`ladder::work`: the
/// catalog's size and frame sources and their temporal compression), doubled when a sampler uses CFG (`cfg` above 1 runs the batch twice); `None` when
/// the graph has no size (it comes from an input image).
pub fn work_of(workflow: &Workflow) -> Option<f64> {
    let work = super::cost::work_of(workflow);
    if work.pixels == 0 {
        return None;
    }
    let cfg = workflow.nodes.values().any(|n| {
        matches!(n.inputs.get("cfg"), Some(Input::Literal(v)) if v.as_f64().is_some_and(|c| c > 1.0))
    });
    Some(if cfg { 2.0 } else { 1.0 } * work.units())
}

/// The previous passing step of the ladder, as the journal has it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Baseline {
    /// Its ladder step.
    pub step: usize,
    /// Its seconds per step (0 when not timed: nothing is compared).
    pub s_per_step: f64,
    /// Its work ([`work_of`]), when the graph says.
    pub work: Option<f64>,
    /// The model classes its console said were loaded completely.
    pub full_loads: Vec<String>,
}

impl Baseline {
    /// The baseline of a passing run at `step`: its seconds per step, work and memory events.
    pub(crate) fn of(
        step: usize,
        s_per_step: Option<f64>,
        work: Option<f64>,
        events: &[MemoryEvent],
    ) -> Baseline {
        Baseline {
            step,
            s_per_step: s_per_step.unwrap_or(0.0),
            work,
            full_loads: events
                .iter()
                .filter_map(|e| match e {
                    MemoryEvent::ModelLoad {
                        class: Some(c),
                        figures,
                        ..
                    } if figures.full => Some(c.clone()),
                    _ => None,
                })
                .collect(),
        }
    }
}

/// One piece of evidence, with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// A model loaded partially, the rest offloaded (`loaded partially … offloaded`).
    PartialLoad {
        /// The model class, when the console named it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<String>,
        /// MB offloaded.
        offloaded_mb: f64,
    },
    /// Seconds per step against the previous passing step, beyond what the work explains.
    Slowdown {
        /// The previous passing step.
        previous_step: usize,
        /// Its seconds per step.
        previous_s_per_step: f64,
        /// This run's seconds per step.
        s_per_step: f64,
        /// `s_per_step / previous_s_per_step`.
        slowdown: f64,
        /// The most the added work can cost: (work ratio)², attention being at most
        /// quadratic in tokens; at least 1.
        work_bound: f64,
    },
    /// A sampler whose last third of steps took longer than its first third.
    SlowingInRun {
        /// The sampler node.
        node: String,
        /// Mean of the last third over the mean of the first third.
        slowing: f64,
    },
}

impl Evidence {
    /// A reading of time alone (a slowdown), which a busy machine gives as well as memory.
    pub(crate) fn is_timing(&self) -> bool {
        !matches!(self, Evidence::PartialLoad { .. })
    }

    /// In words, with the numbers.
    pub(crate) fn describe(&self) -> String {
        match self {
            Evidence::PartialLoad {
                class,
                offloaded_mb,
            } => format!(
                "{} loaded partially ({offloaded_mb:.0} MB offloaded)",
                class.as_deref().unwrap_or("model")
            ),
            Evidence::Slowdown {
                previous_step,
                previous_s_per_step,
                s_per_step,
                slowdown,
                work_bound,
            } => format!(
                "slowed {slowdown:.1}× ({s_per_step:.2} s/step vs {previous_s_per_step:.2} at step {previous_step}; the added work explains ≤ {work_bound:.1}×)"
            ),
            Evidence::SlowingInRun { node, slowing } => {
                format!("steps slowed {slowing:.1}× within the run (node {node})")
            }
        }
    }
}

/// What `run.json` keeps of a run's memory pressure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPressure {
    /// The evidence that fired (never empty).
    pub evidence: Vec<Evidence>,
    /// MB staged for dynamic VRAM loading over the run's models (context, not evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged_mb: Option<u64>,
    /// The `--max-slowdown` factor the evidence was judged with.
    pub max_slowdown: f64,
    /// The memory signs of the run that confirm a slowdown (`memory_signs`); empty when the
    /// evidence is a partial load (itself a memory sign), or in a record made before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signs: Vec<String>,
}

impl MemoryPressure {
    /// Where the evidence was seen: the steps after the first for a slowdown (`sample_middle`),
    /// the load for a partial load alone.
    pub(crate) fn stage(&self) -> crate::vocab::Stage {
        if self
            .evidence
            .iter()
            .all(|e| matches!(e, Evidence::PartialLoad { .. }))
        {
            crate::vocab::Stage::Load
        } else {
            crate::vocab::Stage::SampleMiddle
        }
    }

    /// In words for the journal and the ladder cell: the evidence, then what streamed.
    pub(crate) fn words(&self) -> Vec<String> {
        let mut out: Vec<String> = self.evidence.iter().map(Evidence::describe).collect();
        if let Some(mb) = self.staged_mb {
            out.push(format!("weights streamed ({mb} MB staged)"));
        }
        out.extend(self.signs.iter().map(|s| format!("memory sign: {s}")));
        out
    }
}

/// The card's VRAM over a run as its summary has it, MiB: (total, peak).
pub(crate) type CardUse = (Option<f64>, Option<f64>);

/// The memory signs of a passed run (issue #39), in words: what says memory ran short beside
/// a slowdown — a partial load, weights staged beyond the card (a 2026 server stages every
/// model, so staging alone is none), the VRAM peak within [`VRAM_LIMIT_MARGIN_MIB`] of the
/// card's total, a memory fallback, ComfyUI's OOM unload, host-RAM pressure.
pub(crate) fn memory_signs(record: &RunRecord, (total, peak): CardUse) -> Vec<String> {
    let mut out = Vec::new();
    let total = total.filter(|t| *t > 0.0);
    let mut staged = 0u64;
    for e in &record.memory_events {
        match e {
            MemoryEvent::ModelLoad { class, figures, .. } if !figures.full => {
                let off = figures
                    .offloaded_mb
                    .map(|o| format!(", {o:.0} MB offloaded"))
                    .unwrap_or_default();
                out.push(format!(
                    "{} loaded partially ({:.0} MB loaded{off})",
                    class.as_deref().unwrap_or("a model"),
                    figures.loaded_mb
                ));
            }
            MemoryEvent::Staged { mb, .. } => staged += mb,
            MemoryEvent::OomUnload { .. } => {
                out.push("ComfyUI caught an out-of-memory error and unloaded every model".into())
            }
            _ => {}
        }
    }
    if let Some(total) = total.filter(|t| staged as f64 >= *t) {
        out.push(format!(
            "{staged} MB staged for dynamic VRAM loading, beyond the card's {total:.0} MiB"
        ));
    }
    if let (Some(peak), Some(total)) = (peak, total) {
        if peak >= total - VRAM_LIMIT_MARGIN_MIB {
            out.push(format!(
                "VRAM peak {peak:.0} MiB within {VRAM_LIMIT_MARGIN_MIB:.0} MiB of the card's {total:.0} MiB"
            ));
        }
    }
    out.extend(record.memory_fallbacks.iter().cloned());
    out.extend(record.host.pressure());
    out
}

/// A run's memory pressure once confirmed (issue #39): the pressure that stands, and the
/// slowdown readings set aside because no memory sign came with them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Confirmed {
    /// The memory pressure that counts.
    pub pressure: Option<MemoryPressure>,
    /// Slowdowns from time alone: shown, never a verdict.
    pub time_only: Vec<Evidence>,
}

/// Confirms what [`assess`] found with the run's memory `signs`: a partial load stands alone;
/// a slowdown stands only beside a sign (kept in [`MemoryPressure::signs`]); a slowdown with
/// no sign is set aside in [`Confirmed::time_only`].
pub(crate) fn confirm(assessed: Option<MemoryPressure>, signs: Vec<String>) -> Confirmed {
    let Some(mut p) = assessed else {
        return Confirmed::default();
    };
    let memory = p.evidence.iter().any(|e| !e.is_timing());
    if memory {
        return Confirmed {
            pressure: Some(p),
            time_only: Vec::new(),
        };
    }
    if signs.is_empty() {
        return Confirmed {
            pressure: None,
            time_only: p.evidence,
        };
    }
    p.signs = signs;
    Confirmed {
        pressure: Some(p),
        time_only: Vec::new(),
    }
}

/// A slowdown from time alone in words for the run's summary: each reading, that it is not
/// counted and why, and what else was using the machine (`context`: this machine's load, the
/// card's memory outside PyTorch).
pub(crate) fn time_only_words(time_only: &[Evidence], context: &[String]) -> Vec<String> {
    if time_only.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = time_only.iter().map(Evidence::describe).collect();
    out.push(
        "time alone, not counted as memory pressure (no partial load, staging beyond the card, \
         VRAM at the card's total, fallback or host-RAM pressure)"
            .to_string(),
    );
    out.extend(context.iter().cloned());
    out
}

/// The memory pressure of a passed run, judged with `max_slowdown` against `baseline`; `None`
/// when no evidence fired (or the run did not pass).
pub(crate) fn assess(
    record: &RunRecord,
    work: Option<f64>,
    baseline: Option<&Baseline>,
    max_slowdown: f64,
) -> Option<MemoryPressure> {
    if record.outcome != crate::vocab::OutcomeKind::Passed {
        return None;
    }
    let mut evidence = Vec::new();
    let mut class = None;
    let mut staged: Option<u64> = None;
    for e in &record.memory_events {
        match e {
            MemoryEvent::ModelLoad {
                class: c, figures, ..
            } => {
                let was_whole =
                    baseline.is_some_and(|b| c.as_ref().is_some_and(|c| b.full_loads.contains(c)));
                if let Some(off) = figures
                    .offloaded_mb
                    .filter(|o| !figures.full && *o > 0.0 && was_whole)
                {
                    evidence.push(Evidence::PartialLoad {
                        class: c.clone(),
                        offloaded_mb: off,
                    });
                }
            }
            MemoryEvent::Staged { class: c, mb, .. } => {
                class.get_or_insert(c.clone());
                *staged.get_or_insert(0) += mb;
            }
            _ => {}
        }
    }
    let s_per_step = crate::run::timing::run_s_per_step(&record.step_timing);
    if let (Some(now), Some(work), Some(b)) = (s_per_step, work, baseline) {
        let base_work = b.work.filter(|w| *w > 0.0);
        if let (true, Some(base_work)) = (b.s_per_step >= MIN_TIMED_STEP_S, base_work) {
            let work_bound = (work / base_work).powi(2).max(1.0);
            let slowdown = now / b.s_per_step;
            if slowdown > work_bound * max_slowdown {
                evidence.push(Evidence::Slowdown {
                    previous_step: b.step,
                    previous_s_per_step: b.s_per_step,
                    s_per_step: now,
                    slowdown,
                    work_bound,
                });
            }
        }
    }
    for t in &record.step_timing {
        if t.s_per_step.is_none_or(|s| s < MIN_TIMED_STEP_S) {
            continue;
        }
        if let Some(slowing) = t.slowing.filter(|s| *s > max_slowdown) {
            evidence.push(Evidence::SlowingInRun {
                node: t.node.clone(),
                slowing,
            });
        }
    }
    (!evidence.is_empty()).then_some(MemoryPressure {
        evidence,
        staged_mb: staged,
        max_slowdown,
        signs: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{partial_load, passed_with, staged};
    use super::*;
    use crate::comfy::console::LoadFigures;
    use crate::run::timing::SamplerTiming;
    use serde_json::json;

    fn graph(v: serde_json::Value) -> Workflow {
        Workflow::from_json_str(&v.to_string(), "w.json").unwrap()
    }

    fn wan(width: u32, height: u32, length: u32, cfg: f64) -> Workflow {
        graph(json!({
            "1": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {
                "width": width, "height": height, "length": length, "batch_size": 1}},
            "2": {"class_type": "KSampler", "inputs": {"cfg": cfg, "latent_image": ["1", 0]}},
        }))
    }

    fn passed(s_per_step: u64, slowing: Option<f64>, events: Vec<MemoryEvent>) -> RunRecord {
        let mut r = passed_with(&wan(64, 32, 5, 1.0), events);
        r.step_timing = vec![SamplerTiming {
            node: "2".into(),
            steps: 10,
            reached: 10,
            first_step_ms: None,
            step_ms: vec![s_per_step; 9],
            s_per_step: Some(s_per_step as f64 / 1000.0),
            slowing,
            start_ms: None,
            end_ms: None,
        }];
        r
    }

    #[test]
    fn work_is_pixels_latent_frames_batch_and_cfg_doubles_it() {
        // 5 frames of a HunyuanVideo latent are ((5 - 1) // 4) + 1 = 2 latent frames; 81 are 21.
        assert_eq!(work_of(&wan(64, 32, 5, 1.0)), Some(64.0 * 32.0 * 2.0));
        assert_eq!(work_of(&wan(64, 32, 5, 3.5)), Some(2.0 * 64.0 * 32.0 * 2.0));
        assert_eq!(work_of(&wan(64, 32, 81, 1.0)), Some(64.0 * 32.0 * 21.0));
        let no_size = graph(json!({
            "1": {"class_type": "LoadImage", "inputs": {"image": "a.png"}}}));
        assert_eq!(work_of(&no_size), None);
    }

    #[test]
    fn staging_alone_is_not_pressure() {
        let base = Baseline::of(1, Some(1.0), Some(100.0), &[]);
        let r = passed(1000, Some(1.0), vec![staged(13650)]);
        assert_eq!(assess(&r, Some(100.0), Some(&base), 1.5), None);
    }

    #[test]
    fn a_slowdown_counts_only_beyond_the_quadratic_bound_times_the_factor() {
        let base = Baseline::of(1, Some(1.0), Some(100.0), &[]);
        // Twice the work may cost 4×: 5.9 s/step is within 4 × 1.5.
        let r = passed(5900, None, vec![staged(13650)]);
        assert_eq!(assess(&r, Some(200.0), Some(&base), 1.5), None);
        // 6.5 s/step is not.
        let r = passed(6500, None, vec![staged(13650)]);
        let p = assess(&r, Some(200.0), Some(&base), 1.5).expect("pressure");
        assert_eq!(
            p.evidence,
            [Evidence::Slowdown {
                previous_step: 1,
                previous_s_per_step: 1.0,
                s_per_step: 6.5,
                slowdown: 6.5,
                work_bound: 4.0,
            }]
        );
        assert_eq!(p.staged_mb, Some(13650));
        assert_eq!(
            p.words(),
            [
                "slowed 6.5× (6.50 s/step vs 1.00 at step 1; the added work explains ≤ 4.0×)",
                "weights streamed (13650 MB staged)"
            ]
        );
        // Less work than the baseline never lowers the bound below 1.
        let r = passed(1400, None, vec![]);
        assert_eq!(assess(&r, Some(50.0), Some(&base), 1.5), None);
        // A baseline too short to time compares nothing.
        let short = Baseline::of(1, Some(0.008), Some(100.0), &[]);
        assert_eq!(assess(&r, Some(100.0), Some(&short), 1.5), None);
        // Without a baseline or a work figure nothing is compared.
        assert_eq!(assess(&r, None, Some(&base), 1.0), None);
        assert_eq!(assess(&r, Some(100.0), None, 1.0), None);
    }

    #[test]
    fn a_partial_load_and_slowing_steps_count_within_one_run() {
        let partial = partial_load(Some(3390.29));
        let whole = MemoryEvent::ModelLoad {
            t: None,
            class: Some("WAN21".into()),
            figures: LoadFigures {
                full: true,
                usable_mb: Some(20000.0),
                loaded_mb: 12568.0,
                offloaded_mb: None,
                lowvram_patches: None,
            },
        };
        let r = passed(1000, Some(2.0), vec![partial.clone()]);
        // The previous passing step loaded the model whole: the partial load is where the
        // offloading starts.
        let base = Baseline::of(1, None, None, &[whole]);
        let p = assess(&r, None, Some(&base), 1.5).expect("pressure");
        assert_eq!(
            p.words(),
            [
                "WAN21 loaded partially (3390 MB offloaded)",
                "steps slowed 2.0× within the run (node 2)"
            ]
        );
        // Partial at the previous step too (a small card), or no previous step: not named here.
        let r = passed(1000, None, vec![partial.clone()]);
        let base = Baseline::of(1, None, None, std::slice::from_ref(&partial));
        assert_eq!(assess(&r, None, Some(&base), 1.5), None);
        assert_eq!(assess(&r, None, None, 1.5), None);
        // A failed run carries no pressure: its failure is the evidence.
        let mut failed = passed(1000, Some(2.0), vec![]);
        failed.outcome = crate::vocab::OutcomeKind::Failed;
        assert_eq!(assess(&failed, None, None, 1.5), None);
    }
    #[test]
    fn a_slowdown_counts_only_beside_a_memory_sign() {
        // Issue #39: a busy machine slows steps as streaming does.
        let r = passed(1000, Some(2.0), vec![]);
        let p = assess(&r, None, None, 1.5).expect("a slowing reading");
        assert_eq!(
            memory_signs(&r, (Some(24576.0), Some(8000.0))),
            Vec::<String>::new()
        );
        let c = confirm(Some(p.clone()), vec![]);
        assert_eq!(c.pressure, None);
        assert_eq!(c.time_only, p.evidence);
        let words = time_only_words(&c.time_only, &["this machine's load 3.10 → 4.20".into()]);
        assert_eq!(words[0], "steps slowed 2.0× within the run (node 2)");
        assert!(words[1].starts_with("time alone, not counted"), "{words:?}");
        assert_eq!(words[2], "this machine's load 3.10 → 4.20");
        // The VRAM peak at the card's total is a sign: the slowdown stands, the sign said.
        let signs = memory_signs(&r, (Some(24576.0), Some(24000.0)));
        assert_eq!(
            signs,
            ["VRAM peak 24000 MiB within 1536 MiB of the card's 24576 MiB"]
        );
        let c = confirm(Some(p.clone()), signs);
        let stands = c.pressure.expect("confirmed");
        assert_eq!(
            stands.words().last().unwrap(),
            "memory sign: VRAM peak 24000 MiB within 1536 MiB of the card's 24576 MiB"
        );
        assert!(c.time_only.is_empty());
        // Staging is a sign only beyond the card (a 2026 server stages every model); a
        // fallback is one.
        let r = passed(1000, Some(2.0), vec![staged(13650)]);
        assert!(memory_signs(&r, (Some(24576.0), None)).is_empty());
        assert_eq!(memory_signs(&r, (Some(12288.0), None)).len(), 1);
        let mut r = passed(1000, Some(2.0), vec![]);
        r.memory_fallbacks = vec!["tiled VAE decode fallback".into()];
        assert_eq!(
            memory_signs(&r, (None, None)),
            ["tiled VAE decode fallback"]
        );
        // A partial load is memory evidence itself: it needs no other sign.
        let partial = MemoryPressure {
            evidence: vec![Evidence::PartialLoad {
                class: None,
                offloaded_mb: 100.0,
            }],
            staged_mb: None,
            max_slowdown: 1.5,
            signs: vec![],
        };
        assert_eq!(
            confirm(Some(partial.clone()), vec![]).pressure,
            Some(partial)
        );
    }
}
