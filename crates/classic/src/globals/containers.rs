//! `runtime.String`, `runtime.Array*`, `runtime.Map*`, `runtime.ShapeTuple*`, `runtime.ADT*`,
//! `runtime.ObjectPtrHash`, `runtime.DumpTypeTable`.

use crate::error::{Error, Result};
use crate::object::{index, AdtObj, ArrayObj, MapKey, MapObj, ObjectRef, ShapeTupleObj, StringObj};
use crate::registry::Registrar;
use crate::value::{code, code_name, Args, Value};

/// The argument as an object that must come with code 8 exactly.
fn object_code8(args: &Args<'_>, i: usize, tindex: u32, what: &str) -> Result<ObjectRef> {
    let c = args.code(i)?;
    if c != code::OBJECT {
        return Err(Error::type_error(format!("expected {what} but got {}", code_name(c))));
    }
    args.object_of(i, tindex, what)
}

/// A map key argument: a string becomes a String key; anything else an object key.
fn key_arg(args: &Args<'_>, i: usize) -> Result<ObjectRef> {
    match args.code(i)? {
        code::STR | code::BYTES => Ok(StringObj::new_object(&args.bytes(i)?)),
        _ => args.object(i)?.ok_or_else(|| Error::value("Map key must not be None")),
    }
}

fn index_arg(args: &Args<'_>, i: usize, size: usize, what: &str) -> Result<usize> {
    let idx = args.i64(i)?;
    usize::try_from(idx)
        .ok()
        .filter(|&k| k < size)
        .ok_or_else(|| Error::index(format!("{what}: index {idx} out of bound of size {size}")))
}

pub(super) fn register(r: &mut Registrar<'_>) {
    r.func("runtime.String", |a| {
        a.expect_len("runtime.String", 1)?;
        Ok(Value::Object(StringObj::new_object(&a.bytes(0)?)))
    });
    r.func("runtime.GetFFIString", |a| {
        a.expect_len("runtime.GetFFIString", 1)?;
        let o = a.object_of(0, index::STRING, "runtime.String")?;
        Ok(Value::str(o.downcast::<StringObj>().map(StringObj::to_string_lossy).unwrap_or_default()))
    });

    r.func("runtime.Array", |a| {
        let items = (0..a.len())
            .map(|i| match a.code(i)? {
                code::OBJECT | code::RVALUE_REF | code::MODULE | code::NDARRAY | code::NULL => a.object(i),
                // A string element becomes a String, as TVM v0.9+ converts it (v0.8 refused it).
                code::STR | code::BYTES => Ok(Some(StringObj::new_object(&a.bytes(i)?))),
                c => Err(Error::type_error(format!("Array elements must be objects, got {}", code_name(c)))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Value::Object(ArrayObj::new_object(items)))
    });
    r.func("runtime.ArrayGetItem", |a| {
        a.expect_len("runtime.ArrayGetItem", 2)?;
        let o = object_code8(a, 0, index::ARRAY, "Array")?;
        let arr = o.downcast::<ArrayObj>().ok_or_else(|| Error::type_error("expected Array"))?;
        let i = index_arg(a, 1, arr.items.len(), "out of bound of array")?;
        Ok(Value::from_opt_object(arr.items[i].clone()))
    });
    r.func("runtime.ArraySize", |a| {
        a.expect_len("runtime.ArraySize", 1)?;
        let o = object_code8(a, 0, index::ARRAY, "Array")?;
        Ok(Value::Int(o.downcast::<ArrayObj>().map_or(0, |x| x.items.len() as i64)))
    });

    r.func("runtime.Map", |a| {
        if a.len() % 2 != 0 {
            return Err(Error::value(format!("runtime.Map expects an even number of arguments, got {}", a.len())));
        }
        let value = |i: usize| match a.code(i)? {
            code::STR | code::BYTES => Ok(Some(StringObj::new_object(&a.bytes(i)?))),
            _ => a.object(i),
        };
        let pairs =
            (0..a.len() / 2).map(|k| Ok((key_arg(a, 2 * k)?, value(2 * k + 1)?))).collect::<Result<Vec<_>>>()?;
        Ok(Value::Object(MapObj::new_object(pairs)))
    });
    r.func("runtime.MapSize", |a| {
        a.expect_len("runtime.MapSize", 1)?;
        let o = object_code8(a, 0, index::MAP, "Map")?;
        Ok(Value::Int(o.downcast::<MapObj>().map_or(0, |m| m.entries.len() as i64)))
    });
    r.func("runtime.MapGetItem", |a| {
        a.expect_len("runtime.MapGetItem", 2)?;
        let o = object_code8(a, 0, index::MAP, "Map")?;
        let m = o.downcast::<MapObj>().ok_or_else(|| Error::type_error("expected Map"))?;
        let k = key_arg(a, 1)?;
        let v = m.get(&MapKey::of(&k)).ok_or_else(|| Error::key("cannot find the corresponding key in the Map"))?;
        Ok(Value::from_opt_object(v.clone()))
    });
    r.func("runtime.MapCount", |a| {
        a.expect_len("runtime.MapCount", 2)?;
        let o = object_code8(a, 0, index::MAP, "Map")?;
        let m = o.downcast::<MapObj>().ok_or_else(|| Error::type_error("expected Map"))?;
        Ok(Value::Int(i64::from(m.get(&MapKey::of(&key_arg(a, 1)?)).is_some())))
    });
    r.func("runtime.MapItems", |a| {
        a.expect_len("runtime.MapItems", 1)?;
        let o = object_code8(a, 0, index::MAP, "Map")?;
        let m = o.downcast::<MapObj>().ok_or_else(|| Error::type_error("expected Map"))?;
        let items = m.entries.values().flat_map(|(k, v)| [Some(k.clone()), v.clone()]).collect();
        Ok(Value::Object(ArrayObj::new_object(items)))
    });

    r.func("runtime.ShapeTuple", |a| {
        let dims = (0..a.len()).map(|i| a.i64(i)).collect::<Result<Vec<_>>>()?;
        Ok(Value::Object(ShapeTupleObj::new_object(dims)))
    });
    r.func("runtime.GetShapeTupleSize", |a| {
        a.expect_len("runtime.GetShapeTupleSize", 1)?;
        let o = a.object_of(0, index::SHAPE_TUPLE, "runtime.ShapeTuple")?;
        Ok(Value::Int(o.downcast::<ShapeTupleObj>().map_or(0, |t| t.dims().len() as i64)))
    });
    r.func("runtime.GetShapeTupleElem", |a| {
        a.expect_len("runtime.GetShapeTupleElem", 2)?;
        let o = a.object_of(0, index::SHAPE_TUPLE, "runtime.ShapeTuple")?;
        let dims = o.downcast::<ShapeTupleObj>().map(|t| t.dims()).unwrap_or(&[]);
        let i = index_arg(a, 1, dims.len(), "ShapeTuple")?;
        Ok(Value::Int(dims[i]))
    });

    fn adt(tag: i32, a: &Args<'_>, from: usize) -> Result<Value> {
        let fields = (from..a.len()).map(|i| a.object(i)).collect::<Result<Vec<_>>>()?;
        Ok(Value::Object(ObjectRef::new(AdtObj { tag, fields })))
    }
    r.func("runtime.ADT", |a| {
        a.expect_at_least("runtime.ADT", 1)?;
        adt(a.i32(0)?, a, 1)
    });
    r.func("runtime.Tuple", |a| adt(0, a, 0));
    fn adt_arg(a: &Args<'_>) -> Result<ObjectRef> {
        a.object_of(0, index::ADT, "runtime.ADT")
    }
    r.func("runtime.GetADTTag", |a| {
        let o = adt_arg(a)?;
        Ok(Value::Int(o.downcast::<AdtObj>().map_or(0, |x| i64::from(x.tag))))
    });
    r.func("runtime.GetADTSize", |a| {
        let o = adt_arg(a)?;
        Ok(Value::Int(o.downcast::<AdtObj>().map_or(0, |x| x.fields.len() as i64)))
    });
    r.func("runtime.GetADTFields", |a| {
        let o = adt_arg(a)?;
        let x = o.downcast::<AdtObj>().ok_or_else(|| Error::type_error("expected runtime.ADT"))?;
        let i = index_arg(a, 1, x.fields.len(), "ADT field")?;
        Ok(Value::from_opt_object(x.fields[i].clone()))
    });

    r.func("runtime.ObjectPtrHash", |a| {
        a.expect_len("runtime.ObjectPtrHash", 1)?;
        let o = a.object(0)?.ok_or_else(|| Error::value("runtime.ObjectPtrHash: None has no address"))?;
        Ok(Value::Int(o.as_ptr() as i64))
    });
    r.func("runtime.DumpTypeTable", |a| {
        let min = if a.is_empty() { 0 } else { a.i64(0)? };
        eprint!("{}", crate::object::dump_type_table(min));
        Ok(Value::Null)
    });
}
