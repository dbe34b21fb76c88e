//! Node definitions as ComfyUI's `GET /object_info` reports them: inputs with their types and
//! options, outputs, output nodes. Parsed leniently (unknown fields are ignored, never fatal),
//! loaded from files or merged from several sources (core plus custom node packs).

use indexmap::IndexMap;
use serde_json::{Map, Number, Value};
use std::path::Path;

/// The V3 input type that accepts any linked type (ComfyUI's `MatchType`).
pub(crate) const MATCHTYPE_V3: &str = "COMFY_MATCHTYPE_V3";
/// The V3 input type whose children arrive as `parent.child` inputs, one per grown slot.
pub(crate) const AUTOGROW_V3: &str = "COMFY_AUTOGROW_V3";
/// The V3 combo whose selected option brings its own `parent.child` inputs.
pub(crate) const DYNAMICCOMBO_V3: &str = "COMFY_DYNAMICCOMBO_V3";

/// All node classes a server knows, by class name.
#[derive(Debug, Clone, Default)]
pub struct NodeDefs {
    classes: IndexMap<String, NodeDef, rustc_hash::FxBuildHasher>,
}

/// Which section of `input` an input is declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// Must be present in a prompt.
    Required,
    /// May be omitted.
    Optional,
    /// Supplied by the server; never sent.
    Hidden,
}

/// One node class.
#[derive(Debug, Clone)]
pub struct NodeDef {
    /// Class name (the `class_type` in prompts).
    pub name: String,
    /// Human name, falls back to `name`.
    pub display_name: String,
    /// Menu category, e.g. `loaders`.
    pub category: String,
    /// `nodes`, `comfy_extras.nodes_*`, `custom_nodes.<pack>`…
    pub python_module: String,
    /// True when the class is an output node (execution starts from these).
    pub output_node: bool,
    /// Inputs in `input_order` (required, then optional, then hidden).
    pub inputs: Vec<InputDef>,
    /// Outputs in slot order.
    pub outputs: Vec<OutputDef>,
    /// True for partner API nodes.
    pub api_node: bool,
}

/// One declared output slot.
#[derive(Debug, Clone)]
pub struct OutputDef {
    /// Type name, e.g. `MODEL`, or `COMBO` for list outputs.
    pub type_name: String,
    /// Display name of the output.
    pub name: String,
    /// Whether the output is a list.
    pub is_list: bool,
}

/// One declared input.
#[derive(Debug, Clone)]
pub struct InputDef {
    /// Input name as used in prompts.
    pub name: String,
    /// Where it is declared.
    pub section: Section,
    /// Its type.
    pub kind: InputKind,
    /// The options map (`default`, `min`, `max`, `step`, flags…), empty when absent.
    pub options: Map<String, Value>,
}

/// The type of an input.
#[derive(Debug, Clone)]
pub enum InputKind {
    /// A combo: the value must be one of `options` (legacy list form or V3 `COMBO`).
    Combo {
        /// Allowed values.
        options: Vec<Value>,
        /// Each element of a list value must be allowed.
        multiselect: bool,
        /// Values come from a remote source; the server does not check them.
        remote: bool,
    },
    /// A named type: `INT`, `FLOAT`, `STRING`, `BOOLEAN`, `MODEL`, `*`, `A,B` unions, V3 kinds.
    Type(String),
}

/// A node definition file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DefsError {
    /// The file could not be read.
    #[error("cannot read node definitions '{path}': {source}")]
    Read {
        /// File path.
        path: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error(
        "node definitions '{path}' are not valid JSON (line {line}, column {column}): {message}"
    )]
    Syntax {
        /// File path.
        path: String,
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
        /// serde_json's message.
        message: String,
    },
    /// The top level is not an object of classes.
    #[error("node definitions '{path}' must be a JSON object keyed by class name, as GET /object_info returns")]
    Shape {
        /// File path.
        path: String,
    },
}

impl NodeDefs {
    /// Parses an `/object_info` body. Entries that are not objects are skipped.
    pub fn from_value(value: &Value) -> Option<NodeDefs> {
        let map = value.as_object()?;
        let mut defs = NodeDefs::default();
        for (name, entry) in map {
            if let Some(def) = NodeDef::from_value(name, entry) {
                defs.classes.insert(name.clone(), def);
            }
        }
        Some(defs)
    }

    /// Loads one `/object_info` file.
    pub fn load_file(path: &Path) -> Result<NodeDefs, DefsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| DefsError::Read {
            path: shown.clone(),
            source,
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| DefsError::Syntax {
            path: shown.clone(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        NodeDefs::from_value(&value).ok_or(DefsError::Shape { path: shown })
    }

    /// Loads several files; later files add (or replace) classes.
    pub fn load_files<P: AsRef<Path>>(paths: &[P]) -> Result<NodeDefs, DefsError> {
        let mut defs = NodeDefs::default();
        for path in paths {
            defs.merge(NodeDefs::load_file(path.as_ref())?);
        }
        Ok(defs)
    }

    /// Adds the classes of `other`, replacing same-named ones.
    pub(crate) fn merge(&mut self, other: NodeDefs) {
        self.classes.extend(other.classes);
    }

    /// The definition of a class.
    pub fn get(&self, class: &str) -> Option<&NodeDef> {
        self.classes.get(class)
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// True when no class is known.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// All classes in file order.
    pub fn iter(&self) -> impl Iterator<Item = &NodeDef> {
        self.classes.values()
    }
}

impl NodeDef {
    /// Parses one `/object_info` entry.
    pub fn from_value(name: &str, entry: &Value) -> Option<NodeDef> {
        let obj = entry.as_object()?;
        let str_field = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_string);
        let input = obj.get("input").and_then(Value::as_object);
        let order = obj.get("input_order").and_then(Value::as_object);
        let mut inputs = Vec::new();
        for (key, section) in [
            ("required", Section::Required),
            ("optional", Section::Optional),
            ("hidden", Section::Hidden),
        ] {
            let Some(specs) = input.and_then(|i| i.get(key)).and_then(Value::as_object) else {
                continue;
            };
            let ordered: Vec<&String> =
                match order.and_then(|o| o.get(key)).and_then(Value::as_array) {
                    Some(names) => {
                        let mut list: Vec<&String> = names
                            .iter()
                            .filter_map(Value::as_str)
                            .filter_map(|n| specs.get_key_value(n).map(|(k, _)| k))
                            .collect();
                        // Declared but missing from input_order: keep them, after the ordered ones.
                        for k in specs.keys() {
                            if !list.contains(&k) {
                                list.push(k);
                            }
                        }
                        list
                    }
                    None => specs.keys().collect(),
                };
            for input_name in ordered {
                inputs.push(InputDef::from_spec(input_name, section, &specs[input_name]));
            }
        }
        let types: Vec<String> = obj
            .get("output")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(output_type_name).collect())
            .unwrap_or_default();
        let names = obj.get("output_name").and_then(Value::as_array);
        let lists = obj.get("output_is_list").and_then(Value::as_array);
        let outputs = types
            .into_iter()
            .enumerate()
            .map(|(i, type_name)| OutputDef {
                name: names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .unwrap_or(&type_name)
                    .to_string(),
                is_list: lists
                    .and_then(|l| l.get(i))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                type_name,
            })
            .collect();
        Some(NodeDef {
            name: name.to_string(),
            display_name: str_field("display_name").unwrap_or_else(|| name.to_string()),
            category: str_field("category").unwrap_or_default(),
            python_module: str_field("python_module").unwrap_or_default(),
            output_node: obj
                .get("output_node")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            inputs,
            outputs,
            api_node: obj
                .get("api_node")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// The declared input with this name (not dotted children).
    pub fn input(&self, name: &str) -> Option<&InputDef> {
        self.inputs.iter().find(|i| i.name == name)
    }

    /// Required and optional inputs (hidden ones are never sent).
    pub fn visible_inputs(&self) -> impl Iterator<Item = &InputDef> {
        self.inputs.iter().filter(|i| i.section != Section::Hidden)
    }
}

fn output_type_name(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        // An output declared as a list of values is a combo output.
        Value::Array(_) => "COMBO".to_string(),
        other => other.to_string(),
    }
}

impl InputDef {
    /// Parses a `[TYPE, options]` spec (V1 nodes write hidden specs as a bare string).
    pub(crate) fn from_spec(name: &str, section: Section, spec: &Value) -> InputDef {
        let (ty, options) = match spec {
            Value::Array(parts) => (
                parts.first().cloned().unwrap_or(Value::Null),
                parts
                    .get(1)
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            ),
            other => (other.clone(), Map::new()),
        };
        let flag = |key: &str| options.get(key).and_then(Value::as_bool).unwrap_or(false);
        let kind = match ty {
            Value::Array(list) => InputKind::Combo {
                options: list,
                multiselect: flag("multiselect") || flag("multi_select"),
                remote: options.contains_key("remote") || flag("remote_combo"),
            },
            Value::String(s) if s == "COMBO" => InputKind::Combo {
                options: options
                    .get("options")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                multiselect: flag("multiselect") || flag("multi_select"),
                remote: options.contains_key("remote") || flag("remote_combo"),
            },
            Value::String(s) => InputKind::Type(s),
            other => InputKind::Type(other.to_string()),
        };
        InputDef {
            name: name.to_string(),
            section,
            kind,
            options,
        }
    }

    /// The type name used for link checks: combos are `COMBO`.
    pub fn type_name(&self) -> &str {
        match &self.kind {
            InputKind::Combo { .. } => "COMBO",
            InputKind::Type(t) => t,
        }
    }

    /// `min` option.
    pub fn min(&self) -> Option<&Number> {
        self.options.get("min").and_then(Value::as_number)
    }

    /// `max` option.
    pub fn max(&self) -> Option<&Number> {
        self.options.get("max").and_then(Value::as_number)
    }

    /// `step` option as a float.
    pub fn step(&self) -> Option<f64> {
        self.options.get("step").and_then(Value::as_f64)
    }

    /// `default` option.
    pub fn default_value(&self) -> Option<&Value> {
        self.options.get("default")
    }

    /// True for an input that can only be linked (no widget).
    pub(crate) fn force_input(&self) -> bool {
        self.options
            .get("forceInput")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// True when the combo lists files the user uploads (LoadImage and friends).
    pub(crate) fn is_upload(&self) -> bool {
        [
            "image_upload",
            "video_upload",
            "audio_upload",
            "animated_image_upload",
            "file_upload",
            "mesh_upload",
            "upload",
        ]
        .iter()
        .any(|k| match self.options.get(*k) {
            Some(Value::Bool(b)) => *b,
            Some(Value::Null) | None => false,
            Some(_) => true,
        })
    }

    /// The spec of a dotted child `parent.child` of a V3 autogrow or dynamic-combo input.
    /// `selected` is the value of the parent input in the prompt (the chosen option key).
    pub(crate) fn child_spec(&self, child: &str, selected: Option<&Value>) -> Option<InputDef> {
        match self.type_name() {
            AUTOGROW_V3 => {
                let template = self.options.get("template")?.as_object()?;
                let input = template.get("input")?.as_object()?;
                // One templated input; its slots are named by prefix+index or by `names`.
                for key in ["required", "optional"] {
                    if let Some((_, spec)) = input
                        .get(key)
                        .and_then(Value::as_object)
                        .and_then(|m| m.iter().next())
                    {
                        let section = if key == "required" {
                            Section::Required
                        } else {
                            Section::Optional
                        };
                        return Some(InputDef::from_spec(child, section, spec));
                    }
                }
                None
            }
            DYNAMICCOMBO_V3 => {
                let wanted = selected?.as_str()?;
                let option = self
                    .options
                    .get("options")?
                    .as_array()?
                    .iter()
                    .find(|o| o.get("key").and_then(Value::as_str) == Some(wanted))?;
                for (key, section) in [
                    ("required", Section::Required),
                    ("optional", Section::Optional),
                ] {
                    if let Some(spec) = option
                        .get("inputs")
                        .and_then(|i| i.get(key))
                        .and_then(|m| m.get(child))
                    {
                        return Some(InputDef::from_spec(child, section, spec));
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// For a V3 autogrow input, the least number of grown slots (0 when the template says none
    /// are needed or gives no minimum); `None` for other inputs.
    pub(crate) fn autogrow_min(&self) -> Option<u64> {
        if self.type_name() != AUTOGROW_V3 {
            return None;
        }
        Some(
            self.options
                .get("template")
                .and_then(|t| t.get("min"))
                .and_then(Value::as_u64)
                .unwrap_or(0),
        )
    }

    /// Required children of a dynamic combo for the selected option.
    pub(crate) fn required_children(&self, selected: Option<&Value>) -> Vec<String> {
        if self.type_name() != DYNAMICCOMBO_V3 {
            return Vec::new();
        }
        let Some(wanted) = selected.and_then(Value::as_str) else {
            return Vec::new();
        };
        self.options
            .get("options")
            .and_then(Value::as_array)
            .and_then(|opts| {
                opts.iter()
                    .find(|o| o.get("key").and_then(Value::as_str) == Some(wanted))
            })
            .and_then(|o| o.get("inputs"))
            .and_then(|i| i.get("required"))
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Whether an output of type `received` may feed an input of type `expected`
/// (`*` matches anything, comma-separated unions overlap, V3 MatchType accepts anything).
pub(crate) fn types_compatible(received: &str, expected: &str) -> bool {
    if received == expected || received == "*" || expected == "*" || expected == MATCHTYPE_V3 {
        return true;
    }
    if received == MATCHTYPE_V3 {
        return true;
    }
    let split = |s: &str| -> Vec<String> { s.split(',').map(|t| t.trim().to_string()).collect() };
    let r = split(received);
    let e = split(expected);
    r.iter().any(|t| t == "*" || e.contains(t)) || e.iter().any(|t| t == "*")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_legacy_and_v3_combos_in_input_order() {
        let v = json!({
            "A": {"input": {"required": {"b": ["INT", {"min": 1, "max": 4}], "a": [["x", "y"], {}]},
                             "optional": {"c": ["COMBO", {"options": ["p", "q"], "multiselect": true}]},
                             "hidden": {"prompt": "PROMPT"}},
                  "input_order": {"required": ["a", "b"], "optional": ["c"], "hidden": ["prompt"]},
                  "output": ["MODEL", ["one", "two"]], "output_name": ["m", "list"], "output_is_list": [false, true],
                  "output_node": false, "python_module": "nodes", "display_name": null}
        });
        let defs = NodeDefs::from_value(&v).unwrap();
        let a = defs.get("A").unwrap();
        let names: Vec<_> = a.inputs.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "prompt"]);
        assert!(
            matches!(&a.inputs[0].kind, InputKind::Combo { options, .. } if options.len() == 2)
        );
        assert!(matches!(
            &a.inputs[2].kind,
            InputKind::Combo {
                multiselect: true,
                ..
            }
        ));
        assert_eq!(a.inputs[3].section, Section::Hidden);
        assert_eq!(a.outputs[1].type_name, "COMBO");
        assert!(a.outputs[1].is_list);
        assert_eq!(a.display_name, "A");
        assert_eq!(a.inputs[1].max().unwrap().as_u64(), Some(4));
    }

    #[test]
    fn type_compatibility_rules() {
        assert!(types_compatible("IMAGE", "IMAGE"));
        assert!(types_compatible("*", "LATENT"));
        assert!(types_compatible("INT", "INT,FLOAT"));
        assert!(types_compatible("FLOAT,INT", "INT"));
        assert!(types_compatible("VAE", MATCHTYPE_V3));
        assert!(!types_compatible("IMAGE", "LATENT"));
        assert!(!types_compatible("INT,FLOAT", "STRING"));
    }

    #[test]
    fn unknown_fields_and_odd_entries_are_not_fatal() {
        let v = json!({"X": {"weird": 1}, "Y": 5});
        let defs = NodeDefs::from_value(&v).unwrap();
        assert_eq!(defs.len(), 1);
        assert!(defs.get("X").unwrap().inputs.is_empty());
    }

    #[test]
    fn real_fixtures_parse() {
        let core = NodeDefs::load_file(Path::new(&format!(
            "{}/comfyui/GET__object_info.final.json",
            crate::FIXTURES
        )))
        .unwrap();
        assert_eq!(core.len(), 496);
        let ks = core.get("KSampler").unwrap();
        assert_eq!(
            ks.input("seed").unwrap().max().unwrap().as_u64(),
            Some(u64::MAX)
        );
        assert!(core.get("SaveImage").unwrap().output_node);
        let newer = NodeDefs::load_file(Path::new(&format!(
            "{}/comfyui-newer/object_info.json",
            crate::FIXTURES
        )))
        .unwrap();
        assert_eq!(newer.len(), 688);
        let resize = newer.get("ResizeImageMaskNode").unwrap();
        let rt = resize.input("resize_type").unwrap();
        let w = rt
            .child_spec("width", Some(&json!("scale dimensions")))
            .unwrap();
        assert_eq!(w.type_name(), "INT");
        let batch = newer
            .get("BatchImagesNode")
            .unwrap()
            .input("images")
            .unwrap();
        assert_eq!(
            batch.child_spec("image_1", None).unwrap().type_name(),
            "IMAGE"
        );
    }
}
