#!/usr/bin/env python3
"""Makes a copy of a TVM nvptx export whose PTX defines libdevice's __nv_fmaf instead of declaring
it `.extern` (issue 26), so that runtimes which pass the PTX to the driver unchanged (TVM's own)
can load it on a real GPU:

    scripts/nvptx-define-libdevice.py IN.so OUT.so

TVM v0.8's mlp2_nvptx.so was exported without libdevice linked in; its PTX calls __nv_fmaf,
which no driver resolves. The PTX is rewritten in place inside the library's __tvm_dev_mblob
with the same length (comments and indentation dropped, the declaration replaced by a
definition, spaces to pad), so no length field, offset or ELF structure changes: the output is
the same library with different PTX text. Needs only Python 3."""
import re
import struct
import sys

DECL = re.compile(
    rb"\.extern \.func\s+\(\.param \.b32 func_retval0\) __nv_fmaf\s*\(\s*"
    rb"\.param \.b32 __nv_fmaf_param_0,\s*\.param \.b32 __nv_fmaf_param_1,\s*\.param \.b32 __nv_fmaf_param_2\s*\)\s*;")
DEF = (b".func (.param .b32 func_retval0) __nv_fmaf(.param .b32 a, .param .b32 b, .param .b32 c)\n{\n"
       b".reg .f32 %tvmrt<4>;\nld.param.f32 %tvmrt0, [a];\nld.param.f32 %tvmrt1, [b];\n"
       b"ld.param.f32 %tvmrt2, [c];\nfma.rn.f32 %tvmrt3, %tvmrt0, %tvmrt1, %tvmrt2;\n"
       b"st.param.f32 [func_retval0+0], %tvmrt3;\nret;\n}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    start = data.find(b".version")
    if start < 0 or data.find(b".version", start + 1) >= 0:
        sys.exit("expected exactly one PTX text in %s" % sys.argv[1])
    # The image is stored as <u64 length><bytes>: find where it begins (the comments before
    # `.version` are part of it) from a length field that covers `.version` with text only.
    for begin in range(start, max(start - 256, 8), -1):
        n = struct.unpack("<Q", data[begin - 8:begin])[0]
        text = data[begin:begin + n]
        if begin + n > start and len(text) == n and all(c in (9, 10, 13) or 32 <= c < 127 for c in text):
            break
    else:
        sys.exit("cannot find the length of the PTX image in %s" % sys.argv[1])
    start, end = begin, begin + n
    ptx = data[start:end]
    new, n = DECL.subn(DEF, ptx)
    if n != 1:
        sys.exit("no __nv_fmaf declaration of the expected form in %s" % sys.argv[1])
    lines = [line.strip() for line in new.split(b"\n")]
    new = b"\n".join(line for line in lines if line and not line.startswith(b"//")) + b"\n"
    if len(new) > len(ptx):
        sys.exit("the rewritten PTX is longer than the original (%d > %d bytes)" % (len(new), len(ptx)))
    new += b" " * (len(ptx) - len(new))
    out = data[:start] + new + data[end:]
    assert len(out) == len(data)
    open(sys.argv[2], "wb").write(out)
    print("%s: __nv_fmaf defined in the PTX (%d bytes, same length)" % (sys.argv[2], len(ptx)))


if __name__ == "__main__":
    main()
