// A plain-text table with columns sized to their widest cell (UTF-8 aware).
#pragma once

#include <string>
#include <vector>

namespace trainyard::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // The table with two spaces between columns and a newline after each row.
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Display width of a UTF-8 string (code points).
size_t DisplayWidth(const std::string& s);

}  // namespace trainyard::cli
