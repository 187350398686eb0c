// The C++ API of libtvm_ffi.so (apache-tvm-ffi 0.1.15's headers) on this runtime: each non-inline
// function the headers declare, modules of the runtime seen through ModuleObj's virtual methods,
// a module made here in C++ handed to the runtime (imported into one of its modules, found
// through it), and errors crossing both ways. Exits 1 at the first failed check.
//
//   cxx_api_test [MODEL.so]   (a TVM v0.27 export: its module's kind and functions are checked)

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/dataclass.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/extra/serialization.h>
#include <tvm/ffi/extra/structural_equal.h>
#include <tvm/ffi/extra/structural_hash.h>
#include <tvm/ffi/extra/structural_mutate.h>
#include <tvm/ffi/extra/structural_visit.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace ffi = tvm::ffi;

static int checks = 0;
#define CHECK(cond)                                                                  \
  do {                                                                               \
    ++checks;                                                                        \
    if (!(cond)) {                                                                   \
      std::cerr << __FILE__ << ":" << __LINE__ << ": check failed: " #cond "\n";    \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// A module written in C++, as a user of tvm-ffi writes one.
class CxxModule : public ffi::ModuleObj {
 public:
  const char* kind() const final { return "cxx_test"; }
  int GetPropertyMask() const final { return ffi::Module::kRunnable; }
  ffi::Optional<ffi::Function> GetFunction(const ffi::String& name) final {
    if (name == "add_one") {
      return ffi::Function::FromTyped([](int64_t x) { return x + 1; });
    }
    if (name == "boom") {
      TVM_FFI_THROW(ValueError) << "CxxModule cannot make boom";
    }
    return std::nullopt;
  }
  ffi::Optional<ffi::String> GetFunctionDoc(const ffi::String& name) final {
    if (name == "add_one") return ffi::String("adds one");
    return std::nullopt;
  }
};

template <typename F>
static std::string ErrorOf(F&& f, std::string* kind = nullptr) {
  try {
    f();
  } catch (const ffi::Error& e) {
    if (kind) *kind = e.kind();
    return e.message();
  }
  return "";
}

int main(int argc, char** argv) {
  // json
  ffi::Any v = ffi::json::Parse("{\"a\": [1, 2.5, true, null, \"s\"]}");
  ffi::String text = ffi::json::Stringify(v);
  CHECK(ffi::StructuralEqual::Equal(ffi::json::Parse(text), v));
  CHECK(std::string(ffi::json::Stringify(ffi::json::Parse("[1,2]"), 2)).find('\n') != std::string::npos);
  ffi::String err;
  ffi::Any bad = ffi::json::Parse("{\"a\": ", &err);
  CHECK(bad == nullptr);
  CHECK(!err.empty());
  CHECK(!ErrorOf([] { ffi::json::Parse("[1,"); }).empty());

  // structural equality and hash, the recursive comparisons, copies and printing
  ffi::Array<ffi::Any> a{1, 2, 3}, b{1, 2, 3}, c{1, 2, 4};
  CHECK(ffi::StructuralEqual::Equal(a, b));
  CHECK(!ffi::StructuralEqual::Equal(a, c));
  CHECK(!ffi::StructuralEqual::GetFirstMismatch(a, b).has_value());
  CHECK(ffi::StructuralEqual::GetFirstMismatch(a, c).has_value());
  CHECK(ffi::StructuralHash::Hash(a) == ffi::StructuralHash::Hash(b));
  CHECK(ffi::StructuralHash::Hash(a) != ffi::StructuralHash::Hash(c));
  CHECK(ffi::RecursiveEq(a, b) && !ffi::RecursiveEq(a, c));
  CHECK(ffi::RecursiveLt(a, c) && ffi::RecursiveLe(a, b) && ffi::RecursiveGt(c, a) && ffi::RecursiveGe(a, b));
  CHECK(ffi::RecursiveHash(a) == ffi::RecursiveHash(b));
  ffi::Any copy = ffi::DeepCopy(a);
  CHECK(ffi::StructuralEqual::Equal(copy, a));
  CHECK(copy.cast<ffi::Array<ffi::Any>>().get() != a.get());
  CHECK(std::string(ffi::ReprPrint(a)).find('3') != std::string::npos);
  ffi::Map<ffi::String, ffi::Any> m{{"x", 1}, {"y", ffi::Array<ffi::Any>{2, 3}}};
  CHECK(ffi::StructuralEqual::Equal(ffi::FromJSONGraph(ffi::ToJSONGraph(m)), m));

  // tvm-ffi's header engines over the built-in containers (their native __s_visit__ /
  // __s_mutate__ hooks): every string item or map value is reached, a mutation copies.
  ffi::Array<ffi::Any> tree{ffi::String("a"), ffi::Array<ffi::Any>{ffi::String("b"), 5},
                            ffi::Map<ffi::String, ffi::Any>{{"k", ffi::String("c")}},
                            ffi::List<ffi::Any>{ffi::String("d")}};
  std::vector<std::string> strings;
  ffi::StructuralWalk<ffi::WalkOrder::kPreOrder>(tree, [&](const ffi::String& s) -> ffi::Expected<ffi::WalkResult> {
    strings.push_back(s);
    return ffi::WalkResult::Advance();
  });
  std::sort(strings.begin(), strings.end());
  CHECK((strings == std::vector<std::string>{"a", "b", "c", "d"}));
  ffi::Any upper = ffi::StructuralMap<ffi::WalkOrder::kPostOrder>(
      tree, [](const ffi::String& s) -> ffi::Expected<ffi::Any> { return ffi::String(std::string(s) + "!"); });
  CHECK(!ffi::StructuralEqual::Equal(upper, tree));
  CHECK(tree[0].cast<ffi::String>() == "a");  // the input is untouched
  CHECK(upper.cast<ffi::Array<ffi::Any>>()[0].cast<ffi::String>() == "a!");
  auto upper_map = upper.cast<ffi::Array<ffi::Any>>()[2].cast<ffi::Map<ffi::String, ffi::Any>>();
  CHECK(upper_map["k"].cast<ffi::String>() == "c!");
  ffi::Any same = ffi::StructuralMap<ffi::WalkOrder::kPostOrder>(
      tree, [](int64_t x) -> ffi::Expected<ffi::Any> { return x; });
  CHECK(same.cast<ffi::Array<ffi::Any>>().same_as(tree));

  // context symbols
  std::vector<std::string> names;
  ffi::Module::VisitContextSymbols([&](ffi::String name, void* symbol) {
    if (symbol != nullptr) names.push_back(name);
  });
  CHECK(std::find(names.begin(), names.end(), "__TVMFFIFunctionCall") != names.end());

  // a module of the runtime, through ModuleObj's virtual methods
  ffi::Module sys = ffi::Function::GetGlobalRequired("ffi.SystemLib")().cast<ffi::Module>();
  CHECK(std::string(sys->kind()).size() > 0);
  CHECK(!sys->GetFunction("no_such_function").has_value());
  CHECK(!sys->ImplementsFunction("no_such_function", true));

  // a module made in C++, handed to the runtime
  ffi::Module cxx(ffi::make_object<CxxModule>());
  ffi::Function get = ffi::Function::GetGlobalRequired("ffi.ModuleGetFunction");
  ffi::Function kind = ffi::Function::GetGlobalRequired("ffi.ModuleGetKind");
  CHECK(kind(cxx).cast<ffi::String>() == "cxx_test");
  CHECK(get(cxx, "add_one", false).cast<ffi::Function>()(41).cast<int64_t>() == 42);
  std::string k;
  CHECK(ErrorOf([&] { get(cxx, "boom", false); }, &k).find("cannot make boom") != std::string::npos);
  CHECK(k == "ValueError");
  // imported into the runtime's module, found through it (virtual ImportModule of ours, then
  // the runtime calling the C++ module's GetFunction)
  sys->ImportModule(cxx);
  CHECK(sys->GetFunction("add_one", true).value()(1).cast<int64_t>() == 2);
  CHECK(sys->ImplementsFunction("add_one", true));
  CHECK(sys->GetFunctionDoc("add_one", true).value() == "adds one");
  CHECK(ffi::Function::GetGlobalRequired("ffi.ModuleImplementsFunction")(sys, "add_one", true).cast<bool>());
  // the C++ module's own import list (ModuleObj's defaults), with the cycle refused
  ffi::Module leaf(ffi::make_object<CxxModule>());
  cxx->ImportModule(leaf);
  CHECK(cxx->imports().size() == 1);
  CHECK(ErrorOf([&] { leaf->ImportModule(sys); }).find("Cyclic") != std::string::npos);
  CHECK(ErrorOf([&] { cxx->ImportModule(sys); }).find("Cyclic") != std::string::npos);
  sys->ClearImports();
  CHECK(!sys->GetFunction("add_one", true).has_value());

  // errors from the runtime, as tvm::ffi::Error
  CHECK(ErrorOf([] { ffi::Module::LoadFromFile("/nonexistent/model.so"); }).size() > 0);

  if (argc > 1) {
    ffi::Module exec = ffi::Module::LoadFromFile(argv[1]);
    CHECK(std::string(exec->kind()) == "relax.VMExecutable");
    CHECK(exec->GetFunction("vm_load_executable").has_value());
    CHECK(exec->ImplementsFunction("vm_load_executable"));
    ffi::Module vm = exec->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
    CHECK(std::string(vm->kind()) == "relax.VirtualMachine");
  }
  std::cout << "cxx_api_test: " << checks << " checks passed\n";
  return 0;
}
