//! Component hashes of a workflow: every referenced model file with its size and digests, or
//! the reason it was not hashed. This is what a run record embeds.

use super::cache::HashCache;
use super::file::HashOptions;
use super::locate::{locate, Location};
use super::parallel::hash_files;
use super::refs::model_references;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
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
    /// File size in bytes.
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
}

/// Locates and hashes every model file the prompt references (several files in parallel,
/// through `cache` when given; call [`HashCache::save`] afterwards to persist it).
/// Returns one entry per reference, in prompt order.
pub fn hash_components(
    prompt: &Value,
    roots: &[PathBuf],
    cache: Option<&mut HashCache>,
) -> Vec<ComponentHash> {
    let refs = model_references(prompt);
    let locations: Vec<Location> = refs.iter().map(|r| locate(r, roots)).collect();
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut index_of: HashMap<PathBuf, usize> = HashMap::new();
    for location in &locations {
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
        .map(|(r, location)| {
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
            };
            match location {
                Location::Unhashed { reason } => component.reason = Some(reason),
                Location::Located { path, folder } => {
                    component.folder = folder.to_string();
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
