//! `holdpoint`: see [`holdpoint_cli::Cli`].

use clap::Parser as _;

/// With the `dhat-heap` feature every allocation goes through dhat, which writes
/// `dhat-heap.json` (open it in dhat's viewer) when `main` returns.
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    #[cfg(feature = "dhat-heap")]
    let _profiler = dhat::Profiler::new_heap();
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
