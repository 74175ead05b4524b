// YamlTree: one YAML document read into a small tree of nodes, for the job
// spec. It is read with libyaml's event parser, in one pass (yaml-cpp's
// scanner reads ~5 MB/s, which made the largest allowed spec cost 170 ms of
// server CPU to admit). A tree holds what a spec's reader asks of it: each
// node's kind, a scalar's text, a sequence's items, a mapping's entries in
// the order written (repeated keys kept, for the reader to refuse), and the
// line each node starts on. An alias is the node its anchor names (shared in
// the tree); but a reader copies what it reads (a spec's command, its env),
// so what a document holds with every alias expanded is bounded
// (kMaxExpansion times its text): a few KB of aliases of aliases cannot make
// gigabytes. Nesting is bounded too, so no input makes the reader recurse
// without end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainyard::api {

class YamlNode {
 public:
  enum class Kind { kNull, kScalar, kSequence, kMap };

  bool IsNull() const { return kind_ == Kind::kNull; }
  bool IsScalar() const { return kind_ == Kind::kScalar; }
  bool IsSequence() const { return kind_ == Kind::kSequence; }
  bool IsMap() const { return kind_ == Kind::kMap; }
  // A scalar's text (empty for other kinds).
  const std::string& Scalar() const { return scalar_; }
  // The line the node starts on, from 1.
  int Line() const { return line_; }
  // A sequence's items or a mapping's entries.
  size_t size() const { return IsMap() ? entries_.size() : items_.size(); }
  // REQUIRES: IsSequence() and i < size().
  const YamlNode& operator[](size_t i) const { return *items_[i]; }
  // A mapping's entries (key, value), in the order written.
  const std::vector<std::pair<const YamlNode*, const YamlNode*>>& entries() const { return entries_; }
  // The value of the first entry whose key is the scalar `key`; nullptr
  // when there is none (or this is not a mapping).
  const YamlNode* Find(std::string_view key) const;

 private:
  friend class YamlTree;
  Kind kind_ = Kind::kNull;
  int line_ = 1;
  std::string scalar_;
  // Its size with every alias in it expanded (scalar bytes, one per node).
  uint64_t expanded_ = 1;
  std::vector<const YamlNode*> items_;
  std::vector<std::pair<const YamlNode*, const YamlNode*>> entries_;
};

class YamlTree {
 public:
  // Nesting deeper than this (sequences and mappings in one another) is
  // refused.
  static constexpr int kMaxDepth = 64;
  // What the document may hold with its aliases expanded (scalar bytes, and
  // one per node), at most this many times its text's size (and 64 KiB).
  static constexpr int kMaxExpansion = 4;

  // Reads the first document of `text`, and notes whether a second begins.
  // An empty text is one null document. On bad YAML, error() says where and
  // why: "line L, column C: PROBLEM".
  static YamlTree Parse(std::string_view text);
  YamlTree(YamlTree&&) = default;  // the nodes stay where they are
  YamlTree(const YamlTree&) = delete;
  YamlTree& operator=(const YamlTree&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // True when the text holds more than one document.
  bool several_documents() const { return several_documents_; }
  // The document's root (a null node when the text is empty or not ok()).
  const YamlNode& root() const { return root_ ? *root_ : null_; }

 private:
  YamlTree() = default;
  YamlNode* Add(YamlNode::Kind kind, int line);

  std::deque<YamlNode> nodes_;  // every node; pointers into it stay put
  const YamlNode* root_ = nullptr;
  YamlNode null_;
  bool several_documents_ = false;
  std::string error_;
};

}  // namespace trainyard::api
