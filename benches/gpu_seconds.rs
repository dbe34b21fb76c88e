//! GPU-seconds to verdict (issue 27, item 3): `cargo bench --bench gpu_seconds`.
//!
//! Like `runs_to_verdict`, it drives the session's own decision function
//! (`session::decide::decide_steps`, what the driver asks before every run), but every run it
//! asks for is really run: the ladder's variant (capped at the search's step count when the
//! decision says so, with the ladder's own `cap_steps`) is submitted through comfy-bisect's
//! client to the in-process simulator, cold (models freed first), as a session does. A run's
//! cost is the server's own execution time, read from the console line ComfyUI prints after
//! every prompt, failed or not (`Prompt executed in X seconds`); on the simulator these are
//! simulated seconds from its time model (docs/simulator.md, "Time model").
//!
//! Cases, three sets (`GPU_SECONDS_SETS=memory,rotated,planted`, all by default;
//! `GPU_SECONDS_CASES=3,7` runs only those cases, `GPU_SECONDS_TRACE=1` prints every session's
//! runs). **The memory sweep**: each example workflow of `workflows/` with the failure
//! at every position and stage the simulator's memory model gives its default ladder: the device
//! memory is swept (1 GiB … 96 GiB) and each distinct (first failing step, stage) at full steps
//! is a case — first step, middle of sampling (a step cache), decode, post-processing; then on a
//! device where the whole workflow fits, the `step-growth` fault (a cache that grows every step)
//! is swept for failures that need many steps. **Every case** adds the same sweeps over each
//! rotation of the workflow's ladder (`--order`), so that each increment, and the memory it
//! brings, comes at each position: each (workflow, first failing step, stage) reached there and
//! not in the memory sweep is one more case. **Planted**: on each default ladder, a failure of
//! each stage (first step, middle of sampling, decode, post-processing) planted with the
//! simulator's `plant=STAGE:CONDITION` fault so that it first shows at each position at full
//! steps (and at every later one), plus step growth at each position it first fails at. Each case is bisected seven ways: full-step linear and
//! binary search (`--search-steps full`); the default search at few steps (`--search-steps 4`,
//! linear and binary), which reduces a run only where the predicted saving pays (from the runs
//! the session finished, as the driver does); and the same reducing every search run but the
//! minimal one (the rule without a prediction); and the default few-step binary search with
//! `--full-step-target` (the target always at full steps: what the bound costs). `GPU_SECONDS_CAP=N` measures another step
//! count.
//!
//! Exits with status 1 when a strategy's verdict (kind, first failing step, last passing step)
//! differs from full-step linear search's. Printed against the targets: the median of
//! few-step / full linear (≤ 45 %) and few-step / full binary (< 100 %), and per case whether
//! few-step binary stays within full-step binary plus one full-step run of the last passing
//! step (the confirmation), with the floor: the verdict's two ends at full steps plus the
//! few-step runs; per set also the median of the floor / full linear and few-step binary / floor,
//! and two oracles against full linear: the verdict's proof alone (its last pass at full steps,
//! its first failure at few steps when it fails there in a stage that stands at few steps, else
//! at full), and that proof with the two runs every session makes (the minimal at few steps, the
//! target as proof of its failure): no strategy that confirms as the issue asks can cost less.

use comfy_bisect_core::analytics::{cost, predict};
use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::comfy::console::{classify, ConsoleLine};
use comfy_bisect_core::comfy::{Client, ExtraHeaders};
use comfy_bisect_core::ladder::work::Work;
use comfy_bisect_core::ladder::{cap_steps, plan, Increment, PlanOptions};
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::run::{execute, RunRequest};
use comfy_bisect_core::session::decide::decide_steps;
use comfy_bisect_core::session::decide::reduced::STEP_INDEPENDENT_STAGES;
use comfy_bisect_core::session::eta;
use comfy_bisect_core::session::evidence::{outcome_with, summary_of};
use comfy_bisect_core::session::journal::{
    run_dir_name, Outcome, ReducedSteps, RunSummary, DEFAULT_SEARCH_STEPS,
};
use comfy_bisect_core::session::{
    Decision, Phase, RunEntry, RunStatus, SessionOptions, StepInfo, Strategy, Verdict, WorkflowJob,
};
use comfy_bisect_core::workflow::Workflow;
use comfy_bisect_sim::plant::stage_pixels;
use comfy_bisect_sim::{start, Faults, SimConfig, SimHandle, Stage, MIB};
use std::collections::HashMap;
use std::time::Duration;

/// Real seconds per simulated second of the bisections' servers: the predictor reads the
/// client's frame times, so the simulated time must pass (the case sweeps run at 0).
/// `GPU_SECONDS_SCALE` sets another (a larger one: less of the client's noise, slower).
fn time_scale() -> f64 {
    std::env::var("GPU_SECONDS_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(0.01)
}

const WORKFLOWS: &[&str] = &[
    "sd15_txt2img_lora_upscale",
    "sd15_hires_fix_pixel",
    "wan22_t2v_experts_lora_cache_rife",
];

/// The simulator's node definitions.
fn defs() -> NodeDefs {
    let value: serde_json::Value =
        serde_json::from_str(comfy_bisect_sim::nodes::OBJECT_INFO).expect("sim object_info");
    NodeDefs::from_value(&value).expect("the simulator's node definitions")
}

/// A workflow's ladder: the variants (step 0 … target) and their increments.
struct Ladder {
    name: String,
    /// The ladder's order when not the default (`--order`), for the table.
    order: Option<String>,
    steps: Vec<(String, Workflow)>,
    /// Its increments, in ladder order (without `minimal`).
    increments: Vec<Increment>,
}

fn ladder(name: &str, defs: &NodeDefs, order: Option<Vec<Increment>>) -> Ladder {
    let path = format!("workflows/{name}.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let target = Workflow::from_json_str(&text, &path).expect("an API workflow");
    let mut options = PlanOptions::default();
    if let Some(o) = &order {
        options.order = o.clone();
    }
    let p = plan(&target, defs, &Catalog::builtin(), &options).expect("a plan");
    let increments: Vec<Increment> = p.steps.iter().skip(1).map(|s| s.increment).collect();
    Ladder {
        name: name.to_string(),
        order: order.map(|_| {
            increments
                .iter()
                .map(|i| i.name())
                .collect::<Vec<_>>()
                .join(",")
        }),
        steps: p
            .steps
            .into_iter()
            .map(|s| (s.increment.name().to_string(), s.workflow))
            .collect(),
        increments,
    }
}

/// The work of each step's variant at full steps and at `cap` (the predictor's input).
fn works(lad: &Ladder, cap: u32) -> Vec<(Work, Work)> {
    lad.steps
        .iter()
        .map(|(_, w)| {
            let (cut, _) =
                cap_steps(w, cap, &Catalog::builtin(), &defs()).expect("the cap applies");
            (cost::work_of(w), cost::work_of(&cut))
        })
        .collect()
}

/// What one run of a variant gave.
#[derive(Clone)]
struct Ran {
    outcome: Outcome,
    summary: RunSummary,
    /// `Prompt executed in X seconds`: the server's own time.
    seconds: f64,
}

/// One simulated server and the runs made on it: a variant at a step cap is run once (cold
/// runs on the deterministic simulator give the same result every time).
struct Server {
    rt: tokio::runtime::Runtime,
    sim: Option<SimHandle>,
    done: HashMap<(usize, Option<u32>), Ran>,
}

impl Server {
    fn new(vram_mib: u64, faults: Option<&str>) -> Server {
        Server::scaled(vram_mib, faults, 0.0)
    }

    /// A server whose simulated seconds take `scale` real seconds (0: none).
    fn scaled(vram_mib: u64, faults: Option<&str>, scale: f64) -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let mut config = SimConfig::default()
            .with_vram_bytes(vram_mib * MIB)
            .with_time_scale(scale);
        if let Some(f) = faults {
            config = config.with_faults(Faults::parse(f).expect("faults"));
        }
        let sim = rt
            .block_on(start(config, "127.0.0.1:0".parse().unwrap()))
            .expect("the simulator starts");
        Server {
            rt,
            sim: Some(sim),
            done: HashMap::new(),
        }
    }

    /// Runs step `step` of `lad` at `cap` (None: its own steps); `reduced` says what the cap
    /// changed (None: nothing, a full-step run).
    fn run(&mut self, lad: &Ladder, step: usize, cap: Option<u32>) -> (Ran, Option<ReducedSteps>) {
        let variant = &lad.steps[step].1;
        let (workflow, reduced) = match cap {
            None => (variant.clone(), None),
            Some(cap) => {
                let (w, changes) =
                    cap_steps(variant, cap, &Catalog::builtin(), &defs()).expect("the cap applies");
                if changes.is_empty() {
                    (variant.clone(), None)
                } else {
                    (w, Some(ReducedSteps { cap, changes }))
                }
            }
        };
        let key = (step, reduced.as_ref().map(|r| r.cap));
        if let Some(r) = self.done.get(&key) {
            return (r.clone(), reduced);
        }
        let url = self.sim.as_ref().unwrap().base_url();
        let client = Client::new(&url, ExtraHeaders::new()).expect("a client");
        let mut request = RunRequest::new(workflow.clone());
        request.settle = Duration::ZERO;
        request.sample_interval = Duration::from_millis(50);
        request.poll_interval = Duration::from_millis(50);
        let record = self.rt.block_on(execute(&client, request));
        let seconds = record
            .server_log
            .lines()
            .rev()
            .find_map(|l| {
                l.split_once(' ')
                    .and_then(|(_, text)| match classify(text) {
                        Some(ConsoleLine::PromptExecuted { seconds }) => seconds,
                        _ => None,
                    })
            })
            .unwrap_or_else(|| {
                panic!(
                    "{} step {step}: no `Prompt executed` line in the console:\n{}",
                    lad.name, record.server_log
                )
            });
        let diagnosis = if record.outcome == comfy_bisect_core::vocab::OutcomeKind::Passed {
            None
        } else {
            record.diagnose(Some(&workflow))
        };
        let ran = Ran {
            outcome: outcome_with(&record, false),
            summary: summary_of(&record, diagnosis.as_ref(), Some(&workflow)),
            seconds,
        };
        self.done.insert(key, ran.clone());
        (ran, reduced)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(h) = self.sim.take() {
            self.rt.block_on(h.shutdown());
        }
    }
}

fn job(lad: &Ladder) -> WorkflowJob {
    WorkflowJob {
        name: lad.name.clone(),
        source: format!("{}.json", lad.name),
        source_file: None,
        target_sha256: "target".into(),
        steps: lad
            .steps
            .iter()
            .enumerate()
            .map(|(i, (inc, _))| StepInfo {
                index: i,
                increment: inc.clone(),
                file: format!("workflows/{}/{i:02}.json", lad.name),
                sha256: format!("h{i}"),
                changes: vec![],
            })
            .collect(),
        controls: vec![],
        not_separable: vec![],
        kept: vec![],
        phase: Phase::Pending,
        runs: vec![],
        verdict: None,
    }
}

/// One bisection: its verdict, the GPU-seconds of its runs, and its runs (step, cap, passed,
/// seconds) in order.
struct Session {
    verdict: Verdict,
    seconds: f64,
    runs: Vec<(usize, Option<u32>, bool, f64)>,
}

/// Bisects `lad` on `server`; with `predicted`, the few-step search decides per run from the
/// predicted run times (as the driver does), else every search run but the minimal is reduced.
fn bisect(lad: &Ladder, server: &mut Server, options: &SessionOptions, predicted: bool) -> Session {
    let mut j = job(lad);
    let mut runs = Vec::new();
    let works = options.search_steps.map(|cap| works(lad, cap));
    for _ in 0..(4 * lad.steps.len() + 12) {
        let costs = works.as_ref().filter(|_| predicted).and_then(|works| {
            // The client's frame times, in simulated seconds (the unit of the costs).
            let seen: Vec<predict::Observed> = eta::observed_job(0, &j)
                .into_iter()
                .map(|mut o| {
                    o.phases.step_ms /= time_scale();
                    o.phases.setup_ms = (o.phases.setup_ms as f64 / time_scale()) as u64;
                    o.phases.post_ms = (o.phases.post_ms as f64 / time_scale()) as u64;
                    o
                })
                .collect();
            (!seen.is_empty()).then(|| predict::step_costs(&seen, 0, works, true))?
        });
        let (step, role, cap) = match decide_steps(&j, options, costs.as_deref()) {
            (_, Decision::Finish(verdict), _) => {
                return Session {
                    verdict,
                    seconds: runs
                        .iter()
                        .map(|r: &(usize, Option<u32>, bool, f64)| r.3)
                        .sum(),
                    runs,
                }
            }
            (_, Decision::Run { step, role }, cap) => (step, role, cap),
            (_, Decision::Confirm { .. }, _) => unreachable!("the simulator does not crash here"),
        };
        let (ran, reduced) = server.run(lad, step, cap);
        let id = format!("run{}", j.runs.len());
        runs.push((
            step,
            reduced.as_ref().map(|r| r.cap),
            ran.outcome == Outcome::Passed,
            ran.seconds,
        ));
        let increment = j.steps[step].increment.clone();
        j.runs.push(RunEntry {
            run_id: id.clone(),
            step,
            dir: run_dir_name(step, &increment, &id),
            increment,
            role,
            workflow_sha256: j.steps[step].sha256.clone(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(ran.outcome),
            summary: Some(ran.summary),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced,
        });
    }
    panic!("{}: no verdict after {} runs", lad.name, runs.len());
}

/// The verdict as the comparison reads it: kind, first failing and last passing step.
fn verdict_key(v: &Verdict) -> String {
    match v {
        Verdict::FirstFailure {
            step,
            last_pass_step,
            ..
        } => format!("first failure {last_pass_step}→{step}"),
        other => other.kind().to_string(),
    }
}

/// Which set of cases a case belongs to.
#[derive(Clone, Copy, PartialEq)]
enum Set {
    /// The memory sweep on the default ladders.
    Memory,
    /// The memory sweep on the rotated ladders (what the default ones did not reach).
    Rotated,
    /// Planted failures (`plant=STAGE:CONDITION`) and step growth at every position of the
    /// default ladders.
    Planted,
}

/// A case: a ladder on a simulated device, failing at a step and stage at full steps.
struct Case {
    ladder: usize,
    vram_mib: u64,
    faults: Option<String>,
    first_failure: usize,
    stage: String,
    set: Set,
}

/// The first failing step at full steps and its stage, when the minimal variant passes.
fn first_failure(lad: &Ladder, server: &mut Server) -> Option<(usize, String)> {
    for step in 0..lad.steps.len() {
        let (ran, _) = server.run(lad, step, None);
        if ran.outcome != Outcome::Passed {
            let stage = ran
                .summary
                .stage
                .map_or("unknown", |s| s.as_str())
                .to_string();
            return (step > 0).then_some((step, stage));
        }
    }
    None
}

/// The cases of ladder `l` not in `out` yet (one per workflow, first failing step and stage):
/// the device memory swept from 1 GiB to 96 GiB (12 % apart), then on a device where the whole
/// workflow fits, the `step-growth` fault swept from 16 MiB (25 % apart).
fn sweep(l: usize, ladders: &[Ladder], out: &mut Vec<Case>) {
    let lad = &ladders[l];
    let add = |out: &mut Vec<Case>, vram, faults: Option<String>, k, stage: String| {
        if !out
            .iter()
            .any(|c| ladders[c.ladder].name == lad.name && c.first_failure == k && c.stage == stage)
        {
            out.push(Case {
                ladder: l,
                vram_mib: vram,
                faults,
                first_failure: k,
                stage,
                set: if l < WORKFLOWS.len() {
                    Set::Memory
                } else {
                    Set::Rotated
                },
            });
        }
    };
    let mut vrams = Vec::new();
    let mut v = 1024f64;
    while v <= 98304.0 {
        vrams.push(v.round() as u64);
        v *= 1.12;
    }
    let mut roomy = None;
    for &vram in &vrams {
        let mut server = Server::new(vram, None);
        match first_failure(lad, &mut server) {
            Some((k, stage)) => add(out, vram, None, k, stage),
            None => {
                let target = lad.steps.len() - 1;
                if server.run(lad, target, None).0.outcome == Outcome::Passed {
                    roomy = Some(vram);
                    break;
                }
            }
        }
    }
    // A cache that grows every step, on a device where the whole workflow fits.
    let Some(vram) = roomy else { return };
    let mut growth = 16f64;
    while growth <= 8192.0 {
        let faults = format!("step-growth={}MiB", growth.round() as u64);
        let mut server = Server::new(vram, Some(&faults));
        if let Some((k, stage)) = first_failure(lad, &mut server) {
            add(out, vram, Some(faults), k, format!("{stage} (step-growth)"));
        }
        growth *= 1.25;
    }
}

/// The device of the planted cases: the whole of every example workflow fits on it, so only
/// the planted failure (or the step growth) fails a run.
const ROOMY_MIB: u64 = 98304;

/// The stages a failure is planted at.
const PLANT_STAGES: &[Stage] = &[
    Stage::SampleFirst,
    Stage::SampleMiddle,
    Stage::Decode,
    Stage::Postprocess,
];

/// A condition that holds in the variants of steps `p..` and in none before (at full steps):
/// a threshold between the stage's pixels of the steps before and from `p` on, else a count of
/// a node class that only steps `p..` reach. None when the stage is missing from a variant at
/// or after `p` (it cannot fail there) or no condition isolates `p`.
fn isolate(lad: &Ladder, p: usize, stage: Stage) -> Option<String> {
    let prompts: Vec<serde_json::Value> = lad.steps.iter().map(|(_, w)| w.to_value()).collect();
    let pixels: Vec<u64> = prompts.iter().map(|v| stage_pixels(v, stage)).collect();
    if pixels[p..].contains(&0) {
        return None;
    }
    let below = pixels[..p].iter().copied().max().unwrap_or(0);
    let from = pixels[p..].iter().copied().min().unwrap_or(0);
    if from > below {
        return Some(format!("pixels>={from}"));
    }
    let count =
        |w: &Workflow, class: &str| w.nodes.values().filter(|n| n.class_type == class).count();
    let mut classes: Vec<&str> = lad.steps[p]
        .1
        .nodes
        .values()
        .map(|n| n.class_type.as_str())
        .collect();
    classes.sort();
    classes.dedup();
    classes.into_iter().find_map(|class| {
        let below = lad.steps[..p].iter().map(|(_, w)| count(w, class)).max()?;
        let from = lad.steps[p..].iter().map(|(_, w)| count(w, class)).min()?;
        (from > below && !class.contains(',')).then(|| match from {
            1 => format!("class={class}"),
            k => format!("class={class}>={k}"),
        })
    })
}

/// Whether every step from `p` to the target fails at full steps: binary search assumes it
/// (re-adding an increment never makes a failure go away), so a case where a later step passes
/// again (two experts each running half the steps of one sampler lower a growing cache's peak)
/// gives binary and linear search different verdicts whatever the step count.
fn fails_on(lad: &Ladder, server: &mut Server, p: usize) -> bool {
    let ok = (p..lad.steps.len()).all(|k| server.run(lad, k, None).0.outcome != Outcome::Passed);
    if !ok {
        eprintln!(
            "planted: {}: a step after {p} passes again at full steps (skipped)",
            lad.name
        );
    }
    ok
}

/// The planted set: for each default ladder, each position `p` and each stage its variants
/// have there, a failure planted so that it first shows at `p` at full steps; then step growth
/// swept on the roomy device, one case per position it first fails at. Prints the positions
/// and stages no condition isolates.
fn planted(ladders: &[Ladder], out: &mut Vec<Case>) {
    for (l, lad) in ladders.iter().enumerate().take(WORKFLOWS.len()) {
        let n = lad.steps.len() - 1;
        for p in 1..=n {
            for &stage in PLANT_STAGES {
                let Some(cond) = isolate(lad, p, stage) else {
                    eprintln!(
                        "planted: {} step {p} `{}`: no condition isolates {} (skipped)",
                        lad.name,
                        lad.steps[p].0,
                        stage.as_str()
                    );
                    continue;
                };
                let faults = format!("plant={}:{cond}", stage.as_str());
                let mut server = Server::new(ROOMY_MIB, Some(&faults));
                match first_failure(lad, &mut server) {
                    Some((k, got))
                        if k == p && got == stage.as_str() && fails_on(lad, &mut server, p) =>
                    {
                        out.push(Case {
                            ladder: l,
                            vram_mib: ROOMY_MIB,
                            faults: Some(faults),
                            first_failure: p,
                            stage: format!("{got} (planted)"),
                            set: Set::Planted,
                        })
                    }
                    other => eprintln!(
                        "planted: {} `{faults}` first fails at {other:?}, not {p} {} (skipped)",
                        lad.name,
                        stage.as_str()
                    ),
                }
            }
        }
        // A cache that grows every step, on the smallest swept device where the whole workflow
        // fits (the growth is the same size in every variant, so the variants' own memory must
        // matter): the first size that fails first at each position.
        let mut vram = 1024f64;
        while Server::new(vram.round() as u64, None)
            .run(lad, n, None)
            .0
            .outcome
            != Outcome::Passed
        {
            vram *= 1.12;
        }
        let vram = vram.round() as u64;
        let mut growth = 16f64;
        let mut seen = Vec::new();
        while growth <= 16384.0 && seen.len() < n {
            let faults = format!("step-growth={}MiB", growth.round() as u64);
            let mut server = Server::new(vram, Some(&faults));
            if let Some((k, stage)) = first_failure(lad, &mut server) {
                if !seen.contains(&k) && fails_on(lad, &mut server, k) {
                    seen.push(k);
                    out.push(Case {
                        ladder: l,
                        vram_mib: vram,
                        faults: Some(faults),
                        first_failure: k,
                        stage: format!("{stage} (step-growth)"),
                        set: Set::Planted,
                    });
                }
            }
            growth *= 1.1;
        }
        let missing: Vec<String> = (1..=n)
            .filter(|k| !seen.contains(k))
            .map(|k| k.to_string())
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "planted: {}: step growth first fails at no size at step {}",
                lad.name,
                missing.join(", ")
            );
        }
    }
}

/// The sets to run: `GPU_SECONDS_SETS` (a comma list of `memory`, `rotated`, `planted`), all
/// three by default.
fn sets() -> Vec<Set> {
    let list =
        std::env::var("GPU_SECONDS_SETS").unwrap_or_else(|_| "memory,rotated,planted".into());
    list.split(',')
        .map(|s| match s.trim() {
            "memory" => Set::Memory,
            "rotated" => Set::Rotated,
            "planted" => Set::Planted,
            other => panic!("GPU_SECONDS_SETS: unknown set {other:?} (memory, rotated, planted)"),
        })
        .collect()
}

/// The least a failing run of `step` costs as proof of its full-step failure: its few-step
/// run when that fails in a stage whose failure stands at few steps (the rule's
/// `STEP_INDEPENDENT_STAGES`), else its full-step run.
fn failure_proof(server: &mut Server, lad: &Ladder, step: usize) -> f64 {
    let (few, reduced) = server.run(lad, step, Some(cap()));
    let stands = reduced.is_some()
        && few.outcome != Outcome::Passed
        && few
            .summary
            .stage
            .is_some_and(|s| STEP_INDEPENDENT_STAGES.contains(&s));
    if stands {
        few.seconds
    } else {
        server.run(lad, step, None).0.seconds
    }
}

/// The few-step search's cap: `GPU_SECONDS_CAP` when set (to compare other counts), else the
/// default of `--search-steps`.
fn cap() -> u32 {
    std::env::var("GPU_SECONDS_CAP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_SEARCH_STEPS)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn runs_text(s: &Session) -> String {
    let reduced = s.runs.iter().filter(|r| r.1.is_some()).count();
    format!("{} ({} at few steps)", s.runs.len(), reduced)
}

/// The ratios of one set of cases.
#[derive(Default)]
struct Ratios {
    lin: Vec<f64>,
    bin: Vec<f64>,
    bin_lin: Vec<f64>,
    always_lin: Vec<f64>,
    always_bin: Vec<f64>,
    /// The floor / full-step linear.
    floor_lin: Vec<f64>,
    /// Few-step binary / the floor.
    bin_floor: Vec<f64>,
    /// The verdict's proof alone / full-step linear ([`failure_proof`]).
    proof_lin: Vec<f64>,
    /// The proof with the minimal and the target / full-step linear.
    oracle_lin: Vec<f64>,
    /// Few-step binary with `--full-step-target` / full-step binary.
    full_target_bin: Vec<f64>,
    /// Cases where that is over the bound.
    full_target_over: usize,
    over: usize,
}

fn summary(title: &str, r: &Ratios) {
    let n = r.lin.len();
    println!("\n## Summary: {title} ({n} cases)\n");
    println!("| ratio | median | max | target |");
    println!("|---|---:|---:|---|");
    let row = |name: &str, v: &[f64], target: &str, met: bool| {
        println!(
            "| {name} | {:.0} % | {:.0} % | {target}{} |",
            median(v) * 100.0,
            v.iter().cloned().fold(0.0, f64::max) * 100.0,
            if target.is_empty() {
                ""
            } else if met {
                ": met"
            } else {
                ": missed"
            }
        );
    };
    row(
        "few-step linear / full-step linear",
        &r.lin,
        "≤ 45 % (median)",
        median(&r.lin) <= 0.45,
    );
    row(
        "few-step binary / full-step linear",
        &r.bin_lin,
        "≤ 45 % (median)",
        median(&r.bin_lin) <= 0.45,
    );
    row(
        "few-step binary / full-step binary",
        &r.bin,
        "< 100 % (median)",
        median(&r.bin) < 1.0,
    );
    row(
        "few-step linear, every run reduced / full-step linear",
        &r.always_lin,
        "",
        true,
    );
    row(
        "few-step binary, every run reduced / full-step binary",
        &r.always_bin,
        "",
        true,
    );
    row("floor / full-step linear", &r.floor_lin, "", true);
    row("few-step binary / floor", &r.bin_floor, "", true);
    row(
        "oracle: the verdict's proof alone / full-step linear",
        &r.proof_lin,
        "",
        true,
    );
    row(
        "oracle: proof, minimal and target / full-step linear",
        &r.oracle_lin,
        "",
        true,
    );
    row(
        "few-step binary, --full-step-target / full-step binary",
        &r.full_target_bin,
        "",
        true,
    );
    println!(
        "\nFew-step binary within full binary + one full-step run of the last pass: {} of {n} cases \
         ({} of {n} with --full-step-target).",
        n - r.over,
        n - r.full_target_over
    );
}

fn main() {
    let defs = defs();
    let mut ladders: Vec<Ladder> = WORKFLOWS.iter().map(|w| ladder(w, &defs, None)).collect();
    // Each workflow's increments in every rotation of its ladder, so that each increment (and
    // the memory it brings) comes at each position.
    for w in 0..WORKFLOWS.len() {
        let incs = ladders[w].increments.clone();
        for r in 1..incs.len() {
            let mut order = incs.clone();
            order.rotate_left(r);
            ladders.push(ladder(WORKFLOWS[w], &defs, Some(order)));
        }
    }
    // The memory-sweep set (default ladders) first; the even set adds each (workflow, first
    // failing step, stage) the rotated ladders reach and the default ones do not.
    let sets = sets();
    let mut cases = Vec::new();
    if sets.contains(&Set::Memory) || sets.contains(&Set::Rotated) {
        for l in 0..WORKFLOWS.len() {
            sweep(l, &ladders, &mut cases);
        }
    }
    if sets.contains(&Set::Rotated) {
        for l in WORKFLOWS.len()..ladders.len() {
            sweep(l, &ladders, &mut cases);
        }
    }
    if sets.contains(&Set::Planted) {
        planted(&ladders, &mut cases);
    }
    cases.retain(|c| sets.contains(&c.set));
    let sweep_cases = cases.iter().filter(|c| c.set == Set::Memory).count();
    let planted_cases = cases.iter().filter(|c| c.set == Set::Planted).count();
    // What one run of each step costs at full steps and at the search's step count, on a
    // device where the whole workflow fits.
    println!("# GPU-seconds to verdict\n\n## What a run costs\n");
    println!("Simulated seconds of one cold run of each step, on 96 GiB (nothing fails): full steps / `--search-steps {}`.\n", cap());
    println!("| workflow | step | full s | few-step s | few / full |");
    println!("|---|---|---:|---:|---:|");
    for lad in &ladders[..WORKFLOWS.len()] {
        let mut server = Server::new(98304, None);
        for (k, (inc, _)) in lad.steps.iter().enumerate() {
            let full = server.run(lad, k, None).0.seconds;
            let few = server.run(lad, k, Some(cap())).0.seconds;
            println!(
                "| {} | {k} `{inc}` | {full:.1} | {few:.1} | {:.0} % |",
                lad.name,
                few / full * 100.0
            );
        }
    }
    println!();
    let options = |strategy, search_steps| SessionOptions {
        strategy,
        search_steps,
        ..SessionOptions::default()
    };
    let few = Some(cap());
    // (name, options, decide per run from the prediction)
    let strategies = [
        ("full linear", options(Strategy::Linear, None), false),
        ("full binary", options(Strategy::Binary, None), false),
        ("few-step linear", options(Strategy::Linear, few), true),
        ("few-step binary", options(Strategy::Binary, few), true),
        (
            "few-step linear, every run",
            options(Strategy::Linear, few),
            false,
        ),
        (
            "few-step binary, every run",
            options(Strategy::Binary, few),
            false,
        ),
        (
            "few-step binary, --full-step-target",
            SessionOptions {
                full_step_target: true,
                ..options(Strategy::Binary, few)
            },
            true,
        ),
    ];
    println!("## Sessions\n");
    println!(
        "Simulated seconds (the server's `Prompt executed in` lines), summed over every run of a \
         session; few-step = `--search-steps {}`, reducing a run only where the predicted \
         saving pays; \"every run\" = reducing every search run but the minimal one. Runs: all \
         (of them at few steps). {sweep_cases} cases of the memory sweep on the default \
         ladders, {} of the rotated ladders, {planted_cases} planted (in that order).\n",
        cap(),
        cases.len() - sweep_cases - planted_cases
    );
    for lad in &ladders[..WORKFLOWS.len()] {
        let incs: Vec<&str> = lad.steps.iter().map(|(i, _)| i.as_str()).collect();
        println!("- `{}`: steps {}", lad.name, incs.join(" → "));
    }
    println!();
    println!("| # | workflow | device | first failure (full steps) | verdict | full linear s (runs) | full binary s (runs) | few-step linear s (runs) | few-step binary s (runs) | few lin / full lin | few bin / full bin | few bin / full lin | every run: few lin / full lin | every run: few bin / full bin | floor s | bound s | oracle s (proof alone) | |");
    println!(
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let mut ok = true;
    let (mut memory, mut all, mut plant) =
        (Ratios::default(), Ratios::default(), Ratios::default());
    // `GPU_SECONDS_CASES=3,7`: only these cases (1-based, as numbered in the table);
    // `GPU_SECONDS_TRACE=1`: every session's runs on stderr.
    let only: Option<Vec<usize>> = std::env::var("GPU_SECONDS_CASES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let trace = std::env::var_os("GPU_SECONDS_TRACE").is_some();
    for (i, case) in cases.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&(i + 1))) {
            continue;
        }
        let lad = &ladders[case.ladder];
        let mut server = Server::scaled(case.vram_mib, case.faults.as_deref(), time_scale());
        let sessions: Vec<Session> = strategies
            .iter()
            .map(|(_, o, p)| bisect(lad, &mut server, o, *p))
            .collect();
        if trace {
            for ((name, _, _), s) in strategies.iter().zip(&sessions) {
                let runs: Vec<String> = s
                    .runs
                    .iter()
                    .map(|(k, cap, pass, sec)| {
                        format!(
                            "{k}{}{} {sec:.1}",
                            cap.map(|c| format!("@{c}")).unwrap_or_default(),
                            if *pass { "✓" } else { "✗" }
                        )
                    })
                    .collect();
                eprintln!("case {}: {name}: {}", i + 1, runs.join(", "));
            }
        }
        let want = verdict_key(&sessions[0].verdict);
        for ((name, _, _), s) in strategies.iter().zip(&sessions) {
            let got = verdict_key(&s.verdict);
            if got != want {
                ok = false;
                eprintln!(
                    "{} on {} MiB {:?}: {name} gives {got}, full linear {want}; runs {:?}",
                    lad.name, case.vram_mib, case.faults, s.runs
                );
            }
        }
        // The floor: the verdict's two ends at full steps plus the few-step runs; the bound:
        // full binary plus one full-step run of the last passing step.
        let last_pass = match &sessions[0].verdict {
            Verdict::FirstFailure { last_pass_step, .. } => Some(*last_pass_step),
            _ => None,
        };
        let pass_s = last_pass
            .map(|k| server.run(lad, k, None).0.seconds)
            .unwrap_or(0.0);
        let fail_s = server.run(lad, case.first_failure, None).0.seconds;
        // The oracles: what the verdict's proof costs at least (a strategy that guessed the
        // boundary), and with the two runs every session makes (the minimal, the target).
        let n = lad.steps.len() - 1;
        let proof = last_pass
            .map(|k| pass_s + failure_proof(&mut server, lad, k + 1))
            .unwrap_or(0.0);
        let oracle = proof
            + match last_pass {
                Some(0) | None => 0.0,
                Some(_) => server.run(lad, 0, Some(cap())).0.seconds,
            }
            + match last_pass {
                Some(k) if k + 1 == n => 0.0,
                _ => failure_proof(&mut server, lad, n),
            };
        let few_bin = &sessions[3];
        let floor = few_bin
            .runs
            .iter()
            .filter(|r| r.1.is_some())
            .map(|r| r.3)
            .sum::<f64>()
            + pass_s
            + fail_s;
        let bound = sessions[1].seconds + pass_s;
        let within = few_bin.seconds <= bound + 1e-6;
        let full_target = &sessions[6];
        let ratio = |a: usize, b: usize| sessions[a].seconds / sessions[b].seconds;
        let into: Vec<&mut Ratios> = match case.set {
            Set::Memory => vec![&mut all, &mut memory],
            Set::Rotated => vec![&mut all],
            Set::Planted => vec![&mut plant],
        };
        for set in into {
            set.lin.push(ratio(2, 0));
            set.bin.push(ratio(3, 1));
            set.bin_lin.push(ratio(3, 0));
            set.always_lin.push(ratio(4, 0));
            set.always_bin.push(ratio(5, 1));
            set.floor_lin.push(floor / sessions[0].seconds);
            set.bin_floor.push(few_bin.seconds / floor);
            set.proof_lin.push(proof / sessions[0].seconds);
            set.full_target_bin.push(ratio(6, 1));
            set.full_target_over += usize::from(full_target.seconds > bound + 1e-6);
            set.oracle_lin.push(oracle / sessions[0].seconds);
            set.over += usize::from(!within);
        }
        let device = match &case.faults {
            Some(f) => format!("{} MiB, {f}", case.vram_mib),
            None => format!("{} MiB", case.vram_mib),
        };
        let name = match &lad.order {
            Some(o) => format!("{} (`--order {o}`)", lad.name),
            None => lad.name.clone(),
        };
        println!(
            "| {} | {name} | {device} | {} `{}`: {} | {want} | {:.1} ({}) | {:.1} ({}) | {:.1} ({}) | {:.1} ({}) | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {:.1} | {:.1} | {:.1} ({:.1}) | {} |",
            i + 1,
            case.first_failure,
            lad.steps[case.first_failure].0,
            case.stage,
            sessions[0].seconds,
            runs_text(&sessions[0]),
            sessions[1].seconds,
            runs_text(&sessions[1]),
            sessions[2].seconds,
            runs_text(&sessions[2]),
            few_bin.seconds,
            runs_text(few_bin),
            ratio(2, 0) * 100.0,
            ratio(3, 1) * 100.0,
            ratio(3, 0) * 100.0,
            ratio(4, 0) * 100.0,
            ratio(5, 1) * 100.0,
            floor,
            bound,
            oracle,
            proof,
            if within { "within" } else { "over" },
        );
    }
    if !memory.lin.is_empty() {
        summary("the memory sweep (default ladders)", &memory);
    }
    if all.lin.len() > memory.lin.len() {
        summary(
            "every case (the memory sweep and the rotated ladders)",
            &all,
        );
    }
    if !plant.lin.is_empty() {
        summary(
            "planted failures and step growth at every position (default ladders)",
            &plant,
        );
    }
    if !ok {
        eprintln!("gpu_seconds: a verdict differed from full-step linear search");
        std::process::exit(1);
    }
}
