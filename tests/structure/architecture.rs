//! ARCHITECTURE.md cannot silently fall behind the code: every crate of the workspace and every
//! module folder of their sources is named in it (as **`name`**), and every `src/...`,
//! `crates/...` or `tests/...` path it mentions exists.

use std::path::Path;

fn codemap() -> String {
    std::fs::read_to_string("ARCHITECTURE.md").expect("ARCHITECTURE.md at the crate root")
}

#[test]
fn every_module_folder_is_in_the_codemap() {
    let map = codemap();
    let mut folders = Vec::new();
    for src in [
        "src",
        "crates/graph/src",
        "crates/core/src",
        "crates/sim/src",
    ] {
        for entry in std::fs::read_dir(src).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    for entry in std::fs::read_dir("crates").unwrap() {
        let path = entry.unwrap().path();
        let manifest = std::fs::read_to_string(path.join("Cargo.toml")).unwrap();
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("a package name");
        folders.push(name.to_string());
    }
    assert!(folders.len() >= 15, "{folders:?}");
    let missing: Vec<&String> = folders
        .iter()
        .filter(|m| !map.contains(&format!("**`{m}`**")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md has no entry (**`name`**) for {missing:?}"
    );
}

#[test]
fn every_path_the_codemap_names_exists() {
    let map = codemap();
    let mut checked = 0;
    for word in map.split(|c: char| c.is_whitespace() || "`(),|".contains(c)) {
        let word = word.trim_end_matches(['.', ':', ';']);
        let named = ["src/", "crates/", "tests/"]
            .iter()
            .any(|p| word.starts_with(p));
        if !named || word.contains('*') {
            continue;
        }
        assert!(
            Path::new(word).exists(),
            "ARCHITECTURE.md names {word}, which does not exist"
        );
        checked += 1;
    }
    assert!(checked > 20, "only {checked} paths found");
}
