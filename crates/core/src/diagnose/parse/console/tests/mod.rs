//! Unit tests of the console parser, by what they read (one file each); the helpers they share.

use super::super::parse_input;
use crate::diagnose::RunOutcomeHint;
use crate::diagnose::{ConsoleTail, Diagnosis, ParseError};
use crate::vocab::FailureKind;

mod aimdo;
mod deaths;
mod messages;
mod runs;

/// A run sampling, half way: a model requested and partly loaded, a bar at 9/20.
const MID_RUN: &str = "got prompt\nRequested to load Flux\nloaded partially 7800.0 7799.9 0\n 45%|████▌     | 9/20 [00:18<00:22,  2.05s/it]\n";

/// Each of `notices` as the last thing a run mid-sampling printed is no failure (`unknown`).
fn each_no_failure_after_a_run(notices: &[&str]) {
    for notice in notices {
        kind_of(&format!("{MID_RUN}{notice}\n"), FailureKind::Unknown);
    }
}
/// Each of `fatals` after the start-up lines `start` is a start-up failure (`other`).
fn each_a_start_up_failure(start: &str, fatals: &[&str]) {
    for fatal in fatals {
        kind_of(&format!("{start}{fatal}\n"), FailureKind::Other);
    }
}

/// `log` diagnosed as a pasted text, asserted to be of `kind`.
fn kind_of(log: &str, kind: FailureKind) -> Diagnosis {
    let d = crate::diagnose::diagnose_text(log).unwrap();
    assert_eq!(d.kind, kind, "{}", d.kind_evidence);
    d
}
/// `kind_of`, and the message read holds `part`.
fn message_saying(log: &str, kind: FailureKind, part: &str) {
    let d = kind_of(log, kind);
    let message = d.message.as_deref().unwrap_or("");
    assert!(message.contains(part), "{part}: {message}");
}
/// `kind_of`, and the kind's evidence names each of `words`.
fn kind_saying(log: &str, kind: FailureKind, words: &[&str]) {
    let d = kind_of(log, kind);
    for w in words {
        assert!(d.kind_evidence.contains(w), "{w}: {}", d.kind_evidence);
    }
}
