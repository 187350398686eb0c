//! What several subcommands share: loading a model, choosing devices, making an executor,
//! inputs (from files or random), and formatting.

use crate::fail::{Fail, Result};
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tvm_rt::{DataType, Device, Element, GraphExecutor, GraphInfo, Module, NDArray, RelaxModule, TensorInfo};

/// Options that say where a model's graph comes from and where it runs.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// The model library (a `.so` exported by TVM's `export_library`).
    pub model: PathBuf,
    /// Device to run on: cpu, opencl[:N], cuda[:N] (also vulkan, metal, rocm, ...).
    #[arg(long, short, default_value = "cpu")]
    pub device: String,
    /// Graph JSON, for a library exported without a graph executor factory (TVM's split form:
    /// graph JSON + kernel library + params).
    #[arg(long, value_name = "JSON")]
    pub graph: Option<PathBuf>,
    /// Params file to load into the executor (split form).
    #[arg(long, value_name = "FILE", requires = "graph")]
    pub params: Option<PathBuf>,
}

/// A loaded model file.
pub enum Model {
    /// A library of the classic runtime (TVM v0.8-v0.19 exports): its root module.
    Lib(Module),
    /// A TVM v0.22+ export (`__tvm_ffi__library_bin`): its Relax VM executable.
    Relax(RelaxModule),
}

/// A loaded model and how long loading took.
pub struct Loaded {
    /// The model.
    pub model: Model,
    /// Time to load it.
    pub load_time: Duration,
}

/// Loads a model file: a TVM v0.22+ export as a Relax module, anything else with the classic
/// loader.
pub fn load(path: &Path) -> Result<Loaded> {
    let meta = std::fs::metadata(path).map_err(|e| Fail::input(format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(Fail::input(format!("{}: not a file", path.display())));
    }
    let named = |e: tvm_rt::Error| {
        let msg = e.to_string();
        let shown = path.display().to_string();
        Fail::input(if msg.contains(&shown) { msg } else { format!("{shown}: {msg}") })
    };
    let t0 = Instant::now();
    let model = if tvm_rt::relax::is_relax_export(path) {
        Model::Relax(RelaxModule::load(path).map_err(named)?)
    } else {
        Model::Lib(Module::load(path).map_err(named)?)
    };
    Ok(Loaded { model, load_time: t0.elapsed() })
}

/// The device a module kind runs its code on, if it says.
pub fn device_of_kind(type_key: &str) -> Option<&'static str> {
    Some(match type_key {
        "library" | "dnnl_json" | "c" => "cpu",
        "opencl" => "opencl",
        "cuda" => "cuda",
        "vulkan" => "vulkan",
        "metal" => "metal",
        "rocm" | "hip" => "rocm",
        _ => return None,
    })
}

/// Fails when the model's kernels are for devices (OpenCL, CUDA, ...) other than `dev`.
pub fn check_model_device(m: &Model, dev: Device, model: &Path) -> Result<()> {
    fn walk(m: &Module, out: &mut Vec<&'static str>) {
        if let Some(d) = device_of_kind(m.type_key()) {
            if d != "cpu" && !out.contains(&d) {
                out.push(d);
            }
        }
        for i in m.imports() {
            walk(&i, out);
        }
    }
    fn walk_relax(m: &tvm_rt::relax::ModuleTree, out: &mut Vec<&'static str>) {
        if let Some(d) = device_of_kind(&m.kind) {
            if d != "cpu" && !out.contains(&d) {
                out.push(d);
            }
        }
        m.imports.iter().for_each(|i| walk_relax(i, out));
    }
    let mut gpu = Vec::new();
    match m {
        Model::Lib(m) => walk(m, &mut gpu),
        Model::Relax(r) => walk_relax(&r.module_tree(), &mut gpu),
    }
    if !gpu.is_empty() && !gpu.contains(&dev.type_name()) {
        return Err(Fail::input(format!(
            "{} has {} kernels; run it with --device {}",
            model.display(),
            gpu.join(" and "),
            gpu[0]
        )));
    }
    Ok(())
}

/// Parses `--device` and checks that the device is present.
pub fn device(spec: &str) -> Result<Device> {
    let d: Device = spec.parse()?;
    d.check_present()?;
    Ok(d)
}

/// The graph of the model: from `--graph` (split form) or from the model's graph executor
/// factory; an error naming the module kind otherwise.
pub fn graph_info(m: &Module, a: &ModelArgs) -> Result<GraphInfo> {
    if let Some(g) = &a.graph {
        let json = read_text(g)?;
        let names = match &a.params {
            Some(p) => param_names(p)?,
            None => Vec::new(),
        };
        return Ok(GraphInfo::from_json(&json, &names)?);
    }
    match m.factory_info() {
        Some(info) => Ok(info?.graph),
        None => Err(not_a_model(m, a)),
    }
}

/// The error for a module that is none of the model kinds tvmrt runs, saying what it is.
pub fn not_a_model(m: &Module, a: &ModelArgs) -> Fail {
    let what = match m.type_key() {
        "library" => {
            let funcs = m.function_names().unwrap_or_default();
            let shown: Vec<&str> = funcs.iter().take(5).map(String::as_str).collect();
            format!(
                "is a library of compiled functions without a graph executor factory; run one of its functions \
                 with --function NAME ({}{}), or give its graph with --graph JSON",
                shown.join(", "),
                if funcs.len() > 5 { ", ..." } else { "" }
            )
        }
        k => format!(
            "is a {k} module, which tvmrt cannot run (it runs graph executor and AOT executor factories, Relay VM \
             executables and single functions)"
        ),
    };
    Fail::input(format!("{} {what}", a.model.display()))
}

fn read_text(p: &Path) -> Result<String> {
    std::fs::read_to_string(p).map_err(|e| Fail::input(format!("{}: {e}", p.display())))
}

fn param_names(p: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(p).map_err(|e| Fail::input(format!("{}: {e}", p.display())))?;
    Ok(tvm_rt::load_params(&bytes)?.into_iter().map(|(n, _)| n).collect())
}

/// Makes the executor: from `--graph`/`--params` or from the factory.
pub fn executor(m: &Module, a: &ModelArgs, devices: &[Device], debug: bool) -> Result<GraphExecutor> {
    if let Some(g) = &a.graph {
        let json = read_text(g)?;
        let mut e = GraphExecutor::new(&json, m, devices)?;
        if let Some(p) = &a.params {
            e.load_params_file(p)?;
        }
        return Ok(e);
    }
    if m.factory_info().is_none() {
        return Err(not_a_model(m, a));
    }
    Ok(if debug { GraphExecutor::debug_from_factory(m, devices)? } else { GraphExecutor::from_factory(m, devices)? })
}

/// Parses `NAME=FILE.npy`.
pub fn name_file(s: &str) -> std::result::Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, f)) if !n.is_empty() && !f.is_empty() => Ok((n.to_owned(), PathBuf::from(f))),
        _ => Err(format!("expected NAME=FILE.npy, got {s}")),
    }
}

/// A random array for `t` (floats uniform in [0, 1), integers in [0, 10), booleans either).
pub fn random_array(t: &TensorInfo, rng: &mut rand::rngs::SmallRng) -> Result<NDArray> {
    let n = t.shape.iter().map(|&d| usize::try_from(d).unwrap_or(0)).product::<usize>();
    let dev = Device::cpu();
    let a = match t.dtype {
        DataType::FLOAT32 => {
            NDArray::from_slice(&(0..n).map(|_| rng.random::<f32>()).collect::<Vec<_>>(), &t.shape, dev)
        }
        DataType::FLOAT64 => {
            NDArray::from_slice(&(0..n).map(|_| rng.random::<f64>()).collect::<Vec<_>>(), &t.shape, dev)
        }
        DataType::FLOAT16 => NDArray::from_slice(
            &(0..n).map(|_| tvm_rt::f16::from_f32(rng.random::<f32>())).collect::<Vec<_>>(),
            &t.shape,
            dev,
        ),
        DataType::BFLOAT16 => NDArray::from_slice(
            &(0..n).map(|_| tvm_rt::bf16::from_f32(rng.random::<f32>())).collect::<Vec<_>>(),
            &t.shape,
            dev,
        ),
        DataType::BOOL => NDArray::from_slice(&(0..n).map(|_| rng.random::<bool>()).collect::<Vec<_>>(), &t.shape, dev),
        dt if dt.lanes() == 1 && (dt.code() == 0 || dt.code() == 1) => {
            // Small non-negative integers fit every integer type; written in its width.
            let vals: Vec<u8> = (0..n).map(|_| rng.random_range(0..10u8)).collect();
            let width = dt.element_bytes();
            let mut bytes = vec![0u8; n * width];
            for (i, v) in vals.iter().enumerate() {
                let le = u64::from(*v).to_le_bytes();
                bytes[i * width..(i + 1) * width].copy_from_slice(&le[..width]);
            }
            NDArray::from_bytes(&bytes, &t.shape, dt, dev)
        }
        dt => return Err(Fail::input(format!("input {}: cannot make random {dt} values", t.name))),
    }?;
    Ok(a)
}

/// A seeded generator.
pub fn rng(seed: u64) -> rand::rngs::SmallRng {
    rand::rngs::SmallRng::seed_from_u64(seed)
}

/// Parses `DTYPE[D0,D1,...]`.
pub fn parse_tensor_spec(s: &str) -> Result<(DataType, Vec<i64>)> {
    let bad = || Fail::input(format!("{s}: expected DTYPE[D0,D1,...], such as float32[1,1000]"));
    let (dt, rest) = s.split_once('[').ok_or_else(bad)?;
    let dims = rest.strip_suffix(']').ok_or_else(bad)?;
    let dtype: DataType = dt.parse().map_err(|_| bad())?;
    let shape = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',').map(|d| d.trim().parse::<i64>().map_err(|_| bad())).collect::<Result<Vec<_>>>()?
    };
    if shape.iter().any(|&d| d < 0) {
        return Err(bad());
    }
    Ok((dtype, shape))
}

/// Fails unless `a` has `t`'s dtype and shape.
pub fn check_tensor(a: &NDArray, t: &TensorInfo, what: &str) -> Result<()> {
    if a.dtype() != t.dtype {
        return Err(Fail::input(format!("{what}: the file holds {} but the model expects {}", a.dtype(), t.dtype)));
    }
    if a.shape() != t.shape.as_slice() {
        return Err(Fail::input(format!(
            "{what}: shape mismatch: the file holds {:?} but the model expects {:?}",
            a.shape(),
            t.shape
        )));
    }
    Ok(())
}

/// The elements of an array as f64 (for statistics and comparisons).
pub fn as_f64(a: &NDArray) -> Result<Vec<f64>> {
    let b = a.to_bytes()?;
    fn conv<T: Element>(b: &[u8], f: impl Fn(T) -> f64) -> Vec<f64> {
        T::from_bytes(b).into_iter().map(f).collect()
    }
    Ok(match a.dtype() {
        DataType::FLOAT32 => conv::<f32>(&b, f64::from),
        DataType::FLOAT64 => conv::<f64>(&b, |x| x),
        DataType::FLOAT16 => conv::<tvm_rt::f16>(&b, |x| x.to_f64()),
        DataType::BFLOAT16 => conv::<tvm_rt::bf16>(&b, |x| x.to_f64()),
        DataType::INT8 => conv::<i8>(&b, f64::from),
        DataType::INT16 => conv::<i16>(&b, f64::from),
        DataType::INT32 => conv::<i32>(&b, f64::from),
        DataType::INT64 => conv::<i64>(&b, |x| x as f64),
        DataType::UINT8 => conv::<u8>(&b, f64::from),
        DataType::UINT16 => conv::<u16>(&b, f64::from),
        DataType::UINT32 => conv::<u32>(&b, f64::from),
        DataType::UINT64 => conv::<u64>(&b, |x| x as f64),
        DataType::BOOL => conv::<bool>(&b, |x| f64::from(u8::from(x))),
        dt => return Err(Fail::input(format!("cannot read {dt} values"))),
    })
}

/// min, max, mean of an array's elements (NaN when it is empty).
pub fn stats(a: &NDArray) -> Result<(f64, f64, f64)> {
    let v = as_f64(a)?;
    if v.is_empty() {
        return Ok((f64::NAN, f64::NAN, f64::NAN));
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    Ok((min, max, mean))
}

/// `float32[1, 3, 224, 224]`.
pub fn tensor_str(dtype: DataType, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

/// `44.7 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u < UNITS.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// Milliseconds of a duration.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A tensor description as JSON.
pub fn tensor_json(t: &TensorInfo) -> serde_json::Value {
    serde_json::json!({ "name": t.name, "shape": t.shape, "dtype": t.dtype.to_string() })
}
