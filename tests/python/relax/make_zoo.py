"""Makes a zoo of small TVM v0.27 Relax exports for test_zoo.py (run with the pure
`apache-tvm==0.27.0.post1` wheel, a full compiler):

    python make_zoo.py OUT_DIR [NAME ...]

For each model: `tvm.compile(mod, target="llvm")` (or `relax.build(..., exec_mode="compiled")`),
`export_library(OUT/NAME.so)`, then the exported file is loaded back with TVM's own runtime and
called on random inputs (fixed seed). `NAME.in.K.npy` are the arguments in call order (a tuple
argument flattened depth first), `NAME.out.K.npy` the results (a tuple result flattened depth
first; opaque objects such as a KV cache have no file; bfloat16/float8 arrays are stored as their
raw unsigned-int bits, the manifest names the real dtype). `manifest.json` has the format of
../shared/fixtures-v0.27 (file, function, inputs, outputs, rtol, atol, covers) plus:

- `kind` on an input/output: "tensor" (default), "shape" (`R.Shape`, stored as int64 1-d),
  "prim" (`R.Prim`, stored as a 0-d array of its dtype), "tuple" (an input `R.Tuple`, with
  `items`), "object" (an opaque output, not compared);
- `out_tree`: the nesting of the result, leaves numbered as the output files;
- `init`: {"function", "insert_at"}: call that function with no arguments first and insert its
  (tuple) result, flattened, at that argument position (nn.Module effects: KV cache, IO);
- `needs_full_runtime`: true where TVM's runtime-only library cannot run it (the kernels call
  `tvm.contrib.sort.*` of libtvm_runtime_extra, or compiler-only `relax.run.*` functions);
- `exec_mode`: "compiled" where the VM functions are compiled to TIR (VM-TIR);
- several entries may share one file (`NAME__FUNCTION`): modules with several functions.

Models the compiler rejects are listed under `skipped` with the error (the `refused_*` models are
kept on purpose to record what v0.27 refuses). Naming models after OUT_DIR remakes only those, in
an existing zoo.
"""

import json
import os
import sys
import traceback

import numpy as np
import tvm
from tvm import relax
from tvm.runtime.vm import VirtualMachine

from zoo_common import MODELS, TARGET, Prim, Shape, rng_for

import zoo_models_nn  # noqa: F401 (importing registers its models)
import zoo_models_tir  # noqa: F401 (likewise, after those: the manifest keeps this order)


# ---------------------------------------------------------------------------------------------
# driver


def npy_safe(a):
    """ml_dtypes arrays (bfloat16, float8_*) are saved as their raw unsigned-int bits."""
    if a.dtype.name in ("bfloat16",) or a.dtype.name.startswith("float8"):
        return a.view(f"uint{a.dtype.itemsize * 8}")
    return a


def flatten_inputs(values, files, specs):
    for v in values:
        if isinstance(v, tuple):
            items = []
            flatten_inputs(v, files, items)
            specs.append({"kind": "tuple", "items": items})
        elif isinstance(v, Prim):
            files.append(np.array(v.value, dtype=v.dtype))
            specs.append({"kind": "prim", "shape": [], "dtype": v.dtype})
        elif isinstance(v, Shape):
            files.append(np.array(v.dims, dtype="int64"))
            specs.append({"kind": "shape", "shape": [len(v.dims)], "dtype": "int64"})
        else:
            files.append(v)
            specs.append({"shape": list(v.shape), "dtype": str(v.dtype)})


def to_tvm(values):
    out = []
    for v in values:
        if isinstance(v, tuple):
            out.append(tuple(to_tvm(v)))
        elif isinstance(v, Prim):
            out.append(v.value)
        elif isinstance(v, Shape):
            out.append(tvm.runtime.ShapeTuple(v.dims))
        else:
            out.append(tvm.runtime.tensor(v))
    return out


def flatten_result(value, files, specs):
    """Returns the tree of leaf indices."""
    if type(value).__name__ not in ("Shape", "ShapeTuple") and (
        isinstance(value, (list, tuple)) or type(value).__name__ == "Array"):
        return [flatten_result(v, files, specs) for v in value]
    k = len(specs)
    if isinstance(value, tvm.runtime.Tensor):
        a = value.numpy()
        files.append(a)
        specs.append({"shape": list(a.shape), "dtype": str(a.dtype)})
    elif type(value).__name__ in ("Shape", "ShapeTuple"):
        a = np.array(list(value), dtype="int64")
        files.append(a)
        specs.append({"kind": "shape", "shape": [len(a)], "dtype": "int64"})
    elif isinstance(value, (bool, int, float)):
        dt = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
        files.append(np.array(value, dtype=dt))
        specs.append({"kind": "prim", "shape": [], "dtype": dt})
    else:
        files.append(None)
        specs.append({"kind": "object", "type": type(value).__name__})
    return k


def make(name, info, out_dir):
    rng = rng_for(name)
    built = info["build"](rng)
    mod = built["mod"]
    kwargs = {}
    if "pipeline" in built:
        kwargs["relax_pipeline"] = built["pipeline"]
    if info["exec_mode"] == "compiled":
        ex = relax.build(mod, target=TARGET, exec_mode="compiled", **kwargs)
    else:
        ex = tvm.compile(mod, target=TARGET, **kwargs)
    so = f"{name}.so"
    ex.export_library(os.path.join(out_dir, so))
    loaded = tvm.runtime.load_module(os.path.join(out_dir, so))
    calls = built.get("calls") or [(built.get("function", "main"), built["inputs"])]
    entries = {}
    for idx, (func, inputs) in enumerate(calls):
        entry = name if idx == 0 else f"{name}__{func}"
        vm = VirtualMachine(loaded, tvm.cpu())
        args = to_tvm(inputs)
        init = built.get("init")
        if init:
            state = vm[init["function"]]()
            state = list(state) if type(state).__name__ == "Array" or isinstance(state, (list, tuple)) else [state]
            args = args[: init["insert_at"]] + state + args[init["insert_at"]:]
        result = vm[func](*args)
        in_files, in_specs = [], []
        flatten_inputs(inputs, in_files, in_specs)
        out_files, out_specs = [], []
        tree = flatten_result(result, out_files, out_specs)
        for k, a in enumerate(in_files):
            np.save(os.path.join(out_dir, f"{entry}.in.{k}.npy"), npy_safe(a))
        for k, a in enumerate(out_files):
            if a is not None:
                np.save(os.path.join(out_dir, f"{entry}.out.{k}.npy"), npy_safe(a))
        e = {"file": so, "function": func, "inputs": in_specs, "outputs": out_specs,
             "out_tree": tree, "rtol": info["rtol"], "atol": info["atol"], "covers": info["covers"]}
        if init:
            e["init"] = init
        if info["needs_full_runtime"]:
            e["needs_full_runtime"] = True
        if info["needs_compiler_python"]:
            e["needs_compiler_python"] = True
        if info["exec_mode"] != "bytecode":
            e["exec_mode"] = info["exec_mode"]
        entries[entry] = e
    return entries


def main():
    out_dir = sys.argv[1]
    only = sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"tvm": tvm.__version__, "models": {}, "skipped": {}}
    path = os.path.join(out_dir, "manifest.json")
    if only and os.path.isfile(path):  # remake some models of an existing zoo
        with open(path) as f:
            manifest = json.load(f)
    unknown = [n for n in only if n not in MODELS]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {list(MODELS)}")
    for name, info in MODELS.items():
        if only and name not in only:
            continue
        for old in [e for e in manifest["models"] if e == name or e.startswith(name + "__")]:
            del manifest["models"][old]
        manifest["skipped"].pop(name, None)
        try:
            entries = make(name, info, out_dir)
            manifest["models"].update(entries)
            print(f"ok    {name}: {', '.join(entries)}", flush=True)
        except Exception as e:  # the compiler refused it: record why
            msg = f"{type(e).__name__}: {e}".strip()
            where = traceback.extract_tb(e.__traceback__)[-1]
            if msg.endswith(":"):  # a bare assert
                msg += f" (at {where.filename}:{where.lineno}: {where.line})"
            lines = [l.strip() for l in msg.splitlines() if l.strip()]
            short = next((l for l in lines if "Error:" in l or "error:" in l), lines[-1])
            manifest["skipped"][name] = {"covers": info["covers"], "error": short, "detail": msg[-3000:]}
            print(f"SKIP  {name}: {short[:300]}", flush=True)
            if os.environ.get("ZOO_TRACE"):
                traceback.print_exc()
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{len(manifest['models'])} entries, {len(manifest['skipped'])} skipped -> {out_dir}")


if __name__ == "__main__":
    main()
