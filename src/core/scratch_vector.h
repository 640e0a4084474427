// Resizing the per-thread scratch vectors of the ISA-specific kernel files (kernels/cpu/*.cc,
// compiled with -mavx2, -mavx512f, -mamx-tile, ...). Calling std::vector::resize or assign there
// instantiates std::vector's growth code in that file as a weak symbol, and the linker may use
// that copy, AVX-512 instructions and all, for every caller in the program (an ASan build died of
// SIGILL on an AVX2 CPU that way: the tokenizer ran kernels_amx.o's vector::assign). These are
// compiled with the baseline flags; tests/kernels/isa_symbols_test.sh checks the kernel objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlarun {

// v->resize(n) (new elements zero).
void ResizeScratch(std::vector<float>* v, size_t n);
void ResizeScratch(std::vector<uint32_t>* v, size_t n);
// v->assign(n, value).
void AssignScratch(std::vector<float>* v, size_t n, float value);

}  // namespace mlarun
