//! Finding a referenced model file under the `--models-dir` roots, or in the server's own
//! model folders when the server runs on this machine, and nowhere else.
//!
//! A root is ComfyUI's `models/` directory. A reference is looked up as
//! `<root>/<folder>/<file>` for each root (in the order given) and each of its folders (in
//! ComfyUI's order). Without `--models-dir`, the server's folders (`GET /internal/folder_paths`,
//! absolute folders per kind) are searched the same way when they exist here. Absolute names and
//! `..` are refused: a name never leaves its folder. A file in a folder that is a symbolic link
//! into another place (the usual way to share one model store between installs) is the user's
//! own choice, as ComfyUI loads through it: it is hashed, and its real location is recorded
//! ("→ target"). Nothing is ever guessed.

use super::refs::ModelRef;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The result of looking a reference up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The file exists under a root.
    Located {
        /// The real (canonical) path of the file.
        path: PathBuf,
        /// The folder it was found in (`loras`, `unet`, …).
        folder: &'static str,
        /// True when the real path lies outside the roots: the name was reached through a
        /// symbolic link (of the file or of a folder under the root) pointing elsewhere.
        linked_out: bool,
    },
    /// Not hashed; the reason says why and what to do.
    Unhashed {
        /// A user-facing explanation.
        reason: String,
    },
}

/// Looks `model` up under `roots` (each a ComfyUI `models/` directory).
pub fn locate(model: &ModelRef, roots: &[PathBuf]) -> Location {
    if roots.is_empty() {
        return unhashed(
            "no --models-dir given (remote server?); pass --models-dir <ComfyUI>/models to hash model files"
                .into(),
        );
    }
    let relative = match checked_relative(&model.file) {
        Ok(relative) => relative,
        Err(reason) => return unhashed(reason),
    };
    let candidates = roots
        .iter()
        .flat_map(|root| {
            model
                .folders
                .iter()
                .map(|&folder| (root.join(folder).join(&relative), folder))
        })
        .collect();
    search(candidates, roots, "any --models-dir root")
}

/// Looks `model` up in the server's own folders (`GET /internal/folder_paths`: absolute
/// folders per folder kind, on the server's machine), for a server on this machine: each
/// folder of each of the reference's kinds, in ComfyUI's order; links out of those folders are
/// followed as under `--models-dir`. (Whether the server is on this machine at all is the
/// caller's question.)
pub(crate) fn locate_in_server_folders(
    model: &ModelRef,
    folder_paths: &BTreeMap<String, Vec<PathBuf>>,
) -> Location {
    let dirs: Vec<(&PathBuf, &'static str)> = model
        .folders
        .iter()
        .flat_map(|&kind| {
            folder_paths
                .get(kind)
                .into_iter()
                .flatten()
                .map(move |d| (d, kind))
        })
        .collect();
    let relative = match checked_relative(&model.file) {
        Ok(relative) => relative,
        Err(reason) => return unhashed(reason),
    };
    let roots: Vec<PathBuf> = dirs.iter().map(|(d, _)| (*d).clone()).collect();
    let candidates = dirs
        .iter()
        .map(|(d, kind)| (d.join(&relative), *kind))
        .collect();
    search(
        candidates,
        &roots,
        "the server's model folders (GET /internal/folder_paths)",
    )
}

fn unhashed(reason: String) -> Location {
    Location::Unhashed { reason }
}

/// The first candidate that is a regular file (through any links; whether its real path is
/// under one of `roots` is recorded).
fn search(
    candidates: Vec<(PathBuf, &'static str)>,
    roots: &[PathBuf],
    not_found: &str,
) -> Location {
    let real_roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| fs::canonicalize(r).ok())
        .collect();
    let mut searched = Vec::new();
    let mut refusals = Vec::new();
    for (candidate, folder) in candidates {
        searched.push(candidate.display().to_string());
        if fs::symlink_metadata(&candidate).is_err() {
            continue;
        }
        let real = match fs::canonicalize(&candidate) {
            Ok(real) => real,
            Err(e) => {
                refusals.push(format!(
                    "'{}' exists but cannot be resolved ({e}; a dangling symlink?)",
                    candidate.display()
                ));
                continue;
            }
        };
        if !real.is_file() {
            refusals.push(format!("'{}' is not a regular file", candidate.display()));
            continue;
        }
        let linked_out = !real_roots.iter().any(|r| real.starts_with(r));
        return Location::Located {
            path: real,
            folder,
            linked_out,
        };
    }
    if refusals.is_empty() {
        unhashed(format!(
            "not found under {not_found} (searched: {})",
            searched.join(", ")
        ))
    } else {
        unhashed(refusals.join("; "))
    }
}

/// The file name as a relative path that cannot leave its folder. ComfyUI on Windows writes
/// `\` between subfolders, so both separators are accepted.
fn checked_relative(file: &str) -> Result<PathBuf, String> {
    let normalized = file.replace('\\', "/");
    let looks_like_drive = normalized.as_bytes().get(1) == Some(&b':');
    let path = Path::new(&normalized);
    if path.is_absolute() || looks_like_drive {
        return Err(format!(
            "refused '{file}': absolute file names are not looked up (only files under the --models-dir roots are read)"
        ));
    }
    let mut relative = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "refused '{file}': '..' would leave the model folder (only files under the --models-dir roots are read)"
                ))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("refused '{file}': absolute file names are not looked up"))
            }
        }
    }
    if relative.as_os_str().is_empty() {
        return Err(format!("refused '{file}': empty file name"));
    }
    Ok(relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_names_are_checked() {
        assert_eq!(
            checked_relative("sd15\\a.safetensors").unwrap(),
            PathBuf::from("sd15/a.safetensors")
        );
        assert_eq!(checked_relative("./a.pt").unwrap(), PathBuf::from("a.pt"));
        for bad in [
            "../a.pt",
            "x/../../a.pt",
            "/etc/passwd",
            "C:\\models\\a.pt",
            "..\\a.pt",
            ".",
        ] {
            assert!(checked_relative(bad).is_err(), "{bad}");
        }
    }
}
