//! `holdpoint`: see [`holdpoint_cli::Cli`].

use clap::Parser as _;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match holdpoint_cli::run(holdpoint_cli::Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // A refusal's message may quote what a runtime or a person wrote.
            eprintln!(
                "holdpoint: {}",
                holdpoint_cli::terminal::lines(&format!("{e:#}"))
            );
            std::process::ExitCode::FAILURE
        }
    }
}
