//! Runs to verdict (issue 9, item 4): `cargo bench --bench runs_to_verdict`.
//!
//! Drives the session's own decision function (`session::decide`, the function the driver
//! calls before every run) on ladders of 4, 8 and 16 increments with the first failing
//! increment at every position, for `--strategy linear` and `--strategy binary`, and counts
//! the runs until the verdict. Every submitted run counts, the endpoint runs included, exactly
//! as the session journal lists them: the minimal variant (step 0, must pass) and the target
//! (step n, must fail) are one run each, then the search runs. Also shown: binary with
//! `--assume-fails` (the target is not run as an endpoint). No GPU or server: the outcome of
//! step k is "passes" when k < the failure position, which is the model the search assumes.
//!
//! Target: binary ≤ ⌈log2(n+1)⌉ + 2 runs for a ladder of n increments (n + 1 variants).
//! Exits with status 1 if a verdict names the wrong step or the target is missed.

use comfy_bisect_core::session::journal::{run_dir_name, RunSummary};
use comfy_bisect_core::session::{
    decide, Decision, Outcome, Phase, RunEntry, RunRole, RunStatus, SessionOptions, StepInfo,
    Strategy, Verdict, WorkflowJob,
};

fn job(n: usize) -> WorkflowJob {
    WorkflowJob {
        name: "bench".into(),
        source: "bench.json".into(),
        source_file: None,
        target_sha256: "target".into(),
        steps: (0..=n)
            .map(|i| StepInfo {
                index: i,
                increment: if i == 0 {
                    "minimal".into()
                } else {
                    format!("inc{i}")
                },
                file: format!("workflows/bench/{i:02}.json"),
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

fn push(job: &mut WorkflowJob, step: usize, role: RunRole, pass: bool) {
    let id = format!("run{}", job.runs.len());
    job.runs.push(RunEntry {
        run_id: id.clone(),
        step,
        increment: job.steps[step].increment.clone(),
        role,
        dir: run_dir_name(step, &job.steps[step].increment, &id),
        workflow_sha256: job.steps[step].sha256.clone(),
        status: RunStatus::Done,
        started_at: String::new(),
        finished_at: None,
        outcome: Some(if pass {
            Outcome::Passed
        } else {
            Outcome::Failed {
                node_id: "3".into(),
                node_type: "KSampler".into(),
                exception_type: "torch.OutOfMemoryError".into(),
                exception_message: "CUDA out of memory".into(),
            }
        }),
        summary: Some(RunSummary::default()),
        diagnosis: None,
        confirms: None,
        fingerprint: None,
        reduced: None,
    });
}

/// Runs the decision loop; step k passes iff k < `fail_at`. Returns the verdict and the steps
/// run in order.
fn session(n: usize, fail_at: usize, options: &SessionOptions) -> (Verdict, Vec<usize>) {
    let mut j = job(n);
    let mut made = Vec::new();
    for _ in 0..(4 * n + 8) {
        match decide(&j, options).1 {
            Decision::Finish(v) => return (v, made),
            Decision::Confirm { .. } => unreachable!("no run crashes here"),
            Decision::Run { step, role } => {
                made.push(step);
                push(&mut j, step, role, step < fail_at);
            }
        }
    }
    panic!(
        "no verdict after {} runs (n = {n}, failure at {fail_at}): {made:?}",
        made.len()
    );
}

fn found(v: &Verdict) -> Option<usize> {
    match v {
        Verdict::FirstFailure { step, .. } => Some(*step),
        _ => None,
    }
}

fn bound(n: usize) -> usize {
    // ⌈log2(n+1)⌉ + 2
    let mut b = 0;
    while (1usize << b) < n + 1 {
        b += 1;
    }
    b + 2
}

fn main() {
    let linear = SessionOptions {
        strategy: Strategy::Linear,
        ..SessionOptions::default()
    };
    let binary = SessionOptions {
        strategy: Strategy::Binary,
        ..SessionOptions::default()
    };
    let binary_assume = SessionOptions {
        strategy: Strategy::Binary,
        assume_fails: true,
        ..SessionOptions::default()
    };
    let mut ok = true;
    let mut summary = Vec::new();
    println!("# Runs to verdict\n");
    println!("Runs counted as the session journal lists them: minimal (step 0) + target (step n) + search runs.\n");
    for n in [4usize, 8, 16] {
        println!(
            "\n### Ladder of {n} increments (steps 0..={n}); bound ⌈log2({})⌉+2 = {}\n",
            n + 1,
            bound(n)
        );
        println!("| first failing step | linear runs | binary runs | binary order of steps | binary, --assume-fails |");
        println!("|---:|---:|---:|---|---:|");
        let (mut lin_max, mut bin_max, mut lin_sum, mut bin_sum, mut asm_max) = (0, 0, 0, 0, 0);
        for fail_at in 1..=n {
            let (lv, lruns) = session(n, fail_at, &linear);
            let (bv, bruns) = session(n, fail_at, &binary);
            let (av, aruns) = session(n, fail_at, &binary_assume);
            for (name, v) in [
                ("linear", &lv),
                ("binary", &bv),
                ("binary --assume-fails", &av),
            ] {
                if found(v) != Some(fail_at) {
                    ok = false;
                    eprintln!("{name}, n = {n}, failure at {fail_at}: wrong verdict {v:?}");
                }
            }
            if bruns.len() > bound(n) {
                ok = false;
            }
            let order: Vec<String> = bruns.iter().map(|s| s.to_string()).collect();
            println!(
                "| {fail_at} | {} | {} | {} | {} |",
                lruns.len(),
                bruns.len(),
                order.join(" → "),
                aruns.len()
            );
            lin_max = lin_max.max(lruns.len());
            bin_max = bin_max.max(bruns.len());
            asm_max = asm_max.max(aruns.len());
            lin_sum += lruns.len();
            bin_sum += bruns.len();
        }
        summary.push((
            n,
            lin_max,
            lin_sum as f64 / n as f64,
            bin_max,
            bin_sum as f64 / n as f64,
            asm_max,
        ));
    }
    println!("\n### Summary\n");
    println!("| increments n | linear max | linear mean | binary max | binary mean | binary --assume-fails max | bound ⌈log2(n+1)⌉+2 | |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---|");
    for (n, lmax, lmean, bmax, bmean, amax) in summary {
        println!(
            "| {n} | {lmax} | {lmean:.2} | {bmax} | {bmean:.2} | {amax} | {} | {} |",
            bound(n),
            if bmax <= bound(n) { "met" } else { "missed" }
        );
    }
    if !ok {
        eprintln!("runs_to_verdict: a verdict was wrong or the binary bound was missed");
        std::process::exit(1);
    }
}
