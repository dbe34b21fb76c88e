//! Pieces several subcommands share: connecting to the server (one client for every request),
//! where node definitions come from, reading workflows, printing errors.

pub use super::schedule::{parse_duration, parse_positive_duration};
use crate::error::exit;
use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::text::escape_controls;
use comfy_bisect_core::workflow::embedded::{Embedded, SourceFile};
use comfy_bisect_core::workflow::ui::{load_document, load_workflow_file, LoadAnyError, Loaded};
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_core::workflow::{read_document, Document};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The server used when neither `--server` nor `COMFY_BISECT_SERVER` names one and nothing
/// answers at any of [`DEFAULT_SERVERS`] (the first of them).
pub const DEFAULT_SERVER: &str = DEFAULT_SERVERS[0].0;

/// Where ComfyUI listens when nothing names the server, tried in order: a manual or portable
/// install's 8188, then ComfyUI Desktop's 8000 (the first free port from 8000).
pub const DEFAULT_SERVERS: [(&str, &str); 2] = [
    ("http://127.0.0.1:8188", "ComfyUI's default port"),
    ("http://127.0.0.1:8000", "ComfyUI Desktop's port"),
];

/// Test hook: a comma-separated list of URLs that replaces [`DEFAULT_SERVERS`] (the tests cannot
/// count on ports 8188 and 8000 being theirs). Undocumented for users.
const DEFAULT_SERVERS_ENV: &str = "COMFY_BISECT_DEFAULT_SERVERS";

/// How long one probe of a candidate may take (a loopback port answers or refuses at once).
const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// The first of the default servers where ComfyUI answers `GET /system_stats`, else the first
/// of them (its connection error then says where the tool looked). Prints which one answered
/// when it is not the first (the first is what users expect).
fn discover() -> String {
    let candidates: Vec<(String, String)> = match std::env::var(DEFAULT_SERVERS_ENV) {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|u| (u.trim().to_string(), "from the test hook".to_string()))
            .collect(),
        _ => DEFAULT_SERVERS
            .iter()
            .map(|(u, what)| (u.to_string(), what.to_string()))
            .collect(),
    };
    let Some(found) = candidates
        .iter()
        .position(|(url, _)| answers_as_comfyui(url))
    else {
        return candidates
            .first()
            .map_or_else(|| DEFAULT_SERVER.to_string(), |(url, _)| url.clone());
    };
    let (url, what) = &candidates[found];
    if found > 0 {
        let tried: Vec<&str> = candidates[..found]
            .iter()
            .map(|(u, _)| u.as_str())
            .collect();
        eprintln!(
            "comfy-bisect: no --server given; ComfyUI answered at {url} ({what}), not at {} \
             (pass --server URL or set COMFY_BISECT_SERVER to choose)",
            tried.join(", ")
        );
    }
    url.clone()
}

/// Whether ComfyUI answers at `url`: the client's own `GET /system_stats` (an answer that does not
/// read as ComfyUI's `system` and `devices` is no answer), with a short timeout.
fn answers_as_comfyui(url: &str) -> bool {
    let Ok(client) = Client::new(url, ExtraHeaders::new()) else {
        return false;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return false;
    };
    let client = client.with_request_timeout(PROBE_TIMEOUT);
    rt.block_on(async { tokio::time::timeout(PROBE_TIMEOUT, client.system_stats()).await })
        .is_ok_and(|answer| answer.is_ok())
}

/// `--server` of the commands that talk to a server. It may also come before the subcommand
/// (`comfy-bisect --server URL bisect …`) or from `COMFY_BISECT_SERVER`; commands that use no
/// server do not take it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServerArg {
    /// ComfyUI server URL (http/https) [default: COMFY_BISECT_SERVER, else the first of
    /// http://127.0.0.1:8188 and ComfyUI Desktop's http://127.0.0.1:8000 that answers].
    #[arg(long = "server", value_name = "URL", help_heading = super::heading::SERVER)]
    pub server: Option<String>,
}

impl ServerArg {
    /// This command's server: its own `--server`, else the one before the subcommand (or
    /// the environment), else the first of [`DEFAULT_SERVERS`] where ComfyUI answers, else
    /// the first of them, [`DEFAULT_SERVER`] (whose connection error then names both ports).
    pub fn resolve(&self, before: Option<&str>) -> String {
        match self.server.as_deref().or(before) {
            Some(server) => server.to_string(),
            None => discover(),
        }
    }

    /// Like [`ServerArg::resolve`] for a command given `--object-info` files: no server is
    /// looked for (the default stands in, unused), so it runs with none.
    pub fn resolve_offline(&self, before: Option<&str>) -> String {
        self.server
            .as_deref()
            .or(before)
            .unwrap_or(DEFAULT_SERVER)
            .to_string()
    }
}

/// How to reach the server, for every command that talks to it.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectArgs {
    /// Extra HTTP header for a reverse proxy, 'Name: value' (repeatable; also
    /// COMFY_BISECT_HEADERS, newline- or ';'-separated). Never written anywhere.
    #[arg(long = "header", value_name = "NAME: VALUE", help_heading = super::heading::SERVER, hide_short_help = true)]
    pub headers: Vec<String>,
    /// Longest wait for one HTTP answer from the server (e.g. 30s, 2m); a server that accepts
    /// the connection but never answers fails after this long.
    #[arg(long, default_value = "30s", value_name = "D", value_parser = parse_positive_duration, help_heading = super::heading::SERVER, hide_short_help = true)]
    pub request_timeout: Duration,
}

impl Default for ConnectArgs {
    fn default() -> Self {
        ConnectArgs {
            headers: Vec::new(),
            request_timeout: comfy_bisect_core::comfy::DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// A client for one server and the runtime that drives it.
pub struct Connection {
    /// The client (extra headers, URL credentials and the request timeout applied).
    pub client: Client,
    /// A runtime to block on the client's requests.
    pub runtime: tokio::runtime::Runtime,
}

/// A command failure: the message for stderr and the exit code. Every subcommand returns
/// `CliResult`; [`super::main`] prints the message (as `error: …`) in one place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// The exit code (see [`crate::error::exit`]).
    pub code: u8,
    /// What went wrong and how to fix it.
    pub message: String,
}

/// What a subcommand returns: the exit code when it ran to its end (which may itself say
/// "failed", e.g. an invalid workflow), or the error that stopped it.
pub(crate) type CliResult = Result<u8, CliError>;

impl CliError {
    /// A failure with this exit code.
    pub fn new(code: u8, message: impl std::fmt::Display) -> CliError {
        CliError {
            code,
            message: message.to_string(),
        }
    }

    /// A usage or input error (exit 2).
    pub fn usage(message: impl std::fmt::Display) -> CliError {
        CliError::new(exit::USAGE, message)
    }

    /// The checked thing is bad or the command could not finish (exit 1).
    pub fn failed(message: impl std::fmt::Display) -> CliError {
        CliError::new(exit::FAILED, message)
    }

    /// The server could not be reached (exit 3).
    pub fn unreachable(message: impl std::fmt::Display) -> CliError {
        CliError::new(exit::UNREACHABLE, message)
    }

    /// Prints the message on stderr and returns the exit code (for the dispatcher, and for a
    /// command that goes on after one part failed).
    pub fn report(self) -> u8 {
        print_error(&self.message);
        self.code
    }
}

impl From<comfy_bisect_core::app::AppError> for CliError {
    /// A façade failure with the exit code of its kind (input 2, failed 1, unreachable 3).
    fn from(e: comfy_bisect_core::app::AppError) -> CliError {
        use comfy_bisect_core::app::ErrorKind;
        let code = match e.kind {
            ErrorKind::Input => exit::USAGE,
            ErrorKind::Failed => exit::FAILED,
            ErrorKind::Unreachable => exit::UNREACHABLE,
        };
        CliError::new(code, e.message)
    }
}

/// Turns any displayable error into a [`CliError`] with the exit code the call site chooses.
pub(crate) trait OrExit<T> {
    /// The error as a usage/input error (exit 2).
    fn or_usage(self) -> Result<T, CliError>;
    /// The error as a failure (exit 1).
    fn or_failed(self) -> Result<T, CliError>;
}

impl<T, E: std::fmt::Display> OrExit<T> for Result<T, E> {
    fn or_usage(self) -> Result<T, CliError> {
        self.map_err(CliError::usage)
    }

    fn or_failed(self) -> Result<T, CliError> {
        self.map_err(CliError::failed)
    }
}

impl ConnectArgs {
    /// The client for `server` (headers from `--header` and the environment) and a runtime.
    /// Nothing is sent yet. Bad headers or URL: exit 2.
    pub fn connect(&self, server: &str) -> Result<Connection, CliError> {
        let client = self.client(server)?;
        let runtime = runtime()?;
        Ok(Connection { client, runtime })
    }

    /// The client alone, for a command that already has a runtime (`demo`). Bad headers or
    /// URL: exit 2.
    pub fn client(&self, server: &str) -> Result<Client, CliError> {
        let headers = ExtraHeaders::from_args_and_env(&self.headers).map_err(|e| {
            CliError::usage(format!(
                "{e} (in --header or {})",
                comfy_bisect_core::comfy::HEADERS_ENV
            ))
        })?;
        Ok(Client::new(server, headers)
            .map_err(CliError::usage)?
            .with_request_timeout(self.request_timeout))
    }
}

/// The runtime of the commands that talk to a server (the session driver blocks on it).
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))
}

/// Where the node definitions come from.
#[derive(Debug, Clone, clap::Args)]
pub struct DefsArgs {
    /// `/object_info` JSON file(s) instead of asking the server; repeat to add classes
    /// (e.g. core plus a custom-node pack).
    #[arg(long = "object-info", value_name = "FILE")]
    pub object_info: Vec<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// Why node definitions could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DefsSourceError {
    /// A file was unusable.
    #[error(transparent)]
    File(#[from] comfy_bisect_core::nodedefs::DefsError),
    /// The client could not be set up (bad `--header`, bad server URL).
    #[error("{}", .0.message)]
    Connect(CliError),
    /// The server could not be asked.
    #[error(
        "cannot get node definitions from {url}: {reason}. {advice} (or pass --object-info FILE)"
    )]
    Server {
        /// The URL asked (without credentials).
        url: String,
        /// What failed.
        reason: String,
        /// What to do about it ([`comfy_bisect_core::comfy::ClientError::advice`]).
        advice: String,
    },
}

impl From<DefsSourceError> for CliError {
    fn from(e: DefsSourceError) -> CliError {
        match e {
            DefsSourceError::Server { .. } => CliError::unreachable(e),
            DefsSourceError::Connect(c) => c,
            DefsSourceError::File(_) => CliError::usage(e),
        }
    }
}

impl DefsArgs {
    /// Like [`DefsArgs::load`], with the exit code for the command line: 3 when the server
    /// could not be asked, 2 when a file, a header or the URL is unusable.
    pub(crate) fn load_cli(&self, server: &str) -> Result<NodeDefs, CliError> {
        self.load(server).map_err(CliError::from)
    }

    /// Loads the definitions from the files, or from `GET {server}/object_info` (with the
    /// `--header` values and the request timeout).
    pub fn load(&self, server: &str) -> Result<NodeDefs, DefsSourceError> {
        if !self.object_info.is_empty() {
            return Ok(NodeDefs::load_files(&self.object_info)?);
        }
        let connection = self
            .connect
            .connect(server)
            .map_err(DefsSourceError::Connect)?;
        fetch_object_info(&connection)
    }
}

/// `GET /object_info` through the connection's client.
pub(crate) fn fetch_object_info(connection: &Connection) -> Result<NodeDefs, DefsSourceError> {
    let client = &connection.client;
    let err = |reason: String, advice: &str| DefsSourceError::Server {
        url: format!("{}/object_info", client.server_url()),
        reason,
        advice: advice.to_string(),
    };
    let value = connection
        .runtime
        .block_on(client.object_info(None))
        .map_err(|e| err(e.to_string(), &e.advice()))?;
    NodeDefs::from_value(&value).ok_or_else(|| {
        err(
            "the answer is not an object of node classes".into(),
            "Is --server the address of ComfyUI itself?",
        )
    })
}

/// Reads a workflow file of any format (API, POST /prompt body, or UI, which is converted with
/// `defs` exactly as the ComfyUI frontend would; or a file ComfyUI saved with the workflow
/// inside).
pub(crate) fn read_workflow(path: &Path, defs: &NodeDefs) -> Result<Workflow, LoadAnyError> {
    Ok(read_loaded(path, defs)?.workflow)
}

/// Like [`read_workflow`], keeping the UI document and its conversion (provenance, warnings)
/// for commands that write variants back as UI workflows. Conversion warnings, and which text
/// of a saved file is used, go to stderr.
pub(crate) fn read_loaded(path: &Path, defs: &NodeDefs) -> Result<Loaded, LoadAnyError> {
    let loaded = load_workflow_file(path, defs)?;
    noted(path, loaded)
}

/// Prints a loaded workflow's conversion warnings and where in a saved file it came from.
fn noted(path: &Path, loaded: Loaded) -> Result<Loaded, LoadAnyError> {
    if let Some(source) = &loaded.source {
        note_source(path, source);
    }
    if let Some((_, converted)) = &loaded.ui {
        for w in &converted.warnings {
            eprintln!("warning: {}: {w}", path.display());
        }
    }
    Ok(loaded)
}

/// Says on stderr which text of an image, audio or video file ComfyUI saved is used.
pub(crate) fn note_source(path: &Path, source: &SourceFile) {
    let used = match (source.embedded, source.both) {
        (Embedded::Workflow, true) => {
            "the UI workflow (`workflow`) saved in it; it also holds the API prompt".to_string()
        }
        (Embedded::Workflow, false) => "the UI workflow (`workflow`) saved in it".to_string(),
        (Embedded::Prompt, _) => {
            "the API prompt (`prompt`) saved in it; it holds no UI workflow, so variants are written in the API format only".to_string()
        }
    };
    eprintln!(
        "note: {} ({} saved by ComfyUI): using {used}",
        path.display(),
        source.container
    );
}

/// Reads a workflow file of any format, asking for node definitions only when it is a UI
/// workflow (API files need none): `defs` is called at most once.
pub(crate) fn read_workflow_with(
    path: &Path,
    defs: impl FnOnce() -> Result<NodeDefs, String>,
) -> Result<Workflow, String> {
    Ok(read_loaded_with(path, defs)?.workflow)
}

/// Like [`read_workflow_with`], keeping the UI document and its conversion when the file is a
/// UI workflow (for writing variants back as UI workflows).
pub(crate) fn read_loaded_with(
    path: &Path,
    defs: impl FnOnce() -> Result<NodeDefs, String>,
) -> Result<Loaded, String> {
    let document = read_document(path).map_err(|e| e.to_string())?;
    load_read(path, document, defs)
}

/// Loads a document [`read_document`] read from `path` (so that a command can refuse bad input
/// before it waits for a server), asking for node definitions only for a UI workflow.
pub(crate) fn load_read(
    path: &Path,
    document: Document,
    defs: impl FnOnce() -> Result<NodeDefs, String>,
) -> Result<Loaded, String> {
    let defs = if document.is_ui() {
        defs()?
    } else {
        NodeDefs::default()
    };
    let loaded = load_document(document, path, &defs).map_err(|e| e.to_string())?;
    noted(path, loaded).map_err(|e| e.to_string())
}

/// Writes command output to stdout (the commands' `print!`/`println!`), its control and
/// bidi characters made visible ([`escape_controls`]: server text never reaches the terminal
/// raw; JSON output stays valid). A reader that went away (`| head`, a closed pipe) ends the
/// process at once and quietly with exit code 0: the output was wanted only up to there. Any
/// other write error ends it with a message on stderr and exit code 1 (std's own `print!`
/// would panic with exit code 101 in both cases).
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let text = std::fmt::format(args);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out
        .write_all(escape_controls(&text).as_bytes())
        .and_then(|()| out.flush())
    {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(i32::from(exit::OK));
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(i32::from(exit::FAILED));
    }
}

/// Writes to stderr (the commands' `eprint!`/`eprintln!`), control and bidi characters made
/// visible like [`write_stdout`]'s. A failed write is ignored (there is nowhere to say so).
pub(crate) fn write_stderr(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let text = std::fmt::format(args);
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(escape_controls(&text).as_bytes());
}

/// Prints an error for the user on stderr.
pub(crate) fn print_error(error: &dyn std::fmt::Display) {
    eprintln!("error: {error}");
}

/// The value parser of `--order` and `--keep`: the increment names (offered to completion),
/// each turned into its [`Increment`](comfy_bisect_core::ladder::Increment).
pub(crate) fn increment_parser(
) -> impl clap::builder::TypedValueParser<Value = comfy_bisect_core::ladder::Increment> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(
        comfy_bisect_core::ladder::Increment::LADDER
            .map(comfy_bisect_core::ladder::Increment::name),
    )
    .map(|s| {
        s.parse::<comfy_bisect_core::ladder::Increment>()
            .expect("a listed increment name")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server that answers one request with `answer`; its URL.
    fn answering(answer: &'static str) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        url
    }

    #[test]
    fn a_system_stats_answer_is_told_from_other_servers() {
        let ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n\
                  {\"system\": {\"os\": \"posix\"}, \"devices\": []}";
        assert!(answers_as_comfyui(&answering(ok)));
        // Another web server on the port (a dev server on 8000), an error, no body.
        let html =
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html></html>";
        assert!(!answers_as_comfyui(&answering(html)));
        let other_json = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"status\": \"ok\"}";
        assert!(!answers_as_comfyui(&answering(other_json)));
        let missing =
            "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n{\"system\": {}, \"devices\": []}";
        assert!(!answers_as_comfyui(&answering(missing)));
        assert!(!answers_as_comfyui(&answering("")));
    }

    #[test]
    fn nothing_listening_is_no_answer() {
        // A port that was free a moment ago: the probe is refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(!answers_as_comfyui(&format!("http://127.0.0.1:{port}")));
        assert!(!answers_as_comfyui("https://127.0.0.1:1"));
    }

    #[test]
    fn node_definition_failures_keep_their_exit_codes() {
        let server = DefsSourceError::Server {
            url: "http://127.0.0.1:8188/object_info".into(),
            reason: "connection refused".into(),
            advice: "Is ComfyUI running there?".into(),
        };
        let e = CliError::from(server);
        assert_eq!(e.code, exit::UNREACHABLE);
        assert!(e
            .message
            .starts_with("cannot get node definitions from http://127.0.0.1:8188"));
        let connect = DefsSourceError::Connect(CliError::usage("bad header"));
        assert_eq!(CliError::from(connect), CliError::usage("bad header"));
    }

    #[test]
    fn or_exit_chooses_the_code_and_keeps_the_message() {
        let failed: Result<(), String> = Err("no".into());
        assert_eq!(
            failed.clone().or_usage(),
            Err(CliError::new(exit::USAGE, "no"))
        );
        assert_eq!(
            failed.clone().or_failed(),
            Err(CliError::new(exit::FAILED, "no"))
        );
        assert_eq!(Ok::<u8, String>(7).or_usage(), Ok(7));
    }

    #[test]
    fn facade_errors_keep_their_exit_codes() {
        use comfy_bisect_core::app::{AppError, ErrorKind};
        for (kind, code) in [
            (ErrorKind::Input, exit::USAGE),
            (ErrorKind::Failed, exit::FAILED),
            (ErrorKind::Unreachable, exit::UNREACHABLE),
        ] {
            let e = AppError {
                kind,
                message: "no".into(),
            };
            assert_eq!(CliError::from(e), CliError::new(code, "no"));
        }
    }
}
