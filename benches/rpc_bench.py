"""RPC measurements through TVM v0.8's Python API (`import tvm`), so the same client code runs on
whichever runtime `tvm` loads (scripts/bench-rpc.sh runs it once per configuration):

- call_us: round trip of a remote call of a function that does nothing (`__tvm_set_device(1, 0)`
  on the CPU), median of batches of 200 calls;
- to_MBps / from_MBps: copy of a 64 MiB float32 array to / from the remote CPU
  (`NDArray.copyfrom` / `.numpy()`), best of 7;
- mlp_us: remote `mlp.so` graph `run` as `time_evaluator` reports it (number=200, repeat=7,
  median), and the same measured from the client (`gm.run()` round trip, median).

    python rpc_bench.py HOST PORT  -> one JSON line
"""
import json
import os
import sys
import time

import numpy as np
import tvm
import tvm.rpc
from tvm.contrib import graph_executor

FIXTURES = os.environ.get("TVM_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures"))


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    remote = tvm.rpc.connect(host, port)
    dev = remote.cpu(0)
    res = {"lib": tvm._ffi.base._LIB._name}

    f = remote.get_function("__tvm_set_device")
    for _ in range(200):
        f(1, 0)
    batches = []
    for _ in range(25):
        t0 = time.perf_counter()
        for _ in range(200):
            f(1, 0)
        batches.append((time.perf_counter() - t0) / 200)
    res["call_us"] = median(batches) * 1e6

    n = 64 << 20
    host_arr = np.random.default_rng(0).random(n // 4, dtype=np.float32)
    a = tvm.nd.empty((n // 4,), "float32", dev)
    to, frm = [], []
    for _ in range(7):
        t0 = time.perf_counter()
        a.copyfrom(host_arr)
        to.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        back = a.numpy()
        frm.append(time.perf_counter() - t0)
    assert np.array_equal(back, host_arr)
    res["to_MBps"] = n / min(to) / 1e6
    res["from_MBps"] = n / min(frm) / 1e6
    del a

    remote.upload(os.path.join(FIXTURES, "mlp.so"))
    lib = remote.load_module("mlp.so")
    gm = graph_executor.GraphModule(lib["default"](dev))
    gm.set_input("data", tvm.nd.array(np.load(os.path.join(FIXTURES, "mlp.input.data.npy")), dev))
    te = gm.module.time_evaluator("run", dev, number=200, repeat=7)()
    res["mlp_te_us"] = te.median * 1e6
    runs = []
    for _ in range(300):
        t0 = time.perf_counter()
        gm.run()
        runs.append(time.perf_counter() - t0)
    res["mlp_rt_us"] = median(runs) * 1e6
    print(json.dumps(res))


if __name__ == "__main__":
    main()
