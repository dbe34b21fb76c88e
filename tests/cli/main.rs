//! The commands as a user runs them through the binary: `check` under `git bisect run`, pipes,
//! completions and help, `demo`, `hash-files`, careless and hostile input, several runs folders,
//! workflows read from the files ComfyUI saved,
//! `mitigate`, `plan`, `simulate` and the README's recipes (one test binary; each feature file is a
//! module).

// Only through `report_support`.
#[allow(dead_code)]
#[path = "../support/records.rs"]
mod record_builders;
// `hostile_text` reads a bundle with `unzip`; the fixtures are the report tests'.
#[allow(dead_code)]
#[path = "../support/report.rs"]
mod report_support;
// The session tests' simulator and runner; the CLI tests need most, not all, of it.
#[allow(dead_code)]
#[path = "../support/session.rs"]
mod session_support;

mod args_cli;
mod check_cli;
mod cli_pipes;
mod completions_cli;
mod demo_cli;
mod hashing_cli;
mod hostile_cli;
mod hostile_text;
mod machines_cli;
mod media_cli;
mod mitigate_cli;
mod plan_cli;
mod readme_recipes;
mod sim_cli;
