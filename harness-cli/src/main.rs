//! The `harness` binary; see the `harness_cli` library for what it is made of.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    harness_cli::main_with(harness_cli::args::Cli::parse())
}
