//! The LLM API ([`tvm_rt::llm`]) on ../shared/fixtures-llm/llama_tiny: MLC's call sequence
//! gives the tokens and logits of its expected.json (TVM's own runtime), from one thread and
//! from four at once (one module, a model and a cache per thread); the cache's sequence
//! management and its errors.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tvm_rt::llm::{argmax, KvCache, KvCacheConfig, LlmModel};
use tvm_rt::relax::RelaxModule;
use tvm_rt::Device;

fn fixture() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures-llm/llama_tiny");
    if d.join("expected.json").is_file() {
        return Some(d);
    }
    assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{} missing", d.display());
    println!("SKIP: {} not found", d.display());
    None
}

fn json(p: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

struct Run {
    tokens: Vec<Vec<i64>>,
    prefill_logits: Vec<Vec<f32>>,
    last_logits: Vec<f32>,
}

fn names(d: &Path) -> Vec<String> {
    json(d.join("config.json"))["param_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn config(exp: &Value) -> KvCacheConfig {
    let c: Vec<i64> =
        exp["create_tir_paged_kv_cache"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    KvCacheConfig {
        max_batch_size: c[0],
        max_total_seq_len: c[1],
        prefill_chunk_size: c[2],
        page_size: c[3],
        sliding_window: c[4] != 0,
    }
}

fn run(d: &Path, module: &RelaxModule) -> (Run, KvCache) {
    let exp = json(d.join("expected.json"));
    let mut m = LlmModel::new(module, Device::cpu(), d.join("params").to_str().unwrap(), &names(d)).unwrap();
    assert_eq!(m.hidden_size(), 64);
    let kv = m.create_kv_cache(&config(&exp)).unwrap();
    let mut r = Run { tokens: vec![], prefill_logits: vec![], last_logits: vec![] };
    for (i, p) in exp["prompts"].as_array().unwrap().iter().enumerate() {
        let p: Vec<i32> = p.as_array().unwrap().iter().map(|t| t.as_i64().unwrap() as i32).collect();
        kv.add_sequence(i as i64).unwrap();
        kv.begin_forward(&[i as i64], &[p.len() as i64]).unwrap();
        let e = m.embed(&p).unwrap();
        let logits = m.prefill(&e, &kv).unwrap();
        kv.end_forward().unwrap();
        assert_eq!(logits.shape(), &[1, 1, 256]);
        r.tokens.push(vec![argmax(&logits).unwrap()[0] as i64]);
        r.prefill_logits.push(logits.to_vec::<f32>().unwrap());
    }
    for _ in 1..exp["greedy"][0].as_array().unwrap().len() {
        let last: Vec<i32> = r.tokens.iter().map(|t| *t.last().unwrap() as i32).collect();
        kv.begin_forward(&[0, 1], &[1, 1]).unwrap();
        let e = m.embed(&last).unwrap();
        let logits = m.batch_decode(&e, &kv).unwrap();
        kv.end_forward().unwrap();
        for (t, n) in r.tokens.iter_mut().zip(argmax(&logits).unwrap()) {
            t.push(n as i64);
        }
        r.last_logits = logits.to_vec::<f32>().unwrap();
    }
    (r, kv)
}

fn check(d: &Path, r: &Run) {
    let exp = json(d.join("expected.json"));
    let want: Vec<Vec<i64>> = exp["greedy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect())
        .collect();
    assert_eq!(r.tokens, want);
    let close = |got: &[f32], want: &Value| {
        let w: Vec<f64> = want
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|x| x.as_array().cloned().unwrap_or_else(|| vec![x.clone()]))
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(got.len(), w.len());
        for (g, w) in got.iter().zip(w) {
            assert!((*g as f64 - w).abs() <= 1e-5, "{g} vs {w}");
        }
    };
    for i in 0..2 {
        close(&r.prefill_logits[i], &exp["prefill_logits"][i]);
    }
    close(&r.last_logits, &exp["last_logits"]);
}

#[test]
fn llama_tiny_gives_tvms_tokens() {
    let Some(d) = fixture() else { return };
    let module = RelaxModule::load(d.join("lib.so")).unwrap();
    let (r, kv) = run(&d, &module);
    check(&d, &r);
    // 2 prompts of 8 and 3 tokens, then 10 tokens each: 19 and 14 tokens, 2 + 1 pages of 17.
    assert_eq!(kv.total_sequence_length().unwrap(), 8 + 10 + 3 + 10);
    assert_eq!(kv.num_available_pages().unwrap(), 17 - 3);
    kv.fork_sequence(0, 5, Some(10)).unwrap();
    assert_eq!(kv.num_available_pages().unwrap(), 17 - 4, "a fork inside a page copies that page");
    kv.popn(0, 4).unwrap();
    kv.remove_sequence(1).unwrap();
    kv.remove_sequence(0).unwrap();
    kv.remove_sequence(5).unwrap();
    assert!(kv.is_empty().unwrap());
    assert_eq!(kv.num_available_pages().unwrap(), 17);
}

#[test]
fn llama_tiny_from_four_threads() {
    let Some(d) = fixture() else { return };
    let module = Arc::new(RelaxModule::load(d.join("lib.so")).unwrap());
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let (d, module) = (d.clone(), Arc::clone(&module));
            std::thread::spawn(move || run(&d, &module).0)
        })
        .collect();
    for r in runs {
        check(&d, &r.join().unwrap());
    }
}

#[test]
fn cache_errors_are_errors() {
    let Some(d) = fixture() else { return };
    let exp = json(d.join("expected.json"));
    let module = RelaxModule::load(d.join("lib.so")).unwrap();
    let mut m = LlmModel::new(&module, Device::cpu(), d.join("params").to_str().unwrap(), &names(&d)).unwrap();
    let kv = m.create_kv_cache(&config(&exp)).unwrap();
    let e = kv.begin_forward(&[3], &[1]).unwrap_err().to_string();
    assert!(e.contains("\"3\" cannot be found"), "{e}");
    kv.add_sequence(0).unwrap();
    assert!(kv.add_sequence(0).unwrap_err().to_string().contains("already"));
    assert!(kv.popn(0, 1).unwrap_err().to_string().contains("exceeds"));
    assert!(kv.fork_sequence(0, 1, Some(3)).is_err());
    assert!(kv.begin_forward(&[0], &[65]).unwrap_err().to_string().contains("prefill chunk"));
    // Wrong weights, a library that is not an LLM.
    let e = LlmModel::new(&module, Device::cpu(), d.join("params").to_str().unwrap(), &["nope".into()]);
    assert!(e.err().unwrap().to_string().contains("nope"));
    let v27 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures-v0.27/mlp.so");
    if v27.is_file() {
        let other = RelaxModule::load(v27).unwrap();
        let e = LlmModel::new(&other, Device::cpu(), d.join("params").to_str().unwrap(), &names(&d));
        assert!(e.err().unwrap().to_string().contains("not an MLC-style LLM"));
    }
    assert!(KvCache::from_object(tvm_runtime::tvm_ffi::containers::shape::make_shape(&[1])).is_err());
}
