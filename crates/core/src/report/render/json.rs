//! `report.json`: the whole report as pretty-printed JSON (schema in docs/report.md).

use crate::report::model::Report;
use crate::report::ReportFormat;

/// The JSON format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl ReportFormat for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn render(&self, report: &Report) -> anyhow::Result<String> {
        let mut text = serde_json::to_string_pretty(report)?;
        text.push('\n');
        Ok(text)
    }
}
