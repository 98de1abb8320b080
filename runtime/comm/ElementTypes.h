//===- ElementTypes.h - Sizes, names and reductions of the element types -*- C++ -*-===//
//
// C++ helpers over the codes of CollectiveTypes.h: the size and name of an element type, the
// name of a reduction, the conversion of f32 to f16, and the elementwise reduction functions
// a CPU backend applies (Gloo's algorithms take them as a plain function). The halves reduce
// through f32: a sum is computed in f32 and rounded to nearest even, so every step of a ring rounds
// once; max and min return one of the inputs unchanged. A floating-point max or min is NaN when an
// input is NaN (the first NaN wins); of two equal values the first wins. Integer sums wrap.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_ELEMENTTYPES_H
#define MTC_RUNTIME_COMM_ELEMENTTYPES_H

#include "runtime/comm/CollectiveTypes.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mtc::rt {

/// Whether `code` is one of the MtcElementType / MtcReduction codes (codes arrive as integers
/// from compiled code).
bool isElementType(int64_t code);
bool isReduction(int64_t code);

/// Bytes per element (0 for an invalid code).
size_t elementSize(MtcElementType type);
/// "f32", "bf16", ...; "an unknown element type" for an invalid code.
std::string_view elementTypeName(MtcElementType type);
/// "sum", "max", "min"; "an unknown reduction" for an invalid code.
std::string_view reductionName(MtcReduction reduction);

/// f32 to IEEE binary16 bits: round to nearest even, overflow to infinity, NaN stays NaN
/// (quiet). The other conversions of the 16-bit floats are runtime/support/Safetensors.h's
/// (floatToBf16, bf16ToFloat, f16ToFloat).
uint16_t floatToF16(float value);

/// out[i] = a[i] (reduction) b[i] for i < count; out may alias a or b.
using ReduceFunction = void (*)(void *out, const void *a, const void *b, size_t count);
/// The function of a (type, reduction) pair; null when a code is invalid.
ReduceFunction reduceFunction(MtcElementType type, MtcReduction reduction);

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_ELEMENTTYPES_H
