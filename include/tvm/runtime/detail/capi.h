/*
 * Internal to the header-only C++ API of tvm-runtime (not a TVM header): calling the C API
 * from C++. Errors of C calls become C++ exceptions: tvm::runtime::Error with the text of
 * TVMGetLastError() ("Kind: message"), or EnvErrorAlreadySet for -2.
 */
#ifndef TVM_RUNTIME_DETAIL_CAPI_H_
#define TVM_RUNTIME_DETAIL_CAPI_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/logging.h>

#include <cstdlib>
#include <string>

namespace tvm {
namespace runtime {
namespace detail {

/*! \brief Throws the error of a failed C call (rc != 0). */
[[noreturn]] inline void ThrowLastError(int rc) {
  if (rc == -2) throw EnvErrorAlreadySet("");
  const char* msg = TVMGetLastError();
  throw Error(msg != nullptr ? std::string(msg) : std::string("TVMError: unknown error"));
}

/*! \brief Checks the return code of a C call. */
inline void CheckCall(int rc) {
  if (rc != 0) ThrowLastError(rc);
}

/*!
 * \brief The handle of a global function of the runtime, looked up on every call (for names
 * that may be overridden) — nullptr when absent. The caller frees it.
 */
inline TVMFunctionHandle LookupGlobal(const char* name) {
  TVMFunctionHandle h = nullptr;
  CheckCall(TVMFuncGetGlobal(name, &h));
  return h;
}

/*!
 * \brief The handle of one of the runtime's own globals (`runtime.*`), looked up once per call
 * site and kept for the process; an error if the runtime does not have it.
 */
inline TVMFunctionHandle RequireGlobal(const char* name) {
  TVMFunctionHandle h = LookupGlobal(name);
  if (h == nullptr) {
    throw Error(std::string("TVMError: the runtime has no global function ") + name +
                " (libtvm_runtime too old for these headers?)");
  }
  return h;
}

#define TVM_RT_GLOBAL(name)                                                        \
  ([]() -> TVMFunctionHandle {                                                     \
    static TVMFunctionHandle tvm_rt_global_ = ::tvm::runtime::detail::RequireGlobal(name); \
    return tvm_rt_global_;                                                         \
  }())

/*! \brief A value returned by TVMFuncCall, owned until moved out or destroyed. */
struct RawRet {
  TVMValue value;
  int code = kTVMNullptr;
  RawRet() { value.v_handle = nullptr; }
  RawRet(const RawRet&) = delete;
  RawRet& operator=(const RawRet&) = delete;
  ~RawRet() { Release(); }
  /*! \brief Gives up ownership of the value (the caller took it over). */
  void Forget() { code = kTVMNullptr; }
  void Release() {
    switch (code) {
      case kTVMObjectHandle:
      case kTVMModuleHandle:
        TVMObjectFree(value.v_handle);
        break;
      case kTVMNDArrayHandle:
        TVMArrayFree(static_cast<TVMArrayHandle>(value.v_handle));
        break;
      case kTVMPackedFuncHandle:
        TVMFuncFree(value.v_handle);
        break;
      default:
        break;
    }
    code = kTVMNullptr;
  }
};

/*! \brief Calls a function handle with C-encoded arguments; throws on error. */
inline void CallRaw(TVMFunctionHandle f, TVMValue* values, int* codes, int n, RawRet* ret) {
  ret->Release();
  CheckCall(TVMFuncCall(f, values, codes, n, &ret->value, &ret->code));
}

/*! \brief The int a call returned (code 0), else an error naming `what`. */
inline int64_t RetInt(const RawRet& r, const char* what) {
  if (r.code != kDLInt) throw Error(std::string("TypeError: ") + what + " did not return an int");
  return r.value.v_int64;
}

/*! \brief The string a call returned (code 11), copied. */
inline std::string RetStr(const RawRet& r, const char* what) {
  if (r.code != kTVMStr || r.value.v_str == nullptr) {
    throw Error(std::string("TypeError: ") + what + " did not return a string");
  }
  return std::string(r.value.v_str);
}

}  // namespace detail
}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_DETAIL_CAPI_H_
