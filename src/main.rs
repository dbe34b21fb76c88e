//! The `comfy-bisect` binary: parses arguments and hands over to the library.

fn main() -> std::process::ExitCode {
    let cli = comfy_bisect::cli::Cli::parse_args();
    comfy_bisect::cli::main(cli)
}
