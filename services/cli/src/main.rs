//! `holdpoint`: see [`holdpoint_cli::Cli`].

use clap::Parser as _;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match holdpoint_cli::run(holdpoint_cli::Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("holdpoint: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
