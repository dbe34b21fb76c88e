//! `comfy-bisect check WORKFLOW` as `git bisect run` uses it: the exit statuses (0 good, 1
//! bad, 125 cannot test), the run journaled with the server's version and the checkout's
//! commit, and a real `git bisect run` over a throwaway repository whose commits change how
//! much VRAM the simulator (started by `--restart-cmd`) has.

use crate::session_support::{cli, example, only_session, text, write_workflow, Sim};
use comfy_bisect_core::check::{CheckRecord, CHECK_FILE};
use comfy_bisect_core::session::index;
use comfy_bisect_core::session::journal::{read_json, SessionFile, SessionState, SESSION_FILE};
use comfy_bisect_sim::profile::VERSION_2026;
use comfy_bisect_sim::Profile;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_comfy-bisect");

/// The SD1.5 example: passes with 24 GiB of simulated VRAM, runs out of memory with 4 GiB.
fn sd15() -> serde_json::Value {
    example("sd15_txt2img_lora_upscale", &[])
}

/// `comfy-bisect --server URL check ARGS... --runs-dir RUNS -q`, run in `cwd`.
fn check_in(cwd: &Path, url: &str, runs: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(cwd)
        .args(["--server", url, "check", "-q", "--runs-dir"])
        .arg(runs)
        .args(args)
        .env_remove("COMFY_BISECT_SERVER")
        .env_remove("COMFY_BISECT_HEADERS")
        .output()
        .unwrap()
}

/// `git ARGS...` in `dir` with a fixed identity and no user or system configuration.
fn git(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
    out
}

/// A throwaway repository whose commits each write `vram` (the simulator's VRAM); their ids.
fn repo_with(dir: &Path, vram_per_commit: &[&str]) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    vram_per_commit
        .iter()
        .enumerate()
        .map(|(i, vram)| {
            std::fs::write(dir.join("vram"), format!("{vram}\n")).unwrap();
            git(dir, &["add", "vram"]);
            git(
                dir,
                &[
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    &format!("commit {i}: {vram}"),
                ],
            );
            let head = git(dir, &["rev-parse", "HEAD"]);
            String::from_utf8_lossy(&head.stdout).trim().to_string()
        })
        .collect()
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The simulators the restart script started, stopped when the test ends (also on a panic).
struct Simulators {
    pid_file: PathBuf,
}

impl Drop for Simulators {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// Writes `restart.sh` into `dir`: it stops the simulator it started last (and waits until that
/// process is gone, at most a minute), then starts `comfy-bisect simulate` on `port` in the
/// background with the VRAM the file `vram` of the current folder (the checkout) names; a
/// `vram` of `broken` fails the restart (a commit that does not build).
fn restart_script(dir: &Path, port: u16) -> (PathBuf, Simulators) {
    let pid_file = dir.join("sim.pid");
    let script = dir.join("restart.sh");
    let body = format!(
        r#"set -e
pid_file='{pid}'
if [ -f "$pid_file" ]; then
  old=$(cat "$pid_file")
  kill "$old" 2>/dev/null || true
  n=0
  while [ -e "/proc/$old" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$old/status" 2>/dev/null; do
    n=$((n + 1)); [ "$n" -lt 1200 ] || exit 9
    sleep 0.05
  done
  rm -f "$pid_file"
fi
vram=$(cat vram)
[ "$vram" != broken ] || {{ echo "this commit does not build"; exit 4; }}
'{bin}' simulate --port {port} --vram "$vram" --time-scale 0 >>'{log}' 2>&1 </dev/null &
echo $! > "$pid_file"
"#,
        pid = pid_file.display(),
        bin = BIN,
        log = dir.join("sim.log").display(),
    );
    std::fs::write(&script, body).unwrap();
    (script, Simulators { pid_file })
}

/// The check records of every session under `runs`, oldest first.
fn checks(runs: &Path) -> Vec<(SessionFile, CheckRecord)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(SESSION_FILE).is_file())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|d| {
            (
                read_json(&d.join(SESSION_FILE)).unwrap(),
                CheckRecord::load(d).expect("check.json"),
            )
        })
        .collect()
}

#[test]
fn git_bisect_run_names_the_commit_that_broke_the_workflow() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("comfyui");
    // Good until commit 5; commit 3, the first one `git bisect` picks, cannot be tested (its
    // restart fails, as a commit that does not build): skipped.
    let commits = repo_with(
        &repo,
        &[
            "24GiB", "24GiB", "24GiB", "broken", "24GiB", "4GiB", "4GiB", "4GiB",
        ],
    );
    let port = free_port();
    let (script, _sims) = restart_script(tmp.path(), port);
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    git(&repo, &["bisect", "start", &commits[7], &commits[0]]);
    let restart = format!("sh '{}'", script.display());
    let url = format!("http://127.0.0.1:{port}");
    let out = git(
        &repo,
        &[
            "bisect",
            "run",
            BIN,
            "--server",
            &url,
            "check",
            "-q",
            wf.to_str().unwrap(),
            "--restart-cmd",
            &restart,
            "--wait-server",
            "120s",
            "--runs-dir",
            runs.to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("{} is the first bad commit", commits[5])),
        "{}",
        text(&out)
    );
    let log = git(&repo, &["bisect", "log"]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains(&format!("git bisect skip {}", commits[3])),
        "the commit whose server did not start is skipped (125):\n{log}"
    );
    // Every check is journaled with the commit it ran on and the server's version.
    let entries = index::read_all(&runs).unwrap();
    assert!(!entries.is_empty());
    for e in &entries {
        let mark = e.check.as_ref().expect("a check's index line has its mark");
        assert_eq!(mark.comfyui_version.as_deref(), Some("0.3.64"));
        let commit = mark.commit.as_deref().unwrap();
        let k = commits.iter().position(|c| c == commit).unwrap();
        let expected = if k >= 5 { "failed" } else { "passed" };
        assert_eq!(e.outcome, expected, "commit {k}");
    }
    let by_commit = |k: usize| {
        entries
            .iter()
            .find(|e| e.check.as_ref().unwrap().commit.as_deref() == Some(&commits[k]))
    };
    assert!(
        by_commit(4).is_some() && by_commit(5).is_some(),
        "{entries:?}"
    );
    assert!(by_commit(3).is_none(), "an untested commit has no run");
    // `runs` reads the bisect back: one line per check with its commit and exit status.
    let listed = cli(&["runs", "--runs-dir", runs.to_str().unwrap()]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains(&format!("commit {}", &commits[5][..12]))
            && listed.contains("bad (exit 1)")
            && listed.contains("good (exit 0)"),
        "{listed}"
    );
    git(&repo, &["bisect", "reset"]);
}

#[test]
fn a_complete_product_exits_0_with_the_version_and_commit_recorded() {
    let sim = Sim::with_vram_mib(24 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("pack");
    let commits = repo_with(&repo, &["24GiB"]);
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(
        tmp.path(),
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--checkout", repo.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.starts_with("check: good (exit 0) · ComfyUI 0.3.64 · commit "),
        "{line}"
    );
    assert!(line.contains(&commits[0][..12]), "{line}");
    let (dir, session) = only_session(&runs);
    assert_eq!(session.state, SessionState::Done);
    let record: CheckRecord = read_json(&dir.join(CHECK_FILE)).unwrap();
    assert_eq!(record.commit.as_deref(), Some(commits[0].as_str()));
    let run_id = record.run_id.clone().unwrap();
    // The run is in the index like a bisect's, by its prompt_id, with the model hashes.
    let entries = index::read_all(&runs).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].run_id, run_id);
    assert_eq!(entries[0].outcome, "passed");
    assert!(!entries[0].component_hashes.is_empty());
    assert!(dir
        .join(&session.workflows[0].runs[0].dir)
        .join("run.json")
        .is_file());
    // `show` finds the run by its id; `resume` leaves a check alone.
    let runs_arg = runs.to_str().unwrap();
    let shown = cli(&["show", "--runs-dir", runs_arg, &run_id[..8]]);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    let resumed = cli(&["resume", "--runs-dir", runs_arg]);
    assert!(
        text(&resumed).contains("no unfinished session"),
        "{}",
        text(&resumed)
    );
    let resumed = cli(&["resume", "--runs-dir", runs_arg, &session.session_id]);
    assert_eq!(resumed.status.code(), Some(2), "{}", text(&resumed));
    assert!(
        text(&resumed).contains("is a `check`"),
        "{}",
        text(&resumed)
    );
    // --json: the same record.
    let out = check_in(
        tmp.path(),
        &sim.url(),
        &runs,
        &[
            wf.to_str().unwrap(),
            "--json",
            "--checkout",
            repo.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "good");
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["comfyui_version"], "0.3.64");
    assert_eq!(json["commit"], json!(commits[0]));
}

/// `check` on the 2026 profile: a complete product is good and names the 2026 server's
/// version; an out-of-memory run is bad. 4 GiB holds the SD1.5 weights, so dynamic VRAM has
/// nothing to stream: the full size's activations run out on both profiles.
#[test]
fn check_on_the_2026_profile_exits_0_then_1() {
    for (mib, code) in [(24 * 1024, 0), (4 * 1024, 1)] {
        let sim = Sim::on(Profile::Y2026, mib, 0.0);
        let tmp = tempfile::tempdir().unwrap();
        let wf = write_workflow(tmp.path(), "wf", &sd15());
        let runs = tmp.path().join("runs");
        let out = check_in(
            tmp.path(),
            &sim.url(),
            &runs,
            &[wf.to_str().unwrap(), "--json"],
        );
        assert_eq!(out.status.code(), Some(code), "{}", text(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["exit_code"], code);
        assert_eq!(json["comfyui_version"], VERSION_2026, "{json}");
        let (_, record) = checks(&runs).pop().unwrap();
        let outcome = if code == 0 { "passed" } else { "failed" };
        assert_eq!(record.outcome.as_deref(), Some(outcome));
    }
}

#[test]
fn an_out_of_memory_run_exits_1() {
    let sim = Sim::with_vram_mib(4 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(tmp.path(), &sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("bad (exit 1)") && line.contains("OutOfMemoryError"),
        "{line}"
    );
    // Not in a git checkout and no --checkout: no commit.
    let (_, record) = checks(&runs).pop().unwrap();
    assert_eq!(record.commit, None);
    assert_eq!(record.outcome.as_deref(), Some("failed"));
}

#[test]
fn an_incomplete_product_exits_1() {
    // The server says success, but the SaveImage node wrote nothing: not a complete product.
    let faults = comfy_bisect_sim::Faults::parse("missing-output=SaveImage").unwrap();
    let sim = Sim::with_faults(24 * 1024, faults);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(tmp.path(), &sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("bad (exit 1)") && line.contains("incomplete product"),
        "{line}"
    );
}

#[test]
fn a_missing_node_class_cannot_be_tested_125() {
    let sim = Sim::with_vram_mib(24 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let mut workflow = sd15();
    workflow["10"]["class_type"] = json!("LoraLoaderFromTheFuture");
    let wf = write_workflow(tmp.path(), "wf", &workflow);
    let runs = tmp.path().join("runs");
    let out = check_in(tmp.path(), &sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("skip (exit 125)") && line.contains("LoraLoaderFromTheFuture"),
        "{line}"
    );
    // Recorded, with nothing run.
    let (session, record) = checks(&runs).pop().unwrap();
    assert!(matches!(session.state, SessionState::Stopped { .. }));
    assert!(session.workflows[0].runs.is_empty());
    assert_eq!(record.comfyui_version.as_deref(), Some("0.3.64"));
    assert!(index::read_all(&runs).unwrap().is_empty());
}

#[test]
fn a_server_that_never_comes_up_cannot_be_tested_125() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let url = format!("http://127.0.0.1:{}", free_port());
    // Nothing listens, and the restart command starts nothing.
    let out = check_in(
        tmp.path(),
        &url,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--wait-server",
            "1s",
            "--restart-cmd",
            // a command that does nothing and succeeds, in the platform's shell
            if cfg!(windows) { "exit 0" } else { "true" },
        ],
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("did not come up within 1s (--wait-server)"),
        "{line}"
    );
    // A restart command that fails (a commit that does not build): 125 as well.
    let out = check_in(
        tmp.path(),
        &url,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--restart-cmd",
            // (cmd.exe runs it on Windows, where `&` separates commands)
            if cfg!(windows) {
                "echo no build& exit 4"
            } else {
                "echo no build; exit 4"
            },
        ],
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("--restart-cmd failed") && line.contains("exit status 4"),
        "{line}"
    );
    let log = std::fs::read_to_string(runs.join("restart.log")).unwrap();
    assert!(log.contains("no build"), "{log}");
}

#[test]
fn a_bad_checkout_or_workflow_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let url = format!("http://127.0.0.1:{}", free_port());
    let out = check_in(
        tmp.path(),
        &url,
        &runs,
        &[
            wf.to_str().unwrap(),
            "--checkout",
            tmp.path().to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not a git checkout"), "{}", text(&out));
    let out = check_in(tmp.path(), &url, &runs, &["missing.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn bisect_starts_a_server_that_is_down_at_its_first_connection() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("vram"), "24GiB\n").unwrap();
    let port = free_port();
    let (script, _sims) = restart_script(tmp.path(), port);
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let restart = format!("sh '{}'", script.display());
    // Nothing listens on the port yet: --restart-cmd starts the server, --wait-server waits.
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args([
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "bisect",
            "-q",
        ])
        .arg(&wf)
        .args([
            "--restart-cmd",
            &restart,
            "--wait-server",
            "120s",
            "--runs-dir",
        ])
        .arg(&runs)
        .env_remove("COMFY_BISECT_SERVER")
        .env_remove("COMFY_BISECT_HEADERS")
        .output()
        .unwrap();
    // The target passes on the simulator: could not reproduce, exit 4 (the README's table).
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let (_, session) = only_session(&runs);
    assert_eq!(session.state, SessionState::Done);
    assert!(!session.workflows[0].runs.is_empty());
    let log = std::fs::read_to_string(runs.join("restart.log")).unwrap();
    assert!(log.contains("restart.sh"), "{log}");
}

/// `comfy-bisect report SESSION --runs-dir RUNS` of a check's one-run session (report.md).
fn report_of_check(runs: &Path) -> String {
    report_of_check_as(runs, "md")
}

/// The same in `format` (`md`, `json`).
fn report_of_check_as(runs: &Path, format: &str) -> String {
    let (dir, _) = only_session(runs);
    let id = dir.file_name().unwrap().to_str().unwrap().to_string();
    let runs = runs.to_str().unwrap();
    let out = cli(&["report", &id, "--format", format, "--runs-dir", runs]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_report_of_a_failed_check_is_its_verdict_not_a_session_in_progress() {
    let sim = Sim::with_vram_mib(4 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(tmp.path(), &sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (_, session) = only_session(&runs);
    assert!(
        session.workflows[0].verdict.is_some(),
        "the check's run decided it: {:?}",
        session.workflows[0]
    );
    let report = report_of_check(&runs);
    assert!(
        !report.contains("In progress") && !report.contains("ladder of steps"),
        "{report}"
    );
    assert!(
        report.contains("**Verdict:** Check (one run of the workflow as given, no ladder): bad — CUDA out of memory"),
        "{report}"
    );
    // A failure: the bug-form block, with the traceback, is there too.
    assert!(report.contains("### Debug Logs"), "{report}");
    let json: serde_json::Value = serde_json::from_str(&report_of_check_as(&runs, "json")).unwrap();
    assert_eq!(json["workflows"][0]["verdict"]["kind"], "check");
    assert_eq!(
        session.workflows[0].headline().as_deref(),
        Some("check: bad (failed)")
    );
}

#[test]
fn the_report_of_a_good_check_says_it_passed() {
    let sim = Sim::with_vram_mib(24 * 1024, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(tmp.path(), &sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = report_of_check(&runs);
    assert!(
        report.contains(
            "**Verdict:** Check (one run of the workflow as given, no ladder): good — it passed with a complete product."
        ),
        "{report}"
    );
    assert!(!report.contains("For ComfyUI's bug form"), "{report}");
}

/// Issue #39 finding 8: a passing workflow whose server dies mid-run was `bad (exit 1) ·
/// server lost`, and `git bisect` marked a good commit bad. A crash decides nothing alone now:
/// the check runs again once the server is back; a pass then leaves the commit untested (125).
#[test]
fn a_crash_not_confirmed_by_a_second_run_cannot_be_tested_125() {
    // The first prompt kills the server; it comes back by itself (as under a supervisor).
    let faults = comfy_bisect_sim::Faults::parse("crash-on=1,revive-after=300").unwrap();
    let sim = Sim::with_faults(24 * 1024, faults);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(
        tmp.path(),
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--wait-server", "30s"],
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("skip (exit 125)")
            && line.contains("server lost")
            && line.contains("a second run passed: the crash was not confirmed"),
        "{line}"
    );
    let (session, record) = checks(&runs).pop().unwrap();
    assert_eq!(session.workflows[0].runs.len(), 2, "{line}");
    assert_eq!(record.outcome.as_deref(), Some("passed"));
}

/// The same crash twice is confirmed: bad (exit 1), both runs named.
#[test]
fn a_crash_confirmed_by_a_second_run_exits_1() {
    let faults = comfy_bisect_sim::Faults::parse("crash-on=1:2,revive-after=300").unwrap();
    let sim = Sim::with_faults(24 * 1024, faults);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "wf", &sd15());
    let runs = tmp.path().join("runs");
    let out = check_in(
        tmp.path(),
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--wait-server", "30s"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("bad (exit 1)") && line.contains("confirmed by a second run"),
        "{line}"
    );
    // A server that does not come back: the crash cannot be confirmed (125).
    let faults = comfy_bisect_sim::Faults::parse("crash-on=1").unwrap();
    let sim = Sim::with_faults(24 * 1024, faults);
    let runs = tmp.path().join("runs2");
    let out = check_in(
        tmp.path(),
        &sim.url(),
        &runs,
        &[wf.to_str().unwrap(), "--wait-server", "1s"],
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("the second could not confirm it") && line.contains("--wait-server"),
        "{line}"
    );
}
