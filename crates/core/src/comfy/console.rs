//! ComfyUI's console, read as memory evidence: the ONE parser of console lines (model loads and
//! unloads, tiled VAE fallbacks, the OOM unload, lowvram patches, progress bars, prompt
//! boundaries). Used for the run record (lines streamed as `logs` frames or read from
//! `/internal/logs/raw`) and by the diagnosis of pasted logs. Pure: no I/O, no clock.
//!
//! Line texts are those of ComfyUI 0.3.64 as captured in `tests/fixtures/comfyui/ws_logs_*`
//! (`Requested to load BaseModel`, `loaded completely 9.5367431640625e+25 3278.812271118164 True`,
//! `Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.`,
//! `Got an OOM, unloading all loaded models.`, `Prompt executed in 5.60 seconds`), plus the newer
//! `loaded partially; … MB usable, … MB loaded, … MB offloaded, lowvram patches: N` form found in
//! user reports (`tests/fixtures/oom-reports/`).

use super::protocol::LogEntry;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

/// Which VAE pass fell back to tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VaeStage {
    /// `VAEDecode` (latent → image).
    Decode,
    /// `VAEEncode` (image → latent).
    Encode,
}

impl VaeStage {
    /// `decode` or `encode`.
    pub fn as_str(self) -> &'static str {
        match self {
            VaeStage::Decode => "decode",
            VaeStage::Encode => "encode",
        }
    }
}

/// A `loaded completely …` / `loaded partially …` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFigures {
    /// `true` for `loaded completely`, `false` for `loaded partially`.
    pub full: bool,
    /// MB the loader could use (on CPU ComfyUI prints 9.5367431640625e+25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_mb: Option<f64>,
    /// MB of the model placed on the device.
    pub loaded_mb: f64,
    /// MB left in system memory (only the newer partial form prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offloaded_mb: Option<f64>,
    /// Weights patched on the fly (partial loads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowvram_patches: Option<u64>,
}

/// A tqdm progress bar as printed (`\r 50%|█████     | 1/2 [00:05<00:05,  5.03s/it]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarState {
    /// Text before the percentage (empty for the sampler's bar).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// Steps done.
    pub value: u64,
    /// Steps total.
    pub max: u64,
}

/// What one console line says, when it says something this tool uses.
#[derive(Debug, Clone, PartialEq)]
pub enum ConsoleLine {
    /// `got prompt`: the server received a prompt (the start of a prompt's lines).
    GotPrompt,
    /// `Prompt executed in <s> seconds` (past 10 minutes `HH:MM:SS`): the end of a prompt's lines (also after a failure).
    PromptExecuted {
        /// The seconds printed.
        seconds: Option<f64>,
    },
    /// `invalid prompt: …`: a rejected prompt (it has no `Prompt executed` line).
    InvalidPrompt,
    /// `Requested to load <class>`.
    RequestedLoad {
        /// The model class (`BaseModel`, `SD1ClipModel`, `AutoencoderKL`, …).
        class: String,
    },
    /// `loaded completely …` or `loaded partially …`.
    Loaded(LoadFigures),
    /// `Model <class> prepared for dynamic VRAM loading. <N>MB Staged.` (2026 servers, dynamic
    /// VRAM: every model loaded this way is staged, whether it fits or not).
    Staged {
        /// The model class.
        class: String,
        /// MB staged.
        mb: u64,
    },
    /// `N models unloaded.` or `Unloading models for lowram load.`.
    Unloaded {
        /// How many, when printed.
        models: Option<u64>,
    },
    /// `Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.`
    /// (or encoding).
    TiledFallback(VaeStage),
    /// `Got an OOM, unloading all loaded models.` (only after torch's OutOfMemoryError).
    OomUnload,
    /// `!!! Exception during processing !!! <message>`.
    Exception {
        /// The message (first line).
        message: String,
    },
    /// A progress bar.
    Bar(BarState),
}

static REQUESTED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^requested to load\s+(?P<class>\S+)").expect("static regex"));
static LOADED_OLD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^loaded (?P<kind>completely|partially)\s+(?P<a>[0-9.eE+-]+)\s+(?P<b>[0-9.eE+-]+)(?:\s+(?P<c>\S+))?\s*$").expect("static regex")
});
static LOADED_NEW_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^loaded (?P<kind>completely|partially);\s*(?P<rest>.*)$")
        .expect("static regex")
});
static MB_FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?P<n>[0-9.]+)\s*MB\s+(?P<what>usable|loaded|offloaded)")
        .expect("static regex")
});
static PATCHES_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)lowvram patches:\s*(?P<n>\d+)").expect("static regex"));
static STAGED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^model\s+(?P<class>\S+)\s+prepared for dynamic vram loading\.\s*(?P<mb>\d+)\s*MB\s+staged").expect("static regex")
});
static UNLOADED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?P<n>\d+)\s+models?\s+unloaded").expect("static regex"));
static LOAD_PHRASE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:(?P<requested>requested to load(?-u:\b))|loaded (?P<kind>completely|partially)|(?P<unloaded>\d+ models? unloaded|unloading models for lowram))").expect("static regex")
});
static LOWRAM_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^unloading models for lowram load").expect("static regex"));
static TILED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)ran out of memory when regular vae (?P<stage>decod|encod)ing")
        .expect("static regex")
});
static OOM_UNLOAD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^got an oom, unloading all loaded models").expect("static regex")
});
/// execution.py's `!!! Exception during processing !!! <message>` (also with a `!` lost in a
/// paste).
pub(crate) static EXCEPTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)!{2,3}\s*exception during processing\s*!{2,3}\s*(?P<msg>.*)$")
        .expect("static regex")
});
static GOT_PROMPT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^got prompt\s*$").expect("static regex"));
// `Prompt executed in 5.60 seconds`; past 10 minutes ComfyUI prints `HH:MM:SS` instead
// (`main.py`'s prompt worker, seen on a real 0.8.0: `Prompt executed in 00:12:57`).
static EXECUTED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^prompt executed in\s+(?:(?P<h>\d+):(?P<m>\d{2}):(?P<sec>\d{2})\b|(?P<s>[0-9.]+))?",
    )
    .expect("static regex")
});
static INVALID_PROMPT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^invalid prompt:").expect("static regex"));
static BAR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<desc>[^|\r\]]*?)[ \t]*(?P<pct>\d{1,3})%\s*\|(?P<bar>[^|\r]*)\|\s*(?P<v>\d+)/(?P<m>\d+)").expect("static regex")
});

/// Classifies one console line (already split at `\n` and `\r`; surrounding spaces ignored).
pub fn classify(line: &str) -> Option<ConsoleLine> {
    // A pasted tqdm line holds every state after `\r`; the last one is what the terminal showed.
    let t = line
        .rsplit('\r')
        .find(|p| !p.trim().is_empty())
        .unwrap_or(line)
        .trim();
    if t.is_empty() {
        return None;
    }
    if t.contains('%') && t.contains('|') {
        if let Some(c) = BAR_RE.captures_iter(t).last() {
            if let (Ok(value), Ok(max)) = (c["v"].parse(), c["m"].parse()) {
                return Some(ConsoleLine::Bar(BarState {
                    desc: c["desc"].trim().trim_end_matches(':').trim().to_string(),
                    value,
                    max,
                }));
            }
        }
    }
    if GOT_PROMPT_RE.is_match(t) {
        return Some(ConsoleLine::GotPrompt);
    }
    if let Some(c) = EXECUTED_RE.captures(t) {
        return Some(ConsoleLine::PromptExecuted {
            seconds: match (c.name("h"), c.name("m"), c.name("sec")) {
                (Some(h), Some(m), Some(sec)) => {
                    let part = |x: regex::Match| x.as_str().parse::<f64>().unwrap_or(0.0);
                    Some(part(h) * 3600.0 + part(m) * 60.0 + part(sec))
                }
                _ => c.name("s").and_then(|s| s.as_str().parse().ok()),
            },
        });
    }
    if INVALID_PROMPT_RE.is_match(t) {
        return Some(ConsoleLine::InvalidPrompt);
    }
    if let Some(c) = REQUESTED_RE.captures(t) {
        return Some(ConsoleLine::RequestedLoad {
            class: c["class"].to_string(),
        });
    }
    if let Some(c) = LOADED_OLD_RE.captures(t) {
        let full = c["kind"].eq_ignore_ascii_case("completely");
        let (Ok(usable), Ok(loaded)) = (c["a"].parse::<f64>(), c["b"].parse::<f64>()) else {
            return None;
        };
        // `loaded completely <usable> <loaded> <full_load>`; `loaded partially <usable>
        // <loaded> <lowvram patches>`.
        let patches = if full {
            None
        } else {
            c.name("c").and_then(|p| p.as_str().parse().ok())
        };
        return Some(ConsoleLine::Loaded(LoadFigures {
            full,
            usable_mb: Some(usable),
            loaded_mb: loaded,
            offloaded_mb: None,
            lowvram_patches: patches,
        }));
    }
    if let Some(c) = LOADED_NEW_RE.captures(t) {
        let full = c["kind"].eq_ignore_ascii_case("completely");
        let rest = &c["rest"];
        let mut usable = None;
        let mut loaded = None;
        let mut offloaded = None;
        for f in MB_FIELD_RE.captures_iter(rest) {
            let n = f["n"].parse::<f64>().ok();
            match f["what"].to_ascii_lowercase().as_str() {
                "usable" => usable = n,
                "loaded" => loaded = n,
                _ => offloaded = n,
            }
        }
        return Some(ConsoleLine::Loaded(LoadFigures {
            full,
            usable_mb: usable,
            loaded_mb: loaded?,
            offloaded_mb: offloaded,
            lowvram_patches: PATCHES_RE.captures(rest).and_then(|p| p["n"].parse().ok()),
        }));
    }
    if let Some(c) = STAGED_RE.captures(t) {
        if let Ok(mb) = c["mb"].parse() {
            return Some(ConsoleLine::Staged {
                class: c["class"].to_string(),
                mb,
            });
        }
    }
    if let Some(c) = UNLOADED_RE.captures(t) {
        return Some(ConsoleLine::Unloaded {
            models: c["n"].parse().ok(),
        });
    }
    if LOWRAM_RE.is_match(t) {
        return Some(ConsoleLine::Unloaded { models: None });
    }
    if let Some(c) = TILED_RE.captures(t) {
        let stage = if c["stage"].eq_ignore_ascii_case("decod") {
            VaeStage::Decode
        } else {
            VaeStage::Encode
        };
        return Some(ConsoleLine::TiledFallback(stage));
    }
    if OOM_UNLOAD_RE.is_match(t) {
        return Some(ConsoleLine::OomUnload);
    }
    if let Some(c) = EXCEPTION_RE.captures(t) {
        return Some(ConsoleLine::Exception {
            message: c["msg"].trim().to_string(),
        });
    }
    None
}

/// Which model-management line a console line is, whether or not [`classify`] can read its
/// figures (a pasted log's `loaded partially` of another format, a bare `Requested to load`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoadPhrase {
    /// `Requested to load …`.
    Requested,
    /// `loaded completely …`.
    LoadedCompletely,
    /// `loaded partially …`.
    LoadedPartially,
    /// `N models unloaded.` or `Unloading models for lowram …`.
    Unloaded,
}

/// The phrase a model-management line starts with (see [`LoadPhrase`]); None for any other
/// line. [`classify`] reads the figures of the same lines.
pub(crate) fn load_phrase(line: &str) -> Option<LoadPhrase> {
    let c = LOAD_PHRASE_RE.captures(line.trim())?;
    Some(if c.name("requested").is_some() {
        LoadPhrase::Requested
    } else if c.name("unloaded").is_some() {
        LoadPhrase::Unloaded
    } else if c["kind"].eq_ignore_ascii_case("completely") {
        LoadPhrase::LoadedCompletely
    } else {
        LoadPhrase::LoadedPartially
    })
}

/// One memory-relevant thing the console said during a run (`run.json` → `memory_events`,
/// e.g. `{"model_load": {"t": …, "class": "BaseModel", "figures": {"full": true, …}}}`;
/// externally tagged because run.json numbers are read with arbitrary precision, which
/// serde's buffered (internally tagged, flattened) forms cannot read back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryEvent {
    /// A model was put on the device (`Requested to load X` + `loaded completely/partially`).
    ModelLoad {
        /// Server time of the `loaded …` line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t: Option<String>,
        /// Model class from the `Requested to load` line before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<String>,
        /// The figures.
        figures: LoadFigures,
    },
    /// A model was staged for dynamic VRAM loading (its weights in host RAM, streamed to the
    /// device as needed). Not memory pressure alone: a 2026 server stages every model.
    Staged {
        /// Server time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t: Option<String>,
        /// The model class.
        class: String,
        /// MB staged.
        mb: u64,
    },
    /// Models were unloaded to make room.
    ModelUnload {
        /// Server time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t: Option<String>,
        /// How many, when printed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        models: Option<u64>,
    },
    /// ComfyUI ran out of memory in a VAE pass and retried it in tiles.
    TiledFallback {
        /// Server time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t: Option<String>,
        /// Decode or encode.
        stage: VaeStage,
    },
    /// ComfyUI caught torch's OutOfMemoryError and unloaded every model.
    OomUnload {
        /// Server time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t: Option<String>,
    },
    /// The last state of one progress bar.
    Progress {
        /// Server time of that state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t: Option<String>,
        /// The bar.
        bar: BarState,
    },
}

impl MemoryEvent {
    /// A silent fallback (the run went on in a cheaper way): a tiled VAE pass.
    pub fn is_fallback(&self) -> bool {
        matches!(self, MemoryEvent::TiledFallback { .. })
    }

    /// Short human text ("BaseModel loaded 3278.8 MB", "tiled VAE decode fallback").
    pub fn describe(&self) -> String {
        match self {
            MemoryEvent::ModelLoad { class, figures, .. } => {
                let name = class.as_deref().unwrap_or("model");
                if figures.full {
                    format!("{name} {:.0} MB", figures.loaded_mb)
                } else {
                    match figures.offloaded_mb {
                        Some(off) => format!(
                            "{name} {:.0} MB (partial, {off:.0} MB offloaded)",
                            figures.loaded_mb
                        ),
                        None => format!("{name} {:.0} MB (partial)", figures.loaded_mb),
                    }
                }
            }
            MemoryEvent::Staged { class, mb, .. } => format!("{class} {mb} MB staged"),
            MemoryEvent::ModelUnload { models, .. } => match models {
                Some(n) => format!("{n} models unloaded"),
                None => "models unloaded".into(),
            },
            MemoryEvent::TiledFallback { stage, .. } => {
                format!("tiled VAE {} fallback", stage.as_str())
            }
            MemoryEvent::OomUnload { .. } => "OOM: all models unloaded".into(),
            MemoryEvent::Progress { bar, .. } => format!("progress {}/{}", bar.value, bar.max),
        }
    }
}

/// Splits console writes into lines (at `\n` and `\r`), each with the time of its write.
pub(crate) fn lines_of(entries: &[LogEntry]) -> impl Iterator<Item = (&str, &str)> {
    entries.iter().flat_map(|e| {
        e.m.split(['\n', '\r'])
            .filter(|l| !l.trim().is_empty())
            .map(move |l| (e.t.as_str(), l))
    })
}

/// Turns console lines into memory events; `Requested to load` names the next load, each
/// progress bar is reduced to its last state.
#[derive(Debug, Default)]
pub(crate) struct MemoryParser {
    events: Vec<MemoryEvent>,
    requested: Option<String>,
    bar: Option<(Option<String>, BarState)>,
}

impl MemoryParser {
    /// An empty parser.
    pub(crate) fn new() -> MemoryParser {
        MemoryParser::default()
    }

    fn flush_bar(&mut self) {
        if let Some((t, bar)) = self.bar.take() {
            self.events.push(MemoryEvent::Progress { t, bar });
        }
    }

    /// Feeds one line written at server time `t`; returns what it was.
    pub(crate) fn feed(&mut self, t: Option<&str>, line: &str) -> Option<ConsoleLine> {
        let c = classify(line)?;
        let t = t.map(str::to_string);
        if let ConsoleLine::Bar(bar) = &c {
            let same = self.bar.as_ref().is_some_and(|(_, b)| {
                b.max == bar.max && b.desc == bar.desc && bar.value >= b.value
            });
            if !same {
                self.flush_bar();
            }
            self.bar = Some((t, bar.clone()));
            return Some(c);
        }
        self.flush_bar();
        match &c {
            ConsoleLine::RequestedLoad { class } => self.requested = Some(class.clone()),
            ConsoleLine::Loaded(figures) => self.events.push(MemoryEvent::ModelLoad {
                t,
                class: self.requested.take(),
                figures: figures.clone(),
            }),
            ConsoleLine::Staged { class, mb } => {
                self.requested = None;
                self.events.push(MemoryEvent::Staged {
                    t,
                    class: class.clone(),
                    mb: *mb,
                })
            }
            ConsoleLine::Unloaded { models } => self
                .events
                .push(MemoryEvent::ModelUnload { t, models: *models }),
            ConsoleLine::TiledFallback(stage) => self
                .events
                .push(MemoryEvent::TiledFallback { t, stage: *stage }),
            ConsoleLine::OomUnload => self.events.push(MemoryEvent::OomUnload { t }),
            _ => {}
        }
        Some(c)
    }

    /// The events so far (an unfinished bar counts with its last state).
    pub(crate) fn finish(mut self) -> Vec<MemoryEvent> {
        self.flush_bar();
        self.events
    }
}

/// The memory events of a run's console writes.
pub fn memory_events(entries: &[LogEntry]) -> Vec<MemoryEvent> {
    let mut p = MemoryParser::new();
    for (t, line) in lines_of(entries) {
        p.feed(Some(t), line);
    }
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_line_is_named_even_when_its_figures_cannot_be_read() {
        assert_eq!(classify("Requested to load"), None);
        assert_eq!(
            load_phrase("Requested to load"),
            Some(LoadPhrase::Requested)
        );
        assert_eq!(
            load_phrase("loaded completely 9.5e+25 3278.8 True"),
            Some(LoadPhrase::LoadedCompletely)
        );
        assert_eq!(
            load_phrase("loaded partially; 9178.35 MB usable"),
            Some(LoadPhrase::LoadedPartially)
        );
        assert_eq!(
            load_phrase("0 models unloaded."),
            Some(LoadPhrase::Unloaded)
        );
        assert_eq!(
            load_phrase("Unloading models for lowram load."),
            Some(LoadPhrase::Unloaded)
        );
        assert_eq!(load_phrase("Requested to loadX"), None);
        assert_eq!(load_phrase("got prompt"), None);
    }

    #[test]
    fn prompt_executed_in_seconds_and_past_ten_minutes_in_hours_minutes_seconds() {
        assert_eq!(
            classify("Prompt executed in 110.52 seconds"),
            Some(ConsoleLine::PromptExecuted {
                seconds: Some(110.52)
            })
        );
        // A real 0.8.0 after a 13-minute prompt.
        assert_eq!(
            classify("Prompt executed in 00:12:57"),
            Some(ConsoleLine::PromptExecuted {
                seconds: Some(777.0)
            })
        );
        assert_eq!(
            classify("Prompt executed in 26:00:05"),
            Some(ConsoleLine::PromptExecuted {
                seconds: Some(93605.0)
            })
        );
    }

    #[test]
    fn old_and_new_load_forms() {
        assert_eq!(
            classify("loaded completely 9.5367431640625e+25 3278.812271118164 True"),
            Some(ConsoleLine::Loaded(LoadFigures {
                full: true,
                usable_mb: Some(9.5367431640625e25),
                loaded_mb: 3278.812271118164,
                offloaded_mb: None,
                lowvram_patches: None,
            }))
        );
        assert_eq!(
            classify("loaded partially 11337.904888916015 11337.8525390625 1"),
            Some(ConsoleLine::Loaded(LoadFigures {
                full: false,
                usable_mb: Some(11337.904888916015),
                loaded_mb: 11337.8525390625,
                offloaded_mb: None,
                lowvram_patches: Some(1),
            }))
        );
        assert_eq!(
            classify("loaded partially; 9178.35 MB usable, 9177.97 MB loaded, 3390.29 MB offloaded, lowvram patches: 0"),
            Some(ConsoleLine::Loaded(LoadFigures {
                full: false,
                usable_mb: Some(9178.35),
                loaded_mb: 9177.97,
                offloaded_mb: Some(3390.29),
                lowvram_patches: Some(0),
            }))
        );
        assert_eq!(
            classify("loaded completely; 2904.39 MB usable, 159.87 MB loaded, full load: True"),
            Some(ConsoleLine::Loaded(LoadFigures {
                full: true,
                usable_mb: Some(2904.39),
                loaded_mb: 159.87,
                offloaded_mb: None,
                lowvram_patches: None,
            }))
        );
        assert_eq!(
            classify("0 models unloaded."),
            Some(ConsoleLine::Unloaded { models: Some(0) })
        );
        assert_eq!(
            classify("Unloading models for lowram load."),
            Some(ConsoleLine::Unloaded { models: None })
        );
        assert_eq!(
            classify("Warning: Ran out of memory when regular VAE encoding, retrying with tiled VAE encoding."),
            Some(ConsoleLine::TiledFallback(VaeStage::Encode))
        );
        assert_eq!(classify("model_type EPS"), None);
    }

    #[test]
    fn staging_lines_of_dynamic_vram_are_read_with_their_mb() {
        // As 2026 servers print it (comfyui-2026.md), with and without the patches part and
        // with the padded number of a log of two models.
        for (line, class, mb) in [
            (
                "Model WAN21 prepared for dynamic VRAM loading. 13650MB Staged. 0 patches attached.",
                "WAN21",
                13650,
            ),
            (
                "Model ZImageTEModel_ prepared for dynamic VRAM loading. 7671MB Staged.",
                "ZImageTEModel_",
                7671,
            ),
            (
                "Model MiniMaxH3VideoVAE prepared for dynamic VRAM loading.  4965MB Staged.",
                "MiniMaxH3VideoVAE",
                4965,
            ),
        ] {
            assert_eq!(
                classify(line),
                Some(ConsoleLine::Staged {
                    class: class.into(),
                    mb
                }),
                "{line}"
            );
        }
        let mut p = MemoryParser::new();
        p.feed(Some("t0"), "Requested to load WAN21");
        p.feed(
            Some("t1"),
            "Model WAN21 prepared for dynamic VRAM loading. 13650MB Staged. 0 patches attached.",
        );
        let events = p.finish();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].describe(), "WAN21 13650 MB staged");
        assert!(!events[0].is_fallback());
    }

    #[test]
    fn a_bar_keeps_its_last_state_and_a_new_bar_starts_over() {
        let mut p = MemoryParser::new();
        for l in [
            "  0%|          | 0/2 [00:00<?, ?it/s]",
            " 50%|█████     | 1/2 [00:05<00:05,  5.03s/it]",
            "100%|██████████| 2/2 [00:08<00:00,  4.21s/it]",
            "100%|██████████| 2/2 [00:08<00:00,  4.39s/it]",
            "  0%|          | 0/30 [00:00<?, ?it/s]",
            " 10%|█         | 3/30 [00:03<00:30,  1.0s/it]",
        ] {
            p.feed(None, l);
        }
        let bars: Vec<(u64, u64)> = p
            .finish()
            .into_iter()
            .filter_map(|e| match e {
                MemoryEvent::Progress { bar, .. } => Some((bar.value, bar.max)),
                _ => None,
            })
            .collect();
        assert_eq!(bars, vec![(2, 2), (3, 30)]);
    }

    #[test]
    fn events_read_back_from_run_json() {
        let events = vec![
            MemoryEvent::ModelLoad {
                t: Some("2026-12-01T13:58:33.599700".into()),
                class: Some("BaseModel".into()),
                figures: LoadFigures {
                    full: false,
                    usable_mb: Some(9178.35),
                    loaded_mb: 9177.97,
                    offloaded_mb: Some(3390.29),
                    lowvram_patches: Some(0),
                },
            },
            MemoryEvent::Progress {
                t: None,
                bar: BarState {
                    desc: String::new(),
                    value: 1,
                    max: 2,
                },
            },
            MemoryEvent::TiledFallback {
                t: None,
                stage: VaeStage::Decode,
            },
        ];
        // The crate reads JSON with arbitrary precision numbers.
        let text = serde_json::to_string(&events).unwrap();
        let back: Vec<MemoryEvent> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, events);
    }
}
