//! `comfy-bisect bisect WORKFLOW...`: preflight, then bisect each workflow's ladder on the server,
//! journaling everything under the runs folder (the work is [`comfy_bisect_core::app`]'s; the
//! options it shares with `demo` and `plan` are in `session_args`). Also the printing `demo`
//! and `resume` share (the session line, the summary, the exit code).

use super::common::{
    fetch_object_info, load_read, print_error, CliError, CliResult, Connection, OrExit,
};
use super::session_args::{LadderArgs, SessionArgs};
use crate::cli::progress::ProgressView;
use crate::error::exit;
use comfy_bisect_core::app::{self, Finished, MitigateRequest, StartOptions, Started, Target};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::Client;
use comfy_bisect_core::session::journal::{SessionFile, SessionState, StopReason, Verdict};
use comfy_bisect_core::session::prepare::LadderConfig;
use comfy_bisect_core::session::setup::unique_name;
use comfy_bisect_core::workflow::read_document;
use std::path::PathBuf;

/// Arguments of `bisect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Failing workflow(s): API format, a POST /prompt body, a UI workflow (converted with the
    /// server's node definitions; every variant is also written as a UI workflow), or a PNG,
    /// WebP, audio or video file ComfyUI saved with the workflow inside. Several run one after
    /// another.
    #[arg(required = true)]
    pub workflows: Vec<PathBuf>,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub ladder: LadderArgs,
    #[command(flatten)]
    pub target: super::common::ServerArg,
    /// After the verdict, in the same session, try the single-change mitigations for the failing
    /// stage on the target (what `mitigate SESSION` does; docs/mitigations.md).
    #[arg(long, help_heading = super::heading::MITIGATION)]
    pub mitigate: bool,
    #[command(flatten)]
    pub mitigations: super::mitigate::MitigateArgs,
}

/// `bisect --help`'s examples (not in `-h`).
pub const EXAMPLES: &str = "\
Examples:
  comfy-bisect bisect my_workflow.json
      find the first increment that fails, on the ComfyUI at 127.0.0.1:8188 (or Desktop's 8000)
  comfy-bisect bisect queue/*.json --deadline 07:00 --restart-cmd ./restart-comfyui.sh
      a night's queue: ComfyUI restarted after a crash, no run started after 07:00
  comfy-bisect bisect wan.json --strict --mitigate
      memory pressure counts as a failure; then try the mitigations on the failing step";

/// The exit code of a session (README's table): 0 first failure found, 4 could not reproduce,
/// 5 memory pressure only, 6 stopped before a verdict (deadline, error, environment change),
/// 130 interrupted, 3 server lost, 1 otherwise (preflight problems, flaky, inconclusive).
pub fn exit_code(session: &SessionFile) -> u8 {
    match &session.state {
        SessionState::Done => verdicts_code(session),
        SessionState::Stopped { reason, .. } => match reason {
            StopReason::Interrupted => exit::INTERRUPTED,
            StopReason::ServerLost => exit::UNREACHABLE,
            StopReason::Preflight => exit::FAILED,
            StopReason::Deadline | StopReason::Error | StopReason::EnvironmentChanged => {
                exit::STOPPED
            }
        },
        _ => exit::FAILED,
    }
}

/// The status of a session that reached its verdicts: 0 when each workflow's first failure
/// was found; else, of its workflows, the first of 1 (flaky, inconclusive, preflight failed),
/// 5 (memory pressure only), 4 (could not reproduce) that one of them has.
fn verdicts_code(session: &SessionFile) -> u8 {
    let code = |job: &comfy_bisect_core::session::journal::WorkflowJob| match &job.verdict {
        Some(Verdict::FirstFailure { .. } | Verdict::MinimalFails { .. }) => exit::OK,
        Some(Verdict::CouldNotReproduce { .. }) if job.first_degraded_pass().is_some() => {
            exit::PRESSURE_ONLY
        }
        Some(Verdict::CouldNotReproduce { .. }) => exit::NOT_REPRODUCED,
        Some(Verdict::Checked { .. }) => exit::OK,
        _ => exit::FAILED,
    };
    let codes: Vec<u8> = session.workflows.iter().map(code).collect();
    [exit::FAILED, exit::PRESSURE_ONLY, exit::NOT_REPRODUCED]
        .into_iter()
        .find(|c| codes.contains(c))
        .unwrap_or(exit::OK)
}

/// Runs `bisect`.
pub fn run(server: String, args: Args) -> CliResult {
    let server = server.as_str();
    let options = args.session.options(&args.ladder).or_usage()?;
    let catalog = args.ladder.catalog().or_usage()?;
    // Bad input is said before waiting for (or starting) a server.
    let documents = args
        .workflows
        .iter()
        .map(|path| read_document(path).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .or_usage()?;
    // One client for every request (headers, URL credentials, request timeout).
    let connection = args.session.connect.connect(server)?;
    // The first connection too waits for (and with --restart-cmd starts) the server.
    app::bring_up(
        &connection.runtime,
        &connection.client,
        &options,
        &args.session.runs_dir,
        &ProgressView::handle(args.session.quiet),
        args.session.wait_server.is_some(),
    )?;
    let mut targets = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (path, document) in args.workflows.iter().zip(documents) {
        // UI workflows are converted with the server's node definitions.
        let loaded = load_read(path, document, || {
            fetch_object_info(&connection).map_err(|e| e.to_string())
        })
        .or_usage()?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = unique_name(&stem, &names);
        names.push(name.clone());
        targets.push(Target {
            name,
            source: path.display().to_string(),
            source_file: loaded.source,
            workflow: loaded.workflow,
            ui: loaded.ui,
        });
    }
    let start = StartOptions {
        runs_dir: args.session.runs_dir.clone(),
        session: options,
        ladder: LadderConfig {
            catalog,
            options: args.ladder.plan_options(),
            controls: args.session.controls,
        },
    };
    let Connection { client, runtime } = connection;
    let mitigate = args.mitigate.then(|| MitigateRequest {
        runs_dir: args.session.runs_dir.clone(),
        session: String::new(),
        max: args.mitigations.max_mitigations,
        launch_cmd: args.mitigations.launch_cmd.clone(),
        catalog: args.ladder.catalog().unwrap_or_else(|_| Catalog::builtin()),
        allow_shared_server: args.session.allow_shared_server,
        server: None,
    });
    if mitigate.is_none()
        && (args.mitigations.max_mitigations.is_some()
            || args.mitigations.launch_cmd.is_some()
            || args.mitigations.apply.is_some())
    {
        return Err(CliError::usage(
            "--max-mitigations, --launch-cmd and --apply go with --mitigate (or `comfy-bisect mitigate SESSION`)",
        ));
    }
    if let Some(out) = &args.mitigations.apply {
        super::mitigate::check_apply(
            out,
            &args.session.runs_dir,
            &args.workflows,
            args.mitigations.force,
        )?;
    }
    let mitigate = mitigate.map(|r| (r, args.mitigations.apply.clone(), args.mitigations.force));
    run_session_then(
        &runtime,
        client,
        start,
        targets,
        args.session.quiet,
        mitigate,
    )
}

/// Starts a session, prints what preflight found or the session line, drives it and prints
/// the summary; shared by `bisect` and `demo`.
pub(crate) fn run_session(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: StartOptions,
    targets: Vec<Target>,
    quiet: bool,
) -> CliResult {
    run_session_then(rt, client, options, targets, quiet, None)
}

/// [`run_session`], then (`bisect --mitigate`) the mitigations of the same session once it has
/// ended: the exit status is then the mitigations' (0 when a control passed).
fn run_session_then(
    rt: &tokio::runtime::Runtime,
    client: Client,
    options: StartOptions,
    targets: Vec<Target>,
    quiet: bool,
    mitigate: Option<(MitigateRequest, Option<PathBuf>, bool)>,
) -> CliResult {
    let mitigate_client = client.clone();
    let ready = match app::start(rt, client, options, targets)? {
        Started::Ready(ready) => {
            // Skipped workflows are said first; the queue goes on with the others (there is
            // at least one: else the session stopped at preflight).
            let others = ready.session.workflows.len() - ready.skipped.len();
            let rest = match others {
                1 => "the other workflow runs".to_string(),
                n => format!("the {n} other workflows run"),
            };
            let again = app::recheck_command(&ready.paths, &ready.session);
            for (name, problems) in &ready.skipped {
                eprint!("{}", problems.render(name));
                eprintln!(
                    "{name}: skipped (preflight failed); {rest}; once what is listed is installed, `{again}` checks it again"
                );
            }
            *ready
        }
        Started::Problems(stopped) => {
            for (name, problems) in &stopped.problems {
                eprint!("{}", problems.render(name));
            }
            if let Some(e) = &stopped.save_error {
                print_error(e);
            }
            print!("{}", app::summary(&stopped.paths, &stopped.session));
            return Ok(exit::FAILED);
        }
    };
    if !quiet {
        let steps: Vec<String> = ready
            .session
            .workflows
            .iter()
            .map(|w| format!("{} (steps 0–{})", w.name, w.steps.len().saturating_sub(1)))
            .collect();
        eprintln!(
            "session {} in {}: {}",
            ready.session.session_id,
            ready.paths.dir.display(),
            steps.join(", ")
        );
    }
    let finished = ready.drive(rt, ProgressView::handle(quiet))?;
    let Some((mut request, apply, force)) = mitigate else {
        return print_finished(finished);
    };
    if !matches!(finished.session.state, SessionState::Done) {
        eprintln!("the session did not end: no mitigations (`comfy-bisect mitigate SESSION` runs them once it has)");
        return print_finished(finished);
    }
    print!("{}", finished.summary());
    request.session = finished.paths.dir.display().to_string();
    super::mitigate::print_mitigated(
        app::mitigate(rt, mitigate_client, request, ProgressView::handle(quiet))?,
        apply.as_deref(),
        force,
    )
}

/// Prints a finished session's summary; its exit code.
pub(crate) fn print_finished(finished: Finished) -> CliResult {
    print!("{}", finished.summary());
    let code = exit_code(&finished.session);
    if let Some(resume) = app::resume_command(&finished.paths, &finished.session) {
        eprintln!("exit status {code}; to continue: {resume}");
    }
    Ok(code)
}
