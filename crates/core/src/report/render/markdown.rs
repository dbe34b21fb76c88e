//! `report.md`: GitHub-flavoured Markdown meant to be pasted into an issue. This file is the
//! document: the order of its sections, the verdict and session lines, the warnings and the
//! footer, and the trimming levels it is rendered at; each section is written by its own file
//! beside it (`bug_form`, `environment`, `ladder`, `evidence`, `sections`, `mitigations`,
//! `attachments`), and `json_only` says in one line what is in report.json only.

use super::budget::{self, Limits};
use super::md::{self, code, text, text_with_code};
use super::{attachments, environment, evidence, json_only, ladder, sections};
use crate::report::model::{Report, WorkflowReport};
use crate::report::ReportFormat;

/// The Markdown format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown;

impl ReportFormat for Markdown {
    fn name(&self) -> &'static str {
        "md"
    }

    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, report: &Report) -> anyhow::Result<String> {
        Ok(render(report))
    }
}

/// Renders the whole report, within GitHub's issue-body limit: the first of the trimming levels
/// (`budget::LEVELS`) whose document fits is used; when none does, the tightest one is cut at
/// a section boundary (`budget::cut_to_fit`). The verdict and the ladder come first, so they
/// are always there.
pub fn render(report: &Report) -> String {
    let mut doc = String::new();
    for limits in &budget::LEVELS {
        doc = render_with(report, limits);
        if budget::github_length(&doc) <= budget::GITHUB_BODY_LIMIT {
            return doc;
        }
    }
    budget::cut_to_fit(&doc, budget::GITHUB_BODY_LIMIT)
}

/// Renders the whole report with the long parts trimmed to `limits`, its control and bidi
/// characters made visible ([`crate::text::escape_controls`]).
pub(crate) fn render_with(report: &Report, limits: &Limits) -> String {
    let mut out = String::new();
    let single = report.workflows.len() == 1;
    out.push_str("# comfy-bisect report\n\n");
    if report.workflows.is_empty() {
        out.push_str("No workflow has been run in this session yet.\n\n");
    }
    for w in &report.workflows {
        let sentence = w.verdict.sentence(&|s: &str| md::bold(s));
        if single {
            out.push_str(&format!("**Verdict:** {sentence}\n\n"));
        } else {
            out.push_str(&format!("- {}: {sentence}\n", code(&w.name)));
        }
    }
    if !single && !report.workflows.is_empty() {
        out.push('\n');
    }
    let degraded = report.workflows.iter().any(|w| {
        w.verdict.first_pressure_step.is_some() || w.verdict.first_fallback_step.is_some()
    });
    if degraded && !report.settings.strict {
        out.push_str(
            "A pass under memory pressure or through a memory fallback counted as passed in \
             this session; bisect again with `--strict` to count it as a failure and find the \
             first one.\n\n",
        );
    }
    out.push_str(&meta_line(report));
    out.push_str("\n\n");
    for w in &report.workflows {
        let title = (!single).then_some(w.name.as_str());
        out.push_str(&super::bug_form::markdown(
            w,
            &report.session_id,
            title,
            2,
            limits,
        ));
    }
    if let Some(env) = &report.environment {
        out.push_str(&environment::section(
            env,
            2,
            !report.environment_changes.is_empty(),
        ));
    }
    if !report.environment_changes.is_empty() {
        out.push_str(&environment::changes(&report.environment_changes, 2));
    }
    for w in &report.workflows {
        let level = if single {
            2
        } else {
            out.push_str(&format!("## Workflow {}\n\n", code(&w.name)));
            out.push_str(&format!(
                "**Verdict:** {}\n\n",
                w.verdict.sentence(&|s: &str| md::bold(s))
            ));
            3
        };
        out.push_str(&workflow(w, level, report, limits));
    }
    out.push_str(&json_only::line(report));
    if !report.warnings.is_empty() {
        out.push_str("## Warnings\n\n");
        let warnings = grouped_warnings(&report.warnings);
        for warning in warnings.iter().take(limits.warnings) {
            out.push_str(&format!("- {}\n", text_with_code(warning)));
        }
        if warnings.len() > limits.warnings {
            out.push_str(&format!(
                "- … and {} more warnings (report.json lists all)\n",
                warnings.len() - limits.warnings
            ));
        }
        out.push('\n');
    }
    out.push_str(&footer(report));
    // One chokepoint for every piece of server and workflow text in the document: control and
    // bidi characters become visible `\u001b` escapes (`cat report.md` must not act on them).
    crate::text::escape_controls(&out).into_owned()
}

/// The warnings with the runs' ones said once per kind: `run ID (step k inc): TEXT` lines whose
/// TEXT differs only in its figures make one line, with how many runs had it (report.json
/// keeps each run's line). Other warnings are kept as they are, in order.
fn grouped_warnings(warnings: &[String]) -> Vec<String> {
    // Each number (a run of digits and points) is one `#`.
    let key = |w: &str| {
        let mut key = String::with_capacity(w.len());
        for c in w.chars() {
            if c.is_ascii_digit() || (c == '.' && key.ends_with('#')) {
                if !key.ends_with('#') {
                    key.push('#');
                }
            } else {
                key.push(c);
            }
        }
        key
    };
    // (key, first run, its text, runs that had it, times)
    let mut groups: Vec<(String, &str, &str, Vec<&str>, usize)> = Vec::new();
    for w in warnings {
        let split = w
            .strip_prefix("run ")
            .and_then(|_| w.find("): "))
            .map(|at| (&w[..at + 1], &w[at + 3..]));
        let (run, text) = split.unwrap_or(("", w.as_str()));
        let k = if run.is_empty() { w.clone() } else { key(text) };
        match groups
            .iter_mut()
            .find(|(g, r, ..)| *g == k && !r.is_empty())
        {
            Some((_, _, _, runs, times)) if !run.is_empty() => {
                *times += 1;
                if !runs.contains(&run) {
                    runs.push(run);
                }
            }
            _ => groups.push((k, run, text, vec![run], 1)),
        }
    }
    groups
        .into_iter()
        .map(|(_, run, text, runs, times)| match (run, runs.len(), times) {
            ("", ..) => text.to_string(),
            (run, _, 1) => format!("{run}: {text}"),
            (run, 1, times) => format!(
                "{times} times in {run}: {text} (the first's figures; report.json lists each)"
            ),
            (run, n, _) => format!(
                "in {n} runs, the first {run}: {text} (the first run's figures; report.json lists each run's)"
            ),
        })
        .collect()
}

fn meta_line(r: &Report) -> String {
    let mut parts = vec![format!("Session {}", code(&r.session_id))];
    let state = match (r.state.as_str(), &r.stopped_because) {
        // The stop's words hold the resume command in backticks: kept as a code span.
        ("stopped", Some(why)) => format!("stopped ({})", text_with_code(why)),
        (s, _) => text(s),
    };
    parts.push(state);
    if let Some(s) = &r.settings.strategy {
        parts.push(format!("strategy {}", text(s)));
    }
    if r.settings.repeat > 0 {
        parts.push(format!("repeat {}", r.settings.repeat));
    }
    if r.settings.controls {
        parts.push("controls on".into());
    }
    if let Some(server) = &r.settings.server {
        parts.push(format!("server {}", code(server)));
    }
    for m in &r.settings.server_moves {
        parts.push(format!("moved {}", text(m)));
    }
    for c in &r.settings.preflight_rechecks {
        parts.push(text(c));
    }
    // To the second (report.json has the fractions).
    let second = |t: &str| match (t.split_once('.'), t.ends_with('Z')) {
        (Some((s, _)), true) => format!("{s}Z"),
        _ => t.to_string(),
    };
    if let Some(t) = &r.settings.started_at {
        parts.push(format!("started {}", text(&second(t))));
    }
    if let Some(t) = &r.settings.updated_at {
        parts.push(format!("updated {}", text(&second(t))));
    }
    parts.join(" · ")
}

fn footer(r: &Report) -> String {
    let redaction = if r.redacted {
        "Redacted: home folders, user and host names, IP addresses and secret-looking inputs are \
         placeholders (`report --no-redact` keeps them); model file names are kept."
    } else {
        "Not redacted: paths, host names and inputs appear as recorded."
    };
    format!(
        "---\n\n<sub>Written by {} (report schema {}). {redaction}</sub>\n",
        text(&r.generator),
        r.schema_version
    )
}

/// The sections of one workflow, in their order.
fn workflow(w: &WorkflowReport, level: usize, report: &Report, limits: &Limits) -> String {
    let mut out = String::new();
    if let Some(path) = &w.workflow.path {
        let mut line = format!("Workflow {}", code(path));
        if let Some(f) = &w.workflow.format {
            line.push_str(&format!(" ({} format)", text(&f.to_uppercase())));
        }
        if let Some(sha) = &w.workflow.sha256 {
            line.push_str(&format!(", canonical sha256 {}", code(sha)));
        }
        out.push_str(&line);
        out.push_str(".\n\n");
    }
    out.push_str(&sections::model_files(w));
    out.push_str(&sections::preflight(w, level));
    if !w.ladder.is_empty() {
        out.push_str(&ladder::section(w, level));
        out.push_str(&ladder::product_warnings(w));
    }
    if let Some(e) = &w.first_failure {
        let title = evidence::title(e, w.verdict.kind);
        out.push_str(&evidence::section(
            e,
            level,
            &title,
            w.bug_form.is_some(),
            limits,
        ));
    }
    out.push_str(&sections::repeats(w, level));
    out.push_str(&sections::controls(w, level));
    out.push_str(&super::mitigations::section(
        &w.mitigations,
        level,
        &report.session_id,
    ));
    out.push_str(&attachments::section(w, level, report));
    out
}
