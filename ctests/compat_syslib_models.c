/* Two models built with `--system-lib` and a symbol prefix (TVM v0.13+'s
 * `runtime.SystemLib(prefix)` convention), written by hand as the code generator emits them:
 * static initialisers register each function under `<prefix><name>` and the model's module
 * context under `<prefix>__tvm_module_ctx` with TVMBackendRegisterSystemLibSymbol. Both models
 * have a function named `compute`; the prefixes keep them apart in one program. */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>

/* A function's address as the `void*` the registry takes (ISO C has no such cast). */
static void* code_address(TVMBackendPackedCFunc f) {
  void* p;
  memcpy(&p, &f, sizeof p);
  return p;
}

#define MODEL(P, VALUE)                                                                        \
  void* P##__tvm_module_ctx = 0;                                                               \
  static int P##compute(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,       \
                        void* res) {                                                           \
    (void)args; (void)codes; (void)res;                                                        \
    if (n != 0) return -1;                                                                     \
    ret->v_int64 = (VALUE);                                                                    \
    *ret_code = kTVMArgInt;                                                                    \
    return 0;                                                                                  \
  }                                                                                            \
  /* The module context the runtime wrote, as a handle. */                                     \
  static int P##context(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,       \
                        void* res) {                                                           \
    (void)args; (void)codes; (void)n; (void)res;                                               \
    ret->v_handle = P##__tvm_module_ctx;                                                       \
    *ret_code = kTVMOpaqueHandle;                                                              \
    return 0;                                                                                  \
  }                                                                                            \
  __attribute__((constructor)) static void P##register_model(void) {                          \
    TVMBackendRegisterSystemLibSymbol(#P "compute", code_address(P##compute));                 \
    TVMBackendRegisterSystemLibSymbol(#P "context", code_address(P##context));                 \
    TVMBackendRegisterSystemLibSymbol(#P "__tvm_module_ctx", (void*)&P##__tvm_module_ctx);     \
  }

MODEL(modela_, 1)
MODEL(modelb_, 2)
