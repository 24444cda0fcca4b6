/*
 * tuner_memo.c - the tuner's memo of choices (tuner_memo.h). A choice packs into two words:
 * w0 = algo | proto << 16 | variant << 32 | nchannels << 48 (16 bits each), w1 = nthreads |
 * time_us's bits << 32. Writer: key 0, the words, the key (release); reader: key (acquire),
 * words, key again: equal and the one it wants, else a miss.
 */
#include "topo/tuner_memo.h"

#include <string.h>

#include "topo/tuner.h"

/* A key is never 0; sizes from 2^57 bytes are not memoized. */
static uint64_t memo_key(int func, size_t bytes) {
  if (func < 0 || func >= 64 || (uint64_t)bytes >= (1ull << 57)) return 0;
  return ((uint64_t)bytes << 6 | (uint64_t)func) + 1;
}

static unsigned memo_slot(uint64_t key) {
  return (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 58) % BRAID_TUNER_MEMO_SLOTS;
}

int braid_tuner_memo_get(const struct braid_tuner_memo* m, int func, size_t bytes, struct braid_tuner_choice* out) {
  uint64_t key = memo_key(func, bytes);
  if (key == 0) return 0;
  unsigned s = memo_slot(key);
  if (__atomic_load_n(&m->slot[s].key, __ATOMIC_ACQUIRE) != key) return 0;
  uint64_t w0 = __atomic_load_n(&m->slot[s].w0, __ATOMIC_RELAXED);
  uint64_t w1 = __atomic_load_n(&m->slot[s].w1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&m->slot[s].key, __ATOMIC_RELAXED) != key) return 0;
  uint32_t time_bits = (uint32_t)(w1 >> 32);
  out->algo = (int)(int16_t)(w0 & 0xffff);
  out->proto = (int)(int16_t)((w0 >> 16) & 0xffff);
  out->variant = (int)(int16_t)((w0 >> 32) & 0xffff);
  out->nchannels = (int)(int16_t)((w0 >> 48) & 0xffff);
  out->nthreads = (int)(int32_t)(uint32_t)w1;
  memcpy(&out->time_us, &time_bits, sizeof(time_bits));
  return 1;
}

static int fits16(int v) {
  return v >= INT16_MIN && v <= INT16_MAX;
}

void braid_tuner_memo_put(struct braid_tuner_memo* m, int func, size_t bytes, const struct braid_tuner_choice* c) {
  uint64_t key = memo_key(func, bytes);
  if (key == 0 || !fits16(c->algo) || !fits16(c->proto) || !fits16(c->variant) || !fits16(c->nchannels)) return;
  uint32_t time_bits;
  memcpy(&time_bits, &c->time_us, sizeof(time_bits));
  uint64_t w0 = (uint64_t)(uint16_t)c->algo | (uint64_t)(uint16_t)c->proto << 16 |
                (uint64_t)(uint16_t)c->variant << 32 | (uint64_t)(uint16_t)c->nchannels << 48;
  uint64_t w1 = (uint64_t)(uint32_t)c->nthreads | (uint64_t)time_bits << 32;
  unsigned s = memo_slot(key);
  __atomic_store_n(&m->slot[s].key, 0, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&m->slot[s].w0, w0, __ATOMIC_RELAXED);
  __atomic_store_n(&m->slot[s].w1, w1, __ATOMIC_RELAXED);
  __atomic_store_n(&m->slot[s].key, key, __ATOMIC_RELEASE);
}

void braid_tuner_memo_clear(struct braid_tuner_memo* m) {
  for (int s = 0; s < BRAID_TUNER_MEMO_SLOTS; s++) __atomic_store_n(&m->slot[s].key, 0, __ATOMIC_RELEASE);
  uint32_t e = __atomic_load_n(&m->epoch, __ATOMIC_RELAXED) + 1;
  __atomic_store_n(&m->epoch, e != 0 ? e : 1, __ATOMIC_RELEASE);
}
