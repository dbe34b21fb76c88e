//! The `comfy-bisect` binary: parses arguments and hands over to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = comfy_bisect::cli::Cli::parse();
    comfy_bisect::cli::main(cli)
}
