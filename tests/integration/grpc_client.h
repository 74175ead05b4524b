// Raw gRPC clients of a test cluster's server: TLS verified with the
// cluster CA (harness.h, ClusterCaPem) when the cluster serves it.
#pragma once

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {

// What a client of a cluster started with `tls` (ClusterOptions) connects
// with.
inline std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(bool tls = true) {
  if (!tls) return grpc::InsecureChannelCredentials();
  return grpc::SslCredentials({.pem_root_certs = ClusterCaPem()});
}

}  // namespace trainyard::testing
