//! How ladder changes read, derived in one place: [`Step::describe`] (the one-line summary
//! `plan` prints) and [`describe_changes`] (one line per change, as the report's "What changed"
//! cell shows them), both from the typed [`Change`]s the ladder records.

use super::{display_value, Step, SECOND_PASS};
use crate::workflow::Change;
use serde_json::Value;

impl Step {
    /// One human line: what this step changes, e.g. `45 EmptyHunyuanLatentVideo 256×144 → 1280×720`.
    pub fn describe(&self) -> String {
        if self.changes.is_empty() {
            return if self.index == 0 {
                "the target itself (nothing to reduce)".into()
            } else {
                "no visible change".into()
            };
        }
        let mut parts: Vec<String> = Vec::new();
        let mut used = vec![false; self.changes.len()];
        for (i, c) in self.changes.iter().enumerate() {
            if used[i] {
                continue;
            }
            used[i] = true;
            match c.action.as_str() {
                SECOND_PASS => parts.push(second_pass_text(c)),
                "set" => {
                    let input = c.input.clone().unwrap_or_default();
                    // Width and height of one node read as one size.
                    if input.contains("width") {
                        let h = input.replace("width", "height");
                        if let Some(j) = self.changes.iter().position(|d| {
                            d.node == c.node && d.action == "set" && d.input.as_deref() == Some(&h)
                        }) {
                            used[j] = true;
                            let d = &self.changes[j];
                            parts.push(format!(
                                "{} {} {}×{} → {}×{}",
                                c.node,
                                c.class_type,
                                short(&c.from),
                                short(&d.from),
                                short(&c.to),
                                short(&d.to)
                            ));
                            continue;
                        }
                    }
                    parts.push(format!(
                        "{} {}.{} {} → {}",
                        c.node,
                        c.class_type,
                        input,
                        short(&c.from),
                        short(&c.to)
                    ));
                }
                "bypass" => parts.push(format!(
                    "{} {} {}",
                    if self.index == 0 { "bypass" } else { "re-add" },
                    c.node,
                    c.class_type
                )),
                _ => match &c.input {
                    Some(input) => parts.push(format!(
                        "{} {}.{} {}",
                        c.node,
                        c.class_type,
                        input,
                        if self.index == 0 {
                            "disconnected"
                        } else {
                            "reconnected"
                        }
                    )),
                    None => parts.push(format!(
                        "{} {} {}",
                        if self.index == 0 { "remove" } else { "re-add" },
                        c.node,
                        c.class_type
                    )),
                },
            }
        }
        parts.join("; ")
    }
}

/// The parts of a workflow a step brings back that have a name of their own — a second
/// sampling pass ("hires pass: KSampler #11 at 1024×1024") — for the verdict lines, which would
/// otherwise say only the increment (`postprocess`).
pub fn named_parts(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .filter(|c| c.action == super::SECOND_PASS && c.to.is_some())
        .map(second_pass_text)
        .collect()
}

/// "hires pass: KSampler #11 at 1024×1024" (coming back) or "without the hires pass …" (left
/// out), for a [`SECOND_PASS`] change.
pub(crate) fn second_pass_text(c: &Change) -> String {
    let at = |v: &Option<Value>| match v {
        Some(Value::String(s)) => format!(" at {s}"),
        _ => String::new(),
    };
    if c.to.is_some() {
        format!("hires pass: {} #{}{}", c.class_type, c.node, at(&c.to))
    } else {
        format!(
            "without the hires pass ({} #{}{})",
            c.class_type,
            c.node,
            at(&c.from)
        )
    }
}

fn short(v: &Option<Value>) -> String {
    match v {
        None => "∅".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.len() == 2 => {
            format!("[{}:{}]", display_value(&a[0]), display_value(&a[1]))
        }
        Some(Value::Object(o)) if o.contains_key("on") => {
            format!("on={}", o.get("on").map(display_value).unwrap_or_default())
        }
        Some(other) => other.to_string(),
    }
}

/// One line per change, as the report shows a step: a width and height change of the same
/// node read as one resolution change (`resolution 256×144 → 1280×720 (EmptyLatentImage #5)`),
/// an object value as its changed keys, a link as `output N of #id`. With `re_adds` (the
/// changes of a step k ≥ 1, which re-adds what step k−1 left out) a bypassed or removed node
/// reads as what comes back, one line per class (`ImageScaleBy #12, #13 re-added`), and a
/// disconnected input as reconnected; without it (step 0) as what the minimal variant does
/// (`bypass LoraLoader #10`).
pub fn describe_changes(changes: &[Change], re_adds: bool) -> Vec<String> {
    let mut used = vec![false; changes.len()];
    let mut out = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        if used[i] {
            continue;
        }
        let input = c.input.clone().unwrap_or_default();
        let node = &c.node;
        let class = &c.class_type;
        let action = c.action.as_str();
        if action == SECOND_PASS {
            used[i] = true;
            out.push(second_pass_text(c));
            continue;
        }
        if re_adds && comes_back(c) {
            let mut ids = Vec::new();
            for (j, d) in changes.iter().enumerate().skip(i) {
                if !used[j] && comes_back(d) && &d.class_type == class {
                    used[j] = true;
                    ids.push(format!("#{}", d.node));
                }
            }
            out.push(format!("{class} {} re-added", ids.join(", ")));
            continue;
        }
        if re_adds && action == "remove" && !input.is_empty() {
            used[i] = true;
            out.push(match c.from.as_ref() {
                Some(link) => format!(
                    "{input} of {class} #{node} reconnected ({})",
                    value_text(Some(link))
                ),
                None => format!("{input} of {class} #{node} reconnected"),
            });
            continue;
        }
        if action == "set" && input == "width" {
            if let Some(j) = changes.iter().enumerate().position(|(j, d)| {
                j != i
                    && !used[j]
                    && &d.node == node
                    && d.input.as_deref() == Some("height")
                    && d.action == "set"
            }) {
                used[i] = true;
                used[j] = true;
                let h = &changes[j];
                out.push(format!(
                    "resolution {}×{} → {}×{} ({class} #{node})",
                    value_text(c.from.as_ref()),
                    value_text(h.from.as_ref()),
                    value_text(c.to.as_ref()),
                    value_text(h.to.as_ref()),
                ));
                continue;
            }
        }
        used[i] = true;
        let target = format!("{class} #{node}");
        if action == "class" {
            out.push(format!("{target} → {}", value_text(c.to.as_ref())));
            continue;
        }
        if let (Some(Value::Object(from)), Some(Value::Object(to))) = (&c.from, &c.to) {
            let mut keys: Vec<&String> = from.keys().chain(to.keys()).collect();
            keys.dedup();
            let mut seen = std::collections::BTreeSet::new();
            for key in keys {
                if !seen.insert(key.clone()) || from.get(key) == to.get(key) {
                    continue;
                }
                out.push(format!(
                    "{input}.{key} {} → {} ({target})",
                    value_text(from.get(key)),
                    value_text(to.get(key))
                ));
            }
            continue;
        }
        out.push(match (action, input.is_empty()) {
            ("set", false) => format!(
                "{input} {} → {} ({target})",
                value_text(c.from.as_ref()),
                value_text(c.to.as_ref())
            ),
            (_, false) => format!(
                "{action} {input} of {target}: {} → {}",
                value_text(c.from.as_ref()),
                value_text(c.to.as_ref())
            ),
            (_, true) => format!("{action} {target}"),
        });
    }
    out
}

/// A whole node that a step leaves out (bypassed or removed) and the next step brings back.
fn comes_back(c: &Change) -> bool {
    c.input.is_none() && matches!(c.action.as_str(), "bypass" | "remove")
}

/// A change's value in words: `none`, a string as it is, a link as `output N of #id`.
fn value_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "none".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.len() == 2 && a[0].is_string() && a[1].is_u64() => {
            format!("output {} of #{}", a[1], a[0].as_str().unwrap_or_default())
        }
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(v: Value) -> Change {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn changes_join_resolution_and_diff_objects() {
        let changes: Vec<Change> = [
            json!({"node": "5", "class_type": "EmptyLatentImage", "action": "set", "input": "width", "from": 256, "to": 1280}),
            json!({"node": "5", "class_type": "EmptyLatentImage", "action": "set", "input": "height", "from": 144, "to": 720}),
            json!({"node": "6", "class_type": "Power Lora Loader (rgthree)", "action": "set", "input": "lora_1",
                   "from": {"on": false, "lora": "a.safetensors"}, "to": {"on": true, "lora": "a.safetensors"}}),
            json!({"node": "3", "class_type": "KSampler", "action": "set", "input": "latent_image", "from": ["14", 0], "to": ["13", 0]}),
            json!({"node": "9", "class_type": "EasyCache", "action": "bypass"}),
        ]
        .into_iter()
        .map(change)
        .collect();
        assert_eq!(
            describe_changes(&changes, false),
            vec![
                "resolution 256×144 → 1280×720 (EmptyLatentImage #5)",
                "lora_1.on false → true (Power Lora Loader (rgthree) #6)",
                "latent_image output 0 of #14 → output 0 of #13 (KSampler #3)",
                "bypass EasyCache #9",
            ]
        );
    }

    #[test]
    fn a_re_add_step_says_what_comes_back_one_line_per_class() {
        let changes: Vec<Change> = [
            json!({"node": "12", "class_type": "ImageScaleBy", "action": "bypass"}),
            json!({"node": "10", "class_type": "LoraLoader", "action": "bypass"}),
            json!({"node": "13", "class_type": "ImageScaleBy", "action": "bypass"}),
            json!({"node": "11", "class_type": "UpscaleModelLoader", "action": "remove"}),
            json!({"node": "7", "class_type": "WanVideoSampler", "action": "remove", "input": "lora", "from": ["20", 0]}),
            json!({"node": "5", "class_type": "EmptyLatentImage", "action": "set", "input": "batch_size", "from": 1, "to": 4}),
        ]
        .into_iter()
        .map(change)
        .collect();
        assert_eq!(
            describe_changes(&changes, true),
            vec![
                "ImageScaleBy #12, #13 re-added",
                "LoraLoader #10 re-added",
                "UpscaleModelLoader #11 re-added",
                "lora of WanVideoSampler #7 reconnected (output 0 of #20)",
                "batch_size 1 → 4 (EmptyLatentImage #5)",
            ]
        );
        // Step 0 says what the minimal variant does to the same nodes.
        assert_eq!(
            describe_changes(&changes[..2], false),
            vec!["bypass ImageScaleBy #12", "bypass LoraLoader #10"]
        );
    }
}
