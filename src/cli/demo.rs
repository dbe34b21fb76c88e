//! `comfy-bisect demo`: the README's first command. Starts the embedded ComfyUI simulator on a
//! free loopback port, bisects the example workflows on it (no GPU, no ComfyUI needed), writes
//! the sessions and reports under the runs folder and prints where.

use super::bisect::{run_session, LadderArgs, SessionArgs};
use super::common::runtime;
use super::common::{read_loaded_with, CliError, CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_core::app::{StartOptions, Target};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::session::prepare::LadderConfig;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, SimConfig, MIB};
use std::path::PathBuf;

/// An example workflow and the simulated card it runs on.
pub struct DemoCase {
    /// Session workflow name.
    pub name: &'static str,
    /// The API-format JSON (the file in `workflows/`).
    pub json: &'static str,
    /// Simulated VRAM, chosen so the example fails part-way up its ladder.
    pub vram_bytes: u64,
    /// What the card stands for, in words.
    pub card: &'static str,
}

/// The examples of `workflows/`, built into the binary so `demo` works from any folder.
pub fn cases() -> Vec<DemoCase> {
    vec![
        DemoCase {
            name: "sd15_txt2img_lora_upscale",
            json: include_str!("../../workflows/sd15_txt2img_lora_upscale.json"),
            vram_bytes: DEMO_SD15_VRAM_MIB * MIB,
            card: "a 6 GB card",
        },
        DemoCase {
            name: "wan22_t2v_experts_lora_cache_rife",
            json: include_str!("../../workflows/wan22_t2v_experts_lora_cache_rife.json"),
            vram_bytes: DEMO_WAN_VRAM_MIB * MIB,
            card: "a 56 GB card",
        },
    ]
}

/// Simulated VRAM for the SD1.5 example (MiB).
pub(crate) const DEMO_SD15_VRAM_MIB: u64 = 6144;
/// Simulated VRAM for the Wan 2.2 example (MiB).
pub(crate) const DEMO_WAN_VRAM_MIB: u64 = 57344;

/// One simulated card and the workflows bisected on it: (VRAM bytes, card, (name, source, workflow)).
type Group = (u64, String, Vec<Target>);

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
            let workflow = Workflow::from_json_str(case.json, case.name).or_failed()?;
            groups.push((
                case.vram_bytes,
                case.card.to_string(),
                vec![Target {
                    name: case.name.to_string(),
                    source: format!("workflows/{}.json (built in)", case.name),
                    workflow,
                    ui: None,
                }],
            ));
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
                workflow: loaded.workflow,
                ui: loaded.ui,
            });
        }
        groups.push((vram, args.vram.clone(), targets));
    }
    let rt = runtime()?;
    let mut worst = exit::OK;
    for (vram, card, targets) in groups {
        let sim_config = SimConfig::default()
            .with_vram_bytes(vram)
            .with_time_scale(args.time_scale);
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
        let start = StartOptions {
            runs_dir: args.session.runs_dir.clone(),
            session: options.clone(),
            ladder: config.clone(),
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
