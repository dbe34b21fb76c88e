//! The hash cache (`runs/.hash-cache.json`): unchanged files are never read twice.
//!
//! An entry is keyed by the file's canonical path and is valid only while the file's size,
//! modification time (ns) and inode are unchanged (Windows: the file id in the inode's place,
//! read through a handle, as std gives no stable file index there). The file is written
//! atomically ([`crate::atomic`]: temp file, fsync, rename); a corrupt or unreadable cache is
//! reported as a warning and ignored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Version of the cache file format; files with another version are ignored.
const FORMAT_VERSION: u32 = 1;

/// The identity of a file's current contents, as far as the cache is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileKey {
    /// Canonical (absolute, symlink-free) path.
    pub canonical: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Inode number (Windows: the file id folded into 64 bits).
    pub inode: u64,
}

impl FileKey {
    /// Reads the key of `path` from the file system (follows symlinks).
    pub(crate) fn of(path: &Path) -> io::Result<FileKey> {
        let canonical = fs::canonicalize(path)?;
        let meta = fs::metadata(&canonical)?;
        Ok(FileKey {
            inode: inode(&canonical, &meta),
            size: meta.len(),
            mtime_ns: mtime_ns(&meta)?,
            canonical,
        })
    }
}

/// The modification time in nanoseconds since the Unix epoch (negative before it).
fn mtime_ns(meta: &fs::Metadata) -> io::Result<i64> {
    let ns = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    Ok(
        match meta.modified()?.duration_since(std::time::UNIX_EPOCH) {
            Ok(after) => ns(after),
            Err(before) => -ns(before.duration()),
        },
    )
}

/// The file's inode (from its metadata).
#[cfg(unix)]
fn inode(_path: &Path, meta: &fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

/// Windows: the file id (std's `file_index` is unstable), read through a handle on the file;
/// 0 when it cannot be opened (then size and modification time alone decide).
#[cfg(not(unix))]
fn inode(path: &Path, _meta: &fs::Metadata) -> u64 {
    fs::File::open(path)
        .and_then(|f| crate::fileid::of(&f))
        .map_or(0, |(_, id)| crate::fileid::index(&id))
}

/// One remembered digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    size: u64,
    mtime_ns: i64,
    inode: u64,
    sha256: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    files: BTreeMap<String, Entry>,
}

/// Remembered sha256 digests, loaded from and saved to one JSON file (or kept in memory).
#[derive(Debug, Default)]
pub struct HashCache {
    path: Option<PathBuf>,
    entries: BTreeMap<String, Entry>,
    dirty: bool,
    warnings: Vec<String>,
}

impl HashCache {
    /// A cache that lives only in memory and is never saved.
    pub fn in_memory() -> Self {
        HashCache::default()
    }

    /// Loads the cache at `path`. A missing file gives an empty cache; an unreadable or
    /// corrupt one gives an empty cache plus a warning (see [`HashCache::warnings`]).
    pub fn open(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let mut cache = HashCache {
            path: Some(path.clone()),
            ..HashCache::default()
        };
        match read_cache_file(&path) {
            Ok(Some(entries)) => cache.entries = entries,
            Ok(None) => {}
            Err(reason) => cache.warn(format!(
                "ignoring hash cache '{}': {reason}; every file will be hashed again and the cache rewritten",
                path.display()
            )),
        }
        cache
    }

    /// Problems met while loading or saving (already logged as warnings).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Number of remembered files.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The remembered sha256 for `key`, if size, mtime and inode all still match.
    pub(crate) fn get(&self, key: &FileKey) -> Option<&str> {
        let entry = self.entries.get(key.canonical.to_str()?)?;
        (entry.size == key.size && entry.mtime_ns == key.mtime_ns && entry.inode == key.inode)
            .then_some(entry.sha256.as_str())
    }

    /// Remembers `sha256` for `key` (paths that are not valid UTF-8 are not cached).
    pub(crate) fn insert(&mut self, key: &FileKey, sha256: &str) {
        let Some(name) = key.canonical.to_str() else {
            return;
        };
        let entry = Entry {
            size: key.size,
            mtime_ns: key.mtime_ns,
            inode: key.inode,
            sha256: sha256.to_string(),
        };
        if self.entries.get(name) != Some(&entry) {
            self.entries.insert(name.to_string(), entry);
            self.dirty = true;
        }
    }

    /// Writes the cache atomically if anything changed, keeping entries another process saved
    /// meanwhile. A failure is returned and also recorded as a warning.
    pub fn save(&mut self) -> anyhow::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        if !self.dirty {
            return Ok(());
        }
        if let Ok(Some(on_disk)) = read_cache_file(&path) {
            for (name, entry) in on_disk {
                self.entries.entry(name).or_insert(entry);
            }
        }
        let file = CacheFile {
            version: FORMAT_VERSION,
            files: self.entries.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file)?;
        bytes.push(b'\n');
        match crate::atomic::write_atomic(&path, &bytes) {
            Ok(()) => {
                self.dirty = false;
                Ok(())
            }
            Err(e) => {
                let message = format!("could not save hash cache '{}': {e:#}", path.display());
                self.warn(message.clone());
                Err(anyhow::anyhow!(message))
            }
        }
    }

    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }
}

/// `Ok(None)` when the file does not exist; `Err(reason)` when it cannot be used.
fn read_cache_file(path: &Path) -> Result<Option<BTreeMap<String, Entry>>, String> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let file: CacheFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a valid hash cache ({e})"))?;
    if file.version != FORMAT_VERSION {
        return Err(format!(
            "format version {} (this comfy-bisect writes version {FORMAT_VERSION})",
            file.version
        ));
    }
    Ok(Some(file.files))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &Path) -> FileKey {
        FileKey::of(path).unwrap()
    }

    #[test]
    fn entry_matches_only_with_same_size_mtime_and_inode() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.bin");
        fs::write(&f, b"hello").unwrap();
        let k = key(&f);
        let mut cache = HashCache::in_memory();
        cache.insert(&k, "aa");
        assert_eq!(cache.get(&k), Some("aa"));
        for other in [
            FileKey {
                size: k.size + 1,
                ..k.clone()
            },
            FileKey {
                mtime_ns: k.mtime_ns + 1,
                ..k.clone()
            },
            FileKey {
                inode: k.inode + 1,
                ..k.clone()
            },
        ] {
            assert_eq!(cache.get(&other), None, "{other:?}");
        }
    }

    #[test]
    fn save_and_reload_round_trips_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.bin");
        fs::write(&f, b"hello").unwrap();
        let cache_path = dir.path().join("sub/.hash-cache.json");
        let mut cache = HashCache::open(&cache_path);
        cache.insert(&key(&f), "bb");
        cache.save().unwrap();
        let names: Vec<_> = fs::read_dir(cache_path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![".hash-cache.json".to_string()]);
        let reloaded = HashCache::open(&cache_path);
        assert!(reloaded.warnings().is_empty());
        assert_eq!(reloaded.get(&key(&f)), Some("bb"));
    }

    #[test]
    fn save_keeps_entries_written_by_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, b"a").unwrap();
        fs::write(&b, b"b").unwrap();
        let cache_path = dir.path().join("c.json");
        let mut first = HashCache::open(&cache_path);
        let mut second = HashCache::open(&cache_path);
        first.insert(&key(&a), "aa");
        first.save().unwrap();
        second.insert(&key(&b), "bb");
        second.save().unwrap();
        let merged = HashCache::open(&cache_path);
        assert_eq!(merged.get(&key(&a)), Some("aa"));
        assert_eq!(merged.get(&key(&b)), Some("bb"));
    }

    #[test]
    fn corrupt_and_foreign_version_files_are_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        fs::write(&p, b"{ not json").unwrap();
        let cache = HashCache::open(&p);
        assert!(cache.is_empty());
        assert_eq!(cache.warnings().len(), 1);
        assert!(cache.warnings()[0].contains("not a valid hash cache"));
        fs::write(&p, br#"{"version": 99, "files": {}}"#).unwrap();
        let cache = HashCache::open(&p);
        assert!(cache.warnings()[0].contains("format version 99"));
    }
}
