"""An RPC client written against TVM v0.8's Python API (`import tvm`), for the interoperability
runs of scripts/rpc-interop.sh: whichever runtime library `tvm` loads is the client side.

    python rpc_interop.py connect HOST PORT KEY      # tvm.rpc.connect
    python rpc_interop.py tracker HOST PORT KEY      # tvm.rpc.connect_tracker(...).request(KEY)

Uploads add_one.so and mlp.so, loads them remotely, runs add_one and the graph executor
(`graph_executor.GraphModule(remote_lib["default"](remote.cpu()))`) with remote arrays, compares
with the fixtures' manifest, and times the remote function with time_evaluator."""
import json
import os
import sys

import numpy as np
import tvm
import tvm.rpc
from tvm.contrib import graph_executor

FIXTURES = os.environ.get("TVM_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures"))


def main():
    mode, host, port, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode == "tracker":
        remote = tvm.rpc.connect_tracker(host, port).request(key, priority=1, session_timeout=60)
    else:
        remote = tvm.rpc.connect(host, port, key=key)
    man = json.load(open(os.path.join(FIXTURES, "manifest.json")))["fixtures"]
    fx = lambda n: os.path.join(FIXTURES, n)  # noqa: E731
    dev = remote.cpu(0)

    remote.upload(fx("add_one.so"))
    rlib = remote.load_module("add_one.so")
    a = tvm.nd.array(np.load(fx("add_one.A.npy")), dev)
    b = tvm.nd.empty((1000,), "float32", dev)
    rlib["add_one"](a, b)
    np.testing.assert_array_equal(b.numpy(), np.load(fx("add_one.B.npy")))
    te = rlib.time_evaluator("add_one", dev, number=10, repeat=3)(a, b)
    assert len(te.results) == 3 and te.mean > 0

    remote.upload(fx("mlp.so"))
    mlib = remote.load_module("mlp.so")
    gm = graph_executor.GraphModule(mlib["default"](dev))
    info = man["mlp"]
    gm.set_input("data", tvm.nd.array(np.load(fx(info["inputs"]["data"])), dev))
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), np.load(fx(info["outputs"][0])),
                               rtol=info["rtol"], atol=info["atol"])
    run = gm.module.time_evaluator("run", dev, number=5, repeat=3)()
    print("OK lib=%s add_one %.2f us, mlp run %.3f ms" % (
        os.path.basename(os.path.dirname(tvm._ffi.base._LIB._name)) + "/" + os.path.basename(tvm._ffi.base._LIB._name),
        te.mean * 1e6, run.mean * 1e3))


if __name__ == "__main__":
    main()
