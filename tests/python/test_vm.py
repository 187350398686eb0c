"""The Relay VM driven through ctypes the way TVM v0.8's python/tvm/runtime/vm.py drives it:
Executable's functions (save, get_lib, get_bytecode, get_stats, get_function_arity,
get_function_param_name, the runtime.GetNumOf*/Get*Fields globals), VirtualMachine(exe, cpu)
with _setup_device's init triples, set_input + invoke, invoke_stateful + get_output,
get_num_outputs, Executable.load_exec (runtime.Load_Executable) and the profiling VM, on the VM
executables exported by TVM v0.8 (../shared/fixtures-vm), compared with TVM's outputs."""
import ctypes
import json
import os

import numpy as np
import pytest

from test_ctypes_ffi import DLTensor, Module, NDArray, Object, check, empty, get_global, lib, ROOT

VM_FIXTURES = os.environ.get("TVM_VM_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures-vm"))
NAIVE_ALLOCATOR, POOLED_ALLOCATOR = 1, 2
DTYPES = {(2, 32): "float32", (0, 32): "int32", (0, 64): "int64", (1, 1): "bool"}


def manifest():
    path = os.path.join(VM_FIXTURES, "manifest.json")
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":
            pytest.fail("VM fixtures missing at %s (required under CI)" % VM_FIXTURES)
        pytest.skip("VM fixtures not found at %s" % VM_FIXTURES)
    with open(path) as f:
        return {k: v for k, v in json.load(f)["fixtures"].items() if v["kind"] == "vm"}


def to_numpy(nd):
    t = nd.tensor
    out = np.empty(nd.shape, dtype=DTYPES[(t.dtype.code, t.dtype.bits)])
    check(lib.TVMArrayCopyToBytes(nd.handle, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(out.nbytes)))
    return out


def nd_array(a):
    """tvm.nd.array(a, tvm.cpu(0)) for float32 arrays."""
    out = empty(a.shape)
    out.copyfrom(a)
    return out


class Executable:
    """tvm.runtime.vm.Executable."""

    def __init__(self, mod):
        self.mod = mod
        self._save = mod["save"]
        self._get_lib = mod["get_lib"]
        self._get_bytecode = mod["get_bytecode"]
        self._get_constants = mod["get_constants"]
        self._get_stats = mod["get_stats"]
        self._get_function_arity = mod["get_function_arity"]
        self._get_function_param_name = mod["get_function_param_name"]

    def save(self):
        return self._save(), self._get_lib()

    @staticmethod
    def load_exec(bytecode, lib_mod):
        return Executable(get_global("runtime.Load_Executable")(bytearray(bytecode), lib_mod))

    @property
    def primitive_ops(self):
        n = get_global("runtime.GetNumOfPrimitives")(self.mod)
        return [get_global("runtime.GetPrimitiveFields")(self.mod, i) for i in range(n)]

    @property
    def globals(self):
        n = get_global("runtime.GetNumOfGlobals")(self.mod)
        return [get_global("runtime.GetGlobalFields")(self.mod, i) for i in range(n)]

    def get_function_params(self, name):
        arity = self._get_function_arity(name)
        assert arity >= 0
        return [self._get_function_param_name(name, i) for i in range(arity)]


class VirtualMachine:
    """tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(), memory_cfg)."""

    def __init__(self, exe, memory_cfg=None, debug=False):
        if debug:
            self.module = get_global("runtime._VirtualMachineDebug")(exe.mod)
        else:
            self.module = exe.mod["vm_load_executable"]()
        self._exec = exe
        self._init = self.module["init"]
        self._invoke = self.module["invoke"]
        self._set_input = self.module["set_input"]
        if not debug:
            self._invoke_stateful = self.module["invoke_stateful"]
            self._get_output = self.module["get_output"]
            self._get_num_outputs = self.module["get_num_outputs"]
            self._get_input_index = self.module["get_input_index"]
        alloc = NAIVE_ALLOCATOR if memory_cfg == "naive" else POOLED_ALLOCATOR
        self._init(1, 0, alloc)  # _setup_device with [tvm.cpu()]

    def set_input(self, func_name, *args):
        self._set_input(func_name, *[nd_array(a) for a in args])

    def invoke(self, func_name, *args):
        if args:
            self.set_input(func_name, *args)
        return self._invoke(func_name)

    def invoke_stateful(self, func_name, *args):
        self.set_input(func_name, *args)
        self._invoke_stateful(func_name)


def flatten(result):
    """The result's tensors depth first (ADTs through runtime.GetADTSize/GetADTFields)."""
    if isinstance(result, NDArray):
        return [to_numpy(result)]
    assert isinstance(result, Object)
    n = get_global("runtime.GetADTSize")(result)
    out = []
    for i in range(n):
        out += flatten(get_global("runtime.GetADTFields")(result, i))
    return out


def load_module(path):
    h = ctypes.c_void_p()
    check(lib.TVMModLoadFromFile(path.encode(), b"", ctypes.byref(h)))
    return Module(h)


def check_fixture(vm, f):
    for run in f["runs"]:
        inputs = [np.load(os.path.join(VM_FIXTURES, p)) for p in run["inputs"]]
        got = flatten(vm.invoke(f["function"], *inputs))
        want = [np.load(os.path.join(VM_FIXTURES, p)) for p in run["outputs"]]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=f["rtol"], atol=f["atol"])


@pytest.mark.parametrize("memory_cfg", ["naive", "pooled"])
def test_every_fixture_as_vm_py_runs_it(memory_cfg):
    for name, f in sorted(manifest().items()):
        exe = Executable(load_module(os.path.join(VM_FIXTURES, f["file"])))
        assert exe.mod.type_key == "VMExecutable"
        vm = VirtualMachine(exe, memory_cfg)
        assert vm.module.type_key == "VirtualMachine"
        check_fixture(vm, f)


def test_executable_introspection_and_split_form():
    f = manifest()["vm_dyn_batch"]
    exe = Executable(load_module(os.path.join(VM_FIXTURES, f["file"])))
    assert exe.globals == ["main"]
    assert exe.primitive_ops[0] == "shape_func_nn_contrib_dense_pack_add_nn_relu" and len(exe.primitive_ops) == 6
    assert exe.get_function_params("main") == ["data"]
    assert exe._get_function_arity("missing") == -1
    assert exe._get_bytecode().startswith("VM Function[0]: main(data)\n# reg file size = 41\n")
    assert "Primitive ops (#6)" in exe._get_stats()
    assert exe._get_constants().count("\n") == 22
    code, lib_mod = exe.save()
    assert isinstance(code, bytearray) and lib_mod.type_key == "library"
    exe2 = Executable.load_exec(code, lib_mod)
    check_fixture(VirtualMachine(exe2), f)
    assert exe2._save() == code


def test_stateful_outputs_and_tuples():
    fx = manifest()
    f = fx["vm_tuple"]
    exe = Executable(load_module(os.path.join(VM_FIXTURES, f["file"])))
    vm = VirtualMachine(exe)
    run = f["runs"][0]
    inputs = [np.load(os.path.join(VM_FIXTURES, p)) for p in run["inputs"]]
    vm.invoke_stateful("main", *inputs)
    # The result is (x + y, (x * y, relu(x - y))): output 0 is a tensor, output 1 a tuple.
    assert vm._get_num_outputs() == 2
    out0 = vm._get_output(0)
    assert isinstance(out0, NDArray)
    np.testing.assert_allclose(to_numpy(out0), np.load(os.path.join(VM_FIXTURES, run["outputs"][0])), rtol=1e-5)
    with pytest.raises(Exception, match="not a tensor"):
        vm._get_output(1)
    assert vm._get_input_index("y", "main") == 1
    with pytest.raises(Exception, match="Unknown packed function"):
        vm.module["no_such_function"]


def test_profiler_vm():
    f = manifest()["vm_mlp"]
    exe = Executable(load_module(os.path.join(VM_FIXTURES, f["file"])))
    vm = VirtualMachine(exe, debug=True)
    vm.set_input("main", np.load(os.path.join(VM_FIXTURES, f["runs"][0]["inputs"][0])))
    report = vm.module["profile"]("main", None)
    table = get_global("runtime.profiling.AsTable")(report, 1, 1, 1)
    assert "fused_nn_contrib_dense_pack_add_nn_relu" in table
    calls = json.loads(vm.module["profile_rpc"]("main"))["calls"]
    assert any(c["Name"]["string"] == "fused_nn_contrib_dense_pack_add" for c in calls)
