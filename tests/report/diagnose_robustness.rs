//! Property-style checks: arbitrary and garbled text never panics, and every diagnosis keeps its
//! invariants (root cause unknown, stage among the open stages, fragmentation only "not proven").
//! Inputs come from a fixed-seed PRNG, so a failure reproduces.

use comfy_bisect_core::diagnose::{self, Diagnosis};
use serde_json::Value;

/// xorshift64*: small, deterministic, good enough to shuffle test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Pieces of real log vocabulary, so random text reaches the deep parser paths.
const PIECES: &[&str] = &[
    "!!! Exception during processing !!! ",
    "Traceback (most recent call last):\n",
    "  File \"/c/comfy/model_patcher.py\", line 1, in patch_weight_to_device\n",
    "  File \"C:\\x\\nodes.py\", line 2, in sample\n",
    "    code()\n",
    "torch.OutOfMemoryError: ",
    "CUDA out of memory. Tried to allocate ",
    "HIP out of memory. ",
    "MPS backend out of memory (MPS allocated: ",
    "GPU 0 has a total capacity of ",
    " of which ",
    " is free. ",
    "Currently allocated : ",
    "Device limit : ",
    "17179869184.00 GiB",
    "12.5",
    "0",
    "4294967296",
    " bytes",
    " GiB",
    " MiB",
    " KB",
    " gib",
    ".",
    ";",
    ":",
    "Error occurred when executing KSampler:\n\n",
    "- **Node Type:** VAEDecode\n",
    "- **Exception Message:** ",
    "## Stack Trace\n",
    " 40%|████      | 8/20 [00:05<00:07,  1.6it/s]",
    "Loading checkpoint shards:  75%|██▎ | 3/4",
    "Requested to load Flux\n",
    "loaded partially 1 2 3\n",
    "got prompt\n",
    "Prompt executed in 1.0 seconds\n",
    "Killed\n",
    "2024-09-11 11:23:11,827 - root - ERROR - ",
    "> ",
    "'",
    "\"",
    "{",
    "}",
    "[",
    "]",
    "\"type\":",
    "\"execution_error\"",
    "\"data\":",
    "\"node_id\":",
    "\n",
    "\n\n",
    "\r",
    "\t",
    "    ",
    "é",
    "桌面",
    "\u{feff}",
    "\u{0}",
];

fn random_text(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..rng.below(60) {
        if rng.below(4) == 0 {
            // Arbitrary code points, including control characters and multibyte ones.
            let c = char::from_u32(rng.below(0x3000) as u32).unwrap_or('?');
            s.push(c);
        } else {
            s.push_str(PIECES[rng.below(PIECES.len())]);
        }
    }
    s
}

fn check_invariants(d: &Diagnosis, input: &str) {
    assert!(
        d.stage_candidates.contains(&d.stage),
        "stage not among candidates for {input:?}"
    );
    let json = serde_json::to_value(d).expect("serializable");
    assert_eq!(json["root_cause"], "unknown");
    assert!(d.fragmentation.is_none() || d.fragmentation.as_deref() == Some("not proven"));
    assert_eq!(d.numbers_consistent, d.inconsistencies.is_empty());
    for (name, value) in d.numbers.named_values() {
        if let Some(v) = value {
            assert!(v.is_finite() && v >= 0.0, "{name} = {v} for {input:?}");
        }
    }
    let text = diagnose::render_text(d);
    assert!(text.contains("root cause:  unknown"));
}

#[test]
fn arbitrary_text_never_panics() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut diagnosed = 0;
    for _ in 0..2000 {
        let input = random_text(&mut rng);
        match diagnose::diagnose_text(&input) {
            Ok(d) => {
                diagnosed += 1;
                check_invariants(&d, &input);
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    // The vocabulary is rich enough that some inputs read as failures and some do not.
    assert!(diagnosed > 100, "only {diagnosed} inputs were diagnosed");
}

#[test]
fn garbled_real_reports_never_panic() {
    let text = std::fs::read_to_string("tests/fixtures/oom-reports/dev-reports.json")
        .expect("dev-reports.json");
    let reports: Vec<Value> = serde_json::from_str(&text).unwrap();
    let mut rng = Rng(42);
    let (mut tried, mut diagnosed, mut same_kind) = (0, 0, 0);
    for record in &reports {
        let excerpt: String = record["error"]["log_excerpts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        let chars: Vec<char> = excerpt.chars().collect();
        for _ in 0..20 {
            let mut garbled: Vec<char> = chars.clone();
            // Cut at a random place and splice a few random characters in.
            if !garbled.is_empty() {
                let cut = rng.below(garbled.len() + 1);
                garbled.truncate(cut);
            }
            for _ in 0..rng.below(5) {
                let at = rng.below(garbled.len() + 1);
                let c = char::from_u32(rng.below(0x2FFF) as u32).unwrap_or('x');
                garbled.insert(at, c);
            }
            let input: String = garbled.into_iter().collect();
            tried += 1;
            if let Ok(d) = diagnose::diagnose_text(&input) {
                check_invariants(&d, &input);
                diagnosed += 1;
                if serde_json::to_value(d.kind).unwrap() == record["labels"]["kind"] {
                    same_kind += 1;
                }
            }
        }
    }
    // Cutting a report short and splicing in noise leaves most of them readable as failures,
    // and most of those keep the kind the report is labelled with.
    assert!(
        diagnosed * 3 >= tried * 2,
        "only {diagnosed} of {tried} garbled reports were diagnosed"
    );
    assert!(
        same_kind * 5 >= diagnosed * 4,
        "only {same_kind} of {diagnosed} diagnoses kept the labelled kind"
    );
}

#[test]
fn arbitrary_json_never_panics() {
    let mut rng = Rng(7);
    let values = [
        "null", "1", "\"x\"", "[]", "{}", "[1,2]", "{\"type\":1}", "{\"data\":{}}",
        "{\"node_id\":5,\"executed\":[]}", "{\"error\":null,\"node_errors\":[]}",
        "{\"a\":{\"status\":{\"messages\":[[\"execution_error\",{\"traceback\":[1,null]}]]},\"prompt\":[\"x\"]}}",
    ];
    let mut diagnosed = 0;
    for v in values {
        if let Ok(d) = diagnose::diagnose_text(v) {
            check_invariants(&d, v);
            diagnosed += 1;
        }
    }
    assert!(diagnosed > 0, "none of the fixed JSON values was diagnosed");
    // The history entry carrying an execution_error is read as a failure, garbage and all.
    let history = values
        .iter()
        .find(|v| v.contains("execution_error"))
        .unwrap();
    assert!(diagnose::diagnose_text(history).is_ok(), "{history}");
    for _ in 0..500 {
        let mut s = String::from("{");
        for _ in 0..rng.below(12) {
            s.push_str(
                [
                    "\"type\":",
                    "\"data\":",
                    "{",
                    "}",
                    "\"progress\"",
                    ",",
                    "\"node\":\"3\"",
                    "\"value\":",
                    "1e308",
                    "-5",
                    "[",
                    "]",
                    "\n{\"json\":",
                ][rng.below(13)],
            );
        }
        if let Ok(d) = diagnose::diagnose_text(&s) {
            check_invariants(&d, &s);
        }
    }
}
