//! Which ComfyUI the simulator imitates. [`Profile::V0364`] (the default) is the 0.3.64 of
//! `tests/fixtures/comfyui/`; [`Profile::Y2026`] is a late-2026 server: the 0.8.0 captures of
//! `tests/fixtures/comfyui-0.8.0/` (`system.os` = `sys.platform`, the jobs API, the new
//! `/features`) plus what the upstream source at 0.38 adds (a client `prompt_id` must be a
//! canonical lowercase UUID, `POST /api/jobs/{id}/cancel`, `comfy_package_versions`,
//! `deploy_environment`, per-run asset ids on output files, the jobs list `GET /api/jobs`,
//! a `progress_state` entry's `activity`, and the built-in node replacements that rewrite a
//! prompt before it runs). This module owns the 2026 answers; `server.rs` and `exec.rs` call
//! them when the profile asks.

use super::http::{Request, Response};
use super::state::Instance;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The server generation the simulator answers as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Profile {
    /// ComfyUI 0.3.64 (October 2025): no jobs API, `system.os` = `posix`.
    #[default]
    V0364,
    /// A late-2026 ComfyUI (0.8.0 captures + 0.38 source).
    Y2026,
}

impl Profile {
    /// Parses `simulate --profile` values.
    pub fn parse(s: &str) -> Result<Profile, String> {
        match s {
            "0.3.64" | "default" => Ok(Profile::V0364),
            "2026" => Ok(Profile::Y2026),
            other => Err(format!(
                "unknown simulator profile '{other}': use 0.3.64 (the default) or 2026"
            )),
        }
    }

    /// The `comfyui_version` it reports.
    pub fn comfyui_version(self) -> &'static str {
        match self {
            Profile::V0364 => "0.3.64",
            Profile::Y2026 => VERSION_2026,
        }
    }
}

/// The version the 2026 profile reports (the upstream source it follows is 0.38.x).
pub const VERSION_2026: &str = "0.38.0";

/// `/system_stats` of the 2026 profile: `os` is `sys.platform`, and `system` gains
/// `comfy_package_versions` (every comfy* package of requirements.txt, installed and required)
/// and `deploy_environment` (`local-git` without a `.comfy_environment` file).
pub(crate) fn adjust_system_stats(stats: &mut Value) {
    let system = &mut stats["system"];
    system["os"] = json!("linux");
    system["comfyui_version"] = json!(VERSION_2026);
    system["required_frontend_version"] = json!("1.53.6");
    system["comfy_package_versions"] = json!([
        {"name": "comfyui-frontend-package", "installed": "1.53.6", "required": "1.53.6"},
        {"name": "comfy-kitchen", "installed": "0.2.36", "required": "0.2.36"},
        {"name": "comfy-aimdo", "installed": "0.5.5", "required": "0.5.5"}
    ]);
    system["deploy_environment"] = json!("local-git");
}

/// `/features` of the 2026 profile (`comfy_api/feature_flags.py`; the 0.8.0 capture has the
/// `extension` key already).
pub(crate) fn features() -> Value {
    json!({
        "supports_preview_metadata": true,
        "supports_model_type_tags": true,
        "max_upload_size": 104857600,
        "extension": {"manager": {"supports_v4": true}},
        "node_replacements": true,
        "assets": true
    })
}

/// Whether `s` is what `validate_job_id` accepts: a canonical lowercase hyphenated UUID.
fn canonical_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok_and(|u| u.hyphenated().to_string() == s)
}

/// The 400 a late server gives a client `prompt_id` that is not a canonical UUID; `None` when
/// the id is fine (or absent/null: the server mints one).
pub(crate) fn reject_prompt_id(id: Option<&Value>) -> Option<Response> {
    let ok = match id {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => canonical_uuid(s),
        Some(_) => false,
    };
    (!ok).then(|| {
        Response::json(
            400,
            &json!({"error": {
                "type": "invalid_prompt_id",
                "message": "prompt_id must be a valid UUID",
                "details": "prompt_id must be a UUID string in canonical lowercase hyphenated form; omit it to let the server generate one",
                "extra_info": {}
            }, "node_errors": {}}),
        )
    })
}

/// Gives every file of an output node's UI a per-run asset id (`id`) and `preview_id`.
pub(crate) fn add_asset_ids(ui: &mut Value) {
    let Some(keys) = ui.as_object_mut() else {
        return;
    };
    for list in keys.values_mut() {
        for file in list.as_array_mut().into_iter().flatten() {
            if let Some(f) = file.as_object_mut().filter(|f| f.contains_key("filename")) {
                f.insert("id".into(), json!(uuid::Uuid::new_v4().to_string()));
                f.insert("preview_id".into(), Value::Null);
            }
        }
    }
}

/// The jobs API routes: `GET /api/jobs` (the list), `GET /api/jobs/{id}` and `POST
/// /api/jobs/{id}/cancel`. `None` for other paths.
pub(crate) fn jobs_route(inst: &Arc<Instance>, req: &Request) -> Option<Response> {
    let method = req.method.as_str();
    if req.path == "/api/jobs" {
        return Some(if method == "GET" {
            jobs_list(inst, req)
        } else {
            Response::method_not_allowed()
        });
    }
    let rest = req.path.strip_prefix("/api/jobs/")?;
    if let Some(id) = rest.strip_suffix("/cancel") {
        return Some(if method == "POST" {
            cancel(inst, id)
        } else {
            Response::method_not_allowed()
        });
    }
    if rest.contains('/') {
        return None;
    }
    Some(if method == "GET" {
        job(inst, rest)
    } else {
        Response::method_not_allowed()
    })
}

/// The statuses `GET /api/jobs?status=` accepts (`JobStatus.ALL`; `cancelled` from 0.38).
const JOB_STATUSES: [&str; 5] = ["pending", "in_progress", "completed", "failed", "cancelled"];

/// `GET /api/jobs` as `server.py` `get_jobs` and `comfy_execution/jobs.py` `get_all_jobs`
/// serve it: running, then pending, then history items, filtered by `status` (comma list)
/// and `workflow_id`, sorted by `sort_by` (`created_at`, `execution_duration`) in
/// `sort_order` (`desc` by default), then `offset` / `limit`; the answer is `{"jobs": [...],
/// "pagination": {"offset", "limit", "total", "has_more"}}`. A list item is the job without
/// `outputs`, `execution_status` and `workflow`. Bad parameters get a 400 `{"error": …}`.
fn jobs_list(inst: &Arc<Instance>, req: &Request) -> Response {
    let bad = |msg: String| Response::json(400, &json!({ "error": msg }));
    let q = &req.query;
    let statuses: Vec<String> = match q.get("status").filter(|s| !s.is_empty()) {
        Some(s) => s
            .split(',')
            .map(|x| x.trim().to_lowercase())
            .filter(|x| !x.is_empty())
            .collect(),
        None => JOB_STATUSES.iter().map(|s| s.to_string()).collect(),
    };
    let invalid: Vec<&str> = statuses
        .iter()
        .map(String::as_str)
        .filter(|s| !JOB_STATUSES.contains(s))
        .collect();
    if !invalid.is_empty() {
        return bad(format!(
            "Invalid status value(s): {}. Valid values: {}",
            invalid.join(", "),
            JOB_STATUSES.join(", ")
        ));
    }
    let sort_by = q
        .get("sort_by")
        .map_or("created_at".into(), |s| s.to_lowercase());
    if sort_by != "created_at" && sort_by != "execution_duration" {
        return bad("sort_by must be 'created_at' or 'execution_duration'".into());
    }
    let sort_order = q
        .get("sort_order")
        .map_or("desc".into(), |s| s.to_lowercase());
    if sort_order != "asc" && sort_order != "desc" {
        return bad("sort_order must be 'asc' or 'desc'".into());
    }
    let limit = match q.get("limit").map(|s| s.trim().parse::<i64>()) {
        None => None,
        Some(Ok(n)) if n > 0 => Some(n as usize),
        Some(Ok(_)) => return bad("limit must be a positive integer".into()),
        Some(Err(_)) => return bad("limit must be an integer".into()),
    };
    let offset = match q.get("offset").map(|s| s.trim().parse::<i64>()) {
        None => 0,
        Some(Ok(n)) => n.max(0) as usize,
        Some(Err(_)) => return bad("offset must be an integer".into()),
    };
    let wants = |s: &str| statuses.iter().any(|x| x == s);
    let mut jobs: Vec<Value> = Vec::new();
    {
        let st = inst.lock();
        if wants("in_progress") {
            jobs.extend(st.running.iter().map(|r| queued_job(r, "in_progress")));
        }
        if wants("pending") {
            jobs.extend(st.pending.iter().map(|p| queued_job(p, "pending")));
        }
        for (id, entry) in &st.history {
            let mut job = ended_job(id, entry);
            if !job["status"].as_str().is_some_and(wants) {
                continue;
            }
            if let Some(o) = job.as_object_mut() {
                for k in ["outputs", "execution_status", "workflow"] {
                    o.remove(k);
                }
            }
            jobs.push(job);
        }
    }
    if let Some(w) = q.get("workflow_id").filter(|w| !w.is_empty()) {
        jobs.retain(|j| j["workflow_id"].as_str() == Some(w));
    }
    let key = |j: &Value| -> f64 {
        if sort_by == "execution_duration" {
            match (
                j["execution_start_time"].as_f64(),
                j["execution_end_time"].as_f64(),
            ) {
                (Some(s), Some(e)) if s != 0.0 && e != 0.0 => e - s,
                _ => 0.0,
            }
        } else {
            j["create_time"].as_f64().unwrap_or(0.0)
        }
    };
    // Python's sort is stable, also with reverse=True.
    jobs.sort_by(|a, b| {
        let o = key(a).total_cmp(&key(b));
        if sort_order == "desc" {
            o.reverse()
        } else {
            o
        }
    });
    let total = jobs.len();
    let page: Vec<Value> = jobs
        .into_iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    let has_more = offset + page.len() < total;
    Response::json(
        200,
        &json!({
            "jobs": page,
            "pagination": {"offset": offset, "limit": limit, "total": total, "has_more": has_more}
        }),
    )
}

/// A queued or running item as a job (`normalize_queue_item`): absent fields are left out,
/// as `prune_dict` does.
fn queued_job(item: &super::state::QueueItem, status: &str) -> Value {
    let mut job = json!({
        "id": item.prompt_id,
        "status": status,
        "priority": item.number,
        "outputs_count": 0
    });
    if let Some(t) = item.extra_data.get("create_time") {
        job["create_time"] = t.clone();
    }
    if let Some(w) = workflow_id(&item.extra_data) {
        job["workflow_id"] = w;
    }
    job
}

/// `extra_data.extra_pnginfo.workflow.id`, the UI workflow's id the jobs API filters on.
fn workflow_id(extra_data: &Value) -> Option<Value> {
    extra_data
        .pointer("/extra_pnginfo/workflow/id")
        .filter(|v| !v.is_null())
        .cloned()
}

/// One job, looked up as `get_job` does: history first, then the running item, then the queue.
fn job(inst: &Arc<Instance>, id: &str) -> Response {
    let mut answer = job_as_kept(inst, id);
    if inst.shared.faults().foreign_job_id && answer.status == 200 {
        if let Ok(mut v) = serde_json::from_slice::<Value>(&answer.body) {
            v["id"] = json!(uuid::Uuid::new_v4().to_string());
            answer = Response::json(200, &v);
        }
    }
    answer
}

/// [`job`] as the server keeps it.
fn job_as_kept(inst: &Arc<Instance>, id: &str) -> Response {
    let st = inst.lock();
    if let Some((_, entry)) = st.history.iter().rev().find(|(k, _)| k == id) {
        return Response::json(200, &ended_job(id, entry));
    }
    if let Some(r) = st.running.as_ref().filter(|r| r.prompt_id == id) {
        return Response::json(200, &queued_job(r, "in_progress"));
    }
    if let Some(p) = st.pending.iter().find(|p| p.prompt_id == id) {
        return Response::json(200, &queued_job(p, "pending"));
    }
    Response::json(404, &json!({"error": "Job not found"}))
}

/// A finished job from its history entry (shape of `api_jobs_id_{done,failed,interrupted}`).
fn ended_job(id: &str, entry: &Value) -> Value {
    let status = &entry["status"];
    let messages = status["messages"].as_array().cloned().unwrap_or_default();
    let ts = |name: &str| {
        messages
            .iter()
            .find(|m| m[0] == name)
            .and_then(|m| m[1].get("timestamp").cloned())
    };
    let end = [
        "execution_success",
        "execution_error",
        "execution_interrupted",
    ]
    .iter()
    .find_map(|n| ts(n));
    let completed = status["status_str"] == "success";
    let outputs = entry["outputs"].as_object().cloned().unwrap_or_default();
    let count: usize = outputs
        .values()
        .filter_map(Value::as_object)
        .flat_map(Map::values)
        .filter_map(Value::as_array)
        .map(Vec::len)
        .sum();
    let mut job = json!({
        "id": id,
        "status": if completed { "completed" } else { "failed" },
        "priority": entry["prompt"][0],
        "create_time": entry["prompt"][3].get("create_time").cloned().unwrap_or(Value::Null),
        "execution_start_time": ts("execution_start"),
        "execution_end_time": end,
        "outputs_count": count,
        "outputs": outputs,
        "execution_status": status,
        "workflow": {"prompt": entry["prompt"][2], "extra_data": entry["prompt"][3]},
    });
    // The first file of the first output node that has one, as the real server picks it.
    let preview = outputs.iter().find_map(|(node, ui)| {
        ui.as_object()?.iter().find_map(|(key, list)| {
            let f = list.as_array()?.first()?.as_object()?;
            let mut p = Map::new();
            for k in ["filename", "subfolder", "type"] {
                p.insert(k.into(), f.get(k).cloned().unwrap_or(Value::Null));
            }
            p.insert("nodeId".into(), json!(node));
            p.insert("mediaType".into(), json!(key));
            Some(Value::Object(p))
        })
    });
    if let Some(p) = preview {
        job["preview_output"] = p;
    }
    if let Some(err) = messages.iter().find(|m| m[0] == "execution_error") {
        job["execution_error"] = err[1].clone();
    }
    if let Some(w) = workflow_id(&entry["prompt"][3]) {
        job["workflow_id"] = w;
    }
    // `prune_dict`: a field the entry has no value for is left out.
    if let Some(o) = job.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    job
}

/// `POST /api/jobs/{id}/cancel`: dequeues a pending job, interrupts the running one; finished
/// or unknown ids are a no-op. Answers `{"cancelled": bool}`.
fn cancel(inst: &Arc<Instance>, id: &str) -> Response {
    let mut st = inst.lock();
    let cancelled = if st.running.as_ref().is_some_and(|r| r.prompt_id == id) {
        st.interrupt = true;
        true
    } else {
        let before = st.pending.len();
        st.pending.retain(|p| p.prompt_id != id);
        let removed = st.pending.len() != before;
        if removed {
            st.broadcast_status();
        }
        removed
    };
    Response::json(200, &json!({ "cancelled": cancelled }))
}

/// One registered node replacement (`io.NodeReplace`): a prompt node of class `old` that the
/// server does not have becomes `new`, its inputs rebuilt from `inputs` (new name ← old
/// input, or ← a set value).
struct NodeReplace {
    old: &'static str,
    new: &'static str,
    inputs: &'static [(&'static str, MapFrom)],
}

/// Where a replacement node's input comes from (`input_mapping` entries).
enum MapFrom {
    /// `{"new_id": …, "old_id": …}`.
    Old(&'static str),
    /// `{"new_id": …, "set_value": …}`.
    Set(&'static str),
}

/// The built-in replacement the 2026 profile applies (ComfyUI's `comfy_extras/
/// nodes_replacements.py`, `register_replacements_longeredge`): the retired
/// `ResizeImagesByLongerEdge` becomes `ImageScaleToMaxDimension`, `images` → `image`,
/// `longer_edge` → `largest_size`, and `upscale_method` set to `lanczos`. Its output mapping
/// is 0 → 0, so links to it stay as they are.
const REPLACEMENTS: &[NodeReplace] = &[NodeReplace {
    old: "ResizeImagesByLongerEdge",
    new: "ImageScaleToMaxDimension",
    inputs: &[
        ("image", MapFrom::Old("images")),
        ("largest_size", MapFrom::Old("longer_edge")),
        ("upscale_method", MapFrom::Set("lanczos")),
    ],
}];

/// The prompt as `NodeReplaceManager.apply_replacements` leaves it before validation (the
/// prompt that is queued and stored in `/history`): a node whose class the server lacks and
/// has a replacement for becomes the replacement, when the server has that class. `has`
/// says whether the server has a class.
pub(crate) fn apply_node_replacements(
    prompt: &Map<String, Value>,
    has: impl Fn(&str) -> bool,
) -> Map<String, Value> {
    let mut out = prompt.clone();
    for node in out.values_mut() {
        let Some(class) = node.get("class_type").and_then(Value::as_str) else {
            continue;
        };
        if has(class) {
            continue;
        }
        let Some(r) = REPLACEMENTS.iter().find(|r| r.old == class) else {
            continue;
        };
        if !has(r.new) {
            continue;
        }
        let old_inputs = node.get("inputs").cloned().unwrap_or_else(|| json!({}));
        let mut inputs = Map::new();
        for (new_id, from) in r.inputs {
            let v = match from {
                MapFrom::Set(v) => Some(json!(v)),
                MapFrom::Old(old_id) => old_inputs.get(*old_id).cloned(),
            };
            if let Some(v) = v {
                inputs.insert((*new_id).to_string(), v);
            }
        }
        node["class_type"] = json!(r.new);
        node["inputs"] = Value::Object(inputs);
    }
    out
}

/// What a running node spends its time on, as `progress_state` entries carry it from 0.38
/// (`NodeProgressState.activity` in `comfy_execution/progress.py`, "e.g. loading"): the 2026
/// profile says `loading` while a node loads a model before its first step.
pub const ACTIVITY_LOADING: &str = "loading";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_lowercase_uuids_pass() {
        assert!(reject_prompt_id(None).is_none());
        assert!(reject_prompt_id(Some(&Value::Null)).is_none());
        let ok = json!("f750b374-946c-47ee-a873-7242dc263695");
        assert!(reject_prompt_id(Some(&ok)).is_none());
        for bad in [
            json!("abc"),
            json!("F750B374-946C-47EE-A873-7242DC263695"),
            json!("f750b374946c47eea8737242dc263695"),
            json!(12345),
        ] {
            let r = reject_prompt_id(Some(&bad)).expect("rejected");
            assert_eq!(r.status, 400, "{bad}");
        }
    }

    #[test]
    fn profiles_parse_and_unknown_ones_are_named() {
        assert_eq!(Profile::parse("2026"), Ok(Profile::Y2026));
        assert_eq!(Profile::parse("0.3.64"), Ok(Profile::V0364));
        let e = Profile::parse("2027").unwrap_err();
        assert!(e.contains("'2027'") && e.contains("2026"), "{e}");
    }

    #[test]
    fn a_failed_history_entry_becomes_a_failed_job_with_its_error() {
        let entry = json!({
            "prompt": [3, "p", {}, {"client_id": "c", "create_time": 5}, ["9"]],
            "outputs": {},
            "status": {"status_str": "error", "completed": false, "messages": [
                ["execution_start", {"prompt_id": "p", "timestamp": 10}],
                ["execution_error", {"prompt_id": "p", "node_id": "8", "node_type": "VAEDecode", "timestamp": 20}]
            ]},
            "meta": {}
        });
        let job = ended_job("p", &entry);
        assert_eq!(job["status"], "failed");
        assert_eq!(job["execution_error"]["node_type"], "VAEDecode");
        assert_eq!(
            (
                job["execution_start_time"].clone(),
                job["execution_end_time"].clone()
            ),
            (json!(10), json!(20))
        );
        assert_eq!(job["create_time"], 5);
    }

    #[test]
    fn a_retired_class_is_replaced_only_when_the_server_lacks_it() {
        let prompt: Map<String, Value> = serde_json::from_value(json!({
            "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
            "10": {"class_type": "ResizeImagesByLongerEdge", "inputs": {"images": ["8", 0], "longer_edge": 256}}
        }))
        .unwrap();
        let lacks = |c: &str| c != "ResizeImagesByLongerEdge";
        let out = apply_node_replacements(&prompt, lacks);
        assert_eq!(
            out["10"],
            json!({"class_type": "ImageScaleToMaxDimension", "inputs": {
                "image": ["8", 0], "largest_size": 256, "upscale_method": "lanczos"}})
        );
        assert_eq!(out["8"], prompt["8"]);
        // A server that still has the class runs it as sent; one without the new class too.
        assert_eq!(apply_node_replacements(&prompt, |_| true), prompt);
        let neither = |c: &str| c == "VAEDecode";
        assert_eq!(apply_node_replacements(&prompt, neither), prompt);
    }
}
