// ndarray.h, serializer.h, dmlc streams and device_api.h: NDArray::Empty / copies / views /
// DLPack round trips / Save and Load (checked against the runtime's own params writer and
// reader, and on TVM's mlp.params), and the device API objects applications use.
#include <dmlc/io.h>
#include <dmlc/memory_io.h>
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/device_api.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>
#include <tvm/runtime/serializer.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cpp_test_util.h"

using namespace tvm::runtime;

namespace {

const DLDevice kCPU{kDLCPU, 0};
const DLDataType kF32{kDLFloat, 32, 1};

NDArray Iota(std::vector<int64_t> shape) {
  NDArray a = NDArray::Empty(shape, kF32, kCPU);
  size_t n = GetDataSize(*a.operator->()) / sizeof(float);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f;
  a.CopyFromBytes(v.data(), n * sizeof(float));
  return a;
}

std::vector<float> Values(const NDArray& a) {
  std::vector<float> v(GetDataSize(*a.operator->()) / sizeof(float));
  a.CopyToBytes(v.data(), v.size() * sizeof(float));
  return v;
}

void Basics() {
  NDArray a = Iota({2, 3});
  EXPECT(a->ndim == 2 && a->shape[1] == 3 && a->dtype.bits == 32 && a.IsContiguous());
  EXPECT(reinterpret_cast<uintptr_t>(a->data) % kAllocAlignment == 0);
  EXPECT(a.Shape()[0] == 2 && a.DataType() == DataType::Float(32));
  EXPECT(a.use_count() == 1);
  // The handle is the DLTensor inside the runtime's container, and back.
  unsigned tindex = 0;
  OK(TVMArrayGetTypeIndex(const_cast<DLTensor*>(a.operator->()), &tindex));
  EXPECT(tindex == TypeIndex::kRuntimeNDArray);
  NDArray b = NDArray::Empty({6}, kF32, kCPU);
  b.CopyFrom(a);
  EXPECT(Values(b) == Values(a));
  NDArray c = a.CopyTo(kCPU);
  EXPECT(Values(c) == Values(a) && c->data != a->data);
  NDArray d = NDArray::Empty({2, 3}, kF32, kCPU);
  a.CopyTo(d);
  EXPECT(Values(d) == Values(a));
  EXPECT_THROW_HAS(NDArray::Empty({7}, kF32, kCPU).CopyFrom(a), Error, "size must exactly match");
  EXPECT_THROW_HAS(a.CopyFromBytes(nullptr, 4), Error, "size mismatch");
  EXPECT_THROW_HAS(NDArray::Empty({2}, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLVulkan, 0}),
                   Error, "");
  // Views share the data.
  NDArray v = a.CreateView({3, 2}, kF32);
  EXPECT(v->data == a->data && v->shape[0] == 3 && Values(v) == Values(a));
  NDArray vi = a.CreateView({6}, DLDataType{kDLInt, 32, 1});
  EXPECT(vi->dtype.code == kDLInt && vi->data == a->data);
  EXPECT_THROW_HAS(a.CreateView({7}, kF32), Error, "");
  // A scoped allocation (global memory scope on CPU).
  NDArray g = NDArray::Empty({4}, kF32, kCPU, String("global"));
  EXPECT(g->shape[0] == 4);
}

int g_dlpack_deleted = 0;

void DLPack() {
  NDArray a = Iota({4});
  DLManagedTensor* m = a.ToDLPack();
  EXPECT(m->dl_tensor.data == a->data && a.use_count() == 2);
  NDArray b = NDArray::FromDLPack(m);  // the array takes the managed tensor over
  EXPECT(b->data == a->data && Values(b) == Values(a));
  b.reset();
  EXPECT(a.use_count() == 1);
  // Foreign memory wrapped without a copy; its deleter runs with the array's end.
  static float buf[3] = {1, 2, 3};
  static int64_t shape[1] = {3};
  DLManagedTensor* ext = new DLManagedTensor();
  ext->dl_tensor.data = buf;
  ext->dl_tensor.device = kCPU;
  ext->dl_tensor.ndim = 1;
  ext->dl_tensor.dtype = kF32;
  ext->dl_tensor.shape = shape;
  ext->deleter = [](DLManagedTensor* self) {
    ++g_dlpack_deleted;
    delete self;
  };
  {
    NDArray w = NDArray::FromDLPack(ext);
    EXPECT(w->data == buf && (Values(w) == std::vector<float>{1, 2, 3}));
  }
  EXPECT(g_dlpack_deleted == 1);
}

void SaveLoad() {
  NDArray a = Iota({2, 2});
  std::string bytes;
  dmlc::MemoryStringStream out(&bytes);
  a.Save(&out);
  EXPECT(bytes.size() == 8 + 8 + 8 + 4 + 4 + 2 * 8 + 8 + 16);
  // The record is the one the runtime writes in a params file (its last bytes here).
  Map<String, NDArray> params{{"a", a}};
  TVMRetValue saved = (*Registry::Get("runtime.SaveParams"))(params);
  std::string blob = saved;
  EXPECT(blob.size() > bytes.size() &&
         blob.compare(blob.size() - bytes.size(), bytes.size(), bytes) == 0);
  // Loaded back.
  dmlc::MemoryStringStream in(&bytes);
  NDArray b;
  EXPECT(b.Load(&in));
  EXPECT(b->ndim == 2 && Values(b) == Values(a));
  // Truncated or damaged input is an error, never a crash.
  for (size_t cut : {size_t(0), size_t(7), size_t(20), size_t(40), bytes.size() - 1}) {
    std::string part = bytes.substr(0, cut);
    dmlc::MemoryStringStream s(&part);
    NDArray c;
    EXPECT_THROW_HAS(c.Load(&s), InternalError, "Invalid DLTensor");
  }
  std::string bad = bytes;
  bad[0] ^= 1;
  dmlc::MemoryStringStream sb(&bad);
  NDArray c;
  EXPECT_THROW_HAS(c.Load(&sb), InternalError, "Invalid DLTensor file format");
  // Through a file.
  std::string path = "cpp_ndarray_save.bin";
  {
    std::unique_ptr<dmlc::Stream> fo(dmlc::Stream::Create(path.c_str(), "w"));
    a.Save(fo.get());
    fo->Write(std::string("tail"));
    fo->Write(std::vector<int64_t>{1, 2});
  }
  {
    std::unique_ptr<dmlc::Stream> fi(dmlc::Stream::Create(path.c_str(), "r"));
    NDArray e;
    std::string tail;
    std::vector<int64_t> vec;
    EXPECT(e.Load(fi.get()) && fi->Read(&tail) && fi->Read(&vec));
    EXPECT(Values(e) == Values(a) && tail == "tail" && (vec == std::vector<int64_t>{1, 2}));
  }
  std::remove(path.c_str());
  EXPECT(dmlc::Stream::Create("/nonexistent/dir/x", "r", true) == nullptr);
  EXPECT_THROW_HAS(dmlc::Stream::Create("/nonexistent/dir/x", "r"), std::runtime_error,
                   "cannot open");
}

// TVM's own params file, read record by record with NDArray::Load, equals what the runtime's
// reader makes of it.
void TvmParamsFile() {
  std::ifstream f(fixture_path("mlp.params"), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string blob = ss.str();
  EXPECT(!blob.empty());
  dmlc::MemoryStringStream strm(&blob);
  uint64_t header = 0, reserved = 0;
  std::vector<std::string> names;
  uint64_t count = 0;
  EXPECT(strm.Read(&header) && strm.Read(&reserved) && strm.Read(&names) && strm.Read(&count));
  EXPECT(header == 0xF7E58D4F05049CB7ULL && count == names.size() && count > 0);
  TVMByteArray arr{blob.data(), blob.size()};
  Map<String, NDArray> theirs = (*Registry::Get("runtime.LoadParams"))(arr);
  EXPECT(theirs.size() == count);
  for (uint64_t i = 0; i < count; ++i) {
    NDArray mine;
    EXPECT(mine.Load(&strm));
    NDArray other = theirs[names[i]];
    EXPECT(mine->ndim == other->ndim && Values(mine) == Values(other));
  }
}

void DeviceApi() {
  DeviceAPI* api = DeviceAPI::Get(kCPU);
  EXPECT(api != nullptr && api == DeviceAPI::Get(kCPU));
  TVMRetValue exist;
  api->GetAttr(kCPU, kExist, &exist);
  EXPECT(exist.operator int() == 1);
  void* p = api->AllocDataSpace(kCPU, 256, 64, kF32);
  EXPECT(p != nullptr && reinterpret_cast<uintptr_t>(p) % 64 == 0);
  int64_t shape[1] = {4};
  void* q = api->AllocDataSpace(kCPU, 1, shape, kF32);
  float src[4] = {1, 2, 3, 4};
  std::memcpy(p, src, sizeof src);
  DLTensor from{p, kCPU, 1, kF32, shape, nullptr, 0};
  DLTensor to{q, kCPU, 1, kF32, shape, nullptr, 0};
  api->CopyDataFromTo(&from, &to, nullptr);
  api->StreamSync(kCPU, nullptr);
  EXPECT(std::memcmp(q, src, sizeof src) == 0);
  api->FreeDataSpace(kCPU, p);
  api->FreeDataSpace(kCPU, q);
  void* ws = api->AllocWorkspace(kCPU, 1024);
  EXPECT(ws != nullptr);
  api->FreeWorkspace(kCPU, ws);
  api->SetDevice(kCPU);
  EXPECT(std::string(DeviceName(kDLCUDA)) == "cuda");
  std::ostringstream os;
  os << DLDevice{kDLOpenCL, 1} << " " << AddRPCSessionMask(kCPU, 0);
  EXPECT(os.str() == "opencl(1) remote[0]-cpu(0)");
  EXPECT(DeviceAPI::Get(DLDevice{kDLVulkan, 0}, true) == nullptr);
  EXPECT_THROW_HAS(DeviceAPI::Get(DLDevice{kDLVulkan, 0}), InternalError,
                   "Device API vulkan is not enabled");
  std::hash<tvm::Device> h;
  EXPECT(h(kCPU) == h(DLDevice{kDLCPU, 0}));
}

}  // namespace

int main() {
  RUN_TEST(Basics);
  RUN_TEST(DLPack);
  RUN_TEST(SaveLoad);
  RUN_TEST(DeviceApi);
  RUN_TEST(TvmParamsFile);
  return finish();
}
