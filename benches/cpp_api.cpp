// Costs of TVM's C++ runtime API over this runtime's C API (header-only), per operation, in
// nanoseconds (best of 5 batches):
//   cxx_lambda_ns       a PackedFunc with a C++ body called from C++ (no runtime involved)
//   cxx_to_c_ns         C++ calling a function of the runtime (a C callback) through PackedFunc
//   c_api_ns            the same call made directly with TVMFuncCall (the baseline)
//   c_to_cxx_ns         C calling a TVM_REGISTER_GLOBAL'd C++ function through TVMFuncCall
//   array_get_ns        Array<String>::operator[] (read in place)
//   map_get_ns          Map<String, String>::at (runtime.MapGetItem)
//   module_roundtrip_ns a C++ ModuleNode given to the runtime and back (runtime.ModuleGetTypeKey)
// Build: c++ -O2 -std=c++17 -Iinclude benches/cpp_api.cpp -Ltarget/release -ltvm_runtime
// (scripts/bench.sh cpp).
#include <tvm/runtime/module.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

using namespace tvm::runtime;

namespace {

template <typename F>
double BestNs(int iters, F f) {
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f(i);
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
  }
  return best;
}

int CCallbackRet(TVMValue* args, int*, int, TVMRetValueHandle ret, void*) {
  TVMValue v;
  int c = kDLInt;
  v.v_int64 = args[0].v_int64 + 1;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

class Mini : public ModuleNode {
 public:
  const char* type_key() const final { return "mini"; }
  PackedFunc GetFunction(const std::string&, const ObjectPtr<Object>&) final {
    return PackedFunc();
  }
};

TVM_REGISTER_GLOBAL("bench.cpp.inc").set_body_typed([](int64_t x) { return x + 1; });

}  // namespace

int main() {
  const int n = 200000;
  volatile int64_t sink = 0;

  PackedFunc lambda([](TVMArgs args, TVMRetValue* rv) { *rv = args[0].operator int64_t() + 1; });
  std::printf("cxx_lambda_ns %.1f\n", BestNs(n, [&](int i) { sink = lambda(i).operator int64_t(); }));

  TVMFunctionHandle h = nullptr;
  TVMFuncCreateFromCFunc(CCallbackRet, nullptr, nullptr, &h);
  TVMFuncRegisterGlobal("bench.cpp.c_inc", h, 1);
  const PackedFunc* c_inc = Registry::Get("bench.cpp.c_inc");
  std::printf("cxx_to_c_ns %.1f\n", BestNs(n, [&](int i) { sink = (*c_inc)(i).operator int64_t(); }));
  std::printf("c_api_ns %.1f\n", BestNs(n, [&](int i) {
                TVMValue v, rv;
                int c = kDLInt, rc = 0;
                v.v_int64 = i;
                TVMFuncCall(h, &v, &c, 1, &rv, &rc);
                sink = rv.v_int64;
              }));
  TVMFuncFree(h);

  TVMFunctionHandle inc = nullptr;
  TVMFuncGetGlobal("bench.cpp.inc", &inc);
  std::printf("c_to_cxx_ns %.1f\n", BestNs(n, [&](int i) {
                TVMValue v, rv;
                int c = kDLInt, rc = 0;
                v.v_int64 = i;
                TVMFuncCall(inc, &v, &c, 1, &rv, &rc);
                sink = rv.v_int64;
              }));
  TVMFuncFree(inc);

  Array<String> arr{"a", "b", "c", "d"};
  std::printf("array_get_ns %.1f\n",
              BestNs(n, [&](int i) { sink = static_cast<int64_t>(arr[i & 3].size()); }));
  Map<String, String> map{{"a", "1"}, {"b", "2"}};
  String key("b");
  std::printf("map_get_ns %.1f\n", BestNs(n / 10, [&](int) { sink = map.at(key).size(); }));

  Module mini(make_object<Mini>());
  const PackedFunc* type_key = Registry::Get("runtime.ModuleGetTypeKey");
  std::printf("module_roundtrip_ns %.1f\n", BestNs(n / 10, [&](int) {
                std::string k = (*type_key)(mini);
                sink = static_cast<int64_t>(k.size());
              }));
  return sink == -1;
}
