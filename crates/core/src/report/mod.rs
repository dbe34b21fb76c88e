//! The increment report: `report.md` (for a GitHub issue) and `report.json` (for machines),
//! written into the session folder after every run and on demand by `comfy-bisect report`.
//!
//! `load` reads the session folder; `build` turns it into one [`Report`] value, with one
//! `workflow_report` per workflow, its `verdict` and its `search_steps` account (which runs
//! sampled fewer steps, how the boundary was confirmed at full steps) and its peak-memory
//! `chart` (Mermaid, kept in report.json); [`redact`] removes what must not be
//! published; `render` writes the formats, each one file implementing [`ReportFormat`]
//! ([`markdown`], [`json`]), with the Markdown's helpers beside it. Adding a format is one new
//! file in `render/` and one entry in `formats`.

pub(crate) mod bug_form;
pub mod build;
pub mod bundle;
pub(crate) mod chart;
pub(crate) mod environment;
pub mod load;
pub(crate) mod memory;
pub(crate) mod mitigations;
pub(crate) mod model;
pub(crate) mod naming;
pub mod redact;
pub(crate) mod render;
pub(crate) mod search_steps;
pub(crate) mod verdict;
pub(crate) mod workflow_report;

pub use build::build;
pub use load::{load, SessionData};
pub use model::{Report, SCHEMA_VERSION};
pub use render::json::Json;
pub use render::markdown::Markdown;
pub use render::{budget, console, json, markdown, md};

use anyhow::Context;
use std::path::{Path, PathBuf};

/// One output format: renders a [`Report`] to text.
pub trait ReportFormat {
    /// The name `--format` takes (`md`, `json`).
    fn name(&self) -> &'static str;
    /// The file written into the session folder (`report.md`).
    fn file_name(&self) -> &'static str;
    /// Renders the report.
    fn render(&self, report: &Report) -> anyhow::Result<String>;
}

/// Every format, in the order the files are written.
pub(crate) fn formats() -> Vec<Box<dyn ReportFormat>> {
    vec![Box::new(Markdown), Box::new(Json)]
}

/// The format called `name` (`md`/`markdown` or `json`).
pub fn format_by_name(name: &str) -> Option<Box<dyn ReportFormat>> {
    let name = if name.eq_ignore_ascii_case("markdown") {
        "md"
    } else {
        name
    };
    formats()
        .into_iter()
        .find(|f| f.name().eq_ignore_ascii_case(name))
}

/// Folder inside the session folder for redacted copies of workflow files.
pub(crate) const SHAREABLE_DIR: &str = "shareable";

/// Reads the session folder and builds its report, redacted when `redact` is true. With
/// redaction, the minimal passing and first failing workflows get a redacted copy under
/// `<session>/shareable/` when they contain anything to redact (`write_copies`).
pub fn session_report(
    session_dir: &Path,
    redact: bool,
    write_copies: bool,
) -> anyhow::Result<Report> {
    let data = load(session_dir)?;
    let mut report = build(&data);
    if redact {
        if write_copies {
            write_shareable_copies(&mut report)?;
        }
        report = redact_report(&report)?;
    }
    Ok(report)
}

/// Writes `report.md` and `report.json` into the session folder (atomically) and returns their
/// paths. The session driver calls this after every run, so a session killed at any point still
/// leaves a usable report.
pub fn write_session_reports(session_dir: &Path, redact: bool) -> anyhow::Result<Vec<PathBuf>> {
    let report = session_report(session_dir, redact, redact)?;
    let mut written = Vec::new();
    for format in formats() {
        let text = format.render(&report)?;
        let path = session_dir.join(format.file_name());
        crate::session::journal::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("could not write the report file {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Returns a redacted copy of the report (see [`redact`] for the rules).
pub fn redact_report(report: &Report) -> anyhow::Result<Report> {
    let mut value = serde_json::to_value(report)?;
    let mut r = redact::Redactor::new();
    r.learn(&value);
    r.redact_value(&mut value);
    let mut out: Report = serde_json::from_value(value)
        .context("redacting the report produced an invalid report (this is a bug)")?;
    out.redacted = true;
    Ok(out)
}

/// For the minimal passing and first failing runs: when redaction changes their submitted
/// workflow (secret inputs, home paths), writes the redacted copy to
/// `<session>/shareable/<run folder>.workflow.json` and records it in the attachment.
fn write_shareable_copies(report: &mut Report) -> anyhow::Result<()> {
    let mut users = redact::Redactor::new();
    users.learn(&serde_json::to_value(&*report)?);
    for w in &mut report.workflows {
        let session_dir = PathBuf::from(&w.attachments.session_dir);
        let attachments = &mut w.attachments;
        for slot in [
            &mut attachments.minimal_passing,
            &mut attachments.first_failing,
        ] {
            let Some(run) = slot.as_mut() else { continue };
            let source = PathBuf::from(&run.workflow);
            let Ok(text) = std::fs::read_to_string(&source) else {
                continue;
            };
            let Ok(original) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let mut copy = original.clone();
            let mut r = users.clone();
            r.learn(&copy);
            r.redact_value(&mut copy);
            if copy == original {
                continue;
            }
            let name = Path::new(&run.run_dir)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| run.run_id.clone());
            let target = session_dir
                .join(SHAREABLE_DIR)
                .join(format!("{name}.workflow.json"));
            let mut out = serde_json::to_string_pretty(&copy)?;
            out.push('\n');
            crate::session::journal::write_atomic(&target, out.as_bytes()).with_context(|| {
                format!(
                    "could not write the shareable workflow copy {}",
                    target.display()
                )
            })?;
            run.shareable_workflow = Some(target.to_string_lossy().into_owned());
        }
    }
    Ok(())
}
