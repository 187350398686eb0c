//! `tvmrt rpc-server`: TVM's RPC server on this runtime, with the command line of TVM's
//! `apps/cpp_rpc` (`tvm_rpc server --host=... --port=... --tracker=... --key=...`). All logic is
//! the library's (`tvm_rt::rpc`); this is argument parsing and signal handling.
//!
//! ```text
//! tvmrt rpc-server --host=0.0.0.0 --port=9090 --port-end=9099 --tracker=127.0.0.1:9190 --key=rasp
//! tvmrt rpc-server --pipe READ_FD WRITE_FD      # one session over inherited pipes (rpc.CreatePipeClient)
//! ```

use crate::fail::{Fail, Result};
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use tvm_rt::rpc::{self, Isolation, ServerConfig, Stopper};

/// Options of `tvmrt rpc-server` (apps/cpp_rpc's, plus our own safety settings).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The address to bind: 127.0.0.1 by default (TVM binds 0.0.0.0); 0.0.0.0 for every interface.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The first port to try (0: any free port).
    #[arg(long, default_value_t = 9090)]
    pub port: u16,
    /// The end of the port range (exclusive).
    #[arg(long, alias = "port_end", default_value_t = 9099)]
    pub port_end: u16,
    /// The RPC tracker address, HOST:PORT: the server registers there and keeps its slot updated.
    #[arg(long)]
    pub tracker: Option<String>,
    /// The key that identifies the device type to the tracker and to clients.
    #[arg(long, default_value = "")]
    pub key: String,
    /// The address to report to the tracker.
    #[arg(long, alias = "custom_addr")]
    pub custom_addr: Option<String>,
    /// Where session work directories go (default: a new directory in the temp dir).
    #[arg(long, alias = "work_dir")]
    pub work_dir: Option<PathBuf>,
    /// A secret clients must present (`-token=<secret>` after the key; the runtime's client
    /// appends it from TVM_RPC_TOKEN). Off by default: TVM's clients cannot send one.
    #[arg(long, env = "TVM_RPC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Most sessions at once (default: 1 with a tracker, else 16).
    #[arg(long)]
    pub max_sessions: Option<usize>,
    /// How sessions are kept apart: a forked process each, or a thread each.
    #[arg(long, value_parser = ["process", "thread"], default_value = "process")]
    pub isolation: String,
    /// Largest packet accepted (default 4 GiB, or TVM_RPC_MAX_PACKET_BYTES).
    #[arg(long)]
    pub max_packet_bytes: Option<u64>,
    /// Serve one session over two inherited pipe descriptors instead of listening (the popen
    /// convention of rpc.CreatePipeClient, which appends the two numbers).
    #[arg(long, num_args = 2, value_names = ["READ_FD", "WRITE_FD"])]
    pub pipe: Option<Vec<i32>>,
    /// Print only errors.
    #[arg(long)]
    pub silent: bool,
}

impl Args {
    /// The server settings these options give.
    pub fn config(&self) -> ServerConfig {
        let mut cfg = ServerConfig {
            host: self.host.clone(),
            port: self.port,
            port_end: self.port_end,
            key: self.key.clone(),
            tracker: self.tracker.clone(),
            custom_addr: self.custom_addr.clone(),
            work_dir: self.work_dir.clone(),
            token: self.token.clone().filter(|t| !t.is_empty()),
            max_sessions: self.max_sessions,
            isolation: if self.isolation == "thread" { Isolation::Thread } else { Isolation::Process },
            silent: self.silent,
            ..ServerConfig::default()
        };
        if let Some(n) = self.max_packet_bytes {
            cfg.max_packet = n;
        }
        cfg
    }
}

static STOP: OnceLock<Stopper> = OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.stop();
    }
}

/// Runs the server until SIGINT / SIGTERM (or, with `--pipe`, until the client closes).
pub fn main(a: &Args) -> Result<()> {
    if let Some(fds) = &a.pipe {
        return rpc::serve_pipe(fds[0], fds[1], a.silent).map_err(Fail::from);
    }
    let cfg = a.config();
    let host = cfg.host.clone();
    let server = rpc::bind(cfg)?;
    let _ = STOP.set(server.stopper());
    // SAFETY: the handler only stores to an atomic flag, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    println!("INFO: RPC server listening on {host}:{}", server.port());
    let _ = std::io::stdout().flush();
    server.run().map_err(Fail::from)
}

#[cfg(test)]
mod tests {
    use crate::Cli;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<super::Args, clap::Error> {
        let mut all = vec!["tvmrt", "rpc-server"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all)?.command {
            crate::Command::RpcServer(a) => Ok(a),
            other => panic!("not rpc-server: {other:?}"),
        }
    }

    #[test]
    fn cpp_rpc_command_line() {
        let a = parse(&[
            "--host=0.0.0.0",
            "--port=9000",
            "--port_end=9090",
            "--tracker=127.0.0.1:9190",
            "--key=rasp",
            "--custom_addr=10.0.0.2",
            "--work-dir=/tmp/w",
            "--silent",
        ])
        .unwrap();
        let c = a.config();
        assert_eq!((c.host.as_str(), c.port, c.port_end), ("0.0.0.0", 9000, 9090));
        assert_eq!(c.tracker.as_deref(), Some("127.0.0.1:9190"));
        assert_eq!((c.key.as_str(), c.custom_addr.as_deref()), ("rasp", Some("10.0.0.2")));
        assert_eq!(c.work_dir, Some(std::path::PathBuf::from("/tmp/w")));
        assert!(c.silent && c.isolation == super::Isolation::Process);
        let c = parse(&[]).unwrap().config();
        assert_eq!((c.host.as_str(), c.port, c.port_end), ("127.0.0.1", 9090, 9099));
        assert!(parse(&["--port=70000"]).is_err());
        assert_eq!(parse(&["--pipe", "5", "6"]).unwrap().pipe, Some(vec![5, 6]));
        assert!(parse(&["--pipe", "5"]).is_err());
    }
}
