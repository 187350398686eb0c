"""Times TVM v0.27's Python runtime-only on the v0.27 exports; run once per runtime by
scripts/bench-relax.sh, which alternates the two. Prints `<metric> <value>` lines:

- call_<model>: median microseconds of a VM call of the fixture's function with its inputs
  (7 batches of 2000 calls after warm-up);
- load_<model>: median milliseconds of `load_module` + `VirtualMachine(...)` of a fresh copy of
  the export (a new file each time, so the dynamic loader really loads it);
- rss_kb (with --rss MODEL.so INPUT.npy): peak resident KB of this process after loading and
  running that model 20 times (run in a process of its own).
"""
import json
import pathlib
import resource
import shutil
import sys
import tempfile
import time

import numpy as np
import tvm
from tvm.runtime.vm import VirtualMachine


def rss(model, inp):
    vm = VirtualMachine(tvm.runtime.load_module(model), tvm.cpu())
    x = tvm.runtime.tensor(np.load(inp))
    for _ in range(20):
        vm["forward"](x).numpy()
    print("rss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main(fixtures, skip):
    man = json.loads((fixtures / "manifest.json").read_text())["models"]
    tmp = pathlib.Path(tempfile.mkdtemp())
    for name, m in man.items():
        if name in skip:
            continue
        vm = VirtualMachine(tvm.runtime.load_module(str(fixtures / m["file"])), tvm.cpu())
        f = vm[m["function"]]
        args = [tvm.runtime.tensor(np.load(fixtures / f"{name}.in.{k}.npy")) for k in range(len(m["inputs"]))]
        for _ in range(500):
            f(*args)
        times = []
        for _ in range(7):
            n = 2000
            t0 = time.perf_counter()
            for _ in range(n):
                f(*args)
            times.append((time.perf_counter() - t0) / n * 1e6)
        print(f"call_{name}", sorted(times)[3])
        loads = []
        for i in range(9):
            p = tmp / f"{name}_{i}.so"
            shutil.copyfile(fixtures / m["file"], p)
            t0 = time.perf_counter()
            VirtualMachine(tvm.runtime.load_module(str(p)), tvm.cpu())
            loads.append((time.perf_counter() - t0) * 1e3)
        print(f"load_{name}", sorted(loads)[4])
    shutil.rmtree(tmp)


if __name__ == "__main__":
    if sys.argv[1] == "--rss":
        rss(sys.argv[2], sys.argv[3])
    else:
        main(pathlib.Path(sys.argv[1]), set(sys.argv[2:]))
