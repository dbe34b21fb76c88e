//! The `comfy-bisect` command line: one module per subcommand (arguments → options → a call
//! into `comfy-bisect-core` → printing) and the exit codes it promises. The binary
//! (`src/main.rs`) only parses arguments and calls [`cli::main`].

pub mod cli;
pub mod error;
