/*
 * ib_gid.c - RoCE GID selection as NCCL does it (ib_gid.h).
 */
#include "transport/net/ib/ib_gid.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/debug.h"
#include "base/param.h"

static uint32_t word(const uint8_t* raw, int i) {
  uint32_t w;
  memcpy(&w, raw + 4 * i, 4);
  return ntohl(w);
}

int braid_ib_gid_family(const uint8_t raw[16]) {
  int mapped = word(raw, 0) == 0 && word(raw, 1) == 0 && word(raw, 2) == 0xffff;
  int mapped_mc = word(raw, 0) == 0xff0e0000u && word(raw, 1) == 0 && word(raw, 2) == 0xffff;
  return mapped || mapped_mc ? AF_INET : AF_INET6;
}

/* Configured (neither :: nor a bare fe80::) and not link-local (fe80::/64). */
static int gid_valid(const uint8_t* raw) {
  uint32_t w0 = word(raw, 0), rest = word(raw, 1) | word(raw, 2) | word(raw, 3);
  if ((w0 | rest) == 0 || (w0 == 0xfe800000u && rest == 0)) return 0;
  return !(w0 == 0xfe800000u && word(raw, 1) == 0);
}

static int in_range(const struct braid_ib_gid_want* w, const uint8_t* raw) {
  int bits = w->prefixlen;
  if (bits <= 0) return 1;
  if (w->family == AF_INET) { /* the prefix's 4 bytes against the GID's last word */
    uint32_t mask = bits >= 32 ? 0xffffffffu : ~(0xffffffffu >> bits);
    return ((word(w->prefix, 0) ^ word(raw, 3)) & mask) == 0;
  }
  for (int i = 0; i < 4 && bits > 0; i++, bits -= 32) {
    uint32_t mask = bits >= 32 ? 0xffffffffu : ~(0xffffffffu >> bits);
    if ((word(w->prefix, i) ^ word(raw, i)) & mask) return 0;
  }
  return 1;
}

int braid_ib_gid_select(const struct braid_ib_gid* tbl, int n, const struct braid_ib_gid_want* w) {
  int pick = 0;
  for (int i = 1; i < n; i++) {
    const struct braid_ib_gid *cur = &tbl[pick], *c = &tbl[i];
    int cfam = braid_ib_gid_family(c->raw), ok = in_range(w, c->raw);
    if (cfam != braid_ib_gid_family(cur->raw) && cfam == w->family && ok) {
      pick = i;
      continue;
    }
    if (cfam != w->family || !gid_valid(c->raw) || !ok) continue;
    if ((cur->version != c->version || !gid_valid(cur->raw)) && c->version == w->version) pick = i;
  }
  return pick;
}

void braid_ib_gid_want_env(struct braid_ib_gid_want* w) {
  memset(w, 0, sizeof(*w));
  w->family = braid_param_int(BRAID_PARAM_IB_ADDR_FAMILY) == 1 ? AF_INET6 : AF_INET;
  w->version = (int)braid_param_int(BRAID_PARAM_IB_ROCE_VERSION_NUM);
  const char* range = braid_param_str(BRAID_PARAM_IB_ADDR_RANGE);
  if (range == NULL || range[0] == '\0') return;
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", range);
  char* slash = strchr(buf, '/');
  if (slash == NULL) return; /* NCCL: no mask, no range */
  *slash = '\0';
  const char* fam = w->family == AF_INET ? "AF_INET" : "AF_INET6";
  if (inet_pton(w->family, buf, w->prefix) != 1) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB: Ip address '%s' is invalid for family %s, ignoring address",
               buf, fam);
    return;
  }
  int bits = atoi(slash + 1);
  if (bits < 0 || bits > (w->family == AF_INET ? 32 : 128)) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB: Ip address mask '%d' is invalid for family %s, ignoring mask",
               bits, fam);
    return;
  }
  w->prefixlen = bits;
}
