//! comfy-bisect's client against servers: real WebSocket captures replayed, extra headers, the one
//! client every command connects through, `submit`, hostile answers and the fingerprint's reuse
//! (one test binary; each feature file is a module).

// `hostile_server` runs a prompt with a few of the simulator tests' helpers.
#[allow(dead_code)]
#[path = "../support/sim.rs"]
mod sim_support;

mod client_cli;
mod client_headers;
mod client_replay;
mod connect_cli;
mod fingerprint_reuse;
mod hostile_server;
mod server_discovery;
