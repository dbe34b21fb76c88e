//! Everything that writes a report format: each format is one file implementing
//! [`ReportFormat`](super::ReportFormat) — [`markdown`] (`report.md`) and [`json`]
//! (`report.json`) — and the Markdown's parts live beside it, one file per job: [`bug_form`]
//! (the block for ComfyUI's bug form that report.md starts with), [`environment`], [`ladder`]
//! (the full table and its notes), [`evidence`] (the failing run), [`console`] (its server
//! console excerpt), [`sections`] (preflight, repeats, controls, the model files),
//! [`mitigations`] ("Mitigations tried"),
//! [`attachments`], [`json_only`] (what report.md leaves to report.json and the line that
//! says so), [`md`] (escaping, tables, fences, `<details>`, the well-formedness check) and
//! [`budget`] (keeping `report.md` under GitHub's issue-body limit). The rest of `report/`
//! builds the [`Report`](super::Report) value (with the Mermaid chart report.json keeps) and
//! writes no Markdown.

pub(crate) mod attachments;
pub mod budget;
pub(crate) mod bug_form;
pub mod console;
pub(crate) mod environment;
pub(crate) mod evidence;
pub mod json;
pub(crate) mod json_only;
pub(crate) mod ladder;
pub mod markdown;
pub mod md;
pub(crate) mod mitigations;
pub(crate) mod sections;
