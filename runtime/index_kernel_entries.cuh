// runtime/index_kernel_entries.cuh: the `extern "C"` entry points of the index kernels' module.
//
// NVRTC only: pasted after runtime/index_kernels.cuh, with DT_IX_SCALAR defined to the element
// type the module is built for (runtime/cuda_index_kernels.cc prepends it). Each entry takes
// its IxArgs by value, so the struct's bytes are the launch's parameters.
#define DT_IX_ENTRY(name) \
  extern "C" __global__ void dt_ix_##name(const dt::IxArgs a) { dt::ix::name(a); }
#define DT_IX_TYPED_ENTRY(name) \
  extern "C" __global__ void dt_ix_##name(const dt::IxArgs a) { dt::ix::name<DT_IX_SCALAR>(a); }
DT_IX_UNTYPED_KERNELS(DT_IX_ENTRY)
DT_IX_TYPED_KERNELS(DT_IX_TYPED_ENTRY)
#undef DT_IX_ENTRY
#undef DT_IX_TYPED_ENTRY
