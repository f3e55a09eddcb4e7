#include "shim.h"

const int shmem_sys_cmp_eq = SHMEM_CMP_EQ;
const int shmem_sys_cmp_ne = SHMEM_CMP_NE;
const int shmem_sys_cmp_gt = SHMEM_CMP_GT;
const int shmem_sys_cmp_ge = SHMEM_CMP_GE;
const int shmem_sys_cmp_lt = SHMEM_CMP_LT;
const int shmem_sys_cmp_le = SHMEM_CMP_LE;

const int shmem_sys_thread_single = SHMEM_THREAD_SINGLE;
const int shmem_sys_thread_funneled = SHMEM_THREAD_FUNNELED;
const int shmem_sys_thread_serialized = SHMEM_THREAD_SERIALIZED;
const int shmem_sys_thread_multiple = SHMEM_THREAD_MULTIPLE;

const long shmem_sys_sync_value = SHMEM_SYNC_VALUE;
const size_t shmem_sys_barrier_sync_size = SHMEM_BARRIER_SYNC_SIZE;
const size_t shmem_sys_bcast_sync_size = SHMEM_BCAST_SYNC_SIZE;
const size_t shmem_sys_collect_sync_size = SHMEM_COLLECT_SYNC_SIZE;
const size_t shmem_sys_reduce_sync_size = SHMEM_REDUCE_SYNC_SIZE;
const size_t shmem_sys_alltoall_sync_size = SHMEM_ALLTOALL_SYNC_SIZE;
const size_t shmem_sys_reduce_min_wrkdata_size = SHMEM_REDUCE_MIN_WRKDATA_SIZE;

const int shmem_sys_major_version = SHMEM_MAJOR_VERSION;
const int shmem_sys_minor_version = SHMEM_MINOR_VERSION;

shmem_ctx_t shmem_sys_ctx_default(void) { return SHMEM_CTX_DEFAULT; }

#ifdef OSHMEM_SHMEM_H
/* Open PAL's progress engine, which OSHMEM's transport layers (spml, atomic) register with. */
extern int opal_progress(void);
void shmem_sys_progress(void) { (void)opal_progress(); }
#else
void shmem_sys_progress(void) {}
#endif

const size_t shmem_sys_sizeof_ctx = sizeof(shmem_ctx_t);
const size_t shmem_sys_sizeof_long = sizeof(long);
const size_t shmem_sys_sizeof_long_long = sizeof(long long);
const size_t shmem_sys_sizeof_size_t = sizeof(size_t);
const size_t shmem_sys_sizeof_ptrdiff_t = sizeof(ptrdiff_t);

#if SHMEM_MAJOR_VERSION > 1 || (SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION >= 5)
const int shmem_sys_signal_set = SHMEM_SIGNAL_SET;
const int shmem_sys_signal_add = SHMEM_SIGNAL_ADD;
shmem_team_t shmem_sys_team_world(void) { return SHMEM_TEAM_WORLD; }
shmem_team_t shmem_sys_team_invalid(void) { return SHMEM_TEAM_INVALID; }
const size_t shmem_sys_sizeof_team = sizeof(shmem_team_t);
const size_t shmem_sys_sizeof_team_config = sizeof(shmem_team_config_t);
const size_t shmem_sys_offsetof_team_config_num_contexts =
    offsetof(shmem_team_config_t, num_contexts);
#endif
