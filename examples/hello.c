/* A first C program against tvm-runtime: registers a C function as a global, calls it
 * through the PackedFunc ABI, allocates an NDArray and round-trips it through a params blob.
 * Build: see scripts/demo.sh. */
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed: %s\n", #x, TVMGetLastError()); return 1; } } while (0)

static int add_one(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || codes[0] != kTVMArgInt) {
    TVMAPISetLastError("TypeError: demo.add_one expects one int");
    return -1;
  }
  TVMValue v; int c = kTVMArgInt;
  v.v_int64 = args[0].v_int64 + 1;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

int main(void) {
  TVMFunctionHandle f, g;
  CHECK(TVMFuncCreateFromCFunc(add_one, NULL, NULL, &f));
  CHECK(TVMFuncRegisterGlobal("demo.add_one", f, 0));
  CHECK(TVMFuncGetGlobal("demo.add_one", &g));
  TVMValue a, rv; int c = kTVMArgInt, rc;
  a.v_int64 = 41;
  CHECK(TVMFuncCall(g, &a, &c, 1, &rv, &rc));
  printf("demo.add_one(41) = %lld\n", (long long)rv.v_int64);

  int64_t shape[2] = {2, 3};
  float data[6] = {0, 1, 2, 3, 4, 5}, back[6];
  TVMArrayHandle arr;
  CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &arr));
  CHECK(TVMArrayCopyFromBytes(arr, data, sizeof data));
  CHECK(TVMArrayCopyToBytes(arr, back, sizeof back));
  printf("array of shape [%lld, %lld], data aligned at 128: %s, round trip: %s\n", (long long)arr->shape[0],
         (long long)arr->shape[1], ((uintptr_t)arr->data % 128) == 0 ? "yes" : "no",
         memcmp(data, back, sizeof data) == 0 ? "ok" : "MISMATCH");
  CHECK(TVMArrayFree(arr));
  CHECK(TVMFuncFree(g));
  CHECK(TVMFuncFree(f));
  return 0;
}
