/* The same smoke trainer through the installed C API (C11, no C++ in the program). */
#include <stdio.h>

#include "hvrun/c_api.h"

int main(void) {
  hvrun_worker_t* worker = NULL;
  if (hvrun_init(HVRUN_C_ABI_VERSION, &worker) != HVRUN_OK) {
    fprintf(stderr, "init: %s\n", hvrun_last_error());
    return 1;
  }
  float grad[256];
  const int64_t shape[1] = {256};
  for (int i = 0; i < 256; ++i) grad[i] = (float)(hvrun_rank(worker) + 1);
  hvrun_handle_t* handle = NULL;
  if (hvrun_allreduce_submit(worker, "grad", grad, grad, HVRUN_FLOAT32, 1, shape, HVRUN_SUM, NULL,
                             &handle) != HVRUN_OK ||
      hvrun_handle_wait(handle, -1) != HVRUN_OK) {
    fprintf(stderr, "allreduce: %s\n", hvrun_last_error());
    return 1;
  }
  hvrun_handle_free(handle);
  const int size = hvrun_size(worker);
  const float want = (float)(size * (size + 1)) / 2.0f;
  for (int i = 0; i < 256; ++i) {
    if (grad[i] != want) {
      fprintf(stderr, "got %g, want %g\n", grad[i], want);
      return 1;
    }
  }
  printf("consumer (C) rank %d of %d: allreduce ok\n", hvrun_rank(worker), size);
  return hvrun_finalize(worker) == HVRUN_OK ? 0 : 1;
}
