//! The node definitions the simulator serves and validates against (`/object_info`, parsed once
//! per profile) and the role tags it reads them by.

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The simulator's node definitions (`/object_info`), as it serves them.
pub const OBJECT_INFO: &str = include_str!("../object_info.sim.json");
const ROLES: &str = include_str!("../roles.sim.json");

/// The node definitions the simulator serves and validates against.
pub struct Defs {
    pub map: Map<String, Value>,
    roles: HashMap<String, Vec<String>>,
}

/// The shipped definitions, parsed once.
pub fn defs() -> &'static Defs {
    static DEFS: OnceLock<Defs> = OnceLock::new();
    DEFS.get_or_init(|| parse_defs(|_| true))
}

/// The V3 node classes only the 2026 profile has (entries of the newer `/object_info` in
/// `tests/fixtures/comfyui-newer/`): a node whose sizes are a dynamic combo's dotted sub-inputs.
const OBJECT_INFO_2026: &str = include_str!("../object_info.2026.sim.json");

/// The shipped definitions plus the 2026 profile's V3 classes, parsed once. Execution reads
/// these (a superset: the 0.3.64 profile's validation never lets a 2026-only class through).
pub(crate) fn defs_2026() -> &'static Defs {
    static DEFS: OnceLock<Defs> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut defs = parse_defs(|_| true);
        let extra: Map<String, Value> = serde_json::from_str(OBJECT_INFO_2026)
            .expect("shipped object_info.2026.sim.json is valid JSON");
        defs.map.extend(extra);
        defs
    })
}

/// The node classes of [`crate::EXTRA_PACK`] (an image pass-through and a latent one, in the
/// captured `/object_info` shape).
pub(crate) fn extra_pack_defs() -> serde_json::Map<String, Value> {
    let module = format!("custom_nodes.{}", crate::EXTRA_PACK);
    ["IMAGE", "LATENT"]
        .iter()
        .map(|kind| {
            let name = format!("SimExtraPass{}", kind.to_ascii_lowercase());
            let def = json!({
                "input": {"required": {"value": [kind]}},
                "input_order": {"required": ["value"]},
                "output": [kind],
                "output_is_list": [false],
                "output_name": [kind],
                "name": name,
                "display_name": format!("Extra pass-through ({kind})"),
                "description": "",
                "python_module": module,
                "category": "utils",
                "output_node": false,
            });
            (name, def)
        })
        .collect()
}

/// What execution reads a class's outputs from: the 2026 superset plus the classes of
/// [`crate::EXTRA_PACK`] (validation only lets those through once the pack is loaded).
pub(crate) fn exec_defs() -> &'static Defs {
    static DEFS: OnceLock<Defs> = OnceLock::new();
    DEFS.get_or_init(|| defs_2026().with_classes(extra_pack_defs()))
}

/// The shipped definitions without the classes of [`crate::REMOVED_PACK`] (`python_module`
/// `custom_nodes.<pack>`), parsed once: a server restarted without that pack.
pub(crate) fn defs_without_removed_pack() -> &'static Defs {
    static DEFS: OnceLock<Defs> = OnceLock::new();
    DEFS.get_or_init(|| {
        let module = format!("custom_nodes.{}", crate::REMOVED_PACK);
        parse_defs(|def| def.get("python_module").and_then(Value::as_str) != Some(&module))
    })
}

/// Parses the shipped definitions, keeping the classes `keep` accepts.
fn parse_defs(keep: impl Fn(&Value) -> bool) -> Defs {
    {
        let mut map: Map<String, Value> =
            serde_json::from_str(OBJECT_INFO).expect("shipped object_info.sim.json is valid JSON");
        map.retain(|_, def| keep(def));
        let roles_map: Map<String, Value> =
            serde_json::from_str(ROLES).expect("shipped roles.sim.json is valid JSON");
        let roles = roles_map
            .into_iter()
            .map(|(k, v)| {
                let tags = v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| t.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                (k, tags)
            })
            .collect();
        Defs { map, roles }
    }
}

impl Defs {
    pub fn get(&self, class: &str) -> Option<&Value> {
        self.map.get(class)
    }

    /// These definitions with `more` classes added (a pack loaded).
    pub(crate) fn with_classes(&self, more: Map<String, Value>) -> Defs {
        let mut map = self.map.clone();
        map.extend(more);
        Defs {
            map,
            roles: self.roles.clone(),
        }
    }

    /// `OUTPUT_NODE` of the class.
    pub(crate) fn is_output(&self, class: &str) -> bool {
        self.get(class)
            .and_then(|d| d.get("output_node"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub(crate) fn output_types(&self, class: &str) -> Vec<String> {
        self.get(class)
            .and_then(|d| d.get("output"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|t| match t {
                        Value::String(s) => s.clone(),
                        // A combo output (list of values) is typed COMBO.
                        _ => "COMBO".to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn has_role(&self, class: &str, role: &str) -> bool {
        self.roles
            .get(class)
            .is_some_and(|r| r.iter().any(|t| t == role))
    }

    /// The declared spec of an input: (section, spec) where section is required/optional/hidden.
    pub(crate) fn input_spec(&self, class: &str, name: &str) -> Option<(&'static str, &Value)> {
        let input = self.get(class)?.get("input")?;
        for sec in ["required", "optional", "hidden"] {
            if let Some(spec) = input.get(sec).and_then(|s| s.get(name)) {
                return Some((sec, spec));
            }
        }
        None
    }
}

/// True for classes that sample (their failures have sampler tracebacks).
pub(crate) fn is_sampler_class(class: &str) -> bool {
    defs_2026().has_role(class, "samplers")
        || class.contains("KSampler")
        || class.contains("Sampler")
}
