"""The Python-backend path beside the native backend: the same model served by the same server
through PyTriton (`Triton().bind(infer_func=...)`, Triton's Python backend with PyTriton's proxy),
the inference function running the model through a ctypes FFI in the style of TVM's Python
package (tests/python/test_ctypes_ffi.py) on this repository's libtvm_runtime.so.

It stands in for "TVM's Python runtime in Triton's Python backend": TVM's own Python package of a
release that runs these exports (v0.8-v0.19) is not installable here, so the kernels and the
runtime underneath are ours in both paths and the difference measured is the serving path (the
interpreter, the GIL, PyTriton's inter-process hand-off). Memory: with TVM's own runtime each
instance's executor would hold its own copy of the weights; with ours the instances share them,
so this baseline's memory is lower than TVM's would be.

    python bench_python.py LIBDIR [--clients 4] [--seconds 5] [--instances 1,4] [--models resnet18,mlp2]

Prints the same columns as bench.py; RSS is the sum over the server, its Python stubs and this
process (where the models run).
"""

import argparse
import multiprocessing as mp
import os
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import SHARED, client, free_port  # noqa: E402


def tree_rss_kib(pid):
    """RSS of a process and all its descendants."""
    kids = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
                kids.setdefault(int(fields[1]), []).append(int(p.name))
            except OSError:
                pass
    total, todo = 0, [pid]
    while todo:
        q = todo.pop()
        try:
            for line in Path(f"/proc/{q}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
        todo += kids.get(q, [])
    return total


def make_infer(ffi, lib_mod, x_shape):
    gmod = lib_mod["default"](ffi.DLDevice(1, 0))
    set_in, run, get_out = gmod["get_input"], gmod["run"], gmod["get_output"]

    def infer(requests):
        out = []
        for r in requests:
            set_in("data").copyfrom(r["data"].reshape(x_shape))
            run()
            out.append({"output_0": get_out(0).numpy()})
        return out

    return infer


def run(ffi, model, instances, clients, seconds, log=None):
    from pytriton.model_config import ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    x = np.load(SHARED / f"{model}.input.data.npy")
    y = np.load(SHARED / f"{model}.output.0.npy")
    lib_mod = ffi.get_global("runtime.ModuleLoadFromFile")(str(SHARED / f"{model}.so"), "")
    funcs = [make_infer(ffi, lib_mod, x.shape) for _ in range(instances)]
    grpc = free_port()
    cfg = TritonConfig(http_address="127.0.0.1", http_port=free_port(), grpc_address="127.0.0.1",
                       grpc_port=grpc, metrics_port=free_port(), allow_metrics=False, log_file=log)
    with Triton(config=cfg) as triton:
        triton.bind(model_name=model, infer_func=funcs,
                    inputs=[Tensor(name="data", dtype=np.float32, shape=x.shape)],
                    outputs=[Tensor(name="output_0", dtype=np.float32, shape=y.shape)],
                    config=ModelConfig(batching=False))
        triton.run()
        idle = tree_rss_kib(os.getpid())
        client((grpc, model, x, 1.0, time.time()))  # warm-up
        start_at = time.time() + 1.0
        with mp.get_context("spawn").Pool(clients) as pool:
            lats = pool.map(client, [(grpc, model, x, seconds, start_at)] * clients)
        rss = tree_rss_kib(os.getpid())
        # Pool workers are gone by now; what remains is this process, the server and its stubs.
    all_lat = np.array([v for lat in lats for v in lat]) * 1e3
    return len(all_lat) / seconds, np.percentile(all_lat, 50), np.percentile(all_lat, 99), rss / 1024, idle / 1024


def load_ffi(libdir):
    """The ctypes FFI of tests/python on libdir/libtvm_runtime.so, with the environment the
    Python backend's stub needs."""
    os.environ["TVM_LIBRARY_PATH"] = libdir
    # The Python backend's stub embeds libpython: this interpreter's own, not another 3.x.y
    # the system may have (whose C modules would not match this stdlib).
    pylib = sysconfig.get_config_var("LIBDIR")
    if pylib:
        os.environ["LD_LIBRARY_PATH"] = ":".join(filter(None, [pylib, os.environ.get("LD_LIBRARY_PATH")]))
    sys.path.insert(0, str(HERE.parents[1] / "tests" / "python"))
    import test_ctypes_ffi

    return test_ctypes_ffi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libdir", help="the directory of libtvm_runtime.so")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--instances", default="1,4")
    ap.add_argument("--models", default="resnet18,mlp2")
    a = ap.parse_args()
    ffi = load_ffi(a.libdir)

    print(f"Python backend (PyTriton), cpus: {os.cpu_count()}, clients: {a.clients}, {a.seconds:g} s per point")
    print(f"{'model':10} {'inst':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'RSS MiB':>8} {'(loaded, idle)':>14}")
    for model in a.models.split(","):
        for n in (int(v) for v in a.instances.split(",")):
            rps, p50, p99, rss, idle = run(ffi, model, n, a.clients, a.seconds)
            print(f"{model:10} {n:>4} {rps:>9.1f} {p50:>8.2f} {p99:>8.2f} {rss:>8.1f} {idle:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
