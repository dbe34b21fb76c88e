//! The simulator against the real captures: message order and fields, history, queue,
//! validation responses, routes with and without `/api`, /free and the node-output cache.

use crate::sim_support::*;
use comfy_bisect_sim::{Faults, SimConfig};
use serde_json::{json, Value};

fn progress_state_free(types: &[String]) -> Vec<String> {
    types
        .iter()
        .filter(|t| t.as_str() != "progress_state")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_runs_replay_the_captured_message_sequences() {
    // ws_core_success, then ws_core_cached's identical and partially changed resubmissions.
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "ce07c832-18f6-4705-98ad-8c33c4f02a6b").await;
    let mut captured = captured_runs("ws_core_success.ndjson");
    captured.extend(captured_runs("ws_core_cached.ndjson"));
    assert_eq!(captured.len(), 3);
    for run in &captured {
        let (status, resp) = post_prompt(&base, &with_client(&run.body, &ws.client_id)).await;
        assert_eq!(status, 200, "{resp}");
        assert_eq!(resp["node_errors"], json!({}));
        let pid = resp["prompt_id"].as_str().unwrap().to_string();
        let msgs = ws.until_done(&pid).await;
        assert_eq!(
            types(&msgs),
            run.types,
            "message sequence differs from the capture"
        );
        // Same fields on every frame type, same cached/executed nodes.
        for (got, want) in msgs.iter().zip(&run.frames) {
            let keys = |v: &Value| -> Vec<String> {
                v["data"]
                    .as_object()
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default()
            };
            assert_eq!(keys(got), keys(want), "fields of {}", got["type"]);
            match got["type"].as_str().unwrap() {
                "execution_cached" => assert_eq!(got["data"]["nodes"], want["data"]["nodes"]),
                "executing" | "executed" => {
                    assert_eq!(got["data"]["node"], want["data"]["node"])
                }
                "progress_state" => {
                    let nodes = |v: &Value| -> Vec<(String, String)> {
                        v["data"]["nodes"]
                            .as_object()
                            .unwrap()
                            .iter()
                            .map(|(k, n)| (k.clone(), n["state"].as_str().unwrap().to_string()))
                            .collect()
                    };
                    assert_eq!(nodes(got), nodes(want));
                }
                _ => {}
            }
        }
        let entry = history_entry(&base, &pid).await;
        assert_eq!(entry["status"]["status_str"], "success");
        assert_eq!(entry["status"]["completed"], true);
        let kinds: Vec<&str> = entry["status"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m[0].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["execution_start", "execution_cached", "execution_success"]
        );
        assert_eq!(entry["prompt"][1], pid);
        assert_eq!(entry["prompt"][4], json!(["3", "4"]));
        assert!(entry["outputs"]["3"]["images"][0]["filename"]
            .as_str()
            .unwrap()
            .starts_with("fixture_core_"));
        assert_eq!(entry["outputs"]["4"]["images"][0]["type"], "temp");
        assert_eq!(entry["meta"]["3"]["display_node"], "3");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sd15_lora_upscale_run_has_the_captured_shape() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "d3fc7e93").await;
    let run = captured_runs("ws_sd15_lora_upscale.ndjson").remove(0);
    // The capture ran with the checkpoint already cached; the simulator starts cold, so compare
    // everything but the cached loader's frames.
    let mut body = with_client(&run.body, &ws.client_id);
    for (_, n) in body["prompt"].as_object_mut().unwrap() {
        if n["class_type"] == "CheckpointLoaderSimple" {
            n["inputs"]["ckpt_name"] = json!("v1-5-pruned-emaonly-fp16.safetensors");
        }
        if n["class_type"] == "LoraLoader" {
            n["inputs"]["lora_name"] = json!("sd15/add_detail.safetensors");
        }
        if n["class_type"] == "UpscaleModelLoader" {
            n["inputs"]["model_name"] = json!("RealESRGAN_x2plus.pth");
        }
    }
    let (status, resp) = post_prompt(&base, &body).await;
    assert_eq!(status, 200, "{resp}");
    let pid = resp["prompt_id"].as_str().unwrap().to_string();
    let msgs = ws.until_done(&pid).await;
    let got = progress_state_free(&types(&msgs));
    let mut want = progress_state_free(&run.types);
    // Node 4 was cached in the capture: one more executing frame here.
    let pos = want.iter().position(|t| t == "executing").unwrap();
    want.insert(pos, "executing".into());
    assert_eq!(got, want);
    let progress: Vec<(Value, Value)> = msgs
        .iter()
        .filter(|m| m["type"] == "progress" && m["data"]["node"] == "3")
        .map(|m| (m["data"]["value"].clone(), m["data"]["max"].clone()))
        .collect();
    assert_eq!(progress, vec![(json!(1), json!(2)), (json!(2), json!(2))]);
    let entry = history_entry(&base, &pid).await;
    assert_eq!(entry["outputs"].as_object().unwrap().len(), 2);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_responses_match_the_captured_cases() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/post_prompt_validation_errors.json")).unwrap(),
    )
    .unwrap();
    for case in fixture["cases"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        if let Some(raw) = case["request_raw_body"].as_str() {
            let r = http()
                .post(format!("{base}/prompt"))
                .body(raw.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 500, "{name}");
            assert_eq!(
                r.text().await.unwrap(),
                case["response_text"].as_str().unwrap(),
                "{name}"
            );
            continue;
        }
        let (status, body) = post_prompt(&base, &case["request_body"]).await;
        assert_eq!(
            status,
            case["status"].as_u64().unwrap() as u16,
            "{name}: {body}"
        );
        let want = &case["response_body"];
        if status == 400 {
            assert_eq!(body, *want, "{name}");
        } else {
            assert_eq!(body["node_errors"], want["node_errors"], "{name}");
            let pid = body["prompt_id"].as_str().unwrap();
            let entry = history_entry(&base, pid).await;
            if let Some(h) = case.get("history") {
                let captured = h.as_object().unwrap().values().next().unwrap();
                // Coerced values are written back into the stored prompt.
                assert_eq!(entry["prompt"][2], captured["prompt"][2], "{name}");
                assert_eq!(entry["prompt"][4], captured["prompt"][4], "{name}");
            }
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_paths_have_the_captured_shape_and_no_api_prefix() {
    let sim = sim(SimConfig::default().with_models_root("/srv/comfy")).await;
    let base = sim.base_url();
    let (s, paths) = get(&base, "/internal/folder_paths").await;
    assert_eq!(s, 200);
    let captured: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{FIXTURES}/GET__internal__folder_paths.initial.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let (got, want) = (paths.as_object().unwrap(), captured.as_object().unwrap());
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (kind, dirs) in want {
        let moved: Vec<Value> = dirs
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                json!(d
                    .as_str()
                    .unwrap()
                    .replace("/home/user/ComfyUI", "/srv/comfy"))
            })
            .collect();
        assert_eq!(got[kind], json!(moved), "{kind}");
    }
    // As captured: the /internal sub-app is not served under /api.
    assert_eq!(get(&base, "/api/internal/folder_paths").await.0, 404);
}

fn captured(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap()).unwrap()
}

/// The JSON type of each field, in order: the shape a client parses.
fn field_types(entry: &Value) -> Vec<(String, &'static str)> {
    entry
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let t = match v {
                Value::String(_) => "string",
                Value::Number(n) if n.is_u64() => "integer",
                Value::Number(_) => "float",
                Value::Array(_) => "array",
                _ => "other",
            };
            (k.clone(), t)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn experiment_models_have_the_captured_shape() {
    let comfy = tempfile::tempdir().unwrap();
    let sim = sim(SimConfig::default().with_models_root(comfy.path())).await;
    let base = sim.base_url();
    // The folder kinds with their directories, as captured (install folder moved).
    let (s, kinds) = get(&base, "/experiment/models").await;
    assert_eq!(s, 200);
    let want = captured("GET__experiment__models.initial.json");
    // The root as it stands inside a JSON string (a Windows path's backslashes escaped).
    let root = serde_json::to_string(comfy.path().to_str().unwrap()).unwrap();
    let moved: Value = serde_json::from_str(
        &serde_json::to_string(&want)
            .unwrap()
            .replace("/home/user/ComfyUI", root.trim_matches('"')),
    )
    .unwrap();
    assert_eq!(kinds, moved);
    assert_eq!(get(&base, "/api/experiment/models").await.1, moved);

    // Each file with the captured fields and types, in the captured order.
    let want = captured("GET__experiment__models__checkpoints.final.json");
    let want = field_types(&want[0]);
    let (s, files) = get(&base, "/experiment/models/checkpoints").await;
    assert_eq!(s, 200);
    let files = files.as_array().unwrap();
    assert!(!files.is_empty());
    for f in files {
        assert_eq!(field_types(f), want, "{f}");
        assert_eq!(f["pathIndex"], 0, "{f}");
        assert!(
            f["size"].as_u64().unwrap() > 1 << 30,
            "a checkpoint is gigabytes: {f}"
        );
    }
    // A file that is in one of the folder's directories is listed with that directory and
    // its real size.
    let name = files[0]["name"].as_str().unwrap().to_string();
    let second = comfy.path().join("output").join("checkpoints");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join(&name), b"twelve bytes").unwrap();
    let (_, files) = get(&base, "/experiment/models/checkpoints").await;
    let f = files
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name.as_str())
        .unwrap();
    assert_eq!(
        (&f["pathIndex"], &f["size"]),
        (&json!(1), &json!(12)),
        "{f}"
    );
    // Kinds /experiment/models leaves out, and unknown ones: 404 with an empty body.
    for folder in ["configs", "custom_nodes", "no_such_folder"] {
        let (s, body) = get(&base, &format!("/experiment/models/{folder}")).await;
        assert_eq!((s, body), (404, json!("")), "{folder}");
    }
    sim.shutdown().await;

    // An older server (or a proxy) without the routes.
    let older = crate::sim_support::sim(
        SimConfig::default().with_faults(Faults::default().with_no_experiment_models()),
    )
    .await;
    let base = older.base_url();
    assert_eq!(get(&base, "/experiment/models").await.0, 404);
    assert_eq!(get(&base, "/experiment/models/checkpoints").await.0, 404);
    assert_eq!(get(&base, "/models/checkpoints").await.0, 200);
    older.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_answer_with_and_without_the_api_prefix() {
    let sim = sim(SimConfig::default().with_vram_gib(12)).await;
    let base = sim.base_url();
    for prefix in ["", "/api"] {
        let (s, stats) = get(&base, &format!("{prefix}/system_stats")).await;
        assert_eq!(s, 200);
        let dev = &stats["devices"][0];
        assert_eq!(dev["type"], "cuda");
        assert_eq!(dev["index"], 0);
        assert!(dev["name"]
            .as_str()
            .unwrap()
            .starts_with("cuda:0 Simulated GPU : "));
        assert_eq!(dev["vram_total"], json!(12u64 << 30));
        assert_eq!(stats["system"]["comfyui_version"], "0.3.64");
        assert!(!stats["system"]["argv"]
            .as_array()
            .unwrap()
            .contains(&json!("--lowvram")));
        let (_, features) = get(&base, &format!("{prefix}/features")).await;
        let captured: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{FIXTURES}/GET__features.final.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(features, captured);
        assert_eq!(
            get(&base, &format!("{prefix}/queue")).await.1,
            json!({"queue_running": [], "queue_pending": []})
        );
        assert_eq!(
            get(&base, &format!("{prefix}/prompt")).await.1,
            json!({"exec_info": {"queue_remaining": 0}})
        );
        let (_, ks) = get(&base, &format!("{prefix}/object_info/KSampler")).await;
        let captured: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{FIXTURES}/GET__object_info__KSampler.final.json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(ks, captured);
        assert_eq!(
            get(&base, &format!("{prefix}/object_info/NoSuchNode")).await,
            (200, json!({}))
        );
        let (s, all) = get(&base, &format!("{prefix}/object_info")).await;
        assert_eq!(s, 200);
        assert!(all.as_object().unwrap().len() > 300);
        assert!(get(&base, &format!("{prefix}/models"))
            .await
            .1
            .as_array()
            .unwrap()
            .contains(&json!("loras")));
        let (s, ckpts) = get(&base, &format!("{prefix}/models/checkpoints")).await;
        assert_eq!(s, 200);
        assert!(ckpts
            .as_array()
            .unwrap()
            .contains(&json!("sd_xl_base_1.0.safetensors")));
        assert_eq!(
            get(&base, &format!("{prefix}/models/nonsense")).await,
            (404, json!(""))
        );
        assert_eq!(
            get(&base, &format!("{prefix}/history/does-not-exist")).await,
            (200, json!({}))
        );
        assert_eq!(
            post(
                &base,
                &format!("{prefix}/history"),
                &json!({"delete": ["no-such-id"]})
            )
            .await,
            (200, String::new())
        );
        assert_eq!(
            post(&base, &format!("{prefix}/interrupt"), &json!({})).await,
            (200, String::new())
        );
    }
    // Also the WebSocket under /api.
    let url = format!("{}/api/ws?clientId=abc", base.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use futures_util::StreamExt;
    let first = ws.next().await.unwrap().unwrap();
    let v: Value = serde_json::from_str(first.to_text().unwrap()).unwrap();
    assert_eq!(v["data"]["sid"], "abc");
    // Without clientId the server picks uuid4().hex.
    let url = format!("{}/ws", base.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let first = ws.next().await.unwrap().unwrap();
    let v: Value = serde_json::from_str(first.to_text().unwrap()).unwrap();
    let sid = v["data"]["sid"].as_str().unwrap();
    assert_eq!(sid.len(), 32);
    assert!(sid
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_options_behave_as_captured() {
    let sim = sim(SimConfig::default()).await;
    let base = sim.base_url();
    let mut ws = Ws::connect(&base, "opts").await;
    let prompt = |color: u64| {
        json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": color}},
            "3": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "opts"}}
        })
    };
    // A client-chosen id is used verbatim; reusing it replaces the history entry.
    for color in [1, 2] {
        let (_, r) = post_prompt(
            &base,
            &json!({"prompt": prompt(color), "client_id": "opts", "prompt_id": "fixture-custom-prompt-id-0001"}),
        )
        .await;
        assert_eq!(r["prompt_id"], "fixture-custom-prompt-id-0001");
        ws.until_done("fixture-custom-prompt-id-0001").await;
    }
    let entry = history_entry(&base, "fixture-custom-prompt-id-0001").await;
    assert_eq!(entry["prompt"][2]["1"]["inputs"]["color"], 2);
    // A number id is stringified.
    let (_, r) = post_prompt(
        &base,
        &json!({"prompt": prompt(3), "client_id": "opts", "prompt_id": 12345}),
    )
    .await;
    assert_eq!(r["prompt_id"], "12345");
    assert_eq!(r["number"], 2);
    ws.until_done("12345").await;
    // An explicit number is echoed as a float and does not advance the counter; extra_data is kept.
    let (_, r) = post_prompt(
        &base,
        &json!({"prompt": prompt(4), "client_id": "opts", "number": 7, "extra_data": {"extra_pnginfo": {"workflow": {"id": "w"}}}}),
    )
    .await;
    assert_eq!(r["number"].to_string(), "7.0");
    let pid = r["prompt_id"].as_str().unwrap().to_string();
    ws.until_done(&pid).await;
    let entry = history_entry(&base, &pid).await;
    assert_eq!(entry["prompt"][3]["extra_pnginfo"]["workflow"]["id"], "w");
    assert_eq!(entry["prompt"][3]["client_id"], "opts");
    let (_, r) = post_prompt(
        &base,
        &json!({"prompt": prompt(5), "client_id": "opts", "front": true}),
    )
    .await;
    assert_eq!(r["number"], -3);
    ws.until_done(r["prompt_id"].as_str().unwrap()).await;
    sim.shutdown().await;
}

/// Like aiohttp, the simulator keeps a connection open for the next request (a client's pool
/// reuses it), and closes it when the client sends `Connection: close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_stay_open_between_requests() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let sim = sim(SimConfig::default()).await;
    let stream = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let mut conn = BufReader::new(stream);
    /// Reads one response: status line, headers, `Content-Length` bytes of body.
    async fn response(
        conn: &mut BufReader<tokio::net::TcpStream>,
    ) -> (String, Vec<String>, String) {
        let mut status = String::new();
        conn.read_line(&mut status).await.unwrap();
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            conn.read_line(&mut h).await.unwrap();
            let h = h.trim_end().to_string();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            headers.push(h);
        }
        let mut body = vec![0u8; len];
        conn.read_exact(&mut body).await.unwrap();
        (status, headers, String::from_utf8(body).unwrap())
    }
    for path in ["/system_stats", "/queue", "/api/system_stats"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        conn.get_mut().write_all(req.as_bytes()).await.unwrap();
        let (status, headers, body) = response(&mut conn).await;
        assert!(status.starts_with("HTTP/1.1 200"), "{path}: {status}");
        assert!(
            !headers
                .iter()
                .any(|h| h.eq_ignore_ascii_case("connection: close")),
            "{headers:?}"
        );
        assert!(
            serde_json::from_str::<Value>(&body).is_ok(),
            "{path}: {body}"
        );
    }
    let req = "GET /queue HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    conn.get_mut().write_all(req.as_bytes()).await.unwrap();
    let (status, headers, _) = response(&mut conn).await;
    assert!(status.starts_with("HTTP/1.1 200"));
    assert!(
        headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("connection: close")),
        "{headers:?}"
    );
    let mut rest = Vec::new();
    let n = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        conn.read_to_end(&mut rest),
    )
    .await
    .expect("the simulator closes the connection")
    .unwrap();
    assert_eq!(n, 0);
    sim.shutdown().await;
}

/// The whole answer, byte for byte: aiohttp's status line, body and content type (none for the
/// empty answers of the control routes, as captured; see the fixtures' README), its `Server`
/// header, `Connection: close` when asked to close, and no `Date`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_byte_exact() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sim = sim(SimConfig::default()).await;
    async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stream.read_to_end(&mut answer),
        )
        .await
        .unwrap_or_else(|_| panic!("no complete answer to {request:?}"))
        .unwrap();
        String::from_utf8(answer).unwrap()
    }
    const SERVER: &str = "Server: Python/3.11 aiohttp/3.14.5\r\n";
    assert_eq!(
        exchange(
            sim.addr(),
            "GET /api/nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .await,
        format!(
            "HTTP/1.1 404 Not Found\r\nConnection: close\r\n{SERVER}\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: 14\r\n\r\n404: Not Found"
        )
    );
    assert_eq!(
        exchange(
            sim.addr(),
            "POST /free HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
        )
        .await,
        format!("HTTP/1.1 200 OK\r\nConnection: close\r\n{SERVER}Content-Length: 0\r\n\r\n")
    );
    assert_eq!(
        exchange(
            sim.addr(),
            "GET /prompt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .await,
        format!(
            "HTTP/1.1 200 OK\r\nConnection: close\r\n{SERVER}\
             Content-Type: application/json; charset=utf-8\r\nContent-Length: 35\r\n\r\n\
             {{\"exec_info\":{{\"queue_remaining\":0}}}}"
        )
    );
    // A plain GET on the socket route is refused the way aiohttp refuses it, and closed.
    let refused = exchange(sim.addr(), "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(
        refused.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{refused}"
    );
    assert!(
        refused
            .ends_with("No WebSocket UPGRADE hdr: None\n Can \"Upgrade\" only to \"WebSocket\"."),
        "{refused}"
    );
    // A body over ComfyUI's upload limit is refused before it is read.
    let big = exchange(
        sim.addr(),
        "POST /prompt HTTP/1.1\r\nHost: x\r\nContent-Length: 104857601\r\n\r\n",
    )
    .await;
    assert!(
        big.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{big}"
    );
    sim.shutdown().await;
}
