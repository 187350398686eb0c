/*
 * dmlc-core's serializer entry point (tvm-runtime, header-only): the Handler templates live in
 * dmlc/io.h.
 */
#ifndef DMLC_SERIALIZER_H_
#define DMLC_SERIALIZER_H_

#include <dmlc/io.h>

#endif  // DMLC_SERIALIZER_H_
