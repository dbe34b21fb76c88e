//! `comfy-bisect demo`: the README's first command. Starts the embedded ComfyUI simulator on a
//! free loopback port, bisects the example workflows on it (no GPU, no ComfyUI needed), writes
//! the sessions and reports under the runs folder and prints where. The third example runs on
//! the simulator's 2026 profile (dynamic VRAM), where its verdict is memory pressure first.

use super::bisect::run_session;
use super::common::runtime;
use super::common::{read_loaded_with, CliError, CliResult, OrExit};
use super::session_args::{LadderArgs, SessionArgs};
use crate::error::exit;
use comfy_bisect_core::app::{StartOptions, Target};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::session::prepare::LadderConfig;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, Profile, SimConfig, MIB};
use std::path::PathBuf;

/// An example workflow and the simulated card it runs on.
pub struct DemoCase {
    /// Session workflow name.
    pub name: &'static str,
    /// The example's file in `workflows/`, without `.json`.
    pub file: &'static str,
    /// The API-format JSON (that file).
    pub json: &'static str,
    /// Simulated VRAM, chosen so the example fails part-way up its ladder.
    pub vram_bytes: u64,
    /// What the card stands for, in words.
    pub card: &'static str,
    /// The server the simulator plays.
    pub profile: Profile,
    /// Edits to the example's literal inputs: (node id, input, value).
    pub edits: &'static [(&'static str, &'static str, i64)],
    /// `--min-frames` for this example (None: the command's).
    pub min_frames: Option<u32>,
    /// The least time scale the example needs: a verdict read from step times needs a clock.
    pub min_time_scale: f64,
    /// Bisect with `--strict` (memory pressure and fallbacks count as failures).
    pub strict: bool,
}

/// The examples of `workflows/`, built into the binary so `demo` works from any folder.
pub fn cases() -> Vec<DemoCase> {
    vec![
        DemoCase {
            name: "sd15_txt2img_lora_upscale",
            file: "sd15_txt2img_lora_upscale",
            json: include_str!("../../workflows/sd15_txt2img_lora_upscale.json"),
            vram_bytes: DEMO_SD15_VRAM_MIB * MIB,
            card: "a 6 GB card",
            profile: Profile::V0364,
            edits: &[],
            min_frames: None,
            min_time_scale: 0.0,
            strict: false,
        },
        DemoCase {
            name: "wan22_t2v_experts_lora_cache_rife",
            file: "wan22_t2v_experts_lora_cache_rife",
            json: include_str!("../../workflows/wan22_t2v_experts_lora_cache_rife.json"),
            vram_bytes: DEMO_WAN_VRAM_MIB * MIB,
            card: "a 56 GB card",
            profile: Profile::V0364,
            edits: &[],
            min_frames: None,
            min_time_scale: 0.0,
            strict: false,
        },
        // The same Wan example, longer (161 frames, 8 steps), on a 2026 server: no step runs
        // out of memory until its step cache, but at 161 frames the weights stream and each
        // step slows beyond what the added frames explain; with --strict that is the verdict.
        DemoCase {
            name: "wan22_t2v_2026_dynamic_vram",
            file: "wan22_t2v_experts_lora_cache_rife",
            json: include_str!("../../workflows/wan22_t2v_experts_lora_cache_rife.json"),
            vram_bytes: DEMO_WAN_2026_VRAM_MIB * MIB,
            card: "a 44 GB card, ComfyUI 2026 with dynamic VRAM",
            profile: Profile::Y2026,
            edits: &[
                ("13", "length", 161),
                ("14", "steps", 8),
                ("14", "end_at_step", 4),
                ("15", "steps", 8),
                ("15", "start_at_step", 4),
            ],
            min_frames: Some(129),
            min_time_scale: 0.005,
            strict: true,
        },
    ]
}

/// The example with its edits applied.
fn edited(case: &DemoCase) -> Result<Workflow, String> {
    let mut v: serde_json::Value =
        serde_json::from_str(case.json).map_err(|e| format!("{}: {e}", case.name))?;
    for (node, input, value) in case.edits {
        v[*node]["inputs"][*input] = (*value).into();
    }
    Workflow::from_json_str(&v.to_string(), case.name).map_err(|e| e.to_string())
}

/// Simulated VRAM for the SD1.5 example (MiB).
pub(crate) const DEMO_SD15_VRAM_MIB: u64 = 6144;
/// Simulated VRAM for the Wan 2.2 example (MiB).
pub(crate) const DEMO_WAN_VRAM_MIB: u64 = 57344;
/// Simulated VRAM for the Wan 2.2 example on the 2026 profile (MiB): 129 frames at 720p fit
/// whole, 161 stream about half the weights.
pub(crate) const DEMO_WAN_2026_VRAM_MIB: u64 = 44 * 1024;

/// One simulated server and the workflows bisected on it.
struct Group {
    vram: u64,
    card: String,
    profile: Profile,
    min_frames: Option<u32>,
    time_scale: f64,
    strict: bool,
    targets: Vec<Target>,
}

/// The simulator's node definitions (for converting UI workflows given to `demo`).
fn sim_defs() -> Result<comfy_bisect_core::nodedefs::NodeDefs, String> {
    let value: serde_json::Value = serde_json::from_str(comfy_bisect_sim::nodes::OBJECT_INFO)
        .map_err(|e| format!("the simulator's node definitions: {e}"))?;
    comfy_bisect_core::nodedefs::NodeDefs::from_value(&value)
        .ok_or_else(|| "the simulator's node definitions are not an object of classes".to_string())
}

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bisect these workflows instead of the built-in examples (on one simulated card, --vram).
    pub workflows: Vec<PathBuf>,
    /// Simulated VRAM for your own workflows (e.g. 12GiB).
    #[arg(long, default_value = "12GiB")]
    pub vram: String,
    /// Real seconds per simulated second (0 = as fast as possible).
    #[arg(long, default_value_t = 0.002)]
    pub time_scale: f64,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub ladder: LadderArgs,
}

/// Runs `demo`.
pub fn run(args: Args) -> CliResult {
    let options = args.session.options(&args.ladder).or_usage()?;
    let config = LadderConfig {
        catalog: Catalog::builtin(),
        options: args.ladder.plan_options(),
        controls: args.session.controls,
    };
    let mut groups: Vec<Group> = Vec::new();
    if args.workflows.is_empty() {
        for case in cases() {
            let workflow = edited(&case).or_failed()?;
            let source = format!(
                "workflows/{}.json (built in{})",
                case.file,
                if case.edits.is_empty() {
                    ""
                } else {
                    ", edited"
                }
            );
            groups.push(Group {
                vram: case.vram_bytes,
                card: case.card.to_string(),
                profile: case.profile,
                min_frames: case.min_frames,
                time_scale: args.time_scale.max(case.min_time_scale),
                strict: case.strict || options.strict,
                targets: vec![Target {
                    name: case.name.to_string(),
                    source,
                    source_file: None,
                    workflow,
                    ui: None,
                }],
            });
        }
    } else {
        let vram = comfy_bisect_sim::parse_size(&args.vram)
            .map_err(|e| CliError::usage(format!("--vram: {e}")))?;
        let mut targets = Vec::new();
        let mut names = Vec::new();
        for path in &args.workflows {
            // UI workflows are converted with the simulator's node definitions.
            let loaded = read_loaded_with(path, sim_defs).or_usage()?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = comfy_bisect_core::session::setup::unique_name(&stem, &names);
            names.push(name.clone());
            targets.push(Target {
                name,
                source: path.display().to_string(),
                source_file: loaded.source,
                workflow: loaded.workflow,
                ui: loaded.ui,
            });
        }
        groups.push(Group {
            vram,
            card: args.vram.clone(),
            profile: Profile::V0364,
            min_frames: None,
            time_scale: args.time_scale,
            strict: options.strict,
            targets,
        });
    }
    let rt = runtime()?;
    let mut worst = exit::OK;
    for group in groups {
        let Group {
            vram,
            card,
            profile,
            min_frames,
            time_scale,
            strict,
            targets,
        } = group;
        let sim_config = SimConfig::default()
            .with_profile(profile)
            .with_vram_bytes(vram)
            .with_time_scale(time_scale);
        let sim = rt
            .block_on(start(
                sim_config,
                "127.0.0.1:0".parse().expect("loopback address"),
            ))
            .map_err(|e| {
                CliError::failed(format!(
                    "cannot start the simulator on a loopback port: {e}"
                ))
            })?;
        eprintln!(
            "demo: ComfyUI simulator on {} with {} MiB of VRAM ({card})",
            sim.base_url(),
            vram / MIB
        );
        // The same client set-up as every other command (--header, --request-timeout).
        let client = args.session.connect.client(&sim.base_url())?;
        // One card's failure is said here; the next card's examples still run.
        let mut ladder = config.clone();
        if let Some(f) = min_frames {
            ladder.options.min_frames = f;
        }
        let mut session = options.clone();
        session.strict = strict;
        let start = StartOptions {
            runs_dir: args.session.runs_dir.clone(),
            session,
            ladder,
        };
        let code = run_session(&rt, client, start, targets, args.session.quiet)
            .unwrap_or_else(CliError::report);
        rt.block_on(sim.shutdown());
        if code == exit::INTERRUPTED {
            return Ok(code);
        }
        if code != exit::OK {
            worst = code;
        }
    }
    println!(
        "demo: sessions and reports are under {} (`comfy-bisect runs --runs-dir {}` lists them)",
        args.session.runs_dir.display(),
        args.session.runs_dir.display()
    );
    Ok(worst)
}
