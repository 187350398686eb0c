//! The engine on the model directory scripts/test-llm-engine.sh makes from llama_tiny
//! (LLM_MODEL_DIR; skipped with a message when unset, a failure under CI=true): greedy tokens
//! equal to expected.json's (TVM's own runtime) with both prompts batched, streaming, stop
//! strings and tokens, cancellation and the queue giving pages back, the sampler against the
//! VM's own builtins, UTF-8-safe deltas, and every start-up error naming its file.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tvm_llm::engine::{Engine, EngineConfig, Event, FinishReason, Handle, Prompt, Request};
use tvm_llm::model_dir::ModelDir;
use tvm_llm::sampling::{Sampler, SamplingParams};
use tvm_llm::text::Detokenizer;

fn dir() -> Option<PathBuf> {
    match std::env::var("LLM_MODEL_DIR") {
        Ok(d) if Path::new(&d).join("mlc-chat-config.json").is_file() => Some(PathBuf::from(d)),
        _ => {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "LLM_MODEL_DIR is not set (CI=true)");
            println!("SKIP: LLM_MODEL_DIR is not set (scripts/test-llm-engine.sh makes it)");
            None
        }
    }
}

fn engine(d: &Path, cfg: EngineConfig) -> Engine {
    Engine::new(ModelDir::load(d, d.join("lib.so")).unwrap(), cfg).unwrap()
}

fn expected(d: &Path) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let e: Value = serde_json::from_str(&std::fs::read_to_string(d.join("expected.json")).unwrap()).unwrap();
    let ids = |v: &Value| -> Vec<Vec<u32>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect())
            .collect()
    };
    (ids(&e["prompts"]), ids(&e["greedy"]))
}

fn greedy(prompt: Prompt, n: usize) -> Request {
    let mut r = Request::new(prompt);
    r.max_tokens = Some(n);
    r.sampling.temperature = 0.0;
    r.ignore_eos = true;
    r
}

/// All events: the text, the tokens, the end.
fn collect(h: &mut Handle) -> (String, Vec<u32>, FinishReason) {
    let (mut text, mut toks) = (String::new(), Vec::new());
    loop {
        match h.recv_blocking().expect("an event") {
            Event::Delta { text: t, tokens, .. } => {
                text.push_str(&t);
                toks.extend(tokens);
            }
            Event::Done(f) => return (text, toks, f.reason),
            Event::Error(e) => panic!("{e}"),
        }
    }
}

#[test]
fn greedy_tokens_are_tvms_with_prompts_batched() {
    let Some(d) = dir() else { return };
    let e = engine(&d, EngineConfig::default());
    let (prompts, want) = expected(&d);
    let mut hs: Vec<Handle> =
        prompts.iter().map(|p| e.submit(greedy(Prompt::Tokens(p.clone()), want[0].len())).unwrap()).collect();
    for (h, w) in hs.iter_mut().zip(&want) {
        let (_, toks, reason) = collect(h);
        assert_eq!(&toks, w);
        assert_eq!(reason, FinishReason::Length);
    }
    assert_eq!(e.metrics().pages_in_use.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn text_chat_stop_strings_and_tokens() {
    let Some(d) = dir() else { return };
    let e = engine(&d, EngineConfig::default());
    let (prompts, want) = expected(&d);
    let _ = &want;
    // The byte tokenizer: a text prompt gives its bytes, and the tokens of the same ids.
    assert_eq!(e.prompt_tokens(&Prompt::Text("Hi, €".into())).unwrap(), [72, 105, 44, 32, 0xE2, 0x82, 0xAC]);
    let by_text = collect(&mut e.submit(greedy(Prompt::Text("Hi, €".into()), 8)).unwrap());
    let by_ids = collect(&mut e.submit(greedy(Prompt::Tokens(vec![72, 105, 44, 32, 0xE2, 0x82, 0xAC]), 8)).unwrap());
    assert_eq!(by_text, by_ids);
    // A stop token ends generation before it.
    let mut r = greedy(Prompt::Tokens(prompts[0].clone()), 11);
    r.stop_token_ids = vec![want[0][3]];
    let (_, toks, reason) = collect(&mut e.submit(r).unwrap());
    assert_eq!((toks.as_slice(), reason), (&want[0][..1], FinishReason::Stop));
    // A stop string: the text ends before it (token 66 is "B").
    let mut r = greedy(Prompt::Tokens(prompts[0].clone()), 11);
    r.stop = vec!["B".into()];
    let (text, _, reason) = collect(&mut e.submit(r).unwrap());
    assert_eq!(reason, FinishReason::Stop);
    assert!(!text.contains('B'), "{text:?}");
    // Chat: BOS, then the template.
    let chat = Prompt::Chat(vec![tvm_llm::conversation::Message { role: "user".into(), content: "hi".into() }]);
    let ids = e.prompt_tokens(&chat).unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(String::from_utf8(ids[1..].iter().map(|&t| t as u8).collect()).unwrap(), "<user>: hi\n<assistant>:");
    assert_eq!(collect(&mut e.submit(greedy(chat, 5)).unwrap()).2, FinishReason::Length);
}

#[test]
fn cancellation_and_the_queue_give_pages_back() {
    let Some(d) = dir() else { return };
    // A cache of 256 tokens (17 pages): two requests of 8 + 200 tokens cannot both fit.
    let e = engine(&d, EngineConfig { max_batch: 4, max_total_tokens: Some(256), ..Default::default() });
    let (prompts, _) = expected(&d);
    let pages = || e.metrics().pages_in_use.load(std::sync::atomic::Ordering::Relaxed);
    let mut a = e.submit(greedy(Prompt::Tokens(prompts[0].clone()), 200)).unwrap();
    let mut b = e.submit(greedy(Prompt::Tokens(prompts[1].clone()), 200)).unwrap();
    // `a` runs, `b` waits; cancelling `a` lets `b` in.
    assert!(matches!(a.recv_blocking(), Some(Event::Delta { .. })));
    a.cancel();
    let mut end = None;
    while let Some(ev) = a.recv_blocking() {
        if let Event::Done(f) = ev {
            end = Some(f.reason);
        }
    }
    assert_eq!(end, Some(FinishReason::Cancelled));
    let (_, toks, reason) = collect(&mut b);
    assert_eq!((toks.len(), reason), (200, FinishReason::Length));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(pages(), 0);
    // A dropped handle cancels too.
    drop(e.submit(greedy(Prompt::Tokens(prompts[0].clone()), 100)).unwrap());
    let (_, toks, _) = collect(&mut e.submit(greedy(Prompt::Tokens(prompts[1].clone()), 3)).unwrap());
    assert_eq!(toks.len(), 3);
}

#[test]
fn bad_requests_are_refused() {
    let Some(d) = dir() else { return };
    let e = engine(&d, EngineConfig::default());
    let long = Prompt::Tokens(vec![5; 300]);
    let err = e.submit(greedy(long, 1)).err().unwrap();
    assert!(err.message.contains("maximum context length is 256"), "{err}");
    let mut r = greedy(Prompt::Tokens(vec![5]), 1);
    r.max_tokens = Some(0);
    assert!(e.submit(r).is_err());
    assert!(e.submit(greedy(Prompt::Tokens(vec![300]), 1)).err().unwrap().message.contains("outside the vocabulary"));
    assert!(e.submit(greedy(Prompt::Tokens(vec![]), 1)).is_err());
    let mut r = greedy(Prompt::Tokens(vec![5]), 1);
    r.sampling.top_p = 2.0;
    assert_eq!(e.submit(r).err().unwrap().param.as_deref(), Some("top_p"));
}

#[test]
fn start_up_errors_name_the_file() {
    let Some(d) = dir() else { return };
    let tmp = std::env::temp_dir().join(format!("tvm-llm-bad-{}", std::process::id()));
    let copy = |name: &str| {
        let t = tmp.join(name);
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(t.join("params")).unwrap();
        for f in ["mlc-chat-config.json", "tokenizer.json", "lib.so"] {
            std::fs::copy(d.join(f), t.join(f)).unwrap();
        }
        for f in std::fs::read_dir(d.join("params")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, t.join("params").join(f.file_name().unwrap())).unwrap();
        }
        t
    };
    let load = |t: &Path| ModelDir::load(t, t.join("lib.so")).err().map(|e| e.message).unwrap_or_default();
    let t = copy("shard");
    let shard = t.join("params/params_shard_0.bin");
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&shard).unwrap().set_len(len - 4).unwrap();
    assert!(load(&t).contains("params_shard_0.bin") && load(&t).contains("bytes"), "{}", load(&t));
    let t = copy("tokenizer");
    std::fs::write(t.join("tokenizer.json"), "{not json").unwrap();
    assert!(load(&t).contains("tokenizer.json") && load(&t).contains("does not parse"), "{}", load(&t));
    let t = copy("config");
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(t.join("mlc-chat-config.json")).unwrap()).unwrap();
    c["prefill_chunk_size"] = Value::from(0);
    std::fs::write(t.join("mlc-chat-config.json"), c.to_string()).unwrap();
    assert!(load(&t).contains("prefill_chunk_size"), "{}", load(&t));
    c.as_object_mut().unwrap().remove("vocab_size");
    std::fs::write(t.join("mlc-chat-config.json"), c.to_string()).unwrap();
    assert!(load(&t).contains("vocab_size"), "{}", load(&t));
    let t = copy("nolib");
    std::fs::remove_file(t.join("lib.so")).unwrap();
    assert!(load(&t).contains("lib.so"));
    let v27 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures-v0.27/mlp.so");
    if v27.is_file() {
        let t = copy("notllm");
        std::fs::copy(&v27, t.join("lib.so")).unwrap();
        let m = ModelDir::load(&t, t.join("lib.so")).unwrap();
        let err = Engine::new(m, EngineConfig::default()).err().unwrap().message;
        assert!(err.contains("no function embed"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn sampling_equals_the_vms_builtins() {
    let Some(d) = dir() else { return };
    // The runtime's globals are registered once an engine (a VM) exists.
    let _e = engine(&d, EngineConfig::default());
    let mut rng = 12345u64;
    let mut next = || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((rng >> 33) as f64) / (1u64 << 31) as f64
    };
    for case in 0..50 {
        let logits: Vec<f32> = (0..64).map(|_| (next() * 8.0 - 4.0) as f32).collect();
        let (t, p) = (0.2 + next() * 1.5, 0.3 + next() * 0.7);
        let params = SamplingParams { temperature: t, top_p: p, seed: Some(case), ..Default::default() };
        let mut s = Sampler::new(Some(case));
        let (mine, _) = s.sample(&mut logits.clone(), &params).unwrap();
        // The same uniform number the sampler drew (its generator, seeded alike).
        use rand::{Rng, SeedableRng};
        let u: f64 = rand::rngs::SmallRng::seed_from_u64(case).random();
        let arr = tvm_rt::NDArray::from_slice(&logits, &[1, 64], tvm_rt::Device::cpu()).unwrap();
        use tvm_rt::relax::{call_global, Arg, Output};
        let theirs = call_global(
            "vm.builtin.sample_top_p_from_logits",
            &[Arg::Tensor(&arr), Arg::Float(t), Arg::Float(p), Arg::Float(u)],
        );
        assert!(matches!(theirs, Ok(Output::Int(x)) if x == mine as i64), "case {case}: {mine} vs {theirs:?}");
    }
}

#[test]
fn deltas_never_split_a_character() {
    let Some(d) = dir() else { return };
    let m = ModelDir::load(&d, d.join("lib.so")).unwrap();
    let mut dt = Detokenizer::new(&["xy".into()]);
    // "€" is E2 82 AC: nothing until its last byte.
    assert_eq!(dt.push(&m.tokenizer, 0xE2).text, "");
    assert_eq!(dt.push(&m.tokenizer, 0x82).text, "");
    assert_eq!(dt.push(&m.tokenizer, 0xAC).text, "€");
    // "x" may start the stop string: held back, then released when it does not.
    assert_eq!(dt.push(&m.tokenizer, b'x' as u32).text, "");
    assert_eq!(dt.push(&m.tokenizer, b'z' as u32).text, "xz");
    dt.push(&m.tokenizer, b'x' as u32);
    let p = dt.push(&m.tokenizer, b'y' as u32);
    assert!(p.stopped && p.text.is_empty());
}
