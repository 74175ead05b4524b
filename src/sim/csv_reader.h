// CsvTable: a small reader for the comma-separated files the simulator
// replays (node lists and task traces). Columns are found by their header
// name, so files may order or add columns freely; every typed read names the
// file, line and field when the value does not parse, so a user can fix the
// input.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainyard::sim {

class CsvTable;

// One data row of a CsvTable. Cheap to copy; valid while its table lives.
class CsvRow {
 public:
  CsvRow(const CsvTable* table, size_t index) : table_(table), index_(index) {}

  // The 1-based line of the file this row came from.
  int line() const;
  // True when the table has column `name` and this row's value there is not
  // empty.
  bool Has(absl::string_view name) const;
  // The raw text of column `name` ("" when the column is absent).
  absl::string_view Text(absl::string_view name) const;
  // The value of column `name` as an integer. Errors (InvalidArgument, naming
  // file, line and field): absent column or empty value, not an integer,
  // negative when `allow_negative` is false.
  absl::StatusOr<int64_t> Int(absl::string_view name, bool allow_negative = false) const;
  // Like Int, but an absent column or empty value yields `fallback`.
  absl::StatusOr<int64_t> IntOr(absl::string_view name, int64_t fallback) const;
  // An InvalidArgument error "FILE:LINE: field 'NAME': WHY".
  absl::Status Error(absl::string_view name, absl::string_view why) const;

 private:
  const CsvTable* table_;
  size_t index_;
};

class CsvTable {
 public:
  // Parses `text` whose first non-blank line is the header. Blank lines and
  // lines starting with '#' are skipped. Fields are separated by commas;
  // a field may be wrapped in double quotes ("" inside is one quote).
  // `source` names the file in error messages. Errors: no header, a
  // duplicate or empty column name, a row with more fields than the header.
  static absl::StatusOr<CsvTable> Parse(absl::string_view text, std::string source);
  // Reads the file at `path` and parses it. Errors: the file cannot be read
  // (NotFound), or Parse's errors.
  static absl::StatusOr<CsvTable> ReadFile(const std::string& path);

  const std::string& source() const { return source_; }
  size_t size() const { return rows_.size(); }
  CsvRow row(size_t i) const { return CsvRow(this, i); }
  bool HasColumn(absl::string_view name) const { return columns_.contains(name); }
  // OK when every name in `names` is a column; else an error naming the file,
  // the first missing column and the columns the file has.
  absl::Status RequireColumns(const std::vector<absl::string_view>& names) const;

 private:
  friend class CsvRow;
  struct Row {
    int line = 0;
    std::vector<std::string> fields;
  };
  std::string source_;
  int header_line_ = 0;
  std::vector<std::string> header_;
  absl::flat_hash_map<std::string, size_t> columns_;
  std::vector<Row> rows_;
};

}  // namespace trainyard::sim
