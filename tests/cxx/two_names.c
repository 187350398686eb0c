/* A process that loads the library under both of its names holds one runtime: loads FIRST,
 * then SECOND (each with dlopen by path, RTLD_GLOBAL, as TVM's Python loads libtvm_ffi.so and
 * then libtvm_runtime.so), registers a global function through the first and finds it through
 * the second, and checks that both handles resolve the C API to the same code.
 *   two_names FIRST.so SECOND.so */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tvm/ffi/c_api.h>

typedef int (*create_fn)(void*, int32_t (*)(void*, const TVMFFIAny*, int32_t, TVMFFIAny*), void (*)(void*), void**);
typedef int (*set_global_fn)(const TVMFFIByteArray*, void*, int);
typedef int (*get_global_fn)(const TVMFFIByteArray*, void**);
typedef int (*dec_ref_fn)(void*);

static int32_t answer(void* h, const TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
  (void)h, (void)args, (void)n;
  out->type_index = kTVMFFIInt;
  out->v_int64 = 42;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: two_names FIRST.so SECOND.so\n");
    return 2;
  }
  void* h1 = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  void* h2 = h1 ? dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) : NULL;
  if (!h1 || !h2) {
    fprintf(stderr, "two_names: %s\n", dlerror());
    return 1;
  }
  const char* names[] = {"TVMFFIFunctionCall", "TVMFFIFunctionGetGlobal", "TVMFuncCall", "TVMArrayAlloc"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (dlsym(h1, names[i]) != dlsym(h2, names[i]) || !dlsym(h1, names[i])) {
      fprintf(stderr, "two_names: %s resolves to two copies (%p, %p)\n", names[i], dlsym(h1, names[i]), dlsym(h2, names[i]));
      return 1;
    }
  }
  void* f = NULL;
  if (((create_fn)dlsym(h1, "TVMFFIFunctionCreate"))(NULL, answer, NULL, &f) != 0) return 1;
  const char* name = "two_names.answer";
  TVMFFIByteArray n = {name, strlen(name)};
  if (((set_global_fn)dlsym(h1, "TVMFFIFunctionSetGlobal"))(&n, f, 1) != 0) return 1;
  void* g = NULL;
  if (((get_global_fn)dlsym(h2, "TVMFFIFunctionGetGlobal"))(&n, &g) != 0 || g != f) {
    fprintf(stderr, "two_names: a global registered through %s is not seen through %s\n", argv[1], argv[2]);
    return 1;
  }
  ((dec_ref_fn)dlsym(h2, "TVMFFIObjectDecRef"))(g);
  ((dec_ref_fn)dlsym(h1, "TVMFFIObjectDecRef"))(f);
  printf("two_names: one runtime (%s, then %s)\n", argv[1], argv[2]);
  return 0;
}
