//! The application façade: what a front end (the command line) calls to start a bisect session,
//! resume one, drive it to its end and say how it ended, plus the plan files and the look-ups of
//! sessions and runs in runs folders. It owns the wiring of a session — the per-server lock, the
//! preflight, the live backend, the stop signals (Ctrl-C, SIGTERM, SIGHUP), the hooks (progress
//! line and report rewrites), the reports at the end — and takes plain options (no
//! argument-parser types). It returns typed results; printing them is the caller's job, and
//! the caller supplies the progress display (a [`crate::session::progress::Progress`] handle on its own sink).

mod lookup;
mod mitigate;
mod plan;
mod session;
mod single_run;

pub use lookup::*;
pub use mitigate::*;
pub use plan::*;
pub use session::*;
pub use single_run::*;

/// What kind of failure stopped a façade call (the caller picks its exit code from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input: a session that cannot be found or read.
    Input,
    /// The work could not be done (lock held, journal not writable, driver error).
    Failed,
    /// The server could not be reached.
    Unreachable,
}

/// A failure of a façade call: its kind and the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl AppError {
    pub(crate) fn new(kind: ErrorKind, message: impl std::fmt::Display) -> AppError {
        AppError {
            kind,
            message: message.to_string(),
        }
    }
}

/// `Result` of the façade.
pub(crate) type AppResult<T> = Result<T, AppError>;

/// Gives an error a kind: `result.kind(ErrorKind::Input)?`.
pub(crate) trait Kind<T> {
    fn kind(self, kind: ErrorKind) -> AppResult<T>;
}

impl<T, E: std::fmt::Display> Kind<T> for Result<T, E> {
    fn kind(self, kind: ErrorKind) -> AppResult<T> {
        self.map_err(|e| AppError::new(kind, e))
    }
}
