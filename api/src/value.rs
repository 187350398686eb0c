//! [`Value`]: the arguments and results of [`crate::Function`]s, with conversions from and to
//! Rust types, and [`Object`] for the runtime's other objects.

use crate::{DataType, Device, Error, Function, Module, NDArray, Result};
use std::fmt;
use tvm_runtime::object::{ArrayObj, ObjectRef, ShapeTupleObj, StringObj};
use tvm_runtime::value::Value as CoreValue;

/// A value passed to or returned by a function.
///
/// `Send + Sync`: every variant is.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// No value (`None`).
    #[default]
    None,
    /// An integer (booleans are passed as 0 and 1, as in TVM).
    Int(i64),
    /// A float.
    Float(f64),
    /// A string (also what `runtime.String` objects become).
    Str(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A data type.
    DataType(DataType),
    /// A device.
    Device(Device),
    /// An array.
    NDArray(NDArray),
    /// A module.
    Module(Module),
    /// A function.
    Function(Function),
    /// Any other object of the runtime (`Array`, `ShapeTuple`, `Map`, ...).
    Object(Object),
    /// A raw pointer or extension value that a function returned; it can only be passed back.
    Opaque(Opaque),
}

/// A raw handle returned by a function (type codes 3, 7 and extension codes): the API never
/// dereferences it, and it can only be passed back to the runtime.
#[derive(Clone, PartialEq, Eq)]
pub struct Opaque {
    type_code: i32,
    /// The pointer's address (codes 3 and 7); `None` for extension values, which cannot be
    /// passed back.
    addr: Option<usize>,
}

impl Opaque {
    /// TVM's type code of the value.
    pub fn type_code(&self) -> i32 {
        self.type_code
    }
}

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opaque({})", tvm_runtime::value::code_name(self.type_code))
    }
}

/// An object of the runtime that is not an array, module or function.
///
/// `Send + Sync`: objects are reference counted atomically and immutable once made.
#[derive(Clone)]
pub struct Object(pub(crate) ObjectRef);

impl Object {
    /// The object's type key (`runtime.Array`, `runtime.ShapeTuple`, ...).
    pub fn type_key(&self) -> String {
        tvm_runtime::object::type_index2key(self.0.type_index()).unwrap_or_else(|_| "unknown".into())
    }

    /// The elements, if this is a `runtime.Array`.
    pub fn as_array(&self) -> Option<Vec<Value>> {
        self.0
            .downcast::<ArrayObj>()
            .map(|a| a.items.iter().map(|o| Value::from_core(CoreValue::from_opt_object(o.clone()))).collect())
    }

    /// The entries (key, value) in stored order, if this is a `runtime.Map`.
    pub fn as_map(&self) -> Option<Vec<(Value, Value)>> {
        self.0.downcast::<tvm_runtime::object::MapObj>().map(|m| {
            m.entries
                .values()
                .map(|(k, v)| {
                    (
                        Value::from_core(CoreValue::from_object(k.clone())),
                        Value::from_core(CoreValue::from_opt_object(v.clone())),
                    )
                })
                .collect()
        })
    }

    /// The dimensions, if this is a `runtime.ShapeTuple`.
    pub fn as_shape(&self) -> Option<Vec<i64>> {
        self.0.downcast::<ShapeTupleObj>().map(|s| s.dims().to_vec())
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Object({})", self.type_key())
    }
}

impl Value {
    /// TVM's name of the value's kind (`int`, `str`, `NDArrayContainer`, ...), for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::DataType(_) => "DataType",
            Value::Device(_) => "Device",
            Value::NDArray(_) => "NDArray",
            Value::Module(_) => "Module",
            Value::Function(_) => "Function",
            Value::Object(_) => "Object",
            Value::Opaque(_) => "handle",
        }
    }

    pub(crate) fn from_core(v: CoreValue) -> Value {
        match v {
            CoreValue::Null => Value::None,
            CoreValue::Int(i) | CoreValue::UInt(i) => Value::Int(i),
            CoreValue::Float(x) => Value::Float(x),
            CoreValue::Str(s) => Value::Str(*s),
            CoreValue::Bytes(b) => Value::Bytes(*b),
            CoreValue::DataType(t) => Value::DataType(DataType::from_dl(t)),
            CoreValue::Device(d) => Value::Device(Device::from_dl(d)),
            CoreValue::NDArray(a) => Value::NDArray(NDArray(a)),
            CoreValue::Module(m) => Value::Module(Module(m)),
            CoreValue::Func(f) => Value::Function(Function(*f)),
            CoreValue::Object(o) => match o.downcast::<StringObj>() {
                Some(s) => Value::Str(s.to_string_lossy()),
                None => Value::Object(Object(o)),
            },
            CoreValue::Handle(p) => Value::Opaque(Opaque { type_code: 3, addr: Some(p as usize) }),
            CoreValue::DLTensor(p) => Value::Opaque(Opaque { type_code: 7, addr: Some(p as usize) }),
            CoreValue::Ext(e) => Value::Opaque(Opaque { type_code: e.0, addr: None }),
        }
    }

    pub(crate) fn to_core(&self) -> Result<CoreValue> {
        Ok(match self {
            Value::None => CoreValue::Null,
            Value::Int(i) => CoreValue::Int(*i),
            Value::Float(x) => CoreValue::Float(*x),
            Value::Str(s) => CoreValue::str(s.clone()),
            Value::Bytes(b) => CoreValue::bytes(b.clone()),
            Value::DataType(t) => CoreValue::DataType(t.dl()),
            Value::Device(d) => CoreValue::Device(d.dl()),
            Value::NDArray(a) => CoreValue::NDArray(a.0.clone()),
            Value::Module(m) => CoreValue::Module(m.0.clone()),
            Value::Function(f) => CoreValue::func(f.0.clone()),
            Value::Object(o) => CoreValue::Object(o.0.clone()),
            Value::Opaque(Opaque { type_code: 3, addr: Some(a) }) => CoreValue::Handle(*a as *mut std::ffi::c_void),
            Value::Opaque(Opaque { type_code: 7, addr: Some(a) }) => {
                CoreValue::DLTensor(*a as *mut tvm_runtime::abi::DLTensor)
            }
            Value::Opaque(o) => {
                return Err(Error::type_error(format!("an extension value ({o:?}) cannot be passed back")))
            }
        })
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
from_int!(i8, i16, i32, i64, u8, u16, u32, bool);

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}
impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Float(f64::from(v))
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Bytes(v.to_vec())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Bytes(v)
    }
}
impl From<DataType> for Value {
    fn from(v: DataType) -> Value {
        Value::DataType(v)
    }
}
impl From<Device> for Value {
    fn from(v: Device) -> Value {
        Value::Device(v)
    }
}
impl From<NDArray> for Value {
    fn from(v: NDArray) -> Value {
        Value::NDArray(v)
    }
}
impl From<&NDArray> for Value {
    fn from(v: &NDArray) -> Value {
        Value::NDArray(v.clone())
    }
}
impl From<Module> for Value {
    fn from(v: Module) -> Value {
        Value::Module(v)
    }
}
impl From<&Module> for Value {
    fn from(v: &Module) -> Value {
        Value::Module(v.clone())
    }
}
impl From<Function> for Value {
    fn from(v: Function) -> Value {
        Value::Function(v)
    }
}
impl From<&Function> for Value {
    fn from(v: &Function) -> Value {
        Value::Function(v.clone())
    }
}
impl From<Object> for Value {
    fn from(v: Object) -> Value {
        Value::Object(v)
    }
}
impl From<()> for Value {
    fn from(_: ()) -> Value {
        Value::None
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::None, Into::into)
    }
}

fn mismatch(want: &str, got: &Value) -> Error {
    Error::type_error(format!("expected {want} but got {}", got.kind()))
}

impl TryFrom<Value> for i64 {
    type Error = Error;
    fn try_from(v: Value) -> Result<i64> {
        match v {
            Value::Int(i) => Ok(i),
            other => Err(mismatch("int", &other)),
        }
    }
}

impl TryFrom<Value> for i32 {
    type Error = Error;
    fn try_from(v: Value) -> Result<i32> {
        let i = i64::try_from(v)?;
        i32::try_from(i).map_err(|_| Error::value(format!("{i} does not fit in int32")))
    }
}

impl TryFrom<Value> for bool {
    type Error = Error;
    fn try_from(v: Value) -> Result<bool> {
        i64::try_from(v).map(|i| i != 0)
    }
}

impl TryFrom<Value> for f64 {
    type Error = Error;
    fn try_from(v: Value) -> Result<f64> {
        match v {
            Value::Float(x) => Ok(x),
            Value::Int(i) => Ok(i as f64),
            other => Err(mismatch("float", &other)),
        }
    }
}

impl TryFrom<Value> for String {
    type Error = Error;
    fn try_from(v: Value) -> Result<String> {
        match v {
            Value::Str(s) => Ok(s),
            Value::DataType(t) => Ok(t.to_string()),
            other => Err(mismatch("str", &other)),
        }
    }
}

impl TryFrom<Value> for Vec<u8> {
    type Error = Error;
    fn try_from(v: Value) -> Result<Vec<u8>> {
        match v {
            Value::Bytes(b) => Ok(b),
            Value::Str(s) => Ok(s.into_bytes()),
            other => Err(mismatch("bytes", &other)),
        }
    }
}

macro_rules! try_from_variant {
    ($($t:ident => $want:literal),*) => {$(
        impl TryFrom<Value> for $t {
            type Error = Error;
            fn try_from(v: Value) -> Result<$t> {
                match v {
                    Value::$t(x) => Ok(x),
                    other => Err(mismatch($want, &other)),
                }
            }
        }
    )*};
}
try_from_variant!(NDArray => "NDArray", Module => "Module", Function => "Function", Device => "Device",
    DataType => "DataType", Object => "Object", Opaque => "handle");

impl TryFrom<Value> for () {
    type Error = Error;
    fn try_from(v: Value) -> Result<()> {
        match v {
            Value::None => Ok(()),
            other => Err(mismatch("None", &other)),
        }
    }
}

/// Arguments of a call: `()`, tuples of up to eight values convertible [`Into<Value>`],
/// `Vec<Value>` and `&[Value]`.
pub trait IntoArgs {
    /// The arguments as values.
    fn into_args(self) -> Vec<Value>;
}

impl IntoArgs for Vec<Value> {
    fn into_args(self) -> Vec<Value> {
        self
    }
}

impl IntoArgs for &[Value] {
    fn into_args(self) -> Vec<Value> {
        self.to_vec()
    }
}

impl<const N: usize> IntoArgs for [Value; N] {
    fn into_args(self) -> Vec<Value> {
        self.into()
    }
}

macro_rules! tuple_args {
    ($(($($n:ident),*)),*) => {$(
        impl<$($n: Into<Value>),*> IntoArgs for ($($n,)*) {
            #[allow(non_snake_case, reason = "the type parameters name the tuple's fields")]
            fn into_args(self) -> Vec<Value> {
                let ($($n,)*) = self;
                vec![$($n.into()),*]
            }
        }
    )*};
}

impl IntoArgs for () {
    fn into_args(self) -> Vec<Value> {
        Vec::new()
    }
}

tuple_args!(
    (A),
    (A, B),
    (A, B, C),
    (A, B, C, D),
    (A, B, C, D, E),
    (A, B, C, D, E, F),
    (A, B, C, D, E, F, G),
    (A, B, C, D, E, F, G, H)
);
