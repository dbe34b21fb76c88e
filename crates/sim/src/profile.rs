//! Which ComfyUI the simulator imitates. [`Profile::V0364`] (the default) is the 0.3.64 of
//! `tests/fixtures/comfyui/`; [`Profile::Y2026`] is a late-2026 server: the 0.8.0 captures of
//! `tests/fixtures/comfyui-0.8.0/` (`system.os` = `sys.platform`, the jobs API, the new
//! `/features`) plus what the upstream source at 0.38 adds (a client `prompt_id` must be a
//! canonical lowercase UUID, `POST /api/jobs/{id}/cancel`, `comfy_package_versions`,
//! `deploy_environment`, per-run asset ids on output files). This module owns the 2026 answers;
//! `server.rs` calls them when the profile asks.

use super::http::Response;
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

/// The jobs API routes (`path` is the request path with its `/api` prefix): `GET
/// /api/jobs/{id}` and `POST /api/jobs/{id}/cancel`. `None` for other paths.
pub(crate) fn jobs_route(inst: &Arc<Instance>, method: &str, path: &str) -> Option<Response> {
    let rest = path.strip_prefix("/api/jobs/")?;
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

/// One job, looked up as `get_job` does: history first, then the running item, then the queue.
fn job(inst: &Arc<Instance>, id: &str) -> Response {
    let st = inst.lock();
    if let Some((_, entry)) = st.history.iter().rev().find(|(k, _)| k == id) {
        return Response::json(200, &ended_job(id, entry));
    }
    let queued = |item: &super::state::QueueItem, status: &str| {
        json!({
            "id": item.prompt_id,
            "status": status,
            "priority": item.number,
            "create_time": item.extra_data.get("create_time").cloned().unwrap_or(Value::Null),
            "outputs_count": 0
        })
    };
    if let Some(r) = st.running.as_ref().filter(|r| r.prompt_id == id) {
        return Response::json(200, &queued(r, "in_progress"));
    }
    if let Some(p) = st.pending.iter().find(|p| p.prompt_id == id) {
        return Response::json(200, &queued(p, "pending"));
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
}
