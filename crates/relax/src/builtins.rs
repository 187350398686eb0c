//! The `vm.builtin.*` globals that TVM's Relax compiler emits (TVM's `src/runtime/vm/builtin.cc`):
//! storage and tensors, the shape heap, run-time checks, tuples, closures, control flow.
//!
//! Every argument is checked: a builtin called with the wrong kind or number of arguments, a
//! shape-heap index out of range or a forged VM pointer gets a clear error, not a crash.

use super::objects;
use super::vm::{self, from_ctx};
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};
use tvm_runtime_tvm_ffi::any::{view_as_i64, Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::array::{make_array, seq_items, TVMFFISeqCell};
use tvm_runtime_tvm_ffi::containers::shape::{make_shape, shape_dims};
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{function, registry, string, ti, types, FfiError, FfiResult};

type Args<'a> = &'a [TVMFFIAny];

#[inline]
fn arg<'a>(name: &str, a: Args<'a>, i: usize) -> FfiResult<&'a TVMFFIAny> {
    a.get(i)
        .ok_or_else(|| FfiError::type_error(format!("{name}: expected at least {} arguments, got {}", i + 1, a.len())))
}

#[inline]
pub(super) fn int(name: &str, a: Args, i: usize) -> FfiResult<i64> {
    let v = arg(name, a, i)?;
    view_as_i64(v).ok_or_else(|| {
        FfiError::type_error(format!("{name}: argument {i} must be an integer, got {}", types::type_key(v.type_index)))
    })
}

#[inline]
fn index(name: &str, a: Args, i: usize) -> FfiResult<usize> {
    let v = int(name, a, i)?;
    usize::try_from(v).map_err(|_| FfiError::index(format!("{name}: argument {i} ({v}) is negative")))
}

#[inline]
fn object(name: &str, a: Args, i: usize) -> FfiResult<ObjectRef> {
    let v = arg(name, a, i)?;
    if !v.is_object() || v.obj_ptr().is_null() {
        return Err(FfiError::type_error(format!(
            "{name}: argument {i} must be an object, got {}",
            types::type_key(v.type_index)
        )));
    }
    // SAFETY: a view of a live object.
    Ok(unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null"))
}

#[inline]
fn dtype(name: &str, a: Args, i: usize) -> FfiResult<DLDataType> {
    let v = arg(name, a, i)?;
    if v.type_index == ti::DATA_TYPE {
        // SAFETY: the union is read as the variant the type index names.
        return Ok(unsafe { v.v.v_dtype });
    }
    // SAFETY: a valid view.
    match unsafe { string::view_str_bytes(v) }.and_then(|b| std::str::from_utf8(b).ok()) {
        Some(s) => tvm_runtime_tvm_ffi::dtype::parse(s),
        None => Err(FfiError::type_error(format!(
            "{name}: argument {i} must be a data type, got {}",
            types::type_key(v.type_index)
        ))),
    }
}

/// An error-context argument, read only when an error is written.
#[derive(Clone, Copy)]
struct Ctx<'a>(Args<'a>, usize);

impl std::fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&opt_str(self.0, self.1))
    }
}

/// Whether a memory-scope argument is absent, None, empty or "global".
#[inline]
fn is_global_scope(a: Args, i: usize) -> bool {
    match a.get(i) {
        None => true,
        Some(v) if v.type_index == ti::NONE => true,
        // SAFETY: a valid view.
        Some(v) => matches!(unsafe { string::view_str_bytes(v) }, Some(b"" | b"global")),
    }
}

/// An optional string argument (None or missing gives "").
fn opt_str(a: Args, i: usize) -> String {
    a.get(i)
        // SAFETY: a valid view.
        .and_then(|v| unsafe { string::view_str_bytes(v) })
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// The tensor a view holds (`ffi.Tensor` or `DLTensor*`).
#[inline]
fn view_tensor<'a>(v: &TVMFFIAny) -> Option<&'a DLTensor> {
    match v.type_index {
        // SAFETY: a tensor object has its DLTensor after the header.
        ti::TENSOR if !v.obj_ptr().is_null() => Some(unsafe { tvm_runtime_tvm_ffi::tensor::dltensor(v.obj_ptr()) }),
        // SAFETY: a DLTensor* view points to a valid tensor or is null.
        ti::DLTENSOR_PTR => unsafe { (v.bits() as *const DLTensor).as_ref() },
        _ => None,
    }
}

#[inline]
fn tensor<'a>(name: &str, a: Args, i: usize) -> FfiResult<&'a DLTensor> {
    let v = arg(name, a, i)?;
    view_tensor(v).ok_or_else(|| {
        FfiError::type_error(format!("{name}: argument {i} must be a Tensor, got {}", types::type_key(v.type_index)))
    })
}

#[inline]
fn dims(t: &DLTensor) -> FfiResult<&[i64]> {
    Ok(tvm_runtime_classic::device::tensor_shape(t)?)
}

/// The shape heap: an int64 CPU tensor (or none).
struct Heap<'a>(Option<&'a mut [i64]>);

impl Heap<'_> {
    #[inline]
    fn of<'a>(name: &str, v: &TVMFFIAny) -> FfiResult<Heap<'a>> {
        if v.type_index == ti::NONE {
            return Ok(Heap(None));
        }
        let t = view_tensor(v).ok_or_else(|| {
            FfiError::type_error(format!(
                "{name}: the shape heap must be a Tensor, got {}",
                types::type_key(v.type_index)
            ))
        })?;
        if t.device.device_type != tvm_runtime_classic::device::CPU
            || t.dtype.code != 0
            || t.dtype.bits != 64
            || t.ndim != 1
        {
            return Err(FfiError::type_error(format!("{name}: the shape heap must be a 1-d int64 CPU tensor")));
        }
        let n = usize::try_from(dims(t)?[0]).unwrap_or(0);
        if n == 0 {
            return Ok(Heap(Some(&mut [])));
        }
        // SAFETY: a compact 1-d CPU tensor of n int64 values (the heap the VM allocated).
        let s =
            unsafe { std::slice::from_raw_parts_mut(t.data.cast::<u8>().add(t.byte_offset as usize).cast::<i64>(), n) };
        Ok(Heap(Some(s)))
    }

    #[inline]
    fn slot(&mut self, name: &str, reg: i64) -> FfiResult<&mut i64> {
        let Some(h) = self.0.as_deref_mut() else {
            return Err(FfiError::value(format!("{name}: the shape heap is needed but none was given")));
        };
        let len = h.len();
        usize::try_from(reg)
            .ok()
            .and_then(move |r| h.get_mut(r))
            .ok_or_else(|| FfiError::index(format!("{name}: shape heap index {reg} is out of range ({len} slots)")))
    }
}

const ASSERT_EQUAL_TO_IMM: i64 = 0;
const STORE_TO_HEAP: i64 = 1;
const NO_OP: i64 = 2;
const ASSERT_EQUAL_TO_LOAD: i64 = 3;
const USE_IMM: i64 = 0;
const LOAD_SHAPE: i64 = 1;

/// `shape[i]` in messages.
struct Dim(usize);

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shape[{}]", self.0)
    }
}

fn match_value(
    name: &str,
    heap: &mut Heap,
    code: i64,
    reg: i64,
    value: i64,
    what: impl std::fmt::Display,
    ctx: Ctx,
) -> FfiResult<()> {
    match code {
        ASSERT_EQUAL_TO_IMM if value != reg => Err(FfiError::runtime(format!(
            "{ctx} match_cast error,  {what} mismatch to specified constant: {value} vs {reg}"
        ))),
        ASSERT_EQUAL_TO_IMM | NO_OP => Ok(()),
        STORE_TO_HEAP => {
            *heap.slot(name, reg)? = value;
            Ok(())
        }
        ASSERT_EQUAL_TO_LOAD => {
            let have = *heap.slot(name, reg)?;
            if have != value {
                return Err(FfiError::runtime(format!(
                    "{ctx} match_cast error,  {what} mismatch to a previous populated value: {value} vs {have}"
                )));
            }
            Ok(())
        }
        c => Err(FfiError::runtime(format!("{name}: Unknown match shape code: {c}"))),
    }
}

#[inline]
fn match_shape(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.match_shape";
    let first = arg(name, a, 0)?;
    let owned;
    let shape: &[i64] = if let Some(t) = view_tensor(first) {
        dims(t)?
    } else if first.type_index == ti::SHAPE {
        owned = object(name, a, 0)?;
        shape_dims(&owned)
    } else {
        return Err(FfiError::type_error(format!(
            "{name}: expected a Tensor or Shape, got {}",
            types::type_key(first.type_index)
        )));
    };
    let mut heap = Heap::of(name, arg(name, a, 1)?)?;
    let size = index(name, a, 2)?;
    if !matches!(size.checked_mul(2).and_then(|n| n.checked_add(3)), Some(n) if n <= a.len()) {
        return Err(FfiError::value(format!(
            "{name}: {size} dimensions need {} arguments, got {}",
            3 + 2 * size,
            a.len()
        )));
    }
    let ctx = Ctx(a, 3 + 2 * size);
    if shape.len() != size {
        return Err(FfiError::runtime(format!(
            "{ctx} match_cast shape size mismatch: expected {size} dimensions, got {}",
            shape.len()
        )));
    }
    for (i, &d) in shape.iter().enumerate() {
        let (code, reg) = (int(name, a, 3 + 2 * i)?, int(name, a, 4 + 2 * i)?);
        match_value(name, &mut heap, code, reg, d, Dim(i), ctx)?;
    }
    Ok(Any::none())
}

#[inline]
fn make_shape_builtin(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.make_shape";
    let mut heap = Heap::of(name, arg(name, a, 0)?)?;
    let size = index(name, a, 1)?;
    if !matches!(size.checked_mul(2).and_then(|n| n.checked_add(2)), Some(n) if n <= a.len()) {
        return Err(FfiError::value(format!("{name}: {size} dimensions need {} arguments", 2 + 2 * size)));
    }
    let mut out = Vec::with_capacity(size);
    for i in 0..size {
        let (code, reg) = (int(name, a, 2 + 2 * i)?, int(name, a, 3 + 2 * i)?);
        out.push(match code {
            USE_IMM => reg,
            LOAD_SHAPE => *heap.slot(name, reg)?,
            c => return Err(FfiError::runtime(format!("{name}: Invalid shape code: {c}"))),
        });
    }
    Ok(Any::object(make_shape(&out)))
}

#[inline]
fn check_tensor_info(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.check_tensor_info";
    let v = arg(name, a, 0)?;
    let ndim = int(name, a, 1)?;
    let (want, ctx) = if a.len() == 3 {
        (None, Ctx(a, 2))
    } else if a.get(2).is_some_and(|d| d.type_index == ti::NONE) {
        (None, Ctx(a, 3))
    } else {
        (Some(dtype(name, a, 2)?), Ctx(a, 3))
    };
    let t = view_tensor(v).ok_or_else(|| {
        FfiError::type_error(format!("{ctx} expect a Tensor but get {}", types::type_key(v.type_index)))
    })?;
    if ndim != -1 && i64::from(t.ndim) != ndim {
        return Err(FfiError::value(format!("{ctx} expect Tensor with ndim {ndim} but get {}", t.ndim)));
    }
    if let Some(d) = want {
        if t.dtype != d {
            return Err(FfiError::value(format!(
                "{ctx} expect Tensor with dtype {} but get {}",
                tvm_runtime_tvm_ffi::dtype::format(d)?,
                tvm_runtime_tvm_ffi::dtype::format(t.dtype)?
            )));
        }
    }
    Ok(Any::none())
}

fn check_object(a: Args, name: &str, expect: &str, type_index: i32) -> FfiResult<ObjectRef> {
    let v = arg(name, a, 0)?;
    if v.type_index != type_index {
        return Err(FfiError::type_error(format!(
            "{} expect a {expect} but get {}",
            opt_str(a, a.len() - 1),
            types::type_key(v.type_index)
        )));
    }
    object(name, a, 0)
}

#[inline]
fn alloc_storage(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.alloc_storage";
    let rt = from_ctx(arg(name, a, 0)?, name)?;
    let shape = object(name, a, 1)?;
    if shape.type_index() != ti::SHAPE {
        return Err(FfiError::type_error(format!("{name}: the buffer shape must be a Shape")));
    }
    let mut dev = int(name, a, 2)?;
    if dev == -1 {
        dev = rt.devices.len() as i64 - 1;
    }
    let alloc = usize::try_from(dev).ok().and_then(|d| rt.allocators.get(d)).ok_or_else(|| {
        FfiError::index(format!("{name}: device index {dev} is out of the VM's {} devices", rt.devices.len()))
    })?;
    let hint = dtype(name, a, 3)?;
    if !is_global_scope(a, 4) {
        let scope = opt_str(a, 4);
        return Err(FfiError::value(format!("{name}: memory scope {scope:?} is not supported on this device")));
    }
    let nbytes = objects::data_size(shape_dims(&shape), hint)?;
    Ok(Any::object(objects::alloc_storage(alloc, nbytes, hint)?))
}

#[inline]
fn alloc_tensor(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.alloc_tensor";
    let storage = object(name, a, 0)?;
    let offset = int(name, a, 1)?;
    let shape = object(name, a, 2)?;
    if shape.type_index() != ti::SHAPE {
        return Err(FfiError::type_error(format!("{name}: the shape must be a Shape")));
    }
    let dt = dtype(name, a, 3)?;
    if !is_global_scope(a, 4) {
        let scope = opt_str(a, 4);
        {
            return Err(FfiError::value(format!("{name}: memory scope {scope:?} is not supported on this device")));
        }
    }
    Ok(Any::object(objects::alloc_tensor(&storage, offset, shape_dims(&shape), dt)?))
}

fn alloc_shape_heap(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.alloc_shape_heap";
    let rt = from_ctx(arg(name, a, 0)?, name)?;
    let size = int(name, a, 1)?;
    let host = rt.allocators.last().expect("a VM has a device");
    if host.device().device_type != tvm_runtime_classic::device::CPU {
        return Err(FfiError::value(format!("{name}: the VM's last device must be the CPU")));
    }
    let i64t = DLDataType { code: 0, bits: 64, lanes: 1 };
    let nbytes = objects::data_size(&[size], i64t)?;
    let s = objects::alloc_storage(host, nbytes, i64t)?;
    Ok(Any::object(objects::alloc_tensor(&s, 0, &[size], i64t)?))
}

/// A view of a compact tensor with another shape of the same size.
fn reshape(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.reshape";
    let v = arg(name, a, 0)?;
    let shape = object(name, a, 1)?;
    if shape.type_index() != ti::SHAPE {
        return Err(FfiError::type_error(format!("{name}: the new shape must be a Shape")));
    }
    let new = shape_dims(&shape);
    let t = view_tensor(v).ok_or_else(|| {
        FfiError::type_error(format!(
            "vm.builtin.reshape expects a Tensor or DLTensor*, but get {}",
            types::type_key(v.type_index)
        ))
    })?;
    let (have, want) = (objects::data_size(dims(t)?, t.dtype)?, objects::data_size(new, t.dtype)?);
    if have != want {
        return Err(FfiError::value(format!("{name}: cannot view {:?} as {new:?}", dims(t)?)));
    }
    if !tvm_runtime_tvm_ffi::tensor::is_contiguous(t) {
        return Err(FfiError::value("Can only create view for compact tensor"));
    }
    let owner = if v.type_index == ti::TENSOR {
        object(name, a, 0)?
    } else {
        // A bare DLTensor* has no owner to keep alive: copy it.
        vm::copy_tensor_to(t, t.device)?
    };
    // SAFETY: `owner` is a live tensor.
    let src = unsafe { tvm_runtime_tvm_ffi::tensor::dltensor(owner.as_ptr()) };
    Ok(Any::object(tvm_runtime_tvm_ffi::tensor::in_owner(
        owner.clone(),
        src.data,
        src.byte_offset,
        new,
        src.dtype,
        src.device,
    )))
}

fn read_if_cond(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.read_if_cond";
    let v = arg(name, a, 0)?;
    if let Some(b) = tvm_runtime_tvm_ffi::any::view_as_bool(v) {
        return Ok(Any::bool(b));
    }
    let t = view_tensor(v).ok_or_else(|| {
        FfiError::type_error(format!("{name}: expected a bool or a Tensor, got {}", types::type_key(v.type_index)))
    })?;
    if !matches!(t.dtype.code, 0 | 1 | 6) || !matches!(t.dtype.bits, 1 | 8 | 16 | 32 | 64) {
        return Err(FfiError::type_error(format!(
            "{name}: the condition must be an integer or bool tensor, got {}",
            tvm_runtime_tvm_ffi::dtype::format(t.dtype)?
        )));
    }
    let host;
    let t = if t.device.device_type == tvm_runtime_classic::device::CPU {
        t
    } else {
        host = vm::copy_tensor_to(t, DLDevice { device_type: tvm_runtime_classic::device::CPU, device_id: 0 })?;
        // SAFETY: a live tensor.
        unsafe { tvm_runtime_tvm_ffi::tensor::dltensor(host.as_ptr()) }
    };
    if dims(t)?.iter().product::<i64>() < 1 {
        return Err(FfiError::value(format!("{name}: the condition tensor is empty")));
    }
    let bytes = usize::from(t.dtype.bits.div_ceil(8));
    let mut buf = [0u8; 8];
    // SAFETY: a CPU tensor with at least one element of `bytes` bytes.
    unsafe { std::ptr::copy_nonoverlapping(t.data.cast::<u8>().add(t.byte_offset as usize), buf.as_mut_ptr(), bytes) };
    Ok(Any::bool(buf.iter().any(|&b| b != 0)))
}

fn tensor_to_shape(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.tensor_to_shape";
    let t = tensor(name, a, 0)?;
    let host;
    let t = if t.device.device_type == tvm_runtime_classic::device::CPU {
        t
    } else {
        host = vm::copy_tensor_to(t, DLDevice { device_type: tvm_runtime_classic::device::CPU, device_id: 0 })?;
        // SAFETY: a live tensor.
        unsafe { tvm_runtime_tvm_ffi::tensor::dltensor(host.as_ptr()) }
    };
    if t.ndim != 1 || t.dtype.code != 0 || !matches!(t.dtype.bits, 16 | 32 | 64) {
        return Err(FfiError::value(format!("{name}: expected a 1-d int16/32/64 tensor")));
    }
    let n = dims(t)?[0] as usize;
    let base = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize);
    let out = (0..n)
        // SAFETY: a compact CPU tensor of n integers.
        .map(|i| unsafe {
            match t.dtype.bits {
                16 => i64::from(base.cast::<i16>().add(i).read_unaligned()),
                32 => i64::from(base.cast::<i32>().add(i).read_unaligned()),
                _ => base.cast::<i64>().add(i).read_unaligned(),
            }
        })
        .collect::<Vec<_>>();
    Ok(Any::object(make_shape(&out)))
}

fn to_device(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.to_device";
    let t = tensor(name, a, 0)?;
    let dev = DLDevice {
        device_type: i32::try_from(int(name, a, 1)?)
            .map_err(|_| FfiError::value(format!("{name}: bad device type")))?,
        device_id: i32::try_from(int(name, a, 2)?).map_err(|_| FfiError::value(format!("{name}: bad device id")))?,
    };
    if t.device.device_type == dev.device_type && t.device.device_id == dev.device_id && a[0].type_index == ti::TENSOR {
        return Ok(Any::object(object(name, a, 0)?));
    }
    Ok(Any::object(vm::copy_tensor_to(t, dev)?))
}

fn tuple_reset_item(a: Args) -> FfiResult<Any> {
    let name = "vm.builtin.tuple_reset_item";
    let arr = object(name, a, 0)?;
    if arr.type_index() != ti::ARRAY {
        return Err(FfiError::type_error(format!("{name}: expected a tuple")));
    }
    let i = index(name, a, 1)?;
    let n = seq_items(&arr).len();
    if i >= n {
        return Err(FfiError::index(format!("{name}: index {i} is out of range ({n} items)")));
    }
    // SAFETY: an array's cell holds `n` owned values; the item is replaced in place, as TVM's
    // builtin does (the compiler emits it for tuples it owns).
    unsafe {
        let cell = arr.payload::<TVMFFISeqCell>();
        let slot = cell.data.cast::<Any>().add(i);
        drop(std::mem::replace(&mut *slot, Any::none()));
    }
    Ok(Any::none())
}

fn owned(a: Args) -> FfiResult<Vec<Any>> {
    // SAFETY: valid views.
    a.iter().map(|v| unsafe { Any::from_view(v) }).collect()
}

/// A builtin's Rust entry.
pub type Native = fn(Args) -> FfiResult<Any>;

/// The builtins by name, with the function object registered for each.
fn natives() -> &'static parking_lot::RwLock<std::collections::HashMap<&'static str, (ObjectRef, Native)>> {
    static N: std::sync::OnceLock<parking_lot::RwLock<std::collections::HashMap<&'static str, (ObjectRef, Native)>>> =
        std::sync::OnceLock::new();
    N.get_or_init(Default::default)
}

/// The Rust entry of `func` when it is the builtin this library registered as `name` (and the
/// global was not replaced since): the VM then calls it without going through the function
/// object.
pub fn native(name: &str, func: &ObjectRef) -> Option<Native> {
    natives().read().get(name).filter(|(o, _)| o.same_as(func)).map(|(_, f)| *f)
}

/// Registers `f` as a plain function pointer (one instantiation of the function object for
/// all of them), for the Relax VM's globals that the VM does not call directly.
pub(super) fn add_fn(b: &mut Builder, name: &str, f: Native) {
    b.add(name, f);
}

fn add(b: &mut Builder, name: &'static str, f: Native) {
    add_fn(b, name, f);
    if let Some(o) = b.get(name) {
        // The map holds the object, so its address is never reused by another function.
        natives().write().insert(name, (o, f));
    }
}

/// Registers the builtins.
pub fn register(b: &mut Builder) {
    add(b, "vm.builtin.alloc_shape_heap", alloc_shape_heap);
    add_fn(b, "vm.builtin.memory_manager.clear", |_| {
        tvm_runtime_classic::memory::release_all_pools();
        Ok(Any::none())
    });
    add(b, "vm.builtin.match_prim_value", |a| {
        let name = "vm.builtin.match_prim_value";
        let value = int(name, a, 0)?;
        let mut heap = Heap::of(name, arg(name, a, 1)?)?;
        match_value(name, &mut heap, int(name, a, 2)?, int(name, a, 3)?, value, "PrimExpr", Ctx(a, 4))?;
        Ok(Any::none())
    });
    add(b, "vm.builtin.match_shape", match_shape);
    add(b, "vm.builtin.make_prim_value", |a| {
        let name = "vm.builtin.make_prim_value";
        let mut heap = Heap::of(name, arg(name, a, 0)?)?;
        match int(name, a, 1)? {
            USE_IMM => Ok(Any::int(int(name, a, 2)?)),
            LOAD_SHAPE => Ok(Any::int(*heap.slot(name, int(name, a, 2)?)?)),
            c => Err(FfiError::runtime(format!("{name}: Invalid shape code: {c}"))),
        }
    });
    add(b, "vm.builtin.make_shape", make_shape_builtin);
    add(b, "vm.builtin.check_tensor_info", check_tensor_info);
    add(b, "vm.builtin.check_shape_info", |a| {
        let name = "vm.builtin.check_shape_info";
        let s = check_object(a, name, "Shape", ti::SHAPE)?;
        let ndim = int(name, a, 1)?;
        let n = shape_dims(&s).len();
        if ndim != -1 && n as i64 != ndim {
            return Err(FfiError::value(format!("{} expect Shape with ndim {ndim} but get {n}", opt_str(a, 2))));
        }
        Ok(Any::none())
    });
    add(b, "vm.builtin.check_prim_value_info", |a| {
        let name = "vm.builtin.check_prim_value_info";
        let v = arg(name, a, 0)?;
        let d = dtype(name, a, 1)?;
        let ctx = opt_str(a, 2);
        if v.is_object() {
            return Err(FfiError::type_error(format!(
                "{ctx}, expected dtype {}, but received ObjectRef of type {}",
                tvm_runtime_tvm_ffi::dtype::format(d)?,
                types::type_key(v.type_index)
            )));
        }
        let ok = match d.code {
            6 | 0 | 1 => matches!(v.type_index, ti::INT | ti::BOOL),
            2 => matches!(v.type_index, ti::INT | ti::BOOL | ti::FLOAT),
            3 if !(d.bits == 0 && d.lanes == 0) => matches!(v.type_index, ti::OPAQUE_PTR | ti::NONE),
            _ => {
                return Err(FfiError::type_error(format!(
                    "{ctx}, unsupported dtype {}",
                    tvm_runtime_tvm_ffi::dtype::format(d)?
                )))
            }
        };
        if !ok {
            return Err(FfiError::type_error(format!(
                "{ctx}, expected dtype {}, but received {}",
                tvm_runtime_tvm_ffi::dtype::format(d)?,
                types::type_key(v.type_index)
            )));
        }
        Ok(Any::none())
    });
    add(b, "vm.builtin.check_tuple_info", |a| {
        let name = "vm.builtin.check_tuple_info";
        let t = check_object(a, name, "Tuple", ti::ARRAY)?;
        let size = int(name, a, 1)?;
        let n = seq_items(&t).len();
        if n as i64 != size {
            return Err(FfiError::value(format!(
                "{} expect a Tuple with {size} elements,  but get a Tuple with {n} elements.",
                opt_str(a, 2)
            )));
        }
        Ok(Any::none())
    });
    add(b, "vm.builtin.check_func_info", |a| {
        let name = "vm.builtin.check_func_info";
        let v = arg(name, a, 0)?;
        let ok = v.type_index == ti::FUNCTION || v.type_index == objects::closure_index();
        if !ok {
            return Err(FfiError::type_error(format!(
                "{} expect a Function but get {}",
                opt_str(a, 1),
                types::type_key(v.type_index)
            )));
        }
        Ok(Any::none())
    });
    add(b, "vm.builtin.alloc_storage", alloc_storage);
    add(b, "vm.builtin.alloc_tensor", alloc_tensor);
    add(b, "vm.builtin.make_closure", |a| {
        let name = "vm.builtin.make_closure";
        let c = object(name, a, 0)?;
        let clo = objects::as_closure(&c)
            .ok_or_else(|| FfiError::type_error(format!("{name}: expected a relax.vm.Closure")))?;
        let imp = objects::bind_last_args(clo.imp.clone(), owned(&a[1..])?);
        Ok(Any::object(objects::make_closure(&clo.func_name, imp)))
    });
    add(b, "vm.builtin.invoke_closure", |a| {
        let name = "vm.builtin.invoke_closure";
        let rt = from_ctx(arg(name, a, 0)?, name)?;
        let c = object(name, a, 1)?;
        rt.invoke_closure(&c, &a[2..])
    });
    add(b, "vm.builtin.call_tir_dyn", |a| {
        let name = "vm.builtin.call_tir_dyn";
        let f = object(name, a, 0)?;
        if a.len() < 2 {
            return Err(FfiError::value(format!("{name}: expected a function and a shape to unpack")));
        }
        let s = object(name, a, a.len() - 1)?;
        if s.type_index() != ti::SHAPE {
            return Err(FfiError::type_error(format!("{name}: the last argument must be a Shape")));
        }
        let mut all: Vec<TVMFFIAny> = a[1..a.len() - 1].to_vec();
        all.extend(shape_dims(&s).iter().map(|&d| TVMFFIAny::with_bits(ti::INT, d as u64)));
        function::call(&f, &all)
    });
    add(b, "vm.builtin.shape_of", |a| Ok(Any::object(make_shape(dims(tensor("vm.builtin.shape_of", a, 0)?)?))));
    add(b, "vm.builtin.copy", |a| {
        // SAFETY: a valid view.
        unsafe { Any::from_view(arg("vm.builtin.copy", a, 0)?) }
    });
    add(b, "vm.builtin.reshape", reshape);
    add(b, "vm.builtin.null_value", |_| Ok(Any::none()));
    add(b, "vm.builtin.to_device", to_device);
    add(b, "vm.builtin.read_if_cond", read_if_cond);
    add(b, "vm.builtin.invoke_debug_func", |a| {
        let name = "vm.builtin.invoke_debug_func";
        if a.len() < 3 {
            return Err(FfiError::value(format!("{name}: expected (io_effect, func_name, line_info, args...)")));
        }
        if a[0].type_index != ti::NONE {
            return Err(FfiError::value("IOEffect is expected to be lowered to None."));
        }
        let key = opt_str(a, 1);
        let f = registry::get(&key).ok_or_else(|| {
            FfiError::value(format!(
                "{key} is not found. Use the decorator `@tvm.register_global_func(\"{key}\")` to register it."
            ))
        })?;
        let mut all = vec![a[2]];
        all.extend_from_slice(&a[3..]);
        function::call(&f, &all)
    });
    add(b, "vm.builtin.tuple_getitem", |a| {
        let name = "vm.builtin.tuple_getitem";
        let arr = object(name, a, 0)?;
        if arr.type_index() != ti::ARRAY {
            return Err(FfiError::type_error(format!(
                "{name}: expected a tuple, got {}",
                types::type_key(arr.type_index())
            )));
        }
        let i = int(name, a, 1)?;
        let items = seq_items(&arr);
        usize::try_from(i)
            .ok()
            .and_then(|k| items.get(k))
            .cloned()
            .ok_or_else(|| FfiError::index(format!("{name}: index {i} is out of range ({} items)", items.len())))
    });
    add(b, "vm.builtin.tuple_reset_item", tuple_reset_item);
    add(b, "vm.builtin.make_tuple", |a| Ok(Any::object(make_array(owned(a)?))));
    add(b, "vm.builtin.tensor_to_shape", tensor_to_shape);
    add(b, "vm.builtin.ensure_zero_offset", |a| {
        let name = "vm.builtin.ensure_zero_offset";
        let t = tensor(name, a, 0)?;
        if t.byte_offset == 0 && a[0].type_index == ti::TENSOR {
            return Ok(Any::object(object(name, a, 0)?));
        }
        Ok(Any::object(vm::copy_tensor_to(t, t.device)?))
    });
}
