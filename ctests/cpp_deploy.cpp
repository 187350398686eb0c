// TVM's C++ deployment pattern (apps/howto_deploy/cpp_deploy.cc) on TVM v0.8's own exports,
// through the header-only C++ API: a library loaded from file (add_one.so), the system library
// (syslib_scale_shift.o linked into this program), and a graph executor factory (mlp.so:
// "default", set_input, run, get_output; and its split form through
// tvm.graph_executor.create + load_params). Outputs are compared with the manifest's
// expected outputs.
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cpp_test_util.h"

using tvm::runtime::Module;
using tvm::runtime::NDArray;
using tvm::runtime::PackedFunc;
using tvm::runtime::Registry;

namespace {

struct Npz {
  Npy npy;
  Npz() { std::memset(&npy, 0, sizeof npy); }
  ~Npz() { std::free(npy.data); }
};

bool Load(const std::string& name, Npz* out) {
  bool ok = load_npy(fixture_path(name).c_str(), &out->npy) == 0;
  EXPECT(ok);
  return ok;
}

NDArray FromNpy(const Npy& a) {
  NDArray arr = NDArray::Empty(std::vector<int64_t>(a.shape, a.shape + a.ndim),
                               DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  arr.CopyFromBytes(a.data, a.n * sizeof(float));
  return arr;
}

// f(x, y) with y = x + 1, called with DLTensor* (as cpp_deploy.cc) and with NDArrays.
void VerifyElementwise(Module mod, const std::string& fname, const Npy& a, const Npy& b) {
  PackedFunc f = mod.GetFunction(fname);
  ICHECK(f != nullptr) << fname << " not found";
  DLTensor* x;
  DLTensor* y;
  int64_t shape[1] = {a.shape[0]};
  OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &x));
  OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &y));
  std::memcpy(x->data, a.data, a.n * sizeof(float));
  f(x, y);
  EXPECT(std::memcmp(y->data, b.data, b.n * sizeof(float)) == 0);
  TVMArrayFree(x);
  TVMArrayFree(y);

  NDArray nx = FromNpy(a);
  NDArray ny = NDArray::Empty({a.shape[0]}, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  f(nx, ny);
  std::vector<float> got(b.n);
  ny.CopyToBytes(got.data(), got.size() * sizeof(float));
  EXPECT(std::memcmp(got.data(), b.data, b.n * sizeof(float)) == 0);
  // The function's own argument checks come back as an exception.
  EXPECT_THROW_HAS(f(nx), tvm::runtime::Error, "num_args");
}

void DeploySingleOp() {
  Npz a, b;
  if (!Load("add_one.A.npy", &a) || !Load("add_one.B.npy", &b)) return;
  Module mod_dylib = Module::LoadFromFile(fixture_path("add_one.so"));
  LOG(INFO) << "Verify dynamic loading from add_one.so";
  EXPECT(std::string(mod_dylib->type_key()) == "library");
  VerifyElementwise(mod_dylib, "add_one", a.npy, b.npy);
  EXPECT(mod_dylib.GetFunction("no_such_function") == nullptr);
  EXPECT_THROW_HAS(Module::LoadFromFile(fixture_path("no_such.so")), tvm::runtime::Error,
                   "no_such.so");
}

#ifndef TVM_NO_SYSLIB_OBJECT
void DeploySystemLib() {
  Npz a, b;
  if (!Load("scale_shift.A.npy", &a) || !Load("scale_shift.B.npy", &b)) return;
  LOG(INFO) << "Verify load function from system lib";
  Module mod_syslib = (*Registry::Get("runtime.SystemLib"))();
  EXPECT(std::string(mod_syslib->type_key()) == "library");
  // One module for the system library, one C++ Module for it.
  Module again = (*Registry::Get("runtime.SystemLib"))();
  EXPECT(again == mod_syslib);
  PackedFunc f = mod_syslib.GetFunction("scale_shift");
  ICHECK(f != nullptr);
  NDArray x = FromNpy(a.npy);
  NDArray y = NDArray::Empty({a.npy.shape[0]}, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  f(x, y);
  std::vector<float> got(b.npy.n);
  y.CopyToBytes(got.data(), got.size() * sizeof(float));
  EXPECT(std::memcmp(got.data(), b.npy.data, b.npy.n * sizeof(float)) == 0);
}
#endif

void DeployGraphExecutor() {
  LOG(INFO) << "Running graph executor...";
  Npz in, want;
  if (!Load("mlp.input.data.npy", &in) || !Load("mlp.output.0.npy", &want)) return;
  DLDevice dev{kDLCPU, 0};
  Module mod_factory = Module::LoadFromFile(fixture_path("mlp.so"));
  EXPECT(std::string(mod_factory->type_key()) == "GraphExecutorFactory");
  Module gmod = mod_factory.GetFunction("default")(dev);
  EXPECT(std::string(gmod->type_key()) == "GraphExecutor");
  PackedFunc set_input = gmod.GetFunction("set_input");
  PackedFunc get_output = gmod.GetFunction("get_output");
  PackedFunc run = gmod.GetFunction("run");
  PackedFunc get_num_outputs = gmod.GetFunction("get_num_outputs");

  NDArray x = FromNpy(in.npy);
  NDArray y = NDArray::Empty(std::vector<int64_t>(want.npy.shape, want.npy.shape + want.npy.ndim),
                             DLDataType{kDLFloat, 32, 1}, dev);
  set_input("data", x);
  run();
  get_output(0, y);
  std::vector<float> got(want.npy.n);
  y.CopyToBytes(got.data(), got.size() * sizeof(float));
  EXPECT(allclose_excess(got.data(), want.npy.data, want.npy.n, 1e-5, 1e-5) == 0);
  int num_outputs = get_num_outputs();
  EXPECT(num_outputs == 1);
  // get_output(i) returns the executor's own array.
  NDArray out = get_output(0);
  EXPECT(out->ndim == want.npy.ndim && out.Shape()[1] == want.npy.shape[1]);
  std::vector<float> got2(want.npy.n);
  out.CopyToBytes(got2.data(), got2.size() * sizeof(float));
  EXPECT(got == got2);
  // Errors of the executor arrive as exceptions with the runtime's message.
  EXPECT_THROW_HAS(set_input("no_such_input", x), tvm::runtime::Error, "no_such_input");
  // The executor imports the model library.
  EXPECT(gmod->imports().size() == 1 || mod_factory->imports().size() == 1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void DeploySplitGraph() {
  Npz in, want;
  if (!Load("mlp.input.data.npy", &in) || !Load("mlp.output.0.npy", &want)) return;
  std::string json = ReadFile(fixture_path("mlp.json"));
  std::string params = ReadFile(fixture_path("mlp.params"));
  EXPECT(!json.empty() && !params.empty());
  Module lib = Module::LoadFromFile(fixture_path("mlp.lib.so"));
  DLDevice dev{kDLCPU, 0};
  const PackedFunc* create = Registry::Get("tvm.graph_executor.create");
  ICHECK(create != nullptr);
  Module gmod = (*create)(json, lib, static_cast<int>(dev.device_type), dev.device_id);
  TVMByteArray arr;
  arr.data = params.data();
  arr.size = params.size();
  gmod.GetFunction("load_params")(arr);
  gmod.GetFunction("set_input")("data", FromNpy(in.npy));
  gmod.GetFunction("run")();
  NDArray out = gmod.GetFunction("get_output")(0);
  std::vector<float> got(want.npy.n);
  out.CopyToBytes(got.data(), got.size() * sizeof(float));
  EXPECT(allclose_excess(got.data(), want.npy.data, want.npy.n, 1e-5, 1e-5) == 0);
}

}  // namespace

int main() {
  fixtures_dir();  // skips (or fails under CI) without the fixtures
  RUN_TEST(DeploySingleOp);
#ifndef TVM_NO_SYSLIB_OBJECT
  RUN_TEST(DeploySystemLib);
#else
  const char* ci = getenv("CI");
  if (ci != nullptr && std::strcmp(ci, "true") == 0) {
    fprintf(stderr, "FAIL: syslib_scale_shift.o was missing at configure time\n");
    g_failed++;
  }
#endif
  RUN_TEST(DeployGraphExecutor);
  RUN_TEST(DeploySplitGraph);
  return finish();
}
