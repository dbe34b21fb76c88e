//! `comfy-bisect hash-files`, run the way a user runs it.

use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn hash_files(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .arg("hash-files")
        .args(args)
        .output()
        .expect("run comfy-bisect")
}

fn sha256sum(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (GNU coreutils) is needed by this test");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn write_files(dir: &Path) -> (String, String) {
    let a = dir.join("model a.safetensors");
    let b = dir.join("lora.safetensors");
    fs::write(
        &a,
        (0..200_000u32)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    fs::write(&b, b"a small lora").unwrap();
    (a.to_str().unwrap().into(), b.to_str().unwrap().into())
}

#[test]
fn json_output_matches_sha256sum() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = write_files(dir.path());
    let out = hash_files(&["--json", &a, &b]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    for (entry, path) in files.iter().zip([&a, &b]) {
        let expected = sha256sum(Path::new(path));
        assert_eq!(entry["path"], path.as_str());
        assert_eq!(entry["sha256"], expected.as_str());
        assert_eq!(entry["autov2"], &expected[..10]);
        assert_eq!(entry["size"], fs::metadata(path).unwrap().len());
        assert_eq!(entry["cached"], false);
    }
    assert_eq!(doc["bytes_read"], 200_000 + 12);
}

#[test]
fn table_output_shows_size_sha256_and_autov2() {
    let dir = tempfile::tempdir().unwrap();
    let (_, b) = write_files(dir.path());
    let out = hash_files(&[&b]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let expected = sha256sum(Path::new(&b));
    let line = stdout
        .lines()
        .find(|l| l.ends_with(&b))
        .expect("a row for the file");
    assert!(line.contains(&expected), "{stdout}");
    assert!(
        line.contains(&format!("  {}  ", &expected[..10])),
        "{stdout}"
    );
    assert!(line.trim_start().starts_with("12 B"), "{stdout}");
    assert!(stdout.starts_with("      SIZE  SHA256"), "{stdout}");
}

#[test]
fn missing_or_unreadable_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = write_files(dir.path());
    let missing = dir.path().join("no-such-model.safetensors");
    let out = hash_files(&[&a, missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("no-such-model.safetensors"), "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");

    let out = hash_files(&[dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));

    let out = hash_files(&[]);
    assert_eq!(out.status.code(), Some(2), "FILE is required");
}

#[test]
fn cached_rerun_reads_nothing_and_corrupt_cache_only_warns() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = write_files(dir.path());
    let cache = dir.path().join("runs/.hash-cache.json");
    let c = cache.to_str().unwrap();

    let first = hash_files(&["--json", "--cache", c, &a, &b]);
    assert_eq!(first.status.code(), Some(0));
    let first: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(first["bytes_read"], 200_012);
    assert!(cache.is_file());

    let second = hash_files(&["--json", "--cache", c, &a, &b]);
    let second: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(second["bytes_read"], 0);
    for (x, y) in first["files"]
        .as_array()
        .unwrap()
        .iter()
        .zip(second["files"].as_array().unwrap())
    {
        assert_eq!(x["sha256"], y["sha256"]);
        assert_eq!(y["cached"], true);
        assert_eq!(y["bytes_read"], 0);
    }

    fs::write(&cache, "{ truncated").unwrap();
    let third = hash_files(&["--json", "--cache", c, &a]);
    assert_eq!(third.status.code(), Some(0));
    let stderr = String::from_utf8(third.stderr).unwrap();
    assert!(stderr.contains("warning: ignoring hash cache"), "{stderr}");
    let third: Value = serde_json::from_slice(&third.stdout).unwrap();
    assert_eq!(third["bytes_read"], 200_000);
    let rewritten: Value = serde_json::from_str(&fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(rewritten["version"], 1);
}
