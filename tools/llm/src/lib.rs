//! An LLM engine on the pure-Rust TVM runtime: serves model libraries as MLC-LLM compiles them
//! (a Relax export attending through the runtime's paged KV cache) from MLC's model directories,
//! with no Python.
//!
//! - [`model_dir`]: `mlc-chat-config.json`, `tokenizer.json` (Hugging Face `tokenizers`), the
//!   tensor cache, checked at load;
//! - [`engine`]: requests (text, token ids or chat messages; sampling parameters, stop strings
//!   and tokens, log-probabilities) streamed as UTF-8-safe deltas, cancellation, continuous
//!   batching on one paged KV cache ([`conversation`], [`sampling`], [`text`] help);
//! - [`server`]: the OpenAI HTTP API over an engine (`/v1/completions`, `/v1/chat/completions`,
//!   `/v1/models`, `/health`, Prometheus `/metrics`); `tvmrt serve` runs it.
//!
//! ```no_run
//! use tvm_llm::engine::{Engine, EngineConfig, Event, Prompt, Request};
//! use tvm_llm::model_dir::ModelDir;
//!
//! # fn main() -> Result<(), tvm_llm::Error> {
//! let model = ModelDir::load("model-dir", "model-dir/lib.so")?;
//! let engine = Engine::new(model, EngineConfig::default())?;
//! let mut req = Request::new(Prompt::Text("Hello".into()));
//! req.max_tokens = Some(16);
//! let mut h = engine.submit(req)?;
//! while let Some(ev) = h.recv_blocking() {
//!     match ev {
//!         Event::Delta { text, .. } => print!("{text}"),
//!         Event::Done(f) => println!("\n[{}]", f.reason.as_str()),
//!         Event::Error(e) => eprintln!("error: {e}"),
//!     }
//! }
//! # Ok(())
//! # }
//! ```

pub mod conversation;
pub mod engine;
pub mod metrics;
pub mod model_dir;
pub mod sampling;
#[cfg(feature = "server")]
pub mod server;
pub mod text;

use std::fmt;

/// An error: what went wrong, and for a bad request the parameter at fault.
#[derive(Clone, Debug)]
pub struct Error {
    /// The message.
    pub message: String,
    /// The request parameter at fault (a bad request), if any.
    pub param: Option<String>,
}

impl Error {
    /// An error.
    pub fn new(message: impl Into<String>) -> Error {
        Error { message: message.into(), param: None }
    }

    /// A bad request naming `param`.
    pub fn invalid(param: &str, why: &str) -> Error {
        let message = if why.starts_with(char::is_uppercase) { why.to_string() } else { format!("{param}: {why}") };
        Error { message, param: Some(param.to_string()) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
