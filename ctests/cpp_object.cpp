// The object system of the C++ API (object.h, memory.h): object types declared in C++ get
// their indices from the runtime and derive there; C++ objects cross into the runtime and back
// as the same object, counted through the shared header, and are deleted once by their own
// deleter whoever drops the last reference; IsInstance / as / Downcast / GetRef; runtime
// objects' type keys and indices.
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/memory.h>
#include <tvm/runtime/object.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <atomic>
#include <cstring>
#include <string>
#include <unordered_set>

#include "cpp_test_util.h"

using namespace tvm::runtime;

namespace {

std::atomic<int> g_deleted{0};

class ShapeNode : public Object {
 public:
  int sides = 0;
  ~ShapeNode() { ++g_deleted; }
  static constexpr const char* _type_key = "test.cpp.Shape";
  static constexpr const uint32_t _type_child_slots = 2;
  TVM_DECLARE_BASE_OBJECT_INFO(ShapeNode, Object);
};

class Shape : public ObjectRef {
 public:
  TVM_DEFINE_OBJECT_REF_METHODS(Shape, ObjectRef, ShapeNode);
};

class SquareNode : public ShapeNode {
 public:
  double side = 0;
  static constexpr const char* _type_key = "test.cpp.Square";
  TVM_DECLARE_FINAL_OBJECT_INFO(SquareNode, ShapeNode);
};

class Square : public Shape {
 public:
  explicit Square(double side) {
    ObjectPtr<SquareNode> n = make_object<SquareNode>();
    n->sides = 4;
    n->side = side;
    data_ = std::move(n);
  }
  TVM_DEFINE_OBJECT_REF_METHODS(Square, Shape, SquareNode);
};

class CircleNode : public ShapeNode {
 public:
  static constexpr const char* _type_key = "test.cpp.Circle";
  TVM_DECLARE_FINAL_OBJECT_INFO(CircleNode, ShapeNode);
};

// Registered at static initialization, as TVM code does.
TVM_REGISTER_OBJECT_TYPE(ShapeNode);
TVM_REGISTER_OBJECT_TYPE(SquareNode);

void TypeIndices() {
  uint32_t shape = ShapeNode::RuntimeTypeIndex();
  uint32_t square = SquareNode::RuntimeTypeIndex();
  uint32_t circle = CircleNode::RuntimeTypeIndex();  // registered at first use
  EXPECT(shape >= TypeIndex::kStaticIndexEnd && square > shape && circle > shape);
  // The runtime knows them by key, under their parents.
  unsigned idx = 0;
  OK(TVMObjectTypeKey2Index("test.cpp.Square", &idx));
  EXPECT(idx == square);
  EXPECT(Object::TypeKey2Index("test.cpp.Circle") == circle);
  EXPECT(Object::TypeIndex2Key(shape) == "test.cpp.Shape");
  int derived = 0;
  OK(TVMObjectDerivedFrom(square, shape, &derived));
  EXPECT(derived == 1);
  OK(TVMObjectDerivedFrom(square, circle, &derived));
  EXPECT(derived == 0);
  // Fixed indices and the runtime's own types by key.
  EXPECT(StringObj::RuntimeTypeIndex() == 3 && ArrayNode::RuntimeTypeIndex() == 4);
  EXPECT(Object::TypeKey2Index("runtime.ADT") == Object::TypeKey2Index("runtime.ADT"));
  EXPECT_THROW_HAS(Object::TypeKey2Index("test.cpp.NoSuchType"), Error, "test.cpp.NoSuchType");
}

void InstancesAndCasts() {
  g_deleted = 0;
  {
    Square sq(2.5);
    Shape sh = sq;
    ObjectRef any = sh;
    EXPECT(any->IsInstance<ShapeNode>() && any->IsInstance<SquareNode>());
    EXPECT(!any->IsInstance<CircleNode>() && !any->IsInstance<StringObj>());
    EXPECT(any.as<SquareNode>() != nullptr && any.as<SquareNode>()->side == 2.5);
    EXPECT(any.as<CircleNode>() == nullptr);
    EXPECT(any->GetTypeKey() == "test.cpp.Square");
    Square back = Downcast<Square>(any);
    EXPECT(back.same_as(sq) && back->sides == 4);
    EXPECT_THROW_HAS(Downcast<String>(any), InternalError,
                     "Downcast from test.cpp.Square to runtime.String failed");
    Square again = GetRef<Square>(sq.get());
    EXPECT(again == sq && sq.use_count() == 5);
    ObjectPtr<Object> p = GetObjectPtr<Object>(const_cast<SquareNode*>(sq.get()));
    EXPECT(p.get() == sq.get() && !sq.unique());
    EXPECT(g_deleted == 0);
  }
  EXPECT(g_deleted == 1);
  ObjectPtr<CircleNode> c = make_object<CircleNode>();
  EXPECT(c->type_index() == CircleNode::RuntimeTypeIndex() && c.unique());
  c.reset();
  EXPECT(g_deleted == 2);
}

void ThroughTheRuntime() {
  g_deleted = 0;
  ObjectRef kept;
  {
    Square sq(1.0);
    EXPECT(sq.use_count() == 1);
    // The runtime holds C++ objects in its own containers and counts them in the header.
    Array<ObjectRef> arr{sq, sq};
    EXPECT(sq.use_count() == 3);
    EXPECT(arr[0].same_as(sq) && arr[1].as<SquareNode>() == sq.get());
    // A function of the runtime returning the object it was given.
    TVMValue v[2];
    int c[2] = {kTVMObjectHandle, kDLInt};
    v[0].v_handle = const_cast<Object*>(static_cast<const Object*>(arr.get()));
    v[1].v_int64 = 1;
    TVMValue rv;
    int rc = 0;
    OK(call_global("runtime.ArrayGetItem", v, c, 2, &rv, &rc));
    EXPECT(rc == kTVMObjectHandle && rv.v_handle == static_cast<const void*>(sq.get()));
    EXPECT(sq.use_count() == 4);
    OK(TVMObjectFree(rv.v_handle));
    EXPECT(sq.use_count() == 3);
    // Its type index, seen by the C API.
    unsigned idx = 0;
    OK(TVMObjectGetTypeIndex(const_cast<SquareNode*>(sq.get()), &idx));
    EXPECT(idx == SquareNode::RuntimeTypeIndex());
    kept = arr;
  }
  EXPECT(g_deleted == 0);  // the runtime's array still holds it
  kept = ObjectRef();
  EXPECT(g_deleted == 1);  // the runtime dropped the last reference: our deleter ran, once
  // Retain / free from C on a C++ object.
  Square sq(3.0);
  Object* raw = const_cast<SquareNode*>(sq.get());
  OK(TVMObjectRetain(raw));
  EXPECT(sq.use_count() == 2);
  OK(TVMObjectFree(raw));
  EXPECT(sq.use_count() == 1);
}

void Hashing() {
  String a("key"), b("key");
  EXPECT(!a.same_as(b));
  EXPECT(ObjectHash()(a) == ObjectHash()(b) && ObjectEqual()(a, b));
  Square s1(1), s2(1);
  EXPECT(!ObjectEqual()(s1, s2) && ObjectPtrEqual()(s1, s1));
  std::unordered_set<ObjectRef, ObjectPtrHash, ObjectPtrEqual> set{s1, s1, s2};
  EXPECT(set.size() == 2);
}

}  // namespace

int main() {
  RUN_TEST(TypeIndices);
  RUN_TEST(InstancesAndCasts);
  RUN_TEST(ThroughTheRuntime);
  RUN_TEST(Hashing);
  return finish();
}
