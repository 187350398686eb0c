/* The system library: TVM v0.8's syslib_scale_shift.o (built with --system-lib) is linked into
 * this program; its static initialiser registers `scale_shift` and its `__tvm_module_ctx` with
 * TVMBackendRegisterSystemLibSymbol before main runs. The global runtime.SystemLib returns the
 * module, and scale_shift's output is compared with scale_shift.B.npy. Without the object file
 * (TVM_NO_SYSLIB_OBJECT) the test skips (exit 77), or fails under CI=true. */
#include <stdint.h>
#include "test_util.h"

#ifdef TVM_NO_SYSLIB_OBJECT
int main(void) {
  const char* ci = getenv("CI");
  if (ci != NULL && strcmp(ci, "true") == 0) {
    fprintf(stderr, "FAIL: syslib_scale_shift.o was missing at configure time (required under CI)\n");
    return 1;
  }
  printf("SKIP: syslib_scale_shift.o was not found at configure time\n");
  return 77;
}
#else

/* Defined (weak) by the system-lib object; the runtime writes the module into it. */
extern void* __tvm_module_ctx;

int main(void) {
  const char* dir = fixtures_dir();
  char path[4096];
  Npy a, b;
  snprintf(path, sizeof path, "%s/scale_shift.A.npy", dir);
  EXPECT(load_npy(path, &a) == 0);
  snprintf(path, sizeof path, "%s/scale_shift.B.npy", dir);
  EXPECT(load_npy(path, &b) == 0);
  if (g_failed) return finish();
  EXPECT(a.n == 513 && b.n == 513);
  size_t na = a.n * sizeof(float), nb = b.n * sizeof(float);

  TVMValue r;
  int rc = -1;
  OK(call_global("runtime.SystemLib", NULL, NULL, 0, &r, &rc));
  EXPECT(rc == kTVMModuleHandle);
  TVMModuleHandle mod = r.v_handle;
  /* The object's module context now names the system library module. */
  EXPECT(__tvm_module_ctx == mod);
  /* The singleton: a second call returns the same module. */
  OK(call_global("runtime.SystemLib", NULL, NULL, 0, &r, &rc));
  EXPECT(rc == kTVMModuleHandle && r.v_handle == mod);
  TVMModFree(r.v_handle);

  TVMFunctionHandle f = NULL;
  OK(TVMModGetFunction(mod, "scale_shift", 0, &f));
  EXPECT(f != NULL);
  int64_t shape[1] = {513};
  TVMArrayHandle x = NULL, y = NULL;
  OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &x));
  OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &y));
  if (f != NULL && x != NULL && y != NULL && na == nb) {
    OK(TVMArrayCopyFromBytes(x, a.data, na));
    TVMValue args[2];
    int codes[2] = {kTVMNDArrayHandle, kTVMNDArrayHandle};
    args[0].v_handle = x;
    args[1].v_handle = y;
    OK(TVMFuncCall(f, args, codes, 2, &r, &rc));
    unsigned char* got = (unsigned char*)malloc(nb);
    OK(TVMArrayCopyToBytes(y, got, nb));
    EXPECT(memcmp(got, b.data, nb) == 0); /* bit-exact: the same kernel made the .npy */
    free(got);
    /* Errors raised by the object's generated checks come back through TVMGetLastError. */
    ERR_HAS(TVMFuncCall(f, args, codes, 1, &r, &rc), "num_args should be 2");
  }
  TVMFuncFree(f);
  TVMArrayFree(x);
  TVMArrayFree(y);
  TVMModFree(mod);
  free(a.data);
  free(b.data);
  return finish();
}
#endif
