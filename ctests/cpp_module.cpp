// A user's own runtime module written in C++ (a ModuleNode subclass) living in the runtime's
// module system: seen from C, imported into a module of the runtime and found back as the same
// C++ object, its functions called from C, SaveToBinary / GetSource through the runtime's
// globals, released exactly when the last C++ and runtime reference goes; a blob loader
// registered with TVM_REGISTER_GLOBAL("runtime.module.loadbinary_cpp_demo") that reads its
// entry with dmlc::Stream, as loaders written for TVM's C++ runtime do.
#include <dmlc/io.h>
#include <dmlc/memory_io.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cpp_test_util.h"

using namespace tvm::runtime;

namespace {

std::atomic<int> g_alive{0};

class DemoModuleNode : public ModuleNode {
 public:
  DemoModuleNode(std::string name, int64_t value) : name_(std::move(name)), value_(value) {
    ++g_alive;
  }
  ~DemoModuleNode() override { --g_alive; }
  const char* type_key() const final { return "cpp_demo"; }
  PackedFunc GetFunction(const std::string& name, const ObjectPtr<Object>& sptr_to_self) final {
    if (name == "answer") {
      return PackedFunc([sptr_to_self, this](TVMArgs, TVMRetValue* rv) { *rv = value_; });
    }
    if (name == "name") {
      return TypedPackedFunc<std::string()>([sptr_to_self, this]() { return name_; });
    }
    if (name == "fail") {
      return PackedFunc(
          [](TVMArgs, TVMRetValue*) { LOG(FATAL) << "ValueError: failing on purpose"; });
    }
    if (name == "bad_lookup") throw Error("KeyError: lookup failed on purpose");
    return PackedFunc();
  }
  void SaveToBinary(dmlc::Stream* stream) final {
    stream->Write(name_);
    stream->Write(value_);
  }
  std::string GetSource(const std::string& format) final {
    return "source of " + name_ + " as " + format;
  }
  const std::string& name() const { return name_; }
  int64_t value() const { return value_; }

 private:
  std::string name_;
  int64_t value_;
};

Module MakeDemo(std::string name, int64_t value) {
  return Module(make_object<DemoModuleNode>(std::move(name), value));
}

// A blob loader written as for TVM's C++ runtime.
Module LoadDemo(void* strm) {
  dmlc::Stream* stream = static_cast<dmlc::Stream*>(strm);
  std::string name;
  int64_t value = 0;
  ICHECK(stream->Read(&name)) << "cpp_demo: truncated name";
  ICHECK(stream->Read(&value)) << "cpp_demo: truncated value";
  return MakeDemo(name, value);
}

TVM_REGISTER_GLOBAL("runtime.module.loadbinary_cpp_demo").set_body_typed(LoadDemo);
TVM_REGISTER_GLOBAL("test.cpp.make_demo").set_body_typed(MakeDemo);
// A file loader for ".cppdemo" files, as TVM's runtime.module.loadfile_<format> globals.
TVM_REGISTER_GLOBAL("runtime.module.loadfile_cppdemo")
    .set_body_typed([](std::string path, std::string) { return MakeDemo(path, 9); });

void LocalUse() {
  Module m = MakeDemo("local", 7);
  EXPECT(g_alive == 1);
  EXPECT(std::string(m->type_key()) == "cpp_demo");
  int answer = m.GetFunction("answer")();
  EXPECT(answer == 7);
  std::string name = m.GetFunction("name")();
  EXPECT(name == "local");
  EXPECT(m.GetFunction("nothing") == nullptr);
  EXPECT(m.as<DemoModuleNode>() != nullptr);
  EXPECT_THROW_HAS(m.GetFunction("fail")(), InternalError, "ValueError: failing on purpose");
  EXPECT_THROW_HAS(m.Import(m), Error, "Cyclic dependency");
  EXPECT(m->GetFuncFromEnv("runtime.String") != nullptr);
  EXPECT(m->GetFuncFromEnv("runtime.String") == m->GetFuncFromEnv("runtime.String"));
  EXPECT_THROW_HAS(m->GetFuncFromEnv("no.such.function"), Error, "no.such.function");
}

void SeenFromC() {
  TVMValue args[2], rv;
  int codes[2], rc = 0;
  args[0].v_str = "from C";
  codes[0] = kTVMStr;
  args[1].v_int64 = 11;
  codes[1] = kDLInt;
  OK(call_global("test.cpp.make_demo", args, codes, 2, &rv, &rc));
  EXPECT(rc == kTVMModuleHandle);
  TVMModuleHandle h = rv.v_handle;
  EXPECT(g_alive == 1);
  // The runtime's view: its type key, its functions (and their errors, kind kept).
  args[0].v_handle = h;
  codes[0] = kTVMModuleHandle;
  OK(call_global("runtime.ModuleGetTypeKey", args, codes, 1, &rv, &rc));
  EXPECT(rc == kTVMStr && std::strcmp(rv.v_str, "cpp_demo") == 0);
  TVMFunctionHandle f = nullptr;
  OK(TVMModGetFunction(h, "answer", 0, &f));
  EXPECT(f != nullptr);
  OK(TVMFuncCall(f, nullptr, nullptr, 0, &rv, &rc));
  EXPECT(rc == kDLInt && rv.v_int64 == 11);
  TVMFuncFree(f);
  OK(TVMModGetFunction(h, "nothing", 0, &f));
  EXPECT(f == nullptr);
  OK(TVMModGetFunction(h, "fail", 0, &f));
  ERR(TVMFuncCall(f, nullptr, nullptr, 0, &rv, &rc));
  EXPECT(std::strncmp(TVMGetLastError(), "ValueError: failing on purpose", 30) == 0);
  TVMFuncFree(f);
  ERR(TVMModGetFunction(h, "bad_lookup", 0, &f));
  EXPECT(std::strncmp(TVMGetLastError(), "KeyError: lookup failed on purpose", 34) == 0);
  args[0].v_handle = h;
  codes[0] = kTVMModuleHandle;
  args[1].v_str = "asm";
  codes[1] = kTVMStr;
  OK(call_global("runtime.ModuleGetSource", args, codes, 2, &rv, &rc));
  EXPECT(rc == kTVMStr && std::strcmp(rv.v_str, "source of from C as asm") == 0);
  OK(call_global("runtime.ModuleSaveToBinary", args, codes, 1, &rv, &rc));
  EXPECT(rc == kTVMBytes);
  if (rc == kTVMBytes) {
    const TVMByteArray* b = static_cast<const TVMByteArray*>(rv.v_handle);
    std::string bytes(b->data, b->size);
    dmlc::MemoryStringStream strm(&bytes);
    std::string name;
    int64_t value = 0;
    EXPECT(strm.Read(&name) && strm.Read(&value));
    EXPECT(name == "from C" && value == 11);
  }
  TVMValue a3[3];
  int c3[3] = {kTVMModuleHandle, kTVMStr, kTVMStr};
  a3[0].v_handle = h;
  a3[1].v_str = "/nonexistent/x";
  a3[2].v_str = "";
  ERR(call_global("runtime.ModuleSaveToFile", a3, c3, 3, &rv, &rc));
  EXPECT(std::strstr(TVMGetLastError(), "does not support SaveToFile") != nullptr);
  OK(TVMModFree(h));
  EXPECT(g_alive == 0);
}

void ImportedAndFoundBack() {
  Module demo = MakeDemo("imported", 5);
  DemoModuleNode* node = const_cast<DemoModuleNode*>(demo.as<DemoModuleNode>());
  // A module of the runtime, made from C++ functions.
  PackedFunc hello([](TVMArgs, TVMRetValue* rv) { *rv = std::string("hello"); });
  Module holder = (*Registry::Get("runtime.ModuleFromFunctions"))("holder", "hello", hello);
  EXPECT(std::string(holder->type_key()) == "holder");
  // A module of another kind is not a DemoModuleNode (TVM would cast it blindly).
  EXPECT(holder.as<DemoModuleNode>() == nullptr && holder.as<ModuleNode>() != nullptr);
  EXPECT(holder->imports().empty());
  holder.Import(demo);
  EXPECT(holder->imports().size() == 1);
  // Coming back from the runtime, the import is the same C++ module.
  EXPECT(holder->imports()[0] == demo);
  EXPECT(holder->imports()[0].as<DemoModuleNode>() == node);
  int answer = holder.GetFunction("answer", true)();
  EXPECT(answer == 5);
  EXPECT(holder.GetFunction("answer", false) == nullptr);
  std::string h = holder.GetFunction("hello")();
  EXPECT(h == "hello");
  // The C++ module lives while the runtime holds it, and goes with the last reference.
  demo = Module();
  EXPECT(g_alive == 1);
  int again = holder.GetFunction("answer", true)();
  EXPECT(again == 5);
  holder = Module();
  EXPECT(g_alive == 0);
}

void BlobLoader() {
#ifdef TVM_CTEST_CPP_BLOB_LIB
  {
    Module lib = Module::LoadFromFile(TVM_CTEST_CPP_BLOB_LIB);
    EXPECT(std::string(lib->type_key()) == "library");
    EXPECT(lib->imports().size() == 1);
    if (lib->imports().size() == 1) {
      const DemoModuleNode* n = lib->imports()[0].as<DemoModuleNode>();
      EXPECT(n != nullptr);
      if (n != nullptr) EXPECT(n->name() == "hello from a blob" && n->value() == 42);
    }
    int answer = lib.GetFunction("answer", true)();
    EXPECT(answer == 42);
    int own = lib.GetFunction("test_answer")();
    EXPECT(own == 42);
    EXPECT(g_alive == 1);
  }
  EXPECT(g_alive == 0);
#else
  fprintf(stderr, "FAIL: built without the blob library\n");
  g_failed++;
#endif
}

void FileLoader() {
  Module m = Module::LoadFromFile("some/model.cppdemo");
  const DemoModuleNode* n = m.as<DemoModuleNode>();
  EXPECT(n != nullptr && n->name() == "some/model.cppdemo" && n->value() == 9);
  EXPECT(g_alive == 1);
  m = Module();
  EXPECT(g_alive == 0);
}

void RuntimeModulesSeenOnce() {
  Module a = (*Registry::Get("runtime.ModuleFromFunctions"))("one");
  // The same runtime module seen twice is the same C++ Module.
  Module holder = (*Registry::Get("runtime.ModuleFromFunctions"))("two");
  holder.Import(a);
  EXPECT(holder->imports()[0] == a);
  EXPECT(RuntimeEnabled("cpu"));
}

// Modules cross the boundary from several threads at once: each crossing finds (or makes) the
// one C++ node of a runtime module, and the one runtime module of a C++ node, and every
// reference is given back.
void Concurrency() {
  Module demo = MakeDemo("shared", 3);
  const PackedFunc* type_key = Registry::Get("runtime.ModuleGetTypeKey");
  PackedFunc f([](TVMArgs, TVMRetValue* rv) { *rv = 1; });
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t]() {
      for (int i = 0; i < 200; ++i) {
        std::string key = (*type_key)(demo);  // demo goes to the runtime (its wrapper)
        int answer = demo.GetFunction("answer")();
        Module local = MakeDemo("local" + std::to_string(t), i);
        Module made = (*Registry::Get("runtime.ModuleFromFunctions"))("made", "f", f);
        int one = made.GetFunction("f")();
        std::string k2 = (*type_key)(local);
        if (key != "cpp_demo" || k2 != "cpp_demo" || answer != 3 || one != 1) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(bad == 0);
  demo = Module();
  EXPECT(g_alive == 0);
}

}  // namespace

int main() {
  RUN_TEST(LocalUse);
  EXPECT(g_alive == 0);
  RUN_TEST(SeenFromC);
  RUN_TEST(ImportedAndFoundBack);
  RUN_TEST(BlobLoader);
  RUN_TEST(FileLoader);
  RUN_TEST(RuntimeModulesSeenOnce);
  RUN_TEST(Concurrency);
  EXPECT(g_alive == 0);
  return finish();
}
