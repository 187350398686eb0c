//! `tvm_rpc`: TVM's standalone RPC server on this runtime, with `apps/cpp_rpc`'s command line.
//! All logic lives in the library (`tvm_runtime::rpc::server`); this is argument parsing.
//!
//! ```text
//! tvm_rpc server --host=0.0.0.0 --port=9090 --port-end=9099 --tracker=127.0.0.1:9190 --key=rasp
//! ```
//!
//! (clap's builder API rather than its derive macros: the macros would change the features of
//! `syn` that the library's own build uses, and every build of one would rebuild the other.)

use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use tvm_runtime::rpc::server::Stopper;
use tvm_runtime::rpc::{Isolation, Server, ServerConfig};

fn cli() -> Command {
    let opt = |name: &'static str, help: &'static str| Arg::new(name).long(name).help(help);
    Command::new("tvm_rpc")
        .version(env!("CARGO_PKG_VERSION"))
        .about("TVM RPC server (the equivalent of TVM's apps/cpp_rpc)")
        .subcommand_required(true)
        .subcommand(
            Command::new("server")
                .about("Start the server")
                .arg(opt("host", "The address to bind: 127.0.0.1 by default (TVM binds 0.0.0.0); 0.0.0.0 for every interface").default_value("127.0.0.1"))
                .arg(opt("port", "The first port to try (0: any free port)").value_parser(value_parser!(u16)).default_value("9090"))
                .arg(opt("port-end", "The end of the port range (exclusive)").alias("port_end").value_parser(value_parser!(u16)).default_value("9099"))
                .arg(opt("tracker", "The RPC tracker address, host:port"))
                .arg(opt("key", "The key that identifies the device type to the tracker and to clients").default_value(""))
                .arg(opt("custom-addr", "The address to report to the tracker").alias("custom_addr"))
                .arg(opt("work-dir", "Where session work directories go (default: a new directory in the temp dir)").alias("work_dir").value_parser(value_parser!(PathBuf)))
                .arg(
                    opt("token", "A secret clients must present (`-token=<secret>` after the key; the runtime's client appends it from TVM_RPC_TOKEN). Off by default: TVM's clients cannot send one")
                        .env("TVM_RPC_TOKEN")
                        .hide_env_values(true),
                )
                .arg(opt("max-sessions", "Most sessions at once (default: 1 with a tracker, else 16)").value_parser(value_parser!(usize)))
                .arg(opt("isolation", "How sessions are kept apart: a forked process each, or a thread each").value_parser(["process", "thread"]).default_value("process"))
                .arg(opt("max-packet-bytes", "Largest packet accepted (default 4 GiB, or TVM_RPC_MAX_PACKET_BYTES)").value_parser(value_parser!(u64)))
                .arg(Arg::new("silent").long("silent").action(ArgAction::SetTrue).help("Print only errors")),
        )
        .subcommand(
            Command::new("pipe")
                .about("Serve one session over two inherited pipes (the popen convention of rpc.CreatePipeClient)")
                .arg(Arg::new("read-fd").required(true).value_parser(value_parser!(i32)).help("Descriptor to read requests from"))
                .arg(Arg::new("write-fd").required(true).value_parser(value_parser!(i32)).help("Descriptor to write replies to"))
                .arg(Arg::new("silent").long("silent").action(ArgAction::SetTrue).help("Print only errors")),
        )
}

fn config(m: &ArgMatches) -> ServerConfig {
    let s = |k: &str| m.get_one::<String>(k).cloned();
    let mut cfg = ServerConfig {
        host: s("host").unwrap_or_default(),
        port: *m.get_one::<u16>("port").unwrap_or(&9090),
        port_end: *m.get_one::<u16>("port-end").unwrap_or(&9099),
        key: s("key").unwrap_or_default(),
        tracker: s("tracker"),
        custom_addr: s("custom-addr"),
        work_dir: m.get_one::<PathBuf>("work-dir").cloned(),
        token: s("token").filter(|t| !t.is_empty()),
        max_sessions: m.get_one::<usize>("max-sessions").copied(),
        isolation: if s("isolation").as_deref() == Some("thread") { Isolation::Thread } else { Isolation::Process },
        silent: m.get_flag("silent"),
        ..ServerConfig::default()
    };
    if let Some(&n) = m.get_one::<u64>("max-packet-bytes") {
        cfg.max_packet = n;
    }
    cfg
}

static STOP: OnceLock<Stopper> = OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.stop();
    }
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("tvm_rpc: {e}");
    std::process::exit(1);
}

fn main() {
    let matches = cli().get_matches();
    if let Err(e) = tvm_runtime::ffi::slots::install() {
        fail(e);
    }
    let m = match matches.subcommand() {
        Some(("server", m)) => m,
        Some(("pipe", m)) => {
            let fd = |k: &str| *m.get_one::<i32>(k).unwrap_or(&-1);
            if let Err(e) = tvm_runtime::rpc::serve_pipe(fd("read-fd"), fd("write-fd"), m.get_flag("silent")) {
                fail(e);
            }
            return;
        }
        _ => fail("unknown command"),
    };
    let cfg = config(m);
    let host = cfg.host.clone();
    let server = Server::bind(cfg).unwrap_or_else(|e| fail(e));
    let _ = STOP.set(server.stopper());
    // SAFETY: the handler only stores to an atomic flag, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    println!("INFO: RPC server listening on {host}:{}", server.port());
    let _ = std::io::stdout().flush();
    if let Err(e) = server.run() {
        fail(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_rpc_command_line() {
        let m = cli()
            .try_get_matches_from([
                "tvm_rpc",
                "server",
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
        let (_, m) = m.subcommand().unwrap();
        let c = config(m);
        assert_eq!((c.host.as_str(), c.port, c.port_end), ("0.0.0.0", 9000, 9090));
        assert_eq!(c.tracker.as_deref(), Some("127.0.0.1:9190"));
        assert_eq!((c.key.as_str(), c.custom_addr.as_deref()), ("rasp", Some("10.0.0.2")));
        assert_eq!(c.work_dir, Some(PathBuf::from("/tmp/w")));
        assert!(c.silent && c.isolation == Isolation::Process && c.token.is_none());
        let m = cli().try_get_matches_from(["tvm_rpc", "server"]).unwrap();
        let c = config(m.subcommand().unwrap().1);
        assert_eq!((c.host.as_str(), c.port, c.port_end), ("127.0.0.1", 9090, 9099));
        assert!(cli().try_get_matches_from(["tvm_rpc", "server", "--port=70000"]).is_err());
    }
}
