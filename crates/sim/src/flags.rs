//! How the simulated server was launched: the ComfyUI command-line flags it models (spelled
//! and grouped as `comfy/cli_args.py` has them), refusing any other flag as ComfyUI's argparse
//! would, and the allocator environment (`PYTORCH_CUDA_ALLOC_CONF`). This module owns the
//! command line; [`Launch::knobs`] turns it into what the memory model honours
//! ([`Knobs`]), and [`Launch::args`] is what `/system_stats` shows in
//! `system.argv`, verbatim.

use super::memory::Knobs;
use super::{Profile, GIB, MIB};

/// What a modelled flag takes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Takes {
    /// A switch (`action="store_true"`).
    Nothing,
    /// A number of gigabytes (`type=float`).
    Gigabytes,
    /// One of these words (`choices=`).
    Choice(&'static [&'static str]),
}

/// One flag the simulator models.
struct Flag {
    name: &'static str,
    takes: Takes,
    /// The `add_mutually_exclusive_group` it belongs to in `cli_args.py`, if any.
    group: Option<&'static str>,
    /// Added after 0.3.64 (known to the 2026 profile only).
    late: bool,
}

const fn flag(name: &'static str, group: Option<&'static str>, late: bool) -> Flag {
    Flag {
        name,
        takes: Takes::Nothing,
        group,
        late,
    }
}

/// The ComfyUI flags the simulator models. Names, value types and exclusive groups follow
/// `comfy/cli_args.py` (0.3.64 for the early ones; `--disable-pinned-memory` arrived in
/// November 2025, `--vram-headroom` and the dynamic-VRAM switches in 2026).
const FLAGS: &[Flag] = &[
    Flag {
        name: "--reserve-vram",
        takes: Takes::Gigabytes,
        group: None,
        late: false,
    },
    Flag {
        name: "--vram-headroom",
        takes: Takes::Gigabytes,
        group: None,
        late: true,
    },
    flag("--disable-dynamic-vram", None, true),
    flag("--enable-dynamic-vram", None, true),
    flag("--disable-pinned-memory", None, true),
    flag("--cache-none", Some("cache"), false),
    flag("--cache-classic", Some("cache"), false),
    flag("--use-split-cross-attention", Some("attention"), false),
    flag("--use-quad-cross-attention", Some("attention"), false),
    flag("--use-pytorch-cross-attention", Some("attention"), false),
    flag("--use-sage-attention", Some("attention"), false),
    flag("--use-flash-attention", Some("attention"), false),
    flag("--lowvram", Some("vram"), false),
    flag("--novram", Some("vram"), false),
    flag("--normalvram", Some("vram"), false),
    flag("--highvram", Some("vram"), false),
    flag("--gpu-only", Some("vram"), false),
    flag("--disable-auto-launch", None, false),
    Flag {
        name: "--preview-method",
        takes: Takes::Choice(PREVIEW_METHODS),
        group: None,
        late: false,
    },
];

/// `LatentPreviewMethod`'s values.
const PREVIEW_METHODS: &[&str] = &["none", "auto", "latent2rgb", "taesd"];

/// The attention backend a sampler uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Attention {
    /// No attention flag: PyTorch's scaled-dot-product attention, as on a stock NVIDIA install.
    #[default]
    Default,
    /// `--use-split-cross-attention`.
    Split,
    /// `--use-quad-cross-attention`.
    Quad,
    /// `--use-pytorch-cross-attention`.
    Pytorch,
    /// `--use-sage-attention`.
    Sage,
    /// `--use-flash-attention`.
    Flash,
}

impl Attention {
    /// (activation memory, step time) relative to the default backend. Assumptions chosen so
    /// that the memory-saving kernels trade time for a lower peak and the fast ones do the
    /// opposite a little; not measurements.
    pub fn factors(self) -> (f64, f64) {
        match self {
            Attention::Default | Attention::Pytorch => (1.0, 1.0),
            Attention::Split => (0.7, 1.3),
            Attention::Quad => (0.75, 1.4),
            Attention::Sage => (0.9, 0.8),
            Attention::Flash => (0.85, 0.9),
        }
    }
}

/// The server's VRAM mode (`cli_args.py`'s `vram_group`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VramMode {
    #[default]
    Normal,
    Low,
    No,
    High,
    GpuOnly,
}

/// The command line and environment the simulated server was started with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Launch {
    /// The ComfyUI flags as given, verbatim (shown in `system.argv` after the address flags).
    pub args: Vec<String>,
    /// `--reserve-vram GB`.
    pub reserve_vram: Option<f64>,
    /// `--vram-headroom GB` (2026).
    pub vram_headroom: f64,
    /// `--disable-dynamic-vram` (2026).
    pub disable_dynamic_vram: bool,
    /// `--enable-dynamic-vram` (2026).
    pub enable_dynamic_vram: bool,
    /// `--disable-pinned-memory`.
    pub disable_pinned_memory: bool,
    /// `--cache-none`: no node output is kept between prompts.
    pub cache_none: bool,
    pub attention: Attention,
    pub vram: VramMode,
    /// `--preview-method`: the server's default live-preview method (`none` without it); a
    /// prompt's `extra_data.preview_method` overrides it.
    pub preview_method: Option<String>,
    /// `PYTORCH_CUDA_ALLOC_CONF` as the server found it at start.
    pub alloc_conf: Option<String>,
}

impl Launch {
    /// Reads ComfyUI flags (`--reserve-vram 2`, `--reserve-vram=2`, `--cache-none`…) as
    /// `profile`'s `main.py` would: an unknown flag, a missing or non-numeric value or two
    /// flags of one exclusive group are refused with the reason.
    pub fn parse<S: AsRef<str>>(args: &[S], profile: Profile) -> Result<Launch, String> {
        let mut launch = Launch {
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            ..Launch::default()
        };
        let mut groups: Vec<(&str, &str)> = Vec::new();
        let mut it = args.iter().map(AsRef::as_ref);
        while let Some(arg) = it.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v)),
                _ => (arg, None),
            };
            let known = FLAGS
                .iter()
                .find(|f| f.name == name && (profile == Profile::Y2026 || !f.late))
                .ok_or_else(|| unknown(arg, profile))?;
            if let Some(group) = known.group {
                if let Some((_, other)) = groups.iter().find(|(g, n)| *g == group && *n != name) {
                    return Err(format!(
                        "argument {name}: not allowed with argument {other} (ComfyUI accepts one \
                         flag of that group)"
                    ));
                }
                groups.push((group, known.name));
            }
            if known.takes != Takes::Nothing && inline.is_none() && it.len() == 0 {
                return Err(format!("argument {name}: expected one argument"));
            }
            let value = match known.takes {
                Takes::Nothing => {
                    if inline.is_some() {
                        return Err(format!("argument {name}: ignored explicit argument"));
                    }
                    None
                }
                Takes::Choice(choices) => {
                    let v = inline.or_else(|| it.next()).unwrap_or_default();
                    if !choices.contains(&v) {
                        let list: Vec<String> = choices.iter().map(|c| format!("'{c}'")).collect();
                        return Err(format!(
                            "argument {name}: invalid choice: '{v}' (choose from {})",
                            list.join(", ")
                        ));
                    }
                    launch.preview_method = Some(v.to_string());
                    None
                }
                Takes::Gigabytes => {
                    let v = inline.or_else(|| it.next()).unwrap_or_default();
                    Some(
                        v.parse::<f64>()
                            .ok()
                            .filter(|g| g.is_finite() && *g >= 0.0)
                            .ok_or_else(|| {
                                format!(
                                    "argument {name}: invalid float value: '{v}' (a number of \
                                     gigabytes, e.g. {name} 2)"
                                )
                            })?,
                    )
                }
            };
            launch.apply(known.name, value);
        }
        Ok(launch)
    }

    fn apply(&mut self, name: &str, value: Option<f64>) {
        match name {
            "--reserve-vram" => self.reserve_vram = value,
            "--vram-headroom" => self.vram_headroom = value.unwrap_or(0.0),
            "--disable-dynamic-vram" => self.disable_dynamic_vram = true,
            "--enable-dynamic-vram" => self.enable_dynamic_vram = true,
            "--disable-pinned-memory" => self.disable_pinned_memory = true,
            "--cache-none" => self.cache_none = true,
            "--use-split-cross-attention" => self.attention = Attention::Split,
            "--use-quad-cross-attention" => self.attention = Attention::Quad,
            "--use-pytorch-cross-attention" => self.attention = Attention::Pytorch,
            "--use-sage-attention" => self.attention = Attention::Sage,
            "--use-flash-attention" => self.attention = Attention::Flash,
            "--lowvram" => self.vram = VramMode::Low,
            "--novram" => self.vram = VramMode::No,
            "--normalvram" => self.vram = VramMode::Normal,
            "--highvram" => self.vram = VramMode::High,
            "--gpu-only" => self.vram = VramMode::GpuOnly,
            _ => {}
        }
    }

    /// The same launch with `PYTORCH_CUDA_ALLOC_CONF` set to `conf` (as read from the
    /// environment at start; `None` = unset).
    pub fn with_alloc_conf(mut self, conf: Option<&str>) -> Launch {
        self.alloc_conf = conf.map(str::to_string);
        self
    }

    /// Whether `PYTORCH_CUDA_ALLOC_CONF` turns on `expandable_segments:True`.
    pub fn expandable_segments(&self) -> bool {
        self.alloc_conf.as_deref().is_some_and(|conf| {
            conf.split(',').any(|kv| {
                kv.split_once(':').is_some_and(|(k, v)| {
                    k.trim() == "expandable_segments" && v.trim().eq_ignore_ascii_case("true")
                })
            })
        })
    }

    /// Whether samplers send live previews for a prompt whose `extra_data.preview_method` is
    /// `requested`: the prompt's method unless absent or `default`, else the server's.
    pub fn previews(&self, requested: Option<&str>) -> bool {
        let method = match requested {
            Some(m) if m != "default" && PREVIEW_METHODS.contains(&m) => Some(m),
            _ => self.preview_method.as_deref(),
        };
        matches!(method, Some("auto" | "latent2rgb" | "taesd"))
    }

    /// Whether `--lowvram` is given.
    pub fn lowvram(&self) -> bool {
        self.vram == VramMode::Low
    }

    /// Whether weights stream with dynamic VRAM: a 2026 server unless
    /// `--disable-dynamic-vram`, `--highvram`, `--gpu-only` or `--novram` (or with
    /// `--enable-dynamic-vram`), as `enables_dynamic_vram()` decides.
    pub fn dynamic_vram(&self, profile: Profile) -> bool {
        profile == Profile::Y2026
            && (self.enable_dynamic_vram
                || !(self.disable_dynamic_vram
                    || matches!(self.vram, VramMode::High | VramMode::GpuOnly | VramMode::No)))
    }

    /// What the memory model honours for this launch under `profile`.
    pub fn knobs(&self, profile: Profile) -> Knobs {
        let (attention_memory, attention_time) = self.attention.factors();
        Knobs {
            dynamic: self.dynamic_vram(profile),
            // ComfyUI keeps 400 MB for other software by default; `--reserve-vram` replaces it.
            extra_reserve: self
                .reserve_vram
                .map(|gb| ((gb * GIB as f64) as u64).saturating_sub(DEFAULT_RESERVE))
                .unwrap_or(0),
            headroom: (self.vram_headroom * GIB as f64) as u64,
            attention_memory,
            attention_time,
            expandable_segments: self.expandable_segments(),
            // Pinned host memory is on by default since November 2025 (the 2026 profile).
            pinned: profile == Profile::Y2026 && !self.disable_pinned_memory,
            novram: self.vram == VramMode::No,
        }
    }
}

/// What ComfyUI reserves for other software without `--reserve-vram` (Linux).
const DEFAULT_RESERVE: u64 = 400 * MIB;

fn unknown(arg: &str, profile: Profile) -> String {
    let known: Vec<&str> = FLAGS
        .iter()
        .filter(|f| profile == Profile::Y2026 || !f.late)
        .map(|f| f.name)
        .collect();
    let late = FLAGS
        .iter()
        .any(|f| f.late && f.name == arg.split('=').next().unwrap_or(arg));
    let hint = if late {
        format!(" ({arg} is a 2026 flag: add --profile 2026)")
    } else {
        String::new()
    };
    format!(
        "unrecognized arguments: {arg}{hint} — ComfyUI's main.py would exit here; the \
         simulator ({} profile) models {}",
        profile.comfyui_version(),
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_as_comfyui_spells_them() {
        let l = Launch::parse(
            &[
                "--reserve-vram",
                "2",
                "--vram-headroom=1.5",
                "--disable-dynamic-vram",
                "--disable-pinned-memory",
                "--cache-none",
                "--use-sage-attention",
                "--lowvram",
            ],
            Profile::Y2026,
        )
        .unwrap();
        assert_eq!(l.reserve_vram, Some(2.0));
        assert_eq!(l.vram_headroom, 1.5);
        assert!(l.disable_dynamic_vram && l.disable_pinned_memory && l.cache_none);
        assert_eq!(l.attention, Attention::Sage);
        assert!(l.lowvram());
        assert_eq!(l.args[1], "2", "verbatim");
        let k = l.knobs(Profile::Y2026);
        assert!(!k.dynamic && !k.pinned);
        assert_eq!(k.extra_reserve, 2 * GIB - 400 * MIB);
        assert_eq!(k.headroom, GIB + GIB / 2);
    }

    #[test]
    fn bad_command_lines_are_refused_with_the_reason() {
        let e = Launch::parse(&["--turbo"], Profile::Y2026).unwrap_err();
        assert!(e.contains("unrecognized arguments: --turbo"), "{e}");
        assert!(e.contains("--reserve-vram"), "{e}");
        let e = Launch::parse(&["--vram-headroom", "1"], Profile::V0364).unwrap_err();
        assert!(e.contains("--profile 2026"), "{e}");
        let e = Launch::parse(&["--reserve-vram"], Profile::V0364).unwrap_err();
        assert!(e.contains("expected one argument"), "{e}");
        let e = Launch::parse(&["--reserve-vram", "lots"], Profile::V0364).unwrap_err();
        assert!(e.contains("invalid float value: 'lots'"), "{e}");
        let e = Launch::parse(
            &["--use-split-cross-attention", "--use-sage-attention"],
            Profile::V0364,
        )
        .unwrap_err();
        assert!(e.contains("not allowed with argument --use-split"), "{e}");
        assert!(Launch::parse(&["--lowvram", "--highvram"], Profile::V0364).is_err());
        assert!(Launch::parse(&["--cache-none=1"], Profile::V0364).is_err());
        let e = Launch::parse(&["--preview-method", "fancy"], Profile::V0364).unwrap_err();
        assert!(
            e.contains("invalid choice: 'fancy'") && e.contains("'taesd'"),
            "{e}"
        );
        assert!(Launch::parse(&["--preview-method"], Profile::V0364).is_err());
    }

    #[test]
    fn a_prompt_preview_method_overrides_the_server_default() {
        let none = Launch::default();
        assert!(!none.previews(None) && none.previews(Some("auto")));
        let auto = Launch::parse(&["--preview-method=auto"], Profile::V0364).unwrap();
        assert!(auto.previews(None) && auto.previews(Some("default")));
        assert!(!auto.previews(Some("none")));
        assert!(
            auto.previews(Some("bogus")),
            "an unknown override keeps the default"
        );
    }

    #[test]
    fn dynamic_vram_and_pinning_are_2026_defaults() {
        let none = Launch::default();
        assert!(none.knobs(Profile::Y2026).dynamic && none.knobs(Profile::Y2026).pinned);
        assert!(!none.knobs(Profile::V0364).dynamic && !none.knobs(Profile::V0364).pinned);
        for off in [
            "--highvram",
            "--novram",
            "--gpu-only",
            "--disable-dynamic-vram",
        ] {
            let l = Launch::parse(&[off], Profile::Y2026).unwrap();
            assert!(!l.dynamic_vram(Profile::Y2026), "{off}");
        }
        let on = Launch::parse(&["--highvram", "--enable-dynamic-vram"], Profile::Y2026).unwrap();
        assert!(on.dynamic_vram(Profile::Y2026));
        // --lowvram is a no-op under dynamic VRAM: it stays on.
        assert!(Launch::parse(&["--lowvram"], Profile::Y2026)
            .unwrap()
            .dynamic_vram(Profile::Y2026));
    }

    #[test]
    fn expandable_segments_come_from_the_allocator_conf() {
        let l = Launch::default();
        assert!(!l.expandable_segments());
        let l = l.with_alloc_conf(Some("max_split_size_mb:128,expandable_segments:True"));
        assert!(l.expandable_segments() && l.knobs(Profile::V0364).expandable_segments);
        let l = Launch::default().with_alloc_conf(Some("expandable_segments:False"));
        assert!(!l.expandable_segments());
    }
}
