/*
 * fuzz_topo_xml.c - libFuzzer target: the topology XML loader (NCCL_TOPO_FILE's format;
 * src/topo/), from text in memory through braid_topo_load_xml_string; a system that loads
 * is dumped back to XML too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct braid_topo_system* sys = NULL;
  char* text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  if (braid_topo_load_xml_string(text, "fuzz", &sys) == ncclSuccess && sys != NULL) {
    char* out = NULL;
    if (braid_topo_dump_xml_string(sys, &out) == ncclSuccess) free(out);
    braid_topo_free(sys);
  }
  free(text);
  return 0;
}
