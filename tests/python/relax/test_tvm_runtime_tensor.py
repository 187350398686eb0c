"""TVM v0.27's own Python package (runtime-only mode) over this library: tensors, views,
copies, devices, the time evaluator and parameter blobs, checked against numpy.

Run by scripts/test-tvm-python.sh (TVM_USE_RUNTIME_LIB=1, TVM_LIBRARY_PATH at a folder whose
libtvm_runtime.so is this library, and tvm_ffi's libtvm_ffi.so the same file). The tests also
pass on TVM's own runtime, except the ones marked as this library's (inputs on which TVM's C++
crashes or answers differently)."""

import ctypes
import os
import struct

import numpy as np
import pytest

import tvm
import tvm_ffi
from tvm import runtime

F = runtime._ffi_api

# Whether the process runs on this library (tvm_ffi's library is our libtvm_runtime.so).
OURS = os.path.realpath(tvm_ffi.libinfo.find_libtvm_ffi()).endswith("libtvm_runtime.so")
ours_only = pytest.mark.skipif(not OURS, reason="TVM's own runtime crashes or answers differently here")

DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool"]
SHAPES = [(), (0,), (7,), (2, 3), (4, 1, 5), (3, 0, 2)]


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(size=shape) * 100).astype(dtype)


# --- tensors -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip(shape, dtype):
    x = sample(shape, dtype)
    t = runtime.tensor(x)
    assert isinstance(t, runtime.Tensor)
    assert t.shape == shape
    assert t.dtype == dtype
    assert t.device == tvm.cpu(0)
    y = t.numpy()
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_round_trip_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ["bfloat16", "float8_e4m3fn", "float8_e5m2"]:
        x = (np.arange(12).reshape(3, 4) - 5).astype(getattr(ml_dtypes, name))
        t = runtime.tensor(x)
        assert t.dtype == name
        np.testing.assert_array_equal(t.numpy().astype("float32"), x.astype("float32"))


def test_zero_d_and_empty():
    t = runtime.tensor(np.array(3.5, "float32"))
    assert t.shape == () and t.numpy().shape == () and float(t.numpy()) == 3.5
    e = runtime.tensor(np.zeros((0, 4), "int32"))
    assert e.shape == (0, 4) and e.numpy().shape == (0, 4)
    assert runtime.empty((), "int8").shape == ()
    assert runtime.empty((0,), "float64").numpy().size == 0


def test_empty_shapes_dtypes_and_alignment():
    for shape, dtype in [((2, 3), "float32"), ([5], "int64"), (tvm_ffi.Shape([4, 4]), "float16")]:
        t = runtime.empty(shape, dtype)
        assert t.shape == tuple(shape) and t.dtype == dtype and t.device == tvm.cpu()
        # TVM's Python requires 64-byte aligned, compact data for its own from_dlpack.
        runtime.from_dlpack(t)
    for scope in [None, "global", ""]:
        assert runtime.empty((3,), "int32", mem_scope=scope).shape == (3,)
    t = runtime.empty((2, 2), tvm_ffi.dtype("uint16"))
    assert t.dtype == "uint16"


def test_copyfrom_setitem_and_casting():
    t = runtime.empty((2, 3), "float32")
    x = np.arange(6, dtype="float32").reshape(2, 3)
    assert t.copyfrom(x) is t
    np.testing.assert_array_equal(t.numpy(), x)
    t[:] = np.ones((2, 3), "float32") * 7
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 7, "float32"))
    # Non-matching numpy dtypes and non-contiguous sources are converted first.
    t.copyfrom(np.arange(6, dtype="int64").reshape(3, 2).T.T.reshape(2, 3))
    np.testing.assert_array_equal(t.numpy(), x)
    t.copyfrom(np.asfortranarray(x * 2))
    np.testing.assert_array_equal(t.numpy(), x * 2)
    t.copyfrom([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(t.numpy(), x + 1)
    with pytest.raises(ValueError, match="array shape do not match"):
        t.copyfrom(np.zeros((3, 2), "float32"))


def test_copyto_tensor_and_device():
    x = sample((3, 4), "int32", seed=1)
    a = runtime.tensor(x)
    b = runtime.empty((3, 4), "int32")
    assert a.copyto(b) is b
    np.testing.assert_array_equal(b.numpy(), x)
    c = a.copyto(tvm.cpu())
    assert isinstance(c, runtime.Tensor) and not c.same_as(a)
    np.testing.assert_array_equal(c.numpy(), x)
    # Copies need equal byte sizes only (TVMTensorCopyFromTo), not equal dtypes.
    d = runtime.empty((12,), "float32")
    F.TVMTensorCopyFromTo(a, d)
    np.testing.assert_array_equal(d.numpy().view("int32"), x.reshape(-1))
    b[:] = a
    with pytest.raises(RuntimeError, match="The size in bytes must exactly match"):
        a.copyto(runtime.empty((5,), "int32"))
    with pytest.raises(ValueError, match="Unsupported target type"):
        a.copyto("cpu")


def _at_offset(x, misalign):
    """A copy of `x` whose data starts `misalign` bytes past a 64-byte boundary."""
    buf = np.empty(x.nbytes + 128, np.uint8)
    off = (-buf.ctypes.data) % 64 + misalign
    y = buf[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    y[...] = x
    return y


def test_dlpack_interop():
    x = sample((2, 5), "float32", seed=2)
    t = runtime.tensor(x)
    np.testing.assert_array_equal(np.from_dlpack(t), x)
    u = runtime.from_dlpack(_at_offset(x, 0))
    np.testing.assert_array_equal(u.numpy(), x)
    # TVM's from_dlpack asks for 64-byte alignment and compact data.
    with pytest.raises(RuntimeError, match="not aligned to 64 bytes"):
        runtime.from_dlpack(_at_offset(x, 4))
    with pytest.raises(RuntimeError, match="not contiguous"):
        runtime.from_dlpack(_at_offset(np.zeros((8, 8), "float32"), 0)[:, ::2])


def test_repr_and_str():
    t = runtime.tensor(np.array([1, 2], "int8"))
    assert repr(t).startswith("<tvm.runtime.Tensor shape=(2,), cpu:0>")
    assert str(t) == str(np.array([1, 2], "int8"))


# --- views ---------------------------------------------------------------------------------

def test_views():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    t = runtime.tensor(x)
    v = t._create_view((4,), relative_byte_offset=16)
    np.testing.assert_array_equal(v.numpy(), x[1])
    assert v.dtype == "float32"
    w = t._create_view((12,), "int32")
    np.testing.assert_array_equal(w.numpy(), x.reshape(-1).view("int32"))
    ww = v._create_view((2,), relative_byte_offset=8)  # offsets add up
    np.testing.assert_array_equal(ww.numpy(), x[1, 2:])
    ww.copyfrom(np.array([-1, -2], "float32"))  # writes land in the source
    assert t.numpy()[1, 2] == -1 and t.numpy()[1, 3] == -2
    assert F.TVMTensorIsStorageShared(t, w)
    assert not F.TVMTensorIsStorageShared(t, v)
    assert F.TVMTensorIsStorageShared(v, t._create_view(tvm_ffi.Shape([2, 2]), relative_byte_offset=16))
    del t
    np.testing.assert_array_equal(w.numpy()[:4], x.reshape(-1)[:4].view("int32"))  # source kept alive


def test_view_out_of_bounds():
    t = runtime.empty((2, 3), "float32")
    with pytest.raises(ValueError, match=r"\(28 vs. 24\) : View with shape \[7\] and datatype float32"):
        t._create_view((7,))
    with pytest.raises(ValueError, match="This would occupy bytes 16 <= i_byte < 28"):
        t._create_view((3,), relative_byte_offset=16)


@ours_only
def test_view_negative_inputs():
    t = runtime.empty((2, 3), "float32")
    with pytest.raises(ValueError, match="negative extent -1"):
        t._create_view((-1,))
    with pytest.raises(ValueError, match="must not be negative"):
        t._create_view((1,), relative_byte_offset=-4)


# --- errors --------------------------------------------------------------------------------

def test_bad_dtype():
    with pytest.raises(ValueError, match="floaty"):
        runtime.empty((2,), "floaty")


@ours_only
def test_negative_shape():
    with pytest.raises(ValueError, match="negative extent -1"):
        runtime.empty((-1, 2), "float32")


def test_unsupported_scope():
    with pytest.raises(Exception, match="specified memory scope: texture"):
        runtime.empty((2,), "float32", mem_scope="texture")


def test_byte_copy_size_mismatch():
    t = runtime.empty((2, 3), "float32")
    buf = np.zeros(5, "float32")
    ptr = buf.ctypes.data_as(ctypes.c_void_p)
    with pytest.raises(RuntimeError, match=r"arr_size == nbytes \(24 vs. 20\) : TensorCopyFromBytes: size mismatch"):
        F.TVMTensorCopyFromBytes(t, ptr, 20)
    with pytest.raises(RuntimeError, match=r"\(24 vs. 20\) : ArrayCopyToBytes: size mismatch"):
        F.TVMTensorCopyToBytes(t, ptr, 20)


def test_wrong_argument_types():
    buf = np.zeros(6, "float32")
    ptr = buf.ctypes.data_as(ctypes.c_void_p)
    with pytest.raises(TypeError, match=r"argument #0 .*Expected `DLTensor\*` but got `None`"):
        F.TVMTensorCopyFromBytes(None, ptr, 24)
    with pytest.raises(TypeError, match=r"Expected `DLTensor\*` but got `int`"):
        F.TVMTensorCopyToBytes(3, ptr, 24)
    with pytest.raises(TypeError, match="argument #1 .*Expected `DLTensor\\*` but got `None`"):
        F.TVMTensorCopyFromTo(runtime.empty((1,)), None)
    with pytest.raises(TypeError, match="Expected 2 but got 1 arguments"):
        F.TVMTensorCopyFromTo(runtime.empty((1,)))


@ours_only
def test_null_host_pointer():
    t = runtime.empty((2, 3), "float32")
    with pytest.raises(ValueError, match="NULL"):
        F.TVMTensorCopyFromBytes(t, None, 24)
    with pytest.raises(ValueError, match="NULL"):
        F.TVMTensorCopyToBytes(t, None, 24)
    with pytest.raises(ValueError, match="must not be negative"):
        F.TVMTensorCopyToBytes(t, None, -1)


def test_missing_device_api():
    with pytest.raises(RuntimeError, match="Device API vulkan is not enabled"):
        runtime.empty((2,), "float32", tvm.vulkan())
    with pytest.raises(RuntimeError, match="Device API metal is not enabled"):
        tvm.metal().max_threads_per_block


# --- devices -------------------------------------------------------------------------------

def test_cpu_attributes():
    d = tvm.cpu()
    assert d.exist is True
    assert tvm.cpu(3).exist is True
    for attr in ["max_threads_per_block", "warp_size", "max_shared_memory_per_block", "compute_version",
                 "device_name", "max_clock_rate", "multi_processor_count", "api_version", "driver_version",
                 "l2_cache_size_bytes", "available_global_memory"]:
        assert getattr(d, attr) is None, attr
    mem = d.total_global_memory
    assert isinstance(mem, int) and mem > 1 << 20
    if os.path.exists("/proc/meminfo"):
        kb = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0])
        assert abs(mem - kb * 1024) < 1 << 20


def test_absent_devices_do_not_exist():
    for dev in [tvm.vulkan(), tvm.metal(), tvm.rocm(), tvm.device("webgpu"), tvm.device("hexagon")]:
        assert dev.exist is False, dev
    assert F.GetDeviceAttr(13, 0, 0) == 0  # kDLCUDAManaged
    assert isinstance(tvm.cuda().exist, bool)


@ours_only
def test_unknown_device_type():
    with pytest.raises(RuntimeError, match="unknown type = 99"):
        F.GetDeviceAttr(99, 0, 0)


def test_streams_and_sync():
    d = tvm.cpu()
    d.sync()
    s = d.create_raw_stream()
    assert s == 0
    d.set_raw_stream(s)
    d.free_raw_stream(s)
    assert F.Device_StreamSyncFromTo(d, 0, 0) is None
    assert F.TVMSetStream(1, 0, None) is None
    with pytest.raises(RuntimeError, match="Device API vulkan is not enabled"):
        tvm.vulkan().sync()
    with pytest.raises(TypeError, match="Expected `Device` but got `int`"):
        F.Device_StreamSync(1, 0)
    assert tvm_ffi.get_global_func("__tvm_set_device")(1, 0) is None
    assert tvm_ffi.get_global_func("device_api.cpu")() is not None


def test_runtime_queries():
    assert runtime.enabled("cpu") is True
    assert runtime.enabled("vulkan") is False
    assert runtime.enabled("llvm") is False
    with pytest.raises(RuntimeError, match="Unknown optional runtime foo"):
        runtime.enabled("foo")
    assert isinstance(runtime.num_threads(), int) and runtime.num_threads() >= 1


# --- time evaluator ------------------------------------------------------------------------

_calls = []


@tvm_ffi.register_global_func("test_tvm_runtime_tensor.count", override=True)
def _count(*args):
    _calls.append(args)
    return len(args)


def _evaluator(name, number, repeat, min_repeat_ms=0, dev_type=1, preproc="", flush=0):
    return F.RPCTimeEvaluator(None, name, dev_type, 0, number, repeat, min_repeat_ms, 100, 0, 1, flush, preproc)


def _unpack(blob, repeat):
    assert isinstance(blob, bytes) and len(blob) == 8 * repeat
    return struct.unpack("@" + "d" * repeat, blob)


def test_time_evaluator_of_a_global_function():
    fe = _evaluator("test_tvm_runtime_tensor.count", number=3, repeat=4)
    _calls.clear()
    t = runtime.tensor(np.ones(4, "float32"))
    times = _unpack(fe(t, 2), 4)
    assert all(x >= 0 for x in times)
    assert len(_calls) == 1 + 3 * 4  # one warm-up call
    assert all(len(a) == 2 and isinstance(a[0], runtime.Tensor) and a[1] == 2 for a in _calls)


def test_time_evaluator_min_repeat_ms_grows_number():
    fe = _evaluator("test_tvm_runtime_tensor.count", number=1, repeat=2, min_repeat_ms=5)
    _calls.clear()
    times = _unpack(fe(), 2)
    assert len(_calls) > 10
    assert all(x > 0 for x in times)


def test_time_evaluator_preproc_and_cache_flush():
    pre = []
    tvm_ffi.register_global_func("test_tvm_runtime_tensor.pre", lambda *a: pre.append(len(a)), override=True)
    fe = _evaluator("test_tvm_runtime_tensor.count", number=2, repeat=3, preproc="test_tvm_runtime_tensor.pre",
                    flush=4096)
    _calls.clear()
    assert len(_unpack(fe(1, 2, 3), 3)) == 3
    assert pre == [3, 3, 3] and len(_calls) == 7
    a = runtime.tensor(np.zeros(64, "float32"))
    fe = _evaluator("test_tvm_runtime_tensor.count", 1, 1, preproc="cache_flush_cpu_non_first_arg")
    _unpack(fe(a, a), 1)


# A module function: a C callback (ctypes) registered as a system-library symbol.
_SAFE_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
_module_hits = [0]


def _module_body(_handle, _args, num_args, result):
    _module_hits[0] += 1
    ctypes.memset(result, 0, 16)  # returns None
    return 0


_module_cb = _SAFE_CALL(_module_body)


@pytest.fixture(scope="module")
def syslib():
    lib = ctypes.CDLL(tvm_ffi.libinfo.find_libtvm_ffi())
    reg = lib.TVMFFIEnvModRegisterSystemLibSymbol
    reg.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    assert reg(b"__tvm_ffi_test_tvm_runtime_tensor_nop", ctypes.cast(_module_cb, ctypes.c_void_p)) == 0
    return tvm_ffi.system_lib()


def test_module_time_evaluator(syslib):
    assert isinstance(syslib, runtime.Module)
    f = syslib["test_tvm_runtime_tensor_nop"]
    _module_hits[0] = 0
    f(1, 2)
    assert _module_hits[0] == 1
    ev = syslib.time_evaluator("test_tvm_runtime_tensor_nop", tvm.cpu(), number=4, repeat=3)
    _module_hits[0] = 0
    res = ev(runtime.tensor(np.zeros(3, "float32")))
    assert isinstance(res, runtime.module.BenchmarkResult)
    assert len(res.results) == 3 and res.mean >= 0 and res.min <= res.max
    assert _module_hits[0] == 1 + 4 * 3
    assert "Execution time summary" in str(res)


def test_time_evaluator_errors(syslib):
    with pytest.raises(RuntimeError, match="Cannot find test_tvm_runtime_tensor_none` in the global registry"):
        syslib.time_evaluator("test_tvm_runtime_tensor_none", tvm.cpu())
    with pytest.raises(RuntimeError, match="Cannot find nope in the global function"):
        syslib.time_evaluator("test_tvm_runtime_tensor_nop", tvm.cpu(), f_preproc="nope")
    with pytest.raises(RuntimeError, match="Cannot find nope.x in the global function"):
        _evaluator("nope.x", 1, 1)
    with pytest.raises(TypeError, match="Expected 12 but got 11 arguments"):
        F.RPCTimeEvaluator(None, "x", 1, 0, 1, 1, 0, 100, 0, 1, 0)
    # The device is checked when the evaluator runs.
    ev = syslib.time_evaluator("test_tvm_runtime_tensor_nop", tvm.vulkan())
    with pytest.raises(RuntimeError, match="Device API vulkan is not enabled"):
        ev()

    def boom(*args):
        raise KeyError("boom")

    tvm_ffi.register_global_func("test_tvm_runtime_tensor.boom", boom, override=True)
    with pytest.raises(KeyError, match="boom"):
        _evaluator("test_tvm_runtime_tensor.boom", 1, 1)()


# --- parameter blobs -----------------------------------------------------------------------

def test_params_round_trip(tmp_path):
    params = {
        "w": np.arange(6, dtype="float32").reshape(2, 3),
        "b": runtime.tensor(np.array([1, -2, 3], "int8")),
        "flag": np.array([True, False]),
        "h": sample((4,), "float16", seed=3),
    }
    blob = runtime.save_param_dict(params)
    loaded = runtime.load_param_dict(blob)
    assert sorted(loaded.keys()) == sorted(params)
    for k, v in params.items():
        expect = v.numpy() if isinstance(v, runtime.Tensor) else v
        np.testing.assert_array_equal(loaded[k].numpy(), expect)
        assert loaded[k].dtype == str(expect.dtype)
    path = str(tmp_path / "params.bin")
    runtime.save_param_dict_to_file(params, path)
    assert open(path, "rb").read() == bytes(blob)
    assert sorted(runtime.load_param_dict_from_file(path).keys()) == sorted(params)
    with pytest.raises(Exception, match="Invalid parameters file format"):
        runtime.load_param_dict(b"garbage")


@ours_only
def test_library_loaded_once():
    """tvm_ffi's libtvm_ffi.so and TVM's libtvm_runtime.so are one file, mapped once."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]) in ("libtvm_runtime.so", "libtvm_ffi.so"):
                paths.add(os.path.realpath(parts[5]))
    assert len(paths) == 1, paths


def test_json_graph_of_tensors():
    """tvm.ir.save_json writes a tensor as the base64 of its record (`__data_to_json__`)."""
    a = runtime.tensor(np.arange(4, dtype="float32"))
    text = tvm.ir.save_json(a)
    assert '"data":"P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAAIgAQAEAAAAAAAAABAAAAAAAAAAAAAAAAAAgD8AAABAAABAQA=="' in text
    b = tvm.ir.load_json(text)
    assert isinstance(b, runtime.Tensor)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    view = a._create_view((2,), "int32", relative_byte_offset=8)
    nested = tvm.ir.load_json(tvm.ir.save_json({"v": view, "l": [a, a]}))
    np.testing.assert_array_equal(nested["v"].numpy(), a.numpy()[2:].view("int32"))
    assert nested["l"][0].same_as(nested["l"][1])


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_set_current_thread_affinity():
    import threading

    f = tvm_ffi.get_global_func("tvm.runtime.threading.set_current_thread_affinity")
    seen = []

    def body():
        allowed = sorted(os.sched_getaffinity(0))
        f(tvm_ffi.Shape([allowed[0]]))
        seen.append(sorted(os.sched_getaffinity(0)))
        f(allowed)
        seen.append(sorted(os.sched_getaffinity(0)) == allowed)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [[min(os.sched_getaffinity(0))], True]
