//! `tvm_rpc`: TVM's standalone RPC server on this runtime, with `apps/cpp_rpc`'s command line.
//! All logic lives in the library (`tvm_runtime::rpc::server`); this is argument parsing.
//!
//! ```text
//! tvm_rpc server --host=0.0.0.0 --port=9090 --port-end=9099 --tracker=127.0.0.1:9190 --key=rasp
//! ```

use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use tvm_runtime::rpc::server::Stopper;
use tvm_runtime::rpc::{Isolation, Server, ServerConfig};

#[derive(Parser)]
#[command(name = "tvm_rpc", version, about = "TVM RPC server (the equivalent of TVM's apps/cpp_rpc)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Iso {
    /// A forked process per session (a crash ends only that session).
    Process,
    /// A thread per session.
    Thread,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the server.
    Server {
        /// The address to bind: 127.0.0.1 by default (TVM binds 0.0.0.0); 0.0.0.0 for every interface.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The first port to try (0: any free port).
        #[arg(long, default_value_t = 9090)]
        port: u16,
        /// The end of the port range (exclusive).
        #[arg(long = "port-end", alias = "port_end", default_value_t = 9099)]
        port_end: u16,
        /// The RPC tracker address, host:port.
        #[arg(long)]
        tracker: Option<String>,
        /// The key that identifies the device type to the tracker and to clients.
        #[arg(long, default_value = "")]
        key: String,
        /// The address to report to the tracker.
        #[arg(long = "custom-addr", alias = "custom_addr")]
        custom_addr: Option<String>,
        /// Where session work directories go (default: a new directory in the temp dir).
        #[arg(long = "work-dir", alias = "work_dir")]
        work_dir: Option<PathBuf>,
        /// A secret that clients must present (`-token=<secret>` after the key; the runtime's
        /// client appends it from TVM_RPC_TOKEN). Off by default: TVM's clients cannot send one.
        #[arg(long, env = "TVM_RPC_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Most sessions at once (default: 1 with a tracker, else 16).
        #[arg(long = "max-sessions")]
        max_sessions: Option<usize>,
        /// How sessions are kept apart.
        #[arg(long, value_enum, default_value_t = Iso::Process)]
        isolation: Iso,
        /// Largest packet accepted, in bytes (default 4 GiB or TVM_RPC_MAX_PACKET_BYTES).
        #[arg(long = "max-packet-bytes")]
        max_packet_bytes: Option<u64>,
        /// Print only errors.
        #[arg(long)]
        silent: bool,
    },
}

static STOP: OnceLock<Stopper> = OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.stop();
    }
}

fn main() {
    let Cli {
        cmd:
            Cmd::Server {
                host,
                port,
                port_end,
                tracker,
                key,
                custom_addr,
                work_dir,
                token,
                max_sessions,
                isolation,
                max_packet_bytes,
                silent,
            },
    } = Cli::parse();
    if let Err(e) = tvm_runtime::ffi::slots::install() {
        eprintln!("tvm_rpc: {e}");
        std::process::exit(1);
    }
    let mut cfg = ServerConfig {
        host,
        port,
        port_end,
        key,
        tracker,
        custom_addr,
        work_dir,
        token: token.filter(|t| !t.is_empty()),
        max_sessions,
        isolation: match isolation {
            Iso::Process => Isolation::Process,
            Iso::Thread => Isolation::Thread,
        },
        silent,
        ..ServerConfig::default()
    };
    if let Some(n) = max_packet_bytes {
        cfg.max_packet = n;
    }
    let host = cfg.host.clone();
    let server = match Server::bind(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tvm_rpc: {e}");
            std::process::exit(1);
        }
    };
    let _ = STOP.set(server.stopper());
    // SAFETY: the handler only stores to an atomic flag, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    println!("INFO: RPC server listening on {host}:{}", server.port());
    let _ = std::io::stdout().flush();
    if let Err(e) = server.run() {
        eprintln!("tvm_rpc: {e}");
        std::process::exit(1);
    }
}
