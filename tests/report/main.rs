//! Reports and diagnoses without a server: the golden report files, Markdown, redaction, size,
//! bundles, damaged journals, the "What changed" wording, and the classifier on real and labelled
//! errors (one test binary; each feature file is a module).

#[path = "../support/records.rs"]
mod record_builders;
#[path = "../support/report.rs"]
mod report_support;

mod corrupt_files_cli;
mod diagnose_cli;
mod diagnose_fixtures;
mod diagnose_paste_noise;
mod diagnose_reports;
mod diagnose_robustness;
mod issue_sized;
mod readd_wording;
mod report;
mod report_bundle_cli;
mod report_markdown;
mod report_redact;
mod report_size;
