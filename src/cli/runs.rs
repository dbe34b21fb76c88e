//! `comfy-bisect runs`: the sessions in the runs folder with their verdicts.

use super::common::{CliResult, OrExit};
use crate::error::exit;
use crate::session::journal::{read_json, SessionFile, SessionState, SESSION_FILE};
use std::path::PathBuf;

/// Arguments of `runs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where sessions are written.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub runs_dir: PathBuf,
    /// One JSON object per session instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The state in a few words.
pub fn state_text(state: &SessionState) -> String {
    match state {
        SessionState::Preflight => "preflight".into(),
        SessionState::Waiting { until } => format!("waiting until {until}"),
        SessionState::Running { workflow } => {
            format!("running (or killed) at workflow {}", workflow + 1)
        }
        SessionState::Done => "done".into(),
        SessionState::Stopped { reason, .. } => format!(
            "stopped ({})",
            serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
    }
}

/// Runs `runs`.
pub fn run(args: Args) -> CliResult {
    let dirs = std::fs::read_dir(&args.runs_dir)
        .map_err(|e| {
            format!(
                "cannot read the runs folder {}: {e} (pass --runs-dir DIR)",
                args.runs_dir.display()
            )
        })
        .or_usage()?;
    let mut sessions: Vec<SessionFile> = dirs
        .filter_map(Result::ok)
        .filter_map(|d| read_json::<SessionFile>(&d.path().join(SESSION_FILE)).ok())
        .collect();
    sessions.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    if sessions.is_empty() && !args.json {
        println!("no sessions in {}", args.runs_dir.display());
        return Ok(exit::OK);
    }
    for s in &sessions {
        let runs: usize = s.workflows.iter().map(|w| w.runs.len()).sum();
        if args.json {
            let line = serde_json::json!({
                "session_id": s.session_id,
                "created_at": s.created_at,
                "updated_at": s.updated_at,
                "state": s.state,
                "runs": runs,
                "workflows": s.workflows.iter().map(|w| serde_json::json!({
                    "name": w.name,
                    "steps": w.steps.len(),
                    "verdict": w.verdict,
                })).collect::<Vec<_>>(),
            });
            println!("{line}");
            continue;
        }
        println!(
            "{}  {}  {} run(s)  {}",
            s.session_id,
            s.created_at,
            runs,
            state_text(&s.state)
        );
        for w in &s.workflows {
            let verdict = w
                .verdict
                .as_ref()
                .map(|v| v.headline())
                .unwrap_or_else(|| "no verdict yet".into());
            println!("    {}: {verdict}", w.name);
        }
    }
    Ok(exit::OK)
}
