//! Builds a [`Report`] from a session read by `super::load`: the session-wide parts
//! (settings, environment, environment changes, warnings), one `super::model::WorkflowReport` per workflow
//! from `super::workflow_report`, whose verdict comes from `super::verdict`. Pure: reading
//! is in `super::load`, so tests build reports from journals made in memory.

use super::environment::environment;
use super::load::SessionData;
use super::model::{DriftRow, NodePackRow, Report, Settings, SCHEMA_VERSION};
use super::naming::{display, outcome_name, short, stop_reason};
use super::workflow_report::workflow_report;
use crate::comfy::SystemStats;
use crate::session::journal::{RunEntry, RunRole, SessionState};

/// Builds the report (not redacted; see [`super::redact`]).
pub fn build(data: &SessionData) -> Report {
    let s = &data.session;
    let env_stats: Option<SystemStats> = s.environment.clone().or_else(|| {
        data.runs
            .values()
            .find_map(|r| r.record.system_stats_before.clone())
    });
    let all_runs: Vec<&RunEntry> = s.workflows.iter().flat_map(|w| w.runs.iter()).collect();
    let colds: Vec<bool> = all_runs
        .iter()
        .filter_map(|r| r.summary.as_ref().map(|s| s.cold))
        .collect();
    let runs_kind = if colds.is_empty() {
        if s.options.cold {
            "cold"
        } else {
            "warm"
        }
    } else if colds.iter().all(|c| *c) {
        "cold"
    } else if colds.iter().all(|c| !*c) {
        "warm"
    } else {
        "mixed"
    };
    let mut environment = env_stats.as_ref().map(|st| environment(st, runs_kind));
    let last_fingerprint = all_runs
        .iter()
        .rev()
        .filter_map(|r| r.fingerprint.as_ref())
        .find_map(|id| s.fingerprints.get(id));
    if let (Some(env), Some(fp)) = (environment.as_mut(), last_fingerprint) {
        env.fingerprint = Some(fp.id.clone());
        env.pack_versions_from = fp.pack_versions_from.clone();
        env.node_packs = fp
            .packs
            .iter()
            .map(|p| NodePackRow {
                name: p.name.clone(),
                classes: p.nodes.classes,
                definitions_sha256: p.nodes.definitions_sha256.clone(),
                version: p.version_text().to_string(),
            })
            .collect();
        // The packs the session's workflows use: what their run records say of their classes.
        let mut used: Option<Vec<String>> = None;
        for file in data.runs.values() {
            if let Some(classes) = &file.custom_nodes {
                let used = used.get_or_insert_with(Vec::new);
                for p in classes.values() {
                    if !used.contains(&p.pack) {
                        used.push(p.pack.clone());
                    }
                }
            }
        }
        if let Some(used) = used.as_mut() {
            used.sort();
        }
        env.packs_used = used;
    }
    let (state, stopped_because) = match &s.state {
        SessionState::Preflight => ("preflight".to_string(), None),
        SessionState::Waiting { until } => (format!("waiting until {until}"), None),
        SessionState::Running { .. } => ("running".to_string(), None),
        SessionState::Done => ("done".to_string(), None),
        SessionState::Stopped { reason, detail } => (
            "stopped".to_string(),
            Some(format!("{}: {detail}", stop_reason(*reason))),
        ),
    };
    let mut warnings = data.load_warnings.clone();
    warnings.extend(drift_warnings(data, env_stats.as_ref()));
    warnings.extend(baseline_warning(&all_runs));
    let mut seen = std::collections::HashSet::new();
    for job in &s.workflows {
        for entry in &job.runs {
            if entry
                .summary
                .as_ref()
                .is_some_and(|x| x.recovered_from_history)
            {
                warnings.push(format!(
                    "run {} (step {} {}) was recovered from the server's history after the tool stopped: its outcome is known, but it has no node timeline or VRAM series",
                    short(&entry.run_id),
                    entry.step,
                    entry.increment
                ));
            }
            let Some(file) = data.runs.get(&entry.run_id) else {
                continue;
            };
            {
                for w in &file.record.warnings {
                    let line = format!(
                        "run {} (step {} {}): {w}",
                        short(&entry.run_id),
                        entry.step,
                        entry.increment
                    );
                    if seen.insert(line.clone()) {
                        warnings.push(line);
                    }
                }
            }
        }
    }
    let workflows = s
        .workflows
        .iter()
        .enumerate()
        .map(|(i, job)| {
            let mut w = workflow_report(data, i, job);
            w.bug_form = super::bug_form::bug_form(&w, environment.as_ref());
            w
        })
        .collect();
    let environment_changes = s
        .drifts
        .iter()
        .map(|d| {
            let job = s.workflows.get(d.workflow);
            let anchor_runs = job
                .map(|job| {
                    job.runs
                        .iter()
                        .filter(|r| {
                            r.role == RunRole::Anchor && r.fingerprint.as_deref() == Some(&d.to)
                        })
                        .map(|r| {
                            format!(
                                "step {} ({}) re-run {}: {}",
                                r.step,
                                r.increment,
                                short(&r.run_id),
                                outcome_name(r)
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            DriftRow {
                detected_at: d.detected_at.clone(),
                workflow: job.map(|j| j.name.clone()).unwrap_or_default(),
                from: d.from.clone(),
                to: d.to.clone(),
                changes: d.changes.clone(),
                action: serde_json::to_value(d.action)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                anchor_runs,
            }
        })
        .collect();
    Report {
        environment_changes,
        schema_version: SCHEMA_VERSION,
        generator: format!("comfy-bisect {}", env!("CARGO_PKG_VERSION")),
        session_id: s.session_id.clone(),
        state,
        stopped_because,
        redacted: false,
        settings: Settings {
            server: Some(s.server.clone()),
            strategy: Some(
                serde_json::to_value(s.options.strategy)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            ),
            repeat: s.options.repeat,
            controls: s.options.controls,
            cold: s.options.cold,
            timeout_s: s.options.timeout_s,
            deadline: s.options.deadline.clone(),
            started_at: Some(s.created_at.clone()),
            updated_at: Some(s.updated_at.clone()),
            runs_dir: data.session_dir.parent().map(display),
            strict: s.options.strict,
            server_moves: s
                .server_moves
                .iter()
                .map(|m| format!("from {} to {} at {}", m.from, m.to, m.at))
                .collect(),
            preflight_rechecks: s.preflight_rechecks.iter().map(|c| c.describe()).collect(),
        },
        environment,
        workflows,
        warnings,
    }
}

/// Growth of the memory held before each run, from the first run to the last, that calls for
/// a warning (MiB).
pub(crate) const BASELINE_GROWTH_MIB: f64 = 256.0;

/// A warning when the memory held before the runs (after `/free`) grows from run to run: never
/// going down over at least three runs and by [`BASELINE_GROWTH_MIB`] or more in all.
fn baseline_warning(runs: &[&RunEntry]) -> Option<String> {
    let series: Vec<(&RunEntry, f64)> = runs
        .iter()
        .filter_map(|r| Some((*r, r.summary.as_ref()?.vram_baseline_mib?)))
        .collect();
    if series.len() < 3 || series.windows(2).any(|w| w[1].1 < w[0].1) {
        return None;
    }
    let (first, last) = (series[0], series[series.len() - 1]);
    (last.1 - first.1 >= BASELINE_GROWTH_MIB).then(|| {
        format!(
            "the memory held before each run (after /free) grew from run to run: {:.0} MiB before run {} (step {} {}) to {:.0} MiB before run {} (step {} {}); other processes use the device, or memory is not given back between runs, so later runs had less room",
            first.1,
            short(&first.0.run_id),
            first.0.step,
            first.0.increment,
            last.1,
            short(&last.0.run_id),
            last.0.step,
            last.0.increment
        )
    })
}

/// Warnings when the server's versions, launch arguments or device changed between runs.
fn drift_warnings(data: &SessionData, reference: Option<&SystemStats>) -> Vec<String> {
    let Some(reference) = reference else {
        return Vec::new();
    };
    let fingerprint = |st: &SystemStats| {
        vec![
            ("ComfyUI version", st.system.comfyui_version.clone()),
            ("PyTorch version", st.system.pytorch_version.clone()),
            ("launch arguments", st.system.argv.join(" ")),
            (
                "device",
                st.primary().map(|d| d.name.clone()).unwrap_or_default(),
            ),
        ]
    };
    let mut last = fingerprint(reference);
    let mut out = Vec::new();
    for job in &data.session.workflows {
        for entry in &job.runs {
            let Some(stats) = data
                .runs
                .get(&entry.run_id)
                .and_then(|f| f.record.system_stats_before.as_ref())
            else {
                continue;
            };
            let now = fingerprint(stats);
            for ((what, before), (_, after)) in last.iter().zip(&now) {
                if before != after {
                    out.push(format!(
                        "the server's {what} changed during the session ({before} → {after}) before run {} (step {} {}): runs before and after are not comparable",
                        short(&entry.run_id),
                        entry.step,
                        entry.increment
                    ));
                }
            }
            last = now;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::Outcome;

    #[test]
    fn a_baseline_that_grows_from_run_to_run_is_called_out() {
        let run = |i: usize, baseline: Option<f64>| RunEntry {
            increment: format!("inc{i}"),
            summary: Some(crate::session::journal::RunSummary {
                vram_baseline_mib: baseline,
                ..Default::default()
            }),
            ..RunEntry::done(format!("run{i}-0000"), i, Outcome::Passed)
        };
        let growing = [
            run(0, Some(300.0)),
            run(1, Some(420.0)),
            run(2, Some(700.0)),
        ];
        let refs: Vec<&RunEntry> = growing.iter().collect();
        let w = baseline_warning(&refs).expect("growth called out");
        assert!(w.contains("300 MiB before run run0-000"), "{w}");
        assert!(
            w.contains("700 MiB before run run2-000 (step 2 inc2)"),
            "{w}"
        );
        // Going down once, too little growth, or too few runs: nothing to say.
        for series in [
            vec![Some(300.0), Some(900.0), Some(800.0)],
            vec![Some(300.0), Some(350.0), Some(400.0)],
            vec![Some(300.0), Some(900.0)],
            vec![None, None, None],
        ] {
            let runs: Vec<RunEntry> = series.iter().enumerate().map(|(i, b)| run(i, *b)).collect();
            let refs: Vec<&RunEntry> = runs.iter().collect();
            assert_eq!(baseline_warning(&refs), None, "{series:?}");
        }
    }
}
