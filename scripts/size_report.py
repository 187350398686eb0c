#!/usr/bin/env python3
"""Where the bytes of a libtvm_runtime.so built with symbols go: code (.text symbols) by crate,
and the library's crates' code by subsystem, then the sections. Usage: size_report.py LIB [TOP]."""
import collections
import re
import subprocess
import sys

lib = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 14
syms = subprocess.run(["nm", "-S", "-C", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
BACKTRACE = ("gimli", "addr2line", "miniz_oxide", "rustc_demangle", "object")
crates, parts = collections.Counter(), collections.Counter()
total = 0
for line in syms.splitlines():
    f = line.split(None, 3)
    if len(f) < 4 or f[2] not in "tTwW":
        continue
    size, name = int(f[1], 16), f[3]
    total += size
    tokens = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    ours = [t for t in tokens if t == "tvm_runtime" or t.startswith("tvm_runtime_")]
    if ours:
        # The library's crates: tvm_runtime (the face), tvm_runtime_core, _classic, ...
        crate = ours[0]
        m = re.search(re.escape(crate) + r"::([a-z_]+)(?:::([a-z_]+))?", name)
        head = m.group(1) if m else "?"
        if head in ("device", "executor", "module") and m and m.group(2):
            head += "::" + m.group(2)
        parts[crate.replace("tvm_runtime_", "") + "::" + head] += size
    elif any(t in BACKTRACE for t in tokens) or ("std" in tokens and ("backtrace" in name or "symbolize" in name)):
        crate = "std: backtrace printing (panic hook)"
    elif tokens:
        crate = tokens[0] if tokens[0] not in ("core", "alloc", "std") else tokens[0] + " (generic code instantiated here)"
    else:
        crate = "C exports / runtime glue"
    crates[crate] += size
print(f"code in symbols: {total / 1024:.0f} KiB")
for c, s in crates.most_common(top):
    print(f"  {s / 1024:7.1f} KiB  {c}")
print("the library's code by crate and subsystem:")
for c, s in parts.most_common(top):
    print(f"  {s / 1024:7.1f} KiB  {c}")
print("sections:")
sections = subprocess.run(["size", "-A", lib], capture_output=True, text=True, check=True).stdout
for line in sections.splitlines():
    f = line.split()
    if len(f) >= 2 and f[0] in (".text", ".rodata", ".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".rela.dyn", ".data.rel.ro"):
        print(f"  {int(f[1]) / 1024:7.1f} KiB  {f[0]}")
