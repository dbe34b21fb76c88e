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
        for word in ["bisect", "resume", "completions", "runs-dir", "strategy"] {
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
    for command in ["bisect", "submit", "validate", "plan"] {
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
