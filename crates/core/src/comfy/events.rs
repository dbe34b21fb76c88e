//! A pure follower of ONE prompt's WebSocket events: fed with text frames (and binary frame
//! sizes) it builds the node timeline, notices cached nodes, step progress and the terminal
//! state, and ignores other prompts' broadcasts. No I/O and no clock: the caller passes the
//! time of each frame in milliseconds.

use super::protocol::{
    msg, CachedData, ExecutedData, ExecutingData, ExecutionError, HistoryEntry, ProgressData,
    ProgressStateData, StatusData, Terminal, WsMessage,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Step progress of one node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Steps done.
    pub value: f64,
    /// Steps total.
    pub max: f64,
}

/// What happened to one node of the prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTiming {
    /// Node id as the server reports it (may be a flattened subgraph id).
    pub node_id: String,
    /// Node of the submitted prompt it belongs to, when different.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_node: Option<String>,
    /// Class of the node (filled in by the caller from the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_type: Option<String>,
    /// Served from the output cache (listed in `execution_cached`).
    pub cached: bool,
    /// When the node started (ms since the run started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// When it finished (ms since the run started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    /// Last step progress reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// `running`, `finished`, `error` or `interrupted`.
    pub state: String,
    /// UI output of an output node (`executed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

impl NodeTiming {
    fn new(node_id: &str) -> NodeTiming {
        NodeTiming {
            node_id: node_id.to_string(),
            display_node: None,
            class_type: None,
            cached: false,
            started_ms: None,
            finished_ms: None,
            progress: None,
            state: "running".into(),
            output: None,
        }
    }

    /// Wall time between start and finish, when both are known.
    pub fn duration_ms(&self) -> Option<u64> {
        Some(self.finished_ms?.saturating_sub(self.started_ms?))
    }
}

/// Frame counters of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameCounts {
    /// Text frames received.
    pub text: u64,
    /// Text frames about our prompt.
    pub ours: u64,
    /// Text frames about other prompts (ignored).
    pub others: u64,
    /// Text frames that were not `{type, data}` JSON (ignored).
    pub unparsed: u64,
    /// Binary frames received (counted, never stored).
    pub binary: u64,
    /// Their total size.
    pub binary_bytes: u64,
}

/// Something the caller may show (progress bar) as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackerEvent {
    /// The server said which session id this socket has.
    Connected {
        /// The session id.
        sid: String,
    },
    /// Queue size changed (`status` broadcast).
    Queue {
        /// Pending + running prompts on the server.
        remaining: u64,
    },
    /// The worker took our prompt.
    Started,
    /// Nodes served from cache.
    Cached {
        /// Their ids.
        nodes: Vec<String>,
    },
    /// A node started.
    NodeStarted {
        /// Node id.
        node: String,
    },
    /// Step progress.
    Progress {
        /// Node id.
        node: String,
        /// Steps done.
        value: f64,
        /// Steps total.
        max: f64,
    },
    /// An output node finished.
    NodeExecuted {
        /// Node id.
        node: String,
    },
    /// A non-fatal `ExecutionBlocked` error; the prompt continues.
    Blocked {
        /// Node id.
        node: String,
        /// The message.
        message: String,
    },
    /// `execution_success`, a fatal `execution_error` or `execution_interrupted`.
    Terminal(TerminalKind),
    /// `executing {node: null}` for our prompt: the server is done and history is written.
    Finished,
}

/// The kind of a terminal event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalKind {
    /// `execution_success`.
    Success,
    /// Fatal `execution_error`.
    Error,
    /// `execution_interrupted`.
    Interrupted,
}

impl Terminal {
    /// The kind of this terminal event.
    pub fn kind(&self) -> TerminalKind {
        match self {
            Terminal::Success { .. } => TerminalKind::Success,
            Terminal::Error(_) => TerminalKind::Error,
            Terminal::Interrupted(_) => TerminalKind::Interrupted,
        }
    }
}

/// Follows one prompt through the WebSocket frames.
#[derive(Debug, Clone)]
pub struct EventTracker {
    prompt_id: String,
    started_ms: Option<u64>,
    server_start_timestamp: Option<u64>,
    cached: Vec<String>,
    nodes: Vec<NodeTiming>,
    current: Option<usize>,
    terminal: Option<Terminal>,
    terminal_ms: Option<u64>,
    finished_ms: Option<u64>,
    socket_ended: bool,
    counts: FrameCounts,
    sid: Option<String>,
    queue_remaining: Option<u64>,
}

impl EventTracker {
    /// A tracker for `prompt_id`.
    pub fn new(prompt_id: &str) -> EventTracker {
        EventTracker {
            prompt_id: prompt_id.to_string(),
            started_ms: None,
            server_start_timestamp: None,
            cached: Vec::new(),
            nodes: Vec::new(),
            current: None,
            terminal: None,
            terminal_ms: None,
            finished_ms: None,
            socket_ended: false,
            counts: FrameCounts::default(),
            sid: None,
            queue_remaining: None,
        }
    }

    /// The followed prompt id.
    #[cfg(test)]
    pub(crate) fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    /// Feeds one text frame received at `at_ms`; returns what changed.
    pub fn feed_text(&mut self, text: &str, at_ms: u64) -> Vec<TrackerEvent> {
        self.counts.text += 1;
        let Some(message) = WsMessage::parse(text) else {
            self.counts.unparsed += 1;
            return Vec::new();
        };
        self.feed_message(&message, at_ms)
    }

    /// Feeds one binary frame of `len` bytes (only counted).
    pub fn feed_binary(&mut self, len: usize) {
        self.counts.binary += 1;
        self.counts.binary_bytes += len as u64;
    }

    /// Feeds one parsed message received at `at_ms`.
    pub(crate) fn feed_message(&mut self, m: &WsMessage, at_ms: u64) -> Vec<TrackerEvent> {
        let mut out = Vec::new();
        if m.kind == msg::STATUS {
            if let Ok(s) = serde_json::from_value::<StatusData>(m.data.clone()) {
                if let Some(sid) = s.sid.clone() {
                    self.sid = Some(sid.clone());
                    out.push(TrackerEvent::Connected { sid });
                }
                if let Some(remaining) = s.queue_remaining() {
                    self.queue_remaining = Some(remaining);
                    out.push(TrackerEvent::Queue { remaining });
                }
            }
            return out;
        }
        match m.prompt_id() {
            Some(id) if id == self.prompt_id => {}
            Some(_) => {
                self.counts.others += 1;
                return out;
            }
            None => {
                // The greeting after a reconnect with the same session id repeats the running
                // node without a prompt_id; it can only be ours while ours is running.
                if m.kind == msg::EXECUTING && self.is_running() {
                    if let Ok(d) = serde_json::from_value::<ExecutingData>(m.data.clone()) {
                        if let Some(node) = d.node {
                            self.counts.ours += 1;
                            self.start_node(&node, d.display_node, at_ms, &mut out);
                        }
                    }
                }
                return out;
            }
        }
        self.counts.ours += 1;
        match m.kind.as_str() {
            msg::EXECUTION_START => {
                self.mark_started(at_ms, &mut out);
                self.server_start_timestamp = m.data.get("timestamp").and_then(Value::as_u64);
            }
            msg::EXECUTION_CACHED => {
                self.mark_started(at_ms, &mut out);
                if let Ok(c) = serde_json::from_value::<CachedData>(m.data.clone()) {
                    self.set_cached(&c.nodes);
                    out.push(TrackerEvent::Cached { nodes: c.nodes });
                }
            }
            msg::EXECUTING => {
                if let Ok(d) = serde_json::from_value::<ExecutingData>(m.data.clone()) {
                    match d.node {
                        Some(node) => {
                            self.mark_started(at_ms, &mut out);
                            self.start_node(&node, d.display_node, at_ms, &mut out);
                        }
                        None => {
                            self.finish_current(at_ms);
                            self.socket_ended = true;
                            if self.finished_ms.is_none() {
                                self.finished_ms = Some(at_ms);
                                out.push(TrackerEvent::Finished);
                            }
                        }
                    }
                }
            }
            msg::PROGRESS => {
                if let Ok(p) = serde_json::from_value::<ProgressData>(m.data.clone()) {
                    if let Some(node) = p.node {
                        let i = self.node_index(&node);
                        let n = &mut self.nodes[i];
                        n.started_ms.get_or_insert(at_ms);
                        n.progress = Some(Progress {
                            value: p.value,
                            max: p.max,
                        });
                        out.push(TrackerEvent::Progress {
                            node,
                            value: p.value,
                            max: p.max,
                        });
                    }
                }
            }
            msg::PROGRESS_STATE => {
                self.mark_started(at_ms, &mut out);
                if let Ok(s) = serde_json::from_value::<ProgressStateData>(m.data.clone()) {
                    for (id, st) in s.nodes {
                        let i = self.node_index(&id);
                        let n = &mut self.nodes[i];
                        if n.display_node.is_none() && st.display_node_id.as_deref() != Some(&id) {
                            n.display_node = st.display_node_id.clone();
                        }
                        if st.max > 0.0 {
                            n.progress = Some(Progress {
                                value: st.value,
                                max: st.max,
                            });
                        }
                        match st.state.as_str() {
                            "running" => {
                                n.started_ms.get_or_insert(at_ms);
                            }
                            "finished" | "error" => {
                                if !n.cached {
                                    n.started_ms.get_or_insert(at_ms);
                                }
                                if n.finished_ms.is_none() && n.state == "running" {
                                    n.finished_ms = Some(at_ms);
                                    n.state = st.state.clone();
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
            msg::EXECUTED => {
                if let Ok(d) = serde_json::from_value::<ExecutedData>(m.data.clone()) {
                    if let Some(node) = d.node {
                        let i = self.node_index(&node);
                        let n = &mut self.nodes[i];
                        n.output = Some(d.output);
                        if !n.cached {
                            n.started_ms.get_or_insert(at_ms);
                        }
                        if n.finished_ms.is_none() {
                            n.finished_ms = Some(at_ms);
                        }
                        n.state = "finished".into();
                        out.push(TrackerEvent::NodeExecuted { node });
                    }
                }
            }
            msg::EXECUTION_SUCCESS | msg::EXECUTION_ERROR | msg::EXECUTION_INTERRUPTED => {
                match super::protocol::terminal_from_message(&m.kind, &m.data) {
                    Some(t) => {
                        self.mark_started(at_ms, &mut out);
                        out.push(TrackerEvent::Terminal(t.kind()));
                        self.set_terminal(t, at_ms);
                    }
                    None => {
                        if let Ok(e) = serde_json::from_value::<ExecutionError>(m.data.clone()) {
                            out.push(TrackerEvent::Blocked {
                                node: e.node_id,
                                message: e.exception_message,
                            });
                        }
                    }
                }
            }
            _ => {}
        }
        out
    }

    /// Merges the history entry (the truth when the socket missed anything): fills in a
    /// missing terminal event and cached nodes. Returns a note when history disagrees with
    /// what the socket said (history wins).
    pub fn apply_history(&mut self, entry: &HistoryEntry, at_ms: u64) -> Option<String> {
        let cached = entry.cached_nodes();
        if self.cached.is_empty() && !cached.is_empty() {
            self.set_cached(&cached);
        }
        if self.started_ms.is_none() && entry.message(msg::EXECUTION_START).is_some() {
            self.started_ms = Some(at_ms);
        }
        for (node, output) in &entry.outputs {
            let i = self.node_index(node);
            if self.nodes[i].output.is_none() {
                self.nodes[i].output = Some(output.clone());
            }
        }
        let from_history = entry.terminal()?;
        let note = match &self.terminal {
            Some(t) if t.kind() != from_history.kind() => Some(format!(
                "the socket reported {:?} but history says {:?}; using history",
                t.kind(),
                from_history.kind()
            )),
            _ => None,
        };
        if self.terminal.as_ref() != Some(&from_history) {
            let ms = self.terminal_ms.unwrap_or(at_ms);
            self.set_terminal(from_history, ms);
        }
        if self.finished_ms.is_none() {
            self.finished_ms = Some(at_ms);
        }
        note
    }

    fn mark_started(&mut self, at_ms: u64, out: &mut Vec<TrackerEvent>) {
        if self.started_ms.is_none() {
            self.started_ms = Some(at_ms);
            out.push(TrackerEvent::Started);
        }
    }

    fn set_cached(&mut self, nodes: &[String]) {
        self.cached = nodes.to_vec();
        for id in nodes {
            let i = self.node_index(id);
            let n = &mut self.nodes[i];
            n.cached = true;
            n.state = "finished".into();
        }
    }

    fn start_node(
        &mut self,
        node: &str,
        display: Option<String>,
        at_ms: u64,
        out: &mut Vec<TrackerEvent>,
    ) {
        let i = self.node_index(node);
        if self.current == Some(i) {
            return;
        }
        self.finish_current(at_ms);
        let n = &mut self.nodes[i];
        if display.as_deref().is_some_and(|d| d != node) {
            n.display_node = display;
        }
        n.started_ms.get_or_insert(at_ms);
        n.state = "running".into();
        self.current = Some(i);
        out.push(TrackerEvent::NodeStarted {
            node: node.to_string(),
        });
    }

    fn finish_current(&mut self, at_ms: u64) {
        if let Some(i) = self.current.take() {
            let n = &mut self.nodes[i];
            if n.finished_ms.is_none() {
                n.finished_ms = Some(at_ms);
            }
            if n.state == "running" {
                n.state = "finished".into();
            }
        }
    }

    fn set_terminal(&mut self, t: Terminal, at_ms: u64) {
        let failed_node = match &t {
            Terminal::Error(e) => Some((e.node_id.clone(), "error")),
            Terminal::Interrupted(i) => Some((i.node_id.clone(), "interrupted")),
            Terminal::Success { .. } => None,
        };
        if let Some((node, state)) = failed_node {
            if !node.is_empty() {
                let i = self.node_index(&node);
                if self.current == Some(i) {
                    self.current = None;
                }
                let n = &mut self.nodes[i];
                n.state = state.into();
                n.started_ms.get_or_insert(at_ms);
                n.finished_ms = Some(at_ms);
            }
        }
        self.finish_current(at_ms);
        for n in &mut self.nodes {
            if n.state == "running" {
                n.state = "finished".into();
                n.finished_ms.get_or_insert(at_ms);
            }
        }
        self.terminal = Some(t);
        self.terminal_ms.get_or_insert(at_ms);
    }

    fn node_index(&mut self, node: &str) -> usize {
        match self.nodes.iter().position(|n| n.node_id == node) {
            Some(i) => i,
            None => {
                self.nodes.push(NodeTiming::new(node));
                self.nodes.len() - 1
            }
        }
    }

    /// True between the first event of our prompt and its end.
    pub(crate) fn is_running(&self) -> bool {
        self.started_ms.is_some() && self.terminal.is_none() && self.finished_ms.is_none()
    }

    /// True once the server sent `executing {node: null}` for our prompt (or history settled it).
    pub fn is_finished(&self) -> bool {
        self.finished_ms.is_some()
    }

    /// True once the socket itself sent `executing {node: null}` for our prompt: every frame
    /// it had about the prompt has been fed (history settling the prompt does not count).
    pub(crate) fn socket_ended(&self) -> bool {
        self.socket_ended
    }

    /// The terminal event, once known.
    pub fn terminal(&self) -> Option<&Terminal> {
        self.terminal.as_ref()
    }

    /// Nodes served from cache.
    pub fn cached(&self) -> &[String] {
        &self.cached
    }

    /// The node timeline, in order of first appearance.
    pub fn timeline(&self) -> &[NodeTiming] {
        &self.nodes
    }

    /// The node running now.
    pub(crate) fn current_node(&self) -> Option<&NodeTiming> {
        self.current.map(|i| &self.nodes[i])
    }

    /// Frame counters.
    pub fn counts(&self) -> &FrameCounts {
        &self.counts
    }

    /// Session id announced by the server on this connection.
    pub fn sid(&self) -> Option<&str> {
        self.sid.as_deref()
    }

    /// Time our prompt started (first event about it).
    pub fn started_ms(&self) -> Option<u64> {
        self.started_ms
    }

    /// Time of `executing {node: null}`.
    pub(crate) fn finished_ms(&self) -> Option<u64> {
        self.finished_ms
    }

    /// Server epoch-ms timestamp of `execution_start`.
    pub fn server_start_timestamp(&self) -> Option<u64> {
        self.server_start_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: &str, data: Value) -> String {
        serde_json::json!({"type": kind, "data": data}).to_string()
    }

    #[test]
    fn follows_only_its_prompt() {
        let mut t = EventTracker::new("ours");
        t.feed_text(
            &frame("execution_start", serde_json::json!({"prompt_id": "other"})),
            1,
        );
        t.feed_text(
            &frame(
                "executing",
                serde_json::json!({"node": null, "prompt_id": "other"}),
            ),
            2,
        );
        assert!(!t.is_finished());
        assert_eq!(t.counts().others, 2);
        let ev = t.feed_text(
            &frame("execution_start", serde_json::json!({"prompt_id": "ours"})),
            3,
        );
        assert_eq!(ev, vec![TrackerEvent::Started]);
    }

    #[test]
    fn only_the_socket_ends_the_socket() {
        let mut t = EventTracker::new("p");
        let entry: HistoryEntry = serde_json::from_value(serde_json::json!({
            "prompt": [0, "p", {}, {}, []],
            "outputs": {},
            "status": {"status_str": "success", "completed": true, "messages": [
                ["execution_start", {"prompt_id": "p", "timestamp": 1}],
                ["execution_success", {"prompt_id": "p", "timestamp": 2}]
            ]}
        }))
        .unwrap();
        t.apply_history(&entry, 5);
        assert!(t.is_finished() && !t.socket_ended());
        t.feed_text(
            &frame(
                "executing",
                serde_json::json!({"node": null, "prompt_id": "p"}),
            ),
            6,
        );
        assert!(t.socket_ended());
    }

    #[test]
    fn garbage_frames_are_counted_and_ignored() {
        let mut t = EventTracker::new("p");
        assert!(t.feed_text("\u{0}not json", 1).is_empty());
        assert!(t.feed_text("[1,2]", 1).is_empty());
        assert_eq!(t.counts().unparsed, 2);
    }

    #[test]
    fn blocked_error_does_not_end_the_prompt() {
        let mut t = EventTracker::new("p");
        t.feed_text(
            &frame("execution_start", serde_json::json!({"prompt_id": "p"})),
            1,
        );
        let ev = t.feed_text(
            &frame(
                "execution_error",
                serde_json::json!({"prompt_id": "p", "node_id": "5", "node_type": "X",
                    "exception_type": "ExecutionBlocked", "exception_message": "stop", "traceback": []}),
            ),
            2,
        );
        assert!(matches!(ev[0], TrackerEvent::Blocked { .. }));
        assert!(t.terminal().is_none());
        t.feed_text(
            &frame("execution_success", serde_json::json!({"prompt_id": "p"})),
            3,
        );
        assert_eq!(
            t.terminal().map(Terminal::kind),
            Some(TerminalKind::Success)
        );
    }

    #[test]
    fn node_times_come_from_executing_order() {
        let mut t = EventTracker::new("p");
        for (ms, node) in [(10, "1"), (30, "2")] {
            t.feed_text(
                &frame(
                    "executing",
                    serde_json::json!({"node": node, "display_node": node, "prompt_id": "p"}),
                ),
                ms,
            );
        }
        t.feed_text(
            &frame("execution_success", serde_json::json!({"prompt_id": "p"})),
            70,
        );
        t.feed_text(
            &frame(
                "executing",
                serde_json::json!({"node": null, "prompt_id": "p"}),
            ),
            71,
        );
        let tl = t.timeline();
        assert_eq!(tl[0].duration_ms(), Some(20));
        assert_eq!(tl[1].duration_ms(), Some(40));
        assert!(t.is_finished());
    }
}
