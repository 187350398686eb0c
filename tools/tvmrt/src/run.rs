//! `tvmrt run MODEL`: run a model (or one function of an operator library) once, write its
//! outputs, summarise them and optionally compare them with expected ones.

use crate::common::{self, tensor_str, Model, ModelArgs};
use crate::fail::{Fail, Result};
use crate::model::{self, Runner};
use crate::npy;
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tvm_rt::{Device, NDArray, Value};

/// Run a model once on given or random inputs; write, summarise and check its outputs.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    /// An input from an .npy file, or `NAME=random:DTYPE[D0,...]` for seeded random values of a
    /// given shape (repeatable); inputs of known shape not given get seeded random values (a
    /// Relay VM records no input shapes: give each of its inputs, by name or position).
    #[arg(long, short, value_name = "NAME=FILE.npy", value_parser = common::name_file)]
    pub input: Vec<(String, PathBuf)>,
    /// Write each output as DIR/output.<i>.npy (and the inputs used as DIR/input.<name>.npy).
    #[arg(long, short, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Compare an output with an .npy file: `[INDEX=]FILE.npy`, repeatable (without an index,
    /// the k-th --expect is output k); exit code 3 when they differ.
    #[arg(long, value_name = "[INDEX=]FILE.npy")]
    pub expect: Vec<String>,
    /// Relative tolerance of --expect (|out - exp| <= atol + rtol * |exp|).
    #[arg(long, default_value_t = 1e-5)]
    pub rtol: f64,
    /// Absolute tolerance of --expect.
    #[arg(long, default_value_t = 1e-8)]
    pub atol: f64,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run this function of the library instead of a model, ARGS being its arguments; for a
    /// Relay or Relax VM executable, the VM function to run (default main), with --input for its
    /// inputs.
    #[arg(long, short, value_name = "NAME")]
    pub function: Option<String>,
    /// Function arguments (with --function, not for a VM): FILE.npy (an array read from the
    /// file), zeros:DTYPE[D0,D1,...] (a new zeroed array: an output), int:N, float:X, str:TEXT.
    #[arg(value_name = "ARGS", requires = "function")]
    pub args: Vec<String>,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One output: its label, its host copy.
struct Output {
    label: String,
    array: NDArray,
}

/// A function argument, and whether it is an output (a `zeros:` array).
fn parse_arg(s: &str, dev: Device) -> Result<(Value, bool)> {
    if let Some(spec) = s.strip_prefix("zeros:") {
        let (dtype, shape) = common::parse_tensor_spec(spec)?;
        let host = NDArray::from_bytes(
            &vec![0u8; shape.iter().map(|&d| d as usize).product::<usize>() * dtype.element_bytes()],
            &shape,
            dtype,
            Device::cpu(),
        )?;
        return Ok((Value::NDArray(host.copy_to(dev)?), true));
    }
    if let Some(v) = s.strip_prefix("int:") {
        let n = v.parse::<i64>().map_err(|_| Fail::input(format!("argument {s}: not an integer")))?;
        return Ok((Value::Int(n), false));
    }
    if let Some(v) = s.strip_prefix("float:") {
        let x = v.parse::<f64>().map_err(|_| Fail::input(format!("argument {s}: not a number")))?;
        return Ok((Value::Float(x), false));
    }
    if let Some(v) = s.strip_prefix("str:") {
        return Ok((Value::Str(v.to_owned()), false));
    }
    let path = Path::new(s);
    if path.extension().is_some_and(|e| e == "npy") {
        return Ok((Value::NDArray(npy::read(path)?.copy_to(dev)?), false));
    }
    Err(Fail::input(format!("argument {s}: expected FILE.npy, zeros:DTYPE[SHAPE], int:N, float:X or str:TEXT")))
}

fn host(a: &NDArray) -> Result<NDArray> {
    Ok(if a.device() == Device::cpu() { a.clone() } else { a.copy_to(Device::cpu())? })
}

/// What a run made: outputs, the inputs it used, timings (ms).
type Ran = (Vec<Output>, Vec<(String, NDArray)>, Json);

/// Runs a model (graph, AOT or VM).
fn run_model(a: &Args, dev: Device, loaded: common::Loaded) -> Result<Ran> {
    if !a.args.is_empty() {
        return Err(Fail::input(format!(
            "{}: positional arguments are for a library function; give a model's inputs with --input NAME=FILE.npy",
            a.model.model.display()
        )));
    }
    common::check_model_device(&loaded.model, dev, &a.model.model)?;
    let vm_func = a.function.as_deref().unwrap_or("main");
    let (mut runner, create) = Runner::create(&loaded.model, &a.model, dev, vm_func, false)?;
    let inputs = model::resolve_inputs(&a.model.model, &runner.inputs(), &a.input, a.seed)?;
    runner.set_inputs(&inputs)?;
    let t1 = Instant::now();
    runner.run()?;
    dev.sync()?;
    let run = t1.elapsed();
    let mut outs = Vec::new();
    for (label, arr) in runner.outputs()? {
        outs.push(Output { label, array: host(&arr)? });
    }
    let timings = json!({
        "load_ms": common::ms(loaded.load_time),
        "create_ms": common::ms(create),
        "run_ms": common::ms(run),
    });
    Ok((outs, inputs, timings))
}

/// Runs one function of a library.
fn run_function(a: &Args, name: &str, dev: Device, module: &tvm_rt::Module, load_time: Duration) -> Result<Ran> {
    let f = module.get_function(name, true)?.ok_or_else(|| {
        let names = module.function_names().unwrap_or_default();
        Fail::input(format!(
            "{} has no function {name}{}",
            a.model.model.display(),
            if names.is_empty() { String::new() } else { format!("; its functions: {}", names.join(", ")) }
        ))
    })?;
    let mut args = Vec::new();
    let mut out_idx = Vec::new();
    for (i, s) in a.args.iter().enumerate() {
        let (v, is_out) = parse_arg(s, dev)?;
        if is_out {
            out_idx.push(i);
        }
        args.push(v);
    }
    let t1 = Instant::now();
    let ret = f.call(args.clone())?;
    dev.sync()?;
    let run = t1.elapsed();
    let mut outs = Vec::new();
    for &i in &out_idx {
        if let Value::NDArray(arr) = &args[i] {
            outs.push(Output { label: format!("argument {i}"), array: host(arr)? });
        }
    }
    match ret {
        Value::NDArray(arr) => outs.push(Output { label: "return value".into(), array: host(&arr)? }),
        Value::None => {}
        other => println!("return value: {other:?}"),
    }
    let timings = json!({ "load_ms": common::ms(load_time), "run_ms": common::ms(run) });
    Ok((outs, Vec::new(), timings))
}

/// Compares `got` with `exp` as numpy's `allclose` does; `Ok(max abs diff)` or the mismatch.
fn compare(got: &NDArray, exp: &NDArray, rtol: f64, atol: f64) -> Result<f64, String> {
    if got.shape() != exp.shape() {
        return Err(format!(
            "shape {} but expected {}",
            tensor_str(got.dtype(), got.shape()),
            tensor_str(exp.dtype(), exp.shape())
        ));
    }
    let g = common::as_f64(got).map_err(|e| e.msg)?;
    let e = common::as_f64(exp).map_err(|e| e.msg)?;
    let mut bad = 0usize;
    let mut first = None;
    let mut max_diff = 0.0f64;
    for (i, (x, y)) in g.iter().zip(&e).enumerate() {
        let d = (x - y).abs();
        if d.is_nan() || d > max_diff {
            max_diff = if d.is_nan() { f64::NAN } else { d };
        }
        let close = d <= atol + rtol * y.abs() || (x == y);
        if !close {
            bad += 1;
            first.get_or_insert(i);
        }
    }
    match first {
        None => Ok(max_diff),
        Some(i) => {
            // The multi-index of flat index i.
            let mut rem = i;
            let mut idx = vec![0i64; got.shape().len()];
            for (k, &d) in got.shape().iter().enumerate().rev() {
                let d = d.max(1) as usize;
                idx[k] = (rem % d) as i64;
                rem /= d;
            }
            Err(format!(
                "{bad} of {} elements differ beyond rtol={rtol} atol={atol} (max abs diff {max_diff:.6e}); first at {idx:?}: got {}, expected {}",
                g.len(),
                g[i],
                e[i]
            ))
        }
    }
}

/// Runs the command.
pub fn main(a: &Args) -> Result<()> {
    let dev = common::device(&a.model.device)?;
    let loaded = common::load(&a.model.model)?;
    let (outs, inputs, timings) = match (&a.function, &loaded.model) {
        // For a Relay or Relax VM executable, --function names the VM function to run.
        (Some(name), Model::Lib(m)) if m.vm_info().is_none() => run_function(a, name, dev, m, loaded.load_time)?,
        _ => run_model(a, dev, loaded)?,
    };
    let mut files = vec![None; outs.len()];
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| Fail::input(format!("{}: {e}", dir.display())))?;
        for (i, o) in outs.iter().enumerate() {
            let p = dir.join(format!("output.{i}.npy"));
            npy::write(&p, &o.array)?;
            files[i] = Some(p);
        }
        for (name, arr) in &inputs {
            let safe: String =
                name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
            npy::write(&dir.join(format!("input.{safe}.npy")), arr)?;
        }
    }
    let mut summary = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        let (min, max, mean) = common::stats(&o.array)?;
        summary.push(json!({
            "index": i,
            "label": o.label,
            "dtype": o.array.dtype().to_string(),
            "shape": o.array.shape(),
            "min": min, "max": max, "mean": mean,
            "file": files[i].as_ref().map(|p| p.display().to_string()),
        }));
    }
    // --expect
    let mut checks = Vec::new();
    let mut failures = Vec::new();
    for (k, spec) in a.expect.iter().enumerate() {
        let (idx, file) = match spec.split_once('=') {
            Some((i, f)) if i.parse::<usize>().is_ok() => (i.parse::<usize>().unwrap_or(0), PathBuf::from(f)),
            _ => (k, PathBuf::from(spec)),
        };
        let o = outs.get(idx).ok_or_else(|| {
            Fail::input(format!("--expect {spec}: there is no output {idx} ({} outputs)", outs.len()))
        })?;
        let exp = npy::read(&file)?;
        let r = compare(&o.array, &exp, a.rtol, a.atol);
        checks.push(json!({
            "output": idx,
            "file": file.display().to_string(),
            "ok": r.is_ok(),
            "max_abs_diff": r.as_ref().ok(),
            "message": r.as_ref().err(),
        }));
        if let Err(m) = r {
            failures.push(format!("output {idx} differs from {}: {m}", file.display()));
        }
    }
    if a.json {
        let j = json!({ "outputs": summary, "timings": timings, "expect": checks });
        println!("{}", serde_json::to_string_pretty(&j).map_err(|e| Fail::input(e.to_string()))?);
    } else {
        let t = &timings;
        let mut line = format!(
            "ran in {:.2} ms (load {:.1} ms",
            t["run_ms"].as_f64().unwrap_or(0.0),
            t["load_ms"].as_f64().unwrap_or(0.0)
        );
        if let Some(c) = t["create_ms"].as_f64() {
            line += &format!(", executor {c:.1} ms");
        }
        println!("{line}) on {dev}");
        for (s, o) in summary.iter().zip(&outs) {
            let file = s["file"].as_str().map(|f| format!(" -> {f}")).unwrap_or_default();
            println!(
                "{}: {} min {:.6} max {:.6} mean {:.6}{file}",
                o.label,
                tensor_str(o.array.dtype(), o.array.shape()),
                s["min"].as_f64().unwrap_or(f64::NAN),
                s["max"].as_f64().unwrap_or(f64::NAN),
                s["mean"].as_f64().unwrap_or(f64::NAN)
            );
        }
        for c in &checks {
            if c["ok"].as_bool() == Some(true) {
                println!(
                    "output {} matches {} (rtol {}, atol {}; max abs diff {:.3e})",
                    c["output"],
                    c["file"].as_str().unwrap_or(""),
                    a.rtol,
                    a.atol,
                    c["max_abs_diff"].as_f64().unwrap_or(0.0)
                );
            }
        }
    }
    if !failures.is_empty() {
        return Err(Fail::mismatch(failures.join("; ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_rt::DataType;

    #[test]
    fn tensor_specs() {
        assert_eq!(common::parse_tensor_spec("float32[1, 1000]").unwrap(), (DataType::FLOAT32, vec![1, 1000]));
        assert_eq!(common::parse_tensor_spec("int8[]").unwrap(), (DataType::INT8, vec![]));
        assert!(common::parse_tensor_spec("float32[1,-2]").is_err());
        assert!(common::parse_tensor_spec("float32").is_err());
        assert!(common::parse_tensor_spec("floaty[2]").is_err());
    }

    #[test]
    fn allclose_semantics() {
        let a = NDArray::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::cpu()).unwrap();
        let b = NDArray::from_slice(&[1.0f32, 2.0, 3.001], &[3], Device::cpu()).unwrap();
        assert!(compare(&a, &a, 0.0, 0.0).is_ok());
        let e = compare(&a, &b, 1e-5, 1e-8).unwrap_err();
        assert!(e.starts_with("1 of 3 elements differ"), "{e}");
        assert!(e.contains("first at [2]"), "{e}");
        assert!(compare(&a, &b, 1e-3, 0.0).is_ok());
        let c = NDArray::from_slice(&[1.0f32, 2.0], &[2, 1], Device::cpu()).unwrap();
        assert!(compare(&a, &c, 1.0, 1.0).unwrap_err().contains("shape"));
    }
}
