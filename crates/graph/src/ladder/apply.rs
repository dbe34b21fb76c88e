//! Applying a reduction's edits to a variant tolerantly: an edit on a node an earlier edit
//! removed is skipped, and only the edits that changed something are kept.

use crate::nodedefs::NodeDefs;
use crate::workflow::{Change, Edit, Workflow};
use rustc_hash::FxHashSet as HashSet;

fn edit_applies(w: &Workflow, e: &Edit) -> bool {
    match e {
        Edit::Remove { nodes } => nodes.iter().any(|n| w.nodes.contains_key(n)),
        Edit::Relink { node, source, .. } => {
            w.nodes.contains_key(node) && w.nodes.contains_key(source)
        }
        other => other.nodes().iter().all(|n| w.nodes.contains_key(*n)),
    }
}

/// Applies the edits that still fit (an edit on a node an earlier edit removed is skipped) and
/// returns the ones that changed something.
pub(super) fn apply_tolerant(w: &mut Workflow, edits: &[Edit], defs: &NodeDefs) -> Vec<Edit> {
    apply_tolerant_changes(w, edits, defs).0
}

/// `apply_tolerant`, also returning what changed.
pub(super) fn apply_tolerant_changes(
    w: &mut Workflow,
    edits: &[Edit],
    defs: &NodeDefs,
) -> (Vec<Edit>, Vec<Change>) {
    let mut applied = Vec::new();
    let mut all_changes = Vec::new();
    let mut i = 0;
    while i < edits.len() {
        // Consecutive bypasses of distinct existing nodes go in one call (one consumer scan).
        let mut seen: HashSet<&str> = HashSet::default();
        let run: Vec<Edit> = edits[i..]
            .iter()
            .take_while(|e| matches!(e, Edit::Bypass { .. }))
            .filter(|e| {
                let id = e.nodes()[0];
                w.nodes.contains_key(id) && seen.insert(id)
            })
            .cloned()
            .collect();
        let consumed = edits[i..]
            .iter()
            .take_while(|e| matches!(e, Edit::Bypass { .. }))
            .count();
        if consumed >= 2 {
            if let Ok(changes) = w.apply(&run, defs) {
                all_changes.extend(changes);
                applied.extend(run);
            }
            i += consumed;
            continue;
        }
        let e = &edits[i];
        i += 1;
        if !edit_applies(w, e) {
            continue;
        }
        let e = match e {
            Edit::Remove { nodes } => Edit::Remove {
                nodes: nodes
                    .iter()
                    .filter(|n| w.nodes.contains_key(*n))
                    .cloned()
                    .collect(),
            },
            other => other.clone(),
        };
        match w.apply(std::slice::from_ref(&e), defs) {
            Ok(changes) if !changes.is_empty() => {
                all_changes.extend(changes);
                applied.push(e);
            }
            _ => {}
        }
    }
    (applied, all_changes)
}
