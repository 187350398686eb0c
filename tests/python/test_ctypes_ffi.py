"""Drives libtvm_runtime.so through ctypes the way TVM v0.8's Python FFI (tvm/_ffi/_ctypes) does:
the same C functions, argument encodings, callbacks and ownership rules. Run with
`python3 -m pytest tests/python` after `cargo build --release` (TVM_LIBRARY_PATH may name the
library directory; default target/release)."""
import ctypes
import os
import struct
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB_DIR = os.environ.get("TVM_LIBRARY_PATH", os.path.join(ROOT, "target", "release"))
FIXTURES = os.environ.get("TVM_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))

lib = ctypes.CDLL(os.path.join(LIB_DIR, "libtvm_runtime.so"), ctypes.RTLD_GLOBAL)
lib.TVMGetLastError.restype = ctypes.c_char_p


class TVMValue(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double),
                ("v_handle", ctypes.c_void_p), ("v_str", ctypes.c_char_p)]


class TVMByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_byte)), ("size", ctypes.c_size_t)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


INT, FLOAT, HANDLE, NULL, DTYPE, DEVICE, DLTENSOR, OBJECT, MODULE, FUNC, STR, BYTES, NDARRAY, RVALUE = (
    0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)

TVMPackedCFunc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(TVMValue), ctypes.POINTER(ctypes.c_int),
                                  ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
TVMCFuncFinalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class TVMError(Exception):
    pass


def check(ret):
    if ret != 0:
        raise TVMError(lib.TVMGetLastError().decode())


class Func:
    """A function handle, freed with TVMFuncFree like Python's PackedFunc."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        check(lib.TVMFuncFree(self.handle))

    def __call__(self, *args):
        n = len(args)
        values = (TVMValue * n)()
        codes = (ctypes.c_int * n)()
        keep = []
        for i, a in enumerate(args):
            if isinstance(a, bool) or isinstance(a, int):
                values[i].v_int64 = int(a); codes[i] = INT
            elif isinstance(a, float):
                values[i].v_float64 = a; codes[i] = FLOAT
            elif isinstance(a, str):
                values[i].v_str = a.encode(); codes[i] = STR
            elif isinstance(a, (bytes, bytearray)):
                buf = (ctypes.c_byte * len(a)).from_buffer_copy(bytes(a))
                arr = TVMByteArray(ctypes.cast(buf, ctypes.POINTER(ctypes.c_byte)), len(a))
                keep += [buf, arr]
                values[i].v_handle = ctypes.addressof(arr); codes[i] = BYTES
            elif isinstance(a, DLDevice):
                # Python packs a device into v_int64, bit-identical to v_device.
                values[i].v_int64 = struct.unpack("q", struct.pack("ii", a.device_type, a.device_id))[0]
                codes[i] = DEVICE
            elif isinstance(a, NDArray):
                values[i].v_handle = a.handle; codes[i] = NDARRAY
            elif isinstance(a, Module):
                values[i].v_handle = a.handle; codes[i] = MODULE
            elif isinstance(a, Object):
                values[i].v_handle = a.handle; codes[i] = OBJECT
            elif isinstance(a, Func):
                values[i].v_handle = a.handle; codes[i] = FUNC
            elif a is None:
                values[i].v_handle = None; codes[i] = NULL
            elif isinstance(a, ctypes.c_void_p):
                values[i].v_handle = a; codes[i] = HANDLE
            else:
                raise TypeError(type(a))
        rv = TVMValue()
        rc = ctypes.c_int()
        check(lib.TVMFuncCall(self.handle, values, codes, ctypes.c_int(n), ctypes.byref(rv), ctypes.byref(rc)))
        return decode(rv, rc.value)


class Object:
    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        check(lib.TVMObjectFree(self.handle))


class Module:
    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        check(lib.TVMModFree(self.handle))

    def get_function(self, name, query_imports=False):
        h = ctypes.c_void_p()
        check(lib.TVMModGetFunction(self.handle, name.encode(), ctypes.c_int(query_imports), ctypes.byref(h)))
        if not h.value:
            raise AttributeError("Module has no function '%s'" % name)
        return Func(h)

    def __getitem__(self, name):
        return self.get_function(name)

    @property
    def type_key(self):
        return get_global("runtime.ModuleGetTypeKey")(self)


class NDArray:
    def __init__(self, handle):
        self.handle = handle
        tindex = ctypes.c_uint()
        check(lib.TVMArrayGetTypeIndex(self.handle, ctypes.byref(tindex)))
        assert tindex.value == 2

    def __del__(self):
        # At interpreter exit module globals may already be gone (an array still referenced
        # from a module-level fixture): the process ends anyway.
        if lib is not None:
            check(lib.TVMArrayFree(self.handle))

    @property
    def tensor(self):
        return ctypes.cast(self.handle, ctypes.POINTER(DLTensor)).contents

    @property
    def shape(self):
        t = self.tensor
        return tuple(t.shape[i] for i in range(t.ndim))

    def numpy(self):
        out = np.empty(self.shape, dtype="float32")
        check(lib.TVMArrayCopyToBytes(self.handle, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(out.nbytes)))
        return out

    def copyfrom(self, a):
        a = np.ascontiguousarray(a, dtype="float32")
        check(lib.TVMArrayCopyFromBytes(self.handle, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)))


def decode(rv, code):
    if code == INT:
        return rv.v_int64
    if code == FLOAT:
        return rv.v_float64
    if code == NULL:
        return None
    if code == STR:
        return rv.v_str.decode()
    if code == BYTES:
        arr = ctypes.cast(rv.v_handle, ctypes.POINTER(TVMByteArray)).contents
        return bytearray(ctypes.string_at(arr.data, arr.size))
    if code == NDARRAY:
        return NDArray(ctypes.c_void_p(rv.v_handle))
    if code == MODULE:
        return Module(ctypes.c_void_p(rv.v_handle))
    if code == FUNC:
        return Func(ctypes.c_void_p(rv.v_handle))
    if code == OBJECT:
        tindex = ctypes.c_uint()
        check(lib.TVMObjectGetTypeIndex(ctypes.c_void_p(rv.v_handle), ctypes.byref(tindex)))
        obj = Object(ctypes.c_void_p(rv.v_handle))
        if tindex.value == 3:  # runtime.String: Python asks GetFFIString for the text
            return get_global("runtime.GetFFIString")(obj)
        return obj
    if code == HANDLE:
        return ctypes.c_void_p(rv.v_handle)
    raise KeyError(code)  # Python's FFI cannot decode codes 1, 5 and 7


def get_global(name, allow_missing=False):
    h = ctypes.c_void_p()
    check(lib.TVMFuncGetGlobal(name.encode(), ctypes.byref(h)))
    if not h.value:
        if allow_missing:
            return None
        raise ValueError("Cannot find global function %s" % name)
    return Func(h)


def empty(shape, dtype="float32"):
    shape_arr = np.array(shape, dtype="int64")
    return get_global("runtime.TVMArrayAllocWithScope")(
        ctypes.c_void_p(shape_arr.ctypes.data), len(shape), dtype, DLDevice(1, 0), None)


def register(name, pyfunc):
    """tvm.register_func: a C callback around a Python function, as the ctypes FFI makes it."""
    def cfun(args, codes, n, ret, _res):
        try:
            vals = []
            for i in range(n):
                if codes[i] in (OBJECT, MODULE, FUNC, NDARRAY, RVALUE):
                    check(lib.TVMCbArgToReturn(ctypes.byref(args[i]), ctypes.byref(ctypes.c_int(codes[i]))))
                vals.append(decode(args[i], codes[i]) if codes[i] != DLTENSOR else args[i].v_handle)
            out = pyfunc(*vals)
            if out is not None:
                v = TVMValue(); c = ctypes.c_int(INT if isinstance(out, int) else STR)
                if isinstance(out, int):
                    v.v_int64 = out
                else:
                    v.v_str = str(out).encode()
                # As TVM does: ctypes passes the handle as an int; wrap it before passing it back.
                check(lib.TVMCFuncSetReturn(ctypes.c_void_p(ret), ctypes.byref(v), ctypes.byref(c), ctypes.c_int(1)))
            return 0
        except Exception as e:  # noqa: BLE001 - errors travel to the caller as TVM errors
            lib.TVMAPISetLastError(("%s: %s" % (type(e).__name__, e)).encode())
            return -1
    cb = TVMPackedCFunc(cfun)
    register.keep.append(cb)
    h = ctypes.c_void_p()
    check(lib.TVMFuncCreateFromCFunc(cb, None, TVMCFuncFinalizer(0), ctypes.byref(h)))
    check(lib.TVMFuncRegisterGlobal(name.encode(), h, ctypes.c_int(0)))
    check(lib.TVMFuncFree(h))


register.keep = []


def list_names():
    size = ctypes.c_int()
    arr = ctypes.POINTER(ctypes.c_char_p)()
    check(lib.TVMFuncListGlobalNames(ctypes.byref(size), ctypes.byref(arr)))
    return [arr[i].decode() for i in range(size.value)]


def test_import_sequence():
    names = list_names()
    runtime = [n for n in names if n.startswith("runtime.") and n.count(".") == 1]
    assert "runtime.String" in runtime and "runtime.ModuleLoadFromFile" in runtime
    for n in runtime:
        assert get_global(n) is not None
    tindex = ctypes.c_uint()
    for key in ["runtime.NDArray", "runtime.String", "runtime.ShapeTuple", "runtime.ADT", "Array", "Map",
                "runtime.profiling.Report"]:
        check(lib.TVMObjectTypeKey2Index(key.encode(), ctypes.byref(tindex)))
    for key in ["IRModule", "tir.PrimFunc", "Target", "runtime.Object"]:
        assert lib.TVMObjectTypeKey2Index(key.encode(), ctypes.byref(tindex)) != 0
    assert get_global("runtime.profiling.PAPIMetricCollector", allow_missing=True) is None
    # Names Python registers itself must be free.
    register("tvm.default_trace_action", lambda *a: None)


def test_callbacks_and_errors():
    register("py.test.add", lambda a, b: a + b)
    assert get_global("py.test.add")(2, 40) == 42

    def fails():
        raise ValueError("bad value from python")
    register("py.test.fail", fails)
    with pytest.raises(TVMError, match="^ValueError: bad value from python"):
        get_global("py.test.fail")()
    kept = []
    register("py.test.keep", lambda arr: kept.append(arr))
    a = empty((3,))
    a.copyfrom(np.array([1, 2, 3]))
    get_global("py.test.keep")(a)
    del a
    np.testing.assert_array_equal(kept[0].numpy(), [1, 2, 3])


def test_containers_and_params():
    s = get_global("runtime.String")("hello")
    assert s == "hello"
    x = empty((2, 2))
    x.copyfrom(np.arange(4).reshape(2, 2))
    m = get_global("runtime.Map")("x", x)
    blob = get_global("runtime.SaveParams")(m)
    assert isinstance(blob, bytearray) and len(blob) > 64
    back = get_global("runtime.LoadParams")(blob)
    items = get_global("runtime.MapItems")(back)
    assert get_global("runtime.ArraySize")(items) == 2
    assert get_global("runtime.ArrayGetItem")(items, 0) == "x"
    np.testing.assert_array_equal(get_global("runtime.ArrayGetItem")(items, 1).numpy(), np.arange(4).reshape(2, 2))
    assert get_global("runtime.GetDeviceAttr")(1, 0, 0) == 1
    assert get_global("runtime.RuntimeEnabled")("cpu") == 1


def fixture(name):
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":
            pytest.fail("fixture missing under CI: " + path)
        pytest.skip("fixture not found: " + path)
    return path


def test_operator_module():
    path = fixture("add_one.so")
    mod = get_global("runtime.ModuleLoadFromFile")(path, "")
    assert mod.type_key == "library"
    a = np.load(fixture("add_one.A.npy"))
    want = np.load(fixture("add_one.B.npy"))
    x = empty(a.shape)
    x.copyfrom(a)
    y = empty(want.shape)
    mod["add_one"](x, y)
    np.testing.assert_array_equal(y.numpy(), want)
    with pytest.raises(AttributeError):
        mod["no_such_function"]


@pytest.mark.parametrize("name", ["mlp", "mlp2", "resnet18"])
def test_graph_module(name):
    path = fixture(name + ".so")
    lib_mod = get_global("runtime.ModuleLoadFromFile")(path, "")
    gmod = lib_mod["default"](DLDevice(1, 0))
    fns = {n: gmod[n] for n in ["set_input", "run", "get_output", "get_input", "get_num_outputs",
                                "get_input_index", "get_num_inputs", "load_params", "share_params"]}
    data = np.load(fixture(name + ".input.data.npy"))
    # GraphModule.set_input: get_input(key).copyfrom(value)
    fns["get_input"]("data").copyfrom(data)
    fns["run"]()
    out = fns["get_output"](0).numpy()
    want = np.load(fixture(name + ".output.0.npy"))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert fns["get_input"]("no_such_input") is None
    # time_evaluator("run", dev, number=2, repeat=3)
    ev = get_global("runtime.RPCTimeEvaluator")(gmod, "run", 1, 0, 2, 3, 0, "")
    blob = ev()
    secs = struct.unpack("@" + "d" * 3, bytes(blob))
    assert all(s > 0 for s in secs)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
