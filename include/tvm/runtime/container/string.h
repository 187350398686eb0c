/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/container/string.h: String. A StringObj is {header, const char* data,
 * uint64 size}, the layout the runtime reads too, so Strings made here go to the runtime as
 * they are, and the runtime's Strings are read in place.
 */
#ifndef TVM_RUNTIME_CONTAINER_STRING_H_
#define TVM_RUNTIME_CONTAINER_STRING_H_

#include <tvm/runtime/container/base.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/memory.h>
#include <tvm/runtime/object.h>

#include <cstring>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__cpp_lib_string_view) && __cpp_lib_string_view >= 201606
#define TVM_USE_CXX17_STRING_VIEW_HASH 1
#include <string_view>
#else
#define TVM_USE_CXX17_STRING_VIEW_HASH 0
#endif

namespace llvm {
class StringRef;
}  // namespace llvm

namespace tvm {
namespace runtime {

class TVMArgValue;

/*! \brief The body of a String: NUL-terminated bytes at data, size without the NUL. */
class StringObj : public Object {
 public:
  const char* data;
  uint64_t size;

  static constexpr const uint32_t _type_index = TypeIndex::kRuntimeString;
  static constexpr const char* _type_key = "runtime.String";
  TVM_DECLARE_FINAL_OBJECT_INFO(StringObj, Object);

 private:
  class FromStd;
  friend class String;
};

/*! \brief An immutable string object (not nullable). */
class String : public ObjectRef {
 public:
  String() : String(std::string()) {}
  String(std::string other);  // NOLINT(*)
  String(const char* other) : String(std::string(other)) {}  // NOLINT(*)
  String(std::nullptr_t) : ObjectRef(nullptr) {}             // NOLINT(*)

  inline String& operator=(std::string other);
  inline String& operator=(const char* other);

  int compare(const String& other) const {
    return memncmp(data(), other.data(), size(), other.size());
  }
  int compare(const std::string& other) const {
    return memncmp(data(), other.data(), size(), other.size());
  }
  int compare(const char* other) const {
    return memncmp(data(), other, size(), std::strlen(other));
  }
  const char* c_str() const { return get()->data; }
  size_t size() const { return static_cast<size_t>(get()->size); }
  size_t length() const { return size(); }
  bool empty() const { return size() == 0; }
  char at(size_t pos) const {
    if (pos < size()) return data()[pos];
    throw std::out_of_range("tvm::String index out of bounds");
  }
  const char* data() const { return get()->data; }
  operator std::string() const { return std::string{get()->data, size()}; }  // NOLINT(*)
  inline operator llvm::StringRef() const;
  inline static bool CanConvertFrom(const TVMArgValue& val);

  static size_t HashBytes(const char* data, size_t size) {
#if TVM_USE_CXX17_STRING_VIEW_HASH
    return std::hash<std::string_view>()(std::string_view(data, size));
#else
    return std::hash<std::string>()(std::string(data, size));
#endif
  }

  TVM_DEFINE_NOTNULLABLE_OBJECT_REF_METHODS(String, ObjectRef, StringObj);

 private:
  /*! \brief Compares like std::string (bytes as unsigned char, then lengths). */
  static int memncmp(const char* lhs, const char* rhs, size_t lhs_count, size_t rhs_count) {
    if (lhs == rhs && lhs_count == rhs_count) return 0;
    size_t n = lhs_count < rhs_count ? lhs_count : rhs_count;
    int c = n == 0 ? 0 : std::memcmp(lhs, rhs, n);
    if (c != 0) return c < 0 ? -1 : 1;
    if (lhs_count < rhs_count) return -1;
    if (lhs_count > rhs_count) return 1;
    return 0;
  }
  static String Concat(const char* lhs, size_t lhs_size, const char* rhs, size_t rhs_size) {
    std::string ret(lhs, lhs_size);
    ret.append(rhs, rhs_size);
    return String(ret);
  }
  friend String operator+(const String& lhs, const String& rhs);
  friend String operator+(const String& lhs, const std::string& rhs);
  friend String operator+(const std::string& lhs, const String& rhs);
  friend String operator+(const String& lhs, const char* rhs);
  friend String operator+(const char* lhs, const String& rhs);
  friend struct tvm::runtime::ObjectEqual;
};

/*! \brief A String made in C++: the bytes live in a std::string member. */
class StringObj::FromStd : public StringObj {
 public:
  explicit FromStd(std::string other) : data_container{std::move(other)} {}

 private:
  std::string data_container;
  friend class String;
};

inline String::String(std::string other) {
  auto ptr = make_object<StringObj::FromStd>(std::move(other));
  ptr->size = ptr->data_container.size();
  ptr->data = ptr->data_container.data();
  data_ = std::move(ptr);
}

inline String& String::operator=(std::string other) {
  String replace{std::move(other)};
  data_.swap(replace.data_);
  return *this;
}

inline String& String::operator=(const char* other) { return operator=(std::string(other)); }

inline String operator+(const String& lhs, const String& rhs) {
  return String::Concat(lhs.data(), lhs.size(), rhs.data(), rhs.size());
}
inline String operator+(const String& lhs, const std::string& rhs) {
  return String::Concat(lhs.data(), lhs.size(), rhs.data(), rhs.size());
}
inline String operator+(const std::string& lhs, const String& rhs) {
  return String::Concat(lhs.data(), lhs.size(), rhs.data(), rhs.size());
}
inline String operator+(const char* lhs, const String& rhs) {
  return String::Concat(lhs, std::strlen(lhs), rhs.data(), rhs.size());
}
inline String operator+(const String& lhs, const char* rhs) {
  return String::Concat(lhs.data(), lhs.size(), rhs, std::strlen(rhs));
}

#define TVM_RT_STRING_CMP(op)                                                               \
  inline bool operator op(const String& lhs, const std::string& rhs) {                      \
    return lhs.compare(rhs) op 0;                                                           \
  }                                                                                         \
  inline bool operator op(const std::string& lhs, const String& rhs) {                      \
    return 0 op rhs.compare(lhs);                                                           \
  }                                                                                         \
  inline bool operator op(const String& lhs, const String& rhs) { return lhs.compare(rhs) op 0; } \
  inline bool operator op(const String& lhs, const char* rhs) { return lhs.compare(rhs) op 0; }   \
  inline bool operator op(const char* lhs, const String& rhs) { return 0 op rhs.compare(lhs); }
TVM_RT_STRING_CMP(<)
TVM_RT_STRING_CMP(>)
TVM_RT_STRING_CMP(<=)
TVM_RT_STRING_CMP(>=)
TVM_RT_STRING_CMP(==)
TVM_RT_STRING_CMP(!=)
#undef TVM_RT_STRING_CMP

inline std::ostream& operator<<(std::ostream& out, const String& input) {
  out.write(input.data(), static_cast<std::streamsize>(input.size()));
  return out;
}

inline size_t ObjectHash::operator()(const ObjectRef& a) const {
  if (const auto* str = a.as<StringObj>()) {
    return String::HashBytes(str->data, static_cast<size_t>(str->size));
  }
  return ObjectPtrHash()(a);
}

inline bool ObjectEqual::operator()(const ObjectRef& a, const ObjectRef& b) const {
  if (a.same_as(b)) return true;
  if (const auto* str_a = a.as<StringObj>()) {
    if (const auto* str_b = b.as<StringObj>()) {
      return String::memncmp(str_a->data, str_b->data, static_cast<size_t>(str_a->size),
                             static_cast<size_t>(str_b->size)) == 0;
    }
  }
  return false;
}

}  // namespace runtime

using runtime::String;
using runtime::StringObj;

}  // namespace tvm

namespace std {
template <>
struct hash<::tvm::runtime::String> {
  std::size_t operator()(const ::tvm::runtime::String& str) const {
    return ::tvm::runtime::String::HashBytes(str.data(), str.size());
  }
};
}  // namespace std

#endif  // TVM_RUNTIME_CONTAINER_STRING_H_
