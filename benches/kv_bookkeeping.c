/* The paged KV cache's own bookkeeping per decode step, through the tvm-ffi C ABI of the
 * libraries named on the command line (ours, or TVM's libtvm_ffi.so and libtvm_runtime.so):
 *
 *   kv_bookkeeping LIBTVM_FFI [LIBTVM_RUNTIME]
 *
 * A cache of the LLM bench's configuration (6 layers, 8 query / 4 KV heads of 32, pages of 16,
 * 4 sequences, 16384 tokens) is made with placeholder kernels (no attention runs), 4 sequences
 * are prefilled with 64 tokens each, then `kv_state_begin_forward(kv, [0,1,2,3], [1,1,1,1])` and
 * `kv_state_end_forward(kv)` are timed over 2000 steps. Prints the best of 7 repeats, in ns per
 * step. The Shape arguments are made once (as an engine keeps them). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tvm/ffi/c_api.h>

typedef int (*GetGlobal)(const TVMFFIByteArray*, TVMFFIObjectHandle*);
typedef int (*Call)(TVMFFIObjectHandle, TVMFFIAny*, int32_t, TVMFFIAny*);
typedef int (*DecRef)(TVMFFIObjectHandle);
typedef int (*FromDLPack)(DLManagedTensorVersioned*, int32_t, int32_t, TVMFFIObjectHandle*);
static GetGlobal get_global;
static Call call;
static DecRef decref;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static TVMFFIAny i64(int64_t x) {
  TVMFFIAny v;
  memset(&v, 0, sizeof v);
  v.type_index = kTVMFFIInt;
  v.v_int64 = x;
  return v;
}
static TVMFFIAny obj(TVMFFIObjectHandle o) {
  TVMFFIAny v;
  memset(&v, 0, sizeof v);
  v.type_index = ((TVMFFIObject*)o)->type_index;
  v.v_obj = (TVMFFIObject*)o;
  return v;
}
static TVMFFIAny str(const char* s) {
  TVMFFIAny v;
  memset(&v, 0, sizeof v);
  v.type_index = kTVMFFIRawStr;
  v.v_c_str = s;
  return v;
}

static TVMFFIObjectHandle global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  if (get_global(&n, &f) != 0 || f == NULL) {
    fprintf(stderr, "no global %s\n", name);
    exit(1);
  }
  return f;
}

static TVMFFIAny must(TVMFFIObjectHandle f, TVMFFIAny* args, int n, const char* what) {
  TVMFFIAny out;
  memset(&out, 0, sizeof out);
  if (call(f, args, n, &out) != 0) {
    fprintf(stderr, "%s failed\n", what);
    exit(1);
  }
  return out;
}

static void no_delete(DLManagedTensorVersioned* self) { (void)self; }

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL || (argc > 2 && dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == NULL)) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  get_global = (GetGlobal)dlsym(lib, "TVMFFIFunctionGetGlobal");
  call = (Call)dlsym(lib, "TVMFFIFunctionCall");
  decref = (DecRef)dlsym(lib, "TVMFFIObjectDecRef");
  FromDLPack from_dlpack = (FromDLPack)dlsym(lib, "TVMFFITensorFromDLPackVersioned");
  if (!get_global || !call || !decref || !from_dlpack) return 1;
  TVMFFIObjectHandle shape = global("ffi.Shape"), array = global("ffi.Array");
  TVMFFIObjectHandle create = global("vm.builtin.paged_attention_kv_cache_create");
  TVMFFIObjectHandle add = global("vm.builtin.kv_state_add_sequence"), clear = global("vm.builtin.kv_state_clear");
  TVMFFIObjectHandle begin = global("vm.builtin.kv_state_begin_forward"), end = global("vm.builtin.kv_state_end_forward");

  /* The dtype/device prototype: a 0-d float32 tensor over a static float. */
  static float scalar;
  static int64_t no_shape[1];
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = 1;
  m.deleter = no_delete;
  m.dl_tensor.data = &scalar;
  m.dl_tensor.device.device_type = kDLCPU;
  m.dl_tensor.ndim = 0;
  m.dl_tensor.shape = no_shape;
  m.dl_tensor.dtype.code = kDLFloat;
  m.dl_tensor.dtype.bits = 32;
  m.dl_tensor.dtype.lanes = 1;
  TVMFFIObjectHandle init = NULL;
  if (from_dlpack(&m, 0, 1, &init) != 0) return 1;

  TVMFFIAny cfg_v[6] = {i64(4), i64(16384), i64(512), i64(16), i64(0), i64(1024)};
  TVMFFIAny cfg = must(shape, cfg_v, 6, "Shape"), layers_v[2] = {i64(0), i64(6)};
  TVMFFIAny layers = must(shape, layers_v, 2, "Shape");
  TVMFFIAny kinds_v[6] = {i64(0), i64(0), i64(0), i64(0), i64(0), i64(0)};
  TVMFFIAny kinds = must(shape, kinds_v, 6, "Shape");
  TVMFFIAny tir_v[2] = {str("tirx"), obj(shape)};
  TVMFFIAny tir = must(array, tir_v, 2, "Array"), empty = must(array, NULL, 0, "Array");
  TVMFFIAny merge_v[1] = {obj(shape)};
  TVMFFIAny merge = must(array, merge_v, 1, "Array");
  TVMFFIAny none;
  memset(&none, 0, sizeof none);
  TVMFFIAny f = obj(shape), b0;
  memset(&b0, 0, sizeof b0);
  b0.type_index = kTVMFFIBool;
  TVMFFIAny dbl1, dbl2;
  memset(&dbl1, 0, sizeof dbl1);
  dbl1.type_index = kTVMFFIFloat;
  dbl1.v_float64 = 1.0;
  dbl2 = dbl1;
  dbl2.v_float64 = 10000.0;
  TVMFFIAny args[28] = {cfg,  layers, i64(8), i64(4), i64(32), i64(32), kinds, b0,  i64(1), dbl1,
                        dbl2, none,   obj(init), f, none, tir,    tir,   tir,  tir,    tir,
                        tir,  tir,    empty, merge, f,    f,      f,     f};
  TVMFFIAny kv = must(create, args, 28, "paged_attention_kv_cache_create");

  TVMFFIAny ids_v[4] = {i64(0), i64(1), i64(2), i64(3)}, ones_v[4] = {i64(1), i64(1), i64(1), i64(1)};
  TVMFFIAny p64_v[4] = {i64(64), i64(64), i64(64), i64(64)};
  TVMFFIAny ids = must(shape, ids_v, 4, "Shape"), ones = must(shape, ones_v, 4, "Shape"),
            p64 = must(shape, p64_v, 4, "Shape");
  double best = 1e30;
  const int steps = 2000;
  for (int r = 0; r < 7; ++r) {
    must(clear, &kv, 1, "clear");
    for (int s = 0; s < 4; ++s) {
      TVMFFIAny a[2] = {kv, i64(s)};
      must(add, a, 2, "add_sequence");
    }
    TVMFFIAny pre[3] = {kv, ids, p64};
    must(begin, pre, 3, "begin_forward");
    must(end, &kv, 1, "end_forward");
    double t = now_ns();
    for (int k = 0; k < steps; ++k) {
      TVMFFIAny a[3] = {kv, ids, ones};
      must(begin, a, 3, "begin_forward");
      must(end, &kv, 1, "end_forward");
    }
    double dt = (now_ns() - t) / steps;
    if (dt < best) best = dt;
  }
  printf("%.1f\n", best);
  return 0;
}
