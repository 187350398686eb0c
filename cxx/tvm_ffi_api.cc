// The C++ API of apache-tvm-ffi 0.1.15's libtvm_ffi.so, over this runtime.
//
// Compiled against tvm-ffi 0.1.15's own headers (a build-time dependency: scripts/libtvm-ffi.sh
// finds them or takes them from the wheel) and linked into libtvm_ffi.so beside the Rust
// runtime, so that C++ code built against those headers links against this library: the
// non-inline functions the headers declare (Module::LoadFromFile, ModuleObj's non-virtual
// methods and the defaults of ImportModule/ClearImports, json, structural equality and hash,
// the recursive comparisons, DeepCopy, ReprPrint, the JSON graph, VisitErrorContext), and
// ModuleObj's vtable and type info. Each is the runtime's global function of the same job,
// called through the C ABI, so errors cross as tvm::ffi::Error both ways.
//
// Modules: a module made by the runtime carries, before its header, the vtable pointer of
// RustModule below (whose virtual methods call the ffi.Module* globals), so C++ code calls
// virtual methods on it; a module made in C++ is driven by the runtime through ModuleCall.
// The table between the two is registered with TVMFFIEnvRegisterCAPI("tvm_rt.cxx_bridge")
// while the library loads (crates/tvm-ffi/src/module/cxx.rs is the other side).

#include <tvm/ffi/any.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/dataclass.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/extra/serialization.h>
#include <tvm/ffi/extra/structural_equal.h>
#include <tvm/ffi/extra/structural_hash.h>
#include <tvm/ffi/extra/visit_error_context.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/access_path.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tvm_rt_cxx {

using tvm::ffi::Any;
using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::Function;
using tvm::ffi::Module;
using tvm::ffi::ModuleObj;
using tvm::ffi::Object;
using tvm::ffi::Optional;
using tvm::ffi::String;

// The table of crates/tvm-ffi/src/module/cxx.rs (version 1).
struct Bridge {
  uint32_t version;
  const void* rust_module_vptr;
  int (*module_call)(TVMFFIObject* module, const char* method, const TVMFFIAny* args,
                     int32_t num_args, TVMFFIAny* result);
  int (*visit_context_symbols)(void* ctx, int (*visit)(void* ctx, const char* name, void* symbol));
};

// A global function of the runtime, looked up once (and kept: the registry outlives callers).
const Function& Global(const char* name) {
  static std::mutex mu;
  static std::vector<std::pair<std::string, const Function*>>* cache =
      new std::vector<std::pair<std::string, const Function*>>();
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [n, f] : *cache) {
    if (n == name) return *f;
  }
  const Function* f = new Function(Function::GetGlobalRequired(name));
  cache->emplace_back(name, f);
  return *f;
}

// A string that lives as long as the process (what ModuleObj::kind() hands out).
const char* Intern(const String& s) {
  static std::mutex mu;
  static std::unordered_set<std::string>* pool = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return pool->emplace(s.data(), s.size()).first->c_str();
}

Module Ref(const ModuleObj* m) { return tvm::ffi::GetRef<Module>(m); }

// The vtable class of modules made by the runtime. Never constructed: the runtime writes its
// vtable pointer before the header of each module it makes, and its fields (imports_ at
// header + 24, the lookup cache after it) are the runtime's.
class RustModule final : public ModuleObj {
 public:
  const char* kind() const final;
  int GetPropertyMask() const final {
    return Global("ffi.ModuleGetPropertyMask")(Ref(this)).cast<int>();
  }
  Optional<Function> GetFunction(const String& name) final {
    return Global("ffi.ModuleGetFunction")(Ref(this), name, false).cast<Optional<Function>>();
  }
  bool ImplementsFunction(const String& name) final {
    return Global("ffi.ModuleImplementsFunction")(Ref(this), name, false).cast<bool>();
  }
  Optional<String> GetFunctionDoc(const String& name) final {
    return Global("ffi.ModuleGetFunctionDoc")(Ref(this), name, false).cast<Optional<String>>();
  }
  Optional<String> GetFunctionMetadata(const String& name) final {
    return Global("ffi.ModuleGetFunctionMetadata")(Ref(this), name, false).cast<Optional<String>>();
  }
  void WriteToFile(const String& file_name, const String& format) const final {
    Global("ffi.ModuleWriteToFile")(Ref(this), file_name, format);
  }
  Array<String> GetWriteFormats() const final {
    return Global("ffi.ModuleGetWriteFormats")(Ref(this)).cast<Array<String>>();
  }
  String InspectSource(const String& format) const final {
    return Global("ffi.ModuleInspectSource")(Ref(this), format).cast<String>();
  }
  void ImportModule(const Module& other) final { Global("ffi.ModuleImportModule")(Ref(this), other); }
  void ClearImports() final { Global("ffi.ModuleClearImports")(Ref(this)); }
};

// The key function: RustModule's vtable is emitted here.
const char* RustModule::kind() const {
  return Intern(Global("ffi.ModuleGetKind")(Ref(this)).cast<String>());
}

// The vtable pointer of a RustModule: the address point of its vtable (after the offset to top
// and the type info, Itanium C++ ABI 2.5.2).
extern "C" const void* const rust_module_vtable[] __asm__("_ZTVN10tvm_rt_cxx10RustModuleE");
const void* RustModuleVptr() { return &rust_module_vtable[2]; }

bool IsRustModule(const ModuleObj* m) {
  return *reinterpret_cast<const void* const*>(m) == RustModuleVptr();
}

int ModuleCall(TVMFFIObject* handle, const char* method, const TVMFFIAny* args, int32_t num_args,
               TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  ModuleObj* m = static_cast<ModuleObj*>(reinterpret_cast<Object*>(handle));
  auto arg = [&](int32_t i) -> AnyView {
    if (i >= num_args) {
      TVM_FFI_THROW(TypeError) << "ModuleObj::" << method << ": missing argument " << i;
    }
    return AnyView::CopyFromTVMFFIAny(args[i]);
  };
  std::string_view op(method);
  Any r;
  if (op == "GetFunction") {
    r = m->GetFunction(arg(0).cast<String>(), arg(1).cast<bool>());
  } else if (op == "ImplementsFunction") {
    r = m->ImplementsFunction(arg(0).cast<String>(), arg(1).cast<bool>());
  } else if (op == "GetFunctionDoc") {
    r = m->GetFunctionDoc(arg(0).cast<String>(), arg(1).cast<bool>());
  } else if (op == "GetFunctionMetadata") {
    r = m->GetFunctionMetadata(arg(0).cast<String>(), arg(1).cast<bool>());
  } else if (op == "GetPropertyMask") {
    r = static_cast<int64_t>(m->GetPropertyMask());
  } else if (op == "kind") {
    r = String(m->kind());
  } else if (op == "GetWriteFormats") {
    r = m->GetWriteFormats();
  } else if (op == "WriteToFile") {
    m->WriteToFile(arg(0).cast<String>(), arg(1).cast<String>());
  } else if (op == "InspectSource") {
    r = m->InspectSource(arg(0).cast<String>());
  } else if (op == "SaveToBytes") {
    r = m->SaveToBytes();
  } else if (op == "ImportModule") {
    m->ImportModule(arg(0).cast<Module>());
  } else if (op == "ClearImports") {
    m->ClearImports();
  } else if (op == "imports") {
    r = m->imports();
  } else {
    TVM_FFI_THROW(ValueError) << "unknown ModuleObj method " << method;
  }
  *result = tvm::ffi::details::AnyUnsafe::MoveAnyToTVMFFIAny(std::move(r));
  TVM_FFI_SAFE_CALL_END();
}

Bridge bridge{1, RustModuleVptr(), ModuleCall, nullptr};

// Registers the table while the library loads (before any module exists).
struct Register {
  Register() { TVMFFIEnvRegisterCAPI("tvm_rt.cxx_bridge", &bridge); }
} register_bridge;

}  // namespace tvm_rt_cxx

namespace tvm {
namespace ffi {

using tvm_rt_cxx::Global;
using tvm_rt_cxx::IsRustModule;
using tvm_rt_cxx::Ref;

// ---- ModuleObj: the non-virtual lookups through imports, and the defaults of the import list.

// The module's own answer (`own()`), else, with `query_imports`, the first of its imports'
// (depth first, through `nested(import)`); a default R (nullopt, false) when none has one.
template <typename R, typename Own, typename Nested>
static R LookUp(const Array<Any>& imports, bool query_imports, Own own, Nested nested) {
  if (R r = own()) return r;
  if (query_imports) {
    for (const Any& imp : imports) {
      if (R r = nested(imp.cast<Module>())) return r;
    }
  }
  return R();
}

Optional<Function> ModuleObj::GetFunction(const String& name, bool query_imports) {
  if (IsRustModule(this)) {
    return Global("ffi.ModuleGetFunction")(Ref(this), name, query_imports).cast<Optional<Function>>();
  }
  return LookUp<Optional<Function>>(
      imports_, query_imports, [&] { return this->GetFunction(name); },
      [&](const Module& m) { return m->GetFunction(name, true); });
}

bool ModuleObj::ImplementsFunction(const String& name, bool query_imports) {
  if (IsRustModule(this)) {
    return Global("ffi.ModuleImplementsFunction")(Ref(this), name, query_imports).cast<bool>();
  }
  return LookUp<bool>(
      imports_, query_imports, [&] { return this->ImplementsFunction(name); },
      [&](const Module& m) { return m->ImplementsFunction(name, true); });
}

Optional<String> ModuleObj::GetFunctionDoc(const String& name, bool query_imports) {
  if (IsRustModule(this)) {
    return Global("ffi.ModuleGetFunctionDoc")(Ref(this), name, query_imports).cast<Optional<String>>();
  }
  return LookUp<Optional<String>>(
      imports_, query_imports, [&] { return this->GetFunctionDoc(name); },
      [&](const Module& m) { return m->GetFunctionDoc(name, true); });
}

Optional<String> ModuleObj::GetFunctionMetadata(const String& name, bool query_imports) {
  if (IsRustModule(this)) {
    return Global("ffi.ModuleGetFunctionMetadata")(Ref(this), name, query_imports)
        .cast<Optional<String>>();
  }
  return LookUp<Optional<String>>(
      imports_, query_imports, [&] { return this->GetFunctionMetadata(name); },
      [&](const Module& m) { return m->GetFunctionMetadata(name, true); });
}

// Whether `target` is `from` or among its imports, transitively.
static bool Reaches(const ModuleObj* from, const ModuleObj* target) {
  std::vector<const ModuleObj*> stack{from};
  std::unordered_set<const ModuleObj*> seen{from};
  while (!stack.empty()) {
    const ModuleObj* m = stack.back();
    stack.pop_back();
    if (m == target) return true;
    for (const Any& imp : m->imports()) {
      const ModuleObj* i = imp.cast<Module>().get();
      if (seen.insert(i).second) stack.push_back(i);
    }
  }
  return false;
}

void ModuleObj::ImportModule(const Module& other) {
  if (Reaches(other.get(), this)) {
    TVM_FFI_THROW(RuntimeError) << "Cyclic dependency detected during import";
  }
  imports_.push_back(other);
  import_lookup_cache_.clear();
}

void ModuleObj::ClearImports() {
  imports_.clear();
  import_lookup_cache_.clear();
}

Module Module::LoadFromFile(const String& file_name) {
  return Global("ffi.ModuleLoadFromFile")(file_name).cast<Module>();
}

void Module::VisitContextSymbols(const TypedFunction<void(String, void*)>& callback) {
  auto visit = tvm_rt_cxx::bridge.visit_context_symbols;
  if (visit == nullptr) {
    TVM_FFI_THROW(RuntimeError) << "the runtime did not take the C++ bridge";
  }
  struct Ctx {
    const TypedFunction<void(String, void*)>* cb;
    std::exception_ptr error;
  } ctx{&callback, nullptr};
  visit(&ctx, [](void* c, const char* name, void* symbol) -> int {
    Ctx* x = static_cast<Ctx*>(c);
    try {
      (*x->cb)(String(name), symbol);
      return 0;
    } catch (...) {
      x->error = std::current_exception();
      return 1;
    }
  });
  if (ctx.error) std::rethrow_exception(ctx.error);
}

// ---- json, the JSON graph, structural equality and hash, dataclass helpers.

namespace json {
Value Parse(const String& json_str, String* error_msg) {
  if (error_msg == nullptr) return Global("ffi.json.Parse")(json_str);
  try {
    return Global("ffi.json.Parse")(json_str);
  } catch (const Error& e) {
    *error_msg = e.message();
    return Value();
  }
}

String Stringify(const Value& value, const Optional<int>& indent) {
  return Global("ffi.json.Stringify")(value, indent).cast<String>();
}
}  // namespace json

json::Value ToJSONGraph(const Any& value, const Any& metadata) {
  return Global("ffi.ToJSONGraph")(value, metadata);
}

Any FromJSONGraph(const json::Value& value) { return Global("ffi.FromJSONGraph")(value); }

bool StructuralEqual::Equal(const Any& lhs, const Any& rhs, bool map_free_vars,
                            bool skip_tensor_content) {
  return Global("ffi.StructuralEqual")(lhs, rhs, map_free_vars, skip_tensor_content).cast<bool>();
}

Optional<reflection::AccessPathPair> StructuralEqual::GetFirstMismatch(const Any& lhs,
                                                                       const Any& rhs,
                                                                       bool map_free_vars,
                                                                       bool skip_tensor_content) {
  return Global("ffi.GetFirstStructuralMismatch")(lhs, rhs, map_free_vars, skip_tensor_content)
      .cast<Optional<reflection::AccessPathPair>>();
}

uint64_t StructuralHash::Hash(const Any& value, bool map_free_vars, bool skip_tensor_content) {
  return static_cast<uint64_t>(
      Global("ffi.StructuralHash")(value, map_free_vars, skip_tensor_content).cast<int64_t>());
}

Array<reflection::AccessPath> VisitErrorContext::FindAccessPaths(
    const ObjectRef& root, const VisitErrorContext& visit_context, bool allow_prefix_match) {
  return Global("ffi.VisitErrorContext.FindAccessPaths")(root, visit_context, allow_prefix_match)
      .cast<Array<reflection::AccessPath>>();
}

Any DeepCopy(const Any& value) { return Global("ffi.DeepCopy")(value); }

String ReprPrint(const Any& value) { return Global("ffi.ReprPrint")(value).cast<String>(); }

int64_t RecursiveHash(const Any& value) {
  return Global("ffi.RecursiveHash")(value).cast<int64_t>();
}

bool RecursiveEq(const Any& lhs, const Any& rhs) {
  return Global("ffi.RecursiveEq")(lhs, rhs).cast<bool>();
}
bool RecursiveLt(const Any& lhs, const Any& rhs) {
  return Global("ffi.RecursiveLt")(lhs, rhs).cast<bool>();
}
bool RecursiveLe(const Any& lhs, const Any& rhs) {
  return Global("ffi.RecursiveLe")(lhs, rhs).cast<bool>();
}
bool RecursiveGt(const Any& lhs, const Any& rhs) {
  return Global("ffi.RecursiveGt")(lhs, rhs).cast<bool>();
}
bool RecursiveGe(const Any& lhs, const Any& rhs) {
  return Global("ffi.RecursiveGe")(lhs, rhs).cast<bool>();
}

}  // namespace ffi
}  // namespace tvm
