// trainyard-mpi-allreduce: the MPI example (docs/examples.md). Every rank
// contributes rank + 1 to an MPI_Allreduce sum; every rank checks the result
// against n (n + 1) / 2 and prints "rank R of N on HOST: allreduce sum S
// (expected E)". Exit code 0 when the sum is right on every rank, 1 if not.
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, name_len = 0;
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &name_len);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  long expected = static_cast<long>(size) * (size + 1) / 2;
  std::printf("rank %d of %d on %s: allreduce sum %ld (expected %ld)\n", rank, size, host, sum, expected);
  std::fflush(stdout);
  int ok = sum == expected ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all_ok == 1 ? 0 : 1;
}
