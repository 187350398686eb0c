/* Loads a model library exported in TVM's conventions (GraphExecutorFactory in its blob), creates
 * a graph executor on the CPU, runs it on an input and prints the output.
 * Usage: run_model MODEL.so */
#include <stdio.h>
#include <tvm/runtime/c_runtime_api.h>

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed: %s\n", #x, TVMGetLastError()); return 1; } } while (0)

static int call(TVMModuleHandle m, const char* name, TVMValue* v, int* c, int n, TVMValue* rv, int* rc) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(m, name, 0, &f) != 0 || f == NULL) return -1;
  int r = TVMFuncCall(f, v, c, n, rv, rc);
  TVMFuncFree(f);
  return r;
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s MODEL.so\n", argv[0]); return 2; }
  TVMModuleHandle lib, ex;
  CHECK(TVMModLoadFromFile(argv[1], "", &lib));
  TVMValue v[2], rv; int c[2], rc;
  v[0].v_device.device_type = kDLCPU; v[0].v_device.device_id = 0; c[0] = kDLDevice;
  CHECK(call(lib, "default", v, c, 1, &rv, &rc));
  ex = rv.v_handle;
  int64_t shape[2] = {1, 4};
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f}, y[3];
  TVMArrayHandle in, out;
  CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &in));
  CHECK(TVMArrayCopyFromBytes(in, x, sizeof x));
  v[0].v_str = "data"; c[0] = kTVMStr;
  v[1].v_handle = in; c[1] = kTVMNDArrayHandle;
  CHECK(call(ex, "set_input", v, c, 2, &rv, &rc));
  CHECK(call(ex, "run", NULL, NULL, 0, &rv, &rc));
  v[0].v_int64 = 0; c[0] = kTVMArgInt;
  CHECK(call(ex, "get_output", v, c, 1, &rv, &rc));
  out = rv.v_handle;
  CHECK(TVMArrayCopyToBytes(out, y, sizeof y));
  printf("input  [1, 4]: %g %g %g %g\n", x[0], x[1], x[2], x[3]);
  printf("output [1, 3]: %g %g %g\n", y[0], y[1], y[2]);
  TVMArrayFree(out); TVMArrayFree(in); TVMModFree(ex); TVMModFree(lib);
  return 0;
}
