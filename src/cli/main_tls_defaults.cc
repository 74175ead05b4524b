// What every TLS context of the `trainyard` binary is made with, gRPC's
// included: gRPC makes its own SSL_CTX and offers no way to set these, so the
// binary defines SSL_CTX_new (only the executable holds this file, not the
// trainyard_cli library: src/cli/CMakeLists.txt) and calls OpenSSL's own
// through dlsym(RTLD_NEXT).
// It takes the place of libssl's for every caller in the process, whether
// gRPC is linked in statically or from its shared library.
//
// No TLS 1.3 session tickets. A server sends two after every handshake,
// which costs it a copy of the session, the peer's certificate decoded again
// (d2i_SSL_SESSION) and an encryption: ~12 % of the server's CPU to register
// an agent (docs/benchmarks.md, "Registration of 10,000 agents"). Nothing
// uses them: no Trainyard client keeps a session cache, and gRPC's ticket keys
// are new in each server process, so an agent that reconnects after a
// restart could not resume anyway. For a client context the count means
// nothing. The HTTPS door, which browsers reach, sets its two back
// (src/httpd/http_server.cc).
#include <dlfcn.h>
#include <openssl/ssl.h>

#include <atomic>
#include <cstdio>

namespace {
using SslCtxNew = SSL_CTX* (*)(const SSL_METHOD*);
std::atomic<SslCtxNew> real_ssl_ctx_new{nullptr};
}  // namespace

extern "C" SSL_CTX* SSL_CTX_new(const SSL_METHOD* method) {
  SslCtxNew real = real_ssl_ctx_new.load(std::memory_order_acquire);
  if (real == nullptr) {
    real = reinterpret_cast<SslCtxNew>(dlsym(RTLD_NEXT, "SSL_CTX_new"));
    if (real == nullptr) {
      // Only a binary linked against a static libssl gets here (the build
      // links it shared: cmake/StaticDeps.cmake): say why no TLS works.
      std::fprintf(stderr, "trainyard: libssl's SSL_CTX_new not found (%s): no TLS context can be made\n", dlerror());
      return nullptr;
    }
    real_ssl_ctx_new.store(real, std::memory_order_release);
  }
  SSL_CTX* ctx = real(method);
  if (ctx != nullptr) SSL_CTX_set_num_tickets(ctx, 0);
  return ctx;
}
