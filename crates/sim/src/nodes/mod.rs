//! What the simulator knows about node classes: the shipped definitions and their role tags
//! (`defs.rs`: `object_info` as served, the 2026 profile, the extra and removed packs), and how
//! each node transforms the values flowing through the graph (models, latents, images…) into
//! [`Work`] for the memory model: `evaluate` hands each node to the handler its role (or
//! class) has in `HANDLERS`.

mod defs;
pub use defs::{defs, Defs, OBJECT_INFO};
pub(crate) use defs::{
    defs_2026, defs_without_removed_pack, exec_defs, extra_pack_defs, is_sampler_class,
};

use super::memory::{
    checkpoint_clip_bytes, lora_file_bytes, quant_factor, text_encoder_bytes, upscale_model,
    Family, ImageVal, LatentVal, ModelVal, Tiling, VaeKind, Work, GIB,
};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A value flowing along a link.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Model(ModelVal),
    /// A text encoder (`cpu`: its loader's `device` is `cpu`).
    Clip {
        key: String,
        bytes: u64,
        full: bool,
        cpu: bool,
    },
    Vae {
        key: String,
        kind: VaeKind,
    },
    Latent(LatentVal),
    Image(ImageVal),
    Upscale {
        key: String,
        bytes: u64,
        scale: u64,
    },
    Loras(Vec<(String, u64)>),
    BlockSwap(f64),
    CacheArgs(String),
    Guider {
        model: ModelVal,
        cfg: f64,
    },
    Sigmas(u32),
    Cond,
    Int(i64),
    Float(f64),
    Str(String),
    Other,
}

impl Val {
    /// The Python `str()` ComfyUI puts into `current_inputs` for a linked value.
    pub(crate) fn python_repr(&self, salt: u64) -> String {
        let addr = 0x7f3a_0000_0000u64 + (salt.wrapping_mul(0x9e37_79b9) & 0xffff_fff0);
        match self {
            Val::Model(_) => format!("<comfy.model_patcher.ModelPatcher object at {addr:#x}>"),
            Val::Clip { .. } => format!("<comfy.sd.CLIP object at {addr:#x}>"),
            Val::Vae { .. } => format!("<comfy.sd.VAE object at {addr:#x}>"),
            Val::Guider { .. } => format!("<comfy.samplers.CFGGuider object at {addr:#x}>"),
            Val::Upscale { .. } => format!(
                "<spandrel.__helpers.model_descriptor.ImageModelDescriptor object at {addr:#x}>"
            ),
            Val::Latent(l) => format!(
                "{{'samples': tensor([[[[0., 0., 0.,  ..., 0., 0., 0.],\n          ...,\n          [0., 0., 0.,  ..., 0., 0., 0.]]]])}}  # shape [{}, C, {}, {}, {}]",
                l.batch,
                l.frames,
                l.height / 8,
                l.width / 8
            ),
            Val::Image(i) => format!(
                "tensor([[[[0.5020, 0.5020, 0.5020],\n          ...,\n          [0.5020, 0.5020, 0.5020]]]])  # shape [{}, {}, {}, 3]",
                i.count, i.height, i.width
            ),
            Val::Cond => "[[tensor([[[ 0.1520, -0.2073, -1.0340,  ...,  0.6015,  0.7293,  1.0143]]]), {'pooled_output': tensor([[-0.6910,  0.2511, ...]])}]]".to_string(),
            Val::Int(i) => i.to_string(),
            Val::Float(f) => format!("{f:?}"),
            Val::Str(s) => s.clone(),
            Val::Sigmas(n) => format!("tensor([14.6146, ..., 0.0000])  # {} sigmas", n + 1),
            Val::Loras(_) | Val::BlockSwap(_) | Val::CacheArgs(_) => format!("{{...}}  # at {addr:#x}"),
            Val::Other => format!("<object object at {addr:#x}>"),
        }
    }

    fn matches_type(&self, ty: &str) -> bool {
        matches!(
            (self, ty),
            (Val::Model(_), "MODEL" | "WANVIDEOMODEL")
                | (Val::Clip { .. }, "CLIP" | "WANTEXTENCODER")
                | (Val::Vae { .. }, "VAE" | "WANVAE")
                | (Val::Latent(_), "LATENT" | "WANVIDIMAGE_EMBEDS")
                | (Val::Image(_), "IMAGE")
                // CreateVideo's VIDEO carries its images (what SaveVideo writes as frames).
                | (Val::Image(_), "VIDEO")
                // A mask is per image, the images' height × width (what MaskPreview writes).
                | (Val::Image(_), "MASK")
                | (Val::Upscale { .. }, "UPSCALE_MODEL")
                | (Val::Guider { .. }, "GUIDER")
                | (Val::Sigmas(_), "SIGMAS")
                | (Val::Cond, "CONDITIONING" | "WANVIDEOTEXTEMBEDS")
                | (Val::Int(_), "INT")
                | (Val::Float(_), "FLOAT")
                | (Val::Loras(_), "WANVIDLORA" | "LORA_STACK")
        )
    }
}

/// What the executor needs to know to tell the failure story of a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodeContext {
    pub family: Option<Family>,
    pub sampler_name: String,
    pub step_cache: Option<String>,
    pub video: bool,
    pub wrapper: bool,
    /// Images the node produces (for output file names and websocket image frames).
    pub images: u64,
}

/// The result of evaluating one node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Eval {
    pub outputs: Vec<Val>,
    pub work: Work,
    pub ctx: NodeContext,
}

/// Inputs of one node: literal widget values and linked values.
pub struct Inputs<'a> {
    pub class: &'a str,
    pub lits: &'a Map<String, Value>,
    pub links: &'a HashMap<String, Val>,
}

impl Inputs<'_> {
    fn num(&self, name: &str) -> Option<f64> {
        if let Some(v) = self.lits.get(name) {
            return match v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                _ => None,
            };
        }
        match self.links.get(name) {
            Some(Val::Int(i)) => Some(*i as f64),
            Some(Val::Float(f)) => Some(*f),
            _ => None,
        }
    }

    fn int(&self, names: &[&str], default: u64) -> u64 {
        names
            .iter()
            .find_map(|n| self.num(n))
            .map(|v| v.max(0.0) as u64)
            .unwrap_or(default)
    }

    fn float(&self, names: &[&str], default: f64) -> f64 {
        names.iter().find_map(|n| self.num(n)).unwrap_or(default)
    }

    fn str(&self, name: &str) -> Option<&str> {
        self.lits.get(name).and_then(Value::as_str)
    }

    fn flag(&self, name: &str) -> bool {
        match self.lits.get(name) {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s == "true" || s == "enable" || s == "enabled",
            _ => false,
        }
    }

    /// Model-file names among the literal inputs, in input order.
    fn files(&self) -> Vec<String> {
        self.lits
            .values()
            .filter_map(Value::as_str)
            .filter(|s| is_model_file(s))
            .map(str::to_string)
            .collect()
    }

    fn linked<T>(&self, f: impl Fn(&Val) -> Option<T>) -> Option<T> {
        self.links.values().find_map(f)
    }

    fn model(&self) -> Option<ModelVal> {
        self.linked(|v| match v {
            Val::Model(m) => Some(m.clone()),
            Val::Guider { model, .. } => Some(model.clone()),
            _ => None,
        })
    }

    fn latent(&self) -> Option<LatentVal> {
        self.linked(|v| match v {
            Val::Latent(l) => Some(*l),
            _ => None,
        })
    }

    fn image(&self) -> Option<ImageVal> {
        for key in ["image", "images", "frames", "pixels", "upscaled_image"] {
            if let Some(Val::Image(i)) = self.links.get(key) {
                return Some(*i);
            }
        }
        self.linked(|v| match v {
            Val::Image(i) => Some(*i),
            _ => None,
        })
    }

    fn vae(&self) -> Option<(String, VaeKind)> {
        self.linked(|v| match v {
            Val::Vae { key, kind } => Some((key.clone(), *kind)),
            _ => None,
        })
    }
}

/// `"512 x 768"` → (512, 768); `"width x height (custom)"` → None.
fn parse_preset(s: &str) -> Option<(u64, u64)> {
    let (w, h) = s.split_once(" x ")?;
    let h = h.split_whitespace().next()?;
    Some((w.trim().parse().ok()?, h.parse().ok()?))
}

fn is_model_file(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    [
        ".safetensors",
        ".gguf",
        ".ckpt",
        ".pt",
        ".pth",
        ".sft",
        ".bin",
    ]
    .iter()
    .any(|e| l.ends_with(e))
}

const DISK_BYTES_PER_SECOND: f64 = 2.0 * GIB as f64;

fn load_seconds(bytes: u64) -> f64 {
    0.05 + bytes as f64 / DISK_BYTES_PER_SECOND
}

/// Applies weight-dtype widgets (`weight_dtype`, `quantization`) to an unquantised file.
fn apply_dtype_widget(m: &mut ModelVal, inp: &Inputs) {
    let widget = inp
        .str("weight_dtype")
        .or_else(|| inp.str("quantization"))
        .unwrap_or("");
    if (widget.contains("fp8") || widget.contains("e4m3") || widget.contains("e5m2"))
        && quant_factor(&m.name) >= 1.0
    {
        m.bytes /= 2;
    }
}

fn lora_rows(inp: &Inputs, family: Family) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    // rgthree Power Lora Loader rows.
    for (k, v) in inp.lits {
        if k.starts_with("lora_") && v.is_object() {
            let on = v.get("on").and_then(Value::as_bool).unwrap_or(false);
            let strength = v.get("strength").and_then(Value::as_f64).unwrap_or(1.0);
            if let Some(name) = v.get("lora").and_then(Value::as_str) {
                if on && strength != 0.0 && name != "None" {
                    out.push((name.to_string(), lora_file_bytes(name, family)));
                }
            }
        }
    }
    // Stacks (rgthree Lora Loader Stack, Easy-Use loraStack).
    let limit = inp.int(&["num_loras"], 99);
    let mut idx = 0;
    for (k, v) in inp.lits {
        let Some(name) = v.as_str() else { continue };
        let digits = k
            .strip_prefix("lora_")
            .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()));
        let is_row =
            k != "lora_name" && ((k.starts_with("lora_") && k.ends_with("_name")) || digits);
        if is_row && name != "None" && is_model_file(name) {
            idx += 1;
            if idx <= limit {
                out.push((name.to_string(), lora_file_bytes(name, family)));
            }
        }
    }
    out
}

fn scale_image(img: ImageVal, inp: &Inputs) -> ImageVal {
    let mut w = inp.int(&["width", "resize_type.width"], 0);
    let mut h = inp.int(&["height", "resize_type.height"], 0);
    if let Some(s) = inp
        .num("scale_by")
        .or_else(|| inp.num("resize_type.multiplier"))
    {
        // ComfyUI's ImageScaleBy rounds (`round(width * scale_by)`).
        w = (img.width as f64 * s).round() as u64;
        h = (img.height as f64 * s).round() as u64;
    } else if let Some(mp) = inp
        .num("megapixels")
        .or_else(|| inp.num("resize_type.megapixels"))
    {
        let s = (mp * 1_048_576.0 / (img.width * img.height).max(1) as f64).sqrt();
        w = (img.width as f64 * s) as u64;
        h = (img.height as f64 * s) as u64;
    } else if let Some(longest) = inp
        .num("largest_size")
        .or_else(|| inp.num("longer_edge"))
        .or_else(|| inp.num("resize_type.longer_size"))
    {
        let s = longest / img.width.max(img.height).max(1) as f64;
        w = (img.width as f64 * s) as u64;
        h = (img.height as f64 * s) as u64;
    }
    if w == 0 && h == 0 {
        return img;
    }
    if w == 0 {
        w = img.width * h / img.height.max(1);
    }
    if h == 0 {
        h = img.height * w / img.width.max(1);
    }
    ImageVal {
        width: w.max(1),
        height: h.max(1),
        count: img.count,
    }
}

/// How [`HANDLERS`] recognise a node: by a role in `roles.sim.json`, by class, or (text
/// encoders) by taking a CLIP and giving conditioning.
enum Match {
    Role(&'static str),
    Class(&'static [&'static str]),
    TextEncode,
}

impl Match {
    fn matches(&self, n: &Node) -> bool {
        match self {
            Match::Role(role) => defs_2026().has_role(n.inp.class, role),
            Match::Class(classes) => classes.contains(&n.inp.class),
            Match::TextEncode => {
                n.inp.links.values().any(|v| matches!(v, Val::Clip { .. }))
                    && n.out_types
                        .iter()
                        .any(|t| t == "CONDITIONING" || t == "WANVIDEOTEXTEMBEDS")
            }
        }
    }
}

/// A node's handler: fills in the work and the modelled outputs.
type Handler = fn(&mut Node);

/// From node role (or class) to its handler; the first that matches handles the node, and a
/// node no entry matches is CPU work that passes its inputs through.
const HANDLERS: &[(Match, Handler)] = &[
    (Match::Role("diffusion_loaders"), diffusion_loader),
    (Match::Role("text_encoder_loaders"), text_encoder_loader),
    (Match::Role("vae_loaders"), vae_loader),
    (Match::Class(&["UpscaleModelLoader"]), upscale_model_loader),
    (Match::Class(&["WanVideoBlockSwap"]), block_swap),
    (
        Match::Class(&["WanVideoTeaCache", "WanVideoMagCache", "WanVideoEasyCache"]),
        cache_args,
    ),
    (Match::Role("lora"), lora),
    (Match::Role("cache_step"), step_cache),
    (Match::Role("guiders"), guider),
    (Match::Role("schedulers"), scheduler),
    (Match::Role("samplers"), sampler),
    (Match::Role("vae_decode"), vae_decode),
    (Match::Role("vae_encode"), vae_encode),
    (
        Match::Class(&["ImageUpscaleWithModel", "ImageUpscaleWithModelBatched"]),
        upscale_with_model,
    ),
    (Match::Role("frame_interp"), frame_interpolation),
    (Match::TextEncode, text_encode),
    (Match::Class(&["EmptyImage"]), empty_image),
    (Match::Class(&["LoadImage"]), load_image),
    (Match::Class(&["VHS_LoadVideo"]), load_video),
    (Match::Class(&["ResizeImageMaskNode"]), resize_image_mask),
    (Match::Role("image_rescale"), image_rescale),
    (Match::Role("size_helpers"), image_rescale),
    (
        Match::Class(&["LatentUpscale", "LatentUpscaleBy"]),
        latent_upscale,
    ),
    (Match::Class(&["INTConstant", "PrimitiveInt"]), int_constant),
    (Match::Class(&["PrimitiveFloat"]), float_constant),
];

/// One node being evaluated: what its handler fills in.
struct Node<'a> {
    inp: &'a Inputs<'a>,
    out_types: Vec<String>,
    ctx: NodeContext,
    work: Work,
    /// Per output type, a specific value when the class is modelled.
    special: HashMap<&'static str, Val>,
    /// Every output, when the handler decided them all itself.
    outputs: Option<Vec<Val>>,
}

/// Evaluates one node: its output values and the work it asks of the GPU.
pub(crate) fn evaluate(inp: &Inputs) -> Eval {
    let mut n = Node {
        inp,
        out_types: exec_defs().output_types(inp.class),
        ctx: NodeContext::default(),
        work: Work::Cpu { seconds: 0.01 },
        special: HashMap::new(),
        outputs: None,
    };
    if let Some((_, handler)) = HANDLERS.iter().find(|(m, _)| m.matches(&n)) {
        handler(&mut n);
    }
    if let Some(outputs) = n.outputs.take() {
        return Eval {
            outputs,
            work: n.work,
            ctx: n.ctx,
        };
    }
    size_source(&mut n);
    if defs_2026().is_output(inp.class) {
        n.ctx.images = inp.image().map(|i| i.count).unwrap_or(0);
    }
    let outputs = n
        .out_types
        .iter()
        .map(|t| {
            if let Some(v) = n.special.get(t.as_str()) {
                return v.clone();
            }
            if t == "*" {
                return inp.links.values().next().cloned().unwrap_or(Val::Other);
            }
            if t == "CONDITIONING" {
                return Val::Cond;
            }
            // Pass-through: the first linked input of the same type.
            inp.links
                .values()
                .find(|v| v.matches_type(t))
                .cloned()
                .unwrap_or(Val::Other)
        })
        .collect();
    Eval {
        outputs,
        work: n.work,
        ctx: n.ctx,
    }
}

/// Size sources: any node that makes a latent from width/height widgets (after its handler,
/// unless that gave the latent).
fn size_source(n: &mut Node) {
    let inp = n.inp;
    if (defs_2026().has_role(inp.class, "size_sources")
        || n.out_types.iter().any(|t| t == "LATENT"))
        && !n.special.contains_key("LATENT")
        && (inp.num("width").is_some() && inp.num("height").is_some())
    {
        let frames = inp.int(&["length", "num_frames", "video_frames", "frames"], 1);
        let l = LatentVal {
            width: inp.int(&["width"], 512),
            height: inp.int(&["height"], 512),
            frames,
            batch: inp.int(&["batch_size"], 1),
        };
        n.special.insert("LATENT", Val::Latent(l));
        n.special.insert("WANVIDIMAGE_EMBEDS", Val::Latent(l));
    }
}

/// A diffusion-model loader (checkpoint, UNet, GGUF, wrapper): the model with its LoRAs and
/// block swap, the checkpoint's CLIP and VAE, and the latent of loaders with size widgets.
fn diffusion_loader(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    let files = inp.files();
    let name = files.first().cloned().unwrap_or_else(|| class.to_string());
    let wrapper = class == "WanVideoModelLoader";
    let mut m = ModelVal::from_file(&name, !wrapper);
    apply_dtype_widget(&mut m, inp);
    if let Some(Val::Loras(l)) = inp.links.values().find(|v| matches!(v, Val::Loras(_))) {
        m.loras.extend(l.iter().cloned());
    }
    if let Some(Val::BlockSwap(f)) = inp.links.values().find(|v| matches!(v, Val::BlockSwap(_))) {
        m.offload = *f;
    }
    // All-in-one loaders with LoRA widgets.
    if let Some(l) = inp.str("lora_name") {
        if l != "None" && is_model_file(l) {
            m.loras.push((l.to_string(), lora_file_bytes(l, m.family)));
        }
    }
    let clip_bytes = checkpoint_clip_bytes(m.family);
    let key = name.clone();
    n.work = Work::Cpu {
        seconds: load_seconds(m.bytes + clip_bytes),
    };
    n.ctx.family = Some(m.family);
    n.special.insert("MODEL", Val::Model(m.clone()));
    n.special.insert("WANVIDEOMODEL", Val::Model(m.clone()));
    n.special.insert(
        "CLIP",
        Val::Clip {
            key: format!("{key}:clip"),
            bytes: clip_bytes,
            full: false,
            cpu: false,
        },
    );
    n.special.insert(
        "VAE",
        Val::Vae {
            key: format!("{key}:vae"),
            kind: VaeKind::for_family(m.family),
        },
    );
    let mut w = inp.int(&["empty_latent_width", "width"], 0);
    let mut h = inp.int(&["empty_latent_height", "height"], 0);
    // Easy-Use presets ("512 x 768") win over the stale custom size widgets.
    if let Some((pw, ph)) = inp.str("resolution").and_then(parse_preset) {
        w = pw;
        h = ph;
    }
    if w > 0 && h > 0 {
        n.special.insert(
            "LATENT",
            Val::Latent(LatentVal {
                width: w,
                height: h,
                frames: 1,
                batch: inp.int(&["batch_size"], 1),
            }),
        );
    }
}

/// A text-encoder loader: the encoder's weights (halved by an fp8 quantization widget).
fn text_encoder_loader(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    let files = inp.files();
    let mut bytes: u64 = files.iter().map(|f| text_encoder_bytes(f)).sum();
    let full = class == "LoadWanVideoT5TextEncoder";
    let q = inp.str("quantization").unwrap_or("");
    if q.contains("fp8") && files.iter().all(|f| quant_factor(f) >= 1.0) {
        bytes /= 2;
    }
    n.work = Work::Cpu {
        seconds: load_seconds(bytes),
    };
    let clip = Val::Clip {
        key: files.join("+"),
        bytes,
        full,
        cpu: inp.str("device") == Some("cpu"),
    };
    n.special.insert("CLIP", clip.clone());
    n.special.insert("WANTEXTENCODER", clip);
}

/// A VAE loader.
fn vae_loader(n: &mut Node) {
    let inp = n.inp;
    let files = inp.files();
    let name = files
        .first()
        .cloned()
        .or_else(|| inp.str("vae_name").map(str::to_string))
        .unwrap_or_default();
    let kind = VaeKind::from_name(&name);
    n.work = Work::Cpu {
        seconds: load_seconds(kind.weights()),
    };
    let v = Val::Vae { key: name, kind };
    n.special.insert("VAE", v.clone());
    n.special.insert("WANVAE", v);
}

/// An upscale-model loader: its size and scale from the file name.
fn upscale_model_loader(n: &mut Node) {
    let inp = n.inp;
    let files = inp.files();
    let name = files.first().cloned().unwrap_or_default();
    let (bytes, scale) = upscale_model(&name);
    n.special.insert(
        "UPSCALE_MODEL",
        Val::Upscale {
            key: name,
            bytes,
            scale,
        },
    );
}

/// WanVideo block swap: the share of blocks kept off the GPU.
fn block_swap(n: &mut Node) {
    let inp = n.inp;
    let blocks = inp.int(&["blocks_to_swap"], 20) as f64;
    n.special
        .insert("BLOCKSWAPARGS", Val::BlockSwap((blocks / 40.0).min(1.0)));
}

/// WanVideo step-cache arguments.
fn cache_args(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    n.special
        .insert("CACHEARGS", Val::CacheArgs(class.to_string()));
}

/// A LoRA loader or stack: adds its rows to the model and to the stack it passes on.
fn lora(n: &mut Node) {
    let inp = n.inp;
    let model = inp.model();
    let family = model.as_ref().map(|m| m.family).unwrap_or(Family::Other);
    let mut rows = lora_rows(inp, family);
    if let Some(name) = inp.str("lora_name").or_else(|| inp.str("lora")) {
        let strength = inp.float(&["strength_model", "strength"], 1.0);
        if name != "None" && strength != 0.0 && is_model_file(name) {
            rows.push((name.to_string(), lora_file_bytes(name, family)));
        }
    }
    let mut prev: Vec<(String, u64)> = inp
        .links
        .values()
        .find_map(|v| match v {
            Val::Loras(l) => Some(l.clone()),
            _ => None,
        })
        .unwrap_or_default();
    if let Some(mut m) = model {
        m.loras.extend(rows.iter().cloned());
        n.special.insert("MODEL", Val::Model(m));
    }
    prev.extend(rows);
    n.special.insert("WANVIDLORA", Val::Loras(prev.clone()));
    n.special.insert("LORA_STACK", Val::Loras(prev));
}

/// A step cache on the model (TeaCache, FirstBlockCache…).
fn step_cache(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    if let Some(mut m) = inp.model() {
        m.step_cache = Some(class.to_string());
        n.special.insert("MODEL", Val::Model(m));
    }
}

/// A guider: the model with its cfg.
fn guider(n: &mut Node) {
    let inp = n.inp;
    if let Some(model) = inp.model() {
        let cfg = inp.float(&["cfg"], 1.0);
        n.special.insert("GUIDER", Val::Guider { model, cfg });
    }
}

/// A scheduler: its step count.
fn scheduler(n: &mut Node) {
    let inp = n.inp;
    let steps = inp.int(&["steps"], 20) as u32;
    n.special.insert("SIGMAS", Val::Sigmas(steps));
}

/// A sampler (see [`evaluate_sampler`]).
fn sampler(n: &mut Node) {
    let inp = n.inp;
    let (w, e) = evaluate_sampler(inp, &mut n.ctx);
    n.work = w;
    if let Some(e) = e {
        n.special.insert(
            if n.out_types.iter().any(|t| t == "IMAGE") {
                "IMAGE"
            } else {
                "LATENT"
            },
            e,
        );
    }
}

/// VAE decode (tiled, WanVideo, or core with its tiled fallback).
fn vae_decode(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    if let (Some(l), Some((key, kind))) = (inp.latent(), inp.vae()) {
        let video = kind != VaeKind::Image || l.frames > 1;
        n.ctx.video = video;
        let tiled = if class == "VAEDecodeTiled" {
            Some(Tiling {
                tile: inp.int(&["tile_size"], 512),
                overlap: inp.int(&["overlap"], 64),
                temporal: inp.int(&["temporal_size"], 64),
                temporal_overlap: inp.int(&["temporal_overlap"], 8),
            })
        } else if class == "WanVideoDecode" && inp.flag("enable_vae_tiling") {
            Some(Tiling::spatial(inp.int(&["tile_x"], 272)))
        } else {
            None
        };
        n.work = Work::Decode {
            key,
            vae: kind,
            width: l.width,
            height: l.height,
            frames: l.frames,
            batch: l.batch,
            tiled,
            fallback: class == "VAEDecode",
            encode: false,
        };
        // A latent is 1/8 of the pixels (rounded down), so that is what decodes.
        let img = ImageVal {
            width: (l.width / 8 * 8).max(8),
            height: (l.height / 8 * 8).max(8),
            count: l.frames.max(1) * l.batch.max(1),
        };
        n.special.insert("IMAGE", Val::Image(img));
    }
}

/// VAE encode.
fn vae_encode(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    if let (Some(img), Some((key, kind))) = (inp.image(), inp.vae()) {
        n.work = Work::Decode {
            key,
            vae: kind,
            width: img.width,
            height: img.height,
            frames: 1,
            batch: img.count,
            tiled: class.contains("Tiled").then(|| Tiling {
                overlap: inp.int(&["overlap"], 64),
                ..Tiling::spatial(inp.int(&["tile_size"], 512))
            }),
            fallback: class == "VAEEncode",
            encode: true,
        };
        n.special.insert(
            "LATENT",
            Val::Latent(LatentVal {
                width: img.width,
                height: img.height,
                frames: 1,
                batch: img.count,
            }),
        );
    }
}

/// Upscaling images with a model.
fn upscale_with_model(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    let up = inp.linked(|v| match v {
        Val::Upscale { key, bytes, scale } => Some((key.clone(), *bytes, *scale)),
        _ => None,
    });
    if let (Some((key, bytes, scale)), Some(image)) = (up, inp.image()) {
        n.work = Work::Upscale {
            key,
            bytes,
            scale,
            image,
            per_batch: (class == "ImageUpscaleWithModelBatched")
                .then(|| inp.int(&["per_batch"], 16)),
        };
        n.special.insert(
            "IMAGE",
            Val::Image(ImageVal {
                width: image.width * scale,
                height: image.height * scale,
                count: image.count,
            }),
        );
    }
}

/// Frame interpolation (RIFE, FILM).
fn frame_interpolation(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    if let Some(image) = inp.image() {
        let multiplier = inp.int(&["multiplier"], 2).max(1);
        n.work = Work::Interpolate {
            key: class.to_string(),
            film: class.starts_with("FILM"),
            image,
            multiplier,
            clear_after: inp.int(&["clear_cache_after_n_frames"], 10),
        };
        n.special.insert(
            "IMAGE",
            Val::Image(ImageVal {
                count: image.count.saturating_sub(1) * multiplier + 1,
                ..image
            }),
        );
    }
}

/// Text encoding: a node that takes a CLIP and gives conditioning.
fn text_encode(n: &mut Node) {
    let inp = n.inp;
    if let Some(Val::Clip {
        key,
        bytes,
        full,
        cpu,
    }) = inp.links.values().find(|v| matches!(v, Val::Clip { .. }))
    {
        n.work = Work::Encode {
            key: key.clone(),
            bytes: *bytes,
            full: *full,
            cpu: *cpu,
        };
    }
}

/// An empty image of the widget size.
fn empty_image(n: &mut Node) {
    let inp = n.inp;
    n.special.insert(
        "IMAGE",
        Val::Image(ImageVal {
            width: inp.int(&["width"], 512),
            height: inp.int(&["height"], 512),
            count: inp.int(&["batch_size"], 1),
        }),
    );
}

/// A loaded image (1024×1024).
fn load_image(n: &mut Node) {
    n.special.insert(
        "IMAGE",
        Val::Image(ImageVal {
            width: 1024,
            height: 1024,
            count: 1,
        }),
    );
}

/// A loaded video: frame cap and custom size, or 81 frames of 832×480.
fn load_video(n: &mut Node) {
    let inp = n.inp;
    let cap = inp.int(&["frame_load_cap"], 0);
    let w = inp.int(&["custom_width"], 0);
    let h = inp.int(&["custom_height"], 0);
    let count = if cap == 0 { 81 } else { cap };
    n.special.insert(
        "IMAGE",
        Val::Image(ImageVal {
            width: if w == 0 { 832 } else { w },
            height: if h == 0 { 480 } else { h },
            count,
        }),
    );
    n.special.insert("INT", Val::Int(count as i64));
}

/// Image rescaling and size helpers (`GetImageSizeAndCount` gives all its outputs).
fn image_rescale(n: &mut Node) {
    let inp = n.inp;
    let class = inp.class;
    if let Some(img) = inp.image() {
        let out = scale_image(img, inp);
        n.work = Work::Cpu {
            seconds: 0.01 + (out.width * out.height * out.count) as f64 * 2.0e-8,
        };
        n.special.insert("IMAGE", Val::Image(out));
        if class == "GetImageSizeAndCount" {
            // Outputs: image, width, height, count.
            n.outputs = Some(vec![
                Val::Image(img),
                Val::Int(img.width as i64),
                Val::Int(img.height as i64),
                Val::Int(img.count as i64),
            ]);
        }
    }
}

/// The V3 `ResizeImageMaskNode`: its sizes are the sub-inputs of the chosen `resize_type`
/// option (`resize_type.width`, `resize_type.multiplier`…); its one output is a MatchType that
/// carries the resized image.
fn resize_image_mask(n: &mut Node) {
    let inp = n.inp;
    if let Some(img) = inp.image() {
        let out = scale_image(img, inp);
        n.work = Work::Cpu {
            seconds: 0.01 + (out.width * out.height * out.count) as f64 * 2.0e-8,
        };
        n.outputs = Some(vec![Val::Image(out)]);
    }
}

/// A latent upscale, by factor or to a size.
fn latent_upscale(n: &mut Node) {
    let inp = n.inp;
    if let Some(l) = inp.latent() {
        let s = inp.num("scale_by");
        let (w, h) = match s {
            Some(s) => ((l.width as f64 * s) as u64, (l.height as f64 * s) as u64),
            None => (inp.int(&["width"], l.width), inp.int(&["height"], l.height)),
        };
        n.special.insert(
            "LATENT",
            Val::Latent(LatentVal {
                width: w,
                height: h,
                ..l
            }),
        );
    }
}

/// An integer constant.
fn int_constant(n: &mut Node) {
    let inp = n.inp;
    n.special
        .insert("INT", Val::Int(inp.int(&["value"], 0) as i64));
}

/// A float constant.
fn float_constant(n: &mut Node) {
    let inp = n.inp;
    n.special
        .insert("FLOAT", Val::Float(inp.float(&["value"], 0.0)));
}

fn evaluate_sampler(inp: &Inputs, ctx: &mut NodeContext) -> (Work, Option<Val>) {
    let class = inp.class;
    let Some(mut model) = inp.model() else {
        return (Work::Cpu { seconds: 0.01 }, None);
    };
    if let Some(Val::CacheArgs(c)) = inp.links.values().find(|v| matches!(v, Val::CacheArgs(_))) {
        model.step_cache = Some(c.clone());
    }
    let cfg = inp
        .num("cfg")
        .or_else(|| {
            inp.links.values().find_map(|v| match v {
                Val::Guider { cfg, .. } => Some(*cfg),
                _ => None,
            })
        })
        .unwrap_or(1.0);
    let mut steps = inp
        .num("steps")
        .map(|s| s.max(1.0) as u32)
        .or_else(|| {
            inp.links.values().find_map(|v| match v {
                Val::Sigmas(n) => Some(*n),
                _ => None,
            })
        })
        .unwrap_or(20);
    if let (Some(start), Some(end)) = (inp.num("start_at_step"), inp.num("end_at_step")) {
        let end = (end as u32).min(steps);
        steps = end.saturating_sub(start as u32).max(1);
    }
    ctx.family = Some(model.family);
    ctx.sampler_name = inp
        .str("sampler_name")
        .or_else(|| inp.str("scheduler"))
        .unwrap_or("euler")
        .to_string();
    if class == "WanVideoSampler" {
        ctx.sampler_name = "unipc".into();
        ctx.wrapper = true;
    }
    ctx.step_cache = model.step_cache.clone();
    let passes = if cfg > 1.0 && !model.family.is_video() {
        2
    } else {
        1
    };
    // Tiled samplers (Ultimate SD Upscale, FaceDetailer) sample tile by tile.
    if let Some(img) = inp.image() {
        let (out, tile) = if class.starts_with("UltimateSDUpscale") {
            let s = inp.float(&["upscale_by"], 2.0);
            let out = ImageVal {
                width: (img.width as f64 * s) as u64,
                height: (img.height as f64 * s) as u64,
                count: img.count,
            };
            (
                out,
                (
                    inp.int(&["tile_width"], 512),
                    inp.int(&["tile_height"], 512),
                ),
            )
        } else {
            let g = inp.int(&["guide_size"], 512);
            (img, (g, g))
        };
        let tiles = (out.width.div_ceil(tile.0.max(1)) * out.height.div_ceil(tile.1.max(1))).max(1)
            * out.count.max(1);
        let latent = LatentVal {
            width: tile.0,
            height: tile.1,
            frames: 1,
            batch: 1,
        };
        let work = Work::Sample {
            model,
            latent,
            steps: steps.saturating_mul(tiles.min(10_000) as u32),
            passes,
            tiles: 1,
            tile: Some(tile),
        };
        return (work, Some(Val::Image(out)));
    }
    let Some(latent) = inp.latent() else {
        return (Work::Cpu { seconds: 0.01 }, None);
    };
    ctx.video = latent.frames > 1;
    let work = Work::Sample {
        model,
        latent,
        steps,
        passes,
        tiles: 1,
        tile: None,
    };
    (work, Some(Val::Latent(latent)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(class: &str, lits: Value, links: Vec<(&str, Val)>) -> Eval {
        let lits = lits.as_object().unwrap().clone();
        let links: HashMap<String, Val> =
            links.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        evaluate(&Inputs {
            class,
            lits: &lits,
            links: &links,
        })
    }

    #[test]
    fn easy_use_presets_parse() {
        assert_eq!(parse_preset("512 x 768"), Some((512, 768)));
        assert_eq!(parse_preset("1024 x 1024 (square)"), Some((1024, 1024)));
        assert_eq!(parse_preset("width x height (custom)"), None);
    }

    #[test]
    fn shipped_definitions_parse() {
        let d = defs();
        assert!(d.map.len() > 300);
        assert!(d.is_output("SaveImage"));
        assert!(!d.is_output("KSampler"));
        assert_eq!(
            d.output_types("CheckpointLoaderSimple"),
            ["MODEL", "CLIP", "VAE"]
        );
        assert!(d.has_role("KSampler", "samplers"));
        let (section, spec) = d.input_spec("KSampler", "sampler_name").unwrap();
        assert_eq!(section, "required");
        assert!(spec[0].is_array(), "a COMBO: {spec}");
    }

    #[test]
    fn checkpoint_to_sampler_to_decode() {
        let ck = eval(
            "CheckpointLoaderSimple",
            json!({"ckpt_name": "sd_xl_base_1.0.safetensors"}),
            vec![],
        );
        let Val::Model(m) = &ck.outputs[0] else {
            panic!()
        };
        assert_eq!(m.family, Family::Sdxl);
        let lat = eval(
            "EmptyLatentImage",
            json!({"width": 1024, "height": 768, "batch_size": 2}),
            vec![],
        );
        assert_eq!(
            lat.outputs[0],
            Val::Latent(LatentVal {
                width: 1024,
                height: 768,
                frames: 1,
                batch: 2
            })
        );
        let ks = eval(
            "KSampler",
            json!({"steps": 25, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal", "seed": 1, "denoise": 1.0}),
            vec![
                ("model", ck.outputs[0].clone()),
                ("latent_image", lat.outputs[0].clone()),
                ("positive", Val::Cond),
                ("negative", Val::Cond),
            ],
        );
        let Work::Sample { steps, passes, .. } = &ks.work else {
            panic!("{:?}", ks.work)
        };
        assert_eq!((*steps, *passes), (25, 2));
        let dec = eval(
            "VAEDecode",
            json!({}),
            vec![
                ("samples", ks.outputs[0].clone()),
                ("vae", ck.outputs[2].clone()),
            ],
        );
        assert!(matches!(dec.work, Work::Decode { fallback: true, .. }));
        assert_eq!(
            dec.outputs[0],
            Val::Image(ImageVal {
                width: 1024,
                height: 768,
                count: 2
            })
        );
    }

    #[test]
    fn lora_cache_and_wan_video_sizes() {
        let unet = eval(
            "UNETLoader",
            json!({"unet_name": "wan2.2_i2v_low_noise_14B_fp16.safetensors", "weight_dtype": "fp8_e4m3fn"}),
            vec![],
        );
        let Val::Model(m) = &unet.outputs[0] else {
            panic!()
        };
        assert!(m.bytes < 14 * GIB);
        let lora = eval(
            "LoraLoaderModelOnly",
            json!({"lora_name": "wan/wan_smooth_motion_v2.safetensors", "strength_model": 1.0}),
            vec![("model", unet.outputs[0].clone())],
        );
        let Val::Model(m) = &lora.outputs[0] else {
            panic!()
        };
        assert_eq!(m.loras.len(), 1);
        let cache = eval(
            "TeaCache",
            json!({"model_type": "wan2.1_i2v_480p_14B", "rel_l1_thresh": 0.2}),
            vec![("model", lora.outputs[0].clone())],
        );
        let Val::Model(m) = &cache.outputs[0] else {
            panic!()
        };
        assert_eq!(m.step_cache.as_deref(), Some("TeaCache"));
        let i2v = eval(
            "WanImageToVideo",
            json!({"width": 832, "height": 480, "length": 81, "batch_size": 1}),
            vec![("positive", Val::Cond), ("negative", Val::Cond)],
        );
        assert_eq!(
            i2v.outputs[2],
            Val::Latent(LatentVal {
                width: 832,
                height: 480,
                frames: 81,
                batch: 1
            })
        );
        let rife = eval(
            "RIFE VFI",
            json!({"multiplier": 2, "clear_cache_after_n_frames": 10}),
            vec![(
                "frames",
                Val::Image(ImageVal {
                    width: 832,
                    height: 480,
                    count: 81,
                }),
            )],
        );
        assert!(matches!(
            rife.outputs[0],
            Val::Image(ImageVal { count: 161, .. })
        ));
    }
}
