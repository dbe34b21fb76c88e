//! The worker: takes prompts off the queue and plays them out with ComfyUI's message order,
//! the node-output cache, the memory model and the fault switches.

use super::memory::{Plan, Work};
use super::nodes::{defs, evaluate, Eval, Inputs, Val};
use super::oom::{self, TraceContext};
use super::state::{now_ms, CacheEntry, Instance, Out, QueueItem};
use super::Faults;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

pub(crate) async fn worker(inst: Arc<Instance>) {
    loop {
        let next = {
            let mut st = inst.lock();
            st.apply_free_flags();
            st.take_next()
        };
        match next {
            Some(item) => {
                if !run_prompt(&inst, item).await {
                    return; // crashed
                }
                let mut st = inst.lock();
                st.apply_free_flags();
            }
            None => inst.wake.notified().await,
        }
    }
}

/// Cache key per node: class, literal inputs (sorted) and the ancestors' keys by slot. The
/// node id is not part of it.
pub(crate) fn cache_keys(prompt: &Map<String, Value>) -> HashMap<String, String> {
    fn key(
        id: &str,
        prompt: &Map<String, Value>,
        memo: &mut HashMap<String, String>,
        stack: &mut HashSet<String>,
    ) -> String {
        if let Some(k) = memo.get(id) {
            return k.clone();
        }
        let Some(node) = prompt.get(id) else {
            return "missing".into();
        };
        if !stack.insert(id.to_string()) {
            return "cycle".into();
        }
        let mut parts = vec![node["class_type"].as_str().unwrap_or("").to_string()];
        if let Some(inputs) = node["inputs"].as_object() {
            let mut names: Vec<&String> = inputs.keys().collect();
            names.sort();
            for name in names {
                let v = &inputs[name];
                match v.as_array() {
                    Some(a) if a.len() == 2 => {
                        let src = super::validate::py_str(&a[0]);
                        let k = key(&src, prompt, memo, stack);
                        parts.push(format!("{name}=>{k}#{}", a[1]));
                    }
                    _ => parts.push(format!("{name}={v}")),
                }
            }
        }
        stack.remove(id);
        let k = hex::encode(Sha256::digest(parts.join("|").as_bytes()));
        memo.insert(id.to_string(), k.clone());
        k
    }
    let mut memo = HashMap::new();
    let mut stack = HashSet::new();
    for id in prompt.keys() {
        key(id, prompt, &mut memo, &mut stack);
    }
    memo
}

/// ComfyUI's execution list: topological staging with its UX-friendly pick order.
struct ExecList {
    pending: Vec<String>,
    block_count: HashMap<String, usize>,
    blocking: HashMap<String, Vec<String>>,
}

fn links_of(node: &Value) -> Vec<String> {
    node["inputs"]
        .as_object()
        .map(|m| {
            m.values()
                .filter_map(|v| v.as_array().filter(|a| a.len() == 2))
                .map(|a| super::validate::py_str(&a[0]))
                .collect()
        })
        .unwrap_or_default()
}

impl ExecList {
    fn new(prompt: &Map<String, Value>, outputs: &[String], cached: &HashSet<String>) -> Self {
        let mut l = ExecList {
            pending: Vec::new(),
            block_count: HashMap::new(),
            blocking: HashMap::new(),
        };
        for o in outputs {
            let mut stack = vec![o.clone()];
            let mut links = Vec::new();
            while let Some(id) = stack.pop() {
                if l.pending.contains(&id) || !prompt.contains_key(&id) {
                    continue;
                }
                l.pending.push(id.clone());
                l.block_count.entry(id.clone()).or_insert(0);
                l.blocking.entry(id.clone()).or_default();
                for src in links_of(&prompt[&id]) {
                    if !cached.contains(&src) {
                        stack.push(src.clone());
                        links.push((src, id.clone()));
                    }
                }
            }
            for (from, to) in links {
                let b = l.blocking.entry(from).or_default();
                if !b.contains(&to) {
                    b.push(to.clone());
                    *l.block_count.entry(to).or_insert(0) += 1;
                }
            }
        }
        l
    }

    fn next(&self, prompt: &Map<String, Value>) -> Option<String> {
        let d = defs();
        let is_out = |id: &str| d.is_output(prompt[id]["class_type"].as_str().unwrap_or(""));
        let avail: Vec<&String> = self
            .pending
            .iter()
            .filter(|id| self.block_count.get(*id).copied().unwrap_or(0) == 0)
            .collect();
        if avail.is_empty() {
            return None;
        }
        if let Some(id) = avail.iter().find(|id| is_out(id)) {
            return Some((*id).clone());
        }
        let blocks = |id: &str| self.blocking.get(id).cloned().unwrap_or_default();
        if let Some(id) = avail.iter().find(|id| blocks(id).iter().any(|b| is_out(b))) {
            return Some((*id).clone());
        }
        if let Some(id) = avail.iter().find(|id| {
            blocks(id)
                .iter()
                .any(|b| blocks(b).iter().any(|c| is_out(c)))
        }) {
            return Some((*id).clone());
        }
        Some(avail[0].clone())
    }

    fn complete(&mut self, id: &str) {
        self.pending.retain(|p| p != id);
        for to in self.blocking.get(id).cloned().unwrap_or_default() {
            if let Some(c) = self.block_count.get_mut(&to) {
                *c = c.saturating_sub(1);
            }
        }
    }
}

/// One prompt being played.
struct Run<'a> {
    inst: &'a Arc<Instance>,
    item: QueueItem,
    cid: Option<String>,
    faults: Faults,
    /// progress_state snapshot: node → entry, in first-seen order.
    ps: Vec<(String, Value)>,
    messages: Vec<Value>,
    executed: Vec<String>,
    mid_run_fired: bool,
    exec_count: usize,
    expected_exec: usize,
    /// 1-based ordinal of this prompt among all executed ones (for `crash-on`).
    ordinal: u64,
    /// Simulated seconds the prompt has taken so far (what `Prompt executed in` prints).
    sim_seconds: f64,
    /// The `hang-second-run` fault hangs this prompt at its first sampling step.
    hang: bool,
    /// What the 2026 profile's benchmark capture reports (when the prompt opted in): each
    /// executed node's time, each sampling step's time (real ms) and the peak device memory
    /// in use (bytes).
    capture: Capture,
}

/// Per-node and per-step times and the peak device memory of one prompt, for the `benchmark`
/// event of the 2026 profile.
#[derive(Default)]
struct Capture {
    nodes: Vec<(String, String, f64)>,
    steps: Vec<f64>,
    sampler_ms: f64,
    peak_used: u64,
}

enum NodeEnd {
    Done,
    Interrupted,
    Failed,
    Crashed,
}

impl Run<'_> {
    fn pid(&self) -> &str {
        &self.item.prompt_id
    }

    /// Submitter-only message (dropped without a client_id).
    fn to_submitter(&self, t: &str, data: Value) {
        if let Some(cid) = &self.cid {
            self.inst
                .lock()
                .send_to(cid, &json!({"type": t, "data": data}));
        }
    }

    /// To the submitter, broadcast when the prompt has no client_id.
    fn to_submitter_or_all(&self, t: &str, data: Value) {
        let msg = json!({"type": t, "data": data});
        let st = self.inst.lock();
        match &self.cid {
            Some(cid) => st.send_to(cid, &msg),
            None => st.broadcast(&msg),
        }
    }

    fn progress_state(&mut self, node: &str, value: Value, max: Value, state: &str) {
        let entry = json!({
            "value": value, "max": max, "state": state, "node_id": node,
            "prompt_id": self.item.prompt_id, "display_node_id": node,
            "parent_node_id": null, "real_node_id": node
        });
        match self.ps.iter_mut().find(|(k, _)| k == node) {
            Some(slot) => {
                let mut entry = entry;
                if let Some(a) = slot.1.get("activity").filter(|_| state == "running") {
                    entry["activity"] = a.clone();
                }
                slot.1 = entry
            }
            None => self.ps.push((node.to_string(), entry)),
        }
        let nodes: Map<String, Value> = self.ps.iter().cloned().collect();
        let data = json!({"prompt_id": self.item.prompt_id, "nodes": nodes});
        self.to_submitter_or_all("progress_state", data);
    }

    /// Sets or clears what a running node spends its time on (`activity`, 2026 profile) and
    /// sends the progress state when that changed, as `ProgressRegistry.set_activity` does.
    fn set_activity(&mut self, node: &str, activity: Option<&str>) {
        let Some((_, entry)) = self.ps.iter_mut().find(|(k, _)| k == node) else {
            return;
        };
        let Some(e) = entry.as_object_mut() else {
            return;
        };
        if e.get("activity").and_then(Value::as_str) == activity {
            return;
        }
        match activity {
            Some(a) => e.insert("activity".into(), json!(a)),
            None => e.remove("activity"),
        };
        let nodes: Map<String, Value> = self.ps.iter().cloned().collect();
        let data = json!({"prompt_id": self.item.prompt_id, "nodes": nodes});
        self.to_submitter_or_all("progress_state", data);
    }

    fn garbage(&self) {
        if !self.faults.garbage_frames {
            return;
        }
        let st = self.inst.lock();
        let sid = self.cid.as_deref();
        st.send_raw(sid, Out::Text("\u{1}garbage frame: not JSON {".into()));
        st.send_raw(sid, Out::Binary(vec![0, 0, 0, 99, 0xde, 0xad, 0xbe, 0xef]));
    }

    /// The `ws-flood=N` fault: N small frames of other traffic to the submitter.
    fn flood(&self) {
        let n = self.faults.ws_flood;
        if n == 0 {
            return;
        }
        let st = self.inst.lock();
        let sid = self.cid.as_deref();
        let status = st.status_message(None).to_string();
        for i in 0..n {
            let out = match i % 3 {
                0 => Out::Text(status.clone()),
                1 => Out::Text(
                    json!({"type": "progress", "data": {"value": i % 20 + 1, "max": 20,
                        "prompt_id": "5b1c0ffe-0000-4000-8000-000000000000", "node": "3"}})
                    .to_string(),
                ),
                // A PREVIEW_IMAGE frame (event 1, format 1 = JPEG) with a few bytes.
                _ => Out::Binary(vec![0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xd8, 0xff, 0xd9]),
            };
            st.send_raw(sid, out);
        }
    }

    /// Crash / socket-drop faults fire once per run, at the first progress frame or halfway
    /// through the executed nodes, whichever comes first.
    fn mid_run(&mut self) -> bool {
        if self.mid_run_fired {
            return true;
        }
        self.mid_run_fired = true;
        let faults = self.inst.shared.faults();
        if faults.crash_mid_run || faults.crash_on.contains(&self.ordinal) {
            if faults.crash_mid_run {
                self.inst.shared.crash_fired();
            }
            self.inst.shared.crashed();
            self.inst.stop();
            return false;
        }
        if faults.drop_socket {
            if let Some(cid) = &self.cid {
                let mut st = self.inst.lock();
                if let Some(c) = st.clients.remove(cid) {
                    let _ = c.tx.send(Out::Drop);
                }
            }
        }
        true
    }

    /// Takes `sim_seconds` of simulated time (real time × `time_scale`) and counts them.
    async fn sleep(&mut self, sim_seconds: f64) {
        self.sim_seconds += sim_seconds.max(0.0);
        let scale = self.inst.shared.config.time_scale;
        let real = sim_seconds * scale;
        if real <= 0.0 {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_secs_f64(real.min(3600.0))).await;
        }
    }

    /// Whether the submitter negotiated `supports_preview_metadata`.
    fn client_wants_metadata(&self) -> bool {
        self.cid.as_ref().is_some_and(|cid| {
            self.inst
                .lock()
                .clients
                .get(cid)
                .is_some_and(|c| c.preview_metadata)
        })
    }

    fn interrupted(&self) -> bool {
        self.inst.lock().interrupt
    }
}

/// Plays one prompt. Returns false when the server crashed during it.
async fn run_prompt(inst: &Arc<Instance>, item: QueueItem) -> bool {
    let prompt: Map<String, Value> = item.prompt.as_object().cloned().unwrap_or_default();
    let cid = item.client_id();
    let hang = {
        let mut st = inst.lock();
        st.interrupt = false;
        st.started += 1;
        st.started == 2 && inst.shared.faults().hang_second_run
    };
    {
        let mut st = inst.lock();
        st.running = Some(item.clone());
        if let Some(cid) = cid
            .as_deref()
            .filter(|_| inst.shared.faults().socket_after_history)
        {
            st.send_raw(Some(cid), Out::Hold);
        }
        st.broadcast_status();
    }
    let mut run = Run {
        inst,
        cid,
        faults: inst.shared.faults(),
        item,
        ps: Vec::new(),
        messages: Vec::new(),
        executed: Vec::new(),
        mid_run_fired: false,
        exec_count: 0,
        expected_exec: 0,
        ordinal: inst.shared.next_execution(),
        sim_seconds: 0.0,
        hang,
        capture: Capture::default(),
    };
    let pid = run.pid().to_string();
    // Real time, for the benchmark capture's total (it reports wall-clock ms, as upstream).
    let began = std::time::Instant::now();
    let start = json!({"prompt_id": pid, "timestamp": now_ms()});
    run.to_submitter("execution_start", start.clone());
    run.messages.push(json!(["execution_start", start]));
    run.garbage();
    run.flood();

    // Classic cache: keep only keys of this prompt, then see what is cached (`--cache-none`:
    // nothing was kept, every node runs).
    let keys = cache_keys(&prompt);
    let cache_none = inst.shared.config.launch.cache_none;
    let cached: Vec<String> = {
        let mut st = inst.lock();
        let live: HashSet<&String> = keys.values().collect();
        st.cache.retain(|k, _| live.contains(k) && !cache_none);
        prompt
            .keys()
            .filter(|id| st.cache.contains_key(&keys[*id]))
            .cloned()
            .collect()
    };
    let cached_msg = json!({"nodes": cached, "prompt_id": pid, "timestamp": now_ms()});
    run.to_submitter("execution_cached", cached_msg.clone());
    run.messages.push(json!(["execution_cached", cached_msg]));

    let cached_set: HashSet<String> = cached.iter().cloned().collect();
    let mut list = ExecList::new(&prompt, &run.item.outputs, &cached_set);
    run.expected_exec = list
        .pending
        .iter()
        .filter(|id| !cached_set.contains(*id))
        .count();
    // Cached ancestors are not executed, but their values feed the nodes that are.
    let mut values: HashMap<String, Vec<Val>> = {
        let st = inst.lock();
        cached
            .iter()
            .filter_map(|id| {
                st.cache
                    .get(&keys[id])
                    .map(|e| (id.clone(), e.outputs.clone()))
            })
            .collect()
    };
    let mut ui_order: Vec<String> = Vec::new();
    let mut end = NodeEnd::Done;
    while let Some(id) = list.next(&prompt) {
        let key = keys[&id].clone();
        let hit = inst.lock().cache.get(&key).cloned();
        if let Some(entry) = hit {
            // A cached node staged for execution (an output node): replay its UI output.
            if run.cid.is_some() {
                run.to_submitter(
                    "executed",
                    json!({"node": id, "display_node": id, "output": entry.ui, "prompt_id": pid}),
                );
            }
            run.progress_state(&id, json!(1), json!(1), "finished");
            values.insert(id.clone(), entry.outputs.clone());
            if entry.ui.is_some() {
                ui_order.push(id.clone());
            }
            list.complete(&id);
            continue;
        }
        let node_began = std::time::Instant::now();
        match run_node(&mut run, &prompt, &id, &key, &mut values).await {
            NodeEnd::Done => {
                let class = prompt[&id]["class_type"].as_str().unwrap_or("").to_string();
                let ms = node_began.elapsed().as_secs_f64() * 1000.0;
                run.capture.nodes.push((id.clone(), class, ms));
                if inst.lock().cache.get(&key).is_some_and(|e| e.ui.is_some()) {
                    ui_order.push(id.clone());
                }
                list.complete(&id);
            }
            other => {
                end = other;
                break;
            }
        }
    }

    let (status_str, completed, outputs, meta) = match end {
        NodeEnd::Crashed => return false,
        NodeEnd::Done => {
            let data = json!({"prompt_id": pid, "timestamp": now_ms()});
            run.to_submitter("execution_success", data.clone());
            run.messages.push(json!(["execution_success", data]));
            // History lists every node of this prompt with a cached UI output.
            let st = inst.lock();
            let mut outputs = Map::new();
            let mut meta = Map::new();
            let mut ids: Vec<String> = ui_order.clone();
            for id in prompt.keys() {
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            for id in ids {
                if let Some(ui) = st.cache.get(&keys[&id]).and_then(|e| e.ui.clone()) {
                    outputs.insert(id.clone(), ui);
                    meta.insert(
                        id.clone(),
                        json!({"node_id": id, "display_node": id, "parent_node": null, "real_node_id": id}),
                    );
                }
            }
            ("success", true, outputs, meta)
        }
        NodeEnd::Interrupted | NodeEnd::Failed => ("error", false, Map::new(), Map::new()),
    };
    let entry = json!({
        "prompt": run.item.to_json(),
        "outputs": outputs,
        "status": {"status_str": status_str, "completed": completed, "messages": run.messages},
        "meta": meta,
    });
    let slow = run.inst.shared.faults().slow_history_ms;
    {
        let mut st = inst.lock();
        st.running = None;
        st.executing = None;
        st.gpu.empty_cache();
        st.gpu.leaked += run.inst.shared.faults().leak_bytes;
        if cache_none {
            st.cache.clear();
        }
        if slow == 0 {
            st.insert_history(pid.clone(), entry);
        } else {
            let inst2 = inst.clone();
            let pid2 = pid.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(slow)).await;
                inst2.lock().insert_history(pid2, entry);
            });
        }
        st.broadcast_status();
        if inst.shared.prompt_finished(run.ordinal) {
            st.gpu.lowvram = true;
        }
    }
    if benchmark_wanted(&run) {
        let status = if completed { "success" } else { "error" };
        let data = benchmark_event(&run, status, began.elapsed().as_secs_f64() * 1000.0);
        run.to_submitter("benchmark", data);
    }
    run.to_submitter("executing", json!({"node": null, "prompt_id": pid}));
    // The simulated GPU's time, whatever `--time-scale` made of it in real time.
    inst.lock().log(&format!(
        "Prompt executed in {:.2} seconds\n",
        run.sim_seconds
    ));
    true
}

fn current_inputs(node: &Value, values: &HashMap<String, Vec<Val>>) -> Value {
    let mut out = Map::new();
    if let Some(inputs) = node["inputs"].as_object() {
        for (name, v) in inputs {
            let formatted = match v.as_array().filter(|a| a.len() == 2) {
                Some(a) => {
                    let src = super::validate::py_str(&a[0]);
                    let slot = a[1].as_u64().unwrap_or(0) as usize;
                    let salt = src.bytes().fold(slot as u64, |h, b| h * 31 + b as u64);
                    let val = values
                        .get(&src)
                        .and_then(|o| o.get(slot))
                        .cloned()
                        .unwrap_or(Val::Other);
                    Value::String(val.python_repr(salt))
                }
                None => v.clone(),
            };
            out.insert(name.clone(), json!([formatted]));
        }
    }
    Value::Object(out)
}

async fn run_node(
    run: &mut Run<'_>,
    prompt: &Map<String, Value>,
    id: &str,
    key: &str,
    values: &mut HashMap<String, Vec<Val>>,
) -> NodeEnd {
    let inst = run.inst;
    let pid = run.pid().to_string();
    let node = &prompt[id];
    let class = node["class_type"].as_str().unwrap_or("").to_string();
    run.progress_state(id, json!(0.0), json!(1.0), "running");
    inst.lock().executing = Some((run.cid.clone(), id.to_string()));
    run.to_submitter(
        "executing",
        json!({"node": id, "display_node": id, "prompt_id": pid}),
    );
    run.garbage();
    run.exec_count += 1;
    if run.exec_count >= (run.expected_exec / 2).max(1) && !run.mid_run() {
        return NodeEnd::Crashed;
    }
    if run.interrupted() {
        return interrupted(run, id, &class);
    }

    // Inputs: literals and the values of linked nodes (executed now or cached).
    let mut lits = Map::new();
    let mut links = HashMap::new();
    if let Some(inputs) = node["inputs"].as_object() {
        for (name, v) in inputs {
            match v.as_array().filter(|a| a.len() == 2) {
                Some(a) => {
                    let src = super::validate::py_str(&a[0]);
                    let slot = a[1].as_u64().unwrap_or(0) as usize;
                    if let Some(val) = values.get(&src).and_then(|o| o.get(slot)) {
                        links.insert(name.clone(), val.clone());
                    }
                }
                None => {
                    lits.insert(name.clone(), v.clone());
                }
            }
        }
    }
    let Eval { outputs, work, ctx } = evaluate(&Inputs {
        class: &class,
        lits: &lits,
        links: &links,
    });
    let previews = inst.shared.config.launch.previews(
        run.item
            .extra_data
            .get("preview_method")
            .and_then(Value::as_str),
    );
    let plan: Plan = {
        let mut st = inst.lock();
        st.gpu.step_growth = inst.shared.faults().step_growth_bytes;
        st.gpu.previews = previews;
        let plan = st.gpu.plan(&work);
        match run.faults.plant.as_ref().filter(|p| p.fires(prompt, &work)) {
            Some(p) => st.gpu.planted(plan, p.stage),
            None => plan,
        }
    };
    for note in &plan.notes {
        tracing::info!(node = id, "{note}");
    }
    {
        let mut st = inst.lock();
        for line in &plan.console {
            st.log(&format!("{line}\n"));
        }
    }

    {
        let st = inst.lock();
        let used = st.gpu.total.saturating_sub(st.gpu.budget()) + plan.peak_allocated;
        run.capture.peak_used = run.capture.peak_used.max(used);
    }
    let loads = run.inst.shared.config.profile == super::Profile::Y2026
        && plan
            .console
            .iter()
            .any(|l| l.starts_with("Requested to load"));
    if loads {
        run.set_activity(id, Some(super::profile::ACTIVITY_LOADING));
    }
    run.sleep(plan.setup_seconds).await;
    if loads {
        run.set_activity(id, None);
    }
    let steps = plan.steps;
    let sampling_began = std::time::Instant::now();
    let mut step_began = sampling_began;
    let stride = steps.div_ceil(1000).max(1);
    let fail_at = plan.oom.as_ref().map(|o| o.after_steps);
    let ws_images = class == "SaveImageWebsocket";
    let bars = matches!(work, Work::Sample { .. }) && steps > 0;
    if bars {
        inst.lock().log(&tqdm(0, steps));
    }
    if steps > 0 {
        for k in 1..=steps {
            if fail_at == Some(k - 1) {
                break;
            }
            let busy = run.inst.shared.faults().busy_host;
            let outside = if busy > 1 && 2 * k > steps {
                busy as f64
            } else {
                1.0
            };
            run.sleep(plan.step_seconds * outside).await;
            if bars {
                run.capture
                    .steps
                    .push(step_began.elapsed().as_secs_f64() * 1000.0);
                step_began = std::time::Instant::now();
            }
            if run.interrupted() {
                return interrupted(run, id, &class);
            }
            if k % stride == 0 || k == steps {
                if bars {
                    inst.lock().log(&tqdm(k, steps));
                }
                run.progress_state(id, json!(k), json!(steps), "running");
                let preview = previews && matches!(work, Work::Sample { .. });
                let meta = preview && run.client_wants_metadata();
                if meta {
                    send_preview(run, id, true);
                }
                run.to_submitter_or_all(
                    "progress",
                    json!({"value": k, "max": steps, "prompt_id": pid, "node": id}),
                );
                if preview && !meta {
                    send_preview(run, id, false);
                }
                if !run.mid_run() {
                    return NodeEnd::Crashed;
                }
                if bars && std::mem::take(&mut run.hang) {
                    if let Some(end) = hang(run, id, &class).await {
                        return end;
                    }
                }
                if bars && run.faults.aimdo_error {
                    return aimdo_fault(run, prompt, id, &class, values);
                }
            }
        }
    }
    if bars {
        inst.lock().log("\n");
        run.capture.sampler_ms += sampling_began.elapsed().as_secs_f64() * 1000.0;
    }
    if let Some(oom) = &plan.oom {
        inst.lock().gpu.unload_all();
        let trace_ctx = TraceContext {
            class_type: &class,
            family: ctx.family,
            sampler_name: &ctx.sampler_name,
            step_cache: ctx.step_cache.as_deref(),
            video: ctx.video,
            wrapper: ctx.wrapper,
        };
        let mut executed = run.executed.clone();
        executed.reverse();
        let current_outputs: Vec<&String> = prompt.keys().collect();
        let hostile = inst.shared.faults().hostile_text.unwrap_or_default();
        let data = json!({
            "prompt_id": pid,
            "node_id": id,
            "node_type": format!("{class}{hostile}"),
            "executed": executed,
            "exception_message": format!("{hostile}{}", oom::exception_message(oom, inst.shared.config.allocator)),
            "exception_type": oom::OOM_EXCEPTION_TYPE,
            "traceback": oom::traceback(oom, &trace_ctx),
            "current_inputs": current_inputs(node, values),
            "current_outputs": current_outputs,
            "timestamp": now_ms(),
        });
        tracing::info!(node = id, stage = oom.stage.as_str(), "simulated OOM");
        {
            // The console as in ws_logs_oom_mid_sampling_emulated: the message, the traceback
            // as one write, then ComfyUI's OOM handling.
            let mut st = inst.lock();
            let message = data["exception_message"].as_str().unwrap_or("").to_string();
            st.log(&format!(
                "!!! Exception during processing !!! {}\n",
                message.trim_end()
            ));
            let frames: Vec<&str> = data["traceback"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            st.log(&format!(
                "Traceback (most recent call last):\n{}{}: {}\n",
                frames.concat(),
                oom::OOM_EXCEPTION_TYPE,
                message.trim_end()
            ));
            st.log("Got an OOM, unloading all loaded models.\n");
        }
        run.to_submitter("execution_error", data.clone());
        run.messages.push(json!(["execution_error", data]));
        return NodeEnd::Failed;
    }

    // Output nodes: UI output and websocket images. The missing-output fault makes a node of
    // that class (or the node with that id) run and produce nothing at all.
    let silent = run.faults.silences(id, &class);
    let ui = if silent {
        None
    } else {
        output_ui(run, &class, &lits, ctx.images.max(1)).map(|mut ui| {
            if run.inst.shared.config.profile == super::Profile::Y2026 {
                super::profile::add_asset_ids(&mut ui);
            }
            ui
        })
    };
    // The files' sizes and frames, for the containers `/view` serves: a still per image, or
    // every image as a frame of one animated/video file (SaveVideo's images come through
    // CreateVideo's VIDEO). The short-video fault drops frames from the latter.
    let image = links
        .get("images")
        .or_else(|| links.get("video"))
        .or_else(|| links.get("mask"))
        .and_then(|v| match v {
            Val::Image(img) => Some(*img),
            _ => None,
        });
    if let (Some(ui), Some(img)) = (&ui, image) {
        let look = if run.faults.nan_decode {
            super::media::Look::Black
        } else if run.faults.flat_product {
            super::media::Look::Flat
        } else {
            super::media::Look::Picture
        };
        let mut st = inst.lock();
        if run.faults.nan_decode {
            // numpy's warning when the saver casts NaN pixels to uint8 (`nodes.py`, SaveImage).
            st.log(&format!(
                "{}/nodes.py:1611: RuntimeWarning: invalid value encountered in cast\n  img = \
                 Image.fromarray(np.clip(i, 0, 255).astype(np.uint8))\n",
                super::oom::ROOT
            ));
        }
        let animated = ui.get("animated").is_some() || ui.get("gifs").is_some();
        let frames = if animated {
            img.count.saturating_sub(run.faults.short_video).max(1)
        } else {
            1
        };
        for key in ["images", "gifs"] {
            for f in ui[key].as_array().into_iter().flatten() {
                let path = format!(
                    "{}/{}/{}",
                    f["type"].as_str().unwrap_or("output"),
                    f["subfolder"].as_str().unwrap_or(""),
                    f["filename"].as_str().unwrap_or("")
                );
                let file = super::media::SimFile {
                    width: img.width,
                    height: img.height,
                    frames,
                    animated,
                    look,
                };
                st.files.insert(path, file);
            }
        }
    }
    if ws_images {
        send_ws_images(run, id, ctx.images.max(1));
    }
    inst.lock().gpu.finish_node();
    if let Some(ui) = &ui {
        run.to_submitter(
            "executed",
            json!({"node": id, "display_node": id, "output": ui, "prompt_id": pid}),
        );
    }
    if steps > 0 {
        run.progress_state(id, json!(steps), json!(steps), "finished");
    } else if ws_images {
        let n = ctx.images.max(1);
        run.progress_state(id, json!(n), json!(n), "finished");
    } else {
        run.progress_state(id, json!(1.0), json!(1.0), "finished");
    }
    if !host_ram_fits(run, &outputs).await {
        return NodeEnd::Crashed;
    }
    run.executed.push(id.to_string());
    values.insert(id.to_string(), outputs.clone());
    inst.lock()
        .cache
        .insert(key.to_string(), CacheEntry { outputs, ui });
    NodeEnd::Done
}

/// Whether a node's IMAGE outputs fit in the simulated host RAM. When they do not, the machine
/// runs out of RAM and the kernel's OOM killer ends the server, as on a real machine: the RAM
/// shows as full on `/system_stats` until one request has seen it (a real server thrashes
/// before it is killed; bounded by [`OOM_KILL_WAIT`]), then the server dies without a word.
async fn host_ram_fits(run: &mut Run<'_>, outputs: &[Val]) -> bool {
    let held: u64 = outputs
        .iter()
        .map(|v| match v {
            Val::Image(i) => i.bytes(),
            _ => 0,
        })
        .sum();
    let seen = {
        let mut st = run.inst.lock();
        if st.host_ram_used() + held <= run.inst.shared.config.ram_bytes {
            return true;
        }
        st.ram_exhausted = true;
        st.stats_served
    };
    tracing::info!("simulated host RAM exhausted: the OOM killer ends the server");
    let start = std::time::Instant::now();
    while run.inst.lock().stats_served == seen && start.elapsed() < OOM_KILL_WAIT {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.inst.stop();
    false
}

/// Longest real time the simulated server thrashes with full RAM before it is killed.
const OOM_KILL_WAIT: Duration = Duration::from_secs(30);

/// Whether the prompt gets a `benchmark` event: the 2026 profile (ComfyUI 0.38 has the
/// in-core capture, `comfy/benchmark/`) and a truthy `extra_data.benchmark`.
fn benchmark_wanted(run: &Run<'_>) -> bool {
    run.inst.shared.config.profile == super::Profile::Y2026
        && match run.item.extra_data.get("benchmark") {
            Some(Value::Bool(b)) => *b,
            Some(Value::Object(o)) => !o.is_empty(),
            Some(Value::Null) | None => false,
            Some(_) => true,
        }
}

/// The capture's record (`capture_schema_version` 3, the fields comfy-bisect reads and their
/// neighbours; the device snapshot, series and summaries null or empty).
fn benchmark_event(run: &Run<'_>, status: &str, total_ms: f64) -> Value {
    let mib = |b: u64| (b as f64 / (1u64 << 20) as f64).round();
    let (ram_used, total_vram) = {
        let st = run.inst.lock();
        (st.host_ram_used(), st.gpu.total)
    };
    let c = &run.capture;
    json!({
        "type": "benchmark",
        "capture_schema_version": 3,
        "collector_id": "comfyui-core",
        "prompt_id": run.pid(),
        "timestamp": now_ms(),
        "run": {"status": status, "image_count": null, "batch_size": null},
        "workflow": {},
        "device": {"backend": "cuda", "total_vram_mb": mib(total_vram), "baseline": null},
        "durations": {
            "total_run_ms": total_ms,
            "sampler_ms": c.sampler_ms,
            "node_total_ms": c.nodes.iter().map(|n| n.2).sum::<f64>(),
            "model_load_ms": null
        },
        "nodes": c.nodes.iter().map(|(id, class, ms)| json!({"node_id": id, "class_type": class, "elapsed_ms": ms})).collect::<Vec<_>>(),
        "sampling": {"step_count": c.steps.len(), "step_durations_ms": c.steps},
        "resources": {
            "sample_interval_ms": 500,
            "series": [],
            "peak": {"vram_used_mb": mib(c.peak_used), "ram_used_mb": mib(ram_used)}
        },
        "summary": {"energy_wh_per_image": null, "sec_per_image": null, "throttled": null}
    })
}

/// The `hang-second-run` fault: no more progress, node change or console line until an
/// interrupt (unless it is ignored) or the server stops. None never comes back: the caller
/// returns what this returns.
async fn hang(run: &mut Run<'_>, id: &str, class: &str) -> Option<NodeEnd> {
    tracing::info!(node = id, "simulated hang");
    let mut stopped = run.inst.stop_signal();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = stopped.changed() => {}
        }
        if run.inst.is_stopped() {
            return Some(NodeEnd::Crashed);
        }
        if run.interrupted() && !run.faults.hang_ignores_interrupt {
            return Some(interrupted(run, id, class));
        }
    }
}

/// The `aimdo-error` fault: comfy-aimdo's console line, then the node's `RuntimeError`.
fn aimdo_fault(
    run: &mut Run<'_>,
    prompt: &Map<String, Value>,
    id: &str,
    class: &str,
    values: &HashMap<String, Vec<Val>>,
) -> NodeEnd {
    let mut executed = run.executed.clone();
    executed.reverse();
    let traceback = oom::aimdo_traceback(class);
    let data = json!({
        "prompt_id": run.pid(),
        "node_id": id,
        "node_type": class,
        "executed": executed,
        "exception_message": oom::AIMDO_MESSAGE,
        "exception_type": oom::AIMDO_EXCEPTION_TYPE,
        "traceback": traceback,
        "current_inputs": current_inputs(&prompt[id], values),
        "current_outputs": prompt.keys().collect::<Vec<_>>(),
        "timestamp": now_ms(),
    });
    {
        let mut st = run.inst.lock();
        st.log(&format!("\n{}\n", oom::AIMDO_CONSOLE_LINE));
        st.log(&format!(
            "!!! Exception during processing !!! {}\n",
            oom::AIMDO_MESSAGE
        ));
        st.log(&format!(
            "Traceback (most recent call last):\n{}{}: {}\n",
            traceback.concat(),
            oom::AIMDO_EXCEPTION_TYPE,
            oom::AIMDO_MESSAGE
        ));
    }
    run.to_submitter("execution_error", data.clone());
    run.messages.push(json!(["execution_error", data]));
    NodeEnd::Failed
}

fn interrupted(run: &mut Run<'_>, id: &str, class: &str) -> NodeEnd {
    let mut executed = run.executed.clone();
    executed.reverse();
    let data = json!({
        "prompt_id": run.pid(), "node_id": id, "node_type": class,
        "executed": executed, "timestamp": now_ms()
    });
    run.to_submitter_or_all("execution_interrupted", data.clone());
    run.messages.push(json!(["execution_interrupted", data]));
    NodeEnd::Interrupted
}

/// A tqdm bar as ComfyUI's sampler prints it (`\r 50%|█████     | 1/2 [00:05<00:05,  5.03s/it]`).
fn tqdm(k: u32, n: u32) -> String {
    let pct = (k as u64 * 100).checked_div(n as u64).unwrap_or(0);
    let filled = (pct / 10) as usize;
    let bar = format!("{}{}", "\u{2588}".repeat(filled), " ".repeat(10 - filled));
    if k == 0 {
        format!("\r{pct:>3}%|{bar}| {k}/{n} [00:00<?, ?it/s]")
    } else {
        format!("\r{pct:>3}%|{bar}| {k}/{n} [00:01<00:01,  1.00s/it]")
    }
}

/// A 1×1 PNG for websocket image frames.
const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A minimal JPEG (SOI, APP0 "JFIF", EOI) standing in for a sampler preview.
const TINY_JPEG: &[u8] = &[
    0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00, 0x01, 0x01, 0x00, 0x00, 0x01,
    0x00, 0x01, 0x00, 0x00, 0xff, 0xd9,
];

/// A sampler preview frame: type 4 with metadata (sent before `progress`) or legacy type 1
/// with format 1 = JPEG (sent after it), as in the `ws_sd15_previews_*` captures.
fn send_preview(run: &Run<'_>, id: &str, meta: bool) {
    let frame = if meta {
        let m = json!({"node_id": id, "prompt_id": run.pid(), "display_node_id": id,
            "parent_node_id": null, "real_node_id": id, "image_type": "image/jpeg"})
        .to_string();
        let mut b = vec![0, 0, 0, 4];
        b.extend((m.len() as u32).to_be_bytes());
        b.extend(m.as_bytes());
        b.extend(TINY_JPEG);
        b
    } else {
        let mut b = vec![0, 0, 0, 1, 0, 0, 0, 1];
        b.extend(TINY_JPEG);
        b
    };
    run.inst
        .lock()
        .send_raw(run.cid.as_deref(), Out::Binary(frame));
}

fn send_ws_images(run: &mut Run<'_>, id: &str, n: u64) {
    let pid = run.pid().to_string();
    let meta = run.client_wants_metadata();
    for i in 0..n {
        run.progress_state(id, json!(i), json!(n), "running");
        let frame = if meta {
            let m = json!({"node_id": id, "prompt_id": pid, "display_node_id": id,
                "parent_node_id": null, "real_node_id": id, "image_type": "image/png"})
            .to_string();
            let mut b = vec![0, 0, 0, 4];
            b.extend((m.len() as u32).to_be_bytes());
            b.extend(m.as_bytes());
            b.extend(TINY_PNG);
            b
        } else {
            let mut b = vec![0, 0, 0, 1, 0, 0, 0, 2];
            b.extend(TINY_PNG);
            b
        };
        let sid = run.cid.clone();
        if meta {
            run.inst
                .lock()
                .send_raw(sid.as_deref(), Out::Binary(frame.clone()));
        }
        run.to_submitter_or_all(
            "progress",
            json!({"value": i, "max": n, "prompt_id": pid, "node": id}),
        );
        if !meta {
            run.inst.lock().send_raw(sid.as_deref(), Out::Binary(frame));
        }
    }
}

fn file_entry(filename: String, subfolder: &str, kind: &str) -> Value {
    json!({"filename": filename, "subfolder": subfolder, "type": kind})
}

fn output_ui(
    run: &mut Run<'_>,
    class: &str,
    lits: &Map<String, Value>,
    images: u64,
) -> Option<Value> {
    let prefix_raw = lits
        .get("filename_prefix")
        .map(super::validate::py_str)
        .unwrap_or_else(|| "ComfyUI".to_string());
    let (subfolder, prefix) = match prefix_raw.rsplit_once('/') {
        Some((d, f)) => (d.to_string(), f.to_string()),
        None => (String::new(), prefix_raw.clone()),
    };
    let mut st = run.inst.lock();
    let saved = |st: &mut super::state::State, ext: &str, n: u64| -> Vec<Value> {
        (0..n)
            .map(|_| {
                let c = st.next_counter(&prefix_raw);
                file_entry(format!("{prefix}_{c:05}_.{ext}"), &subfolder, "output")
            })
            .collect()
    };
    Some(match class {
        "SaveImage" | "Image Save" | "easy imageSave" | "SaveImageKJ" => {
            json!({"images": saved(&mut st, "png", images)})
        }
        "PreviewImage" | "MaskPreview" | "easy preview" | "Image Comparer (rgthree)" => {
            let tp = st.temp_prefix.clone();
            let files: Vec<Value> = (0..images)
                .map(|_| {
                    let c = st.next_counter(&tp);
                    file_entry(format!("{tp}_{c:05}_.png"), "", "temp")
                })
                .collect();
            json!({"images": files})
        }
        // ComfyUI flags a WebP animated when it got more than one image (history_save_animated_*),
        // an APNG always.
        "SaveAnimatedWEBP" => {
            json!({"images": saved(&mut st, "webp", 1), "animated": [images != 1]})
        }
        "SaveAnimatedPNG" => json!({"images": saved(&mut st, "png", 1), "animated": [true]}),
        "SaveVideo" => json!({"images": saved(&mut st, "mp4", 1), "animated": [true]}),
        "SaveWEBM" => json!({"images": saved(&mut st, "webm", 1), "animated": [true]}),
        "SaveLatent" => json!({"latents": saved(&mut st, "latent", 1)}),
        "VHS_VideoCombine" => {
            let c = st.next_counter(&prefix_raw);
            let save = lits
                .get("save_output")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let format = lits
                .get("format")
                .and_then(Value::as_str)
                .unwrap_or("video/h264-mp4");
            let ext = if format.contains("webm") {
                "webm"
            } else if format.contains("gif") {
                "gif"
            } else if format == "image/webp" {
                "webp"
            } else {
                "mp4"
            };
            let kind = if save { "output" } else { "temp" };
            let name = format!("{prefix}_{c:05}.{ext}");
            let fullpath = if subfolder.is_empty() {
                format!("{}/{kind}/{name}", oom::ROOT)
            } else {
                format!("{}/{kind}/{subfolder}/{name}", oom::ROOT)
            };
            json!({"gifs": [{
                "filename": name, "subfolder": subfolder, "type": kind, "format": format,
                "frame_rate": lits.get("frame_rate").cloned().unwrap_or(json!(8.0)),
                "workflow": format!("{prefix}_{c:05}.png"), "fullpath": fullpath
            }]})
        }
        "PreviewAny" => json!({"text": ["None"]}),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn cache_keys_ignore_ids_and_meta() {
        let a = prompt(json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64}, "_meta": {"title": "a"}},
            "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}}
        }));
        let b = prompt(json!({
            "7": {"class_type": "EmptyImage", "inputs": {"height": 64, "width": 64}},
            "9": {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": "x"}}
        }));
        let (ka, kb) = (cache_keys(&a), cache_keys(&b));
        assert_eq!(ka["1"], kb["7"]);
        assert_eq!(ka["2"], kb["9"]);
        let c = prompt(json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 65, "height": 64}},
            "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}}
        }));
        let kc = cache_keys(&c);
        assert_ne!(ka["1"], kc["1"]);
        assert_ne!(ka["2"], kc["2"], "a changed ancestor changes the key");
    }

    #[test]
    fn execution_order_matches_the_captured_runs() {
        // ws_core_success: 1 → 4 (PreviewImage) → 2 → 3.
        let p = prompt(json!({
            "1": {"class_type": "EmptyImage", "inputs": {}},
            "2": {"class_type": "ImageScale", "inputs": {"image": ["1", 0]}},
            "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0]}},
            "4": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}}
        }));
        let mut l = ExecList::new(&p, &["3".into(), "4".into()], &HashSet::new());
        let mut order = Vec::new();
        while let Some(id) = l.next(&p) {
            l.complete(&id);
            order.push(id);
        }
        assert_eq!(order, ["1", "4", "2", "3"]);
        // Partially cached (ws_core_cached second run): 4 (cached output) → 2 → 3.
        let cached: HashSet<String> = ["1".to_string(), "4".to_string()].into();
        let mut l = ExecList::new(&p, &["3".into(), "4".into()], &cached);
        let mut order = Vec::new();
        while let Some(id) = l.next(&p) {
            l.complete(&id);
            order.push(id);
        }
        assert_eq!(order, ["4", "2", "3"]);
    }
}
