/*
 * Values of OpenSHMEM macros, exported as linkable objects.
 *
 * Implementations define these constants differently (SHMEM_CMP_EQ is 0 in Open MPI's OSHMEM
 * and 1 in Sandia OpenSHMEM; SHMEM_SYNC_VALUE is -1 in one and 0 in the other;
 * SHMEM_CTX_DEFAULT is a macro over a global in one and a global in the other), and some are
 * expressions that bindgen cannot evaluate. The shim takes them from the installed header, so
 * no value is hard-coded on the Rust side.
 */
#ifndef SHMEM_SYS_SHIM_H
#define SHMEM_SYS_SHIM_H

#include <stddef.h>
#include <shmem.h>

extern const int shmem_sys_cmp_eq;
extern const int shmem_sys_cmp_ne;
extern const int shmem_sys_cmp_gt;
extern const int shmem_sys_cmp_ge;
extern const int shmem_sys_cmp_lt;
extern const int shmem_sys_cmp_le;

extern const int shmem_sys_thread_single;
extern const int shmem_sys_thread_funneled;
extern const int shmem_sys_thread_serialized;
extern const int shmem_sys_thread_multiple;

extern const long shmem_sys_sync_value;
extern const size_t shmem_sys_barrier_sync_size;
extern const size_t shmem_sys_bcast_sync_size;
extern const size_t shmem_sys_collect_sync_size;
extern const size_t shmem_sys_reduce_sync_size;
extern const size_t shmem_sys_alltoall_sync_size;
extern const size_t shmem_sys_reduce_min_wrkdata_size;

extern const int shmem_sys_major_version;
extern const int shmem_sys_minor_version;

/* The default communication context (a macro or a global, depending on the library). */
shmem_ctx_t shmem_sys_ctx_default(void);

/* Drives the library's communication progress once: Open MPI's OSHMEM polls its transports
 * only inside blocking calls (shmem_test does not), so a PE that waits by testing must call
 * this for remote writes that need the target's help (over TCP, say) to land. A no-op where
 * the library's tests progress on their own (Sandia OpenSHMEM). */
void shmem_sys_progress(void);

/* Sizes of C types as the installed compiler and header see them, for the layout tests. */
extern const size_t shmem_sys_sizeof_ctx;
extern const size_t shmem_sys_sizeof_long;
extern const size_t shmem_sys_sizeof_long_long;
extern const size_t shmem_sys_sizeof_size_t;
extern const size_t shmem_sys_sizeof_ptrdiff_t;

#if SHMEM_MAJOR_VERSION > 1 || (SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION >= 5)
extern const int shmem_sys_signal_set;
extern const int shmem_sys_signal_add;
shmem_team_t shmem_sys_team_world(void);
shmem_team_t shmem_sys_team_invalid(void);
extern const size_t shmem_sys_sizeof_team;
extern const size_t shmem_sys_sizeof_team_config;
extern const size_t shmem_sys_offsetof_team_config_num_contexts;
#endif

#endif
