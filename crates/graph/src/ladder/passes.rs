//! Second sampling passes ("hires fix", LTX-2 stage 2, img2img refinement of a first pass): a
//! sampler whose latent is another sampler's result, carried there through a latent upscale or
//! through decode → image operations → encode. They are post-processing: the minimal variant
//! runs the first pass only, and the `postprocess` increment brings the second pass back at
//! its target size (its size is never part of the `resolution` increment).

use super::context::{literal_f64, Ctx, SecondPass};
use crate::catalog::Role;
use crate::workflow::Input;
use regex::Regex;
use std::sync::LazyLock;

type IndexSet<T> = indexmap::IndexSet<T, rustc_hash::FxBuildHasher>;

/// Inputs of types that carry the picture being refined.
const CARRIERS: [&str; 2] = ["LATENT", "IMAGE"];

/// Whether the link into `node.input` carries a latent or an image (unknown types count).
fn carries(ctx: &Ctx, node: &str, input: &str) -> bool {
    let declared = ctx.input_type(node, input);
    let source = ctx
        .w
        .nodes
        .get(node)
        .and_then(|n| n.inputs.get(input))
        .and_then(Input::as_link)
        .and_then(|l| {
            let class = &ctx.w.nodes.get(&l.node)?.class_type;
            ctx.defs
                .get(class)?
                .outputs
                .get(l.slot)
                .map(|o| o.type_name.clone())
        });
    let is_carrier = |t: &str| t.split(',').any(|p| CARRIERS.contains(&p.trim()));
    match (declared, source) {
        (None, None) => true,
        (d, s) => d.as_deref().is_some_and(is_carrier) || s.as_deref().is_some_and(is_carrier),
    }
}

/// The linked latent/image inputs of `node`, in input order.
fn carrier_inputs<'a>(ctx: &Ctx<'a>, node: &str) -> Vec<(&'a str, &'a str)> {
    let Some((_, n)) = ctx.w.nodes.get_key_value(node) else {
        return Vec::new();
    };
    n.inputs
        .iter()
        .filter_map(|(name, input)| input.as_link().map(|l| (name.as_str(), l.node.as_str())))
        .filter(|(name, _)| carries(ctx, node, name))
        .collect()
}

/// The diffusion loaders a sampler samples with (through its model or guider).
fn loaders(ctx: &Ctx, sampler: &str) -> Vec<String> {
    let stop = |n: &str| ctx.is(n, Role::DiffusionLoader) || ctx.is(n, Role::Sampler);
    ctx.upstream_until(sampler, &["model", "guider"], stop)
        .into_iter()
        .filter(|n| ctx.is(n, Role::DiffusionLoader))
        .map(str::to_string)
        .collect()
}

/// The model file a loader loads (its first literal that looks like a file name).
fn loader_file(ctx: &Ctx, loader: &str) -> Option<String> {
    ctx.w.nodes[loader]
        .inputs
        .values()
        .filter_map(Input::as_literal)
        .filter_map(|v| v.as_str())
        .find(|v| v.contains('.'))
        .map(str::to_string)
}

/// Whether two samplers sample with the same diffusion model (a shared loader or file). When
/// either side's loader is unknown, nothing says they differ.
fn same_model(ctx: &Ctx, a: &str, b: &str) -> bool {
    let (la, lb) = (loaders(ctx, a), loaders(ctx, b));
    if la.is_empty() || lb.is_empty() {
        return true;
    }
    if la.iter().any(|l| lb.contains(l)) {
        return true;
    }
    let fa: Vec<String> = la.iter().filter_map(|l| loader_file(ctx, l)).collect();
    lb.iter()
        .filter_map(|l| loader_file(ctx, l))
        .any(|f| fa.contains(&f))
}

/// Every second sampling pass of the target, in file order of the second sampler.
pub(crate) fn second_passes(ctx: &Ctx) -> Vec<SecondPass> {
    let is_sampler = |n: &str| ctx.is(n, Role::Sampler);
    let mut out = Vec::new();
    for second in ctx.with_role(Role::Sampler) {
        // Everything upstream of the sampler's latent/image inputs, not past other samplers.
        let mut seen: IndexSet<&str> = IndexSet::default();
        let mut stack: Vec<&str> = carrier_inputs(ctx, second)
            .into_iter()
            .map(|(_, source)| source)
            .collect();
        while let Some(n) = stack.pop() {
            if !ctx.w.nodes.contains_key(n) || !seen.insert(n) || is_sampler(n) {
                continue;
            }
            stack.extend(carrier_inputs(ctx, n).into_iter().map(|(_, s)| s));
        }
        // The nearest sampler upstream is the first pass.
        let Some(first) = seen
            .iter()
            .copied()
            .filter(|n| is_sampler(n) && *n != second)
            .max_by_key(|n| ctx.topo.get(*n).copied().unwrap_or(0))
        else {
            continue;
        };
        let downstream = ctx.downstream_until(first, is_sampler);
        let route: IndexSet<String> = seen
            .iter()
            .filter(|n| !is_sampler(n) && downstream.contains(**n))
            .map(|n| n.to_string())
            .collect();
        let latent_upscale = route.iter().any(|n| ctx.is(n, Role::LatentUpscale));
        let pixel = route.iter().any(|n| ctx.is(n, Role::Decoder))
            && route.iter().any(|n| ctx.is(n, Role::Encoder));
        // A latent upscale makes a second pass whatever model samples it (an upscale DiT is
        // post-processing too); through pixels, another model is an image→video or refiner
        // stage: the `models` increment's business.
        if !(latent_upscale || (pixel && same_model(ctx, first, second))) {
            continue;
        }
        let size = latent_size(ctx, second, 0);
        out.push(SecondPass {
            first: first.to_string(),
            second: second.to_string(),
            route,
            size,
        });
    }
    out
}

/// The scale of an upscale model guessed from its file name (`4x-UltraSharp`,
/// `RealESRGAN_x4plus`); `None` when the name does not say.
pub(crate) fn model_scale(name: &str) -> Option<f64> {
    static SCALE_RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(?:^|[^a-z0-9])(?:([1-8])x|x([1-8]))(?:[^a-z0-9]|plus|$)")
            .expect("static regex")
    });
    let caps = SCALE_RE.captures(name)?;
    caps.get(1)
        .or_else(|| caps.get(2))
        .and_then(|m| m.as_str().parse().ok())
}

fn scaled((w, h): (i64, i64), f: f64) -> (i64, i64) {
    ((w as f64 * f).round() as i64, (h as f64 * f).round() as i64)
}

/// The pixel size of the latent or image that `node` feeds on, followed upstream through
/// samplers, decoders, encoders, scalers and upscalers (statically, from the target's values).
fn latent_size(ctx: &Ctx, node: &str, depth: usize) -> Option<(i64, i64)> {
    if depth > 64 {
        return None;
    }
    let n = ctx.w.nodes.get(node)?;
    let input = |name: &str| n.inputs.get(name).and_then(Input::as_literal);
    let upstream = || {
        carrier_inputs(ctx, node)
            .into_iter()
            .find_map(|(_, source)| latent_size(ctx, source, depth + 1))
    };
    // An explicit size (latent sources, ImageScale, LatentUpscale); 0 keeps the aspect.
    for (wn, hn) in [
        ("width", "height"),
        ("empty_latent_width", "empty_latent_height"),
    ] {
        if let (Some(w), Some(h)) = (ctx.int_value(node, wn), ctx.int_value(node, hn)) {
            return match (w, h) {
                (w, h) if w > 0 && h > 0 => Some((w, h)),
                (0, 0) => upstream(),
                (w, 0) => upstream()
                    .map(|(uw, uh)| (w, (uh as f64 * w as f64 / uw as f64).round() as i64)),
                (0, h) => upstream()
                    .map(|(uw, uh)| ((uw as f64 * h as f64 / uh as f64).round() as i64, h)),
                _ => None,
            };
        }
    }
    if let Some(f) = input("scale_by").and_then(literal_f64) {
        return upstream().map(|s| scaled(s, f));
    }
    if let Some(l) = n.inputs.get("upscale_model").and_then(Input::as_link) {
        let loader = ctx.w.nodes.get(&l.node)?;
        let f = loader
            .inputs
            .values()
            .filter_map(Input::as_literal)
            .filter_map(|v| v.as_str())
            .find_map(model_scale)?;
        return upstream().map(|s| scaled(s, f));
    }
    upstream()
}

#[cfg(test)]
mod tests {
    use super::model_scale;

    #[test]
    fn upscale_model_scales_from_names() {
        assert_eq!(model_scale("4x-UltraSharp.pth"), Some(4.0));
        assert_eq!(model_scale("RealESRGAN_x4plus.pth"), Some(4.0));
        assert_eq!(model_scale("random_compact_x2.safetensors"), Some(2.0));
        assert_eq!(model_scale("8x_NMKD-Superscale_150000_G.pth"), Some(8.0));
        assert_eq!(model_scale("OmniSR_X2_DIV2K.safetensors"), Some(2.0));
        assert_eq!(model_scale("sd15.safetensors"), None);
        assert_eq!(model_scale("flux_x16_vae.pth"), None);
    }
}
