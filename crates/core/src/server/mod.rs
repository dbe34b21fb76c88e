//! Operations on the ComfyUI server a session runs on, outside one run: the per-server lock
//! (`lock`: one bisection per GPU), the restart command (`restart`: `--restart-cmd`, waiting for
//! the server) and relaunching it with changed memory flags for a server control and putting
//! it back (`relaunch`: `--launch-cmd`; the flags it may carry and how they are checked: `flags`).

pub(crate) mod flags;
pub mod lock;
pub(crate) mod relaunch;
pub(crate) mod restart;
