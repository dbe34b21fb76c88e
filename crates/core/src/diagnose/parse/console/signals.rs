//! The console signals of a segment's events: the last sampling bar, what the log was doing
//! when it ended (its tail) and the last model requested, staged or loaded.

use super::segment::*;
use crate::comfy::console::{self, ConsoleLine, LoadPhrase};
use crate::diagnose::{ConsoleTail, ModelActivity};

/// The last model line when no sampling or loading bar follows it, with its model: a `loaded
/// …` line takes the model of the `Requested to load` line before it.
pub(super) fn last_model(events: &[(usize, Event)]) -> Option<ModelActivity> {
    let at = events.iter().rposition(|(_, e)| {
        matches!(
            e,
            Event::Load(_)
                | Event::Staged(..)
                | Event::LoadDone
                | Event::SamplingBar(..)
                | Event::LoadingBar(_)
        )
    })?;
    // A `loaded …` or `N models unloaded.` line after a sampling bar belongs to a load begun
    // after that bar, never to a model requested before it.
    let requested_before = |end: usize| {
        events[..end]
            .iter()
            .rev()
            .take_while(|(_, e)| !matches!(e, Event::SamplingBar(..)))
            .find_map(|(_, e)| match e {
                Event::Load(l) => requested_model(l).map(|m| (l.clone(), m)),
                _ => None,
            })
    };
    match &events[at].1 {
        Event::Staged(line, model) => Some(ModelActivity {
            line: line.clone(),
            model: model.clone(),
            ready: true,
        }),
        Event::Load(line) => {
            if let Some(model) = requested_model(line) {
                return Some(ModelActivity {
                    line: line.clone(),
                    model,
                    ready: false,
                });
            }
            // `loaded …`, `N models unloaded.` and `Attempting to release mmap` belong to the
            // model requested before them; other loading lines (`model_type …`, `model weight
            // dtype …`, `VAE load device: …`) start reading a model not yet named.
            let of_requested = console::load_phrase(line).is_some()
                || matches!(
                    console::classify(line),
                    Some(ConsoleLine::Loaded(_) | ConsoleLine::Unloaded { .. })
                )
                || line
                    .to_lowercase()
                    .starts_with("attempting to release mmap");
            if !of_requested {
                return None;
            }
            let partial = console::load_phrase(line) == Some(LoadPhrase::LoadedPartially);
            let (_, model) = requested_before(at)?;
            Some(ModelActivity {
                line: line.clone(),
                model,
                ready: partial,
            })
        }
        Event::LoadDone => {
            let (line, model) = requested_before(at)?;
            Some(ModelActivity {
                line: format!("{line} … loaded completely"),
                model,
                ready: true,
            })
        }
        _ => None,
    }
}

/// The events of a log that just ends, reading its last line when the paste cut it short
/// inside a model-management line: the line ComfyUI prints right after `Requested to load X`
/// with dynamic VRAM (`Model X prepared for dynamic VRAM loading. NMB Staged.`: a cut `Model
/// Mini` after `Requested to load MiniMaxVAE` counts as staged), or load_models_gpu's `N models
/// unloaded.` (a cut `0 models` is that line).
pub(super) fn with_cut_last_line(
    events: &[(usize, Event)],
    last: Option<&String>,
) -> Vec<(usize, Event)> {
    let mut out = events.to_vec();
    let Some(line) = last.map(|l| l.trim()) else {
        return out;
    };
    if line_event(line).is_none() {
        if let Some(n) = line.split(' ').next().filter(|n| n.parse::<u32>().is_ok()) {
            let full = format!("{n} models unloaded.");
            if line.len() > n.len() + 6 && full.starts_with(line) {
                let at = events.last().map_or(0, |(i, _)| i + 1);
                out.push((at, Event::Load(line.to_string())));
                return out;
            }
        }
    }
    let Some(cut) = line.strip_prefix("Model ").filter(|c| c.len() >= 3) else {
        return out;
    };
    let requested = events.last().and_then(|(i, e)| match e {
        Event::Load(l) => requested_model(l).map(|m| (*i, m)),
        _ => None,
    });
    if let Some((i, model)) = requested {
        let full = format!("{model} prepared for dynamic VRAM loading.");
        if full.starts_with(cut) && cut.len() < full.len() {
            out.push((i + 1, Event::Staged(line.to_string(), model)));
        }
    }
    out
}

pub(super) fn signals_from(events: &[(usize, Event)]) -> (Option<(u64, u64)>, Option<ConsoleTail>) {
    // A node's own line is the last activity only when no model was staged after it.
    let staged_after = |at: usize| {
        events
            .iter()
            .any(|(i, e)| *i > at && matches!(e, Event::Staged(..)))
    };
    // Staged lines (dynamic VRAM) are read by `last_model` only.
    let events: Vec<(usize, Event)> = events
        .iter()
        .filter(|(_, e)| !matches!(e, Event::Staged(..)))
        .cloned()
        .collect();
    let events = events.as_slice();
    let sampling_bar = events.iter().rev().find_map(|(_, e)| match e {
        Event::SamplingBar(v, m) => Some((*v, *m)),
        _ => None,
    });
    let lora_errors = events
        .iter()
        .filter(|(_, e)| *e == Event::LoraError)
        .count();
    let tail = match events.iter().rev().find(|(_, e)| *e != Event::LoraError) {
        Some((_, Event::Load(line))) | Some((_, Event::LoadingBar(line))) => {
            Some(ConsoleTail::ModelLoading(line.clone()))
        }
        Some((_, Event::TiledRetry(true))) => Some(ConsoleTail::TiledDecodeRetry),
        Some((_, Event::LoadDone)) => events.iter().rev().find_map(|(_, e)| match e {
            Event::Load(line) => encoder_name(line).map(ConsoleTail::EncoderLoaded),
            _ => None,
        }),
        Some((_, Event::TiledRetry(false))) => Some(ConsoleTail::TiledEncodeRetry),
        Some((i, Event::NodePhase(line))) if !staged_after(*i) => {
            Some(ConsoleTail::NodePhase(line.clone()))
        }
        _ if lora_errors > 0 => Some(ConsoleTail::LoraPatchErrors(lora_errors)),
        _ => None,
    };
    // A sampling bar only counts when nothing but loading finished after it.
    let bar_after_load = match events.iter().rev().find(|(_, e)| {
        matches!(
            e,
            Event::SamplingBar(..) | Event::Load(_) | Event::LoadingBar(_)
        )
    }) {
        Some((_, Event::SamplingBar(..))) => sampling_bar,
        _ => sampling_bar.filter(|(v, m)| v >= m),
    };
    (bar_after_load, tail)
}
