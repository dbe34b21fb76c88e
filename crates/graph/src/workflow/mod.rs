//! The workflow graph: API-format prompts (`{node_id: {class_type, inputs, _meta}}`), their
//! structural checks, graph queries and the canonical form whose sha256 is the workflow hash;
//! workflows are read from JSON files or from the files ComfyUI saves (`embedded`).
//!
//! Numbers are kept exactly as written (serde_json's arbitrary precision), so u64 seeds and
//! floats round-trip byte for byte.

mod canonical;
pub mod edit;
pub mod embedded;
mod graph;
pub(crate) use graph::IdSet;
pub mod label;
mod load;
pub mod ui;
pub mod validate;

pub use canonical::canonical_json;
pub use canonical::sha256_hex;
pub use edit::{Change, Edit, EditError};
pub(crate) use load::{detect_format, Format};
pub use load::{is_ui_document, load_api_file, parse_api, read_document, Document, LoadError};

use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::sync::Arc;

/// A node id as used in prompts (`"3"`, `"92:57"` for subgraph-flattened ids).
pub(crate) type NodeId = String;

/// The nodes of a workflow by id, in file order. Nodes are shared between a workflow and its
/// copies (the ladder's variants) until an edit changes one; ids are hashed with FxHash (node ids
/// are short strings and not adversarial, and lookups by id are the planner's hottest path).
pub(crate) type Nodes = IndexMap<NodeId, Arc<Node>, rustc_hash::FxBuildHasher>;

/// An API-format workflow: nodes in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Workflow {
    /// Nodes by id, in the order they were read.
    pub nodes: Nodes,
}

/// One node of an API-format workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node class.
    pub class_type: String,
    /// Inputs in file order.
    pub inputs: IndexMap<String, Input>,
    /// `_meta` (title…): kept for output, excluded from the hash.
    pub meta: Option<Value>,
    /// Any other field of the node object, kept and hashed as is.
    pub extra: Map<String, Value>,
}

/// The value of one input: a link to another node's output, or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// `[source_id, slot]`.
    Link(Link),
    /// Any other JSON value (a literal array stays wrapped as `{"__value__": [...]}`).
    Literal(Value),
}

/// A link to output `slot` of node `node`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Link {
    /// Source node id.
    pub node: NodeId,
    /// Source output index.
    pub slot: usize,
}

impl Input {
    /// The link, when this input is linked.
    pub fn as_link(&self) -> Option<&Link> {
        match self {
            Input::Link(l) => Some(l),
            Input::Literal(_) => None,
        }
    }

    /// The literal value, when this input is not linked.
    pub fn as_literal(&self) -> Option<&Value> {
        match self {
            Input::Literal(v) => Some(v),
            Input::Link(_) => None,
        }
    }

    /// The JSON form used in prompts.
    pub fn to_value(&self) -> Value {
        match self {
            Input::Link(l) => Value::Array(vec![
                Value::String(l.node.clone()),
                Value::Number(serde_json::Number::from(l.slot as u64)),
            ]),
            Input::Literal(v) => v.clone(),
        }
    }
}

impl Node {
    /// A node with the given class and no inputs.
    pub fn new(class_type: &str) -> Node {
        Node {
            class_type: class_type.to_string(),
            inputs: IndexMap::new(),
            meta: None,
            extra: Map::new(),
        }
    }

    /// `_meta.title`, when present.
    pub fn title(&self) -> Option<&str> {
        self.meta.as_ref()?.get("title")?.as_str()
    }

    /// The JSON object of this node; `with_meta` keeps `_meta`.
    pub fn to_value(&self, with_meta: bool) -> Value {
        let mut obj = Map::new();
        let inputs: Map<String, Value> = self
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), v.to_value()))
            .collect();
        obj.insert("inputs".into(), Value::Object(inputs));
        obj.insert("class_type".into(), Value::String(self.class_type.clone()));
        for (k, v) in &self.extra {
            obj.insert(k.clone(), v.clone());
        }
        if with_meta {
            if let Some(meta) = &self.meta {
                obj.insert("_meta".into(), meta.clone());
            }
        }
        Value::Object(obj)
    }
}

impl Node {
    /// Appends this node's canonical form (`_meta` excluded): the bytes of
    /// `canonical_json(&self.to_value(false))`, written without building the JSON tree.
    fn write_canonical(&self, out: &mut Vec<u8>) {
        enum Field<'a> {
            ClassType,
            Inputs,
            Extra(&'a Value),
        }
        let mut fields: Vec<(&str, Field)> = Vec::with_capacity(2 + self.extra.len());
        fields.push(("class_type", Field::ClassType));
        fields.push(("inputs", Field::Inputs));
        for (k, v) in &self.extra {
            // `to_value` lets an extra field of the same name win; so does this.
            fields.retain(|(name, _)| *name != k.as_str());
            fields.push((k.as_str(), Field::Extra(v)));
        }
        let fields = fields.iter().map(|(name, field)| (name, field));
        canonical::write_sorted_object(fields, out, |field, out| match field {
            Field::ClassType => canonical::write_str(&self.class_type, out),
            Field::Extra(v) => canonical::write_value(v, out),
            Field::Inputs => {
                canonical::write_sorted_object(&self.inputs, out, |input, out| match input {
                    Input::Link(l) => {
                        out.push(b'[');
                        canonical::write_str(&l.node, out);
                        out.push(b',');
                        canonical::write_display(&l.slot, out);
                        out.push(b']');
                    }
                    Input::Literal(v) => canonical::write_value(v, out),
                })
            }
        });
    }
}

impl Workflow {
    /// The API-format JSON object (with `_meta`), as POST /prompt takes it.
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.nodes
                .iter()
                .map(|(id, n)| (id.clone(), n.to_value(true)))
                .collect(),
        )
    }

    /// Pretty JSON for writing variant files.
    pub fn to_pretty_json(&self) -> String {
        serde_json::to_string_pretty(&self.to_value()).expect("a JSON value always serializes")
    }

    /// The canonical bytes: keys sorted, no whitespace, numbers as parsed, `_meta` excluded.
    ///
    /// Written straight from the graph (no JSON tree is built); the bytes are those of
    /// `canonical_json` of the API object without `_meta` (a test holds the two together).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.nodes.len() * 256);
        canonical::write_sorted_object(&self.nodes, &mut out, |node, out| {
            node.write_canonical(out)
        });
        out
    }

    /// The workflow hash: sha256 (lower hex) of the canonical bytes.
    pub fn sha256(&self) -> String {
        sha256_hex(&self.canonical_bytes())
    }

    /// The component hash of one node: sha256 of its canonical `class_type` + inputs.
    pub fn node_sha256(&self, id: &str) -> Option<String> {
        let node = self.nodes.get(id)?;
        let mut out = Vec::new();
        node.write_canonical(&mut out);
        Some(sha256_hex(&out))
    }

    /// A node by id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.get(id).map(|n| &**n)
    }
}
