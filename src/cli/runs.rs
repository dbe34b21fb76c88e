//! `comfy-bisect runs`: the sessions of one or several runs folders (one per machine) with their
//! verdicts (a `check`'s line: version, commit, outcome, exit status), one line per session,
//! newest last, grouped by environment (versions, devices and packs: what a restart on another
//! port keeps); `--json` prints one line per session.

use super::common::{CliResult, OrExit};
use crate::error::exit;
use comfy_bisect_core::app::{self, ListedSession};
use comfy_bisect_core::comfy::Fingerprint;
use comfy_bisect_core::session::folders;
use comfy_bisect_core::session::journal::{SessionFile, SessionState};
use std::path::PathBuf;

/// Arguments of `runs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where sessions are written; repeat it (or give a pattern such as 'machines/*/runs') to
    /// list the runs folders of several machines as one.
    #[arg(long = "runs-dir", default_value = "runs", value_name = "DIR")]
    pub runs_dirs: Vec<PathBuf>,
    /// One JSON line per session (for a scheduler to collect) instead of text.
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

/// The environment a session ended in: the fingerprint id of its last run.
fn environment_of(s: &SessionFile) -> Option<&str> {
    s.last_run_fingerprint()
}

/// One session in one line: its local start time to the second, its id, each workflow's
/// verdict (a `check`'s line), the mode (strict, mitigations), its runs and state.
pub fn session_line(listed: &ListedSession) -> String {
    let s = &listed.found.session;
    let verdicts = match &listed.check {
        Some(check) => check.line(),
        None => s
            .workflows
            .iter()
            .map(|w| {
                format!(
                    "{}: {}",
                    w.name,
                    w.headline().unwrap_or_else(|| "no verdict yet".into())
                )
            })
            .collect::<Vec<_>>()
            .join(" | "),
    };
    let mut mode = Vec::new();
    if s.options.strict {
        mode.push("strict".to_string());
    }
    if listed
        .found
        .dir
        .join(comfy_bisect_core::session::journal::MITIGATIONS_FILE)
        .is_file()
    {
        mode.push("mitigations".to_string());
    }
    if !s.drifts.is_empty() {
        mode.push(format!("{} environment change(s)", s.drifts.len()));
    }
    let mode = if mode.is_empty() {
        String::new()
    } else {
        format!("  [{}]", mode.join(", "))
    };
    let runs: usize = s.workflows.iter().map(|w| w.runs.len()).sum();
    format!(
        "{}  {}  {verdicts}{mode}  ({runs} run(s), {})",
        comfy_bisect_core::units::local_seconds(&s.created_at),
        s.session_id,
        state_text(&s.state)
    )
}

/// One line about an environment that stays when the server restarts: versions, devices,
/// node packs (not the launch arguments, which hold the port).
fn environment_line(fp: &Fingerprint) -> String {
    let devices: Vec<String> = fp
        .devices
        .iter()
        .map(|d| format!("{} ({} MiB)", d.name, d.total_bytes / (1024 * 1024)))
        .collect();
    format!(
        "ComfyUI {}, PyTorch {}, {}, {} node pack(s)",
        fp.comfyui_version.as_deref().unwrap_or("?"),
        fp.pytorch_version.as_deref().unwrap_or("?"),
        if devices.is_empty() {
            "no device listed".to_string()
        } else {
            devices.join(", ")
        },
        fp.packs.len(),
    )
}

/// The `--json` line of one session.
fn json_line(listed: &ListedSession) -> serde_json::Value {
    let found = &listed.found;
    let s = &found.session;
    let runs: usize = s.workflows.iter().map(|w| w.runs.len()).sum();
    let mut fingerprints: Vec<&str> = Vec::new();
    for r in s.workflows.iter().flat_map(|w| &w.runs) {
        if let Some(f) = r.fingerprint.as_deref() {
            if !fingerprints.contains(&f) {
                fingerprints.push(f);
            }
        }
    }
    serde_json::json!({
        "session_id": s.session_id,
        "runs_dir": found.runs_dir.display().to_string(),
        "dir": found.dir.display().to_string(),
        "server": s.server,
        "fingerprint": environment_of(s),
        "fingerprints": fingerprints,
        "drifts": s.drifts.len(),
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "state": s.state,
        "state_text": state_text(&s.state),
        "runs": runs,
        "check": listed.check,
        "workflows": s.workflows.iter().map(|w| serde_json::json!({
            "name": w.name,
            "steps": w.steps.len(),
            "runs": w.runs.len(),
            "verdict": w.verdict,
            "headline": w.headline(),
        })).collect::<Vec<_>>(),
    })
}

/// Runs `runs`: the sessions of every runs folder, grouped by the environment they ended in
/// (text), or one JSON line per session (`--json`). Ids found in two folders are said on
/// stderr and listed once per folder.
pub fn run(args: Args) -> CliResult {
    let dirs = folders::expand(&args.runs_dirs).or_usage()?;
    let app::SessionList {
        sessions,
        duplicates,
        unreadable,
    } = app::list_sessions(&dirs).or_usage()?;
    for d in &duplicates {
        eprintln!("warning: {d}");
    }
    if args.json {
        for listed in &sessions {
            println!("{}", json_line(listed));
        }
        for u in &unreadable {
            println!(
                "{}",
                serde_json::json!({
                    "dir": u.dir.display().to_string(),
                    "state": "corrupt",
                    "state_text": u.to_string(),
                })
            );
        }
        return Ok(exit::OK);
    }
    for u in &unreadable {
        println!("{u}");
    }
    let several = dirs.len() > 1;
    let where_ = || {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if sessions.is_empty() {
        if unreadable.is_empty() {
            println!("no sessions in {}", where_());
        }
        return Ok(exit::OK);
    }
    // Grouped by what stays when a server restarts (versions, devices, packs; not the port
    // or the fingerprint id); in each group one line per session, newest last, and the groups
    // in the order of their newest session.
    let mut groups: Vec<(String, Vec<&ListedSession>)> = Vec::new();
    let mut sorted: Vec<&ListedSession> = sessions.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |l: &ListedSession| {
            (
                comfy_bisect_core::units::local_seconds(&l.found.session.created_at),
                l.found.session.session_id.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    for listed in sorted {
        let s = &listed.found.session;
        let mut key = environment_of(s)
            .and_then(|id| s.fingerprints.get(id))
            .map(environment_line)
            .unwrap_or_else(|| "environment unknown (no fingerprint recorded)".into());
        if several {
            key = format!("{} — {key}", listed.found.runs_dir.display());
        }
        match groups.iter_mut().position(|(k, _)| *k == key) {
            // The group moves to the end: the groups go in the order of their newest session.
            Some(i) => {
                let mut g = groups.remove(i);
                g.1.push(listed);
                groups.push(g);
            }
            None => groups.push((key, vec![listed])),
        }
    }
    let grouped = groups.len() > 1 || several;
    let indent = if grouped { "  " } else { "" };
    for (key, members) in &groups {
        if grouped {
            println!("{key}:");
        }
        for listed in members {
            println!("{indent}{}", session_line(listed));
            for orphan in &listed.orphans {
                println!("{indent}    {orphan}");
            }
        }
    }
    Ok(exit::OK)
}
