"""BYOC through ctypes, as TVM's Python FFI drives it: TVM's cnn_dnnl.so against cnn.output.0.npy
(the manifest's tolerance); DNNL operators on JSON graphs written here in TVM's serializer format
(metadata + dnnl_json blob entries in a library compiled with cc) against numpy; and a C-source
BYOC library (C++ in the form TVM v0.8's DNNL C-source codegen emits, calling the runtime's
dnnl_* kernels) against numpy. Needs oneDNN (libdnnl2); skips without it unless CI=true."""
import ctypes
import json
import os
import struct
import subprocess
import tempfile

import numpy as np
import pytest

import test_ctypes_ffi as ffi
from test_ctypes_ffi import DLDevice, get_global, empty, fixture

ROOT = ffi.ROOT
TESTLIB = os.path.join(ROOT, "tests", "fixtures", "testlib.c")


def have_dnnl():
    for name in (os.environ.get("TVM_DNNL_LIBRARY"), "libdnnl.so.3", "libdnnl.so.2", "libdnnl.so"):
        if not name:
            continue
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            pass
    if os.environ.get("CI") == "true":
        pytest.fail("oneDNN missing under CI")
    return False


pytestmark = pytest.mark.skipif(not have_dnnl(), reason="oneDNN (libdnnl) not found")


def nd(a):
    a = np.ascontiguousarray(a, dtype="float32")
    x = empty(a.shape)
    x.copyfrom(a)
    return x


def test_cnn_dnnl_matches_tvm():
    manifest = json.load(open(fixture("manifest.json")))["fixtures"]["cnn_dnnl"]
    lib_mod = get_global("runtime.ModuleLoadFromFile")(fixture("cnn_dnnl.so"), "")
    assert lib_mod.type_key == "GraphExecutorFactory"
    gmod = lib_mod["default"](DLDevice(1, 0))
    data = np.load(fixture(manifest["inputs"]["data"]))
    want = np.load(fixture(manifest["outputs"][0]))
    gmod["set_input"]("data", nd(data))
    for _ in range(2):
        gmod["run"]()
        out = gmod["get_output"](0).numpy()
        np.testing.assert_allclose(out, want, rtol=manifest["rtol"], atol=manifest["atol"])


# ---------------------------------------------------------------------------------------------
# The fixture builder: TVM's JSONSerializer format, payloads, blob, library.

class Graph:
    def __init__(self):
        self.nodes, self.outputs, self.args, self.heads = [], [], [], []

    def _leaf(self, op, name, shape):
        self.nodes.append({"op": op, "name": name, "attrs": {"dtype": [["float32"]], "shape": [[list(shape)]]}})
        self.outputs.append(1)
        self.args.append(len(self.nodes) - 1)
        return (len(self.nodes) - 1, 0)

    def input(self, name, shape):
        return self._leaf("input", name, shape)

    def const(self, name, shape):
        return self._leaf("const", name, shape)

    def kernel(self, op, inputs, shapes, **attrs):
        a = {k: [[str(x) for x in v]] if isinstance(v, (list, tuple)) else [[str(v)]] for k, v in attrs.items()}
        a.update({"num_inputs": str(len(inputs)), "num_outputs": str(len(shapes)),
                  "shape": [[list(s) for s in shapes]], "dtype": [["float32"] * len(shapes)]})
        self.nodes.append({"op": "kernel", "name": op, "inputs": [[n, i, 0] for n, i in inputs], "attrs": a})
        self.outputs.append(len(shapes))
        return len(self.nodes) - 1

    def json(self):
        row = [0]
        for n in self.outputs:
            row.append(row[-1] + n)
        return json.dumps({"nodes": self.nodes, "arg_nodes": self.args,
                           "heads": [[n, i, 0] for n, i in self.heads], "node_row_ptr": row})


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def strs(v):
    return struct.pack("<Q", len(v)) + b"".join(s(x) for x in v)


def record(a):
    a = np.ascontiguousarray(a, dtype="float32")
    return (struct.pack("<QQiii", 0xDD5E40F096B4A13F, 0, 1, 0, a.ndim) + bytes([2, 32, 1, 0])
            + struct.pack("<%dq" % a.ndim, *a.shape) + struct.pack("<q", a.nbytes) + a.tobytes())


def build_library(tmp, symbol, graph, consts):
    """A library whose blob is [metadata, dnnl_json, _lib] rooted at the metadata module."""
    names = list(consts)
    meta = strs(names) + struct.pack("<Q", len(names)) + b"".join(record(consts[n]) for n in names)
    meta += strs([symbol]) + struct.pack("<Q", 1) + strs(names)
    region = s(symbol) + s(graph.json()) + strs(names)
    entries = [s("metadata") + meta, s("dnnl_json") + region, s("_lib")]
    tree = s("_import_tree") + struct.pack("<5Q", 4, 0, 2, 2, 2) + struct.pack("<3Q", 2, 1, 2)
    payload = struct.pack("<Q", 4) + b"".join(entries) + tree
    blob = struct.pack("<Q", len(payload)) + payload
    c = os.path.join(tmp, symbol + "_blob.c")
    with open(c, "w") as f:
        f.write('__attribute__((visibility("default"))) const unsigned char __tvm_dev_mblob[%d] = {%s};\n'
                % (len(blob), ",".join(str(x) for x in blob)))
    so = os.path.join(tmp, "lib%s.so" % symbol)
    subprocess.check_call(["cc", "-shared", "-fPIC", "-O1", "-o", so, TESTLIB, c])
    return get_global("runtime.ModuleLoadFromFile")(so, "")


def conv2d_ref(x, w, strides, pad, dilation, groups):
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    (sh, sw), (dh, dw), (t, l, b, r) = strides, dilation, pad
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (t, b), (l, r)))
    oh = (h + t + b - ((kh - 1) * dh + 1)) // sh + 1
    ow = (wd + l + r - ((kw - 1) * dw + 1)) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for g in range(groups):
        xg, wg = xp[:, g * icg:(g + 1) * icg], w[g * ocg:(g + 1) * ocg].astype("float64")
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    return out.astype("float32")


CONV_ATTRS = dict(channels="", kernel_size=["", ""], data_layout="NCHW", kernel_layout="OIHW",
                  out_layout="", out_dtype="")

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.uniform(-1, 1, size=shape).astype("float32")


@pytest.mark.parametrize("case", [
    dict(x=(2, 4, 9, 7), w=(6, 2, 3, 3), strides=(2, 1), pad=(0, 1, 2, 1), dilation=(1, 1), groups=2),
    dict(x=(1, 6, 8, 8), w=(6, 1, 3, 3), strides=(1, 1), pad=(1, 1, 1, 1), dilation=(2, 2), groups=6),
    dict(x=(3, 3, 6, 5), w=(5, 3, 2, 2), strides=(1, 2), pad=(1, 0, 0, 1), dilation=(1, 1), groups=1),
])
def test_conv2d_bias_relu_vs_numpy(case):
    g = Graph()
    x = g.input("x", case["x"])
    w = g.const("c_const_0", case["w"])
    oc = case["w"][0]
    b = g.input("b", (1, oc, 1, 1))
    xd, wd, bd = rand(*case["x"]), rand(*case["w"]), rand(1, oc, 1, 1)
    want = np.maximum(conv2d_ref(xd, wd, case["strides"], case["pad"], case["dilation"], case["groups"]) + bd, 0)
    k = g.kernel("dnnl.conv2d_bias_relu", [x, w, b], [want.shape], strides=case["strides"], padding=case["pad"],
                 dilation=case["dilation"], groups=case["groups"], **CONV_ATTRS)
    g.heads.append((k, 0))
    with tempfile.TemporaryDirectory() as tmp:
        m = build_library(tmp, "conv", g, {"c_const_0": wd})
        out = nd(np.zeros(want.shape))
        m.get_function("conv", True)(nd(xd), nd(bd), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_dense_batch_norm_add_vs_numpy():
    g = Graph()
    x = g.input("x", (2, 8, 4, 4))
    stats = [g.const("n_const_%d" % i, (8,)) for i in range(4)]
    bn = g.kernel("nn.batch_norm", [x] + stats, [(2, 8, 4, 4), (8,), (8,)], axis=1, epsilon="0.001",
                  center=1, scale=1)
    bias = g.const("n_const_4", (8, 1, 1))
    add = g.kernel("add", [(bn, 0), bias], [(2, 8, 4, 4)])
    r = g.kernel("nn.relu", [(add, 0)], [(2, 8, 4, 4)])
    y = g.input("y", (3, 16))
    wt = g.const("n_const_5", (5, 16))
    d = g.kernel("nn.dense", [y, wt], [(3, 5)], units="", out_dtype="")
    m2 = g.kernel("multiply", [(d, 0), (d, 0)], [(3, 5)])
    g.heads += [(r, 0), (m2, 0)]
    consts = {"n_const_0": rand(8), "n_const_1": rand(8), "n_const_2": rand(8),
              "n_const_3": np.abs(rand(8)) + 0.5, "n_const_4": rand(8, 1, 1), "n_const_5": rand(5, 16)}
    xd, yd = rand(2, 8, 4, 4), rand(3, 16)
    c = lambda v: v.reshape(1, 8, 1, 1)  # noqa: E731
    norm = (xd - c(consts["n_const_2"])) / np.sqrt(c(consts["n_const_3"]) + 1e-3) * c(consts["n_const_0"]) \
        + c(consts["n_const_1"])
    want0 = np.maximum(norm + consts["n_const_4"], 0)
    dd = yd.astype("float64") @ consts["n_const_5"].T.astype("float64")
    want1 = dd * dd
    with tempfile.TemporaryDirectory() as tmp:
        m = build_library(tmp, "mix", g, consts)
        o0, o1 = nd(np.zeros(want0.shape)), nd(np.zeros(want1.shape))
        m.get_function("mix", True)(nd(xd), nd(yd), o0, o1)
        np.testing.assert_allclose(o0.numpy(), want0, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(o1.numpy(), want1, rtol=1e-4, atol=1e-4)
        with pytest.raises(ffi.TVMError, match="argument 0 \\(input 0\\)"):
            m.get_function("mix", True)(nd(yd), nd(yd), o0, o1)


# ---------------------------------------------------------------------------------------------
# C-source BYOC: tests/fixtures/dnnl_csrc.cc, the C++ TVM v0.8's DNNL C-source codegen emits for a
# region conv2d+bias+relu -> relu -> add -> dense.

C_SOURCE = os.path.join(ROOT, "tests", "fixtures", "dnnl_csrc.cc")


def test_c_source_byoc_library():
    with tempfile.TemporaryDirectory() as tmp:
        src = C_SOURCE
        so = os.path.join(tmp, "libdnnl_csrc.so")
        # Not linked against the runtime: the dnnl_* symbols resolve to the loaded libtvm_runtime.so.
        subprocess.check_call(["c++", "-shared", "-fPIC", "-O1", "-I" + os.path.join(ROOT, "include"), "-o", so, src])
        m = get_global("runtime.ModuleLoadFromFile")(so, "")
        x, w, b, wd = rand(2, 3, 6, 6), rand(4, 3, 3, 3), rand(4), rand(3, 144)
        conv = np.maximum(conv2d_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1) + b.reshape(1, 4, 1, 1), 0)
        summed = conv + np.maximum(conv, 0)
        want = summed.reshape(2, 144).astype("float64") @ wd.T.astype("float64")
        out = nd(np.zeros((2, 3)))
        m["dnnl_0"](nd(x), nd(w), nd(b), nd(wd), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
