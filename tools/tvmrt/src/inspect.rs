//! `tvmrt inspect MODEL`: what is inside a model library, without running it.

use crate::common::{self, human_bytes, tensor_json, tensor_str, Model};
use crate::fail::{Fail, Result};
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tvm_rt::{Device, Module};

/// Show the module tree, functions, graph, parameters and devices of a model library.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model library (a `.so` exported by TVM).
    pub model: PathBuf,
    /// Print JSON (the same facts) instead of text.
    #[arg(long)]
    pub json: bool,
    /// List every function (text output shows the first 8 of each module).
    #[arg(long, short)]
    pub all: bool,
    /// For a Relay VM executable, also print its bytecode (`get_bytecode`; in JSON,
    /// `vm.bytecode`); for a Relax VM executable, its listing (`as_text`; in JSON, `relax.text`).
    #[arg(long)]
    pub bytecode: bool,
}

fn tree_json(m: &Module, devices: &mut BTreeSet<String>, kinds: &mut Vec<String>) -> Json {
    if let Some(d) = common::device_of_kind(m.type_key()) {
        devices.insert(d.to_owned());
    }
    kinds.push(m.type_key().to_owned());
    let mut o = json!({ "type_key": m.type_key() });
    if let Some(p) = m.library_path() {
        o["library"] = json!(p);
    }
    o["functions"] = m.function_names().map_or(Json::Null, |f| json!(f));
    if let Some(sym) = m.external_symbol() {
        o["symbol"] = json!(sym);
        o["const_vars"] = json!(m.external_const_vars().unwrap_or_default());
    }
    if let Some(consts) = m.byoc_constants() {
        o["constants"] = Json::Array(
            consts
                .iter()
                .map(|(n, a)| {
                    json!({ "name": n, "shape": a.shape(), "dtype": a.dtype().to_string(), "bytes": a.byte_size() })
                })
                .collect(),
        );
    }
    o["imports"] = Json::Array(m.imports().iter().map(|i| tree_json(i, devices, kinds)).collect());
    o
}

/// `ELF64 x86-64 shared library` from the file's ELF header, if it has one.
fn file_kind(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut h = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut h).ok()?;
    if &h[..4] != b"\x7fELF" {
        return None;
    }
    let class = if h[4] == 2 { "ELF64" } else { "ELF32" };
    let machine = if h[5] == 1 { u16::from_le_bytes([h[18], h[19]]) } else { u16::from_be_bytes([h[18], h[19]]) };
    let arch = match machine {
        3 => "x86".to_owned(),
        40 => "ARM".to_owned(),
        62 => "x86-64".to_owned(),
        183 => "AArch64".to_owned(),
        243 => "RISC-V".to_owned(),
        m => format!("machine {m}"),
    };
    let kind = match u16::from_le_bytes([h[16], h[17]]) {
        3 => "shared library",
        1 => "relocatable object",
        2 => "executable",
        _ => "file",
    };
    Some(format!("{class} {arch} {kind}"))
}

/// A description of the export format and the TVM version it looks like.
fn format_guess(root: &Module, kinds: &[String], functions: &[String]) -> String {
    let mut parts = Vec::new();
    if root.type_key() == "library" && root.imports().is_empty() {
        parts
            .push("a library of compiled functions with no __tvm_dev_mblob (TVM build/export of operators)".to_owned());
    } else {
        let mut uniq: Vec<&str> = Vec::new();
        for k in kinds {
            if !uniq.contains(&k.as_str()) {
                uniq.push(k);
            }
        }
        parts.push(format!("TVM export_library shared library; its __tvm_dev_mblob holds {}", uniq.join(", ")));
    }
    let has = |k: &str| kinds.iter().any(|x| x == k);
    if has("GraphExecutorFactory") {
        parts.push("graph executor model (GraphExecutorFactory: graph JSON + params + kernels)".into());
    }
    if has("AotExecutorFactory") {
        parts.push("AOT executor model (AotExecutorFactory, TVM >= 0.9)".into());
    }
    if has("VMExecutable") {
        parts.push("Relay VM executable (bytecode format of TVM 0.8.0)".into());
    }
    if has("metadata") {
        parts.push("BYOC partitioned model (metadata module with external runtime modules)".into());
    }
    if functions.iter().any(|f| f.starts_with("tvmgen_")) {
        parts.push("kernels named tvmgen_<module>_*: TVM >= 0.8".into());
    } else if !has("VMExecutable") && functions.iter().any(|f| f.starts_with("fused_")) {
        parts.push("kernels named fused_*: TVM <= 0.7".into());
    }
    parts.join("; ")
}

fn all_functions(tree: &Json, out: &mut Vec<String>) {
    if let Some(f) = tree["functions"].as_array() {
        out.extend(f.iter().filter_map(|x| x.as_str().map(str::to_owned)));
    }
    for i in tree["imports"].as_array().into_iter().flatten() {
        all_functions(i, out);
    }
}

/// Builds the report (JSON; the text output prints the same).
fn report(a: &Args) -> Result<Json> {
    let loaded = common::load(&a.model)?;
    let m = match &loaded.model {
        Model::Lib(m) => m,
        Model::Relax(r) => return Ok(crate::relax::report(a, r, loaded.load_time, file_kind(&a.model))),
    };
    let mut devices = BTreeSet::new();
    let mut kinds = Vec::new();
    let tree = tree_json(m, &mut devices, &mut kinds);
    let mut functions = Vec::new();
    all_functions(&tree, &mut functions);
    let size = std::fs::metadata(&a.model).map(|md| md.len()).unwrap_or(0);
    let graph = match m.factory_info() {
        None => Json::Null,
        Some(info) => {
            let info = info?;
            let g = &info.graph;
            for &t in &g.device_types {
                devices.insert(Device::new(t, 0).type_name().to_owned());
            }
            let total: usize = info.param_bytes.iter().map(|(_, b)| b).sum();
            let largest = info.param_bytes.iter().max_by_key(|(_, b)| *b).map(|(name, bytes)| {
                let t = g.params.iter().find(|t| &t.name == name);
                json!({
                    "name": name,
                    "bytes": bytes,
                    "shape": t.map(|t| t.shape.clone()),
                    "dtype": t.map(|t| t.dtype.to_string()),
                })
            });
            json!({
                "module_name": info.module_name,
                "inputs": g.inputs.iter().map(tensor_json).collect::<Vec<_>>(),
                "outputs": g.outputs.iter().map(tensor_json).collect::<Vec<_>>(),
                "params": { "count": info.param_bytes.len(), "total_bytes": total, "largest": largest },
                "nodes": g.num_nodes,
                "operators": g.ops.len(),
                "op_kinds": g.op_kinds(),
                "device_types": g.device_types,
            })
        }
    };
    let aot = match m.aot_info() {
        None => Json::Null,
        Some(info) => {
            let info = info?;
            let total: usize = info.param_bytes.iter().map(|(_, b)| b).sum();
            let largest = info
                .param_bytes
                .iter()
                .max_by_key(|(_, b)| *b)
                .map(|(name, bytes)| json!({ "name": name, "bytes": bytes }));
            json!({
                "module_name": info.module_name,
                "model_name": info.model_name,
                "inputs": info.inputs.iter().map(tensor_json).collect::<Vec<_>>(),
                "outputs": info.outputs.iter().map(tensor_json).collect::<Vec<_>>(),
                "params": { "count": info.param_bytes.len(), "total_bytes": total, "largest": largest },
                "workspace_pools": info.workspace_pools.iter().map(tensor_json).collect::<Vec<_>>(),
                "constants": info.num_constants,
            })
        }
    };
    let vm = match m.vm_info() {
        None => Json::Null,
        Some(info) => {
            let const_bytes: usize = info.constants.iter().map(|t| t.byte_size()).sum();
            let mut v = json!({
                "functions": info.functions.iter().map(|f| json!({
                    "name": f.name,
                    "params": f.params,
                    "param_devices": f.param_device_types.iter().map(|&t| Device::new(t, 0).type_name()).collect::<Vec<_>>(),
                    "instructions": f.num_instructions,
                    "registers": f.register_file_size,
                })).collect::<Vec<_>>(),
                "primitives": info.primitives,
                "constants": { "count": info.constants.len(), "total_bytes": const_bytes },
                "stats": info.stats,
            });
            for f in &info.functions {
                for &t in &f.param_device_types {
                    devices.insert(Device::new(t, 0).type_name().to_owned());
                }
            }
            if a.bytecode {
                v["bytecode"] = json!(info.bytecode);
            }
            v
        }
    };
    Ok(json!({
        "file": a.model.display().to_string(),
        "size_bytes": size,
        "file_kind": file_kind(&a.model),
        "format": format_guess(m, &kinds, &functions),
        "load_ms": common::ms(loaded.load_time),
        "modules": tree,
        "graph": graph,
        "aot": aot,
        "vm": vm,
        "devices": devices.into_iter().collect::<Vec<_>>(),
    }))
}

fn print_tree(t: &Json, depth: usize, all: bool) {
    let indent = "  ".repeat(depth);
    let key = t["type_key"].as_str().unwrap_or("?");
    let lib = t["library"].as_str().map(|p| format!(" ({p})")).unwrap_or_default();
    println!("{indent}- {key}{lib}");
    match t["functions"].as_array() {
        Some(f) => {
            let names: Vec<&str> = f.iter().filter_map(Json::as_str).collect();
            let shown = if all { names.len() } else { names.len().min(8) };
            let more =
                if shown < names.len() { format!(", ... ({} more)", names.len() - shown) } else { String::new() };
            println!(
                "{indent}    {} function{}: {}{more}",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names[..shown].join(", ")
            );
        }
        None => println!("{indent}    functions: (this module kind does not list them)"),
    }
    if let Some(sym) = t["symbol"].as_str() {
        let vars: Vec<&str> = t["const_vars"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
        println!(
            "{indent}    offloaded region {sym}, constants: {}",
            if vars.is_empty() { "(none)".to_owned() } else { vars.join(", ") }
        );
    }
    if let Some(c) = t["constants"].as_array() {
        let total: u64 = c.iter().filter_map(|x| x["bytes"].as_u64()).sum();
        let shown = if all { c.len() } else { c.len().min(8) };
        let more = if shown < c.len() { format!(", ... ({} more)", c.len() - shown) } else { String::new() };
        println!(
            "{indent}    {} constant{} ({}): {}{more}",
            c.len(),
            if c.len() == 1 { "" } else { "s" },
            human_bytes(total),
            tensors(&Json::Array(c[..shown].to_vec()))
        );
    }
    for i in t["imports"].as_array().into_iter().flatten() {
        print_tree(i, depth + 1, all);
    }
}

fn tensors(v: &Json) -> String {
    let list: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let dtype: tvm_rt::DataType =
                t["dtype"].as_str().unwrap_or("").parse().unwrap_or(tvm_rt::DataType::FLOAT32);
            let shape: Vec<i64> = t["shape"].as_array().into_iter().flatten().filter_map(Json::as_i64).collect();
            format!("{} {}", t["name"].as_str().unwrap_or("?"), tensor_str(dtype, &shape))
        })
        .collect();
    list.join(", ")
}

/// Runs the command.
pub fn main(a: &Args) -> Result<()> {
    let r = report(a)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r).map_err(|e| Fail::input(e.to_string()))?);
        return Ok(());
    }
    println!(
        "{}: {}, {}",
        r["file"].as_str().unwrap_or(""),
        r["file_kind"].as_str().unwrap_or("not ELF"),
        human_bytes(r["size_bytes"].as_u64().unwrap_or(0))
    );
    println!("format: {}", r["format"].as_str().unwrap_or(""));
    println!("loaded in {:.1} ms", r["load_ms"].as_f64().unwrap_or(0.0));
    println!("module tree:");
    print_tree(&r["modules"], 1, a.all);
    let g = &r["graph"];
    if !g.is_null() {
        println!("graph (create with `{}`):", g["module_name"].as_str().unwrap_or("default"));
        println!("  inputs:  {}", tensors(&g["inputs"]));
        println!("  outputs: {}", tensors(&g["outputs"]));
        let p = &g["params"];
        let largest = &p["largest"];
        let largest = if largest.is_null() {
            String::new()
        } else {
            format!(
                ", largest {} ({})",
                tensors(&json!([largest])),
                human_bytes(largest["bytes"].as_u64().unwrap_or(0))
            )
        };
        println!("  params:  {} ({}){largest}", p["count"], human_bytes(p["total_bytes"].as_u64().unwrap_or(0)));
        println!("  nodes:   {} ({} operators)", g["nodes"], g["operators"]);
        let mut kinds: Vec<(String, u64)> = g["op_kinds"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect();
        kinds.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} x{n}")).collect();
        println!("  op kinds: {}", kinds.join(", "));
    }
    let aot = &r["aot"];
    if !aot.is_null() {
        println!(
            "AOT model {} (create with `{}`):",
            aot["model_name"].as_str().unwrap_or("?"),
            aot["module_name"].as_str().unwrap_or("default")
        );
        println!("  inputs:  {}", tensors(&aot["inputs"]));
        println!("  outputs: {}", tensors(&aot["outputs"]));
        let p = &aot["params"];
        println!("  params:  {} ({})", p["count"], human_bytes(p["total_bytes"].as_u64().unwrap_or(0)));
        let pools = aot["workspace_pools"].as_array().map_or(0, Vec::len);
        if pools > 0 || aot["constants"].as_u64().unwrap_or(0) > 0 {
            println!(
                "  memory planner pools: {} workspace ({}), {} constants",
                pools,
                tensors(&aot["workspace_pools"]),
                aot["constants"]
            );
        }
    }
    let vm = &r["vm"];
    if !vm.is_null() {
        println!("Relay VM executable:");
        for f in vm["functions"].as_array().into_iter().flatten() {
            let params: Vec<&str> = f["params"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
            println!(
                "  function {}({}): {} instructions, {} registers",
                f["name"].as_str().unwrap_or("?"),
                params.join(", "),
                f["instructions"],
                f["registers"]
            );
        }
        println!("  input shapes: not recorded by the executable (give inputs with tvmrt run --input NAME=FILE.npy)");
        for line in vm["stats"].as_str().unwrap_or("").lines() {
            println!("  {line}");
        }
        if let Some(b) = vm["bytecode"].as_str() {
            println!("bytecode:");
            print!("{b}");
        }
    }
    if !r["relax"].is_null() {
        crate::relax::print(&r["relax"], a.all);
    }
    let devs: Vec<&str> = r["devices"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
    println!("devices: {}", if devs.is_empty() { "(none named)".to_owned() } else { devs.join(", ") });
    Ok(())
}
