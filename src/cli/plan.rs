//! `comfy-bisect plan WORKFLOW`: the minimal variant and the increment ladder, printed and
//! optionally written as `DIR/plan.json` plus one API-format file per step.

use super::common::{print_error, read_loaded, DefsArgs};
use crate::catalog::Catalog;
use crate::error::exit;
use crate::ladder::{plan, Increment, Plan, PlanOptions};
use crate::nodedefs::NodeDefs;
use crate::workflow::ui::{write_variant, Converted};
use std::path::{Path, PathBuf};

/// Arguments of `plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The failing target workflow (API format, or a POST /prompt body).
    pub workflow: PathBuf,
    #[command(flatten)]
    pub defs: DefsArgs,
    /// Write DIR/plan.json and one workflow per step (DIR/00-minimal.json, DIR/01-….json…).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print plan.json to stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Short side of the minimal resolution in pixels (0 = each node's declared minimum).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub min_resolution: u32,
    /// Least frame count of the minimal variant (rounded up to the node's grid, e.g. 4n+1).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub min_frames: u32,
    /// Also cap sampling steps at N in the minimal variant (adds a `steps` increment).
    #[arg(long, value_name = "N")]
    pub min_steps: Option<u32>,
    /// Ladder order, comma-separated (unlisted increments follow in the default order):
    /// resolution,frames,batch,models,lora,quantization,cache,postprocess,steps.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub order: Vec<Increment>,
    /// Keep these increments at the target value in every variant (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "INCREMENT")]
    pub keep: Vec<Increment>,
    /// TOML file declaring roles of custom node classes (see docs/ladder.md).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
}

impl clap::ValueEnum for Increment {
    fn value_variants<'a>() -> &'a [Self] {
        &Increment::LADDER
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

impl Args {
    /// The planning options these arguments ask for.
    pub fn options(&self) -> PlanOptions {
        let mut order = self.order.clone();
        for inc in Increment::LADDER {
            if !order.contains(&inc) {
                order.push(inc);
            }
        }
        PlanOptions {
            min_resolution: self.min_resolution,
            min_frames: self.min_frames,
            min_steps: self.min_steps,
            order,
            keep: self.keep.clone(),
        }
    }
}

/// Plans the ladder; exit 0 on success, 2 on input errors, 3 when the server is unreachable.
pub fn run(args: Args, server: &str) -> u8 {
    let catalog = match &args.catalog {
        Some(path) => match Catalog::load_file(path) {
            Ok(user) => Catalog::builtin().with_user(user),
            Err(e) => {
                print_error(&e);
                return exit::USAGE;
            }
        },
        None => Catalog::builtin(),
    };
    let defs = match args.defs.load(server) {
        Ok(d) => d,
        Err(e) => {
            print_error(&e);
            return if args.defs.object_info.is_empty() {
                exit::UNREACHABLE
            } else {
                exit::USAGE
            };
        }
    };
    let loaded = match read_loaded(&args.workflow, &defs) {
        Ok(l) => l,
        Err(e) => {
            print_error(&e);
            return exit::USAGE;
        }
    };
    let target = &loaded.workflow;
    let planned = match plan(target, &defs, &catalog, &args.options()) {
        Ok(p) => p,
        Err(e) => {
            print_error(&format!("{}: {e}", args.workflow.display()));
            return exit::USAGE;
        }
    };
    if let Some(dir) = &args.out {
        let ui = loaded.ui.as_ref().map(|(doc, converted)| UiSource {
            document: doc,
            converted,
            defs: &defs,
        });
        if let Err(e) = write_plan(&planned, dir, ui) {
            print_error(&e);
            return exit::USAGE;
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&planned.to_json()).expect("JSON values serialize")
        );
    } else {
        print!("{}", render(&planned, &args.workflow));
    }
    exit::OK
}

/// The UI workflow a plan was made from, for writing each step back as a UI file.
pub struct UiSource<'a> {
    /// The original UI document.
    pub document: &'a serde_json::Value,
    /// Its conversion (provenance for the write-back).
    pub converted: &'a Converted,
    /// The node definitions it was converted with.
    pub defs: &'a NodeDefs,
}

/// Writes `dir/plan.json` and every step's workflow file; with a UI source also
/// `NN-<increment>.ui.json`, the original UI file with the same edits made the UI way (a step
/// that has no faithful UI form gets a warning on stderr instead).
pub fn write_plan(planned: &Plan, dir: &Path, ui: Option<UiSource>) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output folder '{}': {e}", dir.display()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write '{}': {e}", path.display()))
    };
    for step in &planned.steps {
        write(&step.file, step.workflow.to_pretty_json() + "\n")?;
        if let Some(ui) = &ui {
            match write_variant(ui.document, ui.converted, &step.edits, ui.defs) {
                Ok(doc) => write(
                    &ui_file_name(&step.file),
                    serde_json::to_string_pretty(&doc).expect("JSON values serialize") + "\n",
                )?,
                Err(e) => eprintln!(
                    "warning: step {} ({}) has no faithful UI form, only the API file is written: {e}",
                    step.index,
                    step.increment.name()
                ),
            }
        }
    }
    write(
        "plan.json",
        serde_json::to_string_pretty(&planned.to_json()).expect("JSON values serialize") + "\n",
    )
}

/// `03-lora.json` → `03-lora.ui.json`.
pub fn ui_file_name(api_file: &str) -> String {
    match api_file.strip_suffix(".json") {
        Some(stem) => format!("{stem}.ui.json"),
        None => format!("{api_file}.ui.json"),
    }
}

/// The human listing: one line per step, then what is not separable and what is kept.
pub fn render(planned: &Plan, path: &Path) -> String {
    let mut out = format!(
        "{}: {} step(s), target {}\n",
        path.display(),
        planned.steps.len(),
        &planned.target_sha256[..12]
    );
    for step in &planned.steps {
        out.push_str(&format!(
            "  {:>2} {:<13} {}  {}\n",
            step.index,
            step.increment.name(),
            &step.sha256[..12],
            step.describe()
        ));
    }
    if planned.steps.len() == 1 {
        out.push_str("  nothing to reduce: the minimal variant is the target\n");
    }
    if !planned.not_separable.is_empty() {
        out.push_str("not separable:\n");
        for n in &planned.not_separable {
            out.push_str(&format!(
                "  {} (nodes {}): {}\n",
                n.increment,
                n.nodes.join(", "),
                n.reason
            ));
        }
    }
    if !planned.kept.is_empty() {
        out.push_str("kept in every variant (memory savers):\n");
        for k in &planned.kept {
            out.push_str(&format!("  {} {}: {}\n", k.node, k.class_type, k.what));
        }
    }
    out
}
