// gpu_program: a small NCCL + CUDA job over every GPU of the machine, for the GPU test. It never
// calls tracedb: the test records it with the NCCL profiler plugin, CUPTI and NVTX injected
// through the environment. Per step it launches a kernel ("scale", loaded from PTX through the
// driver API, so no nvcc is needed to build this; libcuda is opened at run time, so the program
// starts, and says why it skips, on a machine without a driver) on every GPU, then one
// ncclAllReduce per GPU in a group, inside an NVTX range "step", and checks the reduced values.
// Prints what it did:
//   devices D / steps S / scale_kernels K / allreduce_calls A / ok
// Exit codes: 0 done, 77 no usable GPU (the reason on stdout), 1 a CUDA/NCCL error or a wrong sum.
// usage: gpu_program [STEPS]
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "nvtx3/nvToolsExt.h"

namespace {

// out[i] *= a for i < n.
const char kPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry scale(.param .u64 p, .param .u32 n, .param .f32 a)
{
  .reg .pred %pr;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  ld.param.f32 %f1, [a];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %pr, %r5, %r1;
  @%pr bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f2, [%rd4];
  mul.f32 %f2, %f2, %f1;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
)";

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)
// The driver calls, from libcuda.so.1 opened at run time.
CUresult (*ModuleLoadData)(CUmodule*, const void*);
CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, CUstream, void**, void**);

#define CHECK_CU(x)                                                               \
  do {                                                                            \
    CUresult e = (x);                                                             \
    if (e != CUDA_SUCCESS) {                                                      \
      fprintf(stderr, "%s:%d %s: CUDA driver error %d\n", __FILE__, __LINE__, #x, \
              static_cast<int>(e));                                               \
      return 1;                                                                   \
    }                                                                             \
  } while (0)
#define CHECK_NCCL(x)                                                                   \
  do {                                                                                  \
    ncclResult_t e = (x);                                                               \
    if (e != ncclSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(e)); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 5;
  int ndev = 0;
  const cudaError_t probe = cudaGetDeviceCount(&ndev);
  if (probe != cudaSuccess || ndev == 0) {
    printf("skip: no CUDA device (%s)\n",
           probe != cudaSuccess ? cudaGetErrorString(probe) : "0 devices");
    return 77;
  }
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (libcuda == nullptr) {
    printf("skip: no CUDA driver (%s)\n", dlerror());
    return 77;
  }
  ModuleLoadData = reinterpret_cast<decltype(ModuleLoadData)>(dlsym(libcuda, "cuModuleLoadData"));
  ModuleGetFunction =
      reinterpret_cast<decltype(ModuleGetFunction)>(dlsym(libcuda, "cuModuleGetFunction"));
  LaunchKernel = reinterpret_cast<decltype(LaunchKernel)>(dlsym(libcuda, "cuLaunchKernel"));
  if (!ModuleLoadData || !ModuleGetFunction || !LaunchKernel) {
    fprintf(stderr, "libcuda.so.1 lacks cuModuleLoadData/cuModuleGetFunction/cuLaunchKernel\n");
    return 1;
  }
  const int n = 1 << 20;
  std::vector<int> devs(ndev);
  std::vector<float*> buf(ndev);
  std::vector<cudaStream_t> streams(ndev);
  std::vector<CUfunction> scale(ndev);
  std::vector<ncclComm_t> comms(ndev);
  for (int d = 0; d < ndev; ++d) {
    devs[d] = d;
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaFree(nullptr));  // the primary context, current for the driver calls
    CHECK_CUDA(cudaMalloc(&buf[d], n * sizeof(float)));
    CHECK_CUDA(cudaStreamCreate(&streams[d]));
    CUmodule module;
    CHECK_CU(ModuleLoadData(&module, kPtx));
    CHECK_CU(ModuleGetFunction(&scale[d], module, "scale"));
  }
  CHECK_NCCL(ncclCommInitAll(comms.data(), ndev, devs.data()));

  std::vector<float> host(n);
  int kernels = 0, allreduces = 0;
  for (int s = 0; s < steps; ++s) {
    nvtxRangePushA("step");
    for (int d = 0; d < ndev; ++d) {
      for (int i = 0; i < n; ++i) host[i] = static_cast<float>(d + 1);
      CHECK_CUDA(cudaSetDevice(d));
      CHECK_CUDA(cudaMemcpyAsync(buf[d], host.data(), n * sizeof(float), cudaMemcpyHostToDevice,
                                 streams[d]));
      CHECK_CUDA(cudaStreamSynchronize(streams[d]));
      CUdeviceptr p = reinterpret_cast<CUdeviceptr>(buf[d]);
      unsigned int count = n;
      float a = 2.0f;
      void* args[] = {&p, &count, &a};
      CHECK_CU(LaunchKernel(scale[d], (n + 255) / 256, 1, 1, 256, 1, 1, 0,
                            reinterpret_cast<CUstream>(streams[d]), args, nullptr));
      ++kernels;
    }
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < ndev; ++d) {
      CHECK_NCCL(ncclAllReduce(buf[d], buf[d], n, ncclFloat, ncclSum, comms[d], streams[d]));
      ++allreduces;
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int d = 0; d < ndev; ++d) {
      CHECK_CUDA(cudaSetDevice(d));
      CHECK_CUDA(cudaStreamSynchronize(streams[d]));
    }
    nvtxRangePop();
    // sum over d of 2 * (d + 1) = ndev * (ndev + 1)
    float got = 0;
    CHECK_CUDA(cudaMemcpy(&got, buf[ndev - 1] + n - 1, sizeof(float), cudaMemcpyDeviceToHost));
    if (got != static_cast<float>(ndev * (ndev + 1))) {
      fprintf(stderr, "step %d: allreduce gave %g, expected %d\n", s, got, ndev * (ndev + 1));
      return 1;
    }
  }
  for (int d = 0; d < ndev; ++d) ncclCommDestroy(comms[d]);
  printf("devices %d\nsteps %d\nscale_kernels %d\nallreduce_calls %d\nok\n", ndev, steps, kernels,
         allreduces);
  return 0;
}
