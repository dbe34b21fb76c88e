//! `graphToPrompt` without a browser: expands subgraph instances into execution records, maps
//! widget values to input names, resolves every input socket through bypassed nodes, reroutes,
//! subgraph boundaries and promoted widgets, and prunes links to nodes that are not emitted.

use super::parse::{parse_doc, SubgraphDef, UiDoc, UiGraph, UiNode};
use super::widgets::{live_inputs, map_widgets, serialize_value, SlotKind, Widget};
use super::{Converted, Origin, UiError, UnknownNode};
use crate::nodedefs::NodeDefs;
use crate::workflow::{Input, Link, Node, Workflow};
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Frontend-only node types that are never emitted.
pub(crate) const VIRTUAL_TYPES: [&str; 4] = ["Note", "MarkdownNote", "Reroute", "PrimitiveNode"];

/// Modes: 2 = never (muted), 4 = bypass.
pub(crate) const MODE_MUTED: i64 = 2;
pub(crate) const MODE_BYPASS: i64 = 4;

/// One graph scope being executed: the root, or one instance of a definition.
#[derive(Debug)]
struct Frame {
    /// `None` for the root, else the definition id.
    def: Option<String>,
    /// Execution id prefix (`""`, `"20:"`, `"20:7:"`).
    prefix: String,
    /// Instance ids from the root (execution ids, as in the prefix).
    path: Vec<String>,
    /// The frame holding the instance, and the instance's index in that frame's graph.
    parent: Option<(usize, usize)>,
    /// Instance values of promoted widgets, by subgraph input name.
    promoted: HashMap<String, Value>,
    /// Per-instance values of inner widgets shown on the instance (`proxyWidgets` with a node
    /// id): `(inner node id, widget name)`.
    overrides: HashMap<(String, String), Value>,
}

/// The result of resolving one input socket.
#[derive(Debug, Clone, PartialEq)]
enum Resolved {
    /// Unconnected.
    Nothing,
    /// A link to an emitted (or pruned) node output.
    Link(String, usize),
    /// A widget value (a promoted widget of an unlinked instance input).
    Value(Value),
}

struct Conv<'a> {
    doc: UiDoc,
    defs: &'a NodeDefs,
    frames: Vec<Frame>,
    children: HashMap<(usize, usize), usize>,
    /// PrimitiveNode values: `(scope key, node id, widget name)`.
    primitives: HashMap<(String, String, String), Value>,
    widget_cache: HashMap<(String, usize), Vec<Widget>>,
    warnings: Vec<String>,
    instances: IndexMap<String, Origin>,
    instance_slots: HashMap<String, HashMap<String, usize>>,
    unknown: Vec<UnknownNode>,
    group_nodes: Vec<UnknownNode>,
}

fn scope_key(def: &Option<String>) -> String {
    def.clone().unwrap_or_default()
}

/// Converts a UI workflow; see [`super::convert`].
pub(crate) fn convert(ui: &Value, defs: &NodeDefs) -> Result<Converted, UiError> {
    if !(ui.get("nodes").is_some_and(Value::is_array)) {
        return Err(UiError::NotUi);
    }
    let doc = parse_doc(ui);
    let mut conv = Conv {
        doc,
        defs,
        frames: Vec::new(),
        children: HashMap::new(),
        primitives: HashMap::new(),
        widget_cache: HashMap::new(),
        warnings: Vec::new(),
        instances: IndexMap::new(),
        instance_slots: HashMap::new(),
        unknown: Vec::new(),
        group_nodes: Vec::new(),
    };
    conv.collect_primitives();
    conv.frames.push(Frame {
        def: None,
        prefix: String::new(),
        path: Vec::new(),
        parent: None,
        promoted: HashMap::new(),
        overrides: HashMap::new(),
    });
    conv.expand(0, 0)?;
    if !conv.group_nodes.is_empty() {
        return Err(UiError::GroupNodes(conv.group_nodes));
    }
    if !conv.unknown.is_empty() {
        return Err(UiError::UnknownTypes(conv.unknown));
    }
    conv.emit()
}

impl<'a> Conv<'a> {
    fn graph(&self, frame: usize) -> &UiGraph {
        match &self.frames[frame].def {
            None => &self.doc.root,
            Some(id) => &self.doc.defs[id].graph,
        }
    }

    fn sub_def(&self, frame: usize) -> Option<&SubgraphDef> {
        self.frames[frame].def.as_ref().map(|id| &self.doc.defs[id])
    }

    fn is_instance(&self, node: &UiNode) -> bool {
        self.doc.defs.contains_key(&node.type_name)
    }

    fn is_virtual(&self, node: &UiNode) -> bool {
        VIRTUAL_TYPES.contains(&node.type_name.as_str())
    }

    /// Records every PrimitiveNode value for the widgets its output links to.
    fn collect_primitives(&mut self) {
        let mut scopes: Vec<(String, &UiGraph)> = vec![(String::new(), &self.doc.root)];
        for id in &self.doc.def_order {
            scopes.push((id.clone(), &self.doc.defs[id].graph));
        }
        let mut found = Vec::new();
        for (key, graph) in scopes {
            for node in &graph.nodes {
                if node.type_name != "PrimitiveNode" {
                    continue;
                }
                let Some(value) = node
                    .widgets_values
                    .as_ref()
                    .and_then(Value::as_array)
                    .and_then(|a| a.first())
                else {
                    continue;
                };
                for out in &node.outputs {
                    for link_id in &out.links {
                        let Some(link) = graph.links.get(link_id) else {
                            continue;
                        };
                        let Some(target) = graph.node(&link.target_id) else {
                            continue;
                        };
                        let Some(input) = target
                            .inputs
                            .iter()
                            .find(|i| i.link.as_deref() == Some(link_id.as_str()))
                        else {
                            continue;
                        };
                        let name = input.widget.clone().unwrap_or_else(|| input.name.clone());
                        found.push(((key.clone(), target.id.clone(), name), value.clone()));
                    }
                }
            }
        }
        self.primitives.extend(found);
    }

    /// Creates frames for every active subgraph instance under `frame`, and collects unknown
    /// types.
    fn expand(&mut self, frame: usize, depth: usize) -> Result<(), UiError> {
        if depth > 64 {
            return Err(UiError::Cycle(format!(
                "subgraphs nest deeper than 64 levels at {}",
                self.frames[frame].prefix
            )));
        }
        let nodes: Vec<UiNode> = self.graph(frame).nodes.clone();
        for node in &nodes {
            let inactive = node.mode == MODE_MUTED || node.mode == MODE_BYPASS;
            if self.is_virtual(node) || (inactive && !self.is_instance(node)) {
                continue;
            }
            if self.is_instance(node) {
                // A muted or bypassed instance at the root contributes nothing; 1.58.1 still
                // expands muted or bypassed instances nested inside an active one.
                if inactive && frame == 0 {
                    continue;
                }
                let child = self.make_child(frame, node);
                self.children.insert((frame, node.index), child);
                self.expand(child, depth + 1)?;
                continue;
            }
            let exec = format!("{}{}", self.frames[frame].prefix, node.id);
            let unknown = UnknownNode {
                id: exec,
                type_name: node.type_name.clone(),
                title: node.title.clone(),
                pack: pack_of(&node.properties),
            };
            if node.type_name.starts_with("workflow>") || node.type_name.starts_with("workflow/") {
                self.group_nodes.push(unknown);
            } else if self.defs.get(&node.type_name).is_none() {
                self.unknown.push(unknown);
            }
        }
        Ok(())
    }

    fn make_child(&mut self, frame: usize, node: &UiNode) -> usize {
        let def = &self.doc.defs[&node.type_name];
        let prefix = format!("{}{}:", self.frames[frame].prefix, node.id);
        let mut path = self.frames[frame].path.clone();
        let exec = format!("{}{}", self.frames[frame].prefix, node.id);
        self.instances.insert(
            exec.clone(),
            Origin {
                scope: path.clone(),
                definition: self.frames[frame].def.clone(),
                node_id: node.saved_id.clone(),
                index: node.index,
                title: node.title.clone().unwrap_or_else(|| def.name.clone()),
            },
        );
        path.push(exec.clone());
        let backed = self.widget_backed(def, 0);
        let mut promoted = HashMap::new();
        let mut overrides = HashMap::new();
        let mut slots: HashMap<String, usize> = HashMap::new();
        let values: Vec<Value> = node
            .widgets_values
            .as_ref()
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let named = node
            .widgets_values
            .as_ref()
            .and_then(Value::as_object)
            .cloned();
        match node
            .properties
            .get("proxyWidgets")
            .and_then(Value::as_array)
        {
            Some(proxy) => {
                for (i, entry) in proxy.iter().enumerate() {
                    let Some(parts) = entry.as_array() else {
                        continue;
                    };
                    let src = parts.first().and_then(super::parse::id_key);
                    let name = parts.get(1).and_then(Value::as_str);
                    let (Some(src), Some(name)) = (src, name) else {
                        continue;
                    };
                    if src == "-1" {
                        slots.insert(name.to_string(), i);
                    }
                    let Some(value) = values.get(i) else {
                        continue;
                    };
                    if src == "-1" {
                        promoted.insert(name.to_string(), value.clone());
                    } else {
                        overrides.insert((src, name.to_string()), value.clone());
                    }
                }
            }
            None => {
                let backed_inputs: Vec<usize> =
                    (0..def.inputs.len()).filter(|&k| backed[k]).collect();
                if let Some(named) = named {
                    for &k in &backed_inputs {
                        if let Some(v) = named.get(&def.inputs[k].name) {
                            promoted.insert(def.inputs[k].name.clone(), v.clone());
                        }
                    }
                } else {
                    let skip_controls = values.len() > backed_inputs.len();
                    let mut pos = 0;
                    for &k in &backed_inputs {
                        slots.insert(def.inputs[k].name.clone(), pos);
                        let Some(v) = values.get(pos) else {
                            break;
                        };
                        promoted.insert(def.inputs[k].name.clone(), v.clone());
                        pos += 1;
                        if skip_controls
                            && self.input_has_control(def, k)
                            && values
                                .get(pos)
                                .is_some_and(super::widgets::is_control_value)
                        {
                            pos += 1;
                        }
                    }
                }
            }
        }
        // The enclosing instance may show this nested instance's promoted widget
        // (`proxyWidgets` entry naming this node).
        for input in &def.inputs {
            if let Some(v) = self.frames[frame]
                .overrides
                .get(&(node.saved_id.clone(), input.name.clone()))
            {
                promoted.insert(input.name.clone(), v.clone());
            }
        }
        // A PrimitiveNode linked to an instance input sets the promoted widget.
        let key = scope_key(&self.frames[frame].def);
        for input in &def.inputs {
            if let Some(v) =
                self.primitives
                    .get(&(key.clone(), node.id.clone(), input.name.clone()))
            {
                promoted.insert(input.name.clone(), v.clone());
            }
        }
        self.instance_slots.insert(exec, slots);
        self.frames.push(Frame {
            def: Some(node.type_name.clone()),
            prefix,
            path,
            parent: Some((frame, node.index)),
            promoted,
            overrides,
        });
        self.frames.len() - 1
    }

    /// The inner targets `(node, input name)` of definition input `k`.
    fn boundary_targets<'d>(&self, def: &'d SubgraphDef, k: usize) -> Vec<(&'d UiNode, String)> {
        let mut out = Vec::new();
        for id in &def.graph.link_order {
            let link = &def.graph.links[id];
            if link.origin_id != def.input_node || link.origin_slot != k {
                continue;
            }
            let Some(target) = def.graph.node(&link.target_id) else {
                continue;
            };
            if let Some(input) = target
                .inputs
                .iter()
                .find(|i| i.link.as_deref() == Some(id.as_str()))
            {
                out.push((target, input.name.clone()));
            }
        }
        out
    }

    /// For each input of `def`: whether it feeds a widget inside (a promoted widget).
    fn widget_backed(&self, def: &SubgraphDef, depth: usize) -> Vec<bool> {
        (0..def.inputs.len())
            .map(|k| {
                self.boundary_targets(def, k).iter().any(|(target, name)| {
                    if let Some(inner) = self.doc.defs.get(&target.type_name) {
                        if depth > 32 {
                            return false;
                        }
                        let backed = self.widget_backed(inner, depth + 1);
                        inner
                            .inputs
                            .iter()
                            .position(|i| &i.name == name)
                            .is_some_and(|j| backed[j])
                    } else if let Some(nd) = self.defs.get(&target.type_name) {
                        super::widgets::is_widget_input(nd, name)
                    } else {
                        false
                    }
                })
            })
            .collect()
    }

    fn input_has_control(&self, def: &SubgraphDef, k: usize) -> bool {
        self.boundary_targets(def, k).iter().any(|(target, name)| {
            self.defs
                .get(&target.type_name)
                .and_then(|nd| nd.input(name))
                .is_some_and(|i| {
                    matches!(
                        i.options.get("control_after_generate"),
                        Some(Value::Bool(true)) | Some(Value::String(_))
                    ) || (i.options.get("control_after_generate").is_none()
                        && i.type_name() == "INT"
                        && (i.name == "seed" || i.name == "noise_seed"))
                })
        })
    }

    fn widgets_of(&mut self, frame: usize, node: &UiNode) -> Vec<Widget> {
        let key = (scope_key(&self.frames[frame].def), node.index);
        if let Some(w) = self.widget_cache.get(&key) {
            return w.clone();
        }
        let widgets = match self.defs.get(&node.type_name) {
            Some(def) => map_widgets(def, node.widgets_values.as_ref()),
            None => Vec::new(),
        };
        self.widget_cache.insert(key, widgets.clone());
        widgets
    }

    /// The sockets of a node as the frontend holds them: `(name, type, link)`.
    fn sockets(&mut self, frame: usize, node: &UiNode) -> Vec<(String, String, Option<String>)> {
        let mut out: Vec<(String, String, Option<String>)> = node
            .inputs
            .iter()
            .map(|i| (i.name.clone(), i.type_name.clone(), i.link.clone()))
            .collect();
        let declared: Vec<(String, String)> = if let Some(def) = self.doc.defs.get(&node.type_name)
        {
            def.inputs
                .iter()
                .map(|i| (i.name.clone(), i.type_name.clone()))
                .collect()
        } else if let Some(nd) = self.defs.get(&node.type_name) {
            let widgets = self.widgets_of(frame, node);
            live_inputs(nd, &widgets)
        } else {
            Vec::new()
        };
        for (name, ty) in declared {
            if !out.iter().any(|(n, _, _)| *n == name) {
                out.push((name, ty, None));
            }
        }
        out
    }

    fn output_type(&self, node: &UiNode, slot: usize) -> String {
        if let Some(o) = node.outputs.get(slot) {
            if !o.type_name.is_empty() {
                return o.type_name.clone();
            }
        }
        if let Some(def) = self.doc.defs.get(&node.type_name) {
            return def
                .outputs
                .get(slot)
                .map(|o| o.type_name.clone())
                .unwrap_or_default();
        }
        self.defs
            .get(&node.type_name)
            .and_then(|d| d.outputs.get(slot))
            .map(|o| o.type_name.clone())
            .unwrap_or_default()
    }

    /// Resolves the link `link_id` of scope `frame` into node `consumer`, for a socket of type
    /// `ty`.
    fn resolve_link(
        &mut self,
        frame: usize,
        consumer: &str,
        link_id: &str,
        ty: &str,
        visited: &mut HashSet<(usize, String, usize)>,
    ) -> Result<Resolved, UiError> {
        let Some(link) = self.graph(frame).links.get(link_id).cloned() else {
            let where_ = self.frames[frame].prefix.clone();
            self.warnings.push(format!(
                "link {link_id}{} does not exist; the input is treated as unconnected",
                if where_.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (inside subgraph instance {})",
                        where_.trim_end_matches(':')
                    )
                }
            ));
            return Ok(Resolved::Nothing);
        };
        if link.target_id != consumer {
            // The frontend's link repair on load drops such a link from the input.
            self.warnings.push(format!(
                "node {}{consumer} names link {link_id} as an input, but that link goes to node {}; the input is treated as unconnected",
                self.frames[frame].prefix, link.target_id
            ));
            return Ok(Resolved::Nothing);
        }
        if let Some(def) = self.sub_def(frame) {
            if link.origin_id == def.input_node {
                return self.resolve_boundary_input(frame, link.origin_slot, ty, visited);
            }
        }
        let Some(origin) = self.graph(frame).node(&link.origin_id).cloned() else {
            self.warnings.push(format!(
                "link {link_id} starts at node {}, which does not exist; the input is treated as unconnected",
                link.origin_id
            ));
            return Ok(Resolved::Nothing);
        };
        self.resolve_output(frame, &origin, link.origin_slot, ty, visited)
    }

    /// Input `k` of the subgraph instance that `frame` expands: its outer link, else the
    /// promoted widget value.
    fn resolve_boundary_input(
        &mut self,
        frame: usize,
        k: usize,
        ty: &str,
        visited: &mut HashSet<(usize, String, usize)>,
    ) -> Result<Resolved, UiError> {
        let Some((parent, index)) = self.frames[frame].parent else {
            return Ok(Resolved::Nothing);
        };
        let def_id = self.frames[frame]
            .def
            .clone()
            .expect("child frames have a definition");
        let Some(name) = self.doc.defs[&def_id].inputs.get(k).map(|i| i.name.clone()) else {
            return Ok(Resolved::Nothing);
        };
        let instance = self.graph(parent).nodes[index].clone();
        let outer = instance
            .inputs
            .iter()
            .find(|i| i.name == name)
            .and_then(|i| i.link.clone());
        if let Some(link_id) = outer {
            let r = self.resolve_link(parent, &instance.id, &link_id, ty, visited)?;
            if r != Resolved::Nothing {
                return Ok(r);
            }
        }
        Ok(match self.promoted_value(frame, k, 0) {
            Some(v) => Resolved::Value(v),
            None => Resolved::Nothing,
        })
    }

    /// The value of the promoted widget of input `k` of the instance `frame` expands: the
    /// instance's saved value, else the current value of the inner widget it shows.
    fn promoted_value(&mut self, frame: usize, k: usize, depth: usize) -> Option<Value> {
        let def_id = self.frames[frame].def.clone()?;
        let name = self.doc.defs[&def_id].inputs.get(k)?.name.clone();
        if let Some(v) = self.frames[frame].promoted.get(&name) {
            return Some(v.clone());
        }
        if depth > 32 {
            return None;
        }
        let def = self.doc.defs[&def_id].clone();
        for (target, input) in self.boundary_targets(&def, k) {
            if let Some(inner) = self.doc.defs.get(&target.type_name) {
                let Some(j) = inner.inputs.iter().position(|i| i.name == input) else {
                    continue;
                };
                if !self.widget_backed(inner, 0)[j] {
                    continue;
                }
                let Some(&child) = self.children.get(&(frame, target.index)) else {
                    continue;
                };
                if let Some(v) = self.promoted_value(child, j, depth + 1) {
                    return Some(v);
                }
            } else if let Some(nd) = self.defs.get(&target.type_name) {
                if super::widgets::is_widget_input(nd, &input) {
                    if let Some(v) = self.widget_value(frame, target, &input) {
                        return Some(v);
                    }
                }
            }
        }
        None
    }

    /// The current value of a widget of a node: saved, then PrimitiveNode, then instance value.
    fn widget_value(&mut self, frame: usize, node: &UiNode, name: &str) -> Option<Value> {
        let mut value = self
            .widgets_of(frame, node)
            .into_iter()
            .find(|w| w.kind == SlotKind::Input && w.name == name)?
            .value;
        let key = scope_key(&self.frames[frame].def);
        if let Some(v) = self
            .primitives
            .get(&(key, node.id.clone(), name.to_string()))
        {
            value = v.clone();
        }
        if let Some(v) = self.frames[frame]
            .overrides
            .get(&(node.saved_id.clone(), name.to_string()))
        {
            value = v.clone();
        }
        Some(value)
    }

    fn resolve_output(
        &mut self,
        frame: usize,
        origin: &UiNode,
        slot: usize,
        ty: &str,
        visited: &mut HashSet<(usize, String, usize)>,
    ) -> Result<Resolved, UiError> {
        if !visited.insert((frame, origin.id.clone(), slot)) {
            return Err(UiError::Cycle(format!(
                "circular reference through node {}{} output {slot}",
                self.frames[frame].prefix, origin.id
            )));
        }
        if self.is_virtual(origin) {
            if origin.type_name == "Reroute" {
                if let Some(link) = origin.inputs.get(slot).and_then(|i| i.link.clone()) {
                    return self.resolve_link(frame, &origin.id, &link, ty, visited);
                }
            }
            return Ok(Resolved::Nothing);
        }
        if origin.mode == MODE_BYPASS {
            let sockets = self.sockets(frame, origin);
            let out_ty = self.output_type(origin, slot);
            let chosen = choose_bypass_input(&sockets, slot, &out_ty, ty);
            return match chosen.and_then(|i| sockets[i].2.clone()) {
                // The bypassed node's (or instance's) own input, in its scope.
                Some(link) => self.resolve_link(frame, &origin.id, &link, ty, visited),
                None => Ok(Resolved::Nothing),
            };
        }
        if self.is_instance(origin) && origin.mode != MODE_MUTED {
            let Some(&child) = self.children.get(&(frame, origin.index)) else {
                return Ok(Resolved::Nothing);
            };
            let def = &self.doc.defs[&origin.type_name];
            let feeding = def
                .graph
                .link_order
                .iter()
                .map(|id| &def.graph.links[id])
                .rfind(|l| l.target_id == def.output_node && l.target_slot == slot)
                .cloned();
            let Some(link) = feeding else {
                return Ok(Resolved::Nothing);
            };
            if link.origin_id == def.input_node {
                return self.resolve_boundary_input(child, link.origin_slot, ty, visited);
            }
            let Some(inner) = def.graph.node(&link.origin_id).cloned() else {
                return Ok(Resolved::Nothing);
            };
            return self.resolve_output(child, &inner, link.origin_slot, ty, visited);
        }
        Ok(Resolved::Link(
            format!("{}{}", self.frames[frame].prefix, origin.id),
            slot,
        ))
    }

    /// Emits every executable node of every frame, then prunes dangling links.
    fn emit(mut self) -> Result<Converted, UiError> {
        let mut workflow = Workflow::default();
        let mut provenance = IndexMap::new();
        for frame in 0..self.frames.len() {
            let nodes: Vec<UiNode> = self.graph(frame).nodes.clone();
            for node in &nodes {
                if node.mode == MODE_MUTED
                    || node.mode == MODE_BYPASS
                    || self.is_virtual(node)
                    || self.is_instance(node)
                {
                    continue;
                }
                let Some(nd) = self.defs.get(&node.type_name) else {
                    continue;
                };
                let exec = format!("{}{}", self.frames[frame].prefix, node.id);
                let title = node
                    .title
                    .clone()
                    .unwrap_or_else(|| nd.display_name.clone());
                let mut api = Node::new(&node.type_name);
                for w in self.widgets_of(frame, node) {
                    if w.kind != SlotKind::Input {
                        continue;
                    }
                    let mut value = self
                        .widget_value(frame, node, &w.name)
                        .unwrap_or_else(|| w.value.clone());
                    if frame == 0 && w.dynamic_prompts {
                        if let Value::String(s) = &value {
                            let (text, choices) = super::dynprompt::process(s);
                            if choices {
                                self.warnings.push(format!(
                                    "node {exec} ({}) input '{}': the dynamic prompt has {{a|b}} alternatives; the frontend picks one at random, the first one was used",
                                    node.type_name, w.name
                                ));
                            }
                            value = Value::String(text);
                        }
                    }
                    api.inputs
                        .insert(w.name.clone(), Input::Literal(serialize_value(value)));
                }
                for input in &node.inputs {
                    let Some(link) = input.link.clone() else {
                        continue;
                    };
                    let mut visited = HashSet::new();
                    match self.resolve_link(
                        frame,
                        &node.id,
                        &link,
                        &input.type_name,
                        &mut visited,
                    )? {
                        Resolved::Nothing => {}
                        Resolved::Link(id, slot) => {
                            api.inputs
                                .insert(input.name.clone(), Input::Link(Link { node: id, slot }));
                        }
                        Resolved::Value(v) => {
                            api.inputs
                                .insert(input.name.clone(), Input::Literal(serialize_value(v)));
                        }
                    }
                }
                let mut meta = Map::new();
                meta.insert("title".into(), Value::String(title.clone()));
                for k in ["cnr_id", "ver"] {
                    if let Some(v) = node.properties.get(k).filter(|v| v.is_string()) {
                        meta.insert(k.into(), v.clone());
                    }
                }
                api.meta = Some(Value::Object(meta));
                workflow.nodes.insert(exec.clone(), Arc::new(api));
                provenance.insert(
                    exec,
                    Origin {
                        scope: self.frames[frame].path.clone(),
                        definition: self.frames[frame].def.clone(),
                        node_id: node.saved_id.clone(),
                        index: node.index,
                        title,
                    },
                );
            }
        }
        // Links into nodes that are not emitted (muted, missing) are dropped.
        let ids: HashSet<String> = workflow.nodes.keys().cloned().collect();
        for node in workflow.nodes.values_mut() {
            Arc::make_mut(node)
                .inputs
                .retain(|_, i| i.as_link().is_none_or(|l| ids.contains(&l.node)));
        }
        if workflow.nodes.is_empty() {
            return Err(UiError::Empty);
        }
        let mut seen = HashSet::new();
        self.warnings.retain(|w| seen.insert(w.clone()));
        Ok(Converted {
            workflow,
            provenance,
            instances: self.instances,
            warnings: self.warnings,
            instance_slots: self.instance_slots,
        })
    }
}

/// The pack to install for a node, from `properties.cnr_id`/`ver` (or `aux_id`).
fn pack_of(props: &Map<String, Value>) -> Option<String> {
    let cnr = props
        .get("cnr_id")
        .and_then(Value::as_str)
        .or_else(|| props.get("aux_id").and_then(Value::as_str))?;
    Some(match props.get("ver").and_then(Value::as_str) {
        Some(ver) => format!("{cnr}@{ver}"),
        None => cnr.to_string(),
    })
}

/// litegraph's type check: equal, `*`/empty on either side, or comma lists sharing a member.
pub(crate) fn lg_compatible(a: &str, b: &str) -> bool {
    if a.is_empty() || b.is_empty() || a == "*" || b == "*" {
        return true;
    }
    let a = a.to_lowercase();
    let b = b.to_lowercase();
    if a == b {
        return true;
    }
    let bs: Vec<&str> = b.split(',').map(str::trim).collect();
    a.split(',').map(str::trim).any(|t| bs.contains(&t))
}

/// Which input a bypassed node passes to a consumer of output `slot` wanting type `ty`.
pub(crate) fn choose_bypass_input(
    sockets: &[(String, String, Option<String>)],
    slot: usize,
    out_ty: &str,
    ty: &str,
) -> Option<usize> {
    if sockets.is_empty() {
        return None;
    }
    if ty.is_empty() || ty == "*" {
        return Some(if slot < sockets.len() { slot } else { 0 });
    }
    if let Some((_, in_ty, _)) = sockets.get(slot) {
        if lg_compatible(in_ty, out_ty) && lg_compatible(in_ty, ty) {
            return Some(slot);
        }
    }
    if let Some(i) = sockets.iter().position(|(_, t, _)| t == ty) {
        return Some(i);
    }
    sockets
        .iter()
        .position(|(_, t, _)| lg_compatible(t, out_ty) && lg_compatible(t, ty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sockets(types: &[&str]) -> Vec<(String, String, Option<String>)> {
        types
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("in{i}"), t.to_string(), Some(i.to_string())))
            .collect()
    }

    #[test]
    fn litegraph_type_compatibility() {
        assert!(lg_compatible("IMAGE", "image"));
        assert!(lg_compatible("*", "LATENT"));
        assert!(lg_compatible("", "LATENT"));
        assert!(lg_compatible("INT,FLOAT", "FLOAT"));
        assert!(!lg_compatible("IMAGE", "MASK"));
    }

    #[test]
    fn bypass_input_choice() {
        // Same index when it fits both the output and the consumer.
        assert_eq!(
            choose_bypass_input(&sockets(&["MODEL", "CLIP"]), 1, "CLIP", "CLIP"),
            Some(1)
        );
        // Else the first input of exactly the wanted type.
        assert_eq!(
            choose_bypass_input(&sockets(&["UPSCALE_MODEL", "IMAGE"]), 0, "IMAGE", "IMAGE"),
            Some(1)
        );
        // Else the first compatible one.
        assert_eq!(
            choose_bypass_input(&sockets(&["MASK", "IMAGE,MASK"]), 0, "IMAGE", "IMAGE"),
            Some(1)
        );
        // A wildcard consumer takes the same index, or the first input.
        assert_eq!(
            choose_bypass_input(&sockets(&["A", "B"]), 5, "X", "*"),
            Some(0)
        );
        assert_eq!(
            choose_bypass_input(&sockets(&["MODEL"]), 0, "LATENT", "LATENT"),
            None
        );
        assert_eq!(choose_bypass_input(&[], 0, "LATENT", "LATENT"), None);
    }
}
