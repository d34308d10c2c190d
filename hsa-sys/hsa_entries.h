/* hsa_entries.h: the C++ side of hsa_entries.def (the one list of HSA entries).
 *
 * A consumer says what one entry becomes, then includes this header again,
 * which expands the list once with it and forgets it:
 *
 *   #define HSA_ENTRY_VISIT(table, name, library, runtime, signature) ...
 *   #include "hsa_entries.h"
 *
 * Only the entries the headers being compiled against carry are visited
 * (the `since` column), with `table` already the struct name (CoreApiTable
 * or AmdExtTable). The helpers below turn the parameter-type list into a
 * parameter list with names and into the matching argument list, and check
 * a line's signature against the headers' field type.
 */
#ifndef HSA_ENTRIES_H
#define HSA_ENTRIES_H

#include <type_traits>

#include <hsa/hsa_api_trace.h>

/* ---- which generations' entries the headers carry --------------------------------- */

#define HSA_ENTRIES_INTERFACE_AT_LEAST(major, minor)   \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > (major) ||        \
   (HSA_AMD_INTERFACE_VERSION_MAJOR == (major) &&      \
    HSA_AMD_INTERFACE_VERSION_MINOR >= (minor)))

#define HSA_ENTRIES_SINCE_1_0(...) __VA_ARGS__
#if HSA_ENTRIES_INTERFACE_AT_LEAST(1, 4)
#define HSA_ENTRIES_SINCE_1_4(...) __VA_ARGS__
#else
#define HSA_ENTRIES_SINCE_1_4(...)
#endif
#if HSA_ENTRIES_INTERFACE_AT_LEAST(1, 6)
#define HSA_ENTRIES_SINCE_1_6(...) __VA_ARGS__
#else
#define HSA_ENTRIES_SINCE_1_6(...)
#endif

#define HSA_ENTRIES_TABLE_core CoreApiTable
#define HSA_ENTRIES_TABLE_amd AmdExtTable

/* ---- signatures --------------------------------------------------------------------- */

/* A signature is (return type, parameter types...): `(hsa_status_t)` takes
 * nothing, `(hsa_status_t, void*)` one pointer. */

namespace hsa_entries {
// Lets a parameter of any type, a function pointer's included, be written
// `type_t<T> name`.
template <typename T>
using type_t = T;
// The function pointer type of a signature.
template <typename R, typename... A>
using fn_t = R (*)(A...);
}  // namespace hsa_entries

#define HSA_ENTRIES_CAT_(a, b) HSA_ENTRIES_CAT2_(a, b)
#define HSA_ENTRIES_CAT2_(a, b) a##b
/* The number of parameters: the elements of a signature less its return type. */
#define HSA_ENTRIES_ARITY_(...) \
  HSA_ENTRIES_ARITY_N_(__VA_ARGS__, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, unused)
#define HSA_ENTRIES_ARITY_N_(r, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, n, ...) n

#define HSA_ENTRIES_P_(t, i) hsa_entries::type_t<t> a##i
#define HSA_ENTRIES_PARAMS_0(r)
#define HSA_ENTRIES_PARAMS_1(r, t0) HSA_ENTRIES_P_(t0, 0)
#define HSA_ENTRIES_PARAMS_2(r, t0, t1) HSA_ENTRIES_PARAMS_1(r, t0), HSA_ENTRIES_P_(t1, 1)
#define HSA_ENTRIES_PARAMS_3(r, t0, t1, t2) \
  HSA_ENTRIES_PARAMS_2(r, t0, t1), HSA_ENTRIES_P_(t2, 2)
#define HSA_ENTRIES_PARAMS_4(r, t0, t1, t2, t3) \
  HSA_ENTRIES_PARAMS_3(r, t0, t1, t2), HSA_ENTRIES_P_(t3, 3)
#define HSA_ENTRIES_PARAMS_5(r, t0, t1, t2, t3, t4) \
  HSA_ENTRIES_PARAMS_4(r, t0, t1, t2, t3), HSA_ENTRIES_P_(t4, 4)
#define HSA_ENTRIES_PARAMS_6(r, t0, t1, t2, t3, t4, t5) \
  HSA_ENTRIES_PARAMS_5(r, t0, t1, t2, t3, t4), HSA_ENTRIES_P_(t5, 5)
#define HSA_ENTRIES_PARAMS_7(r, t0, t1, t2, t3, t4, t5, t6) \
  HSA_ENTRIES_PARAMS_6(r, t0, t1, t2, t3, t4, t5), HSA_ENTRIES_P_(t6, 6)
#define HSA_ENTRIES_PARAMS_8(r, t0, t1, t2, t3, t4, t5, t6, t7) \
  HSA_ENTRIES_PARAMS_7(r, t0, t1, t2, t3, t4, t5, t6), HSA_ENTRIES_P_(t7, 7)
#define HSA_ENTRIES_PARAMS_9(r, t0, t1, t2, t3, t4, t5, t6, t7, t8) \
  HSA_ENTRIES_PARAMS_8(r, t0, t1, t2, t3, t4, t5, t6, t7), HSA_ENTRIES_P_(t8, 8)
#define HSA_ENTRIES_PARAMS_10(r, t0, t1, t2, t3, t4, t5, t6, t7, t8, t9) \
  HSA_ENTRIES_PARAMS_9(r, t0, t1, t2, t3, t4, t5, t6, t7, t8), HSA_ENTRIES_P_(t9, 9)

#define HSA_ENTRIES_ARGS_0
#define HSA_ENTRIES_ARGS_1 a0
#define HSA_ENTRIES_ARGS_2 HSA_ENTRIES_ARGS_1, a1
#define HSA_ENTRIES_ARGS_3 HSA_ENTRIES_ARGS_2, a2
#define HSA_ENTRIES_ARGS_4 HSA_ENTRIES_ARGS_3, a3
#define HSA_ENTRIES_ARGS_5 HSA_ENTRIES_ARGS_4, a4
#define HSA_ENTRIES_ARGS_6 HSA_ENTRIES_ARGS_5, a5
#define HSA_ENTRIES_ARGS_7 HSA_ENTRIES_ARGS_6, a6
#define HSA_ENTRIES_ARGS_8 HSA_ENTRIES_ARGS_7, a7
#define HSA_ENTRIES_ARGS_9 HSA_ENTRIES_ARGS_8, a8
#define HSA_ENTRIES_ARGS_10 HSA_ENTRIES_ARGS_9, a9

#define HSA_ENTRIES_RET_(...) HSA_ENTRIES_FIRST_(__VA_ARGS__, unused)
#define HSA_ENTRIES_FIRST_(r, ...) r
#define HSA_ENTRIES_PARAMS_OF_(...) \
  HSA_ENTRIES_CAT_(HSA_ENTRIES_PARAMS_, HSA_ENTRIES_ARITY_(__VA_ARGS__))(__VA_ARGS__)
#define HSA_ENTRIES_ARGS_OF_(...) HSA_ENTRIES_CAT_(HSA_ENTRIES_ARGS_, HSA_ENTRIES_ARITY_(__VA_ARGS__))

/* (R, T0, T1) -> `R`. */
#define HSA_ENTRY_RET(signature) HSA_ENTRIES_RET_ signature
/* (R, T0, T1) -> `type_t<T0> a0, type_t<T1> a1`; (R) -> nothing. */
#define HSA_ENTRY_PARAMS(signature) HSA_ENTRIES_PARAMS_OF_ signature
/* (R, T0, T1) -> `a0, a1`. */
#define HSA_ENTRY_ARGS(signature) HSA_ENTRIES_ARGS_OF_ signature
/* (R, T0, T1) -> `R (*)(T0, T1)`. */
#define HSA_ENTRY_FN_TYPE(signature) hsa_entries::fn_t<HSA_ENTRIES_TYPES_ signature>
#define HSA_ENTRIES_TYPES_(...) __VA_ARGS__

/* A compile-time check that a line's signature is the headers' field type:
 * #define HSA_ENTRY_VISIT HSA_ENTRY_CHECK_SIGNATURE, then include this header. */
#define HSA_ENTRY_CHECK_SIGNATURE(table, name, library, runtime, signature)                   \
  static_assert(std::is_same<decltype(table::hsa_##name##_fn), HSA_ENTRY_FN_TYPE(signature)>::value, \
                "hsa_entries.def: the signature of hsa_" #name " is not the headers'");

#endif /* HSA_ENTRIES_H */

/* ---- one expansion of the list with the consumer's HSA_ENTRY_VISIT ------------------ */

#ifdef HSA_ENTRY_VISIT
#define HSA_ENTRY(table, name, since, library, runtime, signature) \
  HSA_ENTRIES_SINCE_##since(HSA_ENTRY_VISIT(HSA_ENTRIES_TABLE_##table, name, library, runtime, signature))
#include "hsa_entries.def"
#undef HSA_ENTRY
#undef HSA_ENTRY_VISIT
#endif
