//! The HTTP side of the client: one method per ComfyUI route, typed answers, clear errors, and
//! an optional recorder that sees every exchange (without headers) for the run record.

use super::error::ClientError;
use super::headers::ExtraHeaders;
use super::protocol::{
    is_jobs_api_not_found, routes, HistoryEntry, Job, JobLookup, LogsData, LogsSubscribe,
    PromptRejection, PromptRequest, PromptResponse, QueueState, SystemStats,
};
use super::ws::WsConnection;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default timeout of one HTTP request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest response text kept in a recorded exchange.
const RECORDED_TEXT_LIMIT: usize = 4000;

/// Largest `/object_info` answer read (a real server with hundreds of custom node packs
/// answers some tens of MB); a longer one is cut off with [`ClientError::TooLarge`].
pub const MAX_OBJECT_INFO_BYTES: usize = 128 * 1024 * 1024;

/// Largest answer read from any other route (queue, history, stats, logs, models …).
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// The most of an answer to `route` that is read before the request fails.
fn body_cap(route: &str) -> usize {
    if route.starts_with(routes::OBJECT_INFO) {
        MAX_OBJECT_INFO_BYTES
    } else {
        MAX_ANSWER_BYTES
    }
}

/// Why reading an answer's body stopped.
enum BodyError {
    /// The transport failed.
    Transport(reqwest::Error),
    /// The body went past the cap.
    TooLarge,
}

/// Reads `resp`'s body chunk by chunk, failing as soon as it passes `cap` bytes (an endless
/// chunked answer ends there, never in memory); bytes that are not UTF-8 become U+FFFD.
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<String, BodyError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(body) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// One HTTP request and its answer, as recorded for the run (never with headers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpExchange {
    /// `GET`/`POST`.
    pub method: String,
    /// Route and query (relative to the server URL).
    pub path: String,
    /// JSON body sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body: Option<Value>,
    /// HTTP status (absent when the request failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// JSON body received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_body: Option<Value>,
    /// Non-JSON body received (trimmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_text: Option<String>,
    /// Transport error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Round-trip time.
    pub elapsed_ms: u64,
}

/// Receives every recorded exchange.
pub type Recorder = Arc<dyn Fn(HttpExchange) + Send + Sync>;

/// Answer of `POST /prompt`.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// 200; check `node_errors` (non-empty = partially rejected, the rest still runs).
    Accepted(PromptResponse),
    /// 400 with ComfyUI's validation error shape.
    Rejected(PromptRejection),
    /// Any other status (500 on a body the server could not handle …).
    ServerError {
        /// HTTP status.
        status: u16,
        /// Start of the body.
        body: String,
    },
}

/// An output file as `/history` names it (the `/view` query).
#[derive(Debug, Clone, Copy)]
pub struct ViewFile<'a> {
    /// `filename`.
    pub filename: &'a str,
    /// `subfolder` (often empty).
    pub subfolder: &'a str,
    /// `type`: `output`, `temp` or `input`.
    pub kind: &'a str,
}

/// The start of a `/view` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewHead {
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Length`: the file's size in bytes (of the part, for a 206 answer).
    pub content_length: Option<u64>,
    /// The bytes read (the header; never more than asked for plus one chunk).
    pub head: Vec<u8>,
    /// The file offset of `head[0]`: the range's start when the server answered 206, else 0.
    pub offset: u64,
    /// The whole file's size: `Content-Range`'s total for a 206, else `Content-Length`.
    pub total: Option<u64>,
}

/// Whether the bytes read so far suffice: called with them, the file offset of the first and
/// the file's size when known.
pub(crate) type Enough<'a> = dyn Fn(&[u8], u64, Option<u64>) -> bool + Sync + 'a;

/// How much of a `/view` answer `Client::view_read` reads.
pub struct ViewRead<'a> {
    /// Ask for the bytes from this offset on (`Range: bytes=N-`). A server that ignores the
    /// header answers 200 with the whole file; its start is then read only when the offset
    /// lies inside `cap`.
    pub from: Option<u64>,
    /// Most bytes read.
    pub cap: usize,
    /// Whether the bytes so far suffice: called with them, the file offset of the first (the
    /// range's start on a 206 answer, else 0) and the file's size when known.
    pub enough: &'a Enough<'a>,
}

/// Client for one ComfyUI server (HTTP + WebSocket). Cheap to clone.
#[derive(Clone)]
pub struct Client {
    base: reqwest::Url,
    http: reqwest::Client,
    headers: ExtraHeaders,
    recorder: Option<Recorder>,
    request_timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server_url())
            .field("headers", &self.headers)
            .finish()
    }
}

impl Client {
    /// A client for `server` (`http(s)://host:port[/prefix]`; a bare `host:port` means http).
    /// Credentials in the URL are sent as a Basic `Authorization` header and dropped from it.
    pub fn new(server: &str, headers: ExtraHeaders) -> Result<Client, ClientError> {
        let (base, headers) = parse_server_url(server, headers)?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ClientError::InvalidUrl {
                url: server.to_string(),
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Client {
            base,
            http,
            headers,
            recorder: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        })
    }

    /// A copy of this client that reports every exchange to `recorder`.
    pub(crate) fn recording(&self, recorder: Recorder) -> Client {
        Client {
            recorder: Some(recorder),
            ..self.clone()
        }
    }

    /// A copy of this client with another per-request timeout.
    pub fn with_request_timeout(&self, timeout: Duration) -> Client {
        Client {
            request_timeout: timeout,
            ..self.clone()
        }
    }

    /// The server URL without credentials (safe to print and store).
    pub fn server_url(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_string()
    }

    /// The WebSocket URL for a session id (`ws`/`wss` derived from `http`/`https`).
    pub(crate) fn ws_url(&self, client_id: &str) -> String {
        let mut url = self.base.clone();
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        // Changing between "special" schemes http→ws / https→wss is always allowed.
        let _ = url.set_scheme(scheme);
        let path = join_path(&url, routes::WS);
        url.set_path(&path);
        url.query_pairs_mut()
            .clear()
            .append_pair(routes::WS_CLIENT_ID_PARAM, client_id);
        url.to_string()
    }

    /// Opens the WebSocket with session id `client_id` (extra headers included, no Origin).
    pub async fn connect_ws(&self, client_id: &str) -> Result<WsConnection, ClientError> {
        WsConnection::connect(&self.ws_url(client_id), client_id, &self.headers).await
    }

    /// `GET /system_stats`.
    pub async fn system_stats(&self) -> Result<SystemStats, ClientError> {
        self.get_json(routes::SYSTEM_STATS).await
    }

    /// `GET /object_info` (all classes) or `GET /object_info/{class}` (`{}` if unknown).
    pub async fn object_info(&self, class: Option<&str>) -> Result<Value, ClientError> {
        match class {
            Some(c) => {
                self.get_json(&format!("{}/{}", routes::OBJECT_INFO, encode_segment(c)))
                    .await
            }
            None => self.get_json(routes::OBJECT_INFO).await,
        }
    }

    /// `GET route`, the body as text; `None` when the server answers 404 (a route it does not
    /// have, such as an extension's that is not installed).
    pub(crate) async fn get_text_opt(&self, route: &str) -> Result<Option<String>, ClientError> {
        let (status, text) = self.send("GET", route, None).await?;
        match status {
            404 => Ok(None),
            200..=299 => Ok(Some(text)),
            _ => Err(ClientError::Status {
                method: "GET".into(),
                url: self.url_for(route).to_string(),
                status,
                body: trim_text(&text),
            }),
        }
    }

    /// `GET /queue`.
    pub async fn queue(&self) -> Result<QueueState, ClientError> {
        self.get_json(routes::QUEUE).await
    }

    /// `GET /history/{id}`: `None` when unknown **or not finished yet** (the server cannot tell).
    pub async fn history(&self, prompt_id: &str) -> Result<Option<HistoryEntry>, ClientError> {
        let route = format!("{}/{}", routes::HISTORY, encode_segment(prompt_id));
        let mut all: serde_json::Map<String, Value> = self.get_json(&route).await?;
        match all.remove(prompt_id) {
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| self.decode_error("GET", &route, e)),
            None => Ok(None),
        }
    }

    /// `GET /features`.
    pub async fn features(&self) -> Result<Value, ClientError> {
        self.get_json(routes::FEATURES).await
    }

    /// `POST /prompt`.
    pub(crate) async fn submit(
        &self,
        request: &PromptRequest<'_>,
    ) -> Result<Submitted, ClientError> {
        let body = serde_json::to_value(request).map_err(|e| ClientError::Decode {
            method: "POST".into(),
            url: self.url_for(routes::PROMPT).to_string(),
            detail: format!("cannot encode the prompt: {e}"),
        })?;
        let (status, text) = self.send("POST", routes::PROMPT, Some(body)).await?;
        match status {
            200 => serde_json::from_str(&text)
                .map(Submitted::Accepted)
                .map_err(|e| self.decode_error("POST", routes::PROMPT, e)),
            400 => Ok(match serde_json::from_str::<PromptRejection>(&text) {
                Ok(r) => Submitted::Rejected(r),
                Err(_) => Submitted::ServerError {
                    status,
                    body: trim_text(&text),
                },
            }),
            _ => Ok(Submitted::ServerError {
                status,
                body: trim_text(&text),
            }),
        }
    }

    /// `POST /free {"unload_models", "free_memory"}` (the worker acts when idle).
    pub(crate) async fn free(
        &self,
        unload_models: bool,
        free_memory: bool,
    ) -> Result<(), ClientError> {
        let body = json!({"unload_models": unload_models, "free_memory": free_memory});
        self.post_ok(routes::FREE, body).await
    }

    /// `POST /interrupt {"prompt_id"}`: interrupts `prompt_id` only if it is the running prompt.
    pub(crate) async fn interrupt(&self, prompt_id: &str) -> Result<(), ClientError> {
        self.post_ok(routes::INTERRUPT, json!({ "prompt_id": prompt_id }))
            .await
    }

    /// `GET /api/jobs/{id}`: the job, a JSON 404 for an id the server does not know, or
    /// [`JobLookup::NoJobsApi`] when the server has no jobs API (0.3.x: a plain 404/405).
    pub async fn job(&self, prompt_id: &str) -> Result<JobLookup, ClientError> {
        let route = format!("{}/{}", routes::JOBS, encode_segment(prompt_id));
        let (status, text) = self.send("GET", &route, None).await?;
        match status {
            200 => serde_json::from_str::<Job>(&text)
                .map(|j| JobLookup::Found(Box::new(j)))
                .map_err(|e| self.decode_error("GET", &route, e)),
            404 if is_jobs_api_not_found(&text) => Ok(JobLookup::NotFound),
            404 | 405 => Ok(JobLookup::NoJobsApi),
            _ => Err(ClientError::Status {
                method: "GET".into(),
                url: self.url_for(&route).to_string(),
                status,
                body: trim_text(&text),
            }),
        }
    }

    /// `POST /api/jobs/{id}/cancel`: `Some(cancelled)` from the server's answer, `None` when it
    /// has no such route (0.8.0 answers 405, 0.3.x 404): then use `Client::interrupt`.
    pub async fn cancel_job(&self, prompt_id: &str) -> Result<Option<bool>, ClientError> {
        let route = format!(
            "{}/{}{}",
            routes::JOBS,
            encode_segment(prompt_id),
            routes::JOB_CANCEL_SUFFIX
        );
        let (status, text) = self.send("POST", &route, Some(json!({}))).await?;
        match status {
            200 => serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("cancelled").and_then(Value::as_bool))
                .map(Some)
                .ok_or_else(|| {
                    self.decode_error("POST", &route, "no boolean `cancelled` in the answer")
                }),
            404 | 405 => Ok(None),
            _ => Err(ClientError::Status {
                method: "POST".into(),
                url: self.url_for(&route).to_string(),
                status,
                body: trim_text(&text),
            }),
        }
    }

    /// `POST /queue {"delete": [...]}`: removes pending prompts (not the running one).
    pub(crate) async fn delete_from_queue(&self, prompt_ids: &[&str]) -> Result<(), ClientError> {
        self.post_ok(routes::QUEUE, json!({ "delete": prompt_ids }))
            .await
    }

    /// `PATCH /internal/logs/subscribe {"clientId", "enabled"}`: the console comes to that
    /// socket as `logs` frames. `Ok(false)` when the server has no such route (404/405: older
    /// builds, some proxies).
    pub async fn logs_subscribe(
        &self,
        client_id: &str,
        enabled: bool,
    ) -> Result<bool, ClientError> {
        let body =
            serde_json::to_value(LogsSubscribe { client_id, enabled }).unwrap_or(Value::Null);
        let (status, text) = self
            .send("PATCH", routes::LOGS_SUBSCRIBE, Some(body))
            .await?;
        match status {
            200..=299 => Ok(true),
            404 | 405 => Ok(false),
            _ => Err(ClientError::Status {
                method: "PATCH".into(),
                url: self.url_for(routes::LOGS_SUBSCRIBE).to_string(),
                status,
                body: trim_text(&text),
            }),
        }
    }

    /// `GET /internal/logs/raw`: the console's ring buffer; `None` when the server has no such
    /// route (404/405).
    pub(crate) async fn logs_raw(&self) -> Result<Option<LogsData>, ClientError> {
        let (status, text) = self.send("GET", routes::LOGS_RAW, None).await?;
        match status {
            200..=299 => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| self.decode_error("GET", routes::LOGS_RAW, e)),
            404 | 405 => Ok(None),
            _ => Err(ClientError::Status {
                method: "GET".into(),
                url: self.url_for(routes::LOGS_RAW).to_string(),
                status,
                body: trim_text(&text),
            }),
        }
    }

    /// `GET /view?filename=&subfolder=&type=` reading only the start of the body: chunks are
    /// read until `enough` says the bytes so far suffice (or `super::media::MAX_HEADER_BYTES`
    /// are in), then the response is dropped unread. `None` on 404 (no such file). The recorded
    /// exchange names the route with its query and summarises the answer instead of the bytes.
    pub async fn view_head(
        &self,
        file: &ViewFile<'_>,
        enough: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<Option<ViewHead>, ClientError> {
        let read = ViewRead {
            from: None,
            cap: super::media::MAX_HEADER_BYTES,
            enough: &|b, _, _| enough(b),
        };
        self.view_read(file, &read).await
    }

    /// `GET /view` reading part of the body as `read` says: from the start or (with `Range`)
    /// from an offset, until `enough` or `read.cap` bytes, then the response is dropped
    /// unread. `None` on 404. Recorded like [`Client::view_head`], with the range asked and
    /// the status answered.
    pub(crate) async fn view_read(
        &self,
        file: &ViewFile<'_>,
        read: &ViewRead<'_>,
    ) -> Result<Option<ViewHead>, ClientError> {
        let mut url = self.url_for(routes::VIEW);
        url.query_pairs_mut()
            .append_pair("filename", file.filename)
            .append_pair("subfolder", file.subfolder)
            .append_pair("type", file.kind);
        let route = format!("{}?{}", routes::VIEW, url.query().unwrap_or_default());
        let started = Instant::now();
        let route = match read.from {
            Some(from) => format!("{route} (Range: bytes={from}-)"),
            None => route,
        };
        let build = || {
            let req = self
                .http
                .get(url.clone())
                .headers(self.headers.to_header_map())
                .timeout(self.request_timeout);
            match read.from {
                Some(from) => req.header(reqwest::header::RANGE, format!("bytes={from}-")),
                None => req,
            }
        };
        let result = async {
            let mut resp = send_idempotent(true, build).await?;
            let status = resp.status().as_u16();
            let header = |name: reqwest::header::HeaderName| {
                resp.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let content_type = header(reqwest::header::CONTENT_TYPE);
            let content_range = header(reqwest::header::CONTENT_RANGE);
            let content_length = resp.content_length();
            let (offset, total) = match (status, read.from) {
                (206, Some(from)) => (from, content_range.as_deref().and_then(range_total)),
                _ => (0, content_length),
            };
            // A server that ignored the Range: its start is read only when the wanted offset
            // lies inside the cap.
            let skip = status == 200 && read.from.is_some_and(|f| f >= read.cap as u64);
            let mut head = Vec::new();
            if (200..300).contains(&status) && !skip {
                while head.len() < read.cap && !(read.enough)(&head, offset, total) {
                    match resp.chunk().await? {
                        Some(chunk) => head.extend_from_slice(&chunk),
                        None => break,
                    }
                }
            }
            Ok::<_, reqwest::Error>((status, content_type, content_length, head, offset, total))
        }
        .await;
        let mut exchange = HttpExchange {
            method: "GET".into(),
            path: route.clone(),
            request_body: None,
            status: None,
            response_body: None,
            response_text: None,
            error: None,
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        let out = match result {
            Ok((status, content_type, content_length, head, offset, total)) => {
                exchange.status = Some(status);
                let part = if status == 206 {
                    format!(
                        " of {} from byte {offset}",
                        total.map_or("?".into(), |n| n.to_string())
                    )
                } else {
                    String::new()
                };
                exchange.response_text = Some(format!(
                    "<{}, {} bytes{part}; the first {} read>",
                    content_type.as_deref().unwrap_or("no content type"),
                    content_length.map_or("?".into(), |n| n.to_string()),
                    head.len()
                ));
                match status {
                    200..=299 => Ok(Some(ViewHead {
                        content_type,
                        content_length,
                        head,
                        offset,
                        total,
                    })),
                    404 => Ok(None),
                    _ => Err(ClientError::Status {
                        method: "GET".into(),
                        url: url.to_string(),
                        status,
                        body: String::new(),
                    }),
                }
            }
            Err(e) => Err(unreachable(&mut exchange, url.as_str(), &e)),
        };
        if let Some(rec) = &self.recorder {
            rec(exchange);
        }
        out
    }

    async fn post_ok(&self, route: &str, body: Value) -> Result<(), ClientError> {
        let (status, text) = self.send("POST", route, Some(body)).await?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(ClientError::Status {
                method: "POST".into(),
                url: self.url_for(route).to_string(),
                status,
                body: trim_text(&text),
            })
        }
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        route: &str,
    ) -> Result<T, ClientError> {
        let (status, text) = self.send("GET", route, None).await?;
        if !(200..300).contains(&status) {
            return Err(ClientError::Status {
                method: "GET".into(),
                url: self.url_for(route).to_string(),
                status,
                body: trim_text(&text),
            });
        }
        if let Some(page) = html_page(&text) {
            return Err(self.decode_error("GET", route, page));
        }
        serde_json::from_str(&text).map_err(|e| self.decode_error("GET", route, e))
    }

    fn decode_error(&self, method: &str, route: &str, e: impl std::fmt::Display) -> ClientError {
        ClientError::Decode {
            method: method.into(),
            url: self.url_for(route).to_string(),
            detail: e.to_string(),
        }
    }

    fn url_for(&self, route: &str) -> reqwest::Url {
        let mut url = self.base.clone();
        let path = join_path(&url, route);
        url.set_path(&path);
        url
    }

    /// Sends one request and returns (status, body text); records the exchange.
    async fn send(
        &self,
        method: &str,
        route: &str,
        body: Option<Value>,
    ) -> Result<(u16, String), ClientError> {
        let url = self.url_for(route);
        let started = Instant::now();
        let build = || {
            let req = match method {
                "POST" => self.http.post(url.clone()),
                "PATCH" => self.http.patch(url.clone()),
                _ => self.http.get(url.clone()),
            }
            .headers(self.headers.to_header_map())
            .timeout(self.request_timeout);
            match &body {
                Some(b) => req.json(b),
                None => req,
            }
        };
        let cap = body_cap(route);
        let result = async {
            let resp = send_idempotent(method == "GET", build)
                .await
                .map_err(BodyError::Transport)?;
            let status = resp.status().as_u16();
            let text = read_capped(resp, cap).await?;
            Ok::<_, BodyError>((status, text))
        }
        .await;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let mut exchange = HttpExchange {
            method: method.to_string(),
            path: route.to_string(),
            request_body: body,
            status: None,
            response_body: None,
            response_text: None,
            error: None,
            elapsed_ms,
        };
        let out = match result {
            Ok((status, text)) => {
                exchange.status = Some(status);
                match serde_json::from_str::<Value>(&text) {
                    Ok(v) if !text.is_empty() => exchange.response_body = Some(v),
                    _ if text.is_empty() => {}
                    _ => exchange.response_text = Some(trim_text(&text)),
                }
                Ok((status, text))
            }
            Err(BodyError::Transport(e)) => Err(unreachable(&mut exchange, url.as_str(), &e)),
            Err(BodyError::TooLarge) => {
                let err = ClientError::TooLarge {
                    method: method.to_string(),
                    url: redact_url_credentials(url.as_str()),
                    limit: cap,
                };
                exchange.error = Some(err.to_string());
                Err(err)
            }
        };
        if let Some(rec) = &self.recorder {
            rec(exchange);
        }
        out
    }
}

/// How many times an idempotent request is sent again when it went out on a pooled
/// connection the server had already closed.
const STALE_CONNECTION_RETRIES: usize = 3;

/// Sends the request `build` makes. An idempotent one (a GET) is sent again on a fresh
/// connection when the pooled keep-alive connection it went out on turns out closed — the
/// server restarted or dropped idle connections, and the request raced the close
/// ("connection closed before message completed"). A POST is never repeated: `/prompt`
/// could queue twice.
async fn send_idempotent(
    idempotent: bool,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, reqwest::Error> {
    let mut tries = 0;
    loop {
        match build().send().await {
            Err(e) if idempotent && tries < STALE_CONNECTION_RETRIES && stale_connection(&e) => {
                tries += 1;
                tracing::debug!("pooled connection was closed by the server; sending again: {e}");
            }
            other => return other,
        }
    }
}

/// Whether the request failed because its (reused) connection was closed or reset before
/// any answer: hyper's incomplete message or canceled request, or a reset, aborted or broken
/// socket under it. A refused or timed-out connection is not this.
fn stale_connection(e: &reqwest::Error) -> bool {
    if e.is_timeout() || e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            return matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe);
        }
        source = s.source();
    }
    false
}

/// The total of a `Content-Range: bytes a-b/total` answer (`None` for `*`).
fn range_total(v: &str) -> Option<u64> {
    v.trim()
        .strip_prefix("bytes ")?
        .rsplit_once('/')?
        .1
        .trim()
        .parse()
        .ok()
}

/// The error for a request that got no answer, noted in its exchange record too.
fn unreachable(exchange: &mut HttpExchange, url: &str, e: &reqwest::Error) -> ClientError {
    let detail = describe_reqwest_error(e);
    exchange.error = Some(detail.clone());
    ClientError::Unreachable {
        url: url.to_string(),
        detail,
    }
}

fn describe_reqwest_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    let mut detail = kind.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail = format!("{detail}: {s}");
        source = s.source();
    }
    detail
}

fn trim_text(text: &str) -> String {
    if let Some(page) = html_page(text) {
        return page;
    }
    if text.len() <= RECORDED_TEXT_LIMIT {
        return text.to_string();
    }
    let mut end = RECORDED_TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// A short description of a body that is an HTML page (a proxy's login or error page, another
/// web application), instead of the page itself: ComfyUI's API answers JSON or plain text.
fn html_page(text: &str) -> Option<String> {
    let head: String = text.trim_start().chars().take(512).collect();
    let lower = head.to_ascii_lowercase();
    if !(lower.starts_with('<') && lower.contains("<html")) {
        return None;
    }
    let full = text.to_ascii_lowercase();
    let title = full.find("<title").and_then(|start| {
        let open_end = start + full[start..].find('>')? + 1;
        let close = open_end + full[open_end..].find("</title")?;
        let title = text
            .get(open_end..close)?
            .split_whitespace()
            .collect::<Vec<_>>();
        Some(title.join(" ").chars().take(120).collect::<String>())
    });
    Some(match title.filter(|t| !t.is_empty()) {
        Some(t) => format!(
            "an HTML page titled {t:?} ({} bytes), not ComfyUI's API",
            text.len()
        ),
        None => format!("an HTML page ({} bytes), not ComfyUI's API", text.len()),
    })
}

fn join_path(base: &reqwest::Url, route: &str) -> String {
    format!("{}{}", base.path().trim_end_matches('/'), route)
}

fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Parses and normalizes the server URL; moves URL credentials into a Basic auth header.
fn parse_server_url(
    server: &str,
    mut headers: ExtraHeaders,
) -> Result<(reqwest::Url, ExtraHeaders), ClientError> {
    let invalid = |reason: &str| ClientError::InvalidUrl {
        url: redact_url_query(&redact_url_credentials(server)),
        reason: reason.to_string(),
    };
    let text = server.trim();
    let with_scheme = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    let mut url = reqwest::Url::parse(&with_scheme).map_err(|e| invalid(&e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(invalid("the scheme must be http or https"));
    }
    if url.host_str().is_none() {
        return Err(invalid("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        let user = percent_decode(url.username());
        let pass = url.password().map(percent_decode).unwrap_or_default();
        headers
            .push(
                "Authorization",
                &format!("Basic {}", base64(format!("{user}:{pass}").as_bytes())),
            )
            .map_err(|e| invalid(&e.to_string()))?;
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    if url.query().is_some_and(|q| !q.is_empty()) {
        // Dropping it silently would send no token at all; keeping it would put it into every
        // record, report and log line that names the server.
        return Err(invalid(
            "a query (`?…`, e.g. `?token=…`) in the server URL is not supported: it would not \
             be sent with the requests. Give the token as a header instead, e.g. --header \
             'Authorization: Bearer TOKEN' (or the header your proxy expects), or as \
             user:password@ in the URL for Basic authentication",
        ));
    }
    url.set_query(None);
    url.set_fragment(None);
    Ok((url, headers))
}

/// The URL with its query (which may hold a token) replaced by `?<redacted>`.
fn redact_url_query(url: &str) -> String {
    match url.split_once('?') {
        Some((head, _)) => format!("{head}?<redacted>"),
        None => url.to_string(),
    }
}

/// The URL as given with everything before its last `@` replaced: a password may itself hold
/// `@`, `/`, `:` or `#`, and a URL without a scheme may still carry credentials. What precedes
/// `://` is kept only when it is a scheme by RFC 3986's rule (a letter, then letters, digits,
/// `+`, `-` or `.`); otherwise it may be the credentials themselves (`:secret@…://…`).
fn redact_url_credentials(url: &str) -> String {
    let Some(at) = url.rfind('@') else {
        return url.to_string();
    };
    let is_scheme = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    };
    match url.find("://") {
        Some(s) if s < at && is_scheme(&url[..s]) => {
            format!("{}://<credentials>@{}", &url[..s], &url[at + 1..])
        }
        _ => format!("<credentials>@{}", &url[at + 1..]),
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Standard base64 with padding, as HTTP Basic authentication wants it.
fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_size_comes_from_content_range() {
        // The Content-Range values of ComfyUI's 206 and 416 answers
        // (tests/fixtures/comfyui-outputs/range.json).
        assert_eq!(range_total("bytes 0-99/3736"), Some(3736));
        assert_eq!(range_total("bytes 3636-3735/3736"), Some(3736));
        assert_eq!(range_total("bytes */3736"), Some(3736));
        assert_eq!(range_total("bytes 0-99/*"), None);
        assert_eq!(range_total("items 0-9/10"), None);
        assert_eq!(range_total(""), None);
    }

    #[test]
    fn ws_url_follows_the_http_scheme_and_prefix() {
        let c = Client::new("http://127.0.0.1:8188", ExtraHeaders::new()).unwrap();
        assert_eq!(c.ws_url("abc"), "ws://127.0.0.1:8188/ws?clientId=abc");
        let c = Client::new("https://example.org/comfy/", ExtraHeaders::new()).unwrap();
        assert_eq!(c.ws_url("abc"), "wss://example.org/comfy/ws?clientId=abc");
        assert_eq!(c.server_url(), "https://example.org/comfy");
        assert_eq!(
            c.url_for(routes::SYSTEM_STATS).as_str(),
            "https://example.org/comfy/system_stats"
        );
    }

    #[test]
    fn a_query_in_the_server_url_is_refused_and_never_printed() {
        for url in [
            "http://127.0.0.1:8188/?token=s3cret",
            "http://u:pw@127.0.0.1:8188/comfy?token=s3cret#x",
            "127.0.0.1:8188?token=s3cret",
        ] {
            let err = Client::new(url, ExtraHeaders::default()).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, ClientError::InvalidUrl { .. }), "{text}");
            assert!(
                text.contains("?token=") && text.contains("--header"),
                "{text}"
            );
            assert!(!text.contains("s3cret") && !text.contains("pw"), "{text}");
        }
        // An empty query or a fragment carries nothing: accepted.
        assert!(Client::new("http://127.0.0.1:8188/?#top", ExtraHeaders::default()).is_ok());
    }

    #[test]
    fn bare_host_port_means_http() {
        let c = Client::new("localhost:8188", ExtraHeaders::new()).unwrap();
        assert_eq!(c.server_url(), "http://localhost:8188");
    }

    #[test]
    fn url_credentials_become_a_header_and_leave_the_url() {
        let c = Client::new("https://user:p%40ss@host:1/", ExtraHeaders::new()).unwrap();
        assert_eq!(c.server_url(), "https://host:1");
        assert_eq!(c.headers.names(), vec!["Authorization"]);
        assert_eq!(
            c.headers.pairs()[0].1,
            format!("Basic {}", base64(b"user:p@ss"))
        );
        assert!(!format!("{c:?}").contains("p@ss"));
    }

    #[test]
    fn url_credentials_are_percent_decoded_as_utf8() {
        let c = Client::new("http://us%C3%A9r:a%3Ab%25@host:1", ExtraHeaders::new()).unwrap();
        assert_eq!(
            c.headers.pairs()[0].1,
            format!("Basic {}", base64("usér:a:b%".as_bytes()))
        );
    }

    #[test]
    fn other_schemes_are_rejected() {
        let err = Client::new("ftp://host", ExtraHeaders::new()).unwrap_err();
        assert!(err.to_string().contains("http or https"), "{err}");
    }

    #[test]
    fn basic_auth_header_is_rfc7617_base64() {
        let c = Client::new("http://Aladdin:open%20sesame@host:1", ExtraHeaders::new()).unwrap();
        assert_eq!(c.headers.pairs()[0].1, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }

    #[test]
    fn credentials_before_a_later_scheme_separator_are_redacted() {
        // Found by the property test: no scheme, a password holding `#`, then `://` after the `@`.
        for server in [
            ":PW#A%@://@",
            "u:PW#x@h://p",
            "x y:PW1@h://",
            "1http:PW2#@x://",
        ] {
            let err = Client::new(server, ExtraHeaders::new())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("<credentials>@") && !err.contains("PW"),
                "{server} → {err}"
            );
        }
        assert_eq!(
            redact_url_credentials("https://u:PW@host:1/x"),
            "https://<credentials>@host:1/x"
        );
        assert_eq!(redact_url_credentials("u:PW#@host"), "<credentials>@host");
        assert_eq!(redact_url_credentials("http://host/"), "http://host/");
    }

    /// A server that answers the first request of its first connection with keep-alive, then
    /// closes that connection when the next request arrives on it, without an answer (the
    /// race a restarted server leaves in the pool); every later connection is answered.
    /// With `reset`, the close is an RST (linger 0), as when unread data is left behind.
    async fn server_closing_its_first_kept_alive_connection(reset: bool) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut first = true;
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let answers_left = if first { 1 } else { usize::MAX };
                first = false;
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut answered = 0;
                    loop {
                        let mut chunk = [0u8; 1024];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            if answered == answers_left {
                                if reset {
                                    let _ = sock.set_zero_linger();
                                }
                                return; // closes the connection, the request unanswered
                            }
                            answered += 1;
                            let body = r#"{"supports_preview_metadata": true}"#;
                            let answer = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                 content-length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            if sock.write_all(answer.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_get_on_a_pooled_connection_the_server_closed_is_sent_again() {
        for reset in [false, true] {
            let addr = server_closing_its_first_kept_alive_connection(reset).await;
            let c = Client::new(&format!("http://{addr}"), ExtraHeaders::new()).unwrap();
            assert_eq!(
                c.features().await.unwrap()["supports_preview_metadata"],
                true
            );
            // Goes out on the kept-alive connection, which the server closes unanswered.
            let again = c.features().await;
            assert_eq!(
                again.unwrap()["supports_preview_metadata"],
                true,
                "reset: {reset}"
            );
        }
    }

    #[tokio::test]
    async fn a_post_on_a_pooled_connection_the_server_closed_is_not_repeated() {
        let addr = server_closing_its_first_kept_alive_connection(false).await;
        let c = Client::new(&format!("http://{addr}"), ExtraHeaders::new()).unwrap();
        c.features().await.unwrap();
        let err = c.free(true, true).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("connection closed before message completed"),
            "{err}"
        );
    }

    #[test]
    fn long_bodies_are_trimmed_for_the_record() {
        let t = trim_text(&"x".repeat(10_000));
        assert!(t.len() < 4100 && t.ends_with("(10000 bytes)"));
    }
}
