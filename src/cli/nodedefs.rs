//! `comfy-bisect nodedefs save FILE`: the server's node definitions (`GET /object_info`) kept in
//! a file, so that `plan`, `validate`, `hash` and `convert` work later with no server at all
//! (`--object-info FILE`; with it they ask no server, not even to find one).

use super::common::{CliError, CliResult, ConnectArgs, ServerArg};
use crate::error::exit;
use comfy_bisect_core::nodedefs::NodeDefs;
use std::io::Write;
use std::path::{Path, PathBuf};

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
    let defs = NodeDefs::from_value(&value).ok_or_else(|| {
        CliError::new(
            exit::UNREACHABLE,
            format!("{url} answered something that is not an object of node classes: is --server the address of ComfyUI itself?"),
        )
    })?;
    let bytes = serde_json::to_vec(&value).expect("JSON values serialize");
    write_replacing(&args.file, &bytes).map_err(|e| {
        CliError::usage(format!(
            "cannot write {shown}: {e} (is its folder there and writable?)"
        ))
    })?;
    println!(
        "saved {} node classes from {url} to {shown} ({} bytes); offline: comfy-bisect plan WORKFLOW --object-info {shown}",
        defs.len(),
        bytes.len()
    );
    Ok(exit::OK)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`, so an
/// interrupted save never leaves half a file under the name.
fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("give a file name"))?
        .to_string_lossy()
        .into_owned();
    let tmp = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}
