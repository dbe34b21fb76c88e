//! A workflow's answer in the journal ([`Verdict`]: first failure, minimal fails, flaky, …)
//! and what it carries (missing models, the counts of a flaky step), with the lines the
//! terminal, the `runs` listing and the report print of it.

use crate::vocab::{Stage, VerdictKind};
use serde::{Deserialize, Serialize};

/// The answer for one workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// The search found the first failing increment.
    FirstFailure {
        /// The first failing step.
        step: usize,
        /// Its increment.
        increment: String,
        /// The run that showed it.
        run_id: String,
        /// The last passing step (`step - 1`).
        last_pass_step: usize,
        /// The run that showed it passes.
        last_pass_run_id: String,
        /// Diagnosis stage of the failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage: Option<Stage>,
        /// Steps never run (binary strategy).
        #[serde(default)]
        not_run: Vec<usize>,
    },
    /// The minimal variant already fails: nothing to bisect.
    MinimalFails {
        /// The failing run.
        run_id: String,
        /// Diagnosis stage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage: Option<Stage>,
    },
    /// The target passed.
    CouldNotReproduce {
        /// The passing target run.
        run_id: String,
    },
    /// Repeats disagreed.
    Flaky {
        /// Per repeated step, how often it passed and failed.
        counts: Vec<FlakyCount>,
    },
    /// Preflight stopped this workflow (nothing was run).
    PreflightFailed {
        /// Node classes the server does not know (install the custom nodes).
        #[serde(default)]
        unknown_nodes: Vec<String>,
        /// Model files the server does not have.
        #[serde(default)]
        missing_models: Vec<MissingModel>,
        /// Other problems, in words.
        #[serde(default)]
        other: Vec<String>,
    },
    /// A run was rejected or interrupted, which says nothing about the variant.
    Inconclusive {
        /// The run.
        run_id: String,
        /// In words.
        detail: String,
    },
    /// Not finished: deadline, Ctrl-C, or the server lost and not back.
    Incomplete {
        /// Why.
        reason: StopReason,
        /// In words.
        detail: String,
    },
    /// `check`: the one run of the workflow as given ended (its outcome says good, bad or
    /// cannot test); there is no ladder.
    Checked {
        /// The run.
        run_id: String,
    },
}

/// A model file a workflow names that the server does not list (written as
/// `{"file","folder","node","class_type","input"}`, unknown values as `""` or `null`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MissingModel {
    /// The file name as the workflow gives it.
    pub file: String,
    /// The models folder it belongs in (`loras`, `checkpoints`, …), empty when unknown.
    pub folder: String,
    /// The node that names it.
    pub node: Option<String>,
    /// That node's class.
    pub class_type: Option<String>,
    /// The input that names it.
    pub input: Option<String>,
}

impl MissingModel {
    /// `loras/detail.safetensors (node #10 LoraLoader, input lora_name)`.
    pub fn describe(&self) -> String {
        let mut out = match self.folder.as_str() {
            "" => self.file.clone(),
            folder => format!("{folder}/{}", self.file),
        };
        if let Some(node) = self.node.as_deref().filter(|n| !n.is_empty()) {
            out.push_str(&format!(" (node #{node}"));
            if let Some(class) = self.class_type.as_deref().filter(|c| !c.is_empty()) {
                out.push_str(&format!(" {class}"));
            }
            if let Some(input) = self.input.as_deref().filter(|i| !i.is_empty()) {
                out.push_str(&format!(", input {input}"));
            }
            out.push(')');
        }
        out
    }
}

/// Pass/fail counts of one repeated step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlakyCount {
    /// The step.
    pub step: usize,
    /// Its increment.
    pub increment: String,
    /// Runs that passed (search and repeats together).
    pub passed: u32,
    /// Runs that failed.
    pub failed: u32,
}

impl Verdict {
    /// One line for the terminal and the `runs` listing ([`super::WorkflowJob::headline`] also names
    /// the part of the workflow the failing step brings back).
    pub fn headline(&self) -> String {
        self.headline_with(&[])
    }

    /// [`Verdict::headline`], naming `parts` of the failing step (`hires pass: KSampler #11 at
    /// 1024×1024`) after its increment.
    pub(crate) fn headline_with(&self, parts: &[String]) -> String {
        match self {
            Verdict::FirstFailure {
                step,
                increment,
                stage,
                ..
            } => {
                let named = if parts.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", parts.join("; "))
                };
                match stage {
                    Some(stage) => format!(
                        "first failure at increment {increment}{named} (step {step}), stage {stage}"
                    ),
                    None => format!("first failure at increment {increment}{named} (step {step})"),
                }
            }
            Verdict::MinimalFails { stage, .. } => match stage {
                Some(stage) => format!("minimal variant already fails (stage {stage})"),
                None => "minimal variant already fails".to_string(),
            },
            Verdict::CouldNotReproduce { .. } => "could not reproduce (the target passed)".into(),
            Verdict::Flaky { counts } => {
                let parts: Vec<String> = counts
                    .iter()
                    .map(|c| {
                        format!(
                            "step {} {}: {} passed, {} failed",
                            c.step, c.increment, c.passed, c.failed
                        )
                    })
                    .collect();
                format!("flaky ({})", parts.join("; "))
            }
            Verdict::PreflightFailed {
                unknown_nodes,
                missing_models,
                other,
            } => format!(
                "preflight failed: {} unknown node class(es), {} missing model file(s), {} other problem(s)",
                unknown_nodes.len(),
                missing_models.len(),
                other.len()
            ),
            Verdict::Inconclusive { detail, .. } => format!("inconclusive: {detail}"),
            Verdict::Incomplete { detail, .. } => format!("incomplete: {detail}"),
            Verdict::Checked { run_id } => format!("check: one run of the workflow as given ({run_id})"),
        }
    }

    /// Which verdict this is, in the shared vocabulary.
    pub(crate) fn verdict_kind(&self) -> VerdictKind {
        match self {
            Verdict::FirstFailure { .. } => VerdictKind::FirstFailure,
            Verdict::MinimalFails { .. } => VerdictKind::MinimalFails,
            Verdict::CouldNotReproduce { .. } => VerdictKind::CouldNotReproduce,
            Verdict::Flaky { .. } => VerdictKind::Flaky,
            Verdict::PreflightFailed { .. } => VerdictKind::PreflightFailed,
            Verdict::Inconclusive { .. } => VerdictKind::Inconclusive,
            Verdict::Incomplete { .. } => VerdictKind::Incomplete,
            Verdict::Checked { .. } => VerdictKind::Check,
        }
    }

    /// Short machine name (`first_failure`, `minimal_fails`, …).
    pub fn kind(&self) -> &'static str {
        self.verdict_kind().as_str()
    }
}

/// Why a session stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// `--deadline` reached (checked between runs).
    Deadline,
    /// Ctrl-C.
    Interrupted,
    /// The server went away and did not come back within `--wait-server`.
    ServerLost,
    /// Preflight found problems (see each workflow's verdict).
    Preflight,
    /// Another error (named in `detail`).
    Error,
    /// The environment fingerprint changed between runs and `--on-drift stop` was given.
    EnvironmentChanged,
}
