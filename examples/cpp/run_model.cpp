// Loads a model library exported in TVM's conventions, creates a graph executor on the CPU
// through the factory's "default" function, runs it on a [1, 4] input and prints the output.
// Written against TVM's C++ runtime API (header-only over this library's C API), as a TVM
// deployment would be: errors arrive as tvm::runtime::Error exceptions.
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <cstdio>
#include <exception>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.so\n", argv[0]);
    return 2;
  }
  try {
    DLDevice dev{kDLCPU, 0};
    tvm::runtime::Module lib = tvm::runtime::Module::LoadFromFile(argv[1]);
    tvm::runtime::Module executor = lib.GetFunction("default")(dev);
    tvm::runtime::PackedFunc set_input = executor.GetFunction("set_input");
    tvm::runtime::PackedFunc run = executor.GetFunction("run");
    tvm::runtime::PackedFunc get_output = executor.GetFunction("get_output");

    std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f}, y(3);
    tvm::runtime::NDArray input = tvm::runtime::NDArray::Empty({1, 4}, DLDataType{kDLFloat, 32, 1}, dev);
    input.CopyFromBytes(x.data(), x.size() * sizeof(float));
    set_input("data", input);
    run();
    tvm::runtime::NDArray output = get_output(0);
    output.CopyToBytes(y.data(), y.size() * sizeof(float));
    std::printf("output [1, 3]: %g %g %g\n", y[0], y[1], y[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
