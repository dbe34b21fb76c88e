//! Everything that writes a report format: each format is one file implementing
//! [`ReportFormat`](super::ReportFormat) — [`markdown`] (`report.md`) and [`json`]
//! (`report.json`) — and the Markdown's parts live beside it: [`md`] (escaping, tables, fences,
//! `<details>`, the well-formedness check), [`chart`] (Mermaid charts), [`console`] (the server
//! console excerpt), [`bug_form`] (the block for ComfyUI's bug form that report.md starts
//! with), [`memory`] (the per-step models-loaded cells and list), [`mitigations`] ("Mitigations
//! tried") and [`budget`]
//! (keeping `report.md` under GitHub's issue-body limit). The rest of `report/` builds the
//! [`Report`](super::Report) value and writes no Markdown.

pub(crate) mod attachments;
pub mod budget;
pub(crate) mod bug_form;
pub mod chart;
pub mod console;
pub(crate) mod environment;
pub(crate) mod evidence;
pub mod json;
pub(crate) mod ladder;
pub mod markdown;
pub mod md;
pub(crate) mod memory;
pub(crate) mod mitigations;
pub(crate) mod sections;
