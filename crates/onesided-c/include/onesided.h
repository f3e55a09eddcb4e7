/*
 * onesided.h: the C ABI of onesided (one-sided communication for molecular-dynamics codes).
 * Generated from crates/onesided-c by cbindgen; do not edit (see crates/onesided-c/README.md).
 *
 * Every function returns a onesided_status; on an error, onesided_last_error() says which
 * PE, what went wrong and what to do. Handles are small structs passed by value; {0} is
 * none, and a call that makes one writes {0} first, so a failed call leaves none. Calls come
 * from the thread that started the runtime. Link with `pkg-config --cflags --libs onesided`.
 */

#ifndef ONESIDED_H
#define ONESIDED_H

#include <stddef.h>
#include <stdint.h>
#if defined(__GNUC__) || defined(__clang__)
#define ONESIDED_NORETURN __attribute__((noreturn))
#else
#define ONESIDED_NORETURN
#endif

/**
 * A flag of `onesided_exchange_call`: the next call on this exchange receives the same
 * messages (the same PEs, in the same order, with the same rooms), so this call announces
 * them to their senders as it returns, and those senders then write without waiting for the
 * receiver. The one-sided path's steady state for a halo that repeats every step: a message
 * costs a put and a signal, no round trip. A next call with other receives is refused
 * (`ONESIDED_ERROR_ARGUMENT`, on this PE); the MPI path accepts the flag and ignores it.
 */
#define ONESIDED_CALL_REPEATS 1

/**
 * What a call of the C ABI returns. Every value but `ONESIDED_OK` leaves a message naming the
 * PE, what went wrong and what to do in `onesided_last_error`.
 */
typedef enum {
  /**
   * The call did what it says.
   */
  ONESIDED_OK = 0,
  /**
   * An argument is wrong: a null pointer, a size that does not match, a PE out of range,
   * a name that is not UTF-8, a message larger than its room.
   */
  ONESIDED_ERROR_ARGUMENT = 1,
  /**
   * A handle that is null, already freed, of another kind, or made on another thread.
   */
  ONESIDED_ERROR_HANDLE = 2,
  /**
   * The PEs called a collective differently (sizes, partners or paths that differ), or
   * not all of them took part in time.
   */
  ONESIDED_ERROR_COLLECTIVE = 3,
  /**
   * Starting the runtime failed: MPI missing or with too little thread support, the
   * launch, the settings, the environment.
   */
  ONESIDED_ERROR_INIT = 4,
  /**
   * The symmetric heap is too small or was used differently on different PEs.
   */
  ONESIDED_ERROR_HEAP = 5,
  /**
   * A wait passed its deadline (`ONESIDED_WAIT_TIMEOUT`): a partner did not take part.
   */
  ONESIDED_ERROR_TIMEOUT = 6,
  /**
   * MPI or OpenSHMEM reported an error.
   */
  ONESIDED_ERROR_LIBRARY = 7,
  /**
   * A defect inside the library (a panic caught at the boundary): please report it with
   * the message.
   */
  ONESIDED_ERROR_INTERNAL = 8,
} onesided_status;

/**
 * How an exchange travels: `ONESIDED_PATH_ONESIDED`, `ONESIDED_PATH_MPI` or
 * `ONESIDED_PATH_AUTO` (an `int`, so that any value a C program holds is safe to pass).
 */
typedef int32_t onesided_path;

/**
 * A runtime: MPI and OpenSHMEM for this process. Made by `onesided_init` or
 * `onesided_attach`, ended by `onesided_runtime_free`; `{0}` is no runtime.
 */
typedef struct {
  /**
   * The handle's number (never reused; 0 for none).
   */
  uint64_t id;
} onesided_runtime;

/**
 * A send-receive channel between this PE and its partners: made by
 * `onesided_exchange_new`, freed by `onesided_exchange_free`.
 */
typedef struct {
  /**
   * The handle's number (never reused; 0 for none).
   */
  uint64_t id;
} onesided_exchange;

/**
 * One message this PE sends in an `onesided_exchange_call`: `bytes` bytes at `data` to PE
 * `pe`.
 */
typedef struct {
  /**
   * The bytes (read during the call only; may be null with none).
   */
  const void *data;
  /**
   * How many.
   */
  size_t bytes;
  /**
   * The receiving PE: a partner, or this PE (a copy).
   */
  int32_t pe;
} onesided_send;

/**
 * One message this PE receives in an `onesided_exchange_call`: from PE `pe`, into `room`
 * bytes at `data`.
 */
typedef struct {
  /**
   * Where the message goes (written during the call only; may be null with no room).
   */
  void *data;
  /**
   * The room there, in bytes.
   */
  size_t room;
  /**
   * The sending PE: a partner, or this PE (a copy).
   */
  int32_t pe;
} onesided_receive;

/**
 * The precision of coordinates and forces: `ONESIDED_REAL_F32` (`float`) or
 * `ONESIDED_REAL_F64` (`double`).
 */
typedef int32_t onesided_real;

/**
 * Where periodic images of local atoms come from: `ONESIDED_IMAGES_HALO` or
 * `ONESIDED_IMAGES_KERNEL`.
 */
typedef int32_t onesided_images;

/**
 * Dynamic load balancing: `ONESIDED_DLB_NO`, `ONESIDED_DLB_YES` or `ONESIDED_DLB_AUTO`.
 */
typedef int32_t onesided_dlb;

/**
 * How a halo exchange is built; `onesided_halo_options_default` fills the defaults.
 */
typedef struct {
  /**
   * The precision of coordinates and forces (default `ONESIDED_REAL_F32`).
   */
  onesided_real real;
  /**
   * The path (default `ONESIDED_PATH_ONESIDED`).
   */
  onesided_path path;
  /**
   * Where periodic images come from (default `ONESIDED_IMAGES_HALO`).
   */
  onesided_images periodic_images;
  /**
   * Load balancing (default `ONESIDED_DLB_NO`).
   */
  onesided_dlb load_balancing;
  /**
   * The Verlet buffer in nm: the part of the range beyond the interaction cutoff; when
   * positive, every repartition checks that no atom moved more than half of it (default
   * 0: no check).
   */
  float verlet_buffer;
  /**
   * Domains along x, y, z; `{0, 0, 0}` (the default) chooses them for the PE count as
   * GROMACS does.
   */
  int32_t grid[3];
} onesided_halo_options;

/**
 * A halo exchange: made by `onesided_halo_from_global` or `onesided_halo_from_home`,
 * freed by `onesided_halo_free`.
 */
typedef struct {
  /**
   * The handle's number (never reused; 0 for none).
   */
  uint64_t id;
} onesided_halo;

/**
 * One array of the host's per-atom state in home order, which a repartition moves with the
 * atoms: `bytes_per_atom` bytes per atom, `stride` bytes apart, room for `capacity` atoms.
 */
typedef struct {
  /**
   * The first atom's entry.
   */
  void *data;
  /**
   * The bytes of one atom's entry.
   */
  size_t bytes_per_atom;
  /**
   * The bytes from one atom's entry to the next: 0 (or `bytes_per_atom`) for a contiguous
   * array, more for a member of an array of structs (`sizeof` the struct).
   */
  size_t stride;
  /**
   * How many atoms' entries fit.
   */
  size_t capacity;
} onesided_atom_field;

/**
 * A periodic image the kernel makes (`ONESIDED_IMAGES_KERNEL`): local atom `stored + k` is
 * image `k`, at its atom's position plus `vector`.
 */
typedef struct {
  /**
   * The stored local atom it is an image of.
   */
  uint32_t atom;
  /**
   * How many times each box vector is added (0 or 1).
   */
  uint32_t cells[3];
  /**
   * The shift in nm, `Σ_d cells[d] · box vector d`.
   */
  double vector[3];
} onesided_halo_image;

/**
 * What a force kernel reads and writes in one step, between `onesided_halo_move_x` and
 * `onesided_halo_move_f`: `stored` local atoms, home atoms first, then halo atoms (then,
 * under `ONESIDED_IMAGES_HALO`, the periodic images).
 */
typedef struct {
  /**
   * `stored` coordinate triples (`float` or `double`), read-only.
   */
  const void *coordinates;
  /**
   * `stored` force triples, in the exchange's own memory, which `move_f` sends from: what
   * they hold before the kernel writes them is left from the last step.
   */
  void *forces;
  /**
   * The number of stored local atoms.
   */
  size_t stored;
  /**
   * The number of home atoms (the first `home` of them).
   */
  size_t home;
  /**
   * The number of home and halo atoms (`stored` less the periodic images behind them).
   */
  size_t local;
  /**
   * `stored` zone bytes: the domain computes pair (i, j) when
   * `onesided_halo_owns(zones[i], zones[j])`, i.e. `(zones[i] & zones[j] & 7) == 0`.
   */
  const uint8_t *zones;
  /**
   * Under `ONESIDED_IMAGES_KERNEL`, the images the kernel makes; null otherwise.
   */
  const onesided_halo_image *images;
  /**
   * The number of images.
   */
  size_t n_images;
} onesided_halo_local;

/**
 * The home atoms while their halo forces travel, between `onesided_halo_start_f` and
 * `onesided_halo_finish_f`.
 */
typedef struct {
  /**
   * `count` coordinate triples of the home atoms, to move.
   */
  void *coordinates;
  /**
   * `count` force triples: final for `atoms`, still to be added to for the others.
   */
  void *forces;
  /**
   * The number of home atoms.
   */
  size_t count;
  /**
   * The home atoms (increasing indices) in no neighbour's halo, whose forces are final.
   */
  const uint32_t *atoms;
  /**
   * The number of them.
   */
  size_t n_atoms;
} onesided_halo_settled;

/**
 * The home atoms between steps.
 */
typedef struct {
  /**
   * `count` coordinate triples, to write before `move_x`.
   */
  void *coordinates;
  /**
   * `count` force triples: the totals the last `move_f` left, to which the host adds its
   * other forces before it integrates.
   */
  void *forces;
  /**
   * `count` global indices, in home order.
   */
  const uint32_t *globals;
  /**
   * The number of home atoms.
   */
  size_t count;
  /**
   * The number of home and halo atoms in the steps until the next repartition.
   */
  size_t local;
  /**
   * The home atoms (increasing indices) in some neighbour's halo, whose forces
   * `onesided_halo_finish_f` completes: a host that moved the others while the forces
   * travelled (`onesided_halo_settled`) moves these now. Valid until the next repartition.
   */
  const uint32_t *returning;
  /**
   * The number of them.
   */
  size_t n_returning;
} onesided_halo_home;

/**
 * An array of bytes with a copy on every PE, at the same offsets: made by
 * `onesided_symmetric_alloc`, freed by `onesided_symmetric_free`.
 */
typedef struct {
  /**
   * The handle's number (never reused; 0 for none).
   */
  uint64_t id;
} onesided_symmetric;

/**
 * An array of 64-bit signals with a copy on every PE: made by `onesided_signals_alloc`,
 * freed by `onesided_signals_free`. Signals only grow: a put with signal sets one, a
 * wait waits until it is at least a value.
 */
typedef struct {
  /**
   * The handle's number (never reused; 0 for none).
   */
  uint64_t id;
} onesided_signals;

/**
 * One message of `onesided_exchange_call_packed`: to or from PE `pe` (a partner, or this PE),
 * `bytes` long: for a send the bytes the pack function writes, for a receive the room.
 */
typedef struct {
  /**
   * The bytes a send packs, or the room of a receive.
   */
  size_t bytes;
  /**
   * The PE it goes to or comes from.
   */
  int32_t pe;
} onesided_message;

/**
 * The host's packing: writes all `bytes` bytes of send number `send` at `data` (in the
 * receiver's inbox, or in a buffer of the library's). It must not call the library.
 */
typedef void (*onesided_pack_fn)(void *context,
                                 size_t send,
                                 void *data,
                                 size_t bytes);

/**
 * The host's unpacking: reads the `bytes` bytes of receive number `receive` at `data`, which
 * stay valid until it returns. It must not call the library.
 */
typedef void (*onesided_unpack_fn)(void *context,
                                   size_t receive,
                                   const void *data,
                                   size_t bytes);

/**
 * How the PME is built; `onesided_pme_options_default` fills the defaults.
 */
typedef struct {
  /**
   * The path of the redistribution, the overlaps between slabs and the FFT's transposes
   * (default `ONESIDED_PATH_ONESIDED`).
   */
  onesided_path path;
  /**
   * The mesh spacing in nm, from which the sizes follow as GROMACS's `fourierspacing`
   * (default 0.12).
   */
  float spacing;
  /**
   * The mesh sizes along x, y, z; `{0, 0, 0}` (the default) takes them from `spacing`.
   */
  int32_t sizes[3];
  /**
   * The B-spline interpolation order, 3 to 12 (default 4).
   */
  int32_t order;
  /**
   * The Ewald coefficient in 1/nm; 0 (the default) derives it from `cutoff` and
   * `ewald_rtol` as GROMACS does.
   */
  double beta;
  /**
   * The real-space cutoff in nm (default 0.9), for `beta`.
   */
  double cutoff;
  /**
   * GROMACS's `ewald-rtol` (default 1e-5), for `beta`.
   */
  double ewald_rtol;
  /**
   * The PME ranks, `n_pme_pes` of them (GROMACS's `-npme`); null (the default) for every
   * PE.
   */
  const int32_t *pme_pes;
  /**
   * The number of PME ranks listed.
   */
  size_t n_pme_pes;
} onesided_pme_options;

/**
 * An atom as the PME sees it: position (nm), charge (e), global index. The layout of
 * pme-redist's `Particle`.
 */
typedef struct {
  /**
   * Position in nm.
   */
  float x[3];
  /**
   * Charge in e.
   */
  float q;
  /**
   * Global index.
   */
  uint32_t global;
} onesided_particle;

/**
 * The PME: made by `onesided_pme_new`, freed by `onesided_pme_free`.
 */
typedef struct {
  /**
   * The handle's number (never reused; 0 for none).
   */
  uint64_t id;
} onesided_pme;

/**
 * The energy of a step: the reciprocal energy (kJ/mol, without the self energy and the
 * net-charge correction) and its virial tensor (rows, kJ/mol), the same on every PE.
 */
typedef struct {
  /**
   * The reciprocal energy.
   */
  double energy;
  /**
   * The reciprocal virial, row by row.
   */
  double virial[9];
} onesided_pme_energy;

/**
 * OpenSHMEM: the offset swap's puts.
 */
#define ONESIDED_PATH_ONESIDED 0

/**
 * MPI two-sided, the reference.
 */
#define ONESIDED_PATH_MPI 1

/**
 * Per partner, the transport its link was measured fastest on (calibrated at the first
 * exchange of a job that asks, or named by `ONESIDED_TRANSPORT`).
 */
#define ONESIDED_PATH_AUTO 2

/**
 * `float` coordinates and forces (GROMACS's mixed precision).
 */
#define ONESIDED_REAL_F32 0

/**
 * `double` coordinates and forces.
 */
#define ONESIDED_REAL_F64 1

/**
 * The halo writes each image behind the halo atoms; `move_f` adds their forces back. Any
 * kernel on plain coordinates works.
 */
#define ONESIDED_IMAGES_HALO 0

/**
 * The kernel makes the images from `onesided_halo_local.images` (shift vectors, as
 * GROMACS's kernel does); only the pulses between PEs travel.
 */
#define ONESIDED_IMAGES_KERNEL 1

/**
 * Equal domains throughout (the imbalance is still measured).
 */
#define ONESIDED_DLB_NO 0

/**
 * Boundaries move at every repartition.
 */
#define ONESIDED_DLB_YES 1

/**
 * Boundaries start moving once the imbalance costs 2 % of the run (GROMACS's rule).
 */
#define ONESIDED_DLB_AUTO 2

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The path named `name` (`"onesided"`, `"mpi"` or `"auto"`, as on the Rust examples'
 * command lines), through `path`: for a host that takes the path from its own options or
 * environment.
 *
 * # Errors
 * `ONESIDED_ERROR_ARGUMENT` for any other name.
 *
 * # Safety
 * `name` is a NUL-terminated string; `path` points to writable memory for one value.
 */
onesided_status onesided_path_from_name(const char *name,
                                        onesided_path *path);

/**
 * Makes an exchange named `name` on `path` between this PE and `partners` (the PEs it
 * sends to or receives from, in any order; this PE itself and repeats are left out), for
 * messages of at most `max_message` bytes to this PE. Its symmetric memory grows with the
 * partners of the PE that names most, and with the largest `max_message` of any PE.
 *
 * # Collective
 * Every PE calls it, with the same path, in the same order as its other collectives;
 * partnership is mutual (when PE p names q, q names p).
 *
 * # Errors
 * On every PE: `ONESIDED_ERROR_ARGUMENT` for a partner that is no PE, a bad path;
 * `ONESIDED_ERROR_COLLECTIVE` when a partner does not name this PE back;
 * `ONESIDED_ERROR_HEAP` when the heap cannot hold the inbox.
 *
 * # Safety
 * `name` is a NUL-terminated string; `partners` points to `n_partners` values (or is null
 * with none); `out` points to writable memory for one handle.
 */
onesided_status onesided_exchange_new(onesided_runtime rt,
                                      const char *name,
                                      onesided_path path,
                                      const int32_t *partners,
                                      size_t n_partners,
                                      size_t max_message,
                                      onesided_exchange *out);

/**
 * Sends `send_bytes` bytes from `send` to PE `dest` and receives the message PE `source`
 * sends this PE into `recv` (room for `recv_bytes`); the bytes received through `received`
 * (which may be null). As `MPI_Sendrecv`: when it returns, `send` may be reused and `recv`
 * holds the message. `dest` and `source` are partners, or both this PE (a copy).
 *
 * # Collective
 * Pairwise: `dest` makes the matching call receiving from this PE, `source` the one sending
 * to it, in the same order as their other calls on this exchange.
 *
 * # Errors
 * `ONESIDED_ERROR_ARGUMENT` on both sides when the message exceeds the receiver's room
 * (`recv_bytes`, at most the largest `max_message`), with nothing written; on this PE for a
 * PE that is not a partner, or a null buffer with bytes;
 * `ONESIDED_ERROR_TIMEOUT` when a partner does not take part in time.
 *
 * # Safety
 * `send` points to `send_bytes` readable bytes, `recv` to `recv_bytes` writable ones (not
 * overlapping); `received` is null or points to writable memory for one value.
 */
onesided_status onesided_exchange_sendrecv(onesided_exchange exchange,
                                           const void *send,
                                           size_t send_bytes,
                                           int32_t dest,
                                           void *recv,
                                           size_t recv_bytes,
                                           int32_t source,
                                           size_t *received);

/**
 * Sends every message of `sends` and receives every message of `receives` in one step:
 * the messages of a halo's faces at once (CoMD's two faces of an axis, say), where
 * `onesided_exchange_sendrecv` takes one each way. The `k`-th message this PE sends to a PE
 * meets the `k`-th message that PE receives from this one (at most 2 per pair and call:
 * a neighbour on both sides); messages to this PE itself are copies, the `k`-th sent to
 * the `k`-th received. The bytes each receive got go to `received[i]` (`received` may be
 * null). As `MPI_Sendrecv`: when it returns, every send buffer may be reused and every
 * receive buffer holds its message.
 *
 * The receives land in the exchange's inbox one after another before they are copied out,
 * so their rooms from other PEs add up to at most the exchange's `max_message` (the
 * largest any PE gave). `flags` is 0 or `ONESIDED_CALL_REPEATS`.
 *
 * # Collective
 * Pairwise: every PE this one sends to makes the matching call receiving from it, every PE
 * it receives from the one sending to it, in the same order as their other calls on this
 * exchange.
 *
 * # Errors
 * `ONESIDED_ERROR_ARGUMENT` on both sides when a message exceeds its receiver's room, with
 * it not written (the call's other messages are delivered; the receive buffers' contents
 * are then unspecified); on this PE for a PE that is not a partner, more than 2 messages
 * between one pair, rooms that exceed the inbox, messages to itself that do not pair up or
 * do not fit, buffers that overlap, null buffers with bytes, an unknown flag, or receives
 * other than the ones a `ONESIDED_CALL_REPEATS` call announced;
 * `ONESIDED_ERROR_TIMEOUT` when a partner does not take part in time.
 *
 * # Safety
 * `sends` points to `n_sends` messages (or is null with none), each `data` to `bytes`
 * readable bytes; `receives` to `n_receives` (or null with none), each `data` to `room`
 * writable bytes; `received` is null or points to writable memory for `n_receives` values.
 */
onesided_status onesided_exchange_call(onesided_exchange exchange,
                                       const onesided_send *sends,
                                       size_t n_sends,
                                       const onesided_receive *receives,
                                       size_t n_receives,
                                       uint32_t flags,
                                       size_t *received);

/**
 * Frees an exchange and sets `*exchange` to `{0}`.
 *
 * # Collective
 * Every PE frees it, in the same order as its other frees.
 *
 * # Safety
 * `exchange` points to a handle.
 */
onesided_status onesided_exchange_free(onesided_exchange *exchange);

/**
 * Fills `options` with the defaults.
 *
 * # Safety
 * `options` points to writable memory for one `onesided_halo_options`.
 */
onesided_status onesided_halo_options_default(onesided_halo_options *options);

/**
 * Builds the halo exchange from the whole system: `n_atoms` positions in global order (the
 * same on every PE), each PE keeping the atoms of its domain. `box_vectors` are the box's
 * three vectors (rows, nm; a rectangular box has only the diagonal), `range` the
 * interaction range in nm (the cutoff plus the Verlet buffer); `options` null for the
 * defaults.
 *
 * # Collective
 * Every PE calls it with the same system and options.
 *
 * # Errors
 * On every PE: `ONESIDED_ERROR_ARGUMENT` for a bad box, grid, option, or a position that is
 * not finite; `ONESIDED_ERROR_COLLECTIVE` when the PEs pass different systems or options.
 *
 * # Safety
 * `box_vectors` points to 9 doubles; `positions` to `n_atoms` triples of the options'
 * precision; `options` is null or points to options; `out` to writable memory for a handle.
 */
onesided_status onesided_halo_from_global(onesided_runtime rt,
                                          const double *box_vectors,
                                          double range,
                                          const void *positions,
                                          size_t n_atoms,
                                          const onesided_halo_options *options,
                                          onesided_halo *out);

/**
 * Builds the halo exchange from each PE's own `n_home` home atoms (positions and global
 * indices, in the host's order, kept until the first repartition); every atom must lie in
 * its PE's domain. Box, range and options as for `onesided_halo_from_global`.
 *
 * # Collective
 * Every PE calls it with the same box, range and options.
 *
 * # Safety
 * As `onesided_halo_from_global`; `globals` points to `n_home` indices.
 */
onesided_status onesided_halo_from_home(onesided_runtime rt,
                                        const double *box_vectors,
                                        double range,
                                        const void *positions,
                                        const uint32_t *globals,
                                        size_t n_home,
                                        const onesided_halo_options *options,
                                        onesided_halo *out);

/**
 * Frees a halo exchange (a step under way is dropped: no forces go back) and sets `*halo`
 * to `{0}`.
 *
 * # Collective
 * Every PE frees it, in the same order as its other frees.
 *
 * # Safety
 * `halo` points to a handle.
 */
onesided_status onesided_halo_free(onesided_halo *halo);

/**
 * Repartitions the atoms over the domains (and, with load balancing, moves the boundaries):
 * atoms that left this domain go to their new PE with their entries in `fields` (the host's
 * per-atom state in home order, `n_fields` arrays), which then hold the new home atoms'.
 * The new home count is `onesided_halo_home_atoms`'s. When a field has too little room for the
 * new home atoms, the call fails on this PE with the room needed and keeps the new state:
 * grow the fields and call `onesided_halo_take_fields`.
 *
 * # Collective
 * Every PE calls it at the same step, with the same number of fields and entry sizes.
 *
 * # Safety
 * `fields` points to `n_fields` fields, each `data` to `capacity` entries `stride` apart.
 */
onesided_status onesided_halo_repartition(onesided_halo halo,
                                          onesided_atom_field *fields,
                                          size_t n_fields);

/**
 * Copies the new state of the last repartition into `fields` (after a repartition that
 * found too little room in them).
 *
 * # Safety
 * As `onesided_halo_repartition`.
 */
onesided_status onesided_halo_take_fields(onesided_halo halo,
                                          onesided_atom_field *fields,
                                          size_t n_fields);

/**
 * Gives every local atom (home and halo, in local order) the value of its home atom on its
 * home PE: `values` holds `bytes_per_atom` bytes per home atom, `local` gets them for
 * `onesided_halo_local.stored` atoms (room for `capacity` atoms). For per-atom parameters a
 * kernel needs on halo atoms (charges, types).
 *
 * # Collective
 * Pairwise with the neighbours; every PE calls it with the same `bytes_per_atom`, outside a
 * step.
 *
 * # Safety
 * `values` points to home-count entries, `local` to `capacity` writable ones.
 */
onesided_status onesided_halo_spread(onesided_halo halo,
                                     const void *values,
                                     size_t bytes_per_atom,
                                     void *local,
                                     size_t capacity);

/**
 * Whether the domain computes the pair of local atoms with zone bytes `a` and `b`
 * (GROMACS's eighth-shell rule): 1 or 0.
 */
int32_t onesided_halo_owns(uint8_t a,
                           uint8_t b);

/**
 * Sends the home coordinates out and receives the halo's: the step's local view through
 * `local`, valid until `onesided_halo_move_f`.
 *
 * # Collective
 * Pairwise with the neighbours; every PE calls it each step.
 *
 * # Safety
 * `local` points to writable memory for one `onesided_halo_local`.
 */
onesided_status onesided_halo_move_x(onesided_halo halo,
                                     onesided_halo_local *local);

/**
 * Sends the halo atoms' forces back and adds those this PE receives to its home atoms'
 * (under `ONESIDED_IMAGES_HALO` the images' too); the shift forces (the force on halo
 * images shifted by box vector d is `shift_forces[3 d .. 3 d + 3]`, for the virial) through
 * `shift_forces` (9 doubles, or null). Ends the step.
 *
 * # Collective
 * Pairwise with the neighbours.
 *
 * # Safety
 * `shift_forces` is null or points to 9 writable doubles.
 */
onesided_status onesided_halo_move_f(onesided_halo halo,
                                     double *shift_forces);

/**
 * Starts the step's coordinates: sends those that need no halo atom and returns at once
 * with the home atoms' view through `home` (`stored` = `home` home atoms, their zone bytes,
 * no images), on which the kernel computes the home pairs (every one this domain's) while
 * the halo travels; across nodes it calls `onesided_progress` between chunks of pairs.
 * `onesided_halo_finish_x` ends it. The same bits as `onesided_halo_move_x` when the kernel
 * sums in the same order.
 *
 * # Collective
 * Pairwise with the neighbours; every PE calls it (or `move_x`) each step.
 *
 * # Safety
 * `home` points to writable memory for one `onesided_halo_local`.
 */
onesided_status onesided_halo_start_x(onesided_halo halo,
                                      onesided_halo_local *home);

/**
 * Receives the halo the step's `onesided_halo_start_x` started, runs the pulses that
 * forward halo atoms, and gives the step's local view through `local`, as
 * `onesided_halo_move_x` does (the home forces hold what the kernel wrote in the home view).
 *
 * # Collective
 * Pairwise with the neighbours.
 *
 * # Safety
 * `local` points to writable memory for one `onesided_halo_local`.
 */
onesided_status onesided_halo_finish_x(onesided_halo halo,
                                       onesided_halo_local *local);

/**
 * Starts sending the halo atoms' forces back and returns at once with the home atoms
 * through `settled`, naming those in no neighbour's halo (their forces are final): the host
 * integrates them while the rest arrive; `onesided_halo_finish_f` adds the returned forces
 * (the others are `onesided_halo_home.returning`).
 *
 * # Collective
 * Pairwise with the neighbours.
 *
 * # Safety
 * `settled` points to writable memory for one `onesided_halo_settled`.
 */
onesided_status onesided_halo_start_f(onesided_halo halo,
                                      onesided_halo_settled *settled);

/**
 * Adds the forces returned to the home atoms and gives the shift forces through
 * `shift_forces` (9 doubles, or null), as `onesided_halo_move_f` does. Ends the step.
 *
 * # Collective
 * Pairwise with the neighbours.
 *
 * # Safety
 * `shift_forces` is null or points to 9 writable doubles.
 */
onesided_status onesided_halo_finish_f(onesided_halo halo,
                                       double *shift_forces);

/**
 * The home atoms through `home`: valid until the next repartition or free.
 *
 * # Safety
 * `home` points to writable memory for one `onesided_halo_home`.
 */
onesided_status onesided_halo_home_atoms(onesided_halo halo,
                                         onesided_halo_home *home);

/**
 * Allocates `bytes` bytes of symmetric memory named `name` (in messages), zeroed, on every
 * PE, aligned to 64 bytes.
 *
 * # Collective
 * Every PE calls it with the same `bytes`, in the same order as its other allocations.
 *
 * # Errors
 * `ONESIDED_ERROR_HEAP` on every PE when the PEs ask for different sizes or the heap is too
 * small (the message names the setting to raise).
 *
 * # Safety
 * `name` is a NUL-terminated string; `out` points to writable memory for one handle.
 */
onesided_status onesided_symmetric_alloc(onesided_runtime rt,
                                         const char *name,
                                         size_t bytes,
                                         onesided_symmetric *out);

/**
 * Frees symmetric memory and sets `*array` to `{0}`.
 *
 * # Collective
 * Every PE frees it, in the same order as its other frees.
 *
 * # Safety
 * `array` points to a handle.
 */
onesided_status onesided_symmetric_free(onesided_symmetric *array);

/**
 * This PE's copy of the array: its address (valid until the array is freed) and size in
 * bytes. Other PEs may write into it at any time by puts: read a region only after the
 * signal or barrier that says its put has landed, and through `volatile` or after a compiler
 * barrier where the program polls it.
 *
 * # Safety
 * `data` and `bytes` point to writable memory for one value each.
 */
onesided_status onesided_symmetric_local(onesided_symmetric array,
                                         void **data,
                                         size_t *bytes);

/**
 * Copies `bytes` bytes from `src` into PE `pe`'s copy of `array` at byte `offset`. When it
 * returns, `src` may be reused; the data is at the target after `onesided_quiet`, a
 * barrier, or a signal set after it (`onesided_put_signal`).
 *
 * # Errors
 * `ONESIDED_ERROR_ARGUMENT` for a PE out of range or a region past the array's end.
 *
 * # Safety
 * `src` points to `bytes` readable bytes.
 */
onesided_status onesided_put(onesided_symmetric array,
                             int32_t pe,
                             size_t offset,
                             const void *src,
                             size_t bytes);

/**
 * Copies `bytes` bytes of PE `pe`'s copy of `array` from byte `offset` into `dst`; complete
 * when it returns.
 *
 * # Errors
 * `ONESIDED_ERROR_ARGUMENT` for a PE out of range or a region past the array's end.
 *
 * # Safety
 * `dst` points to `bytes` writable bytes.
 */
onesided_status onesided_get(onesided_symmetric array,
                             int32_t pe,
                             size_t offset,
                             void *dst,
                             size_t bytes);

/**
 * Puts `bytes` bytes from `src` into PE `pe`'s copy of `array` at byte `offset`, then sets
 * PE `pe`'s signal `index` of `signals` to `value`: when the target sees the signal, the
 * data is there. `src` may be reused when it returns.
 *
 * # Errors
 * `ONESIDED_ERROR_ARGUMENT` for a PE, region or signal index out of range.
 *
 * # Safety
 * `src` points to `bytes` readable bytes.
 */
onesided_status onesided_put_signal(onesided_symmetric array,
                                    int32_t pe,
                                    size_t offset,
                                    const void *src,
                                    size_t bytes,
                                    onesided_signals signals,
                                    size_t index,
                                    uint64_t value);

/**
 * Allocates `count` signals named `name`, all 0, on every PE.
 *
 * # Collective
 * Every PE calls it with the same `count`, in the same order as its other allocations.
 *
 * # Safety
 * `name` is a NUL-terminated string; `out` points to writable memory for one handle.
 */
onesided_status onesided_signals_alloc(onesided_runtime rt,
                                       const char *name,
                                       size_t count,
                                       onesided_signals *out);

/**
 * Frees signals and sets `*signals` to `{0}`.
 *
 * # Collective
 * Every PE frees it, in the same order as its other frees.
 *
 * # Safety
 * `signals` points to a handle.
 */
onesided_status onesided_signals_free(onesided_signals *signals);

/**
 * Waits until this PE's signal `index` is at least `value`; its value then, through `seen`
 * (which may be null).
 *
 * # Errors
 * `ONESIDED_ERROR_TIMEOUT` past `ONESIDED_WAIT_TIMEOUT` (the message says which signal
 * waited for what): a PE that did not take part; end the job with `onesided_abort`.
 *
 * # Safety
 * `seen` is null or points to writable memory for one value.
 */
onesided_status onesided_signal_wait_ge(onesided_signals signals,
                                        size_t index,
                                        uint64_t value,
                                        uint64_t *seen);

/**
 * This PE's signal `index` now, through `value`.
 *
 * # Safety
 * `value` points to writable memory for one value.
 */
onesided_status onesided_signal_value(onesided_signals signals,
                                      size_t index,
                                      uint64_t *value);

/**
 * Adds `delta` to PE `pe`'s signal `index`, atomically.
 */
onesided_status onesided_signal_add(onesided_signals signals,
                                    int32_t pe,
                                    size_t index,
                                    uint64_t delta);

/**
 * As `onesided_exchange_call`, with the host packing and unpacking the messages itself:
 * `pack(context, s, data, bytes)` writes send `s` at `data` (`sends[s].bytes` bytes; on the
 * one-sided path to a PE of this node `data` is the receiver's inbox), and
 * `unpack(context, r, data, bytes)` reads receive `r` where it landed, for every receive in
 * the order of `receives`, after every message of the call has arrived. The `k`-th
 * message to a PE meets the `k`-th that PE receives from this one; messages to this PE itself
 * are packed into a buffer of the library's and unpacked from it, in the same pairing.
 * `flags` is 0 or `ONESIDED_CALL_REPEATS` (announced after the last unpack). `context` is
 * passed through; `received` (may be null) gets the bytes of each receive.
 *
 * # Collective
 * Pairwise, as `onesided_exchange_call`, with which it may alternate on one exchange.
 *
 * # Errors
 * As `onesided_exchange_call`, and `ONESIDED_ERROR_ARGUMENT` for a null `pack` with sends
 * or a null `unpack` with receives. A message its receiver has no room for is not unpacked.
 *
 * # Safety
 * `sends` points to `n_sends` messages and `receives` to `n_receives` (either may be null
 * with none); `pack` writes exactly the bytes it is given and `unpack` reads no more; both
 * return normally (no `longjmp`) and call nothing of the library's; `received` is null or
 * points to writable memory for `n_receives` values.
 */
onesided_status onesided_exchange_call_packed(onesided_exchange exchange,
                                              const onesided_message *sends,
                                              size_t n_sends,
                                              onesided_pack_fn pack,
                                              const onesided_message *receives,
                                              size_t n_receives,
                                              onesided_unpack_fn unpack,
                                              void *context,
                                              uint32_t flags,
                                              size_t *received);

/**
 * Fills `options` with the defaults.
 *
 * # Safety
 * `options` points to writable memory for one `onesided_pme_options`.
 */
onesided_status onesided_pme_options_default(onesided_pme_options *options);

/**
 * The Ewald coefficient (1/nm) for a real-space `cutoff` (nm) and GROMACS's `ewald-rtol`,
 * through `beta`.
 *
 * # Safety
 * `beta` points to writable memory for one double.
 */
onesided_status onesided_ewald_coefficient(double cutoff,
                                           double rtol,
                                           double *beta);

/**
 * Builds the PME over `box_vectors` (three vectors, rows, nm) for this PE's `n_home` home
 * atoms; `options` null for the defaults.
 *
 * # Collective
 * Every PE calls it with the same box and options.
 *
 * # Errors
 * On every PE: `ONESIDED_ERROR_ARGUMENT` for a box, spacing, sizes, order, beta or PME
 * ranks that cannot serve; `ONESIDED_ERROR_COLLECTIVE` when the PEs pass different ones.
 *
 * # Safety
 * `box_vectors` points to 9 doubles; `home` to `n_home` particles (or is null with none);
 * `options` is null or points to options (and its `pme_pes` to `n_pme_pes` values); `out`
 * to writable memory for a handle.
 */
onesided_status onesided_pme_new(onesided_runtime rt,
                                 const double *box_vectors,
                                 const onesided_particle *home,
                                 size_t n_home,
                                 const onesided_pme_options *options,
                                 onesided_pme *out);

/**
 * One step: sends this PE's `n_home` home atoms to their PME ranks, runs the mesh there,
 * and writes the reciprocal force on each home atom into `forces` (`n_home` triples, home
 * order, kJ mol⁻¹ nm⁻¹) and the step's energy and virial into `energy` (may be null). The
 * home atoms are those the plan was made for, moved by less than its margin
 * (`onesided_pme_plan` after a repartition).
 *
 * # Collective
 * Every PE calls it each step.
 *
 * # Errors
 * On every PE: an atom that moved too far for the plan, or home atoms other than the
 * plan's (`ONESIDED_ERROR_ARGUMENT`; call `onesided_pme_plan`).
 *
 * # Safety
 * `home` points to `n_home` particles; `forces` to `n_home` writable float triples;
 * `energy` is null or points to writable memory for one `onesided_pme_energy`.
 */
onesided_status onesided_pme_step(onesided_pme pme,
                                  const onesided_particle *home,
                                  size_t n_home,
                                  float *forces,
                                  onesided_pme_energy *energy);

/**
 * Rebuilds the redistribution's plan for this PE's home atoms now (after a repartition of
 * the host's domains, or every few steps as the atoms drift).
 *
 * # Collective
 * Every PE calls it at the same step.
 *
 * # Safety
 * `home` points to `n_home` particles (or is null with none).
 */
onesided_status onesided_pme_plan(onesided_pme pme,
                                  const onesided_particle *home,
                                  size_t n_home);

/**
 * Frees the PME and sets `*pme` to `{0}`.
 *
 * # Collective
 * Every PE frees it, in the same order as its other frees.
 *
 * # Safety
 * `pme` points to a handle.
 */
onesided_status onesided_pme_free(onesided_pme *pme);

/**
 * Starts MPI and OpenSHMEM, both with `MPI_THREAD_MULTIPLE`, for a program that has not
 * started MPI: the runtime finalises both when freed.
 *
 * # Collective
 * Every process of the job calls it.
 *
 * # Errors
 * `ONESIDED_ERROR_INIT` when MPI is initialised already (use `onesided_attach`), when the
 * libraries lack thread support, or the launch, settings or environment are wrong (the
 * message says which and what to do).
 *
 * # Safety
 * `out` points to writable memory for one `onesided_runtime`.
 */
onesided_status onesided_init(onesided_runtime *out);

/**
 * Joins a program that initialised MPI itself with `MPI_THREAD_MULTIPLE`, as MD codes do
 * before anything else: starts OpenSHMEM on its ranks and leaves MPI to it. Free the runtime
 * before `MPI_Finalize`; the program finalises MPI as it always does (under Open MPI,
 * OpenSHMEM ends inside that `MPI_Finalize`).
 *
 * `comm` points to the program's `MPI_Comm` (of the MPI this library was built with), or is
 * null for `MPI_COMM_WORLD`. OpenSHMEM's PEs are the world's ranks, so the communicator
 * must span the world (`MPI_COMM_WORLD` or a duplicate of it): a sub-communicator is
 * refused.
 *
 * # Collective
 * Every rank of the program's `MPI_COMM_WORLD` calls it.
 *
 * # Errors
 * `ONESIDED_ERROR_INIT` when MPI is not initialised, was initialised with less than
 * `MPI_THREAD_MULTIPLE` (call `MPI_Init_thread` with it), or as for `onesided_init`;
 * `ONESIDED_ERROR_ARGUMENT` for a communicator other than the world.
 *
 * # Safety
 * `out` points to writable memory for one `onesided_runtime`; `comm` is null or points to
 * a valid `MPI_Comm`.
 */
onesided_status onesided_attach(const void *comm,
                                onesided_runtime *out);

/**
 * Ends the runtime: frees every object still alive that was made from it (the last made
 * first), ends OpenSHMEM, and MPI when `onesided_init` started it; sets `*rt` to `{0}`.
 * A host that attached finalises MPI itself afterwards.
 *
 * # Collective
 * Every PE calls it.
 *
 * # Errors
 * `ONESIDED_ERROR_HANDLE` for a runtime already ended or never started.
 *
 * # Safety
 * `rt` points to a `onesided_runtime`.
 */
onesided_status onesided_runtime_free(onesided_runtime *rt);

/**
 * This PE's number, `0 .. n_pes - 1`, through `pe`.
 *
 * # Safety
 * `pe` points to writable memory for one `int`.
 */
onesided_status onesided_my_pe(onesided_runtime rt,
                               int32_t *pe);

/**
 * The number of PEs in the job, through `n`.
 *
 * # Safety
 * `n` points to writable memory for one `int`.
 */
onesided_status onesided_n_pes(onesided_runtime rt,
                               int32_t *n);

/**
 * Waits until every PE has called it, with every put issued before it complete.
 *
 * # Collective
 * Every PE calls it.
 */
onesided_status onesided_barrier(onesided_runtime rt);

/**
 * Lets OpenSHMEM and MPI move what is in flight, without waiting: a force kernel calls it
 * between chunks of its pairs while a split step's exchange is in flight
 * (`onesided_halo_start_x`, `onesided_halo_start_f`), so that across nodes, where the
 * transports move a message only while its PEs call into them, the data travels during the
 * kernel. About a microsecond.
 */
onesided_status onesided_progress(onesided_runtime rt);

/**
 * Waits until every put this PE issued is complete at its target.
 */
onesided_status onesided_quiet(onesided_runtime rt);

/**
 * Ends the whole job with status `code`, from this PE alone: for an error the other PEs do
 * not see (`onesided_last_error_every_pe`
 * returns 0), which would leave them waiting. Prints `message` (when not null) on stderr
 * first, with the PE. Never returns.
 *
 * # Safety
 * `message` is null or a NUL-terminated string.
 */
void onesided_abort(onesided_runtime rt,
                    int32_t code,
                    const char *message) ONESIDED_NORETURN;

/**
 * The library's version, `"0.1.0"`: a static string.
 */
const char *onesided_version(void);

/**
 * The message of the last error on the calling thread: which PE, what went wrong, what to
 * do. An empty string when no call on this thread has failed. The text stays valid until
 * the next failing call on this thread.
 */
const char *onesided_last_error(void);

/**
 * Whether every PE returned the last error on the calling thread from the same collective
 * call (1), so that the PEs can end normally together (free the runtime, finalise MPI, exit
 * with a failure status), or possibly this PE alone (0), which leaves the others waiting:
 * end the job with `onesided_abort`.
 */
int32_t onesided_last_error_every_pe(void);

/**
 * The name of a status, as in this header (`"ONESIDED_ERROR_HEAP"`), for messages; a
 * static string, never null (`"not a onesided_status"` for a value that is none). It takes
 * an `int`, so that any value a C program holds is safe to pass.
 */
const char *onesided_status_name(int32_t status);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* ONESIDED_H */
