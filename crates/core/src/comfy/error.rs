//! The client's one error type, shared by its HTTP side (`comfy/client.rs`) and its WebSocket
//! side (`comfy/ws.rs`).

/// What went wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server URL is not usable.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// Connection refused, DNS failure, TLS failure, timeout, reset: no HTTP answer.
    #[error("cannot reach ComfyUI at {url} ({detail})")]
    Unreachable {
        /// The URL tried (without credentials).
        url: String,
        /// The transport error.
        detail: String,
    },
    /// An HTTP answer with an unexpected status.
    #[error("{method} {url} answered HTTP {status}: {body}")]
    Status {
        /// Request method.
        method: String,
        /// The URL (without credentials).
        url: String,
        /// HTTP status.
        status: u16,
        /// Start of the body.
        body: String,
    },
    /// A 2xx answer whose body is not the promised shape.
    #[error("{method} {url} answered something that is not the expected JSON: {detail}")]
    Decode {
        /// Request method.
        method: String,
        /// The URL (without credentials).
        url: String,
        /// The parse error.
        detail: String,
    },
    /// An answer longer than the client reads from that route (an endless or runaway body):
    /// reading stopped at the cap.
    #[error(
        "{method} {url} answered more than {} MiB, the most this tool reads from that route; \
         the server (or a proxy in front of it) is sending an endless or runaway answer — \
         check it with `curl -s URL | head -c 1000`",
        limit / (1024 * 1024)
    )]
    TooLarge {
        /// Request method.
        method: String,
        /// The URL (without credentials).
        url: String,
        /// The cap, in bytes.
        limit: usize,
    },
    /// The WebSocket could not be opened.
    #[error("cannot open the WebSocket {url} ({detail})")]
    WebSocket {
        /// The ws URL (without credentials or client id).
        url: String,
        /// The error.
        detail: String,
    },
}

impl ClientError {
    /// True when no server answered at all (connection-level failure).
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(
            self,
            ClientError::Unreachable { .. } | ClientError::WebSocket { .. }
        )
    }

    /// What the user can do, for the end of a message: credentials for a 401/403, the address
    /// for an answer that is not ComfyUI's, the server's `--listen`/`--port` when nothing
    /// answered.
    pub fn advice(&self) -> String {
        match self {
            ClientError::Status {
                status: 401 | 403 | 407,
                ..
            } => format!("The server (or a reverse proxy in front of it) asks for credentials: pass them with --header 'Authorization: Bearer TOKEN' (or the header your proxy expects), set {}, or put user:password@ in --server", super::HEADERS_ENV),
            ClientError::Status { .. } | ClientError::Decode { .. } => "Something answered, but not as ComfyUI does: is --server the address of ComfyUI itself (or of a proxy that passes its API through, with its path prefix)?".into(),
            ClientError::InvalidUrl { .. } => "Write --server as http://HOST:PORT".into(),
            ClientError::TooLarge { .. } => "Is --server the address of ComfyUI itself? A proxy in front of it may be sending an endless or oversized answer".into(),
            ClientError::Unreachable { .. } | ClientError::WebSocket { .. } => {
                "Is ComfyUI running there (check its --listen/--port), and is --server (or COMFY_BISECT_SERVER) right? With neither, comfy-bisect tries 127.0.0.1:8188 and then ComfyUI Desktop's 127.0.0.1:8000. A reverse proxy that needs an auth header gets it with --header 'Name: value'".into()
            }
        }
    }
}
