//! Command-line interface: argument definitions and one function per subcommand.
//!
//! Each subcommand lives in its own file with an `Args` struct and a `run` function that
//! returns `common::CliResult`: the exit code, or a [`common::CliError`] (message and exit
//! code) that this module prints in one place. This module only dispatches.
//!
//! `print!` and `println!` are shadowed here for every command: they write through
//! `common::write_stdout`, so a closed pipe (`show RUN | head -1`) ends the command quietly
//! instead of panicking. They and `eprint!`/`eprintln!` (`common::write_stderr`) make the
//! control and bidi characters of server text visible (`comfy_bisect_core::text`).

/// `print!` for the commands: a closed stdout ends the process quietly (see
/// `common::write_stdout`).
macro_rules! print {
    ($($arg:tt)*) => { $crate::cli::common::write_stdout(format_args!($($arg)*)) };
}

/// `println!` for the commands: a closed stdout ends the process quietly (see
/// `common::write_stdout`).
macro_rules! println {
    () => { $crate::cli::common::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::cli::common::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` for the commands: control and bidi characters made visible (see
/// `common::write_stderr`).
macro_rules! eprint {
    ($($arg:tt)*) => { $crate::cli::common::write_stderr(format_args!($($arg)*)) };
}

/// `eprintln!` for the commands: control and bidi characters made visible (see
/// `common::write_stderr`).
macro_rules! eprintln {
    () => { $crate::cli::common::write_stderr(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::cli::common::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub mod bisect;
pub mod check;
pub mod choices;
pub mod common;
pub mod completions;
pub mod convert;
pub mod demo;
pub mod diagnose;
pub mod hash;
pub mod hash_files;
pub mod heading;
pub mod logging;
pub mod mitigate;
pub mod nodedefs;
pub mod plan;
pub mod progress;
pub mod report;
pub mod resume;
pub mod runs;
pub mod schedule;
pub mod session_args;
pub mod show;
pub mod simulate;
pub mod submit;
pub mod validate;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Find the first change that makes a ComfyUI workflow fail (most often CUDA out of memory).
/// comfy-bisect shrinks a failing workflow to a minimal variant, re-adds one increment per run on
/// a running ComfyUI server, and writes an evidence-backed report of the first failing increment.
#[derive(Debug, Parser)]
#[command(name = "comfy-bisect", version, about, long_about = None, after_long_help = EXAMPLES)]
pub struct Cli {
    /// Where sessions are written, for the commands that keep them (also accepted after the
    /// subcommand; after wins) [default: runs].
    #[arg(long, value_name = "DIR", help_heading = heading::BASICS)]
    pub runs_dir: Option<PathBuf>,
    /// No progress line and no per-run lines (the summary is still printed); before or after
    /// the subcommand.
    #[arg(short, long, global = true, help_heading = heading::BASICS)]
    pub quiet: bool,
    /// More log output (repeat for more); before or after the subcommand.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = heading::BASICS)]
    pub verbose: u8,
    /// ComfyUI server URL (http/https) for the commands that talk to a server (validate,
    /// convert, hash, submit, check, bisect, plan; also accepted after the subcommand; for
    /// resume and mitigate it moves the session to that server)
    /// [default: the first of http://127.0.0.1:8188 and ComfyUI Desktop's
    /// http://127.0.0.1:8000 that answers].
    #[arg(long, env = "COMFY_BISECT_SERVER", value_name = "URL", help_heading = heading::SERVER)]
    pub server: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// `comfy-bisect --help`'s examples (not in `-h`).
const EXAMPLES: &str = "\
Examples:
  comfy-bisect demo
      the whole job on the built-in simulator and examples: no GPU, no ComfyUI needed
  comfy-bisect bisect my_workflow.json
      find the first increment that fails, on the ComfyUI at 127.0.0.1:8188 (or Desktop's 8000)
  comfy-bisect report <session-id> --bundle report.zip
      the report to paste into a GitHub issue, and the evidence to attach";

impl Cli {
    /// Parses the process's arguments (exits with clap's message and status on bad ones).
    pub fn parse_args() -> Cli {
        Cli::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the program name first), then applies what was given before the
    /// subcommand: `--runs-dir` goes to the subcommand unless it has its own (after wins); a
    /// subcommand that keeps no sessions refuses it.
    pub fn try_parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Cli::command().try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        let Some(dir) = cli.runs_dir.clone() else {
            return Ok(cli);
        };
        let (name, sub) = matches.subcommand().expect("a subcommand is required");
        // The subcommand's own --runs-dir, when given, wins (its default does not).
        let given_after = ["runs_dir", "runs_dirs"].iter().any(|id| {
            sub.try_contains_id(id).unwrap_or(false)
                && sub.value_source(id) != Some(clap::parser::ValueSource::DefaultValue)
        });
        if !cli.command.take_runs_dir(dir, given_after) {
            return Err(Cli::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--runs-dir before `{name}`: `{name}` keeps no sessions, so it takes no runs folder"
                ),
            ));
        }
        Ok(cli)
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check workflows against the server's node definitions before spending GPU time.
    Validate(validate::Args),
    /// Print a workflow's canonical sha256 (the workflow hash) and node count.
    Hash(hash::Args),
    /// Convert a UI workflow (what ComfyUI's "Save" writes) into the API prompt the frontend
    /// would queue.
    Convert(convert::Args),
    /// Run one workflow on the server and report how it ended (with the evidence).
    Submit(submit::Args),
    /// Run a ComfyUI-compatible simulator (no GPU needed) with a memory model and fault switches.
    Simulate(simulate::Args),
    /// Bisect failing workflow(s) on the server: preflight, endpoints, search, verdict, journal.
    #[command(after_long_help = bisect::EXAMPLES)]
    Bisect(bisect::Args),
    /// Run one workflow once on a freshly (re)started server; exit 0/1/125 for `git bisect run`.
    Check(check::Args),
    /// Continue a session after a crash, kill, Ctrl-C, deadline or lost server.
    Resume(resume::Args),
    /// After a session's verdict, try single-change controls (tiled decode, fp8 weights, server
    /// flags…) on the target, one run each, and judge them.
    Mitigate(mitigate::Args),
    /// Print one run (a unique prefix of its run id is enough).
    Show(show::Args),
    /// List the sessions in the runs folder with their verdicts.
    Runs(runs::Args),
    /// Bisect the example workflows on the built-in simulator (no GPU or ComfyUI needed).
    Demo(demo::Args),
    /// Print a session's report (Markdown or JSON), redacted unless --no-redact.
    Report(report::Args),
    /// Print size, sha256 and AutoV2 of files (uses a hash cache with --cache).
    HashFiles(hash_files::Args),
    /// Classify a failure from a pasted log, traceback or execution_error/history JSON.
    Diagnose(diagnose::Args),
    /// Derive the minimal variant and the increment ladder back to the target.
    Plan(plan::Args),
    /// Save the server's node definitions to a file, for `--object-info FILE` offline.
    Nodedefs(nodedefs::Args),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) on stdout.
    Completions(completions::Args),
}

impl Command {
    /// Gives the subcommand the runs folder named before it, unless it was given its own
    /// (`given_after`); false when the subcommand keeps no sessions.
    fn take_runs_dir(&mut self, dir: PathBuf, given_after: bool) -> bool {
        let slot = match self {
            Command::Bisect(args) => &mut args.session.runs_dir,
            Command::Demo(args) => &mut args.session.runs_dir,
            Command::Check(args) => &mut args.runs_dir,
            Command::Resume(args) => &mut args.runs_dir,
            Command::Mitigate(args) => &mut args.runs_dir,
            Command::Show(args) => return set_dirs(&mut args.runs_dirs, dir, given_after),
            Command::Runs(args) => return set_dirs(&mut args.runs_dirs, dir, given_after),
            Command::Report(args) => return set_dirs(&mut args.runs_dirs, dir, given_after),
            Command::Validate(_)
            | Command::Hash(_)
            | Command::Convert(_)
            | Command::Submit(_)
            | Command::Simulate(_)
            | Command::HashFiles(_)
            | Command::Diagnose(_)
            | Command::Plan(_)
            | Command::Nodedefs(_)
            | Command::Completions(_) => return false,
        };
        if !given_after {
            *slot = dir;
        }
        true
    }

    /// Hands the global `-q` to the subcommands that print progress.
    fn set_quiet(&mut self, quiet: bool) {
        match self {
            Command::Bisect(args) => args.session.quiet = quiet,
            Command::Demo(args) => args.session.quiet = quiet,
            Command::Check(args) => args.quiet = quiet,
            Command::Resume(args) => args.quiet = quiet,
            Command::Mitigate(args) => args.quiet = quiet,
            _ => {}
        }
    }
}

/// [`Command::take_runs_dir`] for the commands that read several runs folders.
fn set_dirs(dirs: &mut Vec<PathBuf>, dir: PathBuf, given_after: bool) -> bool {
    if !given_after {
        *dirs = vec![dir];
    }
    true
}

/// A `--server` given before `resume` or `mitigate`: it moves the session, unless it only came
/// from COMFY_BISECT_SERVER (the environment names a default, not a move).
fn moved_to(before: &Option<String>) -> Option<String> {
    before
        .clone()
        .filter(|s| std::env::var("COMFY_BISECT_SERVER").ok().as_deref() != Some(s))
}

/// Runs the parsed command line and returns the exit code.
pub fn main(mut cli: Cli) -> ExitCode {
    logging::init(cli.verbose);
    cli.command.set_quiet(cli.quiet);
    let before = cli.server.clone();
    let server = |arg: &common::ServerArg| arg.resolve(before.as_deref());
    let offline = |arg: &common::ServerArg, defs: &common::DefsArgs| {
        if defs.object_info.is_empty() {
            arg.resolve(before.as_deref())
        } else {
            arg.resolve_offline(before.as_deref())
        }
    };
    let result: common::CliResult = match cli.command {
        // With --object-info FILE these ask no server: none is looked for.
        Command::Validate(args) => validate::run(offline(&args.target, &args.defs), args),
        Command::Hash(args) => hash::run(offline(&args.target, &args.defs), args),
        Command::Convert(args) => convert::run(offline(&args.target, &args.defs), args),
        Command::Submit(args) => submit::run(server(&args.target), args),
        Command::Simulate(args) => simulate::run(args),
        Command::Bisect(args) => bisect::run(server(&args.target), args),
        Command::Check(args) => check::run(server(&args.target), args),
        Command::Resume(args) => resume::run(moved_to(&before), args),
        Command::Mitigate(args) => mitigate::run(moved_to(&before), args),
        Command::Show(args) => show::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Report(args) => report::run(args),
        Command::HashFiles(args) => hash_files::run(args),
        Command::Diagnose(args) => diagnose::run(args),
        Command::Plan(args) => plan::run(offline(&args.target, &args.defs), args),
        Command::Nodedefs(args) => {
            let nodedefs::Action::Save(save) = &args.action;
            let url = server(&save.target);
            nodedefs::run(url, args)
        }
        Command::Completions(args) => completions::run(args, Cli::command()),
    };
    ExitCode::from(result.unwrap_or_else(common::CliError::report))
}
