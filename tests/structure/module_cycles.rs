//! What Cargo cannot check: no import cycles between the files of each crate of the workspace
//! (Cargo already refuses cycles between the crates). Every `use crate::…`, `use super::…` (and
//! `self::…`, or a child module's name) and every inline `crate::…` / `super::…` path in a
//! crate's `**/*.rs` is an edge from its file to the file that defines the module it names, and
//! the files must form no cycle — a parent and its children included: a `mod.rs` (or `x.rs`
//! beside `x/`) that calls into a child while the child uses what the parent defines is a
//! cycle. A `mod x;` line is no edge, and a file's `pub use` of a module below it is the
//! parent's façade, not a use (`super::X`, where the parent re-exports `X` with
//! `pub use child::X`, is an edge to the child that defines it). `#[cfg(test)]` modules inside a
//! file are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path below the crate root (`["comfy", "client"]`); `[]` is the crate.
type ModPath = Vec<String>;

/// One source file: its module path and what it declares and uses.
struct SourceFile {
    /// The path shown in messages (`src/comfy/ws.rs`).
    shown: String,
    module: ModPath,
    /// True for `lib.rs` and `mod.rs` (children live in its folder).
    is_folder_root: bool,
    /// `mod x;` declarations (child modules in their own files).
    children: BTreeSet<String>,
    /// `use` trees, expanded to single paths, with whether they are `pub use`.
    uses: Vec<(String, bool)>,
    /// Inline `crate::…` / `super::…` paths in code.
    inline: Vec<String>,
}

/// Source text with comments removed and string and char literals emptied (their braces and
/// semicolons must not count).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r'
            && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
            && matches!(next, Some('"') | Some('#'))
        {
            // Raw string r"…", r#"…"#, br"…".
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Removes `#[cfg(test)] mod name { … }` blocks.
fn without_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod_block = trimmed.starts_with("mod ")
            && trimmed
                .find(['{', ';'])
                .is_some_and(|k| trimmed.as_bytes()[k] == b'{');
        if !is_mod_block {
            rest = after;
            continue;
        }
        let open = after.find('{').expect("checked");
        let mut depth = 0;
        let mut end = after.len();
        for (k, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The single paths of a use tree: `a::{b, c::{d, self}}` → `a::b`, `a::c::d`, `a::c`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let prefix = &tree[..open];
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        for sub in expand(part) {
            if sub == "self" {
                out.push(prefix.trim_end_matches("::").to_string());
            } else {
                out.push(format!("{prefix}{sub}"));
            }
        }
    }
    out
}

/// A use tree without its aliases (`a::{b as c, d}` → `a::{b, d}`); [`expand`] then drops the
/// spaces.
fn drop_alias(tree: &str) -> String {
    let mut out = String::new();
    let mut words = tree.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if w == "as" {
            // Skip the alias name, keep what follows it (`,` or `}`).
            if let Some(alias) = words.next() {
                let tail: String = alias
                    .chars()
                    .skip_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push_str(&tail);
            }
            continue;
        }
        out.push(' ');
        out.push_str(w);
    }
    out
}

fn parse(shown: &str, module: ModPath, is_folder_root: bool, src: &str) -> SourceFile {
    let text = without_test_modules(&strip(src));
    let mut children = BTreeSet::new();
    let mut uses = Vec::new();
    let mut rest_of_code = String::new();
    let mut cursor = 0;
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut k = 0;
    while k + 4 <= text.len() {
        let word_start = k == 0 || !is_ident(bytes[k - 1]);
        if word_start && text[k..].starts_with("mod ") {
            let name: String = text[k + 4..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = text[k + 4..].trim_start()[name.len()..].trim_start();
            if after.starts_with(';') {
                children.insert(name);
            }
        }
        if word_start
            && text[k..].starts_with("use")
            && text[k + 3..].starts_with(char::is_whitespace)
        {
            let end = text[k..].find(';').map(|e| k + e).unwrap_or(text.len());
            let before = text[..k].trim_end();
            let public = before.ends_with("pub")
                || before.ends_with(')') && {
                    let open = before.rfind('(').unwrap_or(0);
                    before[..open].trim_end().ends_with("pub")
                };
            for path in expand(&drop_alias(&text[k + 3..end])) {
                uses.push((path, public));
            }
            rest_of_code.push_str(&text[cursor..k]);
            cursor = end;
            k = end;
            continue;
        }
        k += 1;
        while k < text.len() && !text.is_char_boundary(k) {
            k += 1;
        }
    }
    rest_of_code.push_str(&text[cursor.min(text.len())..]);
    // Paths from the crate root, a parent, or a child module (`state::Instance::new()` in
    // `mod.rs`); a segment after `::` is not the start of a path.
    let inline = regex::Regex::new(
        r"(?:^|[^:\w])((?:crate|super|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+)",
    )
    .unwrap()
    .captures_iter(&rest_of_code)
    .map(|c| c[1].to_string())
    .filter(|p| {
        let first = p.split("::").next().unwrap_or_default();
        first == "crate" || first == "super" || children.contains(first)
    })
    .collect();
    SourceFile {
        shown: shown.to_string(),
        module,
        is_folder_root,
        children,
        uses,
        inline,
    }
}

/// The crate's files, keyed by module path.
struct Crate {
    files: BTreeMap<ModPath, SourceFile>,
}

impl Crate {
    fn new(files: Vec<SourceFile>) -> Crate {
        Crate {
            files: files.into_iter().map(|f| (f.module.clone(), f)).collect(),
        }
    }

    /// The file a path used in `from` points into (the deepest module of the path that is a
    /// file), following a folder root's re-exports of the next name; None for paths outside
    /// the crate.
    fn resolve(&self, from: &SourceFile, path: &str, depth: usize) -> Option<ModPath> {
        let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let first = *segs.first()?;
        let mut here: ModPath = from.module.clone();
        let mut i = 0;
        match first {
            "crate" => {
                here.clear();
                i = 1;
            }
            "self" => i = 1,
            "super" => {
                while segs.get(i) == Some(&"super") {
                    here.pop();
                    i += 1;
                }
            }
            name if from.children.contains(name) => {}
            _ => return None,
        }
        while let Some(seg) = segs.get(i) {
            let mut child = here.clone();
            child.push(seg.to_string());
            if self.files.contains_key(&child) {
                here = child;
                i += 1;
            } else {
                break;
            }
        }
        let target = self.files.get(&here)?;
        if let (Some(name), true, true) = (
            segs.get(i),
            target.is_folder_root || !target.children.is_empty(),
            depth < 8,
        ) {
            for (reexport, public) in &target.uses {
                if *public && reexport.rsplit("::").next() == Some(*name) {
                    if let Some(def) = self.resolve(target, reexport, depth + 1) {
                        return Some(def);
                    }
                }
            }
        }
        Some(here)
    }

    /// Every import edge between two files of the crate, parent↔child included: (from, to) →
    /// the path that makes it. A `mod x;` line is no edge, and neither is a file's `pub use` of
    /// a module below it (a façade re-export: users of the name are led to the file that
    /// defines it); every other `use` and inline path is, the parent's calls into its children
    /// and the children's `super::…` uses of what the parent defines alike.
    fn edges(&self) -> BTreeMap<(ModPath, ModPath), String> {
        let mut edges = BTreeMap::new();
        for file in self.files.values() {
            let paths = file
                .uses
                .iter()
                .filter(|(path, public)| !(*public && self.below(file, path)))
                .map(|(p, _)| p)
                .chain(&file.inline);
            for path in paths {
                let Some(to) = self.resolve(file, path, 0) else {
                    continue;
                };
                if to != file.module && !to.is_empty() {
                    edges
                        .entry((file.module.clone(), to))
                        .or_insert_with(|| path.clone());
                }
            }
        }
        edges
    }

    /// Whether `path`, used in `file`, names a module below it (one of its children or deeper).
    fn below(&self, file: &SourceFile, path: &str) -> bool {
        let first = path.split("::").next().unwrap_or_default();
        if file.children.contains(first) || first == "self" {
            return true;
        }
        let segs: Vec<&str> = path.split("::").collect();
        segs.first() == Some(&"crate")
            && segs.len() > file.module.len() + 1
            && file.module.iter().zip(&segs[1..]).all(|(a, b)| a == b)
    }

    /// Every cycle: the files that reach each other, and the edges between them.
    fn cycles(&self) -> Vec<(BTreeSet<String>, String)> {
        let edges = self.edges();
        let nodes: BTreeSet<&ModPath> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
        let reach = |from: &ModPath| -> BTreeSet<ModPath> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.clone()];
            while let Some(n) = stack.pop() {
                for (a, b) in edges.keys() {
                    if *a == n && seen.insert(b.clone()) {
                        stack.push(b.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&ModPath, BTreeSet<ModPath>> =
            nodes.iter().map(|n| (*n, reach(n))).collect();
        let mut done: BTreeSet<&ModPath> = BTreeSet::new();
        let mut found = Vec::new();
        for n in &nodes {
            if done.contains(n) || !reaches[n].contains(*n) {
                continue;
            }
            let members: BTreeSet<&ModPath> = nodes
                .iter()
                .copied()
                .filter(|m| reaches[n].contains(*m) && reaches[m].contains(*n))
                .collect();
            done.extend(members.iter().copied());
            let inside: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| members.contains(a) && members.contains(b))
                .map(|((a, b), path)| {
                    format!("{} → {} ({path})", self.files[a].shown, self.files[b].shown)
                })
                .collect();
            let shown = members
                .iter()
                .map(|m| self.files[*m].shown.clone())
                .collect();
            found.push((shown, inside.join("; ")));
        }
        found
    }
}

fn module_of(rel: &Path) -> (ModPath, bool) {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().expect("a file name");
    match file.as_str() {
        "lib.rs" | "mod.rs" => (parts, true),
        other => {
            parts.push(other.trim_end_matches(".rs").to_string());
            (parts, false)
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source folders of the workspace's crates (Cargo keeps the crates themselves acyclic;
/// this test checks the files inside each one).
const CRATE_SOURCES: [&str; 4] = [
    "src",
    "crates/graph/src",
    "crates/core/src",
    "crates/sim/src",
];

fn load_crate(root: &str) -> Crate {
    let mut paths = Vec::new();
    rust_files(Path::new(root), &mut paths);
    let files = paths
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "main.rs"))
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap();
            let (module, root) = module_of(rel);
            let src = std::fs::read_to_string(p).unwrap();
            parse(&p.display().to_string(), module, root, &src)
        })
        .collect();
    Crate::new(files)
}

fn from_sources(sources: &[(&str, &str)]) -> Crate {
    Crate::new(
        sources
            .iter()
            .map(|(path, src)| {
                let (module, root) = module_of(Path::new(path));
                parse(path, module, root, src)
            })
            .collect(),
    )
}

#[test]
fn no_import_cycles_between_the_files_of_a_crate() {
    let crates: Vec<Crate> = CRATE_SOURCES.iter().map(|root| load_crate(root)).collect();
    let files: usize = crates.iter().map(|k| k.files.len()).sum();
    let edges: usize = crates.iter().map(|k| k.edges().len()).sum();
    assert!(files > 50, "only {files} files");
    assert!(edges > 50, "only {edges} edges");
    let cycles: Vec<(BTreeSet<String>, String)> = crates.iter().flat_map(|k| k.cycles()).collect();
    let known = |files: &BTreeSet<String>| {
        KNOWN_CYCLES
            .iter()
            .any(|k| files.iter().all(|f| k.contains(&f.as_str())))
    };
    let new: Vec<&str> = cycles
        .iter()
        .filter(|(files, _)| !known(files))
        .map(|(_, edges)| edges.as_str())
        .collect();
    assert!(
        new.is_empty(),
        "import cycles between the files of a crate (break them by moving what both need \
         into a file of its own below both; a parent that calls its children keeps the types \
         they share in a child, not in itself):\n{}",
        new.join("\n")
    );
    for k in KNOWN_CYCLES {
        assert!(
            cycles
                .iter()
                .any(|(files, _)| files.iter().all(|f| k.contains(&f.as_str()))),
            "the cycle between {k:?} is broken: take it off KNOWN_CYCLES"
        );
    }
}

/// Cycles not broken yet (each a set of files; a cycle among some of them passes). An entry
/// whose cycle is gone fails the test, so the list only shrinks.
const KNOWN_CYCLES: &[&[&str]] = &[];

#[test]
fn the_check_sees_use_trees_inline_paths_and_reexports() {
    let krate = from_sources(&[
        ("lib.rs", "pub mod a;\n"),
        (
            "a/mod.rs",
            "//! use crate::a::x; in a comment is no edge\nmod x;\nmod y;\nmod z;\nmod w;\n\
             pub use x::{Thing as Other, self};\npub use w::Named;\nfn m() { y::g(); }\n",
        ),
        (
            "a/x.rs",
            "use super::{y::{self, Y}, Named};\nfn f() { let s = \"super::z::f\"; }\n",
        ),
        ("a/y.rs", "fn g() { super::x::f(); other::z::f(); }\n"),
        (
            "a/z.rs",
            "use crate::a::Named;\n#[cfg(test)]\nmod tests { use super::super::x; }\n",
        ),
        (
            "a/w.rs",
            "pub struct Named;\nfn h() { let c = '{'; crate::a::z::k(); }\n",
        ),
    ]);
    let edges: Vec<String> = krate
        .edges()
        .keys()
        .map(|(a, b)| format!("{}>{}", a.join("/"), b.join("/")))
        .collect();
    // `a/mod.rs`'s own `y::g()` is an edge (the parent uses a child); its `pub use`s are not.
    assert_eq!(
        edges,
        ["a>a/y", "a/w>a/z", "a/x>a/w", "a/x>a/y", "a/y>a/x", "a/z>a/w"]
    );
    let cycles: Vec<String> = krate.cycles().into_iter().map(|(_, e)| e).collect();
    assert_eq!(
        cycles,
        [
            "a/w.rs → a/z.rs (crate::a::z::k); a/z.rs → a/w.rs (crate::a::Named)",
            "a/x.rs → a/y.rs (super::y); a/y.rs → a/x.rs (super::x::f)",
        ]
    );
}

#[test]
fn a_parent_and_its_child_that_use_each_other_are_a_cycle() {
    // A planted circle of each shape: `mod.rs` ↔ child, `x.rs` beside `x/` ↔ child, and a chain
    // through a parent (`p.rs → p/q.rs → s.rs → p.rs`).
    let krate = from_sources(&[
        ("lib.rs", "pub mod b;\npub mod d;\npub mod p;\npub mod s;\n"),
        (
            "b/mod.rs",
            "mod c;\npub use c::Out;\npub struct Shared;\npub fn run() { c::go(); }\n",
        ),
        (
            "b/c.rs",
            "use super::Shared;\npub struct Out;\npub fn go() {}\n",
        ),
        ("d.rs", "mod e;\npub struct Ctx;\nfn f() { e::g(); }\n"),
        ("d/e.rs", "pub fn g(_: super::Ctx) {}\n"),
        ("p.rs", "mod q;\nfn f() { q::h(); }\npub fn k() {}\n"),
        ("p/q.rs", "pub fn h() { crate::s::t(); }\n"),
        ("s.rs", "pub fn t() { crate::p::k(); }\n"),
    ]);
    let cycles: Vec<String> = krate.cycles().into_iter().map(|(_, e)| e).collect();
    assert_eq!(
        cycles,
        [
            "b/mod.rs → b/c.rs (c::go); b/c.rs → b/mod.rs (super::Shared)",
            "d.rs → d/e.rs (e::g); d/e.rs → d.rs (super::Ctx)",
            "p.rs → p/q.rs (q::h); p/q.rs → s.rs (crate::s::t); s.rs → p.rs (crate::p::k)",
        ]
    );
    // A parent that only declares and re-exports its children, with the shared type in a
    // child of its own, is no cycle.
    let fixed = from_sources(&[
        ("lib.rs", "pub mod b;\n"),
        (
            "b/mod.rs",
            "mod c;\nmod shared;\npub use c::{go, Out};\npub use shared::Shared;\n",
        ),
        (
            "b/c.rs",
            "use super::Shared;\npub struct Out;\npub fn go() {}\n",
        ),
        ("b/shared.rs", "pub struct Shared;\n"),
    ]);
    assert!(fixed.cycles().is_empty(), "{:?}", fixed.cycles());
}
