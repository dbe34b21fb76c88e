//! `comfy-bisect resume [SESSION]`: continue a session after a crash, kill -9, Ctrl-C, deadline
//! or lost server. Completed runs are never re-run; the run in flight is first looked up in the
//! server's history by its prompt_id, else run again.

use super::bisect::print_finished;
use super::common::{CliError, CliResult, ConnectArgs, Connection};
use super::schedule::{describe_when, local_zone, parse_duration, parse_when, rfc3339};
use crate::cli::progress::ProgressView;
use comfy_bisect_core::app::{self, DeadlineChange, ResumeOptions, Resumed};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `resume`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (or a unique prefix of it), or the session folder. Without it, the unfinished
    /// session of --runs-dir written last.
    pub session: Option<String>,
    /// Where sessions are written.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    /// A new deadline: HH:MM (local) or RFC 3339.
    #[arg(long, value_name = "TIME", conflicts_with = "no_deadline")]
    pub deadline: Option<String>,
    /// Drop the session's deadline.
    #[arg(long)]
    pub no_deadline: bool,
    /// Run even when another session is using the same server (recorded in the session; a
    /// session started with it keeps it).
    #[arg(long)]
    pub allow_shared_server: bool,
    /// A new --wait-server; given, a server that does not answer when `resume` starts is also
    /// waited for (after the session's --restart-cmd, if any) instead of exit 3 at once.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub wait_server: Option<Duration>,
    /// A new --deadline-grace (how long a run may go on past the deadline).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub deadline_grace: Option<Duration>,
    /// Continue on this server instead of the session's (a port that changed after a reboot):
    /// the move is recorded in the journal and named in the report.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// `-q`, given before or after the subcommand (a global flag of [`super::Cli`]).
    #[arg(skip)]
    pub quiet: bool,
}

/// Runs `resume`.
pub fn run(before: Option<String>, args: Args) -> CliResult {
    let deadline = if args.no_deadline {
        DeadlineChange::Drop
    } else if let Some(d) = &args.deadline {
        let (zone, warning) = local_zone();
        if let Some(w) = warning.filter(|_| d.trim().len() <= 5) {
            eprintln!("warning: {w}");
        }
        let now = jiff::Timestamp::now();
        let t =
            parse_when(d, now, &zone).map_err(|e| CliError::usage(format!("--deadline: {e}")))?;
        eprintln!("--deadline {d}: {}", describe_when(&t, now, &zone));
        DeadlineChange::Set(rfc3339(&t))
    } else {
        DeadlineChange::Keep
    };
    let options = ResumeOptions {
        runs_dir: args.runs_dir.clone(),
        session: args.session.clone(),
        deadline,
        wait_server: args.wait_server,
        deadline_grace: args.deadline_grace,
        allow_shared_server: args.allow_shared_server,
        // Its own --server, else one given before the subcommand.
        server: args.server.clone().or(before),
    };
    let pending = match app::resume(options)? {
        Resumed::Finished(finished) => {
            if app::server_left_changed(&finished.paths) {
                // A killed mitigation pass left the server with a control's change.
                let Connection { client, runtime } =
                    args.connect.connect(&finished.session.server)?;
                let note = app::put_back_server(
                    &runtime,
                    client,
                    &finished.paths,
                    ProgressView::handle(args.quiet),
                )?;
                println!("server: {note}");
            }
            print!("{}", finished.summary());
            return Ok(super::bisect::exit_code(&finished.session));
        }
        Resumed::Pending(pending) => pending,
    };
    for note in &pending.notes {
        eprintln!("note: {note}");
    }
    let Connection { client, runtime } = args.connect.connect(&pending.session.server)?;
    // As `bisect` does at its first request: a server that does not answer is started with
    // the session's --restart-cmd, and waited for when either that or --wait-server is given,
    // before the skipped workflows are checked again or a run is settled.
    app::bring_up(
        &runtime,
        &client,
        &pending.session.options,
        &pending.paths.runs_dir,
        &ProgressView::handle(args.quiet),
        args.wait_server.is_some(),
    )?;
    let continuing = pending.take_server(&runtime, client)?;
    print_rechecked(&continuing);
    if !args.quiet && continuing.has_runs_left() {
        eprintln!(
            "resuming session {} on {}",
            continuing.session.session_id, continuing.session.server
        );
    }
    print_finished(continuing.drive(&runtime, ProgressView::handle(args.quiet))?)
}

/// Says what preflight found for each workflow it had skipped, checked again on resume.
fn print_rechecked(continuing: &app::Continuing) {
    for r in &continuing.rechecked {
        match &r.problems {
            None => eprintln!(
                "{}: preflight passes now (it was skipped); it is bisected in this session",
                r.workflow
            ),
            Some(problems) => {
                eprint!("{}", problems.render(&r.workflow));
                eprintln!(
                    "{}: still skipped (preflight failed again); once what is listed is installed, `{}` checks it again",
                    r.workflow,
                    app::recheck_command(&continuing.paths, &continuing.session)
                );
            }
        }
    }
}
