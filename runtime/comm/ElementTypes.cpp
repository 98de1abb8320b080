//===- ElementTypes.cpp - Sizes, names and reductions of the element types -===//

#include "runtime/comm/ElementTypes.h"

#include "runtime/support/Safetensors.h"

#include <bit>
#include <type_traits>

namespace mtc::rt {

bool isElementType(int64_t code) { return code >= 0 && code < MTC_NUM_ELEMENT_TYPES; }
bool isReduction(int64_t code) { return code >= 0 && code < MTC_NUM_REDUCTIONS; }

size_t elementSize(MtcElementType type) {
  switch (type) {
  case MTC_F32:
  case MTC_I32:
    return 4;
  case MTC_F64:
  case MTC_I64:
    return 8;
  case MTC_BF16:
  case MTC_F16:
    return 2;
  }
  return 0;
}

std::string_view elementTypeName(MtcElementType type) {
  switch (type) {
  case MTC_F32:
    return "f32";
  case MTC_F64:
    return "f64";
  case MTC_BF16:
    return "bf16";
  case MTC_F16:
    return "f16";
  case MTC_I32:
    return "i32";
  case MTC_I64:
    return "i64";
  }
  return "an unknown element type";
}

std::string_view reductionName(MtcReduction reduction) {
  switch (reduction) {
  case MTC_SUM:
    return "sum";
  case MTC_MAX:
    return "max";
  case MTC_MIN:
    return "min";
  }
  return "an unknown reduction";
}

uint16_t floatToF16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN: quiet, keep the payload's top bits
    return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) // >= 65520 rounds past the largest half (65504)
    return uint16_t(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
    // Adding 0.5 (whose ulp is 2^-24, the subnormal half's unit) rounds to nearest even in
    // the f32 adder; the low bits are then the half's mantissa.
    float shifted = std::bit_cast<float>(magnitude) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(shifted) - 0x3f000000u));
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  magnitude += 0xc8000fffu + ((magnitude >> 13) & 1u);
  return uint16_t(sign | (magnitude >> 13));
}

namespace {

/// How a storage type reduces: load to the type compared, and add.
template <class T> struct Plain {
  using Storage = T;
  static T load(T v) { return v; }
  static T add(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b)); // wraps
    else
      return a + b;
  }
};

/// The 16-bit floats, reduced through f32.
float bf16BitsToFloat(uint16_t bits) { return bf16ToFloat(BFloat16{bits}); }
uint16_t floatToBf16Bits(float value) { return floatToBf16(value).bits; }

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)> struct Half {
  using Storage = uint16_t;
  static float load(uint16_t v) { return ToFloat(v); }
  static uint16_t add(uint16_t a, uint16_t b) { return FromFloat(ToFloat(a) + ToFloat(b)); }
};

template <class T> bool isNaN(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

template <class Codec> void sumOf(void *out, const void *a, const void *b, size_t count) {
  using S = typename Codec::Storage;
  auto *o = static_cast<S *>(out);
  auto *x = static_cast<const S *>(a), *y = static_cast<const S *>(b);
  for (size_t i = 0; i < count; ++i)
    o[i] = Codec::add(x[i], y[i]);
}

/// Max (`Greater`) or min: the first input unless the second is strictly beyond it or the
/// second alone is NaN.
template <class Codec, bool Greater>
void extremumOf(void *out, const void *a, const void *b, size_t count) {
  using S = typename Codec::Storage;
  auto *o = static_cast<S *>(out);
  auto *x = static_cast<const S *>(a), *y = static_cast<const S *>(b);
  for (size_t i = 0; i < count; ++i) {
    auto u = Codec::load(x[i]), v = Codec::load(y[i]);
    bool second = !isNaN(u) && (isNaN(v) || (Greater ? v > u : v < u));
    o[i] = second ? y[i] : x[i];
  }
}

template <class Codec> ReduceFunction functionOf(MtcReduction reduction) {
  switch (reduction) {
  case MTC_SUM:
    return &sumOf<Codec>;
  case MTC_MAX:
    return &extremumOf<Codec, true>;
  case MTC_MIN:
    return &extremumOf<Codec, false>;
  }
  return nullptr;
}

} // namespace

ReduceFunction reduceFunction(MtcElementType type, MtcReduction reduction) {
  switch (type) {
  case MTC_F32:
    return functionOf<Plain<float>>(reduction);
  case MTC_F64:
    return functionOf<Plain<double>>(reduction);
  case MTC_BF16:
    return functionOf<Half<&bf16BitsToFloat, &floatToBf16Bits>>(reduction);
  case MTC_F16:
    return functionOf<Half<&f16ToFloat, &floatToF16>>(reduction);
  case MTC_I32:
    return functionOf<Plain<int32_t>>(reduction);
  case MTC_I64:
    return functionOf<Plain<int64_t>>(reduction);
  }
  return nullptr;
}

} // namespace mtc::rt
