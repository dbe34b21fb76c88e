//! The simulator's HTTP/1.1 layer on hyper's server: persistent connections as aiohttp keeps
//! them (requests answered in turn until the client closes or sends `Connection: close`),
//! aiohttp's header set (`Server`, `Content-Type`, `Content-Length`; no `Date`), and the
//! WebSocket upgrade handed to tokio-tungstenite. Routes see a plain [`Request`] (decoded
//! path, query map, whole body) and return a [`Response`], so adding one is a match arm in
//! `server.rs` with no HTTP details.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use percent_encoding::percent_decode_str;
use std::collections::HashMap;

/// Largest request body accepted (ComfyUI's default upload limit is 100 MiB).
pub(crate) const MAX_BODY: usize = 100 * 1024 * 1024;

/// What every answer carries in its `Server` header (aiohttp's, as captured).
const SERVER: &str = "Python/3.11 aiohttp/3.14.5";

/// One request as the routes see it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, … as sent.
    pub method: String,
    /// Path without the query string, percent-decoded.
    pub path: String,
    /// Query parameters (percent-decoded, `+` as space, last value wins).
    pub query: HashMap<String, String>,
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value by lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// Whether the client allows the connection to stay open after the answer (HTTP/1.1
    /// default; `Connection: close` ends it).
    pub(crate) fn keep_alive(&self) -> bool {
        !self
            .header("connection")
            .is_some_and(|v| v.to_ascii_lowercase().contains("close"))
    }

    /// True for a WebSocket upgrade request.
    pub(crate) fn is_websocket(&self) -> bool {
        self.header("upgrade")
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
    }

    /// The request's head, decoded (body empty until [`read_body`] fills it).
    pub(crate) fn head_of<B>(req: &hyper::Request<B>) -> Request {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        Request {
            method: req.method().as_str().to_string(),
            path: percent_decode(req.uri().path(), false),
            query: parse_query(req.uri().query().unwrap_or("")),
            headers,
            body: Vec::new(),
        }
    }
}

/// One response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`, none for aiohttp's empty answers.
    pub content_type: Option<&'static str>,
    /// Further headers, written after `Content-Type` in this order.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A body with a content type and no further headers.
    pub fn new(status: u16, content_type: Option<&'static str>, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body,
        }
    }

    /// A JSON body with aiohttp's content type.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response::new(
            status,
            Some("application/json; charset=utf-8"),
            serde_json::to_vec(value).expect("JSON values serialize"),
        )
    }

    /// 200 with an empty body and no content type (what ComfyUI's control routes send).
    pub(crate) fn empty_ok() -> Response {
        Response::new(200, None, Vec::new())
    }

    /// A plain-text body.
    pub fn text(status: u16, text: &str) -> Response {
        Response::new(
            status,
            Some("text/plain; charset=utf-8"),
            text.as_bytes().to_vec(),
        )
    }

    /// aiohttp's 404 page.
    pub(crate) fn not_found() -> Response {
        Response::text(404, "404: Not Found")
    }

    /// 404 with an empty body (`/models/<unknown>`).
    pub(crate) fn not_found_empty() -> Response {
        Response::new(404, None, Vec::new())
    }

    /// aiohttp's 405 page.
    pub(crate) fn method_not_allowed() -> Response {
        Response::text(405, "405: Method Not Allowed")
    }

    /// What aiohttp answers when a handler raises.
    pub(crate) fn internal_error() -> Response {
        Response::text(
            500,
            "500 Internal Server Error\n\nServer got itself in trouble",
        )
    }

    /// Adds a header (written after `Content-Type`), e.g. `Content-Disposition` for a file.
    #[allow(dead_code)] // No route sends one yet.
    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The hyper response: `Connection: close` unless `keep_alive`, `Server`, `Content-Type`,
    /// the extra headers, in that order; hyper adds `Content-Length` last.
    pub(crate) fn into_hyper(self, keep_alive: bool) -> hyper::Response<Full<Bytes>> {
        let mut out = hyper::Response::new(Full::new(Bytes::from(self.body)));
        *out.status_mut() =
            hyper::StatusCode::from_u16(self.status).unwrap_or(hyper::StatusCode::OK);
        let h = out.headers_mut();
        if !keep_alive {
            h.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        }
        h.insert(hyper::header::SERVER, HeaderValue::from_static(SERVER));
        if let Some(ct) = self.content_type {
            h.insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        for (name, value) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.append(HeaderName::from_static(name), v);
            }
        }
        out
    }
}

/// Percent-decodes a URL component (`+` stays `+` in paths, becomes a space in queries);
/// invalid escapes stay as they are, invalid UTF-8 becomes U+FFFD.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> String {
    if plus_is_space && s.contains('+') {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    } else {
        percent_decode_str(s).decode_utf8_lossy().into_owned()
    }
}

fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k, true), percent_decode(v, true)),
            None => (percent_decode(pair, true), String::new()),
        })
        .collect()
}

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Over [`MAX_BODY`]: answer 413.
    TooLarge,
    /// The connection failed while reading.
    Io,
}

/// Reads the whole body, refusing more than [`MAX_BODY`] (hyper answers
/// `Expect: 100-continue` when the body is polled, so a refused body is never sent).
pub(crate) async fn read_body(body: Incoming) -> Result<Vec<u8>, BodyError> {
    // A `Content-Length` over the limit is refused before anything is read.
    if hyper::body::Body::size_hint(&body).lower() > MAX_BODY as u64 {
        return Err(BodyError::TooLarge);
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Err(_) => Err(BodyError::Io),
    }
}

/// The `101 Switching Protocols` answer to a WebSocket upgrade request, or `None` without a
/// `Sec-WebSocket-Key`.
pub(crate) fn upgrade_response(req: &Request) -> Option<hyper::Response<Full<Bytes>>> {
    let key = req.header("sec-websocket-key")?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut out = hyper::Response::new(Full::new(Bytes::new()));
    *out.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
    let h = out.headers_mut();
    h.insert(
        hyper::header::UPGRADE,
        HeaderValue::from_static("websocket"),
    );
    h.insert(
        hyper::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    h.insert(
        hyper::header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).ok()?,
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c", false), "a b+c");
        assert_eq!(percent_decode("a%20b+c", true), "a b c");
        assert_eq!(percent_decode("a%2Bb", true), "a+b");
        assert_eq!(percent_decode("100%", false), "100%");
        assert_eq!(percent_decode("%zz", false), "%zz");
        assert_eq!(percent_decode("%C3%A9", false), "é");
    }

    #[test]
    fn query_strings() {
        let q = parse_query("max_items=2&offset=1&flag&name=a+b%26c&max_items=3");
        assert_eq!(q["max_items"], "3");
        assert_eq!(q["offset"], "1");
        assert_eq!(q["flag"], "");
        assert_eq!(q["name"], "a b&c");
    }

    #[test]
    fn response_headers_in_aiohttp_order() {
        let r = Response::json(200, &serde_json::json!({}))
            .with_header("content-disposition", "filename=\"a.png\"")
            .into_hyper(false);
        let names: Vec<&str> = r.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "connection",
                "server",
                "content-type",
                "content-disposition"
            ]
        );
    }
}
