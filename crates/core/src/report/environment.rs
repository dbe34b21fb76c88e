//! The report's environment section, from a `/system_stats` answer: versions, device, memory and
//! the launch arguments, with the memory-relevant ones called out and explained.

use super::model::{Environment, Gpu, MemoryFlag};
use crate::comfy::SystemStats;
use crate::units::to_mib;

/// A launch flag that changes memory behaviour: its name, whether it takes a value, and what it
/// does (ComfyUI's `comfy/cli_args.py`).
struct KnownFlag {
    flag: &'static str,
    takes_value: bool,
    effect: &'static str,
}

const fn f(flag: &'static str, takes_value: bool, effect: &'static str) -> KnownFlag {
    KnownFlag {
        flag,
        takes_value,
        effect,
    }
}

/// Memory-relevant ComfyUI launch flags.
const MEMORY_FLAGS: &[KnownFlag] = &[
    f(
        "--gpu-only",
        false,
        "keeps everything (text encoders and VAE too) on the GPU",
    ),
    f(
        "--highvram",
        false,
        "keeps models in VRAM after use instead of offloading them to RAM",
    ),
    f(
        "--normalvram",
        false,
        "forces normal VRAM mode even if low-VRAM mode would be chosen",
    ),
    f(
        "--lowvram",
        false,
        "splits the diffusion model into parts to use less VRAM",
    ),
    f(
        "--novram",
        false,
        "keeps weights in RAM and streams them (less VRAM than --lowvram)",
    ),
    f(
        "--cpu",
        false,
        "runs on the CPU: the \"VRAM\" numbers are system RAM",
    ),
    f(
        "--reserve-vram",
        true,
        "keeps this many GB of VRAM free for the OS and other programs",
    ),
    f(
        "--vram-headroom",
        true,
        "keeps extra VRAM free when deciding what to offload",
    ),
    f(
        "--disable-smart-memory",
        false,
        "unloads models to RAM after use instead of keeping them in VRAM",
    ),
    f(
        "--cache-classic",
        false,
        "node-output cache: classic (outputs of the last prompt kept)",
    ),
    f(
        "--cache-lru",
        true,
        "node-output cache: keeps up to N node results between prompts",
    ),
    f(
        "--cache-ram",
        true,
        "node-output cache: evicts by RAM pressure",
    ),
    f(
        "--cache-none",
        false,
        "node-output cache off: less RAM held, everything re-executes",
    ),
    f(
        "--use-split-cross-attention",
        false,
        "attention: split cross attention (smaller workspace, slower)",
    ),
    f(
        "--use-quad-cross-attention",
        false,
        "attention: sub-quadratic cross attention",
    ),
    f(
        "--use-pytorch-cross-attention",
        false,
        "attention: PyTorch scaled-dot-product attention",
    ),
    f(
        "--use-sage-attention",
        false,
        "attention: SageAttention kernels",
    ),
    f(
        "--use-flash-attention",
        false,
        "attention: FlashAttention kernels",
    ),
    f("--disable-xformers", false, "attention: xformers not used"),
    f(
        "--force-upcast-attention",
        false,
        "attention computed in fp32 (more memory)",
    ),
    f(
        "--dont-upcast-attention",
        false,
        "attention not upcast to fp32 (less memory)",
    ),
    f("--cuda-malloc", false, "PyTorch allocator: cudaMallocAsync"),
    f(
        "--disable-cuda-malloc",
        false,
        "PyTorch allocator: native caching allocator",
    ),
    f(
        "--async-offload",
        false,
        "offloads weights asynchronously (extra streams and buffers)",
    ),
    f(
        "--disable-pinned-memory",
        false,
        "no pinned host memory for weight transfers",
    ),
    f(
        "--disable-mmap",
        false,
        "model files are read into RAM instead of memory-mapped",
    ),
    f("--mmap-torch-files", false, "memory-maps .pt/.ckpt files"),
    f("--force-fp16", false, "weights and compute in fp16"),
    f(
        "--force-fp32",
        false,
        "weights and compute in fp32 (twice the memory of fp16)",
    ),
    f("--fp16-unet", false, "diffusion model weights in fp16"),
    f("--bf16-unet", false, "diffusion model weights in bf16"),
    f("--fp32-unet", false, "diffusion model weights in fp32"),
    f("--fp64-unet", false, "diffusion model weights in fp64"),
    f(
        "--fp8_e4m3fn-unet",
        false,
        "diffusion model weights in fp8 (e4m3fn)",
    ),
    f(
        "--fp8_e5m2-unet",
        false,
        "diffusion model weights in fp8 (e5m2)",
    ),
    f(
        "--fp8_e8m0fnu-unet",
        false,
        "diffusion model weights in fp8 (e8m0fnu)",
    ),
    f("--fp16-vae", false, "VAE in fp16"),
    f("--fp32-vae", false, "VAE in fp32 (more memory at decode)"),
    f("--bf16-vae", false, "VAE in bf16"),
    f(
        "--cpu-vae",
        false,
        "VAE runs on the CPU (decode uses RAM, not VRAM)",
    ),
    f(
        "--fp8_e4m3fn-text-enc",
        false,
        "text encoder weights in fp8 (e4m3fn)",
    ),
    f(
        "--fp8_e5m2-text-enc",
        false,
        "text encoder weights in fp8 (e5m2)",
    ),
    f("--fp16-text-enc", false, "text encoder weights in fp16"),
    f("--fp32-text-enc", false, "text encoder weights in fp32"),
    f("--bf16-text-enc", false, "text encoder weights in bf16"),
    f(
        "--preview-method",
        true,
        "latent previews during sampling (TAESD previews use VRAM)",
    ),
    f(
        "--fast",
        false,
        "experimental speed-ups (fp8 matmul, cuBLAS ops) that change memory use",
    ),
    f("--cuda-device", true, "which GPU ComfyUI uses"),
    f("--directml", false, "DirectML backend"),
];

/// Builds the environment section from a `/system_stats` answer. `runs` is `cold`, `warm`,
/// `mixed` or `unknown`.
pub(crate) fn environment(stats: &SystemStats, runs: &str) -> Environment {
    let system = &stats.system;
    let non_empty = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
    let extra_str = |key: &str| {
        system
            .extra
            .get(key)
            .and_then(|v| v.as_str())
            .and_then(non_empty)
    };
    let gpu = stats.primary().map(|d| {
        let (name, allocator) = split_device_name(&d.name);
        Gpu {
            name,
            kind: d.kind.clone(),
            index: d.index,
            allocator,
            vram_total_mib: (d.vram_total > 0).then(|| to_mib(d.vram_total)),
        }
    });
    Environment {
        comfyui_version: non_empty(&system.comfyui_version),
        frontend_version: extra_str("required_frontend_version"),
        pytorch_version: non_empty(&system.pytorch_version),
        python_version: system
            .python_version
            .split_whitespace()
            .next()
            .map(str::to_string),
        python_version_full: non_empty(&system.python_version),
        embedded_python: system
            .extra
            .get("embedded_python")
            .and_then(|v| v.as_bool()),
        os: non_empty(&system.os),
        gpu,
        ram_total_mib: (system.ram_total > 0).then(|| to_mib(system.ram_total)),
        argv: system.argv.clone(),
        memory_flags: memory_flags(&system.argv),
        runs: runs.to_string(),
        fingerprint: None,
        node_packs: Vec::new(),
        pack_versions_from: None,
        packs_used: None,
        // Only servers with the 2026 memory machinery (dynamic VRAM, comfy-aimdo) get the row.
        memory_mode: Some(crate::comfy::fingerprint::memory_mode(stats)).filter(|m| {
            m.comfy_aimdo.is_some()
                || m.comfy_kitchen.is_some()
                || m.dynamic_vram.starts_with("on")
                || m.dynamic_vram.starts_with("default")
        }),
        // One device needs no list: the GPU row names it.
        devices: match stats.devices.len() {
            0 | 1 => Vec::new(),
            _ => stats
                .devices
                .iter()
                .map(|d| format!("{} ({})", d.name, d.kind))
                .collect(),
        },
        deploy_environment: system
            .extra
            .get("deploy_environment")
            .and_then(|v| v.as_str())
            .map(str::to_string),
    }
}

/// Splits `"cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync"` into the card's name and the
/// allocator backend.
pub(crate) fn split_device_name(raw: &str) -> (String, Option<String>) {
    let (name, allocator) = match raw.rsplit_once(" : ") {
        Some((n, a)) if !a.trim().is_empty() => (n.trim(), Some(a.trim().to_string())),
        _ => (raw.trim(), None),
    };
    let name = match name.split_once(' ') {
        Some((prefix, rest)) if prefix.contains(':') && !rest.trim().is_empty() => rest.trim(),
        _ => name,
    };
    (name.to_string(), allocator)
}

/// The memory-relevant flags in `argv`, in the order given. Unknown `--cache-*` flags and flags
/// mentioning attention are kept too (their effect says they are not known to this tool).
pub(crate) fn memory_flags(argv: &[String]) -> Vec<MemoryFlag> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let token = &argv[i];
        i += 1;
        if !token.starts_with("--") {
            continue;
        }
        let (name, inline_value) = match token.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (token.as_str(), None),
        };
        let next_value = |i: usize| {
            argv.get(i)
                .filter(|v| !v.starts_with("--"))
                .map(|v| v.to_string())
        };
        if let Some(known) = MEMORY_FLAGS.iter().find(|k| k.flag == name) {
            let value = if inline_value.is_some() {
                inline_value
            } else if known.takes_value {
                let v = next_value(i);
                if v.is_some() {
                    i += 1;
                }
                v
            } else {
                None
            };
            out.push(MemoryFlag {
                flag: name.to_string(),
                value,
                effect: known.effect.to_string(),
            });
        } else if name.starts_with("--cache-") || name.contains("attention") {
            out.push(MemoryFlag {
                flag: name.to_string(),
                value: inline_value,
                effect: "cache or attention flag this tool does not know; may change memory use"
                    .to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_2026_server_gets_its_memory_mode_devices_and_deploy_environment() {
        let stats: SystemStats = serde_json::from_value(serde_json::json!({
            "system": {"os": "linux", "comfyui_version": "0.38.0", "argv": ["main.py", "--reserve-vram", "2"],
                       "comfy_package_versions": [{"name": "comfy-aimdo", "installed": "0.5.5", "required": "0.5.5"}],
                       "deploy_environment": "desktop"},
            "devices": [
                {"name": "cuda:1 B : cudaMallocAsync", "type": "cuda", "index": 1, "vram_total": 8, "vram_free": 8},
                {"name": "cuda:0 A : cudaMallocAsync", "type": "cuda", "index": 0, "vram_total": 16, "vram_free": 16}
            ]
        }))
        .unwrap();
        let env = environment(&stats, "cold");
        let m = env.memory_mode.expect("a 2026 server has a memory mode");
        assert_eq!(m.reserve_vram_gb.as_deref(), Some("2"));
        assert_eq!(m.comfy_aimdo.as_deref(), Some("0.5.5"));
        assert_eq!(env.devices.len(), 2);
        assert!(
            env.devices[0].starts_with("cuda:1 B"),
            "the primary comes first"
        );
        assert_eq!(
            env.gpu.unwrap().index,
            Some(1),
            "the primary is the one measured"
        );
        assert_eq!(env.deploy_environment.as_deref(), Some("desktop"));
    }

    #[test]
    fn environment_from_the_captured_system_stats() {
        let text = std::fs::read_to_string(format!(
            "{}/comfyui/GET__system_stats.final.json",
            crate::FIXTURES
        ))
        .expect("fixture tests/fixtures/comfyui/GET__system_stats.final.json");
        let stats: SystemStats = serde_json::from_str(&text).unwrap();
        let env = environment(&stats, "cold");
        assert_eq!(env.comfyui_version.as_deref(), Some("0.3.64"));
        assert!(env.memory_mode.is_none(), "0.3.64 has no dynamic VRAM");
        assert!(env.devices.is_empty() && env.deploy_environment.is_none());
        assert_eq!(env.frontend_version.as_deref(), Some("1.27.10"));
        assert_eq!(env.pytorch_version.as_deref(), Some("2.15.0+cu132"));
        assert_eq!(env.python_version.as_deref(), Some("3.11.7"));
        assert_eq!(env.os.as_deref(), Some("posix"));
        assert_eq!(env.embedded_python, Some(false));
        let gpu = env.gpu.unwrap();
        assert_eq!(gpu.name, "cpu");
        assert_eq!(gpu.kind, "cpu");
        assert_eq!(gpu.index, None);
        assert!((gpu.vram_total_mib.unwrap() - 25276502016.0 / 1048576.0).abs() < 1e-6);
        assert_eq!(env.memory_flags.len(), 1);
        assert_eq!(env.memory_flags[0].flag, "--cpu");
        assert_eq!(env.runs, "cold");
    }

    #[test]
    fn device_name_loses_index_prefix_and_keeps_allocator() {
        assert_eq!(
            split_device_name("cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync"),
            (
                "NVIDIA GeForce RTX 4090".to_string(),
                Some("cudaMallocAsync".to_string())
            )
        );
        assert_eq!(split_device_name("mps"), ("mps".to_string(), None));
        assert_eq!(
            split_device_name("cuda:1 AMD Radeon RX 7900 XTX [ZLUDA] : native"),
            (
                "AMD Radeon RX 7900 XTX [ZLUDA]".to_string(),
                Some("native".to_string())
            )
        );
    }

    #[test]
    fn memory_flags_with_values_and_unknown_cache_flags() {
        let flags = memory_flags(&argv(
            "main.py --listen 0.0.0.0 --lowvram --reserve-vram 1.5 --cache-lru=8 \
             --use-sage-attention --cache-future --disable-smart-memory --preview-method none --port 8188",
        ));
        let names: Vec<&str> = flags.iter().map(|f| f.flag.as_str()).collect();
        assert_eq!(
            names,
            [
                "--lowvram",
                "--reserve-vram",
                "--cache-lru",
                "--use-sage-attention",
                "--cache-future",
                "--disable-smart-memory",
                "--preview-method"
            ]
        );
        assert_eq!(flags[1].value.as_deref(), Some("1.5"));
        assert_eq!(flags[2].value.as_deref(), Some("8"));
        assert_eq!(flags[6].value.as_deref(), Some("none"));
        assert!(flags[4].effect.contains("does not know"));
    }

    #[test]
    fn value_flag_at_the_end_or_before_another_flag_has_no_value() {
        let flags = memory_flags(&argv("main.py --reserve-vram --novram"));
        assert_eq!(flags[0].value, None);
        assert_eq!(flags[1].flag, "--novram");
    }
}
