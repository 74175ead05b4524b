// The model trained by the parameter-server example: logistic regression on
// a synthetic data set generated from a fixed seed, so that every task of a
// job (and every rerun) sees the same samples and the same true weights.
// Parameters are a flat vector: one weight per feature, then the bias.
#pragma once

#include <cstdint>
#include <vector>

namespace trainyard::examples {

struct DatasetOptions {
  int samples = 20000;
  int features = 50;
  uint64_t seed = 20261129;
};

// Row-major features, labels in {0, 1}, and the weights they were drawn
// from (features + 1 values, the last is the bias).
struct Dataset {
  int samples = 0;
  int features = 0;
  std::vector<double> x;
  std::vector<double> y;
  std::vector<double> true_weights;
};

// Generates the data set: x ~ N(0, 1), y ~ Bernoulli(sigmoid(w*.x + b*)).
// The same options always give the same data set.
Dataset MakeDataset(const DatasetOptions& options);

// Number of parameters of the model for `features` inputs.
inline int ParameterCount(int features) { return features + 1; }

// Half-open range of sample indices [begin, end).
struct Range {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};

// Part `index` of `parts` near-equal consecutive parts of [0, total).
// REQUIRES: 0 <= index < parts.
Range ShardOf(int total, int index, int parts);

// Mean log-loss of `params` over samples in `rows`.
double LogLoss(const Dataset& data, const std::vector<double>& params, Range rows);

// Mean gradient of the log-loss over samples in `rows`, written to `grad`
// (resized to the parameter count).
void Gradient(const Dataset& data, const std::vector<double>& params, Range rows,
              std::vector<double>* grad);

}  // namespace trainyard::examples
