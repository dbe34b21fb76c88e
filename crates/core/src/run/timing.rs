//! Time per sampler step of one run, from the run's own frames: when each `progress` value of
//! our prompt first arrived (ms since the run started). The first step is kept apart: it
//! includes loading and staging the model. Pure: it reads a finished record's frames.

use super::frames::WsTextRecord;
use serde::{Deserialize, Serialize};

/// The steps of one sampler pass (one node counting from 1 to its `max`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerTiming {
    /// The node that reported the steps.
    pub node: String,
    /// Steps the pass was to take (`max`).
    pub steps: u32,
    /// The last step reported.
    pub reached: u32,
    /// ms from the node's first `progress` frame of value 0 or its start (when known) to step
    /// 1: loading, staging and the first step together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_step_ms: Option<u64>,
    /// ms of each later step, in order (step 2, 3, …).
    pub step_ms: Vec<u64>,
    /// Median seconds per step after the first (None with fewer than one later step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_per_step: Option<f64>,
    /// Mean of the last third of the later steps over the mean of the first third (None with
    /// fewer than 6 later steps): above 1, steps got slower within the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowing: Option<f64>,
    /// ms from the run's start to the pass's first `progress` frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    /// ms from the run's start to the pass's last step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
}

/// A run's wall time in three parts, for predicting the next one: before the first sampler
/// step (loading, encoding), the sampler steps, after the last step (decode, post-processing,
/// saving). Time between two sampler passes (the second expert's load, a hires upscale)
/// counts as setup.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunPhases {
    /// Sampler steps taken.
    pub steps: u32,
    /// Mean ms per sampler step (the first step of a pass counted at its pass's median).
    pub step_ms: f64,
    /// ms outside the steps before the last step.
    pub setup_ms: u64,
    /// ms after the last sampler step to the run's end.
    pub post_ms: u64,
}

/// One pass while it is read: its node, its `max`, and each step value with its first arrival.
type Pass = (String, u32, Vec<(u32, u64)>);

/// The sampler passes of our prompt, in the order they ran.
pub(crate) fn sampler_timings(frames: &[WsTextRecord], prompt_id: &str) -> Vec<SamplerTiming> {
    // (node, max, (step value, first arrival ms) in order) per pass.
    let mut passes: Vec<Pass> = Vec::new();
    for f in frames {
        let Some(json) = &f.json else { continue };
        if json.get("type").and_then(|t| t.as_str()) != Some("progress") {
            continue;
        }
        let data = &json["data"];
        if data
            .get("prompt_id")
            .and_then(|p| p.as_str())
            .is_some_and(|p| p != prompt_id)
        {
            continue;
        }
        let (Some(value), Some(max)) = (as_u32(&data["value"]), as_u32(&data["max"])) else {
            continue;
        };
        let node = data
            .get("node")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        match passes.last_mut() {
            Some((n, m, points))
                if *n == node && *m == max && points.last().is_some_and(|(v, _)| *v <= value) =>
            {
                // Repeated frames of one value (previews): the first arrival counts.
                if points.last().is_some_and(|(v, _)| *v < value) {
                    points.push((value, f.t_ms));
                }
            }
            _ => passes.push((node, max, vec![(value, f.t_ms)])),
        }
    }
    passes
        .into_iter()
        .map(|(node, steps, points)| timing_of(node, steps, &points))
        .collect()
}

fn as_u32(v: &serde_json::Value) -> Option<u32> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        .and_then(|n| u32::try_from(n).ok())
}

fn timing_of(node: String, steps: u32, points: &[(u32, u64)]) -> SamplerTiming {
    let reached = points.last().map(|(v, _)| *v).unwrap_or(0);
    let first_step_ms = match (points.first(), points.iter().find(|(v, _)| *v == 1)) {
        (Some((0, t0)), Some((_, t1))) => Some(t1.saturating_sub(*t0)),
        _ => None,
    };
    // Later steps: between consecutive values ≥ 1, spread evenly over skipped values.
    let mut step_ms = Vec::new();
    for pair in points.windows(2) {
        let ((v0, t0), (v1, t1)) = (pair[0], pair[1]);
        if v0 == 0 {
            continue;
        }
        let n = (v1 - v0) as u64;
        step_ms.extend(std::iter::repeat_n(t1.saturating_sub(t0) / n, n as usize));
    }
    let s_per_step = median(&step_ms).map(|ms| ms / 1000.0);
    let slowing = (step_ms.len() >= 6).then(|| {
        let third = step_ms.len() / 3;
        let mean = |s: &[u64]| s.iter().sum::<u64>() as f64 / s.len() as f64;
        let first = mean(&step_ms[..third]);
        let last = mean(&step_ms[step_ms.len() - third..]);
        if first > 0.0 {
            last / first
        } else {
            1.0
        }
    });
    SamplerTiming {
        node,
        steps,
        reached,
        first_step_ms,
        step_ms,
        s_per_step,
        slowing,
        start_ms: points.first().map(|(_, t)| *t),
        end_ms: points.last().map(|(_, t)| *t),
    }
}

fn median(values: &[u64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid] as f64
    } else {
        (v[mid - 1] + v[mid]) as f64 / 2.0
    })
}

/// The run's seconds per step: the slowest pass's median (the sampler that sets the pace).
pub(crate) fn run_s_per_step(timings: &[SamplerTiming]) -> Option<f64> {
    timings
        .iter()
        .filter_map(|t| t.s_per_step)
        .max_by(|a, b| a.total_cmp(b))
}

/// The run's [`RunPhases`] from the passes of the nodes `sampler` accepts (a decode or an
/// upscaler also reports steps); None when no such pass timed a step.
pub(crate) fn run_phases(
    timings: &[SamplerTiming],
    duration_ms: u64,
    sampler: impl Fn(&str) -> bool,
) -> Option<RunPhases> {
    let passes: Vec<&SamplerTiming> = timings
        .iter()
        .filter(|t| sampler(&t.node) && t.reached > 0 && t.start_ms.is_some())
        .collect();
    let last = passes.last()?;
    let steps: u32 = passes.iter().map(|t| t.reached).sum();
    // A pass's first step is as long as its others (its loading is setup); a pass without a
    // later step (one step, or a failure at the second) takes the pace of the run's others,
    // and a run with no later step at all says nothing of its pace.
    let timed: Vec<f64> = passes.iter().filter_map(|t| t.s_per_step).collect();
    if timed.is_empty() {
        return None;
    }
    let pace = timed.iter().sum::<f64>() / timed.len() as f64;
    let pass_ms = |t: &SamplerTiming| t.s_per_step.unwrap_or(pace) * 1000.0 * f64::from(t.reached);
    let sample_ms: f64 = passes.iter().map(|t| pass_ms(t)).sum();
    let end = last.end_ms.unwrap_or(0).min(duration_ms);
    let post_ms = duration_ms - end;
    let setup_ms = (end as f64 - sample_ms).max(0.0) as u64;
    Some(RunPhases {
        steps,
        step_ms: sample_ms / f64::from(steps.max(1)),
        setup_ms,
        post_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn progress(t_ms: u64, node: &str, value: u32, max: u32, prompt: &str) -> WsTextRecord {
        WsTextRecord {
            t_ms,
            socket: 0,
            json: Some(json!({"type": "progress", "data": {
                "value": value, "max": max, "prompt_id": prompt, "node": node}})),
            raw: None,
        }
    }

    #[test]
    fn steps_are_timed_from_the_first_arrival_of_each_value() {
        let frames = vec![
            progress(1000, "3", 0, 5, "p"),
            progress(4000, "3", 1, 5, "p"),
            progress(4100, "3", 1, 5, "p"), // a preview repeats the value
            progress(5000, "3", 2, 5, "p"),
            progress(6000, "3", 3, 5, "p"),
            progress(9000, "3", 5, 5, "p"), // a skipped value: 3 s over two steps
            progress(9500, "9", 1, 2, "other"), // another prompt's frame
        ];
        let t = sampler_timings(&frames, "p");
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert_eq!((t.node.as_str(), t.steps, t.reached), ("3", 5, 5));
        assert_eq!(t.first_step_ms, Some(3000));
        assert_eq!(t.step_ms, vec![1000, 1000, 1500, 1500]);
        assert_eq!(t.s_per_step, Some(1.25));
        assert_eq!(t.slowing, None);
        assert_eq!((t.start_ms, t.end_ms), (Some(1000), Some(9000)));
    }

    #[test]
    fn a_run_splits_into_setup_steps_and_post() {
        // Two sampler passes of 1 s steps with a 4 s load between them, then a decode that
        // reports tiles (not a sampler), and 2 s after the last step.
        let mut frames = Vec::new();
        for v in 1..=4u32 {
            frames.push(progress(3000 + 1000 * u64::from(v), "14", v, 4, "p"));
        }
        for v in 1..=4u32 {
            frames.push(progress(11_000 + 1000 * u64::from(v), "15", v, 4, "p"));
        }
        frames.push(progress(15_500, "16", 1, 2, "p"));
        frames.push(progress(16_000, "16", 2, 2, "p"));
        let timings = sampler_timings(&frames, "p");
        let phases = run_phases(&timings, 17_000, |n| n != "16").unwrap();
        assert_eq!(phases.steps, 8);
        assert_eq!(phases.step_ms, 1000.0);
        // 3 s before the first step and 4 s between the passes.
        assert_eq!(phases.setup_ms, 7000);
        assert_eq!(phases.post_ms, 2000);
        assert_eq!(run_phases(&timings, 17_000, |_| false), None);
        // A run that failed at its second step timed no step: no phases.
        let failed = sampler_timings(&[progress(1700, "14", 1, 10, "p")], "p");
        assert_eq!(run_phases(&failed, 1800, |_| true), None);
    }

    #[test]
    fn a_second_pass_is_its_own_and_slowing_steps_are_measured() {
        let mut frames = vec![progress(0, "3", 1, 2, "p"), progress(500, "3", 2, 2, "p")];
        // Second pass (a hires sampler): each step 200 ms slower than the last.
        let mut t = 1000;
        for v in 1..=8u32 {
            t += 1000 + 200 * u64::from(v);
            frames.push(progress(t, "7", v, 8, "p"));
        }
        let timings = sampler_timings(&frames, "p");
        assert_eq!(timings.len(), 2);
        assert_eq!(timings[0].step_ms, vec![500]);
        assert_eq!(timings[0].first_step_ms, None);
        let hires = &timings[1];
        assert_eq!(hires.step_ms.len(), 7);
        let slowing = hires.slowing.unwrap();
        assert!(slowing > 1.5 && slowing < 1.8, "{slowing}");
        assert_eq!(run_s_per_step(&timings), hires.s_per_step);
        // The same node counting again from 1 is a new pass too.
        let again = vec![
            progress(0, "3", 1, 3, "p"),
            progress(100, "3", 3, 3, "p"),
            progress(200, "3", 1, 3, "p"),
            progress(300, "3", 2, 3, "p"),
        ];
        assert_eq!(sampler_timings(&again, "p").len(), 2);
    }
}
