//! JSON (`ffi.json.Parse` / `ffi.json.Stringify`) and the JSON object graph
//! (`ffi.ToJSONGraph[String]` / `ffi.FromJSONGraph[String]`).

pub mod graph;
pub mod json;

use super::any::Any;
use super::globals::{arg_any, arg_str, expect_args};
use super::registry::Builder;
use super::{FfiError, FfiResult};

pub use graph::from_json_graph_str;

fn indent_arg(name: &str, a: &Any) -> FfiResult<usize> {
    if a.is_none() {
        return Ok(0);
    }
    let i = a
        .as_i64()
        .filter(|_| a.type_index() == super::ti::INT)
        .ok_or_else(|| FfiError::type_error(format!("`{name}`: indent must be an int or None")))?;
    Ok(i.max(0) as usize)
}

/// Adds this subsystem's globals.
pub fn register(b: &mut Builder) {
    b.add("ffi.json.Parse", |a| {
        expect_args("ffi.json.Parse", a, 1)?;
        json::to_any(&json::parse(arg_str("ffi.json.Parse", a, 0)?)?)
    });
    b.add("ffi.json.Stringify", |a| {
        expect_args("ffi.json.Stringify", a, 2)?;
        let v = arg_any("ffi.json.Stringify", a, 0)?;
        let indent = indent_arg("ffi.json.Stringify", &arg_any("ffi.json.Stringify", a, 1)?)?;
        Ok(Any::string(&json::stringify(&json::from_any(&v)?, indent)))
    });
    b.add("ffi.ToJSONGraph", |a| {
        expect_args("ffi.ToJSONGraph", a, 2)?;
        let g = graph::to_json_graph(&arg_any("ffi.ToJSONGraph", a, 0)?, &arg_any("ffi.ToJSONGraph", a, 1)?)?;
        json::to_any(&g)
    });
    b.add("ffi.ToJSONGraphString", |a| {
        expect_args("ffi.ToJSONGraphString", a, 2)?;
        let n = "ffi.ToJSONGraphString";
        let g = graph::to_json_graph(&arg_any(n, a, 0)?, &arg_any(n, a, 1)?)?;
        Ok(Any::string(&json::stringify(&g, 0)))
    });
    b.add("ffi.FromJSONGraph", |a| {
        expect_args("ffi.FromJSONGraph", a, 1)?;
        graph::from_json_graph(&json::from_any(&arg_any("ffi.FromJSONGraph", a, 0)?)?)
    });
    b.add("ffi.FromJSONGraphString", |a| {
        expect_args("ffi.FromJSONGraphString", a, 1)?;
        from_json_graph_str(arg_str("ffi.FromJSONGraphString", a, 0)?)
    });
}
