//! ARCHITECTURE.md cannot silently fall behind the code: every module folder under `src/` is
//! named in it (as `name`), and every `src/...` or `tests/...` path it mentions exists.

use std::path::Path;

fn codemap() -> String {
    std::fs::read_to_string("ARCHITECTURE.md").expect("ARCHITECTURE.md at the crate root")
}

#[test]
fn every_module_folder_is_in_the_codemap() {
    let map = codemap();
    let mut folders = Vec::new();
    for entry in std::fs::read_dir("src").unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            folders.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(folders.len() >= 10, "{folders:?}");
    let missing: Vec<&String> = folders
        .iter()
        .filter(|m| !map.contains(&format!("**`{m}`**")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md has no entry (**`name`**) for src/{missing:?}"
    );
}

#[test]
fn every_path_the_codemap_names_exists() {
    let map = codemap();
    let mut checked = 0;
    for word in map.split(|c: char| c.is_whitespace() || "`(),|".contains(c)) {
        let word = word.trim_end_matches(['.', ':', ';']);
        if !(word.starts_with("src/") || word.starts_with("tests/")) || word.contains('*') {
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
