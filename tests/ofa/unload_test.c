/* unload_test: a program that loads librdmacm.so.1 with dlopen, uses it (the library starts its
 * event dispatcher), and unloads it with dlclose while it keeps running, as Open MPI does with
 * libfabric (and so librdmacm.so.1) in MPI_Finalize. Run through uwarp-run: uwarp's
 * librdmacm.so.1 must stay mapped for the threads it started. Exit status 0 if the program
 * outlived the dlclose by 300 ms and every call succeeded; a crash otherwise. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"

int main(void) {
  void* lib = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  struct rdma_event_channel* (*create_channel)(void) = dlsym(lib, "rdma_create_event_channel");
  void (*destroy_channel)(struct rdma_event_channel*) = dlsym(lib, "rdma_destroy_event_channel");
  int (*create_id)(struct rdma_event_channel*, struct rdma_cm_id**, void*, enum rdma_port_space) =
      dlsym(lib, "rdma_create_id");
  int (*destroy_id)(struct rdma_cm_id*) = dlsym(lib, "rdma_destroy_id");
  CHECK(create_channel != NULL && destroy_channel != NULL && create_id != NULL &&
        destroy_id != NULL);
  if (failures == 0) {
    struct rdma_event_channel* ch = create_channel();
    struct rdma_cm_id* id = NULL;
    CHECK(ch != NULL);
    CHECK(ch != NULL && create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
    if (id != NULL) CHECK(destroy_id(id) == 0);
    if (ch != NULL) destroy_channel(ch);
  }
  CHECK(dlclose(lib) == 0);
  usleep(300 * 1000);
  printf("unload_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
