//! `--repeat`: when the repeats of the boundary steps disagree the verdict is "flaky" with the
//! counts. The disagreement is made on the simulator by crashing it during one repeat (with
//! `--confirm-crashes 0` a variant that takes the server down counts as failing at once), with
//! `--restart-cmd` bringing it back.

use crate::session_support::*;
use comfy_bisect_core::app::server_preflight;
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::ladder::PlanOptions;
use comfy_bisect_core::session::driver::{
    Attempt, Backend, Driver, NoHooks, Recovery, RunSpec, SystemClock,
};
use comfy_bisect_core::session::journal::{SessionOptions, Verdict};
use comfy_bisect_core::session::live::LiveBackend;
use comfy_bisect_core::session::prepare::{prepare, LadderConfig, Prepared};
use comfy_bisect_core::session::setup::create_session;
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::Faults;
use serde_json::json;
use std::path::Path;

/// The live backend, with the simulator crashing during the `crash_on`-th run and
/// `restart` bringing it back (what `--restart-cmd` does for a real server).
struct CrashOnce<'a> {
    inner: LiveBackend,
    sim: &'a Sim,
    crash_on: usize,
    calls: usize,
}

impl Backend for CrashOnce<'_> {
    fn run(&mut self, spec: &RunSpec<'_>) -> Attempt {
        self.calls += 1;
        if self.calls == self.crash_on {
            self.sim.set_faults(Faults::default().with_crash_mid_run());
        }
        self.inner.run(spec)
    }
    fn recover(&mut self, run_id: &str, workflow: &Workflow, events: &Path) -> Recovery {
        self.inner.recover(run_id, workflow, events)
    }
    fn alive(&mut self) -> bool {
        self.inner.alive()
    }
    fn restart(&mut self, _command: &str) -> Result<(), String> {
        self.sim.restart();
        Ok(())
    }
}

#[test]
fn disagreeing_repeats_are_flaky_with_counts() {
    let sim = Sim::with_vram_mib(1792, 0.0); // SD1.5 batch 1: fails at resolution (step 1)
    let client = Client::new(&sim.url(), ExtraHeaders::new()).unwrap();
    let (defs, _) = server_preflight(&sim.rt, &client).unwrap();
    let workflow = example(
        "sd15_txt2img_lora_upscale",
        &[("5", "batch_size", json!(1))],
    );
    let target = Workflow::from_json_str(&workflow.to_string(), "sd15.json").unwrap();
    let config = LadderConfig {
        catalog: Catalog::builtin(),
        options: PlanOptions::default(),
        controls: false,
    };
    let Prepared::Ready(prepared) = prepare("sd15", "sd15.json", target, None, &defs, &config)
    else {
        panic!("preflight failed");
    };
    let tmp = tempfile::tempdir().unwrap();
    let options = SessionOptions {
        repeat: 1,
        confirm_crashes: 0,
        wait_server_s: 30,
        restart_cmd: Some("restart the simulator".into()),
        ..SessionOptions::default()
    };
    let (paths, session) =
        create_session(tmp.path(), &sim.url(), options, vec![*prepared]).unwrap();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    // Runs: minimal ✓, target ✗, step 1 ✗, repeat step 1 ✗, repeat step 0 — crashes.
    let backend = CrashOnce {
        inner: LiveBackend::new(sim.rt.handle().clone(), client, rx),
        sim: &sim,
        crash_on: 5,
        calls: 0,
    };
    let mut hooks = NoHooks;
    let mut driver = Driver::new(paths, session, backend, SystemClock, &mut hooks);
    driver.drive().unwrap();
    let job = &driver.session.workflows[0];
    match &job.verdict {
        Some(Verdict::Flaky { counts }) => {
            let c: Vec<(usize, u32, u32)> = counts
                .iter()
                .map(|c| (c.step, c.passed, c.failed))
                .collect();
            assert_eq!(c, vec![(0, 1, 1), (1, 0, 2)]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(job.runs[4].outcome.as_ref().unwrap().name(), "server_lost");
    assert!(
        Verdict::Flaky { counts: vec![] }
            .headline()
            .starts_with("flaky"),
        "headline"
    );
}
