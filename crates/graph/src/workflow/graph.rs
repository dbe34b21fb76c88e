//! Graph queries over a workflow: consumers, upstream closure, reachability from output nodes,
//! topological order and cycle detection.

use super::{Input, Link, Workflow};
use crate::nodedefs::NodeDefs;
use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

/// An insertion-ordered set of node ids (FxHash: ids are short and not adversarial).
pub(crate) type IdSet = indexmap::IndexSet<String, FxBuildHasher>;
type IndexSet<T> = indexmap::IndexSet<T, FxBuildHasher>;

/// One consumer of a node output: `(node id, input name)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Consumer {
    /// Consuming node.
    pub node: String,
    /// The input on that node.
    pub input: String,
}

impl Workflow {
    /// Every input that links to output `slot` of `node`, in file order.
    pub fn consumers(&self, node: &str, slot: usize) -> Vec<Consumer> {
        let mut out = Vec::new();
        for (id, n) in &self.nodes {
            for (name, input) in &n.inputs {
                if let Input::Link(Link { node: src, slot: s }) = input {
                    if src == node && *s == slot {
                        out.push(Consumer {
                            node: id.clone(),
                            input: name.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Every input that links to any output of `node`.
    pub(crate) fn consumers_of_node(&self, node: &str) -> Vec<(Consumer, usize)> {
        let mut out = Vec::new();
        for (id, n) in &self.nodes {
            for (name, input) in &n.inputs {
                if let Input::Link(Link { node: src, slot }) = input {
                    if src == node {
                        out.push((
                            Consumer {
                                node: id.clone(),
                                input: name.clone(),
                            },
                            *slot,
                        ));
                    }
                }
            }
        }
        out
    }

    /// `start` and every node it depends on through links.
    pub fn upstream_closure<'a, I: IntoIterator<Item = &'a str>>(&self, start: I) -> IdSet {
        let mut seen = IdSet::default();
        let mut stack: Vec<String> = start.into_iter().map(str::to_string).collect();
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            if let Some(node) = self.nodes.get(&id) {
                for input in node.inputs.values() {
                    if let Input::Link(link) = input {
                        if !seen.contains(&link.node) {
                            stack.push(link.node.clone());
                        }
                    }
                }
            }
        }
        seen
    }

    /// Ids of the output nodes (by the node definitions), in file order.
    pub fn output_nodes(&self, defs: &NodeDefs) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| defs.get(&n.class_type).is_some_and(|d| d.output_node))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Nodes ComfyUI would validate and execute: the upstream closure of the output nodes.
    pub fn reachable_from_outputs(&self, defs: &NodeDefs) -> IdSet {
        let outputs = self.output_nodes(defs);
        self.upstream_closure(outputs.iter().map(String::as_str))
    }

    /// Node ids so that every node comes after the nodes it links from; ties keep file order.
    pub fn topological_order(&self) -> Vec<String> {
        let mut indegree: IndexMap<&str, usize> =
            self.nodes.keys().map(|k| (k.as_str(), 0)).collect();
        let mut dependants: IndexMap<&str, Vec<&str>> = IndexMap::new();
        for (id, node) in &self.nodes {
            let mut sources: IndexSet<&str> = IndexSet::default();
            for input in node.inputs.values() {
                if let Input::Link(link) = input {
                    if self.nodes.contains_key(&link.node) {
                        sources.insert(link.node.as_str());
                    }
                }
            }
            for src in sources {
                *indegree
                    .get_mut(id.as_str())
                    .expect("every id has an entry") += 1;
                dependants.entry(src).or_default().push(id.as_str());
            }
        }
        let mut ready: std::collections::VecDeque<&str> = indegree
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(k, _)| *k)
            .collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(id) = ready.pop_front() {
            order.push(id.to_string());
            if let Some(list) = dependants.get(id) {
                for dep in list {
                    let d = indegree.get_mut(dep).expect("every id has an entry");
                    *d -= 1;
                    if *d == 0 {
                        ready.push_back(dep);
                    }
                }
            }
        }
        order
    }

    /// A cycle of links, as the list of node ids along it, if there is one.
    pub(crate) fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Active,
            Done,
        }
        let mut marks: IndexMap<&str, Mark> =
            self.nodes.keys().map(|k| (k.as_str(), Mark::New)).collect();
        for start in self.nodes.keys() {
            if marks[start.as_str()] != Mark::New {
                continue;
            }
            // Iterative DFS following links from a node to its sources.
            let mut path: Vec<&str> = vec![start.as_str()];
            let mut iters: Vec<std::vec::IntoIter<&str>> = vec![self.sources(start).into_iter()];
            marks.insert(start.as_str(), Mark::Active);
            while let Some(iter) = iters.last_mut() {
                match iter.next() {
                    Some(next) => match marks.get(next).copied() {
                        Some(Mark::New) => {
                            marks.insert(next, Mark::Active);
                            path.push(next);
                            iters.push(self.sources(next).into_iter());
                        }
                        Some(Mark::Active) => {
                            let at = path
                                .iter()
                                .position(|p| *p == next)
                                .expect("active nodes are on the path");
                            let mut cycle: Vec<String> =
                                path[at..].iter().rev().map(|s| s.to_string()).collect();
                            cycle.push(cycle[0].clone());
                            return Some(cycle);
                        }
                        _ => {}
                    },
                    None => {
                        let done = path.pop().expect("path and iterators have equal length");
                        marks.insert(done, Mark::Done);
                        iters.pop();
                    }
                }
            }
        }
        None
    }

    fn sources(&self, id: &str) -> Vec<&str> {
        self.nodes
            .get(id)
            .map(|n| {
                n.inputs
                    .values()
                    .filter_map(|i| i.as_link())
                    .filter(|l| self.nodes.contains_key(&l.node))
                    .map(|l| l.node.as_str())
                    .collect()
            })
            .unwrap_or_default()
    }
}
