//! Writing an edited variant back as a UI workflow: the original file with the same edits made
//! the way a user would make them in ComfyUI (bypass = mode 4, remove = mode 2, values changed
//! in `widgets_values` or in the PrimitiveNode / subgraph instance that feeds the widget),
//! keeping positions, groups and notes.
//!
//! Every edit is checked: after it is made, the UI file is converted again and must give exactly
//! the API workflow with the same edits applied (same canonical hash). When the preferred UI edit
//! does not (a PrimitiveNode that also feeds other nodes…), the next one is tried (cut the link
//! and set the node's own widget).

use super::convert::{MODE_BYPASS, MODE_MUTED};
use super::parse::id_key;
use super::widgets::{map_widgets, SavedAt, SlotKind};
use super::{convert, Converted, Origin, UiError};
use crate::nodedefs::NodeDefs;
use crate::workflow::edit::Edit;
use serde_json::Value;

/// The original UI workflow with `edits` made the UI way. Converting the result gives exactly
/// the API variant (`converted.workflow` with `edits` applied).
pub fn write_variant(
    original_ui: &Value,
    converted: &Converted,
    edits: &[Edit],
    defs: &NodeDefs,
) -> Result<Value, UiError> {
    let mut ui = original_ui.clone();
    let mut api = converted.workflow.clone();
    for edit in edits {
        api.apply(std::slice::from_ref(edit), defs)
            .map_err(|e| UiError::WriteBack(e.to_string()))?;
        let want = api.sha256();
        let mut problems: Vec<String> = Vec::new();
        let mut done = false;
        for strategy in strategies(edit) {
            let mut candidate = ui.clone();
            if let Err(problem) = apply(&mut candidate, converted, edit, strategy, defs) {
                problems.push(problem);
                continue;
            }
            match convert(&candidate, defs) {
                Ok(c) if c.workflow.sha256() == want => {
                    ui = candidate;
                    done = true;
                    break;
                }
                Ok(c) => problems.push(first_difference(&c.workflow, &api)),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if !done {
            return Err(UiError::WriteBack(format!(
                "the edit {} has no UI equivalent here ({})",
                serde_json::to_string(edit).unwrap_or_default(),
                if problems.is_empty() {
                    "no way to make it in the UI file".to_string()
                } else {
                    problems.join("; ")
                }
            )));
        }
    }
    Ok(ui)
}

/// The ways to make an edit in the UI file, preferred first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// Change the PrimitiveNode or subgraph instance value that feeds the widget.
    Source,
    /// Cut the link into the input (if any) and change the node's own widget.
    OwnWidget,
    /// Cut the link into the input.
    CutLink,
    /// Set the node's mode.
    Mode(i64),
    /// Replace the input's link by one from another node of the same graph.
    Relink,
    /// Give the node another `type` and the new class's widget values.
    Class,
}

fn strategies(edit: &Edit) -> Vec<Strategy> {
    match edit {
        Edit::SetInput { .. } => vec![Strategy::Source, Strategy::OwnWidget],
        Edit::Disconnect { .. } => vec![Strategy::CutLink],
        Edit::Bypass { .. } => vec![Strategy::Mode(MODE_BYPASS)],
        Edit::Remove { .. } => vec![Strategy::Mode(MODE_MUTED)],
        Edit::Relink { .. } => vec![Strategy::Relink],
        Edit::SetClass { .. } => vec![Strategy::Class],
    }
}

fn first_difference(got: &crate::workflow::Workflow, want: &crate::workflow::Workflow) -> String {
    for (id, w) in &want.nodes {
        match got.nodes.get(id) {
            None => return format!("node {id} would be missing"),
            Some(g) if g.to_value(false) != w.to_value(false) => {
                return format!(
                    "node {id} would be {} instead of {}",
                    g.to_value(false),
                    w.to_value(false)
                )
            }
            _ => {}
        }
    }
    match got.nodes.keys().find(|id| !want.nodes.contains_key(*id)) {
        Some(id) => format!("node {id} would still be there"),
        None => "the result differs".into(),
    }
}

fn origin<'c>(converted: &'c Converted, node: &str) -> Result<&'c Origin, String> {
    converted
        .provenance
        .get(node)
        .ok_or_else(|| format!("node {node} is not in the converted workflow"))
}

fn apply(
    ui: &mut Value,
    converted: &Converted,
    edit: &Edit,
    strategy: Strategy,
    defs: &NodeDefs,
) -> Result<(), String> {
    match (edit, strategy) {
        (Edit::Remove { nodes }, Strategy::Mode(mode)) => {
            for id in nodes {
                if let Some(o) = converted.provenance.get(id) {
                    set_mode(ui, o, mode)?;
                }
            }
            Ok(())
        }
        (Edit::Bypass { node }, Strategy::Mode(mode)) => {
            set_mode(ui, origin(converted, node)?, mode)
        }
        (Edit::Disconnect { node, input }, Strategy::CutLink) => {
            let o = origin(converted, node)?;
            match input_link(ui, o, input)? {
                Some(link) => cut_link(ui, o.definition.as_deref(), &link),
                None => Err(format!(
                    "input '{input}' of node {node} is not linked in the UI file"
                )),
            }
        }
        (
            Edit::Relink {
                node,
                input,
                source,
                slot,
            },
            Strategy::Relink,
        ) => relink(ui, converted, node, input, source, *slot),
        (
            Edit::SetClass {
                node,
                class_type,
                set,
            },
            Strategy::Class,
        ) => {
            let o = origin(converted, node)?;
            if defs.get(class_type).is_none() {
                return Err(format!("class {class_type} is unknown"));
            }
            {
                let n = node_mut(ui, o)?;
                n["type"] = Value::from(class_type.as_str());
                n["widgets_values"] = Value::Array(Vec::new());
                if let Some(named) = n.get_mut("widgets_values_named") {
                    *named = Value::Object(Default::default());
                }
            }
            for (input, value) in set {
                set_own_widget(ui, o, input, unwrap_value(value), defs)?;
            }
            Ok(())
        }
        (Edit::SetInput { node, input, value }, s) => {
            let o = origin(converted, node)?;
            let value = unwrap_value(value);
            let link = input_link(ui, o, input)?;
            match s {
                Strategy::Source => {
                    let link = link.ok_or("the input is not linked")?;
                    set_source_value(ui, converted, o, &link, value)
                }
                Strategy::OwnWidget => {
                    if let Some(link) = link {
                        cut_link(ui, o.definition.as_deref(), &link)?;
                    }
                    set_own_widget(ui, o, input, value, defs)
                }
                _ => Err("not applicable".into()),
            }
        }
        _ => Err("not applicable".into()),
    }
}

/// `{"__value__": [...]}` is how the prompt carries a list; the widget holds the list.
fn unwrap_value(v: &Value) -> Value {
    match v.as_object() {
        Some(m) if m.len() == 1 && m.get("__value__").is_some_and(Value::is_array) => {
            m["__value__"].clone()
        }
        _ => v.clone(),
    }
}

/// The JSON object of a scope: the root, or a subgraph definition (searched recursively).
fn scope<'v>(ui: &'v mut Value, definition: Option<&str>) -> Option<&'v mut Value> {
    let Some(id) = definition else {
        return Some(ui);
    };
    find_definition(ui, id)
}

fn find_definition<'v>(v: &'v mut Value, id: &str) -> Option<&'v mut Value> {
    let list = v
        .get_mut("definitions")?
        .get_mut("subgraphs")?
        .as_array_mut()?;
    let pos = list
        .iter()
        .position(|sg| sg.get("id").and_then(Value::as_str) == Some(id));
    if let Some(pos) = pos {
        return Some(&mut list[pos]);
    }
    list.iter_mut().find_map(|sg| find_definition(sg, id))
}

fn node_mut<'v>(ui: &'v mut Value, o: &Origin) -> Result<&'v mut Value, String> {
    let scope = scope(ui, o.definition.as_deref())
        .ok_or_else(|| format!("subgraph definition {:?} not found", o.definition))?;
    scope
        .get_mut("nodes")
        .and_then(Value::as_array_mut)
        .and_then(|n| n.get_mut(o.index))
        .ok_or_else(|| format!("node {} not found in the UI file", o.node_id))
}

fn find_node_mut<'v>(scope: &'v mut Value, id: &str) -> Option<&'v mut Value> {
    scope
        .get_mut("nodes")?
        .as_array_mut()?
        .iter_mut()
        .find(|n| n.get("id").and_then(id_key).as_deref() == Some(id))
}

fn set_mode(ui: &mut Value, o: &Origin, mode: i64) -> Result<(), String> {
    let node = node_mut(ui, o)?;
    node["mode"] = Value::from(mode);
    Ok(())
}

/// The link id feeding the saved input `name` of a node, if any.
fn input_link(ui: &mut Value, o: &Origin, name: &str) -> Result<Option<String>, String> {
    let node = node_mut(ui, o)?;
    Ok(node
        .get("inputs")
        .and_then(Value::as_array)
        .and_then(|inputs| {
            inputs
                .iter()
                .find(|i| i.get("name").and_then(Value::as_str) == Some(name))
        })
        .and_then(|i| i.get("link"))
        .and_then(id_key))
}

fn link_fields(l: &Value) -> Option<(String, String, usize)> {
    match l {
        Value::Array(a) => Some((
            id_key(a.first()?)?,
            id_key(a.get(1)?)?,
            a.get(2)?.as_u64()? as usize,
        )),
        Value::Object(m) => Some((
            id_key(m.get("id")?)?,
            id_key(m.get("origin_id")?)?,
            m.get("origin_slot")?.as_u64()? as usize,
        )),
        _ => None,
    }
}

/// Removes a link from a scope: the links list, the target input, the origin output (or the
/// subgraph input's `linkIds`).
fn cut_link(ui: &mut Value, definition: Option<&str>, link: &str) -> Result<(), String> {
    let scope = scope(ui, definition).ok_or("scope not found")?;
    let mut origin = None;
    if let Some(links) = scope.get_mut("links").and_then(Value::as_array_mut) {
        links.retain(|l| match link_fields(l) {
            Some((id, o, slot)) if id == link => {
                origin = Some((o, slot));
                false
            }
            _ => true,
        });
    }
    let link_value = |v: &Value| id_key(v).as_deref() == Some(link);
    if let Some(nodes) = scope.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes.iter_mut() {
            if let Some(inputs) = n.get_mut("inputs").and_then(Value::as_array_mut) {
                for i in inputs.iter_mut() {
                    if i.get("link").is_some_and(link_value) {
                        i["link"] = Value::Null;
                    }
                }
            }
            if let Some(outputs) = n.get_mut("outputs").and_then(Value::as_array_mut) {
                for out in outputs.iter_mut() {
                    if let Some(ls) = out.get_mut("links").and_then(Value::as_array_mut) {
                        ls.retain(|l| !link_value(l));
                    }
                }
            }
        }
    }
    if let Some((_, slot)) = origin {
        if let Some(io) = scope
            .get_mut("inputs")
            .and_then(Value::as_array_mut)
            .and_then(|a| a.get_mut(slot))
        {
            if let Some(ids) = io.get_mut("linkIds").and_then(Value::as_array_mut) {
                ids.retain(|l| !link_value(l));
            }
        }
    }
    Ok(())
}

fn set_array_slot(node: &mut Value, index: usize, value: Value) {
    if !node.get("widgets_values").is_some_and(Value::is_array) {
        node["widgets_values"] = Value::Array(Vec::new());
    }
    let arr = node["widgets_values"]
        .as_array_mut()
        .expect("just made an array");
    while arr.len() <= index {
        arr.push(Value::Null);
    }
    arr[index] = value;
}

/// Sets the node's own widget `name` in `widgets_values` (and `widgets_values_named`).
fn set_own_widget(
    ui: &mut Value,
    o: &Origin,
    name: &str,
    value: Value,
    defs: &NodeDefs,
) -> Result<(), String> {
    let node = node_mut(ui, o)?;
    let class = node
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let def = defs
        .get(&class)
        .ok_or_else(|| format!("class {class} is unknown"))?;
    let widgets = map_widgets(def, node.get("widgets_values"));
    let pos = widgets
        .iter()
        .position(|w| w.kind == SlotKind::Input && w.name == name)
        .ok_or_else(|| format!("'{name}' is not a widget of {class}"))?;
    match widgets[pos].saved_at.clone() {
        Some(SavedAt::Index(i)) => set_array_slot(node, i, value.clone()),
        Some(SavedAt::Key(k)) => {
            node["widgets_values"][k.as_str()] = value.clone();
        }
        None => {
            if node.get("widgets_values").is_some_and(Value::is_object) {
                node["widgets_values"][name] = value.clone();
            } else {
                // The array is shorter than the widget list: fill the gap with the values the
                // widgets hold (their defaults), then the new value.
                let mut arr: Vec<Value> = node
                    .get("widgets_values")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                while arr.len() < pos {
                    arr.push(widgets[arr.len()].value.clone());
                }
                arr.truncate(pos);
                arr.push(value.clone());
                node["widgets_values"] = Value::Array(arr);
            }
        }
    }
    if let Some(named) = node
        .get_mut("widgets_values_named")
        .and_then(Value::as_object_mut)
    {
        if named.contains_key(name) {
            named.insert(name.to_string(), value);
        }
    }
    Ok(())
}

/// Sets the value where it comes from: follows the link up through subgraph boundaries (an
/// unlinked instance input → the instance's own value) to a PrimitiveNode.
fn set_source_value(
    ui: &mut Value,
    converted: &Converted,
    o: &Origin,
    link: &str,
    value: Value,
) -> Result<(), String> {
    let mut at = o.clone();
    // When `at` is a subgraph instance reached by climbing: its execution id and the input.
    let mut climbed: Option<(String, String)> = None;
    let mut link = link.to_string();
    for _ in 0..64 {
        let (origin_id, input_node, input_name) = {
            let scope = scope(ui, at.definition.as_deref()).ok_or("scope not found")?;
            let input_node = scope
                .get("inputNode")
                .and_then(|n| n.get("id"))
                .and_then(id_key)
                .unwrap_or_else(|| super::parse::INPUT_NODE_ID.to_string());
            let (_, origin_id, slot) = scope
                .get("links")
                .and_then(Value::as_array)
                .and_then(|links| {
                    links
                        .iter()
                        .filter_map(link_fields)
                        .find(|(id, _, _)| *id == link)
                })
                .ok_or_else(|| format!("link {link} not found"))?;
            let name = scope
                .get("inputs")
                .and_then(Value::as_array)
                .and_then(|a| a.get(slot))
                .and_then(|i| i.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (origin_id, input_node, name)
        };
        if at.definition.is_some() && origin_id == input_node {
            let instance_exec = at.scope.last().ok_or("no instance")?.clone();
            let instance = converted
                .instances
                .get(&instance_exec)
                .ok_or("instance not found")?
                .clone();
            match input_link(ui, &instance, &input_name)? {
                Some(outer) => {
                    at = instance;
                    climbed = Some((instance_exec, input_name));
                    link = outer;
                    continue;
                }
                None => {
                    return set_instance_slot(ui, converted, &instance_exec, &input_name, value)
                }
            }
        }
        {
            let scope = scope(ui, at.definition.as_deref()).ok_or("scope not found")?;
            let node = find_node_mut(scope, &origin_id).ok_or("no such origin node")?;
            if node.get("type").and_then(Value::as_str) == Some("PrimitiveNode") {
                set_array_slot(node, 0, value);
                return Ok(());
            }
        }
        // A link into an instance input: cut it and give the instance the value.
        return match climbed {
            Some((instance_exec, input_name)) => {
                cut_link(ui, at.definition.as_deref(), &link)?;
                set_instance_slot(ui, converted, &instance_exec, &input_name, value)
            }
            None => Err("the value does not come from a PrimitiveNode or an instance".into()),
        };
    }
    Err("subgraphs nest too deep".into())
}

/// Writes the value subgraph instance `instance_exec` shows for its input `input_name`.
fn set_instance_slot(
    ui: &mut Value,
    converted: &Converted,
    instance_exec: &str,
    input_name: &str,
    value: Value,
) -> Result<(), String> {
    let instance = converted
        .instances
        .get(instance_exec)
        .ok_or("instance not found")?;
    let index = converted
        .instance_slots
        .get(instance_exec)
        .and_then(|m| m.get(input_name))
        .copied()
        .ok_or_else(|| {
            format!("instance {instance_exec} shows no value for input '{input_name}'")
        })?;
    let node = node_mut(ui, instance)?;
    let len = node
        .get("widgets_values")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if index > len {
        return Err(format!(
            "instance {instance_exec} does not store a value for input '{input_name}'"
        ));
    }
    set_array_slot(node, index, value.clone());
    if let Some(named) = node
        .get_mut("widgets_values_named")
        .and_then(Value::as_object_mut)
    {
        if named.contains_key(input_name) {
            named.insert(input_name.to_string(), value);
        }
    }
    Ok(())
}

/// Replaces the link into `input` of `node` by one from output `slot` of `source` (both in the
/// same graph scope).
fn relink(
    ui: &mut Value,
    converted: &Converted,
    node: &str,
    input: &str,
    source: &str,
    slot: usize,
) -> Result<(), String> {
    let target = origin(converted, node)?.clone();
    let from = origin(converted, source)?.clone();
    if target.scope != from.scope || target.definition != from.definition {
        return Err(format!(
            "node {node} and node {source} are in different graphs (subgraph boundaries)"
        ));
    }
    if let Some(old) = input_link(ui, &target, input)? {
        cut_link(ui, target.definition.as_deref(), &old)?;
    }
    let definition = target.definition.clone();
    let scope = scope(ui, definition.as_deref()).ok_or("scope not found")?;
    // A subgraph definition and a whole version-1 file keep their counter in `state` and their
    // links as objects; a 0.4 root in `last_link_id` and arrays.
    let v1 = definition.is_some() || scope.get("version").and_then(Value::as_f64) == Some(1.0);
    let counter = if v1 {
        scope.pointer("/state/lastLinkId").and_then(Value::as_i64)
    } else {
        scope.get("last_link_id").and_then(Value::as_i64)
    };
    let object_form = v1
        || scope
            .get("links")
            .and_then(Value::as_array)
            .and_then(|l| l.first())
            .is_some_and(Value::is_object);
    let max_id = scope
        .get("links")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(link_fields)
                .filter_map(|(id, _, _)| id.parse::<i64>().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    let id = max_id.max(counter.unwrap_or(0)) + 1;
    let nodes = scope
        .get_mut("nodes")
        .and_then(Value::as_array_mut)
        .ok_or("the graph has no nodes")?;
    let source_type = {
        let src = nodes.get_mut(from.index).ok_or("source node not found")?;
        let out = src
            .get_mut("outputs")
            .and_then(Value::as_array_mut)
            .and_then(|o| o.get_mut(slot))
            .ok_or_else(|| format!("node {source} has no output {slot} in the UI file"))?;
        if !out.get("links").is_some_and(Value::is_array) {
            out["links"] = Value::Array(Vec::new());
        }
        out["links"]
            .as_array_mut()
            .expect("just made an array")
            .push(Value::from(id));
        out.get("type")
            .and_then(Value::as_str)
            .unwrap_or("*")
            .to_string()
    };
    let target_slot = {
        let dst = nodes.get_mut(target.index).ok_or("target node not found")?;
        if !dst.get("inputs").is_some_and(Value::is_array) {
            dst["inputs"] = Value::Array(Vec::new());
        }
        let inputs = dst["inputs"].as_array_mut().expect("just made an array");
        match inputs
            .iter()
            .position(|i| i.get("name").and_then(Value::as_str) == Some(input))
        {
            Some(k) => {
                inputs[k]["link"] = Value::from(id);
                k
            }
            None => {
                inputs.push(serde_json::json!({
                    "name": input, "type": source_type, "widget": {"name": input}, "link": id
                }));
                inputs.len() - 1
            }
        }
    };
    let (origin_id, target_id) = (node_id_value(&from.node_id), node_id_value(&target.node_id));
    let link = if object_form {
        serde_json::json!({"id": id, "origin_id": origin_id, "origin_slot": slot,
            "target_id": target_id, "target_slot": target_slot, "type": source_type})
    } else {
        serde_json::json!([id, origin_id, slot, target_id, target_slot, source_type])
    };
    if !scope.get("links").is_some_and(Value::is_array) {
        scope["links"] = Value::Array(Vec::new());
    }
    scope["links"]
        .as_array_mut()
        .expect("just made an array")
        .push(link);
    if v1 {
        if scope.get("state").is_some_and(Value::is_object) {
            scope["state"]["lastLinkId"] = Value::from(id);
        }
    } else {
        scope["last_link_id"] = Value::from(id);
    }
    Ok(())
}

/// A saved node id as JSON (numbers stay numbers).
fn node_id_value(id: &str) -> Value {
    id.parse::<i64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::String(id.to_string()))
}
