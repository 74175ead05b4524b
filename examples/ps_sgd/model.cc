// Synthetic data set, loss and gradient of the logistic-regression example.
// The random numbers come from a local SplitMix64 generator and Box-Muller so
// the data set is identical on every platform and standard library.
#include "ps_sgd/model.h"

#include <cmath>
#include <numbers>

namespace trainyard::examples {
namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1).
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) / 9007199254740992.0; }
  double Normal() {
    double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t state_;
};

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

double Logit(const Dataset& data, const std::vector<double>& params, int row) {
  const double* x = &data.x[static_cast<size_t>(row) * data.features];
  double z = params[data.features];
  for (int j = 0; j < data.features; ++j) z += params[j] * x[j];
  return z;
}

}  // namespace

Dataset MakeDataset(const DatasetOptions& options) {
  SplitMix64 rng(options.seed);
  Dataset d;
  d.samples = options.samples;
  d.features = options.features;
  d.true_weights.resize(ParameterCount(options.features));
  // Weights of scale 0.5 give labels that are informative but noisy, so the
  // best achievable loss is well above zero and the curve is smooth.
  for (double& w : d.true_weights) w = 0.5 * rng.Normal();
  d.x.resize(static_cast<size_t>(d.samples) * d.features);
  d.y.resize(d.samples);
  for (int i = 0; i < d.samples; ++i) {
    for (int j = 0; j < d.features; ++j) d.x[static_cast<size_t>(i) * d.features + j] = rng.Normal();
    double p = Sigmoid(Logit(d, d.true_weights, i));
    d.y[i] = rng.Uniform() < p ? 1.0 : 0.0;
  }
  return d;
}

Range ShardOf(int total, int index, int parts) {
  int64_t begin = static_cast<int64_t>(total) * index / parts;
  int64_t end = static_cast<int64_t>(total) * (index + 1) / parts;
  return Range{static_cast<int>(begin), static_cast<int>(end)};
}

double LogLoss(const Dataset& data, const std::vector<double>& params, Range rows) {
  if (rows.size() <= 0) return 0.0;
  double sum = 0.0;
  for (int i = rows.begin; i < rows.end; ++i) {
    double z = Logit(data, params, i);
    // log(1 + e^z) - y z, computed without overflow.
    double softplus = z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
    sum += softplus - data.y[i] * z;
  }
  return sum / rows.size();
}

void Gradient(const Dataset& data, const std::vector<double>& params, Range rows,
              std::vector<double>* grad) {
  grad->assign(ParameterCount(data.features), 0.0);
  if (rows.size() <= 0) return;
  for (int i = rows.begin; i < rows.end; ++i) {
    double err = Sigmoid(Logit(data, params, i)) - data.y[i];
    const double* x = &data.x[static_cast<size_t>(i) * data.features];
    for (int j = 0; j < data.features; ++j) (*grad)[j] += err * x[j];
    (*grad)[data.features] += err;
  }
  for (double& g : *grad) g /= rows.size();
}

}  // namespace trainyard::examples
