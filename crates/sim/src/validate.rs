//! `POST /prompt` validation with ComfyUI 0.3.64's response shapes: the top-level errors
//! (`no_prompt`, `invalid_prompt`, `prompt_no_outputs`, `prompt_outputs_failed_validation`),
//! the per-node reasons (`required_input_missing`, `bad_linked_input`, `return_type_mismatch`,
//! `exception_during_inner_validation`, `invalid_input_type`, `value_smaller_than_min`,
//! `value_bigger_than_max`, `value_not_in_list`…), `dependent_outputs` with the server's
//! accumulation quirk, and the coercion of literal values that ComfyUI writes back into the
//! stored prompt (`12.7` → `12` for an INT, `123` → `"123"` for a STRING).

use super::nodes::Defs;
use serde_json::{json, Map, Value};

/// Outcome of validating one prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Queue it: the coerced prompt, the output nodes to execute, and the node errors of the
    /// outputs that were dropped (non-empty = partial 200).
    Accept {
        prompt: Map<String, Value>,
        outputs: Vec<String>,
        node_errors: Map<String, Value>,
    },
    /// 400 with this body.
    Reject(Value),
}

fn top_error(kind: &str, message: &str, details: &str) -> Value {
    json!({
        "error": {"type": kind, "message": message, "details": details, "extra_info": {}},
        "node_errors": {}
    })
}

/// Python's `repr()` of a JSON literal, as it appears in messages.
pub(crate) fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            if s.contains('\'') && !s.contains('"') {
                format!("\"{s}\"")
            } else {
                format!("'{}'", s.replace('\'', "\\'"))
            }
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("'{k}': {}", py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Python's `str()`.
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn is_link(v: &Value) -> bool {
    v.is_array()
}

const EXEC: &str = "/home/user/ComfyUI/execution.py";

fn tb_frame(line: u32, func: &str, code: &str) -> String {
    format!("  File \"{EXEC}\", line {line}, in {func}\n    {code}\n")
}

/// Why validating a linked node raised (ComfyUI catches it one level up).
struct Raised {
    exception_type: &'static str,
    message: String,
    frame: String,
}

#[derive(Clone)]
struct NodeResult {
    valid: bool,
    reasons: Vec<Value>,
}

struct Validator<'a> {
    defs: &'a Defs,
    prompt: Map<String, Value>,
    validated: indexmap_like::Ordered<NodeResult>,
}

mod indexmap_like {
    /// A tiny insertion-ordered map (validation order matters for `dependent_outputs`).
    pub(crate) struct Ordered<V> {
        keys: Vec<String>,
        map: std::collections::HashMap<String, V>,
    }

    impl<V> Ordered<V> {
        pub fn new() -> Self {
            Ordered {
                keys: Vec::new(),
                map: std::collections::HashMap::new(),
            }
        }
        pub fn get(&self, k: &str) -> Option<&V> {
            self.map.get(k)
        }
        pub fn insert(&mut self, k: String, v: V) {
            if !self.map.contains_key(&k) {
                self.keys.push(k.clone());
            }
            self.map.insert(k, v);
        }
        pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
            self.keys.iter().map(move |k| (k, &self.map[k]))
        }
    }
}

fn input_info(spec: &Value) -> Value {
    match spec {
        Value::Array(a) => {
            let ty = a.first().cloned().unwrap_or(Value::Null);
            let opts = a.get(1).cloned().unwrap_or_else(|| json!({}));
            json!([ty, opts])
        }
        _ => json!([spec, {}]),
    }
}

enum Coerced {
    Ok(Value),
    Err(String),
}

fn coerce(ty: &str, v: &Value) -> Option<Coerced> {
    Some(match ty {
        "INT" => match v {
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Coerced::Ok(json!(i))
                } else if let Some(u) = n.as_u64() {
                    Coerced::Ok(json!(u))
                } else if let Some(f) = n.as_f64() {
                    let t = f.trunc();
                    if t.abs() < 9.0e15 {
                        Coerced::Ok(json!(t as i64))
                    } else {
                        Coerced::Ok(v.clone())
                    }
                } else {
                    Coerced::Ok(v.clone())
                }
            }
            Value::Bool(b) => Coerced::Ok(json!(*b as i64)),
            Value::String(s) => match s.trim().parse::<i64>() {
                Ok(i) => Coerced::Ok(json!(i)),
                Err(_) => Coerced::Err(format!("invalid literal for int() with base 10: {}", py_repr(v))),
            },
            Value::Null => Coerced::Err("int() argument must be a string, a bytes-like object or a real number, not 'NoneType'".into()),
            Value::Array(_) => Coerced::Err("int() argument must be a string, a bytes-like object or a real number, not 'list'".into()),
            Value::Object(_) => Coerced::Err("int() argument must be a string, a bytes-like object or a real number, not 'dict'".into()),
        },
        "FLOAT" => match v {
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.as_i64().is_some() || n.as_u64().is_some() => {
                    Coerced::Ok(serde_json::Number::from_f64(f).map(Value::Number).unwrap_or_else(|| v.clone()))
                }
                _ => Coerced::Ok(v.clone()),
            },
            Value::Bool(b) => Coerced::Ok(json!(if *b { 1.0 } else { 0.0 })),
            Value::String(s) => match s.trim().parse::<f64>() {
                Ok(f) => Coerced::Ok(json!(f)),
                Err(_) => Coerced::Err(format!("could not convert string to float: {}", py_repr(v))),
            },
            Value::Null => Coerced::Err("float() argument must be a string or a real number, not 'NoneType'".into()),
            _ => Coerced::Err("float() argument must be a string or a real number, not 'list'".into()),
        },
        "STRING" => match v {
            Value::String(_) => Coerced::Ok(v.clone()),
            other => Coerced::Ok(Value::String(py_str(other))),
        },
        "BOOLEAN" => Coerced::Ok(Value::Bool(match v {
            Value::Bool(b) => *b,
            Value::Null => false,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
        })),
        _ => return None,
    })
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

impl<'a> Validator<'a> {
    fn class_of(&self, id: &str) -> Option<String> {
        self.prompt
            .get(id)?
            .get("class_type")?
            .as_str()
            .map(str::to_string)
    }

    /// ComfyUI's `validate_inputs` for one node (recursive through links). `Err` is an
    /// exception escaping it (ComfyUI attributes it to this node in the caller).
    fn validate_node(&mut self, id: &str) -> Result<bool, Raised> {
        if let Some(r) = self.validated.get(id) {
            return Ok(r.valid);
        }
        let class = match self.class_of(id) {
            Some(c) => c,
            None => return Err(Raised {
                exception_type: "KeyError",
                message: format!("'{id}'"),
                frame: tb_frame(
                    788,
                    "validate_inputs",
                    "o_class_type = prompt[o_id]['class_type']\n                   ~~~~~~^^^^^^",
                ),
            }),
        };
        let defs = self.defs;
        let def = defs.get(&class).cloned().unwrap_or(Value::Null);
        let mut order: Vec<(String, Value, bool)> = Vec::new();
        for (sec, required) in [("required", true), ("optional", false)] {
            if let Some(m) = def["input"][sec].as_object() {
                for (name, spec) in m {
                    order.push((name.clone(), spec.clone(), required));
                }
            }
        }
        let inputs = self.prompt[id]
            .get("inputs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        expand_dynamic_combos(&mut order, &inputs);
        let mut errors: Vec<Value> = Vec::new();
        let mut valid = true;
        let mut rewrites: Vec<(String, Value)> = Vec::new();
        for (name, spec, required) in &order {
            let Some(val) = inputs.get(name) else {
                if *required {
                    errors.push(json!({
                        "type": "required_input_missing",
                        "message": "Required input is missing",
                        "details": name,
                        "extra_info": {"input_name": name}
                    }));
                }
                continue;
            };
            let info = input_info(spec);
            let ty = match spec.get(0) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(_)) => "COMBO".into(),
                _ => "*".into(),
            };
            if is_link(val) {
                let arr = val.as_array().unwrap();
                if arr.len() != 2 {
                    errors.push(json!({
                        "type": "bad_linked_input",
                        "message": "Bad linked input, must be a length-2 list of [node_id, slot_index]",
                        "details": name,
                        "extra_info": {"input_name": name, "input_config": info, "received_value": val}
                    }));
                    continue;
                }
                let o_id = py_str(&arr[0]);
                let Some(o_class) = self.class_of(&o_id) else {
                    return Err(Raised {
                        exception_type: "KeyError",
                        message: format!("'{o_id}'"),
                        frame: tb_frame(788, "validate_inputs", "o_class_type = prompt[o_id]['class_type']\n                   ~~~~~~^^^^^^"),
                    });
                };
                let outs = defs.output_types(&o_class);
                let slot = arr[1].as_i64().unwrap_or(-1);
                let received = if slot >= 0 && (slot as usize) < outs.len() {
                    outs[slot as usize].clone()
                } else {
                    return Err(Raised {
                        exception_type: "IndexError",
                        message: "tuple index out of range".into(),
                        frame: tb_frame(
                            790,
                            "validate_inputs",
                            "received_type = r[val[1]]\n                    ~^^^^^^^^",
                        ),
                    });
                };
                let lenient = class.starts_with("VHS_");
                if !lenient && !link_type_ok(&received, &ty) {
                    errors.push(json!({
                        "type": "return_type_mismatch",
                        "message": "Return type mismatch between linked nodes",
                        "details": format!("{name}, received_type({received}) mismatch input_type({ty})"),
                        "extra_info": {"input_name": name, "input_config": info, "received_type": received, "linked_node": val}
                    }));
                    continue;
                }
                match self.validate_node(&o_id) {
                    Ok(true) => {}
                    Ok(false) => valid = false,
                    Err(raised) => {
                        valid = false;
                        let reason = json!({
                            "type": "exception_during_inner_validation",
                            "message": "Exception when validating inner node",
                            "details": raised.message,
                            "extra_info": {
                                "input_name": name,
                                "input_config": info,
                                "exception_message": raised.message,
                                "exception_type": raised.exception_type,
                                "traceback": [
                                    tb_frame(808, "validate_inputs", "r = await validate_inputs(prompt_id, prompt, o_id, validated)\n        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"),
                                    raised.frame,
                                ],
                                "linked_node": val
                            }
                        });
                        self.validated.insert(
                            o_id.clone(),
                            NodeResult {
                                valid: false,
                                reasons: vec![reason],
                            },
                        );
                    }
                }
                continue;
            }
            // Literal value.
            let val = match val {
                Value::Object(o) if o.contains_key("__value__") => o["__value__"].clone(),
                other => other.clone(),
            };
            let opts = spec.get(1).cloned().unwrap_or_else(|| json!({}));
            if let Some(c) = coerce(&ty, &val) {
                match c {
                    Coerced::Ok(v) => {
                        if v != val {
                            rewrites.push((name.clone(), v.clone()));
                        }
                        if let Some(f) = num(&v) {
                            if let Some(min) = opts.get("min").filter(|m| m.is_number()) {
                                if f < num(min).unwrap_or(f64::MIN) {
                                    errors.push(json!({
                                        "type": "value_smaller_than_min",
                                        "message": format!("Value {} smaller than min of {}", py_repr(&v), min),
                                        "details": name,
                                        "extra_info": {"input_name": name, "input_config": info, "received_value": v}
                                    }));
                                    continue;
                                }
                            }
                            if let Some(max) = opts.get("max").filter(|m| m.is_number()) {
                                if f > num(max).unwrap_or(f64::MAX) {
                                    errors.push(json!({
                                        "type": "value_bigger_than_max",
                                        "message": format!("Value {} bigger than max of {}", py_repr(&v), max),
                                        "details": name,
                                        "extra_info": {"input_name": name, "input_config": info, "received_value": v}
                                    }));
                                    continue;
                                }
                            }
                        }
                    }
                    Coerced::Err(msg) => {
                        errors.push(json!({
                            "type": "invalid_input_type",
                            "message": format!("Failed to convert an input value to a {ty} value"),
                            "details": format!("{name}, {}, {msg}", py_str(&val)),
                            "extra_info": {"input_name": name, "input_config": info, "received_value": val, "exception_message": msg}
                        }));
                        continue;
                    }
                }
                continue;
            }
            // Combos: legacy list specs and V3 `COMBO` with options.
            let options = match spec.get(0) {
                Some(Value::Array(a)) => Some(a.clone()),
                Some(Value::String(s)) if s == "COMBO" => {
                    if opts.get("remote").is_some() || opts.get("remote_combo").is_some() {
                        None
                    } else {
                        opts.get("options").and_then(Value::as_array).cloned()
                    }
                }
                _ => None,
            };
            if let Some(options) = options {
                let multiselect = opts.get("multiselect").and_then(Value::as_bool) == Some(true);
                let values: Vec<Value> = match (&val, multiselect) {
                    (Value::Array(a), true) => a.clone(),
                    _ => vec![val.clone()],
                };
                if let Some(bad) = values.iter().find(|x| !options.contains(x)) {
                    let (list_repr, config) = if options.len() > 20 {
                        (format!("(list of length {})", options.len()), Value::Null)
                    } else {
                        (py_repr(&Value::Array(options.clone())), info.clone())
                    };
                    errors.push(json!({
                        "type": "value_not_in_list",
                        "message": "Value not in list",
                        "details": format!("{name}: {} not in {list_repr}", py_repr(bad)),
                        "extra_info": {"input_name": name, "input_config": config, "received_value": bad}
                    }));
                }
            }
        }
        for (name, v) in rewrites {
            if let Some(inputs) = self
                .prompt
                .get_mut(id)
                .and_then(|n| n.get_mut("inputs"))
                .and_then(Value::as_object_mut)
            {
                inputs.insert(name, v);
            }
        }
        let ok = valid && errors.is_empty();
        self.validated.insert(
            id.to_string(),
            NodeResult {
                valid: ok,
                reasons: errors,
            },
        );
        Ok(ok)
    }
}

/// A V3 dynamic combo (`COMFY_DYNAMICCOMBO_V3`) as the server's `get_finalized_class_inputs`
/// expands it: the option whose `key` the prompt chose stays, followed by that option's inputs
/// under dotted names (`resize_type.width`); a combo absent from the prompt, or set to a key no
/// option has, is dropped with nothing added.
fn expand_dynamic_combos(order: &mut Vec<(String, Value, bool)>, inputs: &Map<String, Value>) {
    let mut out = Vec::with_capacity(order.len());
    for (name, spec, required) in order.drain(..) {
        if spec.get(0).and_then(Value::as_str) != Some("COMFY_DYNAMICCOMBO_V3") {
            out.push((name, spec, required));
            continue;
        }
        let chosen = inputs.get(&name).and_then(|key| {
            spec.get(1)?
                .get("options")?
                .as_array()?
                .iter()
                .find(|o| o.get("key") == Some(key))
                .cloned()
        });
        let Some(option) = chosen else {
            continue;
        };
        out.push((name.clone(), spec, required));
        for (sec, child_required) in [("required", true), ("optional", false)] {
            if let Some(m) = option["inputs"][sec].as_object() {
                for (child, child_spec) in m {
                    out.push((
                        format!("{name}.{child}"),
                        child_spec.clone(),
                        child_required,
                    ));
                }
            }
        }
    }
    *order = out;
}

/// Validates a `POST /prompt` body's `prompt` against the definitions.
/// `targets` is `partial_execution_targets` when given.
pub fn validate(prompt: &Map<String, Value>, targets: Option<&[String]>, defs: &Defs) -> Verdict {
    // 1. Every node must name an installed class (first bad node stops validation).
    for (id, node) in prompt {
        match node.get("class_type").and_then(Value::as_str) {
            None => {
                return Verdict::Reject(top_error(
                    "invalid_prompt",
                    "Cannot execute because a node is missing the class_type property.",
                    &format!("Node ID '#{id}'"),
                ))
            }
            Some(c) if defs.get(c).is_none() => {
                return Verdict::Reject(top_error(
                    "invalid_prompt",
                    &format!("Cannot execute because node {c} does not exist."),
                    &format!("Node ID '#{id}'"),
                ))
            }
            Some(_) => {}
        }
    }
    // 2. Output nodes (optionally restricted to the targets).
    let outputs: Vec<String> = prompt
        .iter()
        .filter(|(_, n)| defs.is_output(n["class_type"].as_str().unwrap_or("")))
        .map(|(id, _)| id.clone())
        .filter(|id| targets.is_none_or(|t| t.contains(id)))
        .collect();
    if outputs.is_empty() {
        return Verdict::Reject(top_error("prompt_no_outputs", "Prompt has no outputs", ""));
    }
    // 3. Validate each output's upstream graph.
    let mut v = Validator {
        defs,
        prompt: prompt.clone(),
        validated: indexmap_like::Ordered::new(),
    };
    let mut good = Vec::new();
    let mut failed_outputs: Vec<(String, Vec<Value>)> = Vec::new();
    let mut node_errors = Map::new();
    // ComfyUI walks a set of outputs; reverse prompt order reproduces the captured
    // `dependent_outputs` (the order only shows in that list).
    for o in outputs.iter().rev() {
        let ok = match v.validate_node(o) {
            Ok(ok) => ok,
            Err(raised) => {
                let reason = json!({
                    "type": "exception_during_validation",
                    "message": "Exception when validating node",
                    "details": raised.message,
                    "extra_info": {
                        "exception_type": raised.exception_type,
                        "traceback": [
                            tb_frame(1061, "validate_prompt", "m = await validate_inputs(prompt_id, prompt, o, validated)\n        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"),
                            raised.frame,
                        ]
                    }
                });
                v.validated.insert(
                    o.clone(),
                    NodeResult {
                        valid: false,
                        reasons: vec![reason],
                    },
                );
                false
            }
        };
        if ok {
            good.push(o.clone());
            continue;
        }
        let own = v
            .validated
            .get(o)
            .map(|r| r.reasons.clone())
            .unwrap_or_default();
        failed_outputs.push((o.clone(), own));
        // ComfyUI appends this output to every failed node validated so far, including
        // nodes of earlier outputs' branches.
        for (nid, r) in v.validated.iter() {
            if r.valid || r.reasons.is_empty() {
                continue;
            }
            let entry = node_errors.entry(nid.clone()).or_insert_with(|| {
                json!({
                    "errors": r.reasons,
                    "dependent_outputs": [],
                    "class_type": prompt[nid]["class_type"],
                })
            });
            entry["dependent_outputs"]
                .as_array_mut()
                .expect("dependent_outputs is an array")
                .push(Value::String(o.clone()));
        }
    }
    if good.is_empty() {
        let details: Vec<String> = failed_outputs
            .iter()
            .flat_map(|(_, reasons)| {
                reasons.iter().map(|r| {
                    format!(
                        "{}: {}",
                        r["message"].as_str().unwrap_or(""),
                        r["details"].as_str().unwrap_or("")
                    )
                })
            })
            .collect();
        return Verdict::Reject(json!({
            "error": {
                "type": "prompt_outputs_failed_validation",
                "message": "Prompt outputs failed validation",
                "details": details.join("\n"),
                "extra_info": {}
            },
            "node_errors": node_errors
        }));
    }
    good.reverse();
    Verdict::Accept {
        prompt: v.prompt,
        outputs: good,
        node_errors,
    }
}

/// The link type check of ComfyUI 0.3.64 (`validate_node_input` in
/// `comfy_execution/validation.py`, non-strict), written for the simulator on its own so that it
/// can catch a bug in the client's rule (`nodedefs::types_compatible`) instead of sharing it.
///
/// Equal type strings pass. `*` in `/object_info` is the custom nodes' "any type" (a `str`
/// subclass whose `__ne__` is always false), so it passes against anything in either position;
/// so does a V3 `MatchType` input or output (`COMFY_MATCHTYPE_V3`), whose node checks its own
/// types. Otherwise the comma-separated type sets must share a type.
fn link_type_ok(received: &str, expected: &str) -> bool {
    const ANY: &str = "*";
    const MATCH_TYPE: &str = "COMFY_MATCHTYPE_V3";
    if received == expected
        || [received, expected]
            .iter()
            .any(|t| *t == ANY || *t == MATCH_TYPE)
    {
        return true;
    }
    let set = |s: &str| -> std::collections::BTreeSet<String> {
        s.split(',').map(|t| t.trim().to_owned()).collect()
    };
    !set(received).is_disjoint(&set(expected))
}

#[cfg(test)]
mod tests {
    #[test]
    fn link_types_follow_comfyui() {
        use super::link_type_ok;
        assert!(link_type_ok("IMAGE", "IMAGE"));
        assert!(link_type_ok("INT", "INT,FLOAT"));
        assert!(link_type_ok("FLOAT, INT", "INT"));
        assert!(link_type_ok("STRING,BOOLEAN", "STRING,INT"));
        assert!(link_type_ok("*", "LATENT"));
        assert!(link_type_ok("MODEL", "*"));
        assert!(link_type_ok("VAE", "COMFY_MATCHTYPE_V3"));
        assert!(!link_type_ok("IMAGE", "LATENT"));
        assert!(!link_type_ok("INT,FLOAT", "STRING"));
        assert!(!link_type_ok("", "IMAGE"));
    }

    use super::*;
    use crate::nodes::defs;

    fn core(width: Value) -> Map<String, Value> {
        json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 16711680}},
            "2": {"class_type": "ImageScale", "inputs": {"image": ["1", 0], "upscale_method": "bilinear", "width": width, "height": 96, "crop": "disabled"}},
            "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "x"}}
        })
        .as_object()
        .unwrap()
        .clone()
    }

    /// An image resized by the V3 `ResizeImageMaskNode` of the 2026 profile, with `inputs`.
    fn resize(inputs: Value) -> Map<String, Value> {
        let mut node = json!({"input": ["1", 0], "scale_method": "lanczos"});
        for (k, v) in inputs.as_object().unwrap() {
            node[k] = v.clone();
        }
        json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0}},
            "2": {"class_type": "ResizeImageMaskNode", "inputs": node},
            "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "x"}}
        })
        .as_object()
        .unwrap()
        .clone()
    }

    /// The reasons node 2 was rejected for, as `(type, details)`.
    fn reasons(prompt: &Map<String, Value>) -> Vec<(String, String)> {
        match validate(prompt, None, crate::nodes::defs_2026()) {
            Verdict::Accept { .. } => Vec::new(),
            Verdict::Reject(body) => body["node_errors"]["2"]["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (py_str(&e["type"]), py_str(&e["details"])))
                .collect(),
        }
    }

    #[test]
    fn a_dynamic_combo_validates_the_sub_inputs_of_the_chosen_option() {
        let dims = json!({"resize_type": "scale dimensions", "resize_type.width": 96,
                          "resize_type.height": 48, "resize_type.crop": "center"});
        assert_eq!(reasons(&resize(dims.clone())), vec![]);
        let mut missing = dims.clone();
        missing
            .as_object_mut()
            .unwrap()
            .remove("resize_type.height");
        assert_eq!(
            reasons(&resize(missing)),
            vec![("required_input_missing".into(), "resize_type.height".into())]
        );
        let mut too_big = dims.clone();
        too_big["resize_type.width"] = json!(99999);
        assert_eq!(
            reasons(&resize(too_big)),
            vec![("value_bigger_than_max".into(), "resize_type.width".into())]
        );
        let mut bad_crop = dims;
        bad_crop["resize_type.crop"] = json!("squash");
        assert_eq!(reasons(&resize(bad_crop))[0].0, "value_not_in_list");
        // Another option asks for its own sub-inputs only.
        let by = json!({"resize_type": "scale by multiplier", "resize_type.multiplier": 1.5});
        assert_eq!(reasons(&resize(by)), vec![]);
        // A key no option has adds nothing to check (the server expands no option).
        let unknown = json!({"resize_type": "scale sideways"});
        assert_eq!(reasons(&resize(unknown)), vec![]);
    }

    #[test]
    fn accepts_and_coerces() {
        let Verdict::Accept {
            prompt,
            outputs,
            node_errors,
        } = validate(&core(json!(12.7)), None, defs())
        else {
            panic!()
        };
        assert_eq!(outputs, ["3"]);
        assert!(node_errors.is_empty());
        assert_eq!(prompt["2"]["inputs"]["width"], json!(12));
    }

    #[test]
    fn the_fixture_cases_come_back_with_the_captured_bodies() {
        let fixture: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/comfyui/post_prompt_validation_errors.json",
                crate::FIXTURES
            ))
            .unwrap(),
        )
        .unwrap();
        let mut checked = 0;
        for case in fixture["cases"].as_array().unwrap() {
            let name = case["case"].as_str().unwrap();
            let Some(prompt) = case["request_body"]["prompt"].as_object() else {
                continue;
            };
            let expected = &case["response_body"];
            let got = validate(prompt, None, defs());
            match got {
                Verdict::Reject(body) => {
                    assert_eq!(case["status"], 400, "{name}");
                    assert_eq!(body["error"]["type"], expected["error"]["type"], "{name}");
                    assert_eq!(
                        body["error"]["message"], expected["error"]["message"],
                        "{name}"
                    );
                    assert_eq!(
                        body["error"]["details"], expected["error"]["details"],
                        "{name}"
                    );
                    assert_eq!(body["node_errors"], expected["node_errors"], "{name}");
                }
                Verdict::Accept { node_errors, .. } => {
                    assert_eq!(case["status"], 200, "{name}");
                    assert_eq!(
                        Value::Object(node_errors),
                        expected["node_errors"],
                        "{name}"
                    );
                }
            }
            checked += 1;
        }
        assert!(checked >= 18, "{checked}");
    }
}
