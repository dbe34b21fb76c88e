//! The look-ups of sessions and runs in runs folders: the session to resume, a session or a
//! run by id prefix, a runs folder's runs, a session's summary and its resume command.

use super::{AppResult, ErrorKind, Kind};
use crate::session::folders;
use crate::session::index::{self, IndexEntry, Lookup};
use crate::session::journal::{
    orphan_runs, read_json, OrphanRun, RunFile, SessionFile, SessionPaths, SessionState,
    RUN_RECORD_FILE, SESSION_FILE,
};
use std::path::{Path, PathBuf};

/// The command that continues a session that stopped before its end (`None` once done, and
/// for a session stopped at preflight: [`summary`] says what `resume` does for it).
pub fn resume_command(paths: &SessionPaths, session: &SessionFile) -> Option<String> {
    match &session.state {
        SessionState::Stopped { reason, .. }
            if *reason != crate::session::journal::StopReason::Preflight => {}
        _ => return None,
    }
    Some(recheck_command(paths, session))
}

/// The `resume` command of a session, whatever its state: it checks the workflows preflight
/// skipped again (and continues the session when runs are left).
pub fn recheck_command(paths: &SessionPaths, session: &SessionFile) -> String {
    crate::shell::resume_command(&session.session_id, Some(&paths.runs_dir))
}

/// What a session without `--strict` says when a step passed under memory pressure or
/// through a fallback: such a pass is not a failure, and `--strict` makes it one.
pub const STRICT_HINT: &str = "a pass under memory pressure or through a memory fallback is \
     counted as passed; rerun with --strict to count it as a failure and bisect to the first one";

/// Each workflow's verdict and where the session and report are, one line each.
pub fn summary(paths: &SessionPaths, session: &SessionFile) -> String {
    let mut out = format!("session {}\n", session.session_id);
    for job in &session.workflows {
        let verdict = job.headline().unwrap_or_else(|| "not started".into());
        out.push_str(&format!("  {}: {verdict}\n", job.name));
    }
    if !session.options.strict
        && session
            .workflows
            .iter()
            .any(|j| j.first_degraded_pass().is_some())
    {
        out.push_str(&format!("  {STRICT_HINT}\n"));
    }
    if let SessionState::Stopped { detail, .. } = &session.state {
        out.push_str(&format!("  stopped: {detail}\n"));
    }
    let skipped: Vec<&str> = session
        .skipped_by_preflight()
        .into_iter()
        .map(|w| session.workflows[w].name.as_str())
        .collect();
    if !skipped.is_empty() {
        let (what, it) = if skipped.len() == 1 {
            ("workflow", "it")
        } else {
            ("workflows", "them")
        };
        out.push_str(&format!(
            "  skipped by preflight: {} ({what} not run); once what preflight listed is installed, `{}` checks {it} again and bisects each that passes\n",
            skipped.join(", "),
            recheck_command(paths, session)
        ));
    }
    out.push_str(&format!("  journal: {}\n", paths.session_file().display()));
    let report = paths.dir.join("report.md");
    if report.exists() {
        out.push_str(&format!("  report:  {}\n", report.display()));
    }
    out
}

/// The session of `runs_dir` to resume when none is named: among those with runs left or a run
/// in flight, the one whose journal was written last (`updated_at`, then the id).
pub(crate) fn latest_unfinished(runs_dir: &Path) -> Result<SessionPaths, String> {
    let entries = std::fs::read_dir(runs_dir).map_err(|e| {
        format!(
            "cannot read the runs folder {}: {e} (pass --runs-dir DIR, or the session id)",
            runs_dir.display()
        )
    })?;
    let mut best: Option<(String, String)> = None;
    for entry in entries.filter_map(Result::ok) {
        let id = entry.file_name().to_string_lossy().into_owned();
        let paths = SessionPaths::new(runs_dir, &id);
        if !paths.session_file().is_file() || crate::check::is_check(&paths.dir) {
            continue;
        }
        // An unreadable journal is not a candidate; `resume ID` says what is wrong with it.
        let Ok(session) = SessionFile::load(&paths) else {
            continue;
        };
        if !session.has_runs_left() {
            continue;
        }
        let key = (session.updated_at.clone(), id);
        if best.as_ref().is_none_or(|b| key > *b) {
            best = Some(key);
        }
    }
    match best {
        Some((_, id)) => Ok(SessionPaths::new(runs_dir, &id)),
        None => Err(format!(
            "no unfinished session in {} to resume (`comfy-bisect runs` lists the sessions; pass an id or --runs-dir DIR)",
            runs_dir.display()
        )),
    }
}

/// Finds a session folder from an id, a unique id prefix or a path.
pub fn find_session(runs_dir: &Path, query: &str) -> AppResult<SessionPaths> {
    find_session_text(runs_dir, query).kind(ErrorKind::Input)
}

/// [`find_session`] with its error as text (the façade's callers get an [`AppError`](super::AppError)).
pub(super) fn find_session_text(runs_dir: &Path, query: &str) -> Result<SessionPaths, String> {
    let as_path = Path::new(query);
    if as_path.join(SESSION_FILE).is_file() {
        let dir = as_path.to_path_buf();
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let runs = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        return Ok(SessionPaths::new(&runs, &id));
    }
    let entries = std::fs::read_dir(runs_dir).map_err(|e| {
        format!(
            "cannot read the runs folder {}: {e} (pass --runs-dir DIR)",
            runs_dir.display()
        )
    })?;
    let mut matches: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(SESSION_FILE).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(query))
        .collect();
    matches.sort();
    if let Some(exact) = matches.iter().find(|m| *m == query) {
        return Ok(SessionPaths::new(runs_dir, exact));
    }
    match matches.len() {
        0 => Err(format!(
            "no session '{query}' in {} (`comfy-bisect runs` lists them)",
            runs_dir.display()
        )),
        1 => Ok(SessionPaths::new(runs_dir, &matches[0])),
        _ => Err(format!(
            "'{query}' matches several sessions: {}; give more of the id",
            matches.join(", ")
        )),
    }
}

/// Finds the session folder: `session` as a folder holding session.json, else a session id or
/// unique id prefix under the runs folders. An id in more than one runs folder is an error
/// naming them (never one picked silently).
pub fn resolve_session(session: &str, runs_dirs: &[PathBuf]) -> AppResult<PathBuf> {
    resolve_session_text(session, runs_dirs).kind(ErrorKind::Input)
}

/// [`resolve_session`] with its error as text (the façade's callers get an [`AppError`](super::AppError)).
fn resolve_session_text(session: &str, runs_dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let as_path = Path::new(session);
    if as_path.join(SESSION_FILE).is_file() {
        return Ok(as_path.to_path_buf());
    }
    let where_ = runs_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let exact: Vec<PathBuf> = runs_dirs
        .iter()
        .map(|d| d.join(session))
        .filter(|p| p.join(SESSION_FILE).is_file())
        .collect();
    match exact.len() {
        1 => return Ok(exact[0].clone()),
        0 => {}
        _ => {
            return Err(folders::Duplicate {
                what: "session",
                id: session.to_string(),
                places: exact
                    .iter()
                    .filter_map(|p| p.parent().map(Path::to_path_buf))
                    .collect(),
            }
            .to_string())
        }
    }
    let mut matches: Vec<PathBuf> = Vec::new();
    let mut unreadable = Vec::new();
    for runs_dir in runs_dirs {
        match std::fs::read_dir(runs_dir) {
            Ok(entries) => matches.extend(entries.filter_map(Result::ok).map(|e| e.path()).filter(
                |p| {
                    p.join(SESSION_FILE).is_file()
                        && p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(session))
                },
            )),
            Err(e) => unreadable.push(format!(
                "cannot read the runs folder {} ({e})",
                runs_dir.display()
            )),
        }
    }
    if matches.is_empty() && !unreadable.is_empty() {
        return Err(format!(
            "no session {session:?}: {}; pass --runs-dir DIR or the session folder",
            unreadable.join("; ")
        ));
    }
    matches.sort();
    let names: Vec<String> = matches
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(format!(
            "no session {session:?} under {where_}: `comfy-bisect runs --runs-dir {}` lists the sessions",
            runs_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" --runs-dir ")
        )),
        _ if names.iter().all(|n| *n == names[0]) => Err(folders::Duplicate {
            what: "session",
            id: names[0].clone(),
            places: matches
                .iter()
                .filter_map(|p| p.parent().map(Path::to_path_buf))
                .collect(),
        }
        .to_string()),
        _ => Err(format!(
            "{session:?} matches {} sessions under {where_} ({}); give more of the id",
            matches.len(),
            names.join(", ")
        )),
    }
}

/// The runs of a runs folder: its index entries, plus the runs of sessions whose index lines
/// are missing (a copied runs folder).
pub(crate) fn run_entries(runs_dir: &Path) -> Vec<IndexEntry> {
    let mut entries = index::read_all(runs_dir).unwrap_or_default();
    let Ok(dirs) = std::fs::read_dir(runs_dir) else {
        return entries;
    };
    for dir in dirs.filter_map(Result::ok) {
        let Ok(session) = read_json::<SessionFile>(&dir.path().join(SESSION_FILE)) else {
            continue;
        };
        for job in &session.workflows {
            for run in &job.runs {
                if entries.iter().any(|e| e.run_id == run.run_id) {
                    continue;
                }
                entries.push(IndexEntry {
                    run_id: run.run_id.clone(),
                    session_id: session.session_id.clone(),
                    workflow: job.name.clone(),
                    step: run.step,
                    increment: run.increment.clone(),
                    role: run.role,
                    workflow_sha256: run.workflow_sha256.clone(),
                    component_hashes: vec![],
                    outcome: run
                        .outcome
                        .as_ref()
                        .map(|o| o.name().to_string())
                        .unwrap_or_else(|| "in_flight".into()),
                    memory_fallbacks: run
                        .summary
                        .as_ref()
                        .map(|s| s.delivered.memory_fallbacks.clone())
                        .unwrap_or_default(),
                    memory_pressure: run
                        .summary
                        .as_ref()
                        .map(|s| s.delivered.memory_pressure.clone())
                        .unwrap_or_default(),
                    dir: format!("{}/{}", session.session_id, run.dir),
                    finished_at: run.finished_at.clone().unwrap_or_default(),
                    fingerprint: run.fingerprint.clone(),
                    check: None,
                });
            }
        }
    }
    entries
}

/// A run found by its id (or a unique prefix) in one or several runs folders (`show`).
#[derive(Debug, Clone)]
pub struct FoundRun {
    /// Its line of the runs folder's index.
    pub entry: IndexEntry,
    /// The run's folder.
    pub dir: PathBuf,
}

impl FoundRun {
    /// Where its record (`run.json`) is.
    pub(crate) fn record_path(&self) -> PathBuf {
        self.dir.join(RUN_RECORD_FILE)
    }

    /// `run.json` as written. Error: it cannot be read (the run may still be in flight).
    pub fn record_text(&self) -> Result<String, String> {
        let path = self.record_path();
        std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "cannot read {}: {e} (the run may still be in flight)",
                path.display()
            )
        })
    }

    /// The run's record.
    pub fn record(&self) -> Result<RunFile, String> {
        read_json::<RunFile>(&self.record_path()).map_err(|e| e.to_string())
    }

    /// Node `id` of class `class_type` as the canvas shows it; a node inside a subgraph is
    /// named with the subgraph's name from the run's UI companion (`workflow.ui.json`).
    pub fn node_label(&self, id: &str, class_type: &str) -> String {
        let names = std::fs::read_to_string(self.dir.join("workflow.ui.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .map(|ui| crate::workflow::ui::subgraph_names(&ui))
            .unwrap_or_default();
        crate::workflow::label::node_label(id, class_type, &names)
    }
}

/// Finds a run by its id or a unique prefix of it among the runs of `runs_dirs` (each folder's
/// index, plus runs missing from it). Errors say what to do: a session id given where a run id
/// belongs, no match, several matches, one run id in two runs folders.
pub fn find_run(runs_dirs: &[PathBuf], query: &str) -> AppResult<FoundRun> {
    find_run_text(runs_dirs, query).kind(ErrorKind::Input)
}

/// [`find_run`] with its error as text (the façade's callers get an [`AppError`](super::AppError)).
fn find_run_text(runs_dirs: &[PathBuf], query: &str) -> Result<FoundRun, String> {
    let tagged: Vec<(&PathBuf, IndexEntry)> = runs_dirs
        .iter()
        .flat_map(|d| run_entries(d).into_iter().map(move |e| (d, e)))
        .collect();
    let entries: Vec<IndexEntry> = tagged.iter().map(|(_, e)| e.clone()).collect();
    let entry = match index::lookup(&entries, query) {
        Lookup::Found(e) => *e,
        Lookup::NotFound => {
            // A session id where a run id belongs: say which command prints a session.
            let is_session = !query.is_empty()
                && runs_dirs
                    .iter()
                    .filter_map(|d| std::fs::read_dir(d).ok())
                    .any(|entries| {
                        entries.filter_map(Result::ok).any(|e| {
                            e.file_name().to_string_lossy().starts_with(query)
                                && e.path().join(SESSION_FILE).is_file()
                        })
                    });
            if is_session {
                return Err(format!(
                    "'{query}' is a session, not a run: `comfy-bisect report {query}` prints the session's report (`show` prints one run; `comfy-bisect runs` lists the sessions)"
                ));
            }
            let where_ = runs_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(format!(
                "no run id starts with '{query}' in {where_} (`comfy-bisect runs` lists sessions)"
            ));
        }
        Lookup::Ambiguous(ids) => {
            return Err(format!(
                "'{query}' matches {} runs: {}; give more of the id",
                ids.len(),
                ids.join(", ")
            ))
        }
    };
    let mut places: Vec<PathBuf> = Vec::new();
    for (d, e) in &tagged {
        if e.run_id == entry.run_id && !places.contains(d) {
            places.push((*d).clone());
        }
    }
    if places.len() > 1 {
        places.sort();
        return Err(folders::Duplicate {
            what: "run",
            id: entry.run_id.clone(),
            places,
        }
        .to_string());
    }
    let dir = places[0].join(&entry.dir);
    Ok(FoundRun { entry, dir })
}

/// A session of a runs listing, with what `runs` shows beside its journal.
#[derive(Debug)]
pub struct ListedSession {
    /// The session and where it is.
    pub found: folders::FoundSession,
    /// Run folders its journal does not know.
    pub orphans: Vec<OrphanRun>,
    /// A `check` session's record.
    pub check: Option<crate::check::CheckRecord>,
}

/// The sessions of several runs folders (`runs`): sorted as found, ids found in two folders,
/// folders whose journal cannot be read.
#[derive(Debug)]
pub struct SessionList {
    /// Every readable session.
    pub sessions: Vec<ListedSession>,
    /// Session ids found in more than one runs folder.
    pub duplicates: Vec<folders::Duplicate>,
    /// Session folders whose journal cannot be read.
    pub unreadable: Vec<folders::Unreadable>,
}

/// Lists the sessions of `runs_dirs` with their orphan runs and check records.
pub fn list_sessions(runs_dirs: &[PathBuf]) -> AppResult<SessionList> {
    list_sessions_text(runs_dirs).kind(ErrorKind::Input)
}

/// The folder of the session of `runs_dirs` whose journal was written last (`updated_at`, then
/// the id): what `report` shows when no session is named. Errors: no session there.
pub fn latest_session(runs_dirs: &[PathBuf]) -> AppResult<PathBuf> {
    let list = list_sessions_text(runs_dirs).kind(ErrorKind::Input)?;
    list.sessions
        .iter()
        .max_by(|a, b| {
            let key = |l: &ListedSession| {
                (
                    crate::units::parse_rfc3339(&l.found.session.updated_at),
                    l.found.session.session_id.clone(),
                )
            };
            key(a).cmp(&key(b))
        })
        .map(|l| l.found.dir.clone())
        .ok_or_else(|| {
            format!(
                "no session in {} (`comfy-bisect runs` lists them; pass a session id or --runs-dir DIR)",
                runs_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .kind(ErrorKind::Input)
}

/// [`list_sessions`] with its error as text (the façade's callers get an [`AppError`](super::AppError)).
fn list_sessions_text(runs_dirs: &[PathBuf]) -> Result<SessionList, String> {
    let (found, duplicates, unreadable) = folders::sessions(runs_dirs)?;
    let sessions = found
        .into_iter()
        .map(|found| {
            let paths = SessionPaths {
                runs_dir: found.runs_dir.clone(),
                dir: found.dir.clone(),
            };
            let orphans = orphan_runs(&paths, &found.session);
            let check = crate::check::CheckRecord::load(&found.dir);
            ListedSession {
                found,
                orphans,
                check,
            }
        })
        .collect();
    Ok(SessionList {
        sessions,
        duplicates,
        unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_session(runs: &Path, id: &str) {
        let dir = runs.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SESSION_FILE), "{}").unwrap();
    }

    #[test]
    fn sessions_are_found_by_id_prefix_or_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path();
        write_session(runs, "20260101-aaaa");
        write_session(runs, "20260101-aaab");
        write_session(runs, "20260102-bbbb");
        let found = find_session(runs, "20260102").unwrap();
        assert_eq!(found.dir, runs.join("20260102-bbbb"));
        let by_folder = find_session(
            Path::new("elsewhere"),
            &runs.join("20260101-aaaa").display().to_string(),
        )
        .unwrap();
        assert_eq!(by_folder.dir, runs.join("20260101-aaaa"));
        let ambiguous = find_session(runs, "20260101-aaa").unwrap_err();
        assert!(
            ambiguous.message.contains("several sessions"),
            "{ambiguous}"
        );
        assert_eq!(ambiguous.kind, ErrorKind::Input);
        assert!(find_session(runs, "2027")
            .unwrap_err()
            .message
            .contains("no session"));
        assert_eq!(
            resolve_session("20260102", &[runs.to_path_buf()]).unwrap(),
            runs.join("20260102-bbbb")
        );
    }
}
