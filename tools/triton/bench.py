"""Load on the Triton backend: N concurrent clients, throughput and latency percentiles, server RSS.

Run by scripts/bench-triton.sh (which builds the release backend and has the server and client
installed). For each model (resnet18 and mlp2 of the shared fixtures, the latter small enough
that per-request overhead dominates) and each instance count, starts tritonserver on loopback
ports, warms up, then runs CLIENTS processes that each send requests back to back over gRPC for
SECONDS seconds, and prints requests/s, p50 and p99 latency and the server's resident memory.

    python bench.py BACKEND_SO [--clients 4] [--seconds 10] [--instances 1,4] [--models resnet18,mlp2]
                    [--python-backend LIBDIR]

With --python-backend, each point is followed by the same point through Triton's Python backend
(bench_python.py, on LIBDIR/libtvm_runtime.so), so that both see the same machine load, and the
ratios are printed at the end.
"""

import argparse
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def start_server(repo, backends, log):
    import pytriton

    exe = Path(pytriton.__file__).parent / "tritonserver" / "bin" / "tritonserver"
    http, grpc = free_port(), free_port()
    proc = subprocess.Popen(
        [str(exe), f"--model-repository={repo}", f"--backend-directory={backends}",
         "--http-address=127.0.0.1", f"--http-port={http}", "--grpc-address=127.0.0.1",
         f"--grpc-port={grpc}", "--allow-metrics=false", "--exit-timeout-secs=5"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(Path(log).read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, grpc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server not ready")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def client(args):
    port, model, x, seconds, start_at = args
    import tritonclient.grpc as g

    c = g.InferenceServerClient(f"127.0.0.1:{port}")
    inp = g.InferInput("data", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    out = [g.InferRequestedOutput("output_0")]
    while time.time() < start_at:
        time.sleep(0.001)
    lat = []
    end = start_at + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        c.infer(model, [inp], outputs=out)
        lat.append(time.perf_counter() - t0)
    c.close()
    return lat


def run(backend, model, instances, clients, seconds):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "backends" / "tvm").mkdir(parents=True)
        shutil.copyfile(backend, tmp / "backends" / "tvm" / "libtriton_tvm.so")
        (tmp / "models" / model / "1").mkdir(parents=True)
        shutil.copyfile(SHARED / f"{model}.so", tmp / "models" / model / "1" / "model.so")
        (tmp / "models" / model / "config.pbtxt").write_text(
            f'backend: "tvm"\ninstance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n')
        proc, port = start_server(tmp / "models", tmp / "backends", tmp / "server.log")
        try:
            idle = rss_kib(proc.pid)
            x = np.load(SHARED / f"{model}.input.data.npy")
            client((port, model, x, 1.0, time.time()))  # warm-up
            start_at = time.time() + 1.0
            with mp.get_context("spawn").Pool(clients) as pool:
                lats = pool.map(client, [(port, model, x, seconds, start_at)] * clients)
            rss = rss_kib(proc.pid)
        finally:
            stop(proc)
    all_lat = np.array([v for lat in lats for v in lat]) * 1e3
    return {
        "model": model, "instances": instances, "clients": clients, "requests": len(all_lat),
        "rps": len(all_lat) / seconds, "p50_ms": float(np.percentile(all_lat, 50)),
        "p99_ms": float(np.percentile(all_lat, 99)), "rss_idle_mib": idle / 1024, "rss_mib": rss / 1024,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("backend")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--instances", default="1,4")
    ap.add_argument("--models", default="resnet18,mlp2")
    ap.add_argument("--python-backend", metavar="LIBDIR", help="also run each point through the Python backend")
    a = ap.parse_args()
    if a.python_backend:
        import bench_python

        ffi = bench_python.load_ffi(a.python_backend)
    print(f"cpus: {os.cpu_count()}, clients: {a.clients} (processes, gRPC), {a.seconds:g} s per point")
    print(f"{'path':7} {'model':10} {'inst':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'RSS MiB':>8} {'(loaded, idle)':>14}")
    ratios = []
    for model in a.models.split(","):
        for n in (int(v) for v in a.instances.split(",")):
            r = run(a.backend, model, n, a.clients, a.seconds)
            print(f"{'native':7} {model:10} {n:>4} {r['rps']:>9.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                  f"{r['rss_mib']:>8.1f} {r['rss_idle_mib']:>14.1f}", flush=True)
            if a.python_backend:
                with tempfile.TemporaryDirectory() as tmp:
                    rps, p50, p99, rss, idle = bench_python.run(ffi, model, n, a.clients, a.seconds, Path(tmp) / "log")
                print(f"{'python':7} {model:10} {n:>4} {rps:>9.1f} {p50:>8.2f} {p99:>8.2f} {rss:>8.1f} {idle:>14.1f}",
                      flush=True)
                ratios.append((model, n, r["rps"] / rps, r["p99_ms"] / p99, r["rss_mib"] / rss))
    if ratios:
        print("native / python: throughput, p99 latency, resident memory")
        for model, n, t, p, m in ratios:
            print(f"  {model:10} {n} instance(s): {t:.2f}x  {p:.2f}x  {m:.2f}x")


if __name__ == "__main__":
    main()
