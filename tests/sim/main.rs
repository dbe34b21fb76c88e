//! The in-tree ComfyUI simulator against the real captures, and comfy-bisect's run of one prompt
//! against it: protocol, faults, memory, profiles, validation, console and product (one test
//! binary; each feature file is a module).

// `sim_profile_2026` bisects on both profiles with a few of the session tests' helpers.
#[allow(dead_code)]
#[path = "../support/session.rs"]
mod session_support;
#[path = "../support/sim.rs"]
mod sim_support;

mod console_sim;
mod product_sim;
mod run_sim;
mod sim_faults;
mod sim_memory;
mod sim_object_info;
mod sim_profile_2026;
mod sim_protocol;
mod sim_validation;
mod video_product_sim;
