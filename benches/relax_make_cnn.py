"""Makes the `cnn`-sized Relax export the memory bench runs (TVM v0.27's full wheel):
conv 3->32->64 (3x3), relu, max-pool, dense 64*8*8->256->10 on a 1x3x32x32 input, weights bound
as VM constants (about 4.3 MB). Writes OUT/cnn.so and OUT/cnn.in.0.npy."""
import sys

import numpy as np
import tvm
from tvm import relax
import tvm.relax.frontend.nn as nn

out = sys.argv[1]


class CNN(nn.Module):
    def __init__(self):
        self.c1 = nn.Conv2D(3, 32, 3, padding=1)
        self.c2 = nn.Conv2D(32, 64, 3, padding=1)
        self.f1 = nn.Linear(64 * 8 * 8, 256)
        self.f2 = nn.Linear(256, 10)

    def forward(self, x):
        x = nn.op.relu(self.c1(x))
        x = nn.op.reshape(x, (1, 32, 16, 2, 16, 2))
        x = nn.op.max(x, axis=[3, 5])
        x = nn.op.relu(self.c2(x))
        x = nn.op.reshape(x, (1, 64, 8, 2, 8, 2))
        x = nn.op.max(x, axis=[3, 5])
        x = nn.op.reshape(x, (1, 64 * 8 * 8))
        return self.f2(nn.op.relu(self.f1(x)))


mod, params = CNN().export_tvm({"forward": {"x": nn.spec.Tensor((1, 3, 32, 32), "float32")}})
rng = np.random.default_rng(0)
bind = {name: tvm.runtime.tensor((rng.standard_normal(p.shape) * 0.05).astype("float32")) for name, p in params}
mod = relax.transform.BindParams("forward", bind)(mod)
tvm.compile(mod, target="llvm").export_library(f"{out}/cnn.so")
np.save(f"{out}/cnn.in.0.npy", rng.standard_normal((1, 3, 32, 32)).astype("float32"))
