/*===- CollectiveTypes.h - Element-type and reduction codes of collectives -===*\
|*                                                                            *|
|* The codes a collective names its element type and its reduction with. Plain *|
|* C with fixed values: they travel through the kernel ABI (compiled code passes *|
|* them as integers), so a value, once given, never changes meaning; new codes  *|
|* are appended. The codes of f32/f64 and sum/max are those the compiled        *|
|* mtc_all_reduce / mtc_all_gather / mtc_reduce_scatter already pass.          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MTC_RUNTIME_COMM_COLLECTIVETYPES_H
#define MTC_RUNTIME_COMM_COLLECTIVETYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ the enums hold any int32_t (a fixed underlying type), so that a code read from an
 * integer can be checked rather than being out of the enum's range. */
#ifdef __cplusplus
#define MTC_CODE_TYPE : int32_t
#else
#define MTC_CODE_TYPE
#endif

/* The element type of a collective's buffers. bf16 and f16 are stored as their 16 bits. */
typedef enum MtcElementType MTC_CODE_TYPE {
  MTC_F32 = 0,
  MTC_F64 = 1,
  MTC_BF16 = 2,
  MTC_F16 = 3,
  MTC_I32 = 4,
  MTC_I64 = 5
} MtcElementType;

/* One past the largest element-type code. */
#define MTC_NUM_ELEMENT_TYPES 6

/* The reduction of all-reduce and reduce-scatter, element by element over the ranks. Integer
 * sums wrap (two's complement); a floating-point max or min is NaN when any input is NaN. */
typedef enum MtcReduction MTC_CODE_TYPE { MTC_SUM = 0, MTC_MAX = 1, MTC_MIN = 2 } MtcReduction;

#undef MTC_CODE_TYPE

/* One past the largest reduction code. */
#define MTC_NUM_REDUCTIONS 3

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MTC_RUNTIME_COMM_COLLECTIVETYPES_H */
