//! The ComfyUI client: HTTP calls, the WebSocket, and the event follower. Every protocol fact
//! (routes, message types and fields, error shapes) lives in [`protocol`] and nowhere else.

pub mod client;
pub mod console;
pub mod container;
pub(crate) mod error;
pub mod events;
pub(crate) mod fingerprint;
pub(crate) mod headers;
pub mod media;
pub(crate) mod memory_summary;
pub mod protocol;
pub(crate) mod ws;

pub use client::{
    Client, HttpExchange, Recorder, Submitted, ViewFile, ViewHead, ViewRead,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use console::{MemoryEvent, VaeStage};
pub use error::ClientError;
pub use events::{EventTracker, FrameCounts, NodeTiming, Progress, TerminalKind, TrackerEvent};
pub use fingerprint::{Fingerprint, Fingerprinter};
pub use headers::{ExtraHeaders, HeaderError, HEADERS_ENV};
pub use protocol::{
    Device, ExecutionError, ExecutionInterrupted, HistoryEntry, Job, JobLookup, JobStatus,
    LogEntry, LogsData, PromptRejection, QueuePosition, QueueState, SystemStats, Terminal,
};
pub(crate) use ws::{WsConnection, WsFrame};
