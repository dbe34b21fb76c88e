//! Every command reaches the server through the one client (`comfy::Client`): node definitions
//! fetched by `validate`, `plan` and `bisect` honour URL credentials (never printed), a bare
//! `host:port`, `--header`, and the request timeout, like `submit` does.

use comfy_bisect_sim::{start, SimConfig};
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");
const UI_WORKFLOW: &str = "tests/fixtures/ui_worked_example.json";

/// A small API workflow (validate asks the server for definitions whatever the format).
fn api_workflow(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("wf.json");
    std::fs::write(
        &path,
        r#"{
            "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "random_sd15.safetensors"}},
            "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a lighthouse"}},
            "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
            "3": {"class_type": "KSampler", "inputs": {"model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0],
                "latent_image": ["5", 0], "seed": 1, "steps": 2, "cfg": 7.0, "sampler_name": "euler",
                "scheduler": "normal", "denoise": 1.0}},
            "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
            "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "test"}}
        }"#,
    )
    .unwrap();
    path
}

/// Runs the binary to its end (killing it after `limit`, which fails the test).
fn run(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("COMFY_BISECT_HEADERS")
        .env_remove("COMFY_BISECT_SERVER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "comfy-bisect {args:?} did not exit within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A port nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_password_in_the_server_url_is_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let wf = api_workflow(&dir);
    let wf = wf.to_str().unwrap();
    // A server that closes every connection without answering.
    let odd = TcpListener::bind("127.0.0.1:0").unwrap();
    let odd_port = odd.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in odd.incoming() {
            drop(stream);
        }
    });
    let dead = dead_port();
    let cases = [
        (format!("http://user:secret@127.0.0.1:{dead}"), 3),
        (format!("http://user:secret@127.0.0.1:{odd_port}"), 3),
        (format!("user:secret@127.0.0.1:{dead}"), 3),
        // Not a URL at all: the error quotes it, without the credentials.
        ("http://user:se@secret@127.0.0.1:notaport".to_string(), 2),
        ("ftp://user:secret@127.0.0.1:1".to_string(), 2),
    ];
    for (server, code) in cases {
        let out = run(
            &["validate", wf, "--server", &server],
            Duration::from_secs(60),
        );
        let all = text(&out);
        assert_eq!(out.status.code(), Some(code), "{server}: {all}");
        assert!(!all.contains("secret"), "{server} leaked: {all}");
        assert!(all.contains("error:"), "{server}: {all}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_host_and_port_is_a_server_url() {
    let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = api_workflow(&dir);
    let bare = sim.addr().to_string();
    assert!(!bare.contains("://"));
    let out = tokio::task::spawn_blocking(move || {
        run(
            &["validate", wf.to_str().unwrap(), "--server", &bare],
            Duration::from_secs(60),
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("valid"), "{}", text(&out));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_reach_the_server_when_definitions_are_fetched() {
    let sim = start(
        SimConfig::default().with_required_header("X-Proxy-Auth", "let-me-in"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let url = sim.base_url();
    let dir = tempfile::tempdir().unwrap();
    let wf = api_workflow(&dir).to_str().unwrap().to_string();
    let plan_out = dir.path().join("plan");
    let plan_out = plan_out.to_str().unwrap().to_string();
    let runs = dir.path().join("runs");
    let runs = runs.to_str().unwrap().to_string();
    let outs = tokio::task::spawn_blocking(move || {
        let limit = Duration::from_secs(120);
        let header = ["--header", "X-Proxy-Auth: let-me-in"];
        let without = run(&["validate", &wf, "--server", &url], limit);
        let validate = run(
            &[&["validate", &wf, "--server", &url][..], &header[..]].concat(),
            limit,
        );
        let plan = run(
            &[
                &["plan", UI_WORKFLOW, "--server", &url, "--out", &plan_out][..],
                &header[..],
            ]
            .concat(),
            limit,
        );
        // A UI workflow given to bisect is converted with the server's definitions, fetched
        // through the same client as the runs (before the fix: without the header).
        let bisect = run(
            &[
                &[
                    "bisect",
                    UI_WORKFLOW,
                    "--server",
                    &url,
                    "--runs-dir",
                    &runs,
                    "--quiet",
                ][..],
                &header[..],
            ]
            .concat(),
            limit,
        );
        (without, validate, plan, bisect)
    })
    .await
    .unwrap();
    let (without, validate, plan, bisect) = outs;
    assert_eq!(without.status.code(), Some(3), "{}", text(&without));
    assert!(text(&without).contains("401"), "{}", text(&without));
    assert!(
        matches!(validate.status.code(), Some(0 | 1)),
        "definitions fetched with the header: {}",
        text(&validate)
    );
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan));
    assert!(
        !text(&bisect).contains("401") && !text(&bisect).contains("cannot get node definitions"),
        "{}",
        text(&bisect)
    );
    assert!(
        text(&bisect).contains("session "),
        "bisect got as far as a session: {}",
        text(&bisect)
    );
    sim.shutdown().await;
}

#[test]
fn a_server_that_never_answers_does_not_hang_the_command() {
    // Accepts connections and reads, but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in silent.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let wf = api_workflow(&dir);
    let out = run(
        &[
            "validate",
            wf.to_str().unwrap(),
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "--request-timeout",
            "1s",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("timed out"), "{}", text(&out));
}

/// A web server that is not ComfyUI: answers every request with `status` (`401
/// Unauthorized`), the `content_type` and `body`, and closes the connection.
fn other_server(status: &str, content_type: &str, body: &str) -> u16 {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let _ = std::io::Write::write_all(&mut stream, reply.as_bytes());
        }
    });
    port
}

/// A page of a web application (HTML, 200 or an error status) is named in a few words, not
/// printed; a 401 asks for credentials (`--header`), not for `--listen`/`--port`.
#[test]
fn a_server_that_is_not_comfyui_gets_a_short_specific_error() {
    let dir = tempfile::tempdir().unwrap();
    let wf = api_workflow(&dir);
    let wf = wf.to_str().unwrap();
    const PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>\n";
    const NOT_FOUND: &str = "<html>\n<head><title>404 Not Found</title></head>\n<body><center>404 Not Found</center></body></html>\n";
    for (status, body, says) in [
        ("200 OK", PAGE, "HTML page titled \"Welcome to nginx!\""),
        (
            "404 Not Found",
            NOT_FOUND,
            "HTML page titled \"404 Not Found\"",
        ),
    ] {
        let server = format!(
            "http://127.0.0.1:{}",
            other_server(status, "text/html", body)
        );
        for command in ["validate", "submit"] {
            let out = run(&[command, wf, "--server", &server], Duration::from_secs(60));
            let text = text(&out);
            assert_ne!(out.status.code(), Some(0), "{text}");
            assert!(text.contains(says), "{command}: {text}");
            assert!(
                !text.contains("<html") && !text.contains("<body"),
                "{command}: {text}"
            );
            assert!(text.contains("--server"), "{command}: {text}");
        }
    }
    let port = other_server("401 Unauthorized", "text/plain", "401: Unauthorized");
    let server = format!("http://127.0.0.1:{port}");
    for command in ["validate", "submit"] {
        let out = run(&[command, wf, "--server", &server], Duration::from_secs(60));
        let text = text(&out);
        assert!(text.contains("401"), "{command}: {text}");
        assert!(text.contains("--header"), "{command}: {text}");
        assert!(!text.contains("--listen"), "{command}: {text}");
    }
}

/// Issue #28: `--server` is offered by the commands that talk to a server, before or after
/// the subcommand, and by no other command (its help no longer lists an option it ignores).
#[test]
fn server_is_an_option_of_the_commands_that_use_one() {
    use clap::{CommandFactory, Parser};
    use comfy_bisect::cli::{Cli, Command};
    let mut cli = Cli::command();
    for (name, takes) in [
        ("validate", true),
        ("hash", true),
        ("convert", true),
        ("submit", true),
        ("check", true),
        ("bisect", true),
        ("plan", true),
        // Issue #38: `resume --server URL` moves the session to a server whose port changed.
        ("resume", true),
        ("show", false),
        ("runs", false),
        ("report", false),
        ("demo", false),
        ("diagnose", false),
        ("hash-files", false),
        ("simulate", false),
        ("completions", false),
    ] {
        let help = cli
            .find_subcommand_mut(name)
            .unwrap_or_else(|| panic!("no {name}"))
            .render_long_help()
            .to_string();
        assert_eq!(help.contains("--server"), takes, "{name}:\n{help}");
    }
    assert!(
        Cli::try_parse_from(["comfy-bisect", "show", "abc", "--server", "http://x:1"]).is_err()
    );
    // Before the subcommand, after it (which wins), or neither (the default).
    let server = |args: &[&str]| match Cli::try_parse_from(args).unwrap() {
        Cli {
            server: before,
            command: Command::Bisect(a),
            ..
        } => a.target.resolve(before.as_deref()),
        _ => unreachable!(),
    };
    assert_eq!(
        server(&["comfy-bisect", "--server", "http://a:1", "bisect", "w.json"]),
        "http://a:1"
    );
    assert_eq!(
        server(&[
            "comfy-bisect",
            "--server",
            "http://a:1",
            "bisect",
            "w.json",
            "--server",
            "http://b:2"
        ]),
        "http://b:2"
    );
    if std::env::var_os("COMFY_BISECT_SERVER").is_none() {
        assert_eq!(
            server(&["comfy-bisect", "bisect", "w.json"]),
            "http://127.0.0.1:8188"
        );
    }
}
