//! Fixed session journals for the report tests, built from the session module's types and
//! written into a temporary runs folder (no server involved).

use crate::record_builders::{run_entry, run_record, workflow_job};
use comfy_bisect_core::comfy::console::LoadFigures;
use comfy_bisect_core::comfy::events::{NodeTiming, Progress};
use comfy_bisect_core::comfy::MemoryEvent;
use comfy_bisect_core::comfy::{ExecutionError, SystemStats};
use comfy_bisect_core::diagnose;
use comfy_bisect_core::hashing::{ComponentHash, ComponentStatus};
use comfy_bisect_core::run::console::SERVER_LOG_FILE;
use comfy_bisect_core::run::record::{RunError, RunRecord};
use comfy_bisect_core::run::{ServerLostInfo, VramReport, VramSample};
use comfy_bisect_core::session::journal::{
    run_dir_name, write_json_atomic, FlakyCount, Outcome, PackOfClass, RunEntry, RunFile, RunRole,
    RunStatus, RunSummary, SessionFile, SessionOptions, SessionPaths, SessionState, StepInfo,
    StopReason, Strategy, Verdict, WorkflowJob, RUN_RECORD_FILE, RUN_WORKFLOW_FILE,
    SESSION_SCHEMA_VERSION,
};
use comfy_bisect_core::vocab::OutcomeKind;
use comfy_bisect_core::vocab::ProductSummary;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The session id every fixture uses.
pub const SESSION_ID: &str = "20261129-010000-abcd";

/// A deterministic run id for step `step`, role number `n`.
pub fn run_id(step: usize, n: usize) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", 0x5e55_0000 + n, step)
}

/// One machine the fixtures run on.
#[derive(Clone)]
pub struct Machine {
    pub server: String,
    pub stats: SystemStats,
    pub home: String,
    pub sep: char,
}

/// A Linux box on the LAN with a 12 GiB card, launched with memory flags.
pub fn linux_box() -> Machine {
    Machine {
        server: "http://gpu-box.lan:8188".into(),
        stats: serde_json::from_value(json!({
            "system": {"os": "posix", "ram_total": 32 * GIB, "ram_free": 20 * GIB,
                "comfyui_version": "0.3.64", "required_frontend_version": "1.27.10",
                "python_version": "3.12.3 (main, Apr 10 2026, 05:33:47) [GCC 13.2.0]",
                "pytorch_version": "2.8.0+cu128", "embedded_python": false,
                "argv": ["main.py", "--listen", "192.168.1.20", "--port", "8188", "--lowvram",
                         "--reserve-vram", "1.0", "--use-sage-attention",
                         "--output-directory", "/home/alice/comfy-out"]},
            "devices": [{"name": "cuda:0 NVIDIA GeForce RTX 3060 : cudaMallocAsync", "type": "cuda",
                "index": 0, "vram_total": 12 * GIB, "vram_free": 11 * GIB,
                "torch_vram_total": 0, "torch_vram_free": 0}]
        }))
        .unwrap(),
        home: "/home/alice/ComfyUI".into(),
        sep: '/',
    }
}

/// A Windows portable install with a 6 GiB card, default flags, on loopback.
pub fn windows_box() -> Machine {
    Machine {
        server: "http://127.0.0.1:8188".into(),
        stats: serde_json::from_value(json!({
            "system": {"os": "nt", "ram_total": 16 * GIB, "ram_free": 9 * GIB,
                "comfyui_version": "0.3.64", "required_frontend_version": "1.27.10",
                "python_version": "3.12.10 (tags/v3.12.10:0cc8128, Apr  8 2025, 12:21:36) [MSC v.1943 64 bit (AMD64)]",
                "pytorch_version": "2.8.0+cu128", "embedded_python": true,
                "argv": ["ComfyUI\\main.py", "--windows-standalone-build"]},
            "devices": [{"name": "cuda:0 NVIDIA GeForce RTX 2060 : cudaMallocAsync", "type": "cuda",
                "index": 0, "vram_total": 6 * GIB, "vram_free": 5 * GIB,
                "torch_vram_total": 0, "torch_vram_free": 0}]
        }))
        .unwrap(),
        home: "C:\\Users\\Bob\\ComfyUI_windows_portable\\ComfyUI".into(),
        sep: '\\',
    }
}

/// What one run did.
#[derive(Clone)]
pub enum Did {
    Pass,
    /// An execution_error: node id, class, message, traceback frames (paths relative to the
    /// ComfyUI folder), progress (value, max) of the failing node when it reported any.
    Fail {
        node: &'static str,
        class: &'static str,
        message: String,
        frames: Vec<&'static str>,
        progress: Option<(u64, u64)>,
        inputs: Value,
    },
    ServerLost,
    InFlight,
}

/// One ladder step of a fixture.
pub struct Step {
    pub increment: &'static str,
    pub changes: Vec<Value>,
}

pub fn step(increment: &'static str, changes: Vec<Value>) -> Step {
    Step { increment, changes }
}

pub fn set(node: &str, class: &str, input: &str, from: Value, to: Value) -> Value {
    json!({"node": node, "class_type": class, "action": "set", "input": input, "from": from, "to": to})
}

/// A node a step brings back: the ladder records it as the `bypass` (or `remove`) that the
/// step before it made.
pub fn restore(node: &str, class: &str) -> Value {
    json!({"node": node, "class_type": class, "action": "bypass"})
}

/// A session under construction.
pub struct Fixture {
    pub machine: Machine,
    pub session: SessionFile,
    pub records: Vec<(RunEntry, Option<RunFile>)>,
    pub ui_runs: Vec<String>,
    /// What each later run's `run.json` says about custom-pack classes (`custom_nodes`).
    pub custom_nodes: Option<BTreeMap<String, PackOfClass>>,
    /// Nodes added to every submitted workflow (`workflow.json`), by id.
    pub extra_nodes: Value,
    clock_s: u64,
}

/// The prompt every fixture run submits (small, with a secret-looking API-node input).
pub fn prompt(step: usize) -> Value {
    json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd15/dreamshaper_8.safetensors"}},
        "10": {"class_type": "LoraLoader", "inputs": {"lora_name": "detail-tweaker.safetensors",
               "strength_model": 1.0, "strength_clip": 1.0, "model": ["4", 0], "clip": ["4", 1]}},
        "3": {"class_type": "KSampler", "inputs": {"steps": 20, "seed": step, "model": ["10", 0]}},
        "20": {"class_type": "LoadImage", "inputs": {"image": "/home/alice/Pictures/ref.png"}},
        "30": {"class_type": "GeminiNode", "inputs": {"prompt": "a cat", "api_key": "sk-test-not-a-real-key"}}
    })
}

impl Fixture {
    pub fn new(machine: Machine, name: &str, steps: Vec<Step>) -> Fixture {
        let steps: Vec<StepInfo> = steps
            .into_iter()
            .enumerate()
            .map(|(i, s)| StepInfo {
                index: i,
                increment: s.increment.to_string(),
                file: format!("workflows/{name}/{i:02}-{}.json", s.increment),
                sha256: format!("{:064x}", 0xabc0 + i),
                changes: s
                    .changes
                    .into_iter()
                    .map(|c| serde_json::from_value(c).expect("a ladder change"))
                    .collect(),
            })
            .collect();
        let session = SessionFile {
            schema_version: SESSION_SCHEMA_VERSION,
            session_id: SESSION_ID.into(),
            tool_version: "0.1.0".into(),
            created_at: "2026-11-29T01:00:00Z".into(),
            updated_at: "2026-11-29T01:00:00Z".into(),
            server: machine.server.clone(),
            options: SessionOptions {
                strategy: Strategy::Linear,
                timeout_s: Some(1800),
                ..SessionOptions::default()
            },
            state: SessionState::Running { workflow: 0 },
            workflows: vec![WorkflowJob {
                source: format!("workflows/{name}.json"),
                source_file: None,
                target_sha256: format!("{:064x}", 0xfeed),
                steps,
                ..workflow_job(name)
            }],
            in_flight: None,
            environment: Some(machine.stats.clone()),
            fingerprints: Default::default(),
            drifts: Vec::new(),
            server_moves: Vec::new(),
            preflight_rechecks: Vec::new(),
        };
        Fixture {
            machine,
            session,
            records: vec![],
            ui_runs: vec![],
            custom_nodes: None,
            extra_nodes: json!({}),
            clock_s: 0,
        }
    }

    fn stamp(&mut self, add_s: u64) -> String {
        self.clock_s += add_s;
        let h = 1 + self.clock_s / 3600;
        let m = (self.clock_s / 60) % 60;
        let s = self.clock_s % 60;
        format!("2026-11-29T{h:02}:{m:02}:{s:02}Z")
    }

    /// Records one run of `step` with `role` that ended as `did`, peaking at `peak_mib`.
    pub fn run(
        &mut self,
        step: usize,
        role: RunRole,
        did: Did,
        peak_mib: u64,
        seconds: u64,
    ) -> String {
        let n = self.records.len();
        let id = run_id(step, n);
        let job = &self.session.workflows[0];
        let increment = job.steps[step].increment.clone();
        let started_at = self.stamp(5);
        let finished_at = self.stamp(seconds);
        let dir = run_dir_name(step, &increment, &id);
        let home = self.machine.home.clone();
        let sep = self.machine.sep;
        let path = |rel: &str| format!("{home}{sep}{}", rel.replace('/', &sep.to_string()));
        let (outcome, error, timeline_extra): (Option<Outcome>, Option<RunError>, Vec<NodeTiming>) =
            match &did {
                Did::Pass => (Some(Outcome::Passed), None, vec![]),
                Did::InFlight => (None, None, vec![]),
                Did::ServerLost => (
                    Some(Outcome::ServerLost {
                        detail: "socket closed and 3 connection attempts refused".into(),
                    }),
                    Some(RunError::ServerLost(ServerLostInfo {
                        reason: "socket closed and 3 connection attempts refused".into(),
                        submitted: true,
                        last_node: Some("3".into()),
                    })),
                    vec![timing("3", "KSampler", Some((7, 20)), "running")],
                ),
                Did::Fail {
                    node,
                    class,
                    message,
                    frames,
                    progress,
                    inputs,
                } => {
                    let traceback: Vec<String> = frames
                        .iter()
                        .map(|f| {
                            let (file, rest) = f.split_once('|').unwrap();
                            format!("  File \"{}\", {rest}\n", path(file))
                        })
                        .collect();
                    let e = ExecutionError {
                        prompt_id: id.clone(),
                        node_id: node.to_string(),
                        node_type: class.to_string(),
                        executed: vec!["4".into(), "10".into()],
                        exception_message: message.clone(),
                        exception_type: "torch.OutOfMemoryError".into(),
                        traceback,
                        current_inputs: inputs.as_object().cloned().unwrap_or_default(),
                        current_outputs: json!({}),
                        timestamp: Some(1795956372209),
                    };
                    (
                        Some(Outcome::Failed {
                            node_id: node.to_string(),
                            node_type: class.to_string(),
                            exception_type: e.exception_type.clone(),
                            exception_message: message.lines().next().unwrap_or("").to_string(),
                        }),
                        Some(RunError::ExecutionError(e)),
                        vec![timing(node, class, *progress, "error")],
                    )
                }
            };
        let diagnosis = match &error {
            Some(RunError::ExecutionError(e)) => Some(diagnose::diagnose(&diagnose::Evidence {
                node_id: Some(e.node_id.clone()),
                node_type: Some(e.node_type.clone()),
                exception_type: Some(e.exception_type.clone()),
                exception_message: Some(e.exception_message.clone()),
                traceback: e.traceback.clone(),
                progress: timeline_extra
                    .iter()
                    .filter_map(|t| {
                        t.progress.as_ref().map(|p| diagnose::NodeProgress {
                            node_id: t.node_id.clone(),
                            class_type: t.class_type.clone(),
                            value: p.value as u64,
                            max: p.max as u64,
                        })
                    })
                    .collect(),
                outcome: None,
                cached_nodes: Vec::new(),
            })),
            Some(RunError::ServerLost(_)) => Some(diagnose::diagnose(&diagnose::Evidence {
                outcome: Some(diagnose::RunOutcomeHint::ServerLost),
                ..Default::default()
            })),
            _ => None,
        };
        let total_mib = self.machine.stats.devices[0].vram_total as f64 / MIB as f64;
        let done = !matches!(did, Did::InFlight);
        let summary = done.then(|| RunSummary {
            duration_ms: seconds * 1000,
            vram_peak_mib: Some(peak_mib as f64),
            vram_sample_ms: Some(500),
            vram_total_mib: Some(total_mib),
            vram_baseline_mib: None,
            cold: true,
            last_node: Some("3".into()),
            stage: diagnosis.as_ref().map(|d| d.stage),
            recovered_from_history: false,
            // What the output node wrote (read from the files' headers in a real run); the
            // minimal variant's also shows a size warning.
            delivered: ProductSummary {
                product: matches!(did, Did::Pass).then(|| "1 × PNG 1024×1024".to_string()),
                product_warnings: if matches!(did, Did::Pass) && step == 0 {
                    vec!["SaveImage #9 wrote 1024×1024, the graph asks for 512×512".into()]
                } else {
                    vec![]
                },
                ..ProductSummary::default()
            },
            ..RunSummary::default()
        });
        let entry = RunEntry {
            role,
            dir: dir.clone(),
            workflow_sha256: format!("{:064x}", 0xabc0 + step),
            status: if done {
                RunStatus::Done
            } else {
                RunStatus::InFlight
            },
            started_at: started_at.clone(),
            finished_at: done.then(|| finished_at.clone()),
            outcome: outcome.clone(),
            summary,
            diagnosis,
            ..run_entry(&id, step, &increment)
        };
        let file = done.then(|| {
            let samples: Vec<VramSample> = (0..(seconds * 2).max(1))
                .map(|i| VramSample {
                    t_ms: i * 500,
                    used_bytes: (peak_mib * MIB) * (i + 1) / (seconds * 2).max(1),
                    reserved_bytes: 0,
                })
                .collect();
            let mut timeline = vec![
                timing("4", "CheckpointLoaderSimple", None, "finished"),
                timing("10", "LoraLoader", None, "finished"),
            ];
            if matches!(did, Did::Pass) {
                timeline.push(timing("3", "KSampler", Some((20, 20)), "finished"));
            }
            timeline.extend(timeline_extra);
            RunFile {
                schema_version: SESSION_SCHEMA_VERSION,
                session_id: SESSION_ID.into(),
                workflow: self.session.workflows[0].name.clone(),
                entry: entry.clone(),
                component_hashes: components(),
                node_hashes: Default::default(),
                environment: None,
                custom_nodes: self.custom_nodes.clone(),
                memory_pressure: None,
                record: RunRecord {
                    workflow_sha256: entry.workflow_sha256.clone(),
                    server: self.machine.server.clone(),
                    started_at,
                    finished_at,
                    duration_ms: seconds * 1000,
                    cold: true,
                    outcome: match &outcome {
                        Some(Outcome::Failed { .. }) => OutcomeKind::Failed,
                        Some(Outcome::ServerLost { .. }) => OutcomeKind::ServerLost,
                        _ => OutcomeKind::Passed,
                    },
                    error,
                    timeline,
                    vram: VramReport::from_samples(
                        samples,
                        500,
                        self.machine.stats.devices.first(),
                        0,
                    ),
                    system_stats_before: Some(self.machine.stats.clone()),
                    ..run_record(&id)
                },
            }
        });
        let job = &mut self.session.workflows[0];
        job.runs.push(entry.clone());
        if !done {
            self.session.in_flight = Some(comfy_bisect_core::session::journal::InFlight {
                workflow: 0,
                run_id: id.clone(),
            });
        }
        self.session.updated_at = self.stamp(0);
        self.records.push((entry, file));
        id
    }

    /// Marks run `id` as made at `cap` sampler steps of the workflow's `of` (`--search-steps`).
    pub fn reduced(&mut self, id: &str, cap: u32, of: u32) {
        let reduced = comfy_bisect_core::session::journal::ReducedSteps {
            cap,
            changes: vec![comfy_bisect_core::workflow::Change {
                node: "3".into(),
                class_type: "KSampler".into(),
                action: "set".into(),
                input: Some("steps".into()),
                from: Some(json!(of)),
                to: Some(json!(cap)),
            }],
        };
        for r in self.session.workflows[0]
            .runs
            .iter_mut()
            .chain(self.records.iter_mut().map(|(e, _)| e))
            .filter(|r| r.run_id == id)
        {
            r.reduced = Some(reduced.clone());
        }
    }

    /// Gives run `id` console evidence: its memory events (run.json) and its `server.log`.
    pub fn console(&mut self, id: &str, events: Vec<MemoryEvent>, server_log: &str) {
        let (_, file) = self
            .records
            .iter_mut()
            .find(|(e, _)| e.run_id == id)
            .expect("no such run");
        let record = &mut file.as_mut().expect("a finished run").record;
        record.memory_events = events;
        record.server_log = server_log.to_string();
    }

    /// Writes the journal under `<root>/runs/<SESSION_ID>/` and returns the session folder.
    pub fn write(&self, root: &Path) -> PathBuf {
        let paths = SessionPaths::new(&root.join("runs"), SESSION_ID);
        write_json_atomic(&paths.session_file(), &self.session).unwrap();
        for (entry, file) in &self.records {
            let dir = paths.dir.join(&entry.dir);
            std::fs::create_dir_all(&dir).unwrap();
            let mut p = prompt(entry.step);
            for (id, node) in self.extra_nodes.as_object().into_iter().flatten() {
                p[id] = node.clone();
            }
            if self.machine.sep == '\\' {
                p["20"]["inputs"]["image"] = json!("C:\\Users\\Bob\\Pictures\\ref.png");
            }
            write_json_atomic(&dir.join(RUN_WORKFLOW_FILE), &p).unwrap();
            if self.ui_runs.contains(&entry.run_id) {
                write_json_atomic(
                    &dir.join("workflow.ui.json"),
                    &json!({"nodes": [], "links": []}),
                )
                .unwrap();
            }
            if let Some(file) = file {
                write_json_atomic(&dir.join(RUN_RECORD_FILE), file).unwrap();
                if !file.record.server_log.is_empty() {
                    std::fs::write(dir.join(SERVER_LOG_FILE), &file.record.server_log).unwrap();
                }
            }
        }
        paths.dir
    }

    pub fn verdict(&mut self, v: Verdict) {
        self.session.workflows[0].verdict = Some(v);
        self.session.workflows[0].phase = comfy_bisect_core::session::journal::Phase::Done;
        self.session.state = SessionState::Done;
    }

    pub fn stop(&mut self, reason: StopReason, detail: &str) {
        self.session.state = SessionState::Stopped {
            reason,
            detail: detail.into(),
        };
        self.session.workflows[0].verdict = Some(Verdict::Incomplete {
            reason,
            detail: detail.into(),
        });
    }
}

fn timing(node: &str, class: &str, progress: Option<(u64, u64)>, state: &str) -> NodeTiming {
    NodeTiming {
        node_id: node.into(),
        display_node: None,
        class_type: Some(class.into()),
        cached: false,
        started_ms: Some(100),
        finished_ms: None,
        progress: progress.map(|(value, max)| Progress {
            value: value as f64,
            max: max as f64,
        }),
        state: state.into(),
        output: None,
    }
}

/// The component hashes every fixture run records: two hashed files, one unhashed.
pub fn components() -> Vec<ComponentHash> {
    vec![
        ComponentHash {
            file: "sd15/dreamshaper_8.safetensors".into(),
            folder: "checkpoints".into(),
            node_id: "4".into(),
            class_type: "CheckpointLoaderSimple".into(),
            input: "ckpt_name".into(),
            status: ComponentStatus::Hashed,
            size: Some(2_132_625_894),
            sha256: Some("879db523c30d3b9017143d56705015e15a2cb5628762c11d086fed9538abd7fd".into()),
            autov2: Some("879db523c3".into()),
            reason: None,
            link_target: None,
        },
        ComponentHash {
            file: "detail-tweaker.safetensors".into(),
            folder: "loras".into(),
            node_id: "10".into(),
            class_type: "LoraLoader".into(),
            input: "lora_name".into(),
            status: ComponentStatus::Hashed,
            size: Some(37_861_176),
            sha256: Some("47aaaf0d2945ca937151d61304946dd229b3f072140b85484bc93e38f2a6e2f7".into()),
            autov2: Some("47aaaf0d29".into()),
            reason: None,
            link_target: None,
        },
        ComponentHash {
            file: "4x-UltraSharp.pth".into(),
            folder: "upscale_models".into(),
            node_id: "40".into(),
            class_type: "UpscaleModelLoader".into(),
            input: "model_name".into(),
            status: ComponentStatus::Unhashed,
            size: None,
            sha256: None,
            autov2: None,
            reason: Some("not found under the --models-dir roots (the server may be remote); pass --models-dir".into()),
            link_target: None,
        },
    ]
}

/// A CUDA OOM message in PyTorch's wording.
pub fn cuda_oom(
    requested: &str,
    total: &str,
    free: &str,
    in_use: &str,
    allocated: &str,
    reserved: &str,
) -> String {
    format!(
        "Allocation on device 0 would exceed allowed memory. (out of memory)\nCUDA out of memory. Tried to allocate {requested}. GPU 0 has a total capacity of {total} of which {free} is free. Including non-PyTorch memory, this process has {in_use} memory in use. Of the allocated memory {allocated} is allocated by PyTorch, and {reserved} is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
    )
}

/// Traceback of a LoRA patch failing while the sampler loads the model (stage `load`).
pub fn load_frames() -> Vec<&'static str> {
    vec![
        "execution.py|line 496, in execute\n    output_data, output_ui, has_subgraph, has_pending_tasks = await get_output_data(prompt_id, unique_id, obj, input_data_all, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)",
        "nodes.py|line 1525, in sample\n    return common_ksampler(model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=denoise)",
        "comfy/sample.py|line 45, in sample\n    samples = sampler.sample(noise, positive, negative, cfg=cfg, latent_image=latent_image, start_step=start_step, last_step=last_step, force_full_denoise=force_full_denoise, denoise_mask=noise_mask, sigmas=sigmas, callback=callback, disable_pbar=disable_pbar, seed=seed)",
        "comfy/samplers.py|line 1035, in outer_sample\n    self.inner_model, self.conds, self.loaded_models = comfy.sampler_helpers.prepare_sampling(self.model_patcher, noise.shape, self.conds, self.model_options)",
        "comfy/model_management.py|line 697, in load_models_gpu\n    loaded_model.model_load(lowvram_model_memory, force_patch_weights=force_patch_weights)",
        "comfy/model_patcher.py|line 810, in load\n    self.patch_weight_to_device(key, device_to=device_to)",
        "comfy/lora.py|line 420, in calculate_weight\n    weight += function(strength * comfy.model_management.cast_to_device(diff, weight.device, weight.dtype))",
    ]
}

/// Traceback of the final VAE decode running out of memory (stage `decode`).
pub fn decode_frames() -> Vec<&'static str> {
    vec![
        "execution.py|line 496, in execute\n    output_data, output_ui, has_subgraph, has_pending_tasks = await get_output_data(prompt_id, unique_id, obj, input_data_all)",
        "nodes.py|line 296, in decode\n    images = vae.decode(samples[\"samples\"])",
        "comfy/sd.py|line 775, in decode\n    pixel_samples[x:x+batch_number] = self.process_output(self.first_stage_model.decode(samples).to(self.output_device).float())",
        "comfy/ldm/modules/diffusionmodules/model.py|line 715, in forward\n    h = self.up[i_level].upsample(h)",
    ]
}

/// The seven-increment ladder the main fixture uses.
pub fn video_ladder() -> Vec<Step> {
    vec![
        step("minimal", vec![]),
        step(
            "resolution",
            vec![
                set(
                    "5",
                    "EmptyHunyuanLatentVideo",
                    "width",
                    json!(256),
                    json!(1280),
                ),
                set(
                    "5",
                    "EmptyHunyuanLatentVideo",
                    "height",
                    json!(144),
                    json!(720),
                ),
            ],
        ),
        step(
            "frames",
            vec![set(
                "5",
                "EmptyHunyuanLatentVideo",
                "length",
                json!(1),
                json!(33),
            )],
        ),
        step(
            "steps",
            vec![set("3", "KSampler", "steps", json!(4), json!(20))],
        ),
        step("LoRA", vec![restore("10", "LoraLoader")]),
        step("cache", vec![restore("12", "TeaCache")]),
        step(
            "upscale",
            vec![
                restore("40", "UpscaleModelLoader"),
                restore("41", "ImageUpscaleWithModel"),
            ],
        ),
        step("interpolation", vec![restore("50", "RIFE VFI")]),
    ]
}

/// Failing-run inputs as ComfyUI prints them (with a secret from an API node).
pub fn failing_inputs() -> Value {
    json!({"seed": ["4"], "steps": ["20"], "model": ["<comfy.model_patcher.ModelPatcher object at 0x7f3a>"],
           "api_key": ["sk-live-abcdefghijklmnopqrstuvwxyz"]})
}

/// The four-increment image ladder the smaller fixtures use.
pub fn image_ladder() -> Vec<Step> {
    vec![
        step("minimal", vec![]),
        step(
            "resolution",
            vec![
                set("5", "EmptyLatentImage", "width", json!(512), json!(1024)),
                set("5", "EmptyLatentImage", "height", json!(512), json!(1024)),
            ],
        ),
        step(
            "batch",
            vec![set(
                "5",
                "EmptyLatentImage",
                "batch_size",
                json!(1),
                json!(4),
            )],
        ),
        step(
            "upscale",
            vec![
                restore("40", "UpscaleModelLoader"),
                restore("41", "ImageUpscaleWithModel"),
            ],
        ),
    ]
}

fn fail_load() -> Did {
    Did::Fail {
        node: "3",
        class: "KSampler",
        message: cuda_oom(
            "1.50 GiB",
            "12.00 GiB",
            "1.02 GiB",
            "10.96 GiB",
            "10.21 GiB",
            "512.00 MiB",
        ),
        frames: load_frames(),
        progress: None,
        inputs: failing_inputs(),
    }
}

fn fail_decode() -> Did {
    Did::Fail {
        node: "8",
        class: "VAEDecode",
        message: cuda_oom(
            "2.00 GiB",
            "6.00 GiB",
            "1.20 GiB",
            "4.80 GiB",
            "4.10 GiB",
            "300.00 MiB",
        ),
        frames: decode_frames(),
        progress: None,
        inputs: json!({"samples": ["{'samples': tensor(...)}"], "vae": ["<comfy.sd.VAE object at 0x000001F2>"]}),
    }
}

fn stage_of(f: &Fixture, id: &str) -> Option<comfy_bisect_core::vocab::Stage> {
    f.records
        .iter()
        .find(|(e, _)| e.run_id == id)
        .and_then(|(e, _)| e.summary.as_ref().and_then(|s| s.stage))
}

/// The fixed sessions the golden files are made from, by name.
pub fn scenario(name: &str) -> Fixture {
    match name {
        // Linear search with controls; the input was a UI workflow.
        "first-failure" => {
            let mut f = Fixture::new(linux_box(), "wan-video-lora", video_ladder());
            f.session.options.controls = true;
            // Frame interpolation from a custom pack (its python_module as captured in
            // tests/fixtures/custom-nodes), with a title.
            f.extra_nodes = json!({"40": {"class_type": "RIFE VFI", "_meta": {"title": "RIFE ×2"},
                "inputs": {"ckpt_name": "rife47.pth", "multiplier": 2, "frames": ["3", 0]}}});
            f.custom_nodes = Some(BTreeMap::from([(
                "RIFE VFI".to_string(),
                PackOfClass {
                    pack: "ComfyUI-Frame-Interpolation".into(),
                    version: Some("1.0.7".into()),
                },
            )]));
            f.run(0, RunRole::Minimal, Did::Pass, 2100, 14);
            f.run(7, RunRole::Target, fail_load(), 11800, 22);
            f.run(1, RunRole::Search, Did::Pass, 5200, 31);
            f.run(2, RunRole::Search, Did::Pass, 8900, 64);
            let pass = f.run(3, RunRole::Search, Did::Pass, 9100, 122);
            let fail = f.run(4, RunRole::Search, fail_load(), 11650, 40);
            f.run(5, RunRole::Control, Did::Pass, 2600, 20);
            f.run(6, RunRole::Control, Did::Pass, 3100, 25);
            f.run(7, RunRole::Control, Did::Pass, 2900, 21);
            f.ui_runs = vec![pass.clone(), fail.clone()];
            let minimal = run_id(0, 0);
            f.console(
                &minimal,
                vec![
                    load_event("WanTEModel", true, 1100.25, None),
                    load_event("WAN21", true, 812.5, None),
                    load_event("WanVAE", true, 242.03, None),
                ],
                &console_log(&["got prompt"], &[]),
            );
            f.console(
                &pass,
                vec![
                    load_event("WanTEModel", true, 1100.25, None),
                    load_event("WAN21", true, 7350.0, None),
                    MemoryEvent::ModelUnload {
                        t: None,
                        models: Some(1),
                    },
                    load_event("WanVAE", true, 242.03, None),
                ],
                &console_log(&["got prompt"], &[]),
            );
            f.console(
                &fail,
                vec![
                    load_event("WanTEModel", true, 1100.25, None),
                    load_event("WAN21", false, 9177.97, Some(3390.29)),
                    MemoryEvent::OomUnload { t: None },
                ],
                &failing_console(),
            );
            let stage = stage_of(&f, &fail);
            f.verdict(Verdict::FirstFailure {
                step: 4,
                increment: "LoRA".into(),
                run_id: fail,
                last_pass_step: 3,
                last_pass_run_id: pass,
                stage,
                not_run: vec![],
            });
            f
        }
        // Windows portable build: the minimal variant already fails at the VAE decode.
        "minimal-fails" => {
            let mut f = Fixture::new(windows_box(), "sdxl-batch", image_ladder());
            // The server's node definitions said: no class of the workflow is from a pack.
            f.custom_nodes = Some(BTreeMap::new());
            let fail = f.run(0, RunRole::Minimal, fail_decode(), 5900, 18);
            let stage = stage_of(&f, &fail);
            f.verdict(Verdict::MinimalFails {
                run_id: fail,
                stage,
            });
            f
        }
        "could-not-reproduce" => {
            let mut f = Fixture::new(linux_box(), "sdxl-batch", image_ladder());
            f.run(0, RunRole::Minimal, Did::Pass, 3000, 12);
            let target = f.run(3, RunRole::Target, Did::Pass, 10400, 95);
            f.verdict(Verdict::CouldNotReproduce { run_id: target });
            f
        }
        // --repeat 2: the first failing step passed once in three runs.
        "flaky" => {
            let mut f = Fixture::new(linux_box(), "sdxl-batch", image_ladder());
            f.session.options.repeat = 2;
            f.run(0, RunRole::Minimal, Did::Pass, 3000, 12);
            f.run(3, RunRole::Target, fail_load(), 11700, 30);
            f.run(1, RunRole::Search, Did::Pass, 7000, 40);
            f.run(2, RunRole::Search, fail_load(), 11600, 33);
            f.run(2, RunRole::Repeat, Did::Pass, 11400, 61);
            f.run(2, RunRole::Repeat, fail_load(), 11650, 35);
            f.run(1, RunRole::Repeat, Did::Pass, 7100, 41);
            f.run(1, RunRole::Repeat, Did::Pass, 7050, 40);
            f.verdict(Verdict::Flaky {
                counts: vec![
                    FlakyCount {
                        step: 2,
                        increment: "batch".into(),
                        passed: 1,
                        failed: 2,
                    },
                    FlakyCount {
                        step: 1,
                        increment: "resolution".into(),
                        passed: 3,
                        failed: 0,
                    },
                ],
            });
            f
        }
        // The default search at few steps (4 of 20; the minimal variant at its own steps): the
        // failure is in the load, a stage the step count cannot change, so it stands; the last
        // pass is re-run at full steps.
        "search-steps" => {
            let mut f = Fixture::new(linux_box(), "wan-video-lora", video_ladder());
            f.session.options.search_steps = Some(4);
            let few = |f: &mut Fixture, step, role, did, peak, s| {
                let id = f.run(step, role, did, peak, s);
                f.reduced(&id, 4, 20);
                id
            };
            f.run(0, RunRole::Minimal, Did::Pass, 2100, 14);
            few(&mut f, 7, RunRole::Target, fail_load(), 11800, 20);
            few(&mut f, 1, RunRole::Search, Did::Pass, 5200, 9);
            few(&mut f, 2, RunRole::Search, Did::Pass, 8900, 15);
            few(&mut f, 3, RunRole::Search, Did::Pass, 9100, 24);
            let fail = few(&mut f, 4, RunRole::Search, fail_load(), 11650, 38);
            let pass = f.run(3, RunRole::Search, Did::Pass, 9150, 122);
            let stage = stage_of(&f, &fail);
            f.verdict(Verdict::FirstFailure {
                step: 4,
                increment: "LoRA".into(),
                run_id: fail,
                last_pass_step: 3,
                last_pass_run_id: pass,
                stage,
                not_run: vec![],
            });
            f
        }
        // --deadline reached between runs; the target killed the server.
        "incomplete" => {
            let mut f = Fixture::new(linux_box(), "wan-video-lora", video_ladder());
            f.session.options.deadline = Some("2026-11-29T07:00:00Z".into());
            f.run(0, RunRole::Minimal, Did::Pass, 2100, 14);
            f.run(7, RunRole::Target, Did::ServerLost, 11900, 48);
            f.run(1, RunRole::Search, Did::Pass, 5200, 31);
            f.stop(
                StopReason::Deadline,
                "deadline 2026-11-29T07:00:00Z reached between runs",
            );
            f
        }
        // The tool was killed (kill -9) while step 1 was running: the last report written
        // after the previous run is what the user finds in the morning.
        "killed-mid-run" => {
            let mut f = Fixture::new(linux_box(), "wan-video-lora", video_ladder());
            f.run(0, RunRole::Minimal, Did::Pass, 2100, 14);
            f.run(7, RunRole::Target, fail_load(), 11800, 22);
            f.run(1, RunRole::Search, Did::InFlight, 0, 0);
            f
        }
        other => panic!("no scenario {other}"),
    }
}

/// Every scenario name.
pub const SCENARIOS: &[&str] = &[
    "first-failure",
    "minimal-fails",
    "could-not-reproduce",
    "flaky",
    "incomplete",
    "killed-mid-run",
    "search-steps",
];

/// Replaces the temporary folder and the crate version so output can be compared to goldens.
/// A path under the folder is written from the folder's inside with `/` between its parts, also
/// where the report redacted the user's name in it (`C:\Users\<user>\…\.tmpX\runs\…`) or
/// JSON escaped its backslashes.
pub fn normalize(text: &str, root: &Path) -> String {
    let text = match root.file_name().map(|n| n.to_string_lossy().into_owned()) {
        Some(name) if !name.is_empty() => relative_to(text, &name),
        _ => text.to_string(),
    };
    text.replace(
        &format!("comfy-bisect {}", env!("CARGO_PKG_VERSION")),
        "comfy-bisect VERSION",
    )
    // On Windows the resume hint quotes the redacted folder for cmd.exe (its `<user>` holds
    // characters cmd.exe treats specially); from the folder's inside it needs no quotes.
    .replace("--runs-dir \"runs\"", "--runs-dir runs")
}

/// Every path in `text` that goes through a folder called `name`, from that folder's inside.
fn relative_to(text: &str, name: &str) -> String {
    let ends = |c: char| c.is_whitespace() || "`\"'()<>,;".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(name) {
        let after = &rest[at + name.len()..];
        let sep = after.len() - after.trim_start_matches(['/', '\\']).len();
        if sep == 0 {
            out.push_str(&rest[..at + name.len()]);
            rest = after;
            continue;
        }
        // The path's start: back to the character that opens it (a redacted `<user>` is part
        // of it).
        let mut start = at;
        let mut in_angle = false;
        for (i, c) in rest[..at].char_indices().rev() {
            match c {
                '>' => in_angle = true,
                '<' if in_angle => in_angle = false,
                _ if !in_angle && ends(c) => break,
                _ => {}
            }
            start = i;
        }
        out.push_str(&rest[..start]);
        let inside = &after[sep..];
        let end = inside.find(ends).unwrap_or(inside.len());
        out.push_str(&inside[..end].replace("\\\\", "/").replace('\\', "/"));
        rest = &inside[end..];
    }
    out.push_str(rest);
    out
}

/// A model load as the console parser reports it.
pub fn load_event(class: &str, full: bool, mib: f64, offloaded: Option<f64>) -> MemoryEvent {
    MemoryEvent::ModelLoad {
        t: None,
        class: Some(class.into()),
        figures: LoadFigures {
            full,
            usable_mb: Some(10500.0),
            loaded_mb: mib,
            offloaded_mb: offloaded,
            lowvram_patches: (!full).then_some(0),
        },
    }
}

/// `server.log` text: `lines` with server times, then `tail` lines.
pub fn console_log(lines: &[&str], tail: &[&str]) -> String {
    lines
        .iter()
        .chain(tail)
        .enumerate()
        .map(|(i, l)| format!("2026-11-29T01:{:02}:{:02}.000000 {l}\n", i / 60, i % 60))
        .collect()
}

/// The failing LoRA run's console: the loads, the sampler's progress bar, the OOM.
pub fn failing_console() -> String {
    console_log(
        &[
            "got prompt",
            "Using pytorch attention in VAE",
            "Requested to load WanTEModel",
            "loaded completely 10500.0 1100.25 True",
            "Requested to load WAN21",
            "loaded partially; 9178.35 MB usable, 9177.97 MB loaded, 3390.29 MB offloaded, lowvram patches: 0",
            "  0%|          | 0/20 [00:00<?, ?it/s]",
            "Got an OOM, unloading all loaded models.",
            "!!! Exception during processing !!! Allocation on device 0 would exceed allowed memory. (out of memory)",
            "Traceback (most recent call last):",
            "  File \"/home/alice/ComfyUI/execution.py\", line 496, in execute",
            "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)",
            "Prompt executed in 40.00 seconds",
        ],
        &[],
    )
}

/// The files of a zip (a `report --bundle`), name and text, in the archive's order.
pub fn unzip(path: &std::path::Path) -> Vec<(String, String)> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut file = zip.by_index(i).unwrap();
            let mut text = String::new();
            file.read_to_string(&mut text).unwrap();
            (file.name().unwrap().to_string(), text)
        })
        .collect()
}
