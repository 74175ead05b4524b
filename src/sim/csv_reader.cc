// Parsing of the simulator's CSV inputs; see csv_reader.h.
#include "sim/csv_reader.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace trainyard::sim {
namespace {

// Splits one line into fields, honouring double quotes.
std::vector<std::string> SplitLine(absl::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::string(absl::StripAsciiWhitespace(field)));
      field.clear();
    } else {
      field.push_back(c);
    }
  }
  fields.push_back(std::string(absl::StripAsciiWhitespace(field)));
  return fields;
}

bool SkipLine(absl::string_view line) {
  absl::string_view s = absl::StripAsciiWhitespace(line);
  return s.empty() || s.front() == '#';
}

}  // namespace

int CsvRow::line() const { return table_->rows_[index_].line; }

absl::string_view CsvRow::Text(absl::string_view name) const {
  auto it = table_->columns_.find(name);
  if (it == table_->columns_.end()) return {};
  const auto& fields = table_->rows_[index_].fields;
  return it->second < fields.size() ? absl::string_view(fields[it->second]) : absl::string_view();
}

bool CsvRow::Has(absl::string_view name) const { return !Text(name).empty(); }

absl::Status CsvRow::Error(absl::string_view name, absl::string_view why) const {
  return absl::InvalidArgumentError(
      absl::StrCat(table_->source_, ":", line(), ": field '", name, "': ", why));
}

absl::StatusOr<int64_t> CsvRow::Int(absl::string_view name, bool allow_negative) const {
  if (!table_->HasColumn(name)) return Error(name, "the column is missing");
  absl::string_view text = Text(name);
  if (text.empty()) return Error(name, "the value is empty");
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Error(name, absl::StrCat("'", text, "' is not an integer"));
  }
  if (value < 0 && !allow_negative) {
    return Error(name, absl::StrCat("'", text, "' is negative; it must be 0 or more"));
  }
  return value;
}

absl::StatusOr<int64_t> CsvRow::IntOr(absl::string_view name, int64_t fallback) const {
  if (!Has(name)) return fallback;
  return Int(name);
}

absl::StatusOr<CsvTable> CsvTable::Parse(absl::string_view text, std::string source) {
  CsvTable table;
  table.source_ = std::move(source);
  if (absl::StartsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (SkipLine(line)) continue;
    std::vector<std::string> fields = SplitLine(line);
    if (table.header_.empty()) {
      for (size_t i = 0; i < fields.size(); ++i) {
        if (fields[i].empty()) {
          return absl::InvalidArgumentError(absl::StrCat(table.source_, ":", line_no,
                                                         ": header column ", i + 1, " is empty"));
        }
        if (!table.columns_.emplace(fields[i], i).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              table.source_, ":", line_no, ": header names column '", fields[i], "' twice"));
        }
      }
      table.header_ = std::move(fields);
      table.header_line_ = line_no;
      continue;
    }
    if (fields.size() > table.header_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.source_, ":", line_no, ": ", fields.size(), " fields but the header has ",
          table.header_.size(), " columns"));
    }
    table.rows_.push_back(Row{line_no, std::move(fields)});
  }
  if (table.header_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(table.source_, ": no header line"));
  }
  return table;
}

absl::StatusOr<CsvTable> CsvTable::ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return Parse(buffer.str(), path);
}

absl::Status CsvTable::RequireColumns(const std::vector<absl::string_view>& names) const {
  for (absl::string_view name : names) {
    if (!HasColumn(name)) {
      return absl::InvalidArgumentError(absl::StrCat(source_, ":", header_line_, ": missing column '", name,
                                                     "' (the header has: ",
                                                     absl::StrJoin(header_, ","), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace trainyard::sim
