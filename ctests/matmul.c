/* matmul_packed.so from TVM v0.8: parallel loops (TVMBackendParallelLaunch) and a 256 KiB
 * workspace (TVMBackendAllocWorkspace). Run by CTest with TVM_NUM_THREADS=1 and =2; the output
 * must match the manifest's expected output (rtol 1e-5, atol 1e-4). */
#include "test_util.h"

int main(void) {
  const char* dir = fixtures_dir();
  char path[4096];
  Npy a, b, want;
  snprintf(path, sizeof path, "%s/matmul_packed.A.npy", dir);
  EXPECT(load_npy(path, &a) == 0);
  snprintf(path, sizeof path, "%s/matmul_packed.B.npy", dir);
  EXPECT(load_npy(path, &b) == 0);
  snprintf(path, sizeof path, "%s/matmul_packed.C.npy", dir);
  EXPECT(load_npy(path, &want) == 0);
  snprintf(path, sizeof path, "%s/matmul_packed.so", dir);
  TVMModuleHandle m = NULL;
  OK(TVMModLoadFromFile(path, "", &m));
  TVMFunctionHandle f = NULL;
  OK(TVMModGetFunction(m, "matmul_packed", 0, &f));
  EXPECT(f != NULL);
  if (m == NULL || f == NULL) return finish();
  TVMArrayHandle ta, tb, tc;
  OK(TVMArrayAlloc(a.shape, a.ndim, kDLFloat, 32, 1, kDLCPU, 0, &ta));
  OK(TVMArrayAlloc(b.shape, b.ndim, kDLFloat, 32, 1, kDLCPU, 0, &tb));
  OK(TVMArrayAlloc(want.shape, want.ndim, kDLFloat, 32, 1, kDLCPU, 0, &tc));
  OK(TVMArrayCopyFromBytes(ta, a.data, a.n * 4));
  OK(TVMArrayCopyFromBytes(tb, b.data, b.n * 4));
  float* got = (float*)malloc(want.n * 4);
  for (int round = 0; round < 3; round++) {
    TVMValue v[3], rv; int c[3] = {kTVMNDArrayHandle, kTVMNDArrayHandle, kTVMNDArrayHandle}, rc;
    v[0].v_handle = ta; v[1].v_handle = tb; v[2].v_handle = tc;
    OK(TVMFuncCall(f, v, c, 3, &rv, &rc));
    OK(TVMArrayCopyToBytes(tc, got, want.n * 4));
    double excess = allclose_excess(got, want.data, want.n, 1e-5, 1e-4);
    if (excess != 0) fprintf(stderr, "round %d: excess %g\n", round, excess);
    EXPECT(excess == 0);
  }
  printf("TVM_NUM_THREADS=%s\n", getenv("TVM_NUM_THREADS") ? getenv("TVM_NUM_THREADS") : "(unset)");
  free(got); free(a.data); free(b.data); free(want.data);
  OK(TVMArrayFree(ta)); OK(TVMArrayFree(tb)); OK(TVMArrayFree(tc));
  OK(TVMFuncFree(f)); OK(TVMModFree(m));
  return finish();
}
