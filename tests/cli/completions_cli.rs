//! `comfy-bisect completions SHELL` and the help texts, as a user runs them.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Every shell gets a script that knows the subcommands and their options.
#[test]
fn completion_scripts_for_every_shell() {
    // What each shell's script looks like at its start or its registration line.
    for (shell, marker) in [
        ("bash", "complete -F _comfy__bisect"),
        ("zsh", "#compdef comfy-bisect"),
        ("fish", "complete -c comfy-bisect"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "set edit:completion:arg-completer[comfy-bisect]"),
    ] {
        let (code, out, err) = run(&["completions", shell]);
        assert_eq!(code, Some(0), "{shell}: {err}");
        assert!(out.contains(marker), "{shell}: no {marker:?} in\n{out}");
        for word in [
            "bisect",
            "resume",
            "completions",
            "runs-dir",
            "strategy",
            "check",
            "checkout",
        ] {
            assert!(out.contains(word), "{shell}: {word} missing");
        }
    }
}

#[test]
fn unknown_shell_is_a_usage_error_naming_the_shells() {
    let (code, out, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        assert!(err.contains(shell), "{err}");
    }
}

/// The commands that load workflows with `read_*_with` accept UI workflows, and say so.
#[test]
fn help_names_every_accepted_workflow_format() {
    for command in ["bisect", "submit", "validate", "plan", "check"] {
        let (code, out, err) = run(&[command, "--help"]);
        assert_eq!(code, Some(0), "{command}: {err}");
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        for format in ["API format", "POST /prompt body", "UI workflow"] {
            assert!(
                flat.contains(format),
                "{command} --help lacks {format:?}:\n{out}"
            );
        }
    }
    let (_, out, _) = run(&["completions", "--help"]);
    assert!(out.contains("~/.local/share/bash-completion/completions/comfy-bisect"));
}

/// The bash script, loaded in a real bash as bash-completion loads it, completes the options
/// of a subcommand (and of a hyphenated one) and the subcommands themselves.
#[test]
fn bash_completion_offers_a_subcommands_options_in_bash() {
    if Command::new("bash").arg("--version").output().is_err() {
        eprintln!("skipped: no bash on this machine");
        return;
    }
    let (code, script, err) = run(&["completions", "bash"]);
    assert_eq!(code, Some(0), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("comfy-bisect.bash");
    std::fs::write(&path, script).unwrap();
    // What bash does on Tab: the function registered for the command is called with the
    // command, the word under the cursor and the word before it, with COMP_WORDS/COMP_CWORD set.
    let probe = r#"
        source "$1" || exit 9
        spec=$(complete -p comfy-bisect) || exit 8
        fn=$(sed -E 's/.* -F ([^ ]+) .*/\1/' <<<"$spec")
        ask() {
            COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
            COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
            "$fn" comfy-bisect "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            echo "${COMPREPLY[*]}"
        }
        ask comfy-bisect bisect --runs
        ask comfy-bisect hash-files --ca
        ask comfy-bisect res
        ask comfy-bisect report --
    "#;
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", probe, "probe"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0], "--runs-dir", "{stdout}");
    assert_eq!(lines[1], "--cache", "{stdout}");
    assert_eq!(lines[2], "resume", "{stdout}");
    for option in ["--json", "--bundle", "--runs-dir", "--no-redact"] {
        assert!(
            lines[3].split(' ').any(|o| o == option),
            "report --: {option} missing in {stdout}"
        );
    }
}
