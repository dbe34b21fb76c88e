//! Component hashes of a workflow: every referenced model file with its size and digests, or
//! the reason it was not hashed. This is what a run record embeds.

use super::cache::HashCache;
use super::file::HashOptions;
use super::locate::{locate, locate_in_server_folders, Location};
use super::parallel::hash_files;
use super::refs::{model_references, ModelRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Whether a component was hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentStatus {
    /// `size`, `sha256` and `autov2` are set.
    Hashed,
    /// `reason` says why not.
    Unhashed,
}

/// One model file referenced by a loader input, hashed or not (with the reason).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentHash {
    /// The file name as the workflow gives it.
    pub file: String,
    /// The model folder it was found in, or ComfyUI's first folder for it when not found.
    pub folder: String,
    /// The loader node's id.
    pub node_id: String,
    /// The loader node's class_type.
    pub class_type: String,
    /// The input naming the file.
    pub input: String,
    /// Hashed or unhashed.
    pub status: ComponentStatus,
    /// File size in bytes (for a file that was not hashed: the size the server lists, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Full-file sha256, lower-case hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// First 10 hex digits of the sha256 (Civitai / A1111 "AutoV2").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autov2: Option<String>,
    /// Why it was not hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the file really is, when the name reaches it through a symbolic link out of the
    /// model folders (the report shows `name → target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

/// The model folders of the server as the server describes them, for hashing without
/// `--models-dir`: where they are on its machine and what it lists in them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerModels {
    /// `GET /internal/folder_paths`: absolute folders per folder kind.
    pub folder_paths: BTreeMap<String, Vec<PathBuf>>,
    /// The server's listing per folder kind: file name → size in bytes (`None`: the server
    /// lists names only).
    pub listed: BTreeMap<String, BTreeMap<String, Option<u64>>>,
}

impl ServerModels {
    /// Whether the server's model folders are on this machine (any of them exists here).
    pub(crate) fn is_here(&self) -> bool {
        self.folder_paths.values().flatten().any(|d| d.is_dir())
    }

    /// The size the server lists for `file` in one of `folders`: `None` when not listed,
    /// `Some(None)` when listed without a size.
    fn listed_size(&self, folders: &[&str], file: &str) -> Option<Option<u64>> {
        let norm = |s: &str| s.replace('\\', "/");
        let file = norm(file);
        folders.iter().find_map(|kind| {
            self.listed
                .get(*kind)?
                .iter()
                .find(|(name, _)| norm(name) == file)
                .map(|(_, size)| *size)
        })
    }
}

/// Locates and hashes every model file the prompt references (several files in parallel,
/// through `cache` when given; call [`HashCache::save`] afterwards to persist it).
/// Returns one entry per reference, in prompt order.
pub fn hash_components(
    prompt: &Value,
    roots: &[PathBuf],
    cache: Option<&mut HashCache>,
) -> Vec<ComponentHash> {
    hash_located(prompt, cache, |r| (locate(r, roots), None))
}

/// Like [`hash_components`] without `--models-dir`: each file is looked up in the server's own
/// folders when they exist on this machine (and hashed only when its size is the one the server
/// lists); otherwise it is "unhashed (remote server)" with the name and size the server lists.
pub(crate) fn hash_server_components(
    prompt: &Value,
    server: &ServerModels,
    cache: Option<&mut HashCache>,
) -> Vec<ComponentHash> {
    let here = server.is_here();
    hash_located(prompt, cache, |r| {
        let listed = server.listed_size(&r.folders, &r.file);
        if !here {
            let reason = remote_reason(r, server, listed);
            return (Location::Unhashed { reason }, listed.flatten());
        }
        let location = match locate_in_server_folders(r, &server.folder_paths) {
            Location::Located {
                path,
                folder,
                linked_out,
            } => {
                match (listed.flatten(), std::fs::metadata(&path).map(|m| m.len())) {
                    (Some(want), Ok(have)) if want != have => Location::Unhashed {
                        reason: format!(
                            "'{}' is on this machine but is {have} bytes, and the server lists {want}: the server's folders are probably on another machine under the same paths; pass --models-dir to hash files from here",
                            path.display()
                        ),
                    },
                    _ => Location::Located {
                        path,
                        folder,
                        linked_out,
                    },
                }
            }
            other => other,
        };
        (location, listed.flatten())
    })
}

/// Why a file of a server whose folders are not here is not hashed.
fn remote_reason(r: &ModelRef, server: &ServerModels, listed: Option<Option<u64>>) -> String {
    if server.folder_paths.is_empty() {
        return "no --models-dir given and the server does not say where its model folders are (no GET /internal/folder_paths); pass --models-dir <ComfyUI>/models to hash model files".into();
    }
    let listing = match listed {
        Some(Some(size)) => format!("the server lists {} ({size} bytes)", r.file),
        Some(None) => format!(
            "the server lists {} (size unknown: it has no GET /experiment/models route)",
            r.file
        ),
        None => format!("the server does not list {}", r.file),
    };
    format!(
        "remote server: its {} folders are not on this machine; {listing}; pass --models-dir to hash a copy of its models folder",
        r.folders.first().copied().unwrap_or_default()
    )
}

/// Hashes each reference where `locate` finds it (the size it gives is kept for a file that is
/// not hashed).
fn hash_located(
    prompt: &Value,
    cache: Option<&mut HashCache>,
    locate: impl Fn(&ModelRef) -> (Location, Option<u64>),
) -> Vec<ComponentHash> {
    let refs = model_references(prompt);
    let locations: Vec<(Location, Option<u64>)> = refs.iter().map(&locate).collect();
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut index_of: HashMap<PathBuf, usize> = HashMap::new();
    for (location, _) in &locations {
        if let Location::Located { path, .. } = location {
            index_of.entry(path.clone()).or_insert_with(|| {
                paths.push(path.clone());
                paths.len() - 1
            });
        }
    }
    let hashes = hash_files(&paths, cache, &HashOptions::default());
    refs.into_iter()
        .zip(locations)
        .map(|(r, (location, listed_size))| {
            let mut component = ComponentHash {
                file: r.file,
                folder: r.folders.first().copied().unwrap_or_default().to_string(),
                node_id: r.node_id,
                class_type: r.class_type,
                input: r.input,
                status: ComponentStatus::Unhashed,
                size: None,
                sha256: None,
                autov2: None,
                reason: None,
                link_target: None,
            };
            match location {
                Location::Unhashed { reason } => {
                    component.reason = Some(reason);
                    component.size = listed_size;
                }
                Location::Located {
                    path,
                    folder,
                    linked_out,
                } => {
                    component.folder = folder.to_string();
                    if linked_out {
                        component.link_target = Some(path.display().to_string());
                    }
                    match &hashes[index_of[&path]] {
                        Ok(hash) => {
                            component.status = ComponentStatus::Hashed;
                            component.size = Some(hash.size);
                            component.sha256 = Some(hash.sha256.clone());
                            component.autov2 = Some(hash.autov2.clone());
                        }
                        Err(e) => component.reason = Some(e.to_string()),
                    }
                }
            }
            component
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt() -> Value {
        json!({"4": {"class_type": "CheckpointLoaderSimple",
                     "inputs": {"ckpt_name": "sd15/a.safetensors"}}})
    }

    fn server(root: &std::path::Path, size: Option<u64>) -> ServerModels {
        ServerModels {
            folder_paths: BTreeMap::from([(
                "checkpoints".to_string(),
                vec![
                    root.join("models/checkpoints"),
                    root.join("output/checkpoints"),
                ],
            )]),
            listed: BTreeMap::from([(
                "checkpoints".to_string(),
                BTreeMap::from([("sd15\\a.safetensors".to_string(), size)]),
            )]),
        }
    }

    #[test]
    fn a_remote_servers_file_keeps_the_name_and_size_it_lists() {
        let gone = std::path::Path::new("/nowhere-on-this-machine/ComfyUI");
        let c = &hash_server_components(&prompt(), &server(gone, Some(2132625238)), None)[0];
        assert_eq!(c.status, ComponentStatus::Unhashed);
        assert_eq!(c.size, Some(2132625238));
        let reason = c.reason.as_deref().unwrap();
        assert!(reason.starts_with("remote server: its checkpoints folders are not on this machine; the server lists sd15/a.safetensors (2132625238 bytes)"), "{reason}");
        let c = &hash_server_components(&prompt(), &server(gone, None), None)[0];
        assert_eq!(c.size, None);
        assert!(c
            .reason
            .as_deref()
            .unwrap()
            .contains("(size unknown: it has no GET /experiment/models route)"));
        let untold = ServerModels::default();
        let c = &hash_server_components(&prompt(), &untold, None)[0];
        assert!(c
            .reason
            .as_deref()
            .unwrap()
            .contains("no GET /internal/folder_paths"));
    }

    #[test]
    fn a_local_servers_file_is_hashed_only_at_the_size_the_server_lists() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("models/checkpoints/sd15");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.safetensors"), b"0123456789").unwrap();
        let c = &hash_server_components(&prompt(), &server(root.path(), Some(10)), None)[0];
        assert_eq!(c.status, ComponentStatus::Hashed, "{c:?}");
        assert_eq!(c.size, Some(10));
        assert_eq!(c.folder, "checkpoints");
        // Another file under the same path on the server's machine: not hashed from here.
        let c = &hash_server_components(&prompt(), &server(root.path(), Some(11)), None)[0];
        assert_eq!(c.status, ComponentStatus::Unhashed);
        assert!(c
            .reason
            .as_deref()
            .unwrap()
            .contains("is 10 bytes, and the server lists 11"));
        // No size listed: hashed.
        let c = &hash_server_components(&prompt(), &server(root.path(), None), None)[0];
        assert_eq!(c.status, ComponentStatus::Hashed);
    }
}
