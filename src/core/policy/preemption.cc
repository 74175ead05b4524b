// Victim search: a greedy over nodes, fewest victims a preemption would end
// (their preemption budget spent) per task slot gained first, then "new
// victim jobs per task slot gained" (then victims that do not checkpoint,
// then victims that are not elastic, then GPU-time lost, per slot), with
// lazy re-evaluation; then a tentative gang placement
// checks the choice, and a pruning pass drops victims that turn out not to
// be needed.
#include "core/policy/preemption.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/flat_hash_set.h"
#include "core/policy/gpu_fit.h"

namespace trainyard::core {
namespace {

using Victims = absl::InlinedVector<JobSlot, 8>;

// Scalars a victim frees on one node.
struct Freed {
  int64_t memory_mb = 0;
  int64_t vcores_milli = 0;
  int32_t gpus = 0;
  // GPU share in thousandths (whole GPUs count 1000): the slots of a share
  // request. An estimate, as shares on different GPUs do not add up to one
  // GPU; the tentative placement that follows checks the real fit.
  int64_t gpu_milli = 0;
  void Add(const Freed& o) {
    memory_mb += o.memory_mb;
    vcores_milli += o.vcores_milli;
    gpus += o.gpus;
    gpu_milli += o.gpu_milli;
  }
};

struct Candidate {
  NodeId node;
  absl::InlinedVector<std::pair<JobSlot, Freed>, 8> victims;  // freed per job, cheapest first
};

// Per-victim weights summed over a set of victims (Search::Weigh).
struct Sums {
  double ended = 0;
  double whole = 0;
  double plain = 0;
  double time = 0;
};

// What a set of victims costs per task slot it gains, lexicographically:
// jobs the preemption would end (no preemption left in their budget), then
// jobs stopped, then jobs that do not checkpoint (they lose everything
// since their last save of their own), then those that are not elastic (an
// elastic job is placed again with what is left, down to its minCount; the
// others wait in the queue), then GPU-seconds lost. Lower is better.
struct Score {
  double ended = 1e18;
  double jobs = 1e18;
  double whole = 1e18;
  double plain = 1e18;
  double time = 1e18;
  bool operator<(const Score& o) const {
    return std::tie(ended, jobs, plain, whole, time) < std::tie(o.ended, o.jobs, o.plain, o.whole, o.time);
  }
  // The sums over a set of `jobs` victims, per slot of `gain` (> 0).
  static Score PerSlot(const Sums& s, double jobs, int gain) {
    return Score{.ended = s.ended / gain,
                 .jobs = jobs / gain,
                 .whole = s.whole / gain,
                 .plain = s.plain / gain,
                 .time = s.time / gain};
  }
};

struct Offer {
  Score score;
  int32_t cand;
  uint32_t version;
  bool operator<(const Offer& o) const {  // max-heap: "less" = worse
    if (score < o.score || o.score < score) return o.score < score;
    return cand > o.cand;
  }
};

class Search {
 public:
  Search(ClusterState* state, JobSlot j, const std::function<bool(const JobBrief&)>& eligible,
         absl::Time now)
      : state_(state), now_(now), cost_(state->JobSlots(), -1.0) {
    const JobRequest& job = state->job(j).request;
    // The main role: the most GPUs per task, then the most cores, then
    // memory (a job of CPU tasks is counted in its big tasks, not in the
    // small job-master task its spec lists first).
    auto size = [](const RoleRequest& r) {
      return std::tuple(r.resource.gpus, r.resource.gpu_milli, r.resource.vcores_milli, r.resource.memory_mb);
    };
    for (const RoleRequest& r : job.roles) {
      if (main_ == nullptr || size(r) > size(*main_)) main_ = &r;
    }
    // Slots are counted in tasks of the main (most-GPU) role. When that role
    // uses GPUs, roles without GPUs (parameter servers, the job master) are
    // not counted: they need no GPU slot and fit beside the others. Of a job
    // of CPU tasks, roles under half the main role's cores are not counted
    // either. (An estimate: the tentative placement checks the real fit.)
    for (const RoleRequest& r : job.roles) {
      if (main_->resource.gpus > 0 && r.resource.gpus == 0) continue;
      if (main_->resource.gpus == 0 && int64_t{r.resource.vcores_milli} * 2 < main_->resource.vcores_milli) continue;
      need_ += r.MinAvailable();
    }
    Collect(j, eligible);
  }

  // Greedy selection; returns victims (maybe more than needed) or nullopt.
  std::optional<std::vector<JobSlot>> Select(int extra_slots) {
    int need = need_ + extra_slots;
    int have = 0;
    chosen_.assign(state_->JobSlots(), 0);
    std::priority_queue<Offer> heap;
    version_.assign(cands_.size(), 0);
    for (size_t c = 0; c < cands_.size(); ++c) {
      have += Slots(cands_[c], {});
      PushOffer(&heap, static_cast<int32_t>(c), need - have);
    }
    std::vector<JobSlot> chosen;
    while (have < need && !heap.empty()) {
      Offer top = heap.top();
      heap.pop();
      if (top.version != version_[top.cand]) continue;
      Victims add;
      int gain = Evaluate(cands_[top.cand], need - have, &add);
      if (gain <= 0) continue;
      for (JobSlot v : add) {
        chosen_[v] = 1;
        chosen.push_back(v);
      }
      have = RecountAffected(add, have, &heap, need);
    }
    if (have < need) return std::nullopt;
    return chosen;
  }

 private:
  void Collect(JobSlot j, const std::function<bool(const JobBrief&)>& eligible) {
    for (NodeId n = 0; n < state_->NodeSlots(); ++n) {
      const NodeState& node = state_->node(n);
      if (!node.present || !node.schedulable) continue;
      if (node.reserved_for >= 0 && node.reserved_for != j) continue;
      if (!main_->rack.empty() && (node.rack < 0 || state_->racks()[node.rack] != main_->rack)) {
        continue;
      }
      if (!main_->node_name.empty() && !main_->relax && node.name != main_->node_name) continue;
      if (!main_->node_selector.Empty() && !main_->node_selector.Matches(state_->labels(n))) {
        continue;
      }
      if (!state_->ModelAllows(*main_, n)) continue;
      Candidate c{.node = n};
      for (const NodeTask& t : node.tasks) {
        JobSlot v = t.job;
        const JobBrief& victim = state_->brief(v);
        if (victim.phase != JobPhase::kRunning || !eligible(victim)) continue;
        auto it = std::find_if(c.victims.begin(), c.victims.end(),
                               [v](const auto& e) { return e.first == v; });
        if (it == c.victims.end()) {
          c.victims.emplace_back(v, Freed{});
          it = c.victims.end() - 1;
        }
        it->second.gpus += t.gpus;
        it->second.gpu_milli += int64_t{t.gpus} * 1000 + t.gpu_milli;
        it->second.memory_mb += t.memory_mb;
        it->second.vcores_milli += t.vcores_milli;
      }
      if (c.victims.empty() && SlotsIn(FreeOf(n)) == 0) continue;
      std::sort(c.victims.begin(), c.victims.end(), [&](const auto& a, const auto& b) {
        return std::make_tuple(Ended(a.first), Plain(a.first), Whole(a.first), Cost(a.first), a.first) <
               std::make_tuple(Ended(b.first), Plain(b.first), Whole(b.first), Cost(b.first), b.first);
      });
      cand_of_node_[n] = static_cast<int32_t>(cands_.size());
      cands_.push_back(std::move(c));
    }
  }

  // GPU-seconds job v would lose; cached per job slot.
  double Cost(JobSlot v) const {
    if (cost_[v] < 0) {
      const JobBrief& job = state_->brief(v);
      cost_[v] = double(job.gpus) * absl::ToDoubleSeconds(now_ - job.start_time);
    }
    return cost_[v];
  }

  // 1 when job v does not checkpoint, else 0.
  int Plain(JobSlot v) const { return state_->brief(v).checkpoints ? 0 : 1; }
  // 1 when a preemption would end job v, else 0.
  int Ended(JobSlot v) const { return state_->brief(v).last_preemption ? 1 : 0; }
  // 1 when job v is not elastic (it waits whole once stopped), else 0.
  int Whole(JobSlot v) const { return state_->brief(v).elastic ? 0 : 1; }

  // Adds victim v's weights to `s`.
  void Weigh(JobSlot v, Sums* s) const {
    s->ended += Ended(v);
    s->whole += Whole(v);
    s->plain += Plain(v);
    s->time += Cost(v);
  }

  // The score of stopping `set` to gain `gain` slots; the worst when none.
  Score ScoreOf(const Victims& set, int gain) const {
    if (gain <= 0) return Score{};
    Sums s;
    for (JobSlot v : set) Weigh(v, &s);
    return Score::PerSlot(s, double(set.size()), gain);
  }

  Freed FreeOf(NodeId n) const {
    const NodeState& node = state_->node(n);
    const Resource& f = node.free;
    // Free share counts only where a whole share of the main role fits: the
    // slivers left on split GPUs serve no task of it.
    const Resource& want = main_->resource;
    int64_t milli = want.IsGpuShare() ? int64_t{SharesFitting(node, want.gpu_milli, want.gpu_memory_mb)} *
                                            want.gpu_milli
                                      : int64_t{f.gpus} * 1000;
    return Freed{.memory_mb = f.memory_mb,
                 .vcores_milli = f.vcores_milli,
                 .gpus = f.gpus,
                 .gpu_milli = milli};
  }

  int SlotsIn(const Freed& r) const {
    const Resource& want = main_->resource;
    int64_t s = kMaxGpus;
    if (want.gpus > 0) s = std::min<int64_t>(s, r.gpus / want.gpus);
    if (want.IsGpuShare()) s = std::min<int64_t>(s, r.gpu_milli / want.gpu_milli);
    if (want.memory_mb > 0) s = std::min<int64_t>(s, r.memory_mb / want.memory_mb);
    if (want.vcores_milli > 0) s = std::min<int64_t>(s, r.vcores_milli / want.vcores_milli);
    return static_cast<int>(s);
  }

  // Task slots on a candidate with chosen_ (plus `extra`) gone.
  int Slots(const Candidate& c, const Victims& extra) const {
    Freed r = FreeOf(c.node);
    for (const auto& [v, f] : c.victims) {
      if (chosen_[v] || std::find(extra.begin(), extra.end(), v) != extra.end()) {
        r.Add(f);
      }
    }
    return SlotsIn(r);
  }

  // Unchosen victims on c, taken in `order` until `want` slots are gained;
  // keeps the prefix with the best Score.
  int Take(const Candidate& c, int want, const absl::InlinedVector<int, 8>& order,
           Victims* add) const {
    int base = Slots(c, {});
    Victims prefix;
    Sums sums;
    Score best_score;
    int best_gain = 0;
    size_t best_len = 0;
    for (int i : order) {
      JobSlot v = c.victims[i].first;
      if (chosen_[v]) continue;
      prefix.push_back(v);
      Weigh(v, &sums);
      int gain = std::min(want, Slots(c, prefix) - base);
      if (gain > 0) {
        Score score = Score::PerSlot(sums, double(prefix.size()), gain);
        if (score < best_score) {
          best_score = score;
          best_gain = gain;
          best_len = prefix.size();
        }
      }
      if (gain >= want) break;
    }
    prefix.resize(best_len);
    *add = std::move(prefix);
    return best_gain;
  }

  // The better of "cheapest first" and "largest first" on c by Score.
  int Evaluate(const Candidate& c, int want, Victims* add) const {
    absl::InlinedVector<int, 8> cheap(c.victims.size());
    for (size_t i = 0; i < cheap.size(); ++i) cheap[i] = static_cast<int>(i);
    absl::InlinedVector<int, 8> large = cheap;
    std::stable_sort(large.begin(), large.end(), [&](int a, int b) {
      return c.victims[a].second.gpus > c.victims[b].second.gpus;
    });
    Victims a, b;
    int ga = Take(c, want, cheap, &a);
    int gb = Take(c, want, large, &b);
    if (ScoreOf(b, gb) < ScoreOf(a, ga)) {
      *add = std::move(b);
      return gb;
    }
    *add = std::move(a);
    return ga;
  }

  void PushOffer(std::priority_queue<Offer>* heap, int32_t c, int want) {
    if (want <= 0) return;
    Victims add;
    int gain = Evaluate(cands_[c], want, &add);
    if (gain <= 0) return;
    heap->push(Offer{ScoreOf(add, gain), c, ++version_[c]});
  }

  // Adds the slots freed by `add` on every node they run on.
  int RecountAffected(const Victims& add, int have, std::priority_queue<Offer>* heap,
                      int need) {
    absl::flat_hash_set<int32_t> touched;
    for (JobSlot v : add) {
      for (const PlacedTask& t : state_->job(v).tasks) {
        auto it = cand_of_node_.find(t.node);
        if (t.node >= 0 && it != cand_of_node_.end()) touched.insert(it->second);
      }
    }
    std::vector<int32_t> sorted(touched.begin(), touched.end());
    std::sort(sorted.begin(), sorted.end());
    for (int32_t c : sorted) {
      for (JobSlot v : add) chosen_[v] = 0;
      int old_slots = Slots(cands_[c], {});
      for (JobSlot v : add) chosen_[v] = 1;
      have += Slots(cands_[c], {}) - old_slots;
    }
    for (int32_t c : sorted) PushOffer(heap, c, need - have);
    return have;
  }

  ClusterState* state_;
  absl::Time now_;
  const RoleRequest* main_ = nullptr;
  int need_ = 0;
  std::vector<Candidate> cands_;
  absl::flat_hash_map<NodeId, int32_t> cand_of_node_;
  std::vector<uint32_t> version_;
  std::vector<char> chosen_;  // by job slot
  mutable std::vector<double> cost_;
};

// Tentatively frees `victims` and tries to place j; restores everything.
bool WouldFit(ClusterState* state, GangPlacer* placer, JobSlot j,
              const std::vector<JobSlot>& victims, std::vector<NodeId>* nodes) {
  std::vector<std::vector<PlacedTask>> saved;
  for (JobSlot v : victims) {
    saved.push_back(state->job(v).tasks);
    state->ReleaseAllTasks(v);
  }
  PlaceResult r = placer->Place(j);
  if (r.placed) {
    state->ReleaseAllTasks(j);
    if (nodes != nullptr) *nodes = r.nodes;
  }
  for (size_t i = 0; i < victims.size(); ++i) {
    for (const PlacedTask& t : saved[i]) {
      if (t.node >= 0) state->AllocateTask(victims[i], t.role, t.index, t.node, t.allocation);
    }
  }
  return r.placed;
}

}  // namespace

std::optional<VictimChoice> ChooseVictims(ClusterState* state, GangPlacer* placer, JobSlot j,
                                          const std::function<bool(const JobBrief&)>& eligible,
                                          absl::Time now) {
  Search search(state, j, eligible, now);
  for (int extra : {0, 1, 4}) {
    std::optional<std::vector<JobSlot>> victims = search.Select(extra);
    if (!victims.has_value()) return std::nullopt;
    VictimChoice choice{.victims = *victims};
    if (!WouldFit(state, placer, j, choice.victims, &choice.nodes)) continue;
    // Prune: drop victims (most expensive first: those a preemption would
    // end, those that do not checkpoint, then by GPU-time) the job can do
    // without.
    auto cost = [&](JobSlot v) {
      const JobState& job = state->job(v);
      return std::make_tuple(state->brief(v).last_preemption ? 1 : 0, state->brief(v).checkpoints ? 0 : 1,
                             double(job.used.gpus) * absl::ToDoubleSeconds(now - job.start_time),
                             -v);
    };
    std::sort(choice.victims.begin(), choice.victims.end(),
              [&](JobSlot a, JobSlot b) { return cost(a) < cost(b); });
    for (size_t i = choice.victims.size(); i-- > 0;) {
      std::vector<JobSlot> fewer = choice.victims;
      fewer.erase(fewer.begin() + static_cast<long>(i));
      std::vector<NodeId> nodes;
      if (WouldFit(state, placer, j, fewer, &nodes)) {
        choice.victims = std::move(fewer);
        choice.nodes = std::move(nodes);
      }
    }
    return choice;
  }
  return std::nullopt;
}

}  // namespace trainyard::core

