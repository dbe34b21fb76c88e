//! The recipes for unattended nights (cron, systemd, Windows Task Scheduler, launchd) in
//! docs/overnight.md, which the README links:
//! each one calls comfy-bisect by an absolute path with absolute workflow and runs paths,
//! creates the runs folder before anything writes into it, and gives arguments comfy-bisect
//! accepts (parsed by the real command line, session options resolved as `bisect` does).

use clap::Parser;
use comfy_bisect::cli::{Cli, Command};

const OVERNIGHT: &str = include_str!("../../docs/overnight.md");
const README: &str = include_str!("../../README.md");

/// The fenced blocks of docs/overnight.md's "Scheduler recipes" section: (language, text).
fn recipe_blocks() -> Vec<(String, String)> {
    let start = OVERNIGHT
        .find("\n## Scheduler recipes\n")
        .expect("docs/overnight.md has a 'Scheduler recipes' section");
    let rest = &OVERNIGHT[start + 1..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if let Some(lang) = line.strip_prefix("```") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .collect();
            blocks.push((lang.trim().to_string(), body.join("\n")));
        }
    }
    blocks
}

/// Splits a command line the way sh (and systemd's ExecStart=, and Windows' argument parser
/// for the plain quoting used here) does for words, single and double quotes.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "unbalanced quote in {text:?}");
    if in_word {
        words.push(word);
    }
    words
}

/// An absolute path on Unix (`/…`) or Windows (`C:\…`).
fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/') || (b.len() > 3 && b[0].is_ascii_alphabetic() && &b[1..3] == b":\\")
}

/// What one recipe runs: the folder it creates first, the comfy-bisect words, and where the
/// output goes (if it is redirected).
struct Recipe {
    name: &'static str,
    created: String,
    words: Vec<String>,
    log: Option<String>,
}

/// A `mkdir -p DIR && [exec] BIN ARGS [>> LOG 2>&1]` shell line.
fn from_shell(name: &'static str, line: &str) -> Recipe {
    let (mkdir, command) = line
        .split_once("&&")
        .unwrap_or_else(|| panic!("{name}: no `mkdir -p … &&` before comfy-bisect: {line}"));
    let mkdir = split_words(mkdir);
    assert_eq!(mkdir[..2], ["mkdir", "-p"], "{name}: {line}");
    let (command, log) = match command.split_once(">>") {
        Some((c, redirect)) => {
            let redirect = split_words(redirect);
            assert_eq!(redirect.get(1).map(String::as_str), Some("2>&1"), "{name}");
            (c, Some(redirect[0].clone()))
        }
        None => (command, None),
    };
    let mut words = split_words(command);
    if words.first().map(String::as_str) == Some("exec") {
        words.remove(0);
    }
    Recipe {
        name,
        created: mkdir[2].clone(),
        words,
        log,
    }
}

fn ini_value<'a>(block: &'a str, key: &str) -> Option<&'a str> {
    block
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

/// The text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {text}"))
        + start.len();
    let len = text[from..].find(end).expect("closing delimiter");
    &text[from..from + len]
}

fn recipes() -> Vec<Recipe> {
    let blocks = recipe_blocks();
    let block = |lang: &str, first_line: &str| -> String {
        blocks
            .iter()
            .find(|(l, b)| l == lang && b.lines().next().unwrap_or("").contains(first_line))
            .unwrap_or_else(|| panic!("no ```{lang} block starting with {first_line}"))
            .1
            .clone()
    };
    let mut out = Vec::new();

    // cron: one line.
    let cron = block("cron", "");
    let line = cron
        .lines()
        .find(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .expect("a crontab line");
    let command = line
        .split_whitespace()
        .skip(5)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        !command.contains('%'),
        "cron turns % into a newline: {line}"
    );
    out.push(from_shell("cron", &command));

    // systemd: the session unit creates the folder first, and the unit its restart command
    // names is there too.
    let service = block("ini", "# comfy-bisect.service");
    let mkdir = split_words(ini_value(&service, "ExecStartPre").expect("ExecStartPre"));
    assert!(
        is_absolute(&mkdir[0]) && mkdir[0].ends_with("/mkdir"),
        "{mkdir:?}"
    );
    assert_eq!(mkdir[1], "-p");
    let words = split_words(ini_value(&service, "ExecStart").expect("ExecStart"));
    let restart = words
        .iter()
        .position(|w| w == "--restart-cmd")
        .map(|i| words[i + 1].clone())
        .expect("the systemd recipe restarts ComfyUI");
    let unit = restart
        .split_whitespace()
        .find(|w| w.ends_with(".service"))
        .expect("the restart command names a unit");
    let comfyui = block("ini", &format!("# {unit}"));
    let exec = split_words(ini_value(&comfyui, "ExecStart").expect("ComfyUI's ExecStart"));
    assert!(exec.iter().take(2).all(|w| is_absolute(w)), "{exec:?}");
    assert!(
        ini_value(&service, "After").is_some_and(|a| a.contains(unit)),
        "the session starts after {unit}"
    );
    let timer = block("ini", "# comfy-bisect.timer");
    assert!(ini_value(&timer, "OnCalendar").is_some(), "{timer}");
    out.push(Recipe {
        name: "systemd",
        created: mkdir[2].clone(),
        words,
        log: None,
    });

    // Windows Task Scheduler: the folder made first, then the task's program and arguments.
    let ps = block("powershell", "New-Item");
    let created = between(ps.lines().next().unwrap(), "-Path \"", "\"").to_string();
    assert!(ps.contains("New-Item -ItemType Directory -Force"), "{ps}");
    let action = ps
        .lines()
        .find(|l| l.contains("New-ScheduledTaskAction"))
        .expect("the task's action");
    let program = between(action, "-Execute \"", "\"");
    // A single-quoted PowerShell string is literal; Windows splits it like sh's double quotes.
    let mut words = vec![program.to_string()];
    words.extend(split_words(between(action, "-Argument '", "'")));
    assert!(ps.contains("Register-ScheduledTask"), "{ps}");
    let restart = words
        .iter()
        .position(|w| w == "--restart-cmd")
        .map(|i| words[i + 1].clone())
        .expect("the Windows recipe restarts ComfyUI");
    let script = restart
        .split_whitespace()
        .find(|w| w.ends_with(".ps1"))
        .expect("a restart script");
    assert!(is_absolute(script), "{script}");
    let script_name = script.rsplit('\\').next().unwrap();
    block("powershell", script_name);
    out.push(Recipe {
        name: "Task Scheduler",
        created,
        words,
        log: None,
    });

    // launchd: /bin/sh -c "mkdir -p … && exec …".
    let plist = block("xml", "<?xml");
    let args = between(&plist, "<key>ProgramArguments</key>", "</array>");
    let strings: Vec<String> = args
        .split("<string>")
        .skip(1)
        .map(|s| s.split("</string>").next().unwrap().replace("&amp;", "&"))
        .collect();
    assert_eq!(strings[..2], ["/bin/sh", "-c"], "{strings:?}");
    out.push(from_shell("launchd", &strings[2]));
    out
}

#[test]
fn every_recipe_runs_comfy_bisect_by_absolute_paths_into_a_folder_it_made() {
    let recipes = recipes();
    assert_eq!(recipes.len(), 4);
    for r in &recipes {
        let name = r.name;
        let program = &r.words[0];
        assert!(
            is_absolute(program),
            "{name}: program {program} is not absolute"
        );
        assert!(
            program.ends_with("/comfy-bisect") || program.ends_with("\\comfy-bisect.exe"),
            "{name}: {program}"
        );
        assert!(is_absolute(&r.created), "{name}: {}", r.created);
        if let Some(log) = &r.log {
            assert!(
                log.starts_with(&format!("{}/", r.created)),
                "{name}: the log {log} is not in the folder made first ({})",
                r.created
            );
        }
        let cli = Cli::try_parse_from(&r.words)
            .unwrap_or_else(|e| panic!("{name}: comfy-bisect refuses the arguments: {e}"));
        let Command::Bisect(args) = cli.command else {
            panic!("{name}: not a bisect: {:?}", r.words)
        };
        let runs = args.session.runs_dir.to_string_lossy().to_string();
        assert_eq!(
            runs, r.created,
            "{name}: --runs-dir is the folder made first"
        );
        for w in &args.workflows {
            let w = w.to_string_lossy();
            assert!(is_absolute(&w), "{name}: workflow {w} is not absolute");
        }
        let options = args
            .session
            .options(&args.ladder)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            options.deadline.is_some(),
            "{name}: a night needs --deadline"
        );
    }
}

#[test]
fn the_readme_links_the_recipes() {
    assert!(
        README.contains("(docs/overnight.md#scheduler-recipes)"),
        "the README's overnight section links the recipes"
    );
}

#[test]
fn the_recipe_checks_catch_what_they_are_for() {
    // The checks above would see a relative program, a missing folder and a bad flag.
    assert!(!is_absolute("comfy-bisect"));
    assert!(is_absolute("C:\\Users\\me\\bisect"));
    assert!(!is_absolute("runs/nightly.log"));
    assert_eq!(split_words(r#"a 'b c' "d e" f"#), ["a", "b c", "d e", "f"]);
    assert!(
        Cli::try_parse_from(["comfy-bisect", "bisect", "/w.json", "--dedline", "07:00"]).is_err()
    );
    let r = from_shell(
        "t",
        "mkdir -p /x/runs && exec /bin/comfy-bisect bisect /w.json >> /x/runs/l 2>&1",
    );
    assert_eq!(r.created, "/x/runs");
    assert_eq!(r.log.as_deref(), Some("/x/runs/l"));
    assert_eq!(r.words, ["/bin/comfy-bisect", "bisect", "/w.json"]);
}
