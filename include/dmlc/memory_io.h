/*
 * dmlc-core's in-memory streams, as TVM code uses them (tvm-runtime, header-only; written for
 * this project): MemoryFixedSizeStream over a caller's buffer, MemoryStringStream over a
 * std::string.
 */
#ifndef DMLC_MEMORY_IO_H_
#define DMLC_MEMORY_IO_H_

#include <dmlc/io.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dmlc {

/*! \brief A stream over a fixed buffer; writing past its end is an error. */
struct MemoryFixedSizeStream : public SeekStream {
 public:
  using Stream::Read;  // the typed Read<T> / Write<T> too
  using Stream::Write;
  MemoryFixedSizeStream(void* p_buffer, size_t buffer_size)
      : p_buffer_(reinterpret_cast<char*>(p_buffer)), buffer_size_(buffer_size) {
    curr_ptr_ = 0;
  }
  size_t Read(void* ptr, size_t size) override {
    size_t nread = std::min(buffer_size_ - curr_ptr_, size);
    if (nread != 0) std::memcpy(ptr, p_buffer_ + curr_ptr_, nread);
    curr_ptr_ += nread;
    return nread;
  }
  void Write(const void* ptr, size_t size) override {
    if (size == 0) return;
    if (curr_ptr_ + size > buffer_size_) {
      throw std::runtime_error("dmlc::MemoryFixedSizeStream: write past the end of the buffer");
    }
    std::memcpy(p_buffer_ + curr_ptr_, ptr, size);
    curr_ptr_ += size;
  }
  void Seek(size_t pos) override { curr_ptr_ = std::min(pos, buffer_size_); }
  size_t Tell() override { return curr_ptr_; }

 private:
  char* p_buffer_;
  size_t buffer_size_;
  size_t curr_ptr_;
};

/*! \brief A stream over a std::string, which grows as it is written. */
struct MemoryStringStream : public SeekStream {
 public:
  using Stream::Read;  // the typed Read<T> / Write<T> too
  using Stream::Write;
  explicit MemoryStringStream(std::string* p_buffer) : p_buffer_(p_buffer) { curr_ptr_ = 0; }
  size_t Read(void* ptr, size_t size) override {
    size_t avail = curr_ptr_ < p_buffer_->length() ? p_buffer_->length() - curr_ptr_ : 0;
    size_t nread = std::min(avail, size);
    if (nread != 0) std::memcpy(ptr, &(*p_buffer_)[0] + curr_ptr_, nread);
    curr_ptr_ += nread;
    return nread;
  }
  void Write(const void* ptr, size_t size) override {
    if (size == 0) return;
    if (curr_ptr_ + size > p_buffer_->length()) p_buffer_->resize(curr_ptr_ + size);
    std::memcpy(&(*p_buffer_)[0] + curr_ptr_, ptr, size);
    curr_ptr_ += size;
  }
  void Seek(size_t pos) override { curr_ptr_ = pos; }
  size_t Tell() override { return curr_ptr_; }

 private:
  std::string* p_buffer_;
  size_t curr_ptr_;
};

}  // namespace dmlc

#endif  // DMLC_MEMORY_IO_H_
