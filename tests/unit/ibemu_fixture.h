/*
 * ibemu_fixture.h - what the IB suites (test_net_ib.c, test_net_gdr.c, test_net.c's IB row)
 * share: pointing this process (and the ranks it forks) at the emulated verbs provider.
 */
#ifndef BRAID_TEST_IBEMU_FIXTURE_H
#define BRAID_TEST_IBEMU_FIXTURE_H

/* BRAID_IB_VERBS_LIBRARY = BUILD/lib/libbraid-ibemu.so (next to the runner), IBEMU_DEVICES =
 * devices, IBEMU_FAIL = fail (NULL: unset); re-reads the parameters and forgets the loaded
 * verbs library (when IB is built). */
void ibemu_fixture_env(const char* devices, const char* fail);

#endif /* BRAID_TEST_IBEMU_FIXTURE_H */
