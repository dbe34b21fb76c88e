//! What the phases of one run share about our prompt on the server: the recording client, the
//! prompt id, the socket, the event tracker, the `/history` entry and which routes the server
//! has. [`Runner`](super::execute) owns one [`FollowState`]; the submit and follow phases
//! (`run/execute.rs`, `run/follow.rs`) borrow it through its methods, so no phase reaches into
//! another's fields.

use crate::comfy::events::EventTracker;
use crate::comfy::protocol::HistoryEntry;
use crate::comfy::{Client, WsConnection};

/// Which optional routes the server has, learnt by the first call of each (`None` until then).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ServerApis {
    /// `GET /api/jobs/{id}` (ComfyUI 0.8.0 and later).
    pub jobs: Option<bool>,
    /// `POST /api/jobs/{id}/cancel`.
    pub cancel: Option<bool>,
}

/// Our prompt on the server as the run has seen it so far.
pub(super) struct FollowState {
    /// The client that records every HTTP exchange of the run.
    client: Client,
    /// Our prompt's id (the server may rename it when it accepts the prompt).
    prompt_id: String,
    /// The id we sent, when the server renamed our prompt (an older server ignores a client's
    /// id; one with the jobs API never does).
    renamed_from: Option<String>,
    /// The prompt's events, from the socket and `/history`.
    tracker: EventTracker,
    /// The open socket, if any.
    sock: Option<WsConnection>,
    /// Sockets opened so far (only the first one, named in `client_id`, gets our events).
    sockets_opened: u32,
    /// A socket closed during the run (console lines may be missing).
    socket_dropped: bool,
    /// `POST /prompt` was accepted (or the prompt was found queued anyway).
    submitted: bool,
    /// Our prompt's `/history` entry, once merged.
    history: Option<HistoryEntry>,
    /// Which optional routes the server has.
    apis: ServerApis,
}

impl FollowState {
    /// The state before anything was sent: `client` records the exchanges, `prompt_id` is ours.
    pub(super) fn new(client: Client, prompt_id: String) -> FollowState {
        FollowState {
            client,
            tracker: EventTracker::new(&prompt_id),
            prompt_id,
            renamed_from: None,
            sock: None,
            sockets_opened: 0,
            socket_dropped: false,
            submitted: false,
            history: None,
            apis: ServerApis::default(),
        }
    }

    /// The recording client.
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// Our prompt's id.
    pub(super) fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    /// The server accepted our prompt under another id: follow that one from now on.
    pub(super) fn renamed(&mut self, prompt_id: String) {
        self.tracker = EventTracker::new(&prompt_id);
        let ours = std::mem::replace(&mut self.prompt_id, prompt_id);
        self.renamed_from.get_or_insert(ours);
    }

    /// The id we sent, when the server accepted our prompt under another.
    pub(super) fn renamed_from(&self) -> Option<&str> {
        self.renamed_from.as_deref()
    }

    /// The prompt's events so far.
    pub(super) fn tracker(&self) -> &EventTracker {
        &self.tracker
    }

    /// The tracker, to feed it frames or the history entry.
    pub(super) fn tracker_mut(&mut self) -> &mut EventTracker {
        &mut self.tracker
    }

    /// The open socket, if any.
    pub(super) fn socket(&self) -> Option<&WsConnection> {
        self.sock.as_ref()
    }

    /// The open socket, to read from it.
    pub(super) fn socket_mut(&mut self) -> Option<&mut WsConnection> {
        self.sock.as_mut()
    }

    /// Counts a socket being opened; returns its number (0 for the first).
    pub(super) fn count_socket(&mut self) -> u32 {
        self.sockets_opened += 1;
        self.sockets_opened - 1
    }

    /// Keeps the socket that was just opened.
    pub(super) fn keep_socket(&mut self, sock: WsConnection) {
        self.sock = Some(sock);
    }

    /// Takes the socket away (to close it, or because it closed while draining).
    pub(super) fn take_socket(&mut self) -> Option<WsConnection> {
        self.sock.take()
    }

    /// The socket closed during the run: it is gone, and later console lines may be missing.
    pub(super) fn socket_lost(&mut self) {
        self.sock = None;
        self.socket_dropped = true;
    }

    /// True once a socket closed during the run.
    pub(super) fn socket_dropped(&self) -> bool {
        self.socket_dropped
    }

    /// How many sockets were opened.
    pub(super) fn sockets_opened(&self) -> u32 {
        self.sockets_opened
    }

    /// True while the only socket ever opened is the first: the one named in the prompt's
    /// `client_id`, which alone receives our prompt's events (after a reconnect, silence on
    /// the socket proves nothing).
    pub(super) fn on_first_socket(&self) -> bool {
        self.sockets_opened == 1
    }

    /// Whether the server has our prompt.
    pub(super) fn submitted(&self) -> bool {
        self.submitted
    }

    /// The server has our prompt.
    pub(super) fn mark_submitted(&mut self) {
        self.submitted = true;
    }

    /// The merged `/history` entry, if any.
    pub(super) fn history(&self) -> Option<&HistoryEntry> {
        self.history.as_ref()
    }

    /// Merges our prompt's `/history` entry into the tracker and keeps it; the tracker's
    /// warning when the entry disagrees with the socket.
    pub(super) fn merge_history(&mut self, entry: HistoryEntry, t_ms: u64) -> Option<String> {
        let warning = self.tracker.apply_history(&entry, t_ms);
        self.history = Some(entry);
        warning
    }

    /// Takes the history entry (for the record).
    pub(super) fn take_history(&mut self) -> Option<HistoryEntry> {
        self.history.take()
    }

    /// Which optional routes the server has, as far as known.
    pub(super) fn apis(&self) -> ServerApis {
        self.apis
    }

    /// A call found out whether the server has `GET /api/jobs/{id}`.
    pub(super) fn jobs_api_found(&mut self, has: bool) {
        self.apis.jobs = Some(has);
    }

    /// A call found out whether the server has `POST /api/jobs/{id}/cancel`.
    pub(super) fn cancel_api_found(&mut self, has: bool) {
        self.apis.cancel = Some(has);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comfy::ExtraHeaders;

    fn state() -> FollowState {
        let client = Client::new("http://127.0.0.1:8188", ExtraHeaders::new()).unwrap();
        FollowState::new(client, "a".into())
    }

    #[test]
    fn a_renamed_prompt_is_tracked_under_its_new_id() {
        let mut s = state();
        assert_eq!(s.tracker().prompt_id(), "a");
        s.renamed("b".into());
        assert_eq!((s.prompt_id(), s.tracker().prompt_id()), ("b", "b"));
    }

    #[test]
    fn only_the_first_socket_is_the_one_named_in_the_prompt() {
        let mut s = state();
        assert!(!s.on_first_socket());
        assert_eq!(s.count_socket(), 0);
        assert!(s.on_first_socket() && !s.socket_dropped());
        s.socket_lost();
        assert!(s.socket_dropped() && s.socket().is_none());
        assert_eq!(s.count_socket(), 1);
        assert_eq!(s.sockets_opened(), 2);
        assert!(!s.on_first_socket());
    }

    #[test]
    fn what_a_call_found_out_about_the_routes_is_kept() {
        let mut s = state();
        assert_eq!(s.apis(), ServerApis::default());
        s.jobs_api_found(true);
        s.cancel_api_found(false);
        assert_eq!(
            s.apis(),
            ServerApis {
                jobs: Some(true),
                cancel: Some(false)
            }
        );
    }
}
