//! The server flags a relaunch may carry and how they reach a shell: the memory flags of
//! [`MEMORY_FLAGS`] (what each takes), the words of a server's argv or a control checked against
//! them (a flag name, a number, a known choice: [`carried_flags`]), a control's flags laid over the
//! original ones ([`with_control`]) and the template filled with them ([`fill`]). Nothing here
//! runs anything; `relaunch` does.

use std::collections::BTreeMap;

/// What a carried-over flag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Takes {
    /// A switch.
    Nothing,
    /// A number (`type=float` / `type=int`).
    Number,
    /// One of these words (`choices=`).
    Choice(&'static [&'static str]),
}

/// ComfyUI launch flags that shape memory, with what each takes (`comfy/cli_args.py`); the
/// ones a relaunch carries over from the running server.
pub(crate) const MEMORY_FLAGS: &[(&str, Takes)] = &[
    ("--reserve-vram", Takes::Number),
    ("--vram-headroom", Takes::Number),
    ("--disable-dynamic-vram", Takes::Nothing),
    ("--enable-dynamic-vram", Takes::Nothing),
    ("--disable-pinned-memory", Takes::Nothing),
    ("--disable-smart-memory", Takes::Nothing),
    ("--disable-async-offload", Takes::Nothing),
    ("--cache-none", Takes::Nothing),
    ("--cache-classic", Takes::Nothing),
    ("--cache-lru", Takes::Number),
    ("--cache-ram", Takes::Number),
    ("--use-split-cross-attention", Takes::Nothing),
    ("--use-quad-cross-attention", Takes::Nothing),
    ("--use-pytorch-cross-attention", Takes::Nothing),
    ("--use-sage-attention", Takes::Nothing),
    ("--use-flash-attention", Takes::Nothing),
    ("--lowvram", Takes::Nothing),
    ("--novram", Takes::Nothing),
    ("--normalvram", Takes::Nothing),
    ("--highvram", Takes::Nothing),
    ("--gpu-only", Takes::Nothing),
    (
        "--preview-method",
        Takes::Choice(&["none", "auto", "latent2rgb", "taesd"]),
    ),
];

fn takes(flag: &str) -> Option<Takes> {
    MEMORY_FLAGS
        .iter()
        .find(|(f, _)| *f == flag)
        .map(|(_, t)| *t)
}

/// Whether `word` is a plain decimal number (`2`, `1.5`, `-0.5`): what a shell leaves alone.
fn is_number(word: &str) -> bool {
    let digits = word.strip_prefix('-').unwrap_or(word);
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().filter(|c| *c == '.').count() <= 1
        && digits.chars().any(|c| c.is_ascii_digit())
}

/// Whether `value` is what `flag` takes.
fn valid_value(takes: Takes, value: &str) -> bool {
    match takes {
        Takes::Nothing => false,
        Takes::Number => is_number(value),
        Takes::Choice(choices) => choices.contains(&value),
    }
}

/// What `flag` takes, in words.
fn expected(takes: Takes) -> String {
    match takes {
        Takes::Nothing => "no value".into(),
        Takes::Number => "a number".into(),
        Takes::Choice(c) => format!("one of {}", c.join(", ")),
    }
}

/// The memory flags of `argv` (see [`MEMORY_FLAGS`]), in their order, with their values, as
/// given; nothing is validated.
#[cfg(test)]
fn memory_flags(argv: &[String]) -> Vec<String> {
    scan(argv).into_iter().flatten().collect()
}

/// Each memory flag of `argv` with its value words.
fn scan(argv: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (a.as_str(), None),
        };
        if let Some(t) = takes(flag) {
            let mut words = vec![a.clone()];
            // A value follows unless it is given inline or the next word is another flag
            // (`--cache-ram` may stand alone).
            if inline.is_none() && t != Takes::Nothing {
                if let Some(v) = argv.get(i + 1).filter(|v| !v.starts_with("--")) {
                    words.push(v.clone());
                    i += 1;
                }
            }
            out.push(words);
        }
        i += 1;
    }
    out
}

/// What `flags` set, flag by flag (the last one given wins, as with argparse): two servers
/// whose memory flags set the same run alike, however often a flag is repeated (a template
/// that gives one itself, and `{args}` again).
pub(crate) fn effective(flags: &[String]) -> BTreeMap<String, Vec<String>> {
    scan(flags)
        .into_iter()
        .map(|words| match words[0].split_once('=') {
            Some((f, v)) => (f.to_string(), vec![v.to_string()]),
            None => (words[0].clone(), words[1..].to_vec()),
        })
        .collect()
}

/// The memory flags of the server's `argv` as words a shell may be given: each flag name is
/// one of [`MEMORY_FLAGS`] and each value a number or a known choice. Anything else (an argv
/// entry like `--cache-lru=1$(touch x)`) is refused, in words, and nothing is launched.
pub(crate) fn carried_flags(argv: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for words in scan(argv) {
        check_words(&words, "the server's /system_stats argv")?;
        out.extend(words);
    }
    Ok(out)
}

/// Checks one flag with its values (`--reserve-vram 2`, `--cache-lru=4`).
fn check_words(words: &[String], from: &str) -> Result<(), String> {
    let refuse = |what: &str| {
        Err(format!(
            "{what} (in {from}): comfy-bisect gives --launch-cmd's shell only flag names, numbers \
             and known choices, so it will not relaunch the server with it; restart the server \
             without it, or relaunch it yourself"
        ))
    };
    let Some(first) = words.first() else {
        return Ok(());
    };
    let (flag, inline) = match first.split_once('=') {
        Some((f, v)) => (f, Some(v)),
        None => (first.as_str(), None),
    };
    let shown = crate::text::escape_controls(&words.join(" ")).into_owned();
    let Some(t) = takes(flag) else {
        return refuse(&format!(
            "`{shown}` is not a memory flag comfy-bisect knows"
        ));
    };
    let values: Vec<&str> = inline
        .into_iter()
        .chain(words[1..].iter().map(String::as_str))
        .collect();
    let ok = match (t, values.as_slice()) {
        (Takes::Nothing, []) => true,
        (Takes::Nothing, _) => false,
        // `--cache-ram` alone takes ComfyUI's default.
        (_, []) => flag == "--cache-ram",
        (_, [v]) => valid_value(t, v),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        refuse(&format!("`{shown}` is not {flag} with {}", expected(t)))
    }
}

/// Checks a control's own flags (the catalogue's) the same way as the server's.
pub(crate) fn check_control(args: &[String]) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].split_once('=').map_or(args[i].as_str(), |(f, _)| f);
        let n = match takes(flag) {
            Some(Takes::Nothing) | None => 1,
            Some(_) if args[i].contains('=') => 1,
            // `--cache-ram` may stand alone, before another flag.
            Some(_) if args.get(i + 1).is_none_or(|v| v.starts_with("--")) => 1,
            Some(_) => 2,
        };
        let end = (i + n).min(args.len());
        check_words(&args[i..end], "the control's flags")?;
        i = end;
    }
    Ok(())
}

/// The original memory flags with a control's flags: a flag the control gives replaces the
/// original one (and its values), so the server sees each flag once.
pub(crate) fn with_control(original: &[String], control: &[String]) -> Vec<String> {
    let name = |a: &str| a.split_once('=').map_or(a, |(f, _)| f).to_string();
    let given: Vec<String> = control
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| name(a))
        .collect();
    let mut out = Vec::new();
    for words in scan(original) {
        if !given.contains(&name(&words[0])) {
            out.extend(words);
        }
    }
    out.extend(control.iter().cloned());
    out
}

/// Whether `word` is one a shell leaves as it is at any quoting level: letters, digits, `.`,
/// `-`, `_` and `=`, and not an assignment (`NAME=…`). What [`carried_flags`] lets through.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '='))
        && (word.starts_with('-') || !word.contains('='))
}

/// `TEMPLATE` with `{args}` replaced by `args`: validated words as they are (so they read the
/// same bare, in double quotes or in a wrapper's quoted command), anything else shell-quoted.
pub(crate) fn fill(template: &str, args: &[String]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|w| {
            if plain(w) {
                w.clone()
            } else {
                crate::shell::quote(w).into_owned()
            }
        })
        .collect();
    template.replace("{args}", &words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_memory_flags_and_their_values_are_carried_over() {
        let argv = v(&[
            "main.py",
            "--listen",
            "0.0.0.0",
            "--port",
            "8188",
            "--reserve-vram",
            "1.5",
            "--cache-lru=4",
            "--disable-pinned-memory",
            "--output-directory",
            "out",
            "--preview-method",
            "auto",
        ]);
        assert_eq!(
            memory_flags(&argv),
            v(&[
                "--reserve-vram",
                "1.5",
                "--cache-lru=4",
                "--disable-pinned-memory",
                "--preview-method",
                "auto"
            ])
        );
        assert!(memory_flags(&v(&["main.py", "--listen"])).is_empty());
    }

    #[test]
    fn a_control_flag_replaces_the_original_one() {
        let original = v(&[
            "--preview-method",
            "taesd",
            "--reserve-vram",
            "1",
            "--cache-none",
        ]);
        assert_eq!(
            with_control(&original, &v(&["--preview-method", "none"])),
            v(&[
                "--reserve-vram",
                "1",
                "--cache-none",
                "--preview-method",
                "none"
            ])
        );
        assert_eq!(
            with_control(&v(&["--reserve-vram=1"]), &v(&["--reserve-vram", "2"])),
            v(&["--reserve-vram", "2"])
        );
        assert_eq!(with_control(&original, &[]), original);
    }

    #[test]
    fn the_template_gets_its_args_shell_quoted() {
        assert_eq!(
            fill(
                "cd ~/ComfyUI && python main.py {args}",
                &v(&["--reserve-vram", "2"])
            ),
            "cd ~/ComfyUI && python main.py --reserve-vram 2"
        );
        // The platform's shell: POSIX quoting on Unix, cmd.exe's double quotes on Windows.
        let quoted = if cfg!(windows) {
            r#"x "a b" "it's""#
        } else {
            r"x 'a b' 'it'\''s'"
        };
        assert_eq!(fill("x {args}", &v(&["a b", "it's"])), quoted);
        assert_eq!(fill("x {args}", &[]), "x ");
    }

    #[test]
    fn only_flag_names_numbers_and_known_choices_reach_the_shell() {
        let ok = v(&[
            "main.py",
            "--reserve-vram",
            "1.5",
            "--cache-lru=4",
            "--cache-ram",
            "--preview-method",
            "taesd",
            "--lowvram",
        ]);
        assert_eq!(
            carried_flags(&ok).unwrap(),
            v(&[
                "--reserve-vram",
                "1.5",
                "--cache-lru=4",
                "--cache-ram",
                "--preview-method",
                "taesd",
                "--lowvram"
            ])
        );
        // Every carried word is one a shell leaves alone, at any quoting level.
        for w in carried_flags(&ok).unwrap() {
            assert!(plain(&w), "{w}");
        }
        let once = fill(
            "sh -c \"python main.py {args}\"",
            &carried_flags(&ok).unwrap(),
        );
        let inner = shell_words::split(&once).unwrap();
        assert_eq!(
            shell_words::split(&inner[2]).unwrap()[2..],
            carried_flags(&ok).unwrap()[..],
            "{once}"
        );
        for bad in [
            "--cache-lru=1$(touch x)",
            "--reserve-vram=2;reboot",
            "--disable-pinned-memory=`id`",
            "--cache-lru=1 2",
        ] {
            let err = carried_flags(&v(&["main.py", bad])).unwrap_err();
            assert!(err.contains("will not relaunch"), "{bad}: {err}");
        }
        for (flag, value) in [
            ("--reserve-vram", "$(id)"),
            ("--preview-method", "taesd;id"),
            ("--cache-lru", "1e3"),
        ] {
            let err = carried_flags(&v(&["main.py", flag, value])).unwrap_err();
            assert!(err.contains(flag), "{err}");
        }
        // `--cache-ram` alone before another flag, and a flag repeated (a template giving it
        // too): what they set is what counts.
        assert!(check_control(&v(&["--cache-ram", "--lowvram"])).is_ok());
        assert_eq!(
            effective(&v(&[
                "--preview-method",
                "auto",
                "--cache-lru=4",
                "--preview-method",
                "auto"
            ])),
            effective(&v(&["--cache-lru", "4", "--preview-method", "auto"]))
        );
        assert_ne!(
            effective(&v(&["--reserve-vram", "2"])),
            effective(&v(&["--reserve-vram", "1"]))
        );
        // A control's own flags are checked the same way.
        assert!(check_control(&v(&["--reserve-vram", "2"])).is_ok());
        assert!(check_control(&v(&["--disable-pinned-memory"])).is_ok());
        assert!(check_control(&v(&["--reserve-vram", "2$(id)"])).is_err());
        assert!(check_control(&v(&["--listen", "0.0.0.0"])).is_err());
    }
}
