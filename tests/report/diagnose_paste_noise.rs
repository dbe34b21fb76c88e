//! Paste noise does not change the reading: every labelled record of the eight oom-reports files,
//! pasted the ways people and stored copies carry a console (CRLF line ends, colour codes, Markdown
//! quotes and fences, HTML entities, a logger's timestamp on every line, blank edges, tabs), gives
//! `diagnose_text` the same kind and stage as the untouched text (issue #40: unseen reports come
//! with noise the labelled ones did not have).

use comfy_bisect_core::diagnose::{self, Diagnosis};
use serde_json::Value;

const FILES: &[&str] = &[
    "tests/fixtures/oom-reports/dev-reports.json",
    "tests/fixtures/oom-reports/collected-reports.json",
    "tests/fixtures/oom-reports/collected-2026.json",
    "tests/fixtures/oom-reports/fresh-2026.json",
    "tests/fixtures/oom-reports/clean-2026.json",
    "tests/fixtures/oom-reports/clean-2026b.json",
    "tests/fixtures/oom-reports/clean-2026c.json",
    "tests/fixtures/oom-reports/clean-2026d.json",
];

/// Every record's pasted text (its excerpts joined as the scorer joins them), with its id.
fn pasted_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for file in FILES {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {file}: {e} (run from the crate root)"));
        let records: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
        for r in records.as_array().expect("an array of reports") {
            let excerpts: Vec<&str> = r["error"]["log_excerpts"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let id = r["id"].as_str().unwrap_or("?").to_string();
            out.push((id, excerpts.join("\n\n")));
        }
    }
    out
}

/// Applies `f` to every line of `text` (line ends kept as `\n`).
fn per_line(text: &str, f: impl Fn(&str) -> String) -> String {
    text.split('\n').map(f).collect::<Vec<_>>().join("\n")
}

/// A stored copy's HTML escaping (`&` first, so it is not escaped twice).
fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&#39;")
        .replace('"', "&quot;")
}

/// A terminal's colours: the level words coloured, and each non-empty line in red.
fn ansi(text: &str) -> String {
    per_line(text, |l| {
        if l.trim().is_empty() {
            return l.to_string();
        }
        let l = l
            .replace("WARNING", "\x1b[33mWARNING\x1b[0m")
            .replace("ERROR", "\x1b[1;31mERROR\x1b[0m")
            .replace("INFO", "\x1b[32mINFO\x1b[0m");
        format!("\x1b[31m{l}\x1b[0m")
    })
}

/// Leading indentation of four spaces written as a tab.
fn tabs(text: &str) -> String {
    per_line(text, |l| {
        let spaces = l.len() - l.trim_start_matches(' ').len();
        format!("{}{}", "\t".repeat(spaces / 4), &l[spaces / 4 * 4..])
    })
}

/// A terminal's or a mail client's hard wrap: every line cut into pieces of at most 80 characters.
fn wrap80(text: &str) -> String {
    per_line(text, |l| {
        let chars: Vec<char> = l.chars().collect();
        chars
            .chunks(80)
            .map(|c| c.iter().collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

type Transform = fn(&str) -> String;

/// The paste transformations, by name.
const TRANSFORMS: &[(&str, Transform)] = &[
    ("CRLF line ends", |t| t.replace('\n', "\r\n")),
    ("ANSI colour codes", ansi),
    ("every line quoted with `> `", |t| {
        per_line(t, |l| format!("> {l}"))
    }),
    ("a ``` fence around the text", |t| format!("```\n{t}\n```")),
    ("HTML entities", html_escape),
    ("`2026-05-12 23:34:51,752 INFO ` on every line", |t| {
        per_line(t, |l| format!("2026-05-12 23:34:51,752 INFO {l}"))
    }),
    ("`[2026-05-12 23:34:51.752] ` on every line", |t| {
        per_line(t, |l| format!("[2026-05-12 23:34:51.752] {l}"))
    }),
    ("`[ComfyUI] ` on every line", |t| {
        per_line(t, |l| format!("[ComfyUI] {l}"))
    }),
    ("docker compose's `comfyui  | ` on every line", |t| {
        per_line(t, |l| format!("comfyui  | {l}"))
    }),
    (
        "loguru's `2026-05-12 23:34:51.752 | INFO     | ` on every line",
        |t| per_line(t, |l| format!("2026-05-12 23:34:51.752 | INFO     | {l}")),
    ),
    ("quoted, in a fence, with CRLF", |t| {
        format!("```\n{}\n```", per_line(t, |l| format!("> {l}"))).replace('\n', "\r\n")
    }),
    ("no-break spaces of a web copy", |t| {
        t.replace(' ', "\u{a0}")
    }),
    ("indentation lost (a rendered copy)", |t| {
        per_line(t, |l| l.trim_start().to_string())
    }),
    ("a short paste in backticks", |t| {
        if t.lines().count() <= 2 {
            format!("`{}`", t.trim())
        } else {
            t.to_string()
        }
    }),
    ("blank lines around the text", |t| {
        format!("\n\n  \n{t}\n\n\n")
    }),
    ("tabs for indentation", tabs),
];

fn read(text: &str) -> Diagnosis {
    diagnose::diagnose_text(text).unwrap_or_else(|e| diagnose::no_failure(&e.to_string()))
}

/// For each transformation, the records whose kind or stage it changes; prints the counts and
/// asserts there are none.
#[test]
fn paste_noise_keeps_kind_and_stage() {
    let texts = pasted_texts();
    assert!(texts.len() >= 300, "only {} records", texts.len());
    let plain: Vec<Diagnosis> = texts.iter().map(|(_, t)| read(t)).collect();
    let mut failures = Vec::new();
    for (name, transform) in TRANSFORMS {
        let mut changed = Vec::new();
        for ((id, text), before) in texts.iter().zip(&plain) {
            let after = read(&transform(text));
            if after.kind != before.kind || after.stage != before.stage {
                changed.push(format!(
                    "{id}: {:?}/{:?} -> {:?}/{:?}",
                    before.kind, before.stage, after.kind, after.stage
                ));
            }
        }
        println!(
            "{name}: {} of {} records changed",
            changed.len(),
            texts.len()
        );
        for c in &changed {
            println!("   {c}");
        }
        if !changed.is_empty() {
            failures.push(format!("{name}: {}", changed.len()));
        }
    }
    assert!(
        failures.is_empty(),
        "paste noise changed the reading: {failures:?}"
    );
}

/// Hard-wrapped lines (a terminal copy, a mail client) keep the kind: the wording that names it
/// may be cut in two (`CUDA out of` / `memory`). The stage may move, since a wrapped frame or bar
/// is no longer one line.
#[test]
fn hard_wrapped_lines_keep_the_kind() {
    let texts = pasted_texts();
    let mut changed = Vec::new();
    for (id, text) in &texts {
        let (before, after) = (read(text), read(&wrap80(text)));
        if after.kind != before.kind {
            changed.push(format!("{id}: {:?} -> {:?}", before.kind, after.kind));
        }
    }
    println!(
        "hard wrap at 80: {} of {} records changed kind",
        changed.len(),
        texts.len()
    );
    for c in &changed {
        println!("   {c}");
    }
    assert!(
        changed.is_empty(),
        "a hard wrap changed the kind: {changed:?}"
    );
}
