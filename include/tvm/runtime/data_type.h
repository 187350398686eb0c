/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/data_type.h: DataType and the text forms of DLDataType ("float32", "int8x4",
 * "bool", "handle", "custom[name]16").
 */
#ifndef TVM_RUNTIME_DATA_TYPE_H_
#define TVM_RUNTIME_DATA_TYPE_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/detail/capi.h>
#include <tvm/runtime/logging.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

namespace tvm {
namespace runtime {

/*! \brief A data type: code, bits and lanes (a DLDataType with methods). */
class DataType {
 public:
  enum TypeCode {
    kInt = kDLInt,
    kUInt = kDLUInt,
    kFloat = kDLFloat,
    kHandle = TVMArgTypeCode::kTVMOpaqueHandle,
    kBFloat = kDLBfloat,
    kCustomBegin = 129
  };
  DataType() { data_ = DLDataType{static_cast<uint8_t>(kHandle), 0, 0}; }
  explicit DataType(DLDataType dtype) : data_(dtype) {}
  DataType(int code, int bits, int lanes) {
    data_.code = static_cast<uint8_t>(code);
    data_.bits = static_cast<uint8_t>(bits);
    data_.lanes = static_cast<uint16_t>(lanes);
    if (code == kBFloat) {
      ICHECK_EQ(bits, 16);
    }
  }
  int code() const { return static_cast<int>(data_.code); }
  int bits() const { return static_cast<int>(data_.bits); }
  int bytes() const { return (bits() + 7) / 8; }
  int lanes() const { return static_cast<int>(data_.lanes); }
  bool is_scalar() const { return lanes() == 1; }
  bool is_bool() const { return code() == DataType::kUInt && bits() == 1; }
  bool is_float() const { return code() == DataType::kFloat; }
  bool is_float16() const { return is_float() && bits() == 16; }
  bool is_bfloat16() const { return code() == DataType::kBFloat && bits() == 16; }
  bool is_int() const { return code() == DataType::kInt; }
  bool is_uint() const { return code() == DataType::kUInt; }
  bool is_handle() const { return code() == DataType::kHandle && !is_void(); }
  bool is_vector() const { return lanes() > 1; }
  bool is_vector_bool() const { return is_vector() && bits() == 1; }
  bool is_void() const { return code() == DataType::kHandle && bits() == 0 && lanes() == 0; }
  DataType with_lanes(int lanes) const { return DataType(data_.code, data_.bits, lanes); }
  DataType with_bits(int bits) const { return DataType(data_.code, bits, data_.lanes); }
  DataType element_of() const { return with_lanes(1); }
  bool operator==(const DataType& other) const {
    return data_.code == other.data_.code && data_.bits == other.data_.bits &&
           data_.lanes == other.data_.lanes;
  }
  bool operator!=(const DataType& other) const { return !operator==(other); }
  operator DLDataType() const { return data_; }  // NOLINT(*)

  static DataType Int(int bits, int lanes = 1) { return DataType(kDLInt, bits, lanes); }
  static DataType UInt(int bits, int lanes = 1) { return DataType(kDLUInt, bits, lanes); }
  static DataType Float(int bits, int lanes = 1) { return DataType(kDLFloat, bits, lanes); }
  static DataType BFloat(int bits, int lanes = 1) { return DataType(kDLBfloat, bits, lanes); }
  static DataType Bool(int lanes = 1) { return DataType::UInt(1, lanes); }
  static DataType Handle(int bits = 64, int lanes = 1) { return DataType(kHandle, bits, lanes); }
  static DataType Void() { return DataType(kHandle, 0, 0); }
  static DataType ShapeIndex() {
    if (std::is_signed<tvm_index_t>::value) return DataType::Int(sizeof(tvm_index_t) * 8);
    return DataType::UInt(sizeof(tvm_index_t) * 8);
  }

 private:
  DLDataType data_;
};

/*! \brief Bytes of a vector access of dtype (bool and 4-bit types count as one byte). */
inline int GetVectorBytes(DataType dtype) {
  int data_bits = dtype.bits() * dtype.lanes();
  if (dtype == DataType::Bool() || dtype == DataType::Int(4) || dtype == DataType::UInt(4) ||
      dtype == DataType::Int(1)) {
    return 1;
  }
  ICHECK_EQ(data_bits % 8, 0U) << "Need to load/store by multiple of bytes";
  return data_bits / 8;
}

inline bool TypeMatch(DLDataType t, int code, int bits, int lanes = 1) {
  return t.code == code && t.bits == bits && t.lanes == lanes;
}

inline bool TypeEqual(DLDataType lhs, DLDataType rhs) {
  return lhs.code == rhs.code && lhs.bits == rhs.bits && lhs.lanes == rhs.lanes;
}

/*! \brief The name of a custom data type (through the runtime's datatype registry). */
inline std::string GetCustomTypeName(uint8_t type_code) {
  TVMFunctionHandle f = detail::LookupGlobal("runtime._datatype_get_type_name");
  ICHECK(f != nullptr) << "Function runtime._datatype_get_type_name not found";
  TVMValue v;
  int c = kDLInt;
  v.v_int64 = type_code;
  detail::RawRet r;
  try {
    detail::CallRaw(f, &v, &c, 1, &r);
  } catch (...) {
    TVMFuncFree(f);
    throw;
  }
  TVMFuncFree(f);
  return detail::RetStr(r, "runtime._datatype_get_type_name");
}

/*! \brief Whether a custom data type code is registered. */
inline bool GetCustomTypeRegistered(uint8_t type_code) {
  TVMFunctionHandle f = detail::LookupGlobal("runtime._datatype_get_type_registered");
  ICHECK(f != nullptr) << "Function runtime._datatype_get_type_registered not found";
  TVMValue v;
  int c = kDLInt;
  v.v_int64 = type_code;
  detail::RawRet r;
  try {
    detail::CallRaw(f, &v, &c, 1, &r);
  } catch (...) {
    TVMFuncFree(f);
    throw;
  }
  TVMFuncFree(f);
  return detail::RetInt(r, "runtime._datatype_get_type_registered") != 0;
}

/*! \brief Parses "custom[name]..." at s; *scan is set after the closing bracket. */
inline uint8_t ParseCustomDatatype(const std::string& s, const char** scan) {
  ICHECK(s.substr(0, 6) == "custom") << "Not a valid custom datatype string";
  const char* tmp = s.c_str() + 6;
  ICHECK(*tmp == '[') << "expected opening brace after 'custom' type in " << s;
  ++tmp;
  const char* close = std::strchr(tmp, ']');
  ICHECK(close != nullptr) << "expected closing brace after 'custom' type in " << s;
  std::string name(tmp, close - tmp);
  *scan = close + 1;
  TVMFunctionHandle f = detail::LookupGlobal("runtime._datatype_get_type_code");
  ICHECK(f != nullptr) << "Function runtime._datatype_get_type_code not found";
  TVMValue v;
  int c = kTVMStr;
  v.v_str = name.c_str();
  detail::RawRet r;
  try {
    detail::CallRaw(f, &v, &c, 1, &r);
  } catch (...) {
    TVMFuncFree(f);
    throw;
  }
  TVMFuncFree(f);
  return static_cast<uint8_t>(detail::RetInt(r, "runtime._datatype_get_type_code"));
}

inline const char* DLDataTypeCode2Str(DLDataTypeCode type_code) {
  switch (static_cast<int>(type_code)) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case DataType::kHandle:
      return "handle";
    case kDLBfloat:
      return "bfloat";
    default:
      LOG(FATAL) << "unknown type_code=" << static_cast<int>(type_code);
  }
  return "";
}

inline std::ostream& operator<<(std::ostream& os, DLDataType t) {  // NOLINT(*)
  if (t.bits == 1 && t.lanes == 1 && t.code == kDLUInt) return os << "bool";
  if (DataType(t).is_void()) return os << "void";
  if (t.code < DataType::kCustomBegin) {
    os << DLDataTypeCode2Str(static_cast<DLDataTypeCode>(t.code));
  } else {
    os << "custom[" << GetCustomTypeName(t.code) << "]";
  }
  if (t.code == kTVMOpaqueHandle) return os;
  os << static_cast<int>(t.bits);
  if (t.lanes != 1) os << 'x' << static_cast<int>(t.lanes);
  return os;
}

inline std::ostream& operator<<(std::ostream& os, const DataType& dtype) {  // NOLINT(*)
  return os << dtype.operator DLDataType();
}

/*! \brief "float32", "int8x4", "bool", ...; "" for bits == 0. */
inline std::string DLDataType2String(DLDataType t) {
  if (t.bits == 0) return "";
  std::ostringstream os;
  os << t;
  return os.str();
}

/*! \brief Parses the text form of a data type ("" is void); an error for unknown text. */
inline DLDataType String2DLDataType(std::string s) {
  DLDataType t;
  if (s.empty()) return DataType::Void();
  t.bits = 32;
  t.lanes = 1;
  const char* scan = nullptr;
  if (s.compare(0, 3, "int") == 0) {
    t.code = kDLInt;
    scan = s.c_str() + 3;
  } else if (s.compare(0, 4, "uint") == 0) {
    t.code = kDLUInt;
    scan = s.c_str() + 4;
  } else if (s.compare(0, 5, "float") == 0) {
    t.code = kDLFloat;
    scan = s.c_str() + 5;
  } else if (s.compare(0, 6, "handle") == 0) {
    t.code = kTVMOpaqueHandle;
    t.bits = 64;
    scan = s.c_str() + 6;
  } else if (s == "bool") {
    t.code = kDLUInt;
    t.bits = 1;
    t.lanes = 1;
    return t;
  } else if (s.compare(0, 6, "bfloat") == 0) {
    t.code = DataType::kBFloat;
    scan = s.c_str() + 6;
  } else if (s.compare(0, 6, "custom") == 0) {
    t.code = ParseCustomDatatype(s, &scan);
  } else {
    LOG(FATAL) << "unknown type " << s;
  }
  char* xdelim = nullptr;
  unsigned long bits = std::strtoul(scan, &xdelim, 10);  // NOLINT(runtime/int)
  if (bits != 0) t.bits = static_cast<uint8_t>(bits);
  char* endpt = xdelim;
  if (*xdelim == 'x') {
    t.lanes = static_cast<uint16_t>(std::strtoul(xdelim + 1, &endpt, 10));
  }
  ICHECK(endpt == s.c_str() + s.length()) << "unknown type " << s;
  return t;
}

}  // namespace runtime

using DataType = runtime::DataType;

}  // namespace tvm

namespace std {
template <>
struct hash<tvm::DataType> {
  inline int cantor_pairing_function(int a, int b) const { return (a + b) * (a + b + 1) / 2 + b; }
  std::size_t operator()(tvm::DataType const& dtype) const {
    int d = cantor_pairing_function(dtype.code(), dtype.bits());
    return cantor_pairing_function(dtype.lanes(), d);
  }
};
}  // namespace std

#endif  // TVM_RUNTIME_DATA_TYPE_H_
