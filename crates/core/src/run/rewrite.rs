//! What ran vs what was sent. The server stores the prompt it ran in `/history` (`prompt[2]`);
//! late-2026 ComfyUI may rewrite a submitted prompt first (registered node replacements,
//! coerced values), so the two can differ. [`compare`] hashes the prompt that ran the same way
//! as the submitted variant (the workflow hash: canonical JSON, `_meta` left out) and, when the
//! hashes differ, lists the differences node by node. Pure: no I/O.

use crate::comfy::HistoryEntry;
use crate::workflow::{canonical_json, Workflow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The server ran a different prompt than the one submitted (`run.json` `prompt_rewrite`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRewrite {
    /// The workflow hash of the prompt that ran (the submitted one is the record's
    /// `workflow_sha256`).
    pub ran_sha256: String,
    /// sha256 of the differences below (one line each, in order), to tell rewrites apart.
    pub diff_sha256: String,
    /// One line per difference: `node 5: class KSampler → KSamplerAdvanced`, `node 5: input
    /// steps 20 → 8`, `node 12 added (class X)`, `node 3 removed`.
    pub changes: Vec<String>,
}

/// Compares the submitted workflow with the prompt `/history` says ran; `None` when they are
/// the same (by the workflow hash) or the entry carries no prompt.
pub(crate) fn compare(sent: &Workflow, history: &HistoryEntry) -> Option<PromptRewrite> {
    let ran_value = history.prompt.get(2).filter(|v| v.is_object())?;
    let ran = Workflow::from_json_str(&ran_value.to_string(), "history prompt").ok()?;
    let ran_sha256 = ran.sha256();
    if ran_sha256 == sent.sha256() {
        return None;
    }
    let changes = differences(sent, &ran);
    // Only ComfyUI's own coercion of numbers (`cfg` 8 → 8.0): the prompt that ran is the one sent.
    if changes.is_empty() {
        return None;
    }
    let diff_sha256 = crate::workflow::sha256_hex(changes.join("\n").as_bytes());
    Some(PromptRewrite {
        ran_sha256,
        diff_sha256,
        changes,
    })
}

/// The node-by-node differences from `sent` to `ran`.
fn differences(sent: &Workflow, ran: &Workflow) -> Vec<String> {
    let canon = |v: &Value| canonical_json(v);
    let mut out = Vec::new();
    for (id, a) in sent.nodes.iter() {
        let Some(b) = ran.node(id) else {
            out.push(format!("node {id} removed (class {})", a.class_type));
            continue;
        };
        if a.class_type != b.class_type {
            out.push(format!(
                "node {id}: class {} → {}",
                a.class_type, b.class_type
            ));
        }
        let (av, bv) = (a.to_value(false), b.to_value(false));
        let (ai, bi) = (&av["inputs"], &bv["inputs"]);
        let empty = serde_json::Map::new();
        let (ai, bi) = (
            ai.as_object().unwrap_or(&empty),
            bi.as_object().unwrap_or(&empty),
        );
        for (k, x) in ai {
            match bi.get(k) {
                None => out.push(format!("node {id}: input {k} removed")),
                // ComfyUI's validation writes `int(val)` / `float(val)` back into the prompt
                // it stores (execution.py `validate_inputs`): the same number is no rewrite.
                Some(y) if same_number(x, y) => {}
                Some(y) if canon(x) != canon(y) => {
                    out.push(format!("node {id}: input {k} {} → {}", canon(x), canon(y)))
                }
                Some(_) => {}
            }
        }
        for (k, y) in bi {
            if !ai.contains_key(k) {
                out.push(format!("node {id}: input {k} added ({})", canon(y)));
            }
        }
    }
    for (id, b) in ran.nodes.iter() {
        if sent.node(id).is_none() {
            out.push(format!("node {id} added (class {})", b.class_type));
        }
    }
    out
}

/// Two JSON numbers of the same value (`8` and `8.0`).
fn same_number(x: &Value, y: &Value) -> bool {
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) => x.is_number() && y.is_number() && a == b,
        _ => false,
    }
}

/// The warning a rewritten run carries (the report lists the run's warnings).
pub(crate) fn warning(r: &PromptRewrite) -> String {
    let shown: Vec<&str> = r.changes.iter().take(5).map(String::as_str).collect();
    let more = r.changes.len().saturating_sub(shown.len());
    format!(
        "the server ran a different prompt than the one sent (node replacements or coerced \
         values; ran {}, differences {}): {}{}",
        &r.ran_sha256[..12.min(r.ran_sha256.len())],
        &r.diff_sha256[..12.min(r.diff_sha256.len())],
        shown.join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history_080(name: &str) -> HistoryEntry {
        let text =
            std::fs::read_to_string(format!("{}/comfyui-0.8.0/{name}", crate::FIXTURES)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let (_, entry) = v.as_object().unwrap().iter().next().unwrap();
        serde_json::from_value(entry.clone()).unwrap()
    }

    fn sent_of(h: &HistoryEntry) -> Workflow {
        Workflow::from_json_str(&h.prompt[2].to_string(), "sent.json").unwrap()
    }

    #[test]
    fn the_prompt_a_real_080_server_ran_is_the_one_sent() {
        // The real capture's prompt carries `_meta` titles; the workflow hash leaves them out.
        let h = history_080("realrun_history_oom.json");
        assert!(h.prompt[2].to_string().contains("_meta"));
        assert_eq!(compare(&sent_of(&h), &h), None);
    }

    #[test]
    fn comfyuis_own_number_coercion_is_no_rewrite() {
        // validate_inputs stores float(val) for a FLOAT input: cfg 8 comes back as 8.0.
        let h = history_080("realrun_history_oom.json");
        let sent = sent_of(&h);
        let mut ran = h.clone();
        let sampler = ran.prompt[2]
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, n)| n["class_type"] == "KSampler")
            .map(|(k, _)| k.clone())
            .unwrap();
        let mut sent_value = h.prompt[2].clone();
        sent_value[&sampler]["inputs"]["cfg"] = 8.into();
        ran.prompt[2][&sampler]["inputs"]["cfg"] = serde_json::json!(8.0);
        let sent_int = Workflow::from_json_str(&sent_value.to_string(), "sent.json").unwrap();
        assert_ne!(
            sent_int.sha256(),
            sent.sha256(),
            "the sent prompt has cfg 8"
        );
        assert_eq!(compare(&sent_int, &ran), None);
        // A different number still is one.
        ran.prompt[2][&sampler]["inputs"]["cfg"] = serde_json::json!(7.5);
        let r = compare(&sent_int, &ran).expect("a rewrite");
        assert_eq!(r.changes, [format!("node {sampler}: input cfg 8 → 7.5")]);
    }

    #[test]
    fn a_rewritten_prompt_is_recorded_with_its_hash_and_differences() {
        let h = history_080("realrun_history_oom.json");
        let sent = sent_of(&h);
        let mut ran = h.clone();
        let p = &mut ran.prompt[2];
        let sampler = p
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, n)| n["class_type"] == "KSampler")
            .map(|(k, _)| k.clone())
            .unwrap();
        p[&sampler]["class_type"] = "KSamplerAdvanced".into();
        p[&sampler]["inputs"]["steps"] = 8.into();
        p["99"] = serde_json::json!({"class_type": "Note", "inputs": {}});
        let r = compare(&sent, &ran).expect("a rewrite");
        assert_ne!(r.ran_sha256, sent.sha256());
        assert!(r.changes.contains(&format!(
            "node {sampler}: class KSampler → KSamplerAdvanced"
        )));
        assert!(
            r.changes
                .iter()
                .any(|c| c.starts_with(&format!("node {sampler}: input steps "))
                    && c.ends_with("→ 8"))
        );
        assert!(r
            .changes
            .contains(&"node 99 added (class Note)".to_string()));
        assert_eq!(r.diff_sha256.len(), 64);
        assert!(
            !r.changes.iter().any(|c| c.contains(" cfg ")),
            "{:?}",
            r.changes
        );
        let w = warning(&r);
        assert!(
            w.contains("different prompt") && w.contains(&r.ran_sha256[..12]),
            "{w}"
        );
    }
}
