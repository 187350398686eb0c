/* TVMFFIFunctionCall into a C TVMFFISafeCallType callback, through the library named on the
 * command line (dlopen'ed alone: ours or the wheel's libtvm_ffi.so). Prints the best of 5
 * repeats of 10^6 calls, in ns per call. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <tvm/ffi/c_api.h>

static int cb(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = n ? args[0].v_int64 + 1 : 0;
  return 0;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*create)(void*, TVMFFISafeCallType, void (*)(void*), TVMFFIObjectHandle*) =
      (int (*)(void*, TVMFFISafeCallType, void (*)(void*), TVMFFIObjectHandle*))dlsym(lib, "TVMFFIFunctionCreate");
  int (*call)(TVMFFIObjectHandle, TVMFFIAny*, int32_t, TVMFFIAny*) =
      (int (*)(TVMFFIObjectHandle, TVMFFIAny*, int32_t, TVMFFIAny*))dlsym(lib, "TVMFFIFunctionCall");
  int (*decref)(TVMFFIObjectHandle) = (int (*)(TVMFFIObjectHandle))dlsym(lib, "TVMFFIObjectDecRef");
  TVMFFIObjectHandle f = NULL;
  if (!create || !call || !decref || create(NULL, cb, NULL, &f) != 0) return 1;
  TVMFFIAny arg = {.type_index = kTVMFFIInt, .v_int64 = 1};
  TVMFFIAny out;
  double best = 1e30;
  const int n = 1000000;
  for (int r = 0; r < 5; ++r) {
    double t0 = now_ns();
    for (int i = 0; i < n; ++i) {
      out.type_index = kTVMFFINone;
      if (call(f, &arg, 1, &out) != 0) return 1;
    }
    double dt = (now_ns() - t0) / n;
    if (dt < best) best = dt;
  }
  decref(f);
  printf("%.2f\n", best);
  return out.v_int64 == 2 ? 0 : 1;
}
