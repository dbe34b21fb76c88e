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
        .with_writer(std::io::stderr)
        .with_filter(filter)
        .with_filter(dependency_cap());
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
