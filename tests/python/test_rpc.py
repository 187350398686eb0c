"""RPC over loopback through ctypes, the way TVM v0.8's Python drives it: our `tvm_rpc` server
binary on one side, our library as the client on the other (`rpc.Connect`, remote modules,
remote arrays, `runtime.RPCTimeEvaluator`, `rpc.LocalSession`), plus a tracker, several clients
at once, a client that disconnects in the middle of a packet, path escapes and tokens.

The server binary is `TVM_RPC_SERVER_BIN`, else target/release/tvm_rpc (built by
scripts/test-rpc.sh). The tracker is TVM's own (`tvm.rpc.tracker`) when TVM's Python package is
importable, else the minimal one below, which speaks the same protocol."""
import ctypes
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

from test_ctypes_ffi import (ROOT, DLDevice, TVMError, check, fixture, get_global, lib, register)

SERVER_BIN = os.environ.get("TVM_RPC_SERVER_BIN", os.path.join(ROOT, "target", "release", "tvm_rpc"))
RPC_MAGIC = 0xFF271
TRACKER_MAGIC = 0x2F271
MANIFEST = None


def manifest():
    global MANIFEST
    if MANIFEST is None:
        with open(fixture("manifest.json")) as f:
            MANIFEST = json.load(f)["fixtures"]
    return MANIFEST


def need_server():
    if not os.access(SERVER_BIN, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail("RPC server binary missing under CI: " + SERVER_BIN)
        pytest.skip("RPC server binary not built: " + SERVER_BIN)


class ServerProc:
    """Our server binary on a free port."""

    def __init__(self, *args, env=None):
        need_server()
        self.work = tempfile.mkdtemp(prefix="tvm-rpc-pytest-")
        cmd = [SERVER_BIN, "server", "--port=0", "--work-dir=" + self.work, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        line = self.proc.stdout.readline()
        assert "listening on" in line, line + self.proc.stderr.read()
        self.port = int(line.rsplit(":", 1)[1])

    def stop(self):
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=20)
        left = os.listdir(self.work)
        shutil.rmtree(self.work, ignore_errors=True)
        assert not left, "session work directories left behind: %s" % left
        return err


@pytest.fixture
def server():
    s = ServerProc("--key=pytest")
    yield s
    s.stop()


def connect(port, key, *init):
    return get_global("rpc.Connect")("127.0.0.1", port, key, *init)


class Remote:
    """A session: its module and remote CPU device (what tvm.rpc.RPCSession offers)."""

    def __init__(self, sess):
        self.sess = sess
        self.index = get_global("rpc.SessTableIndex")(sess)
        self.dev = DLDevice(1 + 128 * (self.index + 1), 0)

    def upload(self, name, data):
        self.sess["tvm.rpc.server.upload"](name, data)

    def download(self, name):
        return self.sess["tvm.rpc.server.download"](name)

    def load_module(self, name):
        return get_global("rpc.LoadRemoteModule")(self.sess, name)

    def empty(self, shape, dtype="float32"):
        shape_arr = np.array(shape, dtype="int64")
        return get_global("runtime.TVMArrayAllocWithScope")(
            ctypes.c_void_p(shape_arr.ctypes.data), len(shape), dtype, self.dev, None)

    def array(self, a):
        x = self.empty(a.shape)
        x.copyfrom(a)
        return x


def run_add_one(r):
    r.upload("add_one.so", open(fixture("add_one.so"), "rb").read())
    m = r.load_module("add_one.so")
    assert m.type_key == "rpc"
    a = np.load(fixture("add_one.A.npy"))
    want = np.load(fixture("add_one.B.npy"))
    x, y = r.array(a), r.empty(want.shape)
    m["add_one"](x, y)
    np.testing.assert_array_equal(y.numpy(), want)
    # module.time_evaluator("add_one", remote.cpu(), number=3, repeat=2)
    feval = get_global("runtime.RPCTimeEvaluator")(m, "add_one", r.dev.device_type, r.dev.device_id, 3, 2, 0, "")
    blob = feval(x, y)
    times = struct.unpack("@" + "d" * 2, blob)
    assert all(0 < t < 1 for t in times), times
    return m


def run_mlp(r):
    info = manifest()["mlp"]
    r.upload("mlp.so", open(fixture("mlp.so"), "rb").read())
    lib_mod = r.load_module("mlp.so")
    gmod = lib_mod["default"](r.dev)  # graph_executor.GraphModule(remote_lib["default"](remote.cpu()))
    data = np.load(fixture(info["inputs"]["data"]))
    gmod["set_input"]("data", r.array(data))
    gmod["run"]()
    out = gmod["get_output"](0).numpy()
    np.testing.assert_allclose(out, np.load(fixture(info["outputs"][0])), rtol=info["rtol"], atol=info["atol"])
    # GraphModule.benchmark: time_evaluator("run", dev, repeat=2, number=2)
    feval = get_global("runtime.RPCTimeEvaluator")(gmod, "run", r.dev.device_type, 0, 2, 2, 0, "")
    assert len(struct.unpack("@dd", feval())) == 2


def test_remote_modules(server):
    r = Remote(connect(server.port, "pytest"))
    run_add_one(r)
    run_mlp(r)
    assert r.download("add_one.so") == bytearray(open(fixture("add_one.so"), "rb").read())
    listing = r.sess["tvm.rpc.server.listdir"](".")
    assert "add_one.so," in listing and "mlp.so," in listing
    r.sess["tvm.rpc.server.remove"]("add_one.so")
    with pytest.raises(TVMError, match="RPCError"):
        r.download("add_one.so")


def test_path_escapes_refused(server):
    r = Remote(connect(server.port, "pytest"))
    outside = os.path.join(tempfile.gettempdir(), "tvm-rpc-escape-%d" % os.getpid())
    for bad in ["../escape", outside, "a/../../escape"]:
        with pytest.raises(TVMError, match="work directory|absolute"):
            r.upload(bad, b"x")
        with pytest.raises(TVMError):
            r.download(bad)
        with pytest.raises(TVMError):
            r.load_module(bad)
    assert not os.path.exists(outside)
    assert not os.path.exists(os.path.join(server.work, "..", "escape"))


def test_wrong_key_and_token():
    s = ServerProc("--key=k", "--token=s3cret")
    try:
        with pytest.raises(TVMError, match="cannot find server that matches key"):
            connect(s.port, "k")
        with pytest.raises(TVMError, match="cannot find server that matches key"):
            connect(s.port, "other -token=s3cret")
        Remote(connect(s.port, "k -token=s3cret")).empty((2,))
        os.environ["TVM_RPC_TOKEN"] = "s3cret"
        try:
            Remote(connect(s.port, "k")).empty((2,))
        finally:
            del os.environ["TVM_RPC_TOKEN"]
    finally:
        s.stop()


def raw_hello(port, key):
    s = socket.create_connection(("127.0.0.1", port))
    k = key.encode()
    s.sendall(struct.pack("<ii", RPC_MAGIC, len(k)) + k)
    code, = struct.unpack("<i", s.recv(4))
    assert code == RPC_MAGIC
    n, = struct.unpack("<i", s.recv(4))
    s.recv(n)
    return s


def test_disconnect_mid_packet_and_garbage(server):
    # A packet announced as 1000 bytes, cut after 10.
    s = raw_hello(server.port, "client:pytest")
    s.sendall(struct.pack("<Q", 1000) + b"\x03\x00\x00\x00" + b"\x00" * 6)
    s.close()
    # An unknown RPC code: the server ends that session.
    s = raw_hello(server.port, "client:pytest")
    s.sendall(struct.pack("<Qi", 4, 99))
    s.settimeout(10)
    assert s.recv(16) == b""
    s.close()
    # Not a TVM client.
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    s.close()
    # The server goes on.
    run_add_one(Remote(connect(server.port, "pytest")))


def test_several_clients_at_once(server):
    errors = []

    def client(i):
        try:
            r = Remote(connect(server.port, "pytest"))
            data = bytes([i]) * (1000 + i)
            r.upload("mine.bin", data)
            time.sleep(0.05)
            assert r.download("mine.bin") == bytearray(data)
            run_add_one(r)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_session_timeout(server):
    r = Remote(connect(server.port, "pytest -timeout=1"))
    r.empty((2,))
    time.sleep(2.5)
    with pytest.raises(TVMError, match="RPCError"):
        r.empty((2,))


def test_local_session():
    work = tempfile.mkdtemp(prefix="tvm-rpc-local-")
    # What tvm.rpc.LocalSession does through server._server_env: a Python workpath, registered
    # over the runtime's own (override=True there; here: remove, then register).
    check(lib.TVMFuncRemoveGlobal(b"tvm.rpc.server.workpath"))
    register("tvm.rpc.server.workpath", lambda p: os.path.join(work, p))
    try:
        r = Remote(get_global("rpc.LocalSession")())
        run_add_one(r)
        run_mlp(r)
        with pytest.raises(TVMError, match="work directory"):
            r.upload("../escape", b"x")
        os.symlink(tempfile.gettempdir(), os.path.join(work, "out"))
        with pytest.raises(TVMError, match="outside the work directory"):
            r.upload("out/escape-%d" % os.getpid(), b"x")
    finally:
        check(lib.TVMFuncRemoveGlobal(b"tvm.rpc.server.workpath"))
        shutil.rmtree(work, ignore_errors=True)


def test_pipe_client():
    # rpc.CreatePipeClient(cmd...): our server at the other end of two pipes (popen convention).
    need_server()
    r = Remote(get_global("rpc.CreatePipeClient")(SERVER_BIN, "pipe", "--silent"))
    run_add_one(r)
    del r


# ---------------------------------------------------------------------------------------------
# Tracker

def send_json(sock, data):
    d = json.dumps(data).encode()
    sock.sendall(struct.pack("<i", len(d)) + d)


def recv_all(sock, n):
    buf = b""
    while len(buf) < n:
        c = sock.recv(n - len(buf))
        if not c:
            raise IOError("connection reset")
        buf += c
    return buf


def recv_json(sock):
    n, = struct.unpack("<i", recv_all(sock, 4))
    return json.loads(recv_all(sock, n))


class MiniTracker:
    """The tracker protocol of python/tvm/rpc/tracker.py, FIFO per key, one thread per connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.cond = threading.Condition()
        self.queues = {}
        self.infos = []
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn, addr), daemon=True).start()

    def serve(self, conn, addr):
        pending = set()
        try:
            magic, = struct.unpack("<i", recv_all(conn, 4))
            assert magic == TRACKER_MAGIC
            conn.sendall(struct.pack("<i", TRACKER_MAGIC))
            while True:
                msg = recv_json(conn)
                code = msg[0]
                if code == 3:  # PUT [3, key, [port, matchkey], custom_addr]
                    key, (port, matchkey) = msg[1], msg[2]
                    host = msg[3] if len(msg) > 3 and msg[3] is not None else addr[0]
                    with self.cond:
                        pending.add(matchkey)
                        self.queues.setdefault(key, []).append((host, port, matchkey, pending))
                        self.cond.notify_all()
                    send_json(conn, 0)
                elif code == 4:  # REQUEST [4, key, user, priority]
                    with self.cond:
                        self.cond.wait_for(lambda: self.queues.get(msg[1]), timeout=30)
                        host, port, matchkey, owner = self.queues[msg[1]].pop(0)
                        owner.discard(matchkey)
                    send_json(conn, [0, [host, port, matchkey]])
                elif code == 7:  # GET_PENDING_MATCHKEYS
                    with self.cond:
                        send_json(conn, list(pending))
                elif code == 5:  # UPDATE_INFO
                    self.infos.append(msg[1])
                    send_json(conn, 0)
                elif code == 1:  # PING
                    send_json(conn, 0)
                else:
                    send_json(conn, -1)
        except (IOError, OSError, struct.error, AssertionError):
            pass
        finally:
            with self.cond:
                for q in self.queues.values():
                    q[:] = [v for v in q if v[3] is not pending]
            conn.close()

    def close(self):
        self.sock.close()


def start_tracker():
    try:
        from tvm.rpc.tracker import Tracker  # TVM's own, when its Python package is importable
        t = Tracker(host="127.0.0.1", port=9190, port_end=9290, silent=True)
        return t, t.port, t.terminate
    except ImportError:
        t = MiniTracker()
        return t, t.port, t.close


def tracker_request(port, key):
    """tvm.rpc.connect_tracker(...).request(key): (host, port, matchkey)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack("<i", TRACKER_MAGIC))
    assert struct.unpack("<i", recv_all(s, 4))[0] == TRACKER_MAGIC
    send_json(s, [4, key, "", 1])
    value = recv_json(s)
    s.close()
    assert value[0] == 0, value
    return value[1]


def test_tracker():
    _, tport, stop_tracker = start_tracker()
    s = ServerProc("--key=rasp", "--tracker=127.0.0.1:%d" % tport)
    try:
        for _ in range(2):  # in sequence: the server offers a new match key after each session
            host, port, matchkey = tracker_request(tport, "rasp")
            assert port == s.port and matchkey.startswith("rasp:")
            r = Remote(get_global("rpc.Connect")(host, port, matchkey))
            run_add_one(r)
            del r
    finally:
        err = s.stop()
        stop_tracker()
    assert "registered with tracker" in err, err
