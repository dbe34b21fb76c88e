//! The `plant=STAGE:CONDITION` fault: a CUDA OOM planted at one stage of a run once a condition
//! holds in the submitted graph, so a benchmark or test can put a failure of any stage at any
//! step of a ladder. What it owns: the fault's syntax ([`Plant::parse`], `Display`), which node
//! it hits ([`Plant::fires`]), and a dry evaluation of a prompt that says how much work each
//! stage does ([`stage_pixels`]) for choosing a threshold. The error itself is the memory
//! model's own for that stage (`Gpu::planted`), so it reads like any other simulated OOM.

use super::memory::{Stage, Work};
use super::nodes::{evaluate, Inputs, Val};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// When a planted failure fires.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// The submitted graph has at least `count` nodes of class `class` (`class=NAME` or
    /// `class=NAME>=K`).
    Class { class: String, count: u64 },
    /// The stage's node works on at least this many pixels (`pixels>=N`): latent or image
    /// width × height × frames × batch ([`work_pixels`]).
    Pixels(u64),
}

/// A planted failure: the stage it fails and the condition that plants it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plant {
    /// `sample_first`, `sample_middle`, `decode` or `postprocess`.
    pub stage: Stage,
    pub when: Condition,
}

/// The stages a failure can be planted at, by their names in the fault list.
const STAGES: &[Stage] = &[
    Stage::SampleFirst,
    Stage::SampleMiddle,
    Stage::Decode,
    Stage::Postprocess,
];

impl Plant {
    /// Parses the argument of `plant=`: `STAGE:class=NAME[>=K]` or `STAGE:pixels>=N`.
    pub fn parse(arg: &str) -> Result<Plant, String> {
        let usage = "plant=STAGE:class=NAME[>=K] or plant=STAGE:pixels>=N, STAGE one of \
                     sample_first, sample_middle, decode, postprocess";
        let (stage, cond) = arg
            .split_once(':')
            .ok_or_else(|| format!("--faults: plant={arg}: expected {usage}"))?;
        let stage = STAGES
            .iter()
            .copied()
            .find(|s| s.as_str() == stage.trim())
            .ok_or_else(|| format!("--faults: plant={arg}: unknown stage; expected {usage}"))?;
        let cond = cond.trim();
        let when = if let Some(class) = cond.strip_prefix("class=") {
            let (class, count) = match class.rsplit_once(">=") {
                Some((c, k)) => (
                    c,
                    k.trim().parse().ok().filter(|k| *k > 0).ok_or_else(|| {
                        format!("--faults: plant={arg}: {k} is not a node count (≥ 1)")
                    })?,
                ),
                None => (class, 1),
            };
            let class = class.trim();
            if class.is_empty() {
                return Err(format!("--faults: plant={arg}: no class; expected {usage}"));
            }
            Condition::Class {
                class: class.to_string(),
                count,
            }
        } else if let Some(n) = cond.strip_prefix("pixels>=") {
            Condition::Pixels(
                n.trim()
                    .parse()
                    .map_err(|_| format!("--faults: plant={arg}: {n} is not a number of pixels"))?,
            )
        } else {
            return Err(format!("--faults: plant={arg}: expected {usage}"));
        };
        Ok(Plant { stage, when })
    }

    /// Whether the failure is planted at a node doing `work` in `prompt`: the node is of the
    /// plant's stage and the condition holds (for `pixels`, on this node's own work).
    pub fn fires(&self, prompt: &Map<String, Value>, work: &Work) -> bool {
        let Some(pixels) = work_pixels(self.stage, work) else {
            return false;
        };
        match &self.when {
            Condition::Class { class, count } => {
                let n = prompt
                    .values()
                    .filter(|n| n["class_type"].as_str() == Some(class))
                    .count() as u64;
                n >= *count
            }
            Condition::Pixels(min) => pixels >= *min,
        }
    }
}

impl std::fmt::Display for Plant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.when {
            Condition::Class { class, count: 1 } => {
                write!(f, "{}:class={class}", self.stage.as_str())
            }
            Condition::Class { class, count } => {
                write!(f, "{}:class={class}>={count}", self.stage.as_str())
            }
            Condition::Pixels(n) => write!(f, "{}:pixels>={n}", self.stage.as_str()),
        }
    }
}

/// The pixels a node doing `work` works on when it belongs to `stage` (None otherwise): a
/// sampler its latent (width × height × frames × batch, in image pixels), a VAE decode its
/// output, a post-processing node (model upscale, frame interpolation) its input images.
pub fn work_pixels(stage: Stage, work: &Work) -> Option<u64> {
    match (stage, work) {
        (Stage::SampleFirst | Stage::SampleMiddle, Work::Sample { latent, .. }) => {
            Some(latent.width * latent.height * latent.frames.max(1) * latent.batch.max(1))
        }
        (
            Stage::Decode,
            Work::Decode {
                width,
                height,
                frames,
                batch,
                encode: false,
                ..
            },
        ) => Some(width * height * frames.max(&1) * batch.max(&1)),
        (Stage::Postprocess, Work::Upscale { image, .. })
        | (Stage::Postprocess, Work::Interpolate { image, .. }) => {
            Some(image.width * image.height * image.count.max(1))
        }
        _ => None,
    }
}

/// The largest [`work_pixels`] of any node of `stage` in `prompt` (an API prompt,
/// `{id: {class_type, inputs}}`), 0 when no node of the prompt is of that stage. A dry
/// evaluation: every node's values as the worker computes them, nothing run.
pub fn stage_pixels(prompt: &Value, stage: Stage) -> u64 {
    works(prompt)
        .values()
        .filter_map(|w| work_pixels(stage, w))
        .max()
        .unwrap_or(0)
}

/// The work of every node of `prompt`, its inputs evaluated first (depth first), as the worker
/// would compute it; nothing runs.
fn works(prompt: &Value) -> HashMap<String, Work> {
    let mut out = HashMap::new();
    if let Some(prompt) = prompt.as_object() {
        let mut values = HashMap::new();
        let mut visiting = HashSet::new();
        for id in prompt.keys() {
            eval(id, prompt, &mut values, &mut visiting, &mut out);
        }
    }
    out
}

/// Evaluates node `id` after its inputs, keeping its outputs and work.
fn eval(
    id: &str,
    prompt: &Map<String, Value>,
    values: &mut HashMap<String, Vec<Val>>,
    visiting: &mut HashSet<String>,
    works: &mut HashMap<String, Work>,
) {
    if values.contains_key(id) || !visiting.insert(id.to_string()) {
        return;
    }
    let Some(node) = prompt.get(id) else {
        return;
    };
    let mut lits = Map::new();
    let mut links = HashMap::new();
    for (name, v) in node["inputs"].as_object().into_iter().flatten() {
        match v.as_array().filter(|a| a.len() == 2) {
            Some(a) => {
                let src = super::validate::py_str(&a[0]);
                eval(&src, prompt, values, visiting, works);
                let slot = a[1].as_u64().unwrap_or(0) as usize;
                if let Some(val) = values.get(&src).and_then(|o| o.get(slot)) {
                    links.insert(name.clone(), val.clone());
                }
            }
            None => {
                lits.insert(name.clone(), v.clone());
            }
        }
    }
    let e = evaluate(&Inputs {
        class: node["class_type"].as_str().unwrap_or(""),
        lits: &lits,
        links: &links,
    });
    works.insert(id.to_string(), e.work);
    values.insert(id.to_string(), e.outputs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plants_parse_and_print_back() {
        let p = Plant::parse("decode:class=LoraLoaderModelOnly").unwrap();
        assert_eq!(p.stage, Stage::Decode);
        assert_eq!(
            p.when,
            Condition::Class {
                class: "LoraLoaderModelOnly".into(),
                count: 1
            }
        );
        assert_eq!(p.to_string(), "decode:class=LoraLoaderModelOnly");
        // A class name with spaces and brackets, and a count.
        let p = Plant::parse("sample_middle:class=Power Lora Loader (rgthree)>=2").unwrap();
        assert_eq!(p.stage, Stage::SampleMiddle);
        assert_eq!(
            p.when,
            Condition::Class {
                class: "Power Lora Loader (rgthree)".into(),
                count: 2
            }
        );
        assert_eq!(Plant::parse(&p.to_string()).unwrap(), p);
        let p = Plant::parse("postprocess:pixels>=786432").unwrap();
        assert_eq!(
            (p.stage, &p.when),
            (Stage::Postprocess, &Condition::Pixels(786432))
        );
        assert_eq!(p.to_string(), "postprocess:pixels>=786432");
        assert_eq!(
            Plant::parse("sample_first:pixels>=1").unwrap().stage,
            Stage::SampleFirst
        );
        for bad in [
            "decode",
            "load:class=X",
            "decode:class=",
            "decode:class=X>=0",
            "decode:class=X>=many",
            "decode:pixels>=lots",
            "decode:pixels=5",
            "decode:steps>=3",
        ] {
            assert!(Plant::parse(bad).is_err(), "{bad}");
        }
    }

    /// SD1.5 at `w`×`h`, batch `b`, with an upscaler when `upscale`.
    fn sd15(w: u64, h: u64, b: u64, upscale: bool) -> Value {
        let mut p = json!({
            "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
            "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a"}},
            "5": {"class_type": "EmptyLatentImage", "inputs": {"width": w, "height": h, "batch_size": b}},
            "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0],
                "latent_image": ["5", 0], "seed": 1, "steps": 20, "cfg": 7.0, "sampler_name": "euler",
                "scheduler": "normal", "denoise": 1.0}},
            "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
            "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "x"}}
        });
        if upscale {
            p["11"] = json!({"class_type": "UpscaleModelLoader", "inputs": {"model_name": "4x-UltraSharp.pth"}});
            p["12"] = json!({"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": ["11", 0], "image": ["8", 0]}});
            p["9"]["inputs"]["images"] = json!(["12", 0]);
        }
        p
    }

    #[test]
    fn the_dry_evaluation_gives_each_stages_pixels() {
        let p = sd15(512, 768, 2, false);
        assert_eq!(stage_pixels(&p, Stage::SampleFirst), 512 * 768 * 2);
        assert_eq!(stage_pixels(&p, Stage::SampleMiddle), 512 * 768 * 2);
        assert_eq!(stage_pixels(&p, Stage::Decode), 512 * 768 * 2);
        assert_eq!(stage_pixels(&p, Stage::Postprocess), 0);
        let p = sd15(512, 512, 1, true);
        assert_eq!(stage_pixels(&p, Stage::Postprocess), 512 * 512);
    }

    #[test]
    fn a_plant_fires_at_its_stage_when_its_condition_holds() {
        let value = sd15(512, 512, 1, true);
        let prompt = value.as_object().unwrap();
        let works = works(&value);
        let run = |id: &str| works[id].clone();
        let (sampler, decode, upscale) = (run("3"), run("8"), run("12"));
        let at = |s: &str| Plant::parse(s).unwrap();
        // A class present: only the nodes of the plant's stage.
        let p = at("decode:class=ImageUpscaleWithModel");
        assert!(p.fires(prompt, &decode));
        assert!(!p.fires(prompt, &sampler) && !p.fires(prompt, &upscale));
        assert!(!at("decode:class=LoraLoader").fires(prompt, &decode));
        assert!(!at("decode:class=ImageUpscaleWithModel>=2").fires(prompt, &decode));
        // Both sampler stages fire at the sampler.
        assert!(at("sample_first:class=KSampler").fires(prompt, &sampler));
        assert!(at("sample_middle:class=KSampler").fires(prompt, &sampler));
        // A threshold on the node's own pixels.
        assert!(at("postprocess:pixels>=262144").fires(prompt, &upscale));
        assert!(!at("postprocess:pixels>=262145").fires(prompt, &upscale));
    }
}
