/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/executor_info.h: the names of the executors a model library may be built for.
 */
#ifndef TVM_RUNTIME_EXECUTOR_INFO_H_
#define TVM_RUNTIME_EXECUTOR_INFO_H_

namespace tvm {
namespace runtime {

/*! \brief The graph executor. */
constexpr const char* kTvmExecutorGraph = "graph";
/*! \brief The ahead-of-time executor. */
constexpr const char* kTvmExecutorAot = "aot";

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_EXECUTOR_INFO_H_
