//! The reductions: each turns the target into a smaller variant along one dimension, as a short
//! list of graph edits computed against the target.

use super::context::{literal_f64, literal_int, Ctx};
use super::{Increment, NotSeparable};
use crate::catalog::Role;
use crate::nodedefs::{types_compatible, InputKind, Section};
use crate::workflow::{Edit, Input, Link};
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// One reduction: its edits against the target, and what it could not do.
#[derive(Debug, Clone)]
pub(crate) struct Reduction {
    pub increment: Increment,
    pub edits: Vec<Edit>,
    pub notes: Vec<NotSeparable>,
}

impl Reduction {
    fn new(increment: Increment) -> Reduction {
        Reduction {
            increment,
            edits: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn note(&mut self, reason: String, nodes: Vec<String>) {
        self.notes.push(NotSeparable {
            increment: self.increment,
            reason,
            nodes,
        });
    }
}

/// Computes the reduction for one increment.
pub(crate) fn reduce(ctx: &Ctx, inc: Increment) -> Reduction {
    let mut r = Reduction::new(inc);
    match inc {
        Increment::Minimal => {}
        Increment::Resolution => resolution(ctx, &mut r),
        Increment::Frames => frames(ctx, &mut r),
        Increment::Batch => batch(ctx, &mut r),
        Increment::Models => models(ctx, &mut r),
        Increment::Lora => lora(ctx, &mut r),
        Increment::Quantization => quantization(ctx, &mut r),
        Increment::Cache => cache(ctx, &mut r),
        Increment::Postprocess => postprocess(ctx, &mut r),
        Increment::Steps => steps(ctx, &mut r),
    }
    r
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: i64, b: i64) -> i64 {
    if a == 0 || b == 0 {
        a.max(b)
    } else {
        a / gcd(a, b) * b
    }
}

/// (min, max, step) of an integer input, with sane defaults.
fn int_limits(ctx: &Ctx, id: &str, input: &str) -> (i64, i64, i64) {
    let def = ctx.input_def(id, input);
    let min = def
        .as_ref()
        .and_then(|d| d.min())
        .and_then(|n| n.as_i64().or_else(|| n.as_f64().map(|f| f.ceil() as i64)))
        .unwrap_or(0);
    let max = def
        .as_ref()
        .and_then(|d| d.max())
        .and_then(|n| n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)))
        .unwrap_or(i64::MAX);
    let step = def
        .as_ref()
        .and_then(|d| d.step())
        .map(|s| s.round() as i64)
        .filter(|s| *s >= 1)
        .unwrap_or(1);
    (min, max, step)
}

fn is_int_input(ctx: &Ctx, id: &str, input: &str) -> bool {
    match ctx.input_type(id, input) {
        Some(t) => t.split(',').any(|p| p.trim() == "INT"),
        None => ctx
            .w
            .nodes
            .get(id)
            .and_then(|n| n.inputs.get(input))
            .and_then(Input::as_literal)
            .is_some_and(|v| v.is_i64() || v.is_u64()),
    }
}

// ---------------------------------------------------------------------------------------------
// resolution

const WIDTH_NAMES: &[&str] = &["width", "empty_latent_width", "target_width"];

fn height_name(width: &str) -> String {
    width.replace("width", "height")
}

fn is_width(name: &str) -> bool {
    WIDTH_NAMES.contains(&name) || name.ends_with(".width")
}

/// A size preset combo (`"512 x 768"`) that overrides the width/height widgets, and the
/// option that hands control back to them.
fn size_preset(ctx: &Ctx, id: &str) -> Option<(i64, i64, String)> {
    static PRESET_RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*(\d+)\s*[x×]\s*(\d+)").expect("static regex"));
    let re = &*PRESET_RE;
    let value = ctx
        .w
        .nodes
        .get(id)?
        .inputs
        .get("resolution")?
        .as_literal()?
        .as_str()?;
    let caps = re.captures(value)?;
    let custom = ctx
        .options(id, "resolution")
        .into_iter()
        .filter_map(|o| o.as_str().map(str::to_string))
        .find(|o| o.contains("custom"))?;
    Some((caps[1].parse().ok()?, caps[2].parse().ok()?, custom))
}

/// Smallest grid value for a size input: a multiple of 16 and of the node's step, at or above
/// the declared minimum.
fn size_floor(min: i64, step: i64) -> i64 {
    let grid = lcm(16, step);
    let lower = min.max(grid);
    (lower + grid - 1) / grid * grid
}

fn snap_size(x: f64, min: i64, max: i64, step: i64) -> i64 {
    let grid = lcm(16, step);
    let v = ((x / grid as f64).round() as i64) * grid;
    v.max(size_floor(min, step)).min(max)
}

fn resolution(ctx: &Ctx, r: &mut Reduction) {
    // Every width/height pair the target uses.
    struct Pair {
        node: String,
        names: [String; 2],
        known: [Option<i64>; 2],
        primary: bool,
        preset: Option<String>,
    }
    let mut pairs: Vec<Pair> = Vec::new();
    for (id, node) in &ctx.w.nodes {
        // A second sampling pass keeps its size: it comes back whole with `postprocess`.
        if !ctx.reach.contains(id) || ctx.in_second_pass(id) {
            continue;
        }
        let preset = size_preset(ctx, id);
        for name in node.inputs.keys().filter(|n| is_width(n)) {
            let h = height_name(name);
            if !node.inputs.contains_key(&h)
                || !is_int_input(ctx, id, name)
                || !is_int_input(ctx, id, &h)
            {
                continue;
            }
            let (known, preset_option) = match (&preset, name.starts_with("empty_latent")) {
                (Some((pw, ph, custom)), true) => ([Some(*pw), Some(*ph)], Some(custom.clone())),
                _ => ([ctx.int_value(id, name), ctx.int_value(id, &h)], None),
            };
            pairs.push(Pair {
                node: id.clone(),
                names: [name.clone(), h],
                known,
                primary: ctx.is(id, Role::SizeSource),
                preset: preset_option,
            });
        }
    }
    let m = ctx.opts.min_resolution as i64;
    // One factor for the whole graph: the main latent's short side lands at m.
    let known_pair = |p: &Pair| matches!(p.known, [Some(w), Some(h)] if w > 0 && h > 0);
    let primary_only = pairs.iter().any(|p| p.primary && known_pair(p));
    // The reference: the known pair with the smallest short side. Its short side lands at m;
    // sizes that are not known statically take its reduced size (so the aspect follows it).
    let reference = pairs
        .iter()
        .filter(|p| !primary_only || p.primary)
        .filter_map(|p| match p.known {
            [Some(w), Some(h)] if w > 0 && h > 0 => Some((w, h)),
            _ => None,
        })
        .min_by_key(|(w, h)| *w.min(h));
    let factor = reference.map(|(w, h)| m as f64 / w.min(h) as f64);
    let mut requests: Vec<(String, String, i64)> = Vec::new();
    for p in &pairs {
        let mut changed = false;
        for k in 0..2 {
            let name = &p.names[k];
            let (min, max, step) = int_limits(ctx, &p.node, name);
            let new = match p.known[k] {
                Some(0) => continue,
                Some(t) => {
                    let want = if m == 0 {
                        size_floor(min.max(1), step).min(max)
                    } else {
                        match factor {
                            Some(f) => snap_size(t as f64 * f, min, max, step),
                            None => continue,
                        }
                    };
                    if want >= t {
                        continue;
                    }
                    want
                }
                None => {
                    // The size comes from something not known statically (an input image):
                    // every such consumer gets the reference's reduced size (a square of the
                    // minimum when nothing is known).
                    if m == 0 {
                        size_floor(min.max(1), step).min(max)
                    } else {
                        let side = match (reference, factor) {
                            (Some((w, h)), Some(f)) => {
                                (if k == 0 { w } else { h }) as f64 * f.min(1.0)
                            }
                            _ => m as f64,
                        };
                        snap_size(side, min, max, step)
                    }
                }
            };
            changed = true;
            requests.push((p.node.clone(), name.clone(), new));
        }
        if changed {
            if let Some(custom) = &p.preset {
                r.edits.push(Edit::SetInput {
                    node: p.node.clone(),
                    input: "resolution".into(),
                    value: Value::String(custom.clone()),
                });
                // The preset hid the widgets; both must carry the reduced size now.
                for k in 0..2 {
                    if !requests.iter().any(|q| q.0 == p.node && q.1 == p.names[k]) {
                        let (min, max, step) = int_limits(ctx, &p.node, &p.names[k]);
                        let t = p.known[k].unwrap_or(m);
                        requests.push((
                            p.node.clone(),
                            p.names[k].clone(),
                            snap_size(t as f64 * factor.unwrap_or(1.0), min, max, step),
                        ));
                    }
                }
            }
        }
    }
    r.edits.extend(ctx.value_edits(&requests));
}

// ---------------------------------------------------------------------------------------------
// frames

const FRAME_NAMES: &[&str] = &["length", "num_frames", "video_frames"];
const AUDIO_FRAME_NAMES: &[&str] = &["frames_number"];

/// The smallest count ≥ `wanted` on the grid `min + k·step`.
pub(crate) fn frame_grid(wanted: i64, min: i64, step: i64) -> i64 {
    let base = min.max(1);
    if wanted <= base {
        return base;
    }
    let k = (wanted - base + step - 1) / step;
    base + k * step
}

fn frames(ctx: &Ctx, r: &mut Reduction) {
    let wanted = ctx.opts.min_frames.max(1) as i64;
    let mut requests: Vec<(String, String, i64)> = Vec::new();
    let mut primary: Option<(Option<i64>, i64)> = None;
    for id in ctx.with_role(Role::FrameSource) {
        let node = &ctx.w.nodes[id];
        for name in FRAME_NAMES {
            if !node.inputs.contains_key(*name) || !is_int_input(ctx, id, name) {
                continue;
            }
            let (min, max, step) = int_limits(ctx, id, name);
            let new = frame_grid(wanted, min, step).min(max);
            let target = ctx.int_value(id, name);
            if primary.is_none() {
                primary = Some((target, new));
            }
            if target.is_some_and(|t| new >= t) {
                continue;
            }
            requests.push((id.to_string(), name.to_string(), new));
        }
    }
    // Dependants (audio latent length) follow the video's new frame count.
    if let Some((video_target, video_new)) = primary {
        for id in ctx.with_role(Role::AudioLength) {
            for name in AUDIO_FRAME_NAMES {
                if !ctx.w.nodes[id].inputs.contains_key(*name) {
                    continue;
                }
                let (min, max, _) = int_limits(ctx, id, name);
                let target = ctx.int_value(id, name);
                let new = video_new.max(min).min(max);
                let follows = target.is_none() || target == video_target;
                if follows && target.is_none_or(|t| new < t) {
                    requests.push((id.to_string(), name.to_string(), new));
                }
            }
        }
    }
    r.edits.extend(ctx.value_edits(&requests));
}

// ---------------------------------------------------------------------------------------------
// batch

fn batch(ctx: &Ctx, r: &mut Reduction) {
    let mut requests = Vec::new();
    for (id, node) in &ctx.w.nodes {
        if !ctx.reach.contains(id) {
            continue;
        }
        let repeat = node.class_type.contains("Repeat") && node.class_type.contains("Batch");
        for name in node.inputs.keys() {
            let is_batch = name == "batch_size" || (repeat && name == "amount");
            if !is_batch || !is_int_input(ctx, id, name) {
                continue;
            }
            let (min, _, _) = int_limits(ctx, id, name);
            let new = min.max(1);
            if ctx.int_value(id, name).is_none_or(|t| t > new) {
                requests.push((id.clone(), name.clone(), new));
            }
        }
    }
    r.edits.extend(ctx.value_edits(&requests));
}

// ---------------------------------------------------------------------------------------------
// steps

fn steps(ctx: &Ctx, r: &mut Reduction) {
    let Some(cap) = ctx.opts.min_steps else {
        return;
    };
    let mut requests = Vec::new();
    for (id, node) in &ctx.w.nodes {
        if !ctx.reach.contains(id) || !(ctx.is(id, Role::Sampler) || ctx.is(id, Role::Scheduler)) {
            continue;
        }
        if !node.inputs.contains_key("steps") || !is_int_input(ctx, id, "steps") {
            continue;
        }
        let (min, _, _) = int_limits(ctx, id, "steps");
        let new = (cap as i64).max(min);
        if ctx.int_value(id, "steps").is_some_and(|t| t > new) {
            requests.push((id.clone(), "steps".to_string(), new));
        }
    }
    r.edits.extend(ctx.value_edits(&requests));
}

// ---------------------------------------------------------------------------------------------
// models

/// Diffusion loaders upstream of `id` through its inputs.
fn loaders_upstream(ctx: &Ctx, id: &str, inputs: &[&str]) -> Vec<String> {
    let stop = |n: &str| ctx.is(n, Role::DiffusionLoader) || ctx.is(n, Role::Sampler);
    ctx.upstream_until(id, inputs, stop)
        .into_iter()
        .filter(|n| ctx.is(n, Role::DiffusionLoader))
        .map(str::to_string)
        .collect()
}

const MODEL_INPUTS: &[&str] = &["model", "guider"];

fn copy_input(from: &str, to: &str, input: &str, ctx: &Ctx, edits: &mut Vec<Edit>) {
    match ctx.w.nodes[from].inputs.get(input) {
        Some(Input::Link(l)) => edits.push(Edit::Relink {
            node: to.into(),
            input: input.into(),
            source: l.node.clone(),
            slot: l.slot,
        }),
        Some(Input::Literal(v)) => edits.push(Edit::SetInput {
            node: to.into(),
            input: input.into(),
            value: v.clone(),
        }),
        None => {}
    }
}

fn models(ctx: &Ctx, r: &mut Reduction) {
    let samplers = ctx.with_role(Role::Sampler);
    let mut handled: Vec<String> = Vec::new();
    let mut pair_edits: Vec<Edit> = Vec::new();
    let mut dropped_loaders: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for &b in &samplers {
        let Some(Link { node: a, slot: 0 }) = ctx.w.nodes[b]
            .inputs
            .get("latent_image")
            .and_then(Input::as_link)
            .cloned()
        else {
            continue;
        };
        if !ctx.is(&a, Role::Sampler) || handled.contains(&a) || handled.contains(&b.to_string()) {
            continue;
        }
        let la = loaders_upstream(ctx, &a, MODEL_INPUTS);
        let lb = loaders_upstream(ctx, b, MODEL_INPUTS);
        if la.is_empty() || lb.is_empty() || la.iter().any(|l| lb.contains(l)) {
            continue; // same model: a multi-pass, not a second model
        }
        let na = &ctx.w.nodes[&a];
        let nb = &ctx.w.nodes[b];
        let mut edits = Vec::new();
        let same_prompt = na.inputs.get("positive").is_some()
            && na.inputs.get("positive") == nb.inputs.get("positive");
        let advanced = nb.inputs.contains_key("return_with_leftover_noise");
        let (keep, drop, kept_loaders, gone_loaders);
        if advanced && !same_prompt {
            // Base + refiner: keep the base over all steps; the refiner's consumers read it.
            keep = a.clone();
            drop = b.to_string();
            edits.push(Edit::SetInput {
                node: a.clone(),
                input: "end_at_step".into(),
                value: Value::from(10000),
            });
            edits.push(Edit::SetInput {
                node: a.clone(),
                input: "return_with_leftover_noise".into(),
                value: Value::from("disable"),
            });
            for (c, input, slot) in ctx.consumers_of(b) {
                edits.push(Edit::Relink {
                    node: c.into(),
                    input: input.into(),
                    source: a.clone(),
                    slot,
                });
            }
            kept_loaders = la.clone();
            gone_loaders = lb.clone();
        } else {
            // Experts (same prompt, or split sigmas): keep the second (low-noise) expert over
            // the whole schedule, starting from the first one's noise and latent.
            if !advanced {
                let split = nb
                    .inputs
                    .get("sigmas")
                    .and_then(Input::as_link)
                    .filter(|l| ctx.is(&l.node, Role::SigmaSplit))
                    .cloned();
                let Some(split) = split else {
                    continue;
                };
                let Some(Input::Link(full)) = ctx.w.nodes[&split.node].inputs.get("sigmas") else {
                    continue;
                };
                edits.push(Edit::Relink {
                    node: b.into(),
                    input: "sigmas".into(),
                    source: full.node.clone(),
                    slot: full.slot,
                });
            }
            for input in ["add_noise", "noise_seed", "noise", "start_at_step"] {
                copy_input(&a, b, input, ctx, &mut edits);
            }
            if advanced {
                edits.push(Edit::SetInput {
                    node: b.into(),
                    input: "end_at_step".into(),
                    value: Value::from(10000),
                });
                edits.push(Edit::SetInput {
                    node: b.into(),
                    input: "return_with_leftover_noise".into(),
                    value: Value::from("disable"),
                });
            }
            copy_input(&a, b, "latent_image", ctx, &mut edits);
            keep = b.to_string();
            drop = a.clone();
            kept_loaders = lb.clone();
            gone_loaders = la.clone();
        }
        handled.push(keep);
        handled.push(drop);
        pair_edits.extend(edits);
        dropped_loaders.push((kept_loaders, gone_loaders));
    }
    // Consumers of a dropped loader that still run (a decode using the refiner's VAE) read the
    // kept loader's output of the same slot and type instead.
    if !pair_edits.is_empty() {
        let mut scratch = ctx.w.clone();
        super::apply::apply_tolerant(&mut scratch, &pair_edits, ctx.defs);
        let reach = scratch.reachable_from_outputs(ctx.defs);
        for (kept, gone) in &dropped_loaders {
            let Some(keep_loader) = kept.first() else {
                continue;
            };
            for g in gone {
                for (c, input, slot) in ctx.consumers_of(g) {
                    let still_used = reach.contains(c)
                        && scratch.nodes.get(c).is_some_and(|n| {
                            n.inputs.get(input).and_then(Input::as_link)
                                == Some(&Link {
                                    node: g.clone(),
                                    slot,
                                })
                        });
                    if !still_used {
                        continue;
                    }
                    let out_type = |id: &str| {
                        ctx.defs
                            .get(&ctx.w.nodes[id].class_type)
                            .and_then(|d| d.outputs.get(slot))
                            .map(|o| o.type_name.clone())
                    };
                    match (out_type(g), out_type(keep_loader)) {
                        (Some(t1), Some(t2)) if t1 == t2 => pair_edits.push(Edit::Relink {
                            node: c.into(),
                            input: input.into(),
                            source: keep_loader.clone(),
                            slot,
                        }),
                        _ => r.note(
                            format!("node {c} input '{input}' still reads output {slot} of the removed model loader {g}, and the kept loader {keep_loader} has no output of that type; the second model is kept"),
                            vec![g.clone(), c.to_string()],
                        ),
                    }
                }
            }
        }
        if r.notes.is_empty() {
            r.edits.extend(pair_edits);
        }
    }
    if r.edits.is_empty() {
        // More than one distinct diffusion model sampled, in a pattern not recognised.
        let mut files: Vec<(String, String)> = Vec::new();
        for &s in &samplers {
            for l in loaders_upstream(ctx, s, MODEL_INPUTS) {
                let file = ctx.w.nodes[&l]
                    .inputs
                    .values()
                    .filter_map(Input::as_literal)
                    .filter_map(Value::as_str)
                    .find(|v| v.contains('.'))
                    .unwrap_or("")
                    .to_string();
                if !files
                    .iter()
                    .any(|(id, f)| *id == l || (!f.is_empty() && *f == file))
                {
                    files.push((l, file));
                }
            }
        }
        if files.len() > 1 && r.notes.is_empty() {
            r.note(
                format!(
                    "{} diffusion models are sampled in a pattern that is not a known expert pair or base+refiner; all are kept",
                    files.len()
                ),
                files.into_iter().map(|(id, _)| id).collect(),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// lora

fn lora(ctx: &Ctx, r: &mut Reduction) {
    for id in ctx.with_role(Role::Lora) {
        let node = &ctx.w.nodes[id];
        // Row objects (rgthree Power Lora Loader): turn every active row off.
        let rows: Vec<(&String, &Value)> = node
            .inputs
            .iter()
            .filter_map(|(k, i)| i.as_literal().map(|v| (k, v)))
            .filter(|(_, v)| v.get("on").is_some_and(Value::is_boolean))
            .collect();
        if !rows.is_empty() {
            for (k, v) in rows {
                if v.get("on") == Some(&Value::Bool(true)) {
                    let mut off = v.clone();
                    off["on"] = Value::Bool(false);
                    r.edits.push(Edit::SetInput {
                        node: id.into(),
                        input: k.clone(),
                        value: off,
                    });
                }
            }
            continue;
        }
        r.edits.push(Edit::Bypass { node: id.into() });
    }
    for id in ctx.with_role(Role::LoraStack) {
        for (c, input, _) in ctx.consumers_of(id) {
            if ctx.is(c, Role::LoraStack) {
                continue;
            }
            disconnect_or_note(ctx, r, c, input, id);
        }
    }
    // LoRAs inside all-in-one loaders (`lora_name` combo with a "None" option).
    for (id, node) in &ctx.w.nodes {
        if !ctx.reach.contains(id) || !ctx.is(id, Role::DiffusionLoader) {
            continue;
        }
        if let Some(Input::Literal(Value::String(name))) = node.inputs.get("lora_name") {
            let none = Value::from("None");
            if name != "None" && ctx.options(id, "lora_name").contains(&none) {
                r.edits.push(Edit::SetInput {
                    node: id.clone(),
                    input: "lora_name".into(),
                    value: none,
                });
            }
        }
    }
}

fn disconnect_or_note(ctx: &Ctx, r: &mut Reduction, consumer: &str, input: &str, source: &str) {
    let optional = ctx
        .input_def(consumer, input)
        .is_none_or(|d| d.section != Section::Required);
    if optional {
        r.edits.push(Edit::Disconnect {
            node: consumer.into(),
            input: input.into(),
        });
    } else {
        r.note(
            format!(
                "node {source} ({}) feeds the required input '{input}' of node {consumer}; it cannot be disconnected",
                ctx.w.nodes[source].class_type
            ),
            vec![source.to_string(), consumer.to_string()],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// quantization

/// Whether a model file name says it is quantized (fp8, GGUF Q4_K_M, int8, nf4…).
pub(crate) fn quantized_file_name(name: &str) -> bool {
    static QUANTIZED_RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(fp8|e4m3|e5m2|fp4|nvfp4|mxfp4|int8|int4|\bq[2-8](_|k|\b)|_q[2-8]_|gguf|bnb|nf4|awq|svdq|_mixed|scaled)").expect("static regex")
    });
    QUANTIZED_RE.is_match(name)
}

fn quantization(ctx: &Ctx, r: &mut Reduction) {
    let mut file_level: Vec<String> = Vec::new();
    let mut files: Vec<String> = Vec::new();
    for (id, node) in &ctx.w.nodes {
        let loader = ctx.is(id, Role::DiffusionLoader) || ctx.is(id, Role::TextEncoderLoader);
        if !ctx.reach.contains(id) || !loader {
            continue;
        }
        let lit = |k: &str| {
            node.inputs
                .get(k)
                .and_then(Input::as_literal)
                .and_then(Value::as_str)
        };
        if let Some(dtype) = lit("weight_dtype") {
            if dtype.starts_with("fp8") && ctx.is(id, Role::DiffusionLoader) {
                let default = ctx
                    .input_def(id, "weight_dtype")
                    .and_then(|d| d.default_value().cloned())
                    .unwrap_or_else(|| Value::from("default"));
                r.edits.push(Edit::SetInput {
                    node: id.clone(),
                    input: "weight_dtype".into(),
                    value: default,
                });
            }
        }
        if let Some(q) = lit("quantization") {
            let off = Value::from("disabled");
            if q != "disabled" && ctx.options(id, "quantization").contains(&off) {
                r.edits.push(Edit::SetInput {
                    node: id.clone(),
                    input: "quantization".into(),
                    value: off,
                });
            }
        }
        let gguf = node.class_type.to_ascii_lowercase().contains("gguf");
        let quantized: Vec<&str> = node
            .inputs
            .iter()
            .filter(|(k, _)| {
                k.contains("name") || k.as_str() == "model" || k.as_str() == "text_encoder"
            })
            .filter_map(|(_, i)| i.as_literal().and_then(Value::as_str))
            .filter(|f| quantized_file_name(f) || (gguf && f.ends_with(".gguf")))
            .collect();
        if !quantized.is_empty() {
            file_level.push(id.clone());
            files.extend(quantized.iter().map(|s| s.to_string()));
        }
    }
    if !file_level.is_empty() {
        r.note(
            format!(
                "quantized by file ({}): the server has no unquantized twin to switch to, so file-level quantization stays in every variant",
                files.join(", ")
            ),
            file_level,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// cache

/// Whether bypassing `id` hands its first output a same-typed input (a pass-through patch).
fn passes_through(ctx: &Ctx, id: &str) -> bool {
    let Some(def) = ctx.defs.get(&ctx.w.nodes[id].class_type) else {
        return false;
    };
    let Some(out) = def.outputs.first() else {
        return false;
    };
    def.visible_inputs().any(|i| {
        !matches!(i.kind, InputKind::Combo { .. })
            && !matches!(i.type_name(), "INT" | "FLOAT" | "STRING" | "BOOLEAN")
            && types_compatible(i.type_name(), &out.type_name)
            && ctx.w.nodes[id]
                .inputs
                .get(&i.name)
                .is_some_and(|v| v.as_link().is_some())
    })
}

fn cache(ctx: &Ctx, r: &mut Reduction) {
    for (id, _) in &ctx.w.nodes {
        let is_cache = ctx.is(id, Role::StepCache) || ctx.is(id, Role::Compile);
        let kv = ctx.is(id, Role::KvCache);
        if !ctx.reach.contains(id) || !(is_cache || kv) {
            continue;
        }
        if kv && ctx.options(id, "device").contains(&Value::from("off")) {
            r.edits.push(Edit::SetInput {
                node: id.clone(),
                input: "device".into(),
                value: Value::from("off"),
            });
            continue;
        }
        if passes_through(ctx, id) {
            r.edits.push(Edit::Bypass { node: id.clone() });
        } else {
            for (c, input, _) in ctx.consumers_of(id) {
                disconnect_or_note(ctx, r, c, input, id);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// postprocess

fn postprocess(ctx: &Ctx, r: &mut Reduction) {
    let after_sampling = ctx.downstream_of_role(Role::Sampler);
    // Second sampling passes first: their consumers read the first pass's result instead
    // (the root first pass when passes are chained), and the pass with its route is pruned.
    let root = |s: &str| {
        let mut s = s.to_string();
        for _ in 0..=ctx.passes.len() {
            match ctx.passes.iter().find(|p| p.second == s) {
                Some(p) => s = p.first.clone(),
                None => break,
            }
        }
        s
    };
    let pass_nodes = |n: &str| ctx.in_second_pass(n);
    for pass in &ctx.passes {
        let first = root(&pass.first);
        let first_outputs = ctx
            .defs
            .get(&ctx.w.nodes[&first].class_type)
            .map(|d| d.outputs.len())
            .unwrap_or(1)
            .max(1);
        for (c, input, slot) in ctx.consumers_of(&pass.second) {
            if pass_nodes(c) {
                continue; // part of a later pass: pruned with it
            }
            r.edits.push(Edit::Relink {
                node: c.into(),
                input: input.into(),
                source: first.clone(),
                slot: slot.min(first_outputs - 1),
            });
        }
    }
    for id in ctx.with_role(Role::PostProcess) {
        if !after_sampling.contains(id) {
            continue; // before sampling it defines the input, it is not post-processing
        }
        // On a second pass's route it goes with the pass, unless something else shows it.
        if pass_nodes(id) && ctx.consumers_of(id).iter().all(|(c, _, _)| pass_nodes(c)) {
            continue;
        }
        r.edits.push(Edit::Bypass { node: id.into() });
        if ctx.is(id, Role::FrameInterpolation) {
            restore_fps(ctx, r, id);
        }
        // Previews of side outputs (a detailer's mask or crops) that bypass cannot feed go too.
        let previews: Vec<String> = ctx
            .consumers_of(id)
            .into_iter()
            .filter(|(c, _, slot)| !bypass_feeds(ctx, id, *slot) && ctx.is(c, Role::Output))
            .map(|(c, _, _)| c.to_string())
            .collect();
        if !previews.is_empty() {
            r.edits.push(Edit::Remove { nodes: previews });
        }
    }
    // A latent upscale that feeds no second pass is post-processing of the latent.
    for u in ctx.with_role(Role::LatentUpscale) {
        if pass_nodes(u) || !after_sampling.contains(u) {
            continue;
        }
        r.edits.push(Edit::Bypass { node: u.into() });
    }
}

/// Whether bypassing `id` hands output `slot` a linked input of the same type.
fn bypass_feeds(ctx: &Ctx, id: &str, slot: usize) -> bool {
    let node = &ctx.w.nodes[id];
    let Some(def) = ctx.defs.get(&node.class_type) else {
        return true;
    };
    let Some(out) = def.outputs.get(slot) else {
        return false;
    };
    def.visible_inputs().any(|i| {
        i.type_name() == out.type_name
            && node
                .inputs
                .get(&i.name)
                .is_some_and(|v| v.as_link().is_some())
    })
}

/// Frame interpolation multiplied the frame rate downstream; divide it back.
fn restore_fps(ctx: &Ctx, r: &mut Reduction, id: &str) {
    let multiplier = ctx.w.nodes[id]
        .inputs
        .get("multiplier")
        .and_then(Input::as_literal)
        .and_then(literal_f64)
        .unwrap_or(2.0);
    if multiplier <= 1.0 {
        return;
    }
    for d in ctx.downstream(id) {
        for name in ["frame_rate", "fps"] {
            let Some(Input::Literal(v)) = ctx.w.nodes[d].inputs.get(name) else {
                continue;
            };
            let Some(fps) = literal_f64(v) else {
                continue;
            };
            let new = fps / multiplier;
            let integer = v.is_i64() || v.is_u64() || !is_float_input(ctx, d, name);
            let value = if integer && literal_int(v).is_some() {
                Value::from((new.round() as i64).max(1))
            } else {
                serde_json::Number::from_f64(new)
                    .map(Value::Number)
                    .unwrap_or_else(|| v.clone())
            };
            r.edits.push(Edit::SetInput {
                node: d.into(),
                input: name.into(),
                value,
            });
        }
    }
}

fn is_float_input(ctx: &Ctx, id: &str, input: &str) -> bool {
    ctx.input_type(id, input)
        .is_some_and(|t| t.split(',').any(|p| p.trim() == "FLOAT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_grids() {
        assert_eq!(frame_grid(2, 1, 4), 5);
        assert_eq!(frame_grid(1, 1, 4), 1);
        assert_eq!(frame_grid(2, 9, 8), 9);
        assert_eq!(frame_grid(10, 9, 8), 17);
        assert_eq!(frame_grid(8, 7, 6), 13);
        assert_eq!(frame_grid(2, 5, 17), 5);
        assert_eq!(frame_grid(6, 5, 17), 22);
        assert_eq!(frame_grid(2, 1, 1), 2);
    }

    #[test]
    fn size_snapping() {
        assert_eq!(snap_size(256.0, 16, 16384, 8), 256);
        assert_eq!(snap_size(455.1, 16, 16384, 16), 448);
        assert_eq!(snap_size(10.0, 64, 16384, 32), 64);
        assert_eq!(snap_size(300.0, 16, 16384, 32), 288);
        assert_eq!(size_floor(16, 16), 16);
        assert_eq!(size_floor(64, 8), 64);
        assert_eq!(size_floor(1, 1), 16);
    }

    #[test]
    fn quantized_names() {
        for q in [
            "flux1-dev-Q8_0.gguf",
            "wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors",
            "umt5-xxl-encoder-Q5_K_M.gguf",
            "qwen_image_int8_convrot.safetensors",
        ] {
            assert!(quantized_file_name(q), "{q}");
        }
        for q in ["flux1-dev.safetensors", "wan2.1_t2v_14B_bf16.safetensors"] {
            assert!(!quantized_file_name(q), "{q}");
        }
    }
}
