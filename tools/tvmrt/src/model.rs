//! One interface over the four ways a model runs (`run` and `bench` use it): a graph executor
//! (a `GraphExecutorFactory`, or the split form with `--graph`), an AOT executor (an
//! `AotExecutorFactory`), the Relay VM (a `VMExecutable`, entry function `--function`) and the
//! Relax VM (a TVM v0.22+ export, entry function `--function`).

use crate::common::{self, tensor_str, Model, ModelArgs};
use crate::fail::{Fail, Result};
use crate::npy;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tvm_rt::relax::Output;
use tvm_rt::{
    AllocatorKind, AotExecutor, DataType, Device, GraphExecutor, GraphInfo, NDArray, RelaxVm, TensorInfo,
    VirtualMachine, VmOpProfile, VmValue,
};

/// The executor of a model.
pub enum Runner {
    /// A graph executor and its graph.
    Graph(Box<GraphExecutor>, GraphInfo),
    /// An AOT executor.
    Aot(Box<AotExecutor>),
    /// A VM, its entry function, and the result of the last run.
    Vm { vm: Box<VirtualMachine>, func: String, result: Option<VmValue> },
    /// A Relax VM, its entry function, the inputs set (on the device), the last result.
    Relax { vm: Box<RelaxVm>, func: String, dev: Device, inputs: Vec<NDArray>, result: Option<Output> },
}

/// What kind of model a module is (the API's [`tvm_rt::ModelKind`]).
pub use tvm_rt::ModelKind as Kind;

/// The kind of model `m` is (with `--graph`: the split form), or an error saying what it is.
pub fn kind(m: &Model, a: &ModelArgs) -> Result<Kind> {
    let m = match m {
        Model::Relax(_) if a.graph.is_some() => {
            return Err(Fail::input(format!(
                "{}: --graph is for graph executor models; this is a Relax VM executable (TVM v0.22+)",
                a.model.display()
            )))
        }
        Model::Relax(r) => return Ok(r.model_kind()),
        Model::Lib(m) => m,
    };
    if a.graph.is_some() {
        return Ok(Kind::Graph);
    }
    m.model_kind().ok_or_else(|| common::not_a_model(m, a))
}

fn no_function(model: &std::path::Path, what: &str, func: &str, names: Vec<&str>) -> Fail {
    Fail::input(format!(
        "{}: the {what} has no function {func} (its functions: {}); choose one with --function",
        model.display(),
        names.join(", ")
    ))
}

/// The inputs a model takes: name, and shape/dtype where the model records them.
pub struct Inputs {
    /// Inputs the caller sets, in order.
    pub inputs: Vec<(String, Option<TensorInfo>)>,
    /// Parameters an --input file may replace (graph models).
    pub params: Vec<TensorInfo>,
}

impl Runner {
    /// Creates the executor of `m` on `dev` (`debug`: the profiling variant where the kind
    /// has one). `vm_func` is the VM's entry function.
    pub fn create(model: &Model, a: &ModelArgs, dev: Device, vm_func: &str, debug: bool) -> Result<(Runner, Duration)> {
        let t0 = Instant::now();
        let m = match model {
            Model::Lib(m) => m,
            Model::Relax(r) => {
                kind(model, a)?;
                if debug {
                    return Err(Fail::input(
                        "--profile: the Relax VM has no per-operator profiler in this runtime yet; bench it without \
                         --profile",
                    ));
                }
                if r.function(vm_func).is_none() {
                    let names = r.functions().iter().map(|f| f.name.as_str()).collect();
                    return Err(no_function(&a.model, "Relax VM executable", vm_func, names));
                }
                let vm = RelaxVm::new(r, &[dev])?;
                let r =
                    Runner::Relax { vm: Box::new(vm), func: vm_func.to_owned(), dev, inputs: Vec::new(), result: None };
                return Ok((r, t0.elapsed()));
            }
        };
        let r = match kind(model, a)? {
            Kind::Graph => {
                let info = common::graph_info(m, a)?;
                let devices = info.devices_for(dev);
                Runner::Graph(Box::new(common::executor(m, a, &devices, debug)?), info)
            }
            Kind::Aot => {
                if debug {
                    return Err(Fail::input(
                        "--profile: the AOT executor has no per-operator profiler (TVM's has none either); \
                         bench it without --profile",
                    ));
                }
                if dev != Device::cpu() {
                    return Err(Fail::input(format!(
                        "{}: the AOT executor runs on the CPU (device 0) only, not on {dev}",
                        a.model.display()
                    )));
                }
                Runner::Aot(Box::new(AotExecutor::from_factory(m, &[dev])?))
            }
            Kind::Vm => {
                let info = m.vm_info().ok_or_else(|| Fail::input("not a VM executable"))?;
                if info.function(vm_func).is_none() {
                    let names = info.functions.iter().map(|f| f.name.as_str()).collect();
                    return Err(no_function(&a.model, "VM executable", vm_func, names));
                }
                let vm = if debug {
                    VirtualMachine::with_profiling(m, &[dev], AllocatorKind::Pooled)?
                } else {
                    VirtualMachine::new(m, &[dev], AllocatorKind::Pooled)?
                };
                Runner::Vm { vm: Box::new(vm), func: vm_func.to_owned(), result: None }
            }
            Kind::Relax => return Err(Fail::input("a Relax VM executable is not a library module")),
        };
        Ok((r, t0.elapsed()))
    }

    /// The inputs the model takes.
    pub fn inputs(&self) -> Inputs {
        match self {
            Runner::Graph(_, info) => Inputs {
                inputs: info.inputs.iter().map(|t| (t.name.clone(), Some(t.clone()))).collect(),
                params: info.params.clone(),
            },
            Runner::Aot(e) => Inputs {
                inputs: e.info().inputs.iter().map(|t| (t.name.clone(), Some(t.clone()))).collect(),
                params: Vec::new(),
            },
            Runner::Vm { vm, func, .. } => Inputs {
                inputs: vm.params(func).unwrap_or_default().iter().map(|p| (p.clone(), None)).collect(),
                params: Vec::new(),
            },
            Runner::Relax { vm, func, .. } => {
                let f = vm.module().function(func);
                let mut names: Vec<String> = f.map(|f| f.params.clone()).unwrap_or_default();
                // Parameters the executable does not name are known by position.
                for k in names.len()..f.map_or(0, |f| f.arity) {
                    names.push(k.to_string());
                }
                Inputs { inputs: names.into_iter().map(|p| (p, None)).collect(), params: Vec::new() }
            }
        }
    }

    /// Sets the inputs (from [`resolve_inputs`], in the model's order).
    pub fn set_inputs(&mut self, inputs: &[(String, NDArray)]) -> Result<()> {
        match self {
            Runner::Graph(e, _) => inputs.iter().try_for_each(|(n, a)| e.set_input(n.as_str(), a)),
            Runner::Aot(e) => inputs.iter().try_for_each(|(n, a)| e.set_input(n.as_str(), a)),
            Runner::Vm { vm, func, .. } => {
                let arrays: Vec<NDArray> = inputs.iter().map(|(_, a)| a.clone()).collect();
                vm.set_input(func, &arrays)
            }
            Runner::Relax { dev, inputs: set, .. } => {
                // Copied to the device once; the VM reads them in place at each run.
                *set = inputs
                    .iter()
                    .map(|(_, a)| if a.device() == *dev { Ok(a.clone()) } else { a.copy_to(*dev) })
                    .collect::<tvm_rt::Result<_>>()?;
                Ok(())
            }
        }?;
        Ok(())
    }

    /// Runs the model once on the inputs set.
    pub fn run(&mut self) -> Result<()> {
        match self {
            Runner::Graph(e, _) => e.run()?,
            Runner::Aot(e) => e.run()?,
            Runner::Vm { vm, func, result } => *result = Some(vm.invoke(func)?),
            Runner::Relax { vm, func, inputs, result, .. } => *result = Some(vm.call(func, inputs)?),
        }
        Ok(())
    }

    /// The outputs of the last run: a label and the array (on its device). A VM result is
    /// flattened depth first; each label says where the tensor sits in the result.
    pub fn outputs(&self) -> Result<Vec<(String, NDArray)>> {
        Ok(match self {
            Runner::Graph(e, info) => info
                .outputs
                .iter()
                .enumerate()
                .map(|(i, t)| Ok((format!("output {i} ({})", t.name), e.get_output(i)?)))
                .collect::<Result<Vec<_>>>()?,
            Runner::Aot(e) => e
                .info()
                .outputs
                .iter()
                .enumerate()
                .map(|(i, t)| Ok((format!("output {i} ({})", t.name), e.get_output(i)?)))
                .collect::<Result<Vec<_>>>()?,
            Runner::Vm { func, result, .. } => {
                let r = result.as_ref().ok_or_else(|| Fail::input("the VM has not run yet"))?;
                let mut out = Vec::new();
                flatten_labelled(r, func, &mut out);
                out.into_iter().enumerate().map(|(i, (path, a))| (format!("output {i} ({path})"), a)).collect()
            }
            Runner::Relax { func, result, .. } => {
                let r = result.as_ref().ok_or_else(|| Fail::input("the VM has not run yet"))?;
                let mut out = Vec::new();
                flatten_relax(r, func, &mut out)?;
                out.into_iter().enumerate().map(|(i, (path, a))| (format!("output {i} ({path})"), a)).collect()
            }
        })
    }

    /// Per-operator times (graph: the debug executor's `run_individual`, `number` runs of
    /// each; VM: the profiling VM's report of one run), longest first.
    pub fn profile(&mut self, number: usize) -> Result<Vec<OpRow>> {
        Ok(match self {
            Runner::Graph(e, _) => e
                .profile(number)?
                .into_iter()
                .map(|o| OpRow {
                    node: Some(o.node),
                    op: o.func_name,
                    time_us: o.time_us,
                    percent: o.percent,
                    shapes: o.shapes,
                })
                .collect(),
            Runner::Vm { vm, func, .. } => vm.profile(func)?.into_iter().map(OpRow::from).collect(),
            Runner::Aot(_) => return Err(Fail::input("the AOT executor has no per-operator profiler")),
            Runner::Relax { .. } => return Err(Fail::input("the Relax VM has no per-operator profiler here yet")),
        })
    }
}

/// One row of a per-operator table.
pub struct OpRow {
    /// The graph node (graph models).
    pub node: Option<String>,
    /// The kernel (or the VM's own operation).
    pub op: String,
    /// Time in microseconds.
    pub time_us: f64,
    /// Share of the table's total, in percent.
    pub percent: f64,
    /// Argument shapes (`float32[1, 784]`), inputs then outputs.
    pub shapes: Vec<String>,
}

impl From<VmOpProfile> for OpRow {
    fn from(p: VmOpProfile) -> OpRow {
        OpRow { node: None, op: p.name, time_us: p.time_us, percent: p.percent, shapes: split_shapes(&p.shapes) }
    }
}

/// `float32[1, 2], int32[3]` as its shapes.
fn split_shapes(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_owned());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// `main`, `main.0`, `main.0.1`: the path of each tensor of a VM result, depth first.
fn flatten_labelled(v: &VmValue, path: &str, out: &mut Vec<(String, NDArray)>) {
    match v {
        VmValue::Tensor(a) => out.push((path.to_owned(), a.clone())),
        VmValue::Tuple { fields, .. } => {
            for (i, f) in fields.iter().enumerate() {
                flatten_labelled(f, &format!("{path}.{i}"), out);
            }
        }
    }
}

/// `main`, `main.0`, `main.0.1`: the path of each tensor of a Relax result, depth first; shapes
/// and scalars become int64 / float64 / bool arrays (labelled so), strings and None are left out.
fn flatten_relax(v: &Output, path: &str, out: &mut Vec<(String, NDArray)>) -> Result<()> {
    let cpu = Device::cpu();
    let leaf = match v {
        Output::Tensor(a) => a.clone(),
        Output::Tuple(fields) => {
            for (i, f) in fields.iter().enumerate() {
                flatten_relax(f, &format!("{path}.{i}"), out)?;
            }
            return Ok(());
        }
        Output::Shape(s) => {
            out.push((format!("{path}, a shape"), NDArray::from_slice(s, &[s.len() as i64], cpu)?));
            return Ok(());
        }
        Output::Int(x) => NDArray::from_slice(&[*x], &[], cpu)?,
        Output::Float(x) => NDArray::from_slice(&[*x], &[], cpu)?,
        Output::Bool(x) => NDArray::from_slice(&[*x], &[], cpu)?,
        _ => return Ok(()),
    };
    let label = if matches!(v, Output::Tensor(_)) { path.to_owned() } else { format!("{path}, a scalar") };
    out.push((label, leaf));
    Ok(())
}

/// Where an input's values come from.
enum Source<'a> {
    File(&'a Path),
    /// `random:DTYPE[SHAPE]`.
    Random(DataType, Vec<i64>),
}

fn source(p: &Path) -> Result<Source<'_>> {
    match p.to_str().and_then(|s| s.strip_prefix("random:")) {
        Some(spec) => {
            let (dt, shape) = common::parse_tensor_spec(spec)?;
            Ok(Source::Random(dt, shape))
        }
        None => Ok(Source::File(p)),
    }
}

/// The inputs of a run: each `--input NAME=FILE.npy` (or `NAME=random:DTYPE[SHAPE]`) checked
/// against the model; inputs of known shape without one get seeded random values (said on
/// stderr); an input of unrecorded shape without one is an error. A VM input may be named by
/// its position. Returns (name, array) in the model's input order, then replaced parameters.
pub fn resolve_inputs(
    model: &Path,
    spec: &Inputs,
    files: &[(String, PathBuf)],
    seed: u64,
) -> Result<Vec<(String, NDArray)>> {
    let position = |n: &str| n.parse::<usize>().ok().filter(|&i| i < spec.inputs.len());
    let given = |name: &str, idx: usize| {
        files.iter().find(|(n, _)| n == name || (!spec.inputs.iter().any(|(x, _)| x == n) && position(n) == Some(idx)))
    };
    for (name, _) in files {
        let known = spec.inputs.iter().any(|(n, _)| n == name) || spec.params.iter().any(|t| &t.name == name);
        if !known && position(name).is_none() {
            let names: Vec<&str> = spec.inputs.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Fail::input(format!(
                "the model has no input named {name}; its inputs are: {}",
                if names.is_empty() { "(none)".to_owned() } else { names.join(", ") }
            )));
        }
    }
    let mut rng = common::rng(seed);
    let mut out = Vec::new();
    for (idx, (name, t)) in spec.inputs.iter().enumerate() {
        let a = match (given(name, idx), t) {
            (Some((_, f)), _) => {
                let (a, what) = match source(f)? {
                    Source::File(p) => (npy::read(p)?, format!("input {name} ({})", p.display())),
                    Source::Random(dt, shape) => {
                        let t = TensorInfo { name: name.clone(), shape, dtype: dt };
                        say_random(&t, seed);
                        (common::random_array(&t, &mut rng)?, format!("input {name} (random)"))
                    }
                };
                if let Some(t) = t {
                    common::check_tensor(&a, t, &what)?;
                }
                a
            }
            (None, Some(t)) => {
                say_random(t, seed);
                common::random_array(t, &mut rng)?
            }
            (None, None) => {
                return Err(Fail::input(format!(
                    "{}: the executable does not record the shape of input {name} (VM inputs may be \
                     dynamic); give it with --input {name}=FILE.npy or --input {name}=random:DTYPE[D0,D1,...]",
                    model.display()
                )))
            }
        };
        out.push((name.clone(), a));
    }
    for t in &spec.params {
        if let Some((_, f)) = files.iter().find(|(n, _)| n == &t.name) {
            let a = match source(f)? {
                Source::File(p) => npy::read(p)?,
                Source::Random(..) => {
                    return Err(Fail::input(format!("parameter {}: random values only for inputs", t.name)))
                }
            };
            common::check_tensor(&a, t, &format!("parameter {} ({})", t.name, f.display()))?;
            out.push((t.name.clone(), a));
        }
    }
    Ok(out)
}

fn say_random(t: &TensorInfo, seed: u64) {
    eprintln!(
        "tvmrt: input {} {}: random values (seed {seed}; {})",
        t.name,
        tensor_str(t.dtype, &t.shape),
        if t.dtype.code() == 2 || t.dtype.code() == 4 { "uniform in [0, 1)" } else { "integers in [0, 10)" }
    );
}

#[cfg(test)]
mod tests {
    use super::split_shapes;

    #[test]
    fn shapes_split_at_top_level_commas() {
        assert_eq!(split_shapes("float32[1, 784], int32[3]"), vec!["float32[1, 784]", "int32[3]"]);
        assert_eq!(split_shapes("float32[]"), vec!["float32[]"]);
        assert!(split_shapes("").is_empty());
    }
}
