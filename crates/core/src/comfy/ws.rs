//! The WebSocket side of the client: connect with a session id and extra headers (never an
//! Origin header), then read frames as text, binary sizes, or the end of the connection.

use super::error::ClientError;
use super::headers::ExtraHeaders;
use super::protocol::binary_event_type;
use futures_util::StreamExt;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::Message;

/// How long the WebSocket handshake may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

type Stream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One frame as the client keeps it: text verbatim, binary only counted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WsFrame {
    /// A text frame.
    Text(String),
    /// A binary frame (preview or streamed image): its size and event type.
    Binary {
        /// Frame length in bytes.
        len: usize,
        /// First 4 bytes, big-endian.
        event_type: Option<u32>,
    },
    /// The connection ended (close frame, reset or error).
    Closed(String),
}

/// An open WebSocket with its session id.
pub struct WsConnection {
    stream: Stream,
    client_id: String,
}

impl WsConnection {
    /// Opens `url` with the extra headers applied to the handshake.
    pub(crate) async fn connect(
        url: &str,
        client_id: &str,
        headers: &ExtraHeaders,
    ) -> Result<WsConnection, ClientError> {
        let shown = url.split('?').next().unwrap_or(url).to_string();
        let err = |detail: String| ClientError::WebSocket {
            url: shown.clone(),
            detail,
        };
        let mut request = url.into_client_request().map_err(|e| err(e.to_string()))?;
        for (name, value) in headers.pairs() {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| err(e.to_string()))?;
            let mut value = HeaderValue::from_str(value).map_err(|e| err(e.to_string()))?;
            value.set_sensitive(true);
            request.headers_mut().insert(name, value);
        }
        let connect = tokio_tungstenite::connect_async(request);
        let (stream, _response) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| {
                err(format!(
                    "no handshake within {}s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| err(e.to_string()))?;
        Ok(WsConnection {
            stream,
            client_id: client_id.to_string(),
        })
    }

    /// The session id this socket was opened with.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The next text or binary frame (pings and pongs are skipped).
    pub(crate) async fn next_frame(&mut self) -> WsFrame {
        loop {
            match self.stream.next().await {
                None => return WsFrame::Closed("connection closed".into()),
                Some(Err(e)) => return WsFrame::Closed(e.to_string()),
                Some(Ok(Message::Text(t))) => return WsFrame::Text(t),
                Some(Ok(Message::Binary(b))) => {
                    return WsFrame::Binary {
                        len: b.len(),
                        event_type: binary_event_type(&b),
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    return WsFrame::Closed(match frame {
                        Some(f) => format!("closed by server ({} {})", f.code, f.reason),
                        None => "closed by server".into(),
                    })
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Closes the socket politely (errors ignored: the peer may already be gone).
    pub(crate) async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.stream.close(None)).await;
    }

    /// Sends the close frame from a background task and returns at once: nothing waits for the
    /// server's reply (the task gives up after 2 s; dropping the stream closes the connection).
    pub(crate) fn close_in_background(self) {
        tokio::spawn(self.close());
    }
}
