// Loads a model library exported in TVM's conventions, creates a graph executor on the CPU through
// the factory's "default" function, runs it on a [1, 4] input and prints the output.
// RAII wrappers over the C API; every failure becomes an exception carrying TVMGetLastError().
#include <tvm/runtime/c_runtime_api.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(int rc) {
  if (rc != 0) throw std::runtime_error(TVMGetLastError());
}

struct ModDeleter { void operator()(void* m) const { TVMModFree(m); } };
struct FuncDeleter { void operator()(void* f) const { TVMFuncFree(f); } };
struct ArrayDeleter { void operator()(DLTensor* a) const { TVMArrayFree(a); } };
using Module = std::unique_ptr<void, ModDeleter>;
using Function = std::unique_ptr<void, FuncDeleter>;
using Array = std::unique_ptr<DLTensor, ArrayDeleter>;

Function get(const Module& m, const char* name) {
  TVMFunctionHandle f = nullptr;
  check(TVMModGetFunction(m.get(), name, 0, &f));
  if (f == nullptr) throw std::runtime_error(std::string("module has no function ") + name);
  return Function(f);
}

TVMValue call(const Function& f, std::vector<TVMValue> args, std::vector<int> codes, int* ret_code) {
  TVMValue rv;
  check(TVMFuncCall(f.get(), args.data(), codes.data(), static_cast<int>(args.size()), &rv, ret_code));
  return rv;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.so\n", argv[0]);
    return 2;
  }
  try {
    TVMModuleHandle h = nullptr;
    check(TVMModLoadFromFile(argv[1], "", &h));
    Module lib(h);
    TVMValue dev;
    dev.v_device = DLDevice{kDLCPU, 0};
    int rc = 0;
    TVMValue ex = call(get(lib, "default"), {dev}, {kDLDevice}, &rc);
    if (rc != kTVMModuleHandle) throw std::runtime_error("default() did not return a module");
    Module executor(ex.v_handle);

    int64_t shape[2] = {1, 4};
    std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f}, y(3);
    TVMArrayHandle in_h = nullptr;
    check(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &in_h));
    Array in(in_h);
    check(TVMArrayCopyFromBytes(in.get(), x.data(), x.size() * sizeof(float)));
    TVMValue name, arr, idx;
    name.v_str = "data";
    arr.v_handle = in.get();
    call(get(executor, "set_input"), {name, arr}, {kTVMStr, kTVMNDArrayHandle}, &rc);
    call(get(executor, "run"), {}, {}, &rc);
    idx.v_int64 = 0;
    TVMValue out = call(get(executor, "get_output"), {idx}, {kTVMArgInt}, &rc);
    Array out_arr(static_cast<DLTensor*>(out.v_handle));
    check(TVMArrayCopyToBytes(out_arr.get(), y.data(), y.size() * sizeof(float)));
    std::printf("output [1, 3]: %g %g %g\n", y[0], y[1], y[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
