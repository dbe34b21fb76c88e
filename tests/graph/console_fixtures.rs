//! The console parser against the real captures: every `ws_logs_*` transcript and every
//! `internal_logs_raw_*` body of `tests/fixtures/comfyui/` turns into the memory events the
//! server printed (ComfyUI 0.3.64; see that folder's README).

use comfy_bisect_core::comfy::console::{
    memory_events, BarState, LoadFigures, MemoryEvent, VaeStage,
};
use comfy_bisect_core::comfy::{LogEntry, LogsData};
use serde_json::Value;

const DIR: &str = "tests/fixtures/comfyui";

/// The console entries of a `ws_logs_*` transcript, from its `logs` frames in order.
fn ws_entries(case: &str) -> Vec<LogEntry> {
    let text = std::fs::read_to_string(format!("{DIR}/ws_logs_{case}.ndjson")).unwrap();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "logs" {
            let data: LogsData = serde_json::from_value(v["data"].clone()).unwrap();
            out.extend(data.entries);
        }
    }
    assert!(!out.is_empty(), "{case}: no logs frames");
    out
}

fn raw_entries(case: &str) -> Vec<LogEntry> {
    let text = std::fs::read_to_string(format!("{DIR}/internal_logs_raw_{case}.json")).unwrap();
    let data: LogsData = serde_json::from_str(&text).unwrap();
    data.entries
}

/// A compact view of the events: (what, class or stage, MB or value/max, time).
fn summary(events: &[MemoryEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            MemoryEvent::ModelLoad { class, figures, t } => format!(
                "load {} {:.2} {} @{}",
                class.as_deref().unwrap_or("?"),
                figures.loaded_mb,
                if figures.full { "full" } else { "partial" },
                &t.as_deref().unwrap_or("")[11..]
            ),
            MemoryEvent::ModelUnload { models, .. } => format!("unload {models:?}"),
            MemoryEvent::Staged { class, mb, .. } => format!("staged {class} {mb}"),
            MemoryEvent::TiledFallback { stage, t } => {
                format!(
                    "tiled {} @{}",
                    stage.as_str(),
                    &t.as_deref().unwrap_or("")[11..]
                )
            }
            MemoryEvent::OomUnload { t } => {
                format!("oom_unload @{}", &t.as_deref().unwrap_or("")[11..])
            }
            MemoryEvent::Progress { bar, .. } => format!("bar {}/{}", bar.value, bar.max),
        })
        .collect()
}

const CLIP: &str = "load SD1ClipModel 235.84 full";
const UNET: &str = "load BaseModel 3278.81 full";
const VAE: &str = "load AutoencoderKL 319.11 full";

fn strip_times(s: &[String]) -> Vec<String> {
    s.iter()
        .map(|l| l.split(" @").next().unwrap().to_string())
        .collect()
}

#[test]
fn sd15_success_loads_three_models_and_finishes_sampling() {
    let events = memory_events(&ws_entries("sd15_success"));
    assert_eq!(
        strip_times(&summary(&events)),
        vec![CLIP, UNET, "bar 2/2", VAE]
    );
    // The full figures of the UNet load, as printed on a CPU server.
    match &events[1] {
        MemoryEvent::ModelLoad { t, class, figures } => {
            assert_eq!(t.as_deref(), Some("2026-12-01T13:58:33.599700"));
            assert_eq!(class.as_deref(), Some("BaseModel"));
            assert_eq!(
                figures,
                &LoadFigures {
                    full: true,
                    usable_mb: Some(9.5367431640625e25),
                    loaded_mb: 3278.812271118164,
                    offloaded_mb: None,
                    lowvram_patches: None,
                }
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(!events.iter().any(MemoryEvent::is_fallback));
}

#[test]
fn host_ram_failure_has_no_memory_events() {
    // A DefaultCPUAllocator failure in EmptyImage: no model, no bar, no OOM handling (ComfyUI
    // only unloads on torch's OutOfMemoryError).
    assert_eq!(memory_events(&ws_entries("host_ram_failure")), vec![]);
}

#[test]
fn oom_mid_sampling_stops_the_bar_at_one_of_two_and_unloads() {
    let events = memory_events(&ws_entries("oom_mid_sampling_emulated"));
    assert_eq!(
        summary(&events)[2..],
        [
            "bar 1/2".to_string(),
            "oom_unload @13:59:50.382933".to_string()
        ]
    );
    assert_eq!(strip_times(&summary(&events))[..2], [CLIP, UNET]);
    match &events[2] {
        MemoryEvent::Progress { bar, t } => {
            assert_eq!(
                bar,
                &BarState {
                    desc: String::new(),
                    value: 1,
                    max: 2
                }
            );
            assert_eq!(t.as_deref(), Some("2026-12-01T13:59:50.372212"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tiled_fallback_that_saved_the_run() {
    let events = memory_events(&ws_entries("vae_tiled_fallback_emulated"));
    assert_eq!(
        strip_times(&summary(&events)),
        vec![CLIP, UNET, "bar 2/2", VAE, "tiled decode"]
    );
    let fallbacks: Vec<&MemoryEvent> = events.iter().filter(|e| e.is_fallback()).collect();
    assert_eq!(
        fallbacks,
        vec![&MemoryEvent::TiledFallback {
            t: Some("2026-12-01T14:01:35.280044".into()),
            stage: VaeStage::Decode
        }]
    );
    assert_eq!(fallbacks[0].describe(), "tiled VAE decode fallback");
}

#[test]
fn tiled_fallback_that_ran_out_too() {
    let events = memory_events(&ws_entries("vae_tiled_fallback_then_oom_emulated"));
    assert_eq!(
        summary(&events)[3..],
        [
            format!("{VAE} @14:00:23.125428"),
            "tiled decode @14:00:23.126930".to_string(),
            "oom_unload @14:00:31.224827".to_string()
        ]
    );
    assert_eq!(strip_times(&summary(&events))[..3], [CLIP, UNET, "bar 2/2"]);
}

#[test]
fn raw_ring_buffer_gives_the_same_events_for_the_captured_prompt() {
    // /internal/logs/raw holds every prompt since start; the last prompt's part (from its
    // `got prompt`) has the same memory events as the socket, bar for bar.
    for case in [
        "sd15_success",
        "host_ram_failure",
        "oom_mid_sampling_emulated",
        "vae_tiled_fallback_emulated",
        "vae_tiled_fallback_then_oom_emulated",
    ] {
        let raw = raw_entries(case);
        let start = raw.iter().rposition(|e| e.m == "got prompt\n").unwrap();
        let ws = ws_entries(case);
        assert_eq!(
            raw[start].t, ws[0].t,
            "{case}: the raw buffer ends with the captured prompt"
        );
        assert_eq!(
            summary(&memory_events(&raw[start..])),
            summary(&memory_events(&ws)),
            "{case}"
        );
    }
}

#[test]
fn the_diagnosis_reads_the_same_lines_through_the_same_parser() {
    // The console of the capture, pasted as a log: the diagnosis sees the tiled retry and the
    // finished sampling bar before the failure in the decode.
    let text: String = ws_entries("vae_tiled_fallback_then_oom_emulated")
        .iter()
        .map(|e| e.m.as_str())
        .collect();
    let parsed = comfy_bisect_core::diagnose::parse_input(&text).unwrap();
    assert_eq!(
        parsed.signals.tail,
        Some(comfy_bisect_core::diagnose::ConsoleTail::TiledDecodeRetry)
    );
    assert_eq!(parsed.signals.sampling_bar, Some((2, 2)), "{:?}", parsed);
    // The run record's route: its own server.log lines give the same signals.
    let signals = comfy_bisect_core::diagnose::console_signals(&text);
    assert_eq!(signals.tail, parsed.signals.tail);
}
