//! Listener, routes and WebSocket sessions.

use super::http::{self, BodyError, Request, Response};
use super::memory::model_file_bytes;
use super::nodes::{defs, extra_pack_defs};
use super::profile::{self, Profile};
use super::state::{Instance, Out, QueueItem};
use super::validate::{self, py_str, Verdict};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::protocol::{Message, Role};
use tokio_tungstenite::WebSocketStream;

/// Binds with SO_REUSEADDR so a restart can take the same port right away.
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Resolves when the instance is stopped (crash or shutdown).
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

pub(crate) async fn accept_loop(inst: Arc<Instance>, listener: TcpListener) {
    let mut stop = inst.stop_signal();
    loop {
        tokio::select! {
            res = listener.accept() => {
                let Ok((stream, _)) = res else {
                    // Out of file descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let inst = inst.clone();
                tokio::spawn(async move {
                    let mut stop = inst.stop_signal();
                    tokio::select! {
                        _ = handle_connection(inst.clone(), stream) => {}
                        _ = stopped(&mut stop) => {}
                    }
                });
            }
            _ = stopped(&mut stop) => return,
        }
    }
}

async fn handle_connection(inst: Arc<Instance>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| serve(inst.clone(), req));
    // Keep-alive, as aiohttp: requests are answered one after the other on the same connection
    // until the client closes it, asks for `Connection: close`, or upgrades it to a WebSocket.
    let _ = http1::Builder::new()
        .keep_alive(true)
        .title_case_headers(true)
        .auto_date_header(false)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

/// One request: the WebSocket upgrade, or the body read and the route's answer.
async fn serve(
    inst: Arc<Instance>,
    mut req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let mut request = Request::head_of(&req);
    if let Some((name, value)) = &inst.shared.config.require_header {
        if request.header(&name.to_ascii_lowercase()) != Some(value.as_str()) {
            // What a reverse proxy in front of ComfyUI answers without its credentials.
            return Ok(Response::text(401, "401: Unauthorized").into_hyper(false));
        }
    }
    let path = strip_api(&request.path).to_string();
    if path == "/ws" && request.method == "GET" {
        return Ok(upgrade(inst, &mut req, &request));
    }
    match http::read_body(req.into_body()).await {
        Ok(body) => request.body = body,
        Err(BodyError::TooLarge) => {
            return Ok(Response::text(413, "413: Request Entity Too Large").into_hyper(false))
        }
        Err(BodyError::Io) => return Ok(Response::internal_error().into_hyper(false)),
    }
    let keep_alive = request.keep_alive();
    Ok(route(&inst, &request, &path).into_hyper(keep_alive))
}

/// Answers `GET /ws`: 400 without an upgrade (aiohttp's text), else 101 and the session runs
/// on the upgraded connection once hyper hands it over.
fn upgrade(
    inst: Arc<Instance>,
    req: &mut hyper::Request<Incoming>,
    request: &Request,
) -> hyper::Response<Full<Bytes>> {
    if !request.is_websocket() {
        return Response::text(
            400,
            "No WebSocket UPGRADE hdr: None\n Can \"Upgrade\" only to \"WebSocket\".",
        )
        .into_hyper(false);
    }
    let Some(answer) = http::upgrade_response(request) else {
        return Response::text(400, "missing Sec-WebSocket-Key").into_hyper(false);
    };
    let sid = request
        .query
        .get("clientId")
        .filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let on_upgrade = hyper::upgrade::on(req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        websocket_session(inst, ws, sid).await;
    });
    answer
}

fn strip_api(path: &str) -> &str {
    match path.strip_prefix("/api") {
        Some(rest) if rest.starts_with('/') && !rest.starts_with("/internal") => rest,
        _ => path,
    }
}

async fn websocket_session<S>(inst: Arc<Instance>, mut ws: WebSocketStream<S>, sid: String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Out>();
    let conn = {
        let mut st = inst.lock();
        st.next_conn += 1;
        let conn = st.next_conn;
        st.clients.insert(
            sid.clone(),
            super::state::Client {
                conn,
                tx: tx.clone(),
                preview_metadata: false,
            },
        );
        let _ = tx.send(Out::Text(st.status_message(Some(&sid)).to_string()));
        if let Some((Some(cid), node)) = &st.executing {
            if cid == &sid {
                let _ = tx.send(Out::Text(
                    json!({"type": "executing", "data": {"node": node}}).to_string(),
                ));
            }
        }
        conn
    };
    let mut first_frame = true;
    // True until the greeting went out (silent-socket fault).
    let mut first_sent = true;
    // Frames kept back by the socket-after-history fault.
    let mut held: Option<Vec<Out>> = None;
    let mut stop = inst.stop_signal();
    loop {
        tokio::select! {
            out = rx.recv() => {
                let sent = match (out, &mut held) {
                    (Some(Out::Hold), held) => {
                        held.get_or_insert_with(Vec::new);
                        true
                    }
                    (Some(Out::Release), held) => {
                        let mut ok = true;
                        for frame in held.take().unwrap_or_default() {
                            ok = ok && send_frame(&mut ws, frame).await;
                        }
                        ok
                    }
                    (Some(Out::Drop) | None, _) => false,
                    (Some(frame), Some(held)) => {
                        held.push(frame);
                        true
                    }
                    // silent-socket fault: the greeting goes out, nothing after it.
                    (Some(_), None) if !first_sent && inst.shared.faults().silent_socket => true,
                    (Some(frame), None) => {
                        first_sent = false;
                        send_frame(&mut ws, frame).await
                    }
                };
                if !sent {
                    break;
                }
            }
            msg = ws.next() => {
                match msg {
                    Some(Ok(Message::Text(t))) => {
                        if std::mem::take(&mut first_frame) {
                            negotiate(&inst, &sid, conn, &t);
                        }
                    }
                    Some(Ok(Message::Binary(_))) => first_frame = false,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                }
            }
            _ = stopped(&mut stop) => break,
        }
    }
    // A socket unregisters only itself: a newer socket with the same clientId replaced this
    // one in `clients`, and removing that would silence it. (ComfyUI 0.3.64 pops the sid
    // unconditionally, so there the outcome depends on which socket's handler runs first.)
    {
        let mut st = inst.lock();
        if st.clients.get(&sid).is_some_and(|c| c.conn == conn) {
            st.clients.remove(&sid);
        }
    }
    // Closed only now, so a client that sees this socket end knows it is unregistered.
    drop(ws);
}

/// Sends one text or binary frame; false when the socket failed.
async fn send_frame<S>(ws: &mut WebSocketStream<S>, frame: Out) -> bool
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match frame {
        Out::Text(t) => ws.send(Message::Text(t)).await.is_ok(),
        Out::Binary(b) => ws.send(Message::Binary(b)).await.is_ok(),
        Out::Drop | Out::Hold | Out::Release => true,
    }
}

/// Lets go of the frames held back for the submitters of the history entries just served
/// (socket-after-history fault; a no-op for sockets that hold nothing).
fn release_held<'a>(st: &super::state::State, entries: impl IntoIterator<Item = &'a Value>) {
    for entry in entries {
        if let Some(cid) = entry["prompt"][3]["client_id"].as_str() {
            st.send_raw(Some(cid), Out::Release);
        }
    }
}

fn server_features() -> Value {
    json!({"supports_preview_metadata": true, "max_upload_size": 104857600})
}

/// Only the first text frame is inspected for `feature_flags`.
fn negotiate(inst: &Instance, sid: &str, conn: u64, text: &str) {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if v.get("type").and_then(Value::as_str) != Some("feature_flags") {
        return;
    }
    let wants_meta = v["data"]["supports_preview_metadata"].as_bool() == Some(true);
    let mut st = inst.lock();
    if let Some(c) = st.clients.get_mut(sid).filter(|c| c.conn == conn) {
        c.preview_metadata = wants_meta;
        let _ = c.tx.send(Out::Text(
            json!({"type": "feature_flags", "data": server_features()}).to_string(),
        ));
    }
}

fn object_info_body() -> &'static [u8] {
    static BODY: OnceLock<Vec<u8>> = OnceLock::new();
    BODY.get_or_init(|| serde_json::to_vec(&defs().map).expect("object_info serializes"))
}

/// One node class of a pack whose name ends in `hostile` ([`super::Faults::hostile_text`]).
fn hostile_pack_defs(hostile: &str) -> serde_json::Map<String, Value> {
    let def = json!({
        "input": {"required": {"value": ["IMAGE"]}},
        "input_order": {"required": ["value"]},
        "output": ["IMAGE"],
        "output_is_list": [false],
        "output_name": ["IMAGE"],
        "name": "SimHostilePass",
        "display_name": format!("Hostile pass-through {hostile}"),
        "description": "",
        "python_module": format!("custom_nodes.hostile-pack{hostile}"),
        "category": "utils",
        "output_node": false,
    });
    std::iter::once(("SimHostilePass".to_string(), def)).collect()
}

fn combo_files(class: &str, input: &str) -> Vec<Value> {
    let Some((_, spec)) = defs().input_spec(class, input) else {
        return Vec::new();
    };
    let list = match spec.get(0) {
        Some(Value::Array(a)) => a.clone(),
        _ => spec
            .get(1)
            .and_then(|o| o.get("options"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    };
    list.into_iter()
        .filter(|v| v.as_str().is_some_and(|s| s.contains('.')))
        .collect()
}

const MODEL_FOLDERS: &[&str] = &[
    "checkpoints",
    "configs",
    "loras",
    "vae",
    "text_encoders",
    "diffusion_models",
    "clip_vision",
    "style_models",
    "embeddings",
    "diffusers",
    "vae_approx",
    "controlnet",
    "gligen",
    "upscale_models",
    "custom_nodes",
    "hypernetworks",
    "photomaker",
    "classifiers",
    "model_patches",
    "audio_encoders",
    "unet_gguf",
    "clip_gguf",
];

fn model_folder(folder: &str) -> Option<Vec<Value>> {
    let src: &[(&str, &str)] = match folder {
        "checkpoints" => &[("CheckpointLoaderSimple", "ckpt_name")],
        "configs" => &[("CheckpointLoader", "config_name")],
        "loras" => &[("LoraLoader", "lora_name")],
        "vae" => &[("VAELoader", "vae_name")],
        "text_encoders" => &[("CLIPLoader", "clip_name")],
        "diffusion_models" => &[("UNETLoader", "unet_name")],
        "clip_vision" => &[("CLIPVisionLoader", "clip_name")],
        "upscale_models" => &[("UpscaleModelLoader", "model_name")],
        "unet_gguf" => &[("UnetLoaderGGUF", "unet_name")],
        "clip_gguf" => &[("CLIPLoaderGGUF", "clip_name")],
        f if MODEL_FOLDERS.contains(&f) => &[],
        _ => return None,
    };
    Some(src.iter().flat_map(|(c, i)| combo_files(c, i)).collect())
}

/// `GET /internal/folder_paths` in the captured shape (the capture's folders, with the
/// capture's install folder `/home/user/ComfyUI` replaced by `root`).
fn folder_paths(root: &std::path::Path) -> Value {
    const CAPTURED: &str = include_str!("folder_paths.sim.json");
    const CAPTURED_ROOT: &str = "/home/user/ComfyUI";
    let captured: serde_json::Map<String, Value> =
        serde_json::from_str(CAPTURED).expect("the captured folder_paths is a JSON object");
    let root = root.to_string_lossy();
    captured
        .into_iter()
        .map(|(kind, dirs)| {
            let dirs: Vec<Value> = dirs
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|d| Value::String(d.replacen(CAPTURED_ROOT, &root, 1)))
                .collect();
            (kind, Value::Array(dirs))
        })
        .collect()
}

/// Folder kinds `/internal/folder_paths` has and `/experiment/models` leaves out, as captured.
const NOT_MODEL_FOLDERS: &[&str] = &["configs", "custom_nodes"];

/// `GET /experiment/models` in the captured shape (`GET__experiment__models.initial.json`):
/// `[{"name": kind, "folders": [dir, …]}]` for each kind of `/internal/folder_paths` but
/// `configs` and `custom_nodes`.
fn experiment_models(root: &std::path::Path) -> Value {
    let Value::Object(paths) = folder_paths(root) else {
        return json!([]);
    };
    paths
        .into_iter()
        .filter(|(kind, _)| !NOT_MODEL_FOLDERS.contains(&kind.as_str()))
        .map(|(kind, dirs)| json!({"name": kind, "folders": dirs}))
        .collect()
}

/// `GET /experiment/models/{folder}` in the captured shape
/// (`GET__experiment__models__checkpoints.final.json`): `[{"name", "pathIndex", "modified",
/// "created", "size"}]` for each file the loaders offer. A file that exists in one of the
/// folder's directories under `root` is listed with that directory's index and its real size;
/// any other with the memory model's size ([`model_file_bytes`]) in the first directory.
/// `None` for a kind `/experiment/models` does not list.
fn experiment_model_folder(root: &std::path::Path, folder: &str) -> Option<Vec<Value>> {
    // Fixed times (seconds since the epoch, as Python's os.stat gives them): the simulator's
    // files are not on a disk.
    const MODIFIED: f64 = 1_767_225_600.25;
    const CREATED: f64 = 1_767_225_600.5;
    if NOT_MODEL_FOLDERS.contains(&folder) {
        return None;
    }
    let paths = folder_paths(root);
    let dirs: Vec<&str> = paths
        .get(folder)?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let files = model_folder(folder).unwrap_or_default();
    Some(
        files
            .iter()
            .filter_map(Value::as_str)
            .map(|name| {
                let on_disk = dirs.iter().enumerate().find_map(|(i, dir)| {
                    std::fs::metadata(std::path::Path::new(dir).join(name))
                        .ok()
                        .filter(std::fs::Metadata::is_file)
                        .map(|m| (i, m.len()))
                });
                let (index, size) = on_disk.unwrap_or((0, model_file_bytes(folder, name)));
                json!({
                    "name": name,
                    "pathIndex": index,
                    "modified": MODIFIED,
                    "created": CREATED,
                    "size": size,
                })
            })
            .collect(),
    )
}

fn parse_body(req: &Request) -> Option<Value> {
    if req.body.is_empty() {
        return None;
    }
    serde_json::from_slice(&req.body).ok()
}

fn route(inst: &Arc<Instance>, req: &Request, path: &str) -> Response {
    let y2026 = inst.shared.config.profile == Profile::Y2026;
    if y2026 {
        if let Some(answer) = profile::jobs_route(inst, req) {
            return answer;
        }
    }
    let get = req.method == "GET";
    let post = req.method == "POST";
    let logs = !inst.shared.faults().no_internal_logs;
    match path {
        "/internal/logs/subscribe" if logs && req.method == "PATCH" => {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let Some(sid) = body.get("clientId").and_then(Value::as_str) else {
                return Response::internal_error();
            };
            let mut st = inst.lock();
            if body.get("enabled").and_then(Value::as_bool) == Some(true) {
                st.log_subscribers.entry(sid.to_string()).or_insert(false);
            } else {
                st.log_subscribers.remove(sid);
            }
            Response::empty_ok()
        }
        "/internal/logs/raw" if logs && get => {
            let st = inst.lock();
            let entries: Vec<Value> = st.log_ring.iter().cloned().collect();
            Response::json(
                200,
                &json!({"entries": entries, "size": super::state::log_size()}),
            )
        }
        "/internal/folder_paths" if get => {
            Response::json(200, &folder_paths(&inst.shared.config.models_root))
        }
        "/view" if get => view(inst, req),
        "/system_stats" if get => {
            let mut stats = system_stats(inst);
            if y2026 {
                profile::adjust_system_stats(&mut stats);
            }
            if let Some(hostile) = inst.shared.faults().hostile_text {
                for field in ["/system/comfyui_version", "/devices/0/name"] {
                    if let Some(v) = stats.pointer_mut(field) {
                        *v = json!(format!("{}{hostile}", v.as_str().unwrap_or_default()));
                    }
                }
            }
            Response::json(200, &stats)
        }
        "/features" if get && y2026 => Response::json(200, &profile::features()),
        "/features" if get => Response::json(200, &server_features()),
        "/embeddings" if get => Response::json(200, &json!([])),
        "/extensions" if get => {
            // Front-end scripts: only those of the packs the faults take away or add (core's
            // own and the other packs' are left out).
            let mut scripts = Vec::new();
            if !inst.shared.pack_removed() {
                scripts.push(super::REMOVED_PACK_SCRIPT.to_string());
            }
            if inst.shared.extra_pack() {
                scripts.push(format!("/extensions/{}/extra.js", super::EXTRA_PACK));
            }
            Response::json(200, &json!(scripts))
        }
        "/object_info"
            if get
                && (inst.shared.extra_pack()
                    || inst.shared.pack_removed()
                    || inst.shared.faults().hostile_text.is_some()
                    || y2026) =>
        {
            let mut all = inst.shared.defs().map.clone();
            if inst.shared.extra_pack() {
                all.extend(extra_pack_defs());
            }
            if let Some(hostile) = inst.shared.faults().hostile_text {
                all.extend(hostile_pack_defs(&hostile));
            }
            Response::json(200, &Value::Object(all))
        }
        "/object_info" if get => Response::new(
            200,
            Some("application/json; charset=utf-8"),
            object_info_body().to_vec(),
        ),
        "/models" if get => Response::json(200, &json!(MODEL_FOLDERS)),
        "/experiment/models" if inst.shared.faults().no_experiment_models => Response::not_found(),
        "/experiment/models" if get => {
            Response::json(200, &experiment_models(&inst.shared.config.models_root))
        }
        "/queue" if get && inst.shared.faults().queue_hides => {
            Response::json(200, &json!({"queue_running": [], "queue_pending": []}))
        }
        "/queue" if get => {
            let st = inst.lock();
            let running: Vec<Value> = st.running.iter().map(QueueItem::to_json).collect();
            let pending: Vec<Value> = st.pending.iter().map(QueueItem::to_json).collect();
            Response::json(
                200,
                &json!({"queue_running": running, "queue_pending": pending}),
            )
        }
        "/queue" if post => {
            let Some(body) = parse_body(req) else {
                return Response::internal_error();
            };
            let mut st = inst.lock();
            if body.get("clear").and_then(Value::as_bool) == Some(true) {
                st.pending.clear();
                st.broadcast_status();
            }
            if let Some(ids) = body.get("delete").and_then(Value::as_array) {
                for id in ids {
                    let id = py_str(id);
                    let before = st.pending.len();
                    st.pending.retain(|p| p.prompt_id != id);
                    if st.pending.len() != before {
                        st.broadcast_status();
                    }
                }
            }
            Response::empty_ok()
        }
        "/prompt" if get => {
            let st = inst.lock();
            Response::json(
                200,
                &json!({"exec_info": {"queue_remaining": st.queue_remaining()}}),
            )
        }
        "/prompt" if post => post_prompt(inst, req),
        "/history" if get => Response::json(200, &history(inst, req)),
        "/history" if post => {
            let Some(body) = parse_body(req) else {
                return Response::internal_error();
            };
            let mut st = inst.lock();
            if body.get("clear").and_then(Value::as_bool) == Some(true) {
                st.history.clear();
            }
            if let Some(ids) = body.get("delete").and_then(Value::as_array) {
                let ids: Vec<String> = ids.iter().map(py_str).collect();
                st.history.retain(|(k, _)| !ids.contains(k));
            }
            Response::empty_ok()
        }
        "/interrupt" if post => {
            let target = parse_body(req).and_then(|b| b.get("prompt_id").map(py_str));
            let mut st = inst.lock();
            match target {
                Some(id) => {
                    if st.running.as_ref().is_some_and(|r| r.prompt_id == id) {
                        st.interrupt = true;
                    }
                }
                None => st.interrupt = true,
            }
            Response::empty_ok()
        }
        "/free" if post => {
            let Some(body) = parse_body(req) else {
                return Response::internal_error();
            };
            let free = body.get("free_memory").and_then(Value::as_bool) == Some(true);
            let unload = body.get("unload_models").and_then(Value::as_bool) == Some(true);
            if free || unload {
                let mut st = inst.lock();
                let (u0, f0) = st.free_flags.unwrap_or((false, false));
                st.free_flags = Some((u0 || unload, f0 || free));
                drop(st);
                inst.wake.notify_one();
            }
            Response::empty_ok()
        }
        _ => {
            if let Some(class) = path.strip_prefix("/object_info/") {
                if !get {
                    return Response::method_not_allowed();
                }
                let extra = inst
                    .shared
                    .extra_pack()
                    .then(extra_pack_defs)
                    .and_then(|mut m| m.remove(class));
                return Response::json(
                    200,
                    &match inst.shared.defs().get(class).or(extra.as_ref()) {
                        Some(info) => json!({ class: info }),
                        None => json!({}),
                    },
                );
            }
            if let Some(folder) = path
                .strip_prefix("/experiment/models/")
                .filter(|_| !inst.shared.faults().no_experiment_models)
            {
                let root = &inst.shared.config.models_root;
                return match experiment_model_folder(root, folder) {
                    Some(list) if get => Response::json(200, &Value::Array(list)),
                    Some(_) => Response::method_not_allowed(),
                    None => Response::not_found_empty(),
                };
            }
            if let Some(folder) = path.strip_prefix("/models/") {
                return match model_folder(folder) {
                    Some(list) if get => Response::json(200, &Value::Array(list)),
                    Some(_) => Response::method_not_allowed(),
                    None => Response::not_found_empty(),
                };
            }
            if let Some(id) = path.strip_prefix("/history/") {
                if !get {
                    return Response::method_not_allowed();
                }
                if inst.shared.faults().history_500 {
                    return Response::internal_error();
                }
                let st = inst.lock();
                let found = st.history.iter().find(|(k, _)| k == id);
                release_held(&st, found.map(|(_, v)| v));
                return Response::json(
                    200,
                    &match found {
                        Some((k, v)) => json!({ k: v }),
                        None => json!({}),
                    },
                );
            }
            let known = [
                "/system_stats",
                "/features",
                "/object_info",
                "/models",
                "/experiment/models",
                "/queue",
                "/prompt",
                "/history",
                "/interrupt",
                "/free",
                "/embeddings",
                "/extensions",
                "/ws",
            ];
            if known.contains(&path) {
                Response::method_not_allowed()
            } else {
                Response::not_found()
            }
        }
    }
}

/// `GET /view?filename=&subfolder=&type=`: the file the simulated node wrote, its container
/// built by `sim/media.rs` (real structure, no pixels). Like aiohttp's `FileResponse` in the
/// capture (`tests/fixtures/comfyui-outputs/range.json`): `Content-Disposition: filename="…"`;
/// `Accept-Ranges: bytes` on every 200 and 206; `Range: bytes=a-b`, `bytes=a-` or `bytes=-n` answers 206 with `Content-Range:
/// bytes s-e/size`; a range starting past the end answers 416 with `Content-Range: bytes
/// */size`. With `channel` or `preview` (a re-encoded image) the Range is ignored and there is
/// no `Accept-Ranges`.
fn view(inst: &Arc<Instance>, req: &Request) -> Response {
    let q = |k: &str| req.query.get(k).cloned().unwrap_or_default();
    let kind = if q("type").is_empty() {
        "output".to_string()
    } else {
        q("type")
    };
    let key = format!("{kind}/{}/{}", q("subfolder"), q("filename"));
    let file = inst.lock().files.get(&key).copied();
    let Some((content_type, body)) =
        file.and_then(|f| super::media::file_bytes(&q("filename"), &f))
    else {
        return Response::not_found();
    };
    let reencoded = req.query.contains_key("channel") || req.query.contains_key("preview");
    let ranges = !reencoded && !inst.shared.faults().no_range;
    let size = body.len() as u64;
    let range = match req.header("range") {
        Some(r) if ranges => parse_range(r, size),
        _ => None,
    };
    let mut headers = vec![(
        "content-disposition",
        format!("filename=\"{}\"", q("filename")),
    )];
    if ranges && range != Some(None) {
        headers.push(("accept-ranges", "bytes".to_string()));
    }
    match range {
        None => Response {
            status: 200,
            content_type: Some(content_type),
            headers,
            body,
        },
        Some(None) => {
            headers.push(("content-range", format!("bytes */{size}")));
            Response {
                status: 416,
                content_type: Some(content_type),
                headers,
                body: Vec::new(),
            }
        }
        Some(Some((start, end))) => {
            headers.push(("content-range", format!("bytes {start}-{end}/{size}")));
            Response {
                status: 206,
                content_type: Some(content_type),
                headers,
                body: body[start as usize..=end as usize].to_vec(),
            }
        }
    }
}

/// One `bytes=` range of a file of `size` bytes: `None` when the header is not a single byte
/// range (served whole), `Some(None)` when it is not satisfiable (416), else the inclusive
/// first and last byte.
fn parse_range(header: &str, size: u64) -> Option<Option<(u64, u64)>> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        (size.saturating_sub(n), size.saturating_sub(1))
    } else {
        let start: u64 = a.parse().ok()?;
        let end = if b.is_empty() {
            size.saturating_sub(1)
        } else {
            b.parse::<u64>().ok()?.min(size.saturating_sub(1))
        };
        (start, end)
    };
    if start >= size || end < start {
        return Some(None);
    }
    Some(Some((start, end)))
}

fn system_stats(inst: &Instance) -> Value {
    let cfg = &inst.shared.config;
    let mut st = inst.lock();
    st.stats_served += 1;
    let ram_free = if st.ram_exhausted {
        // What psutil reports as available on a machine the OOM killer is about to act on.
        (cfg.ram_bytes / 256).min(64 * super::MIB)
    } else {
        cfg.ram_bytes.saturating_sub(st.host_ram_used())
    };
    let gpu = &st.gpu;
    let port = inst.shared.addr.port().to_string();
    let mut argv = vec![
        "main.py".to_string(),
        "--listen".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port,
        "--disable-auto-launch".into(),
    ];
    let launch = &cfg.launch;
    argv.extend(launch.args.iter().cloned());
    if let Some(own) = &cfg.process_argv {
        argv = own.clone();
    }
    if inst.shared.lowvram() && !launch.args.iter().any(|a| a == "--lowvram") {
        argv.push("--lowvram".into());
    }
    json!({
        "system": {
            "os": "posix",
            "ram_total": cfg.ram_bytes,
            "ram_free": ram_free,
            "comfyui_version": "0.3.64",
            "required_frontend_version": "1.27.10",
            "installed_templates_version": "0.1.95",
            "required_templates_version": "0.1.95",
            "python_version": "3.11.7 (main, May  9 2026, 07:35:25) [GCC 12.2.0]",
            "pytorch_version": "2.15.0+cu132",
            "embedded_python": false,
            "argv": argv
        },
        "devices": [{
            "name": format!("cuda:0 Simulated GPU : {}", cfg.allocator.backend_name()),
            "type": "cuda",
            "index": 0,
            "vram_total": cfg.vram_bytes,
            "vram_free": gpu.free(),
            "torch_vram_total": gpu.reserved(),
            "torch_vram_free": gpu.reserved() - gpu.allocated()
        }]
    })
}

fn history(inst: &Instance, req: &Request) -> Value {
    let st = inst.lock();
    let len = st.history.len();
    let max_items = req
        .query
        .get("max_items")
        .and_then(|v| v.parse::<usize>().ok());
    let offset = req.query.get("offset").and_then(|v| v.parse::<i64>().ok());
    let (start, count) = match (max_items, offset) {
        (Some(n), None) | (Some(n), Some(-1)) => (len.saturating_sub(n), n),
        (Some(n), Some(o)) => (o.max(0) as usize, n),
        (None, Some(o)) => (o.max(0) as usize, len),
        (None, None) => (0, len),
    };
    let mut out = serde_json::Map::new();
    for (k, v) in st.history.iter().skip(start).take(count) {
        out.insert(k.clone(), v.clone());
    }
    release_held(&st, out.values());
    Value::Object(out)
}

fn post_prompt(inst: &Arc<Instance>, req: &Request) -> Response {
    // ComfyUI logs this first thing in the handler, before reading the body.
    inst.lock().log("got prompt\n");
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(_) => return Response::internal_error(),
    };
    inst.shared.record_submission(body.clone());
    if inst.shared.faults().prompt_500 {
        return Response::internal_error();
    }
    let Some(obj) = body.as_object() else {
        return Response::internal_error();
    };
    // The number is taken before validation: a rejected prompt uses one up too.
    let number: Value = {
        let mut st = inst.lock();
        match obj.get("number") {
            Some(n) => match n
                .as_f64()
                .or_else(|| n.as_str().and_then(|s| s.parse().ok()))
            {
                Some(f) => json!(f),
                None => return Response::internal_error(),
            },
            None => {
                let mut n = st.number;
                if obj.get("front").and_then(Value::as_bool) == Some(true) {
                    n = -n;
                }
                st.number += 1;
                json!(n)
            }
        }
    };
    let y2026 = inst.shared.config.profile == Profile::Y2026;
    if obj.contains_key("prompt") && y2026 {
        if let Some(rejection) = profile::reject_prompt_id(obj.get("prompt_id")) {
            return rejection;
        }
    }
    let Some(prompt) = obj.get("prompt") else {
        return Response::json(
            400,
            &json!({"error": {"type": "no_prompt", "message": "No prompt provided", "details": "No prompt provided", "extra_info": {}}, "node_errors": {}}),
        );
    };
    let Some(prompt) = prompt.as_object() else {
        return Response::internal_error();
    };
    // A late server rewrites retired classes before it validates (what runs is stored).
    let replaced;
    let prompt = if y2026 {
        let defs = inst.shared.defs();
        replaced = profile::apply_node_replacements(prompt, |c| defs.map.contains_key(c));
        &replaced
    } else {
        prompt
    };
    let targets: Option<Vec<String>> = obj
        .get("partial_execution_targets")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(py_str).collect());
    // A loaded extra pack's classes are installed: their prompts validate (and run).
    let with_pack;
    let defs = if inst.shared.extra_pack() {
        with_pack = inst.shared.defs().with_classes(extra_pack_defs());
        &with_pack
    } else {
        inst.shared.defs()
    };
    let verdict = validate::validate(prompt, targets.as_deref(), defs);
    let (prompt, outputs, node_errors) = match verdict {
        Verdict::Reject(body) => {
            inst.lock()
                .log(&format!("invalid prompt: {}\n", body["error"]));
            return Response::json(400, &body);
        }
        Verdict::Accept {
            prompt,
            outputs,
            node_errors,
        } => (prompt, outputs, node_errors),
    };
    let prompt_id = match obj.get("prompt_id") {
        _ if inst.shared.faults().foreign_prompt_id => format!("job-{number}"),
        Some(Value::Null) | None => uuid::Uuid::new_v4().to_string(),
        Some(v) => py_str(v),
    };
    let mut extra_data = obj
        .get("extra_data")
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(cid) = obj.get("client_id") {
        extra_data["client_id"] = cid.clone();
    }
    if y2026 {
        // From 0.8.0 the queued item's extra_data carries its creation time in ms.
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        extra_data["create_time"] = json!(ms);
    }
    let sort = number.as_f64().unwrap_or(0.0);
    let item = QueueItem {
        number: number.clone(),
        sort,
        prompt_id: prompt_id.clone(),
        prompt: Value::Object(prompt),
        extra_data,
        outputs,
    };
    {
        let mut st = inst.lock();
        st.pending.push(item);
        st.broadcast_status();
    }
    inst.wake.notify_one();
    Response::json(
        200,
        &json!({"prompt_id": prompt_id, "number": number, "node_errors": node_errors}),
    )
}
