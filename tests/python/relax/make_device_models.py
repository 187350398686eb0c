"""Makes TVM v0.27 Relax exports whose kernels run on OpenCL (run with the full apache-tvm wheel:
`python make_device_models.py OUT`): the host code launches the kernels of an `opencl` module
of the library binary. TVM's own runtime-only package has no OpenCL, so test_device_models.py
checks the results against numpy."""
import sys

import tvm
from tvm.script import ir as I
from tvm.script import relax as R

out = sys.argv[1]


@I.ir_module
class Elementwise:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            z = R.add(x, y)
            w = R.multiply(z, y)
            R.output(w)
        return w


@I.ir_module
class Dense:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            s = R.sum(x, axis=1)
            R.output(y, s)
        return (y, (s, x))


target = tvm.target.Target("opencl", host="llvm")
for name, mod in [("ocl_elementwise", Elementwise), ("ocl_dense", Dense)]:
    with target:
        mod = tvm.s_tir.transform.DefaultGPUSchedule()(tvm.relax.transform.LegalizeOps()(mod))
    tvm.compile(mod, target=target).export_library(f"{out}/{name}.so")
print("ok")
