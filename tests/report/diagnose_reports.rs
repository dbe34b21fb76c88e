//! Every record of tests/fixtures/oom-reports/dev-reports.json through the classifier: kind
//! must match, the stage must be one of `stage_candidates`, and every labelled number must be
//! reproduced (±0.01 MiB) with nothing invented. Accuracy per kind and per stage is printed
//! (`cargo test --test report diagnose_reports -- --nocapture`).

use comfy_bisect_core::diagnose::{self, Diagnosis, Evidence, ParsedInput};
use comfy_bisect_core::vocab::FailureKind;
use serde_json::Value;
use std::collections::BTreeMap;

const REPORTS: &str = "tests/fixtures/oom-reports/dev-reports.json";
/// The second, larger collection; each record says whether it is `train` or `heldout`.
const COLLECTED: &str = "tests/fixtures/oom-reports/collected-reports.json";
/// ComfyUI 2026 (dynamic VRAM, comfy-aimdo) reports, with their own split (issue #40).
const COLLECTED_2026: &str = "tests/fixtures/oom-reports/collected-2026.json";
/// The 2026 held-out split's floors (kind, stage among the candidates, stage exactly as
/// labelled): its measurement after the rules were tuned on the train split and the glued
/// progress-bar split (written after one held-out miss was seen; docs/diagnose.md says so).
const HELDOUT_2026: (usize, usize, usize) = (20, 19, 16);
/// A fresh batch of 2026 reports (issue #40, third round), labelled and split before the
/// classifier ever ran on it; the held-out part was scored once, after tuning on train.
const FRESH_2026: &str = "tests/fixtures/oom-reports/fresh-2026.json";
/// The clean batches (issue #40, from its fourth round): every record held out, labelled from
/// the quoted text alone before the classifier ever ran on it, each batch scored once, after
/// the rules written on the batches before it (docs/diagnose.md has those figures; from
/// `clean-2026c` on, the labels follow the fixtures README's written rules). Each: its name (its
/// file under `tests/fixtures/oom-reports/`) and its floors today (kind, stage by issue #40's
/// measure) through the record's fields with its text, then through the pasted text alone.
type Floors = (usize, usize, usize, usize);
const CLEAN_BATCHES: [(&str, Floors); 18] = [
    ("clean-2026", (36, 34, 36, 33)),
    ("clean-2026b", (25, 27, 25, 27)),
    ("clean-2026c", (112, 103, 112, 103)),
    ("clean-2026d", (82, 78, 82, 78)),
    ("clean-2026e", (170, 148, 170, 148)),
    ("clean-2026f", (29, 29, 29, 29)),
    ("clean-2026g", (12, 12, 12, 12)),
    ("clean-2026h", (176, 161, 176, 160)),
    ("clean-2026i", (52, 49, 52, 49)),
    ("clean-2026j", (9, 9, 9, 9)),
    ("clean-2026k", (154, 140, 154, 141)),
    ("clean-2026l", (53, 48, 53, 47)),
    ("clean-2026m", (79, 76, 79, 76)),
    ("clean-2026n", (37, 33, 37, 33)),
    ("clean-2026o", (47, 46, 47, 46)),
    ("clean-2026p", (152, 141, 152, 140)),
    ("clean-2026q", (91, 82, 90, 81)),
    ("clean-2026r", (118, 112, 118, 111)),
];

/// A clean batch's file.
fn clean_file(batch: &str) -> String {
    format!("tests/fixtures/oom-reports/{batch}.json")
}

/// Floors of the fresh batch per split and per path (kind, stage by issue #40's measure): the
/// record's fields with its text, then the pasted text alone (what `diagnose FILE` sees).
/// The held-out floors are from after the rules written on its misses (the part is spent).
const FRESH_FLOORS: [(&str, usize, usize, usize, usize); 2] =
    [("train", 28, 28, 28, 28), ("heldout", 41, 35, 41, 35)];

/// Every labelled file: `dev-reports.json` first (it has no split), then the collected ones.
fn all_labelled() -> impl Iterator<Item = String> {
    [REPORTS, COLLECTED, COLLECTED_2026, FRESH_2026]
        .into_iter()
        .map(str::to_string)
        .chain(CLEAN_BATCHES.iter().map(|(batch, _)| clean_file(batch)))
}

fn load_file(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {path}: {e} (run from the crate root)"));
    let value: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    value.as_array().expect("an array of reports").clone()
}

fn load_reports() -> Vec<Value> {
    load_file(REPORTS)
}

/// The collected records of one split (`train` or `heldout`).
fn collected(split: &str) -> Vec<Value> {
    load_file(COLLECTED)
        .into_iter()
        .filter(|r| r["split"] == split)
        .collect()
}

fn opt_str(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// What the record's structured fields say (the README's suggested classifier input).
fn record_evidence(record: &Value) -> Evidence {
    let e = &record["error"];
    Evidence {
        node_id: opt_str(&e["node_id"]),
        node_type: opt_str(&e["node_type"]),
        exception_type: opt_str(&e["exception_type"]),
        exception_message: opt_str(&e["exception_message"]),
        traceback: e["traceback"]
            .as_array()
            .map(|a| a.iter().filter_map(opt_str).collect())
            .unwrap_or_default(),
        progress: Vec::new(),
        outcome: None,
        cached_nodes: Vec::new(),
    }
}

fn excerpts(record: &Value) -> String {
    record["error"]["log_excerpts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default()
}

/// Whether a field's value (its first line) is already in the pasted text: then the text's
/// own reading of that line stands (a death line, a start-up error ComfyUI went on after, an
/// exception line cut before its message), and the field adds nothing the text lacks.
fn in_text(text: &str, value: &Option<String>) -> bool {
    value
        .as_deref()
        .and_then(|v| v.lines().map(str::trim).find(|l| !l.is_empty()))
        .is_some_and(|first| text.contains(first))
}

/// The pasted text parsed, with the record's structured fields filling what the text lacks
/// (some fields come from the issue title or the reporter's prose). An exception field whose
/// words the paste already holds was read there and does not override that reading.
fn combined_input(record: &Value) -> ParsedInput {
    let text = excerpts(record);
    let mut parsed = diagnose::parse_input(&text).unwrap_or_default();
    let mut from_record = record_evidence(record);
    if in_text(&text, &from_record.exception_message)
        || (from_record.exception_message.is_none() && in_text(&text, &from_record.exception_type))
    {
        from_record.exception_type = None;
        from_record.exception_message = None;
    }
    let ev = &mut parsed.evidence;
    ev.node_id = ev.node_id.take().or(from_record.node_id);
    ev.node_type = ev.node_type.take().or(from_record.node_type);
    ev.exception_type = ev.exception_type.take().or(from_record.exception_type);
    if ev.exception_message.is_none() {
        ev.exception_message = from_record.exception_message;
        if ev.exception_message.is_some() {
            ev.outcome = None;
        }
    }
    if ev.traceback.is_empty() {
        ev.traceback = from_record.traceback;
    }
    parsed
}

/// Reads one number out of a diagnosis.
type Getter = fn(&Diagnosis) -> Option<f64>;

/// Label field in numbers_mib → the diagnosis field it maps to.
const NUMBER_FIELDS: &[(&str, Getter)] = &[
    ("requested_mib", |d| d.numbers.requested_mib),
    ("total_capacity_mib", |d| d.numbers.total_mib),
    ("free_mib", |d| d.numbers.free_mib),
    ("process_in_use_mib", |d| d.numbers.process_in_use_mib),
    ("allocated_by_pytorch_mib", |d| d.numbers.allocated_mib),
    ("reserved_but_unallocated_mib", |d| {
        d.numbers.reserved_unallocated_mib
    }),
    ("reserved_total_by_pytorch_mib", |d| {
        d.numbers.reserved_total_mib
    }),
    ("device_limit_mib", |d| d.numbers.device_limit_mib),
    ("mps_allocated_mib", |d| d.numbers.mps_allocated_mib),
    ("mps_other_allocations_mib", |d| {
        d.numbers.mps_other_allocations_mib
    }),
    ("mps_max_allowed_mib", |d| d.numbers.mps_max_allowed_mib),
];

/// Differences between the labelled numbers and the diagnosis (empty when they agree).
fn number_mismatches(record: &Value, d: &Diagnosis) -> Vec<String> {
    let labels = &record["labels"]["numbers_mib"];
    let mut out = Vec::new();
    for (field, get) in NUMBER_FIELDS {
        let want = labels[*field].as_f64();
        let got = get(d);
        let ok = match (want, got) {
            (None, None) => true,
            (Some(w), Some(g)) => (w - g).abs() <= 0.01 || ((w - g) / w).abs() < 1e-9,
            _ => false,
        };
        if !ok {
            out.push(format!("{field}: want {want:?}, got {got:?}"));
        }
    }
    let want_gpu = record["labels"]["gpu_index"].as_u64().map(|g| g as u32);
    if want_gpu != d.numbers.gpu_index {
        out.push(format!(
            "gpu_index: want {want_gpu:?}, got {:?}",
            d.numbers.gpu_index
        ));
    }
    out
}

#[derive(Default)]
struct Tally {
    total: usize,
    kind_ok: usize,
    stage_ok: usize,
    /// Stage exactly the labelled one (stricter than `stage_ok`; informational).
    stage_exact: usize,
    /// Issue #40's measure: the stage is the labelled one or, when the answer is `unknown`
    /// narrowed to candidates, its first candidate is.
    stage_issue: usize,
    /// Records whose stage is not exactly the labelled one (informational).
    inexact: Vec<String>,
    numbers_ok: usize,
    per_kind: BTreeMap<String, (usize, usize)>,
    per_stage: BTreeMap<String, (usize, usize)>,
    failures: Vec<String>,
}

impl Tally {
    fn add(&mut self, record: &Value, d: &Diagnosis) {
        let id = record["id"].as_str().unwrap_or("?");
        let want_kind = record["labels"]["kind"].as_str().unwrap_or("?").to_string();
        let want_stage = record["labels"]["stage"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let candidates: Vec<&str> = record["labels"]["stage_candidates"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let kind_ok = d.kind.as_str() == want_kind;
        // The labelled stage, or any stage the text leaves open.
        let stage_ok = d.stage.as_str() == want_stage || candidates.contains(&d.stage.as_str());
        let numbers = number_mismatches(record, d);
        self.total += 1;
        self.kind_ok += kind_ok as usize;
        self.stage_ok += stage_ok as usize;
        self.stage_exact += (d.stage.as_str() == want_stage) as usize;
        let first_open = d
            .stage_candidates
            .iter()
            .find(|s| s.as_str() != "unknown")
            .map(|s| s.as_str());
        let issue_ok = d.stage.as_str() == want_stage
            || (d.stage.as_str() == "unknown" && first_open == Some(want_stage.as_str()));
        self.stage_issue += issue_ok as usize;
        if d.stage.as_str() != want_stage {
            let open: Vec<&str> = d.stage_candidates.iter().map(|s| s.as_str()).collect();
            self.inexact.push(format!(
                "{id}: stage {} {open:?} (labelled {want_stage}){}",
                d.stage.as_str(),
                if issue_ok {
                    ""
                } else {
                    " — not by issue #40's measure"
                }
            ));
        }
        self.numbers_ok += numbers.is_empty() as usize;
        let k = self.per_kind.entry(want_kind.clone()).or_default();
        k.0 += kind_ok as usize;
        k.1 += 1;
        let s = self.per_stage.entry(want_stage.clone()).or_default();
        s.0 += stage_ok as usize;
        s.1 += 1;
        if !kind_ok {
            self.failures.push(format!(
                "{id}: kind {} (want {want_kind}) — {}",
                d.kind.as_str(),
                d.kind_evidence
            ));
        }
        if !stage_ok {
            self.failures.push(format!(
                "{id}: stage {} (want one of {candidates:?}) — {}",
                d.stage.as_str(),
                d.stage_evidence
            ));
        }
        for n in numbers {
            self.failures.push(format!("{id}: {n}"));
        }
    }

    fn pct(ok: usize, total: usize) -> f64 {
        if total == 0 {
            0.0
        } else {
            100.0 * ok as f64 / total as f64
        }
    }

    fn print(&self, title: &str) {
        eprintln!("== {title}: {} records", self.total);
        eprintln!(
            "   kind {}/{} ({:.1}%), stage {}/{} ({:.1}%), numbers {}/{} ({:.1}%)",
            self.kind_ok,
            self.total,
            Self::pct(self.kind_ok, self.total),
            self.stage_ok,
            self.total,
            Self::pct(self.stage_ok, self.total),
            self.numbers_ok,
            self.total,
            Self::pct(self.numbers_ok, self.total)
        );
        eprintln!(
            "   stage exactly as labelled {}/{} ({:.1}%); labelled or first open candidate {}/{} ({:.1}%)",
            self.stage_exact,
            self.total,
            Self::pct(self.stage_exact, self.total),
            self.stage_issue,
            self.total,
            Self::pct(self.stage_issue, self.total)
        );
        for (k, (ok, n)) in &self.per_kind {
            eprintln!("   kind  {k:<15} {ok}/{n} ({:.1}%)", Self::pct(*ok, *n));
        }
        for (s, (ok, n)) in &self.per_stage {
            eprintln!(
                "   stage {s:<15} {ok}/{n} ({:.1}%)  [by labelled stage; right = in stage_candidates]",
                Self::pct(*ok, *n)
            );
        }
        for f in &self.failures {
            eprintln!("   miss: {f}");
        }
        if std::env::var_os("DIAGNOSE_REPORTS_INEXACT").is_some() {
            for n in &self.inexact {
                eprintln!("   inexact: {n}");
            }
        }
    }
}

#[test]
fn dev_reports_accuracy_per_kind_and_stage() {
    let reports = load_reports();
    assert!(!reports.is_empty(), "dev-reports.json has no records");

    let mut combined = Tally::default();
    let mut text_only = Tally::default();
    let mut structured_only = Tally::default();
    for record in &reports {
        let d = diagnose::diagnose_input(&combined_input(record));
        combined.add(record, &d);

        if let Ok(d) = diagnose::diagnose_text(&excerpts(record)) {
            text_only.add(record, &d);
        }
        structured_only.add(record, &diagnose::diagnose(&record_evidence(record)));

        // Invariants that hold for every diagnosis.
        assert_eq!(
            serde_json::to_value(&d).unwrap()["root_cause"],
            "unknown",
            "{}",
            record["id"]
        );
        assert!(
            d.fragmentation.is_none() || d.fragmentation.as_deref() == Some("not proven"),
            "{}",
            record["id"]
        );
        let is_negative = record["tags"]
            .as_array()
            .is_some_and(|t| t.iter().any(|x| x == "negative"));
        if is_negative {
            assert!(
                !d.kind.is_gpu_oom(),
                "negative record {} came out as {}",
                record["id"],
                d.kind.as_str()
            );
        }
    }
    combined.print("pasted excerpts + the record's structured fields (asserted)");
    text_only.print("pasted excerpts only (records whose text parses; informational)");
    structured_only.print("structured fields only (no console lines; informational)");

    let kind_pct = Tally::pct(combined.kind_ok, combined.total);
    let stage_pct = Tally::pct(combined.stage_ok, combined.total);
    assert!(kind_pct >= 95.0, "kind accuracy {kind_pct:.1}% < 95%");
    assert!(stage_pct >= 85.0, "stage accuracy {stage_pct:.1}% < 85%");
    // Floors at today's counts (docs/diagnose.md): one record lost fails.
    assert!(
        combined.kind_ok >= 39 && combined.stage_ok >= 37,
        "dev-reports.json: kind {}/{}, stage {}/{} (floors 39, 37)",
        combined.kind_ok,
        combined.total,
        combined.stage_ok,
        combined.total
    );
    assert_eq!(
        combined.numbers_ok, combined.total,
        "numbers differ from the labels (see the misses above)"
    );
}

#[test]
fn negatives_and_killed_processes_keep_their_kind() {
    for record in load_reports() {
        let d = diagnose::diagnose_input(&combined_input(&record));
        if record["labels"]["kind"] == "process_killed" {
            assert_eq!(d.kind, FailureKind::ProcessKilled, "{}", record["id"]);
            assert!(d.numbers.is_empty(), "{}", record["id"]);
        }
    }
}

/// Kind/stage/numbers tally of a set of records through the pasted-text + record path.
fn tally(records: &[Value]) -> Tally {
    let mut t = Tally::default();
    for record in records {
        let d = diagnose::diagnose_input(&combined_input(record));
        t.add(record, &d);
    }
    t
}

#[test]
fn collected_reports_held_out_and_whole_set() {
    let heldout = collected("heldout");
    let train = collected("train");
    assert!(
        heldout.len() >= 40,
        "held-out batch has {} records",
        heldout.len()
    );
    let mut all = load_reports();
    all.extend(train.iter().cloned());
    all.extend(heldout.iter().cloned());
    assert!(all.len() >= 120, "only {} labelled records", all.len());

    let h = tally(&heldout);
    h.print("held-out batch (collected-reports.json, split = heldout)");
    let tr = tally(&train);
    tr.print("training batch (collected-reports.json, split = train)");
    let w = tally(&all);
    w.print("whole set (dev-reports.json + collected-reports.json)");

    // Informational: the pasted text alone, as `comfy-bisect diagnose` sees it (no structured
    // fields from the record); text with no readable failure gives kind `unknown`.
    let mut text_only = Tally::default();
    for record in heldout.iter().chain(&train) {
        let d = diagnose::diagnose_text(&excerpts(record))
            .unwrap_or_else(|e| diagnose::no_failure(&e.to_string()));
        text_only.add(record, &d);
    }
    text_only.print("collected-reports.json, pasted text only (informational)");

    // Floors: the scores reached after the rule change (docs/diagnose.md) minus a small margin.
    // Held-out: kind 41/42 (97.6 %), stage 42/42 (100 %). Whole set: kind and stage 125/127.
    let pct = |ok: usize, n: usize| Tally::pct(ok, n);
    assert!(
        pct(h.kind_ok, h.total) >= 95.0,
        "held-out kind accuracy {:.1}% < 95%",
        pct(h.kind_ok, h.total)
    );
    assert!(
        pct(h.stage_ok, h.total) >= 97.0,
        "held-out stage accuracy {:.1}% < 97%",
        pct(h.stage_ok, h.total)
    );
    assert!(
        pct(w.kind_ok, w.total) >= 96.5,
        "whole-set kind accuracy {:.1}% < 96.5%",
        pct(w.kind_ok, w.total)
    );
    assert!(
        pct(w.stage_ok, w.total) >= 96.5,
        "whole-set stage accuracy {:.1}% < 96.5%",
        pct(w.stage_ok, w.total)
    );
    assert_eq!(
        w.numbers_ok, w.total,
        "numbers differ from the labels (see the misses above)"
    );
    // Floors at today's counts (docs/diagnose.md): one record lost fails.
    for (name, t, kind, stage) in [
        ("held-out", &h, 42, 42),
        ("train", &tr, 45, 46),
        ("whole set", &w, 126, 125),
    ] {
        assert!(
            t.kind_ok >= kind && t.stage_ok >= stage,
            "collected-reports.json {name}: kind {}/{}, stage {}/{} (floors {kind}, {stage})",
            t.kind_ok,
            t.total,
            t.stage_ok,
            t.total
        );
    }
}

/// Every collected record is complete: a split, a source URL, labels with a reason each, and
/// the labelled stage among (or, when unknown, before) its candidates.
#[test]
fn collected_reports_are_well_formed() {
    for file in all_labelled().skip(1) {
        well_formed(&file);
    }
}

fn well_formed(file: &str) {
    let all = load_file(file);
    let mut ids = std::collections::BTreeSet::new();
    for r in &all {
        let id = r["id"].as_str().expect("id");
        assert!(ids.insert(id.to_string()), "duplicate id {id}");
        assert!(
            matches!(r["split"].as_str(), Some("train" | "heldout")),
            "{id}"
        );
        assert!(
            r["source"]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://github.com/")),
            "{id}"
        );
        let l = &r["labels"];
        // The README asks for a kind's reason when the wording does not make it obvious: an
        // out-of-memory message names its own kind.
        let by_wording = l["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("_oom") || k == "host_ram");
        for key in ["kind", "kind_reason", "stage", "stage_reason"] {
            if key == "kind_reason" && by_wording && l[key].is_null() {
                continue;
            }
            assert!(
                l[key].as_str().is_some_and(|s| !s.trim().is_empty()),
                "{id}: {key}"
            );
        }
        let cands: Vec<&str> = l["stage_candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(cands.contains(&l["stage"].as_str().unwrap()), "{id}");
        assert!(
            !r["error"]["log_excerpts"].as_array().unwrap().is_empty(),
            "{id}: no text"
        );
    }
}

/// The 2026 (dynamic VRAM, comfy-aimdo) reports: both splits scored through the pasted-text +
/// record path and through the pasted text alone; a log with no sign that the process died is
/// never `process_killed`.
#[test]
fn collected_2026_reports_held_out_and_train() {
    let all = load_file(COLLECTED_2026);
    let split =
        |name: &str| -> Vec<Value> { all.iter().filter(|r| r["split"] == name).cloned().collect() };
    let (heldout, train) = (split("heldout"), split("train"));
    assert_eq!(
        heldout.len() + train.len(),
        all.len(),
        "every record has a split"
    );
    let h = tally(&heldout);
    h.print("2026 held-out batch (collected-2026.json, split = heldout)");
    let tr = tally(&train);
    tr.print("2026 training batch (collected-2026.json, split = train)");
    // Floors at the figures of docs/diagnose.md (issue #40): the train split whole (kind, stage
    // among the labelled candidates, stage exactly as labelled), the held-out split at its
    // measurement after the rules were tuned on train. One record lost fails.
    let floors = [
        ("train", &tr, 23, 23, 23),
        (
            "held-out",
            &h,
            HELDOUT_2026.0,
            HELDOUT_2026.1,
            HELDOUT_2026.2,
        ),
    ];
    for (name, t, kind, stage, exact) in floors {
        assert!(
            t.kind_ok >= kind && t.stage_ok >= stage && t.stage_exact >= exact,
            "2026 {name}: kind {}/{}, stage {}/{}, exact {}/{} (floors {kind}, {stage}, {exact})",
            t.kind_ok,
            t.total,
            t.stage_ok,
            t.total,
            t.stage_exact,
            t.total
        );
    }
    // Informational: the pasted text alone, as `comfy-bisect diagnose` sees it, per split.
    let (mut text_train, mut text_heldout) = (Tally::default(), Tally::default());
    for record in &all {
        let d = diagnose::diagnose_text(&excerpts(record))
            .unwrap_or_else(|e| diagnose::no_failure(&e.to_string()));
        if record["split"] == "heldout" {
            text_heldout.add(record, &d);
        } else {
            text_train.add(record, &d);
        }
        if record["labels"]["kind"] != "process_killed" {
            assert_ne!(
                d.kind,
                FailureKind::ProcessKilled,
                "{} has no sign of a dead process: {}",
                record["id"],
                d.kind_evidence
            );
        }
    }
    text_train.print("2026 training batch, pasted text only (informational)");
    text_heldout.print("2026 held-out batch, pasted text only (informational)");
    for r in &all {
        let id = r["id"].as_str().expect("id");
        assert!(
            r["source"]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://github.com/")),
            "{id}"
        );
        assert!(
            !r["error"]["log_excerpts"].as_array().unwrap().is_empty(),
            "{id}: no text"
        );
    }
}

/// The fresh 2026 batch: each split scored through the record's fields with its text and through
/// the pasted text alone, against the floors of docs/diagnose.md. The stage is issue #40's
/// measure: the label itself, or the first candidate of an answer `unknown` narrowed to
/// candidates (an `unknown` label wants `unknown`: the text leaves the stage open).
#[test]
fn fresh_2026_reports_held_out_and_train() {
    let all = load_file(FRESH_2026);
    for (split, kind, stage, text_kind, text_stage) in FRESH_FLOORS {
        let records: Vec<Value> = all
            .iter()
            .filter(|r| r["split"] == split)
            .cloned()
            .collect();
        score_both_paths(
            &format!("fresh 2026 {split}"),
            &records,
            (kind, stage, text_kind, text_stage),
        );
    }
}

/// The clean batches: all held out, each labelled before the classifier ever ran on it and
/// measured once (docs/diagnose.md has those figures); the floors are today's counts.
#[test]
fn clean_2026_batches_held_out() {
    for (batch, floors) in CLEAN_BATCHES {
        let records = load_file(&clean_file(batch));
        assert!(
            records.iter().all(|r| r["split"] == "heldout"),
            "{batch}: every clean record is held out"
        );
        let title = batch.replace('-', " ");
        score_both_paths(&format!("{title} held-out"), &records, floors);
    }
}

/// Prints and asserts one batch through the record's fields with its text and through the
/// pasted text alone; `floors` is (kind, stage, text kind, text stage), stage by issue #40's
/// measure.
fn score_both_paths(title: &str, records: &[Value], floors: (usize, usize, usize, usize)) {
    let combined = tally(records);
    combined.print(&format!("{title} (fields + text)"));
    let mut text = Tally::default();
    for record in records {
        let d = diagnose::diagnose_text(&excerpts(record))
            .unwrap_or_else(|e| diagnose::no_failure(&e.to_string()));
        text.add(record, &d);
    }
    text.print(&format!("{title} (pasted text alone)"));
    let (kind_floor, stage_floor, text_kind_floor, text_stage_floor) = floors;
    for (path, t, kind, stage) in [
        ("fields + text", &combined, kind_floor, stage_floor),
        ("text alone", &text, text_kind_floor, text_stage_floor),
    ] {
        assert!(
            t.kind_ok >= kind && t.stage_issue >= stage,
            "{title} ({path}): kind {}/{}, stage {}/{} (floors {kind}, {stage})",
            t.kind_ok,
            t.total,
            t.stage_issue,
            t.total
        );
    }
}

/// The signs of a dead process, written here independently of the parser: a pasted log is only
/// `process_killed` when its text shows one of them (issue #40: the end of a paste is not one).
static DEATH_SIGN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"(?im)(\bkilled\b|oom-kill|earlyoom|systemd-oomd|terminated abnormally|exit(?:ed with)? code|exit status|process exited|segmentation fault|core dumped|sigkill|signal 9\b|press any key|请按任意键|0xc0000005|-1073741819|fatal exception|fatal python error|most recent call first|reconnecting|to see the gui go to|starting server|import times for custom nodes|aborthandler\.h|exception code: 0x|if you see this and comfyui did not start|^[a-z]:\\[^>\n]*>\s*pause\s*$|\b(?:terminated|aborted|abort trap|bus error|illegal (?:hardware )?instruction|floating point exception|trace/breakpoint trap)\b|kernel panic|kill process \d|segfault at|oomkilled|has stopped working|quit unexpectedly|referenced memory at|faulting application|bugcheck|stop code:|needs to restart|^[A-Z_]+_VIOLATION \()").expect("regex")
});

/// Over every labelled set: no pasted text without a death sign comes out `process_killed`,
/// neither alone nor with the record's structured fields; and no record labelled otherwise is
/// called `process_killed`.
#[test]
fn no_pasted_log_without_a_death_sign_is_process_killed() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in all_labelled() {
        for record in load_file(&file) {
            let id = record["id"].as_str().unwrap_or("?").to_string();
            let text = excerpts(&record);
            let alone = diagnose::diagnose_text(&text)
                .unwrap_or_else(|e| diagnose::no_failure(&e.to_string()));
            let combined = diagnose::diagnose_input(&combined_input(&record));
            // The fields path also reads the record's exception fields.
            let fields = [
                &record["error"]["exception_type"],
                &record["error"]["exception_message"],
            ]
            .iter()
            .filter_map(|v| v.as_str())
            .fold(text.clone(), |all, field| format!("{all}\n{field}"));
            for (path, d, shown) in [
                ("text", &alone, &text),
                ("text + fields", &combined, &fields),
            ] {
                if d.kind != FailureKind::ProcessKilled {
                    continue;
                }
                if !DEATH_SIGN.is_match(shown) {
                    wrong.push(format!(
                        "{file} {id} ({path}): process_killed without a death sign in what it read: {}",
                        d.kind_evidence
                    ));
                }
                if record["labels"]["kind"] != "process_killed" {
                    wrong.push(format!(
                        "{file} {id} ({path}) is labelled {}: {}",
                        record["labels"]["kind"], d.kind_evidence
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 1707, "only {checked} records checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Lines a console prints that are not the run's activity: ComfyUI-Manager's registry fetch and
/// its notices, Crystools' banner, a deprecation warning and its source line, ComfyUI's
/// attention choice. (`Prompt executed in …` is not one: it ends the run.)
const TRAILING_NOISE: &[&str] = &[
    "\n",
    "\nFETCH ComfyRegistry Data: 25/115\n",
    "\nFETCH ComfyRegistry Data [DONE]\n[ComfyUI-Manager] default cache updated: https://api.comfy.org/nodes\nFETCH DATA from: https://api.comfy.org/nodes?page=1&limit=1000 [DONE]\n[ComfyUI-Manager] All startup tasks have been completed.\n",
    "\n[Crystools INFO] Crystools version: 1.22.1\n[Crystools INFO] Platform release: 10\n",
    "\n/home/user/ComfyUI/venv/lib/python3.12/site-packages/torch/utils/_pytree.py:185: FutureWarning: `torch.utils._pytree._register_pytree_node` is deprecated. Please use `torch.utils._pytree.register_pytree_node` instead.\n  warnings.warn(\n",
    "\nUsing pytorch attention in VAE\n",
];

/// Issue #40: ordinary trailing noise after a labelled record's text (lines that are not the
/// run's activity) leaves the stage as it was, through the pasted text alone.
#[test]
fn trailing_noise_leaves_the_stage_unchanged() {
    let mut changed = Vec::new();
    let mut checked = 0;
    for file in all_labelled() {
        for record in load_file(&file) {
            let text = excerpts(&record);
            let stage_of = |t: &str| {
                diagnose::diagnose_text(t)
                    .map(|d| (d.stage, d.stage_candidates))
                    .ok()
            };
            let Some(before) = stage_of(&text) else {
                continue;
            };
            checked += 1;
            for noise in TRAILING_NOISE {
                let after = stage_of(&format!("{text}{noise}"));
                if after.as_ref() != Some(&before) {
                    changed.push(format!(
                        "{} + {:?}: {:?} → {:?}",
                        record["id"].as_str().unwrap_or("?"),
                        noise.lines().nth(1).unwrap_or("\\n"),
                        before,
                        after
                    ));
                }
            }
        }
    }
    assert!(checked >= 250, "only {checked} records parsed");
    assert!(
        changed.is_empty(),
        "trailing noise changed the stage of {} record(s):\n{}",
        changed.len(),
        changed.join("\n")
    );
}

/// Second labels of 120 clean records (the lowest SHA-256 of their ids), written blind from the
/// quoted text under the README's rules (docs/diagnose.md, "How far two labellers agree").
const SECOND_LABELS: &str = "tests/fixtures/oom-reports/second-labels.json";

/// The two labellers' agreement as docs/diagnose.md states it: kind 117 of 120, stage (issue
/// #40's measure, the second label against the first) 116 of 120.
#[test]
fn two_labellers_agree_as_documented() {
    // clean-2026c to clean-2026f, the batches the 120 were drawn from.
    let first: BTreeMap<String, Value> = CLEAN_BATCHES[2..6]
        .iter()
        .flat_map(|(batch, _)| load_file(&clean_file(batch)))
        .map(|r| (r["id"].as_str().unwrap_or("?").to_string(), r))
        .collect();
    let second = load_file(SECOND_LABELS);
    assert_eq!(second.len(), 120);
    let (mut kind, mut stage) = (0, 0);
    for s in &second {
        let id = s["id"].as_str().unwrap_or("?");
        let f = &first
            .get(id)
            .unwrap_or_else(|| panic!("{id} is in no clean batch"))["labels"];
        kind += (s["kind"] == f["kind"]) as usize;
        let first_open = s["stage_candidates"]
            .as_array()
            .and_then(|c| c.iter().find(|x| *x != "unknown"));
        stage += (s["stage"] == f["stage"]
            || (s["stage"] == "unknown" && first_open == Some(&f["stage"])))
            as usize;
    }
    eprintln!("second labels agree: kind {kind}/120, stage {stage}/120");
    assert_eq!((kind, stage), (117, 116));
}
