//! Node ids as the user sees them. The frontend flattens a node inside a subgraph into the
//! prompt under a hierarchical id, the execution ids of the instances it sits in and its own id
//! joined by `:` (`"140:125"`: node #125 inside subgraph instance #140); the server reports that
//! id in events, errors and `/history`. [`node_label`] names it as the canvas shows it:
//! `KSampler #125 in subgraph 'Sampler' #140`.

use indexmap::IndexMap;

/// The subgraph instances node `id` sits in, outermost first, as execution ids (`"140"`,
/// `"140:130"`), and its own id inside the innermost one. A root node has no instances.
pub fn split_hierarchical(id: &str) -> (Vec<String>, &str) {
    let parts: Vec<&str> = id.split(':').collect();
    let Some((own, outer)) = parts.split_last() else {
        return (Vec::new(), id);
    };
    // A part that is empty (`"140:"`, `":5"`) is not a hierarchical id: keep it whole.
    if outer.is_empty() || parts.iter().any(|p| p.is_empty()) {
        return (Vec::new(), id);
    }
    let instances = (1..=outer.len()).map(|n| outer[..n].join(":")).collect();
    (instances, own)
}

/// Where node `id` sits, innermost subgraph first: `subgraph 'Sampler' #140` (nested:
/// `subgraph 'Inner' #130 in subgraph 'Sampler' #140`); `None` for a root node. `names` gives
/// a subgraph instance's name by execution id (from the UI file, [`super::ui::subgraph_names`]);
/// an instance it does not know is named by its id alone (`subgraph #140`).
pub fn subgraph_location(id: &str, names: &IndexMap<String, String>) -> Option<String> {
    let (instances, _) = split_hierarchical(id);
    if instances.is_empty() {
        return None;
    }
    let parts: Vec<String> = instances
        .iter()
        .rev()
        .map(|exec| {
            let own = exec.rsplit(':').next().unwrap_or(exec);
            match names.get(exec) {
                Some(name) => format!("subgraph '{name}' #{own}"),
                None => format!("subgraph #{own}"),
            }
        })
        .collect();
    Some(parts.join(" in "))
}

/// Node `id` of class `class_type` as the canvas shows it: `KSampler #3` at the root,
/// `KSampler #125 in subgraph 'Sampler' #140` inside a subgraph.
pub fn node_label(id: &str, class_type: &str, names: &IndexMap<String, String>) -> String {
    let (_, own) = split_hierarchical(id);
    match subgraph_location(id, names) {
        Some(location) => format!("{class_type} #{own} in {location}"),
        None => format!("{class_type} #{id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> IndexMap<String, String> {
        IndexMap::from([
            ("140".to_string(), "Sampler".to_string()),
            ("140:130".to_string(), "Inner".to_string()),
        ])
    }

    #[test]
    fn root_ids_stay_as_they_are() {
        assert_eq!(node_label("3", "KSampler", &names()), "KSampler #3");
        assert_eq!(subgraph_location("3", &names()), None);
        assert_eq!(split_hierarchical("3"), (vec![], "3"));
    }

    #[test]
    fn a_node_inside_a_subgraph_is_named_with_its_instance() {
        assert_eq!(
            node_label("140:125", "KSampler", &names()),
            "KSampler #125 in subgraph 'Sampler' #140"
        );
        assert_eq!(
            node_label("140:130:125", "KSampler", &names()),
            "KSampler #125 in subgraph 'Inner' #130 in subgraph 'Sampler' #140"
        );
        assert_eq!(
            split_hierarchical("140:130:125"),
            (vec!["140".to_string(), "140:130".to_string()], "125")
        );
    }

    #[test]
    fn without_the_ui_file_the_instance_is_named_by_its_id() {
        assert_eq!(
            node_label("140:125", "KSampler", &IndexMap::new()),
            "KSampler #125 in subgraph #140"
        );
    }

    #[test]
    fn malformed_ids_are_kept_whole() {
        for id in ["140:", ":5", "a::b"] {
            assert_eq!(node_label(id, "X", &names()), format!("X #{id}"));
        }
    }
}
