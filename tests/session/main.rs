//! Bisection sessions end to end from the command line against the in-tree simulator: one
//! scenario per verdict, kills, signals, deadlines, hangs, crashes, flaky repeats, environment,
//! hashes, host memory, pressure, products, `--search-steps`, UI workflows and old journals (one
//! test binary; each feature file is a module).

// Off Linux the helpers of the process-level tests below (kills, signals, /proc) go unused.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[path = "../support/session.rs"]
mod session_support;

mod fallback_session;
mod journal_compat;
mod pressure_session;
mod product_session;
mod search_steps;
mod session_crash;
mod session_deadline;
mod session_env;
mod session_flaky;
mod session_hang;
mod session_hashes;
mod session_recheck;
// Each test of these three needs Linux's /proc or Unix signals: the modules are left out elsewhere.
#[cfg(target_os = "linux")]
mod session_hostmem;
#[cfg(unix)]
mod session_kill;
#[cfg(unix)]
mod session_signals;
mod session_sim;
mod session_ui;
mod video_product_session;
