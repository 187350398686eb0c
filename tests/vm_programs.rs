//! The Relay VM on executables built by the tests (tests/common/vm.rs writes TVM v0.8's format,
//! tests/fixtures/vm_kernels.c holds the kernels): every opcode, with expected results computed
//! here independently; run-time errors; damaged executables refused at load with the problem
//! named; random damage never crashing; the memory pool's life; GPU kernels of an imported
//! `opencl` module (PoCL) or `cuda` module (where a GPU is).

mod common;

use common::vm::*;
use common::{load, type_key, Mod};
use tvm_runtime::abi::{TVMByteArray, TVMValue};

const F32: (u8, u8, u16) = (2, 32, 1);
const I64: (u8, u8, u16) = (0, 64, 1);
const BOOL: (u8, u8, u16) = (1, 1, 1);
const POOLED: i64 = 2;
const NAIVE: i64 = 1;

/// The kernels alone, as a library to attach executables to (`Executable.load_exec`).
fn kernels() -> Mod {
    let path = common::build_shared("vm-kernels", &[vm_kernels_c()], "");
    load(&path).expect("load kernels")
}

/// `runtime.Load_Executable(code, lib)`.
fn load_exec(code: &[u8], lib: &Mod) -> Result<Mod, String> {
    let g = common::global("runtime.Load_Executable").unwrap();
    let ba = TVMByteArray { data: code.as_ptr().cast(), size: code.len() };
    let args = [
        (TVMValue { v_handle: (&ba as *const TVMByteArray).cast_mut().cast() }, 12),
        (TVMValue { v_handle: lib.0 }, 9),
    ];
    let (v, c) = call_raw(&g, &args)?;
    assert_eq!(c, 9);
    // SAFETY: code 9 carries v_handle.
    Ok(Mod(unsafe { v.v_handle }))
}

fn scalar(v: i64) -> Host {
    Host::i64s(&[], &[v])
}

fn input(seed: u32, shape: &[i64]) -> Host {
    let n = shape.iter().product::<i64>() as usize;
    let v: Vec<f32> = (0..n).map(|i| ((i as u32 * 7 + seed * 13) % 11) as f32 * 0.5 - 2.0).collect();
    Host::f32(shape, &v)
}

fn map2(a: &Host, b: &Host, f: impl Fn(f32, f32) -> f32) -> Host {
    let v: Vec<f32> = a.as_f32().iter().zip(b.as_f32()).map(|(x, y)| f(*x, y)).collect();
    Host::f32(&a.shape, &v)
}

fn map1(a: &Host, f: impl Fn(f32) -> f32) -> Host {
    Host::f32(&a.shape, &a.as_f32().iter().map(|x| f(*x)).collect::<Vec<_>>())
}

/// main(x, y) = (x + y) * x, the two tensors in one storage block at offsets 0 and 24.
fn arith() -> Exe {
    let mut e = Exe::new();
    let c48 = e.constant(scalar(48));
    let c24 = e.constant(scalar(24));
    let add = e.primitive("vm_add");
    let mul = e.primitive("vm_mul");
    e.funcs.push(VmFn::new(
        "main",
        &["x", "y"],
        9,
        vec![
            op::load_const(c48, 2),
            op::alloc_storage(2, 64, F32, 1, 3),
            op::load_consti(0, 4),
            op::alloc_tensor(3, 4, &[2, 3], F32, 5),
            op::load_const(c24, 6),
            op::alloc_tensor(3, 6, &[2, 3], F32, 7),
            op::invoke_packed(add, 1, &[0, 1, 5]),
            op::invoke_packed(mul, 1, &[5, 0, 7]),
            op::mov(7, 8),
            op::ret(8),
        ],
    ));
    e
}

/// main(x: f32[4]) = 2x if sum(x) > 0 else -x (If, Goto, bool tensors).
fn control() -> Exe {
    let mut e = Exe::new();
    let c4 = e.constant(scalar(4));
    let c16 = e.constant(scalar(16));
    let sum = e.primitive("vm_sum");
    let pos = e.primitive("vm_positive");
    let scale2 = e.primitive("vm_scale2");
    let neg = e.primitive("vm_neg");
    e.funcs.push(VmFn::new(
        "main",
        &["x"],
        14,
        vec![
            op::load_const(c4, 1),
            op::alloc_storage(1, 64, F32, 1, 2),
            op::load_consti(0, 3),
            op::alloc_tensor(2, 3, &[], F32, 4),
            op::invoke_packed(sum, 1, &[0, 4]),
            op::load_consti(1, 5),
            op::alloc_storage(5, 64, BOOL, 1, 6),
            op::alloc_tensor(6, 3, &[], BOOL, 7),
            op::invoke_packed(pos, 1, &[4, 7]),
            op::load_consti(1, 8),
            op::if_(7, 8, 1, 7),
            op::load_const(c16, 9),
            op::alloc_storage(9, 64, F32, 1, 10),
            op::alloc_tensor(10, 3, &[4], F32, 11),
            op::invoke_packed(scale2, 1, &[0, 11]),
            op::mov(11, 12),
            op::goto(6),
            op::load_const(c16, 9),
            op::alloc_storage(9, 64, F32, 1, 10),
            op::alloc_tensor(10, 3, &[4], F32, 13),
            op::invoke_packed(neg, 1, &[0, 13]),
            op::mov(13, 12),
            op::ret(12),
        ],
    ));
    e
}

/// main(x, y) = (tag(outer) as int32[1], y, x + y (an ADT argument, flattened), outer) where
/// outer = ADT(7, [ADT(0, [x, y]), x]).
fn adt() -> Exe {
    let mut e = Exe::new();
    let c24 = e.constant(scalar(24));
    let add = e.primitive("vm_add");
    e.funcs.push(VmFn::new(
        "main",
        &["x", "y"],
        12,
        vec![
            op::alloc_adt(0, &[0, 1], 2),
            op::alloc_adt(7, &[2, 0], 3),
            op::get_field(3, 0, 4),
            op::get_field(4, 1, 5),
            op::get_tag(3, 6),
            op::load_const(c24, 7),
            op::alloc_storage(7, 64, F32, 1, 8),
            op::load_consti(0, 9),
            op::alloc_tensor(8, 9, &[2, 3], F32, 10),
            op::invoke_packed(add, 1, &[4, 10]),
            op::alloc_adt(3, &[6, 5, 10, 3], 11),
            op::ret(11),
        ],
    ));
    e
}

/// A function of `params` (f32[2,3] tensors) computing `kernel(params..., out)`.
fn kernel_fn(name: &str, params: &[&str], c24: i64, kernel: i64) -> VmFn {
    let n = params.len() as i64;
    let mut args: Vec<i64> = (0..n).collect();
    args.push(n + 3);
    VmFn::new(
        name,
        params,
        n + 4,
        vec![
            op::load_const(c24, n),
            op::alloc_storage(n, 64, F32, 1, n + 1),
            op::load_consti(0, n + 2),
            op::alloc_tensor(n + 1, n + 2, &[2, 3], F32, n + 3),
            op::invoke_packed(kernel, 1, &args),
            op::ret(n + 3),
        ],
    )
}

/// main(x) = double(add_bias(bias, x)) through a closure capturing `bias` and a global call;
/// get_closure(x) returns the closure itself.
fn closures(bias: &Host) -> Exe {
    let mut e = Exe::new();
    let cb = e.constant(bias.clone());
    let c24 = e.constant(scalar(24));
    let add = e.primitive("vm_add");
    let scale2 = e.primitive("vm_scale2");
    e.funcs.push(VmFn::new(
        "main",
        &["x"],
        5,
        vec![
            op::load_const(cb, 1),
            op::alloc_closure(1, &[1], 2),
            op::invoke_closure(2, &[0], 3),
            op::invoke(2, &[3], 4),
            op::ret(4),
        ],
    ));
    e.funcs.push(kernel_fn("add_bias", &["b", "v"], c24, add));
    e.funcs.push(kernel_fn("double", &["v"], c24, scale2));
    e.funcs.push(VmFn::new("get_closure", &["x"], 2, vec![op::alloc_closure(1, &[0], 1), op::ret(1)]));
    e
}

/// main(x: f32[any, any]) = (2x flattened, the positive elements of x (an empty tensor when
/// there are none: the kernel must not be called), shape(x)).
fn dynamic() -> Exe {
    let mut e = Exe::new();
    let c8 = e.constant(scalar(8));
    let nbytes = e.primitive("vm_nbytes");
    let scale2 = e.primitive("vm_scale2");
    let flat = e.primitive("vm_flat_shape");
    let count = e.primitive("vm_count_pos_shape");
    let select = e.primitive("vm_select_pos");
    e.funcs.push(VmFn::new(
        "main",
        &["x"],
        19,
        vec![
            op::shape_of(0, 1),
            op::load_const(c8, 2),
            op::load_consti(0, 3),
            op::alloc_storage(2, 64, I64, 1, 4),
            op::alloc_tensor(4, 3, &[], I64, 5),
            op::invoke_packed(nbytes, 1, &[1, 5]),
            op::alloc_storage(5, 64, F32, 1, 6),
            op::alloc_tensor_reg(6, 3, 1, F32, 7),
            op::invoke_packed(scale2, 1, &[0, 7]),
            op::alloc_storage(2, 64, I64, 1, 8),
            op::alloc_tensor(8, 3, &[1], I64, 9),
            op::invoke_packed(flat, 1, &[1, 9]),
            op::reshape(7, 9, 10),
            op::alloc_storage(2, 64, I64, 1, 11),
            op::alloc_tensor(11, 3, &[1], I64, 12),
            op::invoke_packed(count, 1, &[0, 12]),
            op::alloc_storage(2, 64, I64, 1, 13),
            op::alloc_tensor(13, 3, &[], I64, 14),
            op::invoke_packed(nbytes, 1, &[12, 14]),
            op::alloc_storage(14, 64, F32, 1, 15),
            op::alloc_tensor_reg(15, 3, 12, F32, 16),
            op::invoke_packed(select, 1, &[0, 16]),
            op::device_copy(16, 1, 1, 17),
            op::alloc_adt(0, &[10, 17, 1], 18),
            op::ret(18),
        ],
    ));
    e
}

/// main(n: int64, x: f32[3]) = n * x by recursion: loop(n, acc, x) = acc if n == 0 else
/// loop(n - 1, acc + x, x).
fn recursion() -> Exe {
    let mut e = Exe::new();
    let zeros = e.constant(Host::f32(&[3], &[0.0; 3]));
    let c8 = e.constant(scalar(8));
    let c12 = e.constant(scalar(12));
    let dec = e.primitive("vm_dec");
    let add = e.primitive("vm_add");
    e.funcs.push(VmFn::new(
        "main",
        &["n", "x"],
        4,
        vec![op::load_const(zeros, 2), op::invoke(1, &[0, 2, 1], 3), op::ret(3)],
    ));
    e.funcs.push(VmFn::new(
        "loop",
        &["n", "acc", "x"],
        11,
        vec![
            op::load_consti(0, 3),
            op::if_(0, 3, 1, 2),
            op::ret(1),
            op::load_const(c8, 4),
            op::alloc_storage(4, 64, I64, 1, 5),
            op::alloc_tensor(5, 3, &[], I64, 6),
            op::invoke_packed(dec, 1, &[0, 6]),
            op::load_const(c12, 7),
            op::alloc_storage(7, 64, F32, 1, 8),
            op::alloc_tensor(8, 3, &[3], F32, 9),
            op::invoke_packed(add, 1, &[1, 2, 9]),
            op::invoke(1, &[6, 9, 2], 10),
            op::ret(10),
        ],
    ));
    // Unbounded recursion with large frames, and a fatal stop.
    e.funcs.push(VmFn::new("forever", &[], 1000, vec![op::invoke(2, &[], 0), op::ret(0)]));
    e.funcs.push(VmFn::new("stop", &[], 1, vec![op::fatal()]));
    e
}

fn run(exec: &Mod, alloc: i64, name: &str, inputs: &[Host]) -> Result<Out, String> {
    Vm::new(exec, &[(1, 0, alloc)]).run(name, inputs)
}

#[test]
fn arith_in_one_library_and_attached() {
    // The one-.so form (export_library) and the split form (Load_Executable with a library).
    let e = arith();
    let so = build_vm_library("vm-arith", &e.bytes(), &[]);
    assert!(executable_bytes_of(&so) == e.bytes());
    let one = load(&so).unwrap();
    assert_eq!(type_key(&one), "VMExecutable");
    let split = load_exec(&e.bytes(), &kernels()).unwrap();
    let (x, y) = (input(1, &[2, 3]), input(2, &[2, 3]));
    let want = map2(&map2(&x, &y, |a, b| a + b), &x, |s, a| s * a);
    for exec in [&one, &split] {
        for alloc in [NAIVE, POOLED] {
            let out = run(exec, alloc, "main", &[x.clone(), y.clone()]).unwrap();
            assert_eq!(out.tensor(), &want);
        }
    }
}

#[test]
fn control_flow_takes_both_branches() {
    let exec = load_exec(&control().bytes(), &kernels()).unwrap();
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    let pos = Host::f32(&[4], &[1.0, -0.5, 2.0, 0.25]);
    let negs = Host::f32(&[4], &[-1.0, 0.5, -2.0, 0.25]);
    assert_eq!(vm.run("main", std::slice::from_ref(&pos)).unwrap().tensor(), &map1(&pos, |v| 2.0 * v));
    assert_eq!(vm.run("main", std::slice::from_ref(&negs)).unwrap().tensor(), &map1(&negs, |v| -v));
}

#[test]
fn adt_construction_fields_tags_and_flattened_arguments() {
    let exec = load_exec(&adt().bytes(), &kernels()).unwrap();
    let (x, y) = (input(3, &[2, 3]), input(4, &[2, 3]));
    let out = run(&exec, POOLED, "main", &[x.clone(), y.clone()]).unwrap();
    let tag = Host { dtype: (0, 32, 1), shape: vec![1], data: 7i32.to_le_bytes().to_vec() };
    let want = Out::Adt(
        3,
        vec![
            Out::Tensor(tag),
            Out::Tensor(y.clone()),
            Out::Tensor(map2(&x, &y, |a, b| a + b)),
            Out::Adt(7, vec![Out::Adt(0, vec![Out::Tensor(x.clone()), Out::Tensor(y)]), Out::Tensor(x)]),
        ],
    );
    assert_eq!(out, want);
}

#[test]
fn closures_and_global_calls() {
    let bias = input(5, &[2, 3]);
    let exec = load_exec(&closures(&bias).bytes(), &kernels()).unwrap();
    let x = input(6, &[2, 3]);
    let out = run(&exec, NAIVE, "main", std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.tensor(), &map1(&map2(&bias, &x, |b, v| b + v), |s| 2.0 * s));
    // A closure returned to the caller is a vm.Closure object.
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    let a = Array::new(&x);
    vm.set_input("get_closure", &[&a]).unwrap();
    let n = common::c("get_closure");
    let (v, code) = call_raw(&func(&vm.m, "invoke"), &[(TVMValue { v_str: n.as_ptr() }, 11)]).unwrap();
    assert_eq!(code, 8);
    // SAFETY: code 8 carries an owned object handle.
    let obj = unsafe { v.v_handle };
    let mut t = 0u32;
    let mut key = std::ptr::null_mut();
    // SAFETY: live object handle, valid out-pointers; the key is malloc'ed and freed here.
    unsafe {
        assert_eq!(tvm_runtime::classic_api::object::TVMObjectGetTypeIndex(obj, &mut t), 0);
        assert_eq!(tvm_runtime::classic_api::object::TVMObjectTypeIndex2Key(t, &mut key), 0);
        assert_eq!(common::from_c(key), "vm.Closure");
        libc::free(key.cast());
        assert_eq!(tvm_runtime::classic_api::object::TVMObjectFree(obj), 0);
    }
}

#[test]
fn dynamic_shapes_reshape_and_empty_outputs() {
    let exec = load_exec(&dynamic().bytes(), &kernels()).unwrap();
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    for (seed, shape) in [(1u32, vec![2i64, 3]), (2, vec![4, 1]), (3, vec![1, 7])] {
        let x = input(seed, &shape);
        let out = vm.run("main", std::slice::from_ref(&x)).unwrap();
        let n = shape.iter().product::<i64>();
        let doubled: Vec<f32> = x.as_f32().iter().map(|v| 2.0 * v).collect();
        let positives: Vec<f32> = x.as_f32().into_iter().filter(|v| *v > 0.0).collect();
        let want = Out::Adt(
            0,
            vec![
                Out::Tensor(Host::f32(&[n], &doubled)),
                Out::Tensor(Host::f32(&[positives.len() as i64], &positives)),
                Out::Tensor(Host::i64s(&[2], &shape)),
            ],
        );
        assert_eq!(out, want, "shape {shape:?}");
    }
    // No positive element: an empty result, and vm_select_pos (which fails on an empty output)
    // is not called.
    let x = Host::f32(&[3, 2], &[-1.0; 6]);
    let out = vm.run("main", std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.flatten()[1], Host::f32(&[0], &[]));
}

#[test]
fn recursion_deep_calls_overflow_and_fatal() {
    let exec = load_exec(&recursion().bytes(), &kernels()).unwrap();
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    let x = Host::f32(&[3], &[0.5, -1.25, 3.0]);
    for n in [0i64, 1, 5, 2000] {
        let out = vm.run("main", &[scalar(n), x.clone()]).unwrap();
        let mut acc = [0f32; 3];
        for _ in 0..n {
            for (a, v) in acc.iter_mut().zip(x.as_f32()) {
                *a += v;
            }
        }
        assert_eq!(out.tensor(), &Host::f32(&[3], &acc), "n = {n}");
    }
    for _ in 0..2 {
        let e = vm.invoke("forever").unwrap_err();
        assert!(e.contains("VM call stack overflow"), "{e}");
        let e = vm.invoke("stop").unwrap_err();
        assert!(e.contains("VM encountered fatal error") && e.contains("\"stop\", instruction 0 (Fatal)"), "{e}");
    }
    assert!(vm.run("main", &[scalar(3), x]).is_ok());
}

/// Functions of one parameter x (f32[2,3]) that each fail at run time, and `ok`.
fn failing() -> (Exe, Vec<(&'static str, &'static str)>) {
    let mut e = Exe::new();
    let c24 = e.constant(scalar(24));
    let shape2d = e.constant(Host::i64s(&[1, 2], &[2, 3]));
    let shape_i32 = e.constant(Host {
        dtype: (0, 32, 1),
        shape: vec![2],
        data: [2i32, 3].iter().flat_map(|v| v.to_le_bytes()).collect(),
    });
    let add = e.primitive("vm_add");
    let f = |name: &str, regs: i64, code: Vec<Ins>| VmFn::new(name, &["x"], regs, code);
    let storage =
        |size_reg: i64, dst: i64| vec![op::load_const(c24, size_reg), op::alloc_storage(size_reg, 64, F32, 1, dst)];
    e.funcs.push(f("ok", 1, vec![op::ret(0)]));
    e.funcs.push(f("unset", 3, vec![op::mov(2, 1), op::ret(1)]));
    e.funcs.push(f(
        "too_big",
        5,
        [storage(1, 2), vec![op::load_consti(8, 3), op::alloc_tensor(2, 3, &[2000], F32, 4), op::ret(4)]].concat(),
    ));
    e.funcs.push(f("field_of_tensor", 2, vec![op::get_field(0, 0, 1), op::ret(1)]));
    e.funcs.push(f("field_out_of_range", 3, vec![op::alloc_adt(0, &[0], 1), op::get_field(1, 5, 2), op::ret(2)]));
    e.funcs.push(f("tag_of_tensor", 2, vec![op::get_tag(0, 1), op::ret(1)]));
    e.funcs.push(f("call_tensor", 2, vec![op::invoke_closure(0, &[0], 1), op::ret(1)]));
    e.funcs.push(f("closure_arity", 3, vec![op::alloc_closure(9, &[], 1), op::invoke_closure(1, &[0], 2), op::ret(2)]));
    e.funcs.push(f("copy_from_gpu", 2, vec![op::device_copy(0, 4, 1, 1), op::ret(1)]));
    e.funcs.push(f("cuda_storage", 3, vec![op::load_consti(64, 1), op::alloc_storage(1, 64, F32, 2, 2), op::ret(2)]));
    e.funcs.push(f("negative_size", 3, vec![op::load_consti(-5, 1), op::alloc_storage(1, 64, F32, 1, 2), op::ret(2)]));
    e.funcs.push(f("reshape_i32", 3, vec![op::load_const(shape_i32, 1), op::reshape(0, 1, 2), op::ret(2)]));
    e.funcs.push(f(
        "shape_2d",
        6,
        [
            storage(1, 2),
            vec![op::load_const(shape2d, 3), op::load_consti(0, 4), op::alloc_tensor_reg(2, 4, 3, F32, 5), op::ret(5)],
        ]
        .concat(),
    ));
    e.funcs.push(f(
        "kernel_error",
        5,
        [
            storage(1, 2),
            vec![
                op::load_consti(0, 3),
                op::alloc_tensor(2, 3, &[5], F32, 4),
                op::invoke_packed(add, 1, &[0, 4, 4]),
                op::ret(4),
            ],
        ]
        .concat(),
    ));
    e.funcs.push(f("if_on_tuple", 3, vec![op::alloc_adt(0, &[], 1), op::if_(1, 1, 1, 1), op::ret(0)]));
    e.funcs.push(f("bad_scalar", 2, vec![op::if_(0, 0, 1, 1), op::ret(0)]));
    // Function 9 (the closure's target) takes two parameters.
    e.funcs.insert(9, kernel_fn("add2", &["a", "b"], c24, add));
    let expected = vec![
        ("unset", "register $2 is read before it is written"),
        ("too_big", "storage allocation failure"),
        ("field_of_tensor", "GetField of a runtime.NDArray, not an ADT"),
        ("field_out_of_range", "field 5 of an ADT with 1 fields"),
        ("tag_of_tensor", "GetTag of a runtime.NDArray"),
        ("call_tensor", "not a vm.Closure"),
        ("closure_arity", "takes 2 arguments, got 1"),
        ("copy_from_gpu", "expects a tensor on device type 4"),
        ("cuda_storage", "Memory allocator for device type 2 has not been initialized"),
        ("negative_size", "negative storage size -5"),
        ("reshape_i32", "1-D int64 tensor"),
        ("shape_2d", "shape tensor should be a k-length vector, found 2"),
        ("kernel_error", "InvokePacked vm_add"),
        ("if_on_tuple", "a scalar operand must be a tensor, got runtime.ADT"),
        ("bad_scalar", "expected a scalar"),
    ];
    (e, expected)
}

#[test]
fn run_time_errors_are_named_and_the_vm_recovers() {
    let (e, cases) = failing();
    let exec = load_exec(&e.bytes(), &kernels()).unwrap();
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    let x = input(7, &[2, 3]);
    let empty = Host::f32(&[0], &[]);
    for (name, want) in cases {
        let arg = if name == "bad_scalar" { &empty } else { &x };
        let e = vm.run(name, std::slice::from_ref(arg)).unwrap_err();
        assert!(e.contains(want), "{name}: {e}");
        assert!(e.contains(&format!("VM function \"{name}\"")), "{name}: {e}");
        assert_eq!(vm.run("ok", std::slice::from_ref(&x)).unwrap().tensor(), &x);
    }
}

/// The load error of an executable (attached to the test kernels).
fn load_error(code: &[u8], lib: &Mod) -> String {
    match load_exec(code, lib) {
        Ok(_) => panic!("a damaged executable loaded"),
        Err(e) => e,
    }
}

#[test]
fn damaged_executables_are_refused_at_load() {
    let lib = kernels();
    let base = arith();
    let good = base.bytes();
    assert!(load_exec(&good, &lib).is_ok());
    let expect = |e: &Exe, want: &str| {
        let msg = load_error(&e.bytes(), &lib);
        assert!(msg.contains(want), "want {want:?}, got: {msg}");
    };
    let with = |f: &dyn Fn(&mut Exe)| {
        let mut e = arith();
        f(&mut e);
        e
    };
    let set = |pc: usize, i: Ins| with(&move |e: &mut Exe| e.funcs[0].code[pc] = i.clone());
    // Raw bytes: magic, trailing bytes, a constant count past the end, a broken NDArray record,
    // a wrong instruction hash.
    let mut b = good.clone();
    b[0] ^= 1;
    assert!(load_error(&b, &lib).contains("magic"));
    let mut b = good.clone();
    b.push(0);
    assert!(load_error(&b, &lib).contains("1 unexpected bytes after the code section"));
    let consts_at = 8 + (8 + 5) + (8 + 8 + 4);
    let mut b = good.clone();
    b[consts_at..consts_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = load_error(&b, &lib);
    assert!(e.contains("constant section") && e.contains("runs past the end"), "{e}");
    let mut b = good.clone();
    b[consts_at + 8] ^= 1;
    let e = load_error(&b, &lib);
    assert!(e.contains("constant 0") && e.contains("Invalid DLTensor file format"), "{e}");
    let mut b = good.clone();
    let n = b.len();
    b[n - 24] ^= 1; // the hash of the last instruction, `ret $8`
    assert!(load_error(&b, &lib).contains("Found mismatch in hash for opcode: 1"));
    // Every truncation is refused with a message.
    for cut in 0..good.len() {
        let e = load_error(&good[..cut], &lib);
        assert!(e.contains("Invalid VM file format") || e.contains("VM executable"), "cut {cut}: {e}");
    }
    // Header and sections.
    expect(&with(&|e| e.version = "0.9.0".into()), "made by TVM \"0.9.0\"");
    expect(&with(&|e| e.constants[0].device_type = 99), "constant 0's device type: 99 is not a device type");
    expect(&with(&|e| e.primitives[1] = "vm_add".into()), "\"vm_add\" is both primitive 0 and 1");
    expect(&with(&|e| e.funcs.push(e.funcs[0].clone())), "\"main\" is both function 0 and 1");
    expect(&with(&|e| e.funcs[0].regs = 1 << 30), "register file size \"1073741824\"");
    expect(&with(&|e| e.funcs[0].count_override = Some("1000000".into())), "instruction count \"1000000\"");
    expect(&with(&|e| e.funcs[0].count_override = Some("ten".into())), "instruction count \"ten\"");
    expect(&with(&|e| e.funcs[0].regs = 1), "2 parameters do not fit its 1 registers");
    expect(&with(&|e| e.funcs[0].param_devices[1] = 0), "parameter 1's device type: 0 is not a device type");
    expect(&with(&|e| e.funcs[0].code.clear()), "it has no instructions");
    // Instructions: counts, values, references, control flow.
    expect(&set(8, Ins { op: 0, fields: vec![7, 8, 9] }), "\"main\", instruction 8: Move");
    expect(&set(8, Ins { op: 0, fields: vec![7, 8, 9] }), "Move: expects 2 fields, got 3");
    expect(&set(6, Ins { op: 4, fields: vec![0, 5, 1, 0, 1, 5] }), "5 arguments announced");
    expect(&set(6, op::invoke_packed(0, 4, &[0, 1, 5])), "4 outputs but only 3 arguments");
    expect(&set(8, Ins { op: 42, fields: vec![] }), "unknown opcode 42");
    expect(&set(8, op::mov(99, 8)), "register $99 is out of range (the register file has 9 registers)");
    expect(&set(8, op::mov(-1, 8)), "source register -1 is out of range");
    expect(&set(0, op::load_const(99, 2)), "constant index 99 is out of range (2 constants)");
    expect(&set(8, op::invoke(5, &[], 8)), "function index 5 is out of range (1 functions)");
    expect(&set(8, op::invoke(0, &[0], 8)), "1 arguments for function \"main\", which has 2 parameters");
    expect(&set(8, op::alloc_closure(0, &[0, 1, 2], 8)), "3 captured values for function \"main\"");
    expect(&set(6, op::invoke_packed(9, 1, &[0, 1, 5])), "primitive function index 9 is out of range (2 primitives)");
    expect(&set(8, op::goto(100)), "jump offset 100 leads outside the function's 10 instructions");
    expect(&set(8, op::goto(0)), "jump offset 0");
    expect(&set(8, op::if_(0, 1, 1, -100)), "jump offset -100");
    expect(&set(9, op::mov(7, 8)), "the last instruction must return, jump or stop");
    expect(
        &set(3, op::alloc_tensor(3, 4, &[2, 3], (2, 12, 1), 5)),
        "invalid tensor data type (code 2, 12 bits, 1 lanes)",
    );
    expect(&set(3, op::alloc_tensor(3, 4, &[2, -3], F32, 5)), "negative extent -3");
    expect(&set(3, op::alloc_tensor(3, 4, &[2, 3], (2, 32, 0), 5)), "invalid tensor data type");
    expect(&set(1, op::alloc_storage(2, 48, F32, 1, 3)), "alignment 48 is not a power of two");
    expect(&set(1, op::alloc_storage(2, 64, F32, 99, 3)), "storage device type: 99 is not a device type");
    expect(&set(1, op::alloc_storage(2, 64, F32, 129, 3)), "is not a device type");
    expect(&set(8, op::device_copy(7, 1, 77, 8)), "destination device type: 77 is not a device type");
    expect(&set(8, op::get_field(7, -2, 8)), "field index -2 is negative");
    expect(&set(8, op::alloc_adt(1 << 40, &[7], 8)), "tag 1099511627776 is out of range");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Loads damaged copies of `code` and runs those that load: errors are fine, crashes are not.
fn survive_damage(code: &[u8], lib: &Mod, inputs: &[Host], seed: u64, rounds: usize) -> usize {
    let mut rng = Rng(seed);
    let mut refused = 0;
    for _ in 0..rounds {
        let mut b = code.to_vec();
        match rng.below(4) {
            0 => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(b.len() - 8);
                let v = [0u64, 1, u64::MAX, 1 << 33, rng.next()][rng.below(5)];
                b[i..i + 8].copy_from_slice(&v.to_le_bytes());
            }
            2 => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            _ => b.truncate(rng.below(b.len())),
        }
        let Ok(exec) = load_exec(&b, lib) else {
            refused += 1;
            continue;
        };
        if let Ok(vm) = Vm::create(&exec) {
            if vm.init(&[(1, 0, POOLED)]).is_ok() {
                for name in ["main", "loop", "forever", "stop", "other"] {
                    let _ = vm.run(name, inputs);
                }
            }
        }
    }
    refused
}

#[test]
fn random_damage_never_crashes() {
    let lib = kernels();
    let xy = [input(1, &[2, 3]), input(2, &[2, 3])];
    let refused = survive_damage(&arith().bytes(), &lib, &xy, 0x9e37_79b9_7f4a_7c15, 400);
    assert!(refused > 200, "only {refused} of 400 damaged executables were refused");
    survive_damage(&dynamic().bytes(), &lib, &[input(3, &[3, 4])], 42, 300);
    survive_damage(&recursion().bytes(), &lib, &[scalar(4), Host::f32(&[3], &[1.0, 2.0, 3.0])], 7, 300);
    // TVM's own vm_if executable with its library.
    let Some(dir) = vm_fixtures_dir() else { return };
    let path = dir.join("vm_if.so");
    let exec = load(&path).unwrap();
    let fixture_lib = common::import(&exec, 0);
    let code = executable_bytes_of(&path);
    for cut in 0..code.len() {
        assert!(load_exec(&code[..cut], &fixture_lib).is_err(), "cut {cut}");
    }
    survive_damage(&code, &fixture_lib, &[read_npy(&dir.join("vm_if.run0.input0.npy"))], 99, 400);
}

mod pool {
    use super::*;
    use tvm_runtime::abi::DLDevice;
    use tvm_runtime::ndarray::NDArray;
    use tvm_runtime::value::dtype::FLOAT32;
    use tvm_runtime::value::{ArgsBuf, Value};
    use tvm_runtime::vm::memory::PAGE_SIZE;
    use tvm_runtime::vm::module::VirtualMachine;

    const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

    fn array(h: &Host) -> NDArray {
        let a = NDArray::empty(&h.shape, FLOAT32, CPU0).unwrap();
        a.copy_from_bytes(&h.data).unwrap();
        a
    }

    fn vm_with(kind: i64) -> VirtualMachine {
        tvm_runtime::classic_api::slots::install().unwrap();
        let so = build_vm_library("vm-pool", &arith().bytes(), &[]);
        let exec = tvm_runtime::module::load_from_file(so.to_str().unwrap(), "").unwrap();
        let vm = VirtualMachine::new(&exec, false).unwrap();
        vm.init(&ArgsBuf::new(&[Value::Int(1), Value::Int(0), Value::Int(kind)]).args()).unwrap();
        let args =
            [Value::str("main"), Value::NDArray(array(&input(1, &[2, 3]))), Value::NDArray(array(&input(2, &[2, 3])))];
        vm.set_input("main", &ArgsBuf::new(&args).args(), 1).unwrap();
        vm
    }

    fn result(vm: &VirtualMachine) -> NDArray {
        match vm.invoke("main").unwrap() {
            Value::NDArray(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_pool_goes_with_the_vm_and_results_outlive_it() {
        let vm = vm_with(POOLED);
        let alloc = vm.allocator(1).unwrap().unwrap();
        let r1 = result(&vm);
        // The result is the second tensor of its storage block: same block, byte offset 24.
        assert_eq!(r1.tensor().byte_offset, 24);
        assert_eq!(alloc.held_bytes(), PAGE_SIZE);
        assert_eq!(alloc.pooled_bytes(), 0);
        let r2 = result(&vm);
        assert_eq!(alloc.held_bytes(), 2 * PAGE_SIZE);
        drop(r1);
        assert_eq!(alloc.pooled_bytes(), PAGE_SIZE);
        // Reused: no new block.
        let r3 = result(&vm);
        assert_eq!(alloc.held_bytes(), 2 * PAGE_SIZE);
        drop(r3);
        drop(vm);
        assert_eq!(alloc.pooled_bytes(), 0);
        assert_eq!(alloc.held_bytes(), PAGE_SIZE);
        let want = map2(&map2(&input(1, &[2, 3]), &input(2, &[2, 3]), |a, b| a + b), &input(1, &[2, 3]), |s, a| s * a);
        assert_eq!(r2.to_bytes().unwrap(), want.data);
        drop(r2);
        assert_eq!(alloc.held_bytes(), 0);
    }

    #[test]
    fn naive_blocks_return_at_once() {
        let vm = vm_with(NAIVE);
        let alloc = vm.allocator(1).unwrap().unwrap();
        let r1 = result(&vm);
        assert_eq!(alloc.held_bytes(), 48);
        let r2 = result(&vm);
        assert_eq!(alloc.held_bytes(), 96);
        // The VM keeps its last result (for get_output); the first one's block goes at once.
        drop(r1);
        assert_eq!(alloc.held_bytes(), 48);
        drop(vm);
        assert_eq!(alloc.held_bytes(), 48);
        drop(r2);
        assert_eq!(alloc.held_bytes(), 0);
    }
}

/// main(a, b on the CPU) = (a + b copied back, a + b on the GPU): device copies both ways and
/// storage on the GPU; on_device(x on the GPU) = x + ones (a constant used on the GPU).
fn gpu_program(n: i64, dev: i64) -> Exe {
    let mut e = Exe::new();
    let bytes = e.constant(scalar(4 * n));
    let ones = e.constant(Host::f32(&[n], &vec![1.0; n as usize]));
    e.constants[ones as usize].device_type = dev;
    let add = e.primitive("vm_gpu_add");
    e.funcs.push(VmFn::new(
        "main",
        &["a", "b"],
        10,
        vec![
            op::device_copy(0, 1, dev, 2),
            op::device_copy(1, 1, dev, 3),
            op::load_const(bytes, 4),
            op::alloc_storage(4, 64, F32, dev, 5),
            op::load_consti(0, 6),
            op::alloc_tensor(5, 6, &[n], F32, 7),
            op::invoke_packed(add, 1, &[2, 3, 7]),
            op::device_copy(7, dev, 1, 8),
            op::alloc_adt(0, &[8, 7], 9),
            op::ret(9),
        ],
    ));
    let mut on_device = VmFn::new(
        "on_device",
        &["x"],
        7,
        vec![
            op::load_const(bytes, 1),
            op::alloc_storage(1, 64, F32, dev, 2),
            op::load_consti(0, 3),
            op::alloc_tensor(2, 3, &[n], F32, 4),
            op::load_const(ones, 5),
            op::invoke_packed(add, 1, &[0, 5, 4]),
            op::ret(4),
        ],
    );
    on_device.param_devices = vec![dev];
    e.funcs.push(on_device);
    e
}

/// The exported library of [`gpu_program`]: the VMExecutable (0) imports the library (1), which
/// imports the device module (2) holding `vadd_kernel0`.
fn gpu_library(n: i64, dev: i64) -> Mod {
    let root = common::source_dir();
    let (key, entry) = if dev == 4 {
        let source = std::fs::read(root.join("tests/fixtures/opencl_kernels.cl")).unwrap();
        let fill2d: common::KernelInfo<'_> =
            ("fill2d_kernel0", &[(3, 64, 1), (0, 32, 1)], &["blockIdx.y", "blockIdx.x", "threadIdx.x"]);
        ("opencl", common::device_entry("cl", &[common::VADD_KERNEL, fill2d], &source))
    } else {
        let ptx = std::fs::read(root.join("tests/fixtures/cuda_vadd.ptx")).unwrap();
        ("cuda", common::device_entry("ptx", &[common::VADD_KERNEL], &ptx))
    };
    let code = gpu_program(n, dev).bytes();
    let mut framed = (code.len() as u64).to_le_bytes().to_vec();
    framed.extend_from_slice(&code);
    let blob =
        common::Blob::default().module("VMExecutable", &framed).lib().module(key, &entry).tree(&[0, 1, 2, 2], &[1, 2]);
    let host = root.join("tests/fixtures/vm_gpu_host.c");
    let so = common::build_shared(&format!("vm-{key}"), &[host], &common::blob_c_source(&blob.bytes()));
    let exec = load(&so).unwrap();
    assert_eq!(type_key(&common::import(&common::import(&exec, 0), 0)), key);
    exec
}

/// Runs [`gpu_program`] on device type `dev` (id 0).
fn check_gpu_program(exec: &Mod, n: i64, dev: i32) {
    let vm = Vm::new(exec, &[(dev, 0, POOLED), (1, 0, POOLED)]);
    let a = input(1, &[n]);
    let b = input(2, &[n]);
    let sum = map2(&a, &b, |x, y| x + y);
    for _ in 0..2 {
        let out = vm.run("main", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(out, Out::Adt(0, vec![Out::Tensor(sum.clone()), Out::Tensor(sum.clone())]));
    }
    // Inputs of a GPU parameter are copied there; the result comes back to the CPU.
    let out = vm.invoke_return_to_device("on_device", (1, 0), std::slice::from_ref(&a)).unwrap();
    assert_eq!(out.tensor(), &map1(&a, |x| x + 1.0));
    // Without the GPU initialised, the parameter has no device.
    let cpu_only = Vm::new(exec, &[(1, 0, POOLED)]);
    let e = cpu_only.run("on_device", &[a]).unwrap_err();
    assert!(e.contains(&format!("device type {dev}")) && e.contains("has not been initialized"), "{e}");
}

fn device_exists(dev: i64) -> bool {
    let a = |i| common::Arg::Int(i);
    common::call_global("runtime.GetDeviceAttr", &[a(dev), a(0), a(0)]).unwrap().int() == 1
}

#[test]
fn opencl_kernels_device_copies_and_storage() {
    let exec = gpu_library(1000, 4);
    if !device_exists(4) {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "no OpenCL device under CI=true");
        eprintln!("SKIP: no OpenCL device here (install pocl-opencl-icd and ocl-icd-libopencl1 to run this test)");
        return;
    }
    check_gpu_program(&exec, 1000, 4);
}

#[test]
fn cuda_kernels_device_copies_and_storage() {
    // Loads everywhere; runs where a CUDA driver and GPU are (scripts/gpu-check.sh, also on the
    // simulator there; TVMRT_REQUIRE_CUDA=1 makes a missing device a failure).
    let exec = gpu_library(1000, 2);
    if !device_exists(2) {
        assert!(std::env::var("TVMRT_REQUIRE_CUDA").as_deref() != Ok("1"), "TVMRT_REQUIRE_CUDA=1 but no cuda(0)");
        eprintln!("SKIP: no CUDA driver or GPU here (cuda(0).exist == 0); the GPU part needs one");
        return;
    }
    check_gpu_program(&exec, 1000, 2);
}
