#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "base/strings.h"
#include "deviceplugin/allocator.h"

namespace gpu_agent::deviceplugin {
namespace {

// Exhaustive search over combinations is used up to this many.
constexpr double kExactSearchLimit = 20000;

double Choose(size_t n, size_t k) {
  double r = 1;
  for (size_t i = 1; i <= k; ++i) r = r * static_cast<double>(n - k + i) / static_cast<double>(i);
  return r;
}

struct Search {
  const std::vector<std::vector<int>>& score;
  const std::vector<int>& pool;  // candidates not fixed
  size_t need;
  std::vector<int> current;
  std::vector<int> best;
  long best_score = -1;

  long Gain(int g) const {
    long s = 0;
    for (int c : current) s += score[static_cast<size_t>(g)][static_cast<size_t>(c)];
    return s;
  }

  void Run(size_t start, size_t picked, long acc) {
    if (picked == need) {
      if (acc > best_score) {
        best_score = acc;
        best = current;
      }
      return;
    }
    for (size_t i = start; i + (need - picked) <= pool.size(); ++i) {
      const int g = pool[i];
      const long gain = Gain(g);
      current.push_back(g);
      Run(i + 1, picked + 1, acc + gain);
      current.pop_back();
    }
  }
};

long SetScore(const std::vector<std::vector<int>>& score, const std::vector<int>& set) {
  long s = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) {
      s += score[static_cast<size_t>(set[i])][static_cast<size_t>(set[j])];
    }
  }
  return s;
}

}  // namespace

std::vector<int> BestConnectedSet(const std::vector<std::vector<int>>& score,
                                  const std::vector<int>& candidates, const std::vector<int>& fixed,
                                  size_t size) {
  std::vector<int> pool;
  {
    std::unordered_set<int> fixed_set(fixed.begin(), fixed.end());
    for (int c : candidates) {
      if (!fixed_set.count(c)) pool.push_back(c);
    }
  }
  const size_t need = size - fixed.size();
  if (need == 0) return fixed;
  if (Choose(pool.size(), need) <= kExactSearchLimit) {
    Search s{score, pool, need, fixed, {}, -1};
    s.Run(0, 0, SetScore(score, fixed));
    return s.best;
  }
  // Greedy: grow from the fixed set (or the best pair), always adding the
  // GPU that gains most, then improve by single swaps until none helps.
  std::vector<int> chosen = fixed;
  std::vector<bool> used(score.size(), false);
  for (int f : fixed) used[static_cast<size_t>(f)] = true;
  auto gain = [&](int g) {
    long s = 0;
    for (int c : chosen) s += score[static_cast<size_t>(g)][static_cast<size_t>(c)];
    return s;
  };
  while (chosen.size() < size) {
    int pick = -1;
    long pick_gain = -1;
    for (int g : pool) {
      if (used[static_cast<size_t>(g)]) continue;
      long v = gain(g);
      if (chosen.empty()) {
        for (int h : pool) {
          if (h != g) v = std::max<long>(v, score[static_cast<size_t>(g)][static_cast<size_t>(h)]);
        }
      }
      if (v > pick_gain) {
        pick_gain = v;
        pick = g;
      }
    }
    used[static_cast<size_t>(pick)] = true;
    chosen.push_back(pick);
  }
  for (bool improved = true; improved;) {
    improved = false;
    long base = SetScore(score, chosen);
    for (size_t i = fixed.size(); i < chosen.size() && !improved; ++i) {
      for (int g : pool) {
        if (used[static_cast<size_t>(g)]) continue;
        const int old = chosen[i];
        chosen[i] = g;
        const long s = SetScore(score, chosen);
        if (s > base) {
          used[static_cast<size_t>(old)] = false;
          used[static_cast<size_t>(g)] = true;
          improved = true;
          break;
        }
        chosen[i] = old;
      }
    }
  }
  return chosen;
}

absl::StatusOr<std::vector<std::string>> PreferredAllocation(
    const DeviceSnapshot& snap, const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  if (size <= 0) {
    return absl::InvalidArgumentError(StrCat("allocation_size ", size, " must be at least 1"));
  }
  if (static_cast<size_t>(size) > available.size()) {
    return absl::InvalidArgumentError(StrCat("allocation_size ", size, " is more than the ",
                                             available.size(), " available devices"));
  }
  if (must_include.size() > static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(StrCat("must-include lists ", must_include.size(),
                                             " devices, more than allocation_size ", size));
  }
  std::vector<const PluginDevice*> avail;
  avail.reserve(available.size());
  std::vector<std::string> unknown;
  std::unordered_set<std::string_view> avail_ids;
  for (const std::string& id : available) {
    if (!avail_ids.insert(id).second) continue;
    const PluginDevice* d = snap.Find(id);
    if (d == nullptr) {
      unknown.push_back(id);
    } else {
      avail.push_back(d);
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(StrCat("unknown available device IDs ", ListIds(unknown)));
  }
  std::vector<std::string> not_available;
  std::unordered_set<std::string_view> must;
  for (const std::string& id : must_include) {
    if (!avail_ids.count(id)) not_available.push_back(id);
    must.insert(id);
  }
  if (!not_available.empty()) {
    return absl::InvalidArgumentError(StrCat("must-include device IDs ", ListIds(not_available),
                                             " are not among the available devices"));
  }
  if (avail.size() < static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(StrCat("allocation_size ", size, " is more than the ",
                                             avail.size(), " distinct available devices"));
  }
  std::vector<std::string> result(must_include.begin(), must_include.end());
  // Dedupe must_include while keeping order.
  {
    std::unordered_set<std::string> s;
    result.erase(std::remove_if(result.begin(), result.end(),
                                [&](const std::string& id) { return !s.insert(id).second; }),
                 result.end());
  }

  if (!snap.replicated) {
    std::vector<int> candidates, fixed;
    std::map<int, const PluginDevice*> by_physical;
    for (const PluginDevice* d : avail) {
      candidates.push_back(d->physical);
      by_physical[d->physical] = d;
      if (must.count(d->id)) fixed.push_back(d->physical);
    }
    std::vector<int> set =
        BestConnectedSet(*snap.link_score, candidates, fixed, static_cast<size_t>(size));
    for (int p : set) {
      const std::string& id = by_physical[p]->id;
      if (!must.count(id)) result.push_back(id);
    }
    return result;
  }

  // Replicas: count each GPU's replicas in use (advertised but not
  // available), then take from the least-used GPU each time.
  std::vector<int> in_use = snap.replicas_per_physical;
  std::map<int, std::vector<const PluginDevice*>> free_by_gpu;
  for (const PluginDevice* d : avail) {
    --in_use[static_cast<size_t>(d->physical)];
    if (!must.count(d->id)) free_by_gpu[d->physical].push_back(d);
  }
  for (const PluginDevice* d : avail) {
    if (must.count(d->id)) ++in_use[static_cast<size_t>(d->physical)];
  }
  for (auto& [gpu, list] : free_by_gpu) {
    std::sort(list.begin(), list.end(),
              [](const PluginDevice* a, const PluginDevice* b) { return a->id < b->id; });
    std::reverse(list.begin(), list.end());  // pop_back takes the smallest ID
  }
  while (result.size() < static_cast<size_t>(size)) {
    int best = -1;
    for (auto& [gpu, list] : free_by_gpu) {
      if (list.empty()) continue;
      const int here = in_use[static_cast<size_t>(gpu)];
      if (best < 0 || (snap.pack_replicas ? here > in_use[static_cast<size_t>(best)]
                                          : here < in_use[static_cast<size_t>(best)])) {
        best = gpu;
      }
    }
    auto& list = free_by_gpu[best];
    result.push_back(list.back()->id);
    list.pop_back();
    ++in_use[static_cast<size_t>(best)];
  }
  return result;
}

}  // namespace gpu_agent::deviceplugin
