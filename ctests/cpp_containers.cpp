// The containers of the C++ API (container/*.h) against the runtime: Strings and ShapeTuples
// made in C++ read by the runtime's globals and the runtime's read in C++; Arrays, Maps and
// ADTs made through the runtime and read / changed from C++; Optional.
#include <tvm/runtime/container/adt.h>
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/closure.h>
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpp_test_util.h"

using namespace tvm::runtime;

namespace {

const PackedFunc& G(const char* name) {
  const PackedFunc* f = Registry::Get(name);
  ICHECK(f != nullptr) << name;
  return *f;
}

void Strings() {
  String s("hello");
  String with_nul(std::string("a\0b", 3));
  EXPECT(s.size() == 5 && s == "hello" && std::string(s) == "hello" && s.c_str()[5] == '\0');
  EXPECT(s < String("hellp") && s > "hell" && s != std::string("x") && "hello" == s);
  EXPECT(s + String(" world") == "hello world" && s.at(1) == 'e');
  EXPECT_THROW_HAS(s.at(5), std::out_of_range, "out of bounds");
  EXPECT(with_nul.size() == 3 && with_nul.compare(std::string("a\0b", 3)) == 0);
  // Made in C++, read by the runtime.
  std::string got = G("runtime.GetFFIString")(s);
  EXPECT(got == "hello");
  // Made by the runtime, read in C++ (in place).
  String r = G("runtime.String")("from the runtime");
  EXPECT(r == "from the runtime" && r.size() == 16 && r->IsInstance<StringObj>());
  // A String argument where a str is expected, and back.
  std::string dt = G("runtime.GetFFIString")(String("float32"));
  EXPECT(dt == "float32");
  EXPECT(std::hash<String>()(String("k")) == std::hash<String>()(G("runtime.String")("k")));
  String empty;
  EXPECT(empty.empty() && empty.defined());
}

void ShapeTuples() {
  ShapeTuple t{2, 3, 4};
  EXPECT(t.size() == 3 && t[1] == 3 && t.front() == 2 && t.back() == 4);
  int64_t n = G("runtime.GetShapeTupleSize")(t);
  int64_t e = G("runtime.GetShapeTupleElem")(t, 2);
  EXPECT(n == 3 && e == 4);
  ShapeTuple r = G("runtime.ShapeTuple")(5, 6);
  EXPECT(r.size() == 2 && r[0] == 5 && r[1] == 6);
  std::vector<int64_t> v(r.begin(), r.end());
  EXPECT((v == std::vector<int64_t>{5, 6}));
  ShapeTuple empty;
  EXPECT(empty.empty() && G("runtime.GetShapeTupleSize")(empty).operator int64_t() == 0);
  EXPECT_THROW_HAS(t[3], InternalError, "IndexError");
}

void Arrays() {
  Array<String> a{"x", "y", "z"};
  EXPECT(a.size() == 3 && a[0] == "x" && a.back() == "z" && !a.empty());
  std::vector<std::string> seen;
  for (const String& s : a) seen.push_back(s);
  EXPECT((seen == std::vector<std::string>{"x", "y", "z"}));
  // The runtime reads it.
  int64_t size = G("runtime.ArraySize")(a);
  EXPECT(size == 3);
  String item = G("runtime.ArrayGetItem")(a, 1);
  EXPECT(item == "y");
  // Changes make new arrays; the old one is unchanged.
  Array<String> b = a;
  b.push_back("w");
  b.Set(0, "X");
  EXPECT(a.size() == 3 && a[0] == "x" && b.size() == 4 && b[0] == "X" && b[3] == "w");
  b.insert(b.begin() + 1, "i");
  b.erase(b.begin() + 2);
  EXPECT(b.size() == 4 && b[1] == "i" && b[2] == "z");
  b.pop_back();
  b.resize(5);
  EXPECT(b.size() == 5 && !b[4].defined());
  b.erase(b.begin() + 3, b.end());
  EXPECT(b.size() == 3);
  Array<String> c = Concat(a, b);
  EXPECT(c.size() == 6 && c[3] == "X");
  Array<String> upper = a.Map([](String s) { return String(std::string(s) + "!"); });
  EXPECT(upper[2] == "z!");
  a.MutateByApply([](String s) { return s == "y" ? String("Y") : s; });
  EXPECT(a[1] == "Y" && a[0] == "x");
  std::vector<std::string> rev;
  for (auto it = a.rbegin(); it != a.rend(); ++it) rev.push_back(*it);
  EXPECT((rev == std::vector<std::string>{"z", "Y", "x"}));
  EXPECT_THROW_HAS(a[7], InternalError, "IndexError");
  a.clear();
  EXPECT(a.empty());
  // Made by the runtime: nested arrays, NDArrays, None elements.
  NDArray nd = NDArray::Empty({2}, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  Array<ObjectRef> r = G("runtime.Array")(nd, Array<String>{"in"}, ObjectRef());
  EXPECT(r.size() == 3 && r[0].as<NDArray::Container>() != nullptr && !r[2].defined());
  NDArray nd2 = Downcast<NDArray>(r[0]);
  EXPECT(nd2.same_as(nd) && nd2->shape[0] == 2);
  Array<String> inner = Downcast<Array<String>>(r[1]);
  EXPECT(inner[0] == "in");
  Array<ObjectRef> from_vec(std::vector<ObjectRef>{nd, nd});
  EXPECT(from_vec.size() == 2 && Array<ObjectRef>(3, nd).size() == 3);
  // Typed conversion checks the element types.
  TypedPackedFunc<int(Array<String>)> count_strings = [](Array<String> x) {
    return static_cast<int>(x.size());
  };
  EXPECT(count_strings(Array<String>{"a", "b"}) == 2);
  EXPECT_THROW_HAS(static_cast<PackedFunc>(count_strings)(r), Error, "Array[index 0: runtime.NDArray]");
}

void Maps() {
  Map<String, ObjectRef> m{{"a", String("1")}, {"b", ShapeTuple{2}}};
  EXPECT(m.size() == 2 && m.count("a") == 1 && m.count("c") == 0);
  EXPECT(Downcast<String>(m["a"]) == "1" && Downcast<ShapeTuple>(m.at("b"))[0] == 2);
  // String keys compare by content, whoever made them.
  String key = G("runtime.String")("a");
  EXPECT(m.count(key) == 1);
  EXPECT(!m.Get("c").defined() && m.Get("a").defined());
  EXPECT_THROW_HAS(m.at("c"), Error, "KeyError");
  Map<String, ObjectRef> n = m;
  n.Set("c", String("3"));
  n.Set("a", String("one"));
  EXPECT(m.size() == 2 && n.size() == 3 && Downcast<String>(n["a"]) == "one");
  std::vector<std::string> keys;
  for (const auto& kv : n) keys.push_back(kv.first);
  EXPECT((keys == std::vector<std::string>{"a", "b", "c"}));  // insertion order kept
  EXPECT(n.find("b") != n.end() && n.find("z") == n.end());
  EXPECT((*n.find("c")).first == "c");
  n.erase("b");
  EXPECT(n.size() == 2 && n.count("b") == 0);
  Map<String, ObjectRef> merged = Merge(m, n);
  EXPECT(merged.size() == 3 && Downcast<String>(merged["a"]) == "one");
  // The runtime reads it; and a map made by the runtime (runtime.LoadParams-like).
  int64_t size = G("runtime.MapSize")(n);
  EXPECT(size == 2);
  Map<String, String> r = G("runtime.Map")("k", String("v"), "k2", String("v2"));
  EXPECT(r.size() == 2 && r["k2"] == "v2");
  std::unordered_map<String, String> um{{"x", "y"}};
  Map<String, String> from_um(um);
  EXPECT(from_um["x"] == "y");
  // A later duplicate key wins, as in TVM.
  Map<String, String> dup{{"d", "1"}, {"d", "2"}};
  EXPECT(dup.size() == 1 && dup["d"] == "2");
  // Object keys by identity.
  ShapeTuple t1{1}, t2{1};
  Map<ShapeTuple, String> byobj{{t1, "t1"}, {t2, "t2"}};
  EXPECT(byobj.size() == 2 && byobj[t2] == "t2");
  TypedPackedFunc<int(Map<String, String>)> f = [](Map<String, String> x) {
    return static_cast<int>(x.size());
  };
  EXPECT(f(r) == 2);
  EXPECT_THROW_HAS(static_cast<PackedFunc>(f)(m), Error, "Map[");
  m.clear();
  EXPECT(m.empty());
}

void Optionals() {
  Optional<String> none;
  Optional<String> some = String("x");
  EXPECT(!none.defined() && none == nullptr && some != nullptr && some.value() == "x");
  EXPECT(none.value_or("d") == "d" && some == String("x") && some != String("y"));
  EXPECT(!(none == some) && (some == Optional<String>(String("x"))));
  EXPECT_THROW_HAS(none.value(), InternalError, "Check failed");
  // Through a function: None and a value.
  TypedPackedFunc<String(Optional<String>)> f = [](Optional<String> v) {
    return v.defined() ? v.value() : String("none");
  };
  EXPECT(f(none) == "none" && f(some) == "x");
  PackedFunc raw = f;
  String r = raw(nullptr);
  EXPECT(r == "none");
}

void Adts() {
  ADT t = ADT::Tuple(std::vector<ObjectRef>{String("a"), ShapeTuple{1, 2}});
  EXPECT(t.tag() == 0 && t.size() == 2 && Downcast<String>(t[0]) == "a");
  ADT v(3, {String("x")});
  EXPECT(v.tag() == 3 && v.size() == 1);
  // The runtime reads it.
  int64_t tag = G("runtime.GetADTTag")(v);
  int64_t size = G("runtime.GetADTSize")(t);
  EXPECT(tag == 3 && size == 2);
  ADT r = G("runtime.Tuple")(String("p"), String("q"));
  EXPECT(r.size() == 2 && Downcast<String>(r[1]) == "q" && r->IsInstance<ADTObj>());
  EXPECT_THROW_HAS(r[2], Error, "IndexError");
  // Closure types come from the runtime by key (vm.Closure derives from runtime.Closure).
  uint32_t vm_closure = Object::TypeKey2Index("vm.Closure");
  int derived = 0;
  OK(TVMObjectDerivedFrom(vm_closure, ClosureObj::RuntimeTypeIndex(), &derived));
  EXPECT(derived == 1);
}

}  // namespace

int main() {
  RUN_TEST(Strings);
  RUN_TEST(ShapeTuples);
  RUN_TEST(Arrays);
  RUN_TEST(Maps);
  RUN_TEST(Optionals);
  RUN_TEST(Adts);
  return finish();
}
