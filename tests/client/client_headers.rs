//! Extra headers (reverse-proxy auth) reach both the HTTP requests and the WebSocket handshake,
//! and no Origin header is sent (ComfyUI answers 403 to a mismatching Origin on loopback).

use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread;

/// Accepts `n` connections, answers each with `reply`, and returns the request heads.
fn capture(
    listener: TcpListener,
    n: usize,
    reply: &'static str,
) -> thread::JoinHandle<Vec<String>> {
    thread::spawn(move || {
        let mut heads = Vec::new();
        for _ in 0..n {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let mut stream = stream;
            stream.write_all(reply.as_bytes()).unwrap();
            heads.push(head);
        }
        heads
    })
}

#[tokio::test]
async fn headers_go_to_http_and_the_websocket_handshake_without_origin() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    let server = capture(listener, 2, reply);

    let headers = ExtraHeaders::from_sources(
        &["X-Proxy-Auth: s3cret".to_string()],
        Some("Cookie: session=abc; theme=dark"),
    )
    .unwrap();
    let client = Client::new(&format!("http://127.0.0.1:{port}"), headers).unwrap();
    let features = client.features().await.unwrap();
    assert_eq!(features, serde_json::json!({}));
    // The fake server does not speak WebSocket: the handshake fails after sending its head.
    let err = client
        .connect_ws("abc")
        .await
        .err()
        .expect("not a websocket server");
    assert!(err.to_string().contains("/ws"), "{err}");

    let heads = server.join().unwrap();
    let (http, ws) = (&heads[0], &heads[1]);
    assert!(http.starts_with("GET /features "), "{http}");
    assert!(ws.starts_with("GET /ws?clientId=abc "), "{ws}");
    for head in [http, ws] {
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("x-proxy-auth: s3cret"), "{head}");
        assert!(lower.contains("cookie: session=abc; theme=dark"), "{head}");
        assert!(!lower.contains("\norigin:"), "no Origin header: {head}");
    }
    assert!(ws.to_ascii_lowercase().contains("upgrade: websocket"));
    assert!(
        !format!("{client:?}").contains("s3cret"),
        "Debug never shows header values"
    );
}
