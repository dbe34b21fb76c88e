//! Helpers shared by the simulator tests: a plain WebSocket + HTTP client and fixture readers,
//! and for the tests that drive the simulator through comfy-bisect's own client: an SD1.5
//! prompt, that client, and a run request with limits sized for tests.

use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::run::RunRequest;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::{start, SimConfig, SimHandle};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const FIXTURES: &str = "tests/fixtures/comfyui";

pub async fn sim(config: SimConfig) -> SimHandle {
    start(config, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// SD1.5 txt2img with the simulator's SD1.5 checkpoint: loader 4, prompts 6/7, latent 5
/// (`width`×`height`, `batch`), sampler 3 (`steps`), decode 8, save 9.
pub fn sd15(width: u64, height: u64, batch: u64, steps: u64) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a lighthouse"}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "blurry"}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": width, "height": height, "batch_size": batch}},
        "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0],
            "latent_image": ["5", 0], "seed": 1, "steps": steps, "cfg": 7.0, "sampler_name": "euler",
            "scheduler": "normal", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "test"}}
    })
}

/// comfy-bisect's client for `sim`.
pub fn client(sim: &SimHandle) -> Client {
    Client::new(&sim.base_url(), ExtraHeaders::new()).unwrap()
}

/// A run request for the prompt `v` with limits sized for tests (every loop stays bounded in
/// time).
pub fn run_request(v: &Value) -> RunRequest {
    let mut r = RunRequest::new(Workflow::from_json_str(&v.to_string(), "test.json").unwrap());
    r.sample_interval = Duration::from_millis(50);
    r.poll_interval = Duration::from_millis(100);
    r.reconnect_window = Duration::from_secs(2);
    r.interrupt_grace = Duration::from_secs(5);
    r.settle = Duration::from_millis(20);
    r.timeout = Duration::from_secs(60);
    r.stall_timeout = Duration::from_secs(60);
    r.queue_timeout = Duration::from_secs(60);
    r
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

pub struct Ws {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub client_id: String,
    /// Binary frames seen (type, length).
    pub binary: Vec<Vec<u8>>,
    /// Non-JSON text frames seen.
    pub garbage: Vec<String>,
}

impl Ws {
    pub async fn connect(base: &str, client_id: &str) -> Ws {
        let url = format!(
            "{}/ws?clientId={client_id}",
            base.replace("http://", "ws://")
        );
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut w = Ws {
            ws,
            client_id: client_id.to_string(),
            binary: Vec::new(),
            garbage: Vec::new(),
        };
        let first = w.next_json().await.expect("first frame");
        assert_eq!(first["type"], "status");
        assert_eq!(first["data"]["sid"], client_id);
        w
    }

    pub async fn send_text(&mut self, text: &str) {
        self.ws.send(Message::Text(text.to_string())).await.unwrap();
    }

    /// Next JSON text frame (binary and garbage frames are recorded and skipped); None when
    /// the socket closed or nothing arrived for 10 s.
    pub async fn next_json(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), self.ws.next())
                .await
                .ok()??;
            match msg {
                Ok(Message::Text(t)) => match serde_json::from_str(&t) {
                    Ok(v) => return Some(v),
                    Err(_) => self.garbage.push(t),
                },
                Ok(Message::Binary(b)) => self.binary.push(b),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Frames until `executing {node: null}` for `prompt_id` (inclusive).
    pub async fn until_done(&mut self, prompt_id: &str) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(m) = self.next_json().await {
            let done = m["type"] == "executing"
                && m["data"]["node"].is_null()
                && m["data"]["prompt_id"] == prompt_id;
            out.push(m);
            if done {
                return out;
            }
        }
        panic!("socket ended before prompt {prompt_id} finished; got {out:?}");
    }
}

pub async fn post_prompt(base: &str, body: &Value) -> (u16, Value) {
    let r = http()
        .post(format!("{base}/prompt"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub async fn get(base: &str, path: &str) -> (u16, Value) {
    let r = http().get(format!("{base}{path}")).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub async fn post(base: &str, path: &str, body: &Value) -> (u16, String) {
    let r = http()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Polls `/history/{id}` until the entry appears (bounded).
pub async fn history_entry(base: &str, id: &str) -> Value {
    for _ in 0..200 {
        let (_, h) = get(base, &format!("/history/{id}")).await;
        if let Some(e) = h.get(id) {
            return e.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no history for {id}");
}

/// The last of a history entry's `status.messages` (`[type, data]`): its terminal event.
pub fn last_history_message(entry: &Value) -> Value {
    entry["status"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone()
}

pub fn types(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .map(|m| m["type"].as_str().unwrap().to_string())
        .collect()
}

/// One captured run: the POST body and the types of the text frames the client received from
/// its POST until `executing {node: null}` for that prompt.
pub struct CapturedRun {
    pub body: Value,
    pub types: Vec<String>,
    pub frames: Vec<Value>,
}

pub fn captured_runs(file: &str) -> Vec<CapturedRun> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
    let mut runs: Vec<CapturedRun> = Vec::new();
    let mut open: Option<(Value, Vec<Value>, Option<String>)> = None;
    for line in text.lines() {
        let ev: Value = serde_json::from_str(line).unwrap();
        if ev.get("header").is_some() {
            continue;
        }
        if ev["channel"] == "http"
            && ev["dir"] == "request"
            && ev["method"] == "POST"
            && ev["path"] == "/prompt"
        {
            open = Some((ev["body"].clone(), Vec::new(), None));
            continue;
        }
        if ev["channel"] == "http" && ev["dir"] == "response" && ev["path"] == "/prompt" {
            if let Some(o) = open.as_mut() {
                o.2 = ev["body"]["prompt_id"].as_str().map(str::to_string);
            }
            continue;
        }
        if ev["channel"] == "ws" && ev["dir"] == "in" && ev["kind"] == "text" {
            if let Some(o) = open.as_mut() {
                let m = ev["json"].clone();
                let done = m["type"] == "executing"
                    && m["data"]["node"].is_null()
                    && o.2.as_deref().is_some_and(|p| m["data"]["prompt_id"] == p);
                o.1.push(m);
                if done {
                    let (body, frames, _) = open.take().unwrap();
                    runs.push(CapturedRun {
                        body,
                        types: types(&frames),
                        frames,
                    });
                }
            }
        }
    }
    runs
}

/// The captured body with our client id.
pub fn with_client(body: &Value, client_id: &str) -> Value {
    let mut b = body.clone();
    b["client_id"] = json!(client_id);
    b
}
