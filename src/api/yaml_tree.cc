// One YAML document read with libyaml's event parser (see yaml_tree.h).
#include "api/yaml_tree.h"

#include <yaml.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace trainyard::api {

const YamlNode* YamlNode::Find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k->IsScalar() && k->Scalar() == key) return v;
  }
  return nullptr;
}

YamlNode* YamlTree::Add(YamlNode::Kind kind, int line) {
  YamlNode& n = nodes_.emplace_back();
  n.kind_ = kind;
  n.line_ = line;
  return &n;
}

namespace {

// A plain scalar YAML reads as null (the core schema's forms).
bool IsNullText(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

std::string AnchorOf(const yaml_char_t* anchor) {
  return anchor == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(anchor));
}

// Owns libyaml's parser and its current event.
class EventReader {
 public:
  explicit EventReader(std::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  ~EventReader() {
    if (have_event_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  // The next event, or nullptr with *error set when the text is not YAML.
  const yaml_event_t* Next(std::string* error) {
    if (have_event_) yaml_event_delete(&event_);
    have_event_ = yaml_parser_parse(&parser_, &event_) != 0;
    if (!have_event_) {
      *error = absl::StrCat("line ", parser_.problem_mark.line + 1, ", column ", parser_.problem_mark.column + 1, ": ",
                            parser_.problem != nullptr ? parser_.problem : "cannot be read",
                            parser_.context != nullptr ? absl::StrCat(" (", parser_.context, ")") : "");
      return nullptr;
    }
    return &event_;
  }

 private:
  yaml_parser_t parser_;
  yaml_event_t event_;
  bool have_event_ = false;
};

}  // namespace

YamlTree YamlTree::Parse(std::string_view text) {
  YamlTree tree;
  EventReader reader(text);
  // The collections being read, each with its key read and not yet given a
  // value (for mappings).
  struct Open {
    YamlNode* node;
    const YamlNode* key = nullptr;
    std::string anchor;
  };
  std::vector<Open> open;
  std::map<std::string, const YamlNode*, std::less<>> anchors;
  int documents = 0;
  const uint64_t max_expanded =
      std::max<uint64_t>(64 << 10, static_cast<uint64_t>(kMaxExpansion) * static_cast<uint64_t>(text.size()));
  // A complete node goes into the collection that holds it, or is the root;
  // false when the collection would hold more than max_expanded expanded.
  auto place = [&tree, &open, max_expanded](const YamlNode* n) {
    if (open.empty()) {
      if (tree.root_ == nullptr) tree.root_ = n;
      return true;
    }
    Open& o = open.back();
    // Each is at most max_expanded, so the sum cannot overflow.
    o.node->expanded_ += n->expanded_;
    if (o.node->expanded_ > max_expanded) return false;
    if (o.node->IsSequence()) {
      o.node->items_.push_back(n);
    } else if (o.key == nullptr) {
      o.key = n;
    } else {
      o.node->entries_.emplace_back(o.key, n);
      o.key = nullptr;
    }
    return true;
  };
  auto too_large = [&tree, max_expanded](const yaml_event_t* e) {
    tree.error_ = absl::StrCat("line ", e->start_mark.line + 1, ", column ", e->start_mark.column + 1,
                               ": with its aliases expanded the document holds more than ", max_expanded,
                               " bytes (", kMaxExpansion, " times its text)");
  };
  for (;;) {
    const yaml_event_t* e = reader.Next(&tree.error_);
    if (e == nullptr) return tree;
    int line = static_cast<int>(e->start_mark.line) + 1;
    switch (e->type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > 1) {
          tree.several_documents_ = true;
          return tree;
        }
        break;
      case YAML_SCALAR_EVENT: {
        std::string_view value(reinterpret_cast<const char*>(e->data.scalar.value), e->data.scalar.length);
        bool null = e->data.scalar.tag == nullptr && e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                    IsNullText(value);
        YamlNode* n = tree.Add(null ? YamlNode::Kind::kNull : YamlNode::Kind::kScalar, line);
        if (!null) n->scalar_.assign(value);
        n->expanded_ += value.size();
        std::string anchor = AnchorOf(e->data.scalar.anchor);
        if (!anchor.empty()) anchors[anchor] = n;
        if (!place(n)) {
          too_large(e);
          return tree;
        }
        break;
      }
      case YAML_ALIAS_EVENT: {
        // Only a node complete before the alias: no alias names a node
        // that holds it.
        auto it = anchors.find(AnchorOf(e->data.alias.anchor));
        if (it == anchors.end()) {
          tree.error_ = absl::StrCat("line ", line, ", column ", e->start_mark.column + 1, ": alias *",
                                     AnchorOf(e->data.alias.anchor), " names no anchor before it");
          return tree;
        }
        if (!place(it->second)) {
          too_large(e);
          return tree;
        }
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (static_cast<int>(open.size()) >= kMaxDepth) {
          tree.error_ = absl::StrCat("line ", line, ", column ", e->start_mark.column + 1,
                                     ": lists and mappings nested more than ", kMaxDepth, " deep");
          return tree;
        }
        bool seq = e->type == YAML_SEQUENCE_START_EVENT;
        YamlNode* n = tree.Add(seq ? YamlNode::Kind::kSequence : YamlNode::Kind::kMap, line);
        open.push_back(Open{n, nullptr,
                            AnchorOf(seq ? e->data.sequence_start.anchor : e->data.mapping_start.anchor)});
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        Open done = std::move(open.back());
        open.pop_back();
        if (!done.anchor.empty()) anchors[done.anchor] = done.node;
        if (!place(done.node)) {
          too_large(e);
          return tree;
        }
        break;
      }
      case YAML_STREAM_END_EVENT:
        return tree;
      default:  // stream start, document end
        break;
    }
  }
}

}  // namespace trainyard::api
