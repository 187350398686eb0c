//! Runs a graph model exported by TVM (`export_library`) with the safe API.
//!
//! Usage: `cargo run -p tvm-rt --example run_model -- MODEL.so [V0,V1,...]`: the values (or
//! 0.5 everywhere) fill the first input; every input must be float32. Prints each output.

use tvm_rt::{DataType, Device, GraphExecutor, Module, NDArray, Result};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: run_model MODEL.so [V0,V1,...]");
    let values: Option<Vec<f32>> =
        args.next().map(|s| s.split(',').map(|v| v.trim().parse().expect("a number")).collect());

    let lib = Module::load(&path)?;
    let mut exec = GraphExecutor::from_factory(&lib, &[Device::cpu()])?;
    let info = exec.info();
    for (k, input) in info.inputs.iter().enumerate() {
        assert_eq!(input.dtype, DataType::FLOAT32, "this example fills float32 inputs only");
        let n = input.byte_size() / 4;
        let data = match (&values, k) {
            (Some(v), 0) => v.clone(),
            _ => vec![0.5; n],
        };
        println!("input  {} {:?}: {}", input.name, input.shape, show(&data));
        exec.set_input(input.name.as_str(), &NDArray::from_slice(&data, &input.shape, Device::cpu())?)?;
    }
    exec.run()?;
    for i in 0..exec.num_outputs() {
        let out = exec.get_output(i)?;
        println!("output {i} {:?}: {}", out.shape(), show(&out.to_vec::<f32>()?));
    }
    Ok(())
}

/// The first values, with C's `%g` precision.
fn show(v: &[f32]) -> String {
    let mut parts: Vec<String> = v.iter().take(8).map(|x| format!("{}", (*x as f64 * 1e5).round() / 1e5)).collect();
    if v.len() > 8 {
        parts.push(format!("... ({} values)", v.len()));
    }
    parts.join(" ")
}
