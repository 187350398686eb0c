/* Device API entry points on the CPU, and errors for unknown or disabled devices. */
#include <stdint.h>
#include "test_util.h"

int main(void) {
  TVMStreamHandle s = (TVMStreamHandle)1;
  OK(TVMStreamCreate(kDLCPU, 0, &s));
  EXPECT(s == NULL);
  OK(TVMSetStream(kDLCPU, 0, s));
  OK(TVMSynchronize(kDLCPU, 0, NULL));
  OK(TVMStreamStreamSynchronize(kDLCPU, 0, NULL, NULL));
  OK(TVMStreamFree(kDLCPU, 0, s));
  ERR_HAS(TVMSynchronize(0, 0, NULL), "unknown type =0");
  ERR_HAS(TVMSynchronize(64, 0, NULL), "unknown type =64");
  ERR_HAS(TVMSynchronize(-3, 0, NULL), "unknown type =-3");
  ERR_HAS(TVMSynchronize(kDLMetal, 0, NULL), "Device API metal is not enabled");
  ERR_HAS(TVMStreamCreate(200, 0, &s), "RPC session 0 is closed or does not exist"); /* no session 0 */

  DLDevice cpu = {kDLCPU, 0};
  DLDataType f32 = {kDLFloat, 32, 1};
  void* p = NULL;
  OK(TVMDeviceAllocDataSpace(cpu, 1000, 256, f32, &p));
  EXPECT(p != NULL && ((uintptr_t)p % 256) == 0);
  memset(p, 1, 1000);
  OK(TVMDeviceFreeDataSpace(cpu, p));
  ERR_HAS(TVMDeviceAllocDataSpace(cpu, 16, 24, f32, &p), "invalid alignment 24");
  OK(TVMDeviceFreeDataSpace(cpu, NULL));
  int64_t shape[2] = {4, 8};
  OK(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, NULL, &p));
  EXPECT(((uintptr_t)p % 128) == 0);
  OK(TVMDeviceFreeDataSpace(cpu, p));
  OK(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, "global", &p));
  OK(TVMDeviceFreeDataSpace(cpu, p));
  ERR_HAS(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, "shared", &p), "memory scope: shared");

  /* Attributes: exist is 1 for any CPU id, 0 for a disabled API; others give None on CPU. */
  TVMValue v[3], rv; int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt}, rc;
  v[0].v_int64 = kDLCPU; v[1].v_int64 = 7; v[2].v_int64 = 0;
  OK(call_global("runtime.GetDeviceAttr", v, c, 3, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 1);
  v[2].v_int64 = 1;
  OK(call_global("runtime.GetDeviceAttr", v, c, 3, &rv, &rc));
  EXPECT(rc == kTVMNullptr);
  v[0].v_int64 = kDLVulkan; v[2].v_int64 = 0;
  OK(call_global("runtime.GetDeviceAttr", v, c, 3, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 0);
  v[2].v_int64 = 5;
  ERR_HAS(call_global("runtime.GetDeviceAttr", v, c, 3, &rv, &rc), "Device API vulkan is not enabled");
  v[0].v_int64 = 11; v[2].v_int64 = 0;
  ERR_HAS(call_global("runtime.GetDeviceAttr", v, c, 3, &rv, &rc), "unknown type =11");

  TVMValue t; int tc = kTVMStr;
  t.v_str = "cpu";
  OK(call_global("runtime.RuntimeEnabled", &t, &tc, 1, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == 1);
  t.v_str = "llvm";
  OK(call_global("runtime.RuntimeEnabled", &t, &tc, 1, &rv, &rc));
  EXPECT(rv.v_int64 == 0);
  t.v_str = "nonsense";
  ERR_HAS(call_global("runtime.RuntimeEnabled", &t, &tc, 1, &rv, &rc), "Unknown optional runtime nonsense");

  /* runtime.TVMSetStream returns the status instead of raising. */
  v[0].v_int64 = kDLMetal; v[1].v_int64 = 0; v[2].v_handle = NULL; c[2] = kTVMOpaqueHandle;
  OK(call_global("runtime.TVMSetStream", v, c, 3, &rv, &rc));
  EXPECT(rc == kTVMArgInt && rv.v_int64 == -1);
  v[0].v_int64 = kDLCPU;
  OK(call_global("runtime.TVMSetStream", v, c, 3, &rv, &rc));
  EXPECT(rv.v_int64 == 0);
  v[0].v_int64 = kDLCPU; v[1].v_int64 = 0;
  c[1] = kTVMArgInt;
  OK(call_global("__tvm_set_device", v, c, 2, &rv, &rc));
  v[0].v_int64 = kDLVulkan;
  ERR(call_global("__tvm_set_device", v, c, 2, &rv, &rc));
  TVMFunctionHandle h = NULL;
  OK(TVMFuncGetGlobal("device_api.cpu", &h));
  EXPECT(h != NULL);
  OK(TVMFuncFree(h));
  return finish();
}
