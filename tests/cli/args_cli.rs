//! The command line a first-time user reads (issue #38, items 6 and 7): `-h` short and grouped,
//! `--help` with examples, the renamed options still taking their old spelling, the global
//! flags on both sides of the subcommand, durations with a unit, the echo of every deadline and
//! start time, and `check`'s short wait for a server it was not asked to start.

use clap::Parser;
use comfy_bisect::cli::{check, Cli, Command};
use std::process::Command as Process;
use std::time::Duration;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Process::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(args)
        .env_remove("COMFY_BISECT_SERVER")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn parse(args: &[&str]) -> Cli {
    let mut argv = vec!["comfy-bisect"];
    argv.extend_from_slice(args);
    Cli::try_parse_args(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn parse_err(args: &[&str]) -> String {
    let mut argv = vec!["comfy-bisect"];
    argv.extend_from_slice(args);
    Cli::try_parse_args(argv).unwrap_err().to_string()
}

fn bisect(cli: Cli) -> comfy_bisect::cli::bisect::Args {
    match cli.command {
        Command::Bisect(args) => args,
        other => panic!("not bisect: {other:?}"),
    }
}

/// `bisect -h` is the short list a first run needs, under the headings; `--help` has every
/// option under the same headings, and the examples. (Before: one list of 41 options, 172
/// lines for both.)
#[test]
fn bisect_short_help_is_short_and_grouped_long_help_has_everything_and_examples() {
    let (code, short, err) = run(&["bisect", "-h"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, long, err) = run(&["bisect", "--help"]);
    assert_eq!(code, Some(0), "{err}");
    let lines = short.lines().count();
    assert!(lines <= 40, "bisect -h is {lines} lines:\n{short}");
    assert!(long.lines().count() > 2 * lines, "{long}");
    for heading in ["Basics:", "Overnight:", "Server:", "Mitigation:"] {
        assert!(short.contains(heading), "-h lacks {heading}\n{short}");
    }
    for heading in [
        "Basics:",
        "Overnight:",
        "Search:",
        "Ladder:",
        "Server:",
        "Mitigation:",
    ] {
        assert!(long.contains(heading), "--help lacks {heading}\n{long}");
    }
    for first_run in [
        "--server",
        "--runs-dir",
        "--strict",
        "--deadline",
        "--restart-cmd",
        "--quiet",
    ] {
        assert!(short.contains(first_run), "-h lacks {first_run}\n{short}");
    }
    for later in [
        "--strategy",
        "--search-sampler-steps",
        "--min-resolution",
        "--launch-cmd",
        "--header",
    ] {
        assert!(!short.contains(later), "-h shows {later}\n{short}");
        assert!(long.contains(later), "--help lacks {later}\n{long}");
    }
    assert!(long.contains("Examples:") && !short.contains("Examples:"));
    assert!(
        short.contains("--help"),
        "-h says where the rest is\n{short}"
    );
    // Every option's help is a few lines at most (--full-step-target's was ~300 characters).
    let (_, long_flat, _) = run(&["bisect", "--help"]);
    let full_step = long_flat
        .split("--full-step-target")
        .nth(1)
        .and_then(|rest| rest.split("\n      --").next())
        .unwrap();
    let chars = full_step
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .len();
    assert!(
        chars < 160,
        "--full-step-target's help is {chars} characters: {full_step}"
    );
}

/// The old spellings still parse, to the same options, and are not shown.
#[test]
fn renamed_options_keep_their_old_spelling_as_a_hidden_alias() {
    for (old, new) in [
        (
            &["--search-steps", "full"][..],
            &["--search-sampler-steps", "full"][..],
        ),
        (&["--controls"], &["--increments-alone"]),
        (&["--stall", "20m"], &["--stall-timeout", "20m"]),
    ] {
        let args = |extra: &[&str]| {
            let mut v = vec!["bisect", "wf.json"];
            v.extend_from_slice(extra);
            format!("{:?}", bisect(parse(&v)).session)
        };
        assert_eq!(args(old), args(new), "{old:?} vs {new:?}");
    }
    let (_, long, _) = run(&["bisect", "--help"]);
    for old in ["--search-steps ", "--controls", "--stall "] {
        assert!(!long.contains(old), "--help shows the old {old}");
    }
    // One name per concept: the hang limit is --stall-timeout for bisect and submit alike.
    let (_, submit, _) = run(&["submit", "--help"]);
    assert!(submit.contains("--stall-timeout") && long.contains("--stall-timeout"));
}

/// -q, -v and --runs-dir are taken before or after the subcommand; after wins for --runs-dir.
#[test]
fn global_flags_go_on_either_side_of_the_subcommand() {
    for argv in [
        &["-q", "bisect", "wf.json"][..],
        &["bisect", "wf.json", "-q"],
    ] {
        let cli = parse(argv);
        assert!(cli.quiet, "{argv:?}");
    }
    for argv in [&["-v", "resume"][..], &["resume", "-v"]] {
        assert_eq!(parse(argv).verbose, 1, "{argv:?}");
    }
    let before = bisect(parse(&["--runs-dir", "/tmp/nightly", "bisect", "wf.json"]));
    assert_eq!(
        before.session.runs_dir,
        std::path::Path::new("/tmp/nightly")
    );
    let both = bisect(parse(&[
        "--runs-dir",
        "/tmp/a",
        "bisect",
        "wf.json",
        "--runs-dir",
        "/tmp/b",
    ]));
    assert_eq!(both.session.runs_dir, std::path::Path::new("/tmp/b"));
    let neither = bisect(parse(&["bisect", "wf.json"]));
    assert_eq!(neither.session.runs_dir, std::path::Path::new("runs"));
    match parse(&["--runs-dir", "/tmp/a", "runs"]).command {
        Command::Runs(args) => assert_eq!(args.runs_dirs, vec![std::path::PathBuf::from("/tmp/a")]),
        other => panic!("{other:?}"),
    }
    // A command that keeps no sessions says so rather than ignoring it.
    let e = parse_err(&["--runs-dir", "/tmp/a", "hash", "wf.json"]);
    assert!(e.contains("`hash` keeps no sessions"), "{e}");
    // -q reaches the command through the binary too: the help shows it once, as global.
    let empty = tempfile::tempdir().unwrap();
    let folder = empty.path().to_str().unwrap();
    for argv in [
        &["-q", "runs", "--runs-dir", folder][..],
        &["runs", "-q", "--runs-dir", folder],
    ] {
        let (code, out, err) = run(argv);
        assert_eq!(code, Some(0), "{argv:?}: {out}{err}");
    }
}

/// A bare number is refused with the spellings that say which unit; with a unit it is taken.
#[test]
fn a_duration_without_a_unit_is_refused_with_examples() {
    let (code, out, err) = run(&["bisect", "wf.json", "--timeout", "30"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains("30 has no unit; write 30s, 10m or 2h"),
        "{err}"
    );
    for (command, flag) in [
        ("submit", "--stall-timeout"),
        ("check", "--wait-server"),
        ("bisect", "--deadline-grace"),
        ("submit", "--request-timeout"),
    ] {
        let (code, _, err) = run(&[command, "wf.json", flag, "90"]);
        assert_eq!(code, Some(2), "{command} {flag} 90: {err}");
        assert!(err.contains("90 has no unit"), "{command} {flag}: {err}");
    }
    let cli = bisect(parse(&["bisect", "wf.json", "--timeout", "30s"]));
    assert_eq!(cli.session.timeout, Some(Duration::from_secs(30)));
}

/// `--deadline` and `--start-at` are echoed at start as a date and time on the local clock,
/// before anything else happens (here the server is not there, so nothing else does).
#[test]
fn deadline_and_start_time_are_echoed_as_a_local_date_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.json");
    std::fs::write(&wf, "{}").unwrap();
    let runs = dir.path().join("runs");
    let out = Process::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["--server", "http://127.0.0.1:9", "bisect"])
        .arg(&wf)
        .args([
            "--deadline",
            "23:59",
            "--start-at",
            "2099-01-01T01:00:00Z",
            "--runs-dir",
        ])
        .arg(&runs)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    let deadline = err
        .lines()
        .find(|l| l.starts_with("--deadline 23:59: "))
        .unwrap_or_else(|| panic!("no deadline echo in\n{err}"));
    assert!(
        deadline.contains("23:59 today (") || deadline.contains("23:59 tomorrow ("),
        "{deadline}"
    );
    assert!(
        deadline.contains("UTC") && deadline.contains(", in "),
        "{deadline}"
    );
    let start = err
        .lines()
        .find(|l| l.starts_with("--start-at 2099-01-01T01:00:00Z: "))
        .unwrap_or_else(|| panic!("no start echo in\n{err}"));
    assert!(
        start.contains("01:00 Thu 1 Jan (Thu 2099-01-01 01:00 UTC"),
        "{start}"
    );
}

/// `check` with no --restart-cmd waits a minute for the server (it should be running), not
/// ten; with --restart-cmd, ten (a server starting); --wait-server decides when given.
#[test]
fn check_without_a_restart_command_waits_briefly() {
    let wait = |argv: &[&str]| match parse(argv).command {
        Command::Check(args) => args.wait_server(),
        other => panic!("{other:?}"),
    };
    assert_eq!(wait(&["check", "wf.json"]), Duration::from_secs(60));
    assert_eq!(check::WAIT_WITHOUT_RESTART, Duration::from_secs(60));
    assert_eq!(
        wait(&["check", "wf.json", "--restart-cmd", "true"]),
        Duration::from_secs(600)
    );
    assert_eq!(
        wait(&["check", "wf.json", "--wait-server", "5s"]),
        Duration::from_secs(5)
    );
    let (_, help, _) = run(&["check", "--help"]);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("60s without it"), "{help}");
}

/// The binary parses as the tests do (the README's recipes use `Cli::try_parse_from`): the
/// plain clap parse and `try_parse_args` agree when nothing comes before the subcommand.
#[test]
fn plain_parse_and_parse_args_agree_without_flags_before_the_subcommand() {
    let argv = ["comfy-bisect", "bisect", "wf.json", "--runs-dir", "/tmp/x"];
    let a = Cli::try_parse_from(argv).unwrap();
    let b = Cli::try_parse_args(argv).unwrap();
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}
