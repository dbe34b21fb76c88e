//! A hostile server (issue #29): answers that never end or claim to be huge must end in a
//! clear error, never in memory. The server here is a few lines of raw HTTP on a thread —
//! the simulator answers like ComfyUI, which never does this.

use comfy_bisect_core::comfy::client::{MAX_ANSWER_BYTES, MAX_OBJECT_INFO_BYTES};
use comfy_bisect_core::comfy::{Client, ClientError, ExtraHeaders};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

/// Reads one request head from each of `n` connections and answers with `head` followed by
/// an endless stream of `chunk`-sized HTTP chunks of `[` (never valid JSON), until the client
/// hangs up. Returns the bytes sent on each connection.
fn endless(listener: TcpListener, n: usize, head: &'static str) -> thread::JoinHandle<Vec<u64>> {
    thread::spawn(move || {
        let mut sent = Vec::new();
        for _ in 0..n {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
            }
            let mut stream = stream;
            let payload = vec![b'['; 64 * 1024];
            let mut chunk = format!("{:x}\r\n", payload.len()).into_bytes();
            chunk.extend_from_slice(&payload);
            chunk.extend_from_slice(b"\r\n");
            let mut total = 0u64;
            if stream.write_all(head.as_bytes()).is_ok() {
                while stream.write_all(&chunk).is_ok() {
                    total += payload.len() as u64;
                }
            }
            sent.push(total);
        }
        sent
    })
}

/// Waits for the server thread without blocking the runtime, whose tasks close the client's
/// side of the connections (else the server would write forever).
async fn join(server: thread::JoinHandle<Vec<u64>>) -> Vec<u64> {
    tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap()
}

const CHUNKED: &str = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                       Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

fn client(listener: &TcpListener) -> Client {
    let port = listener.local_addr().unwrap().port();
    Client::new(&format!("http://127.0.0.1:{port}"), ExtraHeaders::default())
        .unwrap()
        // Far longer than reading the cap takes; an unbounded read would end here instead.
        .with_request_timeout(Duration::from_secs(600))
}

#[tokio::test]
async fn an_endless_chunked_object_info_ends_in_a_clear_error_at_the_cap() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = client(&listener);
    let server = endless(listener, 1, CHUNKED);
    let err = client.object_info(None).await.expect_err("endless answer");
    match &err {
        ClientError::TooLarge { url, limit, .. } => {
            assert!(url.ends_with("/object_info"), "{url}");
            assert_eq!(*limit, MAX_OBJECT_INFO_BYTES);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("answered more than 128 MiB"), "{text}");
    let sent = join(server).await[0];
    // The client stopped near the cap (socket buffers hold a few MB more), not at a timeout.
    assert!(sent >= MAX_OBJECT_INFO_BYTES as u64, "{sent}");
    assert!(
        sent < MAX_OBJECT_INFO_BYTES as u64 + 64 * 1024 * 1024,
        "{sent}"
    );
}

#[tokio::test]
async fn every_other_route_has_the_smaller_cap() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = client(&listener);
    let server = endless(listener, 2, CHUNKED);
    for err in [
        client.queue().await.expect_err("endless /queue"),
        client.history("p1").await.expect_err("endless /history"),
    ] {
        match err {
            ClientError::TooLarge { limit, .. } => assert_eq!(limit, MAX_ANSWER_BYTES),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }
    for sent in join(server).await {
        assert!(sent < MAX_ANSWER_BYTES as u64 + 64 * 1024 * 1024, "{sent}");
    }
}

#[tokio::test]
async fn a_declared_length_over_the_cap_is_refused_unread() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = client(&listener);
    let head: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            MAX_ANSWER_BYTES + 1
        )
        .into_boxed_str(),
    );
    let server = endless(listener, 1, head);
    let err = client.system_stats().await.expect_err("too long");
    assert!(matches!(err, ClientError::TooLarge { .. }), "{err:?}");
    // Nothing of the body was read: what was sent sits in the socket buffers.
    assert!(join(server).await[0] < MAX_ANSWER_BYTES as u64 / 2);
}

// ---- A run against a server whose socket, queue and history all say nothing useful ----

use crate::sim_support::{client as sim_client, run_request, sd15, sim};
use comfy_bisect_core::run::{
    execute, execute_with, RawEvent, RunError, RunObserver, TimeoutReason,
};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_sim::{Faults, SimConfig};

/// The socket goes silent after its greeting, `/queue` never lists the prompt and
/// `/history/{id}` answers 500: nothing ever says the prompt runs or ended.
fn blind() -> SimConfig {
    SimConfig::default().with_faults(
        Faults::default()
            .with_silent_socket()
            .with_queue_hides()
            .with_history_500(),
    )
}

#[tokio::test]
async fn the_run_deadline_counts_from_submission_when_nothing_shows_the_prompt_running() {
    let sim = sim(blind()).await;
    let mut req = run_request(&sd15(512, 512, 1, 4));
    req.timeout = Duration::from_secs(1);
    req.interrupt_grace = Duration::from_millis(500);
    // Neither the queue limit nor the bound on /history errors may end it first.
    req.queue_timeout = Duration::from_secs(60);
    req.reconnect_window = Duration::from_secs(60);
    let rec = execute(&sim_client(&sim), req).await;
    assert_eq!(rec.outcome, OutcomeKind::Timeout, "{:?}", rec.error);
    match rec.error {
        Some(RunError::Timeout(t)) => {
            assert_eq!(t.reason, TimeoutReason::Run);
            assert_eq!(t.limit_ms, 1000);
            assert!(t.interrupt_sent);
        }
        other => panic!("expected a run timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn history_errors_are_counted_and_end_the_run_as_a_lost_server() {
    let sim = sim(blind()).await;
    let mut req = run_request(&sd15(512, 512, 1, 4));
    req.poll_interval = Duration::from_millis(50);
    req.reconnect_window = Duration::from_millis(500);
    req.timeout = Duration::from_secs(60);
    req.queue_timeout = Duration::from_secs(60);
    let mut notes = Notes::default();
    let rec = execute_with(&sim_client(&sim), req, &mut notes).await;
    assert_eq!(rec.outcome, OutcomeKind::ServerLost, "{:?}", rec.error);
    match rec.error {
        Some(RunError::ServerLost(l)) => {
            assert!(l.submitted);
            assert!(
                l.reason.contains("GET /history/{id} failed")
                    && l.reason.contains("times in a row")
                    && l.reason.contains("HTTP 500"),
                "{}",
                l.reason
            );
        }
        other => panic!("expected a lost server, got {other:?}"),
    }
    // Counted, not logged per failure: one note for the series.
    let noted = notes
        .0
        .iter()
        .filter(|n| n.starts_with("GET /history failed"))
        .count();
    assert_eq!(noted, 1, "{:?}", notes.0);
}

/// The run's notes.
#[derive(Default)]
struct Notes(Vec<String>);

impl RunObserver for Notes {
    fn on_raw(&mut self, event: &RawEvent<'_>) {
        if let RawEvent::Note { text, .. } = event {
            self.0.push(text.to_string());
        }
    }
}

// ---- A socket that sends endless small frames of other traffic ----

/// Keeps the `events.ndjson` lines a run writes.
fn ndjson() -> comfy_bisect_core::run::NdjsonWriter<Vec<u8>> {
    comfy_bisect_core::run::NdjsonWriter::new(Vec::new())
}

/// Our prompt's frames of type `kind` kept in the record.
fn kept(rec: &comfy_bisect_core::run::RunRecord, kind: &str) -> usize {
    rec.raw
        .ws_text
        .iter()
        .filter_map(|f| f.json.as_ref())
        .filter(|j| j["type"] == kind && j["data"]["prompt_id"] == rec.prompt_id.as_str())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_small_frames_are_capped_and_the_prompts_own_events_survive() {
    use comfy_bisect_core::run::frames::{OTHER_KEEP, PART_MAX_BYTES};
    // 4 000 frames of other traffic per prompt, a third each: the same status frame again,
    // another prompt's progress, a binary preview.
    let flood = 4_000;
    let faults = Faults::parse(&format!("ws-flood={flood}")).unwrap();
    let sim = sim(SimConfig::default().with_vram_gib(4).with_faults(faults)).await;
    let cap = PART_MAX_BYTES as usize;
    let foreign = |j: &serde_json::Value, ours: &str| j["data"]["prompt_id"] != ours;
    for (v, outcome) in [
        (sd15(512, 512, 1, 20), OutcomeKind::Passed),
        (sd15(2048, 2048, 8, 4), OutcomeKind::Failed),
    ] {
        let mut events = ndjson();
        let rec = execute_with(&sim_client(&sim), run_request(&v), &mut events).await;
        assert_eq!(rec.outcome, outcome, "{:?}", rec.error);
        let json = serde_json::to_string(&rec).unwrap();
        let log = String::from_utf8(events.into_inner()).unwrap();
        assert!(json.len() < cap, "run.json is {} bytes", json.len());
        assert!(log.len() < cap, "events.ndjson is {} bytes", log.len());
        // All of the flood reached the client (counted), most of it was not kept.
        assert!(
            rec.raw.frames.others + rec.raw.frames.binary >= 2 * flood / 3,
            "{:?}",
            rec.raw.frames
        );
        // Of other traffic, at most the first and the last OTHER_KEEP frames are kept.
        let others_kept = rec
            .raw
            .ws_text
            .iter()
            .filter(|f| f.json.as_ref().is_none_or(|j| foreign(j, &rec.prompt_id)))
            .count();
        assert!(others_kept <= 2 * OTHER_KEEP, "{others_kept}");
        let lines_kept = log
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["channel"] == "ws" && l["dir"] == "in")
            .filter(|l| l.get("json").is_none_or(|j| foreign(j, &rec.prompt_id)))
            .count();
        assert!(lines_kept <= 2 * OTHER_KEEP, "{lines_kept}");
        let dropped = rec
            .raw
            .dropped_frames
            .clone()
            .expect("the drop is recorded");
        assert!(
            dropped.count >= flood - 4 * OTHER_KEEP as u64,
            "{dropped:?}"
        );
        assert!(dropped.bytes > 0 && dropped.ours == 0, "{dropped:?}");
        let note = rec
            .warnings
            .iter()
            .find(|w| w.starts_with("WebSocket traffic capped"))
            .expect("the record says what was dropped");
        assert!(
            note.contains(&format!("{} frames", dropped.count)),
            "{note}"
        );
        assert!(
            log.contains("WebSocket traffic capped"),
            "the event stream says it too"
        );
        // The evidence survived: our prompt's start, every progress step, its end or error.
        assert_eq!(kept(&rec, "execution_start"), 1);
        match outcome {
            OutcomeKind::Passed => {
                assert!(kept(&rec, "progress") >= 20, "{}", kept(&rec, "progress"));
                assert_eq!(kept(&rec, "execution_success"), 1);
            }
            _ => {
                assert_eq!(kept(&rec, "execution_error"), 1);
                assert!(log.contains("\"execution_error\""));
                assert!(rec.execution_error().is_some());
            }
        }
        // What was kept and what was dropped reads back as written.
        let back: comfy_bisect_core::run::RunRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.raw, rec.raw);
        // The last frames of other traffic are kept too, in order.
        assert!(rec.raw.ws_text.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    }
}
