/*
 * The part of dmlc-core's stream interface that TVM v0.8's C++ runtime API uses (tvm-runtime,
 * header-only; written for this project, not dmlc-core's code): dmlc::Stream and SeekStream
 * with the binary encodings of dmlc's serializer (little-endian scalars, u64 length before
 * strings and vectors), dmlc::Serializable, and Stream::Create for local files.
 *
 * A program that also uses the real dmlc-core headers must not put this directory first on its
 * include path.
 */
#ifndef DMLC_IO_H_
#define DMLC_IO_H_

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

/*! \brief Whether stored data needs no byte swap on this host (little-endian). */
#ifndef DMLC_IO_NO_ENDIAN_SWAP
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define DMLC_IO_NO_ENDIAN_SWAP 0
#else
#define DMLC_IO_NO_ENDIAN_SWAP 1
#endif
#endif

#ifndef DMLC_THROW_EXCEPTION
#define DMLC_THROW_EXCEPTION noexcept(false)
#endif
#ifndef DMLC_NO_EXCEPTION
#define DMLC_NO_EXCEPTION noexcept(true)
#endif

namespace dmlc {

/*! \brief Pointer to the first element of a vector (nullptr when empty). */
template <typename T>
inline T* BeginPtr(std::vector<T>& vec) {  // NOLINT(*)
  return vec.empty() ? nullptr : &vec[0];
}
template <typename T>
inline const T* BeginPtr(const std::vector<T>& vec) {
  return vec.empty() ? nullptr : &vec[0];
}
inline char* BeginPtr(std::string& str) {  // NOLINT(*)
  return str.empty() ? nullptr : &str[0];
}
inline const char* BeginPtr(const std::string& str) { return str.empty() ? nullptr : &str[0]; }

/*! \brief Reverses the bytes of num_elems elements of elem_bytes each, in place. */
inline void ByteSwap(void* data, size_t elem_bytes, size_t num_elems) {
  for (size_t i = 0; i < num_elems; ++i) {
    uint8_t* bptr = reinterpret_cast<uint8_t*>(data) + elem_bytes * i;
    for (size_t j = 0; j < elem_bytes / 2; ++j) std::swap(bptr[j], bptr[elem_bytes - 1 - j]);
  }
}

/*! \brief A byte stream for serialization. */
class Stream {  // NOLINT(*)
 public:
  /*! \brief Reads up to size bytes; returns how many were read. */
  virtual size_t Read(void* ptr, size_t size) = 0;
  /*! \brief Writes size bytes. */
  virtual void Write(const void* ptr, size_t size) = 0;
  virtual ~Stream() {}
  /*!
   * \brief Opens a local file ("file://" prefix optional) with flag "r", "w" or "a"; nullptr
   * if allow_null and it cannot be opened, else an exception.
   */
  static inline Stream* Create(const char* uri, const char* const flag, bool allow_null = false);
  /*! \brief Writes a value with dmlc's encoding. */
  template <typename T>
  inline void Write(const T& data);
  /*! \brief Reads a value with dmlc's encoding; false at the end of the stream. */
  template <typename T>
  inline bool Read(T* out_data);
  template <typename T>
  inline void WriteArray(const T* data, size_t num_elems);
  template <typename T>
  inline bool ReadArray(T* data, size_t num_elems);
};

/*! \brief A stream with a position. */
class SeekStream : public Stream {
 public:
  virtual ~SeekStream() {}
  virtual void Seek(size_t pos) = 0;
  virtual size_t Tell() = 0;
  /*! \brief Opens a local file for reading. */
  static inline SeekStream* CreateForRead(const char* uri, bool allow_null = false);
};

/*! \brief An object that saves itself to and loads itself from a stream. */
class Serializable {
 public:
  virtual ~Serializable() {}
  virtual void Load(Stream* fi) = 0;
  virtual void Save(Stream* fo) const = 0;
};

namespace serializer {

/*!
 * \brief How a T is written: trivially copyable values byte for byte (little-endian);
 * std::string, std::vector, std::pair, std::map and std::unordered_map as dmlc does.
 */
template <typename T, typename Enable = void>
struct Handler;

template <typename T>
struct Handler<T, typename std::enable_if<std::is_trivially_copyable<T>::value>::type> {
  static void Write(Stream* strm, const T& data) {
#if DMLC_IO_NO_ENDIAN_SWAP
    strm->Write(&data, sizeof(T));
#else
    T copy = data;
    ByteSwap(&copy, sizeof(T), 1);
    strm->Write(&copy, sizeof(T));
#endif
  }
  static bool Read(Stream* strm, T* dptr) {
    if (strm->Read(dptr, sizeof(T)) != sizeof(T)) return false;
#if !DMLC_IO_NO_ENDIAN_SWAP
    ByteSwap(dptr, sizeof(T), 1);
#endif
    return true;
  }
};

template <>
struct Handler<std::string> {
  static void Write(Stream* strm, const std::string& data) {
    uint64_t sz = data.length();
    Handler<uint64_t>::Write(strm, sz);
    if (sz != 0) strm->Write(data.data(), data.length());
  }
  static bool Read(Stream* strm, std::string* data) {
    uint64_t sz;
    if (!Handler<uint64_t>::Read(strm, &sz)) return false;
    std::string out;
    // Read in bounded chunks: a hostile size never allocates more than the stream holds.
    char buf[4096];
    while (sz > 0) {
      size_t n = sz < sizeof(buf) ? static_cast<size_t>(sz) : sizeof(buf);
      if (strm->Read(buf, n) != n) return false;
      out.append(buf, n);
      sz -= n;
    }
    *data = std::move(out);
    return true;
  }
};

template <typename T>
struct Handler<std::vector<T>> {
  static void Write(Stream* strm, const std::vector<T>& vec) {
    uint64_t sz = vec.size();
    Handler<uint64_t>::Write(strm, sz);
    for (const T& v : vec) Handler<T>::Write(strm, v);
  }
  static bool Read(Stream* strm, std::vector<T>* out_vec) {
    uint64_t sz;
    if (!Handler<uint64_t>::Read(strm, &sz)) return false;
    std::vector<T> out;
    for (uint64_t i = 0; i < sz; ++i) {
      T v;
      if (!Handler<T>::Read(strm, &v)) return false;
      out.push_back(std::move(v));
    }
    *out_vec = std::move(out);
    return true;
  }
};

template <typename A, typename B>
struct Handler<std::pair<A, B>, typename std::enable_if<!std::is_trivially_copyable<
                                    std::pair<A, B>>::value>::type> {
  static void Write(Stream* strm, const std::pair<A, B>& data) {
    Handler<A>::Write(strm, data.first);
    Handler<B>::Write(strm, data.second);
  }
  static bool Read(Stream* strm, std::pair<A, B>* data) {
    return Handler<A>::Read(strm, &data->first) && Handler<B>::Read(strm, &data->second);
  }
};

template <typename M>
struct MapHandler {
  static void Write(Stream* strm, const M& data) {
    std::vector<std::pair<typename M::key_type, typename M::mapped_type>> v(data.begin(),
                                                                             data.end());
    Handler<decltype(v)>::Write(strm, v);
  }
  static bool Read(Stream* strm, M* data) {
    std::vector<std::pair<typename M::key_type, typename M::mapped_type>> v;
    if (!Handler<decltype(v)>::Read(strm, &v)) return false;
    data->clear();
    data->insert(v.begin(), v.end());
    return true;
  }
};

template <typename K, typename V, typename C, typename A>
struct Handler<std::map<K, V, C, A>> : MapHandler<std::map<K, V, C, A>> {};
template <typename K, typename V, typename H, typename E, typename A>
struct Handler<std::unordered_map<K, V, H, E, A>>
    : MapHandler<std::unordered_map<K, V, H, E, A>> {};

}  // namespace serializer

template <typename T>
inline void Stream::Write(const T& data) {
  serializer::Handler<T>::Write(this, data);
}
template <typename T>
inline bool Stream::Read(T* out_data) {
  return serializer::Handler<T>::Read(this, out_data);
}
template <typename T>
inline void Stream::WriteArray(const T* data, size_t num_elems) {
  for (size_t i = 0; i < num_elems; ++i) this->Write<T>(data[i]);
}
template <typename T>
inline bool Stream::ReadArray(T* data, size_t num_elems) {
  for (size_t i = 0; i < num_elems; ++i) {
    if (!this->Read<T>(data + i)) return false;
  }
  return true;
}

namespace io {
/*! \brief A local file as a stream (what Stream::Create opens). */
class LocalFileStream : public SeekStream {
 public:
  using Stream::Read;  // the typed Read<T> / Write<T> too
  using Stream::Write;
  explicit LocalFileStream(std::FILE* fp) : fp_(fp) {}
  ~LocalFileStream() override {
    if (fp_ != nullptr) std::fclose(fp_);
  }
  size_t Read(void* ptr, size_t size) override { return std::fread(ptr, 1, size, fp_); }
  void Write(const void* ptr, size_t size) override {
    if (size != 0 && std::fwrite(ptr, 1, size, fp_) != size) {
      throw std::runtime_error("dmlc::Stream: write failed: " + std::string(std::strerror(errno)));
    }
  }
  void Seek(size_t pos) override {
    if (std::fseek(fp_, static_cast<long>(pos), SEEK_SET) != 0) {  // NOLINT(runtime/int)
      throw std::runtime_error("dmlc::Stream: seek failed");
    }
  }
  size_t Tell() override { return static_cast<size_t>(std::ftell(fp_)); }

  static LocalFileStream* Open(const char* uri, const char* flag, bool allow_null) {
    std::string path(uri);
    if (path.compare(0, 7, "file://") == 0) path = path.substr(7);
    std::string mode(flag);
    if (mode == "r" || mode == "w" || mode == "a") mode += "b";
    if (mode != "rb" && mode != "wb" && mode != "ab") {
      throw std::runtime_error("dmlc::Stream::Create: unknown flag \"" + std::string(flag) + "\"");
    }
    std::FILE* fp = std::fopen(path.c_str(), mode.c_str());
    if (fp == nullptr) {
      if (allow_null) return nullptr;
      throw std::runtime_error("dmlc::Stream::Create: cannot open " + path + ": " +
                               std::strerror(errno));
    }
    return new LocalFileStream(fp);
  }

 private:
  std::FILE* fp_;
};
}  // namespace io

inline Stream* Stream::Create(const char* uri, const char* const flag, bool allow_null) {
  return io::LocalFileStream::Open(uri, flag, allow_null);
}

inline SeekStream* SeekStream::CreateForRead(const char* uri, bool allow_null) {
  return io::LocalFileStream::Open(uri, "r", allow_null);
}

}  // namespace dmlc

#endif  // DMLC_IO_H_
