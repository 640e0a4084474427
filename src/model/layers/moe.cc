// DeepSeekMoE feed-forward (DeepSeek-V2 arXiv 2405.04434 section 2.2; DeepSeek-V3 arXiv
// 2412.19437 section 2.1.2, auxiliary-loss-free balancing).
//
// Symbols (one token, E routed experts, k = num_experts_per_tok):
//   s = softmax(W_g x) or sigmoid(W_g x)                       [E]
//   choice = s + b (noaux_tc; b = e_score_correction_bias, selection only), else s
//   groups: E / n_group consecutive experts; group score = max(choice) (group_limited_greedy)
//           or sum of its top-2 choices (noaux_tc); keep topk_group groups
//   K = top-k of choice over kept experts;  g_i = s_i for i in K
//   V3: g /= sum g (norm_topk_prob); g *= routed_scaling_factor
//   V2: g /= sum g if norm_topk_prob else g *= routed_scaling_factor
//   y = sum_{i in K} g_i FFN_i(x) + sum_shared FFN_s(x)
#include "model/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/layers/layer_context.h"
#include "model/weights.h"

namespace mlarun {

GateSpec GateSpec::FromConfig(const ModelConfig& c) {
  return {.scoring = c.scoring_func,
          .method = c.topk_method,
          .n_experts = c.n_routed_experts,
          .top_k = c.num_experts_per_tok,
          .n_group = c.n_group,
          .topk_group = c.topk_group,
          .norm_topk_prob = c.norm_topk_prob,
          .scale_after_norm = c.scale_after_norm,
          .routed_scaling_factor = c.routed_scaling_factor};
}

void SelectExperts(const KernelTable& kernels, const GateSpec& spec,
                   std::span<const float> router_logits, std::span<const float> bias,
                   int* expert_ids, float* expert_weights) {
  const int n = spec.n_experts;
  std::vector<float> scores(router_logits.begin(), router_logits.end());
  if (spec.scoring == ScoringFunc::kSoftmax) {
    kernels.softmax(scores.data(), n);
  } else {
    for (float& s : scores) s = 1.0f / (1.0f + std::exp(-s));
  }
  std::vector<float> choice = scores;
  if (!bias.empty()) {
    for (int e = 0; e < n; ++e) choice[static_cast<size_t>(e)] += bias[static_cast<size_t>(e)];
  }
  if (spec.method != TopkMethod::kGreedy && spec.n_group > 1) {
    const int per_group = n / spec.n_group;
    std::vector<float> group_scores(static_cast<size_t>(spec.n_group));
    for (int g = 0; g < spec.n_group; ++g) {
      const auto begin = choice.begin() + static_cast<std::ptrdiff_t>(g) * per_group;
      if (spec.method == TopkMethod::kGroupLimitedGreedy) {
        group_scores[static_cast<size_t>(g)] = *std::max_element(begin, begin + per_group);
      } else {
        std::vector<float> members(begin, begin + per_group);
        std::partial_sort(members.begin(), members.begin() + std::min(2, per_group), members.end(),
                          std::greater<float>());
        group_scores[static_cast<size_t>(g)] = members[0] + (per_group > 1 ? members[1] : 0.0f);
      }
    }
    std::vector<int> kept(static_cast<size_t>(spec.topk_group));
    kernels.top_k(group_scores.data(), spec.n_group, spec.topk_group, kept.data());
    std::vector<bool> keep(static_cast<size_t>(spec.n_group), false);
    for (int g : kept) keep[static_cast<size_t>(g)] = true;
    for (int e = 0; e < n; ++e) {
      if (!keep[static_cast<size_t>(e / per_group)]) choice[static_cast<size_t>(e)] = -INFINITY;
    }
  }
  kernels.top_k(choice.data(), n, spec.top_k, expert_ids);
  double sum = 0.0;
  for (int i = 0; i < spec.top_k; ++i) {
    expert_weights[i] = scores[static_cast<size_t>(expert_ids[i])];
    sum += expert_weights[i];
  }
  const bool normalise = spec.top_k > 1 && spec.norm_topk_prob;
  for (int i = 0; i < spec.top_k; ++i) {
    double weight = expert_weights[i];
    if (normalise) weight /= sum + 1e-20;
    if (!normalise || spec.scale_after_norm) weight *= spec.routed_scaling_factor;
    expert_weights[i] = static_cast<float>(weight);
  }
}

namespace {

// One SwiGLU MLP applied to its own tokens: out [n_tokens, hidden] = MLP(x [n_tokens, hidden]).
struct MlpRun {
  const MlpWeights* w = nullptr;
  const float* x = nullptr;
  int64_t n_tokens = 0;
  float* out = nullptr;
};

// Runs several MLPs (the experts of a MoE layer) with two parallel regions in all: gate and up
// projections of every run, then every down projection. Temporaries come from `scratch`.
void DenseMlps(Exec& exec, ScratchArena& scratch, std::span<const MlpRun> runs) {
  const ScratchArena::Frame frame(scratch);
  std::vector<size_t> offset(runs.size() + 1, 0);  // into gate / up, [n_tokens, inter] per run
  for (size_t i = 0; i < runs.size(); ++i) {
    offset[i + 1] = offset[i] + static_cast<size_t>(runs[i].n_tokens * runs[i].w->gate_proj.rows);
  }
  const std::span<float> gate = scratch.Alloc<float>(offset.back());
  const std::span<float> up = scratch.Alloc<float>(offset.back());
  std::vector<MatMulJob> jobs;
  for (size_t i = 0; i < runs.size(); ++i) {
    const MlpRun& r = runs[i];
    const int64_t inter = r.w->gate_proj.rows;
    jobs.push_back({&r.w->gate_proj, 0, inter, r.x, r.n_tokens, gate.data() + offset[i]});
    jobs.push_back({&r.w->up_proj, 0, inter, r.x, r.n_tokens, up.data() + offset[i]});
  }
  MatMulBatch(exec, jobs);
  // Elementwise, so split over the threads (a prefill chunk's dense MLP has ~11 M values).
  constexpr int64_t kSiluSerialMax = 1 << 16;
  const auto n_values = static_cast<int64_t>(gate.size());
  if (n_values <= kSiluSerialMax) {
    exec.k.silu_mul(gate.data(), up.data(), n_values);
  } else {
    exec.pool.ParallelForRange(n_values, 16, [&](int64_t begin, int64_t end, int) {
      exec.k.silu_mul(gate.data() + begin, up.data() + begin, end - begin);
    });
  }
  jobs.clear();
  for (size_t i = 0; i < runs.size(); ++i) {
    const MlpRun& r = runs[i];
    jobs.push_back(
        {&r.w->down_proj, 0, r.w->down_proj.rows, gate.data() + offset[i], r.n_tokens, r.out});
  }
  MatMulBatch(exec, jobs);
}

// Token rows (expert assignments) batched into one DenseMlps call: bounds the scratch memory of a
// long prefill while a decode step runs all its experts together.
constexpr int64_t kMaxRowsPerExpertBatch = 256;

}  // namespace

void DenseMlp(const LayerContext& ctx, const MlpWeights& w, const float* x, float* out) {
  const MlpRun run{.w = &w, .x = x, .n_tokens = ctx.n_tokens(), .out = out};
  DenseMlps(ctx.exec, ctx.scratch, std::span<const MlpRun>(&run, 1));
}

void MoeFeedForward(const LayerContext& ctx, const MoeWeights& w, const float* x, float* out,
                    std::vector<int64_t>* expert_counts) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n_tokens();
  const int64_t hidden = c.hidden_size;
  const GateSpec spec = GateSpec::FromConfig(c);
  const int k = spec.top_k;
  std::vector<float> logits(static_cast<size_t>(n * spec.n_experts));
  MatMul(ctx.exec, w.gate, x, n, logits.data());
  std::vector<int> ids(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  ForEachRow(ctx.exec, n, [&](int64_t t) {
    SelectExperts(ctx.exec.k, spec,
                  std::span<const float>(logits.data() + t * spec.n_experts, spec.n_experts),
                  std::span<const float>(w.e_score_correction_bias.values), ids.data() + t * k,
                  weights.data() + t * k);
  });
  // Tokens grouped by expert, so each expert's weights are read once for the whole batch. The
  // shared experts (one MLP) come last with weight 1 for every token.
  const bool has_shared = !w.shared.gate_proj.empty();
  std::vector<std::vector<std::pair<int64_t, float>>> routed(
      static_cast<size_t>(spec.n_experts + (has_shared ? 1 : 0)));
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < k; ++i) {
      routed[static_cast<size_t>(ids[static_cast<size_t>(t * k + i)])].push_back(
          {t, weights[static_cast<size_t>(t * k + i)]});
    }
    if (has_shared) routed.back().push_back({t, 1.0f});
  }
  auto weights_of = [&](size_t e) -> const MlpWeights& {
    return e < static_cast<size_t>(spec.n_experts) ? w.experts[e] : w.shared;
  };
  if (expert_counts != nullptr) {
    for (int e = 0; e < spec.n_experts; ++e) {
      (*expert_counts)[static_cast<size_t>(e)] +=
          static_cast<int64_t>(routed[static_cast<size_t>(e)].size());
    }
  }
  std::fill(out, out + n * hidden, 0.0f);
  // Experts in ascending id order, in batches of consecutive experts: each token's sum has a
  // fixed order, whatever the batch.
  std::vector<MlpRun> runs;
  std::vector<std::pair<int64_t, float>> source;  // per gathered row: (token, weight)
  std::vector<int64_t> gather_rows;               // rows of runs of several tokens, copied
  std::vector<int64_t> token_start(static_cast<size_t>(n + 1));
  std::vector<int64_t> token_rows;
  size_t e = 0;
  while (e < routed.size()) {
    runs.clear();
    int64_t rows = 0;
    // The batch: experts [e, next) holding at most kMaxRowsPerExpertBatch token rows (or one).
    size_t next = e;
    for (; next < routed.size(); ++next) {
      const int64_t m = static_cast<int64_t>(routed[next].size());
      if (rows > 0 && rows + m > kMaxRowsPerExpertBatch) break;
      rows += m;
    }
    // The batch's gathered inputs and outputs [rows, hidden]; each batch reuses the same room.
    // Gathered row r is token source[r].first, weighted source[r].second; each run's rows are
    // consecutive, runs in ascending expert order.
    const ScratchArena::Frame frame(ctx.scratch);
    const std::span<float> gathered = ctx.scratch.Alloc<float>(static_cast<size_t>(rows * hidden));
    const std::span<float> expert_out =
        ctx.scratch.Alloc<float>(static_cast<size_t>(rows * hidden));
    // A run of one token reads that token's row of x in place: the experts of a decoded token
    // then share one input, which MatMulBatch prepares (quantises) once instead of once per expert.
    source.clear();
    gather_rows.clear();
    for (size_t i = e; i < next; ++i) {
      const auto& tokens = routed[i];
      if (tokens.empty()) continue;
      const auto row = static_cast<int64_t>(source.size());
      for (const auto& [token, weight] : tokens) source.push_back({token, weight});
      const bool one_token = tokens.size() == 1;
      if (!one_token) {
        for (int64_t r = row; r < static_cast<int64_t>(source.size()); ++r)
          gather_rows.push_back(r);
      }
      runs.push_back(
          {.w = &weights_of(i),
           .x = one_token ? x + tokens.front().first * hidden : gathered.data() + row * hidden,
           .n_tokens = static_cast<int64_t>(tokens.size()),
           .out = expert_out.data() + row * hidden});
    }
    ForEachRow(ctx.exec, static_cast<int64_t>(gather_rows.size()), [&](int64_t i) {
      const int64_t r = gather_rows[static_cast<size_t>(i)];
      std::copy_n(x + source[static_cast<size_t>(r)].first * hidden, hidden,
                  gathered.data() + r * hidden);
    });
    DenseMlps(ctx.exec, ctx.scratch, runs);
    // Each token adds its rows in row order, i.e. ascending expert (as over all batches): a
    // fixed order of sums, whatever the split. token_rows lists them per token (CSR).
    std::fill(token_start.begin(), token_start.end(), 0);
    for (const auto& [token, weight] : source) ++token_start[static_cast<size_t>(token + 1)];
    for (int64_t t = 0; t < n; ++t)
      token_start[static_cast<size_t>(t + 1)] += token_start[static_cast<size_t>(t)];
    token_rows.resize(source.size());
    std::vector<int64_t> fill(token_start.begin(), token_start.end() - 1);
    for (int64_t r = 0; r < rows; ++r) {
      token_rows[static_cast<size_t>(
          fill[static_cast<size_t>(source[static_cast<size_t>(r)].first)]++)] = r;
    }
    ForEachRow(ctx.exec, n, [&](int64_t t) {
      for (int64_t i = token_start[static_cast<size_t>(t)];
           i < token_start[static_cast<size_t>(t + 1)]; ++i) {
        const int64_t r = token_rows[static_cast<size_t>(i)];
        Axpy(source[static_cast<size_t>(r)].second, expert_out.data() + r * hidden,
             out + t * hidden, hidden);
      }
    });
    e = next;
  }
}

}  // namespace mlarun
