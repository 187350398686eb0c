"""The cases of apache/tvm's tests/python/relax/test_runtime_builtin_rnn_state.py (TVM main), run
runtime-only on the CPU: TVM's file builds its TIR get/set kernels for CUDA in the test process;
make_kv_kernels.py built the same functions for `llvm` (rnn.so in RELAX_KV_KERNELS). Each case
drives `vm.builtin.rnn_state_create` / `rnn_state_get` / `rnn_state_set` / `rnn_state_debug_get`
and the `vm.builtin.kv_state_*` globals as TVM's does, with TVM's values: one layer, two states
((16, 16) float16 starting at 0, (32, 32) float32 starting at 1), 4 sequences, 4 history slots.
TVM_REFERENCE=1 runs them on TVM's own runtime-only library.
"""

import os
import pathlib

import numpy as np
import pytest
import tvm
from tvm_ffi import Shape

KERNELS = os.environ.get("RELAX_KV_KERNELS")
if not KERNELS or not (pathlib.Path(KERNELS) / "rnn.so").is_file():
    if os.environ.get("CI") == "true":
        raise RuntimeError("RELAX_KV_KERNELS is not set or has no rnn.so (CI=true)")
    pytest.skip("RELAX_KV_KERNELS is not set (a folder made by make_kv_kernels.py)", allow_module_level=True)

ZERO = np.full((16, 16), 0.0, "float16")
ONE = np.full((32, 32), 1.0, "float32")
TWO = np.full((16, 16), 2.0, "float16")
THREE = np.full((32, 32), 3.0, "float32")
G = {n: tvm.get_global_func("vm.builtin." + n) for n in [
    "kv_state_clear", "kv_state_add_sequence", "kv_state_remove_sequence", "kv_state_fork_sequence",
    "kv_state_popn", "kv_state_begin_forward", "kv_state_end_forward", "rnn_state_create", "rnn_state_get",
    "rnn_state_set", "rnn_state_debug_get",
]}
DEV = tvm.cpu()


@pytest.fixture
def state():
    lib = tvm.runtime.load_module(str(pathlib.Path(KERNELS) / "rnn.so"))
    gets = [lib["rnn_get_0"], lib["rnn_get_1"]]
    sets = [lib["rnn_set_0"], lib["rnn_set_1"]]
    s = G["rnn_state_create"](1, 4, 4, gets, sets, [tvm.runtime.tensor(ZERO, DEV), tvm.runtime.tensor(ONE, DEV)])
    G["kv_state_clear"](s)
    return s


def check(s, ids, want):
    for seq in ids:
        for k, value in enumerate(want[seq]):
            np.testing.assert_allclose(G["rnn_state_debug_get"](s, 0, k, seq).numpy(), value)


def test_rnn_state_get(state):
    G["kv_state_add_sequence"](state, 0)
    G["kv_state_begin_forward"](state, Shape([0]), Shape([1]))
    a = tvm.runtime.tensor(np.empty((1, 16, 16), "float16"), DEV)
    b = tvm.runtime.tensor(np.empty((1, 32, 32), "float32"), DEV)
    G["rnn_state_get"](state, 0, 0, a)
    G["rnn_state_get"](state, 0, 1, b)
    G["kv_state_end_forward"](state)
    np.testing.assert_allclose(a.numpy(), np.zeros((1, 16, 16), "float16"))
    np.testing.assert_allclose(b.numpy(), np.ones((1, 32, 32), "float32"))


def test_rnn_state_set(state):
    for seq in range(3):
        G["kv_state_add_sequence"](state, seq)
    G["kv_state_begin_forward"](state, Shape([0, 2]), Shape([1, 1]))
    G["rnn_state_set"](state, 0, 0, tvm.runtime.tensor(np.full((2, 16, 16), 2.0, "float16"), DEV))
    G["rnn_state_set"](state, 0, 1, tvm.runtime.tensor(np.full((2, 32, 32), 3.0, "float32"), DEV))
    G["kv_state_end_forward"](state)
    check(state, [0, 1, 2], [[TWO, THREE], [ZERO, ONE], [TWO, THREE]])


def _set_one(state):
    G["kv_state_add_sequence"](state, 0)
    G["kv_state_begin_forward"](state, Shape([0]), Shape([1]))
    G["rnn_state_set"](state, 0, 0, tvm.runtime.tensor(TWO.reshape(1, 16, 16), DEV))
    G["rnn_state_set"](state, 0, 1, tvm.runtime.tensor(THREE.reshape(1, 32, 32), DEV))
    G["kv_state_end_forward"](state)


def test_rnn_state_popn(state):
    _set_one(state)
    check(state, [0], [[TWO, THREE]])
    G["kv_state_popn"](state, 0, 1)
    check(state, [0], [[ZERO, ONE]])
    with pytest.raises(RuntimeError):
        G["kv_state_popn"](state, 0, 1)


def test_rnn_state_fork_sequence(state):
    _set_one(state)
    G["kv_state_fork_sequence"](state, 0, 1, -1)
    check(state, [0, 1], [[TWO, THREE], [TWO, THREE]])
    G["kv_state_popn"](state, 1, 1)
    check(state, [0, 1], [[TWO, THREE], [ZERO, ONE]])
