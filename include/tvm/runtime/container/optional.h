/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/optional.h: Optional<T>, a nullable T (None is a null reference).
 */
#ifndef TVM_RUNTIME_CONTAINER_OPTIONAL_H_
#define TVM_RUNTIME_CONTAINER_OPTIONAL_H_

#include <tvm/runtime/container/base.h>

#include <utility>

namespace tvm {
namespace runtime {

/*! \brief The type of NullOpt. */
struct NullOptType {};

/*! \brief A nullable T. */
template <typename T>
class Optional : public ObjectRef {
 public:
  using ContainerType = typename T::ContainerType;
  static_assert(std::is_base_of<ObjectRef, T>::value, "Optional is only defined for ObjectRef.");

  Optional() = default;
  Optional(const Optional<T>&) = default;
  Optional(Optional<T>&&) = default;
  Optional<T>& operator=(const Optional<T>&) = default;
  Optional<T>& operator=(Optional<T>&&) = default;
  explicit Optional(ObjectPtr<Object> ptr) : ObjectRef(std::move(ptr)) {}
  Optional(NullOptType) {}  // NOLINT(*)
  explicit Optional(std::nullptr_t) {}
  Optional<T>& operator=(std::nullptr_t) {
    data_ = nullptr;
    return *this;
  }
  Optional(T other) : ObjectRef(std::move(other)) {}  // NOLINT(*)
  Optional<T>& operator=(T other) {
    ObjectRef::operator=(std::move(other));
    return *this;
  }
  explicit Optional(int val) = delete;
  Optional<T>& operator=(int val) = delete;

  /*! \brief The value; an error when None. */
  T value() const {
    ICHECK(data_ != nullptr);
    return T(data_);
  }
  T value_or(T default_value) const { return data_ != nullptr ? T(data_) : default_value; }
  explicit operator bool() const { return *this != nullptr; }
  bool operator==(std::nullptr_t) const { return data_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return data_ != nullptr; }
  auto operator==(const Optional<T>& other) const {
    using RetType = decltype(value() == other.value());
    if (same_as(other)) return RetType(true);
    if (*this != nullptr && other != nullptr) return value() == other.value();
    return RetType(false);
  }
  auto operator!=(const Optional<T>& other) const {
    using RetType = decltype(value() != other.value());
    if (same_as(other)) return RetType(false);
    if (*this != nullptr && other != nullptr) return value() != other.value();
    return RetType(true);
  }
  auto operator==(const T& other) const {
    using RetType = decltype(value() == other);
    if (same_as(other)) return RetType(true);
    if (*this != nullptr) return value() == other;
    return RetType(false);
  }
  auto operator!=(const T& other) const {
    return !(*this == other);
  }
  template <typename U>
  auto operator==(const U& other) const {
    using RetType = decltype(value() == other);
    if (*this == nullptr) return RetType(false);
    return value() == other;
  }
  template <typename U>
  auto operator!=(const U& other) const {
    using RetType = decltype(value() != other);
    if (*this == nullptr) return RetType(true);
    return value() != other;
  }
  static constexpr bool _type_is_nullable = true;
};

}  // namespace runtime

using runtime::Optional;
constexpr runtime::NullOptType NullOpt{};

}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_OPTIONAL_H_
