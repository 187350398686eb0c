/* Graph executor through the C API on models exported by TVM v0.8: the factory in one .so,
 * the split form (graph JSON + library + params), bad input, and executors of one module running
 * on several threads at once. Outputs are compared with the manifest's expected outputs. */
#include <pthread.h>
#include <stdint.h>
#include "test_util.h"

static const char* g_dir;

static TVMFunctionHandle get_fn(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(m, name, 0, &f) != 0) return NULL;
  return f;
}

/* Calls f(args...) and returns the status; the result goes to rv and rc. */
static int callf(TVMFunctionHandle f, TVMValue* v, int* c, int n, TVMValue* rv, int* rc) {
  TVMValue r; int k;
  return TVMFuncCall(f, v, c, n, rv ? rv : &r, rc ? rc : &k);
}

static TVMArrayHandle array_from(const Npy* a) {
  TVMArrayHandle h = NULL;
  if (TVMArrayAlloc(a->shape, a->ndim, kDLFloat, 32, 1, kDLCPU, 0, &h) != 0) return NULL;
  TVMArrayCopyFromBytes(h, a->data, a->n * 4);
  return h;
}

static TVMModuleHandle create_executor(TVMModuleHandle factory) {
  TVMFunctionHandle f = get_fn(factory, "default");
  if (f == NULL) return NULL;
  TVMValue v, rv; int c = kDLDevice, rc;
  v.v_device.device_type = kDLCPU; v.v_device.device_id = 0;
  int r = TVMFuncCall(f, &v, &c, 1, &rv, &rc);
  TVMFuncFree(f);
  return (r == 0 && rc == kTVMModuleHandle) ? rv.v_handle : NULL;
}

/* set_input("data", in); run; get_output(0) into out; returns the worst tolerance excess or -1. */
static double run_model(TVMModuleHandle ex, TVMArrayHandle in, const Npy* want, double rtol, double atol) {
  TVMFunctionHandle set_input = get_fn(ex, "set_input"), run = get_fn(ex, "run"), get_output = get_fn(ex, "get_output");
  double res = -1;
  if (!set_input || !run || !get_output) goto done;
  TVMValue v[2]; int c[2];
  v[0].v_str = "data"; c[0] = kTVMStr;
  v[1].v_handle = in; c[1] = kTVMNDArrayHandle;
  if (callf(set_input, v, c, 2, NULL, NULL) != 0) goto done;
  if (callf(run, NULL, NULL, 0, NULL, NULL) != 0) goto done;
  TVMValue rv; int rc;
  v[0].v_int64 = 0; c[0] = kTVMArgInt;
  if (callf(get_output, v, c, 1, &rv, &rc) != 0 || rc != kTVMNDArrayHandle) goto done;
  float* got = (float*)malloc(want->n * 4);
  if (TVMArrayCopyToBytes((TVMArrayHandle)rv.v_handle, got, want->n * 4) == 0)
    res = allclose_excess(got, want->data, want->n, rtol, atol);
  free(got);
  TVMArrayFree((TVMArrayHandle)rv.v_handle);
done:
  TVMFuncFree(set_input); TVMFuncFree(run); TVMFuncFree(get_output);
  return res;
}

static void test_model(const char* name, const char* out_name) {
  char path[4096];
  Npy in, want;
  snprintf(path, sizeof path, "%s/%s.input.data.npy", g_dir, name);
  EXPECT(load_npy(path, &in) == 0);
  snprintf(path, sizeof path, "%s/%s", g_dir, out_name);
  EXPECT(load_npy(path, &want) == 0);
  snprintf(path, sizeof path, "%s/%s.so", g_dir, name);
  TVMModuleHandle lib = NULL;
  OK(TVMModLoadFromFile(path, "", &lib));
  if (lib == NULL) return;
  TVMModuleHandle ex = create_executor(lib);
  EXPECT(ex != NULL);
  TVMArrayHandle a = array_from(&in);
  double excess = run_model(ex, a, &want, 1e-5, 1e-5);
  if (excess != 0) fprintf(stderr, "%s: excess %g\n", name, excess);
  EXPECT(excess == 0);
  /* The executor's functions, as Python's GraphModule fetches them. */
  const char* fns[] = {"set_input", "run", "get_output", "get_input", "get_num_outputs", "get_input_index",
                       "get_num_inputs", "load_params", "share_params"};
  for (int i = 0; i < 9; i++) {
    TVMFunctionHandle f = get_fn(ex, fns[i]);
    EXPECT(f != NULL);
    TVMFuncFree(f);
  }
  TVMFunctionHandle nout = get_fn(ex, "get_num_outputs");
  TVMValue rv; int rc;
  OK(callf(nout, NULL, NULL, 0, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 1);
  TVMFuncFree(nout);
  OK(TVMArrayFree(a)); OK(TVMModFree(ex)); OK(TVMModFree(lib));
  free(in.data); free(want.data);
}

static void test_split_mlp(void) {
  char path[4096];
  size_t jn = 0, pn = 0;
  snprintf(path, sizeof path, "%s/mlp.json", g_dir);
  unsigned char* json = read_file(path, &jn);
  snprintf(path, sizeof path, "%s/mlp.params", g_dir);
  unsigned char* params = read_file(path, &pn);
  EXPECT(json != NULL && params != NULL);
  if (!json || !params) return;
  json[jn] = 0;
  snprintf(path, sizeof path, "%s/mlp.lib.so", g_dir);
  TVMModuleHandle lib = NULL;
  OK(TVMModLoadFromFile(path, "", &lib));
  TVMValue v[4], rv; int c[4], rc;
  v[0].v_str = (const char*)json; c[0] = kTVMStr;
  v[1].v_handle = lib; c[1] = kTVMModuleHandle;
  v[2].v_int64 = kDLCPU; c[2] = kTVMArgInt;
  v[3].v_int64 = 0; c[3] = kTVMArgInt;
  OK(call_global("tvm.graph_executor.create", v, c, 4, &rv, &rc));
  TVMModuleHandle ex = rv.v_handle;
  TVMFunctionHandle lp = get_fn(ex, "load_params");
  TVMByteArray ba = {(const char*)params, pn};
  TVMValue pv; int pc = kTVMBytes;
  pv.v_handle = &ba;
  OK(callf(lp, &pv, &pc, 1, NULL, NULL));
  Npy in, want;
  snprintf(path, sizeof path, "%s/mlp.input.data.npy", g_dir);
  EXPECT(load_npy(path, &in) == 0);
  snprintf(path, sizeof path, "%s/mlp.output.0.npy", g_dir);
  EXPECT(load_npy(path, &want) == 0);
  TVMArrayHandle a = array_from(&in);
  EXPECT(run_model(ex, a, &want, 1e-5, 1e-5) == 0);

  /* share_params: a second executor holds the same weight arrays as the first. */
  OK(call_global("tvm.graph_executor.create", v, c, 4, &rv, &rc));
  TVMModuleHandle ex2 = rv.v_handle;
  TVMFunctionHandle sp = get_fn(ex2, "share_params");
  TVMValue sv[2]; int sc[2] = {kTVMModuleHandle, kTVMBytes};
  sv[0].v_handle = ex; sv[1].v_handle = &ba;
  OK(callf(sp, sv, sc, 2, NULL, NULL));
  EXPECT(run_model(ex2, a, &want, 1e-5, 1e-5) == 0);
  TVMFunctionHandle gi1 = get_fn(ex, "get_input"), gi2 = get_fn(ex2, "get_input"), nin = get_fn(ex, "get_num_inputs");
  OK(callf(nin, NULL, NULL, 0, &rv, &rc));
  int64_t ninputs = rv.v_int64, same = 0;
  for (int64_t i = 1; i < ninputs; i++) {
    TVMValue iv; int ic = kTVMArgInt; TVMValue r1, r2; int c1, c2;
    iv.v_int64 = i;
    OK(callf(gi1, &iv, &ic, 1, &r1, &c1));
    OK(callf(gi2, &iv, &ic, 1, &r2, &c2));
    if (((DLTensor*)r1.v_handle)->data == ((DLTensor*)r2.v_handle)->data) same++;
    TVMArrayFree((TVMArrayHandle)r1.v_handle); TVMArrayFree((TVMArrayHandle)r2.v_handle);
  }
  EXPECT(ninputs > 1 && same == ninputs - 1);
  TVMFuncFree(sp); TVMFuncFree(gi1); TVMFuncFree(gi2); TVMFuncFree(nin);
  OK(TVMModFree(ex2));

  /* Bad input: unknown input name, wrong shape, wrong dtype, params of another model. */
  TVMFunctionHandle si = get_fn(ex, "set_input");
  v[0].v_str = "no_such_input"; c[0] = kTVMStr;
  v[1].v_handle = a; c[1] = kTVMNDArrayHandle;
  ERR_HAS(callf(si, v, c, 2, NULL, NULL), "no_such_input");
  int64_t shape[1] = {3};
  TVMArrayHandle small = NULL;
  OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &small));
  v[0].v_str = "data"; v[1].v_handle = small;
  ERR_HAS(callf(si, v, c, 2, NULL, NULL), "data");
  TVMArrayHandle ints = NULL;
  OK(TVMArrayAlloc(in.shape, in.ndim, kDLInt, 32, 1, kDLCPU, 0, &ints));
  v[1].v_handle = ints;
  ERR_HAS(callf(si, v, c, 2, NULL, NULL), "dtype");
  /* A params file of another model: its names match no input. */
  TVMValue mv[2]; int mc[2];
  mv[0].v_str = "zzz"; mc[0] = kTVMStr;
  mv[1].v_handle = small; mc[1] = kTVMNDArrayHandle;
  OK(call_global("runtime.Map", mv, mc, 2, &rv, &rc));
  TVMObjectHandle pmap = rv.v_handle;
  mv[0].v_handle = pmap; mc[0] = kTVMObjectHandle;
  OK(call_global("runtime.SaveParams", mv, mc, 1, &rv, &rc));
  TVMByteArray* saved = (TVMByteArray*)rv.v_handle;
  unsigned char* other = (unsigned char*)malloc(saved->size);
  memcpy(other, saved->data, saved->size);
  TVMByteArray ob = {(const char*)other, saved->size};
  pv.v_handle = &ob;
  ERR_HAS(callf(lp, &pv, &pc, 1, NULL, NULL), "zzz");
  free(other);
  OK(TVMObjectFree(pmap));
  /* Truncated params are an error, not a crash. */
  TVMByteArray cut = {(const char*)params, pn / 3};
  pv.v_handle = &cut;
  ERR(callf(lp, &pv, &pc, 1, NULL, NULL));
  /* Graph JSON with a missing field / an op the library lacks. */
  v[0].v_str = "{\"nodes\": [], \"heads\": []}"; c[0] = kTVMStr;
  v[1].v_handle = lib; c[1] = kTVMModuleHandle;
  v[2].v_int64 = kDLCPU; c[2] = kTVMArgInt;
  v[3].v_int64 = 0; c[3] = kTVMArgInt;
  ERR_HAS(call_global("tvm.graph_executor.create", v, c, 4, &rv, &rc), "arg_nodes");
  char* renamed = strdup((const char*)json);
  char* fn = strstr(renamed, "\"func_name\": \"");
  if (fn != NULL) { fn += 14; fn[0] = 'X'; fn[1] = 'Y'; }
  v[0].v_str = renamed; v[1].v_handle = lib; c[1] = kTVMModuleHandle;
  ERR_HAS(call_global("tvm.graph_executor.create", v, c, 4, &rv, &rc), "no such function in module: XY");
  free(renamed);
  TVMFuncFree(si); TVMFuncFree(lp);
  OK(TVMArrayFree(small)); OK(TVMArrayFree(ints)); OK(TVMArrayFree(a));
  OK(TVMModFree(ex)); OK(TVMModFree(lib));
  free(json); free(params); free(in.data); free(want.data);
}

typedef struct {
  TVMModuleHandle factory;
  TVMArrayHandle input;
  const Npy* want;
  int failures;
} ThreadArg;

static void* worker(void* p) {
  ThreadArg* t = (ThreadArg*)p;
  for (int i = 0; i < 5; i++) {
    TVMModuleHandle ex = create_executor(t->factory);
    if (ex == NULL || run_model(ex, t->input, t->want, 1e-5, 1e-5) != 0) t->failures++;
    if (ex) TVMModFree(ex);
  }
  return NULL;
}

static void test_concurrent(void) {
  char path[4096];
  Npy in, want;
  snprintf(path, sizeof path, "%s/mlp2.input.data.npy", g_dir);
  EXPECT(load_npy(path, &in) == 0);
  snprintf(path, sizeof path, "%s/mlp2.output.0.npy", g_dir);
  EXPECT(load_npy(path, &want) == 0);
  snprintf(path, sizeof path, "%s/mlp2.so", g_dir);
  TVMModuleHandle lib = NULL;
  OK(TVMModLoadFromFile(path, "", &lib));
  if (lib == NULL) return;
  TVMArrayHandle a = array_from(&in);
  pthread_t th[4];
  ThreadArg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].factory = lib; args[i].input = a; args[i].want = &want; args[i].failures = 0;
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    EXPECT(args[i].failures == 0);
  }
  OK(TVMArrayFree(a)); OK(TVMModFree(lib));
  free(in.data); free(want.data);
}

int main(void) {
  g_dir = fixtures_dir();
  test_model("mlp", "mlp.output.0.npy");
  test_model("mlp2", "mlp2.output.0.npy");
  test_model("mobilenet", "mobilenet.output.0.npy");
  test_model("resnet18", "resnet18.output.0.npy");
  test_split_mlp();
  test_concurrent();
  return finish();
}
