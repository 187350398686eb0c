/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime). Hand-written,
 * header-only.
 *
 * tvm/runtime/serializer.h: dmlc serializer handlers for DLDataType (code u8, bits u8,
 * lanes u16) and DLDevice (two int32).
 */
#ifndef TVM_RUNTIME_SERIALIZER_H_
#define TVM_RUNTIME_SERIALIZER_H_

#include <dmlc/io.h>
#include <dmlc/serializer.h>
#include <tvm/runtime/c_runtime_api.h>

namespace dmlc {
namespace serializer {

template <>
struct Handler<DLDataType> {
  inline static void Write(Stream* strm, const DLDataType& dtype) {
    Handler<uint8_t>::Write(strm, dtype.code);
    Handler<uint8_t>::Write(strm, dtype.bits);
    Handler<uint16_t>::Write(strm, dtype.lanes);
  }
  inline static bool Read(Stream* strm, DLDataType* dtype) {
    return Handler<uint8_t>::Read(strm, &(dtype->code)) &&
           Handler<uint8_t>::Read(strm, &(dtype->bits)) &&
           Handler<uint16_t>::Read(strm, &(dtype->lanes));
  }
};

template <>
struct Handler<DLDevice> {
  inline static void Write(Stream* strm, const DLDevice& dev) {
    Handler<int32_t>::Write(strm, static_cast<int32_t>(dev.device_type));
    Handler<int32_t>::Write(strm, static_cast<int32_t>(dev.device_id));
  }
  inline static bool Read(Stream* strm, DLDevice* dev) {
    int32_t device_type = 0, device_id = 0;
    if (!Handler<int32_t>::Read(strm, &device_type)) return false;
    if (!Handler<int32_t>::Read(strm, &device_id)) return false;
    dev->device_type = static_cast<DLDeviceType>(device_type);
    dev->device_id = device_id;
    return true;
  }
};

}  // namespace serializer
}  // namespace dmlc

#include <tvm/runtime/ndarray.h>  // NOLINT(*): TVM's serializer.h brings ndarray.h

#endif  // TVM_RUNTIME_SERIALIZER_H_
