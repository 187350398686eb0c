"""Drives libtvm_runtime.so through ctypes the way TVM v0.18's Python FFI (tvm/_ffi/_ctypes,
base.py) does, on TVM v0.18's exports: bool arguments (type code 15, written as a C bool),
the Python C-API functions registered through TVMBackendRegisterEnvCAPI, exceptions raised in
callbacks handed over with TVMAPISetLastPythonError and taken back with TVMGetLastPythonError /
TVMDropLastPythonError, TVMArrayAllocWithScope with a ShapeTuple, the 12-argument
RPCTimeEvaluator, the graph executor's get_input_info and the AOT executor. Run with
`python3 -m pytest tests/python` after `cargo build --release` (TVM_LIBRARY_PATH may name the
library directory; default target/release)."""
import ctypes
import gc
import os
import struct
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB_DIR = os.environ.get("TVM_LIBRARY_PATH", os.path.join(ROOT, "target", "release"))
FIXTURES = os.environ.get("TVM_FIXTURES_V018", os.path.join(ROOT, "..", "shared", "fixtures-v0.18"))

lib = ctypes.CDLL(os.path.join(LIB_DIR, "libtvm_runtime.so"), ctypes.RTLD_GLOBAL)
lib.TVMGetLastError.restype = ctypes.c_char_p
lib.TVMGetLastPythonError.restype = ctypes.c_void_p
lib.TVMGetLastBacktrace.restype = ctypes.c_char_p

# What v0.18's packed_func.py does at import.
for _name in ["Py_IncRef", "Py_DecRef", "PyGILState_Ensure", "PyGILState_Release", "PyErr_CheckSignals"]:
    assert lib.TVMBackendRegisterEnvCAPI(_name.encode(), getattr(ctypes.pythonapi, _name)) == 0


class TVMValue(ctypes.Union):
    # v0.18 adds v_bool: a Python bool is written as one byte into a zeroed value.
    _fields_ = [("v_int64", ctypes.c_int64), ("v_bool", ctypes.c_bool), ("v_float64", ctypes.c_double),
                ("v_handle", ctypes.c_void_p), ("v_str", ctypes.c_char_p)]


class TVMByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_byte)), ("size", ctypes.c_size_t)]


INT, FLOAT, HANDLE, NULL, DEVICE, OBJECT, MODULE, FUNC, STR, BYTES, NDARRAY, BOOL = (
    0, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 15)

TVMPackedCFunc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(TVMValue), ctypes.POINTER(ctypes.c_int),
                                  ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class Handle:
    """An owned handle freed with `free` (TVMObjectFree, TVMModFree, TVMFuncFree, TVMArrayFree)."""

    def __init__(self, handle, code):
        self.handle, self.code = handle, code

    def __del__(self):
        free = {FUNC: lib.TVMFuncFree, MODULE: lib.TVMModFree, NDARRAY: lib.TVMArrayFree}.get(self.code, lib.TVMObjectFree)
        assert free(ctypes.c_void_p(self.handle)) == 0

    def __call__(self, *args):
        return call(self, *args)

    def get(self, name):
        h = ctypes.c_void_p()
        check(lib.TVMModGetFunction(ctypes.c_void_p(self.handle), name.encode(), 0, ctypes.byref(h)))
        assert h.value, name
        return Handle(h.value, FUNC)


def raise_last_ffi_error():
    """base.raise_last_ffi_error of v0.18: the Python exception first, else the message."""
    py_err = lib.TVMGetLastPythonError()
    if py_err is None:
        raise RuntimeError(lib.TVMGetLastError().decode())
    err = ctypes.cast(ctypes.c_void_p(py_err), ctypes.py_object).value
    lib.TVMGetLastBacktrace()
    lib.TVMDropLastPythonError()
    raise err


def check(rc):
    if rc != 0:
        raise_last_ffi_error()


_keep = []


def make_args(args):
    n = len(args)
    values, codes, temp = (TVMValue * n)(), (ctypes.c_int * n)(), []
    for i, a in enumerate(args):
        if isinstance(a, Handle):
            values[i].v_handle, codes[i] = a.handle, (OBJECT if a.code == OBJECT else a.code)
        elif isinstance(a, bool):
            values[i].v_bool, codes[i] = a, BOOL
        elif isinstance(a, int):
            values[i].v_int64, codes[i] = a, INT
        elif isinstance(a, float):
            values[i].v_float64, codes[i] = a, FLOAT
        elif isinstance(a, str):
            values[i].v_str, codes[i] = a.encode(), STR
        elif isinstance(a, bytes):
            buf = (ctypes.c_byte * len(a)).from_buffer_copy(a)
            arr = TVMByteArray(ctypes.cast(buf, ctypes.POINTER(ctypes.c_byte)), len(a))
            temp += [buf, arr]
            values[i].v_handle, codes[i] = ctypes.addressof(arr), BYTES
        elif isinstance(a, tuple) and a[0] == "device":
            values[i].v_int64, codes[i] = struct.unpack("q", struct.pack("ii", a[1], a[2]))[0], DEVICE
        elif a is None:
            values[i].v_handle, codes[i] = None, NULL
        elif callable(a):
            f = convert_to_tvm_func(a)
            temp.append(f)
            values[i].v_handle, codes[i] = f.handle, FUNC
        else:
            raise TypeError(type(a))
    return values, codes, temp


def decode(v, code):
    if code == INT:
        return v.v_int64
    if code == BOOL:
        return v.v_bool
    if code == FLOAT:
        return v.v_float64
    if code == NULL:
        return None
    if code == STR:
        return v.v_str.decode()
    if code == BYTES:
        ba = ctypes.cast(v.v_handle, ctypes.POINTER(TVMByteArray)).contents
        return ctypes.string_at(ba.data, ba.size)
    if code in (OBJECT, MODULE, FUNC, NDARRAY):
        return Handle(v.v_handle, code)
    raise TypeError("code %d" % code)


def call(f, *args):
    values, codes, temp = make_args(args)
    rv, rc = TVMValue(), ctypes.c_int()
    check(lib.TVMFuncCall(ctypes.c_void_p(f.handle), values, codes, len(args), ctypes.byref(rv), ctypes.byref(rc)))
    return decode(rv, rc.value)


def convert_to_tvm_func(pyfunc):
    """convert_to_tvm_func of v0.18: exceptions go back through TVMAPISetLastPythonError."""

    def cfun(args, codes, num_args, ret, _):
        try:
            rv = pyfunc(*[decode(args[i], codes[i]) if codes[i] not in (OBJECT, MODULE, NDARRAY, FUNC)
                          else codes[i] for i in range(num_args)])
        except Exception as err:  # pylint: disable=broad-except
            lib.TVMAPISetLastPythonError(ctypes.py_object(err))
            return -1
        if rv is not None:
            values, tcodes, _temp = make_args((rv,))
            if lib.TVMCFuncSetReturn(ctypes.c_void_p(ret), values, tcodes, 1) != 0:
                raise_last_ffi_error()
        return 0

    f = TVMPackedCFunc(cfun)
    _keep.append(f)
    h = ctypes.c_void_p()
    check(lib.TVMFuncCreateFromCFunc(f, None, None, ctypes.byref(h)))
    return Handle(h.value, FUNC)


def get_global(name):
    h = ctypes.c_void_p()
    check(lib.TVMFuncGetGlobal(name.encode(), ctypes.byref(h)))
    assert h.value, name
    return Handle(h.value, FUNC)


def fixture(name):
    path = os.path.join(FIXTURES, name)
    if not os.path.isfile(path):
        if os.environ.get("CI") == "true":
            pytest.fail("fixture missing under CI: " + path)
        pytest.skip("fixture not found: " + path)
    return path


def nd_empty(shape, dtype="float32"):
    """tvm.nd.empty of v0.18: TVMArrayAllocWithScope(ShapeTuple, dtype, device, None)."""
    st = get_global("runtime.ShapeTuple")(*[int(d) for d in shape])
    return get_global("runtime.TVMArrayAllocWithScope")(st, dtype, ("device", 1, 0), None)


def nd_array(x):
    x = np.ascontiguousarray(x, dtype="float32")
    a = nd_empty(x.shape)
    check(lib.TVMArrayCopyFromBytes(ctypes.c_void_p(a.handle), x.ctypes.data_as(ctypes.c_void_p), x.nbytes))
    return a


def to_numpy(a, shape):
    out = np.empty(shape, "float32")
    check(lib.TVMArrayCopyToBytes(ctypes.c_void_p(a.handle), out.ctypes.data_as(ctypes.c_void_p), out.nbytes))
    return out


class MyError(ValueError):
    pass


def test_exceptions_come_back_unchanged():
    err = MyError("bad input")

    def bad(x):
        raise err

    f = convert_to_tvm_func(bad)
    before = sys.getrefcount(err)
    for _ in range(3):
        with pytest.raises(MyError) as info:
            f(3)
        assert info.value is err, "the very object the callback raised"
        assert lib.TVMGetLastPythonError() is None
    # Through the registry and a second callback: C -> runtime -> Python -> runtime -> Python.
    check(lib.TVMFuncRegisterGlobal(b"compat_py.bad", ctypes.c_void_p(f.handle), 1))
    outer = convert_to_tvm_func(lambda: get_global("compat_py.bad")(7))
    with pytest.raises(MyError) as info:
        outer()
    assert info.value is err
    check(lib.TVMFuncRemoveGlobal(b"compat_py.bad"))
    # Every reference the runtime took is given back.
    del info
    err.__traceback__ = None
    gc.collect()
    assert sys.getrefcount(err) == before
    # Errors of the runtime itself still come as messages.
    with pytest.raises(RuntimeError, match="expected a module"):
        get_global("runtime.ModuleGetImport")(None, 0)
    assert lib.TVMGetLastBacktrace() is None


def test_bool_arguments():
    echo = convert_to_tvm_func(lambda x: x)
    assert echo(True) == 1 and echo(False) == 0
    st = get_global("runtime.ShapeTuple")(True, False, 3)
    assert get_global("runtime.GetShapeTupleElem")(st, 0) == 1
    assert get_global("runtime.GetShapeTupleElem")(st, 1) == 0
    m_path = fixture("add_one.so")
    m = get_global("runtime.ModuleLoadFromFile")(m_path, "")
    assert get_global("runtime.ModuleImplementsFunction")(m, "add_one", False) == 1
    assert get_global("runtime.ModuleImplementsFunction")(m, "nope", True) == 0
    assert get_global("runtime.ModuleGetPropertyMask")(m) == 0b011


def test_operator_and_time_evaluator():
    m = get_global("runtime.ModuleLoadFromFile")(fixture("add_one.so"), "")
    a_np = np.load(fixture("add_one.A.npy"))
    a, b = nd_array(a_np), nd_empty(a_np.shape)
    m.get("add_one")(a, b)
    np.testing.assert_allclose(to_numpy(b, a_np.shape), np.load(fixture("add_one.B.npy")), rtol=1e-6)
    ev = get_global("runtime.RPCTimeEvaluator")(m, "add_one", 1, 0, 2, 3, 0, 100, 0, 1, 0, "")
    blob = ev(a, b)
    assert len(struct.unpack("@ddd", blob)) == 3


def test_graph_executor_input_info():
    lib_mod = get_global("runtime.ModuleLoadFromFile")(fixture("mlp.so"), "")
    gmod = lib_mod.get("default")(("device", 1, 0))
    info = gmod.get("get_input_info")()
    shapes = get_global("runtime.MapGetItem")(info, "shape")
    data_shape = get_global("runtime.MapGetItem")(shapes, "data")
    x = np.load(fixture("mlp.input.data.npy"))
    n = get_global("runtime.GetShapeTupleSize")(data_shape)
    assert tuple(get_global("runtime.GetShapeTupleElem")(data_shape, i) for i in range(n)) == x.shape
    dtypes = get_global("runtime.MapGetItem")(info, "dtype")
    assert get_global("runtime.GetFFIString")(get_global("runtime.MapGetItem")(dtypes, "data")) == "float32"
    # GraphModule.set_input(key, value) of v0.18: get_input(key) then copyfrom.
    inp = gmod.get("get_input")("data")
    check(lib.TVMArrayCopyFromBytes(ctypes.c_void_p(inp.handle), x.ctypes.data_as(ctypes.c_void_p), x.nbytes))
    gmod.get("run")()
    want = np.load(fixture("mlp.output.0.npy"))
    np.testing.assert_allclose(to_numpy(gmod.get("get_output")(0), want.shape), want, rtol=1e-5, atol=1e-5)


def test_aot_executor():
    lib_mod = get_global("runtime.ModuleLoadFromFile")(fixture("aot_mlp.so"), "")
    am = lib_mod.get("default")(("device", 1, 0))
    assert am.get("get_num_inputs")() == 1
    assert am.get("get_input_name")(0) == "data"
    assert am.get("get_input_index")("data") == 0
    x = np.load(fixture("aot_mlp.input.data.npy"))
    inp = am.get("get_input")("data")
    check(lib.TVMArrayCopyFromBytes(ctypes.c_void_p(inp.handle), x.ctypes.data_as(ctypes.c_void_p), x.nbytes))
    am.get("run")()
    want = np.load(fixture("aot_mlp.output.0.npy"))
    np.testing.assert_allclose(to_numpy(am.get("get_output")(0), want.shape), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="Invalid input name"):
        am.get("get_input_index")("nope")
