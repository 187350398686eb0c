// Deploys a TVM v0.27 Relax export from C++ with tvm-ffi's C++ API (apache-tvm-ffi 0.1.15's
// headers, linked against libtvm_ffi.so): Module::LoadFromFile, the Relax VM's functions, and
// the outputs checked against .npy files.
//
//   relax_load_from_file MODEL.so FUNC [--in X.npy]... [--expect Y.npy]... [--rtol R] [--atol A]
//
// Steps (as tvm.runtime.vm.VirtualMachine takes them):
//   Module exec = Module::LoadFromFile("MODEL.so");           a relax.VMExecutable module
//   Module vm = exec->GetFunction("vm_load_executable")()     a relax.VirtualMachine module
//   vm->GetFunction("vm_initialization")(kDLCPU, 0, 2)        CPU, pooled allocator
//   out = vm->GetFunction(FUNC)(inputs...)                    a Tensor, or nested Arrays of them
// Exit status: 0 when every output matched, 1 on an error or a mismatch, 2 on a usage error.

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace ffi = tvm::ffi;

namespace {

struct CPUAlloc {
  void AllocData(DLTensor* t) {
    t->data = std::calloc(1, std::max<size_t>(ffi::GetDataSize(*t), 1));
    if (t->data == nullptr) throw std::bad_alloc();
  }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

// A .npy file (format 1.0-3.0, C order, little-endian or one-byte dtypes) as a CPU tensor.
ffi::Tensor ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    throw std::runtime_error(path + ": not a .npy file");
  }
  size_t hlen, start;
  if (bytes[6] == 1) {
    hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    start = 10;
  } else {
    if (bytes.size() < 12) throw std::runtime_error(path + ": truncated header");
    hlen = 0;
    for (int i = 3; i >= 0; --i) hlen = (hlen << 8) | static_cast<uint8_t>(bytes[8 + i]);
    start = 12;
  }
  if (start + hlen > bytes.size()) throw std::runtime_error(path + ": truncated header");
  std::string header = bytes.substr(start, hlen);
  auto field = [&](const char* key) {
    size_t k = header.find(key);
    if (k == std::string::npos) throw std::runtime_error(path + ": no " + key + " in " + header);
    return header.substr(header.find(':', k) + 1);
  };
  std::string descr = field("'descr'");
  descr = descr.substr(descr.find('\'') + 1);
  descr = descr.substr(0, descr.find('\''));
  if (field("'fortran_order'").find("False") != 0 && field("'fortran_order'").find(" False") != 0) {
    throw std::runtime_error(path + ": Fortran order is not supported");
  }
  std::string shape_text = field("'shape'");
  shape_text = shape_text.substr(shape_text.find('(') + 1, shape_text.find(')') - shape_text.find('(') - 1);
  std::vector<int64_t> shape;
  std::stringstream ss(shape_text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.find_first_not_of(' ') != std::string::npos) shape.push_back(std::stoll(item));
  }
  DLDataType dtype;
  if (descr == "<f4") dtype = {kDLFloat, 32, 1};
  else if (descr == "<f8") dtype = {kDLFloat, 64, 1};
  else if (descr == "<i4") dtype = {kDLInt, 32, 1};
  else if (descr == "<i8") dtype = {kDLInt, 64, 1};
  else if (descr == "|b1") dtype = {kDLBool, 8, 1};
  else throw std::runtime_error(path + ": unsupported dtype " + descr);
  ffi::Tensor t = ffi::Tensor::FromNDAlloc(CPUAlloc(), ffi::Shape(shape), dtype, DLDevice{kDLCPU, 0});
  size_t size = ffi::GetDataSize(t);
  if (start + hlen + size != bytes.size()) throw std::runtime_error(path + ": data size does not match the shape");
  std::memcpy(t.data_ptr(), bytes.data() + start + hlen, size);
  return t;
}

double Element(const DLTensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  switch (t.dtype.code) {
    case kDLFloat:
      return t.dtype.bits == 32 ? reinterpret_cast<const float*>(p)[i] : reinterpret_cast<const double*>(p)[i];
    case kDLInt:
      return t.dtype.bits == 32 ? reinterpret_cast<const int32_t*>(p)[i] : reinterpret_cast<const int64_t*>(p)[i];
    case kDLBool:
      return reinterpret_cast<const uint8_t*>(p)[i];
    default:
      throw std::runtime_error("unsupported output dtype");
  }
}

// Appends the tensors of a result (a tensor, or nested arrays) depth-first.
void Flatten(const ffi::Any& v, std::vector<ffi::Tensor>* out) {
  if (auto t = v.as<ffi::Tensor>()) {
    out->push_back(*t);
  } else if (auto a = v.as<ffi::Array<ffi::Any>>()) {
    for (const ffi::Any& x : *a) Flatten(x, out);
  } else {
    throw std::runtime_error("output is neither a tensor nor an array: " + v.GetTypeKey());
  }
}

bool Compare(const ffi::Tensor& got, const ffi::Tensor& want, size_t index, double rtol, double atol) {
  if (got.ndim() != want.ndim() || !std::equal(got.shape().begin(), got.shape().end(), want.shape().begin())) {
    std::cerr << "output " << index << ": shape differs\n";
    return false;
  }
  if (got.dtype().code != want.dtype().code || got.dtype().bits != want.dtype().bits) {
    std::cerr << "output " << index << ": dtype differs\n";
    return false;
  }
  int64_t n = got.numel();
  for (int64_t i = 0; i < n; ++i) {
    double g = Element(*got.GetDLTensorPtr(), i), w = Element(*want.GetDLTensorPtr(), i);
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::cerr << "output " << index << "[" << i << "]: " << g << " != " << w << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: relax_load_from_file MODEL.so FUNC [--in X.npy]... [--expect Y.npy]... "
                 "[--rtol R] [--atol A]\n";
    return 2;
  }
  std::vector<std::string> inputs, expects;
  double rtol = 1e-5, atol = 1e-5;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "error: " << a << " needs a value\n";
      return 2;
    }
    if (a == "--in") inputs.push_back(argv[++i]);
    else if (a == "--expect") expects.push_back(argv[++i]);
    else if (a == "--rtol") rtol = std::atof(argv[++i]);
    else if (a == "--atol") atol = std::atof(argv[++i]);
    else {
      std::cerr << "error: unknown option " << a << "\n";
      return 2;
    }
  }
  try {
    ffi::Module exec = ffi::Module::LoadFromFile(argv[1]);
    std::cout << "loaded " << argv[1] << " (" << exec->kind() << ")\n";
    ffi::Optional<ffi::Function> load = exec->GetFunction("vm_load_executable", true);
    if (!load) throw std::runtime_error("the module has no vm_load_executable: not a Relax export");
    ffi::Module vm = (*load)().cast<ffi::Module>();
    vm->GetFunction("vm_initialization", true).value()(static_cast<int>(kDLCPU), 0, 2);
    ffi::Optional<ffi::Function> f = vm->GetFunction(argv[2]);
    if (!f) throw std::runtime_error(std::string("the VM has no function ") + argv[2]);
    std::vector<ffi::Any> args;
    for (const auto& p : inputs) args.push_back(ReadNpy(p));
    std::vector<ffi::AnyView> views(args.begin(), args.end());
    ffi::Any result;
    f.value().CallPacked(views.data(), static_cast<int32_t>(views.size()), &result);
    std::vector<ffi::Tensor> outs;
    Flatten(result, &outs);
    if (!expects.empty() && outs.size() != expects.size()) {
      std::cerr << "error: " << outs.size() << " outputs, " << expects.size() << " expected\n";
      return 1;
    }
    bool ok = true;
    for (size_t i = 0; i < expects.size(); ++i) ok &= Compare(outs[i], ReadNpy(expects[i]), i, rtol, atol);
    std::cout << outs.size() << " outputs" << (expects.empty() ? "" : ok ? ", all match" : ", MISMATCH") << "\n";
    return ok ? 0 : 1;
  } catch (const ffi::Error& e) {
    std::cerr << "error: " << e.kind() << ": " << e.message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
