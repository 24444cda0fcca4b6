/*
 * registry.h - the transports compiled into braid, in the order they are tried for a pair of
 * ranks (the first whose can_connect says yes wins). This one list generates the connect
 * order (core/connect.c), the log names (each vtable's `name`) and the transport list of the
 * build description (braid-info, the `build:` line).
 *
 * X(id, info): the vtable is `braid_transport_<id>`; `info` is how braid-info lists it (with
 * its built-in plugin, if any). A new transport adds one line here and its vtable; a net
 * plugin (IB, UCX) is not a transport: it plugs into "net" (transport/net/net.h).
 */
#ifndef BRAID_REGISTRY_H
#define BRAID_REGISTRY_H

#include "transport/transport.h"

#define BRAID_TRANSPORTS(X) \
  X(p2p, "p2p")             \
  X(shm, "shm")             \
  X(net, "net/socket")

#define BRAID_X(id, info) extern const struct braid_transport braid_transport_##id;
BRAID_TRANSPORTS(BRAID_X)
#undef BRAID_X

/* The transports in connect order; *count_p gets their number. */
const struct braid_transport* const* braid_transport_registry(int* count_p);
/* Their braid-info names, in the same order. */
const char* const* braid_version_transports(int* count_p);
/* One line describing the build, e.g. "CUDA kernels not built; transports: p2p, shm, net/socket". */
const char* braid_build_options(void);

#endif /* BRAID_REGISTRY_H */
