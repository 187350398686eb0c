//! Generates text with the engine ([`tvm_llm::engine`]) from an MLC-style model directory:
//!
//!     cargo run -p tvm-llm --example generate -- MODEL_DIR MODEL_LIB "prompt" [MAX_TOKENS]
//!
//! Streams the text as it comes, then the finish reason and the token counts.

use std::io::Write;
use tvm_llm::engine::{Engine, EngineConfig, Event, Prompt, Request};
use tvm_llm::model_dir::ModelDir;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        return Err("usage: generate MODEL_DIR MODEL_LIB PROMPT [MAX_TOKENS]".into());
    }
    let engine = Engine::new(ModelDir::load(&a[1], &a[2])?, EngineConfig::default())?;
    let mut req = Request::new(Prompt::Text(a[3].clone()));
    req.max_tokens = Some(a.get(4).map(|s| s.parse()).transpose()?.unwrap_or(32));
    req.sampling.temperature = 0.0;
    let mut h = engine.submit(req)?;
    while let Some(ev) = h.recv_blocking() {
        match ev {
            Event::Delta { text, .. } => {
                print!("{text}");
                std::io::stdout().flush()?;
            }
            Event::Done(f) => {
                println!(
                    "\n[{}: {} prompt tokens, {} generated]",
                    f.reason.as_str(),
                    f.prompt_tokens,
                    f.completion_tokens
                )
            }
            Event::Error(e) => return Err(e.into()),
        }
    }
    engine.shutdown();
    Ok(())
}
