/* llm_generate.c: greedy text generation with an LLM as MLC-LLM compiles it (a TVM v0.27 Relax
 * export with the paged KV cache, weights in a tensor cache), through the tvm-ffi C ABI alone
 * (tvm/ffi/c_api.h), the way MLC's engine drives a model library:
 *
 *   llm_generate MODEL_DIR [--steps N] [--expect]
 *
 * MODEL_DIR holds lib.so, params/ (tensor-cache.json and shards), config.json ("hidden",
 * "param_names") and expected.json ("prompts": token ids, "create_tir_paged_kv_cache": the cache
 * configuration, "greedy": the tokens TVM's runtime generated). For each prompt, one sequence is
 * added to the cache and prefilled; then all sequences decode together (one `batch_decode` per
 * step) for N steps (default: as many as expected.json has). The tokens are printed one line per
 * sequence; with --expect they must equal expected.json's "greedy" (exit 1 otherwise).
 *
 * The calls, each a global function or a function of the VM module:
 *
 *   vm     = ffi.ModuleLoadFromFile("lib.so")["vm_load_executable"]();  vm["vm_initialization"](1, 0, 2)
 *   vm.builtin.tensor_cache.load("params", 1, 0)
 *   params = vm.builtin.param_array_from_cache_by_name(config["param_names"])
 *   kv     = vm["create_tir_paged_kv_cache"](Shape([2]), Shape([256]), ...)   the cache config
 *   for sequence i:  vm.builtin.kv_state_add_sequence(kv, i)
 *                    vm.builtin.kv_state_begin_forward(kv, Shape([i]), Shape([len]))
 *                    (logits, kv) = vm["prefill"](vm["embed"](ids, params) as [1, len, hidden], kv, params)
 *                    vm.builtin.kv_state_end_forward(kv)
 *   each step:       vm.builtin.kv_state_begin_forward(kv, Shape([0, 1, ...]), Shape([1, 1, ...]))
 *                    (logits, kv) = vm["batch_decode"](embeddings [b, 1, hidden], kv, params) ...
 *
 * The ownership rules of relax_vm.c apply (new references from lookups and results, borrowed
 * arguments, errors taken with TVMFFIErrorMoveFromRaised). JSON is read with the runtime's own
 * ffi.json.Parse, its maps and arrays with ffi.MapGetItem / ffi.ArrayGetItem / ffi.ArraySize.
 *
 * Build (scripts/test-llm-c.sh):
 *   cc -Wall -Werror -std=c11 -Iinclude examples/llm_generate.c -o llm_generate \
 *      -Ltarget/release -ltvm_runtime
 */
#include <tvm/ffi/c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS 16
#define MAX_TOKENS 1024

static void report(int rc, const char* what) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    fprintf(stderr, "error: %s failed (return code %d)\n", what, rc);
    return;
  }
  const TVMFFIErrorCell* c = (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
  fprintf(stderr, "error: %s: %.*s: %.*s\n", what, (int)c->kind.size, c->kind.data, (int)c->message.size,
          c->message.data);
  TVMFFIObjectDecRef(err);
}

static TVMFFIAny none(void) {
  TVMFFIAny v;
  memset(&v, 0, sizeof v);
  return v;
}
static TVMFFIAny i64(int64_t x) {
  TVMFFIAny v = none();
  v.type_index = kTVMFFIInt;
  v.v_int64 = x;
  return v;
}
static TVMFFIAny str(const char* s) {
  TVMFFIAny v = none();
  v.type_index = kTVMFFIRawStr;
  v.v_c_str = s;
  return v;
}
static TVMFFIAny obj(void* o) {
  TVMFFIAny v = none();
  v.type_index = ((TVMFFIObject*)o)->type_index;
  v.v_obj = (TVMFFIObject*)o;
  return v;
}
static void release(TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin && v->v_obj != NULL) TVMFFIObjectDecRef(v->v_obj);
  *v = none();
}

/* Calls f(args) into *out (owned; None on failure). */
static int call(void* f, TVMFFIAny* args, int n, TVMFFIAny* out, const char* what) {
  *out = none();
  int rc = TVMFFIFunctionCall(f, args, n, out);
  if (rc != 0) {
    report(rc, what);
    *out = none();
    return -1;
  }
  return 0;
}

static void* global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  void* f = NULL;
  if (TVMFFIFunctionGetGlobal(&n, &f) != 0 || f == NULL) {
    fprintf(stderr, "error: no global function %s\n", name);
    return NULL;
  }
  return f;
}

/* The globals, looked up once. */
static void *g_load, *g_getf, *g_json, *g_map_get, *g_arr_get, *g_arr_size, *g_shape, *g_cache_load,
    *g_params, *g_add, *g_begin, *g_end;

static int lookup_globals(void) {
  struct {
    void** slot;
    const char* name;
  } all[] = {{&g_load, "ffi.ModuleLoadFromFile"},
             {&g_getf, "ffi.ModuleGetFunction"},
             {&g_json, "ffi.json.Parse"},
             {&g_map_get, "ffi.MapGetItem"},
             {&g_arr_get, "ffi.ArrayGetItem"},
             {&g_arr_size, "ffi.ArraySize"},
             {&g_shape, "ffi.Shape"},
             {&g_cache_load, "vm.builtin.tensor_cache.load"},
             {&g_params, "vm.builtin.param_array_from_cache_by_name"},
             {&g_add, "vm.builtin.kv_state_add_sequence"},
             {&g_begin, "vm.builtin.kv_state_begin_forward"},
             {&g_end, "vm.builtin.kv_state_end_forward"}};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    if ((*all[i].slot = global(all[i].name)) == NULL) return -1;
  }
  return 0;
}

static void release_globals(void) {
  void* all[] = {g_load, g_getf, g_json, g_map_get, g_arr_get, g_arr_size, g_shape, g_cache_load, g_params,
                 g_add, g_begin, g_end};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    if (all[i] != NULL) TVMFFIObjectDecRef(all[i]);
  }
}

/* A file's contents, NUL-terminated (NULL on failure). */
static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "error: cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "error: cannot read %s\n", path);
    free(buf);
    fclose(f);
    return NULL;
  }
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* ffi.json.Parse of a file into *out. */
static int parse_json(const char* path, TVMFFIAny* out) {
  char* text = read_file(path);
  if (text == NULL) return -1;
  TVMFFIAny a = str(text);
  int rc = call(g_json, &a, 1, out, path);
  free(text);
  return rc;
}

/* map[key] into *out. */
static int map_get(TVMFFIAny* map, const char* key, TVMFFIAny* out) {
  TVMFFIAny a[2] = {*map, str(key)};
  return call(g_map_get, a, 2, out, key);
}

/* The length of an array, or -1. */
static int64_t arr_size(TVMFFIAny* arr) {
  TVMFFIAny out;
  if (call(g_arr_size, arr, 1, &out, "ffi.ArraySize") != 0) return -1;
  return out.v_int64;
}

/* arr[i] into *out. */
static int arr_get(TVMFFIAny* arr, int64_t i, TVMFFIAny* out) {
  TVMFFIAny a[2] = {*arr, i64(i)};
  return call(g_arr_get, a, 2, out, "ffi.ArrayGetItem");
}

/* An int array (JSON list of numbers) into v (at most cap values); its length, or -1. */
static int64_t int_list(TVMFFIAny* arr, int64_t* v, int64_t cap) {
  int64_t n = arr_size(arr);
  if (n < 0 || n > cap) return -1;
  for (int64_t i = 0; i < n; ++i) {
    TVMFFIAny x;
    if (arr_get(arr, i, &x) != 0 || x.type_index != kTVMFFIInt) return -1;
    v[i] = x.v_int64;
  }
  return n;
}

/* Shape(values) into *out. */
static int make_shape(const int64_t* v, int n, TVMFFIAny* out) {
  TVMFFIAny a[MAX_TOKENS];
  for (int i = 0; i < n; ++i) a[i] = i64(v[i]);
  return call(g_shape, a, n, out, "ffi.Shape");
}

/* A host tensor holding a copy of `data` (`bytes` long): an ffi.Tensor adopting a malloc'ed
 * block through DLPack (the tensor's deleter frees the block once its last reference goes). */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[4];
} HostTensor;

static void host_deleter(DLManagedTensorVersioned* self) {
  free(self->dl_tensor.data);
  free(self->manager_ctx);
}

static int host_tensor(const int64_t* shape, int ndim, DLDataType dt, const void* data, size_t bytes, TVMFFIAny* out) {
  HostTensor* h = calloc(1, sizeof *h);
  void* buf = h != NULL ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
  if (buf == NULL) {
    fprintf(stderr, "error: out of memory\n");
    free(h);
    return -1;
  }
  memcpy(buf, data, bytes);
  memcpy(h->shape, shape, sizeof(int64_t) * (size_t)ndim);
  h->managed.version.major = 1;
  h->managed.manager_ctx = h;
  h->managed.deleter = host_deleter;
  DLTensor* t = &h->managed.dl_tensor;
  t->data = buf;
  t->device.device_type = kDLCPU;
  t->ndim = ndim;
  t->dtype = dt;
  t->shape = h->shape;
  void* tensor = NULL;
  int rc = TVMFFITensorFromDLPackVersioned(&h->managed, 64, 1, &tensor);
  if (rc != 0) {
    report(rc, "TVMFFITensorFromDLPackVersioned");
    host_deleter(&h->managed); /* not adopted: still ours */
    return -1;
  }
  *out = obj(tensor);
  return 0;
}

static const DLTensor* dl(TVMFFIAny* t) { return (const DLTensor*)((char*)t->v_obj + sizeof(TVMFFIObject)); }
static const float* f32(TVMFFIAny* t) { return (const float*)((char*)dl(t)->data + dl(t)->byte_offset); }

typedef struct {
  void *embed, *prefill, *batch_decode;
  TVMFFIAny params, kv;
  int64_t hidden;
} Model;

/* vm["embed"](ids) as a [rows, cols, hidden] tensor into *out. */
static int embed(Model* m, const int64_t* ids, int n, int64_t rows, int64_t cols, TVMFFIAny* out) {
  int32_t buf[MAX_TOKENS];
  for (int i = 0; i < n; ++i) buf[i] = (int32_t)ids[i];
  int64_t shape[1] = {n};
  DLDataType i32 = {kDLInt, 32, 1}, fp = {kDLFloat, 32, 1};
  TVMFFIAny tok, e;
  if (host_tensor(shape, 1, i32, buf, sizeof(int32_t) * (size_t)n, &tok) != 0) return -1;
  TVMFFIAny a[2] = {tok, m->params};
  int rc = call(m->embed, a, 2, &e, "embed");
  release(&tok);
  if (rc != 0) return -1;
  int64_t s3[3] = {rows, cols, m->hidden};
  rc = host_tensor(s3, 3, fp, f32(&e), sizeof(float) * (size_t)(n * m->hidden), out);
  release(&e);
  return rc;
}

/* Runs f(embeddings, kv, params) -> (logits, kv) under begin/end_forward; the argmax of each
 * of the `b` rows of logits into next[]. */
static int forward(Model* m, void* f, const char* what, const int64_t* seqs, const int64_t* lens, int b,
                   TVMFFIAny* input, int64_t* next) {
  TVMFFIAny ids, ls, r, logits, item;
  if (make_shape(seqs, b, &ids) != 0 || make_shape(lens, b, &ls) != 0) return -1;
  TVMFFIAny bargs[3] = {m->kv, ids, ls};
  int rc = call(g_begin, bargs, 3, &r, "vm.builtin.kv_state_begin_forward");
  release(&ids);
  release(&ls);
  if (rc != 0) return -1;
  TVMFFIAny a[3] = {*input, m->kv, m->params};
  if (call(f, a, 3, &r, what) != 0) return -1;
  /* (logits, kv): the cache is the same object, returned again. */
  if (arr_get(&r, 0, &logits) != 0) {
    release(&r);
    return -1;
  }
  release(&r);
  if (call(g_end, &m->kv, 1, &item, "vm.builtin.kv_state_end_forward") != 0) {
    release(&logits);
    return -1;
  }
  const DLTensor* d = dl(&logits);
  int64_t vocab = d->shape[d->ndim - 1];
  const float* x = f32(&logits);
  for (int k = 0; k < b; ++k) {
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v) {
      if (x[k * vocab + v] > x[k * vocab + best]) best = v;
    }
    next[k] = best;
  }
  release(&logits);
  return 0;
}

static void* vm_function(TVMFFIAny* vm, const char* name) {
  TVMFFIAny a[3] = {*vm, str(name), i64(1)}, out;
  if (call(g_getf, a, 3, &out, name) != 0) return NULL;
  if (out.type_index != kTVMFFIFunction) {
    fprintf(stderr, "error: the model has no function %s\n", name);
    release(&out);
    return NULL;
  }
  return out.v_obj;
}

static int run(const char* dir, int steps, int expect) {
  char path[4096];
  TVMFFIAny cfg = none(), exp = none(), exec = none(), vm = none(), r = none(), names = none(), prompts = none();
  Model m;
  memset(&m, 0, sizeof m);
  int status = 1;
  int64_t tokens[MAX_SEQS][MAX_TOKENS], ntok[MAX_SEQS] = {0}, last[MAX_SEQS], seqs[MAX_SEQS], ones[MAX_SEQS];
  int64_t nseq = 0;
  void *load_exec = NULL, *init = NULL, *create = NULL;

  snprintf(path, sizeof path, "%s/config.json", dir);
  if (parse_json(path, &cfg) != 0) goto done;
  snprintf(path, sizeof path, "%s/expected.json", dir);
  if (parse_json(path, &exp) != 0) goto done;
  if (map_get(&cfg, "hidden", &r) != 0 || r.type_index != kTVMFFIInt) goto done;
  m.hidden = r.v_int64;
  snprintf(path, sizeof path, "%s/lib.so", dir);
  TVMFFIAny p = str(path);
  if (call(g_load, &p, 1, &exec, "ffi.ModuleLoadFromFile") != 0) goto done;
  if ((load_exec = vm_function(&exec, "vm_load_executable")) == NULL) goto done;
  if (call(load_exec, NULL, 0, &vm, "vm_load_executable") != 0) goto done;
  if ((init = vm_function(&vm, "vm_initialization")) == NULL) goto done;
  TVMFFIAny ia[3] = {i64(kDLCPU), i64(0), i64(2)};
  if (call(init, ia, 3, &r, "vm_initialization") != 0) goto done;
  if ((m.embed = vm_function(&vm, "embed")) == NULL || (m.prefill = vm_function(&vm, "prefill")) == NULL ||
      (m.batch_decode = vm_function(&vm, "batch_decode")) == NULL ||
      (create = vm_function(&vm, "create_tir_paged_kv_cache")) == NULL)
    goto done;

  snprintf(path, sizeof path, "%s/params", dir);
  TVMFFIAny la[3] = {str(path), i64(kDLCPU), i64(0)};
  if (call(g_cache_load, la, 3, &r, "vm.builtin.tensor_cache.load") != 0) goto done;
  if (map_get(&cfg, "param_names", &names) != 0) goto done;
  if (call(g_params, &names, 1, &m.params, "vm.builtin.param_array_from_cache_by_name") != 0) goto done;

  /* The cache: each configuration value as a Shape of one. */
  TVMFFIAny conf, shapes[8];
  int64_t cv[8];
  if (map_get(&exp, "create_tir_paged_kv_cache", &conf) != 0) goto done;
  int64_t nconf = int_list(&conf, cv, 8);
  release(&conf);
  if (nconf != 5) {
    fprintf(stderr, "error: expected.json: create_tir_paged_kv_cache must have 5 values\n");
    goto done;
  }
  for (int i = 0; i < 5; ++i) {
    if (make_shape(&cv[i], 1, &shapes[i]) != 0) goto done;
  }
  int rc = call(create, shapes, 5, &m.kv, "create_tir_paged_kv_cache");
  for (int i = 0; i < 5; ++i) release(&shapes[i]);
  if (rc != 0) goto done;

  /* Prefill each prompt as its own sequence. */
  if (map_get(&exp, "prompts", &prompts) != 0) goto done;
  nseq = arr_size(&prompts);
  if (nseq <= 0 || nseq > MAX_SEQS) goto done;
  for (int64_t i = 0; i < nseq; ++i) {
    TVMFFIAny pr, e;
    int64_t ids[MAX_TOKENS];
    if (arr_get(&prompts, i, &pr) != 0) goto done;
    int64_t n = int_list(&pr, ids, MAX_TOKENS);
    release(&pr);
    if (n <= 0) goto done;
    TVMFFIAny aa[2] = {m.kv, i64(i)};
    if (call(g_add, aa, 2, &r, "vm.builtin.kv_state_add_sequence") != 0) goto done;
    if (embed(&m, ids, (int)n, 1, n, &e) != 0) goto done;
    seqs[i] = i;
    rc = forward(&m, m.prefill, "prefill", &seqs[i], &n, 1, &e, &last[i]);
    release(&e);
    if (rc != 0) goto done;
    tokens[i][ntok[i]++] = last[i];
  }
  if (steps < 0) {
    TVMFFIAny g, g0;
    if (map_get(&exp, "greedy", &g) != 0 || arr_get(&g, 0, &g0) != 0) goto done;
    steps = (int)arr_size(&g0) - 1;
    release(&g0);
    release(&g);
  }
  /* Decode all sequences together. */
  for (int s = 0; s < steps && s + 1 < MAX_TOKENS; ++s) {
    TVMFFIAny e;
    for (int64_t i = 0; i < nseq; ++i) ones[i] = 1;
    if (embed(&m, last, (int)nseq, nseq, 1, &e) != 0) goto done;
    rc = forward(&m, m.batch_decode, "batch_decode", seqs, ones, (int)nseq, &e, last);
    release(&e);
    if (rc != 0) goto done;
    for (int64_t i = 0; i < nseq; ++i) tokens[i][ntok[i]++] = last[i];
  }
  status = 0;
  for (int64_t i = 0; i < nseq; ++i) {
    printf("sequence %lld:", (long long)i);
    for (int64_t k = 0; k < ntok[i]; ++k) printf(" %lld", (long long)tokens[i][k]);
    printf("\n");
  }
  if (expect) {
    TVMFFIAny g;
    if (map_get(&exp, "greedy", &g) != 0) {
      status = 1;
      goto done;
    }
    for (int64_t i = 0; i < nseq; ++i) {
      TVMFFIAny gi;
      int64_t want[MAX_TOKENS];
      if (arr_get(&g, i, &gi) != 0) {
        status = 1;
        break;
      }
      int64_t n = int_list(&gi, want, MAX_TOKENS);
      release(&gi);
      if (n != ntok[i] || memcmp(want, tokens[i], sizeof(int64_t) * (size_t)n) != 0) {
        fprintf(stderr, "error: sequence %lld differs from expected.json's greedy tokens\n", (long long)i);
        status = 1;
      }
    }
    release(&g);
    if (status == 0) printf("the tokens match expected.json\n");
  }
done:
  release(&prompts);
  release(&names);
  release(&m.kv);
  release(&m.params);
  release(&vm);
  release(&exec);
  release(&cfg);
  release(&exp);
  void* fs[] = {load_exec, init, create, m.embed, m.prefill, m.batch_decode};
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; ++i) {
    if (fs[i] != NULL) TVMFFIObjectDecRef(fs[i]);
  }
  return status;
}

int main(int argc, char** argv) {
  const char* dir = NULL;
  int steps = -1, expect = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--expect") == 0) {
      expect = 1;
    } else if (dir == NULL && argv[i][0] != '-') {
      dir = argv[i];
    } else {
      dir = NULL;
      break;
    }
  }
  if (dir == NULL) {
    fprintf(stderr, "usage: llm_generate MODEL_DIR [--steps N] [--expect]\n");
    return 2;
  }
  if (lookup_globals() != 0) {
    release_globals();
    return 1;
  }
  int status = run(dir, steps, expect);
  release_globals();
  return status;
}
