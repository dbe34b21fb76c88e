//! The environment fingerprint of a server, from what the server says about itself:
//! `/system_stats` (ComfyUI, frontend, PyTorch and Python versions, OS, devices, launch
//! arguments), `/object_info` (the custom node packs, from each class's `python_module`
//! `custom_nodes.<pack>`: class count and a hash of their definitions), ComfyUI-Manager's
//! installed-pack list when that extension answers (the packs' versions), and the model
//! folders' listings (`/experiment/models/{folder}`: names and sizes) and where those folders
//! are on the server's machine (`/internal/folder_paths`, for hashing the model files when the
//! server runs on this machine).
//!
//! The short [`Fingerprint::id`] covers everything that changes how a workflow runs (versions,
//! devices, launch arguments, node packs and core node definitions); the model listings are
//! kept beside it with their own hash, because a workflow that saves a file into a model
//! folder changes them without changing the server.
//!
//! Building is pure ([`build`], `node_sets`, `apply_manager_versions`, [`diff`]);
//! [`Fingerprinter`] fetches the answers, and `/object_info` only when something suggests the
//! node set may have changed (see there).

use super::protocol::{routes, SystemStats};
use super::{Client, ClientError};
use crate::workflow::{canonical_json, sha256_hex};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Length of the short fingerprint id (hex digits of a sha256).
pub(crate) const ID_LEN: usize = 12;
/// `python_module` prefix of the classes of a custom node pack.
pub(crate) const CUSTOM_NODES_PREFIX: &str = "custom_nodes.";
/// What the report says for a pack whose version the server does not expose.
pub(crate) const VERSION_UNKNOWN: &str = "version unknown";

/// The environment of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Short id: the first `ID_LEN` hex digits of the sha256 of the canonical JSON of the
    /// fields below except `models`, `models_sha256`, `model_paths` and `object_info_sha256`.
    pub id: String,
    /// ComfyUI version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comfyui_version: Option<String>,
    /// The frontend version the server requires (`required_frontend_version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_version: Option<String>,
    /// PyTorch version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch_version: Option<String>,
    /// Python `sys.version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_version: Option<String>,
    /// `os` as the server reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Every device: name, type, index, total memory.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// Launch arguments.
    #[serde(default)]
    pub argv: Vec<String>,
    /// The classes that are not from a custom node pack (ComfyUI's own nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_nodes: Option<NodeSet>,
    /// Custom node packs, by name.
    #[serde(default)]
    pub packs: Vec<NodePack>,
    /// Where the packs' versions came from (`ComfyUI-Manager`), when anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_versions_from: Option<String>,
    /// Model folders and their files (names and sizes), as the server lists them.
    #[serde(default)]
    pub models: Vec<ModelFolder>,
    /// sha256 of the canonical JSON of `models`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_sha256: Option<String>,
    /// The server's model folders on its own machine, per folder kind
    /// (`GET /internal/folder_paths`); empty when the server does not say.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_paths: BTreeMap<String, Vec<String>>,
    /// sha256 of the raw `/object_info` body (lets the next fingerprint skip parsing it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_info_sha256: Option<String>,
    /// Installed and required versions of the comfy* packages (`system.comfy_package_versions`,
    /// late-2026 servers): comfy-aimdo, comfy-kitchen, the frontend …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comfy_packages: Vec<ComfyPackage>,
    /// `system.deploy_environment` (`local-git`, `desktop`, … on late-2026 servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_environment: Option<String>,
    /// How the server manages memory (dynamic VRAM, pinned memory, offload, cache), derived
    /// from the version, the primary device, the launch arguments and the comfy packages; not
    /// part of the id (those fields are), but named in `diff` when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mode: Option<MemoryMode>,
}

/// One entry of `system.comfy_package_versions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComfyPackage {
    /// The package (`comfy-aimdo`, `comfy-kitchen`, `comfyui-frontend-package` …).
    pub name: String,
    /// The installed version; none when it is not installed.
    #[serde(default)]
    pub installed: Option<String>,
    /// The version requirements.txt asks for.
    #[serde(default)]
    pub required: Option<String>,
}

/// The memory mode of a server: each knob as the report shows it (`on (default …)`,
/// `off (--cpu)`, `default`, a flag's value), from what the server says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryMode {
    /// Dynamic VRAM (comfy-aimdo): on by default on NVIDIA from ComfyUI 0.15.0, off with
    /// `--disable-dynamic-vram`, `--highvram`, `--gpu-only`, `--novram`, `--cpu` or
    /// `--disable-smart-memory`.
    pub dynamic_vram: String,
    /// Pinned host memory: `default`, or `off (--disable-pinned-memory)`.
    pub pinned_memory: String,
    /// Async weight offload: `default`, `off (--disable-async-offload)`, or its streams.
    pub async_offload: String,
    /// The cache mode flag (`--cache-ram …`, `--cache-classic`, `--cache-lru N`,
    /// `--cache-none`, `--high-ram`), or `default`.
    pub cache: String,
    /// `--reserve-vram` in GB, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_vram_gb: Option<String>,
    /// `--vram-headroom` in GB, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_headroom_gb: Option<String>,
    /// The installed comfy-aimdo (from `comfy_package_versions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comfy_aimdo: Option<String>,
    /// The installed comfy-kitchen (from `comfy_package_versions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comfy_kitchen: Option<String>,
}

/// Launch flags that turn dynamic VRAM off (`comfy/cli_args.py`, comfy/model_management.py).
const DYNAMIC_VRAM_OFF: &[&str] = &[
    "--disable-dynamic-vram",
    "--highvram",
    "--gpu-only",
    "--novram",
    "--cpu",
    "--disable-smart-memory",
];

/// Cache mode flags (one at most: a mutually exclusive group in `comfy/cli_args.py`).
const CACHE_FLAGS: &[&str] = &[
    "--cache-ram",
    "--cache-classic",
    "--cache-lru",
    "--cache-none",
    "--high-ram",
];

/// `(major, minor)` of a version string such as `0.38.0` or `v0.15.1`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((major, minor))
}

/// The values that follow `flag` in `argv` (until the next `--` argument), or None when the
/// flag is absent. `--flag=value` counts too.
fn flag_values(argv: &[String], flag: &str) -> Option<Vec<String>> {
    let prefix = format!("{flag}=");
    let i = argv
        .iter()
        .position(|a| a == flag || a.starts_with(&prefix))?;
    if let Some(v) = argv[i].strip_prefix(&prefix) {
        return Some(vec![v.to_string()]);
    }
    Some(
        argv[i + 1..]
            .iter()
            .take_while(|a| !a.starts_with("--"))
            .cloned()
            .collect(),
    )
}

/// The memory mode of a server from its `/system_stats` (see [`MemoryMode`]).
pub(crate) fn memory_mode(stats: &SystemStats) -> MemoryMode {
    let argv = &stats.system.argv;
    let has = |f: &str| flag_values(argv, f).is_some();
    let packages = comfy_packages(stats);
    let installed = |name: &str| {
        packages
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.installed.clone())
    };
    let aimdo_listed = packages.iter().any(|p| p.name == "comfy-aimdo");
    let version = major_minor(&stats.system.comfyui_version);
    let primary = stats.primary().map(|d| d.kind.as_str()).unwrap_or("");
    let rocm = stats.system.pytorch_version.contains("rocm");
    let dynamic_vram = if let Some(f) = DYNAMIC_VRAM_OFF.iter().find(|f| has(f)) {
        format!("off ({f})")
    } else if matches!(version, Some(v) if v < (0, 15)) {
        "not in this version (ComfyUI < 0.15)".into()
    } else if aimdo_listed && installed("comfy-aimdo").is_none() {
        "off (comfy-aimdo not installed)".into()
    } else if has("--enable-dynamic-vram") {
        "on (--enable-dynamic-vram)".into()
    } else if version.is_none() {
        "unknown (no ComfyUI version)".into()
    } else if primary == "cuda" && rocm {
        "default on ROCm ≥ 7.14 (ROCm version unknown)".into()
    } else if primary == "cuda" {
        "on (default on NVIDIA from ComfyUI 0.15)".into()
    } else {
        format!(
            "off (not an NVIDIA device: {})",
            if primary.is_empty() { "none" } else { primary }
        )
    };
    let pinned_memory = if has("--disable-pinned-memory") {
        "off (--disable-pinned-memory)".into()
    } else {
        "default".into()
    };
    let async_offload = if has("--disable-async-offload") {
        "off (--disable-async-offload)".into()
    } else {
        match flag_values(argv, "--async-offload") {
            Some(v) if v.is_empty() => "on, 2 streams (--async-offload)".into(),
            Some(v) => format!("on, {} streams (--async-offload {})", v[0], v[0]),
            None => "default".into(),
        }
    };
    let cache = CACHE_FLAGS
        .iter()
        .find_map(|f| {
            flag_values(argv, f).map(|v| {
                std::iter::once(f.to_string())
                    .chain(v)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        })
        .unwrap_or_else(|| "default".into());
    let one = |f: &str| flag_values(argv, f).and_then(|v| v.into_iter().next());
    MemoryMode {
        dynamic_vram,
        pinned_memory,
        async_offload,
        cache,
        reserve_vram_gb: one("--reserve-vram"),
        vram_headroom_gb: one("--vram-headroom"),
        comfy_aimdo: installed("comfy-aimdo"),
        comfy_kitchen: installed("comfy-kitchen"),
    }
}

/// `system.comfy_package_versions` (absent before late 2026: empty).
pub(crate) fn comfy_packages(stats: &SystemStats) -> Vec<ComfyPackage> {
    stats
        .system
        .extra
        .get("comfy_package_versions")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

impl MemoryMode {
    /// One line per knob that differs from `other`, e.g. `dynamic VRAM: on … → off (--cpu)`.
    fn changes(&self, other: &MemoryMode) -> Vec<String> {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "not set".into());
        let pairs = [
            (
                "dynamic VRAM",
                self.dynamic_vram.clone(),
                other.dynamic_vram.clone(),
            ),
            (
                "pinned memory",
                self.pinned_memory.clone(),
                other.pinned_memory.clone(),
            ),
            (
                "async offload",
                self.async_offload.clone(),
                other.async_offload.clone(),
            ),
            ("cache mode", self.cache.clone(), other.cache.clone()),
            (
                "--reserve-vram",
                opt(&self.reserve_vram_gb),
                opt(&other.reserve_vram_gb),
            ),
            (
                "--vram-headroom",
                opt(&self.vram_headroom_gb),
                opt(&other.vram_headroom_gb),
            ),
            (
                "comfy-aimdo",
                opt(&self.comfy_aimdo),
                opt(&other.comfy_aimdo),
            ),
            (
                "comfy-kitchen",
                opt(&self.comfy_kitchen),
                opt(&other.comfy_kitchen),
            ),
        ];
        pairs
            .into_iter()
            .filter(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("memory mode: {what}: {a} → {b}"))
            .collect()
    }
}

/// One device of `/system_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// e.g. `cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync`.
    pub name: String,
    /// `cuda`, `cpu`, `mps` …
    #[serde(rename = "type")]
    pub kind: String,
    /// Device index (none for the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
    /// Total memory in bytes.
    pub total_bytes: u64,
}

/// A set of node classes: how many and a hash of their definitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSet {
    /// Number of classes.
    pub classes: usize,
    /// sha256 of the canonical JSON of `{class: definition}` (first 16 hex digits).
    pub definitions_sha256: String,
}

/// One custom node pack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePack {
    /// The pack (its folder under `custom_nodes/`), from `python_module`.
    pub name: String,
    /// Its node classes and their definitions' hash.
    #[serde(flatten)]
    pub nodes: NodeSet,
    /// Version from ComfyUI-Manager's installed list (a semantic version or a git commit);
    /// none: `VERSION_UNKNOWN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl NodePack {
    /// The version, or "version unknown".
    pub(crate) fn version_text(&self) -> &str {
        self.version.as_deref().unwrap_or(VERSION_UNKNOWN)
    }
}

/// One model folder's listing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFolder {
    /// Folder kind (`checkpoints`, `loras` …).
    pub folder: String,
    /// Its files.
    pub files: Vec<ModelFile>,
}

/// One model file as the server lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFile {
    /// File name (relative to the folder, as the loaders take it).
    pub name: String,
    /// Size in bytes, when the server says (`/experiment/models/{folder}` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

fn short_hash(value: &Value, len: usize) -> String {
    sha256_hex(canonical_json(value).as_bytes())[..len].to_string()
}

/// The core node set and the custom node packs of a `/object_info` answer (pack versions
/// unknown; see [`apply_manager_versions`]).
pub(crate) fn node_sets(object_info: &Value) -> (NodeSet, Vec<NodePack>) {
    let mut core = Map::new();
    let mut packs: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    if let Some(classes) = object_info.as_object() {
        for (class, def) in classes {
            let module = def
                .get("python_module")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match module.strip_prefix(CUSTOM_NODES_PREFIX) {
                Some(pack) if !pack.is_empty() => {
                    packs
                        .entry(pack.to_string())
                        .or_default()
                        .insert(class.clone(), def.clone());
                }
                _ => {
                    core.insert(class.clone(), def.clone());
                }
            }
        }
    }
    let set = |defs: Map<String, Value>| NodeSet {
        classes: defs.len(),
        definitions_sha256: short_hash(&Value::Object(defs), 16),
    };
    let packs = packs
        .into_iter()
        .map(|(name, defs)| NodePack {
            name,
            nodes: set(defs),
            version: None,
        })
        .collect();
    (set(core), packs)
}

/// Sets each pack's version from ComfyUI-Manager's installed list
/// (`GET /customnode/installed`: `{folder: {"ver", "cnr_id", "aux_id", "enabled"}}`), matching
/// the pack name to the folder name or the registry id, ignoring case. True when the list had
/// that shape.
pub(crate) fn apply_manager_versions(packs: &mut [NodePack], installed: &Value) -> bool {
    let Some(map) = installed.as_object() else {
        return false;
    };
    let lower = |s: &str| s.to_ascii_lowercase();
    for pack in packs.iter_mut() {
        let name = lower(&pack.name);
        let found = map.iter().find(|(folder, info)| {
            lower(folder) == name
                || info
                    .get("cnr_id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| !id.is_empty() && lower(id) == name)
        });
        if let Some(ver) = found
            .and_then(|(_, info)| info.get("ver"))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
        {
            pack.version = Some(ver.to_string());
        }
    }
    true
}

/// Which custom node pack each class of a `/object_info` answer comes from (class → pack, from
/// `python_module` `custom_nodes.<pack>`); ComfyUI's own classes are not in it.
pub(crate) fn class_packs(object_info: &Value) -> BTreeMap<String, String> {
    object_info
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(class, def)| {
            let module = def.get("python_module").and_then(Value::as_str)?;
            let pack = module.strip_prefix(CUSTOM_NODES_PREFIX)?;
            (!pack.is_empty()).then(|| (class.clone(), pack.to_string()))
        })
        .collect()
}

/// A model folder from `GET /experiment/models/{folder}` (`[{"name", "size", …}]`) or
/// `GET /models/{folder}` (`["name", …]`), sorted by name.
pub(crate) fn model_folder(folder: &str, listing: &Value) -> ModelFolder {
    let mut files: Vec<ModelFile> = listing
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| match item {
                    Value::String(name) => Some(ModelFile {
                        name: name.clone(),
                        size: None,
                    }),
                    Value::Object(o) => Some(ModelFile {
                        name: o.get("name")?.as_str()?.to_string(),
                        size: o.get("size").and_then(Value::as_u64),
                    }),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    ModelFolder {
        folder: folder.to_string(),
        files,
    }
}

/// The fingerprint from the server's answers.
pub(crate) fn build(
    stats: &SystemStats,
    nodes: Option<&(NodeSet, Vec<NodePack>)>,
    manager_installed: Option<&Value>,
    mut models: Vec<ModelFolder>,
) -> Fingerprint {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let sys = &stats.system;
    let mut fp = Fingerprint {
        comfyui_version: text(&sys.comfyui_version),
        frontend_version: sys
            .extra
            .get("required_frontend_version")
            .and_then(Value::as_str)
            .and_then(text),
        pytorch_version: text(&sys.pytorch_version),
        python_version: text(&sys.python_version),
        os: text(&sys.os),
        devices: stats
            .devices
            .iter()
            .map(|d| DeviceInfo {
                name: d.name.clone(),
                kind: d.kind.clone(),
                index: d.index,
                total_bytes: d.vram_total,
            })
            .collect(),
        argv: sys.argv.clone(),
        comfy_packages: comfy_packages(stats),
        deploy_environment: sys
            .extra
            .get("deploy_environment")
            .and_then(Value::as_str)
            .and_then(text),
        memory_mode: Some(memory_mode(stats)),
        ..Fingerprint::default()
    };
    if let Some((core, packs)) = nodes {
        fp.core_nodes = Some(core.clone());
        fp.packs = packs.clone();
        if let Some(list) = manager_installed {
            if apply_manager_versions(&mut fp.packs, list) {
                fp.pack_versions_from = Some("ComfyUI-Manager".into());
            }
        }
    }
    models.sort_by(|a, b| a.folder.cmp(&b.folder));
    if !models.is_empty() {
        fp.models_sha256 = Some(sha256_hex(
            canonical_json(&serde_json::to_value(&models).unwrap_or_default()).as_bytes(),
        ));
    }
    fp.models = models;
    fp.id = fp.compute_id();
    fp
}

impl Fingerprint {
    /// The id this fingerprint's contents give (see [`Fingerprint::id`]).
    pub fn compute_id(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            for k in [
                "id",
                "models",
                "models_sha256",
                "model_paths",
                "object_info_sha256",
                "memory_mode",
            ] {
                o.remove(k);
            }
        }
        short_hash(&v, ID_LEN)
    }

    /// The pack called `name`.
    pub fn pack(&self, name: &str) -> Option<&NodePack> {
        self.packs.iter().find(|p| p.name == name)
    }
}

/// What changed from `before` to `after`, one line per difference (empty: nothing that the id
/// covers, and the same model listings).
pub(crate) fn diff(before: &Fingerprint, after: &Fingerprint) -> Vec<String> {
    let mut out = Vec::new();
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
    for (what, a, b) in [
        (
            "ComfyUI version",
            &before.comfyui_version,
            &after.comfyui_version,
        ),
        (
            "frontend version",
            &before.frontend_version,
            &after.frontend_version,
        ),
        (
            "PyTorch version",
            &before.pytorch_version,
            &after.pytorch_version,
        ),
        ("Python", &before.python_version, &after.python_version),
        ("OS", &before.os, &after.os),
    ] {
        let respelled =
            what == "OS" && matches!((a, b), (Some(a), Some(b)) if super::protocol::same_os(a, b));
        if a != b && !respelled {
            out.push(format!("{what}: {} → {}", opt(a), opt(b)));
        }
    }
    if before.argv != after.argv {
        out.push(format!(
            "launch arguments: `{}` → `{}`",
            before.argv.join(" "),
            after.argv.join(" ")
        ));
    }
    if before.comfy_packages != after.comfy_packages {
        let list = |p: &[ComfyPackage]| {
            p.iter()
                .map(|p| {
                    format!(
                        "{} {}",
                        p.name,
                        p.installed.as_deref().unwrap_or("not installed")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "comfy packages: {} → {}",
            list(&before.comfy_packages),
            list(&after.comfy_packages)
        ));
    }
    if before.deploy_environment != after.deploy_environment {
        out.push(format!(
            "deploy environment: {} → {}",
            opt(&before.deploy_environment),
            opt(&after.deploy_environment)
        ));
    }
    if let (Some(a), Some(b)) = (&before.memory_mode, &after.memory_mode) {
        out.extend(a.changes(b));
    }
    if before.devices != after.devices {
        let list = |d: &[DeviceInfo]| {
            d.iter()
                .map(|d| format!("{} ({} MiB)", d.name, d.total_bytes / (1024 * 1024)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "devices: {} → {}",
            list(&before.devices),
            list(&after.devices)
        ));
    }
    if before.core_nodes != after.core_nodes {
        if let (Some(a), Some(b)) = (&before.core_nodes, &after.core_nodes) {
            out.push(format!(
                "ComfyUI's own node definitions changed ({} → {} classes)",
                a.classes, b.classes
            ));
        }
    }
    for p in &before.packs {
        match after.pack(&p.name) {
            None => out.push(format!("node pack removed: {}", p.name)),
            Some(q) if q != p => {
                let mut what = Vec::new();
                if q.version != p.version {
                    what.push(format!(
                        "version {} → {}",
                        p.version_text(),
                        q.version_text()
                    ));
                }
                if q.nodes.classes != p.nodes.classes {
                    what.push(format!("{} → {} classes", p.nodes.classes, q.nodes.classes));
                } else if q.nodes.definitions_sha256 != p.nodes.definitions_sha256 {
                    what.push("node definitions changed".into());
                }
                out.push(format!(
                    "node pack changed: {} ({})",
                    p.name,
                    what.join(", ")
                ));
            }
            Some(_) => {}
        }
    }
    for q in &after.packs {
        if before.pack(&q.name).is_none() {
            out.push(format!(
                "node pack added: {} ({} classes, {})",
                q.name,
                q.nodes.classes,
                q.version_text()
            ));
        }
    }
    if before.models_sha256 != after.models_sha256 && !before.models.is_empty() {
        out.extend(model_changes(&before.models, &after.models));
    }
    out
}

fn model_changes(before: &[ModelFolder], after: &[ModelFolder]) -> Vec<String> {
    let files = |m: &[ModelFolder]| -> BTreeMap<String, Option<u64>> {
        m.iter()
            .flat_map(|f| {
                f.files
                    .iter()
                    .map(move |x| (format!("{}/{}", f.folder, x.name), x.size))
            })
            .collect()
    };
    let (a, b) = (files(before), files(after));
    let mut out = Vec::new();
    for (k, size) in &b {
        match a.get(k) {
            None => out.push(format!("model file added: {k}")),
            Some(old) if old != size => out.push(format!("model file changed size: {k}")),
            _ => {}
        }
    }
    for k in a.keys().filter(|k| !b.contains_key(*k)) {
        out.push(format!("model file removed: {k}"));
    }
    out
}

/// ComfyUI-Manager's installed-pack list (legacy and `/v2` routes).
pub(crate) const MANAGER_INSTALLED_ROUTES: [&str; 2] =
    ["/customnode/installed", "/v2/customnode/installed"];

/// Takes fingerprints of one server. `/object_info` (megabytes on a server with many packs) is
/// fetched only when something suggests the node set may have changed since the last fetch:
/// none was fetched yet; [`Fingerprinter::invalidate`] was called (a run lost the server, the
/// server was restarted); the last run's socket reconnected ([`Fingerprinter::ran`]); the
/// server no longer has the last run's prompt in its history (it restarted since); or the
/// cheap answers changed: `/system_stats` without its free-memory numbers (versions, devices,
/// launch arguments) or `/extensions` (the packs' front-end scripts). Otherwise the last node
/// sets are reused. A body that hashes the same as last time is not parsed again.
#[derive(Debug)]
pub struct Fingerprinter {
    client: Client,
    last_nodes: Option<(String, (NodeSet, Vec<NodePack>))>,
    /// Class → custom pack of the last `/object_info` parsed ([`class_packs`]).
    last_classes: BTreeMap<String, String>,
    /// `/system_stats` (without free memory) and `/extensions` when `/object_info` was last
    /// fetched.
    last_key: Option<String>,
    /// Something says the node set may have changed: fetch `/object_info` next time.
    stale: bool,
    /// The last run's prompt id, looked up in the server's history before the next fingerprint.
    last_prompt: Option<String>,
    object_info_fetches: u64,
}

impl Fingerprinter {
    /// A fingerprinter for the server of `client`.
    pub fn new(client: Client) -> Fingerprinter {
        Fingerprinter {
            client,
            last_nodes: None,
            last_classes: BTreeMap::new(),
            last_key: None,
            stale: true,
            last_prompt: None,
            object_info_fetches: 0,
        }
    }

    /// The next fingerprint fetches `/object_info` again (the server was lost or restarted).
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// A run was made with prompt `prompt_id`; `reconnected`: its socket had to reconnect (the
    /// server may have restarted under it), so the next fingerprint fetches `/object_info`.
    pub fn ran(&mut self, prompt_id: &str, reconnected: bool) {
        self.last_prompt = Some(prompt_id.to_string());
        if reconnected {
            self.stale = true;
        }
    }

    /// The custom node pack of each of `classes` that comes from one (class → pack), as the
    /// last `/object_info` said; the classes not in it are ComfyUI's own. None when no
    /// `/object_info` was read yet.
    pub(crate) fn custom_classes<'a>(
        &self,
        classes: impl IntoIterator<Item = &'a str>,
    ) -> Option<BTreeMap<String, String>> {
        self.last_nodes.as_ref()?;
        Some(
            classes
                .into_iter()
                .filter_map(|c| Some((c.to_string(), self.last_classes.get(c)?.clone())))
                .collect(),
        )
    }

    /// How many times `/object_info` was fetched.
    pub fn object_info_fetches(&self) -> u64 {
        self.object_info_fetches
    }

    /// Fetches what is needed and builds the fingerprint. Only `/system_stats` must answer;
    /// the other parts are left out when their route fails.
    pub async fn take(&mut self) -> Result<Fingerprint, ClientError> {
        let client = self.client.clone();
        let started = std::time::Instant::now();
        let last_prompt = self.last_prompt.clone();
        let (stats, extensions, manager, models, folder_paths, history) = tokio::join!(
            client.system_stats(),
            client.get_text_opt(routes::EXTENSIONS),
            async {
                for route in MANAGER_INSTALLED_ROUTES {
                    match client.get_text_opt(route).await {
                        Ok(Some(text)) => return serde_json::from_str::<Value>(&text).ok(),
                        Ok(None) => continue,
                        Err(_) => return None,
                    }
                }
                None
            },
            model_listings(&client),
            client.get_text_opt(routes::FOLDER_PATHS),
            async {
                match &last_prompt {
                    Some(id) => Some(client.history(id).await.map(|h| h.is_some())),
                    None => None,
                }
            }
        );
        let stats = stats?;
        // The cheap answers: versions, devices, launch arguments, front-end scripts.
        let key = format!(
            "{}|{}",
            build(&stats, None, None, Vec::new()).id,
            sha256_hex(extensions.ok().flatten().unwrap_or_default().as_bytes())
        );
        // The last run's prompt gone from history: the server restarted since.
        let restarted = matches!(history, Some(Ok(false)) | Some(Err(_)));
        let reuse = !self.stale
            && !restarted
            && self.last_nodes.is_some()
            && self.last_key.as_deref() == Some(key.as_str());
        let (nodes, body_hash) = if reuse {
            let (hash, nodes) = self.last_nodes.clone().expect("checked above");
            (Some(nodes), Some(hash))
        } else {
            self.fetch_nodes(key).await
        };
        let mut fp = build(&stats, nodes.as_ref(), manager.as_ref(), models);
        fp.object_info_sha256 = body_hash;
        if let Ok(Some(text)) = folder_paths {
            fp.model_paths = parse_folder_paths(&text);
        }
        tracing::debug!(
            reused_object_info = reuse,
            total_ms = started.elapsed().as_millis() as u64,
            "fingerprint taken"
        );
        Ok(fp)
    }

    /// `GET /object_info` and its node sets (parsed again only when the body changed); `key`
    /// is remembered when it answered.
    async fn fetch_nodes(
        &mut self,
        key: String,
    ) -> (Option<(NodeSet, Vec<NodePack>)>, Option<String>) {
        self.object_info_fetches += 1;
        let Ok(Some(body)) = self.client.get_text_opt(routes::OBJECT_INFO).await else {
            return (None, None);
        };
        let hash = sha256_hex(body.as_bytes());
        let nodes = match &self.last_nodes {
            Some((h, nodes)) if *h == hash => nodes.clone(),
            _ => match serde_json::from_str::<Value>(&body) {
                Ok(v) => {
                    self.last_classes = class_packs(&v);
                    node_sets(&v)
                }
                Err(_) => return (None, Some(hash)),
            },
        };
        self.last_nodes = Some((hash.clone(), nodes.clone()));
        self.last_key = Some(key);
        self.stale = false;
        (Some(nodes), Some(hash))
    }
}

/// The body of `GET /internal/folder_paths` (`{"checkpoints": ["/…/models/checkpoints", …]}`);
/// empty when it has another shape.
pub(crate) fn parse_folder_paths(text: &str) -> BTreeMap<String, Vec<String>> {
    serde_json::from_str(text).unwrap_or_default()
}

/// Every model folder's listing: `/experiment/models` (names and sizes) when the server has
/// it, else `/models` (names only).
async fn model_listings(client: &Client) -> Vec<ModelFolder> {
    let experiment = "/experiment/models";
    if let Ok(Some(text)) = client.get_text_opt(experiment).await {
        let folders: Vec<String> = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        return listings(client, experiment, folders).await;
    }
    let folders: Vec<String> = match client.get_text_opt(routes::MODELS).await {
        Ok(Some(text)) => serde_json::from_str(&text).unwrap_or_default(),
        _ => Vec::new(),
    };
    listings(client, routes::MODELS, folders).await
}

async fn listings(client: &Client, base: &str, folders: Vec<String>) -> Vec<ModelFolder> {
    let fetches = folders.into_iter().map(|folder| {
        let client = client.clone();
        let route = format!("{base}/{folder}");
        async move {
            let text = client.get_text_opt(&route).await.ok().flatten()?;
            let v: Value = serde_json::from_str(&text).ok()?;
            Some(model_folder(&folder, &v))
        }
    });
    futures_util::future::join_all(fetches)
        .await
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn stats() -> SystemStats {
        serde_json::from_value(fixture(&format!(
            "{}/comfyui/GET__system_stats.final.json",
            crate::FIXTURES
        )))
        .unwrap()
    }

    /// The captured core server plus the custom-node fixture's packs, as one `/object_info`.
    fn object_info_with_packs() -> Value {
        let mut all = fixture(&format!(
            "{}/comfyui/GET__object_info.final.json",
            crate::FIXTURES
        ));
        let custom = fixture(&format!(
            "{}/custom-nodes/object_info.custom.json",
            crate::FIXTURES
        ));
        for (k, v) in custom.as_object().unwrap() {
            all.as_object_mut().unwrap().insert(k.clone(), v.clone());
        }
        all
    }

    #[test]
    fn each_custom_class_is_mapped_to_its_pack_and_core_classes_are_not() {
        let map = class_packs(&object_info_with_packs());
        // Captured: SaveImageWebsocket comes from ComfyUI's example pack in custom_nodes/.
        assert_eq!(map["SaveImageWebsocket"], "websocket_image_save");
        assert_eq!(map["UnetLoaderGGUF"], "ComfyUI-GGUF");
        assert_eq!(map["RIFE VFI"], "ComfyUI-Frame-Interpolation");
        assert_eq!(map["Power Lora Loader (rgthree)"], "rgthree-comfy");
        for core in [
            "KSampler",
            "CheckpointLoaderSimple",
            "VAEDecode",
            "SaveImage",
        ] {
            assert!(!map.contains_key(core), "{core} is ComfyUI's own");
        }
        let (_, packs) = node_sets(&object_info_with_packs());
        let counted: usize = packs.iter().map(|p| p.nodes.classes).sum();
        assert_eq!(map.len(), counted, "one entry per class the packs count");
    }

    #[test]
    fn packs_come_from_python_module_with_counts_and_hashes() {
        let core_only = fixture(&format!(
            "{}/comfyui/GET__object_info.final.json",
            crate::FIXTURES
        ));
        let (core, packs) = node_sets(&core_only);
        // The captured server has ComfyUI's own example pack (custom_nodes/websocket_image_save.py).
        assert_eq!(packs.len(), 1, "{packs:?}");
        assert_eq!(packs[0].name, "websocket_image_save");
        assert_eq!(packs[0].nodes.classes, 1);
        assert_eq!(core.classes, core_only.as_object().unwrap().len() - 1);
        let all = object_info_with_packs();
        let (core2, packs) = node_sets(&all);
        assert_eq!(core2, core, "adding packs leaves the core set alone");
        let names: Vec<&str> = packs.iter().map(|p| p.name.as_str()).collect();
        assert!(names.contains(&"ComfyUI-WanVideoWrapper"), "{names:?}");
        assert!(names.contains(&"rgthree-comfy"), "{names:?}");
        let wan = packs
            .iter()
            .find(|p| p.name == "ComfyUI-WanVideoWrapper")
            .unwrap();
        let expected = fixture(&format!(
            "{}/custom-nodes/object_info.custom.json",
            crate::FIXTURES
        ))
        .as_object()
        .unwrap()
        .values()
        .filter(|d| d["python_module"] == "custom_nodes.ComfyUI-WanVideoWrapper")
        .count();
        assert_eq!(wan.nodes.classes, expected);
        assert_eq!(wan.nodes.definitions_sha256.len(), 16);
        assert_eq!(wan.version_text(), VERSION_UNKNOWN);
        // Another definition in one pack changes that pack's hash only.
        let mut changed = all.clone();
        changed["WanVideoSampler"]["input"]["required"]["extra"] = serde_json::json!(["INT", {}]);
        let (_, packs2) = node_sets(&changed);
        for (a, b) in packs.iter().zip(&packs2) {
            assert_eq!(
                a.nodes.definitions_sha256 == b.nodes.definitions_sha256,
                a.name != wan.name,
                "{}",
                a.name
            );
        }
    }

    #[test]
    fn fingerprint_of_the_captured_server() {
        let nodes = node_sets(&object_info_with_packs());
        let models = vec![model_folder(
            "checkpoints",
            &fixture(&format!(
                "{}/comfyui/GET__experiment__models__checkpoints.final.json",
                crate::FIXTURES
            )),
        )];
        let fp = build(&stats(), Some(&nodes), None, models.clone());
        assert_eq!(fp.comfyui_version.as_deref(), Some("0.3.64"));
        assert_eq!(fp.frontend_version.as_deref(), Some("1.27.10"));
        assert_eq!(fp.pytorch_version.as_deref(), Some("2.15.0+cu132"));
        assert!(fp.python_version.as_deref().unwrap().starts_with("3.11.7"));
        assert_eq!(fp.os.as_deref(), Some("posix"));
        assert_eq!(fp.devices.len(), 1);
        assert_eq!(fp.devices[0].kind, "cpu");
        assert_eq!(fp.devices[0].total_bytes, 25276502016);
        assert!(fp.argv.contains(&"--cpu".to_string()));
        assert_eq!(
            fp.packs.len(),
            14,
            "13 packs of the custom-node fixture + websocket_image_save"
        );
        assert!(fp.pack_versions_from.is_none());
        assert_eq!(
            fp.models[0].files,
            vec![ModelFile {
                name: "random_sd15.safetensors".into(),
                size: Some(2132625238)
            }]
        );
        assert_eq!(fp.id.len(), ID_LEN);
        assert_eq!(fp.id, fp.compute_id());
        // Free memory is not part of it; another launch argument is.
        let mut s2 = stats();
        s2.system.ram_free -= 1;
        s2.devices[0].vram_free -= 1;
        assert_eq!(build(&s2, Some(&nodes), None, vec![]).id, fp.id);
        s2.system.argv.push("--lowvram".into());
        let other = build(&s2, Some(&nodes), None, models);
        assert_ne!(other.id, fp.id);
        assert_eq!(
            diff(&fp, &other),
            vec![format!(
                "launch arguments: `{}` → `{} --lowvram`",
                fp.argv.join(" "),
                fp.argv.join(" ")
            )]
        );
        // Model listings are recorded but do not change the id.
        assert_eq!(build(&stats(), Some(&nodes), None, vec![]).id, fp.id);
    }

    #[test]
    fn manager_versions_are_matched_by_folder_or_registry_id() {
        let (_, mut packs) = node_sets(&object_info_with_packs());
        // The shape of ComfyUI-Manager's GET /customnode/installed.
        let installed = serde_json::json!({
            "comfyui-kjnodes": {"ver": "1.1.7", "cnr_id": "comfyui-kjnodes", "aux_id": "kijai/ComfyUI-KJNodes", "enabled": true},
            "rgthree-comfy": {"ver": "e6e2b3b1d2c8a0f0", "cnr_id": "", "aux_id": null, "enabled": true},
            "ComfyUI-Manager": {"ver": "3.37", "cnr_id": "comfyui-manager", "enabled": true}
        });
        assert!(apply_manager_versions(&mut packs, &installed));
        let v = |n: &str| {
            packs
                .iter()
                .find(|p| p.name == n)
                .unwrap()
                .version_text()
                .to_string()
        };
        assert_eq!(v("ComfyUI-KJNodes"), "1.1.7");
        assert_eq!(v("rgthree-comfy"), "e6e2b3b1d2c8a0f0");
        assert_eq!(v("ComfyUI-GGUF"), VERSION_UNKNOWN);
        assert!(!apply_manager_versions(&mut packs, &serde_json::json!([])));
    }

    #[test]
    fn diff_names_packs_added_removed_and_changed() {
        let all = object_info_with_packs();
        let nodes = node_sets(&all);
        let before = build(&stats(), Some(&nodes), None, vec![]);
        let mut fewer = all.clone();
        fewer
            .as_object_mut()
            .unwrap()
            .retain(|_, d| d["python_module"] != "custom_nodes.ComfyUI-GGUF");
        fewer["KJNodeThatIsNew"] =
            serde_json::json!({"python_module": "custom_nodes.ComfyUI-KJNodes"});
        let after = build(&stats(), Some(&node_sets(&fewer)), None, vec![]);
        let d = diff(&before, &after);
        assert!(
            d.contains(&"node pack removed: ComfyUI-GGUF".to_string()),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|l| l.starts_with("node pack changed: ComfyUI-KJNodes (12 → 13 classes")),
            "{d:?}"
        );
        let back = diff(&after, &before);
        assert!(
            back.iter().any(
                |l| l.starts_with("node pack added: ComfyUI-GGUF (6 classes, version unknown)")
            ),
            "{back:?}"
        );
        assert!(diff(&before, &before).is_empty());
    }

    #[test]
    fn model_listings_from_both_routes() {
        let names = model_folder(
            "loras",
            &serde_json::json!(["b.safetensors", "a.safetensors"]),
        );
        assert_eq!(names.files[0].name, "a.safetensors");
        assert_eq!(names.files[0].size, None);
        let folders = fixture(&format!(
            "{}/comfyui/GET__experiment__models.initial.json",
            crate::FIXTURES
        ));
        assert!(folders
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "checkpoints"));
    }

    #[test]
    fn folder_paths_from_the_capture_and_outside_the_id() {
        let text = std::fs::read_to_string(format!(
            "{}/comfyui/GET__internal__folder_paths.initial.json",
            crate::FIXTURES
        ))
        .unwrap();
        let paths = parse_folder_paths(&text);
        assert_eq!(
            paths["diffusion_models"],
            [
                "/home/user/ComfyUI/models/unet",
                "/home/user/ComfyUI/models/diffusion_models",
                "/home/user/ComfyUI/output/diffusion_models"
            ]
        );
        assert_eq!(
            paths["checkpoints"][0],
            "/home/user/ComfyUI/models/checkpoints"
        );
        assert!(parse_folder_paths("[1, 2]").is_empty());
        // Where the folders are does not change how a workflow runs: not part of the id.
        let fp = build(&stats(), None, None, vec![]);
        let mut moved = fp.clone();
        moved.model_paths = paths;
        assert_eq!(moved.compute_id(), fp.id);
    }

    fn stats_of(version: &str, kind: &str, argv: &[&str], packages: Value) -> SystemStats {
        serde_json::from_value(serde_json::json!({
            "system": {"os": "linux", "comfyui_version": version, "pytorch_version": "2.15.0+cu132",
                       "argv": argv, "comfy_package_versions": packages,
                       "deploy_environment": "local-git"},
            "devices": [{"name": "cuda:0 X : cudaMallocAsync", "type": kind, "index": 0,
                         "vram_total": 1, "vram_free": 1, "torch_vram_total": 0, "torch_vram_free": 0}]
        }))
        .unwrap()
    }

    fn aimdo() -> Value {
        serde_json::json!([
            {"name": "comfy-aimdo", "installed": "0.5.5", "required": "0.5.5"},
            {"name": "comfy-kitchen", "installed": "0.2.36", "required": "0.2.36"}
        ])
    }

    #[test]
    fn memory_mode_from_version_device_flags_and_packages() {
        let late = stats_of(
            "0.38.0",
            "cuda",
            &[
                "main.py",
                "--cache-lru",
                "8",
                "--reserve-vram",
                "1.5",
                "--async-offload",
            ],
            aimdo(),
        );
        let m = memory_mode(&late);
        assert_eq!(m.dynamic_vram, "on (default on NVIDIA from ComfyUI 0.15)");
        assert_eq!(m.cache, "--cache-lru 8");
        assert_eq!(m.reserve_vram_gb.as_deref(), Some("1.5"));
        assert_eq!(m.vram_headroom_gb, None);
        assert_eq!(m.async_offload, "on, 2 streams (--async-offload)");
        assert_eq!(m.pinned_memory, "default");
        assert_eq!(
            (m.comfy_aimdo.as_deref(), m.comfy_kitchen.as_deref()),
            (Some("0.5.5"), Some("0.2.36"))
        );
        let off = stats_of(
            "0.38.0",
            "cuda",
            &[
                "main.py",
                "--disable-dynamic-vram",
                "--disable-pinned-memory",
                "--vram-headroom=2",
            ],
            aimdo(),
        );
        let m = memory_mode(&off);
        assert_eq!(m.dynamic_vram, "off (--disable-dynamic-vram)");
        assert_eq!(m.pinned_memory, "off (--disable-pinned-memory)");
        assert_eq!(m.vram_headroom_gb.as_deref(), Some("2"));
        let old = stats_of("0.8.0", "cuda", &["main.py"], Value::Null);
        assert_eq!(
            memory_mode(&old).dynamic_vram,
            "not in this version (ComfyUI < 0.15)"
        );
        assert_eq!(memory_mode(&stats()).dynamic_vram, "off (--cpu)");
        let missing = stats_of(
            "0.38.0",
            "cuda",
            &["main.py"],
            serde_json::json!([{"name": "comfy-aimdo", "installed": null, "required": "0.5.5"}]),
        );
        assert_eq!(
            memory_mode(&missing).dynamic_vram,
            "off (comfy-aimdo not installed)"
        );
    }

    #[test]
    fn a_memory_mode_change_is_drift_and_named() {
        let on = build(
            &stats_of("0.38.0", "cuda", &["main.py"], aimdo()),
            None,
            None,
            vec![],
        );
        assert_eq!(on.comfy_packages.len(), 2);
        assert_eq!(on.deploy_environment.as_deref(), Some("local-git"));
        let off = build(
            &stats_of(
                "0.38.0",
                "cuda",
                &["main.py", "--disable-dynamic-vram"],
                aimdo(),
            ),
            None,
            None,
            vec![],
        );
        assert_ne!(on.id, off.id);
        let d = diff(&on, &off);
        assert!(
            d.contains(&"memory mode: dynamic VRAM: on (default on NVIDIA from ComfyUI 0.15) → off (--disable-dynamic-vram)".to_string()),
            "{d:?}"
        );
        let mut newer = aimdo();
        newer[0]["installed"] = "0.5.6".into();
        let upgraded = build(
            &stats_of("0.38.0", "cuda", &["main.py"], newer),
            None,
            None,
            vec![],
        );
        assert_ne!(
            on.id, upgraded.id,
            "a comfy package upgrade changes the environment"
        );
        let d = diff(&on, &upgraded);
        assert!(
            d.contains(&"memory mode: comfy-aimdo: 0.5.5 → 0.5.6".to_string()),
            "{d:?}"
        );
        // posix (0.3.x's os.name) and linux (sys.platform) are one OS spelled two ways.
        let mut respelled = on.clone();
        respelled.os = Some("posix".into());
        assert!(!diff(&respelled, &on).iter().any(|l| l.starts_with("OS")));
        respelled.os = Some("nt".into());
        assert!(diff(&respelled, &on)
            .iter()
            .any(|l| l.starts_with("OS: nt → linux")));
        // A 0.3.64 server has no comfy packages: its id is what it was before they were read.
        let old = build(&stats(), None, None, vec![]);
        assert!(old.comfy_packages.is_empty() && old.deploy_environment.is_none());
    }
}
