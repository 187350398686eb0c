//! `tvmrt`: look inside, run and time TVM model libraries with the pure-Rust runtime.
//!
//! Each subcommand is one module with an `Args` struct (its options, for clap) and a
//! `main(&Args) -> Result<()>`; adding one is a new file plus its line in [`Command`] and in
//! the `match` below. Errors are one line on stderr (`tvmrt: error: ...`) and exit code 1
//! (2 for bad usage, 3 when `run --expect` finds differing outputs); a panic, should one
//! happen, is reported the same way, without a backtrace.

mod bench;
mod common;
mod fail;
mod inspect;
mod llm;
mod model;
mod npy;
mod relax;
mod rpc_server;
mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Inspect, run and benchmark TVM model libraries (exports of TVM's `export_library`) with the
/// pure-Rust TVM runtime.
#[derive(Parser, Debug)]
#[command(name = "tvmrt", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show what a model library holds: module tree, functions, graph, params, devices.
    Inspect(inspect::Args),
    /// Run a model (or one function) once: outputs as .npy, a summary, --expect checks.
    Run(run::Args),
    /// Time a model: load, executor creation, first run, latency percentiles, throughput.
    Bench(bench::Args),
    /// Serve TVM's RPC protocol (TVM's apps/cpp_rpc): clients upload, load and run modules here.
    RpcServer(rpc_server::Args),
    /// Generate text with an LLM (an MLC-LLM model directory and its model library).
    Generate(llm::GenerateArgs),
    /// Serve an LLM over the OpenAI HTTP API (/v1/completions, /v1/chat/completions, ...).
    Serve(llm::ServeArgs),
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("tvmrt: internal error: {}{at}", msg.split_whitespace().collect::<Vec<_>>().join(" "));
    }));
    let cli = Cli::parse();
    if !matches!(cli.command, Command::RpcServer(_) | Command::Serve(_)) {
        // Output into a closed pipe (`tvmrt inspect m.so | head -1`) ends the process quietly,
        // as it does other Unix tools (Rust ignores SIGPIPE, which makes every print fail).
        // The server keeps ignoring it: a client going away must not end it.
        // SAFETY: restoring a signal's default disposition before any thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = std::panic::catch_unwind(|| match &cli.command {
        Command::Inspect(a) => inspect::main(a),
        Command::Run(a) => run::main(a),
        Command::Bench(a) => bench::main(a),
        Command::RpcServer(a) => rpc_server::main(a),
        Command::Generate(a) => llm::generate(a),
        Command::Serve(a) => llm::serve(a),
    });
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("tvmrt: error: {e}");
            ExitCode::from(e.code)
        }
        Err(_) => ExitCode::from(fail::EXIT_ERROR),
    }
}
