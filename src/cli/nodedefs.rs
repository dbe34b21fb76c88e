//! `comfy-bisect nodedefs save FILE`: the server's node definitions (`GET /object_info`) kept in
//! a file, so that `plan`, `validate`, `hash` and `convert` work later with no server at all
//! (`--object-info FILE`; with it they ask no server, not even to find one).

use super::common::{CliError, CliResult, ConnectArgs, ServerArg};
use crate::error::exit;
use comfy_bisect_core::app;
use std::path::PathBuf;

/// Arguments of `nodedefs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do with the node definitions.
    #[command(subcommand)]
    pub action: Action,
}

/// The `nodedefs` actions.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Save the server's node definitions (`GET /object_info`, as it answers) to FILE, for
    /// `--object-info FILE` offline.
    Save(SaveArgs),
}

/// Arguments of `nodedefs save`.
#[derive(Debug, clap::Args)]
pub struct SaveArgs {
    #[command(flatten)]
    pub target: ServerArg,
    /// The JSON file to write.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Replace FILE when it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// Runs `nodedefs`: exit 0 saved, 2 bad FILE (exists without --force, unwritable folder),
/// 3 the server could not be asked.
pub fn run(server: String, args: Args) -> CliResult {
    match args.action {
        Action::Save(save) => run_save(&server, &save),
    }
}

fn run_save(server: &str, args: &SaveArgs) -> CliResult {
    let shown = args.file.display();
    if !args.force && std::fs::symlink_metadata(&args.file).is_ok() {
        return Err(CliError::usage(format!(
            "{shown} exists; --force replaces it (or name another file)"
        )));
    }
    let connection = args.connect.connect(server)?;
    let client = &connection.client;
    let url = format!("{}/object_info", client.server_url());
    let value = connection
        .runtime
        .block_on(client.object_info(None))
        .map_err(|e| {
            CliError::new(
                exit::UNREACHABLE,
                format!(
                    "cannot get node definitions from {url}: {e}. {}",
                    e.advice()
                ),
            )
        })?;
    let saved = app::save_node_defs(&args.file, &value)?;
    println!(
        "saved {} node classes from {url} to {shown} ({} bytes); offline: comfy-bisect plan WORKFLOW --object-info {shown}",
        saved.classes, saved.bytes
    );
    Ok(exit::OK)
}
