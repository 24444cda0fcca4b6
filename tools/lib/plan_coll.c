/*
 * plan_coll.c - one collective priced the textbook way, ring and tree (plan_coll.h).
 */
#include "plan_coll.h"

#include <math.h>
#include <string.h>

#include "base/check.h"
#include "base/debug.h"

double braid_plan_coll_busbw_factor(int coll, int n) {
  if (coll == BRAID_PLAN_SENDRECV || n <= 1) return 1.0;
  double f = (double)(n - 1) / n;
  return coll == BRAID_PLAN_ALLREDUCE ? 2.0 * f : f;
}

static void finish(struct braid_plan_coll_algo* a, double S, double bw, double lat, double factor) {
  a->valid = 1;
  a->step_us = a->steps * lat;
  a->transfer_us = a->bytes / (bw * 1e3);
  a->time_us = a->step_us + a->transfer_us;
  a->algbw = a->time_us > 0 ? S / (a->time_us * 1e3) : 0;
  a->busbw = a->algbw * factor;
}

ncclResult_t braid_plan_coll_price(int coll, int n, double S, double bw_GBps, double lat_us,
                                   struct braid_plan_coll_result* r) {
  const char* bad = coll < 0 || coll >= BRAID_PLAN_NUM_COLLS ? "collective"
                    : n < 1                                  ? "ranks"
                    : !(S >= 0)                              ? "size"
                    : !(bw_GBps > 0)                         ? "bandwidth"
                    : !(lat_us >= 0)                         ? "latency"
                                                             : NULL;
  if (bad != NULL) {
    BRAID_WARN("braid-plan: bad %s (collective %d, %d ranks, %.0f bytes, %g GB/s, %g us per step)", bad, coll, n, S,
               bw_GBps, lat_us);
    return ncclInvalidArgument;
  }
  memset(r, 0, sizeof(*r));
  r->coll = coll;
  r->n = n;
  r->size = S;
  r->bw = bw_GBps;
  r->lat_us = lat_us;
  double factor = braid_plan_coll_busbw_factor(coll, n);
  r->ring.bytes = braid_plan_model_ring_bytes(coll, n, S);
  r->ring.steps = braid_plan_model_ring_steps(coll, n);
  finish(&r->ring, S, bw_GBps, lat_us, factor);
  if (coll == BRAID_PLAN_ALLREDUCE) {
    r->tree.bytes = braid_plan_model_tree_bytes(n, S);
    r->tree.steps = braid_plan_model_tree_steps(n);
    finish(&r->tree, S, bw_GBps, lat_us, factor);
    r->pick_tree = r->tree.time_us < r->ring.time_us;
  }
  return ncclSuccess;
}

static void row(FILE* out, const char* name, const struct braid_plan_coll_algo* a, int repeat) {
  fprintf(out, "%-5s %13.3f %6d %14.2f %14.2f %12.2f %12.1f %12.1f", name, a->bytes / 1e6, a->steps, a->step_us,
          a->transfer_us, a->time_us, a->algbw, a->busbw);
  if (repeat > 1) fprintf(out, " %14.3f", a->time_us * repeat / 1e3);
  fprintf(out, "\n");
}

void braid_plan_coll_print(FILE* out, const struct braid_plan_coll_result* r, int repeat,
                           const struct braid_plan_coll_tuner* tuner) {
  fprintf(out, "# braid-plan: %s of %.6g MB over %d GPUs; link %g GB/s per GPU, %g us per step\n",
          braid_plan_model_coll_name(r->coll), r->size / 1e6, r->n, r->bw, r->lat_us);
  fprintf(out, "%-5s %13s %6s %14s %14s %12s %12s %12s", "algo", "MB per GPU", "steps", "step cost(us)", "transfer(us)",
          "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  if (repeat > 1) fprintf(out, " %11s(ms)", "x calls");
  fprintf(out, "\n");
  row(out, "Ring", &r->ring, repeat);
  if (r->tree.valid) row(out, "Tree", &r->tree, repeat);
  const struct braid_plan_coll_algo* best = r->pick_tree ? &r->tree : &r->ring;
  fprintf(out, "the model picks %s: %.3f ms per call", r->pick_tree ? "Tree" : "Ring", best->time_us / 1e3);
  if (repeat > 1) fprintf(out, ", %.3f ms over %d calls", best->time_us * repeat / 1e3, repeat);
  fprintf(out, "; the steps are %.0f%% of it\n", best->time_us > 0 ? 100 * best->step_us / best->time_us : 0.0);
  if (tuner != NULL && tuner->valid)
    fprintf(out, "braid's tuner on %s (%d node%s x %d GPUs) picks %s: %.2f us per call\n", tuner->xml, tuner->nodes,
            tuner->nodes > 1 ? "s" : "", tuner->ppn, tuner->algo, tuner->time_us);
  fprintf(out, "busbw = algbw x %.4g (NCCL's bus bandwidth: comparable with the link's; algbw = size / time)\n",
          braid_plan_coll_busbw_factor(r->coll, r->n));
}

static void json_algo(FILE* out, const char* name, const struct braid_plan_coll_algo* a, int repeat) {
  fprintf(out,
          "\"%s\":{\"bytes_per_gpu\":%.0f,\"steps\":%d,\"step_us\":%.4f,\"transfer_us\":%.4f,\"time_us\":%.4f,"
          "\"algbw\":%.4f,\"busbw\":%.4f,\"repeat_ms\":%.6f}",
          name, a->bytes, a->steps, a->step_us, a->transfer_us, a->time_us, a->algbw, a->busbw,
          a->time_us * repeat / 1e3);
}

void braid_plan_coll_json(FILE* out, const struct braid_plan_coll_result* r, int repeat,
                          const struct braid_plan_coll_tuner* tuner) {
  fprintf(out, "{\"collective\":\"%s\",\"ranks\":%d,\"size_bytes\":%.0f,\"bw_GBps\":%g,\"lat_us\":%g,\"repeat\":%d,",
          braid_plan_model_coll_name(r->coll), r->n, r->size, r->bw, r->lat_us, repeat);
  json_algo(out, "ring", &r->ring, repeat);
  if (r->tree.valid) {
    fprintf(out, ",");
    json_algo(out, "tree", &r->tree, repeat);
  }
  fprintf(out, ",\"pick\":\"%s\"", r->pick_tree ? "Tree" : "Ring");
  if (tuner != NULL && tuner->valid)
    fprintf(out, ",\"tuner\":{\"algo\":\"%s\",\"time_us\":%.4f,\"nodes\":%d,\"ppn\":%d}", tuner->algo, tuner->time_us,
            tuner->nodes, tuner->ppn);
  fprintf(out, "}\n");
}

ncclResult_t braid_plan_coll_table(FILE* out, int coll, int n, const double* sizes, int nsizes, double bw_GBps,
                                   double lat_us) {
  struct braid_plan_coll_result r;
  BRAID_CHECK(braid_plan_coll_price(coll, n, 0, bw_GBps, lat_us, &r));
  fprintf(out, "# step cost vs transfer cost: %s over %d GPUs, %g GB/s per GPU, %g us per step\n",
          braid_plan_model_coll_name(coll), n, bw_GBps, lat_us);
  fprintf(out, "%12s %14s %14s %12s", "size", "ring steps(us)", "transfer(us)", "ring(us)");
  if (r.tree.valid) fprintf(out, " %14s %14s %12s %7s", "tree steps(us)", "transfer(us)", "tree(us)", "faster");
  fprintf(out, "  %s\n", "cost that dominates (ring)");
  for (int i = 0; i < nsizes; i++) {
    BRAID_CHECK(braid_plan_coll_price(coll, n, sizes[i], bw_GBps, lat_us, &r));
    fprintf(out, "%12.0f %14.2f %14.2f %12.2f", sizes[i], r.ring.step_us, r.ring.transfer_us, r.ring.time_us);
    if (r.tree.valid)
      fprintf(out, " %14.2f %14.2f %12.2f %7s", r.tree.step_us, r.tree.transfer_us, r.tree.time_us,
              r.pick_tree ? "Tree" : "Ring");
    fprintf(out, "  %s\n", r.ring.step_us > r.ring.transfer_us ? "steps" : "transfer");
  }
  return ncclSuccess;
}
