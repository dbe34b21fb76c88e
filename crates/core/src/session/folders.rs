//! Several runs folders read as one record: one session per server, each writing its own
//! `runs/` (one folder per machine, collected by a scheduler), listed, shown and reported
//! together. Run and session ids are UUIDs, unique across machines; an id found in two folders
//! (a folder copied twice, or merged by hand) is reported, never silently merged.
//!
//! A `--runs-dir` value is a folder, or a pattern with `*`, `?` or `[…]` in its components
//! (`machines/*/runs`), expanded here so that a scheduler's quoted pattern works without a shell.

use super::journal::{read_json, SessionFile, SESSION_FILE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One session found in one runs folder.
#[derive(Debug, Clone)]
pub struct FoundSession {
    /// The runs folder it is in (as given, or as the pattern expanded).
    pub runs_dir: PathBuf,
    /// Its folder (`runs_dir/<session id>`).
    pub dir: PathBuf,
    /// Its journal.
    pub session: SessionFile,
}

/// The same id in more than one runs folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// `run` or `session`.
    pub what: &'static str,
    /// The id.
    pub id: String,
    /// The folders holding it (sorted).
    pub places: Vec<PathBuf>,
}

impl std::fmt::Display for Duplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} is in {} runs folders ({}): the same records copied twice, or two records with one id; they are kept apart, not merged (pass only one of those folders to read one)",
            self.what,
            self.id,
            self.places.len(),
            self.places
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn has_pattern(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Expands `--runs-dir` values: a value without a pattern is kept as given; a pattern is
/// replaced by the folders it matches (sorted). Duplicates are dropped. A pattern that matches
/// no folder is an error.
pub fn expand(values: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = Vec::new();
    for value in values {
        let text = value.to_string_lossy();
        let found = if has_pattern(&text) {
            let found = expand_pattern(value)?;
            if found.is_empty() {
                return Err(format!("--runs-dir {text}: the pattern matches no folder"));
            }
            found
        } else {
            vec![value.clone()]
        };
        for f in found {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The folders a shell-style pattern matches (`*`, `?`, `[…]`, `[!…]`), sorted; hidden folders
/// are left out unless the pattern names them.
fn expand_pattern(pattern: &Path) -> Result<Vec<PathBuf>, String> {
    let text = pattern.to_string_lossy();
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let paths = glob::glob_with(&text, options).map_err(|e| {
        format!("--runs-dir {text}: not a valid pattern ({e}); use * ? [abc] [!abc], quoted so the shell leaves it alone")
    })?;
    let mut found: Vec<PathBuf> = paths
        .filter_map(Result::ok)
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    Ok(found)
}

/// A session folder whose `session.json` exists but cannot be read (truncated, edited by hand,
/// written by a newer version): listed, never hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The session folder.
    pub dir: PathBuf,
    /// Why its journal cannot be read.
    pub reason: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: corrupt session journal, {} ({}); its runs (run.json of every run under \
             workflows/) are kept; restore {SESSION_FILE} from a backup to resume or report it, \
             or move the folder out of the runs folder",
            self.dir.display(),
            self.dir.join(SESSION_FILE).display(),
            self.reason
        )
    }
}

/// What [`sessions`] found: the sessions, the ids in more than one folder, the session folders
/// whose journal cannot be read.
pub(crate) type Listing = (Vec<FoundSession>, Vec<Duplicate>, Vec<Unreadable>);

/// Every session in every runs folder (sorted by session id, then folder), the ids that are in
/// more than one folder, and the session folders whose journal cannot be read (sorted). A
/// folder that cannot be read is an error naming it.
pub(crate) fn sessions(runs_dirs: &[PathBuf]) -> Result<Listing, String> {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    for runs_dir in runs_dirs {
        let entries = std::fs::read_dir(runs_dir).map_err(|e| {
            format!(
                "cannot read the runs folder {}: {e} (pass --runs-dir DIR)",
                runs_dir.display()
            )
        })?;
        for entry in entries.filter_map(Result::ok) {
            let dir = entry.path();
            let file = dir.join(SESSION_FILE);
            if !file.is_file() {
                continue;
            }
            match read_json::<SessionFile>(&file) {
                Ok(session) => found.push(FoundSession {
                    runs_dir: runs_dir.clone(),
                    dir,
                    session,
                }),
                Err(e) => unreadable.push(Unreadable {
                    dir,
                    reason: e.to_string(),
                }),
            }
        }
    }
    unreadable.sort_by(|a, b| a.dir.cmp(&b.dir));
    found.sort_by(|a, b| {
        (&a.session.session_id, &a.runs_dir).cmp(&(&b.session.session_id, &b.runs_dir))
    });
    let duplicates = duplicates(&found);
    Ok((found, duplicates, unreadable))
}

/// Session and run ids that occur in more than one runs folder.
pub(crate) fn duplicates(found: &[FoundSession]) -> Vec<Duplicate> {
    let mut places: BTreeMap<(&'static str, String), Vec<PathBuf>> = BTreeMap::new();
    for f in found {
        let mut add = |what: &'static str, id: &str| {
            let list = places.entry((what, id.to_string())).or_default();
            if !list.contains(&f.runs_dir) {
                list.push(f.runs_dir.clone());
            }
        };
        add("session", &f.session.session_id);
        for job in &f.session.workflows {
            for run in &job.runs {
                add("run", &run.run_id);
            }
        }
    }
    places
        .into_iter()
        .filter(|(_, p)| p.len() > 1)
        .map(|((what, id), mut places)| {
            places.sort();
            Duplicate { what, id, places }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_a_shell() {
        let tmp = tempfile::tempdir().unwrap();
        for m in [
            "gpu-1",
            "gpu-12x",
            "gpu-a",
            "runs.d",
            "runs_d",
            ".hidden-gpu",
        ] {
            std::fs::create_dir_all(tmp.path().join(m)).unwrap();
        }
        let names = |pattern: &str| -> Vec<String> {
            expand_pattern(&tmp.path().join(pattern))
                .unwrap()
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names("gpu-[0-9]*"), ["gpu-1", "gpu-12x"]);
        assert_eq!(names("runs?d"), ["runs.d", "runs_d"]);
        assert_eq!(names("runs.d"), ["runs.d"], "the dot is literal");
        assert_eq!(names("[!g]*"), ["runs.d", "runs_d"]);
        assert_eq!(
            names("*gpu*"),
            ["gpu-1", "gpu-12x", "gpu-a"],
            "hidden folders need a literal dot"
        );
        let err = expand(&[tmp.path().join("[abc")]).unwrap_err();
        assert!(err.contains("not a valid pattern"), "{err}");
    }

    #[test]
    fn patterns_expand_to_folders_and_plain_values_stay() {
        let tmp = tempfile::tempdir().unwrap();
        for m in ["gpu-1", "gpu-2", "other"] {
            std::fs::create_dir_all(tmp.path().join(m).join("runs")).unwrap();
        }
        std::fs::write(tmp.path().join("gpu-3"), b"a file, not a machine").unwrap();
        let pattern = tmp.path().join("gpu-*").join("runs");
        let got = expand(&[pattern.clone(), tmp.path().join("gpu-1/runs")]).unwrap();
        assert_eq!(
            got,
            vec![tmp.path().join("gpu-1/runs"), tmp.path().join("gpu-2/runs")]
        );
        let missing = tmp.path().join("nothing-*");
        assert!(expand(&[missing])
            .unwrap_err()
            .contains("matches no folder"));
        let plain = tmp.path().join("not-yet");
        assert_eq!(expand(std::slice::from_ref(&plain)).unwrap(), vec![plain]);
    }
}
