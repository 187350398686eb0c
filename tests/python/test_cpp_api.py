"""Registration from C++ seen from Python: a small C++ shared library written against the
header-only C++ API (include/tvm/runtime/*.h) is compiled here, loaded with ctypes, and its
TVM_REGISTER_GLOBAL functions (run at static initialization) are called the way TVM's Python
FFI calls globals: typed functions, errors with their kind (which TVM's Python turns into the
exception class), a Python callback called from C++, and a C++ ModuleNode used as a module."""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import test_ctypes_ffi as ffi

CXX_SOURCE = r"""
#include <tvm/runtime/module.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <string>

using namespace tvm::runtime;

namespace {

class ScaleModuleNode : public ModuleNode {
 public:
  explicit ScaleModuleNode(double factor) : factor_(factor) {}
  const char* type_key() const final { return "cpp_py_scale"; }
  PackedFunc GetFunction(const std::string& name, const ObjectPtr<Object>& self) final {
    if (name == "scale") {
      return TypedPackedFunc<void(NDArray, NDArray)>([self, this](NDArray in, NDArray out) {
        ICHECK_EQ(in->ndim, 1);
        const float* src = static_cast<const float*>(in->data);
        float* dst = static_cast<float*>(out->data);
        for (int64_t i = 0; i < in->shape[0]; ++i) dst[i] = static_cast<float>(src[i] * factor_);
      });
    }
    return PackedFunc();
  }

 private:
  double factor_;
};

}  // namespace

TVM_REGISTER_GLOBAL("test_cpp_py.add").set_body_typed([](int64_t a, int64_t b) { return a + b; });

TVM_REGISTER_GLOBAL("test_cpp_py.greet").set_body_typed([](String name, std::string punct) {
  return String("hello, " + std::string(name) + punct);
});

TVM_REGISTER_GLOBAL("test_cpp_py.fail").set_body([](TVMArgs args, TVMRetValue*) {
  std::string kind = args[0];
  if (kind == "value") throw Error("ValueError: C++ says no");
  LOG(FATAL) << "IndexError: index " << args[1].operator int() << " out of range";
});

TVM_REGISTER_GLOBAL("test_cpp_py.call_back").set_body_typed([](PackedFunc f, int x) {
  int twice = f(x);
  return twice + 1;
});

TVM_REGISTER_GLOBAL("test_cpp_py.scale_module").set_body_typed([](double factor) {
  return Module(make_object<ScaleModuleNode>(factor));
});
"""

ROOT = ffi.ROOT


@pytest.fixture(scope="module")
def cpp_ext(tmp_path_factory):
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++") or shutil.which("clang++")
    assert cxx, "a C++ compiler is needed (the test script installs g++)"
    d = tmp_path_factory.mktemp("cpp_ext")
    src = d / "ext.cc"
    src.write_text(CXX_SOURCE)
    out = d / "libcpp_ext.so"
    subprocess.run([cxx, "-std=c++14", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-I" + os.path.join(ROOT, "include"), str(src), "-o", str(out),
                    "-L" + ffi.LIB_DIR, "-ltvm_runtime", "-Wl,-rpath," + ffi.LIB_DIR],
                   check=True)
    # Loading the library runs its static initializers: the registrations.
    return ctypes.CDLL(str(out))


def test_registered_at_load(cpp_ext):
    names = ffi.list_names()
    for n in ("test_cpp_py.add", "test_cpp_py.greet", "test_cpp_py.fail",
              "test_cpp_py.call_back", "test_cpp_py.scale_module"):
        assert n in names
    assert ffi.get_global("test_cpp_py.add")(40, 2) == 42
    assert ffi.get_global("test_cpp_py.add")(-(1 << 40), 1) == -(1 << 40) + 1
    assert ffi.get_global("test_cpp_py.greet")("python", "!") == "hello, python!"


def test_errors_keep_their_kind(cpp_ext):
    fail = ffi.get_global("test_cpp_py.fail")
    with pytest.raises(ffi.TVMError) as e:
        fail("value", 0)
    assert str(e.value).startswith("ValueError: C++ says no")
    with pytest.raises(ffi.TVMError) as e:
        fail("index", 7)
    msg = str(e.value)
    assert msg.startswith("IndexError: index 7 out of range")
    assert "Stack trace:" in msg
    # Argument conversion errors of typed functions.
    with pytest.raises(ffi.TVMError) as e:
        ffi.get_global("test_cpp_py.add")("x", 1)
    assert "error while converting argument 0" in str(e.value)
    with pytest.raises(ffi.TVMError) as e:
        ffi.get_global("test_cpp_py.add")(1)
    assert "expects 2 arguments" in str(e.value)


def test_python_callback_called_from_cpp(cpp_ext):
    ffi.register("test_cpp_py.twice", lambda x: 2 * x)
    twice = ffi.get_global("test_cpp_py.twice")
    assert ffi.get_global("test_cpp_py.call_back")(twice, 20) == 41

    def broken(x):
        raise KeyError("python side")

    ffi.register("test_cpp_py.broken", broken)
    with pytest.raises(ffi.TVMError) as e:
        ffi.get_global("test_cpp_py.call_back")(ffi.get_global("test_cpp_py.broken"), 1)
    assert str(e.value).startswith("KeyError:") and "python side" in str(e.value)


def test_cpp_module(cpp_ext):
    mod = ffi.get_global("test_cpp_py.scale_module")(2.5)
    assert isinstance(mod, ffi.Module)
    assert mod.type_key == "cpp_py_scale"
    x = ffi.empty((4,))
    x.copyfrom(np.arange(4, dtype="float32"))
    y = ffi.empty((4,))
    mod["scale"](x, y)
    np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype="float32") * 2.5)
    with pytest.raises(AttributeError):
        mod["missing"]
    assert ffi.get_global("runtime.ModuleImportsSize")(mod) == 0
