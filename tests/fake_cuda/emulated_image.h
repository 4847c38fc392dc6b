// tests/fake_cuda/emulated_image.h: the "CUBIN" the stand-in NVRTC hands out for the stand-in
// driver: a magic, the size of what follows (cuModuleLoadData gets no size), and a host shared
// library's bytes.
#ifndef DYNTRACE_TESTS_FAKE_CUDA_EMULATED_IMAGE_H_
#define DYNTRACE_TESTS_FAKE_CUDA_EMULATED_IMAGE_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace fake_cuda {

inline constexpr char kEmulatedImageMagic[8] = {'D', 'T', 'E', 'M', 'U', 'L', '1', '\0'};

inline std::string WrapEmulatedImage(const std::string& library) {
  const uint64_t size = library.size();
  std::string image(kEmulatedImageMagic, sizeof(kEmulatedImageMagic));
  image.append(reinterpret_cast<const char*>(&size), sizeof(size));
  return image + library;
}

// The library inside `image` (as cuModuleLoadData receives it), or "" when it is not one.
inline std::string UnwrapEmulatedImage(const void* image) {
  const char* bytes = static_cast<const char*>(image);
  if (bytes == nullptr || std::memcmp(bytes, kEmulatedImageMagic, sizeof(kEmulatedImageMagic)) != 0) return "";
  uint64_t size = 0;
  std::memcpy(&size, bytes + sizeof(kEmulatedImageMagic), sizeof(size));
  return std::string(bytes + sizeof(kEmulatedImageMagic) + sizeof(size), size);
}

}  // namespace fake_cuda

#endif  // DYNTRACE_TESTS_FAKE_CUDA_EMULATED_IMAGE_H_
