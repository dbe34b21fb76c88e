//! `comfy-bisect completions SHELL`: the shell completion script, generated from the same
//! argument definitions the binary parses (clap_complete), printed on stdout.

use super::common::{CliError, CliResult};
use crate::error::exit;
use std::io::Write;

/// Arguments of `completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Where to put the script (then open a new shell):
  bash        comfy-bisect completions bash > ~/.local/share/bash-completion/completions/comfy-bisect
  zsh         comfy-bisect completions zsh > ~/.zfunc/_comfy-bisect
              (with `fpath+=~/.zfunc; autoload -Uz compinit; compinit` in ~/.zshrc)
  fish        comfy-bisect completions fish > ~/.config/fish/completions/comfy-bisect.fish
  powershell  comfy-bisect completions powershell >> $PROFILE
  elvish      comfy-bisect completions elvish >> ~/.config/elvish/rc.elv")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Writes the completion script of `command` (the whole command line's definition) for
/// `args.shell` to stdout (a closed pipe, as with `| head`, ends it quietly).
pub fn run(args: Args, command: clap::Command) -> CliResult {
    let script = script(args.shell, command);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Ok(()) => Ok(exit::OK),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        Err(e) => Err(CliError::failed(format!(
            "cannot write the completion script: {e}"
        ))),
    }
}

/// The completion script for `shell`. clap_complete's bash script names the subcommands'
/// cases after the binary name with its hyphen escaped one way (`comfy__subcmd__bisect__…`)
/// while the loop that finds the subcommand sets them the other way (`comfy__bisect__…`), so
/// no subcommand's options were ever offered (clap issue #6421); the cases are renamed to
/// what the loop sets.
pub fn script(shell: clap_complete::Shell, mut command: clap::Command) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "comfy-bisect", &mut script);
    if shell == clap_complete::Shell::Bash {
        let text = String::from_utf8_lossy(&script);
        return text
            .replace("comfy__subcmd__bisect", "comfy__bisect")
            .into_bytes();
    }
    script
}
