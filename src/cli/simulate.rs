//! `comfy-bisect simulate`: run the in-tree ComfyUI simulator until Ctrl-C or SIGTERM, started
//! with ComfyUI's own memory flags (`--reserve-vram 2`, `--cache-none`…) after its own.

use super::common::{CliError, CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_sim::{parse_size, run_blocking, Allocator, Faults, Launch, Profile, SimConfig};
use std::net::{IpAddr, SocketAddr};

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Port to listen on (0 picks a free one; the URL is printed).
    #[arg(long, default_value_t = 8188)]
    pub port: u16,
    /// Address to bind (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    pub listen: IpAddr,
    /// Simulated GPU memory (e.g. 24GiB, 12GB, 8192MiB).
    #[arg(long, default_value = "24GiB")]
    pub vram: String,
    /// Simulated system RAM reported by /system_stats (a node whose images do not fit has the
    /// server killed, as the OOM killer would).
    #[arg(long, default_value = "64GiB")]
    pub ram: String,
    /// Comma-separated faults: crash-mid-run, drop-socket, slow-history[=MS], prompt-500,
    /// garbage-frames, socket-after-history, no-internal-logs, no-experiment-models,
    /// missing-output=CLASS|#ID, short-video=N, no-range, silent-socket, queue-hides,
    /// history-500, ws-flood=N, flat-product, nan-decode, crash-on=N[:N…], revive-after=MS,
    /// lowvram-after=N, pack-added-after=N, pack-removed-after=N, leak=SIZE (docs/simulator.md).
    #[arg(long, default_value = "")]
    pub faults: String,
    /// Real seconds per simulated second (1 = real time; 0 = as fast as possible).
    #[arg(long, default_value_t = 0.05)]
    pub time_scale: f64,
    /// PyTorch allocator backend to imitate: native or cudaMallocAsync (changes the OOM wording).
    #[arg(long, default_value = "native")]
    pub allocator: String,
    /// Imitate ComfyUI's --lowvram: more models loaded partially, fewer OOMs, slower steps.
    #[arg(long)]
    pub lowvram: bool,
    /// Act like an authenticating reverse proxy: answer 401 to every request without this
    /// header, 'Name: value' (to try --header).
    #[arg(long, value_name = "NAME: VALUE")]
    pub require_header: Option<String>,
    /// The ComfyUI folder whose `models/…` folders GET /internal/folder_paths names (default:
    /// a folder that exists nowhere, so the simulator looks like a remote server).
    #[arg(long, value_name = "DIR")]
    pub models_root: Option<std::path::PathBuf>,
    /// Which ComfyUI to answer as: 0.3.64 (the default) or 2026 (the jobs API, UUID-only
    /// prompt ids, asset ids in outputs, the 2026 /system_stats and /features; docs/simulator.md).
    #[arg(long, default_value = "0.3.64")]
    pub profile: String,
    /// ComfyUI launch flags, spelled as for main.py and shown verbatim in
    /// /system_stats system.argv: --reserve-vram GB, --vram-headroom GB, --disable-dynamic-vram,
    /// --enable-dynamic-vram, --disable-pinned-memory, --cache-none, --cache-classic,
    /// --use-{split,quad,pytorch}-cross-attention, --use-sage-attention, --use-flash-attention,
    /// --lowvram, --novram, --normalvram, --highvram, --gpu-only, --preview-method METHOD
    /// (docs/simulator.md). Any other flag is refused, as ComfyUI would.
    /// PYTORCH_CUDA_ALLOC_CONF is read from the environment.
    #[arg(
        value_name = "COMFYUI_FLAGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub comfyui_flags: Vec<String>,
}

/// Runs the simulator; exit 0 after Ctrl-C, 2 on bad arguments or when the port is taken.
pub fn run(args: Args) -> CliResult {
    let config = config_from(&args).or_usage()?;
    let bind = SocketAddr::new(args.listen, args.port);
    run_blocking(config, bind).map_err(|e| {
        CliError::usage(format!(
            "cannot run the simulator on {bind}: {e} (is the port already in use? try --port 0)"
        ))
    })?;
    Ok(exit::OK)
}

fn config_from(args: &Args) -> Result<SimConfig, String> {
    let vram = parse_size(&args.vram).map_err(|e| format!("--vram: {e}"))?;
    let ram = parse_size(&args.ram).map_err(|e| format!("--ram: {e}"))?;
    if vram < comfy_bisect_sim::GIB {
        return Err(format!(
            "--vram {}: at least 1GiB is needed for the CUDA context and a model",
            args.vram
        ));
    }
    let faults = Faults::parse(&args.faults)?;
    if !(args.time_scale.is_finite() && args.time_scale >= 0.0) {
        return Err(format!(
            "--time-scale {}: must be a number >= 0",
            args.time_scale
        ));
    }
    let allocator = Allocator::parse(&args.allocator).ok_or_else(|| {
        format!(
            "--allocator {}: use native or cudaMallocAsync",
            args.allocator
        )
    })?;
    let require_header = match &args.require_header {
        None => None,
        Some(h) => match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
            }
            _ => return Err(format!("--require-header {h:?}: write it as 'Name: value'")),
        },
    };
    let profile = Profile::parse(&args.profile).map_err(|e| format!("--profile: {e}"))?;
    let own = [
        "--port",
        "--listen",
        "--vram",
        "--ram",
        "--faults",
        "--time-scale",
        "--allocator",
        "--require-header",
        "--models-root",
        "--profile",
    ];
    if let Some(misplaced) = args
        .comfyui_flags
        .iter()
        .find(|f| own.contains(&f.split('=').next().unwrap_or(f)))
    {
        return Err(format!(
            "{misplaced} comes after the first ComfyUI flag, where it is read as one: put \
             simulate's own options (--port, --vram, --profile…) first, then the ComfyUI flags \
             (comfy-bisect simulate --port 8188 --reserve-vram 2)"
        ));
    }
    let mut flags = args.comfyui_flags.clone();
    if args.lowvram && !flags.iter().any(|f| f == "--lowvram") {
        flags.insert(0, "--lowvram".into());
    }
    let launch = Launch::parse(&flags, profile)?
        .with_alloc_conf(std::env::var("PYTORCH_CUDA_ALLOC_CONF").ok().as_deref());
    Ok(SimConfig {
        profile,
        vram_bytes: vram,
        ram_bytes: ram,
        faults,
        time_scale: args.time_scale,
        allocator,
        lowvram: launch.lowvram(),
        launch,
        require_header,
        models_root: args
            .models_root
            .clone()
            .unwrap_or_else(|| comfy_bisect_sim::SIM_MODELS_ROOT.into()),
        // Reported as `system.argv`, as ComfyUI reports its own `sys.argv`.
        process_argv: Some(std::env::args().collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(vram: &str, faults: &str) -> Args {
        Args {
            port: 0,
            listen: "127.0.0.1".parse().unwrap(),
            vram: vram.into(),
            ram: "64GiB".into(),
            faults: faults.into(),
            time_scale: 0.0,
            allocator: "cudaMallocAsync".into(),
            lowvram: true,
            require_header: None,
            models_root: None,
            profile: "0.3.64".into(),
            comfyui_flags: Vec::new(),
        }
    }

    #[test]
    fn arguments_become_a_config() {
        let c = config_from(&args("12GB", "drop-socket")).unwrap();
        assert_eq!(c.vram_bytes, 12 * comfy_bisect_sim::GIB);
        assert!(c.faults.drop_socket);
        assert_eq!(c.allocator, Allocator::CudaMallocAsync);
        assert!(c.lowvram);
        assert!(config_from(&args("512MiB", ""))
            .unwrap_err()
            .contains("at least 1GiB"));
        assert!(config_from(&args("24GiB", "meteor"))
            .unwrap_err()
            .contains("unknown fault"));
        assert_eq!(c.profile, Profile::V0364);
        let mut a = args("12GB", "");
        a.profile = "2026".into();
        assert_eq!(config_from(&a).unwrap().profile, Profile::Y2026);
        a.profile = "0.9".into();
        assert!(config_from(&a)
            .unwrap_err()
            .starts_with("--profile: unknown"));
    }

    #[test]
    fn comfyui_flags_reach_the_launch_verbatim() {
        let mut a = args("12GB", "");
        a.profile = "2026".into();
        a.comfyui_flags = vec!["--reserve-vram".into(), "2".into(), "--cache-none".into()];
        let c = config_from(&a).unwrap();
        assert_eq!(
            c.launch.args,
            ["--lowvram", "--reserve-vram", "2", "--cache-none"]
        );
        assert!(c.launch.cache_none && c.lowvram);
        a.comfyui_flags = vec!["--lowvram".into(), "--highvram".into()];
        assert!(config_from(&a).unwrap_err().contains("not allowed with"));
        a.comfyui_flags = vec!["--warp-drive".into()];
        assert!(config_from(&a)
            .unwrap_err()
            .contains("unrecognized arguments: --warp-drive"));
    }
}
