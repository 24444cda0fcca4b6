/*
 * tuner_memo.h - the tuner's per-communicator memo of its choices (tuner_memo.c): a small
 * call costs the model's whole cost table (every algorithm x protocol priced) otherwise, a
 * tenth of a host-mode 8-byte all-reduce. Keyed by (function, bytes), direct-mapped; a slot
 * is a seqlock, so a reader never takes half of another shape's choice. Whatever changes a
 * choice after init clears it (tuner.c: the LSA offer, the channel cap, a tuner plugin, which
 * is asked on every call and never memoized); NCCL_ALGO/NCCL_PROTO are read at init only.
 */
#ifndef BRAID_TUNER_MEMO_H
#define BRAID_TUNER_MEMO_H

#include <stddef.h>
#include <stdint.h>

struct braid_tuner_choice;

#define BRAID_TUNER_MEMO_SLOTS 64

struct braid_tuner_memo {
  struct {
    uint64_t key; /* 0: empty or being written */
    uint64_t w0, w1;
  } slot[BRAID_TUNER_MEMO_SLOTS];
  uint32_t epoch; /* bumped by every clear, never 0 after the first (braid_tuner_epoch) */
};

/* 1 and *out when (func, bytes) is remembered; 0 otherwise. */
int braid_tuner_memo_get(const struct braid_tuner_memo* m, int func, size_t bytes, struct braid_tuner_choice* out);
void braid_tuner_memo_put(struct braid_tuner_memo* m, int func, size_t bytes, const struct braid_tuner_choice* c);
void braid_tuner_memo_clear(struct braid_tuner_memo* m);

#endif /* BRAID_TUNER_MEMO_H */
