//! Process-level: the tool is killed with SIGKILL in the middle of a session and `resume`
//! continues it — completed runs are kept, the run in flight is taken from the server's
//! history (by its prompt_id) or run again, and the session reaches its verdict.

use crate::session_support::*;
use comfy_bisect_core::session::journal::{
    read_json, RunStatus, SessionFile, Verdict, SESSION_FILE,
};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `bisect -q` of the Wan example on `sim` in the background (on a slow simulated clock
/// the cache step fails mid-sampling); returns the child, the runs folder and the workflow file.
fn spawn_wan_bisect(
    sim: &Sim,
    dir: &std::path::Path,
) -> (std::process::Child, std::path::PathBuf, std::path::PathBuf) {
    let wf = write_workflow(
        dir,
        "wan",
        &example("wan22_t2v_experts_lora_cache_rife", &[]),
    );
    let runs = dir.join("runs");
    let child = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "--server",
            &sim.url(),
            "bisect",
            "-q",
            "--search-steps",
            "full",
        ])
        .arg("--runs-dir")
        .arg(&runs)
        .arg(&wf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, runs, wf)
}

/// The state letter `ps` shows for process `pid` (`Z` for a zombie); None when it is gone.
fn process_state(pid: u32) -> Option<char> {
    let out = Command::new("ps")
        .args(["-o", "stat=", "-p", &pid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().chars().next()
}

/// Waits until process `pid` (killed, not reaped) is a zombie.
fn wait_until_zombie(pid: u32) {
    let start = Instant::now();
    while process_state(pid) != Some('Z') {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "pid {pid} never became a zombie: {:?}",
            process_state(pid)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
#[cfg(unix)]
fn sigkill_mid_session_then_resume() {
    // Slow enough that a run is in flight for a while; the cache step fails mid-sampling.
    let sim = Sim::with_vram_mib(57344, 0.02);
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, runs, _) = spawn_wan_bisect(&sim, tmp.path());

    // Wait until two runs are done and a third is in flight, then kill -9.
    let killed_run = wait_for_journal(&mut child, &runs, |s| {
        let done = s.workflows[0]
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Done)
            .count();
        s.in_flight
            .as_ref()
            .filter(|_| done >= 2)
            .map(|f| f.run_id.clone())
    });
    // SIGKILL, not reaped: the killed tool stays a zombie (as under a cron job or a container
    // whose init reaps late), its process entry still there, while `resume` starts at once.
    child.kill().unwrap();
    wait_until_zombie(child.id());

    let (dir, before) = only_session(&runs);
    let kept: Vec<String> = before.workflows[0]
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Done)
        .map(|r| r.run_id.clone())
        .collect();
    let out = cli(&[
        "resume",
        "-q",
        "--runs-dir",
        runs.to_str().unwrap(),
        &before.session_id,
    ]);
    assert_eq!(
        process_state(child.id()),
        Some('Z'),
        "the killed bisect was still an unreaped zombie while resume ran"
    );
    child.wait().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let after: SessionFile = read_json(&dir.join(SESSION_FILE)).unwrap();
    let job = &after.workflows[0];
    for id in &kept {
        assert!(
            job.runs.iter().any(|r| &r.run_id == id),
            "completed run {id} lost"
        );
    }
    // The killed run was finished by the server and taken from its history (or, if the tool
    // died before the server had it, run again) — never both.
    let recovered = job.runs.iter().find(|r| r.run_id == killed_run);
    if let Some(r) = recovered {
        assert_eq!(r.status, RunStatus::Done);
        assert!(r.outcome.is_some());
    }
    let steps: Vec<_> = job.runs.iter().map(|r| (r.step, r.role)).collect();
    for (i, a) in steps.iter().enumerate() {
        assert!(
            !steps[i + 1..].contains(a),
            "a step was run twice: {steps:?}"
        );
    }
    assert!(after.in_flight.is_none());
    match &job.verdict {
        Some(Verdict::FirstFailure { increment, .. }) => assert_eq!(increment, "cache"),
        other => panic!("{other:?}\n{}", text(&out)),
    }
    let index = comfy_bisect_core::session::index::read_all(&runs).unwrap();
    assert_eq!(index.len(), job.runs.len(), "one index line per run");
}

#[test]
#[cfg(unix)]
fn a_second_session_on_the_same_server_is_refused_while_the_first_runs() {
    let sim = Sim::with_vram_mib(57344, 0.02);
    let tmp = tempfile::tempdir().unwrap();
    let (mut first, runs, wf) = spawn_wan_bisect(&sim, tmp.path());
    // Wait for the first session's lock file (the lock itself, not the temporary file it is
    // written in first).
    let lock = comfy_bisect_core::server::lock::lock_path(&sim.url());
    let start = Instant::now();
    while !lock.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no lock file appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = bisect(&sim.url(), &runs, &[wf.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("another comfy-bisect session"),
        "{}",
        text(&second)
    );
    assert!(
        !runs.exists() || session_dirs(&runs).len() <= 1,
        "the refused session wrote nothing"
    );
    first.kill().unwrap();
    first.wait().unwrap();
}

#[test]
#[cfg(unix)]
fn of_two_sessions_started_at_the_same_instant_exactly_one_runs() {
    let sim = Sim::with_vram_mib(57344, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(tmp.path(), "sd", &example("sd15_txt2img_lora_upscale", &[]));
    let runs = tmp.path().join("runs");
    // Both wait an hour for their start time while holding the lock (if they get it), so the
    // one that gets it is still running when the other has answered.
    let later = jiff::Timestamp::now() + std::time::Duration::from_secs(3600);
    let start_at = later.to_string();
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
            .args(["--server", &sim.url(), "bisect", "-q", "--runs-dir"])
            .arg(&runs)
            .args(["--start-at", &start_at])
            .arg(&wf)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut both = vec![spawn(), spawn()];
    let start = Instant::now();
    let refused = loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "neither session was refused"
        );
        if let Some(i) = (0..2).find(|&i| both[i].try_wait().unwrap().is_some()) {
            break i;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = both.remove(refused).wait_with_output().unwrap();
    let mut winner = both.pop().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let holder_pid = winner.id();
    assert!(
        stderr.contains("another comfy-bisect session")
            && stderr.contains(&format!("pid {holder_pid} on")),
        "the refusal names the holder (pid {holder_pid}): {stderr}"
    );
    assert!(
        winner.try_wait().unwrap().is_none(),
        "the session that holds the lock runs on"
    );
    // The holder's lock file names its session as soon as the session exists.
    let session_id = loop {
        if runs.exists() && session_dirs(&runs).len() == 1 {
            break only_session(&runs).1.session_id;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no session");
        std::thread::sleep(Duration::from_millis(10));
    };
    let lock = comfy_bisect_core::server::lock::lock_path(&sim.url());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let holder = comfy_bisect_core::server::lock::read_holder(&lock).unwrap();
        assert_eq!(holder.pid, holder_pid);
        if holder.session_id == session_id {
            break;
        }
        assert!(Instant::now() < deadline, "the lock still says {holder:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    winner.kill().unwrap();
    winner.wait().unwrap();
}

/// `bisect -q --start-at <in an hour>` of the SD1.5 example on `server` with its own runs
/// folder and lock folder `locks`: it holds the server's lock (when it gets it) while it waits.
fn spawn_waiting(
    server: &str,
    runs: &std::path::Path,
    locks: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    let wf = write_workflow(
        runs.parent().unwrap(),
        "sd",
        &example("sd15_txt2img_lora_upscale", &[]),
    );
    let later = jiff::Timestamp::now() + Duration::from_secs(3600);
    Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .env(comfy_bisect_core::server::lock::LOCK_DIR_ENV, locks)
        .args(["--server", server, "bisect", "-q", "--runs-dir"])
        .arg(runs)
        .args(["--start-at", &later.to_string()])
        .args(extra)
        .arg(&wf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `child` has created its session in `runs` (it got past the lock and preflight).
fn wait_for_session(child: &mut std::process::Child, runs: &std::path::Path) {
    let start = Instant::now();
    while !(runs.exists() && session_dirs(runs).len() == 1) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the session ended before it was created: {status}");
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no session");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
#[cfg(unix)]
fn the_server_lock_is_shared_by_every_runs_folder_and_every_name_of_the_server() {
    let sim = Sim::with_vram_mib(57344, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    let locks = tmp.path().join("locks");
    let folder = |name: &str| {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("runs")
    };
    let (runs_a, runs_b, runs_c) = (folder("a"), folder("b"), folder("c"));
    let mut first = spawn_waiting(&sim.url(), &runs_a, &locks, &[]);
    wait_for_session(&mut first, &runs_a);
    // Another runs folder, the same server by another name: refused, nothing written.
    let localhost = sim.url().replace("127.0.0.1", "localhost");
    assert_ne!(localhost, sim.url());
    let second = spawn_waiting(&localhost, &runs_b, &locks, &[])
        .wait_with_output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another comfy-bisect session")
            && stderr.contains(&format!("pid {} on", first.id()))
            && stderr.contains("--allow-shared-server"),
        "{stderr}"
    );
    assert!(!runs_b.exists() || session_dirs(&runs_b).is_empty());
    // `submit` takes the same lock (issue #38): refused, nothing submitted.
    let workflow = tmp.path().join("wf.json");
    std::fs::write(
        &workflow,
        example("sd15_txt2img_lora_upscale", &[]).to_string(),
    )
    .unwrap();
    let submitted = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["submit", "--server", &localhost])
        .arg(&workflow)
        .env(comfy_bisect_core::server::lock::LOCK_DIR_ENV, &locks)
        .output()
        .unwrap();
    assert_eq!(submitted.status.code(), Some(1), "{}", text(&submitted));
    let stderr = String::from_utf8_lossy(&submitted.stderr);
    assert!(
        stderr.contains("cannot submit: ") && stderr.contains("--allow-shared-server"),
        "{stderr}"
    );
    // `mitigate --server` takes the lock of the server it moves to (issue #38 item 5): a
    // finished session of another server cannot move onto this one while it is held, and
    // nothing of it changes.
    let elsewhere = Sim::with_vram_mib(57344, 0.0);
    let runs_d = folder("d");
    let wf = write_workflow(
        runs_d.parent().unwrap(),
        "sd",
        &example("sd15_txt2img_lora_upscale", &[]),
    );
    let finished = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .env(comfy_bisect_core::server::lock::LOCK_DIR_ENV, &locks)
        .args(["--server", &elsewhere.url(), "bisect", "-q", "--runs-dir"])
        .arg(&runs_d)
        .arg(&wf)
        .output()
        .unwrap();
    let (dir_d, before) = only_session(&runs_d);
    assert_eq!(before.server, elsewhere.url(), "{}", text(&finished));
    let journal_before = std::fs::read(dir_d.join(SESSION_FILE)).unwrap();
    let moved = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .env(comfy_bisect_core::server::lock::LOCK_DIR_ENV, &locks)
        .args(["mitigate", &before.session_id, "--server", &localhost])
        .arg("--runs-dir")
        .arg(&runs_d)
        .output()
        .unwrap();
    assert_eq!(moved.status.code(), Some(1), "{}", text(&moved));
    let stderr = String::from_utf8_lossy(&moved.stderr);
    assert!(
        stderr.contains("another comfy-bisect session")
            && stderr.contains(&format!("pid {} on", first.id())),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(dir_d.join(SESSION_FILE)).unwrap(),
        journal_before,
        "a refused move changes nothing"
    );
    assert!(sim.handle().submitted_prompts().is_empty());
    // --allow-shared-server runs anyway, and the session records it.
    let mut shared = spawn_waiting(&localhost, &runs_c, &locks, &["--allow-shared-server"]);
    wait_for_session(&mut shared, &runs_c);
    assert!(only_session(&runs_c).1.options.allow_shared_server);
    assert!(!only_session(&runs_a).1.options.allow_shared_server);
    for mut child in [first, shared] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // The holder is gone: its lock is taken over by the next session.
    let mut third = spawn_waiting(&sim.url(), &runs_b, &locks, &[]);
    wait_for_session(&mut third, &runs_b);
    third.kill().unwrap();
    third.wait().unwrap();
}

/// Issue #39 finding 3: `kill -9` + `resume` changed a `--strict` verdict. The SD1.5 example
/// on a 2560 MiB card passes its resolution step only through the tiled VAE decode fallback,
/// which `--strict` counts as the first failure. A run the server finished while the tool was
/// down came back from `/history` without its console (where the fallback shows) and counted
/// as a clean pass: "could not reproduce", or a later step. Killed at ten points (the run in
/// flight and a delay into it from a fixed sequence) and resumed, the verdict is the
/// uninterrupted one every time.
#[test]
#[cfg(unix)]
fn strict_verdicts_survive_kills_at_any_point() {
    // Slow enough that each run is in flight for a while (a kill lands inside one).
    let sim = Sim::with_vram_mib(2560, 0.05);
    let tmp = tempfile::tempdir().unwrap();
    let wf = write_workflow(
        tmp.path(),
        "sd15",
        &example("sd15_txt2img_lora_upscale", &[]),
    );
    let bisect_args = |runs: &std::path::Path| -> Vec<String> {
        vec![
            "--server".into(),
            sim.url(),
            "bisect".into(),
            "-q".into(),
            "--strict".into(),
            "--runs-dir".into(),
            runs.display().to_string(),
            wf.display().to_string(),
        ]
    };
    // The verdict without its run ids (a resumed session's runs have other ids).
    let verdict_of = |runs: &std::path::Path| {
        let (_, s) = only_session(runs);
        let v = match &s.workflows[0].verdict {
            Some(Verdict::FirstFailure {
                step,
                increment,
                stage,
                last_pass_step,
                ..
            }) => {
                format!("first failure at {step} {increment} {stage:?}, last pass {last_pass_step}")
            }
            other => format!("{other:?}"),
        };
        (v, s)
    };
    let calm = tmp.path().join("calm");
    let out = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(bisect_args(&calm))
        .output()
        .unwrap();
    let (want, _) = verdict_of(&calm);
    assert_eq!(
        want,
        "first failure at 1 resolution None, last pass 0",
        "{}",
        text(&out)
    );
    // A fixed pseudo-random sequence (an LCG): which run is in flight when killed, and how
    // many ms into it.
    let mut seed: u64 = 39;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for round in 0..10 {
        let runs = tmp.path().join(format!("round{round}"));
        let (nth, delay_ms) = (next(4) as usize, next(1000));
        let mut child = Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
            .args(bisect_args(&runs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_journal(&mut child, &runs, |s| {
            let done = s.workflows[0]
                .runs
                .iter()
                .filter(|r| r.status == RunStatus::Done)
                .count();
            s.in_flight.as_ref().filter(|_| done >= nth).map(|_| ())
        });
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let (so_far, before) = verdict_of(&runs);
        if before.workflows[0].verdict.is_some() {
            // The kill came after the end: nothing to resume.
            assert_eq!(so_far, want, "round {round}");
            continue;
        }
        let out = cli(&[
            "resume",
            "-q",
            "--runs-dir",
            runs.to_str().unwrap(),
            &before.session_id,
        ]);
        let (got, after) = verdict_of(&runs);
        assert_eq!(
            got,
            want,
            "round {round} (killed {delay_ms} ms into run {nth}): {}\n{:#?}",
            text(&out),
            after.workflows[0].runs
        );
    }
}
