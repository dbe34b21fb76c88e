//! Everything that writes a report format: each format is one file implementing
//! [`ReportFormat`](super::ReportFormat) — [`markdown`] (`report.md`) and [`json`]
//! (`report.json`) — and the Markdown's parts live beside it: [`md`] (escaping, tables, fences,
//! `<details>`, the well-formedness check), [`chart`] (Mermaid charts), [`console`] (the server
//! console excerpt) and [`budget`] (keeping `report.md` under GitHub's issue-body limit). The
//! rest of `report/` builds the [`Report`](super::Report) value and writes no Markdown, except
//! the per-step memory cells of [`memory`](super::memory).

pub mod budget;
pub mod chart;
pub mod console;
pub mod json;
pub mod markdown;
pub mod md;
