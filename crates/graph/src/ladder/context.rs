//! What every reduction needs to know about the target: node roles, consumers, reachability,
//! input definitions, statically known values (literals, constants, switches) and its second
//! sampling passes ([`SecondPass`], found by `ladder/passes.rs` from this context).

use super::math::{eval, Num};
use super::PlanOptions;
use crate::catalog::{Catalog, Role};
use crate::nodedefs::{InputDef, NodeDefs};
use crate::workflow::{Edit, Input, Link, Workflow};
use indexmap::IndexMap;
type IndexSet<T> = indexmap::IndexSet<T, rustc_hash::FxBuildHasher>;
use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

/// The target seen through the catalog, computed once per plan.
pub(crate) struct Ctx<'a> {
    pub w: &'a Workflow,
    pub defs: &'a NodeDefs,
    pub opts: &'a PlanOptions,
    /// Roles by node id.
    pub roles: HashMap<&'a str, Vec<Role>>,
    /// Consumers of each node: source id → [(node id, input name, slot)], in file order.
    pub consumers: HashMap<&'a str, Vec<(&'a str, &'a str, usize)>>,
    /// Nodes ComfyUI would run (upstream of output nodes).
    pub reach: crate::workflow::IdSet,
    /// Topological position of each node.
    pub topo: HashMap<String, usize>,
    /// The second sampling passes (hires fix and the like): filled right after [`Ctx::new`]
    /// by `passes::second_passes`, which reads the context (see `ladder::context`).
    pub passes: Vec<SecondPass>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        w: &'a Workflow,
        defs: &'a NodeDefs,
        catalog: &'a Catalog,
        opts: &'a PlanOptions,
    ) -> Ctx<'a> {
        let mut class_roles: HashMap<&str, Vec<Role>> = HashMap::default();
        let mut roles = HashMap::default();
        let mut consumers: HashMap<&str, Vec<(&str, &str, usize)>> = HashMap::default();
        for (id, node) in &w.nodes {
            let r = class_roles
                .entry(node.class_type.as_str())
                .or_insert_with(|| catalog.roles(&node.class_type, defs))
                .clone();
            roles.insert(id.as_str(), r);
            for (name, input) in &node.inputs {
                if let Input::Link(l) = input {
                    consumers.entry(l.node.as_str()).or_default().push((
                        id.as_str(),
                        name.as_str(),
                        l.slot,
                    ));
                }
            }
        }
        let topo = w
            .topological_order()
            .into_iter()
            .enumerate()
            .map(|(i, id)| (id, i))
            .collect();
        Ctx {
            w,
            defs,
            opts,
            roles,
            consumers,
            reach: w.reachable_from_outputs(defs),
            topo,
            passes: Vec::new(),
        }
    }

    /// Whether `id` belongs to a second sampling pass (its sampler or a node of its route).
    pub(crate) fn in_second_pass(&self, id: &str) -> bool {
        self.passes
            .iter()
            .any(|p| p.second == id || p.route.contains(id))
    }

    /// Whether node `id` has `role`.
    pub fn is(&self, id: &str, role: Role) -> bool {
        self.roles.get(id).is_some_and(|r| r.contains(&role))
    }

    /// Reachable node ids with `role`, in file order.
    pub(crate) fn with_role(&self, role: Role) -> Vec<&'a str> {
        self.w
            .nodes
            .keys()
            .filter(|id| self.reach.contains(id.as_str()) && self.is(id, role))
            .map(String::as_str)
            .collect()
    }

    /// Every consumer of any output of `id`: (consumer id, input, slot).
    pub(crate) fn consumers_of(&self, id: &str) -> Vec<(&'a str, &'a str, usize)> {
        self.consumers.get(id).cloned().unwrap_or_default()
    }

    /// Every node downstream of `id` (not including it).
    pub(crate) fn downstream(&self, id: &str) -> IndexSet<&'a str> {
        self.downstream_until(id, |_| false)
    }

    /// Nodes downstream of `id`, not expanding past nodes for which `stop` holds.
    pub(crate) fn downstream_until(
        &self,
        id: &str,
        stop: impl Fn(&str) -> bool,
    ) -> IndexSet<&'a str> {
        let mut seen: IndexSet<&str> = IndexSet::default();
        let mut stack: Vec<&str> = self
            .consumers_of(id)
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        while let Some(n) = stack.pop() {
            if seen.insert(n) && !stop(n) {
                stack.extend(self.consumers_of(n).into_iter().map(|(c, _, _)| c));
            }
        }
        seen
    }

    /// Nodes downstream of any node with `role` (one pass over the graph).
    pub(crate) fn downstream_of_role(&self, role: Role) -> IndexSet<&'a str> {
        let mut seen: IndexSet<&str> = IndexSet::default();
        let mut stack: Vec<&str> = Vec::new();
        for id in self.w.nodes.keys() {
            if self.is(id, role) {
                stack.extend(self.consumers_of(id).into_iter().map(|(c, _, _)| c));
            }
        }
        while let Some(n) = stack.pop() {
            if seen.insert(n) {
                stack.extend(self.consumers_of(n).into_iter().map(|(c, _, _)| c));
            }
        }
        seen
    }

    /// Nodes upstream of the given inputs of `id`, walking links but not through nodes for
    /// which `stop` holds (those are included, not expanded).
    pub(crate) fn upstream_until(
        &self,
        id: &str,
        inputs: &[&str],
        stop: impl Fn(&str) -> bool,
    ) -> IndexSet<&'a str> {
        let mut seen: IndexSet<&str> = IndexSet::default();
        let mut stack: Vec<&str> = Vec::new();
        if let Some(node) = self.w.nodes.get(id) {
            for (name, input) in &node.inputs {
                if inputs.contains(&name.as_str()) || inputs.is_empty() {
                    if let Input::Link(l) = input {
                        if let Some((k, _)) = self.w.nodes.get_key_value(&l.node) {
                            stack.push(k.as_str());
                        }
                    }
                }
            }
        }
        while let Some(n) = stack.pop() {
            if !seen.insert(n) || stop(n) {
                continue;
            }
            for input in self.w.nodes[n].inputs.values() {
                if let Input::Link(l) = input {
                    if let Some((k, _)) = self.w.nodes.get_key_value(&l.node) {
                        stack.push(k.as_str());
                    }
                }
            }
        }
        seen
    }

    /// The declaration of `input` on node `id` (dotted children of V3 inputs included).
    pub(crate) fn input_def(&self, id: &str, input: &str) -> Option<InputDef> {
        let node = self.w.nodes.get(id)?;
        let def = self.defs.get(&node.class_type)?;
        if let Some(spec) = def.input(input) {
            return Some(spec.clone());
        }
        let (parent, child) = input.split_once('.')?;
        let selected = node.inputs.get(parent).and_then(Input::as_literal);
        def.input(parent)?.child_spec(child, selected)
    }

    /// The declared type of an input, `None` when unknown.
    pub(crate) fn input_type(&self, id: &str, input: &str) -> Option<String> {
        self.input_def(id, input).map(|d| d.type_name().to_string())
    }

    /// The statically known integer value of an input (literal, constant, switch, preset).
    pub(crate) fn int_value(&self, id: &str, input: &str) -> Option<i64> {
        match self.w.nodes.get(id)?.inputs.get(input)? {
            Input::Literal(v) => literal_int(v),
            Input::Link(l) => self.link_int(l, 0),
        }
    }

    fn link_int(&self, link: &Link, depth: usize) -> Option<i64> {
        self.link_num(link, depth)?.to_int()
    }

    fn input_num(&self, input: &Input, depth: usize) -> Option<Num> {
        match input {
            Input::Literal(v) => literal_num(v),
            Input::Link(l) => self.link_num(l, depth + 1),
        }
    }

    /// The value on an output, folded through constants, switches and math expressions.
    fn link_num(&self, link: &Link, depth: usize) -> Option<Num> {
        if depth > 32 {
            return None;
        }
        let node = self.w.nodes.get(&link.node)?;
        if self.is(&link.node, Role::Constant) {
            return self.input_num(node.inputs.get("value")?, depth);
        }
        match node.class_type.as_str() {
            "ComfySwitchNode" => {
                let on = node.inputs.get("switch")?.as_literal()?.as_bool()?;
                let branch = node.inputs.get(if on { "on_true" } else { "on_false" })?;
                self.input_num(branch, depth)
            }
            "ComfyMathExpression" => {
                let expr = node.inputs.get("expression")?.as_literal()?.as_str()?;
                let var = |name: &str| {
                    let input = node.inputs.get(&format!("values.{name}"))?;
                    self.input_num(input, depth)
                };
                let v = eval(expr, &var)?;
                match link.slot {
                    1 => v.to_int().map(Num::Int),
                    0 => Some(Num::Float(match v {
                        Num::Int(i) => i as f64,
                        Num::Float(f) => f,
                    })),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The combo options of an input, empty when it is not a combo.
    pub fn options(&self, id: &str, input: &str) -> Vec<Value> {
        match self.input_def(id, input).map(|d| d.kind) {
            Some(crate::nodedefs::InputKind::Combo { options, .. }) => options,
            _ => Vec::new(),
        }
    }

    /// Edits that give each `(node, input)` its new integer value. Where the value arrives
    /// from a constant node whose every consumer asks for the same value, the constant is
    /// edited (so all consumers stay consistent); otherwise the consuming input is overridden.
    pub(crate) fn value_edits(&self, requests: &[(String, String, i64)]) -> Vec<Edit> {
        let mut by_source: IndexMap<String, Vec<&(String, String, i64)>> = IndexMap::new();
        let mut edits = Vec::new();
        for req in requests {
            let linked = self
                .w
                .nodes
                .get(&req.0)
                .and_then(|n| n.inputs.get(&req.1))
                .and_then(Input::as_link);
            match linked {
                Some(l) if self.is(&l.node, Role::Constant) => {
                    by_source.entry(l.node.clone()).or_default().push(req);
                }
                _ => edits.push(Edit::SetInput {
                    node: req.0.clone(),
                    input: req.1.clone(),
                    value: Value::from(req.2),
                }),
            }
        }
        for (source, reqs) in by_source {
            let all: Vec<(&str, &str, usize)> = self.consumers_of(&source);
            let same_value = reqs.iter().all(|r| r.2 == reqs[0].2);
            let covers_all = all
                .iter()
                .all(|(n, i, _)| reqs.iter().any(|r| r.0 == *n && r.1 == *i));
            if same_value && covers_all {
                edits.push(Edit::SetInput {
                    node: source,
                    input: "value".into(),
                    value: Value::from(reqs[0].2),
                });
            } else {
                edits.extend(reqs.into_iter().map(|r| Edit::SetInput {
                    node: r.0.clone(),
                    input: r.1.clone(),
                    value: Value::from(r.2),
                }));
            }
        }
        edits
    }
}

/// An integer from a JSON literal (numbers, numeric strings).
pub(crate) fn literal_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A number from a JSON literal (booleans count as 0/1, like Python).
fn literal_num(v: &Value) -> Option<Num> {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Some(Num::Int(i)),
            None => n.as_f64().map(Num::Float),
        },
        Value::Bool(b) => Some(Num::Int(*b as i64)),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .map(Num::Int)
            .ok()
            .or_else(|| s.trim().parse::<f64>().ok().map(Num::Float)),
        _ => None,
    }
}

/// A float from a JSON literal.
pub(crate) fn literal_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// One second sampling pass of the target.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SecondPass {
    /// The sampler whose result the pass refines (the nearest one upstream).
    pub first: String,
    /// The second pass's sampler.
    pub second: String,
    /// The nodes between them on the latent/image route (upscale, decode, scale, encode…),
    /// neither sampler included.
    pub route: IndexSet<String>,
    /// The size (width, height in pixels) the second pass samples at, when known statically.
    pub size: Option<(i64, i64)>,
}

impl SecondPass {
    /// The pass's size as `1024×1024`, `None` when not known statically.
    pub(crate) fn size_text(&self) -> Option<String> {
        self.size.map(|(w, h)| format!("{w}×{h}"))
    }
}
