//! Per-step memory evidence from the server console: the models ComfyUI loaded in each step's
//! run (fully or partially, with MiB and what was offloaded), its unloads and OOM unload, read
//! from the run record's `memory_events`. They are in report.json only (`ladder[].models`,
//! `ladder[].memory_events`); report.md names them in its "Only in report.json" line.

use super::model::ModelLoadRow;
use crate::comfy::MemoryEvent;

/// The model loads of a run's console, in order.
pub(crate) fn model_rows(events: &[MemoryEvent]) -> Vec<ModelLoadRow> {
    events
        .iter()
        .filter_map(|e| match e {
            MemoryEvent::ModelLoad { class, figures, .. } => Some(ModelLoadRow {
                class: class.clone(),
                full: figures.full,
                loaded_mib: figures.loaded_mb,
                offloaded_mib: figures.offloaded_mb,
                lowvram_patches: figures.lowvram_patches,
            }),
            _ => None,
        })
        .collect()
}

/// The stage a run's memory fallback happened in, from its console memory events: a tiled
/// VAE decode is the `decode` stage, a tiled VAE encode of an input the `condition` stage
/// (`--strict` reports such a run as failed, and its record has no error to locate it).
pub(crate) fn fallback_stage(events: &[MemoryEvent]) -> Option<crate::vocab::Stage> {
    events.iter().find_map(|e| match e {
        MemoryEvent::TiledFallback { stage, .. } => Some(match stage {
            crate::comfy::VaeStage::Decode => crate::vocab::Stage::Decode,
            crate::comfy::VaeStage::Encode => crate::vocab::Stage::Condition,
        }),
        _ => None,
    })
}

/// The console's other memory events in words: ComfyUI's OOM unload and the unloads that freed
/// something (`0 models unloaded.` says nothing), and the models staged for dynamic VRAM
/// (recorded, not pressure alone). Fallbacks are listed apart
/// (`memory_fallbacks`), progress bars are not memory evidence.
pub(crate) fn event_notes(events: &[MemoryEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            MemoryEvent::OomUnload { .. } => {
                Some("ComfyUI ran out of memory and unloaded all models".to_string())
            }
            MemoryEvent::ModelUnload {
                models: Some(n), ..
            } if *n > 0 => Some(format!(
                "{n} model{} unloaded to make room",
                if *n == 1 { "" } else { "s" }
            )),
            MemoryEvent::ModelUnload { models: None, .. } => {
                Some("models unloaded to make room".to_string())
            }
            MemoryEvent::Staged { .. } => Some(e.describe()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comfy::console::{LoadFigures, VaeStage};

    fn load(class: &str, full: bool, mib: f64, off: Option<f64>) -> MemoryEvent {
        MemoryEvent::ModelLoad {
            t: None,
            class: Some(class.into()),
            figures: LoadFigures {
                full,
                usable_mb: Some(9000.0),
                loaded_mb: mib,
                offloaded_mb: off,
                lowvram_patches: (!full).then_some(0),
            },
        }
    }

    #[test]
    fn loads_unloads_and_the_oom_unload_are_read_from_the_events() {
        let events = vec![
            MemoryEvent::ModelUnload {
                t: None,
                models: Some(0),
            },
            load("SD1ClipModel", true, 235.84, None),
            load("WAN21", false, 9177.97, Some(3390.29)),
            MemoryEvent::TiledFallback {
                t: None,
                stage: VaeStage::Decode,
            },
            MemoryEvent::ModelUnload {
                t: None,
                models: Some(2),
            },
            MemoryEvent::OomUnload { t: None },
        ];
        let models = model_rows(&events);
        assert_eq!(models.len(), 2);
        assert_eq!(models[1].class.as_deref(), Some("WAN21"));
        assert!(!models[1].full);
        assert_eq!(models[1].offloaded_mib, Some(3390.29));
        assert_eq!(fallback_stage(&events).map(|s| s.as_str()), Some("decode"));
        assert_eq!(
            event_notes(&events),
            vec![
                "2 models unloaded to make room",
                "ComfyUI ran out of memory and unloaded all models"
            ]
        );
    }
}
