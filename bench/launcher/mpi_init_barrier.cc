// One rank of the launch benchmark's baseline: MPI_Init, MPI_Barrier, MPI_Finalize.
#include <mpi.h>
#include <cstdio>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "bench_launch_mpi: MPI_Init failed\n");
    return 1;
  }
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
    std::fprintf(stderr, "bench_launch_mpi: MPI_Barrier failed\n");
    return 1;
  }
  MPI_Finalize();
  return 0;
}
