//! Language models as MLC-LLM compiles them: a Relax export whose attention runs through the
//! runtime's paged KV cache (`vm.builtin.paged_attention_kv_cache_create`), weights in a tensor
//! cache (`tensor-cache.json` and its shards, as `tvm.contrib.tvmjs` and MLC write them).
//!
//! - [`LlmModel`]: a VM over the export plus its weights, with the functions MLC's engine calls
//!   (`embed`, `prefill`, `decode`, `batch_prefill`, `batch_decode`);
//! - [`KvCache`]: the typed handle of a `relax.vm.PagedAttentionKVCache` made by the model's
//!   `create_tir_paged_kv_cache`: sequences (add, remove, fork, pop), forward passes
//!   (`begin_forward` before each model call, `end_forward` after), page counts.
//!
//! ```no_run
//! use tvm_rt::llm::{KvCacheConfig, LlmModel};
//! use tvm_rt::relax::RelaxModule;
//! use tvm_rt::Device;
//!
//! # fn main() -> tvm_rt::Result<()> {
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures-llm/llama_tiny");
//! # if !std::path::Path::new(dir).exists() { return Ok(()); }
//! let module = RelaxModule::load(format!("{dir}/lib.so"))?;
//! let names = vec!["embed_tokens.weight".to_string() /* ... config.json's param_names */];
//! # let names: Vec<String> = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(format!("{dir}/config.json")).unwrap()).unwrap()["param_names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
//! let mut model = LlmModel::new(&module, Device::cpu(), &format!("{dir}/params"), &names)?;
//! let kv = model.create_kv_cache(&KvCacheConfig { max_batch_size: 2, max_total_seq_len: 256, prefill_chunk_size: 64, page_size: 16, sliding_window: false })?;
//! kv.add_sequence(0)?;
//! let prompt = [1, 5, 9, 17];
//! kv.begin_forward(&[0], &[prompt.len() as i64])?;
//! let e = model.embed(&prompt)?;
//! let logits = model.prefill(&e, &kv)?; // [1, 1, vocab]
//! kv.end_forward()?;
//! let first = tvm_rt::llm::argmax(&logits)?[0];
//! # let _ = first;
//! # Ok(())
//! # }
//! ```

use crate::relax::{ffi_err, RelaxModule, RelaxVm};
use crate::{Device, Error, NDArray, Result};
use tvm_runtime::relax::kv::paged::paged_kv_cache_index;
use tvm_runtime::tvm_ffi::any::Any;
use tvm_runtime::tvm_ffi::containers::{array, shape};
use tvm_runtime::tvm_ffi::object::ObjectRef;
use tvm_runtime::tvm_ffi::tensor::classic;
use tvm_runtime::tvm_ffi::{function, registry, types};

fn global(name: &str) -> Result<ObjectRef> {
    registry::get(name).ok_or_else(|| Error::key(format!("the runtime has no global {name}")))
}

/// The globals of the per-step path, looked up once (the registry's map is not on that path).
struct Hot {
    begin_forward: ObjectRef,
    end_forward: ObjectRef,
}

fn hot() -> Result<&'static Hot> {
    static H: std::sync::OnceLock<Hot> = std::sync::OnceLock::new();
    if let Some(h) = H.get() {
        return Ok(h);
    }
    let h = Hot {
        begin_forward: global("vm.builtin.kv_state_begin_forward")?,
        end_forward: global("vm.builtin.kv_state_end_forward")?,
    };
    Ok(H.get_or_init(|| h))
}

fn call(name: &str, args: &[Any]) -> Result<Any> {
    let f = match name {
        "vm.builtin.kv_state_begin_forward" => hot()?.begin_forward.clone(),
        "vm.builtin.kv_state_end_forward" => hot()?.end_forward.clone(),
        _ => global(name)?,
    };
    function::call_any(&f, args).map_err(ffi_err)
}

fn shape_any(dims: &[i64]) -> Any {
    Any::object(shape::make_shape(dims))
}

fn tensor_any(a: &NDArray) -> Result<Any> {
    classic::from_classic(&a.0).map(Any::object).map_err(ffi_err)
}

fn to_ndarray(v: Any, what: &str) -> Result<NDArray> {
    let o = v
        .into_object()
        .map_err(|v| Error::type_error(format!("{what} returned a {}", types::type_key(v.type_index()))))?;
    classic::to_classic(&o).map(NDArray).map_err(ffi_err)
}

/// The configuration `create_tir_paged_kv_cache` takes (MLC's engine passes each as a shape of
/// one value).
#[derive(Clone, Copy, Debug)]
pub struct KvCacheConfig {
    /// Sequences at once.
    pub max_batch_size: i64,
    /// Tokens over all sequences.
    pub max_total_seq_len: i64,
    /// Tokens one forward pass may append.
    pub prefill_chunk_size: i64,
    /// Tokens per page (the model's kernels fix it: 16 for TVM's).
    pub page_size: i64,
    /// Whether sequences may slide a window ([`KvCache::enable_sliding_window`]).
    pub sliding_window: bool,
}

/// A paged KV cache (`relax.vm.PagedAttentionKVCache`). Cloning shares it. Its calls lock it:
/// a cache may be used from several threads, one call at a time.
#[derive(Clone, Debug)]
pub struct KvCache(ObjectRef);

impl KvCache {
    /// A cache from a tvm-ffi object, if it is one.
    pub fn from_object(o: ObjectRef) -> Result<KvCache> {
        if o.type_index() != paged_kv_cache_index() {
            return Err(Error::type_error(format!(
                "expected a relax.vm.PagedAttentionKVCache, got {}",
                types::type_key(o.type_index())
            )));
        }
        Ok(KvCache(o))
    }

    fn this(&self) -> Any {
        Any::object(self.0.clone())
    }

    fn int(&self, name: &str) -> Result<i64> {
        call(name, &[self.this()])?.as_i64().ok_or_else(|| Error::internal(format!("{name} returned no integer")))
    }

    /// Adds an empty sequence.
    pub fn add_sequence(&self, id: i64) -> Result<()> {
        call("vm.builtin.kv_state_add_sequence", &[self.this(), Any::int(id)]).map(drop)
    }

    /// Removes a sequence; its pages are free again.
    pub fn remove_sequence(&self, id: i64) -> Result<()> {
        call("vm.builtin.kv_state_remove_sequence", &[self.this(), Any::int(id)]).map(drop)
    }

    /// Forks `child` off `parent` at `pos` (None: the end); full pages are shared.
    pub fn fork_sequence(&self, parent: i64, child: i64, pos: Option<i64>) -> Result<()> {
        let args = [self.this(), Any::int(parent), Any::int(child), Any::int(pos.unwrap_or(-1))];
        call("vm.builtin.kv_state_fork_sequence", &args).map(drop)
    }

    /// Drops the last `n` tokens of a sequence.
    pub fn popn(&self, id: i64, n: i64) -> Result<()> {
        call("vm.builtin.kv_state_popn", &[self.this(), Any::int(id), Any::int(n)]).map(drop)
    }

    /// Drops every sequence.
    pub fn clear(&self) -> Result<()> {
        call("vm.builtin.kv_state_clear", &[self.this()]).map(drop)
    }

    /// Starts a forward pass appending `lens[i]` tokens to sequence `ids[i]` (the model call's
    /// inputs are those tokens, in this order).
    pub fn begin_forward(&self, ids: &[i64], lens: &[i64]) -> Result<()> {
        call("vm.builtin.kv_state_begin_forward", &[self.this(), shape_any(ids), shape_any(lens)]).map(drop)
    }

    /// [`KvCache::begin_forward`] with a token tree (speculative decoding): `parents` holds the
    /// parent of each new token within its sequence's tree (-1 for a root).
    pub fn begin_forward_tree(&self, ids: &[i64], lens: &[i64], parents: &[i64]) -> Result<()> {
        let args = [self.this(), shape_any(ids), shape_any(lens), shape_any(parents)];
        call("vm.builtin.kv_state_begin_forward", &args).map(drop)
    }

    /// Ends the forward pass.
    pub fn end_forward(&self) -> Result<()> {
        call("vm.builtin.kv_state_end_forward", &[self.this()]).map(drop)
    }

    /// Keeps the accepted path of each sequence's token tree (`leaves[i]`: its last accepted
    /// node, -1 for none).
    pub fn commit_accepted_token_tree_nodes(&self, ids: &[i64], leaves: &[i64]) -> Result<()> {
        let args = [self.this(), shape_any(ids), shape_any(leaves)];
        call("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes", &args).map(drop)
    }

    /// Lets a sequence keep only its last `window` tokens plus its first `sink` ones.
    pub fn enable_sliding_window(&self, id: i64, window: i64, sink: i64) -> Result<()> {
        let args = [self.this(), Any::int(id), Any::int(window), Any::int(sink)];
        call("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq", &args).map(drop)
    }

    /// Free pages.
    pub fn num_available_pages(&self) -> Result<i64> {
        self.int("vm.builtin.attention_kv_cache_get_num_available_pages")
    }

    /// Tokens held over all sequences.
    pub fn total_sequence_length(&self) -> Result<i64> {
        self.int("vm.builtin.attention_kv_cache_get_total_sequence_length")
    }

    /// Whether no sequence is held and every page is free.
    pub fn is_empty(&self) -> Result<bool> {
        call("vm.builtin.attention_kv_cache_empty", &[self.this()])?
            .as_bool()
            .ok_or_else(|| Error::internal("attention_kv_cache_empty returned no boolean"))
    }

    /// The tvm-ffi object.
    pub fn as_object(&self) -> &ObjectRef {
        &self.0
    }
}

/// A language model: a Relax VM over an MLC-style export and its weights.
pub struct LlmModel {
    vm: RelaxVm,
    params: Any,
    hidden: i64,
    device: Device,
}

impl LlmModel {
    /// A VM over `module` on `device` with the weights `names` (in the model's parameter order)
    /// from the tensor cache in `params_dir`. The tensor cache is the runtime's, process-wide,
    /// as in TVM: loading another folder replaces it (the weights taken stay with the model).
    pub fn new(module: &RelaxModule, device: Device, params_dir: &str, names: &[String]) -> Result<LlmModel> {
        let vm = RelaxVm::new(module, &[device])?;
        let dev = [Any::int(i64::from(device.device_type())), Any::int(i64::from(device.id()))];
        let names = array::make_array(names.iter().map(|n| Any::string(n)).collect());
        // The cache is process-wide: loading and taking the weights must not interleave with
        // another model's (threads making models at once).
        static CACHE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let params = {
            let _g = CACHE.lock().unwrap_or_else(|p| p.into_inner());
            call("vm.builtin.tensor_cache.load", &[Any::string(params_dir), dev[0].clone(), dev[1].clone()])?;
            call("vm.builtin.param_array_from_cache_by_name", &[Any::object(names)])?
        };
        for f in ["embed", "prefill", "decode", "batch_prefill", "batch_decode", "create_tir_paged_kv_cache"] {
            if module.function(f).is_none() {
                return Err(Error::key(format!("the model library has no function {f} (not an MLC-style LLM)")));
            }
        }
        let mut m = LlmModel { vm, params, hidden: 0, device };
        let probe = m.embed(&[0])?;
        m.hidden = *probe.shape().last().ok_or_else(|| Error::value("embed returned a 0-d tensor"))?;
        Ok(m)
    }

    /// The hidden size (the last dimension of `embed`).
    pub fn hidden_size(&self) -> i64 {
        self.hidden
    }

    /// The cache the model's `create_tir_paged_kv_cache` makes.
    pub fn create_kv_cache(&mut self, c: &KvCacheConfig) -> Result<KvCache> {
        let args = [
            shape_any(&[c.max_batch_size]),
            shape_any(&[c.max_total_seq_len]),
            shape_any(&[c.prefill_chunk_size]),
            shape_any(&[c.page_size]),
            shape_any(&[i64::from(c.sliding_window)]),
        ];
        let v = self.vm.call_raw("create_tir_paged_kv_cache", &args)?;
        let o = v.into_object().map_err(|_| Error::type_error("create_tir_paged_kv_cache returned no object"))?;
        KvCache::from_object(o)
    }

    /// `embed(ids)`: the token embeddings, `[n, hidden]`.
    pub fn embed(&mut self, ids: &[i32]) -> Result<NDArray> {
        let t = NDArray::from_slice(ids, &[ids.len() as i64], self.device)?;
        let v = self.vm.call_raw("embed", &[tensor_any(&t)?, self.params.clone()])?;
        to_ndarray(v, "embed")
    }

    fn run(&mut self, name: &str, inputs: &[&NDArray], kv: &KvCache) -> Result<NDArray> {
        let mut args = inputs.iter().map(|a| tensor_any(a)).collect::<Result<Vec<_>>>()?;
        args.push(Any::object(kv.0.clone()));
        args.push(self.params.clone());
        let r = self.vm.call_raw(name, &args)?;
        let o = r.into_object().map_err(|_| Error::type_error(format!("{name} returned no tuple")))?;
        let items = array::seq_items(&o);
        let logits =
            items.first().cloned().ok_or_else(|| Error::type_error(format!("{name} returned an empty tuple")))?;
        to_ndarray(logits, name)
    }

    /// `prefill(embeddings [1, n, hidden], kv)`: the logits of the last token, `[1, 1, vocab]`
    /// (inside `kv.begin_forward(&[seq], &[n])` .. `end_forward`).
    pub fn prefill(&mut self, embeddings: &NDArray, kv: &KvCache) -> Result<NDArray> {
        let e = embeddings.reshape(&[1, embeddings.len() as i64 / self.hidden, self.hidden])?;
        self.run("prefill", &[&e], kv)
    }

    /// `decode(embedding [1, 1, hidden], kv)`: `[1, 1, vocab]`.
    pub fn decode(&mut self, embedding: &NDArray, kv: &KvCache) -> Result<NDArray> {
        let e = embedding.reshape(&[1, 1, self.hidden])?;
        self.run("decode", &[&e], kv)
    }

    /// `batch_prefill(embeddings [1, total, hidden], logit_positions, kv)`: the logits at the
    /// given positions (each sequence's last token), `[1, b, vocab]`.
    pub fn batch_prefill(&mut self, embeddings: &NDArray, logit_positions: &[i32], kv: &KvCache) -> Result<NDArray> {
        let e = embeddings.reshape(&[1, embeddings.len() as i64 / self.hidden, self.hidden])?;
        let pos = NDArray::from_slice(logit_positions, &[logit_positions.len() as i64], self.device)?;
        self.run("batch_prefill", &[&e, &pos], kv)
    }

    /// `batch_decode(embeddings [b, 1, hidden], kv)`: `[b, 1, vocab]`.
    pub fn batch_decode(&mut self, embeddings: &NDArray, kv: &KvCache) -> Result<NDArray> {
        let b = embeddings.len() as i64 / self.hidden;
        let e = embeddings.reshape(&[b, 1, self.hidden])?;
        self.run("batch_decode", &[&e], kv)
    }
}

/// The index of the largest value of each row (the last dimension) of float32 logits.
pub fn argmax(logits: &NDArray) -> Result<Vec<usize>> {
    let v = logits.to_vec::<f32>()?;
    let n = *logits.shape().last().ok_or_else(|| Error::value("argmax of a 0-d tensor"))? as usize;
    if n == 0 {
        return Err(Error::value("argmax over an empty dimension"));
    }
    Ok(v.chunks(n)
        .map(|row| row.iter().enumerate().fold(0, |best, (i, x)| if *x > row[best] { i } else { best }))
        .collect())
}
