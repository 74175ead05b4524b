// The Prometheus text format (see prometheus_text.h).
#include "httpd/prometheus_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::httpd {

std::string EscapeLabel(const std::string& v) {
  if (v.find_first_of("\\\"\n") == std::string::npos) return v;
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string MetricNumber(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v))) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.9g", v);
}

void PrometheusText::Family(const char* name, const char* type, const char* help) {
  absl::StrAppend(out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void PrometheusText::Sample(const char* name, const std::string& labels, double value) {
  if (labels.empty()) {
    absl::StrAppend(out_, name, " ", MetricNumber(value), "\n");
  } else {
    absl::StrAppend(out_, name, "{", labels, "} ", MetricNumber(value), "\n");
  }
}

void PrometheusText::Counter(const char* name, const char* help, double value) {
  Family(name, "counter", help);
  Sample(name, "", value);
}

void PrometheusText::Gauge(const char* name, const char* help, double value) {
  Family(name, "gauge", help);
  Sample(name, "", value);
}

void PrometheusText::Hist(const char* name, const char* help, const Histogram& h, const std::string& labels) {
  Family(name, "histogram", help);
  HistSamples(name, h, labels);
}

void PrometheusText::HistSamples(const char* name, const Histogram& h, const std::string& labels) {
  std::string bucket = absl::StrCat(name, "_bucket");
  std::string prefix = labels.empty() ? "" : absl::StrCat(labels, ",");
  for (int i = 0; i < h.buckets(); ++i) {
    Sample(bucket.c_str(), absl::StrCat(prefix, "le=\"", MetricNumber(h.bound(i)), "\""),
           static_cast<double>(h.cumulative(i)));
  }
  Sample(bucket.c_str(), absl::StrCat(prefix, "le=\"+Inf\""), static_cast<double>(h.count()));
  Sample(absl::StrCat(name, "_sum").c_str(), labels, h.sum());
  Sample(absl::StrCat(name, "_count").c_str(), labels, static_cast<double>(h.count()));
}

}  // namespace trainyard::httpd
