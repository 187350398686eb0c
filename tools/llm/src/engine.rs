//! The engine: requests in, streamed tokens out, on one model and one paged KV cache, with
//! continuous batching.
//!
//! A worker thread owns the model (a Relax VM over the library) and the cache. Each step it takes
//! new requests, drops cancelled ones, admits waiting ones while the cache has room for their
//! prompt and `max_tokens` (they wait in a queue otherwise), prefills up to
//! `prefill_chunk_size` prompt tokens (one request's prompt may take several steps; several short
//! ones share one `batch_prefill`), then runs one `batch_decode` over every request that is
//! generating. A request that finishes or is cancelled gives its pages back at once. Tokens are
//! sampled on the host ([`crate::sampling`]) and detokenized incrementally ([`crate::text`]).

use crate::conversation::Message;
use crate::metrics::Metrics;
use crate::model_dir::ModelDir;
use crate::sampling::{SamplingParams, TokenLogprob};
use crate::text::encode;
use crate::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc as tmpsc;
use tvm_rt::llm::{KvCache, KvCacheConfig, LlmModel};
use tvm_rt::relax::RelaxModule;
use tvm_rt::Device;

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Requests decoding at once (the KV cache's `max_batch_size`).
    pub max_batch: usize,
    /// Tokens the KV cache holds over all requests (default: the context window times
    /// `max_batch`, at most 2^17).
    pub max_total_tokens: Option<i64>,
    /// Tokens per page (16: TVM's kernels assume it).
    pub page_size: i64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { max_batch: 8, max_total_tokens: None, page_size: 16 }
    }
}

/// What to generate from.
#[derive(Clone, Debug)]
pub enum Prompt {
    /// Text, tokenized as is.
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
    /// Chat messages, through the conversation template.
    Chat(Vec<Message>),
}

/// A request.
#[derive(Clone, Debug)]
pub struct Request {
    /// The prompt.
    pub prompt: Prompt,
    /// Sampling.
    pub sampling: SamplingParams,
    /// Tokens to generate at most (default: up to the context window).
    pub max_tokens: Option<usize>,
    /// Strings that end generation (not included in the text).
    pub stop: Vec<String>,
    /// Tokens that end generation, besides the model's end-of-sequence tokens.
    pub stop_token_ids: Vec<u32>,
    /// Keep going past the end-of-sequence tokens.
    pub ignore_eos: bool,
}

impl Request {
    /// A request with the model's sampling defaults.
    pub fn new(prompt: Prompt) -> Request {
        Request {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens: None,
            stop: Vec::new(),
            stop_token_ids: Vec::new(),
            ignore_eos: false,
        }
    }
}

/// Why a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token or string.
    Stop,
    /// `max_tokens` or the context window.
    Length,
    /// Cancelled.
    Cancelled,
}

impl FinishReason {
    /// OpenAI's name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// The end of a request.
#[derive(Clone, Debug)]
pub struct Finish {
    /// Why.
    pub reason: FinishReason,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub completion_tokens: usize,
    /// From submission to the first token.
    pub time_to_first_token: Duration,
    /// Spent in prefill calls that held its prompt.
    pub prefill_time: Duration,
    /// From the first token to the end.
    pub decode_time: Duration,
}

/// What a request streams.
#[derive(Clone, Debug)]
pub enum Event {
    /// New text (whole characters) and the tokens that made it.
    Delta {
        /// The text.
        text: String,
        /// The tokens sampled since the last delta.
        tokens: Vec<u32>,
        /// Their log-probabilities, when asked for.
        logprobs: Vec<TokenLogprob>,
    },
    /// The end.
    Done(Finish),
    /// A failure (the request is over).
    Error(String),
}

/// A submitted request: its events, and cancellation (also on drop).
pub struct Handle {
    /// Its id.
    pub id: u64,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    events: tmpsc::UnboundedReceiver<Event>,
    cancel: Arc<AtomicBool>,
}

impl Handle {
    /// The next event, waiting for it (None after the last).
    pub fn recv_blocking(&mut self) -> Option<Event> {
        self.events.blocking_recv()
    }

    /// The next event (async).
    pub async fn recv(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Stops the request; its pages are freed at the engine's next step.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Release);
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.cancel();
    }
}

struct Pending {
    tokens: Vec<u32>,
    max_new: usize,
    req: Request,
    events: tmpsc::UnboundedSender<Event>,
    cancel: Arc<AtomicBool>,
    submitted: Instant,
}

enum Msg {
    New(Box<Pending>),
    Shutdown,
}

/// Facts about the served model.
pub struct ModelInfo {
    /// The model directory.
    pub model: ModelDir,
    /// The longest sequence.
    pub context_window: usize,
    /// Tokens the cache holds.
    pub max_total_tokens: i64,
}

/// The engine. Dropping it drains nothing: call [`Engine::shutdown`] to finish the requests.
pub struct Engine {
    tx: mpsc::Sender<Msg>,
    info: Arc<ModelInfo>,
    metrics: Arc<Metrics>,
    next_id: AtomicU64,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Engine {
    /// Starts an engine on `model` (on the CPU).
    pub fn new(model: ModelDir, cfg: EngineConfig) -> Result<Engine, Error> {
        let c = &model.config;
        let context = if c.context_window_size > 0 { c.context_window_size } else { 1 << 17 };
        let max_batch = cfg.max_batch.max(1) as i64;
        let total = cfg.max_total_tokens.unwrap_or((context * max_batch).min(1 << 17)).max(context.min(1 << 17));
        let kv_cfg = KvCacheConfig {
            max_batch_size: max_batch,
            max_total_seq_len: total,
            prefill_chunk_size: c.prefill_chunk_size,
            page_size: cfg.page_size,
            sliding_window: c.sliding_window_size > 0,
        };
        let metrics = Arc::new(Metrics::default());
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let names = model.param_names.clone();
        let lib = model.model_lib.clone();
        let params = model.params_dir.clone();
        let info = Arc::new(ModelInfo { model, context_window: context as usize, max_total_tokens: total });
        let (info2, m2) = (Arc::clone(&info), Arc::clone(&metrics));
        let worker = std::thread::Builder::new()
            .name("tvm-llm-engine".into())
            .spawn(move || {
                let setup = (|| -> Result<(LlmModel, KvCache), Error> {
                    let module = RelaxModule::load(&lib).map_err(|e| Error::new(format!("{}: {e}", lib.display())))?;
                    let mut m = LlmModel::new(&module, Device::cpu(), &params.to_string_lossy(), &names)
                        .map_err(|e| Error::new(format!("{}: {e}", lib.display())))?;
                    let kv =
                        m.create_kv_cache(&kv_cfg).map_err(|e| Error::new(format!("creating the KV cache: {e}")))?;
                    Ok((m, kv))
                })();
                match setup {
                    Ok((m, kv)) => {
                        let pages = kv.num_available_pages().unwrap_or(0);
                        let _ = ready_tx.send(Ok(pages));
                        Worker::new(info2, m2, m, kv, pages, max_batch as usize).run(rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::new(format!("starting the engine thread: {e}")))?;
        let pages = ready_rx.recv().map_err(|_| Error::new("the engine thread ended while starting"))??;
        metrics.total_pages.store(pages as u64, Ordering::Relaxed);
        Ok(Engine { tx, info, metrics, next_id: AtomicU64::new(1), worker: Some(worker) })
    }

    /// The model's facts.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The engine's counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The prompt's tokens (the conversation template applied to chat messages).
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Result<Vec<u32>, Error> {
        let m = &self.info.model;
        let vocab = m.config.vocab_size;
        let ids = match prompt {
            Prompt::Text(t) => encode(&m.tokenizer, t)?,
            Prompt::Tokens(ids) => ids.clone(),
            Prompt::Chat(msgs) => {
                let conv = &m.config.conv_template;
                let text = conv.prompt(msgs).map_err(|e| Error::invalid("messages", &e))?;
                let mut ids = conv.system_prefix_token_ids.clone().unwrap_or_default();
                ids.extend(encode(&m.tokenizer, &text)?);
                ids
            }
        };
        if ids.is_empty() {
            return Err(Error::invalid("prompt", "is empty"));
        }
        if let Some(t) = ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::invalid("prompt", &format!("token {t} is outside the vocabulary of {vocab}")));
        }
        Ok(ids)
    }

    /// Submits a request: checked (prompt length against the context window, parameters), then
    /// queued; its events come through the handle.
    pub fn submit(&self, req: Request) -> Result<Handle, Error> {
        req.sampling.check()?;
        let tokens = self.prompt_tokens(&req.prompt)?;
        let ctx = self.info.context_window;
        if req.max_tokens == Some(0) {
            return Err(Error::invalid("max_tokens", "must be at least 1"));
        }
        let max_new = req.max_tokens.unwrap_or(ctx.saturating_sub(tokens.len()));
        if tokens.len() + max_new > ctx || max_new == 0 {
            return Err(Error::invalid(
                "messages",
                &format!(
                    "This model's maximum context length is {ctx} tokens. However, you requested {} tokens ({} in the prompt, {max_new} in the completion).",
                    tokens.len() + max_new.max(1),
                    tokens.len()
                ),
            ));
        }
        if let Some(t) = req.stop_token_ids.iter().find(|&&t| t as usize >= self.info.model.config.vocab_size) {
            return Err(Error::invalid("stop_token_ids", &format!("token {t} is outside the vocabulary")));
        }
        let (etx, erx) = tmpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let prompt_tokens = tokens.len();
        let p = Pending { tokens, max_new, req, events: etx, cancel: Arc::clone(&cancel), submitted: Instant::now() };
        self.metrics.requests.fetch_add(1, Ordering::Relaxed);
        self.tx.send(Msg::New(Box::new(p))).map_err(|_| Error::new("the engine has stopped"))?;
        Ok(Handle { id, prompt_tokens, events: erx, cancel })
    }

    /// Lets the running and queued requests finish, then stops the worker.
    pub fn shutdown(mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[path = "worker.rs"]
mod worker;
use worker::Worker;
