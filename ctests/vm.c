/* The Relay VM through the C API, as a C program (or TVM's Python vm.py) drives it, on the VM
 * executables exported by TVM v0.8 (../shared/fixtures-vm): every run of every fixture with the
 * naive and the pooled allocator, results flattened depth first (ADTs through runtime.GetADT*)
 * and compared with TVM's outputs; the split form (save + get_lib + runtime.Load_Executable);
 * damaged executables refused with an error; 4 threads x 4 VMs on one executable. */
#include <pthread.h>
#include <stdint.h>
#include "test_util.h"

static const char* g_dir;

/* A .npy file of float32 or int32 (C order, version 1). */
typedef struct {
  int ndim;
  int64_t shape[8];
  int is_int;
  unsigned char* data;
  size_t nbytes;
} Arr;

static int read_arr(const char* path, Arr* out) {
  size_t size = 0;
  unsigned char* buf = read_file(path, &size);
  memset(out, 0, sizeof *out);
  if (buf == NULL) return -1;
  if (size < 10) { free(buf); return -1; }
  size_t hl = (size_t)buf[8] | ((size_t)buf[9] << 8);
  char* h = (char*)calloc(hl + 1, 1);
  memcpy(h, buf + 10, hl);
  char* s = strstr(h, "'shape': (");
  int f4 = strstr(h, "'<f4'") != NULL, i4 = strstr(h, "'<i4'") != NULL;
  if (s == NULL || (!f4 && !i4)) { free(h); free(buf); return -1; }
  out->is_int = i4;
  s += 10;
  size_t n = 1;
  while (*s && *s != ')' && out->ndim < 8) {
    long v = strtol(s, &s, 10);
    out->shape[out->ndim++] = v;
    n *= (size_t)v;
    while (*s == ',' || *s == ' ') s++;
  }
  out->nbytes = n * 4;
  if (10 + hl + out->nbytes > size) { free(h); free(buf); return -1; }
  out->data = (unsigned char*)malloc(out->nbytes + 1);
  memcpy(out->data, buf + 10 + hl, out->nbytes);
  free(h);
  free(buf);
  return 0;
}

static int file_exists(const char* p) {
  FILE* f = fopen(p, "rb");
  if (f) fclose(f);
  return f != NULL;
}

static TVMFunctionHandle fn(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(m, name, 0, &f) != 0) return NULL;
  return f;
}

static int callf(TVMFunctionHandle f, TVMValue* v, int* c, int n, TVMValue* rv, int* rc) {
  TVMValue r; int k;
  return TVMFuncCall(f, v, c, n, rv ? rv : &r, rc ? rc : &k);
}

/* vm = exec["vm_load_executable"](); vm["init"](1, 0, alloc) */
static TVMModuleHandle make_vm(TVMModuleHandle exec, int64_t alloc) {
  TVMFunctionHandle f = fn(exec, "vm_load_executable");
  TVMValue rv; int rc;
  if (f == NULL || callf(f, NULL, NULL, 0, &rv, &rc) != 0 || rc != kTVMModuleHandle) { TVMFuncFree(f); return NULL; }
  TVMFuncFree(f);
  TVMModuleHandle vm = rv.v_handle;
  TVMFunctionHandle init = fn(vm, "init");
  TVMValue v[3]; int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt};
  v[0].v_int64 = kDLCPU; v[1].v_int64 = 0; v[2].v_int64 = alloc;
  int r = callf(init, v, c, 3, NULL, NULL);
  TVMFuncFree(init);
  if (r != 0) { TVMModFree(vm); return NULL; }
  return vm;
}

/* Compares one output tensor (code 13, consumed) with the expected array. */
static int same_tensor(TVMArrayHandle t, const Arr* want) {
  int ok = t->ndim == want->ndim && t->dtype.bits == 32 && t->dtype.lanes == 1 &&
           t->dtype.code == (want->is_int ? kDLInt : kDLFloat);
  for (int i = 0; ok && i < t->ndim; i++) ok = t->shape[i] == want->shape[i];
  if (ok) {
    unsigned char* got = (unsigned char*)malloc(want->nbytes + 1);
    ok = TVMArrayCopyToBytes(t, got, want->nbytes) == 0;
    if (ok && want->is_int) ok = memcmp(got, want->data, want->nbytes) == 0;
    if (ok && !want->is_int) ok = allclose_excess((float*)got, (float*)want->data, want->nbytes / 4, 1e-5, 1e-5) == 0;
    free(got);
  }
  TVMArrayFree(t);
  return ok;
}

/* Flattens a result (code 13 or an ADT object, consumed) depth first, comparing each tensor
 * with wants[*k]; returns the number of mismatches. */
static int check_result(TVMValue rv, int rc, Arr* wants, int nwant, int* k) {
  if (rc == kTVMNDArrayHandle) {
    if (*k >= nwant) { TVMArrayFree((TVMArrayHandle)rv.v_handle); return 1; }
    return same_tensor((TVMArrayHandle)rv.v_handle, &wants[(*k)++]) ? 0 : 1;
  }
  if (rc != kTVMObjectHandle) return 1;
  TVMValue a[2], r; int c[2] = {kTVMObjectHandle, kTVMArgInt}, k2, bad = 0;
  a[0].v_handle = rv.v_handle;
  if (call_global("runtime.GetADTSize", a, c, 1, &r, &k2) != 0) return 1;
  int64_t n = r.v_int64;
  for (int64_t i = 0; i < n; i++) {
    a[1].v_int64 = i;
    if (call_global("runtime.GetADTFields", a, c, 2, &r, &k2) != 0) { bad++; continue; }
    bad += check_result(r, k2, wants, nwant, k);
  }
  TVMObjectFree(rv.v_handle);
  return bad;
}

/* Runs every run of fixture `name` on `vm`; returns the number of failed runs. */
static int run_fixture(TVMModuleHandle vm, const char* name) {
  int failed = 0;
  TVMFunctionHandle set_input = fn(vm, "set_input"), invoke = fn(vm, "invoke");
  for (int run = 0;; run++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.run%d.input0.npy", g_dir, name, run);
    if (!file_exists(path)) break;
    TVMValue v[8]; int c[8];
    TVMArrayHandle in[7] = {0};
    int nin = 0;
    v[0].v_str = "main"; c[0] = kTVMStr;
    for (; nin < 7; nin++) {
      Arr a;
      snprintf(path, sizeof path, "%s/%s.run%d.input%d.npy", g_dir, name, run, nin);
      if (read_arr(path, &a) != 0) break;
      TVMArrayAlloc(a.shape, a.ndim, kDLFloat, 32, 1, kDLCPU, 0, &in[nin]);
      TVMArrayCopyFromBytes(in[nin], a.data, a.nbytes);
      free(a.data);
      v[nin + 1].v_handle = in[nin]; c[nin + 1] = kTVMNDArrayHandle;
    }
    Arr wants[8];
    int nwant = 0;
    for (; nwant < 8; nwant++) {
      snprintf(path, sizeof path, "%s/%s.run%d.output%d.npy", g_dir, name, run, nwant);
      if (read_arr(path, &wants[nwant]) != 0) break;
    }
    TVMValue rv; int rc, k = 0;
    int ok = callf(set_input, v, c, nin + 1, NULL, NULL) == 0;
    ok = ok && callf(invoke, v, c, 1, &rv, &rc) == 0;
    ok = ok && check_result(rv, rc, wants, nwant, &k) == 0 && k == nwant;
    if (!ok) {
      fprintf(stderr, "%s run %d failed (%s)\n", name, run, TVMGetLastError());
      failed++;
    }
    for (int i = 0; i < nin; i++) TVMArrayFree(in[i]);
    for (int i = 0; i < nwant; i++) free(wants[i].data);
  }
  TVMFuncFree(set_input); TVMFuncFree(invoke);
  return failed;
}

static const char* kFixtures[] = {"vm_mlp", "vm_dyn_batch", "vm_if", "vm_argwhere", "vm_tuple"};

static void test_fixtures(void) {
  for (int i = 0; i < 5; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.so", g_dir, kFixtures[i]);
    TVMModuleHandle exec = NULL;
    OK(TVMModLoadFromFile(path, "", &exec));
    if (exec == NULL) continue;
    for (int64_t alloc = 1; alloc <= 2; alloc++) {
      TVMModuleHandle vm = make_vm(exec, alloc);
      EXPECT(vm != NULL);
      if (vm == NULL) continue;
      EXPECT(run_fixture(vm, kFixtures[i]) == 0);
      EXPECT(run_fixture(vm, kFixtures[i]) == 0);
      OK(TVMModFree(vm));
    }
    OK(TVMModFree(exec));
  }
}

static void test_split_form_and_damage(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/vm_if.so", g_dir);
  TVMModuleHandle exec = NULL;
  OK(TVMModLoadFromFile(path, "", &exec));
  if (exec == NULL) return;
  TVMFunctionHandle save = fn(exec, "save"), get_lib = fn(exec, "get_lib");
  TVMValue rv; int rc;
  OK(callf(save, NULL, NULL, 0, &rv, &rc));
  EXPECT(rc == kTVMBytes);
  TVMByteArray* b = (TVMByteArray*)rv.v_handle;
  size_t n = b->size;
  char* code = (char*)malloc(n);
  memcpy(code, b->data, n);
  OK(callf(get_lib, NULL, NULL, 0, &rv, &rc));
  EXPECT(rc == kTVMModuleHandle);
  TVMModuleHandle lib = rv.v_handle;
  TVMByteArray ba = {code, n};
  TVMValue v[2]; int c[2] = {kTVMBytes, kTVMModuleHandle};
  v[0].v_handle = &ba; v[1].v_handle = lib;
  OK(call_global("runtime.Load_Executable", v, c, 2, &rv, &rc));
  TVMModuleHandle split = rv.v_handle;
  TVMModuleHandle vm = make_vm(split, 2);
  EXPECT(vm != NULL && run_fixture(vm, "vm_if") == 0);
  if (vm) OK(TVMModFree(vm));
  OK(TVMModFree(split));
  /* Damage: magic, version, every truncation, a flipped instruction hash. */
  code[0] ^= 1;
  ERR_HAS(call_global("runtime.Load_Executable", v, c, 2, &rv, &rc), "magic");
  code[0] ^= 1;
  code[16] = '9';
  ERR_HAS(call_global("runtime.Load_Executable", v, c, 2, &rv, &rc), "version");
  code[16] = '0';
  for (size_t cut = 0; cut < n; cut += 7) {
    ba.size = cut;
    ERR(call_global("runtime.Load_Executable", v, c, 2, &rv, &rc));
  }
  ba.size = n;
  code[n - 24] ^= 4;
  ERR_HAS(call_global("runtime.Load_Executable", v, c, 2, &rv, &rc), "hash");
  code[n - 24] ^= 4;
  OK(call_global("runtime.Load_Executable", v, c, 2, &rv, &rc));
  OK(TVMModFree(rv.v_handle));
  free(code);
  /* Names that are not functions of the module are errors. */
  TVMFunctionHandle none = NULL;
  ERR_HAS(TVMModGetFunction(exec, "nope", 0, &none), "Unknown packed function: nope");
  TVMFuncFree(save); TVMFuncFree(get_lib);
  OK(TVMModFree(lib));
  OK(TVMModFree(exec));
}

static TVMModuleHandle g_exec;
static int g_thread_failures;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void* worker(void* arg) {
  (void)arg;
  TVMModuleHandle vms[4];
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    vms[i] = make_vm(g_exec, 1 + (i % 2));
    if (vms[i] == NULL) bad++;
  }
  for (int round = 0; round < 3 && bad == 0; round++)
    for (int i = 0; i < 4; i++) bad += run_fixture(vms[i], "vm_dyn_batch");
  for (int i = 0; i < 4; i++)
    if (vms[i]) TVMModFree(vms[i]);
  pthread_mutex_lock(&g_mu);
  g_thread_failures += bad;
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

static void test_threads(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/vm_dyn_batch.so", g_dir);
  OK(TVMModLoadFromFile(path, "", &g_exec));
  if (g_exec == NULL) return;
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  EXPECT(g_thread_failures == 0);
  OK(TVMModFree(g_exec));
}

int main(void) {
  g_dir = getenv("TVM_VM_FIXTURES");
  if (g_dir == NULL) g_dir = "../shared/fixtures-vm";
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/manifest.json", g_dir);
  if (!file_exists(probe)) {
    const char* ci = getenv("CI");
    if (ci != NULL && strcmp(ci, "true") == 0) {
      fprintf(stderr, "FAIL: VM fixtures missing at %s (required under CI)\n", g_dir);
      return 1;
    }
    printf("SKIP: VM fixtures not found at %s\n", g_dir);
    return 77;
  }
  test_fixtures();
  test_split_form_and_damage();
  test_threads();
  return finish();
}
