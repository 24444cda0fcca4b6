/*
 * test_topo.c - the system graph (src/topo*.c): loading the fixtures of tests/topo, path
 * types and bandwidths, PXN, the P2P and GDR decisions and their environment variables,
 * malformed XML reported with its line, load -> dump -> load stability, bus ids, and the
 * detector on this machine and on a fake sysfs tree. No hardware needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "fixture.h"
#include "topo/topo.h"

/* tests/topo/<name>, found from the repository root or from a build directory below it. */

static void env_reset(void) {
  const char* vars[] = {"NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE",    "NCCL_NET_GDR_LEVEL", "NCCL_PXN_DISABLE",
                        "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", "NCCL_CROSS_NIC"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
  braid_param_reload();
}

static struct braid_topo_system* load(const char* name) {
  struct braid_topo_system* sys = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture(name), &sys), ncclSuccess);
  ck_assert_ptr_nonnull(sys);
  return sys;
}

static int gpu(const struct braid_topo_system* s, int i) {
  return s->gpus[i];
}
static int nic(const struct braid_topo_system* s, int i) {
  return s->nics[i];
}
static int ptype(const struct braid_topo_system* s, int a, int b) {
  return braid_topo_path(s, a, b)->type;
}

/* ---- fixtures ---- */

static const struct {
  const char* name;
  int ngpus, nnics, ncpus;
} fixtures[] = {
    {"dgx-h100.xml", 8, 8, 2}, {"pcie-4gpu.xml", 4, 1, 2}, {"nvl72.xml", 72, 72, 36}, {"cpu-only.xml", 0, 1, 1}};

START_TEST(test_fixture_loads) {
  env_reset();
  struct braid_topo_system* s = load(fixtures[_i].name);
  ck_assert_int_eq(s->ngpus, fixtures[_i].ngpus);
  ck_assert_int_eq(s->nnics, fixtures[_i].nnics);
  ck_assert_int_eq(s->ncpus, fixtures[_i].ncpus);
  for (int a = 0; a < s->nnodes; a++)
    for (int b = 0; b < s->nnodes; b++) { /* every device reaches every GPU, CPU and NIC (NCCL
                                              keeps paths to those), symmetric types */
      int ka = s->nodes[a].kind, kb = s->nodes[b].kind;
      if (a == s->nvs || b == s->nvs || ka == BRAID_TOPO_PCI || ka == BRAID_TOPO_NICDEV || kb == BRAID_TOPO_PCI ||
          kb == BRAID_TOPO_NICDEV)
        continue;
      ck_assert_int_ne(ptype(s, a, b), BRAID_PATH_DIS);
      ck_assert_int_eq(braid_topo_path(s, a, b)->direct, braid_topo_path(s, b, a)->direct);
    }
  for (int i = 1; i < s->ngpus; i++) ck_assert_int_lt(s->nodes[gpu(s, i - 1)].dev, s->nodes[gpu(s, i)].dev);
  braid_topo_free(s);
}
END_TEST

START_TEST(test_dgx_paths) {
  env_reset();
  struct braid_topo_system* s = load("dgx-h100.xml");
  ck_assert_int_ge(s->nvs, 0);
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++)
      if (a != b) {
        ck_assert_int_eq(ptype(s, gpu(s, a), gpu(s, b)), BRAID_PATH_NVL);
        ck_assert_float_eq_tol(braid_topo_path(s, gpu(s, a), gpu(s, b))->bw, 18 * 20.6f, 0.01f);
      }
  ck_assert_int_eq(ptype(s, gpu(s, 0), nic(s, 0)), BRAID_PATH_PIX);
  ck_assert_float_eq_tol(braid_topo_path(s, gpu(s, 0), nic(s, 0))->bw, 48.0f, 0.01f); /* Gen5 x16 */
  /* NIC1 is GPU1's: GPU0 reaches it through GPU1 (PXN), its own path being PHB */
  ck_assert_int_eq(ptype(s, gpu(s, 0), nic(s, 1)), BRAID_PATH_PXN);
  ck_assert_int_eq(braid_topo_path(s, gpu(s, 0), nic(s, 1))->direct, BRAID_PATH_PHB);
  ck_assert_int_eq(braid_topo_path(s, gpu(s, 0), nic(s, 4))->direct, BRAID_PATH_SYS);
  ck_assert_int_eq(ptype(s, nic(s, 4), gpu(s, 0)), BRAID_PATH_SYS); /* PXN only towards the NIC */
  ck_assert_int_eq(ptype(s, gpu(s, 0), gpu(s, 0)), BRAID_PATH_LOC);
  /* PXN: NIC1 through GPU1 */
  ck_assert_int_eq(s->pxn[0 * s->nnics + 1].relay, gpu(s, 1));
  ck_assert_int_eq(s->pxn[0 * s->nnics + 0].relay, -1);
  ck_assert(braid_topo_nvls_capable(s));
  int nodes[32], links[32], n;
  ck_assert_int_eq(braid_topo_path_walk(s, gpu(s, 0), gpu(s, 5), 32, nodes, links, &n), ncclSuccess);
  ck_assert_int_eq(n, 3); /* GPU0 -> NVSwitch -> GPU5 */
  ck_assert_int_eq(nodes[1], s->nvs);
  braid_topo_free(s);
}
END_TEST

START_TEST(test_pcie_and_nvl72_paths) {
  env_reset();
  struct braid_topo_system* s = load("pcie-4gpu.xml");
  ck_assert_int_eq(ptype(s, gpu(s, 0), gpu(s, 1)), BRAID_PATH_PIX);
  ck_assert_float_eq_tol(braid_topo_path(s, gpu(s, 0), gpu(s, 1))->bw, 24.0f, 0.01f); /* Gen4 x16 */
  ck_assert_int_eq(braid_topo_path(s, gpu(s, 0), gpu(s, 2))->direct, BRAID_PATH_SYS);
  ck_assert_int_eq(ptype(s, gpu(s, 2), nic(s, 0)), BRAID_PATH_SYS);
  ck_assert(!braid_topo_nvls_capable(s));
  braid_topo_free(s);
  s = load("nvl72.xml");
  ck_assert_int_eq(ptype(s, gpu(s, 0), gpu(s, 71)), BRAID_PATH_NVL);
  ck_assert_int_eq(ptype(s, gpu(s, 0), nic(s, 0)), BRAID_PATH_P2C); /* GPU -C2C- Grace -PCIe- NIC */
  ck_assert_int_eq(ptype(s, gpu(s, 0), s->cpus[0]), BRAID_PATH_C2C);
  ck_assert(braid_topo_nvls_capable(s));
  braid_topo_free(s);
}
END_TEST

/* ---- P2P and GDR ---- */

START_TEST(test_p2p_levels) {
  env_reset();
  struct braid_topo_system* s = load("pcie-4gpu.xml");
  int64_t b0 = s->nodes[gpu(s, 0)].id, b1 = s->nodes[gpu(s, 1)].id, b2 = s->nodes[gpu(s, 2)].id;
  int ok = -1;
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b1, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 1); /* PIX <= PXB */
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b2, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0); /* SYS */
  /* beyond the level: the GPU pair goes through host memory, the destination's CPU (NCCL) */
  ck_assert_int_eq(braid_topo_path(s, gpu(s, 0), gpu(s, 2))->relay, braid_topo_node_cpu(s, gpu(s, 2)));
  ck_assert_int_ne(braid_topo_node_cpu(s, gpu(s, 2)), braid_topo_node_cpu(s, gpu(s, 0)));
  ck_assert_int_eq(braid_topo_p2p_allowed(s, -1, -1, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0); /* host mode */
  setenv("NCCL_P2P_LEVEL", "SYS", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b2, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 1);
  setenv("NCCL_P2P_LEVEL", "1", 1); /* legacy: PIX */
  braid_param_reload();
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b1, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 1);
  setenv("NCCL_P2P_LEVEL", "nvl", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b1, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0);
  setenv("NCCL_P2P_LEVEL", "BOGUS", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b1, &ok), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "BOGUS"));
  unsetenv("NCCL_P2P_LEVEL");
  setenv("NCCL_P2P_DISABLE", "1", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_p2p_allowed(s, b0, b1, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0);
  braid_topo_free(s);
}
END_TEST

START_TEST(test_gdr_levels) {
  env_reset();
  struct braid_topo_system* s = load("dgx-h100.xml");
  int64_t g0 = s->nodes[gpu(s, 0)].id;
  int ok = -1;
  ck_assert_int_eq(braid_topo_gdr_allowed(s, g0, 0, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 1); /* PIX */
  ck_assert_int_eq(braid_topo_gdr_allowed(s, g0, 4, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 1); /* SYS, but through GPU4 by PXN, which is PIX to NIC4 */
  setenv("NCCL_PXN_DISABLE", "1", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_gdr_allowed(s, g0, 4, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0);
  setenv("NCCL_NET_GDR_LEVEL", "LOC", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_gdr_allowed(s, g0, 0, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0);
  ck_assert_int_eq(braid_topo_gdr_allowed(s, g0, 99, &ok), ncclInvalidArgument);
  braid_topo_free(s);
  s = load("cpu-only.xml"); /* no GPU: never */
  ck_assert_int_eq(braid_topo_gdr_allowed(s, -1, 0, &ok), ncclSuccess);
  ck_assert_int_eq(ok, 0);
  braid_topo_free(s);
}
END_TEST

/* ---- malformed XML: the error names the line ---- */

static const struct {
  const char* text;
  const char* where; /* expected in the WARN text */
} bad_xml[] = {
    {"<system version=\"1\">\n <cpu numaid=\"0\">\n </pci>\n</system>\n", "t.xml:3:"},
    {"<system version=\"1\">\n <cpu numaid=\"0\">\n  <pci busid=\"0000:01:00.0\"\n </cpu>\n</system>\n", "t.xml:4:"},
    {"<system version=\"1\">\n <cpu numaid=\"0>\n </cpu>\n</system>\n", "t.xml:3:"},
    {"<system version=\"1\">\n\n <cpu numaid=\"0\">\n", "(line 3) is not closed"},
    {"<system>\n <cpu>\n  <pci class=\"0x0604\">\n   <pci busid=\"0000:01:00.0\">\n    <gpu dev=\"0\"/>\n   "
     "</pci>\n  </pci>\n </cpu>\n</system>\n",
     "line 3"},
    {"<graphs/>\n", "no <system>"},
    {"text outside\n", "t.xml:1:"},
    {"", "no element"},
};

START_TEST(test_malformed_xml) {
  env_reset();
  struct braid_topo_system* s = NULL;
  ncclResult_t res = braid_topo_load_xml_string(bad_xml[_i].text, "t.xml", &s);
  ck_assert_int_eq(res, ncclInvalidArgument);
  ck_assert_ptr_null(s);
  const char* err = braid_debug_last_error();
  ck_assert_msg(strstr(err, bad_xml[_i].where) != NULL, "case %d: expected '%s' in '%s'", _i, bad_xml[_i].where, err);
}
END_TEST

/* What NCCL reads without complaint reads here too (strtol numbers, loose bus ids, unknown
 * elements skipped, a repeated attribute: the first), with NCCL's values. */
static const struct {
  const char* text;
  int ngpus, sm, nvs;
} lenient_xml[] = {
    {"<system version=\"1\">\n <cpu numaid=\"0\" numaid=\"1\"/>\n</system>\n", 0, 0, 0},
    {"<system>\n <cpu>\n  <pci busid=\"0000:01:00.0\" link_width=\"16\">\n   <gpu dev=\"0\" sm=\"abc\"/>\n  </pci>\n "
     "</cpu>\n</system>\n",
     1, 0, 0},
    {"<system>\n <cpu>\n  <pci busid=\"zz:01\">\n   <gpu dev=\"0\" sm=\"90.0\"/>\n  </pci>\n </cpu>\n</system>\n", 1,
     90, 0},
    {"<system>\n <cpu>\n  <pci busid=\"0000:01:00.0\">\n   <gpu dev=\"0\" sm=\"90\">\n    <nvlink target=\"x\" "
     "count=\"2\"/>\n   </gpu>\n  </pci>\n </cpu>\n</system>\n",
     1, 90, 1},
    {"<system>\n <gpu dev=\"0\"/>\n <cpu><xgmi/><pci busid=\"0000:01:00.0\" link_speed=\"\"><gpu dev=\"0\" sm=\"80\">"
     "<xgmi target=\"0000:02:00.0\" count=\"1\" tclass=\"0x120000\"/></gpu></pci></cpu>\n</system>\n",
     1, 80, 0},
};

START_TEST(test_lenient_xml) {
  env_reset();
  struct braid_topo_system* s = NULL;
  ck_assert_int_eq(braid_topo_load_xml_string(lenient_xml[_i].text, "l.xml", &s), ncclSuccess);
  ck_assert_int_eq(s->ngpus, lenient_xml[_i].ngpus);
  if (s->ngpus) ck_assert_int_eq(s->nodes[gpu(s, 0)].sm, lenient_xml[_i].sm);
  ck_assert_int_eq(s->nvs >= 0, lenient_xml[_i].nvs);
  braid_topo_free(s);
}
END_TEST

/* Absurd numbers a damaged file may hold saturate; they never go negative (found by a
 * sanitizer run over mutated real files: PCIe width x rate overflowed an int). */
START_TEST(test_absurd_numbers) {
  env_reset();
  struct braid_topo_system* s = NULL;
  const char* text =
      "<system>\n <cpu numaid=\"0\">\n  <pci busid=\"0000:01:00.0\" link_speed=\"32.0 GT/s PCIe\" "
      "link_width=\"99999999999\">\n   <gpu dev=\"0\" sm=\"90\"/>\n  </pci>\n  <pci busid=\"0000:02:00.0\" "
      "link_width=\"16\">\n   <gpu dev=\"1\" sm=\"90\"/>\n  </pci>\n </cpu>\n</system>\n";
  ck_assert_int_eq(braid_topo_load_xml_string(text, "absurd.xml", &s), ncclSuccess);
  ck_assert_int_eq(s->ngpus, 2);
  ck_assert(braid_topo_path(s, gpu(s, 0), s->cpus[0])->bw > 0);
  ck_assert(braid_topo_path(s, gpu(s, 0), gpu(s, 1))->bw > 0);
  braid_topo_free(s);
}
END_TEST

START_TEST(test_missing_file) {
  env_reset();
  struct braid_topo_system* s = NULL;
  ck_assert_int_eq(braid_topo_load_xml("/nonexistent/braid.xml", &s), ncclInvalidArgument);
  ck_assert_int_eq(braid_topo_load_xml(NULL, &s), ncclInvalidArgument);
  ck_assert_ptr_null(s);
}
END_TEST

/* ---- round trip ---- */

START_TEST(test_round_trip) {
  env_reset();
  struct braid_topo_system *a = load(fixtures[_i].name), *b = NULL, *c = NULL;
  char *t1 = NULL, *t2 = NULL, *t3 = NULL;
  ck_assert_int_eq(braid_topo_dump_xml_string(a, &t1), ncclSuccess);
  ck_assert_int_eq(braid_topo_load_xml_string(t1, "dump1", &b), ncclSuccess);
  ck_assert_int_eq(braid_topo_dump_xml_string(b, &t2), ncclSuccess);
  ck_assert_str_eq(t1, t2);
  /* through a file, as NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE would */
  char path[64];
  snprintf(path, sizeof(path), "/tmp/braid-topo-rt-%d.xml", (int)getpid());
  ck_assert_int_eq(braid_topo_dump_xml(b, path), ncclSuccess);
  ck_assert_int_eq(braid_topo_load_xml(path, &c), ncclSuccess);
  ck_assert_int_eq(braid_topo_dump_xml_string(c, &t3), ncclSuccess);
  ck_assert_str_eq(t1, t3);
  ck_assert_int_eq(c->nnodes, a->nnodes);
  for (int i = 0; i < a->nnodes; i++)
    for (int j = 0; j < a->nnodes; j++) {
      ck_assert_int_eq(ptype(a, i, j), ptype(c, i, j));
      ck_assert_float_eq(braid_topo_path(a, i, j)->bw, braid_topo_path(c, i, j)->bw);
    }
  unlink(path);
  free(t1);
  free(t2);
  free(t3);
  braid_topo_free(a);
  braid_topo_free(b);
  braid_topo_free(c);
}
END_TEST

START_TEST(test_escaping) {
  env_reset();
  const char* text =
      "<!-- a comment -->\n<?xml version=\"1.0\"?>\n<system version='1'>\n <cpu numaid=\"0\" "
      "vendor=\"A&amp;B &lt;x&gt; &quot;q&quot; &#65;\"/>\n</system>\n";
  struct braid_topo_system *s = NULL, *t = NULL;
  char *d1 = NULL, *d2 = NULL;
  ck_assert_int_eq(braid_topo_load_xml_string(text, "esc", &s), ncclSuccess);
  ck_assert_str_eq(braid_topo_xml_get(s->xml->kids[0]->kids[0], "vendor"), "A&B <x> \"q\" A");
  ck_assert_int_eq(braid_topo_dump_xml_string(s, &d1), ncclSuccess);
  ck_assert_int_eq(braid_topo_load_xml_string(d1, "esc2", &t), ncclSuccess);
  ck_assert_int_eq(braid_topo_dump_xml_string(t, &d2), ncclSuccess);
  ck_assert_str_eq(d1, d2);
  free(d1);
  free(d2);
  braid_topo_free(s);
  braid_topo_free(t);
}
END_TEST

START_TEST(test_busid) {
  int64_t id;
  char buf[32];
  ck_assert_int_eq(braid_topo_busid_parse("0000:18:00.0", &id), ncclSuccess);
  ck_assert_int_eq(id, 0x18000);
  ck_assert_int_eq(braid_topo_busid_parse("0011:C7:1f.7", &id), ncclSuccess);
  braid_topo_busid_format(id, buf, sizeof(buf));
  ck_assert_str_eq(buf, "0011:c7:1f.7");
  ck_assert_int_eq(braid_topo_busid_parse("18:00.0", &id), ncclSuccess);
  ck_assert_int_eq(id, 0x18000);
  ck_assert_int_ne(braid_topo_busid_parse("0000:18:00", &id), ncclSuccess);
  ck_assert_int_ne(braid_topo_busid_parse("0000:118:00.0", &id), ncclSuccess);
  ck_assert_int_ne(braid_topo_busid_parse("0000:18:00.0x", &id), ncclSuccess);
  int t;
  ck_assert_int_eq(braid_topo_path_parse("pxn", &t), ncclSuccess);
  ck_assert_int_eq(t, BRAID_PATH_PXN);
  ck_assert_str_eq(braid_topo_path_name(BRAID_PATH_NVB), "NVB");
  ck_assert_int_ne(braid_topo_path_parse("nvlink", &t), ncclSuccess);
}
END_TEST

/* ---- detection ---- */

START_TEST(test_detect_here) {
  env_reset();
  struct braid_topo_detect_opts o = {0, NULL, NULL, NULL, NULL, 1, NULL};
  struct braid_topo_system* s = NULL;
  ck_assert_int_eq(braid_topo_detect_ex(&o, &s), ncclSuccess);
  ck_assert_int_eq(s->ngpus, 0);
  ck_assert_int_ge(s->ncpus, 1);
  char *t1 = NULL, *t2 = NULL;
  struct braid_topo_system* r = NULL;
  ck_assert_int_eq(braid_topo_dump_xml_string(s, &t1), ncclSuccess);
  ck_assert_int_eq(braid_topo_load_xml_string(t1, "detected", &r), ncclSuccess);
  ck_assert_int_eq(braid_topo_dump_xml_string(r, &t2), ncclSuccess);
  ck_assert_str_eq(t1, t2);
  free(t1);
  free(t2);
  braid_topo_free(s);
  braid_topo_free(r);
  /* NCCL_TOPO_FILE wins over detection; NCCL_TOPO_DUMP_FILE receives the result */
  char dump[64];
  snprintf(dump, sizeof(dump), "/tmp/braid-topo-dump-%d.xml", (int)getpid());
  setenv("NCCL_TOPO_FILE", test_fixture("dgx-h100.xml"), 1);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_detect(&s), ncclSuccess);
  ck_assert_int_eq(s->ngpus, 8);
  ck_assert_int_eq(braid_topo_dump_env(s, 1, 0, NULL, NULL), ncclSuccess); /* rank 1: not the dumping rank */
  ck_assert_int_ne(access(dump, F_OK), 0);
  int64_t bus = s->nodes[gpu(s, 3)].id;
  int rank = 11;
  ck_assert_int_eq(braid_topo_dump_env(s, 0, 1, &bus, &rank), ncclSuccess);
  braid_topo_free(s);
  ck_assert_int_eq(braid_topo_load_xml(dump, &s), ncclSuccess);
  ck_assert_int_eq(s->ngpus, 8);
  ck_assert_int_eq(s->nodes[gpu(s, 3)].rank, 11); /* the rank that uses the GPU, as NCCL's dump says */
  braid_topo_free(s);
  unlink(dump);
  /* a NCCL_TOPO_FILE that does not exist: NCCL goes on with detection, so does braid */
  setenv("NCCL_TOPO_FILE", "/nonexistent/topo.xml", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_detect(&s), ncclSuccess);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "/nonexistent/topo.xml"));
  braid_topo_free(s);
}
END_TEST

static void put(const char* root, const char* rel, const char* text) {
  char path[512];
  snprintf(path, sizeof(path), "%s%s", root, rel);
  FILE* f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static void mkdirs(const char* root, const char* rel) {
  char path[512];
  snprintf(path, sizeof(path), "%s%s", root, rel);
  for (char* p = path + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  mkdir(path, 0755);
}

/* A fake sysfs: root port 00:01.0, switch 01:00.0 (up) with downstream ports 02:00.0 and
 * 02:01.0, a GPU 03:00.0 and an Ethernet NIC 04:00.0 below them. */
START_TEST(test_detect_fake_sysfs) {
  env_reset();
  char root[64], link[512], target[512];
  snprintf(root, sizeof(root), "/tmp/braid-fakesys-%d", (int)getpid());
  const char* base = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  const char* devs[][3] = {{"/0000:02:00.0", "0x060400", "0x10b5"},
                           {"/0000:02:00.0/0000:03:00.0", "0x030200", "0x10de"},
                           {"/0000:02:01.0", "0x060400", "0x10b5"},
                           {"/0000:02:01.0/0000:04:00.0", "0x020000", "0x8086"},
                           {"", "0x060400", "0x10b5"}};
  for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
    char d[512], f[600];
    snprintf(d, sizeof(d), "%s%s", base, devs[i][0]);
    mkdirs(root, d);
    snprintf(f, sizeof(f), "%s/class", d);
    put(root, f, devs[i][1]);
    snprintf(f, sizeof(f), "%s/vendor", d);
    put(root, f, devs[i][2]);
    snprintf(f, sizeof(f), "%s/max_link_speed", d);
    put(root, f, "16.0 GT/s PCIe\n");
    snprintf(f, sizeof(f), "%s/max_link_width", d);
    put(root, f, "16\n");
    snprintf(f, sizeof(f), "%s/numa_node", d);
    put(root, f, "0\n");
  }
  mkdirs(root, "/sys/bus/pci/devices");
  const char* ids[] = {"0000:03:00.0", "0000:04:00.0"};
  const char* rel[] = {"/0000:02:00.0/0000:03:00.0", "/0000:02:01.0/0000:04:00.0"};
  for (int i = 0; i < 2; i++) {
    snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", root, ids[i]);
    snprintf(target, sizeof(target), "%s%s%s", root, base, rel[i]);
    ck_assert_int_eq(symlink(target, link), 0);
  }
  mkdirs(root, "/sys/class/net/eth9");
  snprintf(link, sizeof(link), "%s/sys/class/net/eth9/device", root);
  snprintf(target, sizeof(target), "%s%s/0000:02:01.0/0000:04:00.0", root, base);
  ck_assert_int_eq(symlink(target, link), 0);
  put(root, "/sys/class/net/eth9/speed", "100000\n");
  put(root, "/sys/class/net/eth9/type", "1\n");
  mkdirs(root, "/sys/devices/system/node/node0");
  put(root, "/sys/devices/system/node/node0/cpumap", "ff\n");

  int64_t bus = 0x3000;
  int sm = 90;
  struct braid_topo_detect_opts o = {1, &bus, NULL, &sm, root, 1, NULL};
  struct braid_topo_system* s = NULL;
  ck_assert_int_eq(braid_topo_detect_ex(&o, &s), ncclSuccess);
  ck_assert_int_eq(s->ngpus, 1);
  ck_assert_int_eq(s->nnics, 1);
  ck_assert_str_eq(s->nodes[nic(s, 0)].name, "eth9");
  ck_assert_int_eq(s->nodes[nic(s, 0)].speed, 100000);
  ck_assert_int_eq(s->nodes[gpu(s, 0)].sm, 90);
  /* one switch, two ports; no GPUDirect RDMA module in this sysfs: the data goes through the CPU */
  ck_assert_int_eq(braid_topo_path(s, gpu(s, 0), nic(s, 0))->direct, BRAID_PATH_PIX);
  ck_assert_int_eq(ptype(s, gpu(s, 0), nic(s, 0)), BRAID_PATH_PHB);
  ck_assert_float_eq_tol(braid_topo_path(s, gpu(s, 0), nic(s, 0))->bw, 12.5f, 0.01f); /* 100 Gb/s */
  braid_topo_free(s);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_pseudo_gpus) {
  env_reset();
  struct braid_topo_system *s = load("cpu-only.xml"), *p = NULL;
  ck_assert_int_eq(braid_topo_add_pseudo_gpus(s, 4, &p), ncclSuccess);
  ck_assert_int_eq(p->ngpus, 4);
  ck_assert_int_eq(p->pseudo, 4);
  ck_assert_int_eq(ptype(p, gpu(p, 0), gpu(p, 3)), BRAID_PATH_PHB);
  ck_assert_float_eq_tol(braid_topo_path(p, gpu(p, 0), gpu(p, 3))->bw, BRAID_TOPO_BW_SHM, 0.001f);
  ck_assert_int_eq(ptype(p, gpu(p, 0), nic(p, 0)), BRAID_PATH_PHB);
  ck_assert_int_eq(braid_topo_add_pseudo_gpus(s, 0, &p), ncclInvalidArgument);
  braid_topo_free(p);
  braid_topo_free(s);
}
END_TEST

Suite* topo_suite(void) {
  Suite* s = suite_create("topo");
  TCase* tc = tcase_create("load");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_fixture_loads, 0, sizeof(fixtures) / sizeof(fixtures[0]));
  tcase_add_test(tc, test_dgx_paths);
  tcase_add_test(tc, test_pcie_and_nvl72_paths);
  tcase_add_test(tc, test_pseudo_gpus);
  tcase_add_test(tc, test_busid);
  suite_add_tcase(s, tc);
  tc = tcase_create("decisions");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_p2p_levels);
  tcase_add_test(tc, test_gdr_levels);
  suite_add_tcase(s, tc);
  tc = tcase_create("xml");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_malformed_xml, 0, sizeof(bad_xml) / sizeof(bad_xml[0]));
  tcase_add_loop_test(tc, test_lenient_xml, 0, sizeof(lenient_xml) / sizeof(lenient_xml[0]));
  tcase_add_test(tc, test_absurd_numbers);
  tcase_add_test(tc, test_missing_file);
  tcase_add_loop_test(tc, test_round_trip, 0, sizeof(fixtures) / sizeof(fixtures[0]));
  tcase_add_test(tc, test_escaping);
  suite_add_tcase(s, tc);
  tc = tcase_create("detect");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_detect_here);
  tcase_add_test(tc, test_detect_fake_sysfs);
  suite_add_tcase(s, tc);
  return s;
}
