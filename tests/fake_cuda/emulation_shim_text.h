// tests/fake_cuda/emulation_shim_text.h: emulation_shim.h as a string (pasted at build time by
// the emulation_shim_cc genrule), for the stand-in NVRTC to put ahead of each source.
#ifndef DYNTRACE_TESTS_FAKE_CUDA_EMULATION_SHIM_TEXT_H_
#define DYNTRACE_TESTS_FAKE_CUDA_EMULATION_SHIM_TEXT_H_

namespace fake_cuda {
const char* EmulationShim();
}  // namespace fake_cuda

#endif  // DYNTRACE_TESTS_FAKE_CUDA_EMULATION_SHIM_TEXT_H_
