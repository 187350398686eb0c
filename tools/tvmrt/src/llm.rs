//! `tvmrt generate` and `tvmrt serve`: an LLM as MLC-LLM ships it (a model directory and its
//! model library) through the engine of `tvm_llm`: text streamed to the terminal with its
//! timings, or served over the OpenAI HTTP API.
//!
//! ```text
//! tvmrt generate --model DIR --model-lib LIB --prompt "Once upon a time" --max-tokens 64
//! tvmrt generate --model DIR --model-lib LIB --chat --prompt "Hello!" --temperature 0.7 --seed 1
//! tvmrt serve --model DIR --model-lib LIB --port 8000
//! ```

use crate::fail::{Fail, Result};
use std::io::Write;
use std::path::PathBuf;
use tvm_llm::conversation::Message;
use tvm_llm::engine::{Engine, EngineConfig, Event, Prompt, Request};
use tvm_llm::model_dir::ModelDir;

/// The model options both commands take.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// The model directory (mlc-chat-config.json, tokenizer.json, the tensor cache).
    #[arg(long)]
    pub model: PathBuf,
    /// The model library (the Relax export MLC's compiler made for it).
    #[arg(long)]
    pub model_lib: PathBuf,
    /// Requests decoding at once.
    #[arg(long, default_value_t = 8)]
    pub max_batch: usize,
    /// Tokens the KV cache holds over all requests (default: the context window times --max-batch).
    #[arg(long)]
    pub max_total_tokens: Option<i64>,
}

impl ModelArgs {
    fn engine(&self) -> Result<Engine> {
        let m = ModelDir::load(&self.model, &self.model_lib).map_err(|e| Fail::input(e.message))?;
        let cfg =
            EngineConfig { max_batch: self.max_batch, max_total_tokens: self.max_total_tokens, ..Default::default() };
        Engine::new(m, cfg).map_err(|e| Fail::input(e.message))
    }
}

/// Options of `tvmrt generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt text.
    #[arg(long, conflicts_with = "prompt_ids")]
    prompt: Option<String>,
    /// The prompt as token ids (comma-separated), instead of text.
    #[arg(long, value_delimiter = ',')]
    prompt_ids: Option<Vec<u32>>,
    /// The prompt is a user message of a chat (the conversation template applies).
    #[arg(long)]
    chat: bool,
    /// A system message for --chat.
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// Softmax temperature (0: greedy; default: the model's).
    #[arg(long)]
    temperature: Option<f64>,
    /// Nucleus sampling (default: the model's).
    #[arg(long)]
    top_p: Option<f64>,
    /// Only the K most likely tokens.
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Repetition penalty (default: the model's).
    #[arg(long)]
    repetition_penalty: Option<f64>,
    /// Presence penalty.
    #[arg(long)]
    presence_penalty: Option<f64>,
    /// Frequency penalty.
    #[arg(long)]
    frequency_penalty: Option<f64>,
    /// The sampler's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// A string that ends generation (repeatable).
    #[arg(long)]
    stop: Vec<String>,
    /// Keep going past the end-of-sequence tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Also print the generated token ids (one line, after the text).
    #[arg(long)]
    print_tokens: bool,
}

/// Options of `tvmrt serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port.
    #[arg(long, default_value_t = 8000)]
    port: u16,
}

pub fn generate(a: &GenerateArgs) -> Result<()> {
    let engine = a.model.engine()?;
    let cfg = &engine.info().model.config;
    let prompt = match (&a.prompt, &a.prompt_ids) {
        (_, Some(ids)) => Prompt::Tokens(ids.clone()),
        (Some(p), None) if a.chat => {
            let mut msgs = Vec::new();
            if let Some(s) = &a.system {
                msgs.push(Message { role: "system".into(), content: s.clone() });
            }
            msgs.push(Message { role: "user".into(), content: p.clone() });
            Prompt::Chat(msgs)
        }
        (Some(p), None) => Prompt::Text(p.clone()),
        (None, None) => return Err(Fail::input("give --prompt TEXT or --prompt-ids IDS")),
    };
    let mut req = Request::new(prompt);
    req.max_tokens = Some(a.max_tokens);
    let s = &mut req.sampling;
    s.temperature = a.temperature.or(cfg.temperature).unwrap_or(1.0);
    s.top_p = a.top_p.or(cfg.top_p).unwrap_or(1.0);
    s.top_k = a.top_k;
    s.repetition_penalty = a.repetition_penalty.or(cfg.repetition_penalty).unwrap_or(1.0);
    s.presence_penalty = a.presence_penalty.or(cfg.presence_penalty).unwrap_or(0.0);
    s.frequency_penalty = a.frequency_penalty.or(cfg.frequency_penalty).unwrap_or(0.0);
    s.seed = a.seed;
    req.stop = a.stop.clone();
    req.ignore_eos = a.ignore_eos;
    let mut h = engine.submit(req).map_err(|e| Fail::input(e.message))?;
    let mut out = std::io::stdout().lock();
    let mut tokens = Vec::new();
    let finish = loop {
        match h.recv_blocking() {
            Some(Event::Delta { text, tokens: t, .. }) => {
                tokens.extend(t);
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            Some(Event::Done(f)) => break f,
            Some(Event::Error(e)) => return Err(Fail::input(e)),
            None => return Err(Fail::input("the engine stopped")),
        }
    };
    let _ = writeln!(out);
    if a.print_tokens {
        let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "tokens: {}", ids.join(" "));
    }
    let prefill = finish.prefill_time.as_secs_f64();
    let decode_tokens = finish.completion_tokens.saturating_sub(1);
    let decode = finish.decode_time.as_secs_f64();
    let rate = |n: usize, t: f64| if t > 0.0 { format!("{:.1}", n as f64 / t) } else { "-".into() };
    let _ = writeln!(
        out,
        "[{}] time to first token {:.1} ms, prefill {} tok/s ({} tokens), decode {} tok/s ({} tokens)",
        finish.reason.as_str(),
        finish.time_to_first_token.as_secs_f64() * 1e3,
        rate(finish.prompt_tokens, prefill),
        finish.prompt_tokens,
        rate(decode_tokens, decode),
        finish.completion_tokens
    );
    drop(h);
    engine.shutdown();
    Ok(())
}

pub fn serve(a: &ServeArgs) -> Result<()> {
    let engine = a.model.engine()?;
    let opts = tvm_llm::server::ServeOptions { host: a.host.clone(), port: a.port };
    tvm_llm::server::serve(engine, &opts).map_err(|e| Fail::input(e.message))
}
