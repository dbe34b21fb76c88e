//! Hashing several files at once (one worker per core), through the hash cache.

use super::cache::{FileKey, HashCache};
use super::file::{autov2, hash_file_with, FileHash, HashError, HashOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

/// Hashes `paths` in parallel, in input order. Files whose size, mtime and inode match a cache
/// entry are not read (`bytes_read` 0, `cached` true); the same file given twice is read once.
/// New digests are added to `cache` (call [`HashCache::save`] to persist them).
pub fn hash_files(
    paths: &[PathBuf],
    mut cache: Option<&mut HashCache>,
    opts: &HashOptions,
) -> Vec<Result<FileHash, HashError>> {
    let mut results: Vec<Option<Result<FileHash, HashError>>> = Vec::with_capacity(paths.len());
    // Work items: (index of the first path with this canonical path, its key).
    let mut work: Vec<(usize, FileKey)> = Vec::new();
    let mut first_by_canonical: HashMap<PathBuf, usize> = HashMap::new();
    let mut duplicates: Vec<(usize, usize)> = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let key = match FileKey::of(path) {
            Ok(key) => key,
            Err(e) => {
                results.push(Some(Err(HashError::io(path, e))));
                continue;
            }
        };
        if let Some(sha256) = cache.as_deref().and_then(|c| c.get(&key)) {
            results.push(Some(Ok(cached_hash(path, &key, sha256))));
            continue;
        }
        results.push(None);
        match first_by_canonical.get(&key.canonical) {
            Some(&first) => duplicates.push((i, first)),
            None => {
                first_by_canonical.insert(key.canonical.clone(), i);
                work.push((i, key));
            }
        }
    }

    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = match opts.jobs {
        0 => cores,
        n => n,
    }
    .min(work.len());
    // A reader thread only pays off on an idle core; when every core hashes a file of its own,
    // it would only add hand-offs between threads.
    let opts = &HashOptions {
        reader_thread: opts.reader_thread && jobs < cores,
        ..*opts
    };
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Result<FileHash, HashError>)>> = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some((i, _)) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let result = hash_file_with(&paths[*i], opts);
                    done.lock().expect("no worker panics").push((*i, result));
                }
            });
        }
    });
    let keys: HashMap<usize, FileKey> = work.into_iter().collect();
    for (i, result) in done.into_inner().expect("no worker panics") {
        if let (Ok(hash), Some(cache)) = (&result, cache.as_deref_mut()) {
            // Cache only if the file is still the one whose key was read before hashing.
            if FileKey::of(&paths[i]).ok().as_ref() == keys.get(&i) {
                cache.insert(&keys[&i], &hash.sha256);
            }
        }
        results[i] = Some(result);
    }
    for (i, first) in duplicates {
        results[i] = Some(match &results[first] {
            Some(Ok(hash)) => Ok(FileHash {
                path: paths[i].clone(),
                bytes_read: 0,
                ..hash.clone()
            }),
            Some(Err(e)) => Err(same_error_for(&paths[i], e)),
            None => unreachable!("every first occurrence was hashed"),
        });
    }
    results
        .into_iter()
        .map(|r| r.expect("every path has a result"))
        .collect()
}

/// The error of the first occurrence of a file, for another path naming the same file.
fn same_error_for(path: &Path, error: &HashError) -> HashError {
    let path = path.to_path_buf();
    match error {
        HashError::Io { source, .. } => HashError::Io {
            path,
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        HashError::NotAFile { .. } => HashError::NotAFile { path },
        HashError::Changed { .. } => HashError::Changed { path },
    }
}

fn cached_hash(path: &Path, key: &FileKey, sha256: &str) -> FileHash {
    FileHash {
        path: path.to_path_buf(),
        size: key.size,
        sha256: sha256.to_string(),
        autov2: autov2(sha256),
        bytes_read: 0,
        cached: true,
    }
}
