//! Greedy generation with an LLM as MLC-LLM compiles it, through the safe Rust API
//! ([`tvm_rt::llm`]): the model library, its weights from the tensor cache, the paged KV cache,
//! one prefill per prompt, then batch decodes of all sequences at once.
//!
//!     cargo run -p tvm-rt --example llm_generate -- MODEL_DIR [STEPS]
//!
//! MODEL_DIR as ../shared/fixtures-llm/llama_tiny: lib.so, params/, config.json (`param_names`)
//! and expected.json (`prompts`, `create_tir_paged_kv_cache`; its `greedy` tokens are checked
//! when present).

use serde_json::Value;
use tvm_rt::llm::{argmax, KvCacheConfig, LlmModel};
use tvm_rt::relax::RelaxModule;
use tvm_rt::{Device, NDArray};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).ok_or("usage: llm_generate MODEL_DIR [STEPS]")?;
    let cfg: Value = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/config.json"))?)?;
    let exp: Value = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/expected.json"))?)?;
    let names: Vec<String> = cfg["param_names"]
        .as_array()
        .ok_or("config.json: no param_names")?
        .iter()
        .filter_map(|v| v.as_str())
        .map(String::from)
        .collect();
    let c: Vec<i64> = exp["create_tir_paged_kv_cache"]
        .as_array()
        .ok_or("no cache config")?
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    let prompts: Vec<Vec<i32>> = exp["prompts"]
        .as_array()
        .ok_or("expected.json: no prompts")?
        .iter()
        .map(|p| p.as_array().into_iter().flatten().filter_map(|t| t.as_i64()).map(|t| t as i32).collect())
        .collect();
    let want: Option<Vec<Vec<i64>>> = exp["greedy"]
        .as_array()
        .map(|g| g.iter().map(|s| s.as_array().into_iter().flatten().filter_map(Value::as_i64).collect()).collect());
    let steps: usize = match args.get(2) {
        Some(s) => s.parse()?,
        None => want.as_ref().map_or(10, |w| w[0].len() - 1),
    };

    let module = RelaxModule::load(format!("{dir}/lib.so"))?;
    let mut model = LlmModel::new(&module, Device::cpu(), &format!("{dir}/params"), &names)?;
    let kv = model.create_kv_cache(&KvCacheConfig {
        max_batch_size: c[0],
        max_total_seq_len: c[1],
        prefill_chunk_size: c[2],
        page_size: c[3],
        sliding_window: c[4] != 0,
    })?;
    let mut tokens: Vec<Vec<i64>> = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        kv.add_sequence(i as i64)?;
        kv.begin_forward(&[i as i64], &[p.len() as i64])?;
        let e = model.embed(p)?;
        let logits = model.prefill(&e, &kv)?;
        kv.end_forward()?;
        tokens.push(vec![argmax(&logits)?[0] as i64]);
    }
    let ids: Vec<i64> = (0..prompts.len() as i64).collect();
    for _ in 0..steps {
        let last: Vec<i32> = tokens.iter().map(|t| *t.last().expect("one token at least") as i32).collect();
        kv.begin_forward(&ids, &vec![1; ids.len()])?;
        let e: NDArray = model.embed(&last)?;
        let logits = model.batch_decode(&e, &kv)?;
        kv.end_forward()?;
        for (t, next) in tokens.iter_mut().zip(argmax(&logits)?) {
            t.push(next as i64);
        }
    }
    for (i, t) in tokens.iter().enumerate() {
        println!("sequence {i}: {t:?}");
    }
    println!("free pages: {}", kv.num_available_pages()?);
    if let Some(want) = want {
        if tokens != want {
            return Err("the tokens differ from expected.json's greedy".into());
        }
        println!("the tokens match expected.json");
    }
    Ok(())
}
