/*
 * nccl_log.c - reading NCCL's INFO lines about channels and comparing them with braid's
 * (nccl_log.h).
 */
#include "nccl_log.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading -------------------------------------------------------------------------- */

static int add_link(struct nccl_log_link** list, int* n, int rank, int ch, int up, const int* down) {
  struct nccl_log_link* l = realloc(*list, (size_t)(*n + 1) * sizeof(**list));
  if (l == NULL) return -1;
  *list = l;
  l[*n].rank = rank;
  l[*n].channel = ch;
  l[*n].up = up;
  for (int i = 0; i < 3; i++) l[*n].down[i] = down[i];
  (*n)++;
  return 0;
}

static void parse_search(const char* m, struct nccl_log_search* s) {
  struct nccl_log_search t = {0};
  if (sscanf(m, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %7[A-Z2]/%7[A-Z2], sameChannels %d", &t.pattern,
             &t.cross_nic, &t.nchannels, &t.bw_intra, &t.bw_inter, t.type_intra, t.type_inter, &t.same_channels) == 8) {
    t.valid = 1;
    *s = t;
  }
}

/* "Channel 03/24 : 0 1 2 3" (not a connection line "Channel 00/0 : 0[0] -> 1[1] via ..."). */
static void parse_channel(const char* m, struct nccl_log* log) {
  int c, n, off;
  if (sscanf(m, "Channel %d/%d :%n", &c, &n, &off) != 2 || strchr(m, '[') || strstr(m, "->")) return;
  if (c < 0 || c >= BRAID_MAX_CHANNELS || n < 1) return;
  log->nchannels = n;
  const char* p = m + off;
  int len = 0, r, k;
  while (len < BRAID_NCCL_LOG_MAX_RANKS && sscanf(p, "%d%n", &r, &k) == 1) {
    log->order[c * BRAID_NCCL_LOG_MAX_RANKS + len++] = r;
    p += k;
  }
  log->order_len[c] = len;
}

/* "Trees [0] 1/-1/-1->0->-1 [1] ..." */
static int parse_trees(const char* m, struct nccl_log* log) {
  const char* p = m + strlen("Trees");
  int c, d[3], r, u, k;
  while ((p = strchr(p, '[')) != NULL) {
    if (sscanf(p, "[%d] %d/%d/%d->%d->%d%n", &c, &d[0], &d[1], &d[2], &r, &u, &k) != 6) break;
    if (add_link(&log->trees, &log->ntrees, r, c, u, d) != 0) return -1;
    p += k;
  }
  return 0;
}

static int parse_line(const char* m, const char* prefix, size_t plen, struct nccl_log* log, char* ring_prefix) {
  int a, b, c, d, e, f, g, h;
  int down[3] = {-1, -1, -1};
  if (sscanf(m, "NCCL version %d.%d.%d", &a, &b, &c) == 3 && log->version == 0) log->version = a * 10000 + b * 100 + c;
  if (sscanf(m, "comm %*s rank %d nRanks %d nNodes %d localRanks %d", &a, &b, &c, &d) == 4) {
    log->nranks = b;
    log->nnodes = c;
    if (log->local_ranks == 0) log->local_ranks = d;
  }
  if (strncmp(m, "Pattern ", 8) == 0) {
    struct nccl_log_search s = {0};
    parse_search(m, &s);
    if (s.valid && s.pattern == BRAID_GRAPH_PATTERN_RING && !log->ring.valid) {
      log->ring = s;
      snprintf(ring_prefix, 128, "%.*s", (int)plen, prefix);
    } else if (s.valid && log->ring.valid && !log->tree.valid && strncmp(ring_prefix, prefix, plen) == 0) {
      log->tree = s; /* the search right after the ring's, by the same process */
    }
  }
  if (strncmp(m, "Channel ", 8) == 0) parse_channel(m, log);
  if (strncmp(m, "Trees", 5) == 0 && parse_trees(m, log) != 0) return -1;
  if (sscanf(m, "Ring %d : %d -> %d -> %d", &a, &b, &c, &d) == 4) {
    down[0] = d;
    if (add_link(&log->rings, &log->nrings, c, a, b, down) != 0) return -1;
  }
  if (sscanf(m, "Tree %d : %d -> %d -> %d/%d/%d", &e, &f, &g, &down[0], &down[1], &down[2]) == 6) {
    h = 0; /* "Tree" lines duplicate what "Trees" says; keep them when a rank printed no Trees line */
    for (int i = 0; i < log->ntrees && !h; i++) h = log->trees[i].rank == g && log->trees[i].channel == e;
    if (!h && add_link(&log->trees, &log->ntrees, g, e, f, down) != 0) return -1;
  }
  return 0;
}

int braid_nccl_log_parse(const char* text, struct nccl_log* log) {
  char ring_prefix[128] = "";
  memset(log, 0, sizeof(*log));
  log->order = calloc((size_t)BRAID_MAX_CHANNELS * BRAID_NCCL_LOG_MAX_RANKS, sizeof(int));
  if (log->order == NULL) return -1;
  for (const char* line = text; line && *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[8192];
    if (len >= sizeof(buf)) len = sizeof(buf) - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    const char* m = strstr(buf, "NCCL INFO ");
    if (m != NULL) {
      const char* pre_end = strchr(buf, ' '); /* "host:pid:tid" */
      size_t plen = pre_end && pre_end < m ? (size_t)(pre_end - buf) : 0;
      if (parse_line(m + strlen("NCCL INFO "), buf, plen, log, ring_prefix) != 0) return -1;
    }
    line = end ? end + 1 : NULL;
  }
  return 0;
}

int braid_nccl_log_read(const char* path, struct nccl_log* log) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "braid-topo: cannot read %s\n", path);
    return -1;
  }
  size_t cap = 1 << 20, len = 0, n;
  char* text = malloc(cap + 1);
  while (text != NULL && (n = fread(text + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      char* t = realloc(text, 2 * cap + 1);
      if (t == NULL) break;
      text = t;
      cap *= 2;
    }
  }
  fclose(f);
  if (text == NULL) return -1;
  text[len] = '\0';
  int rc = braid_nccl_log_parse(text, log);
  free(text);
  return rc;
}

void braid_nccl_log_free(struct nccl_log* log) {
  free(log->order);
  free(log->trees);
  free(log->rings);
  memset(log, 0, sizeof(*log));
}

/* ---- comparing ------------------------------------------------------------------------ */

static int search_diff(FILE* out, const char* what, const struct nccl_log_search* n, int pattern, int cross, int nch,
                       float bwi, float bwe, int ti, int te, int same) {
  if (!n->valid) return 0;
  int d = n->pattern != pattern || n->nchannels != nch || fabsf(n->bw_intra - bwi) > 1e-3f ||
          fabsf(n->bw_inter - bwe) > 1e-3f || strcmp(n->type_intra, braid_topo_path_name(ti)) != 0 ||
          strcmp(n->type_inter, braid_topo_path_name(te)) != 0 || n->cross_nic != cross || n->same_channels != same;
  if (d)
    fprintf(out,
            "%s search: NCCL Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d\n"
            "%*s  braid Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d\n",
            what, n->pattern, n->cross_nic, n->nchannels, n->bw_intra, n->bw_inter, n->type_intra, n->type_inter,
            n->same_channels, (int)strlen(what), "", pattern, cross, nch, bwi, bwe, braid_topo_path_name(ti),
            braid_topo_path_name(te), same);
  return d;
}

static void print_ranks(FILE* out, const int* r, int n) {
  for (int i = 0; i < n; i++) fprintf(out, " %d", r[i]);
}

static int links_diff(FILE* out, const struct nccl_log_link* l, int n, const struct braid_channel_graph* g, int tree) {
  int diffs = 0;
  for (int i = 0; i < n; i++) {
    const struct nccl_log_link* x = &l[i];
    if (x->rank < 0 || x->rank >= g->nranks) continue;
    if (x->channel >= g->nchannels) {
      if (diffs++ < 20)
        fprintf(out, "%s of rank %d on channel %d: braid has %d channels\n", tree ? "tree" : "ring", x->rank,
                x->channel, g->nchannels);
      continue;
    }
    int up, d[3] = {-1, -1, -1};
    if (tree) {
      const struct braid_tree_links* t = braid_graph_tree(g, x->channel, x->rank);
      up = t->up;
      for (int k = 0; k < 3; k++) d[k] = t->down[k];
    } else {
      up = braid_graph_ring_prev(g, x->channel, x->rank);
      d[0] = braid_graph_ring_next(g, x->channel, x->rank);
    }
    int same = up == x->up && d[0] == x->down[0] && (!tree || (d[1] == x->down[1] && d[2] == x->down[2]));
    if (same) continue;
    if (diffs++ < 20) {
      if (tree)
        fprintf(out, "tree channel %d rank %d: NCCL %d/%d/%d->%d->%d, braid %d/%d/%d->%d->%d\n", x->channel, x->rank,
                x->down[0], x->down[1], x->down[2], x->rank, x->up, d[0], d[1], d[2], x->rank, up);
      else
        fprintf(out, "ring channel %d rank %d: NCCL %d -> %d -> %d, braid %d -> %d -> %d\n", x->channel, x->rank, x->up,
                x->rank, x->down[0], up, x->rank, d[0]);
    }
  }
  if (diffs > 20) fprintf(out, "... %d %s differences in all\n", diffs, tree ? "tree" : "ring");
  return diffs;
}

int braid_nccl_log_compare(const struct nccl_log* log, const struct braid_channel_graph* g, FILE* out) {
  int diffs = 0, checked = 0;
  if (log->nranks > 0 && log->nranks != g->nranks) {
    fprintf(out, "ranks: NCCL %d, braid %d\n", log->nranks, g->nranks);
    diffs++;
  }
  diffs += search_diff(out, "ring", &log->ring, g->pattern, g->cross_nic, g->nrings, g->bw_intra, g->bw_inter,
                       g->type_intra, g->type_inter, g->same_channels);
  diffs += search_diff(out, "tree", &log->tree, g->tree_pattern, g->cross_nic, g->nrings, g->tree_bw_intra,
                       g->tree_bw_inter, g->tree_type_intra, g->tree_type_inter, g->tree_same_channels);
  checked += log->ring.valid + log->tree.valid;
  if (log->nchannels > 0) {
    checked++;
    if (log->nchannels != g->nchannels) {
      fprintf(out, "channels: NCCL %d, braid %d\n", log->nchannels, g->nchannels);
      diffs++;
    }
  }
  int* order = calloc((size_t)g->nranks, sizeof(int));
  for (int c = 0; c < BRAID_MAX_CHANNELS && order != NULL; c++) {
    int n = log->order_len[c];
    if (n == 0) continue;
    checked++;
    const int* theirs = &log->order[c * BRAID_NCCL_LOG_MAX_RANKS];
    if (c >= g->nchannels || n != g->nranks) {
      fprintf(out, "Channel %02d: NCCL lists %d ranks, braid has %d channels of %d ranks\n", c, n, g->nchannels,
              g->nranks);
      diffs++;
      continue;
    }
    braid_graph_ring_from(g, c, theirs[0] >= 0 && theirs[0] < g->nranks ? theirs[0] : 0, order);
    if (memcmp(order, theirs, (size_t)n * sizeof(int)) != 0) {
      fprintf(out, "Channel %02d: NCCL", c);
      print_ranks(out, theirs, n);
      fprintf(out, ", braid");
      print_ranks(out, order, n);
      fprintf(out, "\n");
      diffs++;
    }
  }
  free(order);
  diffs += links_diff(out, log->rings, log->nrings, g, 0);
  diffs += links_diff(out, log->trees, log->ntrees, g, 1);
  checked += log->nrings + log->ntrees;
  if (diffs == 0)
    fprintf(out, "braid agrees with the log: %d searches, %d channel orders, %d ring and %d tree links compared\n",
            log->ring.valid + log->tree.valid,
            checked - log->ring.valid - log->tree.valid - (log->nchannels > 0) - log->nrings - log->ntrees, log->nrings,
            log->ntrees);
  else
    fprintf(out, "%d difference%s between the log and braid\n", diffs, diffs == 1 ? "" : "s");
  return diffs;
}
