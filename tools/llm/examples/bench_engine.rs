//! The engine's bench (scripts/bench-engine.sh): on a model directory,
//!
//!     cargo run --release -p tvm-llm --example bench_engine -- MODEL_DIR MODEL_LIB [ROUNDS]
//!
//! prints "name value" lines: tokens/s of 8 requests of 64 new tokens served one after another
//! and all at once (continuous batching), the engine's own share of a decode step at batch 1
//! (everything but the model's `batch_decode` call), and the time to first token of a 64-token
//! prompt beside the model's prefill call itself. Greedy, end-of-sequence ignored. Best of ROUNDS.

use std::sync::atomic::Ordering;
use std::time::Instant;
use tvm_llm::engine::{Engine, EngineConfig, Event, Handle, Prompt, Request};
use tvm_llm::model_dir::ModelDir;

fn req(seed: u32, n: usize) -> Request {
    let prompt: Vec<u32> = (0..16).map(|k| 1 + (seed * 31 + k * 7) % 200).collect();
    let mut r = Request::new(Prompt::Tokens(prompt));
    r.max_tokens = Some(n);
    r.sampling.temperature = 0.0;
    r.ignore_eos = true;
    r
}

fn drain(h: &mut Handle) -> usize {
    let mut n = 0;
    while let Some(ev) = h.recv_blocking() {
        match ev {
            Event::Done(f) => n = f.completion_tokens,
            Event::Error(e) => panic!("{e}"),
            Event::Delta { .. } => {}
        }
    }
    n
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let rounds: usize = a.get(3).map(|s| s.parse().unwrap()).unwrap_or(3);
    let engine = Engine::new(ModelDir::load(&a[1], &a[2]).unwrap(), EngineConfig::default()).unwrap();
    let m = engine.metrics().clone();
    let (mut seq, mut conc, mut share, mut ttft_ratio) = (0f64, 0f64, 1f64, f64::MAX);
    for _ in 0..rounds {
        let t = Instant::now();
        let mut n = 0;
        for k in 0..8 {
            n += drain(&mut engine.submit(req(k, 64)).unwrap());
        }
        seq = seq.max(n as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut hs: Vec<Handle> = (0..8).map(|k| engine.submit(req(k, 64)).unwrap()).collect();
        let n: usize = hs.iter_mut().map(drain).sum();
        conc = conc.max(n as f64 / t.elapsed().as_secs_f64());
        // One request alone: the engine's share of its decode steps.
        let (s0, c0, n0) = (
            m.decode_step_ns.load(Ordering::Relaxed),
            m.decode_call_ns.load(Ordering::Relaxed),
            m.decode_steps.load(Ordering::Relaxed),
        );
        drain(&mut engine.submit(req(99, 64)).unwrap());
        let (s1, c1, n1) = (
            m.decode_step_ns.load(Ordering::Relaxed),
            m.decode_call_ns.load(Ordering::Relaxed),
            m.decode_steps.load(Ordering::Relaxed),
        );
        assert!(n1 > n0);
        share = share.min((s1 - s0 - (c1 - c0)) as f64 / (s1 - s0) as f64);
        // Time to first token of a 64-token prompt, against the prefill call.
        let p0 = m.prefill_call_ns.load(Ordering::Relaxed);
        let mut r = Request::new(Prompt::Tokens((0..64).map(|k| 1 + k % 200).collect()));
        r.max_tokens = Some(1);
        r.sampling.temperature = 0.0;
        let mut h = engine.submit(r).unwrap();
        let mut ttft = 0.0;
        while let Some(ev) = h.recv_blocking() {
            if let Event::Done(f) = ev {
                ttft = f.time_to_first_token.as_secs_f64();
            }
        }
        let call = (m.prefill_call_ns.load(Ordering::Relaxed) - p0) as f64 / 1e9;
        ttft_ratio = ttft_ratio.min(ttft / call);
    }
    println!("sequential8_tok_s {seq:.1}");
    println!("concurrent8_tok_s {conc:.1}");
    println!("batching_gain {:.2}", conc / seq);
    println!("engine_share_of_decode_step_pct {:.2}", share * 100.0);
    println!("ttft_over_prefill_call {ttft_ratio:.3}");
    engine.shutdown();
}
