//! A deliberately small HTTP/1.1 layer: persistent connections as aiohttp keeps them (requests
//! answered in turn until the client closes or sends `Connection: close`), `Content-Length`
//! bodies only, and a WebSocket upgrade hook.

use std::collections::HashMap;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Largest request body accepted (ComfyUI's default upload limit is 100 MiB).
const MAX_BODY: usize = 100 * 1024 * 1024;
/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// One parsed request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path without the query string, percent-decoded.
    pub path: String,
    /// Query parameters (percent-decoded, last value wins).
    pub query: HashMap<String, String>,
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// True for a WebSocket upgrade request.
    /// Whether the client allows the connection to stay open after the answer (HTTP/1.1
    /// default; `Connection: close` ends it).
    pub fn keep_alive(&self) -> bool {
        !self
            .header("connection")
            .is_some_and(|v| v.to_ascii_lowercase().contains("close"))
    }

    pub fn is_websocket(&self) -> bool {
        self.header("upgrade")
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
    }
}

/// One response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON body with aiohttp's content type.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: Some("application/json; charset=utf-8"),
            body: serde_json::to_vec(value).expect("JSON values serialize"),
        }
    }

    /// 200 with an empty body and no content type (what ComfyUI's control routes send).
    pub fn empty_ok() -> Response {
        Response {
            status: 200,
            content_type: None,
            body: Vec::new(),
        }
    }

    pub fn text(status: u16, text: &str) -> Response {
        Response {
            status,
            content_type: Some("text/plain; charset=utf-8"),
            body: text.as_bytes().to_vec(),
        }
    }

    /// aiohttp's 404 page.
    pub fn not_found() -> Response {
        Response::text(404, "404: Not Found")
    }

    /// 404 with an empty body (`/models/<unknown>`).
    pub fn not_found_empty() -> Response {
        Response {
            status: 404,
            content_type: None,
            body: Vec::new(),
        }
    }

    /// What aiohttp answers when a handler raises.
    pub fn internal_error() -> Response {
        Response::text(
            500,
            "500 Internal Server Error\n\nServer got itself in trouble",
        )
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Request Entity Too Large",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

/// Percent-decodes a URL component (`+` stays `+` in paths, becomes a space in queries).
pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed before sending a request (normal for probes).
    Closed,
    /// Malformed request; answer 400 and close.
    Bad(&'static str),
    /// Body over the limit.
    TooLarge,
    /// The connection failed while reading.
    Io,
}

impl From<std::io::Error> for ReadError {
    fn from(_: std::io::Error) -> Self {
        ReadError::Io
    }
}

/// Reads one request head and body (the server reads them separately to answer
/// `Expect: 100-continue` in between).
#[cfg(test)]
pub async fn read_request<S: AsyncRead + Unpin>(
    reader: &mut BufReader<S>,
) -> Result<Request, ReadError> {
    let (mut req, len) = read_head(reader).await?;
    read_body(reader, &mut req, len).await?;
    Ok(req)
}

/// True when the client waits for `100 Continue` before sending the body (curl does for
/// bodies over 1 KiB).
pub fn expects_continue(req: &Request) -> bool {
    req.header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// Reads the body announced by `Content-Length` into `req`.
pub async fn read_body<S: AsyncRead + Unpin>(
    reader: &mut BufReader<S>,
    req: &mut Request,
    len: usize,
) -> Result<(), ReadError> {
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    req.body = body;
    Ok(())
}

/// Reads the request line and headers; returns the request (empty body) and the body length.
pub async fn read_head<S: AsyncRead + Unpin>(
    reader: &mut BufReader<S>,
) -> Result<(Request, usize), ReadError> {
    let mut head_len = 0usize;
    let mut line = String::new();
    let n = reader.read_line(&mut line).await?;
    if n == 0 {
        return Err(ReadError::Closed);
    }
    head_len += n;
    let mut parts = line.trim_end().splitn(3, ' ');
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().ok_or(ReadError::Bad("no request target"))?;
    let version = parts.next().unwrap_or("");
    if method.is_empty() || !version.starts_with("HTTP/1.") {
        return Err(ReadError::Bad("not an HTTP/1.x request line"));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(raw_path, false);
    let query = parse_query(raw_query);
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        let n = reader.read_line(&mut h).await?;
        if n == 0 {
            return Err(ReadError::Bad("connection closed inside the request head"));
        }
        head_len += n;
        if head_len > MAX_HEAD {
            return Err(ReadError::Bad("request head too large"));
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        return Err(ReadError::Bad("chunked request bodies are not supported"));
    }
    let len = match headers.get("content-length") {
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| ReadError::Bad("bad Content-Length"))?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(ReadError::TooLarge);
    }
    Ok((
        Request {
            method,
            path,
            query,
            headers,
            body: Vec::new(),
        },
        len,
    ))
}

/// Writes a response and flushes it; `keep_alive` false adds `Connection: close` (the caller
/// then closes the connection), true leaves it open for the next request as aiohttp does.
pub async fn write_response<S: AsyncWrite + Unpin>(
    stream: &mut S,
    resp: &Response,
    keep_alive: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\n{}Server: Python/3.11 aiohttp/3.14.5\r\n",
        resp.status,
        reason(resp.status),
        resp.body.len(),
        if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        }
    );
    if let Some(ct) = resp.content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&resp.body).await?;
    stream.flush().await
}

/// Writes the `101 Switching Protocols` answer to a WebSocket upgrade request.
pub async fn write_upgrade<S: AsyncWrite + Unpin>(
    stream: &mut S,
    req: &Request,
) -> Result<(), ReadError> {
    let key = req
        .header("sec-websocket-key")
        .ok_or(ReadError::Bad("missing Sec-WebSocket-Key"))?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c", false), "a b+c");
        assert_eq!(percent_decode("a%20b+c", true), "a b c");
        assert_eq!(percent_decode("100%", false), "100%");
        assert_eq!(percent_decode("%zz", false), "%zz");
    }

    #[tokio::test]
    async fn reads_head_body_and_query() {
        let raw = b"POST /api/history?max_items=2&offset=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcdEXTRA";
        let mut r = BufReader::new(&raw[..]);
        let req = read_request(&mut r).await.unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/api/history");
        assert_eq!(req.query["max_items"], "2");
        assert_eq!(req.query["offset"], "1");
        assert_eq!(req.body, b"abcd");
        let mut rest = String::new();
        r.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "EXTRA");
    }

    #[tokio::test]
    async fn rejects_garbage() {
        let raw = b"hello\r\n\r\n";
        let mut r = BufReader::new(&raw[..]);
        assert!(matches!(read_request(&mut r).await, Err(ReadError::Bad(_))));
        let mut empty = BufReader::new(&b""[..]);
        assert!(matches!(
            read_request(&mut empty).await,
            Err(ReadError::Closed)
        ));
    }
}
