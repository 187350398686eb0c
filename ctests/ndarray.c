/* NDArray: allocation, copies, DLPack, params files (byte-identical round trip of a real
 * TVM params file). */
#include <stdint.h>
#include "test_util.h"

static int g_deleted = 0;
static void managed_deleter(DLManagedTensor* self) {
  g_deleted++;
  free(self->dl_tensor.data);
  free(self);
}

static void test_alloc_and_copy(void) {
  int64_t shape[2] = {3, 5};
  TVMArrayHandle a = NULL, b = NULL;
  OK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &a));
  EXPECT(a != NULL && ((uintptr_t)a->data % 128) == 0);
  EXPECT(a->ndim == 2 && a->shape[0] == 3 && a->shape[1] == 5 && a->strides == NULL && a->byte_offset == 0);
  EXPECT(a->dtype.code == kDLFloat && a->dtype.bits == 32 && a->dtype.lanes == 1);
  EXPECT(a->device.device_type == kDLCPU && a->device.device_id == 0);
  float src[15], dst[15];
  for (int i = 0; i < 15; i++) src[i] = (float)i * 0.5f;
  OK(TVMArrayCopyFromBytes(a, src, sizeof src));
  memset(dst, 0, sizeof dst);
  OK(TVMArrayCopyToBytes(a, dst, sizeof dst));
  EXPECT(memcmp(src, dst, sizeof src) == 0);
  ERR_HAS(TVMArrayCopyFromBytes(a, src, 8), "size mismatch");
  ERR_HAS(TVMArrayCopyToBytes(a, dst, 64), "size mismatch");

  /* Copy array -> array of another shape but the same byte size. */
  int64_t flat[1] = {15};
  OK(TVMArrayAlloc(flat, 1, kDLFloat, 32, 1, kDLCPU, 0, &b));
  OK(TVMArrayCopyFromTo(a, b, NULL));
  memset(dst, 0, sizeof dst);
  OK(TVMArrayCopyToBytes(b, dst, sizeof dst));
  EXPECT(memcmp(src, dst, sizeof src) == 0);
  /* A plain DLTensor on either side, with a byte offset. */
  float host[16] = {0};
  DLTensor plain = {host, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, flat, NULL, sizeof(float)};
  OK(TVMArrayCopyFromTo(a, &plain, NULL));
  EXPECT(host[0] == 0.0f && host[1] == src[0] && host[15] == src[14]);
  /* Non-contiguous strides are refused. */
  int64_t strides[1] = {2};
  DLTensor strided = plain;
  strided.strides = strides;
  ERR_HAS(TVMArrayCopyFromTo(a, &strided, NULL), "contiguous");
  int64_t wrong[1] = {14};
  DLTensor small = plain;
  small.shape = wrong;
  ERR_HAS(TVMArrayCopyFromTo(a, &small, NULL), "The size must exactly match");
  OK(TVMDeviceCopyDataFromTo(a, &plain, NULL));
  OK(TVMArrayFree(b));
  OK(TVMArrayFree(a));
  OK(TVMArrayFree(NULL));

  /* Validation of dtypes and devices. */
  TVMArrayHandle c = NULL;
  ERR(TVMArrayAlloc(shape, 2, kDLInt, 24, 1, kDLCPU, 0, &c));
  ERR(TVMArrayAlloc(shape, 2, kDLFloat, 12, 1, kDLCPU, 0, &c));
  ERR(TVMArrayAlloc(shape, 2, kDLFloat, 32, 0, kDLCPU, 0, &c));
  ERR_HAS(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, 13, 0, &c), "unknown type =13");
  ERR_HAS(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLVulkan, 0, &c), "Device API vulkan is not enabled");
  ERR(TVMArrayAlloc(shape, -1, kDLFloat, 32, 1, kDLCPU, 0, &c));
  ERR(TVMArrayAlloc(NULL, 2, kDLFloat, 32, 1, kDLCPU, 0, &c));
  ERR(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, NULL));
  /* Sub-byte and scalar arrays. */
  OK(TVMArrayAlloc(shape, 0, kDLInt, 4, 1, kDLCPU, 0, &c));
  uint8_t one = 7;
  OK(TVMArrayCopyFromBytes(c, &one, 1));
  OK(TVMArrayFree(c));
  int64_t zero[1] = {0};
  OK(TVMArrayAlloc(zero, 1, kDLFloat, 32, 1, kDLCPU, 0, &c));
  OK(TVMArrayCopyFromBytes(c, NULL, 0));
  OK(TVMArrayFree(c));
}

static void test_dlpack(void) {
  /* Import a producer's tensor: its deleter runs once, when the last reference goes. */
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof *m);
  static int64_t shape[1] = {4};
  float* data = (float*)malloc(4 * sizeof(float));
  for (int i = 0; i < 4; i++) data[i] = (float)i;
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype.code = kDLFloat; m->dl_tensor.dtype.bits = 32; m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->deleter = managed_deleter;
  TVMArrayHandle a = NULL;
  g_deleted = 0;
  OK(TVMArrayFromDLPack(m, &a));
  EXPECT(a->data == data && a->shape != shape && a->shape[0] == 4);
  /* Export it again: two owners now. */
  DLManagedTensor* out = NULL;
  OK(TVMArrayToDLPack(a, &out));
  EXPECT(out != NULL && out->dl_tensor.data == data && out->deleter != NULL);
  OK(TVMArrayFree(a));
  EXPECT(g_deleted == 0);
  TVMDLManagedTensorCallDeleter(out);
  EXPECT(g_deleted == 1);
  TVMDLManagedTensorCallDeleter(NULL);
  ERR(TVMArrayFromDLPack(NULL, &a));
}

static void test_alloc_with_scope_global(void) {
  int64_t shape[2] = {2, 2};
  TVMValue v[5], rv; int c[5], rc;
  v[0].v_handle = shape; c[0] = kTVMOpaqueHandle;
  v[1].v_int64 = 2; c[1] = kTVMArgInt;
  v[2].v_str = "int8"; c[2] = kTVMStr;
  v[3].v_device.device_type = kDLCPU; v[3].v_device.device_id = 0; c[3] = kDLDevice;
  c[4] = kTVMNullptr;
  OK(call_global("runtime.TVMArrayAllocWithScope", v, c, 5, &rv, &rc));
  EXPECT(rc == kTVMNDArrayHandle);
  DLTensor* t = (DLTensor*)rv.v_handle;
  EXPECT(t->dtype.code == kDLInt && t->dtype.bits == 8 && t->shape[1] == 2);
  unsigned tindex = 0;
  OK(TVMArrayGetTypeIndex(t, &tindex));
  EXPECT(tindex == 2);
  /* The container header sits 16 bytes before the handle. */
  EXPECT(*(uint32_t*)((char*)t - 16) == 2);
  OK(TVMArrayFree(t));
  v[4].v_str = "texture"; c[4] = kTVMStr;
  ERR_HAS(call_global("runtime.TVMArrayAllocWithScope", v, c, 5, &rv, &rc), "memory scope: texture");
}

static void test_params(void) {
  const char* dir = fixtures_dir();
  char path[4096];
  snprintf(path, sizeof path, "%s/mlp.params", dir);
  size_t n = 0;
  unsigned char* blob = read_file(path, &n);
  EXPECT(blob != NULL && n > 0);
  if (blob == NULL) return;
  TVMByteArray ba = {(const char*)blob, n};
  TVMValue v, rv; int c = kTVMBytes, rc;
  v.v_handle = &ba;
  OK(call_global("runtime.LoadParams", &v, &c, 1, &rv, &rc));
  EXPECT(rc == kTVMObjectHandle);
  TVMObjectHandle map = rv.v_handle;
  v.v_handle = map; c = kTVMObjectHandle;
  OK(call_global("runtime.MapSize", &v, &c, 1, &rv, &rc));
  EXPECT(rv.v_int64 > 0);
  OK(call_global("runtime.SaveParams", &v, &c, 1, &rv, &rc));
  EXPECT(rc == kTVMBytes);
  TVMByteArray* saved = (TVMByteArray*)rv.v_handle;
  EXPECT(saved->size == n && memcmp(saved->data, blob, n) == 0);
  OK(TVMObjectFree(map));
  /* Damaged files: every truncation and a wrong magic are errors. */
  size_t cuts[] = {0, 4, 15, 16, 24, 40, n / 2, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    TVMByteArray cut = {(const char*)blob, cuts[i]};
    v.v_handle = &cut; c = kTVMBytes;
    ERR(call_global("runtime.LoadParams", &v, &c, 1, &rv, &rc));
  }
  blob[0] ^= 0xff;
  v.v_handle = &ba;
  ERR_HAS(call_global("runtime.LoadParams", &v, &c, 1, &rv, &rc), "Invalid parameters file format");
  blob[0] ^= 0xff;
  /* A huge name count must not allocate. */
  memset(blob + 16, 0xff, 8);
  ERR(call_global("runtime.LoadParams", &v, &c, 1, &rv, &rc));
  free(blob);
}

int main(void) {
  test_alloc_and_copy();
  test_dlpack();
  test_alloc_with_scope_global();
  test_params();
  return finish();
}
