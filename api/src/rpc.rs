//! TVM's RPC server (protocol `0.8.0`, byte-compatible with TVM v0.8's clients and tracker) for
//! Rust programs: [`bind`] a [`Server`] with a [`ServerConfig`] (host, port range, key, tracker,
//! work directory, token, isolation) and [`Server::run`] it; or [`serve_pipe`] one session over
//! two inherited pipes (the `rpc.CreatePipeClient` convention). `tvmrt rpc-server` is this.
//!
//! A connected client can upload code and run it: RPC is for trusted networks (the README's
//! "RPC" section says what the server refuses beyond TVM's).
//!
//! [`Server`] is `Send`; [`Stopper`] is `Send + Sync` (stop the server from another thread or a
//! signal handler).

use crate::Result;

pub use tvm_runtime::rpc::server::Stopper;
pub use tvm_runtime::rpc::{Isolation, Server, ServerConfig};

/// Binds a server on the first free port of `cfg`'s range (and registers it with the tracker
/// when `cfg.tracker` is set). Model libraries that sessions load call back into this runtime.
pub fn bind(cfg: ServerConfig) -> Result<Server> {
    crate::module::install_slots()?;
    Server::bind(cfg)
}

/// Serves one session over the pipe descriptors `read_fd` / `write_fd` (inherited from the
/// process that started this one), until the client closes it.
pub fn serve_pipe(read_fd: i32, write_fd: i32, silent: bool) -> Result<()> {
    crate::module::install_slots()?;
    tvm_runtime::rpc::serve_pipe(read_fd, write_fd, silent)
}
