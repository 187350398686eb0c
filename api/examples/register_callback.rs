//! Registers Rust closures as global functions and calls them through the registry, the way a
//! C program (`TVMFuncGetGlobal` + `TVMFuncCall`) or a compiled model
//! (`TVMBackendGetFuncFromEnv`) reaches them.
//!
//! Usage: `cargo run -p tvm-rt --example register_callback`

use tvm_rt::{Device, Function, NDArray, Result, Value};

fn main() -> Result<()> {
    // A callback with typed arguments: (name: str, count: int) -> str.
    tvm_rt::register(
        "example.greet",
        Function::from_fn(|args| {
            let name = String::try_from(args.first().cloned().unwrap_or_default())?;
            let count = i64::try_from(args.get(1).cloned().unwrap_or(Value::Int(1)))?;
            Ok(Value::Str(format!("hello {name}").repeat(count as usize)))
        }),
    )?;
    // A callback on arrays: the sum of a float32 array's elements.
    tvm_rt::register(
        "example.sum",
        Function::from_fn(|args| {
            let a = NDArray::try_from(args.first().cloned().unwrap_or_default())?;
            Ok(Value::Float(a.to_vec::<f32>()?.iter().map(|&x| f64::from(x)).sum()))
        }),
    )?;

    // Look them up by name, as any user of the runtime would, and call them.
    let greet = Function::get_global("example.greet").expect("registered above");
    let text: String = greet.invoke(("tvm", 2))?;
    println!("example.greet(\"tvm\", 2) = {text:?}");

    let sum = Function::get_global("example.sum").expect("registered above");
    let a = NDArray::from_slice(&[1.0f32, 2.0, 3.5], &[3], Device::cpu())?;
    let total: f64 = sum.invoke((&a,))?;
    println!("example.sum([1, 2, 3.5]) = {total}");

    // Errors travel back as the runtime's error type, with TVM's kind prefix.
    match greet.call((42,)) {
        Err(e) => println!("example.greet(42) failed: {e}"),
        Ok(v) => println!("unexpected: {v:?}"),
    }

    let mine: Vec<String> = tvm_rt::list_globals().into_iter().filter(|n| n.starts_with("example.")).collect();
    println!("registered: {}", mine.join(", "));
    assert_eq!(text, "hello tvmhello tvm");
    assert_eq!(total, 6.5);
    Ok(())
}
