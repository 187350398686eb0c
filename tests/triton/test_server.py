"""The Triton backend (tools/triton, libtriton_tvm.so) in the real server.

Run by scripts/test-triton.sh, which builds the backend and installs the server (PyPI's
nvidia-pytriton, Triton 2.51, CPU only) and tritonclient. Environment: TRITON_TVM_BACKEND (the
built libtriton_tvm.so), TRITONSERVER (the server binary; default: the one of the pytriton
package). A model repository of the shared fixtures is built in a temporary directory; the server
runs on free loopback ports with --model-control-mode=explicit and is stopped at the end.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

tritonclient = pytest.importorskip("tritonclient")
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
CI = os.environ.get("CI") == "true"


def fixture_dir(name):
    d = SHARED / name
    if not d.is_dir():
        if CI:
            pytest.fail(f"fixtures {d} missing")
        pytest.skip(f"fixtures {d} not found")
    return d


def have_opencl():
    return any(Path("/etc/OpenCL/vendors").glob("*.icd")) or bool(os.environ.get("TVM_OPENCL_LIBRARY"))


def have_dnnl():
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout if Path(ldconfig).exists() else ""
    return any(f"libdnnl.so.{v}" in out for v in (2, 3)) or bool(os.environ.get("TVM_DNNL_LIBRARY"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manifest(d):
    return json.loads((d / "manifest.json").read_text())["fixtures"]


# name -> (fixture dir, fixture, config text). Outputs are named output_0, output_1, ...
GOOD = {
    # A graph executor factory of TVM v0.8, two instances, the whole shape per request.
    "mlp": ("fixtures", "mlp", """
max_batch_size: 0
input [ { name: "data" data_type: TYPE_FP32 dims: [1, 1, 28, 28] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [1, 10] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "threads" value: { string_value: "1" } }
"""),
    # Nothing but the backend: inputs and outputs completed from the export.
    "mlp_auto": ("fixtures", "mlp", ""),
    # Graph of TVM v0.18.
    "mlp_v018": ("fixtures-v0.18", "mlp", ""),
    # Batch 1 export served with max_batch_size 8 and the dynamic batcher.
    "mlp2_batch": ("fixtures", "mlp2", """
max_batch_size: 8
input [ { name: "data" data_type: TYPE_FP32 dims: [784] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [10] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""),
    "aot_mlp": ("fixtures-v0.18", "aot_mlp", ""),
    # Relay VM with a symbolic batch: gathered requests run as one call.
    "vm_dyn_batch": ("fixtures-vm", "vm_dyn_batch", """
max_batch_size: 16
input [ { name: "data" data_type: TYPE_FP32 dims: [784] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [10] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
"""),
    # BYOC: DNNL (oneDNN) JSON runtime inside the export.
    "cnn_dnnl": ("fixtures", "cnn_dnnl", ""),
    # OpenCL kernels (on PoCL in CI), CPU instances running on the OpenCL device.
    "mlp2_opencl": ("fixtures", "mlp2_opencl", """
parameters { key: "device" value: { string_value: "opencl" } }
"""),
}

BAD = {
    # name -> (fixture dir, fixture, config, how: "truncate" | None, what the error says)
    "broken": ("fixtures", "mlp", "", "truncate", "cannot load the export"),
    "wrong_input": ("fixtures", "mlp", """
max_batch_size: 0
input [ { name: "image" data_type: TYPE_FP32 dims: [1, 1, 28, 28] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [1, 10] } ]
""", None, "which the model does not have (its inputs: data)"),
    "operator_lib": ("fixtures", "add_one", "", None, "no model this backend runs"),
    "vm_no_config": ("fixtures-vm", "vm_dyn_batch", "", None, "Relay VM"),
    # A device this runtime has no driver for.
    "no_device": ("fixtures", "mlp", """
parameters { key: "device" value: { string_value: "vulkan" } }
""", None, "on vulkan:0"),
}


def write_model(repo, name, fdir, fname, config, how=None):
    d = fixture_dir(fdir)
    src = d / manifest(d)[fname]["file"]
    (repo / name / "1").mkdir(parents=True)
    dst = repo / name / "1" / "model.so"
    if how == "truncate":
        data = src.read_bytes()
        dst.write_bytes(data[: len(data) // 3])
    else:
        shutil.copyfile(src, dst)
    (repo / name / "config.pbtxt").write_text(f'backend: "tvm"\n{config}')


def expected(name):
    """(inputs, outputs, rtol, atol) of a GOOD model's fixture (its first run for a VM)."""
    fdir, fname, _ = GOOD[name]
    d = fixture_dir(fdir)
    m = manifest(d)[fname]
    tol = (m.get("rtol", 1e-5), m.get("atol", 1e-5))
    if m["kind"] == "vm":
        run = m["runs"][0]
        return ({"data": np.load(d / run["inputs"][0])}, [np.load(d / f) for f in run["outputs"]], *tol)
    ins = {k: np.load(d / v) for k, v in m["inputs"].items()}
    return ins, [np.load(d / f) for f in m["outputs"]], *tol


class Server:
    def __init__(self, repo, backend_dir, log, startup_models, extra=()):
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.log = log
        exe = os.environ.get("TRITONSERVER")
        if not exe:
            import pytriton

            exe = str(Path(pytriton.__file__).parent / "tritonserver" / "bin" / "tritonserver")
        cmd = [
            exe,
            f"--model-repository={repo}",
            f"--backend-directory={backend_dir}",
            "--model-control-mode=explicit",
            "--http-address=127.0.0.1",
            f"--http-port={self.http_port}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={self.grpc_port}",
            "--allow-metrics=false",
            "--exit-timeout-secs=10",
        ] + [f"--load-model={n}" for n in startup_models] + list(extra)
        self.proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{self.http_port}/v2/health/ready"
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited ({self.proc.returncode}):\n{Path(log).read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"tritonserver not ready in 120 s:\n{Path(log).read_text()[-4000:]}")

    def http(self, **kw):
        return httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}", **kw)

    def grpc(self):
        return grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")

    def rss_kib(self):
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    backend = os.environ.get("TRITON_TVM_BACKEND")
    if not backend or not Path(backend).is_file():
        pytest.fail(f"TRITON_TVM_BACKEND={backend!r}: build the backend first (scripts/test-triton.sh)")
    base = tmp_path_factory.mktemp("triton")
    backends = base / "backends" / "tvm"
    backends.mkdir(parents=True)
    shutil.copyfile(backend, backends / "libtriton_tvm.so")
    repo = base / "models"
    repo.mkdir()
    needs = {"cnn_dnnl": ("oneDNN (libdnnl.so.2 or .3)", have_dnnl()), "mlp2_opencl": ("an OpenCL ICD", have_opencl())}
    good = [n for n in GOOD if needs.get(n, ("", True))[1]]
    for n, (what, present) in needs.items():
        if not present:
            if CI:
                pytest.fail(f"{what} missing for model {n}")
            print(f"SKIP {n}: {what} not installed")
    for n in good:
        write_model(repo, n, *GOOD[n])
    for n, (fdir, fname, cfg, how, _) in BAD.items():
        write_model(repo, n, fdir, fname, cfg, how)
    # Weight sharing: resnet18 with one and with four instances, loaded on demand.
    resnet = fixture_dir("fixtures") / "resnet18.so"
    for n, count in (("resnet_x1", 1), ("resnet_x4", 4)):
        (repo / n / "1").mkdir(parents=True)
        shutil.copyfile(resnet, repo / n / "1" / "model.so")
        (repo / n / "config.pbtxt").write_text(
            f'backend: "tvm"\ninstance_group [ {{ count: {count} kind: KIND_CPU }} ]\n'
        )
    s = Server(repo, base / "backends", base / "server.log", good)
    s.good = good
    s.log_path = base / "server.log"
    s.client = s.http()  # for the main thread
    yield s
    s.client.close()
    s.stop()
    assert s.proc.returncode is not None
    print(Path(s.log_path).read_text()[-3000:])


def unload_and_wait(client, name, timeout=30):
    """Unloads `name` and waits until Triton has destroyed it, not only marked it unready
    (the repository index says UNAVAILABLE once the model is gone).

    First a pause: Triton (2.51, and its core's main branch alike) has a race of its own here.
    An instance's backend thread takes the instance out of its `model_instances_` deque while
    it runs a payload (the load's INIT and WARM_UP, an inference) and puts it back only after
    the payload has signalled its waiter or sent its responses; an unload that comes in that
    window runs `TritonBackendThread::StopBackendThread`, which reads `model_instances_.back()`
    unlocked, finds the deque empty and the server dies of a SIGSEGV (seen in this suite: the
    core dump's crashing thread is Triton's ModelDeleter, no backend frame on it). No backend
    can close that window; a client that unloads right after a response can hit it.
    """
    time.sleep(0.25)
    client.unload_model(name)
    deadline, state = time.time() + timeout, None
    while time.time() < deadline:
        state = {m["name"]: m for m in client.get_model_repository_index()}.get(name, {}).get("state")
        if state == "UNAVAILABLE":
            return
        time.sleep(0.02)
    raise AssertionError(f"{name} not unloaded in {timeout} s (state {state!r})")


def stats_at_least(server, model, count, timeout=20):
    """The model's statistics once its inference_count reaches `count` (the server may update
    them a moment after the responses went out)."""
    deadline = time.time() + timeout
    while True:
        stats = server.client.get_inference_statistics(model)["model_stats"][0]
        if int(stats["inference_count"]) >= count or time.time() > deadline:
            return stats
        time.sleep(0.05)


def infer_http(server, model, inputs, outputs=("output_0",)):
    with server.http() as client:
        return _infer_http(client, model, inputs, outputs)


def _infer_http(client, model, inputs, outputs):
    ins = []
    for name, arr in inputs.items():
        i = httpclient.InferInput(name, list(arr.shape), dtype_name(arr))
        i.set_data_from_numpy(arr, binary_data=True)
        ins.append(i)
    outs = [httpclient.InferRequestedOutput(o, binary_data=True) for o in outputs]
    r = client.infer(model, ins, outputs=outs)
    return [r.as_numpy(o) for o in outputs]


def infer_grpc(server, model, inputs, outputs=("output_0",)):
    with server.grpc() as client:
        return _infer_grpc(client, model, inputs, outputs)


def _infer_grpc(client, model, inputs, outputs):
    ins = []
    for name, arr in inputs.items():
        i = grpcclient.InferInput(name, list(arr.shape), dtype_name(arr))
        i.set_data_from_numpy(arr)
        ins.append(i)
    outs = [grpcclient.InferRequestedOutput(o) for o in outputs]
    r = client.infer(model, ins, outputs=outs)
    return [r.as_numpy(o) for o in outputs]


def dtype_name(arr):
    return {np.float32: "FP32", np.float64: "FP64", np.int32: "INT32", np.int64: "INT64"}[arr.dtype.type]


def batched(name, inputs):
    """Inputs as a batching model's config takes them (batch dimension first)."""
    if name in ("mlp2_batch", "vm_dyn_batch"):
        return {k: v.reshape(v.shape[0], -1) for k, v in inputs.items()}
    return inputs


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_every_model_kind_matches_the_manifest(server, proto):
    infer = infer_http if proto == "http" else infer_grpc
    for name in server.good:
        ins, outs, rtol, atol = expected(name)
        got = infer(server, name, batched(name, ins))
        np.testing.assert_allclose(got[0], outs[0].reshape(got[0].shape), rtol=rtol, atol=atol, err_msg=name)
        assert got[0].shape == outs[0].shape, (name, got[0].shape)


def test_config_is_completed_from_the_export(server):
    cfg = server.client.get_model_config("mlp_auto")
    assert [i["name"] for i in cfg["input"]] == ["data"]
    assert [int(d) for d in cfg["input"][0]["dims"]] == [1, 1, 28, 28]
    assert cfg["input"][0]["data_type"] == "TYPE_FP32"
    assert [o["name"] for o in cfg["output"]] == ["output_0"]
    assert [int(d) for d in cfg["output"][0]["dims"]] == [1, 10]
    log = Path(server.log_path).read_text()
    assert "model mlp version 1: graph executor factory" in log
    assert "2 instance(s) x 1 thread(s)" in log  # parameters { key: "threads" ... }
    assert "model aot_mlp version 1: AOT executor factory" in log
    assert "model vm_dyn_batch version 1: Relay VM executable" in log
    if "mlp2_opencl" in server.good:
        assert "instance mlp2_opencl_0: executor ready on opencl:0" in log
    aot = server.client.get_model_config("aot_mlp")
    assert [int(d) for d in aot["input"][0]["dims"]] == [1, 784]


def test_batches_split_and_gather(server):
    ins, outs, rtol, atol = expected("mlp2_batch")
    x = ins["data"].reshape(1, 784)
    # A batch of 3 on a batch-1 export: three runs, joined again.
    three = np.concatenate([x, x * 0.5, x]).astype(np.float32)
    got = infer_http(server, "mlp2_batch", {"data": three})[0]
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got[0], outs[0][0], rtol=rtol, atol=atol)
    np.testing.assert_allclose(got[2], outs[0][0], rtol=rtol, atol=atol)
    assert not np.allclose(got[1], got[0])
    # The VM with a symbolic batch: concurrent requests of batch 1, 5 and 16 (the dynamic batcher
    # may gather them) each get their own rows back.
    d = fixture_dir("fixtures-vm")
    runs = manifest(d)["vm_dyn_batch"]["runs"]
    results = {}

    def one(k):
        results[k] = infer_grpc(server, "vm_dyn_batch", {"data": np.load(d / runs[k]["inputs"][0])})[0]

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for k, run in enumerate(runs):
        want = np.load(d / run["outputs"][0])
        assert results[k].shape == want.shape
        np.testing.assert_allclose(results[k], want, rtol=1e-5, atol=1e-5)
    stats = stats_at_least(server, "vm_dyn_batch", 22)
    assert int(stats["inference_count"]) >= 22, stats
    # Eight concurrent requests of batch 1 within the batcher's delay: fewer runs than requests.
    x = np.load(d / runs[0]["inputs"][0])
    want = np.load(d / runs[0]["outputs"][0])
    before, count = int(stats["execution_count"]), int(stats["inference_count"])
    got = [None] * 8

    def single(k):
        got[k] = infer_grpc(server, "vm_dyn_batch", {"data": x})[0]

    threads = [threading.Thread(target=single, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    stats = stats_at_least(server, "vm_dyn_batch", count + 8)
    assert int(stats["inference_count"]) == count + 8, stats
    assert int(stats["execution_count"]) - before < 8, stats


def test_concurrent_clients_over_http_and_grpc(server):
    ins, outs, rtol, atol = expected("mlp")
    errors = []

    def client(k):
        try:
            for _ in range(10):
                infer = infer_http if k % 2 else infer_grpc
                x = ins["data"] * (1 + k % 3)
                got = infer(server, "mlp", {"data": x.astype(np.float32)})[0]
                if k % 3 == 0:
                    np.testing.assert_allclose(got, outs[0], rtol=rtol, atol=atol)
                assert got.shape == (1, 10)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    stats = stats_at_least(server, "mlp", 80)
    assert int(stats["inference_count"]) >= 80, stats


def test_malformed_requests_get_errors_and_the_server_keeps_serving(server):
    ins, outs, rtol, atol = expected("mlp2_batch")
    x = ins["data"].reshape(1, 784)
    bad = {
        "wrong dtype": {"data": x.astype(np.float64)},
        "wrong shape": {"data": x.reshape(1, 28, 28)},
        "wrong size": {"data": np.zeros((1, 700), np.float32)},
        "unknown input": {"image": x},
        "oversized batch": {"data": np.repeat(x, 9, axis=0)},
    }
    for what, inputs in bad.items():
        for infer in (infer_http, infer_grpc):
            with pytest.raises(InferenceServerException):
                infer(server, "mlp2_batch", inputs)
            # Still serving, correctly.
            got = infer(server, "mlp2_batch", {"data": x})[0]
            np.testing.assert_allclose(got, outs[0], rtol=rtol, atol=atol, err_msg=what)
    # A missing input: a request with none at all.
    with pytest.raises(Exception):  # the client may refuse it itself
        server.client.infer("mlp2_batch", [])
    # An output the model does not have.
    with pytest.raises(InferenceServerException):
        infer_http(server, "mlp2_batch", {"data": x}, outputs=("output_7",))
    assert server.client.is_server_live()
    assert server.client.is_model_ready("mlp2_batch")


def test_bad_models_fail_to_load_with_a_clear_message(server):
    client = server.client
    for name, (_, _, _, _, says) in BAD.items():
        with pytest.raises(InferenceServerException) as e:
            client.load_model(name)
        assert says in str(e.value), (name, str(e.value))
        assert not client.is_model_ready(name)
    index = {m["name"]: m for m in client.get_model_repository_index()}
    for name, (_, _, _, _, says) in BAD.items():
        assert index[name].get("state") == "UNAVAILABLE", index[name]
        assert says in index[name].get("reason", ""), index[name]
    log = Path(server.log_path).read_text()
    for _, (_, _, _, _, says) in BAD.items():
        assert says in log
    # The others keep serving.
    ins, outs, rtol, atol = expected("mlp")
    np.testing.assert_allclose(infer_http(server, "mlp", ins)[0], outs[0], rtol=rtol, atol=atol)


def test_unload_and_reload(server):
    client = server.client
    ins, outs, rtol, atol = expected("mlp_v018")
    for _ in range(3):
        unload_and_wait(client, "mlp_v018")
        assert not client.is_model_ready("mlp_v018")
        with pytest.raises(InferenceServerException):
            infer_http(server, "mlp_v018", ins)
        client.load_model("mlp_v018")
        assert client.is_model_ready("mlp_v018")
        np.testing.assert_allclose(infer_http(server, "mlp_v018", ins)[0], outs[0], rtol=rtol, atol=atol)


def test_load_unload_cycles_do_not_grow_memory(server):
    client = server.client

    def cycle():
        client.load_model("mlp_v018")
        unload_and_wait(client, "mlp_v018")

    for _ in range(5):
        cycle()
    before = server.rss_kib()
    for _ in range(20):
        cycle()
    grown = server.rss_kib() - before
    print(f"RSS growth over 20 load/unload cycles: {grown} KiB")
    # 20 cycles of a model with ~0.4 MB of weights: a leak of the export or the executor would
    # show as several MB; allocator noise stays well below.
    assert grown < 8 * 1024, f"RSS grew {grown} KiB over 20 load/unload cycles"
    client.load_model("mlp_v018")


def test_instances_share_the_weights(server):
    client = server.client
    deltas = {}
    x = {"data": np.load(fixture_dir("fixtures") / "resnet18.input.data.npy")}
    want = np.load(fixture_dir("fixtures") / "resnet18.output.0.npy")
    # The larger first: memory freed by an unload and reused by the next load can only make
    # the second delta smaller, which here only makes the check stricter.
    for name in ("resnet_x4", "resnet_x1"):
        before = server.rss_kib()
        client.load_model(name)
        # Runs touch every weight page and allocate the activations.
        for _ in range(4):
            np.testing.assert_allclose(infer_http(server, name, x)[0], want, rtol=1e-4, atol=1e-4)
        deltas[name] = server.rss_kib() - before
        unload_and_wait(client, name)
    params_kib = 11_700_000 * 4 // 1024  # resnet18: 11.7 M float32 parameters
    extra = deltas["resnet_x4"] - deltas["resnet_x1"]
    print(f"resident memory added by resnet18 with 1 / 4 instances: {deltas} KiB")
    # Three more instances with their own weights would add 3 x 45 MB; shared, they add only
    # their activation storage.
    assert deltas["resnet_x1"] > params_kib // 2, deltas
    assert extra < params_kib, (deltas, params_kib)
    assert "resnet_x4" in Path(server.log_path).read_text()


def test_backend_config_sets_threads_per_instance(server, tmp_path):
    """--backend-config=tvm,threads=N applies where the model sets no threads parameter."""
    repo = tmp_path / "models"
    write_model(repo, "mlp", "fixtures", "mlp", "instance_group [ { count: 2 kind: KIND_CPU } ]\n")
    backends = Path(os.environ["TRITON_TVM_BACKEND"]).parent
    (tmp_path / "backends" / "tvm").mkdir(parents=True)
    shutil.copyfile(backends / "libtriton_tvm.so", tmp_path / "backends" / "tvm" / "libtriton_tvm.so")
    s = Server(repo, tmp_path / "backends", tmp_path / "server.log", ["mlp"], ["--backend-config=tvm,threads=3"])
    try:
        ins, outs, rtol, atol = expected("mlp")
        np.testing.assert_allclose(infer_grpc(s, "mlp", ins)[0], outs[0], rtol=rtol, atol=atol)
    finally:
        s.stop()
    log = (tmp_path / "server.log").read_text()
    assert "2 instance(s) x 3 thread(s)" in log, log[-2000:]
