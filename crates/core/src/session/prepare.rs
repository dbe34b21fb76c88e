//! Preparing workflows for a session, before any GPU time: validate the target against the
//! server's node definitions, plan the ladder, build the control variants, and validate every
//! variant. Unknown node classes and missing model files become a per-workflow list of what to
//! install (the `preflight_failed` verdict).

use super::journal::{MissingModel, Verdict};
use super::setup::{PreparedStep, PreparedWorkflow};
use crate::catalog::Catalog;
use crate::hashing::model_references;
use crate::ladder::{plan, PlanOptions};
use crate::nodedefs::NodeDefs;
use crate::workflow::ui::{write_variant, Converted};
use crate::workflow::validate::{validate, ProblemKind};
use crate::workflow::Workflow;
use serde_json::Value;
use std::collections::BTreeSet;

/// What preflight found wrong with one workflow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Problems {
    /// Node classes the server does not know.
    pub unknown_nodes: BTreeSet<String>,
    /// Model files the server does not list.
    pub missing_models: Vec<MissingModel>,
    /// Anything else, in words (with the variant it was found in).
    pub other: Vec<String>,
}

impl Problems {
    /// True when nothing was found.
    pub(crate) fn is_empty(&self) -> bool {
        self.unknown_nodes.is_empty() && self.missing_models.is_empty() && self.other.is_empty()
    }

    /// The verdict, when something was found.
    pub(crate) fn verdict(&self) -> Option<Verdict> {
        (!self.is_empty()).then(|| Verdict::PreflightFailed {
            unknown_nodes: self.unknown_nodes.iter().cloned().collect(),
            missing_models: self.missing_models.clone(),
            other: self.other.clone(),
        })
    }

    /// Adds the validation findings of `workflow` (called `label` in messages).
    pub(crate) fn check(&mut self, label: &str, workflow: &Workflow, defs: &NodeDefs) {
        let report = validate(workflow, defs);
        let refs = model_references(&workflow.to_value());
        for p in &report.problems {
            match p.kind {
                ProblemKind::UnknownClass => {
                    if let Some(c) = &p.class_type {
                        self.unknown_nodes.insert(c.clone());
                    }
                }
                ProblemKind::MissingModelFile => {
                    let file = p
                        .value
                        .as_ref()
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let folder = refs
                        .iter()
                        .find(|r| {
                            Some(&r.node_id) == p.node.as_ref()
                                && Some(&r.input) == p.input.as_ref()
                        })
                        .and_then(|r| r.folders.first().copied())
                        .unwrap_or_default();
                    let entry = MissingModel {
                        file,
                        folder: folder.to_string(),
                        node: p.node.clone(),
                        class_type: p.class_type.clone(),
                        input: p.input.clone(),
                    };
                    if !self
                        .missing_models
                        .iter()
                        .any(|m| m.file == entry.file && m.node == entry.node)
                    {
                        self.missing_models.push(entry);
                    }
                }
                _ => {
                    let text = format!("{label}: {}", p.message);
                    if !self.other.contains(&text) {
                        self.other.push(text);
                    }
                }
            }
        }
    }

    /// The list for people: what to install, per kind.
    pub fn render(&self, workflow: &str) -> String {
        let mut out = format!("{workflow}: preflight found problems; nothing was run\n");
        if !self.unknown_nodes.is_empty() {
            out.push_str("  node classes the server does not know (install the custom nodes that provide them):\n");
            for c in &self.unknown_nodes {
                out.push_str(&format!("    - {c}\n"));
            }
        }
        if !self.missing_models.is_empty() {
            out.push_str("  model files the server does not have (put them under ComfyUI's models/ folder):\n");
            for m in &self.missing_models {
                out.push_str(&format!(
                    "    - models/{}/{}  (node {} {}, input {})\n",
                    if m.folder.is_empty() { "?" } else { &m.folder },
                    if m.file.is_empty() { "?" } else { &m.file },
                    m.node.as_deref().unwrap_or("?"),
                    m.class_type.as_deref().unwrap_or("?"),
                    m.input.as_deref().unwrap_or("?"),
                ));
            }
        }
        if !self.other.is_empty() {
            out.push_str("  other problems:\n");
            for o in &self.other {
                out.push_str(&format!("    - {o}\n"));
            }
        }
        out
    }
}

/// How ladders are planned.
#[derive(Debug, Clone)]
pub struct LadderConfig {
    /// Node roles.
    pub catalog: Catalog,
    /// Planning options.
    pub options: PlanOptions,
    /// Also build the control variants (`--controls`).
    pub controls: bool,
}

/// What to do when a session's recorded options cannot be read.
const OTHER_VERSION: &str = " (the session was started by another comfy-bisect version: resume it with that version, or bisect the workflow again)";

impl LadderConfig {
    /// The configuration a session was started with, from its journal: the ladder options as
    /// recorded (`SessionOptions::plan_args`, `--min-resolution=256` …, `--catalog=FILE`) and
    /// `--increments-alone`. Error: an option this version cannot read, or the `--catalog`
    /// file can no longer be read (what, and how to fix it).
    pub fn from_record(plan_args: &[String], controls: bool) -> Result<LadderConfig, String> {
        let mut options = PlanOptions::default();
        let mut order = Vec::new();
        let mut catalog = Catalog::builtin();
        let number = |flag: &str, v: &str| {
            v.parse::<u32>().map_err(|_| {
                format!("the session's ladder option {flag}={v} is not a number{OTHER_VERSION}")
            })
        };
        let increments = |v: &str| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<crate::ladder::Increment>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the session's ladder option: {e}{OTHER_VERSION}"))
        };
        for arg in plan_args {
            let (flag, value) = arg.split_once('=').unwrap_or((arg.as_str(), ""));
            match flag {
                "--min-resolution" => options.min_resolution = number(flag, value)?,
                "--min-frames" => options.min_frames = number(flag, value)?,
                "--min-steps" => options.min_steps = Some(number(flag, value)?),
                "--order" => order = increments(value)?,
                "--keep" => options.keep = increments(value)?,
                "--catalog" => {
                    let user = Catalog::load_file(std::path::Path::new(value)).map_err(|e| {
                        format!("the session's --catalog file cannot be read: {e} (put it back where it was)")
                    })?;
                    catalog = Catalog::builtin().with_user(user);
                }
                _ => {
                    return Err(format!(
                        "the session's ladder option `{arg}` is not one this version reads{OTHER_VERSION}"
                    ))
                }
            }
        }
        options.order = full_order(&order);
        Ok(LadderConfig {
            catalog,
            options,
            controls,
        })
    }
}

/// The ladder order of a plan: the increments as given (`--order`), then the others in the
/// default order.
pub(crate) fn full_order(given: &[crate::ladder::Increment]) -> Vec<crate::ladder::Increment> {
    let mut order = given.to_vec();
    for inc in crate::ladder::Increment::LADDER {
        if !order.contains(&inc) {
            order.push(inc);
        }
    }
    order
}

/// A workflow ready for the session, or the problems that stop it.
#[derive(Debug)]
pub enum Prepared {
    /// Planned and every variant validated.
    Ready(Box<PreparedWorkflow>),
    /// Preflight problems (the target, a variant, or the plan itself).
    Problems {
        /// The workflow as far as it got (only the target as its single step).
        workflow: Box<PreparedWorkflow>,
        /// What was found.
        problems: Problems,
    },
}

/// Validates `target`, plans its ladder and validates every variant.
pub fn prepare(
    name: &str,
    source: &str,
    target: Workflow,
    ui: Option<&(Value, Converted)>,
    defs: &NodeDefs,
    config: &LadderConfig,
) -> Prepared {
    let bare = |target: &Workflow| PreparedWorkflow {
        name: name.to_string(),
        source: source.to_string(),
        source_file: None,
        target: target.clone(),
        steps: vec![PreparedStep {
            increment: "target".into(),
            workflow: target.clone(),
            changes: vec![],
            ui: None,
        }],
        controls: vec![],
        not_separable: vec![],
        kept: vec![],
        plan_json: None,
        ui_source: ui.map(|(doc, _)| doc.clone()),
    };
    let mut problems = Problems::default();
    problems.check("target", &target, defs);
    if !problems.is_empty() {
        return Prepared::Problems {
            workflow: Box::new(bare(&target)),
            problems,
        };
    }
    let planned = match plan(&target, defs, &config.catalog, &config.options) {
        Ok(p) => p,
        Err(e) => {
            problems.other.push(format!("cannot plan the ladder: {e}"));
            return Prepared::Problems {
                workflow: Box::new(bare(&target)),
                problems,
            };
        }
    };
    let plan_json = planned.to_json();
    let steps: Vec<PreparedStep> = planned
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| PreparedStep {
            increment: s.increment.name().to_string(),
            workflow: s.workflow.clone(),
            changes: s.changes.clone(),
            ui: ui.and_then(|(doc, converted)| {
                write_variant(doc, converted, &s.edits, defs)
                    .map_err(|e| {
                        eprintln!(
                            "{}",
                            crate::text::escape_controls(&format!(
                                "warning: {name}: step {i} ({}) has no faithful UI form; only the API variant is written: {e}",
                                s.increment.name()
                            ))
                        )
                    })
                    .ok()
            }),
        })
        .collect();
    for s in &steps {
        problems.check(&format!("step {}", s.increment), &s.workflow, defs);
    }
    let mut controls = Vec::new();
    if config.controls {
        for (k, s) in planned.steps.iter().enumerate().skip(1) {
            let mut options = config.options.clone();
            options.keep.push(s.increment);
            match plan(&target, defs, &config.catalog, &options) {
                Ok(p) => {
                    let variant = p.steps[0].workflow.clone();
                    problems.check(&format!("control {}", s.increment.name()), &variant, defs);
                    controls.push((k, s.increment.name().to_string(), variant));
                }
                Err(e) => problems.other.push(format!(
                    "cannot build the control for {}: {e}",
                    s.increment.name()
                )),
            }
        }
    }
    let workflow = PreparedWorkflow {
        name: name.to_string(),
        source: source.to_string(),
        source_file: None,
        target,
        steps,
        controls,
        not_separable: planned.not_separable.clone(),
        kept: planned.kept.clone(),
        plan_json: Some(plan_json),
        ui_source: None,
    };
    if problems.is_empty() {
        Prepared::Ready(Box::new(workflow))
    } else {
        Prepared::Problems {
            workflow: Box::new(PreparedWorkflow {
                ui_source: ui.map(|(doc, _)| doc.clone()),
                ..workflow
            }),
            problems,
        }
    }
}

/// `--search-steps`: the variant of a run at the step cap the decision asked for (see
/// [`crate::ladder::cap_steps`], with the built-in catalog's samplers and schedulers), and what
/// the run journals about it (none when nothing was above the cap: a full-step run).
pub(crate) fn reduce_steps(
    workflow: Workflow,
    cap: Option<u32>,
    path: &std::path::Path,
) -> Result<(Workflow, Option<super::journal::ReducedSteps>), super::journal::JournalError> {
    let Some(cap) = cap else {
        return Ok((workflow, None));
    };
    let (reduced, changes) =
        crate::ladder::cap_steps(&workflow, cap, &Catalog::builtin(), &NodeDefs::default())
            .map_err(|e| super::journal::JournalError::Invalid {
                path: path.to_path_buf(),
                reason: format!("cannot cap the steps at {cap} (--search-steps): {e}"),
            })?;
    if changes.is_empty() {
        return Ok((workflow, None));
    }
    Ok((reduced, Some(super::journal::ReducedSteps { cap, changes })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs() -> NodeDefs {
        NodeDefs::load_files(&[
            &format!("{}/comfyui/GET__object_info.final.json", crate::FIXTURES),
            &format!("{}/custom-nodes/object_info.custom.json", crate::FIXTURES),
        ])
        .unwrap()
    }

    fn config(controls: bool) -> LadderConfig {
        LadderConfig {
            catalog: Catalog::builtin(),
            options: PlanOptions::default(),
            controls,
        }
    }

    #[test]
    fn example_workflow_plans_with_controls_and_validates() {
        let target = crate::workflow::load_api_file(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../workflows/sd15_txt2img_lora_upscale.json"
        )))
        .unwrap();
        match prepare(
            "sd15",
            "x.json",
            target.clone(),
            None,
            &defs(),
            &config(true),
        ) {
            Prepared::Ready(w) => {
                assert!(
                    w.steps.len() >= 3,
                    "{:?}",
                    w.steps.iter().map(|s| &s.increment).collect::<Vec<_>>()
                );
                assert_eq!(w.steps.last().unwrap().workflow.sha256(), target.sha256());
                assert_eq!(w.controls.len(), w.steps.len() - 1);
                assert_eq!(w.steps[0].increment, "minimal");
            }
            Prepared::Problems { problems, .. } => panic!("{}", problems.render("sd15")),
        }
    }

    #[test]
    fn the_recorded_ladder_options_are_read_back() {
        use crate::ladder::Increment;
        let args: Vec<String> = [
            "--min-resolution=512",
            "--min-frames=5",
            "--min-steps=3",
            "--order=lora,frames",
            "--keep=batch",
        ]
        .map(String::from)
        .to_vec();
        let c = LadderConfig::from_record(&args, true).unwrap();
        assert_eq!((c.options.min_resolution, c.options.min_frames), (512, 5));
        assert_eq!(c.options.min_steps, Some(3));
        assert_eq!(&c.options.order[..2], &[Increment::Lora, Increment::Frames]);
        assert_eq!(c.options.order.len(), Increment::LADDER.len());
        assert_eq!(c.options.keep, vec![Increment::Batch]);
        assert!(c.controls);
        let gone = LadderConfig::from_record(&["--catalog=/nowhere/roles.toml".into()], false)
            .unwrap_err();
        assert!(gone.contains("--catalog file cannot be read"), "{gone}");
        let unknown = LadderConfig::from_record(&["--bogus=1".into()], false).unwrap_err();
        assert!(
            unknown.contains("`--bogus=1`") && unknown.contains("bisect the workflow again"),
            "{unknown}"
        );
        let bad = LadderConfig::from_record(&["--min-frames=many".into()], false).unwrap_err();
        assert!(
            bad.contains("--min-frames=many") && bad.contains("resume it with that version"),
            "{bad}"
        );
    }

    #[test]
    fn unknown_nodes_and_missing_models_are_listed_per_kind() {
        let target = Workflow::from_json_str(
            r#"{
              "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "not-there.safetensors"}},
              "2": {"class_type": "MadeUpNode", "inputs": {"model": ["1", 0]}},
              "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "x"}}
            }"#,
            "t.json",
        )
        .unwrap();
        match prepare("t", "t.json", target, None, &defs(), &config(false)) {
            Prepared::Problems { problems, .. } => {
                assert_eq!(
                    problems.unknown_nodes.iter().collect::<Vec<_>>(),
                    vec!["MadeUpNode"]
                );
                assert_eq!(problems.missing_models.len(), 1);
                assert_eq!(problems.missing_models[0].file, "not-there.safetensors");
                assert_eq!(problems.missing_models[0].folder, "checkpoints");
                let text = problems.render("t");
                assert!(
                    text.contains("install the custom nodes")
                        && text.contains("models/checkpoints/not-there.safetensors"),
                    "{text}"
                );
                assert!(matches!(
                    problems.verdict(),
                    Some(Verdict::PreflightFailed { .. })
                ));
            }
            Prepared::Ready(_) => panic!("should not be ready"),
        }
    }
}
