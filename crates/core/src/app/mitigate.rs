//! `mitigate SESSION` (and `bisect --mitigate`): the single-change controls of a session's
//! located failures, driven on the live server, and their summary.

use super::lookup::find_session;
use super::session::{move_session, server_preflight, with_live_driver};
use super::{AppError, AppResult, ErrorKind, Kind};
use crate::comfy::Client;
use crate::server::lock::SessionLock;
use crate::session::journal::{SessionFile, SessionPaths};
use crate::session::progress::Progress;
use std::path::PathBuf;

/// What `mitigate SESSION` (and `bisect --mitigate`) needs besides the server.
#[derive(Debug, Clone)]
pub struct MitigateRequest {
    /// The runs folder to look in.
    pub runs_dir: PathBuf,
    /// Session id, a unique prefix of it, or the session folder.
    pub session: String,
    /// `--max-mitigations N`.
    pub max: Option<usize>,
    /// `--launch-cmd 'TEMPLATE {args}'`.
    pub launch_cmd: Option<String>,
    /// The node catalog (`--catalog FILE` added to the built-in one).
    pub catalog: crate::catalog::Catalog,
    /// Run beside another session's lock.
    pub allow_shared_server: bool,
    /// `--server URL`: move the session to this server first (as `resume --server` does),
    /// recorded in the journal and in `mitigations.json`.
    pub server: Option<String>,
}

/// A session after a mitigation pass.
pub struct Mitigated {
    /// Where the session is.
    pub paths: SessionPaths,
    /// The journal.
    pub session: SessionFile,
    /// What was considered, run and judged.
    pub mitigations: crate::session::journal::MitigationsFile,
    /// How the pass ended.
    pub end: crate::controls::MitigateEnd,
}

impl Mitigated {
    /// True when some control passed.
    pub fn any_passed(&self) -> bool {
        self.mitigations
            .workflows
            .iter()
            .flat_map(|w| &w.controls)
            .any(|c| c.judged.as_ref().is_some_and(|j| j.passed))
    }

    /// One line per control of each workflow: its outcome or why it did not run.
    pub fn summary(&self) -> String {
        use crate::session::journal::MitigationState;
        let mut out = String::new();
        for w in &self.mitigations.workflows {
            out.push_str(&format!(
                "{}: mitigations for the failure at {}{}\n",
                w.workflow,
                w.stage,
                w.failing_node
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ));
            for c in &w.controls {
                let what = match (&c.state, &c.judged) {
                    (MitigationState::Done, Some(j)) => j.outcome.clone(),
                    (MitigationState::NotRun { reason }, _) => format!("not run: {reason}"),
                    (MitigationState::NotApplicable { .. }, _) => continue,
                    (MitigationState::InFlight, _) => "in flight".into(),
                    _ => "pending".into(),
                };
                out.push_str(&format!("  {}: {what}\n", c.control));
            }
        }
        for line in &self.mitigations.server {
            out.push_str(&format!("server: {line}\n"));
        }
        if self.mitigations.workflows.is_empty() {
            out.push_str("no workflow of the session has a located failure: nothing to mitigate\n");
        }
        if let crate::controls::MitigateEnd::Stopped(why) = &self.end {
            out.push_str(&format!("stopped: {why}\n"));
        }
        out.push_str(&format!(
            "mitigations: {}\nreport: {}\n",
            self.paths
                .dir
                .join(crate::session::journal::MITIGATIONS_FILE)
                .display(),
            self.paths.dir.join("report.md").display()
        ));
        out
    }
}

/// Whether a mitigation pass of the session left the server running with a control's change
/// (it was killed before it put the server back): `resume` and `mitigate` put it back first.
pub fn server_left_changed(paths: &SessionPaths) -> bool {
    crate::server::relaunch::left_changed(&paths.dir).is_some()
}

/// Puts back the server a killed mitigation pass left changed, under the server's lock, from
/// the launch record journaled before the first stop. Errors: the session cannot be read
/// (`Input`), the lock is held, or the server could not be put back (`Failed`, saying how to do
/// it by hand). What was done, in words.
pub fn put_back_server(
    rt: &tokio::runtime::Runtime,
    client: Client,
    paths: &SessionPaths,
    progress: Progress,
) -> AppResult<String> {
    let session = SessionFile::load(paths).kind(ErrorKind::Input)?;
    let _lock = SessionLock::acquire_or_share(
        &session.server,
        &session.session_id,
        session.options.allow_shared_server,
    )
    .kind(ErrorKind::Failed)?;
    let (back, _) = with_live_driver(rt, client, paths, session, progress, |d| {
        crate::controls::put_back_left_changed(d)
    });
    let back = back.kind(ErrorKind::Failed)?;
    let note = crate::controls::load(&paths.dir)
        .ok()
        .and_then(|m| m.server.last().cloned())
        .unwrap_or_default();
    if back {
        Ok(note)
    } else {
        Err(AppError::new(
            ErrorKind::Failed,
            format!(
                "{note} (also in {}, `server`)",
                paths
                    .dir
                    .join(crate::session::journal::MITIGATIONS_FILE)
                    .display()
            ),
        ))
    }
}

/// Runs the mitigations of a session's located failures on `client`'s server (see
/// `controls`): takes the server's lock, fetches the node definitions, drives, and
/// rewrites the reports. Errors: session not found or a `check` (`Input`), server unreachable
/// (`Unreachable`), lock held or journal not writable (`Failed`).
pub fn mitigate(
    rt: &tokio::runtime::Runtime,
    client: Client,
    request: MitigateRequest,
    progress: Progress,
) -> AppResult<Mitigated> {
    let paths = find_session(&request.runs_dir, &request.session).kind(ErrorKind::Input)?;
    if crate::check::is_check(&paths.dir) {
        return Err(AppError::new(
            ErrorKind::Input,
            format!(
                "{} is a `check` (one run for git bisect), not a bisect session: there is no located failure to mitigate",
                paths.dir.display()
            ),
        ));
    }
    let mut session = SessionFile::load(&paths).kind(ErrorKind::Input)?;
    // The lock is the one of the server the controls run on: the new one after a move.
    let server = request
        .server
        .as_deref()
        .map_or(session.server.as_str(), |s| s.trim_end_matches('/'))
        .to_string();
    let _lock = SessionLock::acquire_or_share(
        &server,
        &session.session_id,
        request.allow_shared_server || session.options.allow_shared_server,
    )
    .kind(ErrorKind::Failed)?;
    let (defs, _) = server_preflight(rt, &client).kind(ErrorKind::Unreachable)?;
    if let Some(moved) = move_session(&mut session, Some(&server)) {
        // The journal (`server_moves`, named on the report's session line) and the
        // mitigations record (its `server` lines) both say it.
        session.save(&paths).kind(ErrorKind::Failed)?;
        let mut record = crate::controls::load(&paths.dir).kind(ErrorKind::Failed)?;
        let at = session
            .server_moves
            .last()
            .map(|m| m.at.as_str())
            .unwrap_or_default();
        record.server.push(format!("{moved} at {at}"));
        crate::session::journal::write_json_atomic(
            &paths.dir.join(crate::session::journal::MITIGATIONS_FILE),
            &record,
        )
        .kind(ErrorKind::Failed)?;
        progress.println(&format!("note: {moved}"));
    }
    let options = crate::controls::MitigateOptions {
        max: request.max,
        launch_cmd: request.launch_cmd.clone(),
        defs,
        catalog: request.catalog.clone(),
    };
    let (end, session) = with_live_driver(rt, client, &paths, session, progress, |d| {
        crate::controls::mitigate(d, &options)
    });
    let end = end.kind(ErrorKind::Failed)?;
    let mitigations = crate::controls::load(&paths.dir).kind(ErrorKind::Failed)?;
    Ok(Mitigated {
        paths,
        session,
        mitigations,
        end,
    })
}
