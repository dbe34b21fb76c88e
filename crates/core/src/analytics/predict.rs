//! Run-time prediction (issue #27 item 2): from the session's finished runs — time before the
//! first sampler step, time per step, time after the last step, and the work each run's variant
//! asked for — the duration of the next run and of the rest of the session. Pure: the driver
//! hands it the finished runs (`session::eta` reads them from the journal) and the work of
//! each ladder step.
//!
//! The model (docs/sessions.md says it with its limits): a run is setup + steps × time per
//! step + post, each part following what it scales with. Time per step follows the work
//! (pixels × latent frames × batch, [`Work::units`]) and post time the decoded work (frames as
//! asked, [`Work::decoded_units`]), each as a power of it through the finished runs nearest
//! in work; with one run, the step time proportionally (`ONE_POINT_STEP_EXPONENT`) and the
//! post time as its square root (`ONE_POINT_POST_EXPONENT`). Setup follows the
//! models: the one of a finished run that loads the same models ([`Work::models`]), cold apart
//! from warm, else of the nearest finished run of the same workflow. Failed runs count: their
//! setup and the steps they timed. No finished run: no estimate.

use super::cost::StepCost;
use crate::ladder::work::Work;
use crate::run::timing::RunPhases;
use std::time::Duration;

/// One finished run as the predictor sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Index of its workflow in the session.
    pub workflow: usize,
    /// Its ladder step.
    pub step: usize,
    /// What its variant asked for.
    pub work: Work,
    /// Its measured parts.
    pub phases: RunPhases,
    /// Models were freed before it (its setup includes loading them).
    pub cold: bool,
    /// It passed (a failed run's post time says nothing of a decode).
    pub passed: bool,
}

/// A predicted run, in its parts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunEstimate {
    /// Before the first sampler step (and between passes).
    pub setup: Duration,
    /// The sampler steps.
    pub steps: Duration,
    /// After the last step.
    pub post: Duration,
}

impl RunEstimate {
    /// The whole run.
    pub fn total(&self) -> Duration {
        self.setup + self.steps + self.post
    }
}

/// What the next run (step `step` of workflow `workflow`, doing `work`) should take; None
/// with no finished run to go by.
pub fn predict_run(
    seen: &[Observed],
    workflow: usize,
    step: usize,
    work: &Work,
    cold: bool,
) -> Option<RunEstimate> {
    if seen.is_empty() {
        return None;
    }
    // A step works on the latent frames; a journal written before they were kept has only the
    // frames as asked, and then every run is compared in those (one measure for all).
    let latent = seen.iter().all(|o| o.work.latent_frames.is_some());
    let step_units = |w: &Work| {
        if latent {
            w.units()
        } else {
            w.decoded_units()
        }
    };
    let per_step: Vec<(f64, f64)> = seen
        .iter()
        .filter(|o| o.phases.steps > 0)
        .map(|o| (step_units(&o.work), o.phases.step_ms))
        .collect();
    let step_ms = follow_work(&per_step, step_units(work), STEP_SCALING).unwrap_or(0.0);
    // After the last step the VAE decodes, and the run writes, the frames as asked.
    let passed: Vec<(f64, f64)> = seen
        .iter()
        .filter(|o| o.passed)
        .map(|o| (o.work.decoded_units(), o.phases.post_ms as f64))
        .collect();
    let post_ms = follow_work(&passed, work.decoded_units(), POST_SCALING).unwrap_or(0.0);
    // Setup: loading scales with the models, not with the latent. A run of the same models
    // first (either digest unknown: not the same), then one that reached every sampler step
    // (a run that failed mid-sampling measured only the setup before its failure: a second
    // pass's load comes later), then the same workflow, then the nearest on the ladder (ties
    // to the lower step); cold runs (models freed first) apart from warm ones.
    let same_cold: Vec<&Observed> = seen.iter().filter(|o| o.cold == cold).collect();
    let pool: Vec<&Observed> = if same_cold.is_empty() {
        seen.iter().collect()
    } else {
        same_cold
    };
    let same_models = |o: &Observed| work.models.is_some() && o.work.models == work.models;
    let setup_ms = pool
        .iter()
        .min_by_key(|o| {
            (
                !same_models(o),
                o.phases.steps < o.work.steps,
                o.workflow != workflow,
                o.step.abs_diff(step),
                o.step > step,
            )
        })
        .map(|o| o.phases.setup_ms as f64)
        .unwrap_or(0.0);
    let ms = |v: f64| Duration::from_secs_f64((v / 1000.0).clamp(0.0, 1.0e7));
    Some(RunEstimate {
        setup: ms(setup_ms),
        steps: ms(step_ms * f64::from(work.steps)),
        post: ms(post_ms),
    })
}

/// The power of the work a sampler step's time follows when one work was measured. A step
/// is a fixed cost (launches, the model's per-step overhead), a part linear in the tokens
/// (convolutions, MLPs) and a part quadratic in them (attention), all non-negative: from one
/// measurement `t₀` at work `u₀`, the time at `u = r·u₀` lies between `t₀` (all fixed) and
/// `t₀·r²` (all attention), and which the measurement does not say. Their geometric mean,
/// `t₀·r`, is the estimate whose worst error factor against either end is smallest (`r` both
/// ways): proportional scaling.
pub(crate) const ONE_POINT_STEP_EXPONENT: f64 = 1.0;

/// The power of the work the time after the last step (decode, post-processing, saving)
/// follows when one work was measured: a fixed cost plus parts linear in the pixels (a VAE
/// decode is convolutional, saving writes the pixels), so between `t₀` and `t₀·r`, and their
/// geometric mean `t₀·√r`. Proportional scaling overestimated a 130× larger run's decode 30×
/// (the minimal run's post time is mostly fixed cost).
pub(crate) const ONE_POINT_POST_EXPONENT: f64 = 0.5;

/// How a time follows the work: the power of it with one measured work, and the range the
/// power fitted through two measured works is held to when extrapolating beyond them.
#[derive(Debug, Clone, Copy)]
struct Scaling {
    one_point: f64,
    range: (f64, f64),
}

/// A sampler step: a fixed, a linear and a quadratic part ([`ONE_POINT_STEP_EXPONENT`]);
/// extrapolated within 0.5–1.5 (a fit through two nearby noisy points can be far steeper).
const STEP_SCALING: Scaling = Scaling {
    one_point: ONE_POINT_STEP_EXPONENT,
    range: (0.5, 1.5),
};

/// After the last step: a fixed and a linear part ([`ONE_POINT_POST_EXPONENT`]), whose power
/// between two works is never above 1 (nor below 0).
const POST_SCALING: Scaling = Scaling {
    one_point: ONE_POINT_POST_EXPONENT,
    range: (0.0, 1.0),
};

/// A time that follows the work, as a power of it fitted to the measured points: between
/// the two points nearest below and above `units`, on the power law through them; beyond
/// them, with the exponent of the two nearest points (held within `scaling.range`); with one
/// point, `scaling.one_point`. None without points.
fn follow_work(points: &[(f64, f64)], units: f64, scaling: Scaling) -> Option<f64> {
    // One time per work (the mean of the runs at it), by work.
    let mut by_work: Vec<(f64, f64)> = Vec::new();
    for &(u, t) in points {
        if !(u > 0.0 && t > 0.0) {
            continue;
        }
        let same: Vec<f64> = points.iter().filter(|p| p.0 == u).map(|p| p.1).collect();
        if !by_work.iter().any(|p| p.0 == u) {
            by_work.push((u, same.iter().sum::<f64>() / same.len() as f64));
        }
    }
    by_work.sort_by(|a, b| a.0.total_cmp(&b.0));
    let exponent = |(u0, t0): (f64, f64), (u1, t1): (f64, f64)| (t1 / t0).ln() / (u1 / u0).ln();
    let at = |(u0, t0): (f64, f64), k: f64| t0 * (units / u0).powf(k);
    let (lo, hi) = scaling.range;
    let above = by_work.iter().position(|p| p.0 >= units);
    match above {
        None if by_work.is_empty() => None,
        Some(i) if by_work[i].0 == units => Some(by_work[i].1),
        Some(i) if i > 0 => Some(at(by_work[i - 1], exponent(by_work[i - 1], by_work[i]))),
        _ if by_work.len() == 1 => Some(at(by_work[0], scaling.one_point)),
        // Below every point: the two smallest; above every point: the two largest.
        Some(_) => Some(at(
            by_work[0],
            exponent(by_work[0], by_work[1]).clamp(lo, hi),
        )),
        None => {
            let n = by_work.len();
            let k = exponent(by_work[n - 2], by_work[n - 1]).clamp(lo, hi);
            Some(at(by_work[n - 1], k))
        }
    }
}

/// The predicted time of each ladder step's run of workflow `workflow`, whose step `k` does
/// `works[k]` (full, reduced), as the reduced search weighs it; None without an estimate.
pub fn step_costs(
    seen: &[Observed],
    workflow: usize,
    works: &[(Work, Work)],
    cold: bool,
) -> Option<Vec<StepCost>> {
    works
        .iter()
        .enumerate()
        .map(|(step, (full, cut))| {
            let at = |w: &Work| predict_run(seen, workflow, step, w, cold);
            Some(StepCost {
                full: at(full)?.total().as_secs_f64(),
                reduced: at(cut)?.total().as_secs_f64(),
            })
        })
        .collect()
}

/// The expected time of `runs` (as `session::eta::runs_left` gives them: ladder step,
/// reduced, weight) of workflow `workflow`, whose step `k` does `works[k]` (`.0` at full
/// steps, `.1` at the reduced step count); None without an estimate.
pub(crate) fn time_left(
    seen: &[Observed],
    workflow: usize,
    runs: &[(usize, bool, f64)],
    works: &[(Work, Work)],
    cold: bool,
) -> Option<Duration> {
    let mut total = 0.0;
    for (step, reduced, weight) in runs {
        let Some((full, cut)) = works.get(*step) else {
            continue;
        };
        let work = if *reduced { cut } else { full };
        total += predict_run(seen, workflow, *step, work, cold)?
            .total()
            .as_secs_f64()
            * weight;
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(pixels: u64, steps: u32) -> Work {
        Work {
            steps,
            pixels,
            frames: 1,
            latent_frames: Some(1),
            batch: 1,
            models: None,
        }
    }

    fn seen(step: usize, pixels: u64, step_ms: f64, setup_ms: u64, post_ms: u64) -> Observed {
        Observed {
            workflow: 0,
            step,
            work: work(pixels, 10),
            phases: RunPhases {
                steps: 10,
                step_ms,
                setup_ms,
                post_ms,
            },
            cold: true,
            passed: true,
        }
    }

    #[test]
    fn no_finished_run_no_estimate() {
        assert_eq!(predict_run(&[], 0, 1, &work(100, 4), true), None);
    }

    #[test]
    fn one_run_scales_steps_with_the_work_post_as_its_square_root_and_keeps_its_setup() {
        let one = [seen(0, 1000, 100.0, 5000, 400)];
        let e = predict_run(&one, 0, 3, &work(4000, 20), true).unwrap();
        assert_eq!(e.setup, Duration::from_millis(5000));
        // 4 × the work per step, twice the steps.
        assert_eq!(e.steps, Duration::from_millis(8000));
        // Post: between 400 ms (all fixed) and 1600 ms (all proportional), their geometric
        // mean.
        assert_eq!(e.post, Duration::from_millis(800));
        assert_eq!(e.total(), Duration::from_millis(13_800));
        // A quarter of the work: a quarter of the step, half the post.
        let e = predict_run(&one, 0, 3, &work(250, 10), true).unwrap();
        assert_eq!(e.steps, Duration::from_millis(250));
        assert_eq!(e.post, Duration::from_millis(200));
    }

    #[test]
    fn steps_follow_the_latent_frames_and_post_the_frames_as_asked() {
        let video = |frames: u64, latent: Option<u64>| Work {
            frames,
            latent_frames: latent,
            ..work(100, 10)
        };
        // The minimal variant of a Wan workflow: 5 frames, 2 latent frames; the target: 81, 21.
        let minimal = Observed {
            work: video(5, Some(2)),
            ..seen(0, 100, 100.0, 1000, 400)
        };
        let target = video(81, Some(21));
        let near = |d: Duration, s: f64| (d.as_secs_f64() - s).abs() < 1e-6;
        let e = predict_run(&[minimal], 0, 3, &target, true).unwrap();
        // 10.5× the tokens per step, 10 steps of 100 ms.
        assert!(near(e.steps, 10.5), "{:?}", e.steps);
        // The decode: √(81 / 5) × 400 ms.
        assert!(near(e.post, 0.4 * (81.0f64 / 5.0).sqrt()), "{:?}", e.post);
        // A journal written before the latent frames were kept: its run and the next one are
        // both counted in frames as asked.
        let old = Observed {
            work: video(5, None),
            ..minimal
        };
        let e = predict_run(&[old], 0, 3, &target, true).unwrap();
        assert!(near(e.steps, 16.2), "{:?}", e.steps);
    }

    #[test]
    fn setup_follows_the_models_and_prefers_a_run_that_reached_all_its_steps() {
        let with = |o: Observed, models: u64| Observed {
            work: Work {
                models: Some(models),
                ..o.work
            },
            ..o
        };
        // The minimal (one expert, 2 s of setup) and the target (two experts, 9 s).
        let runs = [
            with(seen(0, 100, 60.0, 2000, 100), 1),
            with(seen(6, 400, 120.0, 9000, 400), 2),
        ];
        // Step 2 is nearer the minimal on the ladder, but loads the target's models.
        let at = |m: Option<u64>| {
            let w = Work {
                models: m,
                ..work(400, 10)
            };
            predict_run(&runs, 0, 2, &w, true).unwrap().setup
        };
        assert_eq!(at(Some(2)), Duration::from_millis(9000));
        assert_eq!(at(Some(1)), Duration::from_millis(2000));
        // Models unknown (an older journal) or unseen: the nearest run, as before.
        assert_eq!(at(None), Duration::from_millis(2000));
        assert_eq!(at(Some(3)), Duration::from_millis(2000));
        // A run of the same models that failed at its third step measured only part of its
        // setup: one that reached all its steps goes first, though farther on the ladder.
        let mut cut = with(seen(5, 400, 120.0, 4000, 0), 2);
        cut.phases.steps = 3;
        cut.passed = false;
        let runs = [runs[0], runs[1], cut];
        let w = Work {
            models: Some(2),
            ..work(400, 10)
        };
        let e = predict_run(&runs, 0, 4, &w, true).unwrap();
        assert_eq!(e.setup, Duration::from_millis(9000));
        let e = predict_run(&runs[2..], 0, 4, &w, true).unwrap();
        assert_eq!(e.setup, Duration::from_millis(4000));
    }

    #[test]
    fn between_two_runs_the_time_is_on_the_power_law_through_them() {
        // 4 × the work took 2 × the time per step (a fixed part): twice the work between
        // them takes √2 × the time, and 4 × beyond them 2 × again.
        let two = [
            seen(0, 100, 60.0, 3000, 100),
            seen(4, 400, 120.0, 9000, 400),
        ];
        let e = predict_run(&two, 0, 2, &work(200, 10), true).unwrap();
        assert_eq!(e.steps.as_millis(), 848); // 10 × 60 × √2
        assert_eq!(e.post.as_millis(), 200);
        let beyond = predict_run(&two, 0, 6, &work(1600, 10), true).unwrap();
        assert_eq!(beyond.steps.as_millis(), 2400);
        // Post beyond them: 4 × the work took 4 × the post time (400 ms), so 4 × more
        // takes 1600 ms; a steeper post fit is held to proportional, a step fit to 1.5.
        assert_eq!(beyond.post.as_millis(), 1600);
        let mut steep_post = two;
        steep_post[1].phases.post_ms = 1600;
        let e = predict_run(&steep_post, 0, 6, &work(1600, 10), true).unwrap();
        assert_eq!(e.post.as_millis(), 6400);
        // A steeper fit is held to an exponent of 1.5.
        let steep = [seen(0, 100, 10.0, 0, 0), seen(1, 200, 80.0, 0, 0)];
        let e = predict_run(&steep, 0, 2, &work(400, 1), true).unwrap();
        assert_eq!(e.steps.as_millis(), 226); // 80 × 2^1.5
        let e = predict_run(&two, 0, 2, &work(600, 10), true).unwrap();
        // Setup from the nearest step (ties go to the lower one).
        assert_eq!(e.setup, Duration::from_millis(3000));
        let e = predict_run(&two, 0, 3, &work(600, 10), true).unwrap();
        assert_eq!(e.setup, Duration::from_millis(9000));
        // Warm runs have their own setup when one was seen; else the cold one stands in.
        let mut warm = two;
        warm[1].cold = false;
        warm[1].phases.setup_ms = 500;
        let e = predict_run(&warm, 0, 1, &work(600, 10), false).unwrap();
        assert_eq!(e.setup, Duration::from_millis(500));
        let e = predict_run(&two, 0, 1, &work(600, 10), false).unwrap();
        assert_eq!(e.setup, Duration::from_millis(3000));
    }

    #[test]
    fn time_left_weighs_each_expected_run() {
        let one = [seen(0, 1000, 100.0, 1000, 0)];
        let works = vec![(work(1000, 10), work(1000, 2)); 3];
        let runs = [(1, false, 1.0), (2, true, 0.5)];
        // 2 s full + (1 s setup + 0.2 s steps) × 0.5.
        assert_eq!(
            time_left(&one, 0, &runs, &works, true),
            Some(Duration::from_millis(2600))
        );
        assert_eq!(time_left(&[], 0, &runs, &works, true), None);
    }
}
