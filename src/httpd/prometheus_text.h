// PrometheusText: writes metrics in the Prometheus text format (0.0.4), the
// one home of its escaping and number format for every /metrics of ours
// (the server's, each agent's).
#pragma once

#include <string>

#include "common/histogram.h"

namespace trainyard::httpd {

// The text format's content type.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped as the text format asks (\\, \", \n).
std::string EscapeLabel(const std::string& value);

// A sample's value: an integer without a point, else up to 9 digits.
std::string MetricNumber(double value);

class PrometheusText {
 public:
  // Appends to `out`, which outlives the writer.
  explicit PrometheusText(std::string* out) : out_(out) {}

  // The HELP and TYPE lines of a family (type: counter, gauge, histogram).
  void Family(const char* name, const char* type, const char* help);
  // One sample; `labels`: `key="value",...` already escaped, or "".
  void Sample(const char* name, const std::string& labels, double value);
  // Samples already in the format (one family's, built in one pass).
  void Raw(const std::string& text) { out_->append(text); }
  void Counter(const char* name, const char* help, double value);
  void Gauge(const char* name, const char* help, double value);
  // A whole histogram family with one series.
  void Hist(const char* name, const char* help, const Histogram& h, const std::string& labels = "");
  // The samples of one histogram series (its family already written).
  void HistSamples(const char* name, const Histogram& h, const std::string& labels);

 private:
  std::string* out_;
};

}  // namespace trainyard::httpd
