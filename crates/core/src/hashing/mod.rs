//! Full-file sha256 of model files: streaming hashing, the on-disk hash cache, and locating the
//! model files a workflow's loader nodes reference under ComfyUI's `models/` folders.
//!
//! Data flows one way: [`refs::model_references`] reads a prompt (pure, no file system) →
//! [`locate::locate`] maps each reference to a file under the `--models-dir` roots (without
//! them, `locate::locate_in_server_folders` looks in the server's own folders when the server
//! runs on this machine) → [`parallel::hash_files`] hashes them (several at once, through the
//! [`cache::HashCache`]) → [`components::hash_components`] /
//! `components::hash_server_components` return the serializable records a run stores.

pub(crate) mod cache;
pub(crate) mod components;
pub(crate) mod file;
pub mod locate;
pub(crate) mod parallel;
pub(crate) mod refs;

pub use cache::HashCache;
pub use components::{hash_components, ComponentHash, ComponentStatus};
pub(crate) use components::{hash_server_components, ServerModels};
pub use file::{autov2, hash_file, hash_file_with, FileHash, HashError, HashOptions};
pub use locate::{locate, Location};
pub use parallel::hash_files;
pub use refs::{model_references, ModelRef};

/// Where session commands keep the hash cache, relative to the runs folder.
pub(crate) const DEFAULT_CACHE_FILE: &str = ".hash-cache.json";
