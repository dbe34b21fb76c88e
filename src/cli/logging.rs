//! The log output on stderr: `-v` levels or `COMFY_BISECT_LOG`, with the network libraries
//! capped at `debug` whatever is asked.
//!
//! At `trace` the WebSocket library logs the whole handshake request (the `Authorization`
//! header with the URL's credentials and every `--header` value), and the HTTP and TLS
//! libraries log connection internals. Their trace output is therefore never shown: the cap
//! is a second filter on the one output layer, so no `COMFY_BISECT_LOG` directive can lift it.

use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The dependencies whose trace output can hold request headers or URLs (log targets are
/// module paths; a target matches every module under it).
pub const CAPPED_TARGETS: [&str; 9] = [
    "tungstenite",
    "tokio_tungstenite",
    "hyper",
    "hyper_util",
    "reqwest",
    "rustls",
    "tokio_rustls",
    "h2",
    "http",
];

/// The highest level the [`CAPPED_TARGETS`] may log at.
pub const CAPPED_LEVEL: LevelFilter = LevelFilter::DEBUG;

/// The cap: the network libraries at [`CAPPED_LEVEL`], everything else unrestricted (the
/// user's filter decides).
pub fn dependency_cap() -> Targets {
    CAPPED_TARGETS.iter().fold(
        Targets::new().with_default(LevelFilter::TRACE),
        |t, target| t.with_target(*target, CAPPED_LEVEL),
    )
}

/// Installs the stderr logger: `COMFY_BISECT_LOG` when set, else the level of `-v` count,
/// always under [`dependency_cap`].
pub fn init(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter =
        EnvFilter::try_from_env("COMFY_BISECT_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(|| LogWriter)
        .with_filter(filter)
        .with_filter(dependency_cap());
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// Stderr for the log lines, with the control and bidi characters of logged server text that
/// `tracing` leaves as they are (NUL, a lone CR, U+202E…) made visible
/// ([`comfy_bisect_core::text::escape_log_line`]). The formatter writes each event in one call.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let safe = comfy_bisect_core::text::escape_log_line(&text);
        std::io::stderr().lock().write_all(safe.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}
