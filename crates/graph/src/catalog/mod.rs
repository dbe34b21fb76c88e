//! What each node class is: its roles (diffusion-model loader, LoRA loader, size source, step
//! cache, memory saver, post-processing…). Built-in knowledge of core ComfyUI and the popular
//! custom packs, a fallback on the class signature from `/object_info` for unknown classes, and
//! user declarations from a TOML file (`--catalog FILE`). For the built-in frame sources, also
//! how many latent frames their video latent has for the frames asked ([`temporal`]).
//!
//! The catalog only says *what* a node is; how to neutralise it is the ladder's business.

mod builtin;
mod role;

use crate::nodedefs::{InputKind, NodeDef, NodeDefs};
use rustc_hash::FxHashMap as HashMap;
use serde::Deserialize;
use std::path::Path;

pub use role::{Role, Temporal};

/// The temporal compression of a built-in frame source; `None` for a class whose latent frame
/// count is not known (its frames count as asked).
pub fn temporal(class: &str) -> Option<Temporal> {
    builtin::TEMPORAL
        .iter()
        .find(|(c, _)| *c == class)
        .map(|&(_, t)| t)
}

/// Class → roles, with a signature fallback for classes it does not know.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    classes: HashMap<String, Vec<Role>>,
}

/// A catalog file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file could not be read.
    #[error("cannot read catalog file '{path}': {source}")]
    Read {
        /// File path.
        path: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The TOML is malformed or uses an unknown role.
    #[error("catalog file '{path}' is not valid: {message}. Expected a [classes] table like `\"MyLoraNode\" = [\"lora\"]`; roles: {roles}")]
    Parse {
        /// File path.
        path: String,
        /// What is wrong.
        message: String,
        /// The known role names.
        roles: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    classes: HashMap<String, Vec<Role>>,
}

impl Catalog {
    /// The built-in catalog: core ComfyUI plus the common custom packs.
    pub fn builtin() -> Catalog {
        let mut classes: HashMap<String, Vec<Role>> = HashMap::default();
        for (class, roles) in builtin::CLASSES {
            classes
                .entry((*class).to_string())
                .or_default()
                .extend_from_slice(roles);
        }
        Catalog { classes }
    }

    /// Parses a user catalog (`[classes]` table of class name → role list).
    pub fn from_toml_str(text: &str, path: &str) -> Result<Catalog, CatalogError> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| CatalogError::Parse {
            path: path.to_string(),
            message: e.message().to_string(),
            roles: Role::ALL.map(Role::name).join(", "),
        })?;
        Ok(Catalog {
            classes: file.classes,
        })
    }

    /// Loads a user catalog file.
    pub fn load_file(path: &Path) -> Result<Catalog, CatalogError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            path: shown.clone(),
            source,
        })?;
        Catalog::from_toml_str(&text, &shown)
    }

    /// The built-in catalog with the classes of `user` replacing or adding entries.
    pub fn with_user(mut self, user: Catalog) -> Catalog {
        self.classes.extend(user.classes);
        self
    }

    /// Whether the class is declared (built-in or user), not guessed.
    pub fn knows(&self, class: &str) -> bool {
        self.classes.contains_key(class)
    }

    /// The roles of a class: declared ones, or guessed from its definition.
    pub fn roles(&self, class: &str, defs: &NodeDefs) -> Vec<Role> {
        if let Some(roles) = self.classes.get(class) {
            return roles.clone();
        }
        let mut roles: Vec<Role> = Vec::new();
        if let Some(def) = defs.get(class) {
            guess_roles(def, &mut roles);
        }
        roles
    }

    /// Whether `class` has `role`.
    pub fn has(&self, class: &str, role: Role, defs: &NodeDefs) -> bool {
        self.roles(class, defs).contains(&role)
    }
}

fn input_types(def: &NodeDef) -> Vec<&str> {
    def.visible_inputs().map(|i| i.type_name()).collect()
}

fn has_combo(def: &NodeDef, pred: impl Fn(&str) -> bool) -> bool {
    def.visible_inputs()
        .any(|i| matches!(i.kind, InputKind::Combo { .. }) && pred(&i.name))
}

/// The signature fallback for classes the catalog does not know.
fn guess_roles(def: &NodeDef, roles: &mut Vec<Role>) {
    let name = def.name.to_ascii_lowercase();
    let ins = input_types(def);
    let outs: Vec<&str> = def.outputs.iter().map(|o| o.type_name.as_str()).collect();
    let has_in = |t: &str| ins.contains(&t);
    let out0 = outs.first().copied().unwrap_or("");
    let passthrough_model = has_in("MODEL") && out0 == "MODEL";
    if def.output_node {
        roles.push(Role::Output);
    }
    // MODEL[,CLIP] in → same out, with a LoRA file combo.
    if passthrough_model
        && (has_combo(def, |n| n.contains("lora")) || name.contains("lora"))
        && outs.iter().all(|t| *t == "MODEL" || *t == "CLIP")
    {
        roles.push(Role::Lora);
        return;
    }
    let model_file = has_combo(def, |n| {
        matches!(n, "unet_name" | "ckpt_name" | "model_name" | "model")
    });
    let only_widgets = def
        .visible_inputs()
        .all(|i| matches!(i.kind, InputKind::Combo { .. }) || is_widget_type(i.type_name()));
    if outs.contains(&"MODEL") && model_file && only_widgets {
        roles.push(Role::DiffusionLoader);
        return;
    }
    if outs.contains(&"CLIP") && !has_in("CLIP") && has_combo(def, |n| n.starts_with("clip_name")) {
        roles.push(Role::TextEncoderLoader);
        return;
    }
    if passthrough_model || (has_in("*") && out0 == "*") {
        if name.contains("cache") {
            roles.push(Role::StepCache);
            return;
        }
        if name.contains("compile") {
            roles.push(Role::Compile);
            return;
        }
        if name.contains("attention") || name.contains("sage") {
            roles.push(Role::Attention);
            return;
        }
        if name.contains("blockswap") || name.contains("block_swap") || name.contains("offload") {
            roles.push(Role::MemorySaver);
            return;
        }
    }
    if name.contains("blockswap") || name.contains("block swap") {
        roles.push(Role::MemorySaver);
        return;
    }
    if has_in("LATENT") && has_in("VAE") && out0 == "IMAGE" {
        roles.push(Role::Decoder);
        if name.contains("tiled") {
            roles.push(Role::MemorySaver);
        }
        return;
    }
    if has_in("MODEL") && outs.contains(&"LATENT") && def.input("steps").is_some() {
        roles.push(Role::Sampler);
        return;
    }
    if out0 == "IMAGE" && has_in("IMAGE") {
        if name.contains("vfi") || name.contains("interpolat") {
            roles.push(Role::PostProcess);
            roles.push(Role::FrameInterpolation);
            return;
        }
        if name.contains("upscale") || name.contains("detailer") {
            roles.push(Role::PostProcess);
            return;
        }
    }
    let int_named = |n: &str| {
        def.input(n)
            .is_some_and(|i| matches!(i.type_name(), "INT" | "INT,FLOAT" | "FLOAT,INT"))
    };
    if (int_named("width") && int_named("height"))
        && outs.iter().any(|t| *t == "LATENT" || t.contains("EMBEDS"))
    {
        roles.push(Role::SizeSource);
    }
    if ["length", "num_frames", "video_frames"]
        .iter()
        .any(|n| int_named(n))
        && outs.iter().any(|t| *t == "LATENT" || t.contains("EMBEDS"))
    {
        roles.push(Role::FrameSource);
    }
    if def.visible_inputs().count() == 1
        && int_named("value")
        && outs.len() == 1
        && matches!(out0, "INT" | "FLOAT")
    {
        roles.push(Role::Constant);
    }
}

fn is_widget_type(t: &str) -> bool {
    matches!(t, "INT" | "FLOAT" | "STRING" | "BOOLEAN")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs() -> NodeDefs {
        NodeDefs::from_value(&json!({
            "MyLora": {"input": {"required": {"model": ["MODEL"], "clip": ["CLIP"], "lora_name": [["a.safetensors"]], "strength": ["FLOAT", {}]}}, "output": ["MODEL", "CLIP"]},
            "MyLoader": {"input": {"required": {"unet_name": [["x.safetensors"]]}}, "output": ["MODEL"]},
            "MyCache": {"input": {"required": {"model": ["MODEL"], "thresh": ["FLOAT", {}]}}, "output": ["MODEL"]},
            "MyPatch": {"input": {"required": {"model": ["MODEL"], "shift": ["FLOAT", {}]}}, "output": ["MODEL"]},
            "MyLatent": {"input": {"required": {"width": ["INT", {}], "height": ["INT", {}], "length": ["INT", {}]}}, "output": ["LATENT"]},
            "MyInt": {"input": {"required": {"value": ["INT", {}]}}, "output": ["INT"]},
            "MySave": {"input": {"required": {"images": ["IMAGE"]}}, "output": [], "output_node": true}
        }))
        .unwrap()
    }

    #[test]
    fn builtin_classes_have_their_roles() {
        let c = Catalog::builtin();
        let d = NodeDefs::default();
        assert!(c.has("LoraLoaderModelOnly", Role::Lora, &d));
        assert!(c.has("Power Lora Loader (rgthree)", Role::Lora, &d));
        assert!(c.has("UnetLoaderGGUF", Role::DiffusionLoader, &d));
        assert!(c.has("TeaCache", Role::StepCache, &d));
        assert!(c.has("PathchSageAttentionKJ", Role::Attention, &d));
        assert!(c.has("WanVideoBlockSwap", Role::MemorySaver, &d));
        assert!(c.has("RIFE VFI", Role::FrameInterpolation, &d));
        assert!(c.has("EmptyHunyuanLatentVideo", Role::FrameSource, &d));
        assert!(!c.has("ModelSamplingSD3", Role::StepCache, &d));
    }

    #[test]
    fn latent_frames_follow_the_upstream_formulas() {
        // Wan, HunyuanVideo: ((length - 1) // 4) + 1.
        assert_eq!(Temporal::Stride(4).latent_frames(81), 21);
        assert_eq!(Temporal::Stride(4).latent_frames(5), 2);
        assert_eq!(Temporal::Stride(4).latent_frames(1), 1);
        assert_eq!(Temporal::Stride(4).latent_frames(50), 13);
        // LTXV: 8; Mochi: 6; SVD: none.
        assert_eq!(Temporal::Stride(8).latent_frames(97), 13);
        assert_eq!(Temporal::Stride(6).latent_frames(25), 5);
        assert_eq!(Temporal::Stride(1).latent_frames(14), 14);
        assert_eq!(Temporal::Stride(4).latent_frames(0), 0);
        // MiniMax H3: 124 is on the 17k + 5 grid (37 latent frames); 6 snaps up to 22 (7);
        // at most 5 frames: 2.
        assert_eq!(Temporal::MiniMaxH3.latent_frames(124), 37);
        assert_eq!(Temporal::MiniMaxH3.latent_frames(6), 7);
        assert_eq!(Temporal::MiniMaxH3.latent_frames(22), 7);
        assert_eq!(Temporal::MiniMaxH3.latent_frames(1), 2);
        assert_eq!(Temporal::MiniMaxH3.latent_frames(5), 2);
    }

    #[test]
    fn every_builtin_frame_source_has_its_temporal_compression() {
        let c = Catalog::builtin();
        let d = NodeDefs::default();
        for (class, roles) in builtin::CLASSES {
            if roles.contains(&Role::FrameSource) {
                assert!(
                    temporal(class).is_some(),
                    "{class}: add its latent frame count from the upstream source to TEMPORAL"
                );
            }
        }
        for (class, _) in builtin::TEMPORAL {
            assert!(
                c.has(class, Role::FrameSource, &d),
                "{class} is no frame source"
            );
        }
        assert_eq!(temporal("WanImageToVideo"), Some(Temporal::Stride(4)));
        assert_eq!(temporal("EmptyLTXVLatentVideo"), Some(Temporal::Stride(8)));
        assert_eq!(temporal("MyLatent"), None);
    }

    #[test]
    fn unknown_classes_fall_back_on_their_signature() {
        let c = Catalog::builtin();
        let d = defs();
        assert_eq!(c.roles("MyLora", &d), vec![Role::Lora]);
        assert_eq!(c.roles("MyLoader", &d), vec![Role::DiffusionLoader]);
        assert_eq!(c.roles("MyCache", &d), vec![Role::StepCache]);
        assert!(c.roles("MyPatch", &d).is_empty());
        assert_eq!(
            c.roles("MyLatent", &d),
            vec![Role::SizeSource, Role::FrameSource]
        );
        assert_eq!(c.roles("MyInt", &d), vec![Role::Constant]);
        assert_eq!(c.roles("MySave", &d), vec![Role::Output]);
        assert!(c.roles("NotThere", &d).is_empty());
    }

    #[test]
    fn user_file_declares_and_overrides_roles() {
        let user = Catalog::from_toml_str(
            "[classes]\n\"MyPatch\" = [\"step_cache\"]\n\"TeaCache\" = []\n",
            "mine.toml",
        )
        .unwrap();
        let c = Catalog::builtin().with_user(user);
        let d = defs();
        assert_eq!(c.roles("MyPatch", &d), vec![Role::StepCache]);
        assert!(c.roles("TeaCache", &d).is_empty());
        let err = Catalog::from_toml_str("[classes]\nX = [\"lorra\"]\n", "bad.toml").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("bad.toml") && msg.contains("step_cache"),
            "{msg}"
        );
    }
}
