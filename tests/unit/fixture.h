/*
 * fixture.h - where the topology fixtures (the XML files in tests/topo) are, whatever directory the test
 * runner starts in.
 */
#ifndef BRAID_TEST_FIXTURE_H
#define BRAID_TEST_FIXTURE_H

/* The path of tests/topo/<name>; the returned buffer holds until four calls later. */
const char* test_fixture(const char* name);

#endif /* BRAID_TEST_FIXTURE_H */
