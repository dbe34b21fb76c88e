//! The minimal variant and the increment ladder back to the target.
//!
//! Each increment (resolution, frames, batch, models, lora, quantization, cache, postprocess,
//! steps) has a reduction: a short list of graph edits against the target. Step 0 applies every
//! reduction; step k applies only reductions k+1…n (its recorded edits rebuild it from the
//! target), so the last step is the target itself. A reduction that would break the graph is
//! not done and is reported as not separable. Pure graph logic: no network, no files.

mod apply;
mod context;
mod describe;
mod increment;
mod math;
mod options;
mod passes;
pub mod product;
mod reduce;
pub mod work;

pub use describe::{describe_changes, named_parts};
pub use increment::{Increment, NotSeparable};
pub use options::PlanOptions;

use crate::catalog::{Catalog, Role};
use crate::nodedefs::NodeDefs;
use crate::workflow::validate::validate;
use crate::workflow::{Change, Edit, Workflow};
use apply::{apply_tolerant, apply_tolerant_changes};
use context::Ctx;
use rustc_hash::FxHashSet as HashSet;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One variant of the ladder.
#[derive(Debug, Clone)]
pub struct Step {
    /// 0 for the minimal variant; the last index is the target.
    pub index: usize,
    /// What this step re-adds (`minimal` for step 0).
    pub increment: Increment,
    /// File name under `--out`, e.g. `00-minimal.json`.
    pub file: String,
    /// Canonical hash of the variant.
    pub sha256: String,
    /// The variant itself.
    pub workflow: Workflow,
    /// The edits that derive this variant from the target.
    pub edits: Vec<Edit>,
    /// For step 0: what the minimal variant changes in the target (from = target value).
    /// For later steps: what this step re-adds relative to the previous one (from = value in
    /// the previous step, to = value here; `bypass`/`remove` = node that is back).
    pub changes: Vec<Change>,
}

/// A memory-saving setting kept in every variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// Node id.
    pub node: String,
    /// Its class.
    pub class_type: String,
    /// What is kept.
    pub what: String,
}

/// The ladder from the minimal variant to the target.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Canonical hash of the target (equals the last step's hash).
    pub target_sha256: String,
    /// Step 0 (minimal) … last (the target).
    pub steps: Vec<Step>,
    /// Reductions not done, with the reason.
    pub not_separable: Vec<NotSeparable>,
    /// Memory savers kept as in the target in every variant.
    pub kept: Vec<Kept>,
}

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The target has no node at all.
    #[error("the workflow has no nodes; nothing to plan")]
    Empty,
}

/// The target seen through the catalog, with its second sampling passes (found by reading the
/// context, so they are added once it is built).
fn context<'a>(
    target: &'a Workflow,
    defs: &'a NodeDefs,
    catalog: &'a Catalog,
    options: &'a PlanOptions,
) -> Ctx<'a> {
    let mut ctx = Ctx::new(target, defs, catalog, options);
    ctx.passes = passes::second_passes(&ctx);
    ctx
}

/// Builds the ladder for `target`.
pub fn plan(
    target: &Workflow,
    defs: &NodeDefs,
    catalog: &Catalog,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    if target.nodes.is_empty() {
        return Err(PlanError::Empty);
    }
    let ctx = context(target, defs, catalog, options);
    let baseline = error_keys(target, defs);
    let mut not_separable = Vec::new();
    // Each reduction on its own: it must change something and keep the graph valid.
    let mut reductions = Vec::new();
    for inc in options.ladder() {
        let mut r = reduce::reduce(&ctx, inc);
        not_separable.append(&mut r.notes);
        if r.edits.is_empty() {
            continue;
        }
        let mut variant = target.clone();
        let applied = apply_tolerant(&mut variant, &r.edits, defs);
        let mut pruned = prune(&ctx, &variant);
        if !pruned.is_empty() {
            apply_tolerant(&mut variant, &pruned, defs);
        }
        let mut edits = applied;
        edits.append(&mut pruned);
        if edits.is_empty() {
            continue;
        }
        reductions.push((inc, edits));
    }
    // Build the variants from the target down: variant k applies reductions k+1…n.
    // Each variant also records the changes of its own reduction (on the variant above), which are
    // what the step above it re-adds, and all its changes (for step 0).
    let mut accepted: Vec<(Increment, Vec<Edit>)> = Vec::new();
    let target_sha256 = target.sha256();
    let mut variants: Vec<Variant> = vec![Variant {
        sha256: target_sha256.clone(),
        workflow: target.clone(),
        edits: Vec::new(),
        own: Vec::new(),
        all: Vec::new(),
    }];
    for (inc, edits) in reductions.into_iter().rev() {
        // Variant k = variant k+1 (the target with reductions k+1…n) plus reduction k; its
        // recorded edits, applied to the target in order, rebuild it.
        let above = variants.last().expect("the target is always there");
        let mut variant = above.workflow.clone();
        let (own_applied, own) = apply_tolerant_changes(&mut variant, &edits, defs);
        let sha = variant.sha256();
        if sha == above.sha256 {
            continue;
        }
        let mut applied = above.edits.clone();
        applied.extend(own_applied);
        if let Some(problem) = new_error(&variant, defs, &baseline) {
            let alone = accepted.is_empty();
            not_separable.push(NotSeparable {
                increment: inc,
                reason: if alone {
                    format!("the reduction would make the graph invalid ({problem}); not done")
                } else {
                    format!("together with the later reductions it would make the graph invalid ({problem}); not done")
                },
                nodes: touched_nodes(&edits),
            });
            continue;
        }
        let mut all = above.all.clone();
        all.extend(own.iter().cloned());
        accepted.insert(0, (inc, edits));
        variants.push(Variant {
            sha256: sha,
            workflow: variant,
            edits: applied,
            own,
            all,
        });
    }
    variants.reverse();
    let n = accepted.len();
    let mut steps = Vec::with_capacity(n + 1);
    // Step k re-adds what variant k−1's own reduction changed.
    let mut readds: Vec<Vec<Change>> = variants
        .iter_mut()
        .map(|v| std::mem::take(&mut v.own))
        .collect();
    for (index, v) in variants.into_iter().enumerate() {
        let increment = if index == 0 {
            Increment::Minimal
        } else {
            accepted[index - 1].0
        };
        let changes = if index == 0 {
            v.all
        } else {
            std::mem::take(&mut readds[index - 1])
                .into_iter()
                .map(invert)
                .collect()
        };
        steps.push(Step {
            index,
            increment,
            file: format!("{index:02}-{increment}.json"),
            sha256: v.sha256,
            workflow: v.workflow,
            edits: v.edits,
            changes,
        });
    }
    annotate_second_passes(&ctx, &mut steps);
    // Memory savers that stay in the minimal variant (a second expert's patch goes with it).
    let minimal = &steps[0].workflow;
    let kept = kept(&ctx)
        .into_iter()
        .filter(|k| minimal.nodes.contains_key(&k.node))
        .collect();
    Ok(Plan {
        target_sha256,
        steps,
        not_separable,
        kept,
    })
}

/// Names each second sampling pass where the ladder leaves it out (step 0, `from` = its size in
/// the target) and where it comes back (`to` = its size): a `second_pass` change on its sampler,
/// read "hires pass: KSampler #11 at 1024×1024". The size is `null` when not known statically.
fn annotate_second_passes(ctx: &Ctx, steps: &mut [Step]) {
    let mut notes: Vec<Vec<Change>> = vec![Vec::new(); steps.len()];
    for pass in &ctx.passes {
        if steps[0].workflow.nodes.contains_key(&pass.second) {
            continue;
        }
        let Some(back) = steps
            .iter()
            .position(|s| s.workflow.nodes.contains_key(&pass.second))
        else {
            continue;
        };
        let size = pass.size_text().map(Value::from).unwrap_or(Value::Null);
        let note = |from: Option<Value>, to: Option<Value>| Change {
            node: pass.second.clone(),
            class_type: ctx.w.nodes[&pass.second].class_type.clone(),
            action: SECOND_PASS.into(),
            input: None,
            from,
            to,
        };
        notes[0].push(note(Some(size.clone()), None));
        notes[back].push(note(None, Some(size)));
    }
    for (step, notes) in steps.iter_mut().zip(notes) {
        step.changes.splice(0..0, notes);
    }
}

/// The `action` of the change that names a second sampling pass (a note, not an edit).
pub const SECOND_PASS: &str = "second_pass";

/// One variant while the ladder is built.
struct Variant {
    sha256: String,
    workflow: Workflow,
    edits: Vec<Edit>,
    /// Changes of this variant's own reduction, applied to the variant above it.
    own: Vec<Change>,
    /// Every change from the target to this variant.
    all: Vec<Change>,
}

fn invert(mut c: Change) -> Change {
    if c.action == "set" {
        std::mem::swap(&mut c.from, &mut c.to);
    }
    c
}

fn touched_nodes(edits: &[Edit]) -> Vec<String> {
    let mut out: indexmap::IndexSet<String> = indexmap::IndexSet::new();
    for e in edits {
        for n in e.nodes() {
            out.insert(n.to_string());
        }
    }
    out.into_iter().collect()
}

/// Nodes the target runs that no longer reach an output after the edits: removed.
fn prune(ctx: &Ctx, variant: &Workflow) -> Vec<Edit> {
    let reach = variant.reachable_from_outputs(ctx.defs);
    let gone: Vec<String> = ctx
        .reach
        .iter()
        .filter(|id| variant.nodes.contains_key(*id) && !reach.contains(*id))
        .cloned()
        .collect();
    if gone.is_empty() {
        Vec::new()
    } else {
        vec![Edit::Remove { nodes: gone }]
    }
}

type ErrorKey = (String, Option<String>, Option<String>);

fn error_keys(w: &Workflow, defs: &NodeDefs) -> HashSet<ErrorKey> {
    validate(w, defs)
        .graph_errors()
        .map(|p| (format!("{:?}", p.kind), p.node.clone(), p.input.clone()))
        .collect()
}

/// The first validation problem of `w` that the target does not have (missing files aside).
fn new_error(w: &Workflow, defs: &NodeDefs, baseline: &HashSet<ErrorKey>) -> Option<String> {
    validate(w, defs)
        .graph_errors()
        .find(|p| !baseline.contains(&(format!("{:?}", p.kind), p.node.clone(), p.input.clone())))
        .map(|p| {
            let place = match (&p.node, &p.input) {
                (Some(n), Some(i)) => format!("node {n} input '{i}': "),
                (Some(n), None) => format!("node {n}: "),
                _ => String::new(),
            };
            format!("{place}{}", p.message)
        })
}

/// Memory savers in the target: kept as they are in every variant.
fn kept(ctx: &Ctx) -> Vec<Kept> {
    let mut out = Vec::new();
    for (id, node) in &ctx.w.nodes {
        if !ctx.reach.contains(id) {
            continue;
        }
        let mut what: Vec<String> = Vec::new();
        let mut push = |w: String| what.push(w);
        if ctx.is(id, Role::MemorySaver) {
            push("memory saver (block swap / offload / tiled VAE)".into());
        }
        if ctx.is(id, Role::Attention) {
            push("attention backend patch".into());
        }
        for (name, input) in &node.inputs {
            let Some(v) = input.as_literal() else {
                continue;
            };
            let s = v.as_str().unwrap_or("");
            let kept_setting = match name.as_str() {
                "attention_mode" | "attention_override" => {
                    !matches!(s, "sdpa" | "none" | "default" | "")
                }
                "sage_attention" => !matches!(s, "disabled" | "false" | "") && v != &json!(false),
                "enable_vae_tiling" | "tiled_decode" | "tiled_encode" => v == &json!(true),
                _ => false,
            };
            if kept_setting {
                push(format!("{name} = {}", display_value(v)));
            }
        }
        if let Some(link) = node.inputs.get("block_swap_args").and_then(|i| i.as_link()) {
            push(format!("block swap from node {}", link.node));
        }
        if !what.is_empty() {
            out.push(Kept {
                node: id.clone(),
                class_type: node.class_type.clone(),
                what: what.join("; "),
            });
        }
    }
    out
}

pub(crate) fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Plan {
    /// The plan.json document (the stable contract; see docs/ladder.md).
    pub fn to_json(&self) -> Value {
        json!({
            "target_sha256": self.target_sha256,
            "steps": self.steps.iter().map(|s| json!({
                "index": s.index,
                "increment": s.increment,
                "file": s.file,
                "sha256": s.sha256,
                "changes": s.changes,
            })).collect::<Vec<_>>(),
            "not_separable": self.not_separable,
            "kept": self.kept,
        })
    }
}

/// `--search-steps`: `w` with the `steps` input of every sampler and scheduler (by the
/// catalog's roles) lowered to `cap` where it is a literal above it, and the typed changes that
/// did it (empty: the variant already runs at most `cap` steps, so a run of it is a full-step
/// run). A sampler's literal `start_at_step` / `end_at_step` below its steps are scaled by the
/// same ratio (two experts splitting 20 steps at 10 split 4 at 2); an end at or past the steps
/// ("to the end") stays. A `steps` input fed by a link is left as it is. The graph edit of a
/// reduced-step search run; pure like the rest of the ladder.
pub fn cap_steps(
    w: &Workflow,
    cap: u32,
    catalog: &Catalog,
    defs: &NodeDefs,
) -> Result<(Workflow, Vec<Change>), crate::workflow::EditError> {
    let cap = i64::from(cap.max(1));
    let int = |node: &crate::workflow::Node, input: &str| match node.inputs.get(input) {
        Some(crate::workflow::Input::Literal(Value::Number(n))) => n.as_i64(),
        _ => None,
    };
    let mut edits: Vec<Edit> = Vec::new();
    for (id, node) in &w.nodes {
        let counted = catalog.has(&node.class_type, Role::Sampler, defs)
            || catalog.has(&node.class_type, Role::Scheduler, defs);
        let Some(steps) = int(node, "steps").filter(|&s| counted && s > cap) else {
            continue;
        };
        let set = |input: &str, value: i64| Edit::SetInput {
            node: id.clone(),
            input: input.into(),
            value: Value::from(value),
        };
        edits.push(set("steps", cap));
        for input in ["start_at_step", "end_at_step"] {
            if let Some(v) = int(node, input).filter(|&v| v > 0 && v < steps) {
                edits.push(set(input, (v * cap + steps / 2) / steps));
            }
        }
    }
    let mut out = w.clone();
    let changes = out.apply(&edits, defs)?;
    Ok((out, changes))
}
