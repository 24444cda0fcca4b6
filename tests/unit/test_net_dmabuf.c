/*
 * test_net_dmabuf.c - the net plugin adapter registers device memory as NCCL does for a plugin
 * that declares NCCL_PTR_DMABUF: a dma-buf of the pages (the device layer's dmabuf_get) through
 * the plugin's regMrDmaBuf, with type CUDA and the pointer's offset in the dma-buf; host memory
 * still goes through regMr. The plugin is tests/net/dmabuf_plugin.c (it records what it was
 * given and reads the dma-buf); device memory is the fake GPU's (BRAID_FAKE_GPU: its dma-buf is
 * the allocation's shared-memory segment). No GPU or NIC is involved.
 */
#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "device/device.h"
#include "harness.h"
#include "transport/net/net.h"
#include "transport/net/plugin/nccl_adapt.h"

/* Mirrors dmabuf_plugin.c's record. */
struct dmabuf_probe_record {
  int calls_reg_mr, calls_reg_dmabuf, type, fd_valid;
  unsigned long long offset;
  size_t size;
  unsigned char head[16];
};

static const char* probe_path(void) {
  static char path[PATH_MAX];
  return harness_runner_path(path, sizeof(path), "../lib/libnccl-net-braidtest-dmabuf.so");
}

static int body_dmabuf(struct harness_rank* r) {
  setenv("BRAID_FAKE_GPU", "1", 1);
  unsetenv("BRAID_HOST_MODE");
  braid_param_reload();
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  REXPECT(r, d != NULL && d->dmabuf_get != NULL, "no fake GPU with dma-bufs");
  void* dl = dlopen(probe_path(), RTLD_NOW | RTLD_LOCAL);
  REXPECT(r, dl != NULL, "cannot open %s: %s", probe_path(), dlerror());
  struct dmabuf_probe_record* rec = dlsym(dl, "dmabufProbeRecord");
  REXPECT(r, rec != NULL, "the probe plugin has no record");
  int v = 0;
  const struct braid_net_v1* net = braid_net_nccl_adapt(dl, probe_path(), BRAID_NCCL_NET_MAX_VERSION, &v);
  REXPECT(r, net != NULL && v == 8, "the adapter took v%d of the probe, expected v8", v);
  RCHECK(r, net->init(NULL));
  struct braid_net_props props;
  memset(&props, 0, sizeof(props));
  RCHECK(r, net->getProperties(0, &props));
  REXPECT(r, props.ptrSupport & BRAID_NET_PTR_DMABUF, "ptrSupport 0x%x lost DMABUF", props.ptrSupport);

  enum { LEN = 3 * 4096, AT = 4096 + 24 };
  unsigned char* gpu = NULL;
  unsigned char host[64];
  RCHECK(r, d->alloc((void**)&gpu, 5 * 4096));
  for (int i = 0; i < LEN; i++) gpu[AT + i] = (unsigned char)(i * 7 + 3); /* the fake GPU's memory is mapped here */
  void *mh = NULL, *mhost = NULL;
  RCHECK(r, net->regMr(NULL, gpu + AT, LEN, BRAID_NET_PTR_CUDA, &mh));
  REXPECT(r, rec->calls_reg_dmabuf == 1 && rec->calls_reg_mr == 0,
          "device memory: %d regMrDmaBuf and %d regMr calls, expected 1 and 0", rec->calls_reg_dmabuf,
          rec->calls_reg_mr);
  REXPECT(r, rec->type == BRAID_NET_PTR_CUDA && rec->size == LEN && rec->fd_valid,
          "regMrDmaBuf got type %d, %zu bytes, fd %s", rec->type, rec->size, rec->fd_valid ? "valid" : "not covering");
  REXPECT(r, memcmp(rec->head, gpu + AT, sizeof(rec->head)) == 0,
          "the dma-buf at offset %llu does not hold the registered memory", rec->offset);
  RCHECK(r, net->deregMr(NULL, mh));
  RCHECK(r, net->regMr(NULL, host, sizeof(host), BRAID_NET_PTR_HOST, &mhost));
  REXPECT(r, rec->calls_reg_mr == 1 && rec->calls_reg_dmabuf == 1 && rec->type == BRAID_NET_PTR_HOST,
          "host memory: %d regMr / %d regMrDmaBuf calls, type %d", rec->calls_reg_mr, rec->calls_reg_dmabuf, rec->type);
  RCHECK(r, net->deregMr(NULL, mhost));
  d->free(gpu);
  return 0;
}

START_TEST(test_dmabuf_reg) {
  ck_assert_int_eq(harness_run(1, HARNESS_PROCS, body_dmabuf, NULL, 60), 0);
}
END_TEST

Suite* net_dmabuf_suite(void);
Suite* net_dmabuf_suite(void) {
  Suite* s = suite_create("net_dmabuf");
  TCase* tc = tcase_create("adapter");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, test_dmabuf_reg);
  suite_add_tcase(s, tc);
  return s;
}
