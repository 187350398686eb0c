//! The client side: the session table behind remote devices, the `rpc` module, remote
//! functions, remote arrays and the `rpc` device API (TVM's `rpc_module.cc`,
//! `rpc_device_api.cc`, `RPCSessTable`).
//!
//! A session gets an index in a table of 32; its devices are the remote device types plus
//! `128 * (index + 1)`. An array on such a device holds, as its data pointer, a
//! [`RemoteSpace`]: the remote data handle and the session. Data pointers are checked against
//! the spaces this process made before they are used, so a forged "remote" tensor is an error.

use super::codec::{self, WireTensor, WireValue};
use super::session::Session;
use crate::abi::{DLDataType, DLDevice, DLTensor};
use crate::device::{self, DeviceApi, RPC_SESS_MASK};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArray;
use crate::object::StringObj;
use crate::value::{code, code_name, Args, Value};
use parking_lot::Mutex;
use std::any::Any;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Weak};

/// Most sessions alive at once (`kMaxRPCSession`).
pub(crate) const MAX_SESSIONS: usize = 32;

/// A session registered in the table.
pub struct RemoteSession {
    /// The session.
    pub sess: Arc<dyn Session>,
    /// Its index in the table.
    pub index: i32,
}

static TABLE: Mutex<Vec<Weak<RemoteSession>>> = Mutex::new(Vec::new());

/// Registers a session in the first free slot of the table.
pub(crate) fn register_session(sess: Arc<dyn Session>) -> Result<Arc<RemoteSession>> {
    let mut t = TABLE.lock();
    if t.is_empty() {
        t.resize_with(MAX_SESSIONS, Weak::new);
    }
    let i = t
        .iter()
        .position(|w| w.strong_count() == 0)
        .ok_or_else(|| Error::tvm("maximum number of RPC session reached"))?;
    let rs = Arc::new(RemoteSession { sess, index: i as i32 });
    t[i] = Arc::downgrade(&rs);
    Ok(rs)
}

/// The session with table index `index`.
pub(crate) fn session_at(index: i32) -> Result<Arc<RemoteSession>> {
    let t = TABLE.lock();
    usize::try_from(index)
        .ok()
        .and_then(|i| t.get(i))
        .and_then(Weak::upgrade)
        .ok_or_else(|| Error::tvm(format!("RPC session {index} is closed or does not exist")))
}

/// `CreateRPCSessionModule`: registers a session and returns its root `rpc` module.
pub fn create_session_module(sess: Arc<dyn Session>) -> Result<Module> {
    let rs = register_session(sess)?;
    Ok(Module::new(RpcModule::new(0, rs)))
}

/// Whether a device belongs to an RPC session.
pub(crate) fn is_rpc_device(dev: DLDevice) -> bool {
    dev.device_type >= RPC_SESS_MASK
}

/// The table index a device's type encodes.
pub(crate) fn session_index(dev: DLDevice) -> i32 {
    dev.device_type / RPC_SESS_MASK - 1
}

/// The device as the remote side names it.
pub(crate) fn remove_mask(dev: DLDevice) -> DLDevice {
    DLDevice { device_type: dev.device_type % RPC_SESS_MASK, device_id: dev.device_id }
}

/// The local name of a remote device of session `index`.
pub(crate) fn add_mask(dev: DLDevice, index: i32) -> DLDevice {
    DLDevice { device_type: dev.device_type + RPC_SESS_MASK * (index + 1), device_id: dev.device_id }
}

fn session_of(dev: DLDevice) -> Result<Arc<RemoteSession>> {
    if !is_rpc_device(dev) {
        return Err(Error::value(format!("device type {} is not an RPC device", dev.device_type)));
    }
    session_at(session_index(dev))
}

// ---------------------------------------------------------------------------------------------
// Remote data spaces

/// Who releases the remote memory of a [`RemoteSpace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpaceOwner {
    /// A data space allocated through the device API: freed with `kDevFreeData`.
    Alloc,
    /// The data of a remote array: its handle is freed with `kFreeHandle`.
    Array(u64),
    /// Memory owned elsewhere on the remote side: nothing is freed.
    None,
}

/// What the data pointer of an array on a remote device points to.
pub(crate) struct RemoteSpace {
    /// The remote data handle.
    pub data: u64,
    /// The session.
    pub rs: Arc<RemoteSession>,
    /// Who frees the memory.
    pub owner: SpaceOwner,
}

static SPACES: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn new_space(data: u64, rs: Arc<RemoteSession>, owner: SpaceOwner) -> *mut c_void {
    let p = Box::into_raw(Box::new(RemoteSpace { data, rs, owner }));
    SPACES.lock().get_or_insert_with(HashSet::new).insert(p as usize);
    p.cast()
}

fn space<'a>(p: *mut c_void) -> Result<&'a RemoteSpace> {
    let known = SPACES.lock().as_ref().is_some_and(|s| s.contains(&(p as usize)));
    if !known {
        return Err(Error::value(format!("{p:p} is not the data of an array on an RPC device")));
    }
    // SAFETY: the address is a live `RemoteSpace` box (registered until `free_space`); the array
    // that holds it outlives the operation, per the C API's contract.
    Ok(unsafe { &*p.cast::<RemoteSpace>() })
}

fn free_space(p: *mut c_void, dev: DLDevice) {
    let known = SPACES.lock().as_mut().is_some_and(|s| s.remove(&(p as usize)));
    if !known {
        return;
    }
    // SAFETY: registered spaces come from `Box::into_raw` in `new_space`; removal from the set
    // makes this the only release.
    let sp = unsafe { Box::from_raw(p.cast::<RemoteSpace>()) };
    // Errors are ignored, as in TVM: the remote may be gone already.
    let _ = match sp.owner {
        SpaceOwner::Array(h) => sp.rs.sess.free_handle(h, code::NDARRAY),
        SpaceOwner::Alloc => sp.rs.sess.free_data(remove_mask(dev), sp.data),
        SpaceOwner::None => Ok(()),
    };
}

/// The wire form of a tensor on a device of session `rs`.
pub(crate) fn wire_of<'t>(t: &'t DLTensor, rs: &RemoteSession) -> Result<WireTensor<'t>> {
    if !is_rpc_device(t.device) {
        return Err(Error::value("Can not pass in local device"));
    }
    if session_index(t.device) != rs.index {
        return Err(Error::value("Can not pass in device with a different remote session"));
    }
    if !device::is_contiguous(t) {
        return Err(Error::with_kind("RPCServerError", "kInvalidDLTensorFieldStride"));
    }
    let sp = space(t.data)?;
    if sp.rs.index != rs.index {
        return Err(Error::value("the array's data belongs to another RPC session"));
    }
    Ok(WireTensor {
        data: sp.data,
        device: remove_mask(t.device),
        dtype: t.dtype,
        shape: Cow::Borrowed(device::tensor_shape(t)?),
        byte_offset: t.byte_offset,
    })
}

/// `NDArrayFromRemoteOpaqueHandle`: a local array over remote data; dropping it frees the
/// remote array `nd_handle` (nothing when it is 0).
pub(crate) fn ndarray_from_remote(
    rs: &Arc<RemoteSession>,
    data: u64,
    shape: &[i64],
    dtype: DLDataType,
    dev: DLDevice,
    byte_offset: u64,
    nd_handle: u64,
) -> Result<NDArray> {
    if !is_rpc_device(dev) || session_index(dev) != rs.index {
        return Err(Error::tvm("The Device given does not belong to the given session"));
    }
    device::shape_bytes(shape, dtype)?;
    let owner = if nd_handle == 0 { SpaceOwner::None } else { SpaceOwner::Array(nd_handle) };
    let p = new_space(data, rs.clone(), owner);
    NDArray::adopt(p, shape, dtype, dev, byte_offset)
}

// ---------------------------------------------------------------------------------------------
// Remote functions and modules

/// A remote function; frees its handle when the last copy goes.
struct RemoteFunc {
    handle: u64,
    rs: Arc<RemoteSession>,
}

impl Drop for RemoteFunc {
    fn drop(&mut self) {
        let _ = self.rs.sess.free_handle(self.handle, code::FUNC);
    }
}

fn wrap_func(handle: u64, rs: &Arc<RemoteSession>) -> PackedFunc {
    let f = Arc::new(RemoteFunc { handle, rs: rs.clone() });
    PackedFunc::new(move |args, ret| {
        let vals = to_wire(args, &f.rs)?;
        let r = f.rs.sess.call_func(f.handle, &vals)?;
        drop(vals);
        ret.set(from_return(r, &f.rs)?);
        Ok(())
    })
}

/// The bytes of a string argument, borrowed.
fn str_bytes<'a>(args: &Args<'a>, i: usize) -> Result<&'a [u8]> {
    // SAFETY: code 11 carries a NUL-terminated string live for the call (the Args contract).
    let p = unsafe { args.values()[i].v_str };
    if p.is_null() {
        return Err(Error::value(format!("argument {i}: null string")));
    }
    // SAFETY: as above.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// The bytes of a byte-array argument, borrowed.
fn byte_array<'a>(args: &Args<'a>, i: usize) -> Result<&'a [u8]> {
    // SAFETY: code 12 carries a `TVMByteArray*` live for the call (the Args contract).
    let ba = unsafe { args.values()[i].v_handle }.cast::<crate::abi::TVMByteArray>();
    // SAFETY: as above.
    let Some(ba) = (unsafe { ba.as_ref() }) else {
        return Err(Error::value(format!("argument {i}: null byte array")));
    };
    // SAFETY: `data` holds `size` bytes.
    unsafe { crate::value::slice_from_raw(ba.data.cast::<u8>(), ba.size) }
}

/// The wire form of a plain value (codes 0-5).
fn pod_value(raw: crate::abi::TVMValue, c: i32) -> Option<WireValue<'static>> {
    // SAFETY: the type code says which member of the union is valid.
    unsafe {
        Some(match c {
            code::INT => WireValue::Int(raw.v_int64),
            code::UINT => WireValue::UInt(raw.v_int64),
            code::FLOAT => WireValue::Float(raw.v_float64),
            code::HANDLE => WireValue::Handle(raw.v_handle as u64),
            code::NULL => WireValue::Null,
            code::DATA_TYPE => WireValue::DataType(raw.v_type),
            _ => return None,
        })
    }
}

/// Rewrites call arguments into their remote form (`RPCWrappedFunc::operator()`).
fn to_wire<'a>(args: &Args<'a>, rs: &RemoteSession) -> Result<Vec<WireValue<'a>>> {
    let mut out = Vec::with_capacity(args.len());
    for i in 0..args.len() {
        let c = args.code(i)?;
        let v = match c {
            code::INT | code::UINT | code::FLOAT | code::HANDLE | code::NULL | code::DATA_TYPE => {
                pod_value(args.values()[i], c).unwrap_or(WireValue::Null)
            }
            code::DEVICE => {
                let d = args.device(i)?;
                if !is_rpc_device(d) {
                    return Err(Error::value("Can not pass in local device"));
                }
                if session_index(d) != rs.index {
                    return Err(Error::value("Can not pass in device with a different remote session"));
                }
                WireValue::Device(remove_mask(d))
            }
            code::DLTENSOR | code::NDARRAY => {
                let p = args.dltensor(i)?;
                // SAFETY: codes 7/13 carry a live tensor for the call.
                let t = unsafe { p.as_ref() }.ok_or_else(|| Error::value(format!("argument {i}: null tensor")))?;
                WireValue::Tensor(wire_of(t, rs)?)
            }
            code::STR => WireValue::Str(Cow::Borrowed(str_bytes(args, i)?)),
            code::BYTES => WireValue::Bytes(Cow::Borrowed(byte_array(args, i)?)),
            code::MODULE => {
                let m = args.module(i)?.ok_or_else(|| Error::value(format!("argument {i}: null module")))?;
                let r =
                    m.downcast::<RpcModule>().ok_or_else(|| Error::value("Cannot pass a non-RPC module to remote"))?;
                if r.rs.index != rs.index || !Arc::ptr_eq(&r.rs.sess, &rs.sess) {
                    return Err(Error::value("Cannot pass in module into a different remote session"));
                }
                WireValue::Module(r.handle)
            }
            code::OBJECT | code::RVALUE_REF => {
                let o = args.object(i)?.ok_or_else(|| Error::value(format!("argument {i}: null object")))?;
                match o.downcast::<StringObj>() {
                    Some(s) => WireValue::Str(Cow::Owned(s.as_bytes().to_vec())),
                    None => {
                        let key = crate::object::type_index2key(o.type_index()).unwrap_or_default();
                        return Err(Error::value(format!(
                            "Cannot pass argument {i}, type {key} is not supported by RPC"
                        )));
                    }
                }
            }
            other => {
                return Err(Error::value(format!("Cannot pass type {} as an argument to the remote", code_name(other))))
            }
        };
        out.push(v);
    }
    Ok(out)
}

fn plain(v: WireValue<'static>) -> Result<Value> {
    Ok(match v {
        WireValue::Int(x) => Value::Int(x),
        WireValue::UInt(x) => Value::UInt(x),
        WireValue::Float(x) => Value::Float(x),
        WireValue::Handle(h) => Value::Handle(h as usize as *mut c_void),
        WireValue::Null => Value::Null,
        WireValue::DataType(t) => Value::DataType(t),
        WireValue::Device(d) => Value::Device(d),
        WireValue::Str(s) => Value::str(String::from_utf8_lossy(&s).into_owned()),
        WireValue::Bytes(b) => Value::bytes(b.into_owned()),
        other => return Err(codec::malformed(format!("unexpected return value {other:?}"))),
    })
}

/// Turns an encoded return into a local value (`WrapRemoteReturnToValue`).
fn from_return(vals: Vec<WireValue<'static>>, rs: &Arc<RemoteSession>) -> Result<Value> {
    let mut it = vals.into_iter();
    let tc = match it.next() {
        Some(WireValue::Int(c)) => c,
        Some(WireValue::Null) | None => return Ok(Value::Null),
        Some(other) => return Err(codec::malformed(format!("return type code {other:?}"))),
    };
    let rest: Vec<_> = it.collect();
    let want = |n: usize| -> Result<()> {
        if rest.len() + 1 != n {
            return Err(codec::malformed(format!("return of type {tc} with {} values", rest.len() + 1)));
        }
        Ok(())
    };
    match i32::try_from(tc).unwrap_or(-1) {
        code::NULL => Ok(Value::Null),
        code::FUNC => {
            want(2)?;
            match rest[0] {
                WireValue::Handle(h) if h != 0 => Ok(Value::func(wrap_func(h, rs))),
                _ => Ok(Value::Null),
            }
        }
        code::MODULE => {
            want(2)?;
            match rest[0] {
                WireValue::Handle(h) if h != 0 => Ok(Value::Module(Module::new(RpcModule::new(h, rs.clone())))),
                _ => Ok(Value::Null),
            }
        }
        code::NDARRAY | code::DLTENSOR => {
            want(3)?;
            let mut rest = rest.into_iter();
            let (Some(WireValue::Tensor(t)), Some(nd)) = (rest.next(), rest.next()) else {
                return Err(codec::malformed("an array return needs a tensor and a handle"));
            };
            let nd = nd.as_handle().ok_or_else(|| codec::malformed("array handle"))?;
            let dev = add_mask(t.device, rs.index);
            let a = ndarray_from_remote(rs, t.data, &t.shape, t.dtype, dev, t.byte_offset, nd);
            if a.is_err() && nd != 0 {
                let _ = rs.sess.free_handle(nd, code::NDARRAY);
            }
            Ok(Value::NDArray(a?))
        }
        _ => {
            want(2)?;
            plain(rest.into_iter().next().unwrap_or(WireValue::Null))
        }
    }
}

/// A module on the other side of a session (type key `rpc`); handle 0 is the session itself,
/// whose functions are the remote globals.
pub struct RpcModule {
    handle: u64,
    rs: Arc<RemoteSession>,
    helpers: Mutex<HashMap<&'static str, PackedFunc>>,
}

impl RpcModule {
    fn new(handle: u64, rs: Arc<RemoteSession>) -> RpcModule {
        RpcModule { handle, rs, helpers: Mutex::new(HashMap::new()) }
    }

    /// The session.
    pub fn session(&self) -> &Arc<RemoteSession> {
        &self.rs
    }

    /// The remote module handle (0 for the session module).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// A remote global used by the module's own operations (`InitRemoteFunc`), cached.
    pub(crate) fn helper_func(&self, name: &'static str) -> Result<PackedFunc> {
        if let Some(f) = self.helpers.lock().get(name) {
            return Ok(f.clone());
        }
        let h = self.rs.sess.get_function(name)?;
        if h == 0 {
            return Err(Error::tvm(format!("Cannot found remote function {name}")));
        }
        let f = wrap_func(h, &self.rs);
        self.helpers.lock().insert(name, f.clone());
        Ok(f)
    }

    /// `LoadModule`: the remote `tvm.rpc.server.load_module`.
    pub(crate) fn load_module(&self, path: &str) -> Result<Value> {
        self.helper_func("tvm.rpc.server.load_module")?.call(&[Value::str(path.to_owned())])
    }

    /// `GetTimeEvaluator`: the remote `runtime.RPCTimeEvaluator` for a function of this module
    /// (or a remote global when this is the session module).
    pub fn time_evaluator(&self, this: &Module, name: &str, dev: DLDevice, settings: &Args<'_>) -> Result<Value> {
        if !is_rpc_device(dev) || session_index(dev) != self.rs.index {
            return Err(Error::value("Need to pass the matched remote device to RPCModule.GetTimeEvaluator"));
        }
        let dev = remove_mask(dev);
        let m = if self.handle == 0 { Value::Null } else { Value::Module(this.clone()) };
        // The timer settings and `f_preproc` go on as the caller gave them: their count is the
        // caller's release (8 arguments in v0.8 ... 12 in v0.14+), which the server shares.
        let mut args = vec![
            m,
            Value::str(name.to_owned()),
            Value::Int(i64::from(dev.device_type)),
            Value::Int(i64::from(dev.device_id)),
        ];
        for i in 0..settings.len() {
            args.push(settings.get(i)?);
        }
        self.helper_func("runtime.RPCTimeEvaluator")?.call(&args)
    }
}

impl Drop for RpcModule {
    fn drop(&mut self) {
        // Helpers first (their handles), then the module handle.
        self.helpers.get_mut().clear();
        if self.handle != 0 {
            let _ = self.rs.sess.free_handle(self.handle, code::MODULE);
        }
    }
}

impl ModuleNode for RpcModule {
    fn type_key(&self) -> &str {
        "rpc"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        if self.handle == 0 {
            let h = self.rs.sess.get_function(name)?;
            return Ok((h != 0).then(|| wrap_func(h, &self.rs)));
        }
        let f = self.helper_func("tvm.rpc.server.ModuleGetFunction")?;
        match f.call(&[Value::Module(this.clone()), Value::str(name.to_owned()), Value::Int(0)])? {
            Value::Func(f) => Ok(Some(*f)),
            Value::Null => Ok(None),
            other => Err(codec::malformed(format!("ModuleGetFunction returned {}", code_name(other.type_code())))),
        }
    }

    fn get_source(&self, _format: &str) -> Result<String> {
        Err(Error::tvm("GetSource for rpc Module is not supported"))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The `rpc` module behind a module value, or the error TVM gives for another kind.
pub fn rpc_module(m: &Module) -> Result<&RpcModule> {
    m.downcast::<RpcModule>().ok_or_else(|| Error::value("Cannot pass a non-RPC module to remote"))
}

/// The session of an `rpc` module (`RPCModuleGetSession`).
pub(crate) fn module_session(m: &Module) -> Result<Arc<dyn Session>> {
    Ok(rpc_module(m)?.rs.sess.clone())
}

/// `runtime.RPCTimeEvaluator` for an `rpc` module: forwards to the remote side, as v0.8's
/// eight-argument form.
pub fn remote_time_evaluator(m: &Module, name: &str, dev: DLDevice, settings: &Args<'_>) -> Result<Value> {
    rpc_module(m)?.time_evaluator(m, name, dev, settings)
}

// ---------------------------------------------------------------------------------------------
// The device API of RPC devices

/// Routes operations on remote devices to their session (`RPCDeviceAPI`).
pub(crate) struct RpcDeviceApi;

/// The one instance.
pub(crate) static RPC_DEVICE_API: RpcDeviceApi = RpcDeviceApi;

/// The address and size of a compact host tensor's bytes.
fn host_range(t: &DLTensor) -> Result<(*mut u8, usize)> {
    if !device::is_contiguous(t) {
        return Err(Error::value("CopyDataFromTo only support contiguous array for now"));
    }
    let n = device::tensor_bytes(t)?;
    if n > 0 && t.data.is_null() {
        return Err(Error::value("CopyDataFromTo: NULL data pointer"));
    }
    Ok((t.data.cast::<u8>().wrapping_add(t.byte_offset as usize), n))
}

impl DeviceApi for RpcDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        session_of(dev)?.sess.set_device(remove_mask(dev))
    }

    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<device::Attr> {
        use device::Attr;
        // What a remote device answers; other values (which no device API sends) mean none.
        Ok(match session_of(dev)?.sess.get_attr(remove_mask(dev), kind)? {
            WireValue::Int(x) => Attr::Int(x),
            WireValue::UInt(x) => Attr::Int(x),
            WireValue::Float(x) => Attr::Float(x),
            WireValue::Str(s) => Attr::Str(String::from_utf8_lossy(&s).into_owned()),
            _ => Attr::Null,
        })
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        hint: DLDataType,
    ) -> Result<*mut c_void> {
        let rs = session_of(dev)?;
        let data = rs.sess.alloc_data(remove_mask(dev), nbytes as u64, alignment as u64, hint)?;
        Ok(new_space(data, rs, SpaceOwner::Alloc))
    }

    fn alloc_data_space_scoped(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        scope: Option<&str>,
    ) -> Result<*mut c_void> {
        let rs = session_of(dev)?;
        let t = WireTensor { data: 0, device: remove_mask(dev), dtype, shape: Cow::Borrowed(shape), byte_offset: 0 };
        let data = rs.sess.alloc_data_scoped(&t, scope)?;
        Ok(new_space(data, rs, SpaceOwner::Alloc))
    }

    fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if !ptr.is_null() {
            free_space(ptr, dev);
        }
        Ok(())
    }

    fn copy_data_from_to(&self, from: &DLTensor, to: &DLTensor, stream: *mut c_void) -> Result<()> {
        let (fr, tr) = (is_rpc_device(from.device), is_rpc_device(to.device));
        if fr && tr {
            if session_index(from.device) != session_index(to.device) {
                return Err(Error::value("Cannot copy across two different remote session"));
            }
            let rs = session_of(from.device)?;
            let (f, t) = (wire_of(from, &rs)?, wire_of(to, &rs)?);
            rs.sess.copy_among(&f, &t, stream as u64)
        } else if fr && to.device.device_type == device::CPU {
            let rs = session_of(from.device)?;
            let f = wire_of(from, &rs)?;
            let (p, n) = host_range(to)?;
            let dst: &mut [u8] = if n == 0 {
                &mut []
            } else {
                // SAFETY: a compact, non-NULL CPU tensor of `n` bytes past its offset, which the
                // caller lends for writing (the C API's tensor contract).
                unsafe { std::slice::from_raw_parts_mut(p, n) }
            };
            rs.sess.copy_from_remote(&f, dst)
        } else if from.device.device_type == device::CPU && tr {
            let rs = session_of(to.device)?;
            let t = wire_of(to, &rs)?;
            let (p, n) = host_range(from)?;
            let src: &[u8] = if n == 0 {
                &[]
            } else {
                // SAFETY: a compact, non-NULL CPU tensor of `n` bytes past its offset, lent for
                // reading.
                unsafe { std::slice::from_raw_parts(p, n) }
            };
            rs.sess.copy_to_remote(src, &t)
        } else {
            Err(Error::value("expect copy from/to remote or between remote"))
        }
    }

    fn copy_flat(
        &self,
        _from: *const c_void,
        _from_offset: u64,
        _to: *mut c_void,
        _to_offset: u64,
        _nbytes: usize,
        _dev_from: DLDevice,
        _dev_to: DLDevice,
        _type_hint: DLDataType,
        _stream: *mut c_void,
    ) -> Result<()> {
        Err(Error::tvm("RPC devices copy whole tensors only (CopyDataFromTo)"))
    }

    fn create_stream(&self, dev: DLDevice) -> Result<*mut c_void> {
        Ok(session_of(dev)?.sess.create_stream(remove_mask(dev))? as usize as *mut c_void)
    }

    fn free_stream(&self, dev: DLDevice, stream: *mut c_void) -> Result<()> {
        session_of(dev)?.sess.free_stream(remove_mask(dev), stream as u64)
    }

    fn stream_sync(&self, dev: DLDevice, stream: *mut c_void) -> Result<()> {
        session_of(dev)?.sess.stream_sync(remove_mask(dev), stream as u64)
    }

    fn set_stream(&self, dev: DLDevice, stream: *mut c_void) -> Result<()> {
        session_of(dev)?.sess.set_stream(remove_mask(dev), stream as u64)
    }

    fn sync_stream_from_to(&self, _dev: DLDevice, _src: *mut c_void, _dst: *mut c_void) -> Result<()> {
        Err(Error::tvm("stream-to-stream synchronisation is not available over RPC"))
    }
}
