//! Graph edits: the only ways a variant may differ from its target. Every reduction of the
//! ladder is a short list of these, applied to a fresh copy of the target.
//!
//! - set an input to a literal (replacing a link when the value arrived through one),
//! - point an input at another node's output,
//! - disconnect an optional input,
//! - bypass a node the way ComfyUI does (each consumer gets the node's input of the matching
//!   type; an unlinked match leaves the consumer unconnected),
//! - remove nodes (drop a branch); inputs that linked to them are disconnected,
//! - give a node another class with the same sockets (a mitigation's `VAEDecode` →
//!   `VAEDecodeTiled`), its links kept.

use super::graph::Consumer;
use super::{Input, Link, NodeId, Workflow};
use crate::nodedefs::{types_compatible, InputKind, NodeDefs};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// One graph edit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "edit", rename_all = "snake_case")]
pub enum Edit {
    /// Give `input` of `node` the literal `value` (a link there is replaced).
    SetInput {
        /// Node id.
        node: NodeId,
        /// Input name.
        input: String,
        /// New literal value.
        value: Value,
    },
    /// Point `input` of `node` at output `slot` of `source`.
    Relink {
        /// Node id.
        node: NodeId,
        /// Input name.
        input: String,
        /// New source node.
        source: NodeId,
        /// New source output index.
        slot: usize,
    },
    /// Remove `input` from `node` (only sensible for optional inputs).
    Disconnect {
        /// Node id.
        node: NodeId,
        /// Input name.
        input: String,
    },
    /// Bypass `node` with ComfyUI's type-matching pass-through, then drop it.
    Bypass {
        /// Node id.
        node: NodeId,
    },
    /// Remove these nodes; inputs elsewhere that linked to them are disconnected.
    Remove {
        /// Node ids.
        nodes: Vec<NodeId>,
    },
    /// Give `node` the class `class_type`, its inputs and links kept (the new class must take
    /// the same sockets), with the new class's widget values `set` (one edit, so the node is
    /// never of the new class without its widgets).
    SetClass {
        /// Node id.
        node: NodeId,
        /// The new class.
        class_type: String,
        /// Widget values of the new class.
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        set: serde_json::Map<String, Value>,
    },
}

/// What an edit changed, in the shape plan.json records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Node id.
    pub node: NodeId,
    /// Its class.
    pub class_type: String,
    /// `set`, `bypass`, `remove` or `class` (from/to are the class names).
    pub action: String,
    /// Input concerned (absent for whole-node actions).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub input: Option<String>,
    /// Value before (a link is `["id", slot]`; absent when there was none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub from: Option<Value>,
    /// Value after (absent for removals).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub to: Option<Value>,
}

/// An edit that does not fit the graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EditError {
    /// The node is not in the workflow.
    #[error("edit refers to node '{0}', which is not in the workflow")]
    NoSuchNode(String),
    /// The source of a relink is not in the workflow.
    #[error("edit links node '{node}' input '{input}' to node '{source_node}', which is not in the workflow")]
    NoSuchSource {
        /// Node id.
        node: String,
        /// Input name.
        input: String,
        /// The missing source.
        source_node: String,
    },
}

impl Edit {
    /// The node ids this edit touches.
    pub fn nodes(&self) -> Vec<&str> {
        match self {
            Edit::SetInput { node, .. }
            | Edit::Relink { node, .. }
            | Edit::Disconnect { node, .. }
            | Edit::Bypass { node }
            | Edit::SetClass { node, .. } => vec![node.as_str()],
            Edit::Remove { nodes } => nodes.iter().map(String::as_str).collect(),
        }
    }
}

impl Workflow {
    /// Applies `edits` in order and returns what changed. Edits that change nothing (a value
    /// already set, a node already gone) record nothing.
    pub fn apply(&mut self, edits: &[Edit], defs: &NodeDefs) -> Result<Vec<Change>, EditError> {
        let mut changes = Vec::new();
        let mut i = 0;
        while i < edits.len() {
            // Runs of bypasses share one scan for consumers (long LoRA chains stay linear).
            let run = edits[i..]
                .iter()
                .take_while(|e| matches!(e, Edit::Bypass { .. }))
                .count();
            if run >= 2 {
                self.apply_bypass_run(&edits[i..i + run], defs, &mut changes)?;
                i += run;
                continue;
            }
            self.apply_one(&edits[i], defs, &mut changes)?;
            i += 1;
        }
        Ok(changes)
    }

    /// Applies consecutive `Bypass` edits exactly as one-by-one application would, with one
    /// consumer index instead of a scan of the whole graph per bypass.
    fn apply_bypass_run(
        &mut self,
        run: &[Edit],
        defs: &NodeDefs,
        changes: &mut Vec<Change>,
    ) -> Result<(), EditError> {
        let ids: rustc_hash::FxHashSet<&str> = run
            .iter()
            .filter_map(|e| match e {
                Edit::Bypass { node } => Some(node.as_str()),
                _ => None,
            })
            .collect();
        let mut index: rustc_hash::FxHashMap<String, Vec<(Consumer, usize)>> =
            rustc_hash::FxHashMap::default();
        for (cid, n) in &self.nodes {
            for (name, input) in &n.inputs {
                if let Input::Link(l) = input {
                    if ids.contains(l.node.as_str()) {
                        index.entry(l.node.clone()).or_default().push((
                            Consumer {
                                node: cid.clone(),
                                input: name.clone(),
                            },
                            l.slot,
                        ));
                    }
                }
            }
        }
        // Removal is deferred to one pass at the end (removing from the ordered map one by
        // one would shift it every time); removed nodes are skipped as consumers meanwhile.
        let mut removed: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
        let mut result = Ok(());
        for edit in run {
            let Edit::Bypass { node } = edit else {
                continue;
            };
            let Some(class_type) = self
                .nodes
                .get(node)
                .filter(|_| !removed.contains(node))
                .map(|n| n.class_type.clone())
            else {
                result = Err(EditError::NoSuchNode(node.clone()));
                break;
            };
            let candidates = index.remove(node).unwrap_or_default();
            let consumers: Vec<(Consumer, usize)> = candidates
                .into_iter()
                .filter(|(c, slot)| {
                    !removed.contains(&c.node)
                        && self
                            .nodes
                            .get(&c.node)
                            .and_then(|n| n.inputs.get(&c.input))
                            .and_then(Input::as_link)
                            == Some(&Link {
                                node: node.clone(),
                                slot: *slot,
                            })
                })
                .collect();
            for (consumer, link) in self.bypass_consumers(node, defs, consumers) {
                if ids.contains(link.node.as_str()) {
                    index
                        .entry(link.node.clone())
                        .or_default()
                        .push((consumer, link.slot));
                }
            }
            removed.insert(node.clone());
            changes.push(Change {
                node: node.clone(),
                class_type,
                action: "bypass".into(),
                input: None,
                from: None,
                to: None,
            });
        }
        if !removed.is_empty() {
            self.nodes.retain(|id, _| !removed.contains(id));
        }
        result
    }

    fn apply_one(
        &mut self,
        edit: &Edit,
        defs: &NodeDefs,
        changes: &mut Vec<Change>,
    ) -> Result<(), EditError> {
        match edit {
            Edit::SetInput { node, input, value } => {
                let n = Arc::make_mut(
                    self.nodes
                        .get_mut(node)
                        .ok_or_else(|| EditError::NoSuchNode(node.clone()))?,
                );
                let new = Input::Literal(value.clone());
                let old = n.inputs.insert(input.clone(), new.clone());
                if old.as_ref() != Some(&new) {
                    changes.push(Change {
                        node: node.clone(),
                        class_type: n.class_type.clone(),
                        action: "set".into(),
                        input: Some(input.clone()),
                        from: old.map(|o| o.to_value()),
                        to: Some(value.clone()),
                    });
                }
            }
            Edit::Relink {
                node,
                input,
                source,
                slot,
            } => {
                if !self.nodes.contains_key(source) {
                    return Err(EditError::NoSuchSource {
                        node: node.clone(),
                        input: input.clone(),
                        source_node: source.clone(),
                    });
                }
                let n = Arc::make_mut(
                    self.nodes
                        .get_mut(node)
                        .ok_or_else(|| EditError::NoSuchNode(node.clone()))?,
                );
                let new = Input::Link(Link {
                    node: source.clone(),
                    slot: *slot,
                });
                let old = n.inputs.insert(input.clone(), new.clone());
                if old.as_ref() != Some(&new) {
                    changes.push(Change {
                        node: node.clone(),
                        class_type: n.class_type.clone(),
                        action: "set".into(),
                        input: Some(input.clone()),
                        from: old.map(|o| o.to_value()),
                        to: Some(new.to_value()),
                    });
                }
            }
            Edit::Disconnect { node, input } => {
                let n = Arc::make_mut(
                    self.nodes
                        .get_mut(node)
                        .ok_or_else(|| EditError::NoSuchNode(node.clone()))?,
                );
                if let Some(old) = n.inputs.shift_remove(input) {
                    changes.push(Change {
                        node: node.clone(),
                        class_type: n.class_type.clone(),
                        action: "remove".into(),
                        input: Some(input.clone()),
                        from: Some(old.to_value()),
                        to: None,
                    });
                }
            }
            Edit::SetClass {
                node,
                class_type,
                set,
            } => {
                let n = Arc::make_mut(
                    self.nodes
                        .get_mut(node)
                        .ok_or_else(|| EditError::NoSuchNode(node.clone()))?,
                );
                if n.class_type != *class_type {
                    let old = std::mem::replace(&mut n.class_type, class_type.clone());
                    changes.push(Change {
                        node: node.clone(),
                        class_type: old.clone(),
                        action: "class".into(),
                        input: None,
                        from: Some(Value::String(old)),
                        to: Some(Value::String(class_type.clone())),
                    });
                }
                for (input, value) in set {
                    let new = Input::Literal(value.clone());
                    let old = n.inputs.insert(input.clone(), new.clone());
                    if old.as_ref() != Some(&new) {
                        changes.push(Change {
                            node: node.clone(),
                            class_type: class_type.clone(),
                            action: "set".into(),
                            input: Some(input.clone()),
                            from: old.map(|o| o.to_value()),
                            to: Some(value.clone()),
                        });
                    }
                }
            }
            Edit::Bypass { node } => {
                let class_type = self
                    .nodes
                    .get(node)
                    .ok_or_else(|| EditError::NoSuchNode(node.clone()))?
                    .class_type
                    .clone();
                self.bypass(node, defs);
                changes.push(Change {
                    node: node.clone(),
                    class_type,
                    action: "bypass".into(),
                    input: None,
                    from: None,
                    to: None,
                });
            }
            Edit::Remove { nodes } => {
                let gone: rustc_hash::FxHashSet<&str> = nodes.iter().map(String::as_str).collect();
                let mut seen = rustc_hash::FxHashSet::default();
                for id in nodes {
                    if let Some(removed) = self.nodes.get(id).filter(|_| seen.insert(id)) {
                        changes.push(Change {
                            node: id.clone(),
                            class_type: removed.class_type.clone(),
                            action: "remove".into(),
                            input: None,
                            from: None,
                            to: None,
                        });
                    }
                }
                self.nodes.retain(|id, _| !gone.contains(id.as_str()));
                let links_gone =
                    |i: &Input| matches!(i, Input::Link(l) if gone.contains(l.node.as_str()));
                for n in self.nodes.values_mut() {
                    // Only nodes that lose a link are copied out of the shared graph.
                    if n.inputs.values().any(links_gone) {
                        Arc::make_mut(n).inputs.retain(|_, i| !links_gone(i));
                    }
                }
            }
        }
        Ok(())
    }

    /// Rewires every consumer of `id` to the input ComfyUI's bypass would pass through, then
    /// removes `id`.
    fn bypass(&mut self, id: &str, defs: &NodeDefs) {
        let consumers = self.consumers_of_node(id);
        self.bypass_consumers(id, defs, consumers);
        self.nodes.shift_remove(id);
    }

    /// Rewires the given consumers of `id` as ComfyUI's bypass does (the caller removes `id`)
    /// and returns the links it made.
    fn bypass_consumers(
        &mut self,
        id: &str,
        defs: &NodeDefs,
        consumers: Vec<(Consumer, usize)>,
    ) -> Vec<(Consumer, Link)> {
        let mut made = Vec::new();
        let Some(node) = self.nodes.get(id).cloned() else {
            return made;
        };
        let def = defs.get(&node.class_type);
        // The node's sockets in declared order: inputs that are not plain widgets, or are linked.
        let sockets: Vec<(String, String, Option<Link>)> = match def {
            Some(def) => def
                .visible_inputs()
                .filter(|spec| {
                    let widget = matches!(spec.kind, InputKind::Combo { .. })
                        || matches!(spec.type_name(), "INT" | "FLOAT" | "STRING" | "BOOLEAN");
                    !widget
                        || node
                            .inputs
                            .get(&spec.name)
                            .is_some_and(|i| i.as_link().is_some())
                })
                .map(|spec| {
                    let link = node
                        .inputs
                        .get(&spec.name)
                        .and_then(|i| i.as_link())
                        .cloned();
                    (spec.name.clone(), spec.type_name().to_string(), link)
                })
                .collect(),
            None => node
                .inputs
                .iter()
                .filter_map(|(k, i)| {
                    i.as_link()
                        .map(|l| (k.clone(), "*".to_string(), Some(l.clone())))
                })
                .collect(),
        };
        let output_type = |slot: usize| -> String {
            def.and_then(|d| d.outputs.get(slot))
                .map(|o| o.type_name.clone())
                .unwrap_or_else(|| "*".into())
        };
        for (consumer, slot) in consumers {
            let wanted = self
                .nodes
                .get(&consumer.node)
                .and_then(|c| defs.get(&c.class_type))
                .and_then(|d| d.input(&consumer.input))
                .map(|spec| spec.type_name().to_string())
                .unwrap_or_else(|| output_type(slot));
            let out_type = output_type(slot);
            let chosen = if wanted == "*" || wanted.is_empty() {
                sockets.get(slot).or_else(|| sockets.first())
            } else {
                sockets
                    .get(slot)
                    .filter(|(_, t, _)| {
                        types_compatible(t, &out_type) && types_compatible(t, &wanted)
                    })
                    .or_else(|| sockets.iter().find(|(_, t, _)| *t == wanted))
                    .or_else(|| {
                        sockets.iter().find(|(_, t, _)| {
                            types_compatible(t, &out_type) && types_compatible(t, &wanted)
                        })
                    })
            };
            let target =
                Arc::make_mut(self.nodes.get_mut(&consumer.node).expect("consumers exist"));
            match chosen.and_then(|(_, _, link)| link.clone()) {
                Some(link) => {
                    target
                        .inputs
                        .insert(consumer.input.clone(), Input::Link(link.clone()));
                    made.push((consumer, link));
                }
                None => {
                    target.inputs.shift_remove(&consumer.input);
                }
            }
        }
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::parse_api;
    use serde_json::json;

    fn defs() -> NodeDefs {
        NodeDefs::from_value(&json!({
            "Ckpt": {"input": {"required": {}}, "output": ["MODEL", "CLIP", "VAE"]},
            "Lora": {"input": {"required": {"model": ["MODEL", {}], "clip": ["CLIP", {}], "lora_name": [["a"], {}], "strength_model": ["FLOAT", {}]}},
                     "input_order": {"required": ["model", "clip", "lora_name", "strength_model"]},
                     "output": ["MODEL", "CLIP"]},
            "Up": {"input": {"required": {"upscale_model": ["UPSCALE_MODEL", {}], "image": ["IMAGE", {}]}}, "output": ["IMAGE"]},
            "UpLoader": {"input": {"required": {}}, "output": ["UPSCALE_MODEL"]},
            "Img": {"input": {"required": {}}, "output": ["IMAGE"]},
            "Use": {"input": {"required": {"model": ["MODEL", {}], "clip": ["CLIP", {}]}, "optional": {"image": ["IMAGE", {}]}}, "output": [], "output_node": true}
        }))
        .unwrap()
    }

    fn wf(v: Value) -> Workflow {
        parse_api(&v, "t.json").unwrap()
    }

    #[test]
    fn set_class_keeps_links_and_records_the_old_and_new_class() {
        let mut w = wf(json!({
            "1": {"class_type": "Img", "inputs": {}},
            "3": {"class_type": "UpLoader", "inputs": {}},
            "2": {"class_type": "Up", "inputs": {"upscale_model": ["3", 0], "image": ["1", 0]}}
        }));
        let edit = Edit::SetClass {
            node: "2".into(),
            class_type: "UpTiled".into(),
            set: serde_json::Map::new(),
        };
        let changes = w.apply(std::slice::from_ref(&edit), &defs()).unwrap();
        assert_eq!(w.nodes["2"].class_type, "UpTiled");
        assert_eq!(w.nodes["2"].inputs["image"].as_link().unwrap().node, "1");
        assert_eq!(changes[0].action, "class");
        assert_eq!(changes[0].from, Some(json!("Up")));
        assert_eq!(changes[0].to, Some(json!("UpTiled")));
        // Again: nothing changes, nothing is recorded.
        assert!(w.apply(&[edit], &defs()).unwrap().is_empty());
        assert_eq!(
            w.apply(
                &[Edit::SetClass {
                    node: "7".into(),
                    class_type: "X".into(),
                    set: serde_json::Map::new(),
                }],
                &defs()
            ),
            Err(EditError::NoSuchNode("7".into()))
        );
    }

    #[test]
    fn bypass_passes_matching_types_through_chains() {
        let mut w = wf(json!({
            "1": {"class_type": "Ckpt", "inputs": {}},
            "2": {"class_type": "Lora", "inputs": {"model": ["1", 0], "clip": ["1", 1], "lora_name": "a", "strength_model": 1.0}},
            "3": {"class_type": "Lora", "inputs": {"model": ["2", 0], "clip": ["2", 1], "lora_name": "a", "strength_model": 1.0}},
            "4": {"class_type": "Use", "inputs": {"model": ["3", 0], "clip": ["3", 1]}}
        }));
        let changes = w
            .apply(
                &[
                    Edit::Bypass { node: "3".into() },
                    Edit::Bypass { node: "2".into() },
                ],
                &defs(),
            )
            .unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(
            w.nodes["4"].inputs["model"],
            Input::Link(Link {
                node: "1".into(),
                slot: 0
            })
        );
        assert_eq!(
            w.nodes["4"].inputs["clip"],
            Input::Link(Link {
                node: "1".into(),
                slot: 1
            })
        );
        assert!(!w.nodes.contains_key("2") && !w.nodes.contains_key("3"));
    }

    #[test]
    fn a_run_of_bypasses_equals_bypassing_one_by_one() {
        let chain = wf(json!({
            "1": {"class_type": "Ckpt", "inputs": {}},
            "2": {"class_type": "Lora", "inputs": {"model": ["1", 0], "clip": ["1", 1], "lora_name": "a", "strength_model": 1.0}},
            "3": {"class_type": "Lora", "inputs": {"model": ["2", 0], "clip": ["2", 1], "lora_name": "a", "strength_model": 1.0}},
            "4": {"class_type": "Lora", "inputs": {"model": ["3", 0], "clip": ["2", 1], "lora_name": "a", "strength_model": 1.0}},
            "5": {"class_type": "Use", "inputs": {"model": ["4", 0], "clip": ["3", 1]}}
        }));
        for order in [["2", "3", "4"], ["4", "3", "2"], ["3", "2", "4"]] {
            let edits: Vec<Edit> = order
                .iter()
                .map(|n| Edit::Bypass {
                    node: n.to_string(),
                })
                .collect();
            let mut batch = chain.clone();
            let changes = batch.apply(&edits, &defs()).unwrap();
            let mut single = chain.clone();
            for e in &edits {
                single.apply(std::slice::from_ref(e), &defs()).unwrap();
            }
            assert_eq!(batch, single, "{order:?}");
            assert_eq!(changes.len(), 3);
        }
        let mut twice = chain.clone();
        let again = [
            Edit::Bypass { node: "2".into() },
            Edit::Bypass { node: "2".into() },
        ];
        assert!(twice.apply(&again, &defs()).is_err());
    }

    #[test]
    fn bypass_picks_first_exact_type_when_same_index_does_not_fit() {
        let mut w = wf(json!({
            "1": {"class_type": "Ckpt", "inputs": {}},
            "5": {"class_type": "UpLoader", "inputs": {}},
            "6": {"class_type": "Img", "inputs": {}},
            "7": {"class_type": "Up", "inputs": {"upscale_model": ["5", 0], "image": ["6", 0]}},
            "8": {"class_type": "Use", "inputs": {"model": ["1", 0], "clip": ["1", 1], "image": ["7", 0]}}
        }));
        w.apply(&[Edit::Bypass { node: "7".into() }], &defs())
            .unwrap();
        assert_eq!(
            w.nodes["8"].inputs["image"],
            Input::Link(Link {
                node: "6".into(),
                slot: 0
            })
        );
    }

    #[test]
    fn set_relink_disconnect_remove_record_changes() {
        let mut w = wf(json!({
            "1": {"class_type": "Ckpt", "inputs": {}},
            "6": {"class_type": "Img", "inputs": {}},
            "8": {"class_type": "Use", "inputs": {"model": ["1", 0], "clip": ["1", 1], "image": ["6", 0]}}
        }));
        let changes = w
            .apply(
                &[
                    Edit::SetInput {
                        node: "8".into(),
                        input: "clip".into(),
                        value: json!(3),
                    },
                    Edit::SetInput {
                        node: "8".into(),
                        input: "clip".into(),
                        value: json!(3),
                    },
                    Edit::Relink {
                        node: "8".into(),
                        input: "clip".into(),
                        source: "1".into(),
                        slot: 1,
                    },
                    Edit::Disconnect {
                        node: "8".into(),
                        input: "image".into(),
                    },
                    Edit::Remove {
                        nodes: vec!["6".into()],
                    },
                ],
                &defs(),
            )
            .unwrap();
        let actions: Vec<&str> = changes.iter().map(|c| c.action.as_str()).collect();
        assert_eq!(actions, ["set", "set", "remove", "remove"]);
        assert_eq!(changes[0].from, Some(json!(["1", 1])));
        assert!(w
            .apply(&[Edit::Bypass { node: "99".into() }], &defs())
            .is_err());
    }

    #[test]
    fn remove_disconnects_consumers() {
        let mut w = wf(json!({
            "1": {"class_type": "Ckpt", "inputs": {}},
            "6": {"class_type": "Img", "inputs": {}},
            "8": {"class_type": "Use", "inputs": {"model": ["1", 0], "clip": ["1", 1], "image": ["6", 0]}}
        }));
        w.apply(
            &[Edit::Remove {
                nodes: vec!["6".into()],
            }],
            &defs(),
        )
        .unwrap();
        assert!(!w.nodes["8"].inputs.contains_key("image"));
    }
}
