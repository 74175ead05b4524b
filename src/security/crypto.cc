// libcrypto behind security/crypto.h.
#include "security/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace trainyard::security {
namespace {

std::string Hex(const unsigned char* data, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> RandomHex(int bytes) {
  std::vector<unsigned char> buf(static_cast<size_t>(bytes));
  if (RAND_bytes(buf.data(), bytes) != 1) return absl::InternalError("cannot read random bytes (OpenSSL RAND_bytes)");
  return Hex(buf.data(), buf.size());
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

std::string HmacSha256Hex(absl::string_view key, absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), md, &len);
  return Hex(md, len);
}

struct HmacSha256Key::States {
  EVP_MD* md = nullptr;
  EVP_MD_CTX* inner = nullptr;  // SHA-256 after (key ^ ipad)
  EVP_MD_CTX* outer = nullptr;  // SHA-256 after (key ^ opad)
  ~States() {
    EVP_MD_CTX_free(inner);
    EVP_MD_CTX_free(outer);
    EVP_MD_free(md);
  }
};

HmacSha256Key::HmacSha256Key(absl::string_view key) : states_(std::make_unique<States>()) {
  constexpr size_t kBlock = 64;  // SHA-256's block
  States& s = *states_;
  s.md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  TY_CHECK(s.md != nullptr, "OpenSSL has no SHA-256");
  unsigned char k[kBlock] = {};
  if (key.size() > kBlock) {
    unsigned int len = 0;
    EVP_Digest(key.data(), key.size(), k, &len, s.md, nullptr);
  } else {
    std::copy(key.begin(), key.end(), k);
  }
  unsigned char pad[kBlock];
  auto start = [&](unsigned char with) {
    for (size_t i = 0; i < kBlock; ++i) pad[i] = static_cast<unsigned char>(k[i] ^ with);
    EVP_MD_CTX* c = EVP_MD_CTX_new();
    TY_CHECK(c != nullptr && EVP_DigestInit_ex(c, s.md, nullptr) == 1 && EVP_DigestUpdate(c, pad, kBlock) == 1,
             "OpenSSL cannot start SHA-256");
    return c;
  };
  s.inner = start(0x36);
  s.outer = start(0x5c);
  OPENSSL_cleanse(k, sizeof k);
  OPENSSL_cleanse(pad, sizeof pad);
}

HmacSha256Key::~HmacSha256Key() = default;

std::string HmacSha256Key::Hex(absl::string_view data) const {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> c(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  TY_CHECK(c && EVP_MD_CTX_copy_ex(c.get(), states_->inner) == 1, "cannot copy a SHA-256 state");
  EVP_DigestUpdate(c.get(), data.data(), data.size());
  EVP_DigestFinal_ex(c.get(), md, &len);
  TY_CHECK(EVP_MD_CTX_copy_ex(c.get(), states_->outer) == 1, "cannot copy a SHA-256 state");
  EVP_DigestUpdate(c.get(), md, len);
  EVP_DigestFinal_ex(c.get(), md, &len);
  return ::trainyard::security::Hex(md, len);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {

constexpr absl::string_view kSealedPrefix = "sealed:v1:";
constexpr int kNonceBytes = 12;
constexpr int kTagBytes = 16;

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

std::vector<unsigned char> SealKey(absl::string_view key) {
  std::vector<unsigned char> k(32);
  unsigned int len = 0;
  std::string input = absl::StrCat("trainyard sealed values\n", key);
  EVP_Digest(input.data(), input.size(), k.data(), &len, EVP_sha256(), nullptr);
  return k;
}

}  // namespace

bool IsSealed(absl::string_view text) { return absl::StartsWith(text, kSealedPrefix); }

absl::StatusOr<std::string> Seal(absl::string_view key, absl::string_view plain) {
  std::vector<unsigned char> k = SealKey(key);
  std::vector<unsigned char> buf(kNonceBytes + plain.size() + kTagBytes);
  if (RAND_bytes(buf.data(), kNonceBytes) != 1) return absl::InternalError("cannot read random bytes (OpenSSL RAND_bytes)");
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k.data(), buf.data()) == 1 &&
            EVP_EncryptUpdate(ctx.get(), buf.data() + kNonceBytes, &len,
                              reinterpret_cast<const unsigned char*>(plain.data()), static_cast<int>(plain.size())) == 1 &&
            EVP_EncryptFinal_ex(ctx.get(), buf.data() + kNonceBytes + len, &len) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, buf.data() + kNonceBytes + plain.size()) == 1;
  if (!ok) return absl::InternalError("cannot seal a value (OpenSSL AES-256-GCM)");
  std::string out(4 * ((buf.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), buf.data(), static_cast<int>(buf.size()));
  out.resize(static_cast<size_t>(n));
  return absl::StrCat(kSealedPrefix, out);
}

absl::StatusOr<std::string> Open(absl::string_view key, absl::string_view sealed) {
  if (!IsSealed(sealed)) return absl::InvalidArgumentError("not a sealed value");
  absl::string_view b64 = sealed.substr(kSealedPrefix.size());
  std::vector<unsigned char> buf(3 * (b64.size() / 4) + 3);
  int n = b64.size() % 4 == 0 ? EVP_DecodeBlock(buf.data(), reinterpret_cast<const unsigned char*>(b64.data()),
                                                 static_cast<int>(b64.size()))
                              : -1;
  if (n < 0) return absl::InvalidArgumentError("a sealed value is not base64");
  n -= static_cast<int>(std::count(b64.end() - std::min<size_t>(2, b64.size()), b64.end(), '='));  // padding
  if (n < kNonceBytes + kTagBytes) return absl::InvalidArgumentError("a sealed value is too short");
  size_t plain_len = static_cast<size_t>(n - kNonceBytes - kTagBytes);
  std::vector<unsigned char> k = SealKey(key);
  std::string plain(plain_len, '\0');
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k.data(), buf.data()) == 1 &&
            EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len, buf.data() + kNonceBytes,
                              static_cast<int>(plain_len)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, buf.data() + kNonceBytes + plain_len) == 1 &&
            EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &len) == 1;
  if (!ok) return absl::InvalidArgumentError("a sealed value does not open: sealed under another key, or changed");
  return plain;
}

}  // namespace trainyard::security
