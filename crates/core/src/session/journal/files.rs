//! Where a session's files are (`runs/<session-id>/`, the run folders) and how the journal is
//! read and saved; session ids and timestamps.

use super::durable::{io_err, write_json_atomic, JournalError, SyncBehind};
use super::types::{RunEntry, SessionFile, SESSION_FILE, SESSION_SCHEMA_VERSION};
use std::fs;
use std::path::{Path, PathBuf};

/// Paths of one session folder.
#[derive(Debug, Clone)]
pub struct SessionPaths {
    /// `runs/`.
    pub runs_dir: PathBuf,
    /// `runs/<session-id>/`.
    pub dir: PathBuf,
}

impl SessionPaths {
    /// Paths for `session_id` under `runs_dir`.
    pub fn new(runs_dir: &Path, session_id: &str) -> SessionPaths {
        SessionPaths {
            runs_dir: runs_dir.to_path_buf(),
            dir: runs_dir.join(session_id),
        }
    }

    /// `session.json`.
    pub fn session_file(&self) -> PathBuf {
        self.dir.join(SESSION_FILE)
    }

    /// The run folder of `entry`.
    pub(crate) fn run_dir(&self, entry: &RunEntry) -> PathBuf {
        self.dir.join(&entry.dir)
    }
}

/// The run folder name: `NN-<increment>-<run-id>` (NN = step, two digits).
pub fn run_dir_name(step: usize, increment: &str, run_id: &str) -> String {
    format!("{}-{run_id}", step_stem(step, increment))
}

/// `NN-<increment>` with the increment made safe for a file name.
pub(crate) fn step_stem(step: usize, increment: &str) -> String {
    let safe: String = increment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{step:02}-{safe}")
}

/// A run folder of a session that `session.json` does not know: a kill (`kill -9`, power loss)
/// between creating the folder and journaling the run. Its prompt was never submitted (the
/// run is journaled before it is submitted), so a folder holding only the variant
/// ([`OrphanRun::unsubmitted`]) is safe to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanRun {
    /// The folder.
    pub dir: PathBuf,
    /// It holds only the variant (`workflow.json`, `workflow.ui.json`, or their temporary
    /// files): nothing was recorded from a server.
    pub unsubmitted: bool,
}

impl std::fmt::Display for OrphanRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.unsubmitted {
            write!(
                f,
                "orphan run folder {}: it holds only its workflow (the tool was stopped before \
                 the run was journaled, so it was never submitted); `resume` removes it",
                self.dir.display()
            )
        } else {
            write!(
                f,
                "run folder {} is not in session.json but holds more than its workflow; kept \
                 as it is (its prompt id is the folder name's UUID: look it up in the server's \
                 history), move it out of the session folder once read",
                self.dir.display()
            )
        }
    }
}

/// Whether `name` is a run folder name (`NN-<increment>-<UUID>`).
fn is_run_dir_name(name: &str) -> bool {
    name.len() > 37
        && name.as_bytes()[0].is_ascii_digit()
        && uuid::Uuid::parse_str(&name[name.len() - 36..]).is_ok()
        && name.as_bytes()[name.len() - 37] == b'-'
}

/// The run folders of the session folder that no run of `session` names.
pub fn orphan_runs(paths: &SessionPaths, session: &SessionFile) -> Vec<OrphanRun> {
    let known: std::collections::HashSet<&str> = session
        .workflows
        .iter()
        .flat_map(|w| &w.runs)
        .map(|r| r.dir.as_str())
        .collect();
    let Ok(entries) = fs::read_dir(&paths.dir) else {
        return Vec::new();
    };
    let variant = |name: &str| {
        let name = name.trim_start_matches('.');
        name.starts_with(super::types::RUN_WORKFLOW_FILE) || name.starts_with("workflow.ui.json")
    };
    let mut orphans: Vec<OrphanRun> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (is_run_dir_name(&name) && !known.contains(name.as_str())).then(|| {
                let unsubmitted = fs::read_dir(e.path()).is_ok_and(|files| {
                    files
                        .filter_map(Result::ok)
                        .all(|f| variant(&f.file_name().to_string_lossy()))
                });
                OrphanRun {
                    dir: e.path(),
                    unsubmitted,
                }
            })
        })
        .collect();
    orphans.sort_by(|a, b| a.dir.cmp(&b.dir));
    orphans
}

/// Removes the orphan run folders that hold only their workflow and says what it did with
/// every orphan (one line each): removed, or kept because it holds more.
pub fn settle_orphan_runs(paths: &SessionPaths, session: &SessionFile) -> Vec<String> {
    orphan_runs(paths, session)
        .into_iter()
        .map(|o| {
            if !o.unsubmitted {
                return o.to_string();
            }
            match fs::remove_dir_all(&o.dir) {
                Ok(()) => format!(
                    "removed the orphan run folder {}: it held only its workflow (the tool was \
                     stopped before the run was journaled, so it was never submitted)",
                    o.dir.display()
                ),
                Err(e) => format!("{o} (could not remove it: {e})"),
            }
        })
        .collect()
}

/// Reads a JSON journal file.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, JournalError> {
    let text = fs::read_to_string(path).map_err(io_err("cannot read", path))?;
    serde_json::from_str(&text).map_err(|e| JournalError::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

impl SessionFile {
    /// Loads `runs/<id>/session.json`.
    pub fn load(paths: &SessionPaths) -> Result<SessionFile, JournalError> {
        let file: SessionFile = read_json(&paths.session_file())?;
        if file.schema_version > SESSION_SCHEMA_VERSION {
            return Err(JournalError::Invalid {
                path: paths.session_file(),
                reason: format!(
                    "schema_version {} is newer than this comfy-bisect understands ({}); update comfy-bisect",
                    file.schema_version, SESSION_SCHEMA_VERSION
                ),
            });
        }
        Ok(file)
    }

    /// Rewrites `session.json` atomically, stamping `updated_at`.
    pub(crate) fn save(&mut self, paths: &SessionPaths) -> Result<(), JournalError> {
        self.updated_at = now_rfc3339();
        write_json_atomic(&paths.session_file(), self)
    }

    /// [`SessionFile::save`] with the fsync left to `sync` (see [`SyncBehind`]).
    pub(crate) fn save_behind(
        &mut self,
        paths: &SessionPaths,
        sync: &mut SyncBehind,
    ) -> Result<(), JournalError> {
        self.updated_at = now_rfc3339();
        sync.write_json_atomic(&paths.session_file(), self)
    }
}

pub(crate) use crate::units::now_rfc3339;

/// A new session id: `YYYYMMDD-HHMMSS-xxxx` (UTC, 4 random hex digits), sortable by time.
pub(crate) fn new_session_id() -> String {
    let now = crate::units::utc(jiff::Timestamp::now());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}-{}",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        &random[..4]
    )
}
