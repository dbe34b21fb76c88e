//! Offline validation that mirrors ComfyUI's own checks of a prompt (see comfyui-api.md §2.3),
//! so a broken variant is caught before it costs GPU time.
//!
//! Like the server: every class must be known, only nodes upstream of output nodes are checked,
//! links must carry a compatible type, literals are coerced by declared type and then held to
//! min/max, combo values must be listed. Unlike the server, a combo miss on a model-file input is
//! reported as a missing model file and one on an upload input as a missing input file.

use super::{Input, Workflow};
use crate::nodedefs::{types_compatible, InputDef, InputKind, NodeDefs, Section, DYNAMICCOMBO_V3};
use serde::Serialize;
use serde_json::{Number, Value};

/// What kind of problem a validation finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The server has no such node class.
    UnknownClass,
    /// No node of the workflow is an output node.
    NoOutputNode,
    /// A required input is absent.
    RequiredInputMissing,
    /// A link names an output index the source node does not have.
    BadLinkSlot,
    /// A link carries a type the input does not accept.
    ReturnTypeMismatch,
    /// A literal cannot be converted to the input's type.
    InvalidInputType,
    /// A number below the input's minimum.
    ValueSmallerThanMin,
    /// A number above the input's maximum.
    ValueBiggerThanMax,
    /// A combo value that is not in the list (and is not a file).
    ValueNotInList,
    /// A model file the server does not list (a combo miss on a model-file input).
    MissingModelFile,
    /// An input file (image, video, audio…) the server does not list.
    MissingInputFile,
}

impl ProblemKind {
    /// True for problems about files absent on that server rather than a broken graph.
    pub fn is_missing_file(self) -> bool {
        matches!(
            self,
            ProblemKind::MissingModelFile | ProblemKind::MissingInputFile
        )
    }
}

/// One validation finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// Node id (absent for workflow-wide problems).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node's class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_type: Option<String>,
    /// The input concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
    /// The offending value, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// The result of validating one workflow.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Every problem, in node order.
    pub problems: Vec<Problem>,
    /// How many nodes were checked (those upstream of output nodes).
    pub checked_nodes: usize,
}

impl Report {
    /// True when nothing is wrong.
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    /// True when every problem is a missing model or input file.
    pub fn only_missing_files(&self) -> bool {
        self.problems.iter().all(|p| p.kind.is_missing_file())
    }

    /// Problems that are not missing files.
    pub fn graph_errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| !p.kind.is_missing_file())
    }

    /// Number of problems of one kind.
    pub fn count(&self, kind: ProblemKind) -> usize {
        self.problems.iter().filter(|p| p.kind == kind).count()
    }
}

/// File extensions of model weights.
const MODEL_EXTENSIONS: &[&str] = &[
    ".safetensors",
    ".ckpt",
    ".pt",
    ".pth",
    ".bin",
    ".gguf",
    ".sft",
    ".onnx",
    ".pt2",
    ".pkl",
];

/// Input names that select a model file.
const MODEL_INPUT_NAMES: &[&str] = &[
    "ckpt_name",
    "unet_name",
    "lora_name",
    "vae_name",
    "clip_name",
    "clip_name1",
    "clip_name2",
    "clip_name3",
    "clip_name4",
    "control_net_name",
    "model_name",
    "clip_vision",
    "style_model_name",
    "gligen_name",
    "hypernetwork_name",
    "upscale_model",
    "audio_encoder_name",
    "model_path",
];

/// Whether a combo miss on this input/value means a model file is missing on the server.
pub(crate) fn is_model_file_input(input: &str, value: &Value) -> bool {
    if MODEL_INPUT_NAMES.contains(&input) {
        return true;
    }
    value.as_str().is_some_and(|s| {
        let lower = s.to_ascii_lowercase();
        MODEL_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
    })
}

/// Validates `workflow` against the server's node definitions.
pub fn validate(workflow: &Workflow, defs: &NodeDefs) -> Report {
    let mut report = Report::default();
    for (id, node) in &workflow.nodes {
        if defs.get(&node.class_type).is_none() {
            report.problems.push(Problem {
                kind: ProblemKind::UnknownClass,
                node: Some(id.clone()),
                class_type: Some(node.class_type.clone()),
                input: None,
                message: format!(
                    "node class '{}'{} is not installed on that server; install the custom node pack that provides it (or update ComfyUI)",
                    node.class_type,
                    node.title().map(|t| format!(" (titled '{t}')")).unwrap_or_default()
                ),
                value: None,
            });
        }
    }
    let reachable = workflow.reachable_from_outputs(defs);
    if workflow.output_nodes(defs).is_empty() {
        report.problems.push(Problem {
            kind: ProblemKind::NoOutputNode,
            node: None,
            class_type: None,
            input: None,
            message: "the workflow has no output node (SaveImage, PreviewImage, VHS_VideoCombine…), so ComfyUI would run nothing; add one".into(),
            value: None,
        });
    }
    report.checked_nodes = reachable.len();
    for id in workflow.nodes.keys().filter(|id| reachable.contains(*id)) {
        let node = &workflow.nodes[id];
        let Some(def) = defs.get(&node.class_type) else {
            continue;
        };
        let mut ctx = NodeCheck {
            workflow,
            defs,
            node_id: id,
            class_type: &node.class_type,
            problems: &mut report.problems,
        };
        for spec in def.visible_inputs() {
            match node.inputs.get(&spec.name) {
                Some(input) => {
                    ctx.check_input(spec, input);
                    if spec.type_name() == DYNAMICCOMBO_V3 {
                        ctx.check_dynamic_key(spec, input.as_literal());
                        for child in spec.required_children(input.as_literal()) {
                            let dotted = format!("{}.{child}", spec.name);
                            let nested = format!("{dotted}.");
                            if !node
                                .inputs
                                .keys()
                                .any(|k| *k == dotted || k.starts_with(&nested))
                            {
                                ctx.push(
                                    ProblemKind::RequiredInputMissing,
                                    &dotted,
                                    format!("required input '{dotted}' is missing"),
                                    None,
                                );
                            }
                        }
                    }
                }
                None if spec.section == Section::Required && spec.autogrow_min() != Some(0) => {
                    let grown = node
                        .inputs
                        .keys()
                        .any(|k| k.starts_with(&format!("{}.", spec.name)));
                    if !grown {
                        ctx.push(
                            ProblemKind::RequiredInputMissing,
                            &spec.name,
                            format!(
                                "required input '{}' is missing; connect it or give it a value",
                                spec.name
                            ),
                            None,
                        );
                    }
                }
                None => {}
            }
        }
        // Dotted children of V3 autogrow / dynamic-combo inputs.
        for (name, input) in &node.inputs {
            let Some((parent, child)) = name.split_once('.') else {
                continue;
            };
            let Some(parent_spec) = def.input(parent) else {
                continue;
            };
            let selected = node.inputs.get(parent).and_then(Input::as_literal);
            if let Some(child_spec) = parent_spec.child_spec(child, selected) {
                let renamed = InputDef {
                    name: name.clone(),
                    ..child_spec
                };
                ctx.check_input(&renamed, input);
            }
        }
    }
    report
}

struct NodeCheck<'a> {
    workflow: &'a Workflow,
    defs: &'a NodeDefs,
    node_id: &'a str,
    class_type: &'a str,
    problems: &'a mut Vec<Problem>,
}

impl NodeCheck<'_> {
    fn push(&mut self, kind: ProblemKind, input: &str, message: String, value: Option<Value>) {
        self.problems.push(Problem {
            kind,
            node: Some(self.node_id.to_string()),
            class_type: Some(self.class_type.to_string()),
            input: Some(input.to_string()),
            message,
            value,
        });
    }

    fn check_input(&mut self, spec: &InputDef, input: &Input) {
        match input {
            Input::Link(link) => self.check_link(spec, &link.node, link.slot),
            Input::Literal(value) => self.check_literal(spec, value),
        }
    }

    fn check_link(&mut self, spec: &InputDef, source: &str, slot: usize) {
        let Some(src_node) = self.workflow.nodes.get(source) else {
            return; // structural check at load time
        };
        let Some(src_def) = self.defs.get(&src_node.class_type) else {
            return; // reported as unknown class
        };
        let Some(output) = src_def.outputs.get(slot) else {
            self.push(
                ProblemKind::BadLinkSlot,
                &spec.name,
                format!(
                    "links to output {slot} of node '{source}' ({}), which has only {} output(s) on that server; the workflow may be newer than the server — update ComfyUI or reconnect the input",
                    src_node.class_type,
                    src_def.outputs.len()
                ),
                None,
            );
            return;
        };
        let expected = spec.type_name();
        let received = output.type_name.as_str();
        if !types_compatible(received, expected) {
            self.push(
                ProblemKind::ReturnTypeMismatch,
                &spec.name,
                format!(
                    "expects {expected} but is linked to output {slot} of node '{source}' ({}), which gives {received}",
                    src_node.class_type
                ),
                None,
            );
        }
    }

    fn check_literal(&mut self, spec: &InputDef, value: &Value) {
        match &spec.kind {
            InputKind::Combo {
                options,
                multiselect,
                remote,
            } => {
                // Remote lists, and empty lists the frontend fills in (CustomCombo), are not
                // checked; an empty model list still means the file is missing.
                if *remote
                    || (options.is_empty()
                        && !spec.is_upload()
                        && !is_model_file_input(&spec.name, value))
                {
                    return;
                }
                let values: Vec<&Value> = match (multiselect, value) {
                    (true, Value::Array(items)) => items.iter().collect(),
                    (true, Value::Object(o)) if o.get("__value__").is_some_and(Value::is_array) => {
                        o["__value__"]
                            .as_array()
                            .map(|a| a.iter().collect())
                            .unwrap_or_default()
                    }
                    _ => vec![value],
                };
                for v in values {
                    if !options.iter().any(|o| combo_equal(o, v)) {
                        self.combo_miss(spec, v, options.len());
                    }
                }
            }
            InputKind::Type(t) => match t.as_str() {
                "INT" => self.check_number(spec, value, true),
                "FLOAT" => self.check_number(spec, value, false),
                _ => {}
            },
        }
    }

    /// A dynamic combo set to a key none of its options has: the server would expand no
    /// option, and the node would run without the sub-inputs it needs.
    fn check_dynamic_key(&mut self, spec: &InputDef, value: Option<&Value>) {
        let Some(value) = value else {
            return;
        };
        let keys: Vec<&Value> = spec
            .options
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("key"))
            .collect();
        if keys.is_empty() || keys.contains(&value) {
            return;
        }
        let listed: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        self.push(
            ProblemKind::ValueNotInList,
            &spec.name.clone(),
            format!(
                "{value} is not an option of '{}' (a V3 dynamic combo: {}); pick one of them",
                spec.name,
                listed.join(", ")
            ),
            Some(value.clone()),
        );
    }

    fn combo_miss(&mut self, spec: &InputDef, value: &Value, listed: usize) {
        let shown = value
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string());
        let (kind, message) = if spec.is_upload() {
            (
                ProblemKind::MissingInputFile,
                format!(
                    "input file '{shown}' is not in that server's input folder; upload it (or put it in ComfyUI/input)"
                ),
            )
        } else if is_model_file_input(&spec.name, value) {
            (
                ProblemKind::MissingModelFile,
                format!(
                    "missing model file on that server: '{shown}' is not among the {listed} file(s) it lists for '{}'; download it into the matching models folder or pick an installed one",
                    spec.name
                ),
            )
        } else {
            let listing = if listed <= 20 {
                let opts: Vec<String> = match &spec.kind {
                    InputKind::Combo { options, .. } => options
                        .iter()
                        .map(|o| {
                            o.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| o.to_string())
                        })
                        .collect(),
                    InputKind::Type(_) => Vec::new(),
                };
                format!("one of: {}", opts.join(", "))
            } else {
                format!("one of the {listed} listed values")
            };
            (
                ProblemKind::ValueNotInList,
                format!("value '{shown}' is not allowed here; expected {listing} (the workflow may be newer than the server)"),
            )
        };
        self.push(kind, &spec.name, message, Some(value.clone()));
    }

    fn check_number(&mut self, spec: &InputDef, value: &Value, integer: bool) {
        let ty = if integer { "INT" } else { "FLOAT" };
        let Some(n) = coerce_number(value, integer) else {
            self.push(
                ProblemKind::InvalidInputType,
                &spec.name,
                format!("cannot convert {value} to {ty}; give a number"),
                Some(value.clone()),
            );
            return;
        };
        if let Some(min) = spec.min().and_then(|m| Num::from_number(m, integer)) {
            if n.less_than(&min) {
                self.push(
                    ProblemKind::ValueSmallerThanMin,
                    &spec.name,
                    format!(
                        "value {value} is smaller than the minimum {}",
                        spec.min().expect("checked")
                    ),
                    Some(value.clone()),
                );
            }
        }
        if let Some(max) = spec.max().and_then(|m| Num::from_number(m, integer)) {
            if max.less_than(&n) {
                self.push(
                    ProblemKind::ValueBiggerThanMax,
                    &spec.name,
                    format!(
                        "value {value} is bigger than the maximum {}",
                        spec.max().expect("checked")
                    ),
                    Some(value.clone()),
                );
            }
        }
    }
}

fn combo_equal(option: &Value, value: &Value) -> bool {
    match (option, value) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => option == value,
    }
}

/// A number compared exactly as an integer when possible (seeds reach u64::MAX).
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn from_number(n: &Number, integer: bool) -> Option<Num> {
        if let Some(i) = n.as_i64() {
            return Some(Num::Int(i as i128));
        }
        if let Some(u) = n.as_u64() {
            return Some(Num::Int(u as i128));
        }
        let f = n.as_f64()?;
        if integer && f.is_finite() {
            // Python's int() truncates toward zero.
            return Some(Num::Int(f.trunc() as i128));
        }
        Some(Num::Float(f))
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn less_than(&self, other: &Num) -> bool {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a < b,
            _ => self.as_f64() < other.as_f64(),
        }
    }
}

/// Coerces a literal like the server does: int()/float() of numbers, numeric strings, booleans.
fn coerce_number(value: &Value, integer: bool) -> Option<Num> {
    match value {
        Value::Number(n) => Num::from_number(n, integer),
        Value::Bool(b) => Some(Num::Int(*b as i128)),
        Value::String(s) => {
            let t = s.trim();
            if integer {
                t.parse::<i128>().ok().map(Num::Int)
            } else {
                t.parse::<f64>().ok().map(Num::Float)
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs() -> NodeDefs {
        NodeDefs::from_value(&json!({
            "Src": {"input": {"required": {"n": ["INT", {"min": 1, "max": 8}]}}, "output": ["IMAGE", "INT"], "output_node": false},
            "Ckpt": {"input": {"required": {"ckpt_name": [["a.safetensors"], {}]}}, "output": ["MODEL"]},
            "Load": {"input": {"required": {"image": [["x.png"], {"image_upload": true}]}}, "output": ["IMAGE"]},
            "Mode": {"input": {"required": {"mode": [["fast", "slow"], {}], "f": ["FLOAT", {"min": 0.0, "max": 1.0}]}}, "output": []},
            "Save": {"input": {"required": {"images": ["IMAGE", {}]}, "optional": {"m": ["MODEL", {}], "i": ["INT,FLOAT", {}]}}, "output": [], "output_node": true}
        }))
        .unwrap()
    }

    fn check(prompt: Value) -> Report {
        let wf = crate::workflow::parse_api(&prompt, "test.json").unwrap();
        validate(&wf, &defs())
    }

    #[test]
    fn valid_prompt_has_no_problems() {
        let r = check(json!({"1": {"class_type": "Src", "inputs": {"n": 3}},
                             "2": {"class_type": "Save", "inputs": {"images": ["1", 0], "i": ["1", 1]}}}));
        assert!(r.is_valid(), "{:?}", r.problems);
        assert_eq!(r.checked_nodes, 2);
    }

    #[test]
    fn each_kind_is_reported() {
        let r = check(json!({
            "1": {"class_type": "Src", "inputs": {"n": 0}},
            "2": {"class_type": "Save", "inputs": {"images": ["1", 5], "m": ["1", 0]}},
            "3": {"class_type": "Save", "inputs": {"images": ["4", 0], "m": ["5", 0]}},
            "4": {"class_type": "Load", "inputs": {"image": "mine.png"}},
            "5": {"class_type": "Ckpt", "inputs": {"ckpt_name": "b.safetensors"}},
            "6": {"class_type": "Save", "inputs": {"images": ["7", 0]}},
            "7": {"class_type": "Nope", "inputs": {}},
            "8": {"class_type": "Src", "inputs": {"n": "x"}},
            "9": {"class_type": "Save", "inputs": {"images": ["8", 0]}},
            "10": {"class_type": "Src", "inputs": {"n": 9}},
            "11": {"class_type": "Save", "inputs": {"images": ["10", 0]}},
            "12": {"class_type": "Save", "inputs": {}}
        }));
        let kinds: Vec<ProblemKind> = r.problems.iter().map(|p| p.kind).collect();
        for k in [
            ProblemKind::UnknownClass,
            ProblemKind::ValueSmallerThanMin,
            ProblemKind::BadLinkSlot,
            ProblemKind::ReturnTypeMismatch,
            ProblemKind::MissingInputFile,
            ProblemKind::MissingModelFile,
            ProblemKind::InvalidInputType,
            ProblemKind::ValueBiggerThanMax,
            ProblemKind::RequiredInputMissing,
        ] {
            assert_eq!(r.count(k), 1, "{k:?} in {kinds:?}");
        }
    }

    #[test]
    fn unreachable_nodes_are_not_checked() {
        let r = check(json!({"1": {"class_type": "Src", "inputs": {"n": 1}},
                             "2": {"class_type": "Save", "inputs": {"images": ["1", 0]}},
                             "3": {"class_type": "Src", "inputs": {"n": 100}}}));
        assert!(r.is_valid());
    }

    #[test]
    fn no_output_node_and_combo_not_in_list() {
        let r = check(json!({"1": {"class_type": "Mode", "inputs": {"mode": "medium", "f": 0.5}}}));
        assert_eq!(r.count(ProblemKind::NoOutputNode), 1);
        // Unreachable, so the bad combo is not checked, like the server.
        assert_eq!(r.count(ProblemKind::ValueNotInList), 0);
    }

    #[test]
    fn numbers_coerce_like_python() {
        assert!(matches!(
            coerce_number(&json!(7.9), true),
            Some(Num::Int(7))
        ));
        assert!(matches!(
            coerce_number(&json!("8"), true),
            Some(Num::Int(8))
        ));
        assert!(coerce_number(&json!([1]), true).is_none());
        let big: Value = serde_json::from_str("18446744073709551615").unwrap();
        assert!(matches!(coerce_number(&big, true), Some(Num::Int(v)) if v == u64::MAX as i128));
    }
}
