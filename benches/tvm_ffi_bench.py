"""Benchmarks of the tvm-ffi ABI through apache-tvm-ffi's own Python package (its Cython core).

Run by scripts/bench-tvm-ffi.sh in two venvs, one whose libtvm_ffi.so is this library and one
with the wheel's own, alternating processes; each process prints one line per measurement:
`name nanoseconds-per-operation` (the best of a few repeats inside the process).
"""
import sys
import time

import numpy as np
import tvm_ffi


def best_ns(fn, n, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def bench_calls():
    nop = tvm_ffi.get_global_func("testing.nop")

    def call0(n):
        for _ in range(n):
            nop()

    def call1(n):
        for _ in range(n):
            nop(1)

    def call3(n):
        for _ in range(n):
            nop(1, 2, 3)

    return {"call_0_int": best_ns(call0, 200_000), "call_1_int": best_ns(call1, 200_000),
            "call_3_int": best_ns(call3, 200_000)}


def bench_array():
    data = list(range(100))

    def build_index(n):
        for _ in range(n):
            a = tvm_ffi.Array(data)
            for i in range(0, 100, 10):
                a[i]

    return {"array_100_build_index10": best_ns(build_index, 5_000)}


def bench_tensor():
    x = np.zeros((16, 16), dtype="float32")

    def from_numpy(n):
        for _ in range(n):
            tvm_ffi.from_dlpack(x)

    return {"tensor_from_numpy": best_ns(from_numpy, 50_000)}


def bench_objects():
    # A type registered by C++ (the wheel's testing library), made through its __ffi_init__ and
    # released: the registry lookup, the allocation, the refcounts and the deleter.
    import tvm_ffi.testing

    make = tvm_ffi.testing.TestIntPair

    def create_release(n):
        for _ in range(n):
            make(1, 2)

    return {"object_create_release": best_ns(create_release, 100_000)}


def bench_map():
    keys = [f"k{i}" for i in range(100_000)]
    d = dict(zip(keys, range(100_000)))

    def insert(n):
        for _ in range(n):
            tvm_ffi.Map(d)

    m = tvm_ffi.Map(d)

    def lookup(n):
        for _ in range(n):
            for k in keys:
                m[k]

    return {"map_1e5_build_per_key": best_ns(insert, 3, 3) / 100_000,
            "map_1e5_lookup_per_key": best_ns(lookup, 1, 3) / 100_000}


if __name__ == "__main__":
    which = sys.argv[1:] or ["calls", "array", "tensor", "objects", "map"]
    for w in which:
        for k, v in globals()[f"bench_{w}"]().items():
            print(f"{k} {v:.1f}")
