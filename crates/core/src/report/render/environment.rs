//! The environment the runs had, in `report.md`: one table of versions, GPU, memory, launch
//! arguments and memory-relevant flags, the custom node packs the workflows use, and the
//! environment changes between runs (`--on-drift`).

use super::md::{code, heading, text, Table, DASH};
use crate::report::model::{DriftRow, Environment};
use crate::units::mib_rounded as mib;

/// The Environment section; `with_fingerprint`: the fingerprint id is shown (the environment
/// changed between runs, and the changes name fingerprints).
pub(crate) fn section(env: &Environment, level: usize, with_fingerprint: bool) -> String {
    let mut out = heading(level, "Environment");
    let mut t = Table::new(&["Item", "Value"]);
    let mut row = |k: &str, v: String| t.row(vec![text(k), v]);
    let opt = |v: &Option<String>| v.as_deref().map(text).unwrap_or_else(|| DASH.into());
    row("ComfyUI", opt(&env.comfyui_version));
    row(
        "Frontend",
        env.frontend_version
            .as_deref()
            .map(|v| format!("{} (required by the server)", text(v)))
            .unwrap_or_else(|| DASH.into()),
    );
    row("PyTorch", opt(&env.pytorch_version));
    let python = match (&env.python_version, env.embedded_python) {
        (Some(v), Some(true)) => format!("{} (embedded, portable build)", text(v)),
        (Some(v), _) => text(v),
        (None, _) => DASH.into(),
    };
    row("Python", python);
    row("OS", opt(&env.os));
    match &env.gpu {
        Some(gpu) => {
            let mut details = vec![text(&gpu.kind)];
            if let Some(i) = gpu.index {
                details.push(format!("index {i}"));
            }
            if let Some(a) = &gpu.allocator {
                details.push(format!("allocator {}", text(a)));
            }
            row(
                "GPU",
                format!("{} ({})", text(&gpu.name), details.join(", ")),
            );
            row(
                "VRAM",
                gpu.vram_total_mib.map(mib).unwrap_or_else(|| DASH.into()),
            );
        }
        None => {
            row("GPU", DASH.into());
            row("VRAM", DASH.into());
        }
    }
    row(
        "RAM",
        env.ram_total_mib.map(mib).unwrap_or_else(|| DASH.into()),
    );
    row(
        "Launch arguments",
        if env.argv.is_empty() {
            DASH.into()
        } else {
            code(&env.argv.join(" "))
        },
    );
    let flags = if env.memory_flags.is_empty() {
        "none (ComfyUI's defaults)".to_string()
    } else {
        env.memory_flags
            .iter()
            .map(|f| {
                let flag = match &f.value {
                    Some(v) => format!("{} {v}", f.flag),
                    None => f.flag.clone(),
                };
                format!("{}: {}", code(&flag), text(&f.effect))
            })
            .collect::<Vec<_>>()
            .join("<br>")
    };
    row("Memory-relevant flags", flags);
    if let Some(m) = &env.memory_mode {
        let mut parts = vec![
            format!("dynamic VRAM {}", text(&m.dynamic_vram)),
            format!("pinned memory {}", text(&m.pinned_memory)),
            format!("async offload {}", text(&m.async_offload)),
            format!("cache {}", text(&m.cache)),
        ];
        for (what, v) in [
            ("--reserve-vram", &m.reserve_vram_gb),
            ("--vram-headroom", &m.vram_headroom_gb),
            ("comfy-aimdo", &m.comfy_aimdo),
            ("comfy-kitchen", &m.comfy_kitchen),
        ] {
            if let Some(v) = v {
                parts.push(format!("{what} {}", text(v)));
            }
        }
        row("Memory mode", parts.join("<br>"));
    }
    if !env.devices.is_empty() {
        let list: Vec<String> = env
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let primary = if i == 0 { " — primary, measured" } else { "" };
                format!("{}{primary}", text(d))
            })
            .collect();
        row("Devices", list.join("<br>"));
    }
    if let Some(d) = &env.deploy_environment {
        row("Deploy environment", text(d));
    }
    let runs = match env.runs.as_str() {
        "cold" => "cold: models and memory freed before every run".to_string(),
        "warm" => "warm: models and cached outputs of earlier runs may still be loaded".to_string(),
        "mixed" => "mixed: some runs cold, some warm".to_string(),
        other => text(other),
    };
    row("Runs", runs);
    // comfy-bisect's own id of the environment: said where it changed (Environment changes)
    // and in report.json.
    if let Some(id) = env.fingerprint.as_ref().filter(|_| with_fingerprint) {
        row("Fingerprint", code(id));
    }
    out.push_str(&t.render());
    out.push('\n');
    if env.fingerprint.is_some() {
        if env.node_packs.is_empty() {
            out.push_str("Custom node packs: none.\n\n");
        } else {
            let source = match &env.pack_versions_from {
                Some(s) => format!("versions from {}", text(s)),
                None => "no versions: the server has no ComfyUI-Manager".to_string(),
            };
            // Only the packs the workflows use; the others are counted (report.json lists all).
            let shown: Vec<_> = env
                .node_packs
                .iter()
                .filter(|p| env.packs_used.as_ref().is_none_or(|u| u.contains(&p.name)))
                .collect();
            let others = env.node_packs.len() - shown.len();
            let others = if others == 0 {
                String::new()
            } else {
                format!(
                    " {others} other installed pack{} not used (report.json lists every pack \
                     with its classes and definitions hash).",
                    if others == 1 { "" } else { "s" }
                )
            };
            if shown.is_empty() {
                out.push_str(&format!(
                    "Custom node packs: the workflows use none ({source}).{others}\n\n"
                ));
                return out;
            }
            // One line: their classes and definitions hashes are in report.json.
            let names: Vec<String> = shown
                .iter()
                .map(|p| {
                    let unknown = p.version == crate::comfy::fingerprint::VERSION_UNKNOWN;
                    if unknown && env.pack_versions_from.is_none() {
                        text(&p.name)
                    } else {
                        format!("{} {}", text(&p.name), text(&p.version))
                    }
                })
                .collect();
            out.push_str(&format!(
                "Custom node packs the workflows use ({source}): {}.{others}\n\n",
                names.join(", ")
            ));
        }
    }
    out
}

/// The Environment changes section (only when the fingerprint changed between runs).
pub(crate) fn changes(drifts: &[DriftRow], level: usize) -> String {
    let mut out = heading(level, "Environment changes");
    out.push_str(
        "The server's environment changed between runs; results from before and after are not \
         compared with each other: the last passing step was run again under the new \
         environment (`--on-drift reanchor`), or the session stopped (`--on-drift stop`).\n\n",
    );
    for d in drifts {
        out.push_str(&format!(
            "- {} ({}): fingerprint {} → {}\n",
            text(&d.detected_at),
            code(&d.workflow),
            code(&d.from),
            code(&d.to)
        ));
        for c in &d.changes {
            out.push_str(&format!("  - {}\n", text(c)));
        }
        match d.action.as_str() {
            "stop" => out.push_str("  - the session stopped here (`--on-drift stop`)\n"),
            _ if d.anchor_runs.is_empty() => {
                out.push_str("  - re-anchored: no step needed to be run again\n")
            }
            _ => {
                for a in &d.anchor_runs {
                    out.push_str(&format!("  - re-anchored: {}\n", text(a)));
                }
            }
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::NodePackRow;

    #[test]
    fn only_the_packs_the_workflows_use_are_listed_the_others_counted() {
        let pack = |name: &str| NodePackRow {
            name: name.into(),
            classes: 2,
            definitions_sha256: "0123456789abcdef".into(),
            version: "1.0".into(),
        };
        let mut env = Environment {
            fingerprint: Some("f1".into()),
            node_packs: vec![pack("ComfyUI-GGUF"), pack("rgthree-comfy"), pack("was-ns")],
            packs_used: Some(vec!["rgthree-comfy".into()]),
            ..Environment::default()
        };
        let md = section(&env, 2, false);
        assert!(
            md.contains("Custom node packs the workflows use (no versions: the server has no ComfyUI-Manager): rgthree-comfy 1.0."),
            "{md}"
        );
        assert!(
            !md.contains("ComfyUI-GGUF") && !md.contains("was-ns"),
            "{md}"
        );
        assert!(
            md.contains("2 other installed packs not used (report.json lists every pack"),
            "{md}"
        );
        // No record says which packs the workflows use: every pack is listed.
        env.packs_used = None;
        let md = section(&env, 2, false);
        assert!(
            md.contains(": ComfyUI-GGUF 1.0, rgthree-comfy 1.0, was-ns 1.0."),
            "{md}"
        );
        assert!(!md.contains("other installed"), "{md}");
    }
}
