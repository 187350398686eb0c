//! `tvmrt inspect` of a TVM v0.22+ export: the Relax VM executable's functions, kernels and
//! constants, in the same report as the other model kinds (under `relax`).

use crate::common::{self, human_bytes, tensor_str};
use crate::inspect::Args;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::time::Duration;
use tvm_rt::relax::{ConstantInfo, FunctionKind, ModuleTree};
use tvm_rt::RelaxModule;

fn tree_json(t: &ModuleTree, path: &str) -> Json {
    let mut o = json!({ "type_key": t.kind });
    if t.kind == "library" {
        o["library"] = json!(path);
    }
    o["functions"] = t.functions.as_ref().map_or(Json::Null, |f| json!(f));
    o["imports"] = Json::Array(t.imports.iter().map(|i| tree_json(i, path)).collect());
    o
}

fn kinds(t: &ModuleTree, out: &mut Vec<String>) {
    if !out.contains(&t.kind) {
        out.push(t.kind.clone());
    }
    t.imports.iter().for_each(|i| kinds(i, out));
}

/// The report of `tvmrt inspect` for a Relax module.
pub fn report(a: &Args, m: &RelaxModule, load_time: Duration, file_kind: Option<String>) -> Json {
    let tree = m.module_tree();
    let mut all = Vec::new();
    kinds(&tree, &mut all);
    let devices: Vec<&str> = all.iter().filter_map(|k| common::device_of_kind(k)).collect();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tensor_bytes = 0usize;
    let mut largest: Option<(usize, &Vec<i64>, tvm_rt::DataType)> = None;
    for c in m.constants() {
        let k = match c {
            ConstantInfo::Tensor { shape, dtype, bytes } => {
                tensor_bytes += bytes;
                if largest.is_none_or(|(b, ..)| *bytes > b) {
                    largest = Some((*bytes, shape, *dtype));
                }
                "tensor"
            }
            ConstantInfo::Shape(_) => "shape",
            ConstantInfo::Str(_) => "string",
            ConstantInfo::Int(_) => "int",
            ConstantInfo::Float(_) => "float",
            ConstantInfo::DataType(_) => "dtype",
        };
        *by_kind.entry(k).or_default() += 1;
    }
    let packed = m.packed_functions();
    let mut relax = json!({
        "functions": m.functions().iter().map(|f| json!({
            "name": f.name,
            "kind": match f.kind { FunctionKind::Vm => "vm", FunctionKind::VmTir => "vm_tir" },
            "params": f.params,
            "arity": f.arity,
            "instructions": f.num_instructions,
            "registers": f.register_file_size,
        })).collect::<Vec<_>>(),
        "kernels": packed.kernels,
        "globals": packed.globals,
        "missing": packed.missing,
        "constants": {
            "count": m.constants().len(),
            "kinds": by_kind,
            "tensor_bytes": tensor_bytes,
            "largest_tensor": largest.map(|(bytes, shape, dtype)| json!({
                "bytes": bytes, "shape": shape, "dtype": dtype.to_string(),
            })),
        },
        "stats": m.stats(),
    });
    if a.bytecode {
        relax["text"] = json!(m.as_text());
    }
    json!({
        "file": a.model.display().to_string(),
        "size_bytes": std::fs::metadata(&a.model).map(|md| md.len()).unwrap_or(0),
        "file_kind": file_kind,
        "format": format!(
            "TVM v0.22+ export_library shared library (tvm-ffi ABI); its __tvm_ffi__library_bin holds {}; \
             Relax VM executable",
            all.join(", ")
        ),
        "load_ms": common::ms(load_time),
        "modules": tree_json(&tree, &a.model.display().to_string()),
        "graph": Json::Null,
        "aot": Json::Null,
        "vm": Json::Null,
        "relax": relax,
        "devices": devices,
    })
}

fn list(names: &[Json], all: bool) -> String {
    let names: Vec<&str> = names.iter().filter_map(Json::as_str).collect();
    let shown = if all { names.len() } else { names.len().min(8) };
    let more = if shown < names.len() { format!(", ... ({} more)", names.len() - shown) } else { String::new() };
    format!("{}{more}", names[..shown].join(", "))
}

/// Prints the `relax` part of the report.
pub fn print(r: &Json, all: bool) {
    println!("Relax VM executable (TVM v0.22+):");
    for f in r["functions"].as_array().into_iter().flatten() {
        let params: Vec<&str> = f["params"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
        let body = if f["kind"] == "vm" {
            format!("{} instructions, {} registers", f["instructions"], f["registers"])
        } else {
            "compiled (VM-TIR)".to_owned()
        };
        println!("  function {}({}): {body}", f["name"].as_str().unwrap_or("?"), params.join(", "));
    }
    println!(
        "  input shapes: checked by the VM when called, not listed (give inputs with tvmrt run --input NAME=FILE.npy)"
    );
    let none = Vec::new();
    for (key, what) in [("kernels", "kernels"), ("globals", "runtime functions"), ("missing", "MISSING functions")] {
        let v = r[key].as_array().unwrap_or(&none);
        if !v.is_empty() || key == "kernels" {
            println!("  {what} ({}): {}", v.len(), list(v, all));
        }
    }
    let c = &r["constants"];
    let kinds: Vec<String> = c["kinds"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, n)| format!("{n} {k}{}", if n.as_u64() == Some(1) { "" } else { "s" }))
        .collect();
    let mut line = format!("  constants: {}", c["count"]);
    if !kinds.is_empty() {
        line += &format!(" ({})", kinds.join(", "));
    }
    let t = &c["largest_tensor"];
    if !t.is_null() {
        let dtype = t["dtype"].as_str().unwrap_or("").parse().unwrap_or(tvm_rt::DataType::FLOAT32);
        let shape: Vec<i64> = t["shape"].as_array().into_iter().flatten().filter_map(Json::as_i64).collect();
        line += &format!(
            "; tensors {}, largest {} ({})",
            human_bytes(c["tensor_bytes"].as_u64().unwrap_or(0)),
            tensor_str(dtype, &shape),
            human_bytes(t["bytes"].as_u64().unwrap_or(0))
        );
    }
    println!("{line}");
    if let Some(text) = r["text"].as_str() {
        println!("bytecode:");
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
    }
}
