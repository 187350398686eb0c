//! The legacy attention KV cache of TVM's runtime (`lm_support.cc`,
//! `relax.vm.AttentionKVCacheLegacy`), which `tvm.relax.frontend.nn.KVCache` compiles to: a
//! tensor whose first dimension grows (doubling) as rows are appended, a fill count, and the
//! write position of window attention. The `vm.builtin.attention_kv_cache_*` globals.

use super::builtins::add_fn;
use parking_lot::Mutex;
use std::sync::OnceLock;
use tvm_runtime_classic::abi::DLTensor;
use tvm_runtime_tvm_ffi::any::{Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::array::seq_items;
use tvm_runtime_tvm_ffi::containers::shape::shape_dims;
use tvm_runtime_tvm_ffi::object::{make_object, ObjectRef};
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{tensor, ti, types, FfiError, FfiResult};

fn type_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    *I.get_or_init(|| {
        types::get_or_alloc_index("relax.vm.AttentionKVCacheLegacy", -1, 1, 0, false, ti::OBJECT)
            .unwrap_or_else(|e| panic!("registering the KV cache type: {}", e.message()))
    })
}

struct State {
    data: ObjectRef,
    fill_count: i64,
    window_pos: i64,
}

/// The payload: the state behind a lock (the cache is mutable, as in TVM).
struct KvCache(Mutex<State>);

fn cache(v: &TVMFFIAny, what: &str) -> FfiResult<ObjectRef> {
    if v.type_index != type_index() {
        return Err(FfiError::type_error(format!(
            "{what}: expected relax.vm.AttentionKVCacheLegacy, got {}",
            types::type_key(v.type_index)
        )));
    }
    // SAFETY: a view of a live object of our type.
    Ok(unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null"))
}

fn state(o: &ObjectRef) -> parking_lot::MutexGuard<'_, State> {
    // SAFETY: objects of this type index are made by `create` with this payload.
    unsafe { o.payload::<KvCache>() }.0.lock()
}

fn tensor_arg<'a>(v: &TVMFFIAny, what: &str) -> FfiResult<&'a DLTensor> {
    if v.type_index != ti::TENSOR || v.obj_ptr().is_null() {
        return Err(FfiError::type_error(format!("{what}: expected a Tensor, got {}", types::type_key(v.type_index))));
    }
    // SAFETY: a live tensor.
    let t = unsafe { tensor::dltensor(v.obj_ptr()) };
    if t.ndim < 1 || !tensor::is_contiguous(t) {
        return Err(FfiError::value(format!("{what}: the value must be a contiguous tensor of at least 1 dimension")));
    }
    Ok(t)
}

fn dims(t: &DLTensor) -> FfiResult<&[i64]> {
    Ok(tvm_runtime_classic::device::tensor_shape(t)?)
}

fn row_bytes(t: &DLTensor) -> FfiResult<usize> {
    super::objects::data_size(&dims(t)?[1..], t.dtype)
}

/// Copies `rows` rows from `src` (from row `src_row`) into `dst` (from row `dst_row`).
fn copy_rows(src: &DLTensor, src_row: i64, dst: &DLTensor, dst_row: i64, rows: i64) -> FfiResult<()> {
    if rows <= 0 {
        return Ok(());
    }
    let mut shape = dims(dst)?.to_vec();
    shape[0] = rows;
    let rb = row_bytes(dst)? as u64;
    let mut s = *src;
    s.shape = shape.as_mut_ptr();
    s.strides = std::ptr::null_mut();
    s.byte_offset += src_row as u64 * rb;
    let mut d = *dst;
    d.shape = shape.as_mut_ptr();
    d.strides = std::ptr::null_mut();
    d.byte_offset += dst_row as u64 * rb;
    tvm_runtime_classic::ndarray::copy_tensor(&s, &d, std::ptr::null_mut())?;
    Ok(())
}

fn check_value(st: &State, v: &DLTensor, what: &str) -> FfiResult<()> {
    // SAFETY: the cache's data is a live tensor.
    let d = unsafe { tensor::dltensor(st.data.as_ptr()) };
    if d.dtype != v.dtype {
        return Err(FfiError::value(format!("{what}: dtype mismatch")));
    }
    let (dd, vd) = (dims(d)?, dims(v)?);
    if dd.len() != vd.len() || dd[1..] != vd[1..] {
        return Err(FfiError::value(format!("{what}: the value's shape {vd:?} does not fit the cache's {dd:?}")));
    }
    Ok(())
}

/// Grows the reserved rows (doubling) to hold `need` rows, keeping the filled ones.
fn reserve(st: &mut State, need: i64) -> FfiResult<()> {
    // SAFETY: the cache's data is a live tensor.
    let d = unsafe { tensor::dltensor(st.data.as_ptr()) };
    let mut shape = dims(d)?.to_vec();
    let mut slots = shape[0].max(1);
    while need > slots {
        slots = slots.checked_mul(2).ok_or_else(|| FfiError::value("KV cache too large"))?;
    }
    if slots != shape[0] {
        shape[0] = slots;
        let new = tensor::empty(&shape, d.dtype, d.device)?;
        // SAFETY: a live tensor.
        copy_rows(d, 0, unsafe { tensor::dltensor(new.as_ptr()) }, 0, st.fill_count)?;
        st.data = new;
    }
    Ok(())
}

fn append(st: &mut State, v: &DLTensor) -> FfiResult<()> {
    check_value(st, v, "vm.builtin.attention_kv_cache_append")?;
    let n = dims(v)?[0];
    reserve(st, st.fill_count + n)?;
    // SAFETY: a live tensor.
    copy_rows(v, 0, unsafe { tensor::dltensor(st.data.as_ptr()) }, st.fill_count, n)?;
    st.fill_count += n;
    Ok(())
}

fn window_override(st: &mut State, v: &DLTensor, max: i64, sinks: i64) -> FfiResult<()> {
    let what = "vm.builtin.attention_kv_cache_window_override";
    check_value(st, v, what)?;
    let n = dims(v)?[0];
    if n > max - sinks {
        return Err(FfiError::value(format!("{what}: dim 0 of value too large")));
    }
    if st.fill_count + n <= max {
        reserve(st, st.fill_count + n)?;
    }
    // SAFETY: a live tensor.
    let d = unsafe { tensor::dltensor(st.data.as_ptr()) };
    let first = n.min(max - st.window_pos);
    if st.window_pos + first > dims(d)?[0] {
        return Err(FfiError::value(format!("{what}: the window does not fit the reserved cache")));
    }
    copy_rows(v, 0, d, st.window_pos, first)?;
    st.fill_count = (st.fill_count + n).min(max);
    st.window_pos = (st.window_pos + n).min(max);
    if first < n {
        copy_rows(v, first, d, sinks, n - first)?;
        st.window_pos = n - first + sinks;
    }
    Ok(())
}

fn view(st: &State, shape: Option<Vec<i64>>) -> FfiResult<Any> {
    // SAFETY: a live tensor.
    let d = unsafe { tensor::dltensor(st.data.as_ptr()) };
    let dd = dims(d)?;
    let shape = shape.unwrap_or_else(|| std::iter::once(st.fill_count).chain(dd[1..].iter().copied()).collect());
    if shape.len() != dd.len() || shape[0] != st.fill_count || shape[1..] != dd[1..] {
        return Err(FfiError::value(format!(
            "vm.builtin.attention_kv_cache_view: shape {shape:?} does not match the filled cache ({} of {dd:?})",
            st.fill_count
        )));
    }
    Ok(Any::object(tensor::in_owner(st.data.clone(), d.data, d.byte_offset, &shape, d.dtype, d.device)))
}

fn int(a: &[TVMFFIAny], i: usize, what: &str) -> FfiResult<i64> {
    a.get(i)
        .and_then(tvm_runtime_tvm_ffi::any::view_as_i64)
        .ok_or_else(|| FfiError::type_error(format!("{what}: argument {i} must be an integer")))
}

fn shape_arg(a: &[TVMFFIAny], i: usize, what: &str) -> FfiResult<Vec<i64>> {
    let v = a
        .get(i)
        .filter(|v| v.type_index == ti::SHAPE)
        .ok_or_else(|| FfiError::type_error(format!("{what}: argument {i} must be a Shape")))?;
    // SAFETY: a view of a live shape.
    let o = unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null");
    Ok(shape_dims(&o).to_vec())
}

fn caches(a: &[TVMFFIAny], what: &str) -> FfiResult<Vec<ObjectRef>> {
    let v = a
        .first()
        .filter(|v| v.type_index == ti::ARRAY)
        .ok_or_else(|| FfiError::type_error(format!("{what}: expected an Array of KV caches")))?;
    // SAFETY: a view of a live array.
    let arr = unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null");
    seq_items(&arr).iter().map(|c| cache(c.raw(), what)).collect()
}

/// Registers the `vm.builtin.attention_kv_cache_*` globals.
pub(crate) fn register(b: &mut Builder) {
    add_fn(b, "vm.builtin.attention_kv_cache_create", |a| {
        let what = "vm.builtin.attention_kv_cache_create";
        let init = tensor_arg(a.first().unwrap_or(&TVMFFIAny::NONE), what)?;
        let reserve_shape = shape_arg(a, 1, what)?;
        let init_fill = int(a, 2, what)?;
        let data = tensor::empty(&reserve_shape, init.dtype, init.device)?;
        let mut st = State { data, fill_count: 0, window_pos: 0 };
        append(&mut st, init)?;
        if init_fill >= 0 {
            st.fill_count = init_fill;
            st.window_pos = init_fill;
        }
        Ok(Any::object(make_object(type_index(), KvCache(Mutex::new(st)))))
    });
    add_fn(b, "vm.builtin.attention_kv_cache_append", |a| {
        let what = "vm.builtin.attention_kv_cache_append";
        let c = cache(a.first().unwrap_or(&TVMFFIAny::NONE), what)?;
        append(&mut state(&c), tensor_arg(a.get(1).unwrap_or(&TVMFFIAny::NONE), what)?)?;
        Ok(Any::object(c))
    });
    add_fn(b, "vm.builtin.attention_kv_cache_update", |a| {
        let what = "vm.builtin.attention_kv_cache_update";
        let c = cache(a.first().unwrap_or(&TVMFFIAny::NONE), what)?;
        let v = tensor_arg(a.get(1).unwrap_or(&TVMFFIAny::NONE), what)?;
        let mut st = state(&c);
        check_value(&st, v, what)?;
        let n = dims(v)?[0];
        if n != st.fill_count {
            return Err(FfiError::value(format!("{what}: Requested shape do not match the filled count")));
        }
        // SAFETY: a live tensor.
        copy_rows(v, 0, unsafe { tensor::dltensor(st.data.as_ptr()) }, 0, n)?;
        st.fill_count = n;
        drop(st);
        Ok(Any::object(c))
    });
    add_fn(b, "vm.builtin.attention_kv_cache_window_override", |a| {
        let what = "vm.builtin.attention_kv_cache_window_override";
        let c = cache(a.first().unwrap_or(&TVMFFIAny::NONE), what)?;
        let v = tensor_arg(a.get(1).unwrap_or(&TVMFFIAny::NONE), what)?;
        window_override(&mut state(&c), v, int(a, 2, what)?, 0)?;
        Ok(Any::object(c))
    });
    add_fn(b, "vm.builtin.attention_kv_cache_window_override_with_sinks", |a| {
        let what = "vm.builtin.attention_kv_cache_window_override_with_sinks";
        let c = cache(a.first().unwrap_or(&TVMFFIAny::NONE), what)?;
        let v = tensor_arg(a.get(1).unwrap_or(&TVMFFIAny::NONE), what)?;
        window_override(&mut state(&c), v, int(a, 2, what)?, int(a, 3, what)?)?;
        Ok(Any::object(c))
    });
    add_fn(b, "vm.builtin.attention_kv_cache_view", |a| {
        let what = "vm.builtin.attention_kv_cache_view";
        if !(a.len() == 1 || a.len() == 2) {
            return Err(FfiError::value(format!("`{what}` expects 1 or 2 arguments, but got {}.", a.len())));
        }
        let c = cache(&a[0], what)?;
        let shape = if a.len() == 2 { Some(shape_arg(a, 1, what)?) } else { None };
        let st = state(&c);
        view(&st, shape)
    });
    add_fn(b, "vm.builtin.attention_kv_cache_array_popn", |a| {
        let what = "vm.builtin.attention_kv_cache_array_popn";
        let n = int(a, 1, what)?;
        for c in caches(a, what)? {
            let mut st = state(&c);
            if n < 0 || n > st.fill_count {
                return Err(FfiError::value(format!("{what}: cannot pop {n} of {} rows", st.fill_count)));
            }
            st.fill_count -= n;
        }
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.attention_kv_cache_array_clear", |a| {
        for c in caches(a, "vm.builtin.attention_kv_cache_array_clear")? {
            let mut st = state(&c);
            st.fill_count = 0;
            st.window_pos = 0;
        }
        Ok(Any::none())
    });
}
