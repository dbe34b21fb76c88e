//! Redaction of the written reports: POSIX and Windows home folders, LAN host names and IP
//! addresses (server URL and launch arguments), secrets in node inputs and extra_data; model file
//! names stay; `--no-redact` (redact = false) keeps everything.

use crate::report_support::scenario;
use comfy_bisect_core::report::{redact, write_session_reports};
use serde_json::{json, Value};
use std::path::Path;

fn reports(dir: &Path, redact: bool) -> (String, String) {
    write_session_reports(dir, redact).unwrap();
    (
        std::fs::read_to_string(dir.join("report.md")).unwrap(),
        std::fs::read_to_string(dir.join("report.json")).unwrap(),
    )
}

fn assert_absent(text: &str, what: &[&str], which: &str) {
    for w in what {
        assert!(!text.contains(w), "{which} still contains {w:?}");
    }
}

#[test]
fn posix_session_is_redacted_but_model_names_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario("first-failure").write(tmp.path());
    let (md, json) = reports(&dir, true);
    let leaks = [
        "alice",
        "gpu-box",
        "192.168.1.20",
        "sk-live-abcdefghijklmnopqrstuvwxyz",
        "sk-test-not-a-real-key",
    ];
    assert_absent(&md, &leaks, "report.md");
    assert_absent(&json, &leaks, "report.json");
    for kept in [
        "sd15/dreamshaper_8.safetensors",
        "detail-tweaker.safetensors",
        "4x-UltraSharp.pth",
        "https://pytorch.org/docs/stable/notes/cuda.html",
    ] {
        assert!(md.contains(kept), "report.md lost {kept}");
    }
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["redacted"], true);
    assert_eq!(v["settings"]["server"], "http://<host>:8188");
    let argv = &v["environment"]["argv"];
    assert_eq!(argv[2], "<ip>");
    assert_eq!(argv[10], "/home/<user>/comfy-out");
    let wf = &v["workflows"][0];
    assert_eq!(
        wf["first_failure"]["current_inputs"]["api_key"][0],
        "<secret>"
    );
    assert_eq!(wf["first_failure"]["current_inputs"]["steps"][0], "20");
    assert!(wf["first_failure"]["traceback"][0]
        .as_str()
        .unwrap()
        .contains("/home/<user>/ComfyUI/execution.py"));
}

#[test]
fn windows_paths_with_user_names_are_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario("minimal-fails").write(tmp.path());
    let (md, json) = reports(&dir, true);
    assert_absent(&md, &["Bob"], "report.md");
    assert_absent(&json, &["Bob"], "report.json");
    assert!(md.contains(r"C:\Users\<user>\ComfyUI_windows_portable\ComfyUI\comfy\sd.py"));
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["settings"]["server"], "http://127.0.0.1:8188",
        "loopback stays"
    );
}

#[test]
fn shareable_copy_replaces_secrets_in_inputs_and_extra_data_and_keeps_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario("first-failure").write(tmp.path());
    let run_dir = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("04-LoRA-")
        })
        .unwrap();
    let body = json!({
        "prompt": crate::report_support::prompt(4),
        "extra_data": {"api_key_comfy_org": "comfyui-0123456789abcdef0123456789abcdef",
                       "auth_token_comfy_org": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk",
                       "extra_pnginfo": {"workflow": {"nodes": []}}},
        "client_id": "c0ffee"
    });
    let original = serde_json::to_string_pretty(&body).unwrap();
    std::fs::write(run_dir.join("workflow.json"), &original).unwrap();
    let (_, json) = reports(&dir, true);
    let v: Value = serde_json::from_str(&json).unwrap();
    let copy = v["workflows"][0]["attachments"]["first_failing"]["shareable_workflow"]
        .as_str()
        .expect("a shareable copy is listed");
    // The path is written redacted (a user's name in it is `<user>`, which Windows refuses in a
    // file name): the copy is read from the session's `shareable/` folder by its file name.
    let name = copy.rsplit(['/', '\\']).next().unwrap();
    assert!(copy.contains("shareable"), "{copy}");
    let copy = dir.join("shareable").join(name);
    let copy: Value = serde_json::from_str(&std::fs::read_to_string(copy).unwrap()).unwrap();
    assert_eq!(copy["extra_data"]["api_key_comfy_org"], "<secret>");
    assert_eq!(copy["extra_data"]["auth_token_comfy_org"], "<secret>");
    assert_eq!(copy["prompt"]["30"]["inputs"]["api_key"], "<secret>");
    assert_eq!(copy["prompt"]["30"]["inputs"]["prompt"], "a cat");
    assert_eq!(
        copy["prompt"]["20"]["inputs"]["image"],
        "/home/<user>/Pictures/ref.png"
    );
    assert_eq!(
        copy["prompt"]["4"]["inputs"]["ckpt_name"],
        "sd15/dreamshaper_8.safetensors"
    );
    assert_eq!(copy["client_id"], "c0ffee");
    assert_eq!(
        std::fs::read_to_string(run_dir.join("workflow.json")).unwrap(),
        original,
        "the submitted workflow is never changed"
    );
}

#[test]
fn no_redact_keeps_paths_hosts_and_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenario("first-failure").write(tmp.path());
    let (md, json) = reports(&dir, false);
    for kept in [
        "/home/alice/ComfyUI/execution.py",
        "gpu-box.lan",
        "192.168.1.20",
    ] {
        assert!(md.contains(kept), "report.md lost {kept}");
    }
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["redacted"], false);
    assert_eq!(
        v["workflows"][0]["first_failure"]["current_inputs"]["api_key"][0],
        "sk-live-abcdefghijklmnopqrstuvwxyz"
    );
    assert!(v["workflows"][0]["attachments"]["first_failing"]
        .get("shareable_workflow")
        .is_none());
    assert!(md.contains("Not redacted"));
}

#[test]
fn redaction_rules_on_mixed_text() {
    let mut value = json!({
        "log": "File \"C:\\Users\\Carol Smith\\ComfyUI\\nodes.py\" then /Users/dave/x and ws://10.0.0.7:8188/ws",
        "argv": ["main.py", "--listen", "0.0.0.0", "--api-key", "abc123"],
        "inputs": {"token": "t0k3n", "max_tokens": 512, "token_normalization": "none",
                   "hf_token": "hf_abcdefghijklmnopqrstuvwxyz12"}
    });
    redact::redact(&mut value);
    assert_eq!(
        value["log"],
        "File \"C:\\Users\\<user>\\ComfyUI\\nodes.py\" then /Users/<user>/x and ws://<ip>:8188/ws"
    );
    assert_eq!(
        value["argv"],
        json!(["main.py", "--listen", "0.0.0.0", "--api-key", "<secret>"])
    );
    assert_eq!(value["inputs"]["token"], "<secret>");
    assert_eq!(value["inputs"]["max_tokens"], 512);
    assert_eq!(value["inputs"]["token_normalization"], "none");
    assert_eq!(value["inputs"]["hf_token"], "<secret>");
}
