/* nvtx_program: a plain C program that uses NVTX v3 (header-only) and knows nothing of tracedb.
 * Run with NVTX_INJECTION64_PATH=libtracedb_nvtx.so its NVTX calls become tracedb events; without
 * it they do nothing. It prints what it did, one fact per line, for nvtx_test to compare with the
 * database:
 *   push NAME DEPTH        a push/pop range (DEPTH: nesting level returned by the push)
 *   mark NAME              a mark
 *   counter NAME VALUE     a mark with a numeric payload
 *   async NAME             a start/end range (some overlap, one ends on another thread)
 *   loop N                 N push/pop ranges named "step"
 * usage: nvtx_program [LOOP] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

#include "nvtx3/nvToolsExt.h"

static nvtxRangeId_t ended_elsewhere;

static void* EndOnAnotherThread(void* arg) {
  (void)arg;
  nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "ender");
  nvtxRangePushA("on ender");
  nvtxRangePop();
  nvtxRangeEnd(ended_elsewhere);
  return NULL;
}

int main(int argc, char** argv) {
  int loop = argc > 1 ? atoi(argv[1]) : 1000;
  nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "trainer");

  int d0 = nvtxRangePushA("outer");
  int d1 = nvtxRangePushA("inner");
  nvtxMarkA("checkpoint");
  nvtxRangePop();
  nvtxRangePop();
  printf("push outer %d\npush inner %d\nmark checkpoint\n", d0, d1);

  d0 = nvtxRangePushW(L"wide \u00fcn\u00ef");
  nvtxRangePop();
  printf("push wide_\xc3\xbcn\xc3\xaf %d\n", d0);

  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "forward";
  d0 = nvtxRangePushEx(&a);
  nvtxRangePop();
  printf("push forward %d category 7\n", d0);

  a.category = 0;
  a.message.ascii = "loss";
  a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
  a.payload.dValue = 2.5;
  nvtxMarkEx(&a);
  printf("counter loss 2.5\n");

  /* A domain with a registered string, as NCCL names its ranges. */
  nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
  nvtxStringHandle_t allreduce = nvtxDomainRegisterStringA(nccl, "ncclAllReduce");
  nvtxEventAttributes_t r = {0};
  r.version = NVTX_VERSION;
  r.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  r.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  r.message.registered = allreduce;
  for (int i = 0; i < 3; ++i) {
    d0 = nvtxDomainRangePushEx(nccl, &r);
    nvtxDomainRangePop(nccl);
  }
  printf("push NCCL:_ncclAllReduce 0\npush NCCL:_ncclAllReduce 0\npush NCCL:_ncclAllReduce 0\n");
  nvtxDomainMarkEx(nccl, &r);
  printf("mark NCCL:_ncclAllReduce\n");

  /* Start/end ranges: two overlapping, one of them ended by another thread. */
  nvtxRangeId_t x = nvtxRangeStartA("async A");
  ended_elsewhere = nvtxRangeStartA("async B");
  usleep(1000);
  nvtxRangeEnd(x);
  pthread_t t;
  pthread_create(&t, NULL, EndOnAnotherThread, NULL);
  pthread_join(t, NULL);
  printf("async async_A\nasync async_B\npush on_ender 0\n");
  nvtxEventAttributes_t da = {0};
  da.version = NVTX_VERSION;
  da.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  da.messageType = NVTX_MESSAGE_TYPE_ASCII;
  da.message.ascii = "bucket 3";
  nvtxRangeId_t y = nvtxDomainRangeStartEx(nccl, &da);
  nvtxDomainRangeEnd(nccl, y);
  printf("async NCCL:_bucket_3\n");

  for (int i = 0; i < loop; ++i) {
    nvtxRangePushA("step");
    nvtxRangePop();
  }
  printf("loop %d\n", loop);
  nvtxDomainDestroy(nccl);
  return 0;
}
