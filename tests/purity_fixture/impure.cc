// A deliberately impure file: the core purity check must reject it.
#include <thread>
#include <grpcpp/grpcpp.h>
