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
pub mod logging;
pub mod mitigate;
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

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Find the first change that makes a ComfyUI workflow fail (most often CUDA out of memory).
/// comfy-bisect shrinks a failing workflow to a minimal variant, re-adds one increment per run on
/// a running ComfyUI server, and writes an evidence-backed report of the first failing increment.
#[derive(Debug, Parser)]
#[command(name = "comfy-bisect", version, about, long_about = None)]
pub struct Cli {
    /// ComfyUI server URL (http/https) for the commands that talk to a server (validate,
    /// convert, hash, submit, check, bisect, plan; also accepted after the subcommand)
    /// [default: the first of http://127.0.0.1:8188 and ComfyUI Desktop's
    /// http://127.0.0.1:8000 that answers].
    #[arg(long, env = "COMFY_BISECT_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
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
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) on stdout.
    Completions(completions::Args),
}

/// Runs the parsed command line and returns the exit code.
pub fn main(cli: Cli) -> ExitCode {
    logging::init(cli.verbose);
    let before = cli.server.clone();
    let server = |arg: &common::ServerArg| arg.resolve(before.as_deref());
    let result: common::CliResult = match cli.command {
        Command::Validate(args) => validate::run(server(&args.target), args),
        Command::Hash(args) => hash::run(server(&args.target), args),
        Command::Convert(args) => convert::run(server(&args.target), args),
        Command::Submit(args) => submit::run(server(&args.target), args),
        Command::Simulate(args) => simulate::run(args),
        Command::Bisect(args) => bisect::run(server(&args.target), args),
        Command::Check(args) => check::run(server(&args.target), args),
        // A --server before the subcommand moves the session, unless it only came from
        // COMFY_BISECT_SERVER (the environment names a default, not a move).
        Command::Resume(args) => resume::run(
            before
                .clone()
                .filter(|s| std::env::var("COMFY_BISECT_SERVER").ok().as_deref() != Some(s)),
            args,
        ),
        Command::Mitigate(args) => mitigate::run(args),
        Command::Show(args) => show::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Report(args) => report::run(args),
        Command::HashFiles(args) => hash_files::run(args),
        Command::Diagnose(args) => diagnose::run(args),
        Command::Plan(args) => plan::run(server(&args.target), args),
        Command::Completions(args) => completions::run(args, Cli::command()),
    };
    ExitCode::from(result.unwrap_or_else(common::CliError::report))
}
