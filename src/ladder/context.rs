//! What every reduction needs to know about the target: node roles, consumers, reachability,
//! input definitions and statically known values (literals, constants, switches).

use super::PlanOptions;
use crate::catalog::{Catalog, Role};
use crate::nodedefs::{InputDef, NodeDefs};
use crate::workflow::{Edit, Input, Link, Workflow};
use indexmap::{IndexMap, IndexSet};
use serde_json::Value;
use std::collections::HashMap;

/// The target seen through the catalog, computed once per plan.
pub(crate) struct Ctx<'a> {
    pub w: &'a Workflow,
    pub defs: &'a NodeDefs,
    pub opts: &'a PlanOptions,
    /// Roles by node id.
    pub roles: HashMap<&'a str, Vec<Role>>,
    /// Consumers of each output: (source id, slot) → [(node id, input name)].
    pub consumers: HashMap<(&'a str, usize), Vec<(&'a str, &'a str)>>,
    /// Nodes ComfyUI would run (upstream of output nodes).
    pub reach: IndexSet<String>,
    /// Topological position of each node.
    pub topo: HashMap<String, usize>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        w: &'a Workflow,
        defs: &'a NodeDefs,
        catalog: &'a Catalog,
        opts: &'a PlanOptions,
    ) -> Ctx<'a> {
        let mut class_roles: HashMap<&str, Vec<Role>> = HashMap::new();
        let mut roles = HashMap::new();
        let mut consumers: HashMap<(&str, usize), Vec<(&str, &str)>> = HashMap::new();
        for (id, node) in &w.nodes {
            let r = class_roles
                .entry(node.class_type.as_str())
                .or_insert_with(|| catalog.roles(&node.class_type, defs))
                .clone();
            roles.insert(id.as_str(), r);
            for (name, input) in &node.inputs {
                if let Input::Link(l) = input {
                    consumers
                        .entry((l.node.as_str(), l.slot))
                        .or_default()
                        .push((id.as_str(), name.as_str()));
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
        }
    }

    /// Whether node `id` has `role`.
    pub fn is(&self, id: &str, role: Role) -> bool {
        self.roles.get(id).is_some_and(|r| r.contains(&role))
    }

    /// Reachable node ids with `role`, in file order.
    pub fn with_role(&self, role: Role) -> Vec<&'a str> {
        self.w
            .nodes
            .keys()
            .filter(|id| self.reach.contains(id.as_str()) && self.is(id, role))
            .map(String::as_str)
            .collect()
    }

    /// Every consumer of any output of `id`: (consumer id, input, slot).
    pub fn consumers_of(&self, id: &str) -> Vec<(&'a str, &'a str, usize)> {
        let outputs = self
            .w
            .nodes
            .get(id)
            .and_then(|n| self.defs.get(&n.class_type))
            .map(|d| d.outputs.len())
            .unwrap_or(0)
            .max(8);
        let mut out = Vec::new();
        for slot in 0..outputs {
            if let Some(list) = self.consumers.get(&(id, slot)) {
                out.extend(list.iter().map(|(n, i)| (*n, *i, slot)));
            }
        }
        out
    }

    /// Every node downstream of `id` (not including it).
    pub fn downstream(&self, id: &str) -> IndexSet<&'a str> {
        let mut seen: IndexSet<&str> = IndexSet::new();
        let mut stack: Vec<&str> = self
            .consumers_of(id)
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        while let Some(n) = stack.pop() {
            if seen.insert(n) {
                stack.extend(self.consumers_of(n).into_iter().map(|(c, _, _)| c));
            }
        }
        seen
    }

    /// Whether a node with `role` lies upstream of `id`.
    pub fn has_upstream(&self, id: &str, role: Role) -> bool {
        self.w
            .upstream_closure([id])
            .iter()
            .any(|n| n != id && self.is(n, role))
    }

    /// The declaration of `input` on node `id` (dotted children of V3 inputs included).
    pub fn input_def(&self, id: &str, input: &str) -> Option<InputDef> {
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
    pub fn input_type(&self, id: &str, input: &str) -> Option<String> {
        self.input_def(id, input).map(|d| d.type_name().to_string())
    }

    /// The statically known integer value of an input (literal, constant, switch, preset).
    pub fn int_value(&self, id: &str, input: &str) -> Option<i64> {
        match self.w.nodes.get(id)?.inputs.get(input)? {
            Input::Literal(v) => literal_int(v),
            Input::Link(l) => self.link_int(l, 0),
        }
    }

    fn link_int(&self, link: &Link, depth: usize) -> Option<i64> {
        if depth > 32 {
            return None;
        }
        let node = self.w.nodes.get(&link.node)?;
        if self.is(&link.node, Role::Constant) {
            return literal_int(node.inputs.get("value")?.as_literal()?);
        }
        if node.class_type == "ComfySwitchNode" {
            let on = node.inputs.get("switch")?.as_literal()?.as_bool()?;
            let branch = node.inputs.get(if on { "on_true" } else { "on_false" })?;
            return match branch {
                Input::Literal(v) => literal_int(v),
                Input::Link(l) => self.link_int(l, depth + 1),
            };
        }
        None
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
    pub fn value_edits(&self, requests: &[(String, String, i64)]) -> Vec<Edit> {
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

/// A float from a JSON literal.
pub(crate) fn literal_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
