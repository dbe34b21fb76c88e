//! `report.md`: GitHub-flavoured Markdown meant to be pasted into an issue.

use super::budget::{self, trimmed_block, Limits};
use super::console;
use super::md::{self, code, details, fence, node, text, text_with_code, Table};
use super::memory;
use crate::report::model::{
    kind_phrase, AttachedRun, DriftRow, Environment, Evidence, LadderRow, NodeTimes, Report,
    VerdictKind, WorkflowReport,
};
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

const DASH: &str = "—";

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
        out.push_str(&environment(env, 2));
    }
    if !report.environment_changes.is_empty() {
        out.push_str(&environment_changes(&report.environment_changes, 2));
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
                "{times} times in {run}: {text} (the figures are the first's; report.json lists each)"
            ),
            (run, n, _) => format!(
                "in {n} runs, the first {run}: {text} (the figures are the first run's; report.json lists each run's)"
            ),
        })
        .collect()
}

fn heading(level: usize, title: &str) -> String {
    format!("{} {title}\n\n", "#".repeat(level))
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
    if let Some(t) = &r.settings.started_at {
        parts.push(format!("started {}", text(t)));
    }
    if let Some(t) = &r.settings.updated_at {
        parts.push(format!("updated {}", text(t)));
    }
    parts.join(" · ")
}

fn footer(r: &Report) -> String {
    let redaction = if r.redacted {
        "Home folders, user and host names, IP addresses and secret-looking inputs are replaced by \
         placeholders (`comfy-bisect report SESSION --no-redact` keeps them); model file names are kept."
    } else {
        "Not redacted: paths, host names and inputs appear as recorded."
    };
    format!(
        "---\n\n<sub>Written by {} (report schema {}). {redaction}</sub>\n",
        text(&r.generator),
        r.schema_version
    )
}

use crate::units::mib_rounded as mib;

use crate::units::seconds as duration;

fn short(run_id: &str) -> String {
    run_id.chars().take(8).collect()
}

fn environment(env: &Environment, level: usize) -> String {
    let mut out = heading(level, "Environment");
    let mut t = Table::new(&["Item", "Value"]);
    let mut row = |k: &str, v: String| t.row(vec![text(k), v]);
    let opt = |v: &Option<String>| v.as_deref().map(text).unwrap_or_else(|| DASH.into());
    row("ComfyUI", opt(&env.comfyui_version));
    row(
        "Frontend",
        env.frontend_version
            .as_deref()
            .map(|v| format!("{} (required by the server)", text(v)))
            .unwrap_or_else(|| DASH.into()),
    );
    row("PyTorch", opt(&env.pytorch_version));
    let python = match (&env.python_version, env.embedded_python) {
        (Some(v), Some(true)) => format!("{} (embedded, portable build)", text(v)),
        (Some(v), _) => text(v),
        (None, _) => DASH.into(),
    };
    row("Python", python);
    row("OS", opt(&env.os));
    match &env.gpu {
        Some(gpu) => {
            let mut details = vec![text(&gpu.kind)];
            if let Some(i) = gpu.index {
                details.push(format!("index {i}"));
            }
            if let Some(a) = &gpu.allocator {
                details.push(format!("allocator {}", text(a)));
            }
            row(
                "GPU",
                format!("{} ({})", text(&gpu.name), details.join(", ")),
            );
            row(
                "VRAM",
                gpu.vram_total_mib.map(mib).unwrap_or_else(|| DASH.into()),
            );
        }
        None => {
            row("GPU", DASH.into());
            row("VRAM", DASH.into());
        }
    }
    row(
        "RAM",
        env.ram_total_mib.map(mib).unwrap_or_else(|| DASH.into()),
    );
    row(
        "Launch arguments",
        if env.argv.is_empty() {
            DASH.into()
        } else {
            code(&env.argv.join(" "))
        },
    );
    let flags = if env.memory_flags.is_empty() {
        "none (ComfyUI's defaults)".to_string()
    } else {
        env.memory_flags
            .iter()
            .map(|f| {
                let flag = match &f.value {
                    Some(v) => format!("{} {v}", f.flag),
                    None => f.flag.clone(),
                };
                format!("{}: {}", code(&flag), text(&f.effect))
            })
            .collect::<Vec<_>>()
            .join("<br>")
    };
    row("Memory-relevant flags", flags);
    if let Some(m) = &env.memory_mode {
        let mut parts = vec![
            format!("dynamic VRAM {}", text(&m.dynamic_vram)),
            format!("pinned memory {}", text(&m.pinned_memory)),
            format!("async offload {}", text(&m.async_offload)),
            format!("cache {}", text(&m.cache)),
        ];
        for (what, v) in [
            ("--reserve-vram", &m.reserve_vram_gb),
            ("--vram-headroom", &m.vram_headroom_gb),
            ("comfy-aimdo", &m.comfy_aimdo),
            ("comfy-kitchen", &m.comfy_kitchen),
        ] {
            if let Some(v) = v {
                parts.push(format!("{what} {}", text(v)));
            }
        }
        row("Memory mode", parts.join("<br>"));
    }
    if !env.devices.is_empty() {
        let list: Vec<String> = env
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let primary = if i == 0 { " — primary, measured" } else { "" };
                format!("{}{primary}", text(d))
            })
            .collect();
        row("Devices", list.join("<br>"));
    }
    if let Some(d) = &env.deploy_environment {
        row("Deploy environment", text(d));
    }
    let runs = match env.runs.as_str() {
        "cold" => "cold: models and memory freed before every run".to_string(),
        "warm" => "warm: models and cached outputs of earlier runs may still be loaded".to_string(),
        "mixed" => "mixed: some runs cold, some warm".to_string(),
        other => text(other),
    };
    row("Runs", runs);
    if let Some(id) = &env.fingerprint {
        row("Fingerprint", code(id));
    }
    out.push_str(&t.render());
    out.push('\n');
    if env.fingerprint.is_some() {
        if env.node_packs.is_empty() {
            out.push_str("Custom node packs: none.\n\n");
        } else {
            let source = match &env.pack_versions_from {
                Some(s) => format!("versions from {}", text(s)),
                None => "the server exposes no versions (no ComfyUI-Manager)".to_string(),
            };
            // Only the packs the workflows use; the others are counted (report.json lists all).
            let shown: Vec<_> = env
                .node_packs
                .iter()
                .filter(|p| env.packs_used.as_ref().is_none_or(|u| u.contains(&p.name)))
                .collect();
            let others = env.node_packs.len() - shown.len();
            let others = if others == 0 {
                String::new()
            } else {
                format!(
                    " {others} other installed pack{}, not used by the workflows, left out \
                     (report.json lists every pack).",
                    if others == 1 { "" } else { "s" }
                )
            };
            if shown.is_empty() {
                out.push_str(&format!(
                    "Custom node packs: the workflows use none ({source}).{others}\n\n"
                ));
                return out;
            }
            out.push_str(&format!(
                "Custom node packs the workflows use ({}; {source}):{others}\n\n",
                shown.len()
            ));
            let mut packs = Table::new(&["Pack", "Classes", "Definitions hash", "Version"]);
            for p in shown {
                packs.row(vec![
                    text(&p.name),
                    p.classes.to_string(),
                    code(&p.definitions_sha256),
                    text(&p.version),
                ]);
            }
            out.push_str(&packs.render());
            out.push('\n');
        }
    }
    out
}

fn environment_changes(drifts: &[DriftRow], level: usize) -> String {
    let mut out = heading(level, "Environment changes");
    out.push_str(
        "The server's environment changed between runs; results from before and after are not \
         compared with each other: the last passing step was run again under the new \
         environment (`--on-drift reanchor`), or the session stopped (`--on-drift stop`).\n\n",
    );
    for d in drifts {
        out.push_str(&format!(
            "- {} ({}): fingerprint {} → {}\n",
            text(&d.detected_at),
            code(&d.workflow),
            code(&d.from),
            code(&d.to)
        ));
        for c in &d.changes {
            out.push_str(&format!("  - {}\n", text(c)));
        }
        match d.action.as_str() {
            "stop" => out.push_str("  - the session stopped here (`--on-drift stop`)\n"),
            _ if d.anchor_runs.is_empty() => {
                out.push_str("  - re-anchored: no step needed to be run again\n")
            }
            _ => {
                for a in &d.anchor_runs {
                    out.push_str(&format!("  - re-anchored: {}\n", text(a)));
                }
            }
        }
    }
    out.push('\n');
    out
}

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
    if let Some(p) = &w.preflight {
        out.push_str(&heading(level, "Preflight"));
        for n in &p.unknown_nodes {
            out.push_str(&format!(
                "- Unknown node class {} (install its custom node pack)\n",
                code(n)
            ));
        }
        for m in &p.missing_models {
            out.push_str(&format!("- Missing model file: {}\n", text(m)));
        }
        for o in &p.other {
            out.push_str(&format!("- {}\n", text(o)));
        }
        out.push('\n');
    }
    if !w.ladder.is_empty() {
        out.push_str(&ladder(w, level));
        out.push_str(&product_warnings(w));
    }
    if let Some(e) = &w.first_failure {
        let title = evidence_title(e, w.verdict.kind);
        out.push_str(&evidence(e, level, &title, w.bug_form.is_some(), limits));
    }
    if let Some(n) = &w.next_steps {
        out.push_str(&heading(level, "What to check next"));
        out.push_str(&format!(
            "For a failure in the {} stage:\n\n",
            code(n.stage.as_str())
        ));
        for c in &n.next_check {
            out.push_str(&format!("- {}\n", text_with_code(c)));
        }
        if !n.candidates.is_empty() {
            out.push_str(
                "\nPossible explanations. Each is **unproven**: the evidence above fits it, but does not show that it, or anything else, is the cause.\n\n",
            );
            for c in &n.candidates {
                out.push_str(&format!(
                    "- {} — *{}*\n",
                    text_with_code(&c.text),
                    text(&c.status)
                ));
            }
        }
        out.push_str(&format!("\nRoot cause: {}.\n\n", text(&n.root_cause)));
    }
    if !w.repeats.is_empty() {
        out.push_str(&heading(level, "Repeats (flakiness check)"));
        let mut t = Table::new(&[
            "Step",
            "Increment",
            "Role",
            "Passed",
            "Failed",
            "Other",
            "Runs",
        ])
        .right(0)
        .right(3)
        .right(4)
        .right(5);
        for r in &w.repeats {
            t.row(vec![
                r.step.to_string(),
                text(&r.increment),
                text(&r.role.replace('_', " ")),
                r.passed.to_string(),
                r.failed.to_string(),
                r.other.to_string(),
                r.run_ids
                    .iter()
                    .map(|id| code(&short(id)))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    if !w.controls.is_empty() {
        out.push_str(&heading(level, "Controls (minimal + one increment alone)"));
        let mut t = Table::new(&[
            "Step",
            "Increment alone",
            "Run",
            "Outcome",
            "Stage",
            "Failing node",
            "Peak VRAM",
        ])
        .right(0)
        .right(6);
        for c in &w.controls {
            t.row(vec![
                c.step.to_string(),
                text(&c.increment),
                c.run_id
                    .as_deref()
                    .map(|r| code(&short(r)))
                    .unwrap_or_else(|| DASH.into()),
                text(&c.outcome),
                c.stage
                    .map(|s| s.as_str())
                    .map(text)
                    .unwrap_or_else(|| DASH.into()),
                c.failing_node
                    .as_ref()
                    .map(node)
                    .unwrap_or_else(|| DASH.into()),
                c.peak_vram_mib.map(mib).unwrap_or_else(|| DASH.into()),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    out.push_str(&heading(level, "Component hashes"));
    if w.components.is_empty() {
        out.push_str(
            "No model files referenced by the recorded runs (or no run recorded yet).\n\n",
        );
    } else {
        let mut t = Table::new(&["File", "Folder", "Loader", "Size", "sha256", "AutoV2"]).right(3);
        // Why a file is unhashed is said once per reason (the file name left out of it), in a
        // numbered note under the table, not in every row.
        let mut reasons: Vec<String> = Vec::new();
        for c in &w.components {
            let (sha, autov2) = match (&c.sha256, &c.autov2) {
                (Some(s), Some(a)) => (code(s), code(a)),
                _ => {
                    let reason = c
                        .reason
                        .as_deref()
                        .unwrap_or("no reason recorded")
                        .replace(&c.file, "the file")
                        .replace(&format!("its {} folders", c.folder), "its model folders");
                    let reason = match reason.find("; the server lists the file (") {
                        // The size the server lists is the Size column.
                        Some(at) => match reason[at..].find(");") {
                            Some(end) => format!("{}{}", &reason[..at], &reason[at + end + 1..]),
                            None => reason,
                        },
                        None => reason,
                    };
                    let n = match reasons.iter().position(|r| *r == reason) {
                        Some(i) => i + 1,
                        None => {
                            reasons.push(reason);
                            reasons.len()
                        }
                    };
                    (format!("unhashed ({n})"), DASH.to_string())
                }
            };
            let file = match &c.link_target {
                Some(target) => format!("{} → {}", code(&c.file), code(target)),
                None => code(&c.file),
            };
            t.row(vec![
                file,
                text(&c.folder),
                format!("{} ({})", node(&c.node), code(&c.input)),
                c.size_bytes
                    .map(crate::units::file_size)
                    .unwrap_or_else(|| DASH.into()),
                sha,
                autov2,
            ]);
        }
        out.push_str(&t.render());
        out.push_str("\nsha256 is over the whole file; AutoV2 is its first 10 hex digits (what Civitai and A1111 show).\n\n");
        for (i, r) in reasons.iter().enumerate() {
            out.push_str(&format!("{}. Unhashed: {}\n", i + 1, text_with_code(r)));
        }
        if !reasons.is_empty() {
            out.push('\n');
        }
    }
    out.push_str(&super::mitigations::section(
        &w.mitigations,
        level,
        &report.session_id,
    ));
    out.push_str(&attachments(w, level, report, limits));
    out
}

fn ladder(w: &WorkflowReport, level: usize) -> String {
    let mut out = heading(level, "Ladder");
    // Sized for an issue: the run ids, the failing node, the VRAM sample counts and the memory
    // held before each run are in report.json (`ladder`), not in these columns; the server's
    // RSS and swap only when it swapped.
    let ram = w.ladder.iter().any(|r| r.peak_ram_mib.is_some());
    // The server's RSS and swap matter when it swapped (host memory ran short).
    let swap = w
        .ladder
        .iter()
        .any(|r| r.peak_swap_mib.is_some_and(|s| s > 0.0));
    let mut headers = vec![
        "Step",
        "Increment",
        "What changed",
        "Outcome",
        "Stage",
        "Peak VRAM",
    ];
    if ram {
        headers.push("Peak RAM");
    }
    if swap {
        headers.push("Server RSS");
        headers.push("Swap");
    }
    let product = w.ladder.iter().any(|r| r.delivered.product.is_some());
    if product {
        headers.push("Product");
    }
    let models = memory::any(&w.ladder);
    if models {
        headers.push("Models loaded");
    }
    let timed = w.ladder.iter().any(|r| r.s_per_step.is_some());
    if timed {
        headers.push("s/step");
    }
    headers.push("Duration");
    let mut t = Table::new(&headers).right(0);
    for (col, name) in headers.iter().enumerate().skip(5) {
        if *name != "Product" {
            t = t.right(col);
        }
    }
    for r in &w.ladder {
        let mut cells = ladder_cells(r, w);
        let duration = cells.pop().unwrap_or_default();
        if ram {
            cells.push(r.peak_ram_mib.map(mib).unwrap_or_else(|| DASH.into()));
        }
        if swap {
            cells.push(r.peak_rss_mib.map(mib).unwrap_or_else(|| DASH.into()));
            cells.push(r.peak_swap_mib.map(mib).unwrap_or_else(|| DASH.into()));
        }
        if product {
            cells.push(product_cell(r));
        }
        if models {
            cells.push(memory::markdown_cell(r));
        }
        if timed {
            cells.push(r.s_per_step.map(per_step).unwrap_or_else(|| DASH.into()));
        }
        cells.push(duration);
        t.row(cells);
    }
    out.push_str(&t.render());
    out.push('\n');
    out.push_str(&text(&w.vram.note));
    if let Some(note) = w.vram.ram_note.as_ref().filter(|_| ram) {
        // Its sentence on the server's RSS and swap goes with those columns.
        let note = if swap {
            note.as_str()
        } else {
            note.split(" Server RSS ").next().unwrap_or(note)
        };
        out.push(' ');
        out.push_str(&text(note));
    }
    out.push_str("\n\n");
    if let Some(few) = &w.search_steps {
        out.push_str(&format!(
            "**Few steps for the search.** {}\n\n",
            text_with_code(&few.summary)
        ));
    }
    out.push_str(&memory::markdown_details(&w.ladder));
    if let Some((chart, caption)) = super::chart::ladder_chart(w) {
        out.push_str(&chart);
        out.push_str(&format!("\n{caption}\n\n"));
    }
    if let Some(t) = &w.node_times {
        out.push_str(&node_times(t, level + 1));
    }
    out
}

/// Seconds per sampler step, two decimals under 10 s (`0.38 s`).
fn per_step(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else {
        duration(s)
    }
}

/// Each node's time in the boundary runs, one column per run.
fn node_times(t: &NodeTimes, level: usize) -> String {
    let mut out = heading(level, "Node times at the boundary");
    out.push_str(
        "Seconds from each node's start to its end (the `executing` messages of the run; — : cached, not run or not finished).\n\n",
    );
    let titles: Vec<String> = t
        .runs
        .iter()
        .map(|r| format!("Step {} {} ({})", r.step, r.increment, r.role))
        .collect();
    let mut headers: Vec<&str> = vec!["Node"];
    headers.extend(titles.iter().map(String::as_str));
    let mut table = Table::new(&headers);
    for col in 1..headers.len() {
        table = table.right(col);
    }
    // Nodes that took under 0.05 s in every run are counted, not listed (report.json has them).
    const QUICK_S: f64 = 0.05;
    let quick = |r: &&crate::report::model::NodeTimeRow| {
        r.seconds.iter().all(|s| s.is_some_and(|s| s < QUICK_S))
    };
    let quick_rows = t.rows.iter().filter(quick).count();
    for r in t.rows.iter().filter(|r| !quick(r)) {
        let name = match &r.class_type {
            Some(c) => format!("{} `#{}`", text(c), text(&r.node)),
            None => format!("`#{}`", text(&r.node)),
        };
        let mut cells = vec![name];
        cells.extend(
            r.seconds
                .iter()
                .map(|s| s.map(per_step).unwrap_or_else(|| DASH.into())),
        );
        table.row(cells);
    }
    let mut cells = vec!["s/step (sampler)".to_string()];
    cells.extend(
        t.runs
            .iter()
            .map(|r| r.s_per_step.map(per_step).unwrap_or_else(|| DASH.into())),
    );
    table.row(cells);
    out.push_str(&table.render());
    if quick_rows > 0 {
        out.push_str(&format!(
            "\n{quick_rows} other node{} took under {QUICK_S} s in each run (report.json has every time).",
            if quick_rows == 1 { "" } else { "s" }
        ));
    }
    out.push_str("\n\n");
    out
}

/// The ladder's product cell: what the output nodes wrote, with a warning sign when it differs
/// from what the variant asked for.
fn product_cell(r: &LadderRow) -> String {
    let line = r
        .delivered
        .product
        .as_deref()
        .map(text)
        .unwrap_or_else(|| DASH.into());
    if r.delivered.product_warnings.is_empty() {
        line
    } else {
        format!("{line} ⚠")
    }
}

/// The steps whose product differs from what their variant asked for (warnings, not failures).
fn product_warnings(w: &WorkflowReport) -> String {
    let rows: Vec<&LadderRow> = w
        .ladder
        .iter()
        .filter(|r| !r.delivered.product_warnings.is_empty())
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "⚠ **Product differs from what the variant asked for** (a warning, not a failure):\n\n",
    );
    for r in rows {
        for m in &r.delivered.product_warnings {
            out.push_str(&format!(
                "- step {} ({}): {}\n",
                r.step,
                text(&r.increment),
                text(m)
            ));
        }
    }
    out.push('\n');
    out
}

fn ladder_cells(r: &LadderRow, w: &WorkflowReport) -> Vec<String> {
    let is_verdict_step = w.verdict.step == Some(r.step)
        && matches!(
            w.verdict.kind,
            VerdictKind::FirstFailure | VerdictKind::MinimalFails
        );
    let outcome = match &r.failure_kind {
        Some(k)
            if *k == crate::vocab::FailureKind::MemoryPressure
                && !r.delivered.memory_pressure.is_empty() =>
        {
            format!(
                "{} — {}",
                r.outcome.replace('_', " "),
                r.delivered.memory_pressure.join(", ")
            )
        }
        Some(k) => format!("{} ({})", r.outcome.replace('_', " "), kind_phrase(*k)),
        None if !r.delivered.memory_fallbacks.is_empty()
            || !r.delivered.memory_pressure.is_empty()
            || !r.delivered.slowdown_only.is_empty() =>
        {
            format!(
                "{} — {}",
                r.outcome.replace('_', " "),
                r.delivered
                    .memory_fallbacks
                    .iter()
                    .chain(&r.delivered.memory_pressure)
                    .chain(&r.delivered.slowdown_only)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        None => r.outcome.replace('_', " "),
    };
    let mut outcome = if is_verdict_step {
        md::bold(&outcome)
    } else {
        text(&outcome)
    };
    if let Some(few) = &r.reduced {
        outcome.push_str(&format!(
            "<br>at {} of {} steps (search)",
            few.steps, few.of
        ));
    }
    if let Some(c) = &r.crash_check {
        let reruns: Vec<String> = c.rerun_ids.iter().map(|id| code(&short(id))).collect();
        outcome.push_str("<br>");
        outcome.push_str(&match c.result.as_str() {
            "not_reproduced" => format!(
                "crash not reproduced: re-run {} passed, the step counts as passed",
                reruns.join(", ")
            ),
            "confirmed" => format!(
                "crash confirmed: reproduced {} times (re-runs {})",
                c.times,
                reruns.join(", ")
            ),
            _ => "crash not confirmed yet (re-run pending)".to_string(),
        });
    }
    let changes = if r.changes.is_empty() {
        if r.step == 0 {
            "minimal variant".to_string()
        } else {
            DASH.to_string()
        }
    } else {
        // Up to three edits a step (report.json lists all).
        const SHOWN: usize = 3;
        let mut lines: Vec<String> = r.changes.iter().take(SHOWN).map(|c| text(c)).collect();
        if r.changes.len() > SHOWN {
            lines.push(format!(
                "… and {} more (report.json lists all)",
                r.changes.len() - SHOWN
            ));
        }
        if r.step == 0 {
            lines.insert(0, "reduced from the full workflow:".to_string());
        }
        lines.join("<br>")
    };
    let mut peak = r.peak_vram_mib.map(mib).unwrap_or_else(|| DASH.into());
    if let (Some(needed), Some(_)) = (r.oom_needed_mib, &r.oom_needed_from) {
        let sampled = if peak == DASH {
            String::new()
        } else {
            format!("<br>sampled: {peak}")
        };
        // How the figure was read (`in use + requested`) is in report.json.
        peak = format!("**≥ {} needed** (OOM message){sampled}", mib(needed));
    }
    let increment = match (&r.increment_kind, r.step) {
        (Some(k), s) if s > 0 && k != &r.increment => {
            format!("{} ({})", text(&r.increment), text(k))
        }
        _ => text(&r.increment),
    };
    vec![
        r.step.to_string(),
        increment,
        changes,
        outcome,
        r.stage
            .map(|s| s.as_str())
            .map(text)
            .unwrap_or_else(|| DASH.into()),
        peak,
        r.duration_s.map(duration).unwrap_or_else(|| DASH.into()),
    ]
}

/// The heading of the failing run's evidence: the first failure, the failing minimal run, the
/// failing check, or the lowest failure so far when there is no verdict yet.
fn evidence_title(e: &Evidence, kind: VerdictKind) -> String {
    match kind {
        VerdictKind::Check => "Failing run (the workflow as given)".to_string(),
        VerdictKind::FirstFailure | VerdictKind::MinimalFails | VerdictKind::Flaky
            if e.step == 0 =>
        {
            "Failing minimal run".to_string()
        }
        VerdictKind::FirstFailure | VerdictKind::MinimalFails | VerdictKind::Flaky => format!(
            "First failing run (step {}, {})",
            e.step,
            text(&e.increment)
        ),
        _ => format!(
            "Lowest failing step so far (step {}, {}; no verdict yet)",
            e.step,
            text(&e.increment)
        ),
    }
}

/// The failing run's evidence under `title`; `traceback_above`: the bug-form block at the top shows its
/// traceback (under Debug Logs), so it is not repeated here.
fn evidence(
    e: &Evidence,
    level: usize,
    title: &str,
    traceback_above: bool,
    limits: &Limits,
) -> String {
    let mut out = heading(level, title);
    let mut lines = Vec::new();
    if let Some(id) = &e.run_id {
        lines.push(format!(
            "- Run: {} — outcome {}",
            code(id),
            text(&e.outcome)
        ));
    }
    if let Some(n) = &e.node {
        lines.push(format!("- Failing node: {}", node(n)));
    }
    if let Some(k) = &e.failure_kind {
        lines.push(format!(
            "- Kind: {} ({})",
            code(k.as_str()),
            text(&kind_phrase(*k))
        ));
    }
    if let Some(s) = &e.stage {
        let mut line = format!("- Stage: {}", code(s.as_str()));
        if let Some(c) = e
            .stage_confidence
            .filter(|c| *c != crate::vocab::StageConfidence::Unknown)
        {
            line.push_str(&format!(" (confidence: {})", text(c.as_str())));
        }
        if let Some(ev) = &e.stage_evidence {
            line.push_str(&format!(" — {}", text_with_code(ev)));
        }
        lines.push(line);
    }
    match &e.last_progress {
        Some(p) => lines.push(format!(
            "- Last progress seen: {} at {}/{}",
            node(&p.node),
            p.value,
            p.max
        )),
        None => lines.push(
            "- Last progress seen: none (no node reported progress before the failure)".into(),
        ),
    }
    if let Some(d) = &e.detail {
        lines.push(format!("- What happened: {}", text_with_code(d)));
    }
    match (&e.oom_kill, &e.kernel_log) {
        (Some(k), _) => lines.push(format!(
            "- Killed by the kernel's OOM killer: {}",
            text(&k.summary())
        )),
        (None, Some(note)) => lines.push(format!("- Kernel log: {}", text_with_code(note))),
        _ => {}
    }
    if let Some(h) = &e.host_ram {
        lines.push(format!("- Host RAM: {}", text(h)));
    }
    out.push_str(&lines.join("\n"));
    out.push_str("\n\n");
    // With the traceback above, its last lines are the exception and its whole message.
    let message_above = traceback_above && !e.traceback.is_empty();
    if let (Some(t), false) = (&e.exception_type, message_above) {
        out.push_str(&format!("Exception {}:\n\n", code(t)));
    }
    if let (Some(m), false) = (&e.exception_message, message_above) {
        let lines: Vec<&str> = m.trim_end().lines().collect();
        let t = budget::trim_middle(&lines, limits.message_lines, limits.line_chars);
        out.push_str(&trimmed_block(e, "message", "text", &t, limits.line_chars));
        out.push('\n');
    }
    if !e.numbers.is_empty() {
        let mut t = Table::new(&["Allocator number", "MiB"]).right(1);
        for (label, v) in e.numbers.rows() {
            t.row(vec![text(label), format!("{v:.2}")]);
        }
        if let Some(i) = e.numbers.gpu_index {
            t.row(vec!["GPU index".into(), i.to_string()]);
        }
        out.push_str(&t.render());
        out.push('\n');
        let verdict = match e.numbers_consistent {
            Some(true) => {
                "consistent (finite, non-negative and in the expected order).".to_string()
            }
            Some(false) => "**inconsistent**: kept as printed, not used to reason.".to_string(),
            None => "not checked.".to_string(),
        };
        out.push_str(&format!("Numbers {verdict}\n\n"));
        for note in &e.numbers_notes {
            out.push_str(&format!("- {}\n", text(note)));
        }
        if !e.numbers_notes.is_empty() {
            out.push('\n');
        }
    }
    if !e.kernel_lines.is_empty() {
        let t = budget::trim_middle(&e.kernel_lines, limits.kernel_lines, limits.line_chars);
        let body = trimmed_block(e, "kernel log", "text", &t, limits.line_chars);
        out.push_str(&details(
            "Kernel log (OOM killer lines of the run's window)",
            &body,
        ));
        out.push('\n');
    }
    if !e.traceback.is_empty() {
        if traceback_above {
            out.push_str(
                "The exception, its message and its traceback are under **Debug Logs** at the \
                 top (for ComfyUI's bug form).\n\n",
            );
        } else {
            out.push_str(&super::bug_form::traceback(e, limits));
            out.push('\n');
        }
    }
    out.push_str(&console::markdown(
        e,
        limits.console_lines,
        limits.line_chars,
    ));
    if !e.current_inputs.is_empty() {
        // One input a line (`"steps": [25],`): the pretty form takes three lines for each.
        let n = e.current_inputs.len();
        let mut lines: Vec<String> = vec!["{".to_string()];
        // A linked input prints as the repr of a Python object (a model, a tensor): its kind
        // is kept, its figures are in report.json.
        let shown = |v: &serde_json::Value| -> String {
            let one = match v {
                serde_json::Value::Array(a) if a.len() == 1 => &a[0],
                other => other,
            };
            match one.as_str() {
                Some(r) if r.contains(" object at 0x") || r.contains("tensor(") => {
                    let kind = if r.contains("tensor(") {
                        "tensor"
                    } else {
                        "object"
                    };
                    // ComfyUI's own note of a tensor's shape is a fact worth its line.
                    let shape = r
                        .rfind("# shape [")
                        .map(|at| format!(", {}", r[at + 2..].trim()))
                        .unwrap_or_default();
                    format!("[\"<{kind}{shape}; printed whole in report.json>\"]")
                }
                _ => v.to_string(),
            }
        };
        lines.extend(e.current_inputs.iter().enumerate().map(|(i, (k, v))| {
            format!(
                "  {}: {}{}",
                serde_json::Value::from(k.as_str()),
                shown(v),
                if i + 1 < n { "," } else { "" }
            )
        }));
        lines.push("}".to_string());
        let t = budget::trim_middle(&lines, limits.inputs_lines, limits.line_chars);
        let body = trimmed_block(e, "inputs", "json", &t, limits.line_chars);
        let title = if e.inputs_restored.is_empty() {
            "Failing node's inputs (as ComfyUI printed them, trimmed)".to_string()
        } else {
            format!(
                "Failing node's inputs as the workflow has them: {}",
                e.inputs_restored.join(", ")
            )
        };
        out.push_str(&details(&title, &body));
        out.push('\n');
    }
    out
}

fn attachment_line(label: &str, a: &AttachedRun) -> String {
    let mut line = format!(
        "- {label} (step {}, {}, run {}): {}",
        a.step,
        text(&a.increment),
        code(&short(&a.run_id)),
        code(&a.workflow)
    );
    if let Some(ui) = &a.ui_workflow {
        line.push_str(&format!("; UI format: {}", code(ui)));
    }
    if let Some(s) = &a.shareable_workflow {
        line.push_str(&format!(
            "; shareable copy (secrets and home paths replaced): {}",
            code(s)
        ));
    }
    line.push('\n');
    line
}

fn attachments(w: &WorkflowReport, level: usize, report: &Report, limits: &Limits) -> String {
    let a = &w.attachments;
    let mut out = heading(level, "Attachments");
    if let Some(p) = &a.minimal_passing {
        out.push_str(&attachment_line("Last passing workflow", p));
    }
    if let Some(f) = &a.first_failing {
        let label = if matches!(
            w.verdict.kind,
            VerdictKind::Incomplete | VerdictKind::InProgress
        ) {
            "Lowest failing workflow so far"
        } else {
            "First failing workflow"
        };
        out.push_str(&attachment_line(label, f));
    }
    out.push_str(&format!("- Session folder: {}\n", code(&a.session_dir)));
    if matches!(
        w.verdict.kind,
        VerdictKind::Incomplete | VerdictKind::InProgress
    ) {
        let when = if report.state == "running" {
            "if the tool is no longer running (killed or crashed), continue with"
        } else {
            "continue with"
        };
        out.push_str(&format!(
            "- No verdict yet; {when} {}\n",
            code(&crate::shell::resume_command(
                &report.session_id,
                report
                    .settings
                    .runs_dir
                    .as_deref()
                    .map(std::path::Path::new)
            ))
        ));
    }
    out.push('\n');
    if !a.runs.is_empty() {
        let mut body = String::new();
        let key = |r: &AttachedRun| {
            [&a.minimal_passing, &a.first_failing]
                .iter()
                .any(|k| k.as_ref().is_some_and(|k| k.run_id == r.run_id))
        };
        let mut others = 0;
        let mut shown: Vec<&AttachedRun> = a
            .runs
            .iter()
            .filter(|r| {
                if key(r) {
                    return true;
                }
                others += 1;
                others <= limits.reproduce
            })
            .collect();
        let left_out = a.runs.len() - shown.len();
        // In ladder order (runs of one step in the order they ran), as the Ladder table.
        shown.sort_by_key(|r| r.step);
        for r in shown {
            body.push_str(&format!(
                "# step {} {} ({}) — {}, run {}\n{}\n",
                r.step,
                r.increment,
                r.purpose,
                r.outcome,
                short(&r.run_id),
                r.reproduce
            ));
        }
        if left_out > 0 {
            body.push_str(&format!(
                "# … {left_out} more runs: report.json (attachments.runs) has every command\n"
            ));
        }
        out.push_str("Reproduce each run with comfy-bisect");
        // Redaction may have put placeholders where the server's address was.
        if report.redacted && body.contains('<') {
            out.push_str(" (put your server's address where the placeholders are)");
        }
        out.push_str(":\n\n");
        out.push_str(&fence("sh", body.trim_end()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::NodePackRow;

    #[test]
    fn only_the_packs_the_workflows_use_are_listed_the_others_counted() {
        let pack = |name: &str| NodePackRow {
            name: name.into(),
            classes: 2,
            definitions_sha256: "0123456789abcdef".into(),
            version: "1.0".into(),
        };
        let mut env = Environment {
            fingerprint: Some("f1".into()),
            node_packs: vec![pack("ComfyUI-GGUF"), pack("rgthree-comfy"), pack("was-ns")],
            packs_used: Some(vec!["rgthree-comfy".into()]),
            ..Environment::default()
        };
        let md = environment(&env, 2);
        assert!(md.contains("| rgthree-comfy |"), "{md}");
        assert!(
            !md.contains("ComfyUI-GGUF") && !md.contains("was-ns"),
            "{md}"
        );
        assert!(
            md.contains("2 other installed packs, not used by the workflows, left out"),
            "{md}"
        );
        // No record says which packs the workflows use: every pack is listed.
        env.packs_used = None;
        let md = environment(&env, 2);
        assert!(
            md.contains("| ComfyUI-GGUF |") && md.contains("| was-ns |"),
            "{md}"
        );
        assert!(!md.contains("other installed"), "{md}");
    }
}
