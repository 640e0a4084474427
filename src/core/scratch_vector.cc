// Baseline-compiled std::vector growth for the ISA-specific kernel files (scratch_vector.h).
#include "core/scratch_vector.h"

namespace mlarun {

void ResizeScratch(std::vector<float>* v, size_t n) { v->resize(n); }
void ResizeScratch(std::vector<uint32_t>* v, size_t n) { v->resize(n); }
void AssignScratch(std::vector<float>* v, size_t n, float value) { v->assign(n, value); }

}  // namespace mlarun
