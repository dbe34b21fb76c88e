//! What a run leaves on disk: the variant (and its UI companion), the judgement of a finished
//! run (diagnosis, memory pressure, walk cues), `run.json` and its evidence files, the custom
//! nodes and component hashes of the models, and the run index line.

use super::backend::{Backend, Clock};
use super::state::{DriveResult, Driver, JudgedRun};
use crate::comfy::Fingerprint;
use crate::hashing::{ComponentHash, HashCache};
use crate::run::RunRecord;
use crate::session::index::{self, IndexEntry};
use crate::session::journal::{
    read_json, JournalError, Outcome, PackOfClass, ReducedSteps, RunEntry, RunFile, RunRole,
    RUN_RECORD_FILE, SESSION_SCHEMA_VERSION,
};
use crate::workflow::Workflow;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A summary of a finished run for one-line output.
pub(crate) fn describe_run(entry: &RunEntry) -> String {
    // A pass under memory pressure or through a fallback says so (`passed — slowed 3.1×`).
    let outcome = match (&entry.outcome, &entry.summary) {
        (Some(Outcome::Passed), Some(s)) => s.delivered.passed_words(),
        (Some(o), _) => o.name().to_string(),
        (None, _) => "in flight".to_string(),
    };
    let stage = entry
        .summary
        .as_ref()
        .and_then(|s| s.stage)
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    format!(
        "step {} {}{} [{}] {}{}",
        entry.step,
        entry.increment,
        entry
            .reduced
            .as_ref()
            .map(ReducedSteps::mark)
            .unwrap_or_default(),
        serde_json::to_value(entry.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        outcome,
        stage
    )
}

/// What a fingerprint says about the server's model folders, for hashing without `--models-dir`.
fn server_models(fp: &Fingerprint) -> crate::hashing::ServerModels {
    crate::hashing::ServerModels {
        folder_paths: fp
            .model_paths
            .iter()
            .map(|(kind, dirs)| (kind.clone(), dirs.iter().map(PathBuf::from).collect()))
            .collect(),
        listed: fp
            .models
            .iter()
            .map(|f| {
                (
                    f.folder.clone(),
                    f.files.iter().map(|x| (x.name.clone(), x.size)).collect(),
                )
            })
            .collect(),
    }
}

impl<'h, B: Backend, C: Clock> Driver<'h, B, C> {
    /// When the step has a UI-format companion, the run folder gets it as `workflow.ui.json`.
    pub(super) fn copy_ui_companion(
        &mut self,
        w: usize,
        step: usize,
        role: RunRole,
        run_dir: &std::path::Path,
    ) -> Result<(), JournalError> {
        if role == RunRole::Control {
            return Ok(());
        }
        let Some(s) = self.session.workflows[w].steps.get(step) else {
            return Ok(());
        };
        let companion = self
            .paths
            .dir
            .join(crate::session::setup::ui_companion(&s.file));
        match std::fs::read(&companion) {
            Ok(bytes) => self
                .durable
                .write_atomic(&run_dir.join("workflow.ui.json"), &bytes),
            Err(_) => Ok(()),
        }
    }

    pub(super) fn variant(
        &self,
        w: usize,
        step: usize,
        role: RunRole,
    ) -> Result<(Workflow, String), JournalError> {
        let job = &self.session.workflows[w];
        let (file, increment) = if role == RunRole::Control {
            let c = job
                .controls
                .iter()
                .find(|c| c.step == step)
                .ok_or_else(|| JournalError::Invalid {
                    path: self.paths.session_file(),
                    reason: format!("no control variant for step {step}"),
                })?;
            (c.file.clone(), c.increment.clone())
        } else {
            let s = &job.steps[step];
            (s.file.clone(), s.increment.clone())
        };
        let path = self.paths.dir.join(&file);
        let workflow =
            crate::workflow::load_api_file(&path).map_err(|e| JournalError::Invalid {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        Ok((workflow, increment))
    }

    /// Judges a finished run of ladder step `step`: its diagnosis, its outcome (`strict`: a pass
    /// through a memory fallback or under memory pressure is a failure), its summary and its
    /// memory pressure against the previous passing step.
    pub(crate) fn judge_run(
        &self,
        w: usize,
        step: usize,
        mut record: RunRecord,
        workflow: &Workflow,
        strict: bool,
    ) -> JudgedRun {
        let diagnosis = crate::session::evidence::diagnose_record(&record, workflow);
        if let Some(d) = &diagnosis {
            record.diagnosis = Some(d.clone());
        }
        let mut outcome = crate::session::evidence::outcome_with(&record, strict);
        let mut summary =
            crate::session::evidence::summary_of(&record, diagnosis.as_ref(), Some(workflow));
        // Time alone is never memory pressure (issue #39): a slowdown needs a memory sign of
        // the same run, else it is shown beside this machine's load and decides nothing.
        let confirmed = crate::analytics::pressure::confirm(
            self.memory_pressure_at(w, step, &record, workflow),
            crate::analytics::pressure::memory_signs(
                &record,
                (summary.vram_total_mib, summary.vram_peak_mib),
            ),
        );
        summary.delivered.slowdown_only = crate::analytics::pressure::time_only_words(
            &confirmed.time_only,
            &crate::session::evidence::busy_context(&record),
        );
        let pressure = confirmed.pressure;
        if step + 1 == self.session.workflows[w].steps.len() {
            // The target: the cues that its pass may hide memory pressure (`--walk-on-pass`).
            summary.walk_cues = crate::analytics::walk::cues(
                &record,
                &crate::analytics::walk::VramUse {
                    total_mib: summary.vram_total_mib,
                    peak_mib: summary.vram_peak_mib,
                    peak_source: summary.vram_peak_source.as_deref(),
                    sample_ms: summary.vram_sample_ms,
                },
                pressure.as_ref(),
            );
        }
        if let Some(p) = &pressure {
            summary.delivered.memory_pressure = p.words();
            if strict && outcome == Outcome::Passed {
                outcome = Outcome::MemoryPressure {
                    evidence: p.words(),
                };
                summary.stage = Some(p.stage());
            }
        }
        JudgedRun {
            record,
            outcome,
            summary,
            diagnosis,
            pressure,
        }
    }

    /// Writes a finished run's `server.log` and `run.json` (with its component and node hashes,
    /// environment and custom-pack classes); returns the component hashes for its index line.
    pub(crate) fn write_run_files(
        &mut self,
        w: usize,
        entry: &RunEntry,
        workflow: &Workflow,
        record: RunRecord,
        memory_pressure: Option<crate::analytics::pressure::MemoryPressure>,
    ) -> Result<Vec<ComponentHash>, JournalError> {
        let components = self.component_hashes(workflow, entry.fingerprint.as_deref());
        let node_hashes: std::collections::BTreeMap<String, String> = workflow
            .nodes
            .keys()
            .filter_map(|id| workflow.node_sha256(id).map(|h| (id.clone(), h)))
            .collect();
        let run_dir = self.paths.run_dir(entry);
        if !record.server_log.is_empty() {
            self.durable.write_atomic(
                &run_dir.join(crate::run::console::SERVER_LOG_FILE),
                record.server_log.as_bytes(),
            )?;
        }
        let file = RunFile {
            schema_version: SESSION_SCHEMA_VERSION,
            session_id: self.session.session_id.clone(),
            workflow: self.session.workflows[w].name.clone(),
            entry: entry.clone(),
            component_hashes: components.clone(),
            node_hashes,
            environment: entry
                .fingerprint
                .as_ref()
                .and_then(|id| self.session.fingerprints.get(id))
                .cloned(),
            custom_nodes: self.custom_nodes(workflow, entry.fingerprint.as_deref()),
            record,
            memory_pressure,
        };
        self.durable
            .write_json_atomic(&run_dir.join(RUN_RECORD_FILE), &file)?;
        Ok(components)
    }

    /// The memory pressure of a passed run of ladder step `step` (a ladder run, or a
    /// mitigation control on the target): its evidence against the previous passing step of the
    /// ladder that the journal has with a time per step.
    pub(super) fn memory_pressure_at(
        &self,
        w: usize,
        step: usize,
        record: &RunRecord,
        workflow: &Workflow,
    ) -> Option<crate::analytics::pressure::MemoryPressure> {
        let job = &self.session.workflows[w];
        let baseline = job
            .runs
            .iter()
            .filter(|r| r.step < step && r.passed() && r.role != RunRole::Control)
            .max_by_key(|r| r.step)
            .map(|r| {
                let work = self
                    .variant(w, r.step, RunRole::Search)
                    .ok()
                    .and_then(|(base, _)| crate::analytics::pressure::work_of(&base));
                // Its console's loads, from its run.json (absent: none known).
                let events = read_json::<RunFile>(&self.paths.run_dir(r).join(RUN_RECORD_FILE))
                    .map(|f| f.record.memory_events)
                    .unwrap_or_default();
                crate::analytics::pressure::Baseline::of(
                    r.step,
                    r.summary.as_ref().and_then(|s| s.s_per_step),
                    work,
                    &events,
                )
            });
        crate::analytics::pressure::assess(
            record,
            crate::analytics::pressure::work_of(workflow),
            baseline.as_ref(),
            self.session
                .options
                .max_slowdown
                .unwrap_or(crate::analytics::pressure::DEFAULT_MAX_SLOWDOWN),
        )
    }

    /// The classes of `workflow` that come from a custom node pack, with the pack's version
    /// from the run's fingerprint (`fingerprint`) where it has one.
    pub(crate) fn custom_nodes(
        &self,
        workflow: &Workflow,
        fingerprint: Option<&str>,
    ) -> Option<BTreeMap<String, PackOfClass>> {
        let classes: std::collections::BTreeSet<&str> = workflow
            .nodes
            .values()
            .map(|n| n.class_type.as_str())
            .collect();
        let classes: Vec<&str> = classes.into_iter().collect();
        let packs = self.backend.custom_classes(&classes)?;
        let fp = fingerprint.and_then(|id| self.session.fingerprints.get(id));
        Some(
            packs
                .into_iter()
                .map(|(class, pack)| {
                    let version = fp
                        .and_then(|f| f.pack(&pack))
                        .and_then(|p| p.version.clone());
                    (class, PackOfClass { pack, version })
                })
                .collect(),
        )
    }

    /// Appends the run's index line. Only a recovered run can already have one (a fresh run id
    /// cannot), so only then is the index read, which keeps a run's cost independent of how many
    /// runs `runs/` holds.
    pub(super) fn index(
        &mut self,
        w: usize,
        entry: &RunEntry,
        components: Vec<ComponentHash>,
        recovered: bool,
    ) -> DriveResult {
        let runs_dir = self.paths.runs_dir.clone();
        if recovered
            && index::read_all(&runs_dir)?
                .iter()
                .any(|e| e.run_id == entry.run_id)
        {
            return Ok(());
        }
        let line = IndexEntry::of(
            &self.session.session_id,
            &self.session.workflows[w].name,
            entry,
            components,
            self.index_mark.clone(),
        );
        index::append_behind(&runs_dir, &line, &mut self.durable)
    }

    /// The run's model files hashed: under `--models-dir` when given, else in the server's own
    /// folders as the run's fingerprint describes them (`/internal/folder_paths` and the
    /// listings), when they are on this machine.
    pub(crate) fn component_hashes(
        &mut self,
        workflow: &Workflow,
        fingerprint: Option<&str>,
    ) -> Vec<ComponentHash> {
        let prompt = workflow.to_value();
        let roots = self.session.options.models_dirs.clone();
        let hashes = if roots.is_empty() {
            let server = fingerprint
                .and_then(|id| self.session.fingerprints.get(id))
                .map(server_models)
                .unwrap_or_default();
            if self.hash_cache.is_none() && !server.folder_paths.is_empty() {
                self.hash_cache = Some(HashCache::open(
                    self.paths.runs_dir.join(crate::hashing::DEFAULT_CACHE_FILE),
                ));
            }
            crate::hashing::hash_server_components(&prompt, &server, self.hash_cache.as_mut())
        } else {
            crate::hashing::hash_components(&prompt, &roots, self.hash_cache.as_mut())
        };
        if let Some(cache) = self.hash_cache.as_mut() {
            let _ = cache.save();
        }
        hashes
    }
}
