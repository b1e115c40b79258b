/*
 * Pure capability logic of the CUDA backend (no CUDA calls), unit-tested
 * against a table of devices in tests/test_cuda_caps.c.
 */
#ifndef QP_CU_CAPS_H
#define QP_CU_CAPS_H

#include <stddef.h>
#include <stdint.h>

#include "qport.h"

/* How a device of compute capability `cc` (major*10+minor) can run this
 * plugin's code, given the compiled SASS and PTX targets ("75,80,86",
 * "90"): QP_CU_ARCH_SASS (a cubin of the same major and a minor <= the
 * device's), QP_CU_ARCH_PTX (JIT from PTX of a target <= cc) or
 * QP_CU_ARCH_NONE with a message in `why`. */
typedef enum qp_cu_arch_fit { QP_CU_ARCH_NONE = 0, QP_CU_ARCH_SASS, QP_CU_ARCH_PTX } qp_cu_arch_fit;
qp_cu_arch_fit qp_cu_arch_check(int cc, const char *sass, const char *ptx, char *why, size_t cap);

/* The SASS target a device runs (the highest compiled target of its major
 * with minor <= its own), or -1 when it runs PTX / nothing. */
int qp_cu_arch_sass_target(int cc, const char *sass);

/* vLLM's minimum capability of a scheme kind (docs/semantics.md §19); 0 when none. */
int qp_cu_scheme_min_capability(qp_scheme_kind kind);

/* Device capability bits as the backend reports them. */
int qp_cu_cap_int_dot(int cc);          /* dp4a: sm_61+ */
int qp_cu_cap_tensor_core_int8(int cc); /* mma.sync s8: sm_75+ */
int qp_cu_cap_tensor_core_fp8(int cc);  /* mma.sync e4m3: sm_89+ */

/* Whether `scheme` runs on a device of capability `cc` with these compiled
 * targets: the arch check first, then vLLM's minimum (docs/semantics.md §19; vLLM's
 * message), then what this backend implements. `kind` and the activation
 * of the scheme decide; `scheme->min_capability` raises the minimum when
 * larger. */
void qp_cu_scheme_support(const qp_scheme *scheme, int cc, const char *sass, const char *ptx, qp_support_info *out);

/* QQQ int4 codes q4 [N][K] (low nibble used: per-channel two's complement,
 * group 128 unsigned) -> packed words [Np][Kp/8] (zero padded), the layout
 * of the QQQ kernels (cu_math.h: qp_cu_expand_ch). Kp % 8 == 0. */
void qp_cu_pack_q4(const int8_t *q4, int N, int K, int Np, int Kp, uint32_t *out);

#endif
