//! Whether a passing target is worth walking (`--walk-on-pass`): the cues on the target's run
//! that its pass may hide memory pressure. The target is compared only with the minimal
//! variant, whose work is far smaller, so the conservative slowdown bound of [`super::pressure`]
//! hides streaming there; a cue makes the session walk the ladder from step 1, one step at a
//! time, where each step is judged against the previous passing one. A cue costs runs, it is
//! never evidence: the verdict still needs `super::pressure::assess` to fire at a step.
//! Pure: it reads a finished record and the VRAM its summary recorded; the option that turns
//! the cues into a walk (`--walk-on-pass`) is the decision's (`session::decide`).

use super::pressure::MemoryPressure;
use crate::comfy::MemoryEvent;
use crate::run::RunRecord;
use serde::{Deserialize, Serialize};

/// How close to the card's total the run's VRAM peak must come to be a cue, MiB (the margin of
/// a memory sign, [`super::pressure::VRAM_LIMIT_MARGIN_MIB`], says why).
pub use super::pressure::VRAM_LIMIT_MARGIN_MIB;

/// One cue that a passing target may hide memory pressure, with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cue {
    /// The target already carries memory pressure evidence against the minimal variant.
    MemoryPressure {
        /// The evidence, in words.
        evidence: Vec<String>,
    },
    /// A model loaded partially (`loaded partially …`), even if the minimal one did too.
    PartialLoad {
        /// The model class, when the console named it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<String>,
        /// MB placed on the device.
        loaded_mb: f64,
        /// MB offloaded, when printed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offloaded_mb: Option<f64>,
    },
    /// One model staged for dynamic VRAM loading at or above the card's total: it cannot be
    /// resident whole, so its weights stream.
    StagedOverCard {
        /// The model class.
        class: String,
        /// MB staged.
        staged_mb: u64,
        /// The card's total, MiB.
        vram_total_mib: f64,
    },
    /// The run's VRAM peak within [`VRAM_LIMIT_MARGIN_MIB`] of the card's total.
    VramAtLimit {
        /// The peak, MiB.
        peak_mib: f64,
        /// The card's total, MiB.
        vram_total_mib: f64,
        /// The margin, MiB.
        margin_mib: f64,
        /// Where the peak comes from (`server benchmark capture`, or the tool's sampling).
        source: String,
    },
}

impl Cue {
    /// In words, with the numbers.
    pub(crate) fn describe(&self) -> String {
        match self {
            Cue::MemoryPressure { evidence } => {
                format!("the target passed under memory pressure ({})", evidence.join(", "))
            }
            Cue::PartialLoad {
                class,
                loaded_mb,
                offloaded_mb,
            } => {
                let class = class.as_deref().unwrap_or("a model");
                match offloaded_mb {
                    Some(off) => format!(
                        "{class} loaded partially in the target ({loaded_mb:.0} MB loaded, {off:.0} MB offloaded)"
                    ),
                    None => {
                        format!("{class} loaded partially in the target ({loaded_mb:.0} MB loaded)")
                    }
                }
            }
            Cue::StagedOverCard {
                class,
                staged_mb,
                vram_total_mib,
            } => format!(
                "{class} staged {staged_mb} MB for dynamic VRAM loading, at or above the card's {vram_total_mib:.0} MiB"
            ),
            Cue::VramAtLimit {
                peak_mib,
                vram_total_mib,
                margin_mib,
                source,
            } => format!(
                "the target's VRAM peak {peak_mib:.0} MiB ({source}) came within {margin_mib:.0} MiB of the card's {vram_total_mib:.0} MiB"
            ),
        }
    }
}

/// The card's VRAM as a run's summary records it: its total and the run's peak.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct VramUse<'a> {
    /// The card's total, MiB.
    pub total_mib: Option<f64>,
    /// The run's peak, MiB.
    pub peak_mib: Option<f64>,
    /// Where the peak comes from when not from the tool's own sampling.
    pub peak_source: Option<&'a str>,
    /// The tool's sampling interval, ms.
    pub sample_ms: Option<u64>,
}

/// The cues on a passed run of the target: its memory pressure (`pressure`), its partial loads,
/// its staging at or above the card and its VRAM peak near the card's total (`vram`). Empty
/// for a run that did not pass.
pub(crate) fn cues(
    record: &RunRecord,
    vram: &VramUse,
    pressure: Option<&MemoryPressure>,
) -> Vec<Cue> {
    if record.outcome != crate::vocab::OutcomeKind::Passed {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(p) = pressure {
        out.push(Cue::MemoryPressure {
            evidence: p.words(),
        });
    }
    let total = vram.total_mib.filter(|t| *t > 0.0);
    let mut partial: Option<Cue> = None;
    let mut staged: Option<(String, u64)> = None;
    for e in &record.memory_events {
        match e {
            MemoryEvent::ModelLoad { class, figures, .. } if !figures.full => {
                let off = figures.offloaded_mb.unwrap_or(0.0);
                let larger = match &partial {
                    Some(Cue::PartialLoad { offloaded_mb, .. }) => {
                        off > offloaded_mb.unwrap_or(0.0)
                    }
                    _ => true,
                };
                if larger {
                    partial = Some(Cue::PartialLoad {
                        class: class.clone(),
                        loaded_mb: figures.loaded_mb,
                        offloaded_mb: figures.offloaded_mb,
                    });
                }
            }
            MemoryEvent::Staged { class, mb, .. }
                if staged.as_ref().is_none_or(|(_, m)| mb > m) =>
            {
                staged = Some((class.clone(), *mb));
            }
            _ => {}
        }
    }
    out.extend(partial);
    if let (Some((class, mb)), Some(total)) = (staged, total) {
        if mb as f64 >= total {
            out.push(Cue::StagedOverCard {
                class,
                staged_mb: mb,
                vram_total_mib: total,
            });
        }
    }
    if let (Some(peak), Some(total)) = (vram.peak_mib, total) {
        if peak >= total - VRAM_LIMIT_MARGIN_MIB {
            let source =
                vram.peak_source
                    .map(str::to_string)
                    .unwrap_or_else(|| match vram.sample_ms {
                        Some(ms) => format!("sampled every {ms} ms"),
                        None => "sampled".to_string(),
                    });
            out.push(Cue::VramAtLimit {
                peak_mib: peak,
                vram_total_mib: total,
                margin_mib: VRAM_LIMIT_MARGIN_MIB,
                source,
            });
        }
    }
    out
}

/// The cues in words, with their numbers, one after the other.
pub(crate) fn describe(cues: &[Cue]) -> String {
    cues.iter()
        .map(Cue::describe)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{partial_load, passed_with, staged};
    use super::*;
    use crate::session::journal::RunSummary;
    use serde_json::json;

    fn record(events: Vec<MemoryEvent>) -> RunRecord {
        let w = crate::workflow::Workflow::from_json_str(
            &json!({"1": {"class_type": "EmptyLatentImage", "inputs": {
                "width": 64, "height": 64, "batch_size": 1}}})
            .to_string(),
            "w.json",
        )
        .unwrap();
        passed_with(&w, events)
    }

    fn summary(peak: Option<f64>, total: Option<f64>) -> VramUse<'static> {
        VramUse {
            peak_mib: peak,
            total_mib: total,
            sample_ms: Some(500),
            peak_source: None,
        }
    }

    #[test]
    fn no_cue_on_a_run_that_fits() {
        let r = record(vec![staged(13650)]);
        assert_eq!(cues(&r, &summary(Some(20000.0), Some(45056.0)), None), []);
        let mut failed = r.clone();
        failed.outcome = crate::vocab::OutcomeKind::Failed;
        assert_eq!(
            cues(&failed, &summary(Some(45000.0), Some(45056.0)), None),
            []
        );
    }

    #[test]
    fn the_targets_own_pressure_is_a_cue() {
        let p = MemoryPressure {
            evidence: vec![super::super::pressure::Evidence::SlowingInRun {
                node: "3".into(),
                slowing: 2.0,
            }],
            staged_mb: None,
            max_slowdown: 1.5,
            signs: vec![],
        };
        let c = cues(&record(vec![]), &summary(None, None), Some(&p));
        assert_eq!(
            c,
            [Cue::MemoryPressure {
                evidence: vec!["steps slowed 2.0× within the run (node 3)".into()]
            }]
        );
    }

    #[test]
    fn a_partial_load_is_a_cue_with_or_without_offloaded_figures() {
        let c = cues(
            &record(vec![partial_load(Some(3390.29))]),
            &summary(None, None),
            None,
        );
        assert_eq!(
            c.iter().map(Cue::describe).collect::<Vec<_>>(),
            ["WAN21 loaded partially in the target (9178 MB loaded, 3390 MB offloaded)"]
        );
        // The 0.3.64 form prints no offloaded figure: still a partial load.
        let c = cues(
            &record(vec![partial_load(None)]),
            &summary(None, None),
            None,
        );
        assert!(
            matches!(
                c[..],
                [Cue::PartialLoad {
                    offloaded_mb: None,
                    ..
                }]
            ),
            "{c:?}"
        );
    }

    #[test]
    fn staging_at_or_above_the_card_is_a_cue_below_it_is_not() {
        let c = cues(
            &record(vec![staged(13650), staged(24576)]),
            &summary(None, Some(24576.0)),
            None,
        );
        assert_eq!(
            c,
            [Cue::StagedOverCard {
                class: "WAN21".into(),
                staged_mb: 24576,
                vram_total_mib: 24576.0
            }]
        );
        assert_eq!(
            cues(
                &record(vec![staged(24575)]),
                &summary(None, Some(24576.0)),
                None
            ),
            []
        );
        // Without the card's total nothing is compared.
        assert_eq!(
            cues(&record(vec![staged(99999)]), &summary(None, None), None),
            []
        );
    }

    #[test]
    fn a_vram_peak_within_the_margin_of_the_total_is_a_cue() {
        let total = 24576.0;
        let c = cues(
            &record(vec![]),
            &summary(Some(total - 1000.0), Some(total)),
            None,
        );
        assert_eq!(
            c.iter().map(Cue::describe).collect::<Vec<_>>(),
            ["the target's VRAM peak 23576 MiB (sampled every 500 ms) came within 1536 MiB of the card's 24576 MiB"]
        );
        let c = cues(
            &record(vec![]),
            &summary(Some(total - VRAM_LIMIT_MARGIN_MIB - 1.0), Some(total)),
            None,
        );
        assert_eq!(c, []);
        // The server's own measurement is named as the source.
        let mut s = summary(Some(total), Some(total));
        s.peak_source = Some("server benchmark capture");
        let c = cues(&record(vec![]), &s, None);
        assert!(
            c[0].describe().contains("(server benchmark capture)"),
            "{c:?}"
        );
    }

    #[test]
    fn the_cues_round_trip_through_the_journals_summary() {
        let s = RunSummary {
            walk_cues: cues(
                &record(vec![staged(46000)]),
                &summary(Some(45000.0), Some(45056.0)),
                None,
            ),
            ..RunSummary::default()
        };
        assert_eq!(s.walk_cues.len(), 2);
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.contains(r#""walk_cues":[{"staged_over_card":{"#),
            "{text}"
        );
        let back: RunSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        // A summary written before the field loads with none.
        let old: RunSummary = serde_json::from_str(r#"{"duration_ms": 5, "cold": true}"#).unwrap();
        assert!(old.walk_cues.is_empty());
    }
}
