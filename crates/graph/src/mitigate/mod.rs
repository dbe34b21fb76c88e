//! Mitigations: single-change controls tried on the target after the verdict. The catalogue is
//! data (`catalogue.json`, compiled in): each control names the stages it targets and its place
//! in the field guides' matrix for each (first / not first / indirect / depends on the official
//! implementation), the one change, the observation it predicts, and either graph edits on the
//! target (made with [`crate::workflow::Edit`]) or a server launch change (flags, environment).
//!
//! [`plan`] says, for one failing stage, which controls apply and in which order; it derives
//! the edited workflow of each graph control. Pure: the driver in comfy-bisect-core runs them.

use crate::catalog::{Catalog, Role};
use crate::nodedefs::{InputKind, NodeDefs};
use crate::workflow::{Change, Edit, Workflow};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The built-in catalogue.
const CATALOGUE: &str = include_str!("catalogue.json");

/// A control's place in the matrix for one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Try it first: it targets this boundary directly.
    First,
    /// Helps here, but not the first thing to try.
    NotFirst,
    /// Acts on this stage only through something else (less memory elsewhere).
    Indirect,
    /// Whether it helps depends on how the official implementation does it.
    Depends,
}

impl Place {
    /// The words the report uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Place::First => "first",
            Place::NotFirst => "not first",
            Place::Indirect => "indirect",
            Place::Depends => "depends on the official implementation",
        }
    }
}

/// Whether a control edits the workflow or relaunches the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Graph edits on the target (the default: most controls are).
    #[default]
    Graph,
    /// A server launch change (needs `--launch-cmd`).
    Server,
}

/// One graph edit of a control, matched against the target's nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphEdit {
    /// Nodes of a class in `from` become `to` (same sockets), then `set` gives the new class's
    /// widgets. Needs `to` on the server with every input of `set`.
    ReplaceClass {
        /// Classes replaced.
        from: Vec<String>,
        /// The class they become.
        to: String,
        /// Widget values of the new class.
        #[serde(default)]
        set: BTreeMap<String, Value>,
    },
    /// Sets `input` to `value` on the nodes of `classes` (or of a class with one of `roles`)
    /// whose definition offers that value.
    SetInput {
        /// Node classes.
        #[serde(default)]
        classes: Vec<String>,
        /// Or node roles (as the node catalog names them).
        #[serde(default)]
        roles: Vec<Role>,
        /// The input.
        input: String,
        /// Its new value.
        value: Value,
        /// Only when the current value is one of these.
        #[serde(default)]
        only_from: Vec<Value>,
        /// Only when the current value is a number above `value`.
        #[serde(default)]
        only_above: bool,
    },
    /// Bypasses the nodes of a class with one of `roles`.
    Bypass {
        /// Node roles.
        roles: Vec<Role>,
    },
}

/// When a control applies beyond its edits matching.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requires {
    /// The target makes video (a frame-count node is present).
    #[serde(default)]
    pub video: bool,
    /// The server runs with dynamic VRAM on.
    #[serde(default)]
    pub dynamic_vram: bool,
    /// The server sends live previews by default (`--preview-method` other than `none`).
    #[serde(default)]
    pub previews: bool,
}

/// One control of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Control {
    /// Short id (`tiled-decode`), used in folder names and `--apply`.
    pub id: String,
    /// Graph or server.
    pub kind: Kind,
    /// The single change, in words.
    pub change: String,
    /// The observation it predicts, stated before it runs.
    pub predicts: String,
    /// The stages it targets and its place in the matrix for each.
    pub place: BTreeMap<String, Place>,
    /// Conditions on the workflow or the server.
    #[serde(default)]
    pub requires: Requires,
    /// Graph edits (graph controls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<GraphEdit>,
    /// Launch arguments added (server controls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for the server (server controls).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct CatalogueFile {
    controls: Vec<Control>,
}

/// Every control, in catalogue order.
pub fn catalogue() -> Vec<Control> {
    serde_json::from_str::<CatalogueFile>(CATALOGUE)
        .expect("the built-in mitigation catalogue is valid JSON of controls")
        .controls
}

/// What the server says about itself that decides whether a server control applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// Dynamic VRAM is on (the fingerprint's memory mode).
    pub dynamic_vram: bool,
    /// The launch arguments (`/system_stats` `argv`).
    pub argv: Vec<String>,
}

impl ServerFacts {
    /// Whether the server sends live previews by default: `--preview-method` given with a
    /// method other than `none` (ComfyUI's default is none, `comfy/cli_args.py`).
    pub fn previews(&self) -> bool {
        let flag = "--preview-method";
        self.argv.iter().enumerate().any(|(i, a)| {
            let value = match a.strip_prefix(flag) {
                Some("") => self.argv.get(i + 1).map(String::as_str),
                Some(rest) => rest.strip_prefix('='),
                None => None,
            };
            value.is_some_and(|v| v != "none")
        })
    }
}

/// Whether and how a control is tried for one failure.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// A graph control: the edits, what they changed and the edited target.
    Graph {
        /// The edits, in order.
        edits: Vec<Edit>,
        /// What they changed.
        changes: Vec<Change>,
        /// The target with the edits applied.
        workflow: Workflow,
    },
    /// A server control: relaunch with these arguments and environment.
    Server,
    /// Not tried, and why (wrong stage, nothing to edit, not offered by the server).
    NotApplicable(String),
}

/// One control considered for a failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The control.
    pub control: Control,
    /// Its place for the failing stage (`None`: it does not target that stage).
    pub place: Option<Place>,
    /// Whether it is tried.
    pub fit: Fit,
}

impl Planned {
    /// True when the control is tried.
    pub fn applies(&self) -> bool {
        !matches!(self.fit, Fit::NotApplicable(_))
    }
}

/// Every control of `controls` considered for a failure at `stage` of `target`: the applicable
/// ones first, ordered by their place for that stage (first, not first, indirect, depends; graph
/// before server within a place, then catalogue order), then the others with the reason.
pub fn plan(
    controls: &[Control],
    target: &Workflow,
    defs: &NodeDefs,
    catalog: &Catalog,
    stage: &str,
    server: &ServerFacts,
) -> Vec<Planned> {
    let mut out: Vec<Planned> = controls
        .iter()
        .map(|c| {
            let place = c.place.get(stage).copied();
            let fit = match place {
                None => Fit::NotApplicable(format!(
                    "targets {}, the failure is at {stage}",
                    c.place.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
                Some(_) => fit(c, target, defs, catalog, server),
            };
            Planned {
                control: c.clone(),
                place,
                fit,
            }
        })
        .collect();
    // A stable sort keeps the catalogue order within one key.
    out.sort_by_key(|p| {
        (
            !p.applies(),
            p.place.unwrap_or(Place::Depends),
            p.control.kind == Kind::Server,
        )
    });
    out
}

/// Whether `c` applies to the target on this server (its stage already matched).
fn fit(
    c: &Control,
    target: &Workflow,
    defs: &NodeDefs,
    catalog: &Catalog,
    server: &ServerFacts,
) -> Fit {
    if c.requires.dynamic_vram && !server.dynamic_vram {
        return Fit::NotApplicable("the server does not run with dynamic VRAM".into());
    }
    if c.requires.previews && !server.previews() {
        return Fit::NotApplicable("the server sends no live previews (--preview-method)".into());
    }
    if c.requires.video
        && !target
            .nodes
            .values()
            .any(|n| catalog.has(&n.class_type, Role::FrameSource, defs))
    {
        return Fit::NotApplicable("the workflow makes no video".into());
    }
    match c.kind {
        Kind::Server => {
            if !c.args.is_empty() && c.args.iter().all(|a| server.argv.contains(a)) {
                return Fit::NotApplicable(format!(
                    "the server already runs with {}",
                    c.args.join(" ")
                ));
            }
            Fit::Server
        }
        Kind::Graph => {
            let edits = graph_edits(c, target, defs, catalog);
            if edits.is_empty() {
                return Fit::NotApplicable("no node of the workflow offers this change".into());
            }
            let mut workflow = target.clone();
            match workflow.apply(&edits, defs) {
                Ok(changes) if !changes.is_empty() => Fit::Graph {
                    edits,
                    changes,
                    workflow,
                },
                Ok(_) => Fit::NotApplicable("the edits change nothing".into()),
                Err(e) => Fit::NotApplicable(format!("the edits do not fit: {e}")),
            }
        }
    }
}

/// The edits of a graph control on `target`, in node order per catalogue edit.
pub fn graph_edits(
    c: &Control,
    target: &Workflow,
    defs: &NodeDefs,
    catalog: &Catalog,
) -> Vec<Edit> {
    let mut edits = Vec::new();
    for e in &c.edits {
        match e {
            GraphEdit::ReplaceClass { from, to, set } => {
                let Some(def) = defs.get(to) else {
                    continue;
                };
                if !set.iter().all(|(k, v)| offers(def.input(k), v)) {
                    continue;
                }
                for (id, n) in &target.nodes {
                    if !from.contains(&n.class_type) {
                        continue;
                    }
                    edits.push(Edit::SetClass {
                        node: id.clone(),
                        class_type: to.clone(),
                        set: set.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    });
                }
            }
            GraphEdit::SetInput {
                classes,
                roles,
                input,
                value,
                only_from,
                only_above,
            } => {
                for (id, n) in &target.nodes {
                    let chosen = classes.contains(&n.class_type)
                        || roles.iter().any(|r| catalog.has(&n.class_type, *r, defs));
                    if !chosen {
                        continue;
                    }
                    let Some(def) = defs.get(&n.class_type) else {
                        continue;
                    };
                    if !offers(def.input(input), value) {
                        continue;
                    }
                    let current = n.inputs.get(input).map(|i| i.as_literal().cloned());
                    // A value that arrives through a link is left alone: the edit would cut it.
                    let current = match current {
                        Some(None) => continue,
                        Some(Some(v)) => Some(v),
                        None => None,
                    };
                    if !only_from.is_empty()
                        && !current.as_ref().is_some_and(|v| only_from.contains(v))
                    {
                        continue;
                    }
                    if *only_above {
                        let (Some(now), Some(new)) =
                            (current.as_ref().and_then(Value::as_f64), value.as_f64())
                        else {
                            continue;
                        };
                        if now <= new {
                            continue;
                        }
                    }
                    if current.as_ref() == Some(value) {
                        continue;
                    }
                    edits.push(Edit::SetInput {
                        node: id.clone(),
                        input: input.clone(),
                        value: value.clone(),
                    });
                }
            }
            GraphEdit::Bypass { roles } => {
                for (id, n) in &target.nodes {
                    if roles.iter().any(|r| catalog.has(&n.class_type, *r, defs)) {
                        edits.push(Edit::Bypass { node: id.clone() });
                    }
                }
            }
        }
    }
    edits
}

/// Whether an input definition takes `value` (a combo lists it; a number is within min/max;
/// a boolean is a boolean).
fn offers(input: Option<&crate::nodedefs::InputDef>, value: &Value) -> bool {
    let Some(input) = input else {
        return false;
    };
    match &input.kind {
        InputKind::Combo { options, .. } => options.contains(value),
        InputKind::Type(t) => match t.as_str() {
            "INT" | "FLOAT" => {
                let Some(v) = value.as_f64() else {
                    return false;
                };
                let above = input.min().and_then(|m| m.as_f64()).is_none_or(|m| v >= m);
                let below = input.max().and_then(|m| m.as_f64()).is_none_or(|m| v <= m);
                above && below
            }
            "BOOLEAN" => value.is_boolean(),
            "STRING" => value.is_string(),
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests;
