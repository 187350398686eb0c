//! tvm-ffi's JSON object graph (`ffi.ToJSONGraph` / `ffi.FromJSONGraph`): every value becomes a
//! node `{"type": key, "data": ...}` in `nodes`, equal values (by `AnyEqual`) share one node,
//! containers and object fields refer to other nodes by index, POD fields are written inline.
//! Reading checks what it is given: node indices in range, no node that contains itself, known
//! types, required fields present; bad input is an error, never a crash.

use super::json::{object_set, Json};
use crate::any::Any;
use crate::structural::{cont, reflect};
use crate::{dtype, ti, types, FfiError, FfiResult};
use std::collections::HashMap;
use tvm_runtime_classic::abi::{DLDataType, DLDevice};

#[derive(Hash, PartialEq, Eq)]
enum Key {
    Str(Vec<u8>),
    Bytes(Vec<u8>),
    Bits(i32, u64),
}

fn key_of(v: &Any) -> Key {
    if let Some(b) = cont::str_bytes(v, false) {
        return Key::Str(b.to_vec());
    }
    if let Some(b) = cont::str_bytes(v, true) {
        return Key::Bytes(b.to_vec());
    }
    Key::Bits(v.type_index(), v.raw().bits())
}

struct Writer {
    index: HashMap<Key, (i64, Any)>,
    nodes: Vec<Json>,
    active: Vec<u64>,
}

fn node(type_key: &str, data: Option<Json>) -> Json {
    let mut m = vec![("type".to_string(), Json::Str(type_key.to_string()))];
    if let Some(d) = data {
        m.push(("data".into(), d));
    }
    Json::Object(m)
}

/// Standard base64 with padding.
pub(crate) fn base64_encode(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(v >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (length a multiple of 4, `=` padding).
pub(crate) fn base64_decode(s: &str) -> FfiResult<Vec<u8>> {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return Err(FfiError::value("invalid base64 encoding"));
    }
    let dec = |c: u8| -> FfiResult<u32> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => 0,
            _ => return Err(FfiError::value("invalid base64 encoding")),
        } as u32)
    };
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for c in b.chunks(4) {
        let v = dec(c[0])? << 18 | dec(c[1])? << 12 | dec(c[2])? << 6 | dec(c[3])?;
        out.push((v >> 16) as u8);
        if c[2] != b'=' {
            out.push((v >> 8) as u8);
        }
        if c[3] != b'=' {
            out.push(v as u8);
        }
    }
    Ok(out)
}

impl Writer {
    fn seq_data(&mut self, items: &[Any]) -> FfiResult<Json> {
        Ok(Json::Array(items.iter().map(|x| self.index_of(x).map(Json::Int)).collect::<FfiResult<_>>()?))
    }

    fn map_data(&mut self, o: &crate::ObjectRef) -> FfiResult<Json> {
        let mut d = Vec::new();
        for (k, v) in cont::map_items(o)? {
            d.push(Json::Int(self.index_of(&k)?));
            d.push(Json::Int(self.index_of(&v)?));
        }
        Ok(Json::Array(d))
    }

    fn index_of(&mut self, v: &Any) -> FfiResult<i64> {
        let key = key_of(v);
        if let Some((i, _)) = self.index.get(&key) {
            return Ok(*i);
        }
        let t = v.type_index();
        let n = match t {
            ti::NONE => node("None", None),
            ti::BOOL => node("bool", Some(Json::Bool(v.as_bool().unwrap_or(false)))),
            ti::INT => node("int", Some(Json::Int(v.as_i64().unwrap_or(0)))),
            ti::FLOAT => node("float", Some(Json::Float(v.as_f64().unwrap_or(0.0)))),
            ti::DATA_TYPE => node("DataType", Some(Json::Str(dtype::format(v.as_dtype().expect("dtype"))?))),
            ti::DEVICE => {
                let d = v.as_device().expect("device");
                node("Device", Some(Json::Array(vec![Json::Int(d.device_type as i64), Json::Int(d.device_id as i64)])))
            }
            ti::SMALL_STR | ti::STR => {
                let s = String::from_utf8_lossy(cont::str_bytes(v, false).unwrap_or_default()).into_owned();
                node("ffi.String", Some(Json::Str(s)))
            }
            ti::SMALL_BYTES | ti::BYTES => {
                node("ffi.Bytes", Some(Json::Str(base64_encode(cont::str_bytes(v, true).unwrap_or_default()))))
            }
            ti::ARRAY | ti::LIST => {
                let o = v.as_object().expect("object");
                let ptr = o.as_ptr() as u64;
                if t == ti::LIST {
                    if self.active.contains(&ptr) {
                        return Err(FfiError::value("Cycle detected during serialization: a List contains itself"));
                    }
                    self.active.push(ptr);
                }
                let d = self.seq_data(cont::seq(&o));
                if t == ti::LIST {
                    self.active.pop();
                }
                node(if t == ti::LIST { "ffi.List" } else { "ffi.Array" }, Some(d?))
            }
            ti::MAP | ti::DICT => {
                let o = v.as_object().expect("object");
                let ptr = o.as_ptr() as u64;
                if t == ti::DICT {
                    if self.active.contains(&ptr) {
                        return Err(FfiError::value("Cycle detected during serialization: a Dict contains itself"));
                    }
                    self.active.push(ptr);
                }
                let d = self.map_data(&o);
                if t == ti::DICT {
                    self.active.pop();
                }
                node(if t == ti::DICT { "ffi.Dict" } else { "ffi.Map" }, Some(d?))
            }
            ti::SHAPE => {
                let o = v.as_object().expect("object");
                node("ffi.Shape", Some(Json::Array(cont::shape(&o).iter().map(|&d| Json::Int(d)).collect())))
            }
            t if t >= ti::STATIC_OBJECT_BEGIN => node(&types::type_key(t), Some(self.object_data(v)?)),
            _ => return Err(FfiError::runtime(format!("Cannot serialize type `{}`", types::type_key(t)))),
        };
        let i = self.nodes.len() as i64;
        self.nodes.push(n);
        self.index.insert(key, (i, v.clone()));
        Ok(i)
    }

    fn object_data(&mut self, v: &Any) -> FfiResult<Json> {
        let ptr = v.raw().bits();
        if self.active.contains(&ptr) {
            return Err(FfiError::value("Cycle detected during serialization: an object contains itself"));
        }
        self.active.push(ptr);
        let r = self.object_data_inner(v);
        self.active.pop();
        r
    }

    fn object_data_inner(&mut self, v: &Any) -> FfiResult<Json> {
        let t = v.type_index();
        let obj = v.as_object().expect("object");
        if let Some(int_enum) = enum_kind(t) {
            let f = field_named(&obj, if int_enum { "_int_index" } else { "_str_index" })?;
            return Ok(if int_enum {
                Json::Int(f.as_i64().unwrap_or(0))
            } else {
                Json::Str(String::from_utf8_lossy(cont::str_bytes(&f, false).unwrap_or_default()).into_owned())
            });
        }
        if let Some(hook) = types::attr_value("__data_to_json__", t).and_then(|h| h.as_object()) {
            let r = crate::function::call_any(&hook, std::slice::from_ref(v))?;
            return super::json::from_any(&r);
        }
        if !reflect::has_creator(t) {
            return Err(FfiError::type_error(format!(
                "Type `{}` does not support ToJSONGraph (no native creator or __ffi_new__ type attr)",
                types::type_key(t)
            )));
        }
        let mut data = Vec::new();
        for f in reflect::all_fields(t) {
            let fv = reflect::get_field(&obj, &f)?;
            let j = match f.field_static_type_index {
                ti::NONE => Json::Null,
                ti::BOOL => Json::Bool(fv.as_bool().unwrap_or(false)),
                ti::INT => Json::Int(fv.as_i64().unwrap_or(0)),
                ti::FLOAT => Json::Float(fv.as_f64().unwrap_or(0.0)),
                ti::DATA_TYPE => {
                    Json::Str(dtype::format(fv.as_dtype().unwrap_or(DLDataType { code: 0, bits: 0, lanes: 0 }))?)
                }
                _ => Json::Int(self.index_of(&fv)?),
            };
            object_set(&mut data, reflect::field_name(&f), j);
        }
        Ok(Json::Object(data))
    }
}

/// Whether a type is an enum: `Some(true)` for an `ffi.IntEnum`, `Some(false)` for another
/// `ffi.Enum` (serialized by their integer or string index).
fn enum_kind(t: i32) -> Option<bool> {
    let is = |key: &str| types::key_to_index(key).is_some_and(|e| types::is_instance(t, e));
    if is("ffi.IntEnum") {
        Some(true)
    } else if is("ffi.Enum") {
        Some(false)
    } else {
        None
    }
}

fn field_named(o: &crate::ObjectRef, name: &str) -> FfiResult<Any> {
    let f = reflect::all_fields(o.type_index())
        .into_iter()
        .find(|f| reflect::field_name(f) == name)
        .ok_or_else(|| FfiError::type_error(format!("`{}` has no field `{name}`", types::type_key(o.type_index()))))?;
    reflect::get_field(o, &f)
}

/// The enum singleton of type `t` with index `key` (through its `__ffi_enum__` state).
fn enum_by_index(t: i32, key: &Any) -> FfiResult<Any> {
    let missing = || {
        let k = match key.as_i64() {
            Some(i) => i.to_string(),
            None => String::from_utf8_lossy(cont::str_bytes(key, false).unwrap_or_default()).into_owned(),
        };
        FfiError::value(format!("Enum `{}` has no instance with index {k}", types::type_key(t)))
    };
    let state = types::attr_value("__ffi_enum__", t).and_then(|s| s.as_object()).ok_or_else(missing)?;
    let indexes = field_named(&state, "indexes")?.as_object().ok_or_else(missing)?;
    cont::map_get(&indexes, key)?.ok_or_else(missing)
}

/// `ffi.ToJSONGraph` as a JSON value.
pub fn to_json_graph(v: &Any, metadata: &Any) -> FfiResult<Json> {
    let mut w = Writer { index: HashMap::new(), nodes: Vec::new(), active: Vec::new() };
    let root = w.index_of(v)?;
    let mut out = vec![("root_index".to_string(), Json::Int(root)), ("nodes".to_string(), Json::Array(w.nodes))];
    if !metadata.is_none() {
        out.push(("metadata".into(), super::json::from_any(metadata)?));
    }
    Ok(Json::Object(out))
}

fn bad(msg: impl std::fmt::Display) -> FfiError {
    FfiError::value(format!("Invalid JSON Object Graph: {msg}"))
}

enum Slot {
    Todo,
    Busy,
    Done(Any),
}

struct Reader<'a> {
    nodes: &'a [Json],
    slots: Vec<Slot>,
    depth: usize,
}

/// How deep node references may nest (deeper input is an error, not a stack overflow).
pub(crate) const MAX_NODE_DEPTH: usize = 1000;

fn want_i64(j: &Json, what: &str) -> FfiResult<i64> {
    j.as_i64().ok_or_else(|| bad(format!("{what} must be an integer, got {}", j.kind())))
}

fn want_str<'j>(j: &'j Json, what: &str) -> FfiResult<&'j str> {
    match j {
        Json::Str(s) => Ok(s),
        _ => Err(bad(format!("{what} must be a string, got {}", j.kind()))),
    }
}

fn want_array<'j>(j: &'j Json, what: &str) -> FfiResult<&'j [Json]> {
    match j {
        Json::Array(a) => Ok(a),
        _ => Err(bad(format!("{what} must be an array, got {}", j.kind()))),
    }
}

impl Reader<'_> {
    fn get(&mut self, index: i64) -> FfiResult<Any> {
        let i = usize::try_from(index)
            .ok()
            .filter(|&i| i < self.nodes.len())
            .ok_or_else(|| bad(format!("invalid node index {index}")))?;
        match &self.slots[i] {
            Slot::Done(v) => return Ok(v.clone()),
            Slot::Busy => return Err(bad(format!("node {index} contains itself (a cycle)"))),
            Slot::Todo => {}
        }
        if self.depth >= MAX_NODE_DEPTH {
            return Err(bad(format!("nodes nest deeper than {MAX_NODE_DEPTH}")));
        }
        // On a small stack (a debug build's frames, a thread with little stack) the limit above
        // may be too many: stop before the stack ends instead.
        crate::dataclass::access::check_stack("FromJSONGraph")?;
        self.slots[i] = Slot::Busy;
        self.depth += 1;
        let r = self.decode(index, &self.nodes[i]);
        self.depth -= 1;
        self.slots[i] = match &r {
            Ok(v) => Slot::Done(v.clone()),
            Err(_) => Slot::Todo,
        };
        r
    }

    fn data(n: &Json, index: i64) -> FfiResult<&Json> {
        n.get("data").ok_or_else(|| bad(format!("node {index} has no `data`")))
    }

    fn decode(&mut self, index: i64, n: &Json) -> FfiResult<Any> {
        if !matches!(n, Json::Object(_)) {
            return Err(bad(format!("node {index} must be an object, got {}", n.kind())));
        }
        let key = want_str(n.get("type").ok_or_else(|| bad(format!("node {index} has no `type`")))?, "`type`")?;
        let t = types::key_to_index(key).ok_or_else(|| bad(format!("node {index} has unknown type `{key}`")))?;
        let d = || Self::data(n, index);
        Ok(match t {
            ti::NONE => Any::none(),
            ti::BOOL => Any::bool(d()?.as_bool().ok_or_else(|| bad("bool node data must be a bool"))?),
            ti::INT => Any::int(want_i64(d()?, "int node data")?),
            ti::FLOAT => Any::float(d()?.as_f64().ok_or_else(|| bad("float node data must be a number"))?),
            ti::DATA_TYPE => Any::dtype(dtype::parse(want_str(d()?, "DataType node data")?)?),
            ti::DEVICE => {
                let a = want_array(d()?, "Device node data")?;
                if a.len() != 2 {
                    return Err(bad(format!(
                        "Device data must be an array of [device_type, device_id], got {} element(s)",
                        a.len()
                    )));
                }
                let dt = want_i64(&a[0], "device_type")?;
                let id = want_i64(&a[1], "device_id")?;
                Any::device(DLDevice { device_type: dt as i32 as _, device_id: id as i32 })
            }
            ti::STR => Any::string(want_str(d()?, "string node data")?),
            ti::BYTES => Any::bytes(&base64_decode(want_str(d()?, "bytes node data")?)?),
            ti::ARRAY | ti::LIST => {
                let items = want_array(d()?, "sequence node data")?
                    .iter()
                    .map(|x| self.get(want_i64(x, "element index")?))
                    .collect::<FfiResult<Vec<_>>>()?;
                if t == ti::LIST {
                    cont::make_list(items)?
                } else {
                    cont::make_array(items)
                }
            }
            ti::MAP | ti::DICT => {
                let a = want_array(d()?, "map node data")?;
                if a.len() % 2 != 0 {
                    return Err(bad(format!(
                        "Map/Dict data must contain an even number of [key, value] entries, got {}",
                        a.len()
                    )));
                }
                let mut items = Vec::with_capacity(a.len() / 2);
                for kv in a.chunks(2) {
                    items
                        .push((self.get(want_i64(&kv[0], "key index")?)?, self.get(want_i64(&kv[1], "value index")?)?));
                }
                if t == ti::DICT {
                    cont::make_dict(items)?
                } else {
                    cont::make_map(items)?
                }
            }
            ti::SHAPE => {
                let dims = want_array(d()?, "Shape node data")?
                    .iter()
                    .map(|x| want_i64(x, "dimension"))
                    .collect::<FfiResult<Vec<_>>>()?;
                cont::make_shape(&dims)?
            }
            t if t >= ti::STATIC_OBJECT_BEGIN => self.object(t, d()?)?,
            _ => return Err(bad(format!("type `{key}` cannot be deserialized"))),
        })
    }

    fn object(&mut self, t: i32, data: &Json) -> FfiResult<Any> {
        if let Some(int_enum) = enum_kind(t) {
            let key = if int_enum {
                Any::int(want_i64(data, "int enum data")?)
            } else {
                Any::string(want_str(data, "enum data")?)
            };
            return enum_by_index(t, &key);
        }
        if let Some(hook) = types::attr_value("__data_from_json__", t).and_then(|h| h.as_object()) {
            return crate::function::call_any(&hook, &[super::json::to_any(data)?]);
        }
        let Json::Object(_) = data else {
            return Err(bad(format!("object data of `{}` must be an object", types::type_key(t))));
        };
        let obj = reflect::create_empty(t)?;
        for f in reflect::all_fields(t) {
            let name = reflect::field_name(&f);
            match data.get(&name) {
                Some(j) => {
                    let v = match f.field_static_type_index {
                        ti::NONE => Any::none(),
                        ti::BOOL => {
                            Any::bool(j.as_bool().ok_or_else(|| bad(format!("field `{name}` must be a bool")))?)
                        }
                        ti::INT => Any::int(want_i64(j, &format!("field `{name}`"))?),
                        ti::FLOAT => {
                            Any::float(j.as_f64().ok_or_else(|| bad(format!("field `{name}` must be a number")))?)
                        }
                        ti::DATA_TYPE => Any::dtype(dtype::parse(want_str(j, &format!("field `{name}`"))?)?),
                        _ => self.get(want_i64(j, &format!("field `{name}`"))?)?,
                    };
                    reflect::set_field(&obj, &f, &v)?;
                }
                None if f.flags & crate::FIELD_HAS_DEFAULT != 0 => reflect::set_field_default(&obj, &f)?,
                None => {
                    return Err(FfiError::type_error(format!(
                        "Required field `{name}` not set in type `{}`",
                        types::type_key(t)
                    )))
                }
            }
        }
        Ok(Any::object(obj))
    }
}

/// `ffi.FromJSONGraph` over a parsed JSON value.
pub(crate) fn from_json_graph(v: &Json) -> FfiResult<Any> {
    if !matches!(v, Json::Object(_)) {
        return Err(FfiError::value("Invalid JSON Object Graph, expected an object"));
    }
    let root = v
        .get("root_index")
        .and_then(Json::as_i64)
        .ok_or_else(|| FfiError::value("Invalid JSON Object Graph, expected `root_index` integer field"))?;
    let Some(Json::Array(nodes)) = v.get("nodes") else {
        return Err(FfiError::value("Invalid JSON Object Graph, expected `nodes` array field"));
    };
    let mut r = Reader { nodes, slots: (0..nodes.len()).map(|_| Slot::Todo).collect(), depth: 0 };
    r.get(root)
}

/// `ffi.FromJSONGraphString`: parses and decodes; every malformed input is an error.
pub fn from_json_graph_str(s: &str) -> FfiResult<Any> {
    from_json_graph(&super::json::parse(s)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        from_json_graph_str(s).unwrap_err().message()
    }

    #[test]
    fn pods_round_trip() {
        for v in [Any::int(-5), Any::bool(true), Any::float(2.5), Any::string("a string longer than 7"), Any::none()] {
            let s = super::super::json::stringify(&to_json_graph(&v, &Any::none()).unwrap(), 0);
            let back = from_json_graph_str(&s).unwrap();
            assert!(cont::any_equal(&v, &back), "{s}");
        }
        let b = from_json_graph_str(r#"{"root_index":0,"nodes":[{"type":"ffi.Bytes","data":"aGVsbG8="}]}"#).unwrap();
        assert_eq!(cont::str_bytes(&b, true), Some(&b"hello"[..]));
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
        assert_eq!(base64_decode(&base64_encode(b"ab")).unwrap(), b"ab");
    }

    #[test]
    fn arrays_share_equal_nodes() {
        let arr = cont::make_array(vec![Any::int(42), Any::int(42), Any::string("x")]);
        let j = to_json_graph(&arr, &Any::none()).unwrap();
        let s = super::super::json::stringify(&j, 0);
        assert_eq!(
            s,
            r#"{"root_index":2,"nodes":[{"type":"int","data":42},{"type":"ffi.String","data":"x"},{"type":"ffi.Array","data":[0,0,1]}]}"#
        );
        let back = from_json_graph_str(&s).unwrap();
        let o = back.as_object().unwrap();
        assert_eq!(cont::seq(&o).len(), 3);
    }

    #[test]
    fn rejects_truncated_cyclic_and_unknown_input() {
        assert!(err("").starts_with("Expecting value"));
        assert!(err(r#"{"root_index":0,"nodes":[{"type":"int","da"#).starts_with("Unterminated string"));
        assert!(err(r#"{"nodes": []}"#).contains("root_index"));
        assert!(err(r#"{"root_index": 0}"#).contains("nodes"));
        assert!(err(r#"{"root_index": 3, "nodes": []}"#).contains("invalid node index 3"));
        assert!(err(r#"{"root_index": 0, "nodes": [{"type":"ffi.Array","data":[0]}]}"#).contains("cycle"));
        assert!(err(
            r#"{"root_index": 0, "nodes": [{"type":"ffi.Array","data":[1]},{"type":"ffi.Array","data":[0]}]}"#
        )
        .contains("cycle"));
        assert!(err(r#"{"root_index": 0, "nodes": [{"type":"no.such.Type","data":{}}]}"#).contains("unknown type"));
        assert!(err(r#"{"root_index": 0, "nodes": [{"type":"int"}]}"#).contains("no `data`"));
        assert!(err(r#"{"root_index": 0, "nodes": [{"type":"int","data":"x"}]}"#).contains("integer"));
        assert!(err(r#"{"root_index": 0, "nodes": [3]}"#).contains("must be an object"));
        assert!(err(r#"{"root_index": 0, "nodes": [{"type":"ffi.Bytes","data":"abc"}]}"#).contains("base64"));
        assert!(err(r#"{"root_index": 0, "nodes": [{"type":"Device","data":[1]}]}"#).contains("Device"));
        assert!(err("[]").contains("expected an object"));
        // a long chain of arrays: deep, not cyclic
        let mut nodes = vec![r#"{"type":"ffi.Array","data":[]}"#.to_string()];
        for i in 0..5000 {
            nodes.push(format!(r#"{{"type":"ffi.Array","data":[{i}]}}"#));
        }
        let s = format!(r#"{{"root_index":5000,"nodes":[{}]}}"#, nodes.join(","));
        assert!(err(&s).contains("deep"));
    }
}
