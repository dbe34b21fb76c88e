//! `report SESSION --bundle out.zip`: one zip to attach to the issue, holding `report.md`,
//! `report.json`, and for each workflow the last passing and first failing run's files — the
//! submitted workflow (API format, and UI format when the input was UI), `run.json` and
//! `server.log`, and the run of the first passing mitigation (`passing-mitigation/`), whose
//! workflow is a way around the failure — redacted like the report (home folders and user names, hosts, credentials in
//! URLs, header values, secret-looking inputs and tokens; [`super::redact`]).

use super::model::{AttachedRun, Report};
use super::redact::Redactor;
use super::{build, formats, load, redact_report};
use anyhow::Context;
use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// One file of the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Its path inside the zip.
    pub name: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// The files of the bundle of the session folder `session_dir`, redacted unless `redact` is
/// false, in the order they are written.
pub(crate) fn entries(session_dir: &Path, redact: bool) -> anyhow::Result<Vec<Entry>> {
    let data = load(session_dir)?;
    let raw = build(&data);
    let mut redactor = Redactor::new();
    redactor.learn(&serde_json::to_value(&raw)?);
    let report: Report = if redact {
        redact_report(&raw)?
    } else {
        raw.clone()
    };
    let mut out = Vec::new();
    for format in formats() {
        out.push(Entry {
            name: format.file_name().to_string(),
            data: format.render(&report)?.into_bytes(),
        });
    }
    let several = raw.workflows.len() > 1;
    for w in &raw.workflows {
        let prefix = if several {
            format!("{}/", safe_name(&w.name))
        } else {
            String::new()
        };
        let slots = [
            ("last-passing", &w.attachments.minimal_passing),
            ("first-failing", &w.attachments.first_failing),
        ];
        for (role, run) in slots {
            let Some(run) = run else { continue };
            out.extend(run_entries(
                &format!("{prefix}{role}/"),
                run,
                redact.then_some(&redactor),
            )?);
        }
        if let Some(run) = passing_mitigation(session_dir, w) {
            out.extend(run_entries(
                &format!("{prefix}passing-mitigation/"),
                &run,
                redact.then_some(&redactor),
            )?);
        }
    }
    Ok(out)
}

/// The run of the first passing mitigation of `w`, with the workflow it ran (API, and UI when
/// the input was UI).
fn passing_mitigation(session_dir: &Path, w: &super::model::WorkflowReport) -> Option<AttachedRun> {
    let m = w.mitigations.iter().find(|m| m.passed())?;
    let run_dir = session_dir.join(m.run_dir.as_ref()?);
    let ui = run_dir.join("workflow.ui.json");
    Some(AttachedRun {
        step: 0,
        increment: m.control.clone(),
        purpose: "mitigation".into(),
        run_id: m.run_id.clone()?,
        outcome: "passed".into(),
        workflow: run_dir
            .join(crate::session::journal::RUN_WORKFLOW_FILE)
            .display()
            .to_string(),
        ui_workflow: ui.is_file().then(|| ui.display().to_string()),
        shareable_workflow: None,
        reproduce: String::new(),
        run_dir: run_dir.display().to_string(),
    })
}

/// The files of one attached run, under `dir` in the zip.
fn run_entries(
    dir: &str,
    run: &AttachedRun,
    redactor: Option<&Redactor>,
) -> anyhow::Result<Vec<Entry>> {
    let run_dir = Path::new(&run.run_dir);
    let folder = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run.run_id.clone());
    let dir = format!("{dir}{}/", safe_name(&folder));
    let mut files = vec![(Path::new(&run.workflow).to_path_buf(), "workflow.json")];
    if let Some(ui) = &run.ui_workflow {
        files.push((Path::new(ui).to_path_buf(), "workflow.ui.json"));
    }
    files.push((
        run_dir.join(crate::session::journal::RUN_RECORD_FILE),
        "run.json",
    ));
    files.push((
        run_dir.join(crate::run::console::SERVER_LOG_FILE),
        "server.log",
    ));
    let mut out = Vec::new();
    for (path, name) in files {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        let data = match redactor {
            None => text,
            Some(r) if name.ends_with(".json") => match serde_json::from_str::<Value>(&text) {
                Ok(mut v) => {
                    let mut r = r.clone();
                    r.learn(&v);
                    r.redact_value(&mut v);
                    let mut s = serde_json::to_string_pretty(&v)?;
                    s.push('\n');
                    s
                }
                // Not JSON (a damaged file): redacted as text.
                Err(_) => r.redact_text(&text),
            },
            Some(r) => {
                let mut r = r.clone();
                r.learn_text(&text);
                r.redact_text(&text)
            }
        };
        out.push(Entry {
            name: format!("{dir}{name}"),
            data: data.into_bytes(),
        });
    }
    Ok(out)
}

/// A name safe as one zip path component.
fn safe_name(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match clean.trim_matches('.') {
        "" => "_".into(),
        c => c.to_string(),
    }
}

/// Refuses a bundle path inside the session folder (through links too): the bundle must never
/// replace or add to the session's own files.
fn refuse_inside(session_dir: &Path, out: &Path) -> anyhow::Result<()> {
    let session = session_dir
        .canonicalize()
        .with_context(|| format!("cannot read the session folder {}", session_dir.display()))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    // A parent that does not exist cannot be inside the session folder's existing tree; the
    // write below then says what is missing.
    let Ok(parent) = parent.canonicalize() else {
        return Ok(());
    };
    let target = match out.file_name() {
        Some(name) => parent.join(name),
        None => parent,
    };
    let target = target.canonicalize().unwrap_or(target);
    if target.starts_with(&session) {
        anyhow::bail!(
            "refusing to write the bundle to {}: it is inside the session folder {}, whose files \
             the bundle must not change; write it elsewhere (e.g. --bundle report.zip)",
            out.display(),
            session_dir.display()
        );
    }
    Ok(())
}

/// Writes the bundle of `session_dir` to `out` (atomically) and returns its entries' names.
/// A path inside the session folder is refused before anything is read or written.
pub fn write_bundle(session_dir: &Path, out: &Path, redact: bool) -> anyhow::Result<Vec<String>> {
    refuse_inside(session_dir, out)?;
    let entries = entries(session_dir, redact)?;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    for e in &entries {
        zip.start_file(e.name.as_str(), options)
            .with_context(|| format!("cannot add {} to the zip", e.name))?;
        zip.write_all(&e.data)?;
    }
    let bytes = zip.finish().context("cannot finish the zip")?.into_inner();
    crate::session::journal::write_atomic(out, &bytes)
        .with_context(|| format!("cannot write the bundle {}", out.display()))?;
    Ok(entries.into_iter().map(|e| e.name).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_path_inside_the_session_folder_is_refused_and_nothing_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let session = tmp.path().join("runs").join("s1");
        std::fs::create_dir_all(session.join("wf")).unwrap();
        std::fs::write(session.join("session.json"), "{}").unwrap();
        for out in [
            session.join("session.json"),
            session.join("wf").join("x.zip"),
            session.join("..").join("s1").join("new.zip"),
        ] {
            let err = write_bundle(&session, &out, true).unwrap_err().to_string();
            assert!(
                err.contains("inside the session folder"),
                "{}: {err}",
                out.display()
            );
        }
        assert_eq!(
            std::fs::read_to_string(session.join("session.json")).unwrap(),
            "{}"
        );
        assert!(!session.join("wf").join("x.zip").exists());
        assert!(!session.join("new.zip").exists());
    }

    #[test]
    fn names_are_one_safe_path_component() {
        assert_eq!(safe_name("wan-video_lora.v2"), "wan-video_lora.v2");
        assert_eq!(safe_name("../etc/passwd"), "_etc_passwd");
        assert_eq!(safe_name(".."), "_");
        assert_eq!(safe_name("a b/c"), "a_b_c");
    }
}
