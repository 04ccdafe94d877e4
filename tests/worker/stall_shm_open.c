/* Fault injection for shm_job_test: preloaded into one rank (LD_PRELOAD), it makes shm_open
   block until the process is killed, so that the rank registers but never maps the host's
   segment: the window in which a crash could leave the segment behind. */
#include <sys/types.h>
#include <unistd.h>

int shm_open(const char* name, int flags, mode_t mode) {
  (void)name;
  (void)flags;
  (void)mode;
  for (;;) pause();
}
