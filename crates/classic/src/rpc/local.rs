//! The local session: serves RPC requests with this process's runtime (TVM's `LocalSession`).
//!
//! Unlike TVM's, it never takes a handle or a data pointer from the other side on trust: every
//! function, module, array, allocation and stream it hands out is recorded, and a request
//! naming anything else (or a byte range beyond what was handed out) is refused with an error.
//! A hostile or buggy client therefore cannot make the server dereference a pointer of its
//! choosing. What it hands out is released when the client frees it or the session ends.

use super::codec::{WireTensor, WireValue};
use super::session::Session;
use crate::abi::{DLDataType, DLDevice, DLTensor, TVMByteArray, TVMValue};
use crate::device::{self, DeviceApi};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::Module;
use crate::ndarray::NDArray;
use crate::object::StringObj;
use crate::registry;
use crate::value::{code, code_name, Args, Value};
use parking_lot::Mutex;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_void, CString};

/// What a session has handed out.
#[derive(Default)]
struct Tables {
    /// Function handles: the address of the box (unique per hand-out).
    funcs: HashMap<u64, Box<PackedFunc>>,
    /// Module handles (object address) with the number of references handed out.
    modules: HashMap<u64, (Module, usize)>,
    /// NDArray handles (`DLTensor` address) with the number of references handed out.
    arrays: HashMap<u64, (NDArray, usize)>,
    /// Data spaces allocated for the client: address -> (device, bytes).
    allocs: HashMap<u64, (DLDevice, u64)>,
    /// Memory the client may name in a tensor: (data address, device) -> extents in bytes,
    /// one per live allocation or array handed out.
    regions: HashMap<(u64, DLDevice), Vec<u64>>,
    /// Streams created for the client.
    streams: HashSet<(DLDevice, u64)>,
}

impl Tables {
    fn add_region(&mut self, data: u64, dev: DLDevice, extent: u64) {
        self.regions.entry((data, dev)).or_default().push(extent);
    }

    fn remove_region(&mut self, data: u64, dev: DLDevice, extent: u64) {
        if let Some(v) = self.regions.get_mut(&(data, dev)) {
            if let Some(i) = v.iter().position(|&e| e == extent) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.regions.remove(&(data, dev));
            }
        }
    }

    /// Checks that `t` names `need` bytes (from its byte offset) of memory handed out.
    fn check_tensor(&self, t: &WireTensor<'_>, need: u64) -> Result<()> {
        if need == 0 {
            return Ok(());
        }
        let end = t.byte_offset.checked_add(need).ok_or_else(|| Error::value("RPC: tensor range overflows"))?;
        let ok = self.regions.get(&(t.data, t.device)).is_some_and(|v| v.iter().any(|&e| end <= e));
        if !ok {
            return Err(Error::value(format!(
                "RPC: bytes {}..{end} of data {:#x} on device ({}, {}) are not memory this session handed out",
                t.byte_offset, t.data, t.device.device_type, t.device.device_id
            )));
        }
        Ok(())
    }

    fn add_array(&mut self, a: &NDArray) -> Result<u64> {
        let t = a.tensor();
        if !device::is_contiguous(t) {
            return Err(Error::with_kind("RPCServerError", "kInvalidDLTensorFieldStride"));
        }
        let extent = t.byte_offset.checked_add(a.byte_size()? as u64).ok_or_else(|| Error::value("array too large"))?;
        let h = a.handle() as u64;
        self.add_region(t.data as u64, t.device, extent);
        self.arrays.entry(h).or_insert_with(|| (a.clone(), 0)).1 += 1;
        Ok(h)
    }

    fn check_stream(&self, dev: DLDevice, stream: u64) -> Result<()> {
        if stream != 0 && !self.streams.contains(&(dev, stream)) {
            return Err(Error::value(format!("RPC: unknown stream handle {stream:#x}")));
        }
        Ok(())
    }
}

/// Serves requests with this process's runtime.
#[derive(Default)]
pub struct LocalSession {
    tables: Mutex<Tables>,
}

impl LocalSession {
    /// A session with nothing handed out.
    pub fn new() -> LocalSession {
        LocalSession::default()
    }

    fn register_func(&self, f: PackedFunc) -> u64 {
        let b = Box::new(f);
        let h = &*b as *const PackedFunc as u64;
        self.tables.lock().funcs.insert(h, b);
        h
    }

    fn register_module(&self, m: Module) -> u64 {
        let h = m.as_object().as_ptr() as u64;
        self.tables.lock().modules.entry(h).or_insert_with(|| (m, 0)).1 += 1;
        h
    }

    /// Encodes a return value, recording what it hands out (`LocalSession::EncodeReturn`).
    fn encode_return(&self, rv: Value) -> Result<Vec<WireValue<'static>>> {
        let tcode = WireValue::Int(i64::from(rv.type_code()));
        Ok(match rv {
            Value::Null => vec![tcode, WireValue::Null],
            Value::Int(x) => vec![tcode, WireValue::Int(x)],
            Value::UInt(x) => vec![tcode, WireValue::UInt(x)],
            Value::Float(x) => vec![tcode, WireValue::Float(x)],
            Value::Handle(p) => vec![tcode, WireValue::Handle(p as u64)],
            Value::DataType(t) => vec![tcode, WireValue::DataType(t)],
            Value::Device(d) => vec![tcode, WireValue::Device(d)],
            Value::Str(s) => vec![tcode, WireValue::Str(Cow::Owned((*s).into_bytes()))],
            Value::Bytes(b) => vec![tcode, WireValue::Bytes(Cow::Owned(*b))],
            Value::Func(f) => vec![tcode, WireValue::Handle(self.register_func(*f))],
            Value::Module(m) => vec![tcode, WireValue::Handle(self.register_module(m))],
            Value::NDArray(a) => {
                let h = self.tables.lock().add_array(&a)?;
                vec![tcode, WireValue::Tensor(tensor_meta(a.tensor())?), WireValue::Handle(h)]
            }
            Value::Object(o) => match o.downcast::<StringObj>() {
                Some(s) => {
                    vec![WireValue::Int(i64::from(code::STR)), WireValue::Str(Cow::Owned(s.as_bytes().to_vec()))]
                }
                None => {
                    let key = crate::object::type_index2key(o.type_index()).unwrap_or_default();
                    return Err(Error::value(format!("Cannot pass return value, type {key} is not supported by RPC")));
                }
            },
            other => {
                return Err(Error::value(format!(
                    "Cannot pass return value of type {} through RPC",
                    code_name(other.type_code())
                )))
            }
        })
    }

    fn api(dev: DLDevice) -> Result<&'static dyn DeviceApi> {
        if dev.device_type >= device::RPC_SESS_MASK {
            // A proxy chain would name a session of this process; the remote may not.
            return Err(Error::internal("cannot pass RPC device in the channel"));
        }
        device::api(dev.device_type)
    }
}

/// The wire form of a local tensor (compact; strides dropped).
fn tensor_meta(t: &DLTensor) -> Result<WireTensor<'static>> {
    Ok(WireTensor {
        data: t.data as u64,
        device: t.device,
        dtype: t.dtype,
        shape: Cow::Owned(device::tensor_shape(t)?.to_vec()),
        byte_offset: t.byte_offset,
    })
}

/// A `DLTensor` over a checked wire tensor; `shape` must outlive its use.
fn local_tensor(t: &WireTensor<'_>, shape: &[i64]) -> DLTensor {
    DLTensor {
        data: t.data as usize as *mut c_void,
        device: t.device,
        ndim: shape.len() as i32,
        dtype: t.dtype,
        shape: shape.as_ptr().cast_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: t.byte_offset,
    }
}

/// Storage that keeps call arguments alive while a function runs.
#[derive(Default)]
struct CallArgs {
    values: Vec<TVMValue>,
    codes: Vec<c_int>,
    strings: Vec<CString>,
    #[expect(clippy::vec_box, reason = "argument values point at these byte arrays")]
    byte_arrays: Vec<Box<TVMByteArray>>,
    #[expect(clippy::vec_box, reason = "argument values point at these tensors")]
    tensors: Vec<Box<DLTensor>>,
    shapes: Vec<Vec<i64>>,
    keep: Vec<Value>,
}

impl CallArgs {
    fn push(&mut self, v: TVMValue, c: i32) {
        self.values.push(v);
        self.codes.push(c);
    }
}

impl Session for LocalSession {
    fn get_function(&self, name: &str) -> Result<u64> {
        Ok(registry::get(name).map_or(0, |f| self.register_func(f)))
    }

    fn call_func(&self, func: u64, args: &[WireValue<'_>]) -> Result<Vec<WireValue<'static>>> {
        let mut ca = CallArgs::default();
        let f = {
            let t = self.tables.lock();
            let f = t
                .funcs
                .get(&func)
                .map(|b| (**b).clone())
                .ok_or_else(|| Error::value(format!("RPC: unknown function handle {func:#x}")))?;
            for (i, a) in args.iter().enumerate() {
                match a {
                    WireValue::Int(x) => ca.push(TVMValue { v_int64: *x }, code::INT),
                    WireValue::UInt(x) => ca.push(TVMValue { v_int64: *x }, code::UINT),
                    WireValue::Float(x) => ca.push(TVMValue { v_float64: *x }, code::FLOAT),
                    WireValue::Handle(h) => ca.push(TVMValue { v_handle: *h as usize as *mut c_void }, code::HANDLE),
                    WireValue::Null => ca.push(TVMValue::ZERO, code::NULL),
                    WireValue::DataType(d) => ca.push(TVMValue { v_type: *d }, code::DATA_TYPE),
                    WireValue::Device(d) => ca.push(TVMValue { v_device: *d }, code::DEVICE),
                    WireValue::Module(h) => {
                        let m =
                            t.modules.get(h).map(|e| e.0.clone()).ok_or_else(|| {
                                Error::value(format!("RPC: argument {i}: unknown module handle {h:#x}"))
                            })?;
                        ca.push(TVMValue { v_handle: m.as_object().as_ptr().cast() }, code::MODULE);
                        ca.keep.push(Value::Module(m));
                    }
                    WireValue::Func(h) => {
                        let f = t.funcs.get(h).map(|b| (**b).clone()).ok_or_else(|| {
                            Error::value(format!("RPC: argument {i}: unknown function handle {h:#x}"))
                        })?;
                        let v = Value::func(f);
                        if let Value::Func(b) = &v {
                            ca.push(TVMValue { v_handle: b.as_handle() }, code::FUNC);
                        }
                        ca.keep.push(v);
                    }
                    WireValue::Str(s) => {
                        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
                        let cs = CString::new(&s[..end]).unwrap_or_default();
                        ca.push(TVMValue { v_str: cs.as_ptr() }, code::STR);
                        ca.strings.push(cs);
                    }
                    WireValue::Bytes(b) => {
                        let ba = Box::new(TVMByteArray { data: b.as_ptr().cast::<c_char>(), size: b.len() });
                        ca.push(TVMValue { v_handle: (&*ba as *const TVMByteArray).cast_mut().cast() }, code::BYTES);
                        ca.byte_arrays.push(ba);
                    }
                    WireValue::Tensor(w) => {
                        Self::api(w.device)?;
                        t.check_tensor(w, w.nbytes()?)?;
                        let shape = w.shape.to_vec();
                        let dl = Box::new(local_tensor(w, &shape));
                        ca.push(TVMValue { v_handle: (&*dl as *const DLTensor).cast_mut().cast() }, code::DLTENSOR);
                        ca.shapes.push(shape);
                        ca.tensors.push(dl);
                    }
                }
            }
            f
        };
        // SAFETY: every value points into `ca` (strings, byte arrays, tensors and their shapes,
        // objects kept in `keep`) or into `args`, all alive until the call returns; tensors name
        // memory checked against what this session handed out.
        let a = unsafe { Args::new(&ca.values, &ca.codes) };
        let mut rv = Value::Null;
        f.call_args(&a, &mut rv)?;
        drop(ca);
        self.encode_return(rv)
    }

    fn copy_to_remote(&self, from: &[u8], to: &WireTensor<'_>) -> Result<()> {
        let n = from.len() as u64;
        self.tables.lock().check_tensor(to, n)?;
        if n == 0 {
            return Ok(());
        }
        let api = Self::api(to.device)?;
        let cpu = device::device_of(device::CPU, 0);
        api.copy_flat(
            from.as_ptr().cast(),
            0,
            to.data as usize as *mut c_void,
            to.byte_offset,
            from.len(),
            cpu,
            to.device,
            to.dtype,
            std::ptr::null_mut(),
        )?;
        api.stream_sync(to.device, std::ptr::null_mut())
    }

    fn copy_from_remote(&self, from: &WireTensor<'_>, to: &mut [u8]) -> Result<()> {
        let n = to.len() as u64;
        self.tables.lock().check_tensor(from, n)?;
        if n == 0 {
            return Ok(());
        }
        let api = Self::api(from.device)?;
        let cpu = device::device_of(device::CPU, 0);
        api.copy_flat(
            from.data as usize as *const c_void,
            from.byte_offset,
            to.as_mut_ptr().cast(),
            0,
            to.len(),
            from.device,
            cpu,
            from.dtype,
            std::ptr::null_mut(),
        )?;
        api.stream_sync(from.device, std::ptr::null_mut())
    }

    fn with_local_bytes(
        &self,
        from: &WireTensor<'_>,
        nbytes: u64,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<bool> {
        if from.device.device_type != device::CPU || nbytes == 0 {
            return Ok(false);
        }
        let t = self.tables.lock();
        t.check_tensor(from, nbytes)?;
        let n = usize::try_from(nbytes).map_err(|_| Error::value("copy too large"))?;
        let p = (from.data as usize as *const u8).wrapping_add(from.byte_offset as usize);
        // SAFETY: the range lies inside CPU memory this session handed out and still holds
        // (checked above); the table lock keeps it from being freed while `f` runs.
        let bytes = unsafe { std::slice::from_raw_parts(p, n) };
        f(bytes)?;
        Ok(true)
    }

    fn with_local_bytes_mut(
        &self,
        to: &WireTensor<'_>,
        nbytes: u64,
        f: &mut dyn FnMut(&mut [u8]) -> Result<()>,
    ) -> Result<bool> {
        if to.device.device_type != device::CPU || nbytes == 0 {
            return Ok(false);
        }
        let t = self.tables.lock();
        if t.check_tensor(to, nbytes).is_err() {
            return Ok(false);
        }
        let Ok(n) = usize::try_from(nbytes) else { return Ok(false) };
        let p = (to.data as usize as *mut u8).wrapping_add(to.byte_offset as usize);
        // SAFETY: the range lies inside CPU memory this session handed out and still holds
        // (checked above); the table lock keeps it from being freed while `f` writes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, n) };
        f(bytes)?;
        Ok(true)
    }

    fn free_handle(&self, handle: u64, type_code: i32) -> Result<()> {
        let dropped: Option<Value>;
        {
            let mut t = self.tables.lock();
            dropped = match type_code {
                code::FUNC => t.funcs.remove(&handle).map(Value::Func),
                code::MODULE => match t.modules.get_mut(&handle) {
                    Some(e) if e.1 > 1 => {
                        e.1 -= 1;
                        Some(Value::Null)
                    }
                    Some(_) => t.modules.remove(&handle).map(|e| Value::Module(e.0)),
                    None => None,
                },
                code::NDARRAY => {
                    let info = t.arrays.get(&handle).map(|e| {
                        let tt = e.0.tensor();
                        (tt.data as u64, tt.device, tt.byte_offset + e.0.byte_size().unwrap_or(0) as u64)
                    });
                    match info {
                        Some((data, dev, extent)) => {
                            t.remove_region(data, dev, extent);
                            let e = t.arrays.get_mut(&handle).map(|e| {
                                e.1 -= 1;
                                e.1
                            });
                            if e == Some(0) {
                                t.arrays.remove(&handle).map(|e| Value::NDArray(e.0))
                            } else {
                                Some(Value::Null)
                            }
                        }
                        None => None,
                    }
                }
                other => {
                    return Err(Error::value(format!("RPC: cannot free a handle of type {}", code_name(other))));
                }
            };
        }
        // The object (and whatever it owns) is released outside the lock.
        match dropped {
            Some(v) => {
                drop(v);
                Ok(())
            }
            None => Err(Error::value(format!("RPC: unknown {} handle {handle:#x}", code_name(type_code)))),
        }
    }

    fn set_device(&self, dev: DLDevice) -> Result<()> {
        Self::api(dev)?.set_device(dev)
    }

    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<WireValue<'static>> {
        if dev.device_type >= device::RPC_SESS_MASK {
            return Err(Error::internal("cannot pass RPC device in the channel"));
        }
        let v = if kind == 0 {
            match device::get_api(dev.device_type, true)? {
                Some(api) => api.get_attr(dev, 0)?,
                None => device::Attr::Int(0),
            }
        } else {
            device::api(dev.device_type)?.get_attr(dev, kind)?
        };
        Ok(match v {
            device::Attr::Int(x) => WireValue::Int(x),
            device::Attr::Float(x) => WireValue::Float(x),
            device::Attr::Str(s) => WireValue::Str(Cow::Owned(s.into_bytes())),
            device::Attr::Null => WireValue::Null,
        })
    }

    fn alloc_data(&self, dev: DLDevice, nbytes: u64, alignment: u64, type_hint: DLDataType) -> Result<u64> {
        let n = usize::try_from(nbytes).map_err(|_| Error::value(format!("cannot allocate {nbytes} bytes")))?;
        let align = usize::try_from(alignment).map_err(|_| Error::value(format!("invalid alignment {alignment}")))?;
        if !align.is_power_of_two() {
            return Err(Error::value(format!("invalid alignment {alignment}")));
        }
        let p = Self::api(dev)?.alloc_data_space(dev, n, align, type_hint)? as u64;
        let mut t = self.tables.lock();
        t.allocs.insert(p, (dev, nbytes));
        t.add_region(p, dev, nbytes);
        Ok(p)
    }

    fn alloc_data_scoped(&self, w: &WireTensor<'_>, scope: Option<&str>) -> Result<u64> {
        crate::value::dtype::check_alloc_dtype(w.dtype)?;
        let nbytes = w.nbytes()?;
        let p = Self::api(w.device)?.alloc_data_space_scoped(w.device, &w.shape, w.dtype, scope)? as u64;
        let mut t = self.tables.lock();
        t.allocs.insert(p, (w.device, nbytes));
        t.add_region(p, w.device, nbytes);
        Ok(p)
    }

    fn free_data(&self, dev: DLDevice, data: u64) -> Result<()> {
        {
            let mut t = self.tables.lock();
            match t.allocs.get(&data) {
                Some(&(d, n)) if d == dev => {
                    t.allocs.remove(&data);
                    t.remove_region(data, dev, n);
                }
                _ => return Err(Error::value(format!("RPC: {data:#x} is not a data space this session allocated"))),
            }
        }
        Self::api(dev)?.free_data_space(dev, data as usize as *mut c_void)
    }

    fn copy_among(&self, from: &WireTensor<'_>, to: &WireTensor<'_>, stream: u64) -> Result<()> {
        {
            let t = self.tables.lock();
            t.check_tensor(from, from.nbytes()?)?;
            t.check_tensor(to, to.nbytes()?)?;
            let dev = if from.device.device_type == device::CPU { to.device } else { from.device };
            t.check_stream(dev, stream)?;
        }
        let mut dev = from.device;
        if dev.device_type == device::CPU {
            dev = to.device;
        } else if to.device.device_type != device::CPU && to.device.device_type != from.device.device_type {
            return Err(Error::value("Can not copy across different dev types directly"));
        }
        let (fs, ts) = (from.shape.to_vec(), to.shape.to_vec());
        let (f, t) = (local_tensor(from, &fs), local_tensor(to, &ts));
        Self::api(dev)?.copy_data_from_to(&f, &t, stream as usize as *mut c_void)
    }

    fn create_stream(&self, dev: DLDevice) -> Result<u64> {
        let s = Self::api(dev)?.create_stream(dev)? as u64;
        if s != 0 {
            self.tables.lock().streams.insert((dev, s));
        }
        Ok(s)
    }

    fn free_stream(&self, dev: DLDevice, stream: u64) -> Result<()> {
        let api = Self::api(dev)?;
        {
            let mut t = self.tables.lock();
            t.check_stream(dev, stream)?;
            t.streams.remove(&(dev, stream));
        }
        api.free_stream(dev, stream as usize as *mut c_void)
    }

    fn stream_sync(&self, dev: DLDevice, stream: u64) -> Result<()> {
        let api = Self::api(dev)?;
        self.tables.lock().check_stream(dev, stream)?;
        api.stream_sync(dev, stream as usize as *mut c_void)
    }

    fn set_stream(&self, dev: DLDevice, stream: u64) -> Result<()> {
        let api = Self::api(dev)?;
        self.tables.lock().check_stream(dev, stream)?;
        api.set_stream(dev, stream as usize as *mut c_void)
    }

    fn is_local(&self) -> bool {
        true
    }
}

impl Drop for LocalSession {
    fn drop(&mut self) {
        let t = std::mem::take(&mut *self.tables.lock());
        for (p, (dev, _)) in t.allocs {
            if let Ok(api) = device::api(dev.device_type) {
                let _ = api.free_data_space(dev, p as usize as *mut c_void);
            }
        }
        for (dev, s) in t.streams {
            if let Ok(api) = device::api(dev.device_type) {
                let _ = api.free_stream(dev, s as usize as *mut c_void);
            }
        }
    }
}
