//! `ffi.ReprPrint`: tvm-ffi's repr of any value: POD values, escaped strings, containers in
//! Python's notation, tensors and shapes, enums as `Type.NAME`, `__ffi_repr__` hooks, and
//! reflected objects as `Type(field=value, ...)`; cycles print `...`.

use super::access::{self, str_bytes};
use super::fields::{all_fields, field_name, get_field, REPR_OFF};
use crate::any::Any;
use crate::object::ObjectRef;
use crate::ti;
use crate::{function, globals, types, FfiError, FfiResult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tvm_runtime_classic::abi::{DLDevice, DLTensor};

/// A device's name as tvm-ffi prints it.
pub use tvm_runtime_classic::device::names::ffi_name as device_type_name;

fn device_str(d: DLDevice) -> String {
    format!("{}:{}", device_type_name(d.device_type), d.device_id)
}

/// `b"..."` with non-printable bytes as `\xNN`.
pub(crate) fn format_bytes(b: &[u8]) -> String {
    let mut s = String::from("b\"");
    for &c in b {
        if (32..127).contains(&c) && c != b'"' && c != b'\\' {
            s.push(c as char);
        } else {
            s.push_str(&format!("\\x{c:02x}"));
        }
    }
    s.push('"');
    s
}

/// tvm-ffi's `EscapedStringPy`.
pub(crate) fn escape_str(data: &[u8]) -> String {
    let n = data.len();
    let mut o = String::from("\"");
    let mut i = 0;
    while i < n {
        let c = data[i];
        let d = if i + 1 < n { data[i + 1] } else { 0 };
        if c == 0x1b && d == b'[' {
            let mut j = i + 2;
            while j < n && (data[j].is_ascii_digit() || data[j] == b';') {
                j += 1;
            }
            if j < n && (data[j] == b'm' || data[j] == b'K') {
                o.push_str("\\x1b[");
                o.push_str(&String::from_utf8_lossy(&data[i + 2..=j]));
                i = j + 1;
                continue;
            }
        }
        match c {
            b'\n' => o.push_str("\\n"),
            b'\t' => o.push_str("\\t"),
            b'\r' => o.push_str("\\r"),
            b'\\' => o.push_str("\\\\"),
            b'"' => o.push_str("\\\""),
            _ if c & 0x80 == 0 => {
                if c < 0x20 || c == 0x7f {
                    o.push_str(&format!("\\x{c:02x}"));
                } else {
                    o.push(c as char);
                }
            }
            _ if c & 0xE0 == 0xC0 && i + 1 < n && d & 0xC0 == 0x80 => {
                let cp = ((c as u32 & 0x1F) << 6) | (d as u32 & 0x3F);
                o.push_str(&format!("\\u{cp:04x}"));
                i += 2;
                continue;
            }
            _ if c & 0xF0 == 0xE0 && i + 2 < n && d & 0xC0 == 0x80 && data[i + 2] & 0xC0 == 0x80 => {
                let cp = ((c as u32 & 0x0F) << 12) | ((d as u32 & 0x3F) << 6) | (data[i + 2] as u32 & 0x3F);
                o.push_str(&format!("\\u{cp:04x}"));
                i += 3;
                continue;
            }
            _ if c & 0xF8 == 0xF0
                && i + 3 < n
                && d & 0xC0 == 0x80
                && data[i + 2] & 0xC0 == 0x80
                && data[i + 3] & 0xC0 == 0x80 =>
            {
                let cp = ((c as u32 & 0x07) << 18)
                    | ((d as u32 & 0x3F) << 12)
                    | ((data[i + 2] as u32 & 0x3F) << 6)
                    | (data[i + 3] as u32 & 0x3F);
                o.push_str(&format!("\\U{cp:08x}"));
                i += 4;
                continue;
            }
            _ => o.push_str(&format!("\\x{c:02x}")),
        }
        i += 1;
    }
    o.push('"');
    o
}

/// C++ `ostream << double` (six significant digits, `%g`).
pub(crate) fn format_double(v: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: a bounded write into a local buffer with a matching format.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%g".as_ptr(), v) };
    String::from_utf8_lossy(&buf[..n.clamp(0, 63) as usize]).into_owned()
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    InProgress,
    Done,
}

struct Printer {
    show_addr: bool,
    state: HashMap<usize, State>,
    cache: HashMap<usize, String>,
}

fn addr(o: &ObjectRef) -> String {
    format!("0x{:x}", o.as_ptr() as usize)
}

fn is_container(t: i32) -> bool {
    matches!(t, ti::ARRAY | ti::LIST | ti::MAP | ti::DICT)
}

impl Printer {
    #[inline(never)]
    fn immediate(this: &Arc<Mutex<Printer>>, v: &Any) -> FfiResult<Option<String>> {
        let t = v.type_index();
        let raw = v.raw();
        let s = match t {
            ti::NONE => "None".into(),
            ti::BOOL => if raw.bits() != 0 { "True" } else { "False" }.into(),
            ti::INT => (raw.bits() as i64).to_string(),
            ti::FLOAT => format_double(f64::from_bits(raw.bits())),
            ti::DATA_TYPE => crate::dtype::format(v.as_dtype().expect("dtype"))?,
            ti::DEVICE => device_str(v.as_device().expect("device")),
            ti::SMALL_STR => escape_str(str_bytes(raw)),
            ti::SMALL_BYTES => format_bytes(str_bytes(raw)),
            t if t < ti::STATIC_OBJECT_BEGIN => types::type_key(t),
            _ => return Self::object_immediate(this, v),
        };
        Ok(Some(s))
    }

    #[inline(never)]
    fn object_immediate(this: &Arc<Mutex<Printer>>, v: &Any) -> FfiResult<Option<String>> {
        let Some(o) = v.as_object() else { return Ok(Some("None".into())) };
        let key = o.as_ptr() as usize;
        let show_addr = {
            let p = this.lock().expect("repr state");
            match p.state.get(&key) {
                Some(State::Done) => return Ok(Some(p.cache.get(&key).cloned().unwrap_or_default())),
                Some(State::InProgress) => {
                    return Ok(Some(if p.show_addr { format!("...@{}", addr(&o)) } else { "...".into() }))
                }
                None => {}
            }
            p.show_addr
        };
        let ptr = o.as_ptr();
        if ptr == globals::missing_object().raw().obj_ptr() {
            return Ok(Some("<MISSING>".into()));
        }
        if ptr == globals::kwargs_object().raw().obj_ptr() {
            return Ok(Some("<KWARGS>".into()));
        }
        let t = o.type_index();
        match t {
            ti::STR => return Ok(Some(escape_str(str_bytes(v.raw())))),
            ti::BYTES => return Ok(Some(format_bytes(str_bytes(v.raw())))),
            ti::BIG_INT => {
                let w = crate::bigint::object_words(&o).unwrap_or_default();
                return Ok(Some(crate::bigint::to_decimal(&w)));
            }
            ti::TENSOR => {
                // SAFETY: a tensor object holds a DLTensor after the header.
                let dl = unsafe { o.payload::<DLTensor>() };
                let dims: Vec<String> = (0..dl.ndim.max(0) as usize)
                    // SAFETY: `shape` has `ndim` entries.
                    .map(|i| unsafe { *dl.shape.add(i) }.to_string())
                    .collect();
                let mut s =
                    format!("{}[{}]@{}", crate::dtype::format(dl.dtype)?, dims.join(", "), device_str(dl.device));
                if show_addr {
                    s += &format!("@{}", addr(&o));
                }
                return Ok(Some(s));
            }
            ti::SHAPE => {
                let d: Vec<String> = access::shape_dims(&o).iter().map(|x| x.to_string()).collect();
                return Ok(Some(format!("Shape({})", d.join(", "))));
            }
            _ => {}
        }
        if let Some(hook) = access::attr_fn("__ffi_repr__", t) {
            this.lock().expect("repr state").state.insert(key, State::InProgress);
            let fn_repr = Self::fn_repr(this);
            let r = function::call_any(&hook, &[Any::object(o.clone()), Any::object(fn_repr)])?;
            let mut s = r.as_str().map(str::to_owned).unwrap_or_default();
            if show_addr && is_container(t) {
                s += &format!("@{}", addr(&o));
            }
            let mut p = this.lock().expect("repr state");
            p.state.insert(key, State::Done);
            p.cache.insert(key, s.clone());
            return Ok(Some(s));
        }
        if access::is_enum(t) {
            // SAFETY: enum objects hold (_int_index: i64, _str_index: String cell) after the header.
            let name = unsafe { o.payload::<(i64, Any)>() }.1.as_str().unwrap_or("").to_owned();
            let mut s = format!("{}.{}", types::type_key(t), name);
            if show_addr {
                s += &format!("@{}", addr(&o));
            }
            let mut p = this.lock().expect("repr state");
            p.state.insert(key, State::Done);
            p.cache.insert(key, s.clone());
            return Ok(Some(s));
        }
        Ok(None)
    }

    fn fn_repr(this: &Arc<Mutex<Printer>>) -> ObjectRef {
        let weak = Arc::downgrade(this);
        function::from_fn(move |args| {
            let p = weak.upgrade().ok_or_else(|| FfiError::runtime("repr printer is gone"))?;
            let v = crate::globals::arg_any("fn_repr", args, 0)?;
            Ok(Any::string(&Self::repr(&p, &v)?))
        })
    }

    fn repr(this: &Arc<Mutex<Printer>>, v: &Any) -> FfiResult<String> {
        access::check_stack("ReprPrint")?;
        if let Some(s) = Self::immediate(this, v)? {
            return Ok(s);
        }
        let o = v.as_object().expect("object value");
        let key = o.as_ptr() as usize;
        let t = o.type_index();
        let show_addr = {
            let mut p = this.lock().expect("repr state");
            p.state.insert(key, State::InProgress);
            p.show_addr
        };
        let mut s = match t {
            ti::ARRAY | ti::LIST => {
                let items = access::seq(&o);
                let parts = items.iter().map(|x| Self::repr(this, x)).collect::<FfiResult<Vec<_>>>()?;
                if t == ti::ARRAY {
                    format!("({}{})", parts.join(", "), if parts.len() == 1 { "," } else { "" })
                } else {
                    format!("[{}]", parts.join(", "))
                }
            }
            ti::MAP | ti::DICT => {
                let mut parts = Vec::new();
                for (k, x) in access::map_items(&o)? {
                    parts.push(format!("{}: {}", Self::repr(this, &k)?, Self::repr(this, &x)?));
                }
                format!("{{{}}}", parts.join(", "))
            }
            _ => {
                let header =
                    if show_addr { format!("{}@{}", types::type_key(t), addr(&o)) } else { types::type_key(t) };
                let mut parts = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for f in all_fields(t) {
                    if f.flags & REPR_OFF != 0 {
                        continue;
                    }
                    // SAFETY: the object is of this type.
                    let fv = unsafe { get_field(o.as_ptr(), &f) }?;
                    let r = Self::repr(this, &fv)?;
                    if seen.insert(field_name(&f)) {
                        parts.push(format!("{}={}", field_name(&f), r));
                    }
                }
                if parts.is_empty() {
                    header
                } else {
                    format!("{header}({})", parts.join(", "))
                }
            }
        };
        if show_addr && is_container(t) {
            s += &format!("@{}", addr(&o));
        }
        let mut p = this.lock().expect("repr state");
        p.state.insert(key, State::Done);
        p.cache.insert(key, s.clone());
        Ok(s)
    }
}

/// `ffi.ReprPrint(value)`.
pub(crate) fn repr_print(v: &Any) -> FfiResult<String> {
    let show_addr = std::env::var("TVM_FFI_REPR_WITH_ADDR").is_ok_and(|v| v == "1");
    let p = Arc::new(Mutex::new(Printer { show_addr, state: HashMap::new(), cache: HashMap::new() }));
    Printer::repr(&p, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_tvm_ffi() {
        assert_eq!(escape_str(b"a\"b\\\n"), "\"a\\\"b\\\\\\n\"");
        assert_eq!(escape_str("é".as_bytes()), "\"\\u00e9\"");
        assert_eq!(escape_str("\u{1F600}".as_bytes()), "\"\\U0001f600\"");
        assert_eq!(format_bytes(b"a\x00\""), "b\"a\\x00\\x22\"");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(1e20), "1e+20");
    }

    #[test]
    fn reprs_pod_and_arrays() {
        assert_eq!(repr_print(&Any::int(3)).unwrap(), "3");
        assert_eq!(repr_print(&Any::bool(true)).unwrap(), "True");
        assert_eq!(repr_print(&Any::none()).unwrap(), "None");
        assert_eq!(repr_print(&Any::string("hi")).unwrap(), "\"hi\"");
        let a = crate::containers::array::make_array(vec![Any::int(1)]);
        assert_eq!(repr_print(&Any::object(a)).unwrap(), "(1,)");
        let a = crate::containers::array::make_array(vec![Any::int(1), Any::string("x")]);
        assert_eq!(repr_print(&Any::object(a)).unwrap(), "(1, \"x\")");
    }
}
