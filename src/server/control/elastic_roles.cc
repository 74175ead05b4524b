// The roles and size of an elastic job's membership (elastic_roles.h).
#include "server/control/elastic_roles.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/roles.h"

namespace trainyard::server {

Roles FactsOf(const v1::JobRecord& rec) {
  Roles roles;
  for (const v1::ReplicaSpec& rs : rec.spec().replicas()) {
    roles[rs.role()] = RoleFacts{.worker = api::TraitsOf(rec.spec().framework(), rs).worker,
                                 .count = rs.count(),
                                 .min_count = rs.min_count()};
  }
  for (const v1::TaskRecord& t : rec.tasks()) {
    auto it = roles.find(t.role());
    if (it != roles.end() && !t.node().empty()) ++it->second.placed;
  }
  return roles;
}

std::pair<int, int> ElasticSize(const Roles& roles) {
  int placed = 0, all = 0;
  for (const auto& [name, r] : roles) {
    if (r.min_count == 0) continue;
    placed += r.placed;
    all += r.count;
  }
  return {placed, all};
}

std::string NextMembership(v1::JobRecord* rec) {
  rec->set_membership_epoch(rec->membership_epoch() + 1);
  Roles roles = FactsOf(*rec);
  int id = 0;
  for (bool placed : {true, false}) {
    for (bool worker : {true, false}) {
      for (v1::TaskRecord& t : *rec->mutable_tasks()) {
        if (t.node().empty() == placed || api::IsJobMasterRole(t.role())) continue;
        auto it = roles.find(t.role());
        if (it != roles.end() && it->second.worker == worker) t.set_worker_id(id++);
      }
    }
  }
  auto [placed, all] = ElasticSize(roles);
  std::vector<std::string> elastic;  // in the spec's order
  for (const v1::ReplicaSpec& rs : rec->spec().replicas()) {
    if (rs.min_count() == 0) continue;
    elastic.push_back(absl::StrCat(rs.role(), " ", roles[rs.role()].placed, " of ", rs.count(), " (minCount ",
                                   rs.min_count(), ")"));
  }
  return absl::StrCat("membership epoch ", rec->membership_epoch(), ": ", placed, " of ", all,
                      " elastic tasks placed (", absl::StrJoin(elastic, ", "), ")");
}


int PlacedWorkers(const v1::JobRecord& rec) {
  int n = 0;
  for (const auto& [name, r] : FactsOf(rec)) n += r.worker ? r.placed : 0;
  return n;
}

}  // namespace trainyard::server
