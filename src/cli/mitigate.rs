//! `comfy-bisect mitigate SESSION`: after a session's verdict, run the catalogue's single-change
//! controls for the failing stage on the target, one run each, and judge them
//! (docs/mitigations.md). `bisect --mitigate` does the same at the end of a bisect. Resumable:
//! run it again and only what has not run yet runs (the run in flight is settled first).

use super::common::{CliError, CliResult, ConnectArgs, Connection};
use crate::cli::progress::ProgressView;
use crate::error::exit;
use comfy_bisect_core::app::{self, MitigateRequest, Mitigated};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::controls::MitigateEnd;
use std::path::{Path, PathBuf};

/// The options `mitigate` and `bisect --mitigate` share.
#[derive(Debug, Clone, clap::Args)]
pub struct MitigateArgs {
    /// Run at most N controls per workflow (the matrix's "first" ones come first); the others
    /// are listed as not run.
    #[arg(long, value_name = "N", help_heading = super::heading::MITIGATION, hide_short_help = true)]
    pub max_mitigations: Option<usize>,
    /// How to start the server with other launch flags, for the server controls
    /// (`--reserve-vram 2`, `--disable-pinned-memory`…): a shell command where `{args}` becomes
    /// the memory flags the server runs with plus the control's, e.g.
    /// 'cd ~/ComfyUI && python main.py --listen --port 8188 {args}'. The server must run on this
    /// machine (it is stopped through its process) and is put back as it was afterwards.
    /// Without it, server controls are listed as "not run: needs --launch-cmd".
    #[arg(long, value_name = "TEMPLATE", value_parser = parse_launch_cmd, help_heading = super::heading::MITIGATION, hide_short_help = true)]
    pub launch_cmd: Option<String>,
    /// Write the first passing graph control's workflow to FILE, to load in ComfyUI: a UI
    /// workflow when the input was one (and the change has a UI form), else the API prompt.
    /// Not inside the runs folder, not the input workflow, not a symbolic link; an existing
    /// FILE only with --force. Exit 7 when it cannot be written.
    #[arg(long, value_name = "FILE", help_heading = super::heading::MITIGATION, hide_short_help = true)]
    pub apply: Option<PathBuf>,
    /// With --apply: replace FILE when it exists (keeping its permissions).
    #[arg(long, requires = "apply", help_heading = super::heading::MITIGATION, hide_short_help = true)]
    pub force: bool,
}

/// Where `--apply` may write: checked before the pass (so no GPU time is spent for a refused
/// target) and again before writing. Refused, as a usage error: a path inside the runs folder
/// (the journals live there), one of the input workflows, a symbolic link (never followed), a
/// folder, and an existing file without `--force`. The path to write (its folder resolved).
pub(crate) fn check_apply(
    out: &Path,
    runs_dir: &Path,
    inputs: &[PathBuf],
    force: bool,
) -> Result<PathBuf, CliError> {
    let refuse = |why: String| CliError::usage(format!("--apply {}: {why}", out.display()));
    let name = out
        .file_name()
        .ok_or_else(|| refuse("give a file name".into()))?;
    let folder = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let folder = folder.canonicalize().map_err(|e| {
        refuse(format!(
            "its folder {} cannot be used: {e}",
            folder.display()
        ))
    })?;
    let target = folder.join(name);
    if let Ok(runs) = runs_dir.canonicalize() {
        if target.starts_with(&runs) {
            return Err(refuse(format!(
                "it is inside the runs folder {}, where the sessions' journals are; write it elsewhere",
                runs.display()
            )));
        }
    }
    let existing = std::fs::symlink_metadata(&target);
    let resolved = target.canonicalize().unwrap_or_else(|_| target.clone());
    for input in inputs {
        if input
            .canonicalize()
            .is_ok_and(|i| i == target || i == resolved)
        {
            return Err(refuse(
                "it is the input workflow itself; write the mitigated workflow beside it".into(),
            ));
        }
    }
    match existing {
        Ok(md) if md.file_type().is_symlink() => Err(refuse(
            "it is a symbolic link, which --apply does not follow; name the file itself or another one"
                .into(),
        )),
        Ok(md) if md.is_dir() => Err(refuse("it is a folder; give a file name".into())),
        Ok(_) if !force => Err(refuse(
            "the file exists; --force replaces it (or name another file)".into(),
        )),
        _ => Ok(target),
    }
}

/// Writes `bytes` to `target` (checked by [`check_apply`]) without following a link: a new
/// file is created exclusively; with `force` a temporary file beside it replaces it, with the
/// old file's permissions. Exit 7 when it cannot be written.
fn write_apply(target: &Path, bytes: &[u8], force: bool) -> Result<(), CliError> {
    use std::io::Write;
    let failed = |e: std::io::Error| {
        CliError::new(
            exit::WRITE_FAILED,
            format!("--apply: cannot write {}: {e}", target.display()),
        )
    };
    let folder = target.parent().unwrap_or(Path::new("."));
    let old = std::fs::symlink_metadata(target).ok();
    if old.is_none() || !force {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(target)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    CliError::usage(format!(
                        "--apply {}: the file exists; --force replaces it",
                        target.display()
                    ))
                } else {
                    failed(e)
                }
            })?;
        return file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(failed);
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(bytes)?;
        if let Some(md) = old.filter(|m| m.is_file()) {
            file.set_permissions(md.permissions())?;
        }
        file.sync_all()?;
        // Replaces the name itself: a link put there meanwhile is replaced, not followed.
        std::fs::rename(&tmp, target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(failed)
}

fn parse_launch_cmd(s: &str) -> Result<String, String> {
    if s.contains("{args}") {
        Ok(s.to_string())
    } else {
        Err(format!(
            "'{s}' has no {{args}}: write where the launch flags go, e.g. 'python main.py --port 8188 {{args}}'"
        ))
    }
}

/// Arguments of `mitigate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (or a unique prefix of it), or the session folder.
    pub session: String,
    /// Where sessions are written.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    #[command(flatten)]
    pub mitigate: MitigateArgs,
    /// TOML file declaring roles of custom node classes (see docs/ladder.md).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Run even when another session is using the same server.
    #[arg(long)]
    pub allow_shared_server: bool,
    /// Run on this server instead of the session's (a port that changed after a reboot): the
    /// session moves to it, as with `resume --server`; the move is recorded in the journal and
    /// in mitigations.json, and named in the report.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// `-q`, given before or after the subcommand (a global flag of [`super::Cli`]).
    #[arg(skip)]
    pub quiet: bool,
}

/// Runs `mitigate`; `before` is a `--server` given before the subcommand (its own wins).
pub fn run(before: Option<String>, args: Args) -> CliResult {
    let catalog = match &args.catalog {
        Some(path) => Catalog::load_file(path)
            .map(|user| Catalog::builtin().with_user(user))
            .map_err(|e| CliError::usage(e.to_string()))?,
        None => Catalog::builtin(),
    };
    let paths = app::find_session(&args.runs_dir, &args.session).map_err(CliError::usage)?;
    let session = comfy_bisect_core::session::SessionFile::load(&paths)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let inputs: Vec<PathBuf> = session
        .workflows
        .iter()
        .map(|w| PathBuf::from(&w.source))
        .collect();
    if let Some(out) = &args.mitigate.apply {
        check_apply(out, &paths.runs_dir, &inputs, args.mitigate.force)?;
    }
    let server = args.server.clone().or(before);
    let Connection { client, runtime } = args
        .connect
        .connect(server.as_deref().unwrap_or(&session.server))?;
    let request = MitigateRequest {
        runs_dir: args.runs_dir.clone(),
        session: args.session.clone(),
        max: args.mitigate.max_mitigations,
        launch_cmd: args.mitigate.launch_cmd.clone(),
        catalog,
        allow_shared_server: args.allow_shared_server,
        server,
    };
    print_mitigated(
        app::mitigate(&runtime, client, request, ProgressView::handle(args.quiet))?,
        args.mitigate.apply.as_deref(),
        args.mitigate.force,
    )
}

/// Prints a mitigation pass's summary; exit 0 when a control passed, 1 when none did, 130
/// when it was interrupted (4 when `--apply` could not write its file).
pub(crate) fn print_mitigated(m: Mitigated, apply: Option<&Path>, force: bool) -> CliResult {
    print!("{}", m.summary());
    if let Some(out) = apply {
        apply_to(&m, out, force)?;
    }
    if let MitigateEnd::Stopped(why) = &m.end {
        if why.starts_with("interrupted") {
            return Ok(exit::INTERRUPTED);
        }
    }
    Ok(if m.any_passed() {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// Writes the first passing graph control's workflow to `out` (`--apply`).
fn apply_to(m: &Mitigated, out: &Path, force: bool) -> Result<(), CliError> {
    let inputs: Vec<PathBuf> = m
        .session
        .workflows
        .iter()
        .map(|w| PathBuf::from(&w.source))
        .collect();
    let target = check_apply(out, &m.paths.runs_dir, &inputs, force)?;
    let passing = m
        .mitigations
        .workflows
        .iter()
        .flat_map(|w| w.controls.iter().map(move |c| (w, c)))
        .filter(|(_, c)| c.judged.as_ref().is_some_and(|j| j.passed));
    let mut server_only = None;
    for (w, c) in passing {
        let Some(api) = &c.file else {
            server_only.get_or_insert_with(|| {
                format!("{} ({}: start ComfyUI with it)", c.control, c.change)
            });
            continue;
        };
        let source_is_ui = m
            .session
            .workflows
            .iter()
            .find(|j| j.name == w.workflow)
            .and_then(|j| j.steps.last())
            .is_some_and(|s| {
                m.paths
                    .dir
                    .join(comfy_bisect_core::session::setup::ui_companion(&s.file))
                    .is_file()
            });
        let (from, what) = match (&c.ui_file, source_is_ui) {
            (Some(ui), true) => (ui, "UI workflow"),
            (None, true) => {
                eprintln!(
                    "note: {}'s change has no UI form here; writing the API prompt instead",
                    c.control
                );
                (api, "API prompt")
            }
            _ => (api, "API prompt"),
        };
        let bytes = std::fs::read(m.paths.dir.join(from)).map_err(|e| {
            CliError::new(
                exit::FAILED,
                format!(
                    "--apply: cannot read {}: {e}",
                    m.paths.dir.join(from).display()
                ),
            )
        })?;
        write_apply(&target, &bytes, force)?;
        println!(
            "applied {} ({}) to {}: {what}",
            c.control,
            w.workflow,
            out.display()
        );
        return Ok(());
    }
    Err(CliError::new(
        exit::FAILED,
        match server_only {
            Some(s) => format!(
                "--apply: the passing control is a server launch change, not a workflow: {s}"
            ),
            None => "--apply: no control passed, so there is no workflow to write".into(),
        },
    ))
}
