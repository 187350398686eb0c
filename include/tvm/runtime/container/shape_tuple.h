/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/shape_tuple.h: ShapeTuple. A ShapeTupleObj is {header,
 * const int64* data, uint64 size}, the layout the runtime reads too (made here or there, it
 * crosses as is).
 */
#ifndef TVM_RUNTIME_CONTAINER_SHAPE_TUPLE_H_
#define TVM_RUNTIME_CONTAINER_SHAPE_TUPLE_H_

#include <tvm/runtime/container/base.h>

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

/*! \brief The body of a ShapeTuple. */
class ShapeTupleObj : public Object {
 public:
  using index_type = int64_t;
  const index_type* data;
  uint64_t size;

  static constexpr const uint32_t _type_index = TypeIndex::kRuntimeShapeTuple;
  static constexpr const char* _type_key = "runtime.ShapeTuple";
  TVM_DECLARE_FINAL_OBJECT_INFO(ShapeTupleObj, Object);

 private:
  class FromStd;
  friend class ShapeTuple;
};

/*! \brief A ShapeTuple made in C++: the dimensions live in a std::vector member. */
class ShapeTupleObj::FromStd : public ShapeTupleObj {
 public:
  using index_type = ShapeTupleObj::index_type;
  explicit FromStd(std::vector<index_type> other) : data_container{std::move(other)} {}

 private:
  std::vector<index_type> data_container;
  friend class ShapeTuple;
};

/*! \brief An immutable tuple of int64 (shapes). Not nullable. */
class ShapeTuple : public ObjectRef {
 public:
  using index_type = ShapeTupleObj::index_type;
  ShapeTuple() : ShapeTuple(std::vector<index_type>()) {}
  template <typename IterType>
  ShapeTuple(IterType begin, IterType end) : ShapeTuple(std::vector<index_type>(begin, end)) {}
  ShapeTuple(std::initializer_list<index_type> shape)  // NOLINT(*)
      : ShapeTuple(shape.begin(), shape.end()) {}
  ShapeTuple(std::vector<index_type> shape);  // NOLINT(*)

  const index_type* data() const { return get()->data; }
  size_t size() const { return static_cast<size_t>(get()->size); }
  index_type operator[](size_t idx) const {
    ICHECK(idx < this->size()) << "IndexError: indexing " << idx << " on an array of size "
                               << this->size();
    return this->data()[idx];
  }
  index_type at(size_t idx) const { return this->operator[](idx); }
  bool empty() const { return size() == 0; }
  index_type front() const { return this->at(0); }
  index_type back() const { return this->at(this->size() - 1); }
  const index_type* begin() const { return get()->data; }
  const index_type* end() const { return get()->data + size(); }

  TVM_DEFINE_NOTNULLABLE_OBJECT_REF_METHODS(ShapeTuple, ObjectRef, ShapeTupleObj);
};

inline ShapeTuple::ShapeTuple(std::vector<index_type> shape) {
  auto ptr = make_object<ShapeTupleObj::FromStd>(std::move(shape));
  ptr->size = ptr->data_container.size();
  ptr->data = ptr->data_container.data();
  data_ = std::move(ptr);
}

}  // namespace runtime

using runtime::ShapeTuple;
using runtime::ShapeTupleObj;

}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_SHAPE_TUPLE_H_
