//! The KV state objects of TVM's Relax VM that language models compile to (TVM's
//! `src/runtime/vm/kv_state.{h,cc}`, `paged_kv_cache.cc`, `rnn_state.cc`):
//!
//! - [`paged`]: `relax.vm.PagedAttentionKVCache`, the paged KV cache of
//!   `tvm.relax.frontend.nn.llm.kv_cache` and MLC-LLM, over [`paging`] (pages, blocks, forks,
//!   sliding windows), [`forward`] (a forward pass's page tables and positions), [`aux_data`]
//!   (those arrays on the device) and [`backend`] (the TIR and FlashInfer kernels it calls);
//! - [`rnn`]: `relax.vm.RNNStateImp`, the state of state-space models (Mamba, RWKV).
//!
//! Both are `relax.vm.KVState`s: the `vm.builtin.kv_state_*` globals here manage their
//! sequences and forward passes. Each object is mutable behind a lock; a call that fails leaves
//! it as it was (errors are `InternalError`s with TVM's messages where TVM has one).

pub(crate) mod aux_data;
pub mod backend;
pub mod forward;
pub mod paged;
pub(crate) mod paging;
pub(crate) mod rnn;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use tvm_runtime_tvm_ffi::any::{view_as_i64, Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::shape::shape_dims;
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{ti, types, FfiError, FfiResult};

/// An error of TVM's `ICHECK` kind.
pub(crate) fn internal(msg: impl Into<String>) -> FfiError {
    FfiError::new("InternalError", msg)
}

fn index(key: &'static str, depth: i32, slots: i32, parent: i32, cell: &'static OnceLock<i32>) -> i32 {
    *cell.get_or_init(|| {
        types::get_or_alloc_index(key, -1, depth, slots, slots > 0, parent)
            .unwrap_or_else(|e| panic!("registering {key}: {}", e.message()))
    })
}

/// `relax.vm.KVState`.
pub(crate) fn kv_state_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    index("relax.vm.KVState", 1, 4, ti::OBJECT, &I)
}

/// `relax.vm.AttentionKVCache`.
pub(crate) fn attention_kv_cache_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    index("relax.vm.AttentionKVCache", 2, 1, kv_state_index(), &I)
}

/// `relax.vm.RNNState`.
pub(crate) fn rnn_state_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    index("relax.vm.RNNState", 2, 1, kv_state_index(), &I)
}

/// A value behind a lock that refuses re-entry from the thread holding it (a kernel calling
/// back into the cache it was called from) instead of deadlocking.
pub(crate) struct Guarded<T> {
    lock: parking_lot::Mutex<T>,
    holder: AtomicUsize,
}

thread_local! {
    static THREAD_TAG: u8 = const { 0 };
}

fn thread_tag() -> usize {
    THREAD_TAG.with(|t| t as *const u8 as usize)
}

struct Release<'a>(&'a AtomicUsize);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

impl<T> Guarded<T> {
    pub(crate) fn new(v: T) -> Guarded<T> {
        Guarded { lock: parking_lot::Mutex::new(v), holder: AtomicUsize::new(0) }
    }

    /// Runs `f` on the value, locked.
    pub(crate) fn with<R>(&self, what: &str, f: impl FnOnce(&mut T) -> FfiResult<R>) -> FfiResult<R> {
        let me = thread_tag();
        if self.holder.load(Ordering::Acquire) == me {
            return Err(internal(format!("{what}: called back into the KV state from inside one of its own calls")));
        }
        let mut g = self.lock.lock();
        self.holder.store(me, Ordering::Release);
        let _release = Release(&self.holder);
        f(&mut g)
    }
}

/// The argument views of a global.
pub(crate) type Args<'a> = &'a [TVMFFIAny];

pub(crate) fn arg<'a>(a: Args<'a>, i: usize, what: &str) -> FfiResult<&'a TVMFFIAny> {
    a.get(i)
        .ok_or_else(|| FfiError::type_error(format!("{what}: expected at least {} arguments, got {}", i + 1, a.len())))
}

pub(crate) fn int(a: Args, i: usize, what: &str) -> FfiResult<i64> {
    let v = arg(a, i, what)?;
    view_as_i64(v).ok_or_else(|| {
        FfiError::type_error(format!("{what}: argument {i} must be an integer, got {}", types::type_key(v.type_index)))
    })
}

pub(crate) fn float(a: Args, i: usize, what: &str) -> FfiResult<f64> {
    let v = arg(a, i, what)?;
    tvm_runtime_tvm_ffi::any::view_as_f64(v).ok_or_else(|| {
        FfiError::type_error(format!("{what}: argument {i} must be a number, got {}", types::type_key(v.type_index)))
    })
}

/// An object argument of type `ty` (or a descendant).
pub(crate) fn object_of(a: Args, i: usize, ty: i32, what: &str) -> FfiResult<ObjectRef> {
    let v = arg(a, i, what)?;
    if v.is_object() && !v.obj_ptr().is_null() && types::is_instance(v.type_index, ty) {
        // SAFETY: a view of a live object.
        return Ok(unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null"));
    }
    Err(FfiError::type_error(format!(
        "{what}: argument {i} must be a {}, got {}",
        types::type_key(ty),
        types::type_key(v.type_index)
    )))
}

/// A `Shape` argument's values.
pub(crate) fn shape(a: Args, i: usize, what: &str) -> FfiResult<Vec<i64>> {
    let o = object_of(a, i, ti::SHAPE, what)?;
    Ok(shape_dims(&o).to_vec())
}

/// A `Tensor` argument.
pub(crate) fn tensor(a: Args, i: usize, what: &str) -> FfiResult<ObjectRef> {
    object_of(a, i, ti::TENSOR, what)
}

/// What every KV state does (`KVStateObj`).
pub(crate) trait KvState {
    fn clear(&self) -> FfiResult<()>;
    fn add_sequence(&self, id: i64) -> FfiResult<()>;
    fn remove_sequence(&self, id: i64) -> FfiResult<()>;
    fn fork_sequence(&self, parent: i64, child: i64, pos: i64) -> FfiResult<()>;
    fn popn(&self, id: i64, n: i64) -> FfiResult<()>;
    fn begin_forward(&self, ids: &[i64], lens: &[i64], tree: Option<&[i64]>) -> FfiResult<()>;
    fn end_forward(&self) -> FfiResult<()>;
}

/// The KV state behind argument 0.
fn with_state<R>(a: Args, what: &str, f: impl FnOnce(&dyn KvState) -> FfiResult<R>) -> FfiResult<R> {
    let o = object_of(a, 0, kv_state_index(), what)?;
    if let Some(c) = paged::as_cache(&o) {
        return f(c);
    }
    if let Some(r) = rnn::as_state(&o) {
        return f(r);
    }
    Err(FfiError::type_error(format!(
        "{what}: {} is not a KV state this runtime made",
        types::type_key(o.type_index())
    )))
}

fn none(r: FfiResult<()>) -> FfiResult<Any> {
    r.map(|()| Any::none())
}

/// Registers the `vm.builtin.kv_state_*`, `attention_kv_cache_*`, `paged_attention_kv_cache_create`,
/// `kv_cache_disagg_*` and `rnn_state_*` globals.
pub fn register(b: &mut Builder) {
    let add = |b: &mut Builder, name: &str, f: crate::builtins::Native| {
        b.add(name, f);
    };
    add(b, "vm.builtin.kv_state_clear", |a| with_state(a, "vm.builtin.kv_state_clear", |s| none(s.clear())));
    add(b, "vm.builtin.kv_state_add_sequence", |a| {
        let what = "vm.builtin.kv_state_add_sequence";
        with_state(a, what, |s| none(s.add_sequence(int(a, 1, what)?)))
    });
    add(b, "vm.builtin.kv_state_remove_sequence", |a| {
        let what = "vm.builtin.kv_state_remove_sequence";
        with_state(a, what, |s| none(s.remove_sequence(int(a, 1, what)?)))
    });
    add(b, "vm.builtin.kv_state_fork_sequence", |a| {
        let what = "vm.builtin.kv_state_fork_sequence";
        let pos = if a.len() > 3 { int(a, 3, what)? } else { -1 };
        with_state(a, what, |s| none(s.fork_sequence(int(a, 1, what)?, int(a, 2, what)?, pos)))
    });
    add(b, "vm.builtin.kv_state_popn", |a| {
        let what = "vm.builtin.kv_state_popn";
        let n = int(a, 2, what)?;
        if i32::try_from(n).is_err() {
            return Err(internal(format!("{what}: {n} tokens is out of range")));
        }
        with_state(a, what, |s| none(s.popn(int(a, 1, what)?, n)))
    });
    add(b, "vm.builtin.kv_state_begin_forward", |a| {
        let what = "vm.builtin.kv_state_begin_forward";
        if a.len() != 3 && a.len() != 4 {
            return Err(internal("KVState BeginForward only accepts 3 or 4 arguments"));
        }
        let ids = shape(a, 1, what)?;
        let lens = shape(a, 2, what)?;
        let tree = match a.get(3) {
            Some(v) if v.type_index != ti::NONE => Some(shape(a, 3, what)?),
            _ => None,
        };
        with_state(a, what, |s| none(s.begin_forward(&ids, &lens, tree.as_deref())))
    });
    add(b, "vm.builtin.kv_state_end_forward", |a| {
        with_state(a, "vm.builtin.kv_state_end_forward", |s| none(s.end_forward()))
    });
    paged::register(b);
    rnn::register(b);
}

#[cfg(test)]
mod tests;
