//! Reading the UI document into graph scopes: the root graph and every subgraph definition,
//! with links in array or object form, and node ids made globally unique the way the frontend
//! does on load (colliding inner ids are renumbered after the largest known id).

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The id of the subgraph input pseudo-node, unless the definition names another.
pub(crate) const INPUT_NODE_ID: &str = "-10";
/// The id of the subgraph output pseudo-node, unless the definition names another.
pub(crate) const OUTPUT_NODE_ID: &str = "-20";

/// One link of a scope.
#[derive(Debug, Clone)]
pub(crate) struct UiLink {
    pub origin_id: String,
    pub origin_slot: usize,
    pub target_id: String,
    pub target_slot: usize,
}

/// One input slot as saved.
#[derive(Debug, Clone)]
pub(crate) struct SavedInput {
    pub name: String,
    pub type_name: String,
    pub link: Option<String>,
    pub widget: Option<String>,
}

/// One output slot as saved.
#[derive(Debug, Clone)]
pub(crate) struct SavedOutput {
    pub type_name: String,
    pub links: Vec<String>,
}

/// One node as saved.
#[derive(Debug, Clone)]
pub(crate) struct UiNode {
    /// The id used for execution ids (after renumbering).
    pub id: String,
    /// The id as saved in the file.
    pub saved_id: String,
    /// Index in the scope's `nodes` array.
    pub index: usize,
    pub type_name: String,
    pub mode: i64,
    pub title: Option<String>,
    pub inputs: Vec<SavedInput>,
    pub outputs: Vec<SavedOutput>,
    pub widgets_values: Option<Value>,
    pub properties: Map<String, Value>,
}

/// One graph scope (the root, or a subgraph definition's inside).
#[derive(Debug, Clone, Default)]
pub(crate) struct UiGraph {
    pub nodes: Vec<UiNode>,
    pub index: HashMap<String, usize>,
    pub links: HashMap<String, UiLink>,
    /// Link ids in file order (first occurrence).
    pub link_order: Vec<String>,
}

/// A subgraph boundary slot.
#[derive(Debug, Clone)]
pub(crate) struct IoSlot {
    pub name: String,
    pub type_name: String,
}

/// A subgraph definition.
#[derive(Debug, Clone)]
pub(crate) struct SubgraphDef {
    pub name: String,
    pub graph: UiGraph,
    pub inputs: Vec<IoSlot>,
    pub outputs: Vec<IoSlot>,
    pub input_node: String,
    pub output_node: String,
}

/// The parsed document.
#[derive(Debug, Clone)]
pub(crate) struct UiDoc {
    pub root: UiGraph,
    pub defs: HashMap<String, SubgraphDef>,
    /// Definition ids in file order.
    pub def_order: Vec<String>,
}

impl UiGraph {
    pub fn node(&self, id: &str) -> Option<&UiNode> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }
}

/// The id of a node or link as a string key (`3`, `"3"` → `3`; `3.0` → `3`).
pub(crate) fn id_key(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i.to_string())
            } else {
                n.as_f64().map(|f| {
                    if f.fract() == 0.0 {
                        (f as i64).to_string()
                    } else {
                        f.to_string()
                    }
                })
            }
        }
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// A slot index: a number, or a numeric string read as the frontend's schema reads it
/// (`parseInt`: leading digits after optional whitespace).
fn as_slot(v: Option<&Value>) -> Option<usize> {
    let v = v?;
    if let Some(s) = v.as_str() {
        let s = s.trim_start();
        let digits = s.trim_start_matches('+');
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        return digits[..end].parse().ok();
    }
    v.as_u64()
        .map(|u| u as usize)
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as usize))
}

fn parse_link(v: &Value) -> Option<(String, UiLink)> {
    match v {
        Value::Array(a) => Some((
            id_key(a.first()?)?,
            UiLink {
                origin_id: id_key(a.get(1)?)?,
                origin_slot: as_slot(a.get(2))?,
                target_id: id_key(a.get(3)?)?,
                target_slot: as_slot(a.get(4)).unwrap_or(0),
            },
        )),
        Value::Object(o) => Some((
            id_key(o.get("id")?)?,
            UiLink {
                origin_id: id_key(o.get("origin_id")?)?,
                origin_slot: as_slot(o.get("origin_slot"))?,
                target_id: id_key(o.get("target_id")?)?,
                target_slot: as_slot(o.get("target_slot")).unwrap_or(0),
            },
        )),
        _ => None,
    }
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn parse_node(index: usize, v: &Value) -> Option<UiNode> {
    let obj = v.as_object()?;
    let id = id_key(obj.get("id")?)?;
    let inputs = obj
        .get("inputs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|i| i.is_object())
                .map(|i| SavedInput {
                    name: str_field(i, "name"),
                    type_name: type_string(i.get("type")),
                    link: i.get("link").and_then(id_key),
                    widget: i
                        .get("widget")
                        .and_then(|w| w.get("name"))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default();
    let outputs = obj
        .get("outputs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|o| SavedOutput {
                    type_name: type_string(o.get("type")),
                    links: o
                        .get("links")
                        .and_then(Value::as_array)
                        .map(|l| l.iter().filter_map(id_key).collect())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    Some(UiNode {
        saved_id: id.clone(),
        id,
        index,
        type_name: obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        mode: obj.get("mode").and_then(Value::as_i64).unwrap_or(0),
        title: obj.get("title").and_then(Value::as_str).map(str::to_string),
        inputs,
        outputs,
        // Newer frontends also write `widgets_values_named`; it stands in for a missing array.
        widgets_values: match obj.get("widgets_values") {
            None | Some(Value::Null) => obj
                .get("widgets_values_named")
                .filter(|v| v.is_object())
                .cloned(),
            Some(v) => Some(v.clone()),
        },
        properties: obj
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

fn type_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Parses the `nodes`/`links` of one scope. Later duplicates of a link id win, as in the
/// frontend's link map.
pub(crate) fn parse_graph(v: &Value) -> UiGraph {
    let mut graph = UiGraph::default();
    if let Some(nodes) = v.get("nodes").and_then(Value::as_array) {
        for (i, n) in nodes.iter().enumerate() {
            if let Some(node) = parse_node(i, n) {
                graph.nodes.push(node);
            }
        }
    }
    for (pos, n) in graph.nodes.iter().enumerate() {
        graph.index.entry(n.id.clone()).or_insert(pos);
    }
    if let Some(links) = v.get("links").and_then(Value::as_array) {
        for l in links {
            if let Some((id, link)) = parse_link(l) {
                if graph.links.insert(id.clone(), link).is_none() {
                    graph.link_order.push(id);
                }
            }
        }
    }
    graph
}

fn io_slots(v: Option<&Value>) -> Vec<IoSlot> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| IoSlot {
                    name: str_field(s, "name"),
                    type_name: type_string(s.get("type")),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn collect_defs(v: &Value, out: &mut Vec<Value>, seen: &mut HashSet<String>) {
    let Some(list) = v
        .get("definitions")
        .and_then(|d| d.get("subgraphs"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for sg in list {
        let Some(id) = sg.get("id").and_then(Value::as_str) else {
            continue;
        };
        if seen.insert(id.to_string()) {
            out.push(sg.clone());
        }
    }
    for sg in list {
        collect_defs(sg, out, seen);
    }
}

/// Parses the whole document, renumbering colliding subgraph node ids.
pub(crate) fn parse_doc(ui: &Value) -> UiDoc {
    let root = parse_graph(ui);
    let mut raw_defs = Vec::new();
    collect_defs(ui, &mut raw_defs, &mut HashSet::new());
    let mut defs = HashMap::new();
    let mut def_order = Vec::new();
    // The largest id the frontend knows: the root counter and every definition's counter.
    let mut last_node_id = ui
        .get("last_node_id")
        .and_then(Value::as_i64)
        .or_else(|| {
            ui.get("state")
                .and_then(|s| s.get("lastNodeId"))
                .and_then(Value::as_i64)
        })
        .unwrap_or(0);
    for sg in &raw_defs {
        if let Some(n) = sg
            .get("state")
            .and_then(|s| s.get("lastNodeId"))
            .and_then(Value::as_i64)
        {
            last_node_id = last_node_id.max(n);
        }
    }
    let mut used: HashSet<i64> = root
        .nodes
        .iter()
        .filter_map(|n| n.id.parse::<i64>().ok())
        .collect();
    for sg in &raw_defs {
        let id = str_field(sg, "id");
        let mut graph = parse_graph(sg);
        let mut remap: HashMap<String, String> = HashMap::new();
        for node in &mut graph.nodes {
            let Ok(num) = node.id.parse::<i64>() else {
                continue;
            };
            if used.contains(&num) {
                loop {
                    last_node_id += 1;
                    if !used.contains(&last_node_id) {
                        break;
                    }
                }
                used.insert(last_node_id);
                remap.insert(node.id.clone(), last_node_id.to_string());
                node.id = last_node_id.to_string();
            } else {
                used.insert(num);
                last_node_id = last_node_id.max(num);
            }
        }
        if !remap.is_empty() {
            graph.index = graph
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.id.clone(), i))
                .collect();
            for link in graph.links.values_mut() {
                if let Some(new) = remap.get(&link.origin_id) {
                    link.origin_id = new.clone();
                }
                if let Some(new) = remap.get(&link.target_id) {
                    link.target_id = new.clone();
                }
            }
        }
        let input_node = sg
            .get("inputNode")
            .and_then(|n| n.get("id"))
            .and_then(id_key)
            .unwrap_or_else(|| INPUT_NODE_ID.to_string());
        let output_node = sg
            .get("outputNode")
            .and_then(|n| n.get("id"))
            .and_then(id_key)
            .unwrap_or_else(|| OUTPUT_NODE_ID.to_string());
        def_order.push(id.clone());
        defs.insert(
            id.clone(),
            SubgraphDef {
                name: str_field(sg, "name"),
                graph,
                inputs: io_slots(sg.get("inputs")),
                outputs: io_slots(sg.get("outputs")),
                input_node,
                output_node,
            },
        );
    }
    UiDoc {
        root,
        defs,
        def_order,
    }
}
