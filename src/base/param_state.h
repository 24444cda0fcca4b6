/*
 * param_state.h - inside the parameter table (param.c, param_load.c; not for other files): the
 * static rows and one load of values with the messages to print about them.
 */
#ifndef BRAID_PARAM_STATE_H
#define BRAID_PARAM_STATE_H

#include "base/param.h"

enum param_src { SRC_DEFAULT, SRC_PLUGIN, SRC_ENV, SRC_CONF };

struct param_value {
  int64_t i;             /* typed rows: the value (the default when unset or malformed) */
  const char* s;         /* the text: as set (ENUM: the word as the row writes it); NULL: unset */
  const char* raw;       /* the text exactly as its source gave it; NULL: no source set it */
  const char* source;    /* "default", "environment", "env plugin X" or a conf file path */
  unsigned char kind;    /* enum param_src of raw */
  unsigned char fresh;   /* look up again at each read (PER_USE, NCCL_NO_CACHE) */
  unsigned char decided; /* set (or set to a malformed value) by a source of higher priority */
};

struct param_msg {
  int id;   /* the row it is about, -1: none */
  int warn; /* 1: WARN-level advice; 0: INFO/ENV */
  char* text;
  struct param_msg* next;
};

struct param_state {
  struct param_value v[BRAID_PARAM_COUNT];
  struct param_msg* msgs;      /* in load order */
  struct param_msg** msg_tail; /* where the next message goes */
  int reported;                /* 1 once the messages were printed (atomic) */
  char** strings;              /* copies of values and paths owned by this state */
  int nstrings, capstrings;
  int cur_id;                  /* while loading: the row messages are about (-1: none) */
  struct param_state* retired; /* the state this one replaced */
};

/* The rows of param.h and param_nccl.h, by id. */
extern const struct braid_param_row braid_param_rows[BRAID_PARAM_COUNT];

/* Defaults only, no messages. */
void braid_param_state_defaults(struct param_state* st);
/* A load from every source (param.c's header says which, in what order); NULL when out of
 * memory. */
struct param_state* braid_param_state_load(void);

#endif /* BRAID_PARAM_STATE_H */
