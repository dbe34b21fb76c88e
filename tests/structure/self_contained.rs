//! A clone with nothing beside it must pass its own tests: no code, test, bench or CI script may
//! read a folder outside the repository (the reference data lives in `tests/fixtures` and
//! `tests/corpus`).

use std::path::{Path, PathBuf};

/// The folder name a checkout once sat beside, built so this file does not name it itself.
fn outside() -> String {
    ["..", "shared"].join("/")
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            // Data folders are not code; their READMEs may describe where the data came from.
            if path.ends_with("tests/fixtures") || path.ends_with("tests/corpus") {
                continue;
            }
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn nothing_reads_outside_the_repository() {
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches", ".ci"] {
        files_under(Path::new(dir), &mut files);
    }
    files.push(PathBuf::from("Cargo.toml"));
    assert!(
        files.len() > 50,
        "the walk found the sources: {}",
        files.len()
    );
    let needle = outside();
    let offenders: Vec<String> = files
        .iter()
        .filter(|p| {
            std::fs::read_to_string(p)
                .map(|s| s.contains(&needle))
                .unwrap_or(false)
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these files name {needle}; copy the data into tests/fixtures or tests/corpus: {offenders:?}"
    );
}

#[test]
fn the_fixture_folders_carry_their_provenance() {
    for dir in [
        "tests/fixtures",
        "tests/fixtures/comfyui",
        "tests/fixtures/comfyui-newer",
        "tests/fixtures/comfyui-outputs",
        "tests/fixtures/custom-nodes",
        "tests/fixtures/media-workflows",
        "tests/fixtures/oom-reports",
        "tests/corpus",
        "tests/corpus/templates-api",
        "tests/corpus/templates-api-newer",
    ] {
        let readme = Path::new(dir).join("README.md");
        assert!(readme.is_file(), "{} is missing", readme.display());
    }
    let licence = std::fs::read_to_string("tests/corpus/templates/LICENSE").expect("licence");
    assert!(licence.contains("MIT License"));
}
