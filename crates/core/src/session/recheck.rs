//! `resume` runs preflight again for the workflows a session skipped (verdict
//! `preflight_failed`): one that now passes (its custom nodes or model files were installed)
//! gets its ladder and is bisected like the others; one that still fails keeps its verdict with
//! the refreshed list of what is missing. Each check is recorded in the journal
//! (`preflight_rechecks`) in the same write as its outcome, so a kill during it leaves the
//! workflow skipped and the next `resume` checks it again: the same outcome, nothing lost.

use super::journal::{
    now_rfc3339, JournalError, Phase, PreflightRecheck, SessionFile, SessionPaths, SessionState,
    StopReason,
};
use super::prepare::{prepare, LadderConfig, Prepared, Problems};
use super::setup::{write_job, UI_SOURCE_FILE};
use crate::nodedefs::NodeDefs;
use crate::workflow::ui::Converted;
use serde_json::Value;

/// What preflight said of one skipped workflow when `resume` checked it again.
#[derive(Debug, Clone)]
pub struct Rechecked {
    /// The workflow's name in the session.
    pub workflow: String,
    /// `None`: it passes now, its ladder is planned and it is bisected; else what is still
    /// missing (its verdict).
    pub problems: Option<Problems>,
}

/// Checks every skipped workflow of `session` against `defs` (the server's node definitions
/// now), writes the ladder of each one that passes, and saves the journal once with the
/// outcomes and their `preflight_rechecks` entries. A session that had ended (or stopped at
/// preflight) and now has a workflow to run is `running` again.
pub(crate) fn recheck_skipped(
    paths: &SessionPaths,
    session: &mut SessionFile,
    defs: &NodeDefs,
) -> Result<Vec<Rechecked>, JournalError> {
    let skipped = session.skipped_by_preflight();
    if skipped.is_empty() {
        return Ok(Vec::new());
    }
    let config = LadderConfig::from_record(&session.options.plan_args, session.options.controls);
    let at = now_rfc3339();
    let mut out = Vec::new();
    let mut first_passed = None;
    for w in skipped {
        let job = &session.workflows[w];
        let prepared = config
            .clone()
            .and_then(|config| plan_again(paths, session, w, defs, &config));
        let problems = match prepared {
            Ok(Prepared::Ready(mut ready)) => {
                ready.source_file = job.source_file.clone();
                session.workflows[w] = write_job(paths, *ready)?;
                first_passed.get_or_insert(w);
                None
            }
            Ok(Prepared::Problems { problems, .. }) => Some(problems),
            Err(text) => Some(Problems {
                other: vec![text],
                ..Problems::default()
            }),
        };
        let job = &mut session.workflows[w];
        if let Some(problems) = &problems {
            job.phase = Phase::Done;
            job.verdict = problems.verdict();
        }
        session.preflight_rechecks.push(PreflightRecheck {
            workflow: job.name.clone(),
            at: at.clone(),
            server: session.server.clone(),
            passed: problems.is_none(),
        });
        out.push(Rechecked {
            workflow: job.name.clone(),
            problems,
        });
    }
    if let Some(w) = first_passed {
        let ended = matches!(
            session.state,
            SessionState::Done
                | SessionState::Stopped {
                    reason: StopReason::Preflight,
                    ..
                }
        );
        if ended {
            session.state = SessionState::Running { workflow: w };
        }
    }
    session.save(paths)?;
    Ok(out)
}

/// Plans workflow `w` again from its recorded target (and its UI document, when the input was
/// a UI workflow and it still converts to the same target). Error: the recorded target cannot
/// be read or is not the one the journal names.
fn plan_again(
    paths: &SessionPaths,
    session: &SessionFile,
    w: usize,
    defs: &NodeDefs,
    config: &LadderConfig,
) -> Result<Prepared, String> {
    let job = &session.workflows[w];
    let file =
        job.steps.last().map(|s| paths.dir.join(&s.file)).ok_or(
            "the journal names no target file for this workflow; bisect the workflow again",
        )?;
    let target = crate::workflow::load_api_file(&file).map_err(|e| e.to_string())?;
    if target.sha256() != job.target_sha256 {
        return Err(format!(
            "{} is not the target the session recorded (its sha256 differs); bisect the workflow again",
            file.display()
        ));
    }
    let ui_file = paths
        .dir
        .join("workflows")
        .join(&job.name)
        .join(UI_SOURCE_FILE);
    let ui: Option<(Value, Converted)> = ui_file
        .is_file()
        .then(|| crate::workflow::ui::load_workflow_file(&ui_file, defs).ok())
        .flatten()
        .filter(|l| l.workflow.sha256() == job.target_sha256)
        .and_then(|l| l.ui);
    Ok(prepare(
        &job.name,
        &job.source,
        target,
        ui.as_ref(),
        defs,
        config,
    ))
}
