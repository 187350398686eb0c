// packed_func.h and registry.h against the runtime: every value conversion of TVMArgValue /
// TVMRetValue; C++ lambdas as PackedFuncs called from C and C callbacks called from C++;
// exceptions both ways with the error kind kept (and -2 for a pending frontend error);
// TVM_REGISTER_GLOBAL at static initialization seen from C; Registry::Get / Register /
// Remove / ListNames; TypedPackedFunc; TVM_DLL_EXPORT_TYPED_FUNC.
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpp_test_util.h"

using namespace tvm::runtime;

namespace {

// Registered at static initialization, before main.
TVM_REGISTER_GLOBAL("test.cpp.add").set_body_typed([](int a, int b) { return a + b; });
TVM_REGISTER_GLOBAL("test.cpp.echo").set_body([](TVMArgs args, TVMRetValue* rv) {
  *rv = args[0];
});
TVM_REGISTER_GLOBAL("test.cpp.throw").set_body([](TVMArgs args, TVMRetValue*) {
  std::string kind = args[0];
  if (kind == "value") throw Error("ValueError: bad value " + std::to_string(args[1].operator int()));
  if (kind == "fatal") LOG(FATAL) << "TypeError: fatal on purpose";
  if (kind == "check") ICHECK_EQ(1, 2) << "checked";
  if (kind == "std") throw std::runtime_error("a std::runtime_error");
  if (kind == "env") throw EnvErrorAlreadySet("");
});
TVM_REGISTER_GLOBAL("test.cpp.count_args").set_body([](TVMArgs args, TVMRetValue* rv) {
  *rv = args.size();
});

struct Counter {
  int value;
  int Add(int x) const { return value + x; }
};

void Conversions() {
  const PackedFunc& echo = *Registry::Get("test.cpp.echo");
  EXPECT(echo(int64_t{1} << 40).operator int64_t() == (int64_t{1} << 40));
  int i = echo(-7);
  double d = echo(2.5);
  double from_int = echo(3);
  bool b = echo(true);
  EXPECT(i == -7 && d == 2.5 && from_int == 3.0 && b);
  std::string s = echo("text");
  std::string s2 = echo(std::string("std string"));
  EXPECT(s == "text" && s2 == "std string");
  std::string bytes_in("a\0b", 3);
  TVMByteArray arr{bytes_in.data(), bytes_in.size()};
  TVMRetValue rb = echo(arr);
  EXPECT(rb.type_code() == kTVMBytes && rb.operator std::string() == bytes_in);
  DLDataType dt = echo(DataType::Float(16, 4));
  EXPECT(DataType(dt) == DataType::Float(16, 4));
  DataType from_str = echo("int8");
  EXPECT(from_str == DataType::Int(8));
  DLDevice dev = echo(DLDevice{kDLCPU, 3});
  EXPECT(dev.device_type == kDLCPU && dev.device_id == 3);
  int x = 0;
  void* p = echo(static_cast<void*>(&x));
  EXPECT(p == &x);
  TVMRetValue none = echo(nullptr);
  EXPECT(none.type_code() == kTVMNullptr && none.operator void*() == nullptr);
  NDArray nd = NDArray::Empty({3}, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  NDArray nd2 = echo(nd);
  EXPECT(nd2.same_as(nd));
  DLTensor* t = echo(nd);
  EXPECT(t == nd.operator->());
  DLTensor* t2 = echo(const_cast<DLTensor*>(nd.operator->()));
  EXPECT(t2 == nd.operator->());
  String str = echo(String("object"));
  EXPECT(str == "object");
  String str_from_c = echo("c string");  // a str converts to String
  EXPECT(str_from_c == "c string");
  ObjectRef obj = echo(ShapeTuple{1, 2});
  EXPECT(obj.as<ShapeTupleObj>() != nullptr);
  PackedFunc f = echo(PackedFunc([](TVMArgs, TVMRetValue* rv) { *rv = 42; }));
  int r = f();
  EXPECT(r == 42);
  TypedPackedFunc<int(int)> twice = [](int v) { return 2 * v; };
  TypedPackedFunc<int(int)> back = echo(twice);
  EXPECT(back(21) == 42);
  // Mismatches are errors, with TVM's texts.
  EXPECT_THROW_HAS(echo(1.5).operator int(), InternalError, "expected int but got float");
  EXPECT_THROW_HAS(echo("s").operator NDArray(), InternalError, "expected NDArrayContainer");
  EXPECT_THROW_HAS(Downcast<String>(echo(ShapeTuple{1}).operator ObjectRef()), InternalError,
                   "Downcast from runtime.ShapeTuple to runtime.String failed");
  EXPECT_THROW_HAS((echo(int64_t{1} << 40).operator int()), InternalError, "Check failed");
  // TVMRetValue copies and moves.
  TVMRetValue a = echo("copied");
  TVMRetValue c = a;
  TVMRetValue m = std::move(a);
  EXPECT(c.operator std::string() == "copied" && m.operator std::string() == "copied");
  EXPECT(a.type_code() == kTVMNullptr);
  c = nd;
  EXPECT(c.type_code() == kTVMNDArrayHandle && nd.use_count() == 3);
  c = 5;
  EXPECT(nd.use_count() == 2);
}

void CallsFromC() {
  // A global registered at static initialization, called through the C API.
  TVMValue args[2], rv;
  int codes[2] = {kDLInt, kDLInt}, rc = 0;
  args[0].v_int64 = 40;
  args[1].v_int64 = 2;
  OK(call_global("test.cpp.add", args, codes, 2, &rv, &rc));
  EXPECT(rc == kDLInt && rv.v_int64 == 42);
  // Wrong arguments: the typed function's error, kind kept.
  args[1].v_str = "two";
  codes[1] = kTVMStr;
  ERR(call_global("test.cpp.add", args, codes, 2, &rv, &rc));
  EXPECT(std::strstr(TVMGetLastError(), "error while converting argument 1") != nullptr);
  ERR(call_global("test.cpp.add", args, codes, 1, &rv, &rc));
  EXPECT(std::strstr(TVMGetLastError(), "expects 2 arguments, but 1 were provided") != nullptr);
  // Code 15 (kTVMArgBool of later releases) is an int.
  codes[0] = 15;
  codes[1] = kDLInt;
  args[0].v_int64 = 1;
  args[1].v_int64 = 2;
  OK(call_global("test.cpp.add", args, codes, 2, &rv, &rc));
  EXPECT(rc == kDLInt && rv.v_int64 == 3);
  // NULL strings and byte arrays from C: errors, not crashes.
  TVMValue sv[2];
  int sc[2] = {kTVMStr, kDLInt};
  sv[0].v_str = nullptr;
  sv[1].v_int64 = 0;
  ERR(call_global("test.cpp.throw", sv, sc, 2, &rv, &rc));
  EXPECT(std::strstr(TVMGetLastError(), "null string") != nullptr);
  sc[0] = kTVMBytes;
  sv[0].v_handle = nullptr;
  ERR(call_global("test.cpp.echo", sv, sc, 1, &rv, &rc));
  EXPECT(std::strstr(TVMGetLastError(), "null byte array") != nullptr);
  // A type code C++ has no name for: an error, not a crash.
  codes[0] = 20;
  codes[1] = 127;
  ERR(call_global("test.cpp.add", args, codes, 2, &rv, &rc));
  EXPECT(std::strstr(TVMGetLastError(), "expected int but got ext") != nullptr);
  // Exceptions of every kind become -1 with the message, "Kind: " first.
  auto thrown = [&](const char* kind) {
    TVMValue a[2];
    int c[2] = {kTVMStr, kDLInt};
    a[0].v_str = kind;
    a[1].v_int64 = 9;
    return call_global("test.cpp.throw", a, c, 2, &rv, &rc);
  };
  ERR(thrown("value"));
  EXPECT(std::strncmp(TVMGetLastError(), "ValueError: bad value 9", 23) == 0);
  ERR(thrown("fatal"));
  EXPECT(std::strncmp(TVMGetLastError(), "TypeError: fatal on purpose", 27) == 0);
  EXPECT(std::strstr(TVMGetLastError(), "cpp_packed_func.cpp") != nullptr);
  ERR(thrown("check"));
  EXPECT(std::strncmp(TVMGetLastError(), "TVMError: ", 10) == 0);
  EXPECT(std::strstr(TVMGetLastError(), "Check failed: 1 == 2 (1 vs. 2) : checked") != nullptr);
  ERR(thrown("std"));
  EXPECT(std::strncmp(TVMGetLastError(), "TVMError: a std::runtime_error", 30) == 0);
  EXPECT(thrown("env") == -2);
  OK(thrown("none"));
}

// A C callback, as a frontend would write it.
int CCallback(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* resource) {
  if (n == 1 && codes[0] == kDLInt && args[0].v_int64 < 0) {
    TVMAPISetLastError("IndexError: negative on purpose");
    return -1;
  }
  if (n == 1 && codes[0] == kDLInt && args[0].v_int64 == 0) return -2;
  TVMValue v;
  int c = kDLInt;
  v.v_int64 = n * 100 + *static_cast<int*>(resource);
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

void CallsIntoC() {
  static int resource = 7;
  TVMFunctionHandle h = nullptr;
  OK(TVMFuncCreateFromCFunc(CCallback, &resource, nullptr, &h));
  OK(TVMFuncRegisterGlobal("test.cpp.c_callback", h, 0));
  OK(TVMFuncFree(h));
  const PackedFunc* f = Registry::Get("test.cpp.c_callback");
  EXPECT(f != nullptr && f == Registry::Get("test.cpp.c_callback"));
  int r = (*f)(1, 2);
  EXPECT(r == 207);
  // Errors of C functions come back as tvm::runtime::Error with the message.
  EXPECT_THROW_HAS((*f)(-1), Error, "IndexError: negative on purpose");
  EXPECT_THROW_HAS((*f)(0), EnvErrorAlreadySet, "");
  // Errors of the runtime's own functions too.
  EXPECT_THROW_HAS((*Registry::Get("runtime.GetShapeTupleElem"))(ShapeTuple{1}, 5), Error,
                   "IndexError");
  // A C++ function given to a function of the runtime and called back by it.
  PackedFunc cb([](TVMArgs args, TVMRetValue* rv) { *rv = args[0].operator int() + 1; });
  Module m = (*Registry::Get("runtime.ModuleFromFunctions"))("cbmod", "inc", cb);
  int three = m.GetFunction("inc")(2);
  EXPECT(three == 3);
}

void RegistryUse() {
  std::vector<std::string> names = Registry::ListNames();
  EXPECT(std::find(names.begin(), names.end(), "test.cpp.add") != names.end());
  EXPECT(std::find(names.begin(), names.end(), "runtime.String") != names.end());
  EXPECT(Registry::Get("no.such.global") == nullptr);
  // Registering an existing name without override is an error; with it, the new body wins.
  EXPECT_THROW_HAS(Registry::Register("test.cpp.add"), InternalError,
                   "Global PackedFunc test.cpp.add is already registered");
  Registry::Register("test.cpp.later").set_body_typed([](std::string s) { return s + "!"; });
  std::string out = (*Registry::Get("test.cpp.later"))("hi");
  EXPECT(out == "hi!");
  const PackedFunc* before = Registry::Get("test.cpp.later");
  Registry::Register("test.cpp.later", true).set_body_typed([](std::string s) { return s + "?"; });
  std::string out2 = (*before)("hi");
  EXPECT(out2 == "hi?");
  // set_body_method on a plain class.
  Registry::Register("test.cpp.method").set_body_typed([](int v, int x) {
    return Counter{v}.Add(x);
  });
  int sum = (*Registry::Get("test.cpp.method"))(40, 2);
  EXPECT(sum == 42);
  EXPECT(Registry::Remove("test.cpp.method"));
  EXPECT(!Registry::Remove("test.cpp.method"));
  TVMFunctionHandle h = nullptr;
  OK(TVMFuncGetGlobal("test.cpp.method", &h));
  EXPECT(h == nullptr);
  EnvCheckSignals();  // no frontend: nothing pending
}

void TypedAndMoves() {
  TypedPackedFunc<String(String, int)> rep = [](String s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += std::string(s);
    return String(out);
  };
  EXPECT(rep("ab", 3) == "ababab");
  PackedFunc packed = rep;
  EXPECT(packed("x", 2).operator String() == "xx");
  EXPECT_THROW_HAS(packed("x"), InternalError, "expects 2 arguments");
  TypedPackedFunc<void(int)> nothing = [](int) {};
  nothing(1);
  // An rvalue ObjectRef argument may be moved from by the callee.
  PackedFunc take([](TVMArgs args, TVMRetValue* rv) {
    TVMMovableArgValue_ v(args.values[0], args.type_codes[0]);
    String s = v;
    *rv = s;
  });
  String src("moved");
  String got = take(std::move(src));
  EXPECT(got == "moved" && !src.defined());  // NOLINT(bugprone-use-after-move)
  int n = (*Registry::Get("test.cpp.count_args"))(1, "a", 2.0, nullptr, String("s"));
  EXPECT(n == 5);
  PackedFunc null_func;
  EXPECT(null_func == nullptr && !(null_func != nullptr));
  EXPECT_THROW_HAS(null_func(), InternalError, "null PackedFunc");
}

}  // namespace

// A C function of TVM's backend convention made from a typed C++ function.
TVM_DLL_EXPORT_TYPED_FUNC(TestCppExportedAdd, [](int a, int b) { return a * 10 + b; });

namespace {
void Exported() {
  TVMValue args[2], rv;
  int codes[2] = {kDLInt, kDLInt}, rc = 0;
  args[0].v_int64 = 4;
  args[1].v_int64 = 2;
  OK(TestCppExportedAdd(args, codes, 2, &rv, &rc, nullptr));
  EXPECT(rc == kDLInt && rv.v_int64 == 42);
  ERR(TestCppExportedAdd(args, codes, 1, &rv, &rc, nullptr));
  EXPECT(std::strstr(TVMGetLastError(), "expects 2 arguments") != nullptr);
}
}  // namespace

int main() {
  RUN_TEST(Conversions);
  RUN_TEST(CallsFromC);
  RUN_TEST(CallsIntoC);
  RUN_TEST(RegistryUse);
  RUN_TEST(TypedAndMoves);
  RUN_TEST(Exported);
  return finish();
}
