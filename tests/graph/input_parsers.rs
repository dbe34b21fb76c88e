//! Property tests: no parser of user input panics, whatever it is given — durations, times
//! (`--start-at`, `--deadline`, at any instant in any zone),
//! `--header` values, server URLs, the ladder options (`--order`, `--keep`, `--min-*`) — and a
//! password in a server URL never reaches an error message or the printed URL.

use clap::Parser;
use comfy_bisect::cli::common::parse_positive_duration;
use comfy_bisect::cli::schedule::{parse_duration, parse_when, MAX_DURATION};
use comfy_bisect::cli::Cli;
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::ladder::{plan, Increment, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::{load_api_file, Workflow};
use proptest::prelude::*;
use std::sync::OnceLock;
use std::time::Duration;

/// Text shaped like a duration: numbers (possibly huge or fractional) with units, or anything.
fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(("[0-9]{0,25}(\\.[0-9]{0,3})?", "(ms|s|m|min|h|d|x|)"), 1..4)
            .prop_map(|parts| parts.into_iter().map(|(n, u)| n + &u).collect()),
        any::<u64>().prop_map(|n| format!("{n}h")),
        any::<u64>().prop_map(|n| format!("{n}s1s")),
        ".*",
    ]
}

proptest! {
    #[test]
    fn durations_never_panic_and_stay_bounded(text in duration_text()) {
        if let Ok(d) = parse_duration(&text) {
            prop_assert!(d <= MAX_DURATION, "{text} → {d:?}");
        }
        if let Ok(d) = parse_positive_duration(&text) {
            prop_assert!(!d.is_zero());
        }
    }

    #[test]
    fn duration_options_never_panic(text in duration_text()) {
        for args in [
            vec!["comfy-bisect", "submit", "wf.json", "--timeout", &text],
            vec!["comfy-bisect", "bisect", "wf.json", "--wait-server", &text],
            vec!["comfy-bisect", "validate", "wf.json", "--request-timeout", &text],
        ] {
            let _ = Cli::try_parse_from(args);
        }
    }

    #[test]
    fn times_never_panic(text in prop_oneof![
        "[0-9]{0,4}:[0-9]{0,4}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})",
        ".*",
    ], now in prop_oneof![
        Just(jiff::Timestamp::MIN.as_second()),
        Just(jiff::Timestamp::MAX.as_second()),
        jiff::Timestamp::MIN.as_second()..jiff::Timestamp::MAX.as_second(),
    ], zone in prop_oneof![
        Just("CET-1CEST,M3.5.0,M10.5.0/3"),
        Just("NZST-12NZDT,M9.5.0,M4.1.0/3"),
        Just("UTC0"),
    ]) {
        let now = jiff::Timestamp::from_second(now).unwrap();
        let tz = jiff::tz::TimeZone::posix(zone).unwrap();
        if let Ok(at) = parse_when(&text, now, &tz) {
            // An HH:MM time is always in the future.
            prop_assert!(text.trim().len() > 5 || at.timestamp() > now);
        }
    }

    #[test]
    fn headers_never_panic(line in prop_oneof![
        "[ -~]{0,20}:[ -~\\t\\u{80}-\\u{10ffff}]{0,20}",
        ".*",
    ], env in proptest::option::of(".*")) {
        let mut headers = ExtraHeaders::new();
        let _ = headers.push_line(&line);
        let _ = ExtraHeaders::from_sources(std::slice::from_ref(&line), env.as_deref());
        // Whatever was accepted can be sent.
        let _ = headers.to_header_map();
    }

    #[test]
    fn server_urls_never_panic_nor_print_the_password(
        scheme in "(http://|https://|ws://|)",
        user in "[a-z]{0,6}",
        password in "PW[ -~]{3,10}",
        host in "([a-z0-9.-]{0,12}|\\[::1\\]|127\\.0\\.0\\.1)",
        port in "(:[0-9]{0,6}|:[a-z]{1,3}|)",
        path in "(/[ -~]{0,10}|)",
    ) {
        let server = format!("{scheme}{user}:{password}@{host}{port}{path}");
        match Client::new(&server, ExtraHeaders::new()) {
            Ok(client) => {
                prop_assert!(!client.server_url().contains(&password), "{}", client.server_url());
                let debug = format!("{client:?}");
                prop_assert!(!debug.contains(&password), "{}", debug);
            }
            Err(e) => prop_assert!(!e.to_string().contains(&password), "{e}"),
        }
    }

    #[test]
    fn any_server_text_never_panics(server in ".*") {
        let _ = Client::new(&server, ExtraHeaders::new());
    }

    #[test]
    fn increment_lists_never_panic(order in "[a-z,]{0,40}", keep in "[a-z,]{0,40}") {
        let _ = Cli::try_parse_from(["comfy-bisect", "plan", "wf.json", "--order", &order, "--keep", &keep]);
    }
}

const DEFS: &str = "tests/fixtures/comfyui/GET__object_info.final.json";
const CUSTOM_DEFS: &str = "tests/fixtures/custom-nodes/object_info.custom.json";
const TARGET: &str =
    "tests/fixtures/custom-nodes/workflows/wan22_i2v_gguf_lightning_sage_teacache_rife.json";

fn target() -> &'static (Workflow, NodeDefs) {
    static TARGET_AND_DEFS: OnceLock<(Workflow, NodeDefs)> = OnceLock::new();
    TARGET_AND_DEFS.get_or_init(|| {
        (
            load_api_file(std::path::Path::new(TARGET)).unwrap(),
            NodeDefs::load_files(&[DEFS, CUSTOM_DEFS]).unwrap(),
        )
    })
}

fn increments() -> impl Strategy<Value = Vec<Increment>> {
    proptest::collection::vec(proptest::sample::select(Increment::LADDER.to_vec()), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// `--min-resolution`, `--min-frames`, `--min-steps`, `--order` and `--keep` with any values
    /// (u32 extremes included): a plan or an error, never a panic or a wrapped number.
    #[test]
    fn ladder_options_never_panic(
        min_resolution in prop_oneof![any::<u32>(), 0u32..4096],
        min_frames in prop_oneof![any::<u32>(), 0u32..200],
        min_steps in proptest::option::of(prop_oneof![any::<u32>(), 0u32..100]),
        order in increments(),
        keep in increments(),
    ) {
        let (workflow, defs) = target();
        let options = PlanOptions { min_resolution, min_frames, min_steps, order, keep };
        let _ = plan(workflow, defs, &Catalog::builtin(), &options);
    }
}

#[test]
fn the_reported_inputs_are_refused_with_a_message() {
    let e = Cli::try_parse_from([
        "comfy-bisect",
        "submit",
        "wf.json",
        "--timeout",
        "18446744073709551615s1s",
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("longer than a year"), "{e}");
    assert_eq!(
        parse_duration("8760h").unwrap(),
        Duration::from_secs(31_536_000)
    );
}
