//! Shared pieces of the client benchmarks (`client_overhead`, `footprint`): a workflow the
//! simulator runs, order statistics, the machine's load, and [`WsTap`], a loopback TCP relay
//! between the tool and the simulator that timestamps the server's WebSocket frames as they
//! leave the server and can inject ComfyUI-style binary preview frames.
//!
//! The relay exists only for measurement: the simulator does not expose when it sent a frame,
//! so the relay reads the server's bytes, parses WebSocket frames (server frames are never
//! masked), notes the instant it saw `executing {node: null}` (ComfyUI's terminal event for a
//! prompt) and forwards the bytes unchanged. Its own forwarding cost therefore counts *against*
//! the tool in the detection delay (the measured delay is an upper bound).

#![allow(dead_code)] // each bench uses a different subset

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// SD1.5 txt2img (loader 4, prompts 6/7, latent 5, sampler 3, decode 8, save 9) that the
/// simulator runs to success at 512×512.
pub fn sd15(width: u64, height: u64, steps: u64, seed: u64) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "random_sd15.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a lighthouse"}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "blurry"}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": width, "height": height, "batch_size": 1}},
        "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0],
            "latent_image": ["5", 0], "seed": seed, "steps": steps, "cfg": 7.0, "sampler_name": "euler",
            "scheduler": "normal", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "bench"}}
    })
}

/// Median and 99th percentile (nearest rank) of `v`, plus min and max.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

pub fn stats(v: &[f64]) -> Stats {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return Stats {
            n,
            min: f64::NAN,
            median: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
        };
    }
    let rank = |p: f64| s[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Stats {
        n,
        min: s[0],
        median,
        p99: rank(0.99),
        max: s[n - 1],
    }
}

/// Median of `v`.
pub fn median(v: &[f64]) -> f64 {
    stats(v).median
}

/// Milliseconds between two instants (negative if `b` is before `a`).
pub fn ms(a: Instant, b: Instant) -> f64 {
    if b >= a {
        (b - a).as_secs_f64() * 1e3
    } else {
        -((a - b).as_secs_f64() * 1e3)
    }
}

/// `/proc/loadavg` (1, 5, 15 min) and the number of cores, for the report.
pub fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let parts: Vec<&str> = avg.split_whitespace().take(3).collect();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("load average {} on {cores} cores", parts.join(" "))
}

/// CPU model name from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// What the relay saw leave the server.
#[derive(Debug, Clone, Default)]
pub struct TapLog {
    /// prompt_id → instant the server's `executing {node: null}` frame was read.
    pub terminal: Vec<(String, Instant)>,
    /// prompt_id → instant the server's first frame naming the prompt was read.
    pub first: Vec<(String, Instant)>,
    /// Instants a `POST /prompt` request line passed on its way to the server, in order.
    pub posts: Vec<Instant>,
    /// Text frames relayed.
    pub text_frames: u64,
    /// Binary frames injected.
    pub injected_frames: u64,
    /// Bytes injected.
    pub injected_bytes: u64,
}

impl TapLog {
    pub fn terminal_of(&self, prompt_id: &str) -> Option<Instant> {
        self.terminal
            .iter()
            .find(|(p, _)| p == prompt_id)
            .map(|(_, t)| *t)
    }
    pub fn first_of(&self, prompt_id: &str) -> Option<Instant> {
        self.first
            .iter()
            .find(|(p, _)| p == prompt_id)
            .map(|(_, t)| *t)
    }
}

/// Binary preview frames to add after each `progress` text frame (what ComfyUI sends with a
/// live preview method: event type 1, image type 1 = JPEG, then the image bytes).
#[derive(Debug, Clone, Copy)]
pub struct Previews {
    /// Frames per `progress` event.
    pub per_progress: u32,
    /// Bytes per frame (including the 8-byte header).
    pub frame_bytes: usize,
}

/// A running relay.
pub struct WsTap {
    pub addr: SocketAddr,
    pub log: Arc<Mutex<TapLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl WsTap {
    /// Starts a relay on a free loopback port in front of `upstream`.
    pub async fn start(upstream: SocketAddr, previews: Option<Previews>) -> WsTap {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let addr = listener.local_addr().expect("relay addr");
        let log = Arc::new(Mutex::new(TapLog::default()));
        let shared = log.clone();
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let log = shared.clone();
                tokio::spawn(async move {
                    if let Ok(up) = TcpStream::connect(upstream).await {
                        relay(down, up, log, previews).await;
                    }
                });
            }
        });
        WsTap { addr, log, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn log(&self) -> TapLog {
        self.log.lock().expect("tap log").clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

async fn relay(
    down: TcpStream,
    up: TcpStream,
    log: Arc<Mutex<TapLog>>,
    previews: Option<Previews>,
) {
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (mut down_r, mut down_w) = down.into_split();
    let (mut up_r, mut up_w) = up.into_split();
    let posts_log = log.clone();
    let to_server = tokio::spawn(async move {
        // Client → server bytes pass unchanged; a chunk that starts a `POST /prompt` request is
        // timestamped (requests on one connection come one after the other).
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = match down_r.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let head = &chunk[..n];
            if head.starts_with(b"POST /prompt ") || head.starts_with(b"POST /api/prompt ") {
                posts_log
                    .lock()
                    .expect("tap log")
                    .posts
                    .push(Instant::now());
            }
            if up_w.write_all(head).await.is_err() {
                break;
            }
        }
        let _ = up_w.shutdown().await;
    });
    let preview = previews.map(|p| preview_frame(p.frame_bytes));
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    // None until the first response decides: Some(true) = WebSocket, Some(false) = plain HTTP.
    let mut websocket: Option<bool> = None;
    loop {
        let n = match up_r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let now = Instant::now();
        if websocket == Some(false) {
            if down_w.write_all(&chunk[..n]).await.is_err() {
                break;
            }
            continue;
        }
        buf.extend_from_slice(&chunk[..n]);
        if websocket.is_none() {
            if buf.len() < 12 {
                continue;
            }
            if !buf.starts_with(b"HTTP/1.1 101") {
                websocket = Some(false);
                if down_w.write_all(&buf).await.is_err() {
                    break;
                }
                buf.clear();
                continue;
            }
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            websocket = Some(true);
            let head: Vec<u8> = buf.drain(..end + 4).collect();
            if down_w.write_all(&head).await.is_err() {
                break;
            }
        }
        // Forward every complete frame; keep a partial one for the next read.
        let mut out: Vec<u8> = Vec::new();
        let mut injected: Vec<u8> = Vec::new();
        let mut used = 0;
        while let Some((header, len)) = frame_len(&buf[used..]) {
            if buf.len() - used < header + len {
                break;
            }
            let opcode = buf[used] & 0x0f;
            let payload = &buf[used + header..used + header + len];
            out.extend_from_slice(&buf[used..used + header + len]);
            if opcode == 1 {
                let progress = note_text(payload, now, &log);
                if let (true, Some(p), Some(frame)) = (progress, previews, preview.as_ref()) {
                    for _ in 0..p.per_progress {
                        injected.extend_from_slice(frame);
                    }
                    let mut l = log.lock().expect("tap log");
                    l.injected_frames += u64::from(p.per_progress);
                    l.injected_bytes += u64::from(p.per_progress) * frame.len() as u64;
                }
                if !injected.is_empty() {
                    out.append(&mut injected);
                }
            }
            used += header + len;
        }
        buf.drain(..used);
        if !out.is_empty() && down_w.write_all(&out).await.is_err() {
            break;
        }
    }
    let _ = down_w.shutdown().await;
    to_server.abort();
}

/// Header length and payload length of the (unmasked) frame at the start of `b`.
fn frame_len(b: &[u8]) -> Option<(usize, usize)> {
    if b.len() < 2 {
        return None;
    }
    let masked = b[1] & 0x80 != 0;
    let mask = if masked { 4 } else { 0 };
    match b[1] & 0x7f {
        126 => {
            if b.len() < 4 {
                return None;
            }
            Some((4 + mask, u16::from_be_bytes([b[2], b[3]]) as usize))
        }
        127 => {
            if b.len() < 10 {
                return None;
            }
            let mut l = [0u8; 8];
            l.copy_from_slice(&b[2..10]);
            Some((10 + mask, u64::from_be_bytes(l) as usize))
        }
        n => Some((2 + mask, n as usize)),
    }
}

/// Records first/terminal frames of each prompt; true for a `progress` frame.
fn note_text(payload: &[u8], now: Instant, log: &Mutex<TapLog>) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(payload) else {
        return false;
    };
    let kind = v["type"].as_str().unwrap_or("");
    let data = &v["data"];
    let mut l = log.lock().expect("tap log");
    l.text_frames += 1;
    if let Some(pid) = data["prompt_id"].as_str() {
        if !l.first.iter().any(|(p, _)| p == pid) {
            l.first.push((pid.to_string(), now));
        }
        if kind == "executing" && data["node"].is_null() {
            l.terminal.push((pid.to_string(), now));
        }
    }
    kind == "progress"
}

/// One binary WebSocket frame: `[0,0,0,1]` (PREVIEW_IMAGE), `[0,0,0,1]` (JPEG), then filler.
fn preview_frame(bytes: usize) -> Vec<u8> {
    let bytes = bytes.max(8);
    let mut payload = vec![0u8, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xd8, 0xff, 0xe0];
    payload.truncate(bytes.min(payload.len()));
    payload.resize(bytes, 0x5a);
    let mut frame = vec![0x82u8];
    match bytes {
        0..=125 => frame.push(bytes as u8),
        126..=65535 => {
            frame.push(126);
            frame.extend((bytes as u16).to_be_bytes());
        }
        _ => {
            frame.push(127);
            frame.extend((bytes as u64).to_be_bytes());
        }
    }
    frame.extend(payload);
    frame
}

/// Waits until `url` answers HTTP (bounded).
pub fn wait_http(addr: SocketAddr, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
