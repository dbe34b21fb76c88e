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
    pub fn run_dir(&self, entry: &RunEntry) -> PathBuf {
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
    pub fn save(&mut self, paths: &SessionPaths) -> Result<(), JournalError> {
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
