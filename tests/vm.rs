//! The Relay VM on executables exported by TVM v0.8 (`../shared/fixtures-vm`): every run of the
//! manifest through the C API with both allocators, the Executable module's functions, the split
//! form (`exe.save()` + the library), threads (one executable, many VMs; one VM, two threads), the
//! memory pool's life, and the profiling VM. Programs built by the tests themselves, covering
//! every opcode, and damaged executables are in `tests/vm_programs.rs`.

mod common;

use common::vm::*;
use common::{call, call_global, import, imports_size, last_error, load, type_key, Arg, Mod, Ret};
use std::ffi::c_int;
use std::sync::Arc;
use tvm_runtime::abi::{TVMByteArray, TVMValue};

const NAIVE: i64 = 1;
const POOLED: i64 = 2;

fn fixture(name: &str) -> Option<VmFixture> {
    vm_fixtures().map(|v| v.into_iter().find(|f| f.name == name).unwrap_or_else(|| panic!("fixture {name} missing")))
}

/// Runs every run of a fixture on `vm` and compares with TVM's outputs.
fn check_runs(f: &VmFixture, vm: &Vm) {
    for (k, run) in f.runs.iter().enumerate() {
        let inputs: Vec<Host> = run.inputs.iter().map(|p| read_npy(p)).collect();
        let out = vm.run(&f.function, &inputs).unwrap_or_else(|e| panic!("{} run {k}: {e}", f.name));
        let got = out.flatten();
        assert_eq!(got.len(), run.outputs.len(), "{} run {k}: number of outputs", f.name);
        for (i, (g, p)) in got.iter().zip(&run.outputs).enumerate() {
            assert_close(g, &read_npy(p), f.rtol, f.atol, &format!("{} run {k} output {i}", f.name));
        }
    }
}

#[test]
fn every_fixture_matches_tvm_with_both_allocators() {
    let Some(fixtures) = vm_fixtures() else { return };
    assert!(fixtures.len() >= 5, "expected the five VM fixtures");
    for f in &fixtures {
        let exec = load(&f.file).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(type_key(&exec), "VMExecutable");
        assert_eq!(imports_size(&exec), 1);
        assert_eq!(type_key(&import(&exec, 0)), "library");
        for alloc in [NAIVE, POOLED] {
            let vm = Vm::new(&exec, &[(1, 0, alloc)]);
            assert_eq!(type_key(&vm.m), "VirtualMachine");
            check_runs(f, &vm);
            // Again on the same VM: pooled blocks and cached constants are reused.
            check_runs(f, &vm);
        }
    }
}

#[test]
fn tuple_results_are_adt_objects() {
    let Some(f) = fixture("vm_tuple") else { return };
    let exec = load(&f.file).unwrap();
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    let inputs: Vec<Host> = f.runs[0].inputs.iter().map(|p| read_npy(p)).collect();
    // The nested tuple of the fixture: (x + y, (x * y, relu(x - y))), built with AllocADT tag 0.
    match vm.run("main", &inputs).unwrap() {
        Out::Adt(0, fields) => {
            assert_eq!(fields.len(), 2);
            assert!(matches!(&fields[0], Out::Tensor(_)));
            assert!(matches!(&fields[1], Out::Adt(0, inner) if inner.len() == 2));
        }
        other => panic!("expected an ADT, got {other:?}"),
    }
    // get_num_outputs / get_output see the top-level fields.
    let n = call(&func(&vm.m, "get_num_outputs"), &[]).unwrap().int();
    assert_eq!(n, 2);
    let e = call(&func(&vm.m, "get_output"), &[Arg::Int(1)]).unwrap_err();
    assert!(e.contains("output 1 is not a tensor"), "{e}");
    match call(&func(&vm.m, "get_output"), &[Arg::Int(0)]).unwrap() {
        Ret::Other(13, h) => {
            let got = take_out(TVMValue { v_int64: h }, 13);
            assert_close(got.tensor(), &read_npy(&f.runs[0].outputs[0]), 1e-5, 1e-5, "get_output(0)");
        }
        other => panic!("{other:?}"),
    }
    assert!(call(&func(&vm.m, "get_output"), &[Arg::Int(2)]).unwrap_err().contains("output 2 of 2"));
}

#[test]
fn invoke_stateful_get_output_and_return_to_device() {
    let Some(f) = fixture("vm_dyn_batch") else { return };
    let exec = load(&f.file).unwrap();
    let vm = Vm::new(&exec, &[(1, 0, POOLED)]);
    // Before any invoke: one output, none to get.
    assert_eq!(call(&func(&vm.m, "get_num_outputs"), &[]).unwrap().int(), 1);
    assert!(call(&func(&vm.m, "get_output"), &[Arg::Int(0)]).unwrap_err().contains("invoke a function first"));
    for run in &f.runs {
        let input = read_npy(&run.inputs[0]);
        let want = read_npy(&run.outputs[0]);
        let a = Array::new(&input);
        vm.set_input("main", &[&a]).unwrap();
        assert!(matches!(call(&func(&vm.m, "invoke_stateful"), &[Arg::Str("main")]).unwrap(), Ret::Null));
        assert_eq!(call(&func(&vm.m, "get_num_outputs"), &[]).unwrap().int(), 1);
        match call(&func(&vm.m, "get_output"), &[Arg::Int(0)]).unwrap() {
            Ret::Other(13, h) => {
                assert_close(take_out(TVMValue { v_int64: h }, 13).tensor(), &want, 1e-5, 1e-5, "get_output")
            }
            other => panic!("{other:?}"),
        }
        let e = call(&func(&vm.m, "get_output"), &[Arg::Int(1)]).unwrap_err();
        assert!(e.contains("only one item"), "{e}");
        let out = vm.invoke_return_to_device("main", (1, 0), &[input]).unwrap();
        assert_close(out.tensor(), &want, 1e-5, 1e-5, "invoke_return_to_device");
    }
    assert_eq!(call(&func(&vm.m, "get_input_index"), &[Arg::Str("data"), Arg::Str("main")]).unwrap().int(), 0);
    assert_eq!(call(&func(&vm.m, "get_input_index"), &[Arg::Str("nope"), Arg::Str("main")]).unwrap().int(), -1);
    assert!(call(&func(&vm.m, "get_input_index"), &[Arg::Str("data"), Arg::Str("other")]).is_err());
    let e = func_error(&vm.m, "no_such_function").expect("unknown names are errors");
    assert!(e.contains("Unknown packed function: no_such_function"), "{e}");
}

#[test]
fn executable_functions() {
    let Some(f) = fixture("vm_mlp") else { return };
    let exec = load(&f.file).unwrap();
    let code = executable_bytes_of(&f.file);
    // save() writes the executable back byte for byte.
    match call(&func(&exec, "save"), &[]).unwrap() {
        Ret::Bytes(b) => assert!(b == code, "save() differs from the exported executable"),
        other => panic!("{other:?}"),
    }
    // The texts, against what the bytes say (read independently by the test's own parser).
    let bytecode = match call(&func(&exec, "get_bytecode"), &[]).unwrap() {
        Ret::Str(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(
        bytecode.starts_with("VM Function[0]: main(data)\n# reg file size = 13\n# instruction count = 15\n"),
        "{bytecode}"
    );
    assert!(bytecode.contains(" 6: 4 0 4 1 0 5 6 4   # invoke_packed PackedFunc[0] (in: $0, $5, $6, out: $4)\n"));
    assert!(bytecode.contains(" 3: 5 2 3 2 32 1 2 4 1 128   # alloc_tensor $4 $2 $3 [1, 128] float32\n"));
    assert!(bytecode.contains("14: 1 10   # ret $10\n\n"));
    let consts = match call(&func(&exec, "get_constants"), &[]).unwrap() {
        Ret::Str(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(consts.lines().count(), 8);
    assert!(consts.contains("VM Constant[2]: has shape float32[8, 784, 16] on device of type 1\n"));
    assert!(consts.contains("VM Constant[0]: has shape int64[] on device of type 1\n"));
    let stats = match call(&func(&exec, "get_stats"), &[]).unwrap() {
        Ret::Str(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        stats,
        "Relay VM executable statistics:\n  Constant shapes (# 8): [scalar, scalar, [8, 784, 16], \n[1, 128], \nscalar, \
         scalar, [1, 128, 10], \n[1, 10],]\n  Globals (#1): [(\"main\", 0)]\n  Primitive ops (#2): \
         [fused_nn_contrib_dense_pack_add_nn_relu, fused_nn_contrib_dense_pack_add]\n"
    );
    assert_eq!(call(&func(&exec, "get_function_arity"), &[Arg::Str("main")]).unwrap().int(), 1);
    assert_eq!(call(&func(&exec, "get_function_arity"), &[Arg::Str("nope")]).unwrap().int(), -1);
    assert!(matches!(call(&func(&exec, "get_function_param_name"), &[Arg::Str("main"), Arg::Int(0)]).unwrap(),
        Ret::Str(s) if s == "data"));
    for (f, i) in [("main", 1), ("main", -1), ("nope", 0)] {
        let r = call(&func(&exec, "get_function_param_name"), &[Arg::Str(f), Arg::Int(i)]).unwrap();
        assert!(matches!(r, Ret::Str(s) if s.is_empty()), "{f} {i}");
    }
    match call(&func(&exec, "get_lib"), &[]).unwrap() {
        Ret::Module(h) => assert_eq!(type_key(&Mod(h)), "library"),
        other => panic!("{other:?}"),
    }
    let m = Arg::Module(&exec);
    assert_eq!(call_global("runtime.GetNumOfGlobals", &[Arg::Module(&exec)]).unwrap().int(), 1);
    assert!(
        matches!(call_global("runtime.GetGlobalFields", &[Arg::Module(&exec), Arg::Int(0)]).unwrap(), Ret::Str(s) if s == "main")
    );
    assert_eq!(call_global("runtime.GetNumOfPrimitives", &[m]).unwrap().int(), 2);
    assert!(matches!(call_global("runtime.GetPrimitiveFields", &[Arg::Module(&exec), Arg::Int(1)]).unwrap(),
        Ret::Str(s) if s == "fused_nn_contrib_dense_pack_add"));
    assert!(call_global("runtime.GetPrimitiveFields", &[Arg::Module(&exec), Arg::Int(2)]).is_err());
    assert!(call_global("runtime.GetNumOfGlobals", &[Arg::Module(&import(&exec, 0))])
        .unwrap_err()
        .contains("VMExecutable"));
    let e = func_error(&exec, "run").expect("unknown names are errors");
    assert!(e.contains("Unknown packed function: run"), "{e}");
    // runtime._VirtualMachine makes the same VM as vm_load_executable; other modules are refused.
    match call_global("runtime._VirtualMachine", &[Arg::Module(&exec)]).unwrap() {
        Ret::Module(h) => {
            let vm = Vm { m: Mod(h) };
            vm.init(&[(1, 0, POOLED)]).unwrap();
            check_runs(&f, &vm);
        }
        other => panic!("{other:?}"),
    }
    assert!(call_global("runtime._VirtualMachine", &[Arg::Module(&import(&exec, 0))]).is_err());
}

/// `runtime.Load_Executable(code, lib)`.
fn load_executable(code: &[u8], lib: &Mod) -> Result<Mod, String> {
    let g = common::global("runtime.Load_Executable").unwrap();
    let ba = TVMByteArray { data: code.as_ptr().cast(), size: code.len() };
    let args = [
        (TVMValue { v_handle: (&ba as *const TVMByteArray).cast_mut().cast() }, 12),
        (TVMValue { v_handle: lib.0 }, 9),
    ];
    match call_raw(&g, &args)? {
        (v, 9) => Ok(Mod(unsafe_handle(v))),
        (_, c) => panic!("Load_Executable returned code {c}"),
    }
}

fn unsafe_handle(v: TVMValue) -> *mut std::ffi::c_void {
    // SAFETY: code 9 carries v_handle.
    unsafe { v.v_handle }
}

#[test]
fn split_form_and_executable_files() {
    let Some(f) = fixture("vm_dyn_batch") else { return };
    let exec = load(&f.file).unwrap();
    let lib = import(&exec, 0);
    let code = match call(&func(&exec, "save"), &[]).unwrap() {
        Ret::Bytes(b) => b,
        other => panic!("{other:?}"),
    };
    let split = load_executable(&code, &lib).unwrap();
    assert_eq!(type_key(&split), "VMExecutable");
    check_runs(&f, &Vm::new(&split, &[(1, 0, NAIVE)]));
    // A VMExecutable saved to a file loads with format "VMExecutable"; without its library no
    // VM can be made until the library is imported.
    let path = common::out_dir().join(format!("dyn_batch-{}.vmexec", std::process::id()));
    call_global("runtime.ModuleSaveToFile", &[Arg::Module(&exec), Arg::Str(path.to_str().unwrap()), Arg::Str("")])
        .unwrap();
    let from_file =
        match call_global("runtime.ModuleLoadFromFile", &[Arg::Str(path.to_str().unwrap()), Arg::Str("VMExecutable")])
            .unwrap()
        {
            Ret::Module(h) => Mod(h),
            other => panic!("{other:?}"),
        };
    let e = Vm::create(&from_file).err().expect("no library");
    assert!(e.contains("kernel library must non-be null"), "{e}");
    // SAFETY: live module handles.
    assert_eq!(unsafe { tvm_runtime::classic_api::runtime_api::TVMModImport(from_file.0, lib.0) }, 0);
    check_runs(&f, &Vm::new(&from_file, &[(1, 0, POOLED)]));
    let _ = std::fs::remove_file(&path);
    // A library without the primitives is refused when the VM is made.
    let other = common::build_testlib("vm-nolib", None);
    let other = load(&other).unwrap();
    let exe2 = load_executable(&code, &other).unwrap();
    let e = Vm::create(&exe2).err().expect("primitives missing");
    assert!(e.contains("Cannot find function in module: shape_func_nn_contrib_dense_pack_add_nn_relu"), "{e}");
    // A null library is refused.
    let g = common::global("runtime.Load_Executable").unwrap();
    let ba = TVMByteArray { data: code.as_ptr().cast(), size: code.len() };
    let args =
        [(TVMValue { v_handle: (&ba as *const TVMByteArray).cast_mut().cast() }, 12), (TVMValue { v_int64: 0 }, 4)];
    assert!(call_raw(&g, &args).unwrap_err().contains("library can not be null"));
}

#[test]
fn runtime_errors_leave_the_vm_usable() {
    let Some(f) = fixture("vm_dyn_batch") else { return };
    let exec = load(&f.file).unwrap();
    let vm = Vm::create(&exec).unwrap();
    let input = read_npy(&f.runs[1].inputs[0]);
    // Not initialised: the inputs have no device.
    let e = vm.run("main", std::slice::from_ref(&input)).unwrap_err();
    assert!(e.contains("has not been initialized"), "{e}");
    assert!(vm.init(&[(1, 0, 3)]).unwrap_err().contains("Unknown allocator type: 3"));
    let g = func(&vm.m, "init");
    let one = (TVMValue { v_int64: 1 }, 0 as c_int);
    assert!(call_raw(&g, &[one, one]).unwrap_err().contains("triples"));
    assert!(vm.init(&[(1000, 0, 1)]).is_err());
    vm.init(&[(1, 0, POOLED)]).unwrap();
    let e = vm.invoke("main").unwrap_err();
    assert!(e.contains("Input has not been set for function main"), "{e}");
    assert!(vm.invoke("other").unwrap_err().contains("Cannot find function other"));
    let a = Array::new(&input);
    let e = vm.set_input("main", &[&a, &a]).unwrap_err();
    assert!(e.contains("doesn't match the number of arguments"), "{e}");
    // A kernel error (wrong feature size) names the primitive; the VM runs again afterwards.
    let bad = Host::f32(&[2, 3], &[0.0; 6]);
    let e = vm.run("main", &[bad]).unwrap_err();
    assert!(e.contains("InvokePacked"), "{e}");
    check_runs(&f, &vm);
    // A DLTensor (code 7) input is copied into a new array.
    let h = Array::new(&input);
    let n = common::c("main");
    let args = [(TVMValue { v_str: n.as_ptr() }, 11), (TVMValue { v_handle: h.0.cast() }, 7)];
    call_raw(&func(&vm.m, "set_input"), &args).unwrap();
    drop(h);
    let out = vm.invoke("main").unwrap();
    assert_close(out.tensor(), &read_npy(&f.runs[1].outputs[0]), 1e-5, 1e-5, "DLTensor input");
    // Anything else is refused.
    let args = [(TVMValue { v_str: n.as_ptr() }, 11), (TVMValue { v_int64: 3 }, 0)];
    assert!(call_raw(&func(&vm.m, "set_input"), &args).is_err());
}

/// A handle shared between threads.
struct Shared<T>(T);
// SAFETY: module handles may be used from any thread: the runtime's objects are thread-safe and
// a VM serialises calls to itself.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

#[test]
fn four_threads_four_vms_one_executable() {
    let Some(f) = fixture("vm_dyn_batch") else { return };
    let exec = Arc::new(Shared(load(&f.file).unwrap()));
    let runs: Arc<Vec<(Host, Host)>> =
        Arc::new(f.runs.iter().map(|r| (read_npy(&r.inputs[0]), read_npy(&r.outputs[0]))).collect());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let exec = exec.clone();
            let runs = runs.clone();
            std::thread::spawn(move || {
                let exec = exec;
                let vms: Vec<Vm> =
                    (0..4).map(|k| Vm::new(&exec.0, &[(1, 0, if k % 2 == 0 { POOLED } else { NAIVE })])).collect();
                for round in 0..6 {
                    for (k, vm) in vms.iter().enumerate() {
                        let (input, want) = &runs[(t + k + round) % runs.len()];
                        let out = vm.run("main", std::slice::from_ref(input)).unwrap();
                        assert_close(out.tensor(), want, 1e-5, 1e-5, &format!("thread {t} vm {k} round {round}"));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread panicked");
    }
}

#[test]
fn one_vm_called_from_two_threads_serialises() {
    let Some(f) = fixture("vm_dyn_batch") else { return };
    let exec = load(&f.file).unwrap();
    let vm = Arc::new(Shared(Vm::new(&exec, &[(1, 0, POOLED)])));
    let runs: Vec<(Host, Host)> = f.runs.iter().map(|r| (read_npy(&r.inputs[0]), read_npy(&r.outputs[0]))).collect();
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let vm = vm.clone();
            let runs = runs.clone();
            std::thread::spawn(move || {
                for round in 0..40 {
                    let (input, want) = &runs[(t + round) % runs.len()];
                    // One call sets the inputs and runs: the other thread's inputs cannot interleave.
                    let out = vm.0.invoke_return_to_device("main", (1, 0), std::slice::from_ref(input)).unwrap();
                    assert_close(out.tensor(), want, 1e-5, 1e-5, &format!("thread {t} round {round}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread panicked");
    }
}

#[test]
fn profiling_vm_reports_every_primitive() {
    let Some(f) = fixture("vm_mlp") else { return };
    let exec = load(&f.file).unwrap();
    let vm = match call_global("runtime._VirtualMachineDebug", &[Arg::Module(&exec)]).unwrap() {
        Ret::Module(h) => Vm { m: Mod(h) },
        other => panic!("{other:?}"),
    };
    assert_eq!(type_key(&vm.m), "VirtualMachine");
    vm.init(&[(1, 0, POOLED)]).unwrap();
    let input = Array::new(&read_npy(&f.runs[0].inputs[0]));
    vm.set_input("main", &[&input]).unwrap();
    let json = match call(&func(&vm.m, "profile_rpc"), &[Arg::Str("main")]).unwrap() {
        Ret::Str(s) => s,
        other => panic!("{other:?}"),
    };
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let calls = j["calls"].as_array().unwrap();
    let names: Vec<&str> = calls.iter().map(|c| c["Name"]["string"].as_str().unwrap()).collect();
    assert!(names.contains(&"fused_nn_contrib_dense_pack_add_nn_relu"), "{names:?}");
    assert!(names.contains(&"fused_nn_contrib_dense_pack_add"));
    assert_eq!(names.iter().filter(|n| n.starts_with("VM::AllocStorage")).count(), 2);
    let dense = calls.iter().find(|c| c["Name"]["string"] == "fused_nn_contrib_dense_pack_add").unwrap();
    assert_eq!(dense["weight_layout"]["string"], "NC10n");
    assert_eq!(dense["Hash"]["string"], "a9d0969279bff478");
    assert_eq!(
        dense["Argument Shapes"]["string"],
        "float32[1, 128], float32[1, 128, 10], float32[1, 10], float32[1, 10]"
    );
    assert!(j["device_metrics"]["cpu0"]["Duration (us)"]["microseconds"].as_f64().unwrap() > 0.0);
    // profile() returns a Report object that the profiling globals read.
    let main = common::c("main");
    let (rv, rc) = call_raw(&func(&vm.m, "profile"), &[(TVMValue { v_str: main.as_ptr() }, 11)]).unwrap();
    assert_eq!(rc, 8);
    // SAFETY: code 8 carries an owned object handle.
    let report = unsafe { rv.v_handle };
    let mut tindex = 0u32;
    // SAFETY: a live object handle and a valid out-pointer.
    assert_eq!(unsafe { tvm_runtime::classic_api::object::TVMObjectGetTypeIndex(report, &mut tindex) }, 0);
    let mut key = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the key is a malloc'ed string we free.
    assert_eq!(unsafe { tvm_runtime::classic_api::object::TVMObjectTypeIndex2Key(tindex, &mut key) }, 0);
    // SAFETY: a NUL-terminated string from TVMObjectTypeIndex2Key, freed once.
    assert_eq!(unsafe { common::from_c(key) }, "runtime.profiling.Report");
    // SAFETY: as above.
    unsafe { libc::free(key.cast()) };
    // SAFETY: the owned report handle, released once.
    assert_eq!(unsafe { tvm_runtime::classic_api::object::TVMObjectFree(report) }, 0);
    // The plain VM has no profile function.
    let plain = Vm::new(&exec, &[(1, 0, POOLED)]);
    assert!(func_error(&plain.m, "profile").is_some());
    assert!(last_error().contains("Unknown packed function: profile"));
}
