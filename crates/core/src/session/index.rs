//! `runs/index.jsonl`: an append-only line per finished run, linking every run id to its
//! session, step, increment, workflow hash, component hashes and outcome.

use super::journal::{JournalError, SyncBehind};
use crate::hashing::ComponentHash;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// File name of the run index inside the runs folder.
pub(crate) const INDEX_FILE: &str = "index.jsonl";

/// One line of `runs/index.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The run id (= prompt_id).
    pub run_id: String,
    /// The session id (folder under the runs folder).
    pub session_id: String,
    /// The workflow's name in the session.
    pub workflow: String,
    /// The ladder step.
    pub step: usize,
    /// The increment.
    pub increment: String,
    /// Why the run was made (`minimal`, `target`, `search`, `repeat`, `control`).
    pub role: super::journal::RunRole,
    /// Canonical sha256 of the submitted workflow.
    pub workflow_sha256: String,
    /// Component hashes of its model files.
    #[serde(default)]
    pub component_hashes: Vec<ComponentHash>,
    /// Outcome name (`passed`, `failed`, `rejected`, `interrupted`, `timeout`, `server_lost`).
    pub outcome: String,
    /// Silent memory fallbacks of the run (`tiled VAE decode fallback`); a pass with any is a
    /// pass with a warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_fallbacks: Vec<String>,
    /// Memory pressure a passed run completed under, in words (`analytics::pressure`): a
    /// degraded pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_pressure: Vec<String>,
    /// The run folder, relative to the runs folder.
    pub dir: String,
    /// RFC 3339 time the run finished.
    pub finished_at: String,
    /// Short id of the environment fingerprint the run saw (its `run.json` holds the whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// `check`'s run: the server's version and the checkout's commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckMark>,
}

impl IndexEntry {
    /// The index line of a finished journal entry `entry` of workflow `workflow` in session
    /// `session_id` (its folder relative to the runs folder), with its component hashes.
    pub(crate) fn of(
        session_id: &str,
        workflow: &str,
        entry: &super::journal::RunEntry,
        component_hashes: Vec<ComponentHash>,
        check: Option<CheckMark>,
    ) -> Self {
        let delivered = |pick: fn(&crate::vocab::ProductSummary) -> &Vec<String>| {
            entry
                .summary
                .as_ref()
                .map(|s| pick(&s.delivered).clone())
                .unwrap_or_default()
        };
        Self {
            run_id: entry.run_id.clone(),
            session_id: session_id.to_string(),
            workflow: workflow.to_string(),
            step: entry.step,
            increment: entry.increment.clone(),
            role: entry.role,
            workflow_sha256: entry.workflow_sha256.clone(),
            component_hashes,
            outcome: entry
                .outcome
                .as_ref()
                .map(|o| o.name().to_string())
                .unwrap_or_default(),
            memory_fallbacks: delivered(|d| &d.memory_fallbacks),
            memory_pressure: delivered(|d| &d.memory_pressure),
            dir: PathBuf::from(session_id)
                .join(&entry.dir)
                .to_string_lossy()
                .into_owned(),
            finished_at: entry
                .finished_at
                .clone()
                .unwrap_or_else(crate::units::now_rfc3339),
            fingerprint: entry.fingerprint.clone(),
            check,
        }
    }
}

/// What `comfy-bisect check` adds to its run's index line, so a `git bisect run` can be read
/// back from the runs folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckMark {
    /// `comfyui_version` of the server's `/system_stats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comfyui_version: Option<String>,
    /// `git rev-parse HEAD` of the checkout (`--checkout`, else the current folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// The index file of a runs folder.
pub(crate) fn index_path(runs_dir: &Path) -> PathBuf {
    runs_dir.join(INDEX_FILE)
}

/// Appends one entry (one line, written with a single `write`); its fsync is left to `sync`
/// (see [`SyncBehind`]). When the file does not end with a line break (a process killed in the
/// middle of an append left a torn line), the entry starts on a fresh line, so the torn line
/// alone is lost.
pub(crate) fn append_behind(
    runs_dir: &Path,
    entry: &IndexEntry,
    sync: &mut SyncBehind,
) -> Result<(), JournalError> {
    let path = index_path(runs_dir);
    let io = |action: &'static str| {
        let path = path.clone();
        move |source| JournalError::Io {
            action,
            path,
            source,
        }
    };
    fs::create_dir_all(runs_dir).map_err(io("cannot create folder for"))?;
    let mut line = serde_json::to_string(entry).map_err(|e| JournalError::Invalid {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    line.push('\n');
    let mut file = crate::atomic::open_private()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)
        .map_err(io("cannot open"))?;
    if !ends_with_newline(&mut file).map_err(io("cannot read"))? {
        line.insert(0, '\n');
    }
    file.write_all(line.as_bytes())
        .map_err(io("cannot append to"))?;
    sync.sync_later(file, &path, None);
    Ok(())
}

/// Whether the file is empty or its last byte is a line break.
fn ends_with_newline(file: &mut fs::File) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if file.metadata()?.len() == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Reads every entry; a torn last line (a kill during the append) is skipped.
pub fn read_all(runs_dir: &Path) -> Result<Vec<IndexEntry>, JournalError> {
    let path = index_path(runs_dir);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(JournalError::Io {
                action: "cannot read",
                path,
                source,
            })
        }
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// How a run-id prefix resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Exactly one run.
    Found(Box<IndexEntry>),
    /// No run id starts with the prefix.
    NotFound,
    /// Several runs match: their ids.
    Ambiguous(Vec<String>),
}

/// Finds the run whose id starts with `prefix` (case-insensitive; at least 1 character).
pub(crate) fn lookup(entries: &[IndexEntry], prefix: &str) -> Lookup {
    let prefix = prefix.trim().to_ascii_lowercase();
    if prefix.is_empty() {
        return Lookup::NotFound;
    }
    let mut ids: Vec<&IndexEntry> = Vec::new();
    for e in entries {
        if e.run_id.to_ascii_lowercase().starts_with(&prefix)
            && !ids.iter().any(|x| x.run_id == e.run_id)
        {
            ids.push(e);
        }
    }
    match ids.len() {
        0 => Lookup::NotFound,
        1 => Lookup::Found(Box::new(ids[0].clone())),
        _ => Lookup::Ambiguous(ids.iter().map(|e| e.run_id.clone()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::RunRole;
    use std::fs::OpenOptions;

    fn entry(id: &str) -> IndexEntry {
        IndexEntry {
            run_id: id.into(),
            session_id: "s".into(),
            workflow: "wf".into(),
            step: 1,
            increment: "lora".into(),
            role: RunRole::Search,
            workflow_sha256: "00".into(),
            component_hashes: vec![],
            outcome: "passed".into(),
            memory_fallbacks: vec![],
            memory_pressure: vec![],
            dir: format!("s/01-lora-{id}"),
            finished_at: "2026-11-29T01:00:00Z".into(),
            fingerprint: None,
            check: None,
        }
    }

    #[test]
    fn append_then_lookup_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let mut sync = SyncBehind::default();
        for id in ["abc123", "abd456", "ff0000"] {
            append_behind(dir.path(), &entry(id), &mut sync).unwrap();
        }
        sync.wait().unwrap();
        let all = read_all(dir.path()).unwrap();
        assert_eq!(all.len(), 3);
        assert!(matches!(lookup(&all, "ABC"), Lookup::Found(e) if e.run_id == "abc123"));
        assert_eq!(
            lookup(&all, "ab"),
            Lookup::Ambiguous(vec!["abc123".into(), "abd456".into()])
        );
        assert_eq!(lookup(&all, "zz"), Lookup::NotFound);
        assert_eq!(lookup(&all, ""), Lookup::NotFound);
    }

    #[test]
    fn torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        append_behind(dir.path(), &entry("abc"), &mut SyncBehind::default()).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(index_path(dir.path()))
            .unwrap();
        f.write_all(b"{\"run_id\":\"tor").unwrap();
        assert_eq!(read_all(dir.path()).unwrap().len(), 1);
    }

    #[test]
    fn an_append_after_a_torn_line_starts_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut sync = SyncBehind::default();
        append_behind(dir.path(), &entry("before"), &mut sync).unwrap();
        // A crash in the middle of the next append.
        let mut f = OpenOptions::new()
            .append(true)
            .open(index_path(dir.path()))
            .unwrap();
        f.write_all(b"{\"run_id\":\"tor").unwrap();
        drop(f);
        append_behind(dir.path(), &entry("after"), &mut sync).unwrap();
        append_behind(dir.path(), &entry("later"), &mut sync).unwrap();
        sync.wait().unwrap();
        let ids: Vec<String> = read_all(dir.path())
            .unwrap()
            .into_iter()
            .map(|e| e.run_id)
            .collect();
        assert_eq!(ids, ["before", "after", "later"]);
    }
}
