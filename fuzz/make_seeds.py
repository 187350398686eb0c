#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from TVM's fixtures
(../shared/fixtures*: the `__tvm_dev_mblob` of each exported library, taken apart into its
entries; params files; graph JSON) and the project's own test files (tests/fixtures), plus a few
small hand-made inputs. Run by hand from the repository root when fixtures change; the output is
committed. Standard library only: the blob symbol is found through the ELF section and symbol
tables, the entries are split with the blob's layouts (crates/classic/src/module/blob.rs)."""

import hashlib
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")
OUT = os.path.join(ROOT, "fuzz", "corpus")
# Larger inputs make slow seeds: the big models are represented by their JSON and by their blob
# with the large parameters left out.
MAX_SEED = {"vm_executable": 512 << 10}
MAX_OTHER = 64 << 10
SMALL_PARAM = 16 << 10

NDARRAY_MAGIC = 0xDD5E40F096B4A13F
PARAMS_MAGIC = 0xF7E58D4F05049CB7


def elf_symbol(path, name):
    """The bytes of a defined ELF64 symbol (from .dynsym or .symtab), or None."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        off = shoff + i * shentsize
        sh_name, sh_type, _, sh_addr, sh_offset, sh_size, sh_link, _, _, sh_entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, off)
        secs.append((sh_name, sh_type, sh_addr, sh_offset, sh_size, sh_link, sh_entsize))
    for sh_name, sh_type, _, sh_offset, sh_size, sh_link, sh_entsize in secs:
        if sh_type not in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            continue
        strtab = secs[sh_link]
        for k in range(sh_size // sh_entsize):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", data, sh_offset + k * sh_entsize)
            start = strtab[3] + st_name
            sym = data[start:data.index(b"\0", start)].decode()
            if sym == name and st_shndx not in (0, 0xFFF1, 0xFFF2) and st_shndx < len(secs):
                sec = secs[st_shndx]
                if sec[1] == 8:  # SHT_NOBITS
                    return None
                off = sec[3] + (st_value - sec[2])
                return data[off:off + st_size]
    return None


class Reader:
    def __init__(self, b, pos=0):
        self.b, self.pos = b, pos

    def u64(self):
        v, = struct.unpack_from("<Q", self.b, self.pos)
        self.pos += 8
        return v

    def take(self, n):
        s = self.b[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("short")
        self.pos += n
        return s

    def str(self):
        return self.take(self.u64())

    def vec_str(self):
        return [self.str() for _ in range(self.u64())]

    def ndarray(self):
        start = self.pos
        self.take(16 + 8)  # magic, reserved, device
        ndim, = struct.unpack_from("<i", self.b, self.pos)
        self.take(4 + 4 + 8 * ndim)
        self.take(self.u64())
        return self.b[start:self.pos]

    def fmap(self):
        for _ in range(self.u64()):
            self.str()
            self.str()
            self.take(4 * self.u64())
            self.vec_str()


def split_blob(payload):
    """(key, entry data) for each entry of a blob payload, up to the first unknown key."""
    r = Reader(payload)
    out = []
    for _ in range(r.u64()):
        key = r.str().decode()
        start = r.pos
        if key == "_lib":
            pass
        elif key == "_import_tree":
            for _ in range(2):
                r.take(8 * r.u64())
        elif key in ("GraphExecutorFactory", "GraphRuntimeFactory"):
            r.str()
            r.u64()
            for _ in r.vec_str():
                r.ndarray()
            r.str()
        elif key in ("opencl", "cuda"):
            r.str()
            r.fmap()
            r.str()
        elif key == "VMExecutable":
            r.str()
        elif key == "AotExecutorFactory":
            r.u64()
            for _ in r.vec_str():
                r.ndarray()
            r.str()
        elif key == "metadata_module":
            pass
        elif key in ("metadata", "const_loader"):
            r.vec_str()
            for _ in range(r.u64()):
                r.ndarray()
            r.vec_str()
            for _ in range(r.u64()):
                r.vec_str()
        elif key.endswith("_json"):
            r.str()
            r.str()
            r.vec_str()
        else:
            out.append((key, None))
            break
        out.append((key, payload[start:r.pos]))
    return out


def fmap_of(entry):
    """The function map of an opencl/cuda entry as .tvm_meta.json text."""
    r = Reader(entry)
    r.str()
    infos = {}
    codes = {0: "int", 1: "uint", 2: "float", 3: "handle"}
    for _ in range(r.u64()):
        key = r.str().decode()
        name = r.str().decode()
        types = []
        for _ in range(r.u64()):
            code, bits, lanes = struct.unpack("<BBH", r.take(4))
            types.append("handle" if code == 3 else f"{codes.get(code, 'int')}{bits}" + (f"x{lanes}" if lanes > 1 else ""))
        tags = [t.decode() for t in r.vec_str()]
        infos[key] = {"name": name, "arg_types": types, "launch_param_tags": tags}
    return json.dumps({"tvm_version": "0.8.0", "func_info": infos}, indent=2).encode()


seeds = {}


def add(target, data, why, limit=None):
    if data is None or len(data) > (limit or MAX_SEED.get(target, MAX_OTHER)):
        return
    seeds.setdefault(target, {})[hashlib.sha1(data).hexdigest()[:16]] = (data, why)


def u64(v):
    return struct.pack("<Q", v)


def s(b):
    return u64(len(b)) + b


def record(shape, code, bits, data):
    out = u64(NDARRAY_MAGIC) + u64(0) + struct.pack("<ii", 1, 0) + struct.pack("<i", len(shape))
    out += struct.pack("<BBH", code, bits, 1) + b"".join(struct.pack("<q", d) for d in shape)
    return out + u64(len(data)) + data


def params(named):
    return u64(PARAMS_MAGIC) + u64(0) + u64(len(named)) + b"".join(s(n) for n, _ in named) + u64(
        len(named)) + b"".join(r for _, r in named)


def shrink_blob(payload):
    """The payload with each graph factory's parameters cut to the small ones (None if the blob
    has no factory or cannot be split)."""
    entries = split_blob(payload)
    if any(e is None for _, e in entries) or not any(
            k in ("GraphExecutorFactory", "AotExecutorFactory") for k, _ in entries):
        return None
    out = u64(len(entries))
    for key, entry in entries:
        if key == "GraphExecutorFactory":
            r = Reader(entry)
            graph = r.str()
            r.u64()
            names = r.vec_str()
            kept = [(n, rec) for n, rec in ((n, r.ndarray()) for n in names) if len(rec) <= SMALL_PARAM][:4]
            entry = s(graph) + u64(len(kept)) + u64(len(kept)) + b"".join(s(n) for n, _ in kept)
            entry += b"".join(rec for _, rec in kept) + s(r.str())
        if key == "AotExecutorFactory":
            r = Reader(entry)
            r.u64()
            names = r.vec_str()
            kept = [(n, rec) for n, rec in ((n, r.ndarray()) for n in names) if len(rec) <= SMALL_PARAM][:4]
            entry = u64(len(kept)) + u64(len(kept)) + b"".join(s(n) for n, _ in kept)
            entry += b"".join(rec for _, rec in kept) + s(r.str())
        out += s(key.encode()) + entry
    return out


def main():
    dirs = [os.path.join(SHARED, d) for d in ("fixtures", "fixtures-v0.18", "fixtures-vm")]
    for d in dirs:
        if not os.path.isdir(d):
            sys.exit(f"missing {d}")
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            tag = f"{os.path.basename(d)}/{f}"
            if f.endswith(".so"):
                blob = elf_symbol(p, "__tvm_dev_mblob")
                if blob is None:
                    continue
                n, = struct.unpack_from("<Q", blob)
                payload = blob[8:8 + n]
                add("blob", payload, tag)
                add("blob", shrink_blob(payload), tag + " (small params only)")
                for key, entry in split_blob(payload):
                    if entry is None:
                        continue
                    if key in ("GraphExecutorFactory", "GraphRuntimeFactory"):
                        r = Reader(entry)
                        add("graph_json", r.str(), tag)
                        r.u64()
                        names = r.vec_str()
                        recs = [r.ndarray() for _ in names]
                        for rec in recs[:3]:
                            add("ndarray_record", rec, tag)
                        small = [(nm, rc) for nm, rc in zip(names, recs) if len(rc) <= SMALL_PARAM][:4]
                        add("params", params(small), tag + " (first params)")
                    elif key in ("opencl", "cuda"):
                        add(f"{key}_payload", entry, tag)
                        add("kernel_meta", fmap_of(entry), tag)
                    elif key == "VMExecutable":
                        add("vm_executable", Reader(entry).str(), tag)
                    elif key in ("metadata", "const_loader"):
                        add("metadata", entry, tag, limit=512 << 10)
                    elif key.endswith("_json"):
                        add("json_runtime", entry, tag)
                    elif key == "AotExecutorFactory":
                        add("aot_factory", entry, tag, limit=512 << 10)
                        r = Reader(entry)
                        r.u64()
                        names = r.vec_str()
                        kept = [(n, rec) for n, rec in ((n, r.ndarray()) for n in names) if len(rec) <= SMALL_PARAM][:4]
                        small = u64(len(kept)) + u64(len(kept)) + b"".join(s(n) for n, _ in kept)
                        add("aot_factory", small + b"".join(rec for _, rec in kept) + s(r.str()), tag + " (small params)")
            elif f.endswith(".params"):
                add("params", open(p, "rb").read(), tag, limit=512 << 10)
            elif f.endswith(".json") and f != "manifest.json":
                add("graph_json", open(p, "rb").read(), tag)
    tf = os.path.join(ROOT, "tests", "fixtures")
    for f in sorted(os.listdir(tf)):
        if f.endswith(".tvm_meta.json"):
            add("kernel_meta", open(os.path.join(tf, f), "rb").read(), f"tests/fixtures/{f}")
    # Small hand-made inputs: every dtype code, 0-d, empty, vector lanes.
    for shape, code, bits in [((), 2, 32), ((0,), 0, 8), ((2, 3), 1, 16), ((4,), 2, 64), ((3,), 1, 1)]:
        size = 1
        for d in shape:
            size *= d
        add("ndarray_record", record(shape, code, bits, bytes(size * ((bits + 7) // 8))), "hand-made")
    add("params", params([(b"x", record((2,), 2, 32, struct.pack("<ff", 1, 2)))]), "hand-made")
    add("params", params([]), "hand-made (empty)")
    add("aot_factory", u64(1) + u64(1) + s(b"p0") + record((2,), 2, 32, struct.pack("<ff", 1, 2)) + s(b"default"),
        "hand-made")
    add("metadata", u64(1) + s(b"c0") + u64(1) + record((2,), 2, 32, struct.pack("<ff", 1, 2)) + u64(1) + s(b"f0")
        + u64(1) + u64(1) + s(b"c0"), "hand-made")
    # Blobs: a library importing two OpenCL modules, legacy layout (no tree), an empty blob.
    cl = open(os.path.join(tf, "opencl_kernels.cl"), "rb").read()
    meta = json.load(open(os.path.join(tf, "opencl_kernels.tvm_meta.json")))
    fm = b""
    for k, info in meta["func_info"].items():
        types = b""
        for t in info["arg_types"]:
            types += {"handle": struct.pack("<BBH", 3, 64, 1), "float32": struct.pack("<BBH", 2, 32, 1),
                      "int32": struct.pack("<BBH", 0, 32, 1)}.get(t, struct.pack("<BBH", 0, 64, 1))
        tags = info.get("launch_param_tags", [])
        fm += s(k.encode()) + s(info.get("name", "").encode()) + u64(len(info["arg_types"])) + types
        fm += u64(len(tags)) + b"".join(s(t.encode()) for t in tags)
    ocl = s(b"cl") + u64(len(meta["func_info"])) + fm + s(cl)
    add("opencl_payload", ocl, "tests/fixtures/opencl_kernels")
    tree = s(b"_import_tree") + u64(4) + u64(0) + u64(2) + u64(2) + u64(2) + u64(2) + u64(1) + u64(2)
    add("blob", u64(4) + s(b"_lib") + s(b"opencl") + ocl + s(b"opencl") + ocl + tree, "hand-made tree")
    add("blob", u64(1) + s(b"opencl") + ocl, "hand-made legacy")
    add("blob", u64(0), "hand-made empty")
    # RPC packet bodies (code, payload) of each kind, and client handshakes.
    i32 = lambda v: struct.pack("<i", v)
    tensor = u64(0x1000) + i32(1) + i32(0) + i32(2) + struct.pack("<BBH", 2, 32, 1) + struct.pack("<qq", 2, 3) + u64(0)
    seq = i32(5) + i32(0) + i32(11) + i32(7) + i32(6) + i32(2) + u64(7) + s(b"hello") + tensor + i32(1) + i32(0) + struct.pack("<d", 1.5)
    for body in [i32(2) + s(b"0.8.0") + i32(0), i32(3) + u64(0x55aa) + seq, i32(4) + seq,
                 i32(5) + i32(1) + i32(11) + s(b"RPCError: boom"), i32(6) + tensor + u64(24),
                 i32(7) + tensor + u64(4) + b"\x00\x00\x80\x3f", i32(8) + b"\x01\x02", i32(1),
                 i32(9) + i32(1) + i32(11) + s(b"runtime.GetDeviceAttr"),
                 i32(13) + i32(3) + i32(6) + i32(0) + i32(0) + i32(1) + i32(0) + i32(0) + i32(0) + u64(64) + u64(64)]:
        add("rpc_packet", body, "hand-made")
    # Client streams for the server: framed packets; handle 2^64-1 stands for the last handle the
    # server handed out (see fuzz/src/lib.rs, rpc_server).
    last = 2**64 - 1
    frame = lambda body: u64(len(body)) + body
    def call(handle, codes_vals):
        return i32(3) + u64(handle) + i32(len(codes_vals)) + b"".join(i32(c) for c, _ in codes_vals) + b"".join(
            v for _, v in codes_vals)
    def syscall(code, codes_vals):
        return i32(code) + i32(len(codes_vals)) + b"".join(i32(c) for c, _ in codes_vals) + b"".join(
            v for _, v in codes_vals)
    getg = lambda name: syscall(9, [(11, s(name))])
    cpu_t = lambda data, n: u64(data) + i32(1) + i32(0) + i32(1) + struct.pack("<BBH", 2, 32, 1) + struct.pack(
        "<q", n) + u64(0)
    streams = [
        [getg(b"runtime.GetDeviceAttr"), call(last, [(0, u64(1)), (0, u64(0)), (0, u64(0))]), i32(1)],
        [syscall(13, [(6, i32(1) + i32(0)), (0, u64(64)), (0, u64(64)), (5, struct.pack("<BBHi", 2, 32, 1, 0))]),
         i32(7) + cpu_t(last, 16) + u64(64) + bytes(range(64)), i32(6) + cpu_t(last, 16) + u64(64),
         syscall(14, [(6, i32(1) + i32(0)), (3, u64(last))]), i32(1)],
        [getg(b"runtime.String"), call(last, [(11, s(b"abc"))]), syscall(10, [(3, u64(last)), (0, u64(8))])],
        [getg(b"runtime.LoadParams"), call(last, [(12, s(params([(b"x", record((2,), 2, 32, bytes(8)))])))])],
        [getg(b"runtime.ShapeTuple"), call(last, [(0, u64(2)), (0, u64(3))]), getg(b"runtime.GetShapeTupleSize"),
         call(last, [(8, u64(last - 1))])],
        [syscall(12, [(6, i32(1) + i32(0)), (0, u64(0))]), syscall(18, [(6, i32(1) + i32(0))])],
    ]
    # TVM v0.22+ exports: the __tvm_ffi__library_bin symbol whole, and its relax.VMExecutable.
    d27 = os.path.join(SHARED, "fixtures-v0.27")
    if not os.path.isdir(d27):
        sys.exit(f"missing {d27}")
    for f in sorted(os.listdir(d27)):
        if not f.endswith(".so"):
            continue
        tag = f"fixtures-v0.27/{f}"
        sym = elf_symbol(os.path.join(d27, f), "__tvm_ffi__library_bin")
        if sym is None:
            continue
        add("relax_library_bin", sym, tag)
        r = Reader(sym, 8)
        indptr = [r.u64() for _ in range(r.u64())]
        for _ in range(r.u64()):
            r.u64()
        for _ in range(len(indptr) - 1):
            kind = r.str()
            if kind != b"_lib":
                payload = r.str()
                if kind == b"relax.VMExecutable":
                    add("relax_executable", payload, tag)
    # TVM v0.14-v0.20 Relax exports: the relax.Executable inside __tvm_dev_mblob.
    d18 = os.path.join(SHARED, "fixtures-v0.18-relax")
    for f in sorted(os.listdir(d18)) if os.path.isdir(d18) else []:
        blob = elf_symbol(os.path.join(d18, f), "__tvm_dev_mblob") if f.endswith(".so") else None
        if blob is None:
            continue
        r = Reader(blob, 8)
        for _ in range(r.u64()):
            key = r.str()
            if key == b"_import_tree":
                r.take(8 * r.u64())
                r.take(8 * r.u64())
            elif key == b"relax.Executable":
                add("relax_executable", r.str(), f"fixtures-v0.18-relax/{f}")
            elif key != b"_lib":
                break
    for st in streams:
        add("rpc_server", b"".join(frame(b) for b in st), "hand-made")
    for key in [b"client:mykey -timeout=10", b"server:rasp3b", b"client:abc -token=secret", b""]:
        add("rpc_handshake", i32(0xff271) + i32(len(key)) + key, "hand-made")
    for t in ("blob", "params", "ndarray_record", "graph_json", "opencl_payload", "cuda_payload",
              "kernel_meta", "vm_executable", "aot_factory", "rpc_packet", "rpc_handshake", "rpc_server",
              "metadata", "json_runtime", "relax_library_bin", "relax_executable"):
        d = os.path.join(OUT, t)
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):
            os.remove(os.path.join(d, old))
        for name, (data, why) in sorted(seeds.get(t, {}).items()):
            open(os.path.join(d, name), "wb").write(data)
        print(f"{t}: {len(seeds.get(t, {}))} seeds, "
              f"{sum(len(v[0]) for v in seeds.get(t, {}).values())} bytes")


if __name__ == "__main__":
    main()
