//! Following our submitted prompt to its end. [`Follow`] is the state of the follow (limits,
//! reconnects, queue polling); its loop is a few small steps over that state:
//!
//! 1. [`Follow::finished`]: the socket (or history) ended our prompt;
//! 2. [`Follow::check_limits`]: the run, stall and queue limits, and the grace for the server to
//!    confirm an interrupt we sent;
//! 3. [`Follow::wait`] + [`Follow::on_wake`]: a frame, the next tick, or Ctrl-C;
//! 4. [`Follow::reconnect`]: a new socket after the old one closed (with backoff);
//! 5. [`Follow::poll`]: `GET /api/jobs/{id}` where the server has the jobs API (0.8.0 and
//!    later; found out by the first lookup), else `/queue`; and `/history` once the prompt ended
//!    or left the queue.
//!
//! The loop returns how the follow ended ([`End`]); `run/execute.rs` (`Runner::decide`) turns
//! that into the run's outcome.

use super::execute::{End, Runner};
use super::hang::ProgressMark;
use super::observer::RunEvent;
use super::record::{HangInfo, ServerLostInfo, TimeoutInfo, TimeoutReason};
use crate::comfy::protocol::{Job, JobLookup, JobStatus, QueuePosition};
use crate::comfy::{ClientError, WsConnection, WsFrame};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long the socket may take to deliver the rest of a prompt's frames once `/history` has
/// its entry (the frames are on their way by then; this bounds a socket that went silent).
const SOCKET_DRAIN: Duration = Duration::from_secs(5);

/// The first wait before reconnecting a closed socket (doubled per failure, up to 2 s).
const FIRST_RECONNECT_DELAY: Duration = Duration::from_millis(200);

/// How many `/history/{id}` answers in a row may fail (over at least the reconnect window)
/// while `/queue` no longer lists our prompt, before the server counts as lost: its end can
/// then never be known.
const HISTORY_ERRORS_IN_A_ROW: u32 = 5;

/// What ended a wait in the follow loop.
enum Wake {
    Frame(WsFrame),
    Tick,
    Cancel,
}

/// The state of following one prompt.
struct Follow<'r, 'a> {
    runner: &'r mut Runner<'a>,
    /// Ctrl-C; dropped once it fired.
    cancel: Option<watch::Receiver<bool>>,
    /// When `/queue` is checked next.
    next_poll: Instant,
    /// The last event for our prompt (or queue movement); the stall limit counts from here.
    last_activity: Instant,
    /// When our prompt was first seen running (the stall limit applies from then on).
    running_since: Option<Instant>,
    /// The progress of our prompt last seen (nodes started, running node, its step) and when
    /// it last changed: the hang limit (`--stall`) counts from there.
    progress: (ProgressMark, Instant),
    /// What the run limit (`--timeout`) counts from: the submission, moved on to each `/queue`
    /// answer that shows our prompt pending. A prompt that is never seen running, because the
    /// socket and `/queue` say nothing, still meets the deadline.
    run_clock: Instant,
    /// Failed `/history/{id}` answers in a row, and when the first of them came.
    history_errors: (u32, Option<Instant>),
    /// When following began; the queue limit counts from here until the prompt runs.
    pending_since: Instant,
    /// Since when HTTP has been unreachable.
    unreachable_since: Option<Instant>,
    /// When the socket closed (None while one is open or after a reconnect).
    socket_lost_at: Option<Instant>,
    /// When the next reconnect is tried.
    next_reconnect: Instant,
    /// The wait after the next failed reconnect.
    reconnect_delay: Duration,
    /// "WebSocket still unavailable" was noted.
    polling_only_warned: bool,
    /// History can lag the queue (it does on some servers and in the simulator's slow-history
    /// fault), so a prompt counts as vanished only after it stayed missing for a while: how
    /// many polls found it in neither, since when.
    vanished: Option<(u32, Instant)>,
    /// An end waiting for the server to confirm our interrupt (or dequeue), with its deadline.
    ending: Option<(End, Instant)>,
    /// The queue position last reported to the observer.
    last_ahead: Option<usize>,
}

impl Runner<'_> {
    /// Follows our submitted prompt until it ends, a limit passes, the user cancels or the
    /// server is lost.
    pub(super) async fn follow(&mut self) -> End {
        let cancel = self.take_cancel();
        if cancel.as_ref().is_some_and(|c| *c.borrow()) {
            // Ctrl-C came before the prompt was even submitted.
            let removed = self.stop_our_prompt().await;
            return End::Cancelled { removed };
        }
        Follow::new(self, cancel).run().await
    }

    /// Removes our prompt from the queue if it waits, and interrupts it if it runs. Both calls
    /// name our prompt id, so other clients' prompts are never touched. Returns true when the
    /// prompt was still pending and got removed.
    async fn stop_our_prompt(&mut self) -> bool {
        let mut removed = false;
        if !self.state().submitted() {
            return false;
        }
        if let Some(removed) = self.cancel_through_jobs_api().await {
            self.flush_http();
            return removed;
        }
        let (client, id) = (self.state().client(), self.state().prompt_id());
        if let Ok(q) = client.queue().await {
            if let QueuePosition::Pending { .. } = q.position(id) {
                if client.delete_from_queue(&[id]).await.is_ok() {
                    removed = matches!(
                        client.queue().await.map(|q| q.position(id)),
                        Ok(QueuePosition::Absent)
                    );
                }
            }
        }
        if !removed {
            let (client, id) = (self.state().client(), self.state().prompt_id());
            if let Err(e) = client.interrupt(id).await {
                self.warn(format!("POST /interrupt for our prompt failed: {e}"));
            }
        }
        self.note(if removed {
            "removed our pending prompt from the queue"
        } else {
            "sent POST /interrupt {prompt_id} for our prompt"
        });
        self.flush_http();
        removed
    }

    /// `POST /api/jobs/{id}/cancel` (late-2026 servers: it dequeues a pending job or
    /// interrupts the running one). `None` when the server has no such route (0.8.0 answers
    /// 405, 0.3.x 404) or the call failed: the caller falls back to `/queue` + `/interrupt`.
    /// `Some(true)` when the job was pending and is gone from the server afterwards.
    async fn cancel_through_jobs_api(&mut self) -> Option<bool> {
        if self.state().apis().cancel == Some(false) {
            return None;
        }
        let (client, id) = (self.state().client(), self.state().prompt_id());
        match client.cancel_job(id).await {
            Ok(Some(cancelled)) => {
                // A dequeued job leaves no trace; an interrupted one ends in history.
                let removed = cancelled
                    && self.state().tracker().started_ms().is_none()
                    && matches!(client.job(id).await, Ok(JobLookup::NotFound));
                self.state_mut().cancel_api_found(true);
                self.note(&format!(
                    "sent POST /api/jobs/{{id}}/cancel for our prompt (cancelled: {cancelled}{})",
                    if removed {
                        ", removed from the queue"
                    } else {
                        ""
                    }
                ));
                Some(removed)
            }
            Ok(None) => {
                self.state_mut().cancel_api_found(false);
                None
            }
            Err(e) => {
                self.warn(format!(
                    "POST /api/jobs/{{id}}/cancel failed ({e}); using /queue and /interrupt"
                ));
                None
            }
        }
    }

    /// Reads our socket until it sends `executing {node: null}` for our prompt (or closes, or
    /// [`SOCKET_DRAIN`] passes). Called when `/history` says the prompt is over while the
    /// socket has not said so yet: the server writes the history entry before its last frames
    /// go out, and frames received but not yet read would otherwise never reach the timeline,
    /// so the stage would depend on which of the two answered first. Only the first socket
    /// (the one named in `client_id`) gets our prompt's frames; after a reconnect there is
    /// nothing to wait for.
    async fn drain_socket(&mut self) {
        if self.state().tracker().socket_ended() || !self.state().on_first_socket() {
            return;
        }
        let deadline = tokio::time::Instant::now() + SOCKET_DRAIN;
        while !self.state().tracker().socket_ended() {
            let Some(sock) = self.state_mut().socket_mut() else {
                return;
            };
            match tokio::time::timeout_at(deadline, sock.next_frame()).await {
                Ok(frame) => {
                    let closed = matches!(frame, WsFrame::Closed(_));
                    self.handle_frame(frame);
                    if closed {
                        self.state_mut().take_socket();
                    }
                }
                Err(_) => {
                    self.warn(drain_timeout_warning(SOCKET_DRAIN));
                    return;
                }
            }
        }
    }
}

impl<'r, 'a> Follow<'r, 'a> {
    fn new(runner: &'r mut Runner<'a>, cancel: Option<watch::Receiver<bool>>) -> Self {
        let now = Instant::now();
        Follow {
            runner,
            cancel,
            next_poll: now,
            last_activity: now,
            running_since: None,
            progress: (ProgressMark::default(), now),
            run_clock: now,
            history_errors: (0, None),
            pending_since: now,
            unreachable_since: None,
            socket_lost_at: None,
            next_reconnect: now,
            reconnect_delay: FIRST_RECONNECT_DELAY,
            polling_only_warned: false,
            vanished: None,
            ending: None,
            last_ahead: None,
        }
    }

    /// The loop: every pass is bounded by the next poll or reconnect time.
    async fn run(mut self) -> End {
        loop {
            if let Some(end) = self.finished() {
                return end;
            }
            if let Some(end) = self.check_limits().await {
                return end;
            }
            let wake = self.wait().await;
            self.on_wake(wake).await;
            let now = Instant::now();
            self.reconnect(now).await;
            if let Some(end) = self.poll(now).await {
                return end;
            }
        }
    }

    /// The prompt's end came: the end we were waiting to confirm, or [`End::Finished`].
    fn finished(&mut self) -> Option<End> {
        if !self.runner.state().tracker().is_finished() {
            return None;
        }
        Some(self.ending.take().map(|(e, _)| e).unwrap_or(End::Finished))
    }

    /// Starts the run limit once the prompt runs; interrupts our prompt when a limit passed;
    /// ends the follow when the server did not confirm an interrupt within its grace.
    async fn check_limits(&mut self) -> Option<End> {
        let now = Instant::now();
        if self.runner.state().tracker().started_ms().is_some() && self.running_since.is_none() {
            self.running_since = Some(now);
            self.progress.1 = self.progress.1.max(now);
        }
        match &self.ending {
            Some((_, deadline)) if now >= *deadline => {
                let (end, _) = self.ending.take().expect("checked");
                self.runner
                    .note("the server did not confirm the interrupt in time");
                Some(end)
            }
            Some(_) => None,
            None => {
                if let Some(limit) = self.hang_passed(now) {
                    self.hang(limit, now).await;
                } else if let Some((reason, limit)) = self.limit_passed(now) {
                    self.time_out(reason, limit, now).await;
                }
                None
            }
        }
    }

    /// The run, stall or queue limit that passed, with its length.
    fn limit_passed(&self, now: Instant) -> Option<(TimeoutReason, Duration)> {
        let (req, state) = (self.runner.request(), self.runner.state());
        if now - self.run_clock > req.timeout {
            return Some((TimeoutReason::Run, req.timeout));
        }
        match self.running_since {
            // Only the first socket (the one named in client_id) receives our prompt's events;
            // after a reconnect silence proves nothing.
            Some(_)
                if state.socket().is_some()
                    && state.on_first_socket()
                    && now - self.last_activity > req.stall_timeout =>
            {
                Some((TimeoutReason::Stall, req.stall_timeout))
            }
            None if now - self.pending_since > req.queue_timeout => {
                Some((TimeoutReason::Queue, req.queue_timeout))
            }
            _ => None,
        }
    }

    /// The hang limit (`--stall`) when our running prompt made no progress for that long. As
    /// for the stall timeout, only the first socket gets our prompt's frames: after a
    /// reconnect, silence proves nothing.
    fn hang_passed(&self, now: Instant) -> Option<Duration> {
        let (req, state) = (self.runner.request(), self.runner.state());
        let limit = req.stall?;
        (self.running_since.is_some()
            && state.socket().is_some()
            && state.on_first_socket()
            && now - self.progress.1 > limit)
            .then_some(limit)
    }

    /// Our prompt hung: interrupts it and waits for the server to confirm within the grace
    /// (a server that ignores it is restarted by the session through `--restart-cmd`).
    async fn hang(&mut self, limit: Duration, now: Instant) {
        let tracker = self.runner.state().tracker();
        let node = tracker.current_node();
        let last_node = node
            .map(|n| n.node_id.clone())
            .or_else(|| self.runner.last_node());
        let progress = node.and_then(|n| n.progress);
        let node_type = last_node.as_deref().and_then(|id| {
            self.runner
                .request()
                .workflow
                .node(id)
                .map(|n| n.class_type.clone())
        });
        self.runner.warn(format!(
            "hang: no progress and no node change for {}s (--stall) at node {}{}: interrupting \
             our prompt",
            limit.as_secs_f64(),
            last_node.as_deref().unwrap_or("?"),
            progress
                .as_ref()
                .map(|p| format!(", step {}/{}", p.value, p.max))
                .unwrap_or_default()
        ));
        let removed = self.runner.stop_our_prompt().await;
        let info = HangInfo {
            limit_ms: limit.as_millis() as u64,
            last_node,
            node_type,
            step: progress.as_ref().map(|p| p.value as u64),
            max_steps: progress.as_ref().map(|p| p.max as u64),
            interrupt_sent: true,
            interrupt_confirmed: removed,
        };
        self.ending = Some((End::Hang(info), now + self.runner.request().interrupt_grace));
        self.next_poll = now;
    }

    /// Interrupts (or dequeues) our prompt for a passed limit and waits for the server to
    /// confirm within the interrupt grace.
    async fn time_out(&mut self, reason: TimeoutReason, limit: Duration, now: Instant) {
        self.runner.warn(format!(
            "{} timeout after {}s: interrupting our prompt",
            match reason {
                TimeoutReason::Run => "run",
                TimeoutReason::Stall => "stall (no event)",
                TimeoutReason::Queue => "queue",
            },
            limit.as_secs_f64()
        ));
        let removed = self.runner.stop_our_prompt().await;
        let info = TimeoutInfo {
            reason,
            limit_ms: limit.as_millis() as u64,
            last_node: self.runner.last_node(),
            interrupt_sent: true,
            interrupt_confirmed: removed,
        };
        self.ending = Some((
            End::Timeout(info),
            now + self.runner.request().interrupt_grace,
        ));
        self.next_poll = now;
    }

    /// Waits for a frame, the next poll (or reconnect) time, or Ctrl-C.
    async fn wait(&mut self) -> Wake {
        let wake_at = if self.runner.state().socket().is_none() {
            self.next_poll.min(self.next_reconnect)
        } else {
            self.next_poll
        };
        tokio::select! {
            f = next_frame(self.runner.state_mut().socket_mut()) => Wake::Frame(f),
            _ = tokio::time::sleep_until(wake_at.into()) => Wake::Tick,
            _ = cancelled(&mut self.cancel) => Wake::Cancel,
        }
    }

    async fn on_wake(&mut self, wake: Wake) {
        match wake {
            Wake::Frame(frame) => self.on_frame(frame),
            Wake::Cancel => self.on_cancel().await,
            Wake::Tick => {}
        }
    }

    /// A frame: our prompt's events count as activity; a close starts reconnecting.
    fn on_frame(&mut self, frame: WsFrame) {
        let ours = self.runner.state().tracker().counts().ours;
        let closed = matches!(frame, WsFrame::Closed(_));
        self.runner.handle_frame(frame);
        if self.runner.state().tracker().counts().ours > ours {
            self.last_activity = Instant::now();
        }
        let mark = ProgressMark::of(self.runner.state().tracker());
        if mark != self.progress.0 {
            self.progress = (mark, Instant::now());
        }
        if closed {
            self.runner.state_mut().socket_lost();
            self.socket_lost_at = Some(Instant::now());
            self.next_reconnect = Instant::now();
            self.reconnect_delay = FIRST_RECONNECT_DELAY;
            self.next_poll = Instant::now();
        }
    }

    /// Ctrl-C: stops our prompt only, and waits (briefly) for the server to confirm.
    async fn on_cancel(&mut self) {
        self.cancel = None;
        if self.ending.is_none() {
            self.runner
                .warn("cancelled by the user: interrupting our prompt only".into());
            let removed = self.runner.stop_our_prompt().await;
            self.ending = Some((
                End::Cancelled { removed },
                Instant::now()
                    + self
                        .runner
                        .request()
                        .interrupt_grace
                        .min(Duration::from_secs(10)),
            ));
            self.next_poll = Instant::now();
        }
    }

    /// Tries a new socket when the old one closed and the backoff has passed.
    async fn reconnect(&mut self, now: Instant) {
        if self.runner.state().socket().is_some() || now < self.next_reconnect {
            return;
        }
        match self.runner.open_socket().await {
            Ok(()) => {
                let n = self.runner.state().sockets_opened() - 1;
                self.runner.warn(format!(
                    "WebSocket reconnected with a new clientId (socket {n}); our prompt's \
                     events still go to the old one, so the run is followed through /queue \
                     and /history (the stall timeout no longer applies)"
                ));
                self.socket_lost_at = None;
                self.next_poll = Instant::now();
            }
            Err(e) => {
                self.next_reconnect = Instant::now() + self.reconnect_delay;
                self.reconnect_delay = (self.reconnect_delay * 2).min(Duration::from_secs(2));
                let down_for = self.socket_lost_at.map(|t| t.elapsed()).unwrap_or_default();
                if down_for > self.runner.request().reconnect_window && !self.polling_only_warned {
                    self.polling_only_warned = true;
                    self.runner
                        .note(&format!("WebSocket still unavailable: {e}"));
                }
            }
        }
    }

    /// Checks `/queue` when it is time and the socket alone cannot be trusted (no socket, an
    /// end to confirm, not yet running, or quiet for two poll intervals).
    async fn poll(&mut self, now: Instant) -> Option<End> {
        if now < self.next_poll {
            return None;
        }
        let poll = self.runner.request().poll_interval;
        self.next_poll = now + poll;
        let quiet = now.duration_since(self.last_activity) >= poll * 2;
        let want_poll = self.runner.state().socket().is_none()
            || self.ending.is_some()
            || self.running_since.is_none()
            || quiet;
        if !want_poll {
            return None;
        }
        let end = self.poll_queue(now).await;
        self.runner.flush_http();
        end
    }

    /// One status lookup: `GET /api/jobs/{id}` while the server has the jobs API, else
    /// `GET /queue`; then `GET /history` when our prompt ended or is not in the queue.
    async fn poll_queue(&mut self, now: Instant) -> Option<End> {
        if self.runner.state().apis().jobs != Some(false) {
            let state = self.runner.state();
            let lookup = state.client().job(state.prompt_id()).await;
            let found = matches!(lookup, Ok(JobLookup::Found(_) | JobLookup::NotFound));
            if let Some(sent) = self.runner.state().renamed_from().filter(|_| found) {
                // A server with the jobs API keeps a client's prompt id (issue #39).
                return Some(End::Protocol(format!(
                    "the server has the jobs API, which keeps a client's prompt id, yet it \
                     accepted our prompt {sent} as {:?}",
                    self.runner.state().prompt_id()
                )));
            }
            match lookup {
                Ok(JobLookup::Found(job)) if job.id != self.runner.state().prompt_id() => {
                    let answer = serde_json::to_value(&*job).unwrap_or_default();
                    return Some(End::Protocol(format!(
                        "GET /api/jobs/{} answered another job: {}",
                        self.runner.state().prompt_id(),
                        super::execute::quoted(&answer)
                    )));
                }
                Ok(JobLookup::Found(job)) => {
                    self.unreachable_since = None;
                    self.runner.state_mut().jobs_api_found(true);
                    return self.on_job(*job, now).await;
                }
                Ok(JobLookup::NotFound) => {
                    self.unreachable_since = None;
                    self.runner.state_mut().jobs_api_found(true);
                    return self.poll_history(now).await;
                }
                Ok(JobLookup::NoJobsApi) => {
                    self.runner.state_mut().jobs_api_found(false);
                    self.runner.note(
                        "the server has no jobs API (GET /api/jobs/{id}: 404): following our \
                         prompt through /queue and /history",
                    );
                }
                Err(e) if e.is_unreachable() => return self.on_unreachable(e, now),
                Err(e) => self
                    .runner
                    .note(&format!("GET /api/jobs/{{id}} failed: {e}; trying /queue")),
            }
        }
        self.poll_queue_only(now).await
    }

    /// Our job's status from the jobs API: running, waiting (its place comes from `/queue`,
    /// which the jobs API does not give), or over (its `/history` entry is merged).
    async fn on_job(&mut self, job: Job, now: Instant) -> Option<End> {
        match job.status {
            JobStatus::InProgress => {
                self.vanished = None;
                self.running_since.get_or_insert(now);
                None
            }
            JobStatus::Pending => self.poll_queue_only(now).await,
            JobStatus::Completed | JobStatus::Failed => self.poll_history(now).await,
            JobStatus::Unknown => self.poll_queue_only(now).await,
        }
    }

    /// One `GET /queue`, and `GET /history` when our prompt is not in the queue.
    async fn poll_queue_only(&mut self, now: Instant) -> Option<End> {
        let answer = self.runner.state().client().queue().await;
        match answer {
            Ok(q) => {
                self.unreachable_since = None;
                match q.position(self.runner.state().prompt_id()) {
                    QueuePosition::Running => {
                        self.vanished = None;
                        self.running_since.get_or_insert(now);
                        None
                    }
                    QueuePosition::Pending { ahead } => {
                        self.on_pending(ahead, now);
                        None
                    }
                    QueuePosition::Absent => self.poll_history(now).await,
                }
            }
            Err(e) if e.is_unreachable() => self.on_unreachable(e, now),
            Err(e) => {
                self.runner.note(&format!("GET /queue failed: {e}"));
                None
            }
        }
    }

    /// Our prompt waits behind others: not a stall; the observer hears of a new position.
    fn on_pending(&mut self, ahead: usize, now: Instant) {
        self.vanished = None;
        self.last_activity = now;
        self.run_clock = now;
        self.runner.saw_ahead(ahead);
        if self.last_ahead != Some(ahead) {
            self.last_ahead = Some(ahead);
            self.runner.event(&RunEvent::Queued { ahead });
        }
    }

    /// Our prompt left the queue: its history entry is merged, or it went missing.
    async fn poll_history(&mut self, now: Instant) -> Option<End> {
        let state = self.runner.state();
        let answer = state.client().history(state.prompt_id()).await;
        if answer.is_ok() && self.history_errors.0 > 0 {
            let failed = self.history_errors.0;
            self.history_errors.0 = 0;
            self.history_errors.1 = None;
            self.runner.note(&format!(
                "GET /history answered again after failing {failed} time(s) in a row"
            ));
        }
        match answer {
            Ok(Some(entry)) => {
                // History can answer before the frames the socket already carries were read:
                // read them first, so the progress they hold is in the timeline.
                self.runner.drain_socket().await;
                self.runner.keep_history(entry);
                None
            }
            Ok(None) => self.on_missing(now),
            Err(e) => self.on_history_error(e, now),
        }
    }

    /// A failed `/history/{id}` while `/queue` no longer lists our prompt: counted (the first
    /// of a series is noted, not every one), and once [`HISTORY_ERRORS_IN_A_ROW`] failed over
    /// at least the reconnect window, the server counts as lost — the prompt's end can never
    /// be learnt. An end waiting for confirmation keeps its own grace.
    fn on_history_error(&mut self, e: ClientError, now: Instant) -> Option<End> {
        let (in_a_row, since) = &mut self.history_errors;
        *in_a_row += 1;
        let since = *since.get_or_insert(now);
        let in_a_row = *in_a_row;
        if in_a_row == 1 {
            self.runner.note(&format!("GET /history failed: {e}"));
        }
        let failing_for = now - since;
        if self.ending.is_some()
            || in_a_row < HISTORY_ERRORS_IN_A_ROW
            || failing_for < self.runner.request().reconnect_window
        {
            return None;
        }
        Some(End::Lost(ServerLostInfo {
            reason: format!(
                "our prompt left /queue but GET /history/{{id}} failed {in_a_row} times in a \
                 row over {:.1}s, so its end cannot be known (last error: {e})",
                failing_for.as_secs_f64()
            ),
            submitted: true,
            last_node: self.runner.last_node(),
        }))
    }

    /// Our prompt is in neither `/queue` nor `/history`: the end we were waiting to confirm,
    /// or lost once it stayed missing for the reconnect window.
    fn on_missing(&mut self, now: Instant) -> Option<End> {
        let (count, since) = self.vanished.get_or_insert((0, now));
        *count += 1;
        let (count, missing_for) = (*count, now - *since);
        if let Some((end, _)) = self.ending.take() {
            // Removed from the queue by us, or interrupted before it started: nothing more
            // will come.
            return Some(match end {
                End::Timeout(mut info) => {
                    info.interrupt_confirmed = true;
                    End::Timeout(info)
                }
                other => other,
            });
        }
        if count >= 2 && missing_for >= self.runner.request().reconnect_window {
            return Some(End::Lost(ServerLostInfo {
                reason: "our prompt vanished: it is neither in /queue nor in /history (the \
                         server restarted or someone deleted it)"
                    .into(),
                submitted: true,
                last_node: self.runner.last_node(),
            }));
        }
        None
    }

    /// HTTP is unreachable: the server counts as lost once the socket is gone too and HTTP
    /// stayed unreachable for the reconnect window.
    fn on_unreachable(&mut self, e: ClientError, now: Instant) -> Option<End> {
        let since = *self.unreachable_since.get_or_insert(now);
        let down_for = now.duration_since(since);
        if self.runner.state().socket().is_none()
            && down_for > self.runner.request().reconnect_window
        {
            return Some(End::Lost(ServerLostInfo {
                reason: format!(
                    "the WebSocket closed and HTTP has been unreachable for {}s: {e}",
                    down_for.as_secs()
                ),
                submitted: true,
                last_node: self.runner.last_node(),
            }));
        }
        None
    }
}

/// The warning when the socket did not end our prompt within `limit` of `/history` doing so.
fn drain_timeout_warning(limit: Duration) -> String {
    format!(
        "/history says the prompt is over, but the socket did not end it within {}s; its \
         remaining frames (step progress) may be missing",
        limit.as_secs()
    )
}

async fn next_frame(sock: Option<&mut WsConnection>) -> WsFrame {
    match sock {
        Some(s) => s.next_frame().await,
        None => std::future::pending().await,
    }
}

async fn cancelled(rx: &mut Option<watch::Receiver<bool>>) {
    match rx {
        Some(r) => loop {
            if *r.borrow_and_update() {
                return;
            }
            if r.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_warning_is_one_sentence_with_single_spaces() {
        let text = drain_timeout_warning(Duration::from_secs(5));
        assert_eq!(
            text,
            "/history says the prompt is over, but the socket did not end it within 5s; its \
             remaining frames (step progress) may be missing"
        );
        assert!(!text.contains("  "), "{text:?}");
    }
}
